//! [`DeltaSource`]: every version of a Delta table as a neutral change set.

use std::collections::{HashMap, HashSet};

use deltalake_core::kernel::scalars::ScalarExt;
use xlake_model::{
    path_key, ChangeSet, CommitListing, DataFile, DeletionVector, ListedCommit, PartitionField,
    PartitionSpec, PathKeySet, SourceCommit, VectorBytes,
};
use xlake_storage::{Stamp, TableStore};

use crate::action::{parse_commit, Add, CommitInfo, MetaData, Protocol};
use crate::checkpoint;
use crate::deletion_vector::{self, Descriptor};
use crate::error::{DeltaError, Reason, Result};
use crate::log::{LogListing, LOG_DIR};
use crate::resume;
use crate::schema::{parse_schema, TableSchema};
use crate::values::{parse_stats, partition_value};

/// Reader features whose tables xlake mirrors exactly.
const SUPPORTED_READER_FEATURES: [&str; 9] = [
    "columnMapping",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
    // A variant column itself is refused by name when the schema is read.
    "variantType",
    "variantType-preview",
    // Written as Iceberg position deletes.
    "deletionVectors",
];

/// Table property that turns change data feed on.
const CHANGE_DATA_FEED: &str = "delta.enableChangeDataFeed";
/// The change data feed column some writers leave in data files.
const CHANGE_TYPE_COLUMN: &str = "_change_type";

/// Table properties naming the columns row tracking materializes row ids and row commit
/// versions into.
const MATERIALIZED_ROW_TRACKING: [&str; 2] = [
    "delta.rowTracking.materializedRowIdColumnName",
    "delta.rowTracking.materializedRowCommitVersionColumnName",
];

/// Columns data files may hold beyond the schema's, which Delta readers skip: with change
/// data feed on, Spark (Delta 2.x) writes `_change_type` into data files of some commits;
/// with row tracking, delta-spark 3.x materializes row ids and commit versions into columns
/// the table properties name (`_row-id-col-<uuid>`) when UPDATE, MERGE or OPTIMIZE rewrite
/// rows. Those names stay once given, so a file written while row tracking was on is still
/// covered after it is turned off.
fn unread_columns(metadata: &MetaData) -> Vec<String> {
    let cdf = metadata
        .property(CHANGE_DATA_FEED)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let change_type = cdf.then(|| CHANGE_TYPE_COLUMN.to_string());
    let materialized = MATERIALIZED_ROW_TRACKING
        .iter()
        .filter_map(|key| metadata.property(key))
        .filter(|name| !name.is_empty())
        .map(str::to_string);
    change_type.into_iter().chain(materialized).collect()
}

/// A Delta table opened for reading.
#[derive(Debug)]
pub struct DeltaSource {
    store: TableStore,
    log: LogListing,
    /// Decode deletion vectors into [`DataFile::deleted_rows`] (off for a target that
    /// carries them as they are: each file's `deletion_vector` is filled either way). A
    /// vector whose file is gone is left undecoded, for the target to judge.
    decode_vectors: bool,
    /// Opened after the newest mirrored version ([`Self::open_after`]): the mirrored
    /// versions older than it, which the log was not listed for, in order.
    mirrored_before: Vec<u64>,
}

/// Schema, spec and column mapping in force at a version.
pub(crate) struct State {
    pub(crate) metadata: MetaData,
    pub(crate) protocol: Protocol,
    table: TableSchema,
    spec: PartitionSpec,
    /// What change sets under this schema are mirrored without (`void` columns).
    degraded: Vec<String>,
    /// Columns data files may hold that Delta readers skip.
    ignored: Vec<String>,
}

impl State {
    /// A change set of `commit` under this state's schema and spec.
    pub(crate) fn change_set(&self, version: u64, commit: SourceCommit) -> ChangeSet {
        let mut change = ChangeSet::new(commit, self.table.schema.clone(), self.spec.clone());
        change.source_state = Some(resume::save(version, &self.metadata, &self.protocol));
        change.degraded = self.degraded.clone();
        change.ignored_columns = self.ignored.clone();
        change
    }
}

impl DeltaSource {
    /// Open the table: list `_delta_log/`, with every commit file's time.
    pub async fn open(store: TableStore) -> Result<Self> {
        Self::open_with_times(store, true).await
    }

    /// Open the table, listing `_delta_log/` with each commit file's time only if `times`
    /// (else by name: on local disk no `stat` per file; a commit read whose `commitInfo`
    /// has no time asks for its file's then).
    pub async fn open_with_times(store: TableStore, times: bool) -> Result<Self> {
        let log = LogListing::load(&store, times).await?;
        Ok(Self {
            store,
            log,
            decode_vectors: true,
            mirrored_before: Vec::new(),
        })
    }

    /// Open the table to mirror the versions after `newest`, the newest mirrored one:
    /// `_delta_log/` listed from there ([`LogListing::load_from`]), else whole. The
    /// listing then names the `mirrored` versions older than `newest` as well, as the
    /// mirror records them (they were listed when they were mirrored).
    pub async fn open_after(
        store: TableStore,
        times: bool,
        newest: u64,
        mirrored: Vec<u64>,
    ) -> Result<Self> {
        let Some(log) = LogListing::load_from(&store, times, newest).await? else {
            let whole = Self::open_with_times(store, times).await?;
            return match whole.log.latest() {
                Some(latest) if latest < newest => Err(ends_before(latest, newest)),
                _ => Ok(whole),
            };
        };
        let mut mirrored_before: Vec<u64> = mirrored.into_iter().filter(|v| *v < newest).collect();
        mirrored_before.sort_unstable();
        Ok(Self {
            store,
            log,
            decode_vectors: true,
            mirrored_before,
        })
    }

    /// Whether to decode deletion vectors into row positions (default true). A target
    /// that copies vectors as they are (Iceberg v3) needs only their locations.
    pub fn decode_deletion_vectors(&mut self, decode: bool) {
        self.decode_vectors = decode;
    }

    /// The table root.
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// The log folder's listing.
    pub fn log(&self) -> &LogListing {
        &self.log
    }

    /// The retained versions that each get a snapshot, from the log folder's names.
    pub fn listing(&self) -> Result<CommitListing> {
        let Some(versions) = self.listed_versions()? else {
            return Ok(CommitListing {
                strictly_ordered: true,
                ..Default::default()
            });
        };
        let retained_from = Some(
            self.mirrored_before
                .first()
                .copied()
                .unwrap_or(*versions.start())
                .to_string(),
        );
        let before = self.mirrored_before.iter().map(|v| ListedCommit {
            id: v.to_string(),
            time_ms: 0,
        });
        let commits = before
            .chain(versions.map(|v| {
                ListedCommit {
                    id: v.to_string(),
                    time_ms: self
                        .log
                        .commits
                        .get(&v)
                        .and_then(|(_, stamp)| stamp.as_ref())
                        .map_or(0, |s| s.modified_ms),
                }
            }))
            .collect();
        Ok(CommitListing {
            commits,
            retained_from,
            strictly_ordered: true,
            completed_late: Default::default(),
            gone_unmirrored: Default::default(),
        })
    }

    /// The versions [`Self::listing`] lists: from the replay's start to the newest.
    fn listed_versions(&self) -> Result<Option<std::ops::RangeInclusive<u64>>> {
        Ok(self
            .log
            .start()?
            .map(|(start, _)| start..=self.log.latest().unwrap_or(start)))
    }

    /// Whether [`Self::listing`] lists `id`, without building it (an id is a version as
    /// `u64` prints it).
    pub(crate) fn lists(&self, id: &str) -> bool {
        let Some(version) = id.parse::<u64>().ok().filter(|v| v.to_string() == id) else {
            return false;
        };
        matches!(self.listed_versions(), Ok(Some(versions)) if versions.contains(&version))
    }

    /// The time of version `version`, whose `commitInfo` is `info`: its in-commit
    /// timestamp, else its timestamp, else its commit file's time (as listed, or asked of
    /// the store for a log listed by name; 0 without one).
    pub(crate) async fn commit_time(&self, version: u64, info: Option<&CommitInfo>) -> Result<i64> {
        if let Some(time) = info.and_then(|i| i.in_commit_timestamp.or(i.timestamp)) {
            return Ok(time);
        }
        Ok(self
            .commit_stamp(version)
            .await?
            .map_or(0, |s| s.modified_ms))
    }

    /// The modification time and tag of `version`'s commit file as the listing gives
    /// them (`None` for a log listed by name; see [`Self::commit_stamp`]).
    pub(crate) fn listed_stamp(&self, version: u64) -> Option<&Stamp> {
        self.log.commits.get(&version).and_then(|(_, s)| s.as_ref())
    }

    /// The modification time and tag of `version`'s commit file: as listed, else asked
    /// of the store (`None` when the log has no commit file of it).
    pub(crate) async fn commit_stamp(&self, version: u64) -> Result<Option<Stamp>> {
        Ok(match self.log.commits.get(&version) {
            Some((_, Some(stamp))) => Some(stamp.clone()),
            Some((path, None)) => self.store.stamp(path).await?,
            None => None,
        })
    }

    pub(crate) fn table(&self) -> String {
        self.store.location().to_string()
    }

    pub(crate) fn state(
        &self,
        version: u64,
        metadata: MetaData,
        protocol: Protocol,
    ) -> Result<State> {
        let unsupported = |what: Reason| DeltaError::Unsupported { version, what };
        for feature in protocol.reader_features.iter().flatten() {
            if !SUPPORTED_READER_FEATURES.contains(&feature.as_str()) {
                return Err(unsupported(
                    format!("reader feature {feature} is not supported").into(),
                ));
            }
        }
        let mapped = matches!(
            metadata.property("delta.columnMapping.mode"),
            Some("name" | "id")
        );
        let table = parse_schema(&metadata.schema_string, mapped, &metadata.partition_columns)
            .map_err(unsupported)?;
        let spec = PartitionSpec::new(
            metadata
                .partition_columns
                .iter()
                .map(PartitionField::identity)
                .collect(),
        );
        let degraded = table
            .void_columns
            .iter()
            .map(|c| format!("column {c}: Delta type void (every value null) has no Iceberg v2 type; left out of the Iceberg schema"))
            .collect();
        let ignored = unread_columns(&metadata);
        Ok(State {
            metadata,
            protocol,
            table,
            spec,
            degraded,
            ignored,
        })
    }

    pub(crate) fn commit(&self, version: u64, action: String, time: i64) -> SourceCommit {
        SourceCommit {
            format: crate::FORMAT,
            id: version.to_string(),
            action,
            requested_ms: None,
            commit_time_ms: time,
        }
    }

    pub(crate) async fn data_file(
        &self,
        s: &State,
        add: &Add,
    ) -> std::result::Result<DataFile, Reason> {
        let path = local_path(&add.path)?;
        refuse_dot_dot(&path, self.store.location())?;
        let (records, stats) = match &add.stats {
            Some(text) if !text.is_empty() => {
                parse_stats(text, &s.table).map_err(|e| e.context(&add.path))?
            }
            _ => (None, Default::default()),
        };
        let by_logical: HashMap<&str, Option<&str>> = add
            .partition_values
            .iter()
            .map(|(k, v)| (s.table.logical_path(k), v.as_deref()))
            .collect();
        let partition = s
            .spec
            .fields
            .iter()
            .map(|f| {
                let ty = s.table.schema.primitive_at(&f.source).ok_or_else(|| {
                    format!("partition column {} is not a primitive column", f.source)
                })?;
                let text = by_logical.get(f.source.as_str()).copied().flatten();
                partition_value(text, ty).map_err(|e| e.context(&add.path))
            })
            .collect::<std::result::Result<Vec<_>, Reason>>()?;
        let mut file = DataFile::parquet(
            path,
            u64::try_from(add.size).map_err(|_| "negative size")?,
            records,
        )
        .with_partition(partition);
        file.column_stats = stats.into_iter().collect();
        if let Some(dv) = &add.deletion_vector {
            let descriptor: Descriptor = serde_json::from_value(dv.clone()).map_err(|e| {
                Reason::library(e).context(format_args!("{}: deletion vector descriptor", add.path))
            })?;
            let vector = crate::vector_bytes::vector_of(&descriptor, records)
                .map_err(|e| e.context(format_args!("{}: deletion vector", add.path)))?;
            if self.decode_vectors {
                match deletion_vector::read(&self.store, &descriptor, records).await {
                    Ok(rows) => file.deleted_rows = rows,
                    // Left undecoded: the target mirrors a vector VACUUM deleted as history
                    // when a later version removes the file, and refuses it otherwise.
                    Err(_) if self.vector_gone(&vector).await => {}
                    Err(e) => return Err(e.context(format_args!("{}: deletion vector", add.path))),
                }
            }
            file.deletion_vector = Some(vector);
        }
        Ok(file)
    }

    /// Whether `vector` is stored in a file that is not there (a failed lookup is not
    /// "gone": the read's own error stands).
    async fn vector_gone(&self, vector: &DeletionVector) -> bool {
        match &vector.bytes {
            VectorBytes::Stored { path, .. } => matches!(self.store.size(path).await, Ok(None)),
            VectorBytes::Inline(_) => false,
        }
    }

    /// The table at `version` as deltalake-core loads it (from the newest checkpoint at or
    /// before it, and the commits since), with the schema state in force there; with its
    /// file list only if `files`.
    async fn snapshot_at(
        &self,
        version: u64,
        files: bool,
    ) -> Result<(State, deltalake_core::DeltaTable)> {
        let fail = |reason: Reason| DeltaError::Checkpoint { version, reason };
        let url = table_url(self.store.location()).map_err(&fail)?;
        // deltalake-core reads through xlake's own object store (the one the rest of the
        // source uses: same credentials, same faults); its read-only log store needs only
        // the default implementation, registered for the location's scheme.
        register_log_store(&url);
        let mut builder = deltalake_core::DeltaTableBuilder::from_url(url.clone())
            .map_err(|e| fail(Reason::library(e)))?
            .with_storage_backend(self.store.object_store(), url)
            .with_version(version as i64);
        if !files {
            builder = builder.without_files();
        }
        let table = match builder.load().await {
            Ok(table) => table,
            Err(e) => {
                let gap = self.gap_below(version).await;
                return Err(gap.unwrap_or_else(|| fail(Reason::library(e))));
            }
        };
        let snapshot = table.snapshot().map_err(|e| fail(Reason::library(e)))?;
        let metadata: MetaData = serde_json::to_value(snapshot.metadata())
            .and_then(serde_json::from_value)
            .map_err(|e| fail(Reason::library(e).context("metadata")))?;
        let protocol: Protocol = serde_json::to_value(snapshot.protocol())
            .and_then(serde_json::from_value)
            .map_err(|e| fail(Reason::library(e).context("protocol")))?;
        let state = self.state(version, metadata, protocol)?;
        Ok((state, table))
    }

    /// Why deltalake-core could not load the table at `version`, when the whole log says
    /// it plainly: a commit file missing that no checkpoint covers (an incremental sync
    /// lists the log only from the mirrored version on, and deltalake-core's own message
    /// dumps its listing). `None` when the whole log has no such gap.
    async fn gap_below(&self, version: u64) -> Option<DeltaError> {
        let whole = match LogListing::load(&self.store, false).await {
            Ok(whole) => whole,
            Err(e) => return Some(e),
        };
        let start = whole.start().err()?;
        (whole.latest()? >= version).then_some(start)
    }

    /// The schema state in force at `version`, without reading its file list: from the
    /// newest `metaData` and `protocol` actions at or before it, in the commits since the
    /// last classic checkpoint (or since version 0 when there is none) and, for what they do
    /// not change, the checkpoint's two columns. Other layouts (V2 sidecars, multi-part, a
    /// log without its early commits) go through deltalake-core, which refuses types it does
    /// not know (`void`).
    pub(crate) async fn schema_at(&self, version: u64) -> Result<State> {
        match self.newest_metadata(version).await {
            Ok(Some((metadata, protocol))) => self.state(version, metadata, protocol),
            Ok(None) => Ok(self.snapshot_at(version, false).await?.0),
            Err(reason) => {
                tracing::debug!(table = %self.table(), version, %reason, "reading the schema through deltalake-core");
                Ok(self.snapshot_at(version, false).await?.0)
            }
        }
    }

    /// See [`Self::schema_at`]; `None` when the log's layout needs deltalake-core.
    async fn newest_metadata(
        &self,
        version: u64,
    ) -> std::result::Result<Option<(MetaData, Protocol)>, Reason> {
        // From the newest checkpoint at or before `version`, or from version 0 without one.
        let checkpoint = match self.log.checkpoints.range(..=version).next_back() {
            Some(&c) => {
                let classic = format!("{LOG_DIR}/{c:020}.checkpoint.parquet");
                match self.store.size(&classic).await.map_err(Reason::library)? {
                    Some(size) => Some((c, classic, size)),
                    None => return Ok(None),
                }
            }
            None => None,
        };
        let first = checkpoint.as_ref().map_or(0, |(c, _, _)| c + 1);
        let (mut metadata, mut protocol) = (None, None);
        for v in (first..=version).rev() {
            if metadata.is_some() && protocol.is_some() {
                break;
            }
            let Some((path, _)) = self.log.commits.get(&v) else {
                return Ok(None);
            };
            let bytes = self.store.get(path).await.map_err(Reason::library)?;
            let text = String::from_utf8_lossy(&bytes);
            // Only the (rare) lines that can hold these actions are parsed.
            let lines: String = text
                .lines()
                .filter(|l| l.contains("\"metaData\"") || l.contains("\"protocol\""))
                .map(|l| format!("{l}\n"))
                .collect();
            let commit = parse_commit(&lines)?;
            metadata = metadata.or(commit.metadata);
            protocol = protocol.or(commit.protocol);
        }
        if metadata.is_none() || protocol.is_none() {
            let Some((_, classic, size)) = checkpoint else {
                return Ok(None);
            };
            let (m, p) = checkpoint::metadata_and_protocol(&self.store, &classic, size).await?;
            metadata = metadata.or(m);
            protocol = protocol.or(p);
        }
        Ok(metadata.zip(protocol))
    }

    /// How late a file live at `version` can say it was created, by the log of `version`
    /// alone: the version's time, or a later `modificationTime` one of its adds gives
    /// (clocks of writers and storage may differ). `None` when that commit cannot be read
    /// (gone, or corrupt: the reader of the live files then says why).
    pub(crate) async fn created_by(&self, version: u64) -> Option<i64> {
        let (path, _) = self.log.commits.get(&version)?;
        let bytes = self.store.get(path).await.ok()?;
        let commit = parse_commit(std::str::from_utf8(&bytes).ok()?).ok()?;
        let time = self.commit_time(version, commit.info.as_ref()).await.ok()?;
        Some(
            commit
                .adds
                .iter()
                .filter_map(Add::created)
                .fold(time, i64::max),
        )
    }

    /// The live file paths at `version`, as `data_file` names them (as [`path_key`]s).
    pub(crate) async fn live_paths_at(&self, version: u64) -> Result<Vec<u128>> {
        let (_, table) = self.snapshot_at(version, true).await?;
        live_paths(&table).map_err(|reason| DeltaError::Checkpoint { version, reason })
    }

    /// The state at a checkpoint version, read with deltalake-core: schema, protocol, and
    /// one change set adding every live file.
    pub(crate) async fn checkpoint_state(&self, version: u64) -> Result<(State, ChangeSet)> {
        let fail = |reason: Reason| DeltaError::Checkpoint { version, reason };
        let (state, table) = self.snapshot_at(version, true).await?;
        let snapshot = table.snapshot().map_err(|e| fail(Reason::library(e)))?;
        let (time, action) = match self.log.commits.get(&version) {
            Some((path, _)) => {
                let bytes = self.store.get(path).await?;
                let info = parse_commit(&String::from_utf8_lossy(&bytes))
                    .ok()
                    .and_then(|c| c.info);
                let time = self.commit_time(version, info.as_ref()).await?;
                (time, info.and_then(|i| i.operation))
            }
            None => (
                snapshot.version_timestamp(version as i64).unwrap_or(0),
                None,
            ),
        };
        let action = action.unwrap_or_else(|| "CHECKPOINT".into());
        let mut change = state.change_set(version, self.commit(version, action, time));
        // Decoded first, then described: deltalake-core's file iterator is not `Send`, and
        // describing a file may read its footer.
        let mut adds = Vec::new();
        for file in snapshot.log_data() {
            let partition_values: HashMap<String, Option<String>> = file
                .partition_values()
                .map(|data| {
                    data.fields()
                        .iter()
                        .zip(data.values())
                        .map(|(k, v)| (k.name().to_string(), partition_text(v)))
                        .collect()
                })
                .unwrap_or_default();
            let add = Add {
                // deltalake-core decodes the path once already; data_file decodes the
                // log's form, so give it back its one level of escaping.
                path: file.path().replace('%', "%25"),
                partition_values,
                size: file.size(),
                modification_time: Some(file.modification_time().into()),
                data_change: true,
                stats: file.stats(),
                deletion_vector: file
                    .deletion_vector_descriptor()
                    .map(serde_json::to_value)
                    .transpose()
                    .map_err(|e| fail(Reason::library(e).context("deletion vector descriptor")))?,
            };
            adds.push(add);
        }
        for add in &adds {
            change
                .added
                .push(self.data_file(&state, add).await.map_err(fail)?);
        }
        Ok((state, change))
    }
}

/// [`DeltaSource::commit_time`] of a commit file whose modification time is known:
/// `modified` (0 without one).
pub(crate) fn commit_time(info: Option<&CommitInfo>, modified: Option<i64>) -> i64 {
    info.and_then(|i| i.in_commit_timestamp.or(i.timestamp))
        .or(modified)
        .unwrap_or(0)
}

/// The log ends at version `latest`, before the version `newest` the mirror holds.
pub(crate) fn ends_before(latest: u64, newest: u64) -> DeltaError {
    DeltaError::Incomplete {
        reason: format!(
            "the log ends at version {latest}, before version {newest} that the mirror holds: the table was written anew or its log cut short, and the mirror is not its (move metadata/ aside and sync to mirror it afresh)"
        ),
    }
}

/// A checkpoint's typed partition value as the text a commit's `partitionValues` holds
/// (deltalake-core's own `serialize` writes negative decimals and binary values in forms
/// no commit uses).
fn partition_text(v: &delta_kernel::expressions::Scalar) -> Option<String> {
    use delta_kernel::expressions::Scalar;
    match v {
        v if v.is_null() => None,
        Scalar::Decimal(d) => {
            let scale = u32::from(d.ty().scale());
            let bits = d.bits();
            let pow = 10i128.pow(scale);
            let (int, frac) = (bits / pow, (bits % pow).unsigned_abs());
            let sign = if bits < 0 && int == 0 { "-" } else { "" };
            Some(if scale == 0 {
                int.to_string()
            } else {
                format!("{sign}{int}.{frac:0width$}", width = scale as usize)
            })
        }
        Scalar::Binary(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        other => Some(other.serialize()),
    }
}

/// The live paths at the version an incremental replay starts after: read (from
/// deltalake-core's checkpoint and the commits since) only when a commit needs them, since
/// that costs as much as the table is large.
pub(crate) enum BaseLive {
    /// Merged into the replay's live set (or a full replay, which needs no base).
    Loaded,
    /// Not read yet; the paths the replay has removed since.
    NotLoaded {
        version: u64,
        /// As [`path_key`]s.
        removed: HashSet<u128>,
    },
}

impl BaseLive {
    /// Note a path removed during the replay.
    pub(crate) fn removed(&mut self, path: &str) {
        if let Self::NotLoaded { removed, .. } = self {
            removed.insert(path_key(path));
        }
    }

    /// Merge the base's live paths, less those removed since, into `live`.
    pub(crate) async fn load_into(
        &mut self,
        live: &mut PathKeySet,
        source: &DeltaSource,
    ) -> Result<()> {
        if let Self::NotLoaded { version, removed } = self {
            let base = source.live_paths_at(*version).await?;
            live.extend(base.into_iter().filter(|p| !removed.contains(p)));
            *self = Self::Loaded;
        }
        Ok(())
    }
}

/// The live file paths of a table loaded by deltalake-core, as `data_file` names them.
fn live_paths(table: &deltalake_core::DeltaTable) -> std::result::Result<Vec<u128>, Reason> {
    let snapshot = table.snapshot().map_err(Reason::library)?;
    snapshot
        .log_data()
        .into_iter()
        .map(|f| local_path(&f.path().replace('%', "%25")).map(|p| path_key(&p)))
        .collect()
}

/// The table's location as a URL for deltalake-core.
/// deltalake-core's default log store, for schemes whose own crates (deltalake-aws, …)
/// xlake does not build: xlake only reads the log, and hands deltalake-core its store.
#[derive(Debug)]
struct ReadOnlyLogStores;

impl deltalake_core::logstore::LogStoreFactory for ReadOnlyLogStores {
    fn with_options(
        &self,
        prefixed_store: deltalake_core::logstore::ObjectStoreRef,
        root_store: deltalake_core::logstore::ObjectStoreRef,
        location: &url::Url,
        options: &deltalake_core::logstore::StorageConfig,
    ) -> deltalake_core::DeltaResult<std::sync::Arc<dyn deltalake_core::logstore::LogStore>> {
        Ok(deltalake_core::logstore::default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

pub(crate) fn register_log_store(url: &url::Url) {
    let Ok(scheme) = url::Url::parse(&format!("{}://", url.scheme())) else {
        return;
    };
    let registry = deltalake_core::logstore::logstore_factories();
    if !registry.contains_key(&scheme) {
        registry.insert(scheme, std::sync::Arc::new(ReadOnlyLogStores));
    }
}

pub(crate) fn table_url(location: &str) -> std::result::Result<url::Url, Reason> {
    if location.contains("://") {
        url::Url::parse(location).map_err(Reason::library)
    } else {
        // deltalake-core decodes the URL's path once more than it was encoded: a folder
        // named `a%41` would be read as `aA`, another folder (hostile review 3, F7).
        if let Some(at) = escape_like(location) {
            return Err(format!(
                "{location}: `{at}` in the table's path reads as an escape to deltalake-core, which reads this log's checkpoints, so it would read another folder; rename the folder (a mirror already there then needs `xlake sync --rebuild` at the new path), or, before the table's first sync, sync it through a link without `%` and two hex digits (its mirror keeps that spelling; once the mirror records this one, every spelling is synced as it)"
            )
            .into());
        }
        url::Url::from_directory_path(location)
            .map_err(|_| format!("{location} is not an absolute path").into())
    }
}

/// The first `%` followed by two hex digits in `path`, which a URL reader takes for an
/// escape.
fn escape_like(path: &str) -> Option<&str> {
    let bytes = path.as_bytes();
    (0..bytes.len().saturating_sub(2))
        .find(|&i| {
            bytes[i] == b'%' && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit()
        })
        .and_then(|i| path.get(i..i + 3))
}

/// A Delta file path as xlake-storage takes it: percent-decoded; `file:` URIs become
/// absolute local paths; other URIs stay as they are.
pub(crate) fn local_path(path: &str) -> std::result::Result<String, Reason> {
    if let Some(rest) = path.strip_prefix("file:") {
        let decoded = url::Url::parse(path)
            .ok()
            .and_then(|u| u.to_file_path().ok());
        return decoded
            .map(|p| p.to_string_lossy().into_owned())
            .or_else(|| Some(format!("/{}", rest.trim_start_matches('/'))))
            .ok_or_else(|| format!("bad file URI {path}").into());
    }
    if path.contains("://") {
        return Ok(path.to_string());
    }
    percent_decode(path)
}

/// Refuse a table-relative path (decoded) with a `..` segment. The protocol takes an add's
/// path as an RFC 2396 URI relative to the table root, and Spark (Hadoop's `Path`) resolves
/// `..` by it, to a file beside or above the table; delta-rs reads a folder literally named
/// `..` (as an object store may hold one). Readers of the one log disagree on the file, so
/// it is not mirrored as either.
fn refuse_dot_dot(path: &str, root: &str) -> std::result::Result<(), Reason> {
    if path.contains("://") || path.starts_with('/') || !path.split('/').any(|s| s == "..") {
        return Ok(());
    }
    let (mut kept, mut above) = (Vec::new(), 0usize);
    for segment in path.split('/') {
        match segment {
            ".." if kept.pop().is_none() => above += 1,
            ".." | "." | "" => {}
            name => kept.push(name),
        }
    }
    let place = if above > 0 {
        let mut at: Vec<&str> = root.trim_end_matches('/').split('/').collect();
        // Never above the file system's root or the bucket (`s3:`, ``, `b`).
        let top = if root.contains("://") { 3 } else { 1 };
        at.truncate(at.len().saturating_sub(above).max(top));
        at.extend(kept);
        format!("outside the table folder, to {}", at.join("/"))
    } else {
        format!("back into the table folder, to {}", kept.join("/"))
    };
    Err(format!(
        "{path}: a relative path through `..` that leads {place}: Spark resolves `..` against the table root, delta-rs reads a folder named `..`, so readers of this log disagree on the file, and xlake refuses it (a writer that means a file elsewhere records its absolute location, which xlake reads, within --allow)"
    )
    .into())
}

fn percent_decode(s: &str) -> std::result::Result<String, Reason> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|d| d.into_owned())
        .map_err(|e| Reason::from(format!("{s}: not UTF-8 after %-decoding")).because(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_tracking_columns_and_change_type_are_read_past() {
        let metadata = |props: &[(&str, &str)]| MetaData {
            id: None,
            schema_string: String::new(),
            partition_columns: Vec::new(),
            configuration: props
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        };
        assert!(unread_columns(&metadata(&[])).is_empty());
        // delta-spark 3.3 with `delta.enableRowTracking` and change data feed on.
        let mut got = unread_columns(&metadata(&[
            ("delta.enableChangeDataFeed", "true"),
            ("delta.enableRowTracking", "true"),
            (
                "delta.rowTracking.materializedRowIdColumnName",
                "_row-id-col-3c5e",
            ),
            (
                "delta.rowTracking.materializedRowCommitVersionColumnName",
                "_row-commit-version-col-9a1b",
            ),
        ]));
        got.sort();
        assert_eq!(
            got,
            [
                "_change_type",
                "_row-commit-version-col-9a1b",
                "_row-id-col-3c5e"
            ]
        );
        // Row tracking turned off later: the names stay, and so do files holding them.
        let got = unread_columns(&metadata(&[
            ("delta.enableRowTracking", "false"),
            (
                "delta.rowTracking.materializedRowIdColumnName",
                "_row-id-col-3c5e",
            ),
        ]));
        assert_eq!(got, ["_row-id-col-3c5e"]);
    }

    #[test]
    fn checkpoint_partition_values_read_like_commit_ones() {
        use delta_kernel::expressions::{DecimalData, Scalar};
        use delta_kernel::schema::DecimalType;
        let dec = |bits: i128| {
            Scalar::Decimal(
                DecimalData::try_new(bits, DecimalType::try_new(10, 2).unwrap()).unwrap(),
            )
        };
        assert_eq!(partition_text(&dec(-150)).as_deref(), Some("-1.50"));
        assert_eq!(partition_text(&dec(-5)).as_deref(), Some("-0.05"));
        assert_eq!(partition_text(&dec(12345)).as_deref(), Some("123.45"));
        assert_eq!(
            partition_text(&Scalar::Binary(b"ab".to_vec())).as_deref(),
            Some("ab")
        );
        assert_eq!(partition_text(&Scalar::Integer(7)).as_deref(), Some("7"));
    }

    #[tokio::test]
    async fn a_version_is_listed_exactly_when_the_listing_holds_it() {
        // Commit files 0 and 1 cleaned up; the checkpoint of 2 covers them.
        let (_dir, store) = crate::log::names_only_table(&[
            "00000000000000000002.json",
            "00000000000000000002.checkpoint.parquet",
            "00000000000000000003.json",
            "00000000000000000004.json",
        ]);
        let source = DeltaSource::open_with_times(store, false).await.unwrap();
        let listed: Vec<String> = source
            .listing()
            .unwrap()
            .commits
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(listed, ["2", "3", "4"]);
        for id in ["0", "1", "2", "3", "4", "5", "03", "+3", "x", ""] {
            assert_eq!(source.lists(id), listed.iter().any(|l| l == id), "{id}");
        }
    }

    #[test]
    fn a_relative_path_through_dot_dot_is_refused_naming_where_it_leads() {
        let refused = |path: &str, root: &str| refuse_dot_dot(path, root).unwrap_err().to_string();
        let out = refused("../outside/x.parquet", "/data/t");
        assert!(
            out.contains("outside the table folder, to /data/outside/x.parquet"),
            "{out}"
        );
        let out = refused("a/../../../x.parquet", "s3://b/w/t/");
        assert!(
            out.contains("outside the table folder, to s3://b/x.parquet"),
            "{out}"
        );
        let out = refused("../../../../x.parquet", "/data/t");
        assert!(
            out.contains("outside the table folder, to /x.parquet"),
            "{out}"
        );
        let out = refused("a/../b.parquet", "/data/t");
        assert!(
            out.contains("back into the table folder, to b.parquet"),
            "{out}"
        );
        for fine in [
            "a/b..c/x.parquet",
            "/abs/../x.parquet",
            "s3://b/../x",
            "..x/y",
        ] {
            assert!(refuse_dot_dot(fine, "/data/t").is_ok(), "{fine}");
        }
    }

    #[test]
    fn a_table_path_with_an_escape_like_name_is_refused_for_deltalake_core() {
        let err = table_url("/data/a%41/t").unwrap_err().to_string();
        assert!(
            err.contains("`%41`") && err.contains("/data/a%41/t") && err.contains("--rebuild"),
            "{err}"
        );
        assert!(table_url("/data/100%/t").is_ok());
        assert!(table_url("/data/a%4g/t").is_ok());
        assert_eq!(escape_like("x%2Fy"), Some("%2F"));
        assert_eq!(escape_like("%"), None);
    }

    #[test]
    fn paths_are_decoded_like_on_disk() {
        assert_eq!(
            local_path("x=A%2FA/part-0.parquet").unwrap(),
            "x=A/A/part-0.parquet"
        );
        assert_eq!(local_path("x=B%20B/p.parquet").unwrap(), "x=B B/p.parquet");
        assert_eq!(
            local_path("file:///tmp/t/a.parquet").unwrap(),
            "/tmp/t/a.parquet"
        );
        assert_eq!(
            local_path("s3://b/t/a.parquet").unwrap(),
            "s3://b/t/a.parquet"
        );
    }
}
