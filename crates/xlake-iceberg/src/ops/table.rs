//! The Iceberg table in `<root>/metadata/`: loading its current version, and the commit
//! of change sets as snapshots.
//!
//! A commit reads the current `vN.metadata.json`, plans each new snapshot in memory and
//! writes its manifests and manifest list under fresh names ([`crate::ops::plan`]), then
//! creates `v(N+1).metadata.json` with put-if-absent and rewrites `version-hint.text`
//! ([`crate::ops::publish`]). Until that put succeeds nothing a reader sees has changed; a
//! writer that loses the race gets [`IcebergError::CommitConflict`].

use std::collections::HashMap;

use bytes::Bytes;
use iceberg::spec::{ManifestContentType, ManifestFile, Snapshot, TableMetadata};
use xlake_storage::{StorageError, TableStore};

use crate::error::{IcebergError, Result};
use crate::ops::live_paths::PathCache;
use crate::spec::error::CodecError;
use crate::spec::history::{split, History, SnapshotHead};
pub(crate) use crate::spec::layout::METADATA_DIR;
use crate::spec::layout::{is_metadata_json, metadata_file_name, version_of, Hint, VERSION_HINT};
pub use crate::spec::layout::{metadata_file, parse_hint};
use crate::spec::manifest::read::Live;
use crate::spec::manifest::{may_hold_live, read_manifest_bytes, Held};
use crate::spec::manifest_list::{read_list_file, ListFile};
use crate::spec::summary::{SyncMetadata, XTABLE_METADATA};
use std::sync::{Arc, Mutex};

/// Table property: delete metadata files that fall out of the metadata log.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
/// Table property: the metrics mode engines assume for columns without their own.
pub const METRICS_MODE_DEFAULT: &str = "write.metadata.metrics.default";
/// Table property: how many previous metadata files the metadata log keeps.
pub const PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
/// Table property naming the source format of a table xlake created without a snapshot
/// (which has no `XTABLE_METADATA` to tell it is ours).
pub const SOURCE_FORMAT_PROPERTY: &str = "xlake.source-format";

/// Whether xlake (or XTable) wrote `metadata`: its current snapshot records the source
/// commit (`XTABLE_METADATA`), or, with no snapshot, the table was created by xlake before
/// the source's first commit.
pub(crate) fn written_by_xlake(metadata: &TableMetadata) -> bool {
    match metadata.current_snapshot() {
        Some(s) => s
            .summary()
            .additional_properties
            .contains_key(XTABLE_METADATA),
        None => metadata.properties().contains_key(SOURCE_FORMAT_PROPERTY),
    }
}
/// Table property: the source's state as of the current snapshot
/// ([`ChangeSet::source_state`](xlake_model::ChangeSet::source_state)); only the newest is
/// kept, so the history does not grow with it.
pub const SOURCE_STATE: &str = "xlake.source-state";
/// Table property: the store (origin and endpoint) on which put-if-absent was shown to
/// work by the probe before this table's first commit there; a later process writing to
/// the same store makes no probe (`TableStore::put_if_absent_recorded`).
pub const PUT_IF_ABSENT_VERIFIED: &str = "xlake.put-if-absent-verified";
/// How many data files have their existence checked (and footers read) at once.
pub(crate) const FILE_CHECK_CONCURRENCY: usize = 16;

pub use crate::spec::decode::parse_metadata;

/// The smallest `vN.metadata.json` parsed on a blocking thread (see [`Parse::read_apart`]).
const PARSE_APART_MIN: usize = 64 * 1024;

/// How much of a `vN.metadata.json` is parsed.
#[derive(Debug, Clone, Copy)]
enum Parse {
    /// Every snapshot.
    Whole,
    /// The working snapshots; the others carried (see [`crate::spec::history`]).
    ForCommit,
}

impl Parse {
    /// `bytes` read from `vN.metadata.json` of `version`.
    fn read(
        self,
        bytes: &Bytes,
        version: u64,
    ) -> std::result::Result<(TableMetadata, History), CodecError> {
        if let Parse::ForCommit = self {
            if let Ok(split) = split(bytes, Some(&metadata_file_name(version))) {
                return Ok(split);
            }
            // Not the layout a split reads (a v1 table...): parse it whole, which says
            // what is wrong if anything is.
        }
        let metadata = parse_metadata(bytes)?;
        let history = History::of(&metadata);
        Ok((metadata, history))
    }

    /// [`Self::read`] on a blocking thread: a long history's metadata takes milliseconds
    /// to parse, during which the caller's other work (a source's listing and its
    /// parsing, in-commit) goes on. A small one (below [`PARSE_APART_MIN`]) is parsed
    /// here: its parse costs less than the hand-off to another thread and back (a no-op
    /// pass over a fleet of small tables makes one per table).
    async fn read_apart(
        self,
        bytes: Bytes,
        version: u64,
    ) -> std::result::Result<(TableMetadata, History), CodecError> {
        if bytes.len() < PARSE_APART_MIN {
            return self.read(&bytes, version);
        }
        match tokio::task::spawn_blocking(move || self.read(&bytes, version)).await {
            Ok(read) => read,
            // A panic is xlake's own bug, not the file's: it goes on as it would have on
            // the caller's thread.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only as the runtime shuts down, which drops the caller too.
            Err(e) => Err(CodecError::within("parsing stopped")(e)),
        }
    }
}

/// The current version of the table.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// N of `vN.metadata.json`.
    pub version: u64,
    /// Its contents: every field, and every snapshot unless loaded for a commit
    /// ([`IcebergTable::load_for_commit`]), which parses only the current snapshot and
    /// those a ref names and carries the others in `history`.
    pub metadata: TableMetadata,
    /// Every snapshot's head (ids, time, manifest list, what it mirrors), and the JSON
    /// text of the snapshots `metadata` does not hold.
    pub history: Arc<History>,
    /// `version-hint.text` does not name this version exactly (missing; older: a writer
    /// died between the metadata file and the hint; or spelled otherwise, as `"2\n"`).
    /// Readers that trust the hint (pyiceberg, DuckDB) do not see this version until
    /// [`IcebergTable::heal_hint`] rewrites it.
    pub hint_stale: bool,
}

impl LoadedTable {
    /// The source's state as of the current snapshot, as its change set gave it.
    pub fn source_state(&self) -> Option<&str> {
        self.metadata
            .properties()
            .get(SOURCE_STATE)
            .map(String::as_str)
    }

    /// The source format the mirror records (`HUDI`, `DELTA`, `PARQUET`): the current
    /// snapshot's `sourceTableFormat` (in `XTABLE_METADATA`), else, for a table created
    /// before the source's first commit, its `xlake.source-format` property.
    pub fn source_format(&self) -> Option<String> {
        match self.metadata.current_snapshot() {
            Some(s) => SyncMetadata::from_summary(&s.summary().additional_properties)
                .and_then(|m| m.source_table_format),
            None => self
                .metadata
                .properties()
                .get(SOURCE_FORMAT_PROPERTY)
                .cloned(),
        }
    }

    /// The current snapshot id (what a plan is based on) and the source commits mirrored
    /// so far, oldest first.
    pub fn head(&self) -> (Option<i64>, Vec<(i64, SyncMetadata)>) {
        let head = self.metadata.current_snapshot().map(|s| s.snapshot_id());
        let synced = self.in_commit_order(|h| h.sync());
        (head, synced)
    }

    /// The source commits mirrored so far, oldest first, as [`Self::head`] lists them but
    /// only their identifiers (what a sync needs of every snapshot): (snapshot id, the
    /// source commit's identifier if its record has one).
    /// Read from each snapshot's entry (see [`crate::spec::snapshot_index`]), not its head.
    pub fn mirrored(&self) -> Vec<(i64, Option<String>)> {
        let mut entries: Vec<_> = self.history.entries().iter().collect();
        entries.sort_unstable_by_key(|e| e.order()); // ids are unique
        entries
            .into_iter()
            .filter_map(|e| Some((e.id, e.mirrors.as_ref()?.as_deref().map(String::from))))
            .collect()
    }

    /// What `read` gives of each snapshot that has it, with the snapshot's id, oldest
    /// (by sequence number, then time, then id, as [`Entry::order`](crate::spec::snapshot_index::Entry::order)) first.
    fn in_commit_order<T>(&self, read: impl Fn(&SnapshotHead) -> Option<T>) -> Vec<(i64, T)> {
        let mut heads: Vec<&SnapshotHead> = self.history.heads().iter().collect();
        heads.sort_by_key(|h| (h.sequence_number, h.timestamp_ms, h.snapshot_id));
        heads
            .into_iter()
            .filter_map(|h| Some((h.snapshot_id, read(h)?)))
            .collect()
    }

    /// The snapshots of the current ancestry, oldest first: (snapshot id, time, what it
    /// mirrors).
    pub fn ancestry(&self) -> Vec<(i64, i64, Option<SyncMetadata>)> {
        let mut out = Vec::new();
        let mut next = self.metadata.current_snapshot_id();
        // At most every snapshot once: a parent cycle (a broken table) ends the walk.
        while let Some(h) = next
            .filter(|_| out.len() < self.history.heads().len())
            .and_then(|id| self.history.head(id))
        {
            out.push((h.snapshot_id, h.timestamp_ms, h.sync()));
            next = h.parent_snapshot_id;
        }
        out.reverse();
        out
    }
}

/// The Iceberg side of one table, rooted where the source table lives.
#[derive(Debug, Clone)]
pub struct IcebergTable {
    pub(crate) store: TableStore,
    pub(crate) properties: HashMap<String, String>,
    pub(crate) verify_files: bool,
    /// The format version asked for (`None`: the table's own, 2 for a new table).
    pub(crate) format_version: Option<iceberg::spec::FormatVersion>,
    /// Per manifest read or written by this process, the paths its live entries are
    /// about (see [`PathCache`]), so a backfill that removes files reads each manifest
    /// once, not once per commit.
    pub(crate) live_paths: PathCache,
    /// The path index chains read, and those set aside (see [`crate::path_index`]).
    pub(crate) path_index: Arc<Mutex<crate::ops::path_index::chain::IndexState>>,
    /// A manifest list read ahead of the commit that reads it (see
    /// [`Self::read_ahead_list`]): its location and bytes.
    pub(crate) read_ahead: Arc<Mutex<Option<(String, Bytes)>>>,
}

impl IcebergTable {
    /// The Iceberg table in `store`'s `metadata/` folder.
    pub fn new(store: TableStore) -> Self {
        // The limit on what one Avro value may claim (see xlake-hudi's
        // `AVRO_MAX_ALLOCATION`); manifests are written in 16 KB blocks, far below it.
        apache_avro::util::max_allocation_bytes(16 << 20);
        Self {
            store,
            properties: HashMap::new(),
            verify_files: true,
            format_version: None,
            live_paths: Arc::default(),
            path_index: Arc::default(),
            read_ahead: Arc::default(),
        }
    }

    /// Table properties set on creation and kept on every commit
    /// (`write.metadata.previous-versions-max`, `write.metadata.delete-after-commit.enabled`, …).
    pub fn with_properties(mut self, properties: HashMap<String, String>) -> Self {
        self.properties = properties;
        self
    }

    /// Whether to check that every added file exists with the recorded size (default true).
    pub fn verify_files(mut self, verify: bool) -> Self {
        self.verify_files = verify;
        self
    }

    /// The Iceberg format version to write: a new table gets it, an older table is
    /// upgraded to it in its next snapshot (see [`crate::ops::v3`]).
    pub fn format_version(mut self, version: iceberg::spec::FormatVersion) -> Self {
        self.format_version = Some(version);
        self
    }

    pub(crate) fn table(&self) -> String {
        self.store.location().to_string()
    }

    pub(crate) fn corrupt(&self, file: &str, reason: impl Into<CodecError>) -> IcebergError {
        IcebergError::CorruptMetadata {
            table: self.table(),
            file: self.store.absolute(file),
            reason: reason.into(),
        }
    }

    pub(crate) fn spec_error(&self, context: &str) -> impl Fn(iceberg::Error) -> IcebergError + '_ {
        let context = context.to_string();
        move |source| IcebergError::Spec {
            table: self.table(),
            context: context.clone(),
            source: Box::new(source),
        }
    }

    /// The current version, or `None` when no Iceberg table exists yet. Refuses metadata
    /// that xlake (or XTable) did not write, and metadata written for another location
    /// ([`IcebergError::Relocated`]: the table folder was copied or moved).
    pub async fn load(&self) -> Result<Option<LoadedTable>> {
        self.load_checked(Parse::Whole, true).await
    }

    /// [`Self::load`] for a commit: every snapshot but the current one and those a ref
    /// names is carried as its JSON text, unparsed (see [`crate::spec::history`]). For what
    /// builds on the current snapshot only; what reads older snapshots loads whole.
    pub async fn load_for_commit(&self) -> Result<Option<LoadedTable>> {
        self.load_checked(Parse::ForCommit, true).await
    }

    /// [`Self::load_for_commit`] of the version the hint names, not looked past (one
    /// request less): a newer version (a writer died before its hint) makes the commit's
    /// put-if-absent fail as a lost race, and the plan after it loads with
    /// [`Self::load_for_commit`]. With no hint, the highest version listed, as always.
    pub async fn load_for_commit_by_hint(&self) -> Result<Option<LoadedTable>> {
        self.load_checked(Parse::ForCommit, false).await
    }

    async fn load_checked(&self, parse: Parse, look_past: bool) -> Result<Option<LoadedTable>> {
        let loaded = self.read_current_with(parse, look_past).await?;
        if let Some(l) = &loaded {
            if let Some(recorded) = self.recorded_elsewhere(l) {
                return Err(IcebergError::Relocated {
                    table: self.table(),
                    file: self.store.absolute(&metadata_file(l.version)),
                    recorded: recorded.to_string(),
                });
            }
        }
        Ok(loaded)
    }

    /// The location `loaded` records, when it is not this table's: the folder was copied or
    /// moved since (see [`TableStore::is_here`] for what counts as the same place).
    pub fn recorded_elsewhere<'a>(&self, loaded: &'a LoadedTable) -> Option<&'a str> {
        let recorded = loaded.metadata.location();
        (!self.store.is_here(recorded)).then_some(recorded)
    }

    /// [`Self::load`], also when the metadata was written for another location (for
    /// reports, and to rebuild; see [`Self::recorded_elsewhere`]).
    pub async fn load_as_found(&self) -> Result<Option<LoadedTable>> {
        self.read_current(Parse::Whole).await
    }

    /// `loaded` with every snapshot parsed: itself when it carries none, else its version
    /// read again whole (for what rewrites old snapshots, such as a format upgrade).
    pub(crate) async fn whole(&self, loaded: &LoadedTable) -> Result<LoadedTable> {
        if loaded.history.is_whole() {
            return Ok(loaded.clone());
        }
        let path = metadata_file(loaded.version);
        let bytes = self.store.get_written_once(&path).await?;
        let (metadata, history) = Parse::Whole
            .read(&bytes, loaded.version)
            .map_err(|e| self.corrupt(&path, e))?;
        Ok(LoadedTable {
            metadata,
            history: Arc::new(history),
            ..loaded.clone()
        })
    }

    /// The current version as every reader of the table finds it: the hint's, or the newest
    /// consecutive one after it; with no hint, the highest `vN` listed. `None`: no metadata.
    /// A `vN` above it past a gap is a stray, never the current version.
    pub async fn current_version(&self) -> Result<Option<u64>> {
        Ok(self.locate_current(true).await?.map(|(version, _)| version))
    }

    /// [`Self::current_version`], with the hint as read.
    async fn locate_current(&self, look_past: bool) -> Result<Option<(u64, Option<Hint>)>> {
        let hinted = match self.store.get_small(VERSION_HINT).await {
            Ok(bytes) => Some(parse_hint(&bytes).map_err(|e| self.corrupt(VERSION_HINT, e))?),
            // A folder there is no missing hint: the hint could never be written again.
            Err(StorageError::NotFound { .. }) if self.store.is_local_folder(VERSION_HINT) => {
                let why = "a folder where the version hint file belongs (xlake never writes one there); nothing was changed: remove or rename it";
                return Err(self.corrupt(VERSION_HINT, why));
            }
            Err(StorageError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let version = match hinted {
            Some(h) if look_past => self.newest_from(h.version).await?,
            Some(h) => h.version,
            None => match self.listed_version().await? {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        Ok(Some((version, hinted)))
    }

    async fn read_current(&self, parse: Parse) -> Result<Option<LoadedTable>> {
        self.read_current_with(parse, true).await
    }

    async fn read_current_with(
        &self,
        parse: Parse,
        look_past: bool,
    ) -> Result<Option<LoadedTable>> {
        let Some((version, hinted)) = self.locate_current(look_past).await? else {
            return Ok(None);
        };
        let path = metadata_file(version);
        let bytes = match self.store.get_written_once(&path).await {
            Ok(bytes) => bytes,
            // A folder (or a link to nothing) where the hint's version belongs is named as
            // such, not "not found".
            Err(e) => return Err(self.not_a_metadata_file(version).unwrap_or(e.into())),
        };
        let read = parse.read_apart(bytes, version).await;
        let (metadata, history) = read.map_err(|e| self.corrupt(&path, e))?;
        if !written_by_xlake(&metadata) {
            return Err(IcebergError::ForeignMetadata {
                table: self.table(),
                file: self.store.absolute(&path),
            });
        }
        Ok(Some(LoadedTable {
            version,
            metadata,
            history: Arc::new(history),
            hint_stale: !hinted.is_some_and(|h| h.names_exactly(version)),
        }))
    }

    /// The newest version from `version` on. Like Java's `HadoopTableOperations`: a newer
    /// `vN` than the hint wins (a writer died between the metadata file and the hint).
    pub(crate) async fn newest_from(&self, mut version: u64) -> Result<u64> {
        while self.version_exists(version + 1).await? {
            version += 1;
        }
        Ok(version)
    }

    /// Whether `vN.metadata.json` of `version` exists; a folder of that name is refused
    /// ([`IcebergError::NotAMetadataFile`]): it is no version, and none can be written.
    /// So is what cannot be looked up there (a FIFO, a loop of links), named as such.
    pub(crate) async fn version_exists(&self, version: u64) -> Result<bool> {
        let path = metadata_file(version);
        let size = match self.store.size(&path).await {
            Ok(size) => size,
            Err(e) => return Err(self.not_a_metadata_file(version).unwrap_or(e.into())),
        };
        if size.is_none() {
            return Ok(false);
        }
        match self.not_a_metadata_file(version) {
            Some(folder) => Err(folder),
            None => Ok(true),
        }
    }

    /// On a local disk, the error naming what stands where `version`'s metadata file
    /// belongs when it is no file (a folder, a FIFO, a link to nothing or that cannot be
    /// followed: [`TableStore::local_non_file`]); `None` otherwise. It costs a `stat`:
    /// asked where the file was found, or on error paths.
    ///
    /// [`TableStore::local_non_file`]: xlake_storage::TableStore::local_non_file
    pub(crate) fn not_a_metadata_file(&self, version: u64) -> Option<IcebergError> {
        let what = self.store.local_non_file(&metadata_file(version))?;
        Some(self.not_a_metadata_file_as(version, what))
    }

    /// The error naming `what` stands where `version`'s metadata file belongs.
    pub(crate) fn not_a_metadata_file_as(&self, version: u64, what: &'static str) -> IcebergError {
        IcebergError::NotAMetadataFile {
            table: self.table(),
            version,
            file: self.store.absolute(&metadata_file(version)),
            what,
        }
    }

    /// The highest `vN` in `metadata/`, when there is no hint; `None` when there is no
    /// metadata. Metadata files only another writer names are refused.
    pub(crate) async fn listed_version(&self) -> Result<Option<u64>> {
        let listed = self.store.list_dir(METADATA_DIR).await?;
        if let Some(v) = listed.iter().filter_map(|e| version_of(&e.path)).max() {
            return Ok(Some(v));
        }
        match listed.iter().find(|e| is_metadata_json(&e.path)) {
            Some(foreign) => Err(IcebergError::ForeignMetadata {
                table: self.table(),
                file: self.store.absolute(&foreign.path),
            }),
            None => Ok(None),
        }
    }

    /// The source commits mirrored so far: each snapshot's [`SyncMetadata`], oldest first.
    pub async fn synced_commits(&self) -> Result<Vec<(i64, SyncMetadata)>> {
        Ok(self.head().await?.1)
    }

    /// The current snapshot id (what a plan is based on) and the source commits mirrored
    /// so far, oldest first, from one read of the metadata.
    pub async fn head(&self) -> Result<(Option<i64>, Vec<(i64, SyncMetadata)>)> {
        Ok(self.load().await?.map_or((None, Vec::new()), |l| l.head()))
    }

    /// The live data files of the current snapshot of `metadata` (location to size in
    /// bytes), and whether it has live delete files: its manifest list read once.
    pub(crate) async fn live_files_and_deletes(
        &self,
        metadata: Option<&TableMetadata>,
    ) -> Result<(HashMap<String, u64>, bool)> {
        let Some(snapshot) = metadata.and_then(|m| m.current_snapshot()) else {
            return Ok((HashMap::new(), false));
        };
        let list = self.manifest_list(snapshot).await?;
        let deletes = list
            .iter()
            .any(|m| m.content == ManifestContentType::Deletes && may_hold_live(m));
        let live = self.live_entries(&list).await?;
        Ok((
            live.into_iter().map(|f| (f.path, f.size)).collect(),
            deletes,
        ))
    }

    /// The live data file entries of a snapshot (location, row count); a location listed
    /// twice appears twice.
    async fn snapshot_entries(&self, snapshot: Option<&Snapshot>) -> Result<Vec<(String, u64)>> {
        match snapshot {
            Some(snapshot) => Ok(rows(
                self.live_entries(&self.manifest_list(snapshot).await?)
                    .await?,
            )),
            None => Ok(Vec::new()),
        }
    }

    /// The manifests `snapshot`'s list names.
    pub(crate) async fn manifest_list(&self, snapshot: &Snapshot) -> Result<Vec<ManifestFile>> {
        let list = self.list_file(snapshot).await?;
        let location = list.location.clone();
        list.manifests().map_err(|e| self.corrupt(&location, e))
    }

    /// `snapshot`'s manifest list, with its bytes.
    pub(crate) async fn list_file(&self, snapshot: &Snapshot) -> Result<ListFile> {
        let location = snapshot.manifest_list();
        let ahead = self.read_ahead.lock().ok().and_then(|mut a| a.take());
        if let Some((_, bytes)) = ahead.filter(|(read, _)| read == location) {
            return Ok(ListFile {
                location: location.to_string(),
                decoded: None,
                bytes,
            });
        }
        read_list_file(&self.store, location)
            .await
            .map_err(|e| self.corrupt(location, e))
    }

    /// Read the manifest list of `loaded`'s current snapshot now, for the next commit on
    /// it to take instead of reading it (the engine reads it while the source reads the
    /// commits to publish: one round trip fewer on an object store). A failure is left
    /// for that commit's own read to meet and report.
    pub async fn read_ahead_list(&self, loaded: &LoadedTable) {
        let Some(snapshot) = loaded.metadata.current_snapshot() else {
            return;
        };
        let location = snapshot.manifest_list();
        if let Ok(bytes) = self.store.get_written_once(location).await {
            if let Ok(mut ahead) = self.read_ahead.lock() {
                *ahead = Some((location.to_string(), bytes));
            }
        }
    }

    /// The live data file entries of the data manifests of a list.
    /// What each manifest holds is remembered (see [`PathCache`]), so that a commit on top
    /// of it that removes files reads only the manifests holding them.
    async fn live_entries(&self, manifests: &[ManifestFile]) -> Result<Vec<Live>> {
        let mut live = Vec::new();
        for mf in manifests
            .iter()
            .filter(|m| m.content == ManifestContentType::Data)
        {
            let bytes = read_manifest_bytes(&self.store, mf).await;
            let bytes = bytes.map_err(|e| self.corrupt(&mf.manifest_path, e))?;
            // Paths, row counts and sizes only, without the stats, where the fast read
            // takes it.
            match self.remember(mf, &bytes)?.1 {
                Held::Paths(files) => live.extend(files),
                Held::Entries(entries) => {
                    live.extend(entries.iter().filter(|e| e.is_alive()).map(Live::of));
                }
            }
        }
        Ok(live)
    }

    /// The live data file entries of a retained snapshot (location, row count), if it
    /// exists; a location listed twice (a broken table) appears twice.
    pub async fn files_at(
        &self,
        metadata: &TableMetadata,
        snapshot_id: i64,
    ) -> Result<Option<Vec<(String, u64)>>> {
        match metadata.snapshot_by_id(snapshot_id) {
            Some(s) => Ok(Some(self.snapshot_entries(Some(s.as_ref())).await?)),
            None => Ok(None),
        }
    }

    /// The live data files of `loaded`'s current snapshot (location, row count), read
    /// only when it has at most `max_manifests` data manifests; `None` when it has more,
    /// or no snapshot.
    pub async fn current_files(
        &self,
        loaded: &LoadedTable,
        max_manifests: usize,
    ) -> Result<Option<Vec<(String, u64)>>> {
        let Some(snapshot) = loaded.metadata.current_snapshot() else {
            return Ok(None);
        };
        let list = self.manifest_list(snapshot).await?;
        let data = list
            .iter()
            .filter(|m| m.content == ManifestContentType::Data)
            .count();
        if data > max_manifests {
            return Ok(None);
        }
        Ok(Some(rows(self.live_entries(&list).await?)))
    }

    /// Number of manifests of the current snapshot.
    pub async fn current_manifests(&self) -> Result<usize> {
        let Some(loaded) = self.load().await? else {
            return Ok(0);
        };
        let Some(snapshot) = loaded.metadata.current_snapshot() else {
            return Ok(0);
        };
        Ok(self.manifest_list(snapshot).await?.len())
    }

    /// The snapshots of the current ancestry, oldest first: (snapshot id, time, what it
    /// mirrors).
    pub async fn ancestry(&self) -> Result<Vec<(i64, i64, Option<SyncMetadata>)>> {
        Ok(self
            .load_for_commit()
            .await?
            .map_or(Vec::new(), |l| l.ancestry()))
    }
}

/// Live data files as (location, row count).
fn rows(live: Vec<Live>) -> Vec<(String, u64)> {
    live.into_iter().map(|f| (f.path, f.records)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::FormatVersion;
    use xlake_model::{
        ChangeSet, DataFile, Field, PartitionSpec, PrimitiveType, Schema, SourceCommit,
        SourceFormat,
    };

    fn change(id: i64, path: &str) -> ChangeSet {
        let commit = SourceCommit {
            format: SourceFormat::new("DELTA"),
            id: id.to_string(),
            action: "WRITE".into(),
            requested_ms: None,
            commit_time_ms: 1_700_000_000_000 + id,
        };
        let schema = Schema::new(vec![Field::required("id", PrimitiveType::Long)]);
        let mut change = ChangeSet::new(commit, schema, PartitionSpec::unpartitioned());
        let mut file = DataFile::parquet(path, 100, Some(10));
        file.column_stats = vec![("id".into(), Default::default())];
        change.added = vec![file];
        change
    }

    /// A commit on a table loaded for a commit parses only the current snapshot: the
    /// others are written back as the text they were read as, in their places, and the
    /// result reads back whole with every snapshot and the whole snapshot log.
    #[tokio::test]
    async fn a_commit_carries_older_snapshots_as_they_were_written() {
        let (dir, table) = table_with_commits(5).await;
        let loaded = table.load_for_commit().await.unwrap().unwrap();
        assert_eq!(loaded.metadata.snapshots().count(), 1);
        assert_eq!(loaded.history.carried_count(), 4);
        let whole = table.load().await.unwrap().unwrap();
        assert_eq!(loaded.head(), whole.head());
        assert_eq!(loaded.ancestry(), whole.ancestry());
        let read = |v: u64| std::fs::read(dir.path().join(metadata_file(v))).unwrap();
        let before = read(5);
        table.commit(&change(6, "6.parquet")).await.unwrap();
        let after = read(6);
        assert_one_added(&before, &after);
        let text = String::from_utf8(after.clone()).unwrap();
        for raw in crate::spec::history::split(&before.into(), None)
            .unwrap()
            .1
            .carried()
        {
            let raw = std::str::from_utf8(&raw.json).unwrap();
            assert!(text.contains(raw), "carried as written");
        }
        let reread = parse_metadata(&after).unwrap();
        assert_eq!(reread.snapshots().count(), 6);
        assert_eq!(reread.history().len(), 6);
        assert_eq!(reread.metadata_log().len(), 5);
        let ids: Vec<i64> = ancestry_ids(&table).await;
        assert_eq!(ids.len(), 6);
    }

    /// A format upgrade rewrites every snapshot in the new format (a v1 snapshot's text
    /// is not a valid v2 snapshot): a table loaded for a commit is read whole first.
    #[tokio::test]
    async fn an_upgrade_of_a_table_loaded_for_a_commit_carries_no_old_text() {
        let (dir, v2) = table_with_commits(3).await;
        let loaded = v2.load_for_commit().await.unwrap().unwrap();
        assert_eq!(loaded.history.carried_count(), 2);
        let v3 = v2.clone().format_version(FormatVersion::V3);
        let upgraded = v3.upgrade(&loaded).await.unwrap().unwrap();
        assert_eq!(upgraded.history.carried_count(), 0);
        assert_eq!(upgraded.metadata.snapshots().count(), 3);
        let written = std::fs::read(dir.path().join(metadata_file(upgraded.version))).unwrap();
        let reread = parse_metadata(&written).unwrap();
        assert_eq!(reread.format_version(), FormatVersion::V3);
        assert_eq!(reread.snapshots().count(), 3);
        assert_eq!(upgraded.head(), loaded.head());
    }

    /// A metadata file large enough to be mapped rather than read (a table property
    /// pads it past 256 KiB): its snapshots are carried from the mapped bytes as from
    /// read ones, and the next version reads back whole.
    #[tokio::test]
    async fn a_mapped_metadata_file_is_carried_as_a_read_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let pad = "p".repeat(300 * 1024);
        let properties = HashMap::from([("pad".to_string(), pad.clone())]);
        let table = IcebergTable::new(store)
            .verify_files(false)
            .with_properties(properties);
        for id in 1..=5 {
            table
                .commit(&change(id, &format!("{id}.parquet")))
                .await
                .unwrap();
        }
        let read = |v: u64| std::fs::read(dir.path().join(metadata_file(v))).unwrap();
        let before = read(5);
        assert!(before.len() > 300 * 1024);
        let loaded = table.load_for_commit().await.unwrap().unwrap();
        assert_eq!(loaded.history.carried_count(), 4);
        table.commit(&change(6, "6.parquet")).await.unwrap();
        let after = read(6);
        assert_one_added(&before, &after);
        let reread = parse_metadata(&after).unwrap();
        assert_eq!(reread.snapshots().count(), 6);
        assert_eq!(reread.properties().get("pad"), Some(&pad));
    }

    /// The metadata file `after` holds the snapshots of `before`, as they were and in
    /// their order, and one more.
    fn assert_one_added(before: &[u8], after: &[u8]) {
        let snapshots = |bytes: &[u8]| {
            let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            v["snapshots"].as_array().unwrap().clone()
        };
        let (old, new) = (snapshots(before), snapshots(after));
        assert_eq!(new.len(), old.len() + 1);
        assert_eq!(new[..old.len()], old[..], "older snapshots kept, in order");
    }

    /// A v2 table in a new folder with `n` one-file commits, one version each.
    async fn table_with_commits(n: i64) -> (tempfile::TempDir, IcebergTable) {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let table = IcebergTable::new(store).verify_files(false);
        for id in 1..=n {
            let file = format!("{id}.parquet");
            table.commit(&change(id, &file)).await.unwrap();
        }
        (dir, table)
    }

    async fn ancestry_ids(table: &IcebergTable) -> Vec<i64> {
        table
            .ancestry()
            .await
            .unwrap()
            .iter()
            .map(|a| a.0)
            .collect()
    }

    /// One upgrade path: a commit on an older table asked for a newer format version
    /// upgrades it first with `upgrade`, in a version of its own holding the same
    /// snapshots, then commits in the next; a downgrade is refused.
    #[tokio::test]
    async fn a_commit_asking_for_a_newer_format_version_upgrades_in_a_version_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let v2 = IcebergTable::new(store).verify_files(false);
        let first = v2.commit(&change(1, "a.parquet")).await.unwrap();
        assert_eq!(first.version, 1);
        let v3 = v2.clone().format_version(FormatVersion::V3);
        let second = v3.commit(&change(2, "b.parquet")).await.unwrap();
        assert_eq!(second.version, 3);
        let upgraded = std::fs::read(dir.path().join(metadata_file(2))).unwrap();
        let upgraded = parse_metadata(&upgraded).unwrap();
        assert_eq!(upgraded.format_version(), FormatVersion::V3);
        assert_eq!(upgraded.current_snapshot_id(), Some(first.snapshot_id));
        let loaded = v3.load().await.unwrap().unwrap();
        assert_eq!(loaded.metadata.format_version(), FormatVersion::V3);
        assert_eq!(
            loaded.metadata.current_snapshot_id(),
            Some(second.snapshot_id)
        );
        let downgrade = v2.format_version(FormatVersion::V2);
        let err = downgrade.commit(&change(3, "c.parquet")).await.unwrap_err();
        assert!(matches!(err, IcebergError::FormatVersion { .. }), "{err}");
        assert_eq!(v3.load().await.unwrap().unwrap().version, 3);
    }
}
