//! The health report: side by side, the metadata each format keeps for one table, and
//! anything mirrored in a degraded way.

use std::collections::BTreeMap;

use serde::Serialize;
use xlake_hudi::properties::{KeyGenerator, TableType};
use xlake_iceberg::fidelity::{degraded_entries, DEGRADED};
use xlake_iceberg::orphans::orphan_files;
use xlake_iceberg::IcebergTable;
use xlake_storage::{Entry, TableStore};

use crate::{Source, SyncError, SyncOptions};

/// Files and bytes of one kind of metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Files {
    /// Number of files.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

fn files(entries: &[Entry]) -> Files {
    Files {
        files: entries.len(),
        bytes: entries.iter().map(|e| e.size).sum(),
    }
}

/// The Delta side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeltaHealth {
    /// `_delta_log/`.
    pub log: Files,
    /// Newest version.
    pub latest_version: Option<u64>,
    /// Newest checkpoint version.
    pub last_checkpoint: Option<u64>,
    /// Versions since it (the Delta docs' alert: a long tail slows every reader).
    pub versions_since_checkpoint: Option<u64>,
}

/// The Hudi side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HudiHealth {
    /// Table version and type.
    pub table: String,
    /// `.hoodie/` without the metadata table.
    pub timeline: Files,
    /// Completed instants on the active timeline.
    pub completed_instants: usize,
    /// Requested or inflight instants.
    pub pending_instants: usize,
    /// Files in the archive.
    pub archived_files: usize,
    /// File groups (base files grouped by file id) and base files on storage.
    pub file_groups: usize,
    /// Base files on storage (all slices, cleaned ones excluded).
    pub base_files: usize,
    /// Whether the metadata table (`.hoodie/metadata/`) exists.
    pub metadata_table: bool,
}

/// The Iceberg side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IcebergHealth {
    /// `metadata/`.
    pub metadata: Files,
    /// Current `vN`.
    pub version: Option<u64>,
    /// Bytes of the current `vN.metadata.json`.
    pub current_metadata_bytes: u64,
    /// Snapshots retained.
    pub snapshots: usize,
    /// Manifests of the current snapshot.
    pub manifests: usize,
    /// Metadata files no retained version references.
    pub orphan_files: usize,
    /// Partition fields of the current spec (`transform(column)`), empty if unpartitioned.
    pub partitioning: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InspectReport {
    /// Table location.
    pub table: String,
    /// The Delta side, if the table is Delta.
    pub delta: Option<DeltaHealth>,
    /// The Hudi side, if the table is Hudi.
    pub hudi: Option<HudiHealth>,
    /// The Iceberg side.
    pub iceberg: IcebergHealth,
    /// What is mirrored in a degraded way (read-optimized view, unpartitioned fallback, and
    /// the `xlake.degraded` entries of the current snapshot: columns some readers misread).
    pub degraded: Vec<String>,
}

/// Inspect the table at `location`.
pub async fn inspect(location: &str, options: &SyncOptions) -> Result<InspectReport, SyncError> {
    let store = TableStore::open(location)?;
    let (source, _) = Source::open(store.clone(), options).await?;
    let mut report = InspectReport {
        table: store.location().to_string(),
        ..Default::default()
    };
    match &source {
        Source::Delta(d) => {
            let log = d.log();
            let latest = log.latest();
            let last_checkpoint = log.checkpoints.iter().next_back().copied();
            report.delta = Some(DeltaHealth {
                log: files(&store.list_dir("_delta_log").await?),
                latest_version: latest,
                last_checkpoint,
                versions_since_checkpoint: latest.map(|l| l - last_checkpoint.unwrap_or(0)),
            });
        }
        Source::Hudi(h) => {
            let config = h.config();
            let all = store.list_recursive("").await?;
            let timeline: Vec<Entry> = all
                .iter()
                .filter(|e| {
                    e.path.starts_with(".hoodie/") && !e.path.starts_with(".hoodie/metadata/")
                })
                .cloned()
                .collect();
            let mut groups: BTreeMap<(String, String), usize> = BTreeMap::new();
            for e in all
                .iter()
                .filter(|e| !e.path.starts_with('.') && !e.path.starts_with("metadata/"))
            {
                let (partition, name) = e.path.rsplit_once('/').unwrap_or(("", e.path.as_str()));
                if let Some((file_id, _)) = xlake_hudi::file_group::parse_base_file_name(name) {
                    *groups
                        .entry((partition.to_string(), file_id.to_string()))
                        .or_default() += 1;
                }
            }
            report.hudi = Some(HudiHealth {
                table: format!(
                    "version {}, {}",
                    config.version,
                    if config.table_type == TableType::MergeOnRead {
                        "merge-on-read"
                    } else {
                        "copy-on-write"
                    }
                ),
                timeline: files(&timeline),
                completed_instants: h.timeline().completed.len(),
                pending_instants: h.timeline().pending.len(),
                archived_files: all
                    .iter()
                    .filter(|e| e.path.starts_with(&format!("{}/", config.archive_dir)))
                    .count(),
                file_groups: groups.len(),
                base_files: groups.values().sum(),
                metadata_table: all.iter().any(|e| e.path.starts_with(".hoodie/metadata/")),
            });
            if config.table_type == TableType::MergeOnRead {
                report.degraded.push(
                    "merge-on-read mirrored as its read-optimized view (base files only)".into(),
                );
            }
            if config.key_generator == KeyGenerator::Timestamp {
                report.degraded.push(
                    "timestamp-based key generator: the Iceberg table is unpartitioned".into(),
                );
            }
        }
    }
    let iceberg = IcebergTable::new(store.clone());
    if let Some(loaded) = iceberg.load().await? {
        let m = &loaded.metadata;
        // Columns of mirrored files some Iceberg readers misread (sticky: the current
        // snapshot carries every earlier snapshot's entries).
        if let Some(current) = m.current_snapshot() {
            report.degraded.extend(degraded_entries(
                current.summary().additional_properties.get(DEGRADED),
            ));
        }
        let metadata = store.list_recursive("metadata").await?;
        let current_path = format!("metadata/v{}.metadata.json", loaded.version);
        report.iceberg = IcebergHealth {
            metadata: files(&metadata),
            version: Some(loaded.version),
            current_metadata_bytes: metadata
                .iter()
                .find(|e| e.path == current_path)
                .map_or(0, |e| e.size),
            snapshots: m.snapshots().count(),
            manifests: iceberg.current_manifests().await?,
            orphan_files: orphan_files(&store, i64::MAX).await?.len(),
            partitioning: m
                .default_partition_spec()
                .fields()
                .iter()
                .map(|f| {
                    let column = m
                        .current_schema()
                        .name_by_field_id(f.source_id)
                        .unwrap_or("?");
                    format!("{}({column})", f.transform)
                })
                .collect(),
        };
    }
    Ok(report)
}
