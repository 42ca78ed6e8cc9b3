//! # xlake-sync: the engine
//!
//! Wires a source to the Iceberg target: finds the table's format in the [`sources`]
//! registry, asks the source (an [`xlake_source::TableSource`]) for
//! its change sets, asks the target which source commits it already mirrors (from the
//! snapshots' `XTABLE_METADATA`, the only sync state there is), and commits the rest, one
//! snapshot per source commit, in order.
//!
//! | item | what it does |
//! |---|---|
//! | [`sync`], [`sync_store`] | mirror every pending completed commit of one table |
//! | [`SyncOptions`] | operator choices (merge-on-read opt-in, Iceberg table properties) |
//! | [`Mirrored`] | one snapshot written, as reported while syncing |
//! | [`callback`] | the HTTP endpoint for Hudi's write-commit callback (in-commit mode) |
//! | [`check`](check::check) | the invariant checker: one snapshot per completed commit, in order |
//! | [`inspect`](inspect::inspect) | the health report: metadata each format keeps, degraded mirroring |
//! | [`job`] | the scheduled job over the tables of a config file |
//! | [`sources`] | the registry of source formats: the only module naming Hudi and Delta |
//! | [`SyncError`] | errors of the engine and of the crates it drives |
//!
//! A commit the target has no snapshot for is pending, unless it is older than the oldest
//! commit a snapshot records (those were mirrored, then expired). Pending commits are
//! written in source order; a writer that loses a race re-plans from the target's state.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod callback;
pub mod check;
pub mod inspect;
pub mod job;
pub mod sources;

pub use check::{check, check_with, CheckReport};

use std::collections::{BTreeSet, HashMap};

use xlake_iceberg::{Committed, IcebergError, IcebergTable, LoadedTable};
use xlake_model::{ChangeSet, Replay, SourceCommit};
use xlake_source::{CommitState, MirrorState, SourceError, SourceOptions, TableSource};
use xlake_storage::{StorageError, TableStore};

/// How often in a row a commit is re-planned after losing a race while no writer makes
/// progress.
const MAX_CONFLICT_RETRIES: usize = 5;

/// Snapshots published together in one metadata version during a backfill. Every
/// `vN.metadata.json` holds every snapshot, so one version per commit would make a
/// backfill's writes grow with the square of its length.
const BATCH_SIZE: usize = 100;

/// Errors of a sync; the Iceberg metadata is left at its last good version.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Storage access failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The Iceberg target failed.
    #[error(transparent)]
    Iceberg(#[from] IcebergError),
    /// The location holds no table of a format xlake reads.
    #[error("{table}: not a {formats} table (looked for {markers})")]
    NotATable {
        /// Table location.
        table: String,
        /// The formats tried (`Hudi or Delta`).
        formats: String,
        /// What marks a table of each (`.hoodie/hoodie.properties, _delta_log/`).
        markers: String,
    },
    /// The format asked for is not one xlake reads.
    #[error("unknown table format {format:?} (known: {known})")]
    UnknownFormat {
        /// The format asked for.
        format: String,
        /// The formats xlake reads.
        known: String,
    },
    /// In-commit mode: the named commit is not (or cannot be) mirrored.
    #[error("{table}: source commit {commit} is not mirrored: {reason}")]
    NotMirrored {
        /// Table location.
        table: String,
        /// The commit asked for.
        commit: String,
        /// Why.
        reason: String,
    },
}

/// Operator choices.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Options a source may honour (the merge-on-read view).
    pub source: SourceOptions,
    /// The source format, when chosen explicitly (`hudi`, `delta`); detected when `None`.
    pub format: Option<String>,
    /// Iceberg table properties to set.
    pub properties: HashMap<String, String>,
    /// On a first sync, write one snapshot of the current state instead of the history.
    pub from_latest: bool,
    /// Do not check that live data files exist with the recorded size (for a copy of a
    /// table's log without its data; a missing file's row count must then be in the log).
    pub skip_file_check: bool,
    /// The operator vouches that only this process writes the table's Iceberg metadata:
    /// a store without put-if-absent is then accepted.
    pub single_writer: bool,
}

/// Open the table root at `location` as `options` say.
pub fn open_store(location: &str, options: &SyncOptions) -> Result<TableStore, SyncError> {
    Ok(TableStore::open(location)?.with_single_writer(options.single_writer))
}

/// One snapshot written by a sync (what it mirrors, not the file lists, which a long
/// backfill could not keep in memory).
#[derive(Debug, Clone)]
pub struct Mirrored {
    /// The source commit.
    pub commit: SourceCommit,
    /// Data files the commit added.
    pub added: usize,
    /// Data files the commit removed.
    pub removed: usize,
    /// What the target wrote.
    pub committed: Committed,
    /// Commits still to mirror after this one, as planned now (for progress display).
    pub remaining: usize,
}

/// The result of a sync.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// Source format (`HUDI`, `DELTA`).
    pub format: String,
    /// Completed source commits that have (now) a snapshot.
    pub source_commits: usize,
    /// Of these, mirrored before this sync.
    pub already_mirrored: usize,
    /// Snapshots written by this sync.
    pub written: Vec<Mirrored>,
    /// Notes for the operator from the source.
    pub notes: Vec<String>,
}

/// In-commit mode, the last step of a write job: mirror every pending commit up to and
/// including `commit` (a Hudi instant time or a Delta version) and succeed only if that
/// commit then has its snapshot. A commit that is not completed, or that the source does
/// not have, fails before anything is written.
pub async fn mirror_commit(
    location: &str,
    options: &SyncOptions,
    commit: &str,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    let store = open_store(location, options)?;
    let table = store.location().to_string();
    let not_mirrored = |reason: String| SyncError::NotMirrored {
        table: table.clone(),
        commit: commit.to_string(),
        reason,
    };
    let source = sources::open(&store, options).await?;
    if let CommitState::Pending(state) = source.commit_state(commit) {
        return Err(not_mirrored(format!(
            "the commit is {state}, not completed"
        )));
    }
    let loaded = IcebergTable::new(store.clone()).load().await?;
    let listing = source.listing(&mirror_state(loaded.as_ref()))?;
    if !listing.commits.iter().any(|c| c.id == commit) {
        let newest = listing
            .commits
            .last()
            .map_or("none".to_string(), |c| c.id.clone());
        return Err(not_mirrored(format!(
            "the source has no such completed commit that gets a snapshot (newest: {newest})"
        )));
    }
    let (report, mirrored) = run(
        store.clone(),
        source.as_ref(),
        options,
        Some(commit),
        progress,
    )
    .await?;
    if !mirrored {
        return Err(not_mirrored(
            "the sync finished without a snapshot for it".into(),
        ));
    }
    Ok(report)
}

/// Mirror every pending completed commit of the table at `location`; `progress` is called
/// after each snapshot is committed.
pub async fn sync(
    location: &str,
    options: &SyncOptions,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    sync_store(open_store(location, options)?, options, progress).await
}

/// [`sync`] on a table root the caller opened (a custom or wrapped store).
pub async fn sync_store(
    store: TableStore,
    options: &SyncOptions,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    let source = sources::open(&store, options).await?;
    Ok(run(store, source.as_ref(), options, None, progress)
        .await?
        .0)
}

/// Mirror pending commits in order, stopping after `until` when given; also says whether
/// `until` is mirrored at the end.
async fn run(
    store: TableStore,
    source: &dyn TableSource,
    options: &SyncOptions,
    until: Option<&str>,
    mut progress: impl FnMut(&Mirrored),
) -> Result<(SyncReport, bool), SyncError> {
    let table = store.location().to_string();
    let target = IcebergTable::new(store.clone())
        .with_properties(options.properties.clone())
        .verify_files(!options.skip_file_check);
    let mut report = SyncReport {
        format: source.format().as_str().into(),
        ..Default::default()
    };
    // Conflicts in a row with no progress by anyone; a lost race where another writer
    // mirrored something is progress and resets the count.
    let mut retries = 0;
    let mut last_seen = 0;
    'plan: loop {
        // One read of the metadata per plan: it gives the mirrored commits and is the base
        // the first batch builds on; each batch hands the next the version it published.
        let mut base = target.load().await?;
        // A writer that died (or lost the reply) between its metadata file and the hint
        // left readers that trust the hint on an old version: point it right first.
        if let Some(loaded) = base.as_mut() {
            target.heal_hint(loaded).await?;
        }
        let state = mirror_state(base.as_ref());
        let mirrored = &state.commits;
        let Replay {
            changes,
            mut notes,
            stopped,
        }: Replay<SourceError> = match source.replay(&state).await {
            // First sync with --from-latest: one snapshot of the current state.
            Ok(replay) if options.from_latest && mirrored.is_empty() => notes_push(
                latest_state(replay),
                "--from-latest: one snapshot holds the table as of its newest commit",
            ),
            Ok(replay) => replay,
            // Commits after the last mirrored one are gone from the source (archived,
            // truncated): the state at the oldest retained commit becomes one snapshot,
            // taken as a difference from what Iceberg holds, then one per later commit.
            Err(e) if !mirrored.is_empty() && e.is_history_lost() => {
                let mut replay = source.replay(&MirrorState::default()).await?;
                if let Some(first) = replay.changes.first_mut() {
                    first.full_state = true;
                }
                notes_push(replay, &format!("{e}; the oldest retained commit's snapshot holds the table's state at that commit instead"))
            }
            Err(e) => return Err(e.into()),
        };
        notes.dedup();
        if mirrored.len() > last_seen {
            retries = 0;
            last_seen = mirrored.len();
        }
        let mut pending = pending(&changes, mirrored);
        match until {
            // In-commit mode for a commit already mirrored: nothing further to do.
            Some(u) if mirrored.contains(u) => pending.clear(),
            Some(u) => {
                if let Some(last) = pending.iter().position(|c| c.commit.id == u) {
                    pending.truncate(last + 1);
                }
            }
            None => {}
        }
        if report.written.is_empty() {
            report.source_commits = changes.len();
            report.already_mirrored = changes.len() - pending.len();
            report.notes = notes;
        }
        let mut remaining = pending.len();
        for chunk in pending.chunks(BATCH_SIZE) {
            let mut batch = target.commit_batch_on(base.take(), chunk).await;
            base = batch.table.take();
            for (committed, change) in batch.committed.into_iter().zip(chunk.iter()) {
                remaining -= 1;
                let m = Mirrored {
                    commit: change.commit.clone(),
                    added: change.added.len(),
                    removed: change.removed.len(),
                    committed,
                    remaining,
                };
                progress(&m);
                report.written.push(m);
            }
            match batch.error {
                None => {}
                Some(IcebergError::CommitConflict { .. }) if retries < MAX_CONFLICT_RETRIES => {
                    retries += 1;
                    tracing::warn!(table = %table, "lost a commit race; re-planning");
                    continue 'plan;
                }
                Some(e) => return Err(e.into()),
            }
        }
        // The commits before the one the source could not read are mirrored; now say why
        // the rest is not.
        // (In-commit mode does not fail for a bad commit after the one it was asked for.)
        let reached =
            until.is_some_and(|u| mirrored.contains(u) || changes.iter().any(|c| c.commit.id == u));
        let until_mirrored = until.is_some_and(|u| {
            mirrored.contains(u) || report.written.iter().any(|m| m.commit.id == u)
        });
        return match stopped {
            Some(e) if !reached => Err(e.into()),
            _ => Ok((report, until_mirrored)),
        };
    }
}

/// What the target records, for the source: the source commits its snapshots name, and
/// the newest of them with its summary (where the source's notes are).
pub(crate) fn mirror_state(loaded: Option<&LoadedTable>) -> MirrorState {
    let Some(loaded) = loaded else {
        return MirrorState::default();
    };
    let (_, synced) = loaded.head();
    let newest = synced.last().and_then(|(id, m)| {
        let summary = loaded.metadata.snapshot_by_id(*id)?.summary();
        let notes = summary.additional_properties.clone().into_iter().collect();
        Some((m.source_identifier.clone()?, notes))
    });
    MirrorState {
        commits: synced
            .into_iter()
            .filter_map(|(_, m)| m.source_identifier)
            .collect(),
        newest,
    }
}

/// A replay reduced to one full-state change set: the newest commit, holding every file
/// live after it.
fn latest_state(replay: Replay<SourceError>) -> Replay<SourceError> {
    let mut live: std::collections::BTreeMap<String, xlake_model::DataFile> = Default::default();
    for change in &replay.changes {
        if change.full_state {
            live.clear();
        }
        for path in &change.removed {
            live.remove(path);
        }
        for file in &change.added {
            live.insert(file.path.clone(), file.clone());
        }
    }
    let changes = replay
        .changes
        .last()
        .map(|last| {
            let mut state = last.clone();
            state.added = live
                .into_values()
                .map(|mut f| {
                    f.removed_later = false;
                    f
                })
                .collect();
            state.removed.clear();
            state.full_state = true;
            state.data_change = true;
            vec![state]
        })
        .unwrap_or_default();
    Replay {
        changes,
        notes: replay.notes,
        stopped: replay.stopped,
    }
}

fn notes_push(mut replay: Replay<SourceError>, note: &str) -> Replay<SourceError> {
    replay.notes.push(note.to_string());
    replay
}

/// The change sets still to mirror, in source order: those whose commit no snapshot
/// records, except commits older (in source order) than the oldest one a snapshot still
/// records, which were mirrored and then expired. A commit that completes late (Hudi table
/// version 6 orders by requested time) is still mirrored after newer ones.
fn pending<'a>(changes: &'a [ChangeSet], mirrored: &BTreeSet<String>) -> Vec<&'a ChangeSet> {
    let oldest = changes.iter().position(|c| mirrored.contains(&c.commit.id));
    changes
        .iter()
        .enumerate()
        .filter(|(i, c)| !mirrored.contains(&c.commit.id) && oldest.is_none_or(|o| *i > o))
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_model::{PartitionSpec, Schema, SourceCommit, SourceFormat};

    fn changes(ids: &[&str]) -> Vec<ChangeSet> {
        ids.iter()
            .map(|id| {
                let commit = SourceCommit {
                    format: SourceFormat::new("HUDI"),
                    id: id.to_string(),
                    action: "commit".into(),
                    requested_ms: None,
                    commit_time_ms: 0,
                };
                ChangeSet::new(commit, Schema::default(), PartitionSpec::unpartitioned())
            })
            .collect()
    }

    fn ids(p: Vec<&ChangeSet>) -> Vec<&str> {
        p.into_iter().map(|c| c.commit.id.as_str()).collect()
    }

    #[test]
    fn pending_skips_mirrored_and_expired_but_not_late_completions() {
        let all = changes(&["1", "2", "3", "4", "5"]);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(ids(pending(&all, &set(&[]))), ["1", "2", "3", "4", "5"]);
        assert_eq!(ids(pending(&all, &set(&["1", "2"]))), ["3", "4", "5"]);
        // 1 and 2 expired from the Iceberg metadata.
        assert_eq!(ids(pending(&all, &set(&["3"]))), ["4", "5"]);
        // 3 completed after 4 was mirrored (v6 requested-time order).
        assert_eq!(ids(pending(&all, &set(&["1", "2", "4"]))), ["3", "5"]);
        // Mirrored commits the source no longer lists are fine.
        assert_eq!(ids(pending(&all, &set(&["0", "1"]))), ["2", "3", "4", "5"]);
    }
}
