//! # xlake-sync: the engine
//!
//! Wires a source to a target through two contracts: finds the table's format in the
//! [`sources`] registry and opens it as an [`xlake_source::TableSource`], opens the
//! target from the [`targets`] registry as an [`xlake_target::TableTarget`], asks the
//! target which source commits it already mirrors (recorded in its snapshots, the only
//! sync state there is), and has it publish the rest, one snapshot per source commit, in
//! order. Only the two registries name formats: a `grep -rn` for the Iceberg crate's
//! name in this crate's `src/` finds `targets.rs` alone, as one for the source crates'
//! names finds `sources.rs` alone.
//!
//! | item | what it does |
//! |---|---|
//! | [`sync`], [`sync_store`], [`mirror_commit`] | mirror every pending completed commit of one table (the algorithm: `run`: plans, batches, lost races, `--allow`, progress, `--rebuild`) |
//! | [`SyncOptions`] | operator choices (merge-on-read opt-in, target table properties) |
//! | [`Mirrored`] | one snapshot written, as reported while syncing |
//! | [`catalog`] | the catalog entry: checked before publishing, moved forward after |
//! | [`check`](check::check) | the invariant checker: one snapshot per completed commit, in order |
//! | [`inspect`](inspect::inspect) | the health report: metadata each format keeps, degraded mirroring |
//! | [`job`] | the scheduled job over the tables of a config file |
//! | `noop` | the job's no-op shortcut: a table whose source and target have not moved since a sync left nothing pending is not read again |
//! | [`maintain`] | `expire` (the catalog entry following) and `cleanup`, shared by the binary and the job |
//! | `cuts` | where an expiry may cut a mirror's history so that no expired commit is mirrored again (a late completion) |
//! | [`snapshots`](snapshots::snapshots) | the snapshot list and the source commit each records |
//! | [`locate`](locate::locate) | what a location holds (source table, target metadata), before a command acts |
//! | [`rebuild`] | `sync --rebuild`: a copied or moved table mirrored afresh at its new place |
//! | `replay` | the source's replay as the engine reads it: pending change sets, `--from-latest`, lost history |
//! | [`serve`] | the long-running service: Hudi's write-commit callback, scheduled sync, check, metrics |
//! | [`access`] | who may ask for what: the service's API key, and the locations (table roots, data files) a sync or a request may read or write |
//! | [`upgrade`](upgrade::upgrade) | `xlake upgrade`: a newer target format version, at once |
//! | [`sources`] | the registry of source formats: the only module naming Hudi, Delta and Parquet |
//! | [`targets`] | the registry of targets: the only module naming Iceberg |
//! | [`SyncError`], [`ConfigError`] | errors of the engine and of the crates it drives, and refused configuration (durations, job files, access settings), by kind, each keeping its cause (`error`) |
//!
//! A commit the target has no snapshot for is pending, unless it is older than the oldest
//! commit a snapshot records (those were mirrored, then expired). Pending commits are
//! written in source order, in batches of 100 read from the source's replay as
//! they are needed (a backfill never holds the history); a writer that loses a race
//! re-plans from the target's state.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod access;
pub mod catalog;
pub mod check;
mod cuts;
mod error;
pub mod inspect;
pub mod job;
pub mod locate;
pub mod maintain;
mod noop;
pub mod rebuild;
mod replay;
mod run;
pub mod serve;
pub mod snapshots;
pub mod sources;
pub mod targets;
pub mod upgrade;

pub use check::{check, check_with, CheckReport};
pub(crate) use error::InTable;
pub use error::{ConfigError, ConfigKind, SyncError};
pub use run::{mirror_commit, sync, sync_store};

use std::collections::HashMap;

use xlake_catalog::{Advanced, CatalogTarget};
use xlake_model::SourceCommit;
use xlake_source::SourceOptions;
use xlake_storage::TableStore;
pub use xlake_target::{Committed, TargetHealth};

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
    /// Check every added data file on storage, also those whose adding commit proves they
    /// exist ([`xlake_model::DataFile::proven`]), which an incremental sync otherwise
    /// trusts (a first sync checks every file anyway).
    pub check_every_file: bool,
    /// The operator vouches that only this process writes the table's Iceberg metadata:
    /// a store without put-if-absent is then accepted.
    pub single_writer: bool,
    /// The table folder was copied or moved (its metadata records another location):
    /// mirror the source's history afresh here, then set the old metadata files aside
    /// (see [`rebuild`]). On a table at home, a plain sync.
    pub rebuild: bool,
    /// When set (by `serve`, and `sync --allow`), every data file a commit adds must lie
    /// under one of these normalised locations (the table's own first): a commit naming
    /// any other file, or a deletion vector file elsewhere, fails before anything outside
    /// is read (the store itself is confined, see [`open_store`]).
    pub data_roots: Option<Vec<String>>,
    /// The catalog entry to keep pointing at the current version.
    pub catalog: Option<CatalogTarget>,
    /// The Iceberg format version to write (2 or 3); `None`: the table's own, 2 for a new
    /// table. A v2 table asked for 3 is upgraded in place at the start of the sync.
    pub format_version: Option<u8>,
    /// The target format (`iceberg`, `delta`; [`targets::KINDS`]); `None`: Iceberg.
    pub target: Option<String>,
}

/// Open the table root at `location` as `options` say.
/// With `options.data_roots`, the store is confined to them: a location a log names
/// outside the table and the roots (a data file, a deletion vector's file) is refused
/// before anything there is read, so the answer never tells whether it exists.
pub fn open_store(location: &str, options: &SyncOptions) -> Result<TableStore, SyncError> {
    let store = TableStore::open(location)?.with_single_writer(options.single_writer);
    Ok(match options.data_roots.clone() {
        Some(roots) => store.confined(xlake_storage::Confinement::new(move |path| {
            access::data_file_allowed(path, &roots)
        })),
        None => store,
    })
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
    /// The change set is the full state after the commit (a Hudi rollback or restore, a
    /// Parquet folder's listing): `added` counts every live file, `removed` is 0, and the
    /// target works out what changed.
    pub full_state: bool,
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
    /// With [`SyncOptions::rebuild`]: the old history set aside, if there was one.
    pub rebuilt: Option<rebuild::Rebuilt>,
    /// What the snapshots written by this sync mirror their commits without (each note
    /// once; the snapshots carry them in their summaries as `xlake.degraded`).
    pub degraded: Vec<String>,
    /// The source has no completed commit yet, and this sync created the Iceberg table
    /// with its declared schema and no snapshot (this version of it).
    pub created_empty: Option<u64>,
    /// What was done to the catalog entry, when there is one.
    pub catalog: Option<Advanced>,
    /// The snapshots the table's metadata retained when the sync's last plan started (0
    /// with no metadata): with nothing written, what an expiry right after would find.
    pub snapshots_found: usize,
    /// The sync ended with nothing pending (every commit the source listed is mirrored),
    /// as the target records it: what the scheduled job keeps for its no-op shortcut
    /// ([`job`]). `None` when something stays pending, in-commit mode, a rebuild, or a
    /// source or target that cannot tell.
    pub settled: Option<xlake_target::Settled>,
}
