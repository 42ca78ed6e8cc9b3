//! # xlake-target: the contract every target format implements
//!
//! The engine (`xlake-sync`) knows the format it writes only through this crate, as it
//! knows sources only through `xlake-source`: an opened target is a [`TableTarget`]. It
//! reads what the table already mirrors ([`MirrorState`]), publishes a batch of neutral
//! [`ChangeSet`](xlake_model::ChangeSet)s behind the store's put-if-absent (a writer that
//! loses the race gets [`ErrorKind::Conflict`] and the engine re-plans), expires, shows
//! what `check`, `inspect` and `snapshots` compare and list, moves a relocated history
//! aside, and hands catalogs the version their pointer names. The engine holds one
//! registry of targets (`xlake_sync::targets`); adding a target is one crate and one line
//! there.
//!
//! A target is a session over one table: [`TableTarget::load`] reads its current version
//! and keeps it as the base the next [`TableTarget::publish`] builds on; each publish keeps
//! the version it wrote as the base of the next, so a backfill reads the metadata once.
//!
//! | item | what it is |
//! |---|---|
//! | [`TableTarget`] | an opened target table: load, publish, expire, views, relocation, catalog hand-off |
//! | [`TargetOptions`] | operator choices a target honours (table properties, format version, file checks) |
//! | [`Read`], [`Loaded`] | how much of the current version to read; what was found |
//! | [`Committed`], [`Published`] | one change set written; a batch's outcome (what was written before an error) |
//! | [`FormatChange`] | a format upgrade, done or not needed |
//! | [`Retention`], [`Expired`] | what to expire; what was |
//! | [`TargetView`], [`SnapshotEntry`], [`Ancestor`] | the snapshots, and the source commit each records (`snapshots`, `check`) |
//! | [`SelfCheck`], [`MissingList`], [`MissingFile`] | the target's own findings for `check` (files its history needs that are gone) |
//! | [`TargetHealth`] | the target's side of `inspect` |
//! | [`SetAside`], [`Rebuilt`] | a relocated history moved aside after a rebuild |
//! | [`Orphans`] | metadata files nothing references, for `cleanup` (the engine deletes them) |
//! | [`Pointer`], [`Identified`], [`IdentifyFuture`] | the catalog hand-off: which version a pointer should name, what a named file is |
//! | [`Settled`] | a sync that left nothing pending, remembered beside the version it ended on: the scheduled job's no-op shortcut |
//! | [`TargetError`], [`ErrorKind`] | one error for every target, by kind; the message names table, commit and file |
//! | [`footer`] | record counts and column statistics from a Parquet footer, for files a source described without them |
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod error;
pub mod footer;

pub use error::{ErrorKind, TargetError};
pub use xlake_source::{
    MirrorReadError, MirrorState, MirroredDeletes, MirroredDeletesRef, TargetTakes,
};

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use xlake_model::{ChangeSet, DeclaredTable};

/// Operator choices a target honours (by default: no properties, files checked, the
/// table's own format version).
#[derive(Debug, Clone)]
pub struct TargetOptions {
    /// Table properties to set.
    pub properties: HashMap<String, String>,
    /// Check that added data files exist with the recorded size.
    pub verify_files: bool,
    /// The format version to write; `None`: the table's own (the target's default for a
    /// new table). An older table is upgraded in place first.
    pub format_version: Option<u8>,
}

impl Default for TargetOptions {
    fn default() -> Self {
        Self {
            properties: HashMap::new(),
            verify_files: true,
            format_version: None,
        }
    }
}

/// How much of the current version [`TableTarget::load`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// What a commit builds on; a table written for another location is refused.
    ForCommit,
    /// [`Self::ForCommit`], taking the version the target's own pointer names (Iceberg's
    /// hint) as the newest without looking for a newer one, for a commit's first plan: a
    /// newer one makes the commit lose its race, and the plan after that reads with
    /// [`Self::ForCommit`]. One request less per commit on an object store.
    ForFirstCommit,
    /// The same, but a table written for another location is read as it is (reported,
    /// rebuilt), not refused.
    AsFound,
    /// Everything, every snapshot parsed (for listings).
    Whole,
}

/// What [`TableTarget::load`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The current version's number.
    pub version: u64,
    /// The location the current version was written for, when not this table's.
    pub relocated_from: Option<String>,
    /// The location the current version records (this table's, or not: then also
    /// [`Self::relocated_from`]), as it spells it.
    pub recorded_at: Option<String>,
    /// The source format the newest snapshot records (`HUDI`, `DELTA`).
    pub source_format: Option<String>,
    /// The target's format version.
    pub format_version: u8,
    /// The snapshots the current version retains.
    pub snapshots: usize,
}

/// One change set written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The version that holds it.
    pub version: u64,
    /// The snapshot written.
    pub snapshot_id: i64,
    /// Its time, ms since the epoch.
    pub timestamp_ms: i64,
    /// What the target mirrors of it in a degraded way, each once.
    pub degraded: Vec<String>,
}

/// What [`TableTarget::publish`] did: the change sets written, in order, and the error
/// that ended the batch early, if one did.
#[derive(Debug, Default)]
pub struct Published {
    /// One per change set written.
    pub committed: Vec<Committed>,
    /// Why the batch stopped before its end ([`ErrorKind::Conflict`]: re-plan).
    pub error: Option<TargetError>,
}

/// A format upgrade.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormatChange {
    /// The format version the table was at.
    pub from: u8,
    /// The format version it is at now.
    pub to: u8,
    /// The version the upgrade published; `None` when nothing changed.
    pub version: Option<u64>,
}

/// What an expiry keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many snapshots (the newest).
    pub keep_snapshots: Option<usize>,
    /// Expire snapshots whose (source commit) time is older than this, in ms before
    /// `now_ms`.
    pub max_age_ms: Option<i64>,
    /// The present, ms since the epoch.
    pub now_ms: i64,
    /// When set, the only snapshots (ids; a Delta target's versions) an expiry may keep
    /// from, each with every snapshot after it, whatever else says; keeping every
    /// snapshot is always allowed. The engine's word, from the source: where every
    /// snapshot before records a source commit older than every one after (a late
    /// completion breaks that, and the sync would mirror again a commit expired after
    /// an older one it keeps), never past a listed commit not yet mirrored (one that
    /// completed late since the last sync: the sync would take it as expired), and never
    /// past the newest snapshot before the source's oldest pending commit (as Hudi's
    /// archival never passes its oldest pending instant).
    pub cuts: Option<BTreeSet<i64>>,
}

impl Retention {
    /// Whether an expiry may keep from snapshot `id`, with every one after it, and expire
    /// every one before it.
    pub fn may_keep_from(&self, id: i64) -> bool {
        self.cuts.as_ref().is_none_or(|cuts| cuts.contains(&id))
    }
}

/// What an expiry did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// The snapshots removed, oldest first.
    pub snapshots: Vec<i64>,
    /// Metadata files deleted with them.
    pub deleted_files: Vec<String>,
    /// The version written (0 when nothing expired).
    pub version: u64,
    /// The snapshot (a Delta target's version) kept, with every one after it, because
    /// [`Retention::cuts`] allowed no later cut that the rest of the retention asked for.
    pub held_at: Option<i64>,
}

/// One snapshot, as `snapshots` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotEntry {
    /// Its sequence number.
    pub sequence_number: i64,
    /// Its id.
    pub snapshot_id: i64,
    /// Its parent, if any.
    pub parent_snapshot_id: Option<i64>,
    /// Its time (the source commit's), ms since the epoch.
    pub timestamp_ms: i64,
    /// The same as an ISO-8601 instant.
    pub time: String,
    /// `append`, `overwrite`, `delete` or `replace`.
    pub operation: String,
    /// Whether it is the current snapshot.
    pub current: bool,
    /// `HUDI` or `DELTA`, if the snapshot records a source commit.
    pub source_format: Option<String>,
    /// The source commit it records (Hudi instant, Delta version).
    pub source_commit: Option<String>,
    /// `<id>.<action>` of that commit, when recorded.
    pub source_operation: Option<String>,
}

/// One snapshot of the current ancestry and the source commit it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ancestor {
    /// The snapshot.
    pub snapshot_id: i64,
    /// The source commit it records, if any.
    pub source_commit: Option<String>,
}

/// The snapshots of the loaded version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetView {
    /// Every snapshot read (all of them after [`Read::Whole`]), oldest first.
    pub snapshots: Vec<SnapshotEntry>,
    /// The current ancestry, oldest first.
    pub ancestry: Vec<Ancestor>,
}

/// A snapshot of the current ancestry whose manifest list is gone: readers of that
/// snapshot (time travel, incremental reads) fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingList {
    /// The snapshot.
    pub snapshot_id: i64,
    /// Its manifest list's location.
    pub manifest_list: String,
}

/// A file other than a data file that a retained version reads and that is gone (a
/// Delta deletion vector file): readers of that version fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingFile {
    /// The (newest) version that names it.
    pub snapshot_id: i64,
    /// The file's location.
    pub file: String,
    /// What the file is.
    pub what: String,
}

/// The target's own findings on the loaded version, for `check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelfCheck {
    /// Snapshots of the current ancestry whose manifest list is gone (none listed for a
    /// relocated table: its files are named at the old place).
    pub missing_manifest_lists: Vec<MissingList>,
    /// Other files retained versions read that are gone.
    pub missing_files: Vec<MissingFile>,
}

/// Files and bytes of one kind of metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Files {
    /// Number of files.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// The target's side of `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TargetHealth {
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
    /// What the current snapshot records as mirrored in a degraded way.
    #[serde(skip)]
    pub degraded: Vec<String>,
}

/// The old history a rebuild set aside.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rebuilt {
    /// The location(s) the old metadata was written for.
    pub old_locations: Vec<String>,
    /// Where its files are now (a folder beside `metadata/`).
    pub set_aside_in: String,
    /// How many files were moved there.
    pub files: usize,
}

/// What [`TableTarget::set_aside_relocated`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetAside {
    /// Nothing written for another location: nothing to move.
    Nothing,
    /// The current version is still the one written for this other location (nothing was
    /// mirrored here): the old history stays.
    StillElsewhere(String),
    /// The old history moved aside.
    Moved(Rebuilt),
}

/// Metadata files for `cleanup`, table-relative.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Orphans {
    /// Files the target wrote that no retained version references.
    pub files: Vec<String>,
    /// Files the target did not write (never deleted).
    pub others: Vec<String>,
    /// Versions above the current one past a gap, which no reader loads (never deleted).
    pub strays: Vec<String>,
}

/// What a catalog pointer of the loaded table should name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    /// The current version.
    pub version: u64,
    /// The table's identity (Iceberg's `table-uuid`).
    pub uuid: String,
    /// The current snapshot, if any (a catalog that moves by commit judges its entry by
    /// it).
    pub snapshot_id: Option<i64>,
}

/// What a file a catalog entry names in the table's metadata folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identified {
    /// No such file.
    Missing,
    /// Not a version of this table (another identity, or not table metadata at all).
    Stranger,
    /// A version of this table.
    Ours,
}

/// A sync that ended with nothing pending: at target version `version`, every commit the
/// source listed when its newest state was `source_tip` is mirrored. A target may keep it
/// beside that version ([`TableTarget::remember_settled`]) as a cache for the next pass of
/// a scheduled job, which then need not read the version when neither side has moved
/// ([`TableTarget::settled`]). It is never trusted over the metadata: a target gives it
/// back only while its current version is still `version`, as cheaply proven.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Settled {
    /// The target's version the sync ended on.
    pub version: u64,
    /// The source format its snapshots record (`DELTA`).
    pub source_format: String,
    /// The newest source commit mirrored (where a source reads its log from).
    pub newest: Option<String>,
    /// The source's newest state when the sync listed it (`TableSource::tip`).
    pub source_tip: String,
    /// Completed source commits listed then (for the report).
    pub source_commits: usize,
    /// Snapshots the version retains (an expiry of one snapshot removes nothing).
    pub snapshots: usize,
    /// The target's format version.
    pub format_version: u8,
}

/// The future [`TableTarget::identify`] returns.
pub type IdentifyFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Identified, TargetError>> + Send>>;

/// A target table opened for writing and reading; a session over one table (see the
/// crate docs for the base a load keeps). Its futures need not be `Send` (the engine
/// runs a table's commands on one task; the service runs them on a blocking thread).
#[async_trait::async_trait(?Send)]
pub trait TableTarget: Send + Sync {
    /// Read the current version as `read` says and keep it as the base of the next
    /// publish; `None` when the table has no metadata yet.
    async fn load(&mut self, read: Read) -> Result<Option<Loaded>, TargetError>;

    /// What the loaded version mirrors, for the source (nothing when relocated). The
    /// live files are left for [`Self::live_files`].
    fn mirror_state(&self) -> MirrorState;

    /// Whether a snapshot of the loaded version records the note `key` = `value` (an
    /// operator choice a source records, see `xlake_source::RecordedChoice`).
    fn records_note(&self, key: &str, value: &str) -> bool;

    /// Before a plan: repair what a crashed writer left (a stale pointer file), and move
    /// the loaded version to the configured format version; a relocated base instead
    /// keeps its own format version for the history written after it.
    async fn prepare(&mut self) -> Result<FormatChange, TargetError>;

    /// Load and upgrade the table to the configured format version now (`xlake upgrade`);
    /// an error when there is no table yet.
    async fn upgrade(&mut self) -> Result<FormatChange, TargetError>;

    /// What the target takes from a source as it stores it, for the loaded version.
    fn takes(&self) -> TargetTakes;

    /// The data files live in the loaded version (location, rows), read only when that
    /// costs at most `max_reads` metadata reads; `None` otherwise.
    async fn live_files(&self, max_reads: usize)
        -> Result<Option<Vec<(String, u64)>>, TargetError>;

    /// What the loaded version deletes from its live data files, read when asked (its
    /// deletion vectors), for a source that resumes after the commit it mirrors
    /// ([`MirrorState::deletes`]); `None` when the target cannot tell (or the loaded
    /// version is another location's). None by default.
    fn mirrored_deletes(&self) -> Option<MirroredDeletesRef> {
        None
    }

    /// Read now what the next [`Self::publish`] on the loaded version reads first (Iceberg:
    /// the current snapshot's manifest list), while the source reads the commits to
    /// publish: on an object store one round trip fewer. A failure is left for the
    /// publish to meet; nothing by default.
    async fn read_ahead(&self) {}

    /// Publish `batch` on the kept base behind put-if-absent, one snapshot per change set;
    /// the version written becomes the base of the next publish. `last`: no batch of this
    /// run follows (a target may keep what a run builds up, such as Iceberg's path index,
    /// for its last batch only).
    async fn publish(&mut self, batch: &[&ChangeSet], last: bool) -> Published;

    /// A table with `declared`'s schema and no snapshot, when there is none yet; the
    /// version written.
    async fn create_empty(&mut self, declared: &DeclaredTable) -> Result<Option<u64>, TargetError>;

    /// Expire what `retention` says, and every snapshot that reads a data file the source
    /// deleted; deletes only metadata files the target wrote.
    async fn expire(&self, retention: &Retention) -> Result<Expired, TargetError>;

    /// The snapshots of the loaded version.
    fn view(&self) -> TargetView;

    /// The data files of a retained snapshot of the loaded version (location, rows).
    async fn files_at(&self, snapshot_id: i64) -> Result<Option<Vec<(String, u64)>>, TargetError>;

    /// The target's own check of the loaded version: an error when readers cannot find
    /// it, findings when parts of its history are gone.
    async fn self_check(&self) -> Result<SelfCheck, TargetError>;

    /// The target's side of `inspect`.
    async fn health(&self) -> Result<TargetHealth, TargetError>;

    /// Once the current version is this location's own, move every version written for
    /// another location, and the metadata it names, aside (never deleted).
    async fn set_aside_relocated(&self) -> Result<SetAside, TargetError>;

    /// Metadata files the target wrote that nothing references, older than `cutoff_ms`.
    async fn orphans(&self, cutoff_ms: i64) -> Result<Orphans, TargetError>;

    /// Whether the location holds the target's metadata, from names alone.
    async fn exists(&self) -> Result<bool, TargetError>;

    /// What a catalog pointer should name: the loaded version.
    fn pointer(&self) -> Option<Pointer>;

    /// The [`Settled`] record of the version the last load or publish left as the base,
    /// with the source's `tip` and `source_commits` as the sync listed them; `None` when
    /// there is no base, it is relocated, or the target keeps no such record.
    fn settled_record(&self, tip: &str, source_commits: usize) -> Option<Settled> {
        let _ = (tip, source_commits);
        None
    }

    /// Keep `settled` beside its version, replacing what was kept (only after a sync that
    /// ended there with nothing pending). Nothing by default.
    async fn remember_settled(&self, settled: &Settled) -> Result<(), TargetError> {
        let _ = settled;
        Ok(())
    }

    /// The kept [`Settled`] record, only when cheaply proven to be of the table's current
    /// version (pointer and version unmoved, written for this location); `None` when
    /// missing, damaged, stale or unproven, or when the target keeps none.
    async fn settled(&self) -> Result<Option<Settled>, TargetError> {
        Ok(None)
    }

    /// What the file `name` of the metadata folder is, against the table's `uuid` (a
    /// `Send` future: catalogs ask it from their own tasks).
    fn identify(&self, name: &str, uuid: &str) -> IdentifyFuture;
}
