//! # xlake-source: the contract every source format implements
//!
//! The engine (`xlake-sync`) knows a table's format only through this crate: a source
//! format is a [`SourceKind`] (its name, how it recognises and opens a table), and an
//! opened table is a [`TableSource`]: it lists its completed commits cheaply, says whether
//! a commit id is completed, pending or unknown, orders commit ids, reports health facts,
//! and replays its commits as neutral [`ChangeSet`](xlake_model::ChangeSet)s. The engine
//! holds one registry, a list of kinds; adding a format is one crate and one line there.
//! Nothing here names a format: what only one format needs is a general capability (a
//! [`RecordedChoice`], [`TargetTakes`], [`TableSource::reads_saved_by_live_files`]) or
//! stays inside that format's crate.
//!
//! | item | what it is |
//! |---|---|
//! | [`TableSource`] | an opened source table: listing, commit states, order, health, replay |
//! | [`ChangeStream`], [`Replay`] | a replay in progress, one change set at a time (memory bounded by the source's live and removed path sets, not by its history) |
//! | [`VecReplay`], [`removals_of`], [`collect`], [`Collected`] | a replay of change sets in memory; a first pass over a replay for its removals; a replay drained |
//! | [`SourceKind`] | a format: its name and how to open a table of it |
//! | [`SourceOptions`] | operator choices a source may honour (a merge-on-read view) |
//! | [`RecordedChoice`] | an operator choice a format records in its snapshots' notes, honoured by later commands |
//! | [`TargetTakes`] | what the target takes as the source stores it (deletion vectors undecoded) |
//! | [`CommitState`] | completed, pending (with the source's word for it) or unknown |
//! | [`MirrorState`] | what the target already records, handed to the source |
//! | [`SourceHealth`] | what `inspect` shows of the source side |
//! | [`SourceError`], [`ErrorKind`] | one error for every source, by kind; the message names table, commit and file |
//! | [`Reason`] | what is wrong with a file or value, the library error beneath kept as its source (the formats' errors carry it) |
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod error;
mod reason;
mod stream;

pub use error::{ErrorKind, SourceError};
pub use reason::Reason;
pub use stream::{collect, removals_of, ChangeStream, Collected, Replay, VecReplay};

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use futures::future::BoxFuture;
use xlake_model::{CommitListing, DeclaredTable, SourceFormat};
use xlake_storage::TableStore;

/// An operator choice a format records in the notes of the change sets it gives (so in
/// the target's snapshots): when a snapshot records `note` = `value`, later commands
/// honour the choice without being told again (`choose` turns it on). The engine asks the
/// target for every choice of every registered format; it knows none by name.
#[derive(Debug, Clone, Copy)]
pub struct RecordedChoice {
    /// The note's key (a change set's `notes`).
    pub note: &'static str,
    /// The value that records the choice.
    pub value: &'static str,
    /// The choice, made on the options.
    pub choose: fn(&mut SourceOptions),
}

/// What the target takes from a source as the source stores it, undecoded (the engine
/// asks the target, then tells the source).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetTakes {
    /// Deletion vectors in the source's stored form (the target copies them as they are):
    /// a source need not decode them into row positions.
    pub stored_deletion_vectors: bool,
}

/// Operator choices a source may honour; a source ignores what does not apply to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceOptions {
    /// Mirror a merge-on-read table's base files only (its read-optimized view). Without
    /// this, merge-on-read tables are refused.
    pub mor_read_optimized: bool,
    /// List every commit's time (the checker's lag needs them). A sync leaves this off: it
    /// takes times from the commits it reads, so a source may list its log by name alone
    /// (Delta on local disk: no `stat` per commit file).
    pub commit_times: bool,
    /// The name in prose of the target the mirror is written in (`Iceberg`, `Delta`), set
    /// by the engine, for messages about what that target's readers cannot read; `None`
    /// when no target is in use (a source is then worded without one).
    pub target_title: Option<&'static str>,
}

impl SourceOptions {
    /// Who reads the mirror, for messages: `Delta engines`, or `the mirror's readers`.
    pub fn target_readers(&self) -> String {
        match self.target_title {
            Some(title) => format!("{title} engines"),
            None => "the mirror's readers".into(),
        }
    }
}

/// What a source says of a commit id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitState {
    /// Completed: it gets (or has) a snapshot if it changes the table.
    Completed,
    /// Known but not completed; the source's word for its state (`REQUESTED`, `INFLIGHT`).
    Pending(String),
    /// The source has no commit of that id.
    Unknown,
}

/// The source side of `inspect`: one line for people, the same facts for machines, and
/// what is mirrored in a degraded way because of the source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceHealth {
    /// One line of facts, e.g. `_delta_log 5 files, 4 KiB; latest version 4; ...`.
    pub line: String,
    /// The same facts as JSON (an object), under the format's lower-case name.
    pub json: serde_json::Value,
    /// What is mirrored in a degraded way (read-optimized view, unpartitioned fallback).
    pub degraded: Vec<String>,
}

/// What the target already records of a table, as a source may need it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorState {
    /// The source commits the target's snapshots record.
    pub commits: BTreeSet<String>,
    /// The commit the oldest of those snapshots records: where the mirror begins
    /// ([`CommitListing::mirror_start`](xlake_model::CommitListing::mirror_start)).
    pub first: Option<String>,
    /// The newest of them, with the notes its change set carried: a source that keeps no
    /// history (a plain folder of files) recognises the state it last gave by them.
    pub newest: Option<(String, BTreeMap<String, String>)>,
    /// The data files live in the target's current snapshot (location, rows), given only
    /// when the source asks for them ([`TableSource::reads_saved_by_live_files`]): a source can
    /// then start its replay after the newest mirrored commit instead of at its first.
    pub live_files: Option<Vec<(String, u64)>>,
    /// The [`ChangeSet::source_state`](xlake_model::ChangeSet::source_state) of the change
    /// set committed last (the current snapshot's), as the target kept it: for a source
    /// whose commits may complete out of order, not necessarily its newest commit's. A
    /// source checks that it belongs to the commit it resumes after before trusting it.
    pub source_state: Option<String>,
    /// What the target's current snapshot deletes from its live data files, read on
    /// demand, given only when the source asks for it
    /// ([`TableSource::wants_mirrored_deletes`]) and the target can tell it: a source that
    /// resumes after the newest mirrored commit may then take a data file's deleted rows
    /// as of that commit from the mirror instead of reading every delete file live there.
    pub deletes: Option<MirroredDeletesRef>,
}

/// The error of a [`MirroredDeletes`] read: the target's own, its cause kept.
pub type MirrorReadError = Box<dyn std::error::Error + Send + Sync>;

/// The rows the target's current snapshot deletes from its live data files (its own
/// deletion vectors, decoded when asked): the target's side of [`MirrorState::deletes`].
/// The target knows no source format; the source asks by a data file's location.
#[async_trait::async_trait]
pub trait MirroredDeletes: Send + Sync {
    /// The source commit the target's current snapshot mirrors: the rows are as of it.
    fn commit(&self) -> &str;

    /// The rows the current snapshot deletes from the data file at `path` (a location as
    /// the model spells it), ascending, empty when it deletes none; `None` when the file
    /// is not live there.
    async fn deleted_rows(&self, path: &str) -> Result<Option<Vec<u64>>, MirrorReadError>;
}

/// A shared [`MirroredDeletes`], as [`MirrorState`] holds it (two are equal when they
/// are the same reader).
#[derive(Clone)]
pub struct MirroredDeletesRef(pub std::sync::Arc<dyn MirroredDeletes>);

impl std::fmt::Debug for MirroredDeletesRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MirroredDeletes(as of {})", self.0.commit())
    }
}

impl PartialEq for MirroredDeletesRef {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MirroredDeletesRef {}

/// A source table opened for reading.
#[async_trait::async_trait]
pub trait TableSource: Send + Sync {
    /// The format, as written to `XTABLE_METADATA.sourceTableFormat`.
    fn format(&self) -> SourceFormat;

    /// The completed commits that each get a snapshot, in source order, from names alone
    /// (no commit is read). `mirrored` is what the target records; the listing may depend
    /// on its commits and newest one, not on its live files (the engine lists before it
    /// reads them, and keeps the listing).
    fn listing(&self, mirrored: &MirrorState) -> Result<CommitListing, SourceError>;

    /// Whether `id` is a completed, a pending or an unknown commit.
    fn commit_state(&self, id: &str) -> CommitState;

    /// Source order of two commit ids (also of ids the source no longer lists).
    fn order(&self, a: &str, b: &str) -> Ordering;

    /// Health facts for `inspect`.
    async fn health(&self) -> Result<SourceHealth, SourceError>;

    /// Commits that completed and were then undone by a later completed rollback or
    /// restore (Hudi's restore to a savepoint), each with the id of the commit that undid
    /// it. A snapshot recording one is the table's true history (readers saw those rows
    /// then), not an unknown commit. `check` asks only when snapshots name commits the
    /// listing lacks, so this may read commits.
    async fn undone_commits(&self) -> Result<BTreeMap<String, String>, SourceError> {
        Ok(BTreeMap::new())
    }

    /// Why the table is not the one `mirrored` holds up to its newest commit, if it is
    /// not (Delta: a table dropped and written anew at the same place, told by its id):
    /// what a sync refuses, `check` reports. `None` when it is, or when the source cannot
    /// tell. May read a commit or a checkpoint; an error is a read that failed.
    async fn not_the_mirrored_table(
        &self,
        _mirrored: &MirrorState,
    ) -> Result<Option<String>, SourceError> {
        Ok(None)
    }

    /// The table's own setting that promises a snapshot for every completed commit, written
    /// by its writers in their commit path (Hudi's `hoodie.table.format=xlake`), if it has
    /// one: then a completed commit without a snapshot means that promise was broken.
    fn commit_path_mirror(&self) -> Option<String> {
        None
    }

    /// The table as the source declares it before its first completed commit, if it can
    /// (so that readers find an empty table rather than none).
    async fn declared_table(&self) -> Result<Option<DeclaredTable>, SourceError> {
        Ok(None)
    }

    /// How many of its own commit files the replay would not read if it were given the
    /// target's live files ([`MirrorState::live_files`]) to start after the newest
    /// mirrored commit; 0 when it would not use them (it may then start there without
    /// them). Decided from names, and at most a few commits after the newest mirrored
    /// one. The engine reads the live files first when that costs fewer reads than it
    /// saves.
    async fn reads_saved_by_live_files(&self, _mirrored: &MirrorState) -> usize {
        0
    }

    /// Whether the replay for `mirrored` would use what the target's current snapshot
    /// deletes ([`MirrorState::deletes`]) instead of re-reading the delete files live at
    /// the newest mirrored commit. Decided from what opening read; the engine then asks
    /// the target. A checker never gives them (it compares the source with the mirror).
    fn wants_mirrored_deletes(&self, _mirrored: &MirrorState) -> bool {
        false
    }

    /// What the target takes as the source stores it (deletion vectors undecoded): a
    /// source may then skip decoding it. Called before each replay.
    fn target_takes(&mut self, _takes: TargetTakes) {}

    /// The source's newest state as the opened table listed it, from what opening read (no
    /// further request): a text that differs whenever [`Self::listing`] would list a
    /// completed commit it did not list before (Delta: the newest version and its commit
    /// file's time, which a table written anew changes; Hudi: the listed instants). `None` when the source cannot tell it so (then a sync is never
    /// skipped as a no-op). The engine compares it with the one a sync that left nothing
    /// pending recorded.
    fn tip(&self) -> Option<String> {
        None
    }

    /// The oldest commit begun but not completed that, once completed, takes its place in
    /// source order before commits already completed (Hudi table version 6 orders by
    /// requested time). An expiry keeps a snapshot of a commit before it, so that commit,
    /// completed, comes after the oldest retained snapshot and is mirrored then (before it
    /// the engine takes an unmirrored commit as mirrored and expired). `None` when there is
    /// none, or when commits complete in source order (Delta, Parquet, Iceberg, Hudi 8+).
    fn oldest_pending(&self) -> Option<String> {
        None
    }

    /// One change set per completed commit not in `mirrored.commits`, in source order (a
    /// source may also give ones that are, which the engine skips), as a stream read one
    /// change set at a time; each added file already says whether a later commit removes
    /// it ([`DataFile::removed_later`](xlake_model::DataFile::removed_later)). A commit the
    /// source cannot read ends the stream: the change sets before it come first, then the
    /// error. An error here (nothing streamed) is about the table as a whole, e.g.
    /// [`ErrorKind::HistoryLost`].
    async fn replay<'a>(&'a self, mirrored: &MirrorState) -> Result<Replay<'a>, SourceError>;

    /// For a checker that needs the live files after `from` and every commit since: a
    /// replay that may start at a full state of the source at or before `from` (Delta's
    /// newest checkpoint there), so that files only older commits used (a deletion vector
    /// VACUUM deleted) are not read. `mirrored` is what [`Self::replay`] would be given to
    /// replay from the start; by default that replay.
    async fn replay_covering<'a>(
        &'a self,
        from: &str,
        mirrored: &MirrorState,
    ) -> Result<Replay<'a>, SourceError> {
        let _ = from;
        self.replay(mirrored).await
    }
}

/// The future [`SourceKind::detect`] returns.
pub type DetectFuture = BoxFuture<'static, Result<bool, SourceError>>;

/// The future [`SourceKind::open`] returns.
pub type OpenFuture = BoxFuture<'static, Result<Option<Box<dyn TableSource>>, SourceError>>;

/// A source format: how the engine recognises and opens a table of it.
#[derive(Clone, Copy)]
pub struct SourceKind {
    /// Lower-case name, as the operator chooses it (`--format hudi`).
    pub name: &'static str,
    /// The name in prose (`Hudi`).
    pub title: &'static str,
    /// The format's name in `XTABLE_METADATA` (what its commits carry).
    pub format: SourceFormat,
    /// What marks a table of this format, for "not a table" messages (`_delta_log/`).
    pub marker: &'static str,
    /// Whether the format is recognised by looking at a folder. A format that any folder
    /// could match (plain Parquet files) is only ever chosen explicitly.
    pub detectable: bool,
    /// Whether the store's root holds a table of this format, from names alone (cheap;
    /// nothing is read). Always false for a format that is not `detectable`.
    pub detect: fn(TableStore) -> DetectFuture,
    /// Open the table at the store's root: `None` when it is not a table of this format.
    pub open: fn(TableStore, SourceOptions) -> OpenFuture,
    /// Open the table to mirror what follows `newest`, the newest commit its mirror
    /// records: a source whose log grows with its history may read it from there on
    /// (Delta: `_delta_log/` listed from that version), and must fall back to
    /// [`Self::open`]'s whole reading where that part cannot stand alone. Its listing then
    /// names the older mirrored commits as the mirror records them. `None`: [`Self::open`].
    pub open_after: Option<fn(TableStore, SourceOptions, &MirrorState) -> OpenFuture>,
    /// Open the table to compare its [`TableSource::tip`] with `tip`, the one a settled
    /// sync recorded (the scheduled job's no-op check): a source whose tip names where
    /// the next sync reads its log from (Hudi: the instant time it lists its timeline
    /// from) may read it from there on, as [`Self::open_after`] does, and falls back to
    /// [`Self::open`]'s whole reading where the tip does not read. `None`:
    /// [`Self::open_after`] with the mirror's newest commit, else [`Self::open`].
    pub open_at_tip: Option<fn(TableStore, SourceOptions, &str) -> OpenFuture>,
    /// Whether a commit of this format may complete after commits that follow it in
    /// source order (Hudi), so that an expiry asks the opened table for its
    /// [`TableSource::oldest_pending`] and its listing's order (a late completion's
    /// snapshot comes after those of later commits); false: an expiry does not open the
    /// source at all.
    pub late_completions: bool,
    /// Operator choices the format records in its change sets' notes, restored for later
    /// commands (none for most formats).
    pub recorded: &'static [RecordedChoice],
}

impl std::fmt::Debug for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceKind")
            .field("name", &self.name)
            .field("title", &self.title)
            .field("format", &self.format)
            .field("marker", &self.marker)
            .field("detectable", &self.detectable)
            .finish()
    }
}

/// Order of commit ids that are decimal numbers (Delta versions, listing generations);
/// ids that are not numbers sort after numbers, as text.
pub fn numeric_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_order_compares_numbers_as_numbers() {
        assert_eq!(numeric_order("9", "10"), Ordering::Less);
        assert_eq!(numeric_order("10", "10"), Ordering::Equal);
        assert_eq!(numeric_order("x", "1"), Ordering::Greater);
    }
}
