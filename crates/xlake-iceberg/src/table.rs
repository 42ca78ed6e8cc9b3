//! The Iceberg table in `<root>/metadata/`: loading its current version and committing one
//! snapshot per change set.
//!
//! A commit reads the current `vN.metadata.json`, plans the new snapshot in memory (schema
//! ids, partition spec, which manifests to keep or rewrite), writes manifests and the
//! manifest list under fresh names, then creates `v(N+1).metadata.json` with put-if-absent
//! and finally rewrites `version-hint.text`. Until that put succeeds nothing a reader sees
//! has changed; a writer that loses the race gets [`IcebergError::CommitConflict`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat,
    ManifestContentType, ManifestEntry, ManifestFile, NameMapping, Operation,
    PartitionSpec as IcebergSpec, Schema as IcebergSchema, SchemaRef, Snapshot, SnapshotReference,
    SnapshotRetention, SortOrder, Struct, Summary, TableMetadata, TableMetadataBuilder, Type,
    UnboundPartitionSpec, DEFAULT_SCHEMA_NAME_MAPPING, MAIN_BRANCH,
};
use xlake_model::{path_key, ChangeSet, DataFile, DeclaredTable, FileFormat, Schema};
use xlake_storage::{PutOutcome, RetryPolicy, StorageError, TableStore};

use crate::deletes::position_delete_file;
use crate::encode::metadata_json;
use crate::error::{IcebergError, Result};
use crate::fidelity::{findings, is_layout_entry, Finding, Shape, PARQUET_VECTORIZATION};
use crate::footer::{footer_stats, read_footer};
use crate::manifest::{read_entries, read_manifest_list, write_manifest, write_manifest_list};
use crate::partition::{partition_tuple, same_fields, to_unbound_spec};
use crate::schema::{
    first_free_id, merge_mappings, name_mapping, reserved_mappings, to_iceberg_schema, Aliases,
};
use crate::summary::{
    degraded_notes, degraded_value, standard_summary, Counts, SyncMetadata, DEGRADED,
    SOURCE_COMMIT_TIME, XTABLE_METADATA,
};
use crate::value::{to_datum, truncate_lower, truncate_upper};

pub(crate) const METADATA_DIR: &str = "metadata";
/// Table property: delete metadata files that fall out of the metadata log.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
/// Table property: the metrics mode engines assume for columns without their own.
pub const METRICS_MODE_DEFAULT: &str = "write.metadata.metrics.default";
/// Table property: how many previous metadata files the metadata log keeps.
pub const PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
const VERSION_HINT: &str = "metadata/version-hint.text";
/// Table property naming the source format of a table xlake created without a snapshot
/// (which has no `XTABLE_METADATA` to tell it is ours).
pub const SOURCE_FORMAT_PROPERTY: &str = "xlake.source-format";
/// How many data files have their existence checked (and footers read) at once.
pub(crate) const FILE_CHECK_CONCURRENCY: usize = 16;

/// Relative path of `vN.metadata.json`.
pub fn metadata_file(version: u64) -> String {
    format!("{METADATA_DIR}/v{version}.metadata.json")
}

/// The version `version-hint.text` names (surrounding whitespace allowed, as Java's
/// `HadoopTableOperations` trims it).
pub fn parse_hint(bytes: &[u8]) -> std::result::Result<u64, String> {
    let text = String::from_utf8_lossy(bytes);
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("expected a version number, found {text:?}"))
}

/// A `vN.metadata.json` as read back: the Iceberg spec's table metadata.
pub fn parse_metadata(bytes: &[u8]) -> std::result::Result<TableMetadata, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// The current version of the table.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// N of `vN.metadata.json`.
    pub version: u64,
    /// Its contents.
    pub metadata: TableMetadata,
    /// `version-hint.text` does not name this version (missing, or older: a writer died
    /// between the metadata file and the hint). Readers that trust the hint (pyiceberg,
    /// DuckDB) do not see this version until [`IcebergTable::heal_hint`] rewrites it.
    pub hint_stale: bool,
}

impl LoadedTable {
    /// The current snapshot id (what a plan is based on) and the source commits mirrored
    /// so far, oldest first.
    pub fn head(&self) -> (Option<i64>, Vec<(i64, SyncMetadata)>) {
        let head = self.metadata.current_snapshot().map(|s| s.snapshot_id());
        let mut snaps: Vec<_> = self.metadata.snapshots().collect();
        snaps.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
        let synced = snaps
            .into_iter()
            .filter_map(|s| {
                Some((
                    s.snapshot_id(),
                    SyncMetadata::from_summary(&s.summary().additional_properties)?,
                ))
            })
            .collect();
        (head, synced)
    }
}

/// What one commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// N of the new `vN.metadata.json`.
    pub version: u64,
    /// The new snapshot.
    pub snapshot_id: i64,
    /// Its `timestamp-ms`.
    pub timestamp_ms: i64,
    /// Entries of [`DEGRADED`](crate::fidelity::DEGRADED) this snapshot added (columns of
    /// its files first found in a layout some readers misread).
    pub degraded: Vec<String>,
}

/// What a batch commit did: the snapshots published (all in one version), and the error
/// that ended the batch early, if any.
#[derive(Debug, Default)]
pub struct Batch {
    /// One per change set committed, in order.
    pub committed: Vec<Committed>,
    /// Why the rest was not committed.
    pub error: Option<IcebergError>,
    /// The version published, for the next batch to build on without loading it.
    pub table: Option<LoadedTable>,
}

/// Why [`IcebergTable::publish`] failed, and whether the `vN` may exist all the same (a
/// failure of its write or after it).
pub(crate) struct Unpublished {
    pub(crate) error: IcebergError,
    pub(crate) maybe_created: bool,
}

/// A version being built in memory: the published version it starts from (until the
/// first snapshot is staged) and the metadata so far.
struct Draft<'a> {
    base: Option<&'a LoadedTable>,
    metadata: Option<TableMetadata>,
    expired_logs: Vec<iceberg::spec::MetadataLog>,
    /// The manifest list staged last, as written (the next snapshot's parent list).
    last_list: Option<(String, Vec<ManifestFile>)>,
}

/// The Iceberg side of one table, rooted where the source table lives.
#[derive(Debug, Clone)]
pub struct IcebergTable {
    pub(crate) store: TableStore,
    properties: HashMap<String, String>,
    verify_files: bool,
    /// The format version asked for (`None`: the table's own, 2 for a new table).
    pub(crate) format_version: Option<iceberg::spec::FormatVersion>,
    /// Per manifest read or written by this process, the paths its live entries are
    /// about (data file paths; for delete manifests, the data files deleted from), so a
    /// backfill that removes files reads each manifest once, not once per commit.
    /// Manifests are immutable once written, so entries never go stale. Kept as sorted
    /// path keys (16 bytes a path: a 10M-file backfill caches every path it writes).
    live_paths: Arc<Mutex<HashMap<String, Arc<PathKeys>>>>,
}

/// The paths a manifest's live entries are about, as sorted [`path_key`]s.
#[derive(Debug)]
pub(crate) struct PathKeys(Box<[u128]>);

impl PathKeys {
    fn contains(&self, path: &str) -> bool {
        self.0.binary_search(&path_key(path)).is_ok()
    }
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
    /// upgraded to it in its next snapshot (see [`crate::v3`]).
    pub fn format_version(mut self, version: iceberg::spec::FormatVersion) -> Self {
        self.format_version = Some(version);
        self
    }

    pub(crate) fn table(&self) -> String {
        self.store.location().to_string()
    }

    pub(crate) fn corrupt(&self, file: &str, reason: impl ToString) -> IcebergError {
        IcebergError::CorruptMetadata {
            table: self.table(),
            file: self.store.absolute(file),
            reason: reason.to_string(),
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
        let loaded = self.load_as_found().await?;
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
        let hinted = match self.store.get(VERSION_HINT).await {
            Ok(bytes) => Some(parse_hint(&bytes).map_err(|e| self.corrupt(VERSION_HINT, e))?),
            Err(StorageError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let version = match hinted {
            Some(mut v) => {
                // Like Java's HadoopTableOperations: a newer vN than the hint wins (a writer
                // died between the metadata file and the hint).
                while self.store.size(&metadata_file(v + 1)).await?.is_some() {
                    v += 1;
                }
                v
            }
            None => {
                let listed = self.store.list_dir(METADATA_DIR).await?;
                let versions: Vec<u64> = listed
                    .iter()
                    .filter_map(|e| {
                        let name = e.path.rsplit('/').next()?;
                        name.strip_prefix('v')?
                            .strip_suffix(".metadata.json")?
                            .parse()
                            .ok()
                    })
                    .collect();
                match versions.into_iter().max() {
                    Some(v) => v,
                    None => {
                        if let Some(foreign) =
                            listed.iter().find(|e| e.path.ends_with(".metadata.json"))
                        {
                            return Err(IcebergError::ForeignMetadata {
                                table: self.table(),
                                file: self.store.absolute(&foreign.path),
                            });
                        }
                        return Ok(None);
                    }
                }
            }
        };
        let path = metadata_file(version);
        let bytes = self.store.get(&path).await?;
        let metadata = parse_metadata(&bytes).map_err(|e| self.corrupt(&path, e))?;
        let ours = match metadata.current_snapshot() {
            Some(s) => s
                .summary()
                .additional_properties
                .contains_key(XTABLE_METADATA),
            // A table created before the source's first commit.
            None => metadata.properties().contains_key(SOURCE_FORMAT_PROPERTY),
        };
        if !ours {
            return Err(IcebergError::ForeignMetadata {
                table: self.table(),
                file: self.store.absolute(&path),
            });
        }
        Ok(Some(LoadedTable {
            version,
            metadata,
            hint_stale: hinted != Some(version),
        }))
    }

    /// The commit point: create `metadata/v{version}.metadata.json` only if nobody else did,
    /// then point the hint at it. Returns the version.
    pub(crate) async fn publish(
        &self,
        version: u64,
        metadata: &TableMetadata,
    ) -> std::result::Result<u64, Unpublished> {
        let before = |error| Unpublished {
            error,
            maybe_created: false,
        };
        // The version this one follows must still be there: if metadata retention deleted
        // it meanwhile, a put-if-absent could succeed beside the real history.
        if version > 1
            && self
                .store
                .size(&metadata_file(version - 1))
                .await
                .map_err(|e| before(e.into()))?
                .is_none()
        {
            return Err(before(IcebergError::CommitConflict {
                table: self.table(),
                version,
            }));
        }
        // Compact, as Java writes it: every reader loads every `vN` whole, and indentation
        // was a fifth of its bytes.
        let body = metadata_json(metadata)
            .map_err(|e| before(self.corrupt(&metadata_file(version), e)))?;
        // A failure after the write comes after the object was created.
        let after = |error: IcebergError| Unpublished {
            error,
            maybe_created: true,
        };
        let path = metadata_file(version);
        let body = Bytes::from(body);
        let conflict = || IcebergError::CommitConflict {
            table: self.table(),
            version,
        };
        // (`put_if_absent` itself tells our own bytes, resent after a lost reply, from
        // another writer's.)
        match self.store.put_if_absent(&path, body.clone()).await {
            Ok(PutOutcome::Created) => {}
            Ok(PutOutcome::AlreadyExists) => return Err(before(conflict())),
            // A failed write may have landed all the same: read it back.
            Err(e) => match self.store.get(&path).await {
                Ok(there) if there == body => {}
                Ok(_) => return Err(before(conflict())),
                // Not there: over a network the write may still land later; on local
                // disk a failed write did not happen.
                Err(StorageError::NotFound { .. }) => {
                    return Err(Unpublished {
                        error: e.into(),
                        maybe_created: !self.store.failed_writes_are_definite(),
                    })
                }
                // Cannot tell: keep what the version would refer to.
                Err(_) => return Err(after(e.into())),
            },
        }
        self.write_hint(version).await.map_err(after)?;
        Ok(version)
    }

    /// Delete files written for snapshots that will never be published; best effort, a
    /// few at a time and without retries, so that a store that is down does not hold up
    /// the error (what is left is an orphan for `xlake cleanup --orphans`).
    async fn abandon(&self, paths: Vec<String>) {
        let store = self.store.clone().with_retry(RetryPolicy::none());
        futures::stream::iter(paths)
            .for_each_concurrent(FILE_CHECK_CONCURRENCY, |path| {
                let store = &store;
                async move {
                    if let Err(e) = store.delete(&path).await {
                        tracing::warn!(table = %self.table(), path = %path, error = %e, "could not delete a file of an abandoned commit");
                    }
                }
            })
            .await;
    }

    /// Point `version-hint.text` at `version`, or at a newer version another writer made:
    /// after each write, if a newer `vN` exists the hint is written again, so the last
    /// writer of the hint always leaves the newest version (pyiceberg and DuckDB read
    /// exactly the hint; a stale one shows them an old table).
    async fn write_hint(&self, mut version: u64) -> Result<()> {
        loop {
            self.store
                .put(VERSION_HINT, Bytes::from(version.to_string()))
                .await?;
            let mut newest = version;
            while self.store.size(&metadata_file(newest + 1)).await?.is_some() {
                newest += 1;
            }
            if newest == version {
                return Ok(());
            }
            version = newest;
        }
    }

    /// Point a stale `version-hint.text` at the loaded version (see
    /// [`LoadedTable::hint_stale`]); nothing to do otherwise.
    pub async fn heal_hint(&self, loaded: &mut LoadedTable) -> Result<()> {
        if loaded.hint_stale {
            tracing::warn!(table = %self.table(), version = loaded.version, "version-hint.text was stale; rewriting it");
            self.write_hint(loaded.version).await?;
            loaded.hint_stale = false;
        }
        Ok(())
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

    /// Commit each change set as its own snapshot, in order.
    pub async fn commit_all(&self, changes: &[ChangeSet]) -> Result<Vec<Committed>> {
        let mut out = Vec::with_capacity(changes.len());
        for change in changes {
            out.push(self.commit(change).await?);
        }
        Ok(out)
    }

    /// Commit one change set as one snapshot (schema, spec and file changes together in one
    /// new `vN.metadata.json`), on the table as it is now.
    pub async fn commit(&self, change: &ChangeSet) -> Result<Committed> {
        let batch = self.commit_batch_on(self.load().await?, &[change]).await;
        match batch.error {
            Some(e) => Err(e),
            None => batch.committed.into_iter().next().ok_or_else(|| {
                self.corrupt(METADATA_DIR, "a commit of one change set wrote nothing")
            }),
        }
    }

    /// Commit change sets as consecutive snapshots, one per change set, published together
    /// in one new `vN.metadata.json` (a backfill writes one metadata file per batch instead
    /// of per commit, since each holds every snapshot), on `base`: a version this process
    /// has loaded (`None`: no metadata yet). A writer that published after `base` was
    /// loaded makes the put-if-absent of the next version fail: the result is then
    /// [`IcebergError::CommitConflict`], and the caller re-plans. A change set that cannot
    /// be committed ends the batch: the ones before it are published, and its error
    /// returned beside them. A `base` written for another location (a copied or moved
    /// table, from [`Self::load_as_found`]) is replaced, not built on: the batch starts a
    /// new history in the version after it (`xlake sync --rebuild`).
    pub async fn commit_batch_on(
        &self,
        base: Option<LoadedTable>,
        changes: &[&ChangeSet],
    ) -> Batch {
        // Atomic only on a store whose put-if-absent works (or with one writer, by the
        // operator's word); checked before anything is written.
        match self.store.verify_put_if_absent().await {
            Ok(()) => self.commit_batch_inner(base, changes).await,
            Err(e) => Batch {
                error: Some(e.into()),
                ..Batch::default()
            },
        }
    }

    async fn commit_batch_inner(
        &self,
        loaded: Option<LoadedTable>,
        changes: &[&ChangeSet],
    ) -> Batch {
        let mut batch = Batch::default();
        let next_version = loaded.as_ref().map_or(1, |l| l.version + 1);
        let on = loaded
            .as_ref()
            .filter(|l| self.recorded_elsewhere(l).is_none());
        let mut draft = Draft {
            base: on,
            metadata: on.map(|l| l.metadata.clone()),
            expired_logs: Vec::new(),
            last_list: None,
        };
        // Manifests, lists and delete files are written through a journal, so that what
        // no `vN` will refer to can be deleted again (a failed commit leaves `metadata/`
        // as it found it; the metadata file and the hint are written by `publish`).
        let (store, journal) = self.store.journaled();
        let writer = Self {
            store,
            ..self.clone()
        };
        let mut staged = Vec::new();
        let mut kept = 0;
        for change in changes {
            match writer.stage(change, &mut draft).await {
                Ok(snapshot) => {
                    staged.push((change.commit.id.clone(), snapshot));
                    kept = journal.len();
                }
                Err(e) => {
                    batch.error = Some(e);
                    break;
                }
            }
        }
        // What the change that failed had written yet.
        self.abandon(journal.since(kept)).await;
        let expired_logs = std::mem::take(&mut draft.expired_logs);
        let Some(metadata) = draft.metadata.filter(|_| !staged.is_empty()) else {
            return batch;
        };
        let version = match self.publish(next_version, &metadata).await {
            Ok(version) => version,
            Err(Unpublished {
                error,
                maybe_created,
            }) => {
                // Lost race or refused before the write: nothing refers to the batch's
                // files. (After an ambiguous failure they stay: the `vN` may exist.)
                if !maybe_created {
                    self.abandon(journal.since(0)).await;
                }
                // Nothing is committed: the error of publishing wins over a later one.
                batch.error = Some(error);
                return batch;
            }
        };
        self.expire_metadata_files(&metadata, &expired_logs).await;
        for (commit, (snapshot_id, timestamp_ms, degraded)) in staged {
            tracing::info!(table = %self.table(), commit = %commit, version, snapshot_id, "committed Iceberg snapshot");
            for entry in &degraded {
                tracing::warn!(table = %self.table(), commit = %commit, "degraded: {entry}");
            }
            batch.committed.push(Committed {
                version,
                snapshot_id,
                timestamp_ms,
                degraded,
            });
        }
        batch.table = Some(LoadedTable {
            version,
            metadata,
            hint_stale: false,
        });
        batch
    }

    /// Write the manifests and manifest list of one change set as a snapshot on top of
    /// `draft`, and add it to the draft's metadata. Returns the snapshot id and time, and
    /// the degraded entries it added.
    async fn stage(
        &self,
        change: &ChangeSet,
        draft: &mut Draft<'_>,
    ) -> Result<(i64, i64, Vec<String>)> {
        let commit_id = change.commit.id.clone();
        let last_list = draft.last_list.take();
        let current = draft.metadata.as_ref();
        let version = self.target_version(current)?;
        let v3 = version >= iceberg::spec::FormatVersion::V3;
        if let Some((column, reason)) = (!v3).then(|| crate::v3::needs_v3(&change.schema)).flatten()
        {
            return Err(IcebergError::SchemaNotRepresentable {
                table: self.table(),
                commit: commit_id,
                column,
                reason,
            });
        }
        if current.is_some_and(|m| m.format_version() < version) {
            tracing::warn!(table = %self.table(), commit = %commit_id, "upgrading the Iceberg table's format version in this commit");
        }
        let resolved;
        let change = if change.full_state {
            resolved = self.as_difference(change, current).await?;
            &resolved
        } else {
            change
        };
        let not_representable =
            |p: crate::schema::SchemaProblem| IcebergError::SchemaNotRepresentable {
                table: self.table(),
                commit: commit_id.clone(),
                column: p.column,
                reason: p.reason,
            };

        // Schema and partition spec as of this commit.
        let current_schema = current.map(|m| m.current_schema().clone());
        let next_schema_id = current.map_or(0, |m| {
            m.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(0) + 1
        });
        let older: Vec<&IcebergSchema> = current.map_or(Vec::new(), |m| {
            let mut all: Vec<&IcebergSchema> = m
                .schemas_iter()
                .filter(|s| s.schema_id() != m.current_schema_id())
                .map(|s| s.as_ref())
                .collect();
            all.sort_by_key(|s| s.schema_id());
            all
        });
        let (converted, aliases) = to_iceberg_schema(
            &change.schema,
            current_schema.as_deref(),
            &older,
            current.map_or(0, |m| m.last_column_id()),
            next_schema_id,
        )
        .map_err(not_representable)?;
        let schema_changed = current_schema
            .as_ref()
            .is_none_or(|s| s.as_struct() != converted.as_struct());
        let unbound =
            to_unbound_spec(&change.partition_spec, &converted).map_err(not_representable)?;
        let (mut properties, last_column_id, mapping) = self.commit_properties(
            &change.schema,
            (&converted, &aliases),
            &change.ignored_columns,
            current,
        );

        // The same builder twice: staged without a snapshot first, to learn the bound spec
        // and schema ids the manifests need; then again with the snapshot.
        let builder = |properties: &HashMap<String, String>| {
            self.base_builder(
                draft,
                (&converted, schema_changed, last_column_id),
                &unbound,
                properties,
            )
        };
        // The snapshot, at the source commit's time (never earlier than the previous one).
        let floor = current.map_or(i64::MIN, |m| {
            m.history()
                .last()
                .map_or(i64::MIN, |l| l.timestamp_ms)
                .max(m.last_updated_ms())
        });
        let timestamp_ms = change.commit.commit_time_ms.max(floor);
        let snapshot_id = fresh_snapshot_id(current);
        let sequence_number = current.map_or(0, |m| m.last_sequence_number()) + 1;
        let parent = current.and_then(|m| m.current_snapshot()).cloned();
        // v3 row lineage: the rows this snapshot gives ids start at the table's next-row-id.
        let first_row_id = v3.then(|| current.map_or(0, |m| m.next_row_id()));
        let snapshot = |manifest_list: String, summary: Summary, schema_id: i32, rows: u64| {
            let builder = Snapshot::builder()
                .with_snapshot_id(snapshot_id)
                .with_parent_snapshot_id(parent.as_ref().map(|p| p.snapshot_id()))
                .with_sequence_number(sequence_number)
                .with_timestamp_ms(timestamp_ms)
                .with_manifest_list(manifest_list)
                .with_summary(summary)
                .with_schema_id(schema_id);
            match first_row_id {
                Some(first) => builder.with_row_range(first, rows).build(),
                None => builder.build(),
            }
        };
        // Staged with a placeholder snapshot, so that its time (not the wall clock, which
        // may lag a source's commit times) stamps the metadata as the real commit will.
        let placeholder = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::new(),
        };
        let staged = builder(&properties)?
            .add_snapshot(snapshot(
                String::new(),
                placeholder,
                current.map_or(converted.schema_id(), |m| m.current_schema().schema_id()),
                0,
            ))
            .and_then(|b| b.build())
            .map_err(self.spec_error("apply schema and partition spec"))?
            .metadata;
        let schema: SchemaRef = staged.current_schema().clone();
        if schema.as_struct() != converted.as_struct() {
            return Err(self.corrupt(METADATA_DIR, "schema ids were reassigned unexpectedly"));
        }
        let spec = staged.default_partition_spec().clone();

        // Files added: checked, measured, and described in Iceberg's terms; rows a source
        // deleted from them become position-delete files.
        let (added, mut added_deletes, found) = self
            .added_files(change, &schema, &spec, &mapping, v3)
            .await?;
        if v3 {
            // Deletion vectors as they are, in one Puffin file (no position-delete files).
            added_deletes = self.vector_deletes(change, &added, &spec).await?;
        }
        // Layouts found in files stay named while the table lives; a source's notes are
        // per commit.
        let parent_degraded: BTreeSet<String> = parent
            .as_ref()
            .map(|p| degraded_notes(&p.summary().additional_properties))
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut degraded: BTreeSet<String> = parent_degraded
            .iter()
            .filter(|e| is_layout_entry(e))
            .cloned()
            .collect();
        degraded.extend(change.degraded.iter().cloned());
        degraded.extend(found.iter().map(Finding::entry));
        // Spark's vectorized reader fails on TIMESTAMP_MILLIS; its row reader does not. Set
        // in the version that first references such a file; table properties stay set.
        if found.iter().any(|f| f.shape == Shape::TimestampMillis) {
            properties.insert(PARQUET_VECTORIZATION.into(), "false".into());
        }

        // Files removed: find the manifests holding them, and the delete files of them.
        let parent_manifests = match (&parent, last_list) {
            (Some(p), Some((list, manifests))) if list == p.manifest_list() => manifests,
            (Some(p), _) => read_manifest_list(&self.store, p.manifest_list())
                .await
                .map_err(|e| self.corrupt(p.manifest_list(), e))?,
            (None, _) => Vec::new(),
        };
        let mut to_remove: HashMap<String, bool> = change
            .removed
            .iter()
            .map(|p| (self.store.absolute(p), false))
            .collect();
        let removes = |e: &ManifestEntry, data: bool| {
            if data {
                to_remove.contains_key(e.file_path())
            } else {
                e.data_file()
                    .referenced_data_file()
                    .is_some_and(|r| to_remove.contains_key(&r))
            }
        };
        let mut kept: Vec<ManifestFile> = Vec::new();
        let mut rewrites = Vec::new();
        for mf in parent_manifests {
            let live = mf.added_files_count.unwrap_or(1) + mf.existing_files_count.unwrap_or(1);
            if live == 0 {
                continue;
            }
            if to_remove.is_empty() {
                kept.push(mf);
                continue;
            }
            let data = mf.content == ManifestContentType::Data;
            let (paths, mut entries) = match self.cached_paths(&mf.manifest_path) {
                Some(paths) => (paths, None),
                None => {
                    let entries = read_entries(&self.store, &mf)
                        .await
                        .map_err(|e| self.corrupt(&mf.manifest_path, e))?;
                    let paths = self.cache_paths(
                        &mf.manifest_path,
                        entries
                            .iter()
                            .filter(|e| e.is_alive())
                            .map(|e| e.data_file()),
                    );
                    (paths, Some(entries))
                }
            };
            if !to_remove.keys().any(|p| paths.contains(p)) {
                kept.push(mf);
                continue;
            }
            let entries = match entries.take() {
                Some(entries) => entries,
                None => read_entries(&self.store, &mf)
                    .await
                    .map_err(|e| self.corrupt(&mf.manifest_path, e))?,
            };
            let hits: Vec<String> = entries
                .iter()
                .filter(|e| e.is_alive() && removes(e, data))
                .map(|e| entry_key(e, data))
                .collect();
            rewrites.push((mf, entries, data, hits));
        }
        for (_, _, data, hits) in &rewrites {
            for path in hits.iter().filter(|_| *data) {
                if let Some(found) = to_remove.get_mut(path) {
                    *found = true;
                }
            }
        }
        if let Some((path, _)) = to_remove.iter().find(|(_, found)| !**found) {
            return Err(IcebergError::RemovedFileNotFound {
                table: self.table(),
                commit: commit_id,
                path: path.clone(),
            });
        }

        // Write: new manifests, rewritten manifests, the manifest list.
        let commit_uuid = uuid::Uuid::new_v4();
        let manifest_location = |n: usize| {
            self.store
                .absolute(&format!("{METADATA_DIR}/{commit_uuid}-m{n}.avro"))
        };
        let write_failed = |what: &str| {
            let table = self.table();
            let what = what.to_string();
            move |reason: String| IcebergError::WriteFailed {
                table: table.clone(),
                file: what.clone(),
                reason,
            }
        };
        let mut manifests = Vec::new();
        let mut counts = Counts::default();
        let mut partitions: HashSet<(i32, String)> = HashSet::new();
        let adds_files = !added.is_empty();
        let adds_deletes = !added_deletes.is_empty();
        for (files, deletes) in [(added, false), (added_deletes, true)] {
            if files.is_empty() {
                continue;
            }
            for f in &files {
                counts.count(deletes, true, f.record_count(), f.file_size_in_bytes());
                partitions.insert((spec.spec_id(), format!("{:?}", f.partition())));
            }
            let location = manifest_location(manifests.len());
            self.cache_paths(&location, files.iter());
            let mf = write_manifest(
                &self.store,
                &location,
                (snapshot_id, version),
                (schema.clone(), (*spec).clone()),
                deletes,
                |w| files.into_iter().try_for_each(|f| w.add_file(f, -1)),
            )
            .await
            .map_err(write_failed(&location))?;
            manifests.push(mf);
        }
        for (old, entries, data, hits) in rewrites {
            let old_spec = staged
                .partition_spec_by_id(old.partition_spec_id)
                .ok_or_else(|| self.corrupt(&old.manifest_path, "unknown partition spec id"))?;
            let location = manifest_location(manifests.len());
            let live: Vec<_> = entries.into_iter().filter(|e| e.is_alive()).collect();
            let hits: HashSet<String> = hits.into_iter().collect();
            self.cache_paths(
                &location,
                live.iter()
                    .filter(|e| !hits.contains(&entry_key(e, data)))
                    .map(|e| e.data_file()),
            );
            for e in live.iter().filter(|e| hits.contains(&entry_key(e, data))) {
                counts.count(!data, false, e.record_count(), e.file_size_in_bytes());
                partitions.insert((
                    old.partition_spec_id,
                    format!("{:?}", e.data_file().partition()),
                ));
            }
            let mf = write_manifest(
                &self.store,
                &location,
                (snapshot_id, version),
                (
                    schema_holding(&staged, old_spec, &schema),
                    (**old_spec).clone(),
                ),
                !data,
                |w| {
                    for e in live {
                        let seq = e.sequence_number().unwrap_or(0);
                        let file_seq = e.file_sequence_number;
                        let snapshot = e.snapshot_id().unwrap_or(0);
                        if hits.contains(&entry_key(&e, data)) {
                            w.add_delete_file(e.data_file, seq, file_seq)?;
                        } else {
                            w.add_existing_file(e.data_file, snapshot, seq, file_seq)?;
                        }
                    }
                    Ok(())
                },
            )
            .await
            .map_err(write_failed(&location))?;
            manifests.push(mf);
        }
        let mut n = manifests.len();
        let kept = self
            .merge_small_manifests(kept, (&staged, &schema), snapshot_id, || {
                n += 1;
                manifest_location(n - 1)
            })
            .await?;
        manifests.extend(kept);
        let list_location = self.store.absolute(&format!(
            "{METADATA_DIR}/snap-{snapshot_id}-1-{commit_uuid}.avro"
        ));
        let (listed, added_rows) = write_manifest_list(
            &self.store,
            &list_location,
            snapshot_id,
            parent.as_ref().map(|p| p.snapshot_id()),
            (sequence_number, first_row_id),
            manifests,
        )
        .await
        .map_err(write_failed(&list_location))?;

        let operation = match (adds_files, !change.removed.is_empty() || adds_deletes) {
            (false, false) => Operation::Append,
            _ if !change.data_change => Operation::Replace,
            (true, false) => Operation::Append,
            (false, true) => Operation::Delete,
            (true, true) => Operation::Overwrite,
        };
        let mut summary = standard_summary(
            parent.as_ref().map(|p| &p.summary().additional_properties),
            &counts,
            partitions.len(),
        );
        summary.insert(
            XTABLE_METADATA.into(),
            json(&SyncMetadata::for_commit(&change.commit)),
        );
        summary.insert(
            SOURCE_COMMIT_TIME.into(),
            change.commit.commit_time_ms.to_string(),
        );
        for (key, value) in &change.notes {
            summary.entry(key.clone()).or_insert_with(|| value.clone());
        }
        match degraded_value(&degraded) {
            Some(value) => summary.insert(DEGRADED.into(), value),
            None => summary.remove(DEGRADED),
        };
        let summary = Summary {
            operation,
            additional_properties: summary,
        };
        let built = builder(&properties)?
            .add_snapshot(snapshot(
                list_location.clone(),
                summary,
                schema.schema_id(),
                added_rows,
            ))
            .and_then(|b| {
                b.set_ref(
                    MAIN_BRANCH,
                    SnapshotReference::new(
                        snapshot_id,
                        SnapshotRetention::branch(None, None, None),
                    ),
                )
            })
            .and_then(|b| b.build())
            .map_err(self.spec_error("add snapshot"))?;

        draft.expired_logs.extend(built.expired_metadata_logs);
        draft.metadata = Some(built.metadata);
        draft.base = None;
        draft.last_list = Some((list_location, listed));
        let added_entries = degraded.difference(&parent_degraded).cloned().collect();
        Ok((snapshot_id, timestamp_ms, added_entries))
    }

    /// The paths a manifest's live entries are about, if this process has seen it.
    fn cached_paths(&self, manifest: &str) -> Option<Arc<PathKeys>> {
        self.live_paths.lock().ok()?.get(manifest).cloned()
    }

    /// Remember the paths the live `files` of a manifest are about: a data file's own
    /// path, a delete file's data file.
    pub(crate) fn cache_paths<'a>(
        &self,
        manifest: &str,
        files: impl Iterator<Item = &'a IcebergDataFile>,
    ) -> Arc<PathKeys> {
        let mut keys: Vec<u128> = files
            .filter_map(|f| match f.content_type() {
                DataContentType::Data => Some(path_key(f.file_path())),
                _ => f.referenced_data_file().map(|p| path_key(&p)),
            })
            .collect();
        keys.sort_unstable();
        let paths = Arc::new(PathKeys(keys.into_boxed_slice()));
        if let Ok(mut cache) = self.live_paths.lock() {
            cache.insert(manifest.to_string(), paths.clone());
        }
        paths
    }

    /// The live data files of the current snapshot of `metadata`: location to row count.
    async fn live_data_files(
        &self,
        metadata: Option<&TableMetadata>,
    ) -> Result<HashMap<String, u64>> {
        self.snapshot_files(
            metadata
                .and_then(|m| m.current_snapshot())
                .map(|s| s.as_ref()),
        )
        .await
    }

    /// The live data files of a snapshot (location to row count).
    async fn snapshot_files(&self, snapshot: Option<&Snapshot>) -> Result<HashMap<String, u64>> {
        Ok(self.snapshot_entries(snapshot).await?.into_iter().collect())
    }

    /// The live data file entries of a snapshot (location, row count); a location listed
    /// twice appears twice.
    async fn snapshot_entries(&self, snapshot: Option<&Snapshot>) -> Result<Vec<(String, u64)>> {
        let mut live = Vec::new();
        if let Some(snapshot) = snapshot {
            let manifests = read_manifest_list(&self.store, snapshot.manifest_list())
                .await
                .map_err(|e| self.corrupt(snapshot.manifest_list(), e))?;
            for mf in manifests
                .iter()
                .filter(|m| m.content == ManifestContentType::Data)
            {
                let entries = read_entries(&self.store, mf)
                    .await
                    .map_err(|e| self.corrupt(&mf.manifest_path, e))?;
                live.extend(
                    entries
                        .iter()
                        .filter(|e| e.is_alive())
                        .map(|e| (e.file_path().to_string(), e.record_count())),
                );
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

    /// Number of manifests of the current snapshot.
    pub async fn current_manifests(&self) -> Result<usize> {
        let Some(loaded) = self.load().await? else {
            return Ok(0);
        };
        let Some(snapshot) = loaded.metadata.current_snapshot() else {
            return Ok(0);
        };
        let list = read_manifest_list(&self.store, snapshot.manifest_list())
            .await
            .map_err(|e| self.corrupt(snapshot.manifest_list(), e))?;
        Ok(list.len())
    }

    /// The snapshots of the current ancestry, oldest first: (snapshot id, time, what it
    /// mirrors).
    pub async fn ancestry(&self) -> Result<Vec<(i64, i64, Option<SyncMetadata>)>> {
        Ok(self
            .load()
            .await?
            .map_or(Vec::new(), |l| ancestry_of(&l.metadata)))
    }

    /// A full-state change set as the difference from the current snapshot's live files.
    async fn as_difference(
        &self,
        change: &ChangeSet,
        current: Option<&TableMetadata>,
    ) -> Result<ChangeSet> {
        let live = self.live_data_files(current).await?;
        let wanted: HashSet<String> = change
            .added
            .iter()
            .map(|f| self.store.absolute(&f.path))
            .collect();
        let mut diff = change.clone();
        diff.full_state = false;
        diff.added
            .retain(|f| !live.contains_key(&self.store.absolute(&f.path)));
        diff.removed = live.into_keys().filter(|p| !wanted.contains(p)).collect();
        diff.removed.sort();
        Ok(diff)
    }

    /// The table properties of a commit of the neutral `schema`, converted to `converted`:
    /// the operator's, the metrics mode, and the name mapping (merged with the table's so
    /// far, plus reserved entries for `ignored` file columns). Also the highest reserved id,
    /// which `last-column-id` must count, and the name mapping itself.
    fn commit_properties(
        &self,
        schema: &Schema,
        (converted, aliases): (&IcebergSchema, &Aliases),
        ignored: &[String],
        current: Option<&TableMetadata>,
    ) -> (HashMap<String, String>, Option<i32>, NameMapping) {
        let mut properties = self.properties.clone();
        // Bounds xlake writes are safe for pruning but not always exact (Delta truncates
        // timestamps, footers are rescaled, strings cut): engines must not answer MIN/MAX
        // from them, which Iceberg Spark does unless the metrics mode says counts.
        properties
            .entry(METRICS_MODE_DEFAULT.to_string())
            .or_insert_with(|| "counts".to_string());
        // Older snapshots still read through older schemas: keep their columns mapped.
        let previous: Option<NameMapping> = current
            .and_then(|m| m.properties().get(DEFAULT_SCHEMA_NAME_MAPPING))
            .and_then(|text| serde_json::from_str(text).ok());
        let mut mapping = name_mapping(converted, aliases);
        // File columns the source's readers skip: mapped to ids no column has, and that
        // last-column-id keeps from ever being handed out.
        let last_column_id = current.map_or(0, |m| m.last_column_id());
        let reserved = reserved_mappings(
            ignored,
            converted,
            &mapping,
            previous.as_ref(),
            first_free_id(schema, converted, last_column_id),
        );
        let highest_reserved = reserved.iter().filter_map(|f| f.field_id()).max();
        if !reserved.is_empty() {
            mapping = NameMapping::new(mapping.fields().iter().cloned().chain(reserved).collect());
        }
        if let Some(previous) = &previous {
            mapping = merge_mappings(&mapping, previous);
        }
        properties.insert(DEFAULT_SCHEMA_NAME_MAPPING.into(), json(&mapping));
        (properties, highest_reserved, mapping)
    }

    /// Create the table with `declared`'s schema and partition spec and no snapshot, for a
    /// source table with no completed commit yet: readers then find an empty table rather
    /// than none. Returns the version written; `None` when the table exists already (or
    /// another writer created it meanwhile).
    pub async fn create_empty(&self, declared: &DeclaredTable) -> Result<Option<u64>> {
        if self.load().await?.is_some() {
            return Ok(None);
        }
        let not_representable =
            |p: crate::schema::SchemaProblem| IcebergError::SchemaNotRepresentable {
                table: self.table(),
                commit: "(none: the table has no completed commit)".into(),
                column: p.column,
                reason: p.reason,
            };
        // The same refusal a commit meets: v2 has no type for these columns.
        if self.target_version(None)? < iceberg::spec::FormatVersion::V3 {
            if let Some((column, reason)) = crate::v3::needs_v3(&declared.schema) {
                return Err(not_representable(crate::schema::SchemaProblem {
                    column,
                    reason,
                }));
            }
        }
        self.store.verify_put_if_absent().await?;
        let (converted, aliases) =
            to_iceberg_schema(&declared.schema, None, &[], 0, 0).map_err(not_representable)?;
        let unbound =
            to_unbound_spec(&declared.partition_spec, &converted).map_err(not_representable)?;
        let (mut properties, reserved, _) = self.commit_properties(
            &declared.schema,
            (&converted, &aliases),
            &declared.ignored_columns,
            None,
        );
        properties.insert(
            SOURCE_FORMAT_PROPERTY.into(),
            declared.format.as_str().into(),
        );
        let metadata = self.empty_metadata(&converted, &unbound, &properties, reserved)?;
        match self.publish(1, &metadata).await {
            Ok(version) => {
                tracing::info!(table = %self.table(), version, "created the Iceberg table without a snapshot: the source has no completed commit");
                Ok(Some(version))
            }
            Err(Unpublished {
                error: IcebergError::CommitConflict { .. },
                ..
            }) => Ok(None),
            Err(u) => Err(u.error),
        }
    }

    /// A builder holding the schema, spec and properties of this commit (no snapshot yet);
    /// `last-column-id` is raised to `reserved` (ids of ignored file columns) if below.
    fn base_builder(
        &self,
        draft: &Draft<'_>,
        (schema, schema_changed, reserved): (&IcebergSchema, bool, Option<i32>),
        unbound: &UnboundPartitionSpec,
        properties: &HashMap<String, String>,
    ) -> Result<TableMetadataBuilder> {
        let err = self.spec_error("apply schema and partition spec");
        let Some(metadata) = &draft.metadata else {
            let empty = self.empty_metadata(schema, unbound, properties, reserved)?;
            return Ok(TableMetadataBuilder::new_from_metadata(empty, None));
        };
        // Only the published version a draft starts from enters the metadata log.
        let previous = draft
            .base
            .map(|l| self.store.absolute(&metadata_file(l.version)));
        let raised = match reserved {
            Some(id) if id > metadata.last_column_id() => {
                self.with_last_column_id(metadata.clone(), id)?
            }
            _ => metadata.clone(),
        };
        let mut builder = TableMetadataBuilder::new_from_metadata(raised, previous);
        let version = self.target_version(Some(metadata))?;
        if version > metadata.format_version() {
            builder = builder.upgrade_format_version(version).map_err(&err)?;
        }
        if schema_changed {
            builder = builder.add_current_schema(schema.clone()).map_err(&err)?;
        }
        if !same_fields(metadata.default_partition_spec(), unbound) {
            builder = builder
                .add_default_partition_spec(unbound.clone())
                .map_err(&err)?;
        }
        let stale = properties
            .iter()
            .any(|(k, v)| metadata.properties().get(k) != Some(v));
        if stale {
            builder = builder.set_properties(properties.clone()).map_err(&err)?;
        }
        Ok(builder)
    }

    /// Metadata of a new table with no snapshot, holding `schema` with its ids as they are
    /// (iceberg-rust's `TableMetadataBuilder::new` would renumber them, losing ids a source
    /// assigned, such as Delta column mapping ids that data files carry).
    fn empty_metadata(
        &self,
        schema: &IcebergSchema,
        unbound: &UnboundPartitionSpec,
        properties: &HashMap<String, String>,
        reserved: Option<i32>,
    ) -> Result<TableMetadata> {
        let err = self.spec_error("create table metadata");
        let spec = IcebergSpec::builder(schema.clone())
            .with_spec_id(0)
            .add_unbound_fields(unbound.fields().iter().cloned())
            .and_then(|b| b.build())
            .map_err(&err)?;
        let version = self.target_version(None)?;
        let mut value = serde_json::json!({
            "format-version": crate::v3::version_number(version),
            "table-uuid": uuid::Uuid::new_v4().to_string(),
            "location": self.store.location(),
            "last-sequence-number": 0,
            "last-updated-ms": 0,
            "last-column-id": schema.highest_field_id().max(reserved.unwrap_or(0)),
            "current-schema-id": schema.schema_id(),
            "schemas": [schema],
            "default-spec-id": 0,
            "partition-specs": [spec],
            "last-partition-id": spec.fields().iter().map(|f| f.field_id).max().unwrap_or(999),
            "default-sort-order-id": 0,
            "sort-orders": [SortOrder::unsorted_order()],
            "properties": properties,
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
            "refs": {},
        });
        if version >= iceberg::spec::FormatVersion::V3 {
            value["next-row-id"] = 0.into();
        }
        serde_json::from_value(value)
            .map_err(|e| self.corrupt(METADATA_DIR, format!("new table metadata: {e}")))
    }

    /// `metadata` with `last-column-id` set to `id` (iceberg-rust's builder only raises it
    /// to the schemas' highest id; ids of ignored file columns must count too).
    fn with_last_column_id(&self, metadata: TableMetadata, id: i32) -> Result<TableMetadata> {
        let invalid = |e: serde_json::Error| {
            self.corrupt(METADATA_DIR, format!("raising last-column-id: {e}"))
        };
        let mut value = serde_json::to_value(&metadata).map_err(invalid)?;
        value["last-column-id"] = id.into();
        serde_json::from_value(value).map_err(invalid)
    }

    /// Iceberg data files for the change set's added files.
    async fn added_files(
        &self,
        change: &ChangeSet,
        schema: &IcebergSchema,
        spec: &IcebergSpec,
        mapping: &NameMapping,
        v3: bool,
    ) -> Result<(
        Vec<IcebergDataFile>,
        Vec<IcebergDataFile>,
        BTreeSet<Finding>,
    )> {
        let partition_type = spec
            .partition_type(schema)
            .map_err(self.spec_error("partition type"))?;
        // Footers are read for the layouts some readers misread only where the schema can
        // hold one: a list, a map or a timestamp.
        let inspect = may_degrade(schema.as_struct().fields()).then_some(mapping);
        // Every file is seen through before an error is returned: a delete file still being
        // written when the others were dropped would escape the journal.
        let results: Vec<Result<AddedFile>> = futures::stream::iter(change.added.iter())
            .map(|f| self.added_file(change, f, (schema, spec, &partition_type), inspect, v3))
            .buffered(FILE_CHECK_CONCURRENCY)
            .collect()
            .await;
        let (mut data, mut deletes, mut found) = (Vec::new(), Vec::new(), BTreeSet::new());
        for (d, delete, f) in results.into_iter().collect::<Result<Vec<_>>>()? {
            data.push(d);
            deletes.extend(delete);
            found.extend(f);
        }
        Ok((data, deletes, found))
    }

    async fn added_file(
        &self,
        change: &ChangeSet,
        file: &DataFile,
        (schema, spec, partition_type): (&IcebergSchema, &IcebergSpec, &iceberg::spec::StructType),
        inspect: Option<&NameMapping>,
        v3: bool,
    ) -> Result<AddedFile> {
        let location = self.store.absolute(&file.path);
        let invalid = |reason: String| IcebergError::InvalidDataFile {
            table: self.table(),
            commit: change.commit.id.clone(),
            path: location.clone(),
            reason,
        };
        // A file a later source commit removes may be gone already (cleaned, vacuumed): it
        // is only history, described by what the source recorded.
        let mut gone = false;
        if self.verify_files || file.removed_later {
            match self.store.size(&file.path).await? {
                None if file.removed_later => gone = true,
                None => return Err(invalid("does not exist".into())),
                Some(n) if n != file.size_bytes => {
                    return Err(invalid(format!(
                        "the source records {} bytes, storage has {n}",
                        file.size_bytes
                    )))
                }
                Some(_) => {}
            }
        }
        let mut record_count = file.record_count;
        let mut column_stats = file.column_stats.clone();
        if gone && record_count.is_none() {
            return Err(invalid(
                "is gone from storage (removed by a later source commit and cleaned) and the source records no row count for it".into(),
            ));
        }
        let mut found = BTreeSet::new();
        // Layouts are looked for where files are checked (`--skip-file-check` trusts the
        // source and reads no file it does not need).
        let needs_stats = record_count.is_none() || column_stats.is_empty();
        if !gone
            && file.format == FileFormat::Parquet
            && (needs_stats || (inspect.is_some() && self.verify_files))
        {
            let meta = read_footer(&self.store, &file.path, file.size_bytes)
                .await
                .map_err(&invalid)?;
            if let Some(mapping) = inspect {
                found = findings(&meta, schema, mapping);
            }
            let footer = footer_stats(&meta, &change.schema);
            if let Some(n) = record_count {
                if n != footer.record_count {
                    return Err(invalid(format!(
                        "the source records {n} rows, the footer {}",
                        footer.record_count
                    )));
                }
            }
            record_count = Some(footer.record_count);
            if column_stats.is_empty() {
                column_stats = footer.columns.into_iter().collect();
            }
        }
        let record_count = record_count.ok_or_else(|| {
            invalid("no record count, and only Parquet footers can be read".into())
        })?;
        let partition: Struct = partition_tuple(
            &file.partition,
            &change.partition_spec,
            &change.schema,
            partition_type,
        )
        .map_err(&invalid)?;

        let mut value_counts = HashMap::new();
        let mut null_counts = HashMap::new();
        let mut nan_counts = HashMap::new();
        let mut lower_bounds = HashMap::new();
        let mut upper_bounds = HashMap::new();
        for (path, stats) in column_stats {
            let (Some(field), Some(source_type)) = (
                schema.field_by_name(&path),
                change.schema.primitive_at(&path),
            ) else {
                continue;
            };
            let Type::Primitive(target) = field.field_type.as_ref() else {
                continue;
            };
            let id = field.id;
            stats.value_count.map(|v| value_counts.insert(id, v));
            stats.null_count.map(|v| null_counts.insert(id, v));
            stats.nan_count.map(|v| nan_counts.insert(id, v));
            let lower = stats
                .lower
                .map(truncate_lower)
                .and_then(|v| to_datum(&v, source_type, target).ok());
            let upper = stats
                .upper
                .and_then(truncate_upper)
                .and_then(|v| to_datum(&v, source_type, target).ok());
            if let (Some(lower), Some(upper)) = (lower, upper) {
                lower_bounds.insert(id, lower);
                upper_bounds.insert(id, upper);
            }
        }
        let data = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(location.clone())
            .file_format(match file.format {
                FileFormat::Parquet => DataFileFormat::Parquet,
                FileFormat::Orc => DataFileFormat::Orc,
                FileFormat::Avro => DataFileFormat::Avro,
            })
            .partition(partition.clone())
            .partition_spec_id(spec.spec_id())
            .record_count(record_count)
            .file_size_in_bytes(file.size_bytes)
            .value_counts(value_counts)
            .null_value_counts(null_counts)
            .nan_value_counts(nan_counts)
            .lower_bounds(lower_bounds)
            .upper_bounds(upper_bounds)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        // A v2 table needs the deleted rows decoded: a vector the source left undecoded
        // (for a v3 table) must never be dropped silently.
        if !v3 && file.deleted_rows.is_empty() {
            if let Some(dv) = file.deletion_vector.as_ref().filter(|d| d.cardinality > 0) {
                return Err(invalid(format!(
                    "its deletion vector ({} deleted rows) was not decoded, and a format version 2 table needs the rows",
                    dv.cardinality
                )));
            }
        }
        // (A v3 table gets deletion vectors instead: see `vector_deletes`.)
        if file.deleted_rows.is_empty() || v3 {
            return Ok((data, None, found));
        }
        // The deleted rows, as a position-delete file beside the metadata.
        if let Some(beyond) = file.deleted_rows.iter().find(|&&p| p >= record_count) {
            return Err(invalid(format!(
                "deletes row {beyond} of a file of {record_count} rows"
            )));
        }
        let bytes = position_delete_file(&location, &file.deleted_rows).map_err(&invalid)?;
        let delete_path = self.store.absolute(&format!(
            "{METADATA_DIR}/{}-deletes.parquet",
            uuid::Uuid::new_v4()
        ));
        let size = bytes.len() as u64;
        self.store.put_if_absent(&delete_path, bytes).await?;
        let deletes = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(delete_path)
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .partition_spec_id(spec.spec_id())
            .record_count(file.deleted_rows.len() as u64)
            .file_size_in_bytes(size)
            .referenced_data_file(Some(location.clone()))
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok((data, Some(deletes), found))
    }

    /// Delete metadata files that fell out of the metadata log, if the table asks for it.
    /// The commit has already happened, so a failure here is logged, not returned.
    async fn expire_metadata_files(
        &self,
        metadata: &TableMetadata,
        expired: &[iceberg::spec::MetadataLog],
    ) {
        let enabled = metadata
            .properties()
            .get(DELETE_AFTER_COMMIT)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !enabled {
            return;
        }
        for log in expired {
            if let Err(e) = self.store.delete(&log.metadata_file).await {
                tracing::warn!(table = %self.table(), file = %log.metadata_file, error = %e, "could not delete expired metadata file");
            }
        }
    }
}

/// The newest schema that still has every source column of `spec` (a manifest of an old
/// spec whose partition column was dropped since is rewritten with the schema it had).
pub(crate) fn schema_holding(
    metadata: &TableMetadata,
    spec: &IcebergSpec,
    current: &SchemaRef,
) -> SchemaRef {
    let holds = |s: &SchemaRef| {
        spec.fields()
            .iter()
            .all(|f| s.field_by_id(f.source_id).is_some())
    };
    if holds(current) {
        return current.clone();
    }
    let mut schemas: Vec<&SchemaRef> = metadata.schemas_iter().collect();
    schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
    schemas
        .into_iter()
        .find(|s| holds(s))
        .cloned()
        .unwrap_or_else(|| current.clone())
}

/// What identifies a manifest entry a commit removes: a data file's path; a delete file's
/// data file (v3 deletion vectors of many data files share one Puffin file).
fn entry_key(e: &ManifestEntry, data: bool) -> String {
    match e.data_file().referenced_data_file() {
        Some(referenced) if !data => referenced,
        _ => e.file_path().to_string(),
    }
}

/// The snapshots of the current ancestry of `m`, oldest first: (snapshot id, time, what it
/// mirrors).
pub fn ancestry_of(m: &TableMetadata) -> Vec<(i64, i64, Option<SyncMetadata>)> {
    let mut out = Vec::new();
    let mut next = m.current_snapshot().map(|s| s.snapshot_id());
    while let Some(s) = next.and_then(|id| m.snapshot_by_id(id)) {
        out.push((
            s.snapshot_id(),
            s.timestamp_ms(),
            SyncMetadata::from_summary(&s.summary().additional_properties),
        ));
        next = s.parent_snapshot_id();
    }
    out.reverse();
    out
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A positive snapshot id not used by the table yet.
fn fresh_snapshot_id(current: Option<&TableMetadata>) -> i64 {
    loop {
        let bits = uuid::Uuid::new_v4().as_u64_pair();
        let id = (bits.0 ^ bits.1) as i64 & i64::MAX;
        if id != 0 && current.is_none_or(|m| m.snapshot_by_id(id).is_none()) {
            return id;
        }
    }
}

/// One added file in Iceberg's terms: the data file, the position-delete file of the rows
/// the source deleted from it, and its layouts some readers misread.
type AddedFile = (IcebergDataFile, Option<IcebergDataFile>, BTreeSet<Finding>);

/// Whether fields hold a list, a map or a timestamp, whose files may be laid out in a way
/// some readers misread (see [`crate::fidelity`]).
fn may_degrade(fields: &[iceberg::spec::NestedFieldRef]) -> bool {
    fields.iter().any(|f| match f.field_type.as_ref() {
        Type::List(_) | Type::Map(_) => true,
        Type::Struct(s) => may_degrade(s.fields()),
        Type::Primitive(p) => matches!(
            p,
            iceberg::spec::PrimitiveType::Timestamp | iceberg::spec::PrimitiveType::Timestamptz
        ),
    })
}
