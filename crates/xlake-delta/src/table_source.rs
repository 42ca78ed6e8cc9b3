//! [`DeltaSource`] as the engine sees it: the [`TableSource`] contract and the [`KIND`]
//! the engine's registry lists.

use std::cmp::Ordering;

use serde::Serialize;
use xlake_model::{CommitListing, SourceFormat};
use xlake_source::{
    numeric_order, CommitState, DetectFuture, ErrorKind, MirrorState, OpenFuture, Replay,
    SourceError, SourceHealth, SourceKind, SourceOptions, TableSource, TargetTakes,
};
use xlake_storage::{Stamp, TableStore};

use crate::error::DeltaError;
use crate::log::LOG_DIR;
use crate::{DeltaSource, FORMAT};

/// The Delta format, for the engine's registry.
pub const KIND: SourceKind = SourceKind {
    name: "delta",
    title: "Delta",
    format: FORMAT,
    marker: "_delta_log/",
    detectable: true,
    detect,
    open,
    open_after: Some(open_after),
    open_at_tip: None,
    late_completions: false,
    recorded: &[],
};

/// A commit (`00000000000000000003.json`) or checkpoint file in `_delta_log/`.
fn detect(store: TableStore) -> DetectFuture {
    Box::pin(async move {
        // Two cheap lookups first: a listing of a long log (stat of every entry on a
        // local disk, pages of 1,000 on an object store) is what a commit costs most.
        for marker in ["00000000000000000000.json", "_last_checkpoint"] {
            if store.size(&format!("{LOG_DIR}/{marker}")).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(store.list_dir(LOG_DIR).await?.iter().any(|e| {
            let name = e.path.rsplit('/').next().unwrap_or(&e.path);
            name.starts_with(|c: char| c.is_ascii_digit())
                && (name.ends_with(".json") || name.contains(".checkpoint"))
        }))
    })
}

/// One listing of `_delta_log/` both detects the table and serves the source.
fn open(store: TableStore, options: SourceOptions) -> OpenFuture {
    Box::pin(async move {
        let delta = DeltaSource::open_with_times(store, options.commit_times).await?;
        if delta.log().commits.is_empty() && delta.log().checkpoints.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(delta) as Box<dyn TableSource>))
    })
}

/// The log from the newest mirrored version on (see [`DeltaSource::open_after`]).
fn open_after(store: TableStore, options: SourceOptions, state: &MirrorState) -> OpenFuture {
    let newest = state
        .commits
        .iter()
        .filter_map(|c| c.parse::<u64>().ok())
        .max();
    let mirrored: Vec<u64> = state
        .commits
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    Box::pin(async move {
        let delta = match newest {
            Some(v) => DeltaSource::open_after(store, options.commit_times, v, mirrored).await?,
            None => DeltaSource::open_with_times(store, options.commit_times).await?,
        };
        if delta.log().commits.is_empty() && delta.log().checkpoints.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(delta) as Box<dyn TableSource>))
    })
}

impl From<DeltaError> for SourceError {
    fn from(e: DeltaError) -> Self {
        let kind = match &e {
            DeltaError::HistoryLost(_) => ErrorKind::HistoryLost,
            DeltaError::Storage(_) => ErrorKind::Storage,
            DeltaError::Unsupported { .. } => ErrorKind::Unsupported,
            DeltaError::Log { version, file, .. } => ErrorKind::Corrupt {
                commit: Some(version.to_string()),
                file: Some(file.clone()),
            },
            DeltaError::Checkpoint { version, .. } => ErrorKind::Corrupt {
                commit: Some(version.to_string()),
                file: None,
            },
            DeltaError::Incomplete { .. } => ErrorKind::Corrupt {
                commit: None,
                file: None,
            },
        };
        SourceError::new(kind, e)
    }
}

/// What `inspect` shows of a Delta table.
#[derive(Debug, Clone, Default, Serialize)]
struct DeltaHealth {
    /// `_delta_log/`: files and bytes.
    log: Files,
    latest_version: Option<u64>,
    last_checkpoint: Option<u64>,
    /// JSON commits a reader replays after the newest checkpoint, or all of them when
    /// there is none (the Delta docs' alert: a long tail slows every reader).
    versions_since_checkpoint: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
struct Files {
    files: usize,
    bytes: u64,
}

#[async_trait::async_trait]
impl TableSource for DeltaSource {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    fn listing(&self, _: &MirrorState) -> Result<CommitListing, SourceError> {
        Ok(DeltaSource::listing(self)?)
    }

    async fn not_the_mirrored_table(
        &self,
        mirrored: &MirrorState,
    ) -> Result<Option<String>, SourceError> {
        Ok(DeltaSource::not_the_mirrored_table(self, mirrored).await?)
    }

    /// The newest version, of a commit file or a checkpoint: versions are written one
    /// after another, so a new commit is always a newer one. With its commit file's
    /// modification time and tag: a table written anew with as many versions as before
    /// has another tip, even within the second an object store's time is given in, and is
    /// not skipped as a no-op (its sync checks its id). None when the newest version has
    /// no commit file (a log that starts at a checkpoint of it): nothing there tells a
    /// table written anew with as many versions, so no pass is skipped (hostile review
    /// hr7: another table's log of that shape was skipped, "0 snapshots written", while
    /// its sync refused it by its id).
    fn tip(&self) -> Option<String> {
        let latest = self.log().latest()?;
        Some(match self.listed_stamp(latest) {
            Some(Stamp {
                modified_ms,
                e_tag: Some(tag),
            }) => format!("{latest} written {modified_ms} as {tag}"),
            Some(stamp) => format!("{latest} written {}", stamp.modified_ms),
            None if !self.log().commits.contains_key(&latest) => return None,
            None => latest.to_string(),
        })
    }

    /// Delta has no pending commits: a version exists once its commit file (or a
    /// checkpoint covering it) does.
    fn commit_state(&self, id: &str) -> CommitState {
        match self.lists(id) {
            true => CommitState::Completed,
            false => CommitState::Unknown,
        }
    }

    fn order(&self, a: &str, b: &str) -> Ordering {
        numeric_order(a, b)
    }

    async fn health(&self) -> Result<SourceHealth, SourceError> {
        let entries = self.store().list_dir(LOG_DIR).await?;
        let log = self.log();
        let latest = log.latest();
        let last_checkpoint = log.checkpoints.iter().next_back().copied();
        let h = DeltaHealth {
            log: Files {
                files: entries.len(),
                bytes: entries.iter().map(|e| e.size).sum(),
            },
            latest_version: latest,
            last_checkpoint,
            versions_since_checkpoint: latest.map(|l| match last_checkpoint {
                Some(c) => l.saturating_sub(c),
                None => log.commits.len() as u64,
            }),
        };
        let since = h.versions_since_checkpoint.unwrap_or(0);
        let checkpoint = match h.last_checkpoint {
            Some(c) => format!("last checkpoint {c}; {since} versions since it"),
            None => format!("no checkpoint: readers replay all {since} versions from JSON"),
        };
        Ok(SourceHealth {
            line: format!(
                "_delta_log {} files, {} bytes; latest version {}; {checkpoint}",
                h.log.files,
                h.log.bytes,
                h.latest_version.map_or("none".into(), |v| v.to_string()),
            ),
            json: serde_json::to_value(&h).unwrap_or_default(),
            degraded: Vec::new(),
        })
    }

    fn target_takes(&mut self, takes: TargetTakes) {
        self.decode_deletion_vectors(!takes.stored_deletion_vectors);
    }

    async fn replay<'a>(&'a self, mirrored: &MirrorState) -> Result<Replay<'a>, SourceError> {
        Ok(Box::new(self.replay_from(mirrored).await?))
    }

    /// From the newest checkpoint at or before version `from` (see
    /// [`DeltaSource::replay_covering`]); an id that is no version replays from the start.
    async fn replay_covering<'a>(
        &'a self,
        from: &str,
        mirrored: &MirrorState,
    ) -> Result<Replay<'a>, SourceError> {
        match from.parse::<u64>() {
            Ok(version) => Ok(Box::new(self.replay_covering(version).await?)),
            Err(_) => self.replay(mirrored).await,
        }
    }
}
