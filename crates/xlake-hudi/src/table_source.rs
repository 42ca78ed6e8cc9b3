//! [`HudiSource`] as the engine sees it: the [`TableSource`] contract and the [`KIND`]
//! the engine's registry lists.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;
use xlake_model::{CommitListing, DeclaredTable, SourceFormat};
use xlake_source::{
    CommitState, DetectFuture, ErrorKind, MirrorState, OpenFuture, RecordedChoice, Replay,
    SourceError, SourceHealth, SourceKind, SourceOptions, TableSource,
};
use xlake_storage::{Entry, TableStore};

use crate::error::HudiError;
use crate::file_group::parse_base_file_path;
use crate::properties::{KeyGenerator, TableType};
use crate::source::{READ_OPTIMIZED, VIEW_NOTE};
use crate::{HudiSource, FORMAT};

/// The Hudi format, for the engine's registry.
pub const KIND: SourceKind = SourceKind {
    name: "hudi",
    title: "Hudi",
    format: FORMAT,
    marker: ".hoodie/hoodie.properties",
    detectable: true,
    detect,
    open,
    open_after: Some(open_after),
    open_at_tip: Some(open_at_tip),
    late_completions: true,
    recorded: &[RecordedChoice {
        note: VIEW_NOTE,
        value: READ_OPTIMIZED,
        choose: |options| options.mor_read_optimized = true,
    }],
};

fn detect(store: TableStore) -> DetectFuture {
    Box::pin(async move { Ok(store.size(".hoodie/hoodie.properties").await?.is_some()) })
}

fn open(store: TableStore, options: SourceOptions) -> OpenFuture {
    Box::pin(async move {
        // No look before the read: a missing `hoodie.properties` is not a Hudi table.
        let source = HudiSource::open_if_there(store, options).await?;
        Ok(source.map(|s| Box::new(s) as Box<dyn TableSource>))
    })
}

/// The timeline from the instant time the mirror's saved state names, else whole (see
/// [`HudiSource::open_after`]).
fn open_after(store: TableStore, options: SourceOptions, state: &MirrorState) -> OpenFuture {
    let state = MirrorState {
        commits: Default::default(),
        first: None,
        newest: state.newest.clone(),
        live_files: None,
        source_state: state.source_state.clone(),
        deletes: None,
    };
    Box::pin(async move {
        let source = match lists_from_offset(&store) {
            true => HudiSource::open_after(store, options, &state).await?,
            false => HudiSource::open_if_there(store, options).await?,
        };
        Ok(source.map(|s| Box::new(s) as Box<dyn TableSource>))
    })
}

/// The timeline from the instant time a settled sync's tip names, else whole (see
/// [`HudiSource::open_at_tip`]); whole where the store does not list from an offset, as
/// [`open_after`].
fn open_at_tip(store: TableStore, options: SourceOptions, tip: &str) -> OpenFuture {
    let tip = tip.to_string();
    Box::pin(async move {
        let source = match lists_from_offset(&store) {
            true => HudiSource::open_at_tip(store, options, &tip).await?,
            false => HudiSource::open_if_there(store, options).await?,
        };
        Ok(source.map(|s| Box::new(s) as Box<dyn TableSource>))
    })
}

/// Whether the store lists a folder from an offset, in order, on its side (S3 but its
/// directory buckets, `--x-s3`, which do not list in order; GCS): only there does
/// listing the timeline from the saved instant time save requests, so only there is it
/// taken, with its risk (docs/hudi.md). A local folder is read whole anyway, and Azure
/// has no listing from an offset in object_store (it lists whole and filters).
fn lists_from_offset(store: &TableStore) -> bool {
    let location = store.location();
    let Some((scheme, rest)) = location.split_once("://") else {
        return false;
    };
    let bucket = rest.split('/').next().unwrap_or_default();
    matches!(scheme, "s3" | "s3a" | "gs") && !bucket.ends_with("--x-s3")
}

impl From<HudiError> for SourceError {
    fn from(e: HudiError) -> Self {
        let kind = match &e {
            HudiError::HistoryLost(_) => ErrorKind::HistoryLost,
            HudiError::Storage(_) => ErrorKind::Storage,
            HudiError::Unsupported { .. } => ErrorKind::Unsupported,
            HudiError::Properties { .. } => ErrorKind::Corrupt {
                commit: None,
                file: Some(".hoodie/hoodie.properties".into()),
            },
            HudiError::Instant { instant, file, .. } => ErrorKind::Corrupt {
                commit: Some(instant.clone()),
                file: Some(file.clone()),
            },
        };
        SourceError::new(kind, e)
    }
}

/// Files and bytes of one kind of metadata.
#[derive(Debug, Clone, Default, Serialize)]
struct Files {
    files: usize,
    bytes: u64,
}

impl Files {
    fn of<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Self {
        entries.into_iter().fold(Self::default(), |f, e| Self {
            files: f.files + 1,
            bytes: f.bytes + e.size,
        })
    }
}

/// What `inspect` shows of a Hudi table.
#[derive(Debug, Clone, Default, Serialize)]
struct HudiHealth {
    /// Table version and type.
    table: String,
    /// `.hoodie/` without the metadata table.
    timeline: Files,
    completed_instants: usize,
    pending_instants: usize,
    archived_files: usize,
    /// File groups (base files grouped by file id).
    file_groups: usize,
    /// Base files on storage (all slices, cleaned ones excluded).
    base_files: usize,
    metadata_table: bool,
}

#[async_trait::async_trait]
impl TableSource for HudiSource {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    fn commit_path_mirror(&self) -> Option<String> {
        let format = self.config().table_format.as_ref()?;
        Some(format!("hoodie.table.format={format}"))
    }

    /// With the instants the mirror's saved state names pending that have completed since
    /// and are not mirrored ([`CommitListing::completed_late`]), and those gone from the
    /// timeline since, archived ([`CommitListing::gone_unmirrored`]).
    fn listing(&self, state: &MirrorState) -> Result<CommitListing, SourceError> {
        let mut listing = HudiSource::listing_after(self, &state.commits);
        if let Some(floor) = self.saved_floor(state) {
            let late = listing.commits.iter().filter(|c| {
                !state.commits.contains(&c.id) && floor.was_pending(&c.id) == Some(true)
            });
            listing.completed_late = late.map(|c| c.id.clone()).collect();
            listing.gone_unmirrored = self.gone_unmirrored(&floor, &state.commits);
        }
        Ok(listing)
    }

    /// The floor the next sync lists from and every listed instant requested since, in
    /// listing order ([`HudiSource::tip`]): an instant that completes late (table version
    /// 6 orders by requested time) lands among older ones, so the newest alone would not
    /// tell it.
    fn tip(&self) -> Option<String> {
        Some(HudiSource::tip(self))
    }

    fn commit_state(&self, id: &str) -> CommitState {
        let timeline = self.timeline();
        if let Some(i) = timeline.pending.iter().find(|i| i.requested() == id) {
            return CommitState::Pending(format!("{:?}", i.state).to_uppercase());
        }
        if timeline.completed.iter().any(|i| i.requested() == id) {
            CommitState::Completed
        } else {
            CommitState::Unknown
        }
    }

    /// The oldest pending instant that completes as one that gets a snapshot (a write, a
    /// rollback, a restore, or a compaction or clustering, which complete as writes), on
    /// table version 6 only: versions 8 and 9 order by completion time, so an instant
    /// completed late comes after every mirrored one.
    fn oldest_pending(&self) -> Option<String> {
        if self.config().version >= 8 {
            return None;
        }
        let pending = self.timeline().pending.iter();
        pending
            .filter(|i| crate::instant::completes_with_snapshot(i.action()))
            .map(|i| i.requested())
            .min()
            .map(str::to_string)
    }

    async fn undone_commits(&self) -> Result<BTreeMap<String, String>, SourceError> {
        Ok(HudiSource::undone_commits(self).await?)
    }

    /// Instant times sort as text.
    fn order(&self, a: &str, b: &str) -> Ordering {
        a.cmp(b)
    }

    async fn health(&self) -> Result<SourceHealth, SourceError> {
        let config = self.config();
        let store = self.store();
        let all = store.list_recursive("").await?;
        let timeline = Files::of(all.iter().filter(|e| {
            e.path.starts_with(".hoodie/") && !e.path.starts_with(".hoodie/metadata/")
        }));
        let mut groups: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for e in all
            .iter()
            .filter(|e| !e.path.starts_with('.') && !e.path.starts_with("metadata/"))
        {
            if let Some((partition, file_id, _)) = parse_base_file_path(&e.path) {
                *groups.entry((partition, file_id)).or_default() += 1;
            }
        }
        let archive = format!("{}/", config.archive_dir);
        let mor = config.table_type == TableType::MergeOnRead;
        let h = HudiHealth {
            table: format!(
                "version {}, {}",
                config.version,
                if mor {
                    "merge-on-read"
                } else {
                    "copy-on-write"
                }
            ),
            timeline,
            completed_instants: self.timeline().completed.len(),
            pending_instants: self.timeline().pending.len(),
            archived_files: all.iter().filter(|e| e.path.starts_with(&archive)).count(),
            file_groups: groups.len(),
            base_files: groups.values().sum(),
            metadata_table: all.iter().any(|e| e.path.starts_with(".hoodie/metadata/")),
        };
        let mut degraded = Vec::new();
        if mor {
            degraded
                .push("merge-on-read mirrored as its read-optimized view (base files only)".into());
        }
        if config.key_generator == KeyGenerator::Timestamp {
            degraded
                .push("timestamp-based key generator: the Iceberg table is unpartitioned".into());
        }
        Ok(SourceHealth {
            line: format!(
                "{}; .hoodie {} files, {} bytes; {} completed, {} pending, {} archived files; {} file groups, {} base files; metadata table {}",
                h.table,
                h.timeline.files,
                h.timeline.bytes,
                h.completed_instants,
                h.pending_instants,
                h.archived_files,
                h.file_groups,
                h.base_files,
                if h.metadata_table { "on" } else { "off" }
            ),
            json: serde_json::to_value(&h).unwrap_or_default(),
            degraded,
        })
    }

    async fn declared_table(&self) -> Result<Option<DeclaredTable>, SourceError> {
        Ok(HudiSource::declared_table(self)?)
    }

    async fn replay<'a>(&'a self, mirrored: &MirrorState) -> Result<Replay<'a>, SourceError> {
        Ok(Box::new(self.replay_from(mirrored).await?))
    }

    async fn reads_saved_by_live_files(&self, mirrored: &MirrorState) -> usize {
        self.incremental_saving(mirrored).await
    }
}
