//! # xlake-sync: the engine
//!
//! Wires a source to the Iceberg target: detects the table's format, asks the source for
//! its change sets, asks the target which source commits it already mirrors (from the
//! snapshots' `XTABLE_METADATA`, the only sync state there is), and commits the rest, one
//! snapshot per source commit, in order.
//!
//! | item | what it does |
//! |---|---|
//! | [`sync`] | mirror every pending completed commit of one table |
//! | [`SyncOptions`] | operator choices (merge-on-read opt-in, Iceberg table properties) |
//! | [`Mirrored`] | one snapshot written, as reported while syncing |
//! | [`SyncError`] | errors of the engine and of the crates it drives |
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::collections::{BTreeSet, HashMap};

use xlake_hudi::{HudiError, HudiOptions, HudiSource};
use xlake_iceberg::{Committed, IcebergError, IcebergTable};
use xlake_model::ChangeSet;
use xlake_storage::{StorageError, TableStore};

/// How often a commit is re-planned after losing a race to another writer.
const MAX_CONFLICT_RETRIES: usize = 5;

/// Errors of a sync; the Iceberg metadata is left at its last good version.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Storage access failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The Hudi source failed.
    #[error(transparent)]
    Hudi(#[from] HudiError),
    /// The Iceberg target failed.
    #[error(transparent)]
    Iceberg(#[from] IcebergError),
    /// The location holds neither a Hudi nor a Delta table.
    #[error("{table}: neither .hoodie/hoodie.properties nor _delta_log/ found: not a Hudi or Delta table")]
    NotATable {
        /// Table location.
        table: String,
    },
    /// The format is recognised but not mirrored yet.
    #[error("{table}: {what}")]
    Unsupported {
        /// Table location.
        table: String,
        /// What.
        what: String,
    },
    /// The Iceberg snapshots do not follow the source's commits.
    #[error("{table}: source commit {found} (number {position} in the source's order) is mirrored but the earlier commit {expected} is not; refusing to continue")]
    Diverged {
        /// Table location.
        table: String,
        /// 1-based position of `found` among the source's commits.
        position: usize,
        /// The earliest source commit not mirrored.
        expected: String,
        /// A later source commit that is mirrored.
        found: String,
    },
}

/// Operator choices.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Options of the Hudi source.
    pub hudi: HudiOptions,
    /// Iceberg table properties to set.
    pub properties: HashMap<String, String>,
}

/// One snapshot written by a sync.
#[derive(Debug, Clone)]
pub struct Mirrored {
    /// The source commit.
    pub change: ChangeSet,
    /// What the target wrote.
    pub committed: Committed,
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

/// Mirror every pending completed commit of the table at `location`; `progress` is called
/// after each snapshot is committed.
pub async fn sync(
    location: &str,
    options: &SyncOptions,
    mut progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    let store = TableStore::open(location)?;
    let table = store.location().to_string();
    if store.size(".hoodie/hoodie.properties").await?.is_none() {
        if !store.list_dir("_delta_log").await?.is_empty() {
            return Err(SyncError::Unsupported {
                table,
                what: "Delta tables are not mirrored yet".into(),
            });
        }
        return Err(SyncError::NotATable { table });
    }
    let source = HudiSource::open(store.clone(), options.hudi).await?;
    let target = IcebergTable::new(store).with_properties(options.properties.clone());
    let mirrored: BTreeSet<String> = target
        .synced_commits()
        .await?
        .into_iter()
        .filter_map(|(_, m)| m.source_identifier)
        .collect();
    let (changes, notes) = source.change_sets(&mirrored).await?;
    let mut report = SyncReport {
        format: "HUDI".into(),
        source_commits: changes.len(),
        notes,
        ..Default::default()
    };
    let mut retries = 0;
    loop {
        let done = mirrored_prefix(&target, &table, &changes).await?;
        if report.written.is_empty() {
            report.already_mirrored = done;
        }
        let Some(next) = changes.get(done) else { break };
        match target.commit(next).await {
            Ok(committed) => {
                let m = Mirrored {
                    change: next.clone(),
                    committed,
                };
                progress(&m);
                report.written.push(m);
            }
            Err(IcebergError::CommitConflict { .. }) if retries < MAX_CONFLICT_RETRIES => {
                retries += 1;
                tracing::warn!(table = %table, commit = %next.commit.id, "lost a commit race; re-planning");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(report)
}

/// How many of `changes` the target already mirrors. They must be a prefix: a mirrored
/// commit after an unmirrored one means the two histories diverged. Mirrored commits the
/// source no longer lists (archived, or rolled back and removed by Hudi) are fine.
async fn mirrored_prefix(
    target: &IcebergTable,
    table: &str,
    changes: &[ChangeSet],
) -> Result<usize, SyncError> {
    let mirrored: BTreeSet<String> = target
        .synced_commits()
        .await?
        .into_iter()
        .filter_map(|(_, m)| m.source_identifier)
        .collect();
    let done = changes
        .iter()
        .take_while(|c| mirrored.contains(&c.commit.id))
        .count();
    if let Some((i, later)) = changes
        .iter()
        .enumerate()
        .skip(done)
        .find(|(_, c)| mirrored.contains(&c.commit.id))
    {
        return Err(SyncError::Diverged {
            table: table.to_string(),
            position: i + 1,
            expected: changes[done].commit.id.clone(),
            found: later.commit.id.clone(),
        });
    }
    Ok(done)
}
