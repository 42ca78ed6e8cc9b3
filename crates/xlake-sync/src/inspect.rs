//! The health report: side by side, the metadata each format keeps for one table, and
//! anything mirrored in a degraded way.

use std::collections::BTreeMap;

use serde::Serialize;
use xlake_iceberg::layout::{is_written_by_xlake, metadata_file, METADATA_DIR};
use xlake_iceberg::orphans::orphan_files;
use xlake_iceberg::summary::degraded_notes;
use xlake_iceberg::IcebergError;
use xlake_iceberg::IcebergTable;
use xlake_storage::{Entry, TableStore};

use crate::check::{broken_promise, missing_commits};
use crate::{sources, InTable, SyncError, SyncOptions};

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
    /// Metadata files no retained version references (not counted while
    /// `relocated_from` is set: then nothing is an orphan).
    pub orphan_files: usize,
    /// The location(s) metadata versions in `metadata/` were written for, when not this
    /// table's: the folder was copied or moved (`xlake sync --rebuild` mirrors it afresh).
    pub relocated_from: Vec<String>,
    /// Files under `metadata/` whose names are not ones xlake writes (table-relative): the
    /// source keeps files in the mirror's folder (a partition or folder named `metadata`),
    /// which `sync` refuses and `cleanup` leaves alone. Listed also before a first sync.
    pub not_written_by_xlake: Vec<String>,
    /// Partition fields of the current spec (`transform(column)`), empty if unpartitioned.
    pub partitioning: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InspectReport {
    /// Table location.
    pub table: String,
    /// The source format (`HUDI`, `DELTA`).
    pub format: String,
    /// The source side in one line, for people.
    #[serde(skip)]
    pub source_line: String,
    /// The source side for machines, under the format's lower-case name (`"delta": {...}`).
    #[serde(flatten)]
    pub source: BTreeMap<String, serde_json::Value>,
    /// The Iceberg side.
    pub iceberg: IcebergHealth,
    /// What is mirrored in a degraded way (read-optimized view, unpartitioned fallback, and
    /// what the current snapshot's summary lists under `xlake.degraded`).
    pub degraded: Vec<String>,
    /// The source promises a snapshot per commit written in its commit path (Hudi's
    /// `hoodie.table.format`), but completed commits have none (as `check` reports it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_promise: Option<String>,
}

/// Inspect the table at `location`.
pub async fn inspect(location: &str, options: &SyncOptions) -> Result<InspectReport, SyncError> {
    let store = TableStore::open(location)?;
    let iceberg = IcebergTable::new(store.clone());
    // A copied or moved table is reported, not refused.
    let loaded = iceberg.load_as_found().await?;
    let options = crate::with_recorded_view(options, loaded.as_ref());
    let source = sources::open(&store, &options).await?;
    let health = source.health().await.in_table(&store)?;
    let format = source.format().as_str();
    let mut report = InspectReport {
        table: store.location().to_string(),
        format: format.to_string(),
        source_line: health.line,
        source: BTreeMap::from([(format.to_lowercase(), health.json)]),
        degraded: health.degraded,
        ..Default::default()
    };
    if source.commit_path_mirror().is_some() {
        let state = crate::mirror_state(loaded.as_ref());
        let listing = source.listing(&state).in_table(&store)?;
        let mirrored = state.commits.iter().map(String::as_str).collect();
        let (_, missing) = missing_commits(&listing, &mirrored);
        report.broken_promise = broken_promise(source.as_ref(), &missing);
    }
    let metadata = store.list_recursive(METADATA_DIR).await?;
    report.iceberg.not_written_by_xlake = metadata
        .iter()
        .filter(|e| !is_written_by_xlake(&e.path))
        .map(|e| e.path.clone())
        .collect();
    if let Some(loaded) = loaded {
        let at_home = iceberg.recorded_elsewhere(&loaded).is_none();
        // The orphan listing reads every version, and refuses at the first one written for
        // another location (the current one, or one a rebuild has yet to set aside).
        let (orphans, relocated_from) = match iceberg.recorded_elsewhere(&loaded) {
            Some(recorded) => (0, vec![recorded.to_string()]),
            None => match orphan_files(&store, i64::MAX).await {
                Ok(found) => (found.len(), Vec::new()),
                Err(IcebergError::Relocated { recorded, .. }) => (0, vec![recorded]),
                Err(e) => return Err(e.into()),
            },
        };
        let m = &loaded.metadata;
        if let Some(current) = m.current_snapshot() {
            for note in degraded_notes(&current.summary().additional_properties) {
                if !report.degraded.contains(&note) {
                    report.degraded.push(note);
                }
            }
        }
        let current_path = metadata_file(loaded.version);
        report.iceberg = IcebergHealth {
            metadata: files(&metadata),
            version: Some(loaded.version),
            current_metadata_bytes: metadata
                .iter()
                .find(|e| e.path == current_path)
                .map_or(0, |e| e.size),
            snapshots: m.snapshots().count(),
            manifests: if at_home {
                iceberg.current_manifests().await?
            } else {
                0
            },
            orphan_files: orphans,
            relocated_from,
            not_written_by_xlake: std::mem::take(&mut report.iceberg.not_written_by_xlake),
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
