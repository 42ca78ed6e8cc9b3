//! # The Delta target: neutral change sets written as `_delta_log/` versions
//!
//! [`DeltaTarget`] implements the engine's [`TableTarget`] contract for a Delta log at the
//! table root. It knows only `xlake-model` change sets, never the source format.
//!
//! - One version per change set: `_delta_log/<n>.json`, written with put-if-absent (a
//!   writer that loses the race gets a conflict and the engine re-plans; nothing is
//!   overwritten). `commitInfo.timestamp` is the source commit's time;
//!   `commitInfo.xlakeMetadata` records the source commit (format, id, operation, the
//!   table location it was written for, the change set's notes): the engine's mirror
//!   state, `check`, and the detection of a copied table read it back.
//! - A log holding a version without `xlakeMetadata` is another writer's table: refused,
//!   naming the file.
//! - `protocol` is 1/2 unless a feature is used (column mapping, deletion vectors,
//!   `timestamp_ntz`): then 3/7 listing those features only.
//! - Checkpoints (Parquet, with `_last_checkpoint`) every [`CHECKPOINT_INTERVAL`] versions,
//!   written by deltalake-core from the log. `expire` deletes the versions before a
//!   checkpoint as the Delta protocol's metadata cleanup does; the log is then read from
//!   that checkpoint and the commits after it.
//!
//! | module | what |
//! |---|---|
//! | `log_state` | xlake's log read back: versions, live files, metaData and protocol |
//! | `mirrored_deletes` | the rows the loaded version deletes, for a source resuming after it |
//! | `commit` | the actions of one version |
//! | `schema_out` | schema, partition columns, column mapping, protocol |
//! | `naming` | how files hold the fields (Parquet field ids or names): column mapping `id` or `name` |
//! | `values_out` | partition values, statistics, paths, inline vectors |
//! | `checkpoint_out` | checkpoints through deltalake-core |
//! | `retention` | `expire` (log cleanup to a checkpoint) and `cleanup` (unnamed vector files) |
//! | `error` | [`TargetFault`] |

mod checkpoint_out;
mod commit;
mod error;
mod log_state;
mod mirrored_deletes;
mod naming;
mod retention;
mod schema_out;
mod values_out;

pub use error::TargetFault;
pub use log_state::{XlakeMetadata, XLAKE_FIELD};

use serde_json::Value as Json;
use xlake_model::{ChangeSet, DeclaredTable};
use xlake_storage::{PutOutcome, TableStore};
use xlake_target::{
    Ancestor, Committed, Expired, Files, FormatChange, Identified, IdentifyFuture, Loaded,
    MirrorState, MirroredDeletesRef, MissingFile, Orphans, Pointer, Published, Read, Retention,
    SelfCheck, SetAside, SnapshotEntry, TableTarget, TargetError, TargetHealth, TargetOptions,
    TargetTakes, TargetView,
};

use crate::log::LOG_DIR;
use log_state::LogState;

/// A checkpoint is written at every version that is a multiple of this (as Delta writers
/// do by default).
pub const CHECKPOINT_INTERVAL: u64 = 10;

/// A Delta log at the table's root, as a [`TableTarget`].
pub struct DeltaTarget {
    store: TableStore,
    verify_files: bool,
    state: Option<LogState>,
    relocated_from: Option<String>,
}

impl DeltaTarget {
    /// The Delta target at the store's root.
    pub fn open(store: TableStore, options: &TargetOptions) -> Result<Self, TargetFault> {
        if let Some(n) = options.format_version {
            return Err(TargetFault::Refused(format!("--format-version {n} is an Iceberg format version; the Delta target writes the lowest protocol the features used need")));
        }
        Ok(Self {
            store,
            verify_files: options.verify_files,
            state: None,
            relocated_from: None,
        })
    }

    /// Whether the store's `_delta_log/` was written by xlake (its oldest commit records
    /// `xlakeMetadata`; version 0 until an expire deleted it): a folder whose Delta log is
    /// a mirror is not a Delta source.
    pub async fn written_by_xlake(store: &TableStore) -> Result<bool, TargetFault> {
        let Some(first) = Self::oldest_commit(store).await? else {
            return Ok(false);
        };
        let bytes = store.get(&first).await?;
        let mut probe = LogState::default();
        Ok(probe.apply(0, &bytes, &first).is_ok())
    }

    /// The oldest commit file of the log: version 0's when it is there (one request),
    /// else the oldest listed.
    async fn oldest_commit(store: &TableStore) -> Result<Option<String>, TargetFault> {
        let first = Self::commit_file(0);
        if store.size(&first).await?.is_some() {
            return Ok(Some(first));
        }
        let names = store.list_names(LOG_DIR).await?;
        let mut commits: Vec<&str> = names
            .iter()
            .filter(|n| {
                n.len() == 25 && n.ends_with(".json") && n[..20].bytes().all(|b| b.is_ascii_digit())
            })
            .collect();
        commits.sort_unstable();
        Ok(commits.first().map(|n| format!("{LOG_DIR}/{n}")))
    }

    fn commit_file(version: u64) -> String {
        format!("{LOG_DIR}/{version:020}.json")
    }

    async fn publish_one(&mut self, change: &ChangeSet) -> Result<Committed, TargetFault> {
        let actions =
            commit::actions(&self.store, self.state.as_ref(), change, self.verify_files).await?;
        let version = self
            .state
            .as_ref()
            .and_then(LogState::latest)
            .map_or(0, |v| v.version + 1);
        let mut body = String::new();
        for a in &actions {
            body.push_str(&a.to_string());
            body.push('\n');
        }
        let path = Self::commit_file(version);
        match self
            .store
            .put_if_absent(&path, body.clone().into_bytes())
            .await?
        {
            PutOutcome::Created => {}
            PutOutcome::AlreadyExists => {
                return Err(TargetFault::Conflict {
                    file: self.store.absolute(&path),
                })
            }
        }
        let state = self.state.get_or_insert_with(LogState::default);
        state.apply(version, body.as_bytes(), &path)?;
        Ok(Committed {
            version,
            snapshot_id: version as i64,
            timestamp_ms: change.commit.commit_time_ms,
            degraded: change.degraded.clone(),
        })
    }

    fn entries(&self) -> &[log_state::VersionEntry] {
        self.state.as_ref().map_or(&[], |s| s.versions.as_slice())
    }
}

fn source_id(x: &XlakeMetadata) -> Option<String> {
    (!x.source_identifier.is_empty()).then(|| x.source_identifier.clone())
}

#[async_trait::async_trait(?Send)]
impl TableTarget for DeltaTarget {
    async fn load(&mut self, read: Read) -> Result<Option<Loaded>, TargetError> {
        self.state = LogState::read(&self.store).await?;
        self.relocated_from = None;
        let Some(latest) = self.state.as_ref().and_then(LogState::latest).cloned() else {
            return Ok(None);
        };
        let relocated = self.state.as_ref().and_then(|s| s.relocated(&self.store));
        if let Some(fault) = relocated {
            if matches!(read, Read::ForCommit | Read::ForFirstCommit) {
                return Err(fault.into());
            }
            self.relocated_from = Some(latest.xlake.table_location.clone());
        }
        let reader = self
            .state
            .as_ref()
            .and_then(|s| s.protocol.as_ref()?.get("minReaderVersion")?.as_u64())
            .unwrap_or(1);
        Ok(Some(Loaded {
            version: latest.version,
            relocated_from: self.relocated_from.clone(),
            recorded_at: Some(latest.xlake.table_location.clone()),
            source_format: Some(latest.xlake.source_table_format.clone()),
            format_version: u8::try_from(reader).unwrap_or(u8::MAX),
            snapshots: self.entries().len(),
        }))
    }

    fn mirror_state(&self) -> MirrorState {
        if self.relocated_from.is_some() {
            return MirrorState::default();
        }
        let entries = self.entries();
        MirrorState {
            commits: entries.iter().filter_map(|e| source_id(&e.xlake)).collect(),
            first: entries.iter().find_map(|e| source_id(&e.xlake)),
            newest: entries
                .last()
                .and_then(|e| Some((source_id(&e.xlake)?, e.xlake.notes.clone()))),
            live_files: None,
            source_state: entries.last().and_then(|e| e.xlake.source_state.clone()),
            deletes: None,
        }
    }

    fn records_note(&self, key: &str, value: &str) -> bool {
        self.entries()
            .iter()
            .any(|e| e.xlake.notes.get(key).is_some_and(|v| v == value))
    }

    async fn prepare(&mut self) -> Result<FormatChange, TargetError> {
        Ok(FormatChange::default())
    }

    async fn upgrade(&mut self) -> Result<FormatChange, TargetError> {
        Err(TargetFault::Refused("`xlake upgrade` moves Iceberg format versions; a Delta target's protocol follows the features it uses".into()).into())
    }

    fn takes(&self) -> TargetTakes {
        TargetTakes {
            stored_deletion_vectors: true,
        }
    }

    fn mirrored_deletes(&self) -> Option<MirroredDeletesRef> {
        let state = self
            .state
            .as_ref()
            .filter(|_| self.relocated_from.is_none())?;
        let commit = source_id(&state.latest()?.xlake)?;
        let deletes = mirrored_deletes::LogDeletes::of(&self.store, state, commit);
        Some(MirroredDeletesRef(std::sync::Arc::new(deletes)))
    }

    async fn live_files(
        &self,
        _max_reads: usize,
    ) -> Result<Option<Vec<(String, u64)>>, TargetError> {
        let Some(state) = self
            .state
            .as_ref()
            .filter(|_| self.relocated_from.is_none())
        else {
            return Ok(None);
        };
        Ok(state
            .live
            .iter()
            .map(|(p, l)| Some((self.store.absolute(p), l.rows?)))
            .collect())
    }

    async fn publish(&mut self, batch: &[&ChangeSet], _last: bool) -> Published {
        let mut published = Published::default();
        for change in batch {
            match self.publish_one(change).await {
                Ok(c) => published.committed.push(c),
                Err(e) => {
                    published.error = Some(e.into());
                    break;
                }
            }
        }
        let due = published
            .committed
            .iter()
            .map(|c| c.version)
            .filter(|v| *v > 0 && v % CHECKPOINT_INTERVAL == 0)
            .max();
        if let Some(v) = due {
            checkpoint_out::write(&self.store, v).await;
        }
        published
    }

    async fn create_empty(&mut self, declared: &DeclaredTable) -> Result<Option<u64>, TargetError> {
        if self.state.is_some() || LogState::read(&self.store).await?.is_some() {
            return Ok(None);
        }
        let commit = xlake_model::SourceCommit {
            format: declared.format,
            id: String::new(),
            action: "create".into(),
            requested_ms: None,
            commit_time_ms: now_ms(),
        };
        let change = ChangeSet::new(
            commit,
            declared.schema.clone(),
            declared.partition_spec.clone(),
        );
        Ok(Some(self.publish_one(&change).await?.version))
    }

    async fn expire(&self, retention: &Retention) -> Result<Expired, TargetError> {
        Ok(retention::expire(&self.store, retention).await?)
    }

    fn view(&self) -> TargetView {
        let entries = self.entries();
        let last = entries.last().map(|e| e.version);
        TargetView {
            snapshots: entries
                .iter()
                .map(|e| SnapshotEntry {
                    sequence_number: e.version as i64,
                    snapshot_id: e.version as i64,
                    parent_snapshot_id: e.version.checked_sub(1).map(|p| p as i64),
                    timestamp_ms: e.timestamp_ms,
                    time: iso_instant(e.timestamp_ms),
                    operation: e.operation.to_lowercase(),
                    current: Some(e.version) == last,
                    source_format: Some(e.xlake.source_table_format.clone()),
                    source_commit: source_id(&e.xlake),
                    source_operation: e.xlake.latest_table_operation_identifier.clone(),
                })
                .collect(),
            ancestry: entries
                .iter()
                .map(|e| Ancestor {
                    snapshot_id: e.version as i64,
                    source_commit: source_id(&e.xlake),
                })
                .collect(),
        }
    }

    async fn files_at(&self, snapshot_id: i64) -> Result<Option<Vec<(String, u64)>>, TargetError> {
        let Ok(version) = u64::try_from(snapshot_id) else {
            return Ok(None);
        };
        if self.entries().last().is_none_or(|e| e.version < version) {
            return Ok(None);
        }
        let listing = log_state::list(&self.store).await?;
        let Some(state) = LogState::read_listed(&self.store, &listing, Some(version)).await? else {
            return Ok(None);
        };
        Ok(state
            .live
            .into_iter()
            .map(|(p, l)| Some((self.store.absolute(&p), l.rows?)))
            .collect())
    }

    /// Every deletion vector file a version of the log names is there (one HEAD each; a
    /// relocated table names them at the old place: nothing looked up).
    async fn self_check(&self) -> Result<SelfCheck, TargetError> {
        let Some(state) = self
            .state
            .as_ref()
            .filter(|_| self.relocated_from.is_none())
        else {
            return Ok(SelfCheck::default());
        };
        let files = state
            .vector_files_read()
            .map_err(|reason| TargetFault::Unreadable {
                file: self.store.absolute(LOG_DIR),
                reason,
            })?;
        let mut missing_files = Vec::new();
        for (file, version) in files {
            if self
                .store
                .size(&file)
                .await
                .map_err(TargetFault::from)?
                .is_none()
            {
                missing_files.push(MissingFile {
                    snapshot_id: version as i64,
                    file: self.store.absolute(&file),
                    what: "the deletion vector file".into(),
                });
            }
        }
        Ok(SelfCheck {
            missing_files,
            ..SelfCheck::default()
        })
    }

    async fn health(&self) -> Result<TargetHealth, TargetError> {
        let listed = self
            .store
            .list_dir(LOG_DIR)
            .await
            .map_err(TargetFault::from)?;
        let latest = self.entries().last();
        let current = latest.map(|e| Self::commit_file(e.version));
        let partitioning = self
            .state
            .as_ref()
            .and_then(|s| {
                s.metadata
                    .as_ref()?
                    .get("partitionColumns")?
                    .as_array()
                    .cloned()
            })
            .unwrap_or_default()
            .iter()
            .filter_map(Json::as_str)
            .map(|c| format!("identity({c})"))
            .collect();
        Ok(TargetHealth {
            metadata: Files {
                files: listed.len(),
                bytes: listed.iter().map(|e| e.size).sum(),
            },
            version: latest.map(|e| e.version),
            current_metadata_bytes: listed
                .iter()
                .find(|e| Some(&e.path) == current.as_ref())
                .map_or(0, |e| e.size),
            snapshots: self.entries().len(),
            manifests: 0,
            orphan_files: 0,
            relocated_from: self.relocated_from.iter().cloned().collect(),
            not_written_by_xlake: Vec::new(),
            partitioning,
            degraded: latest
                .map(|e| e.xlake.degraded.clone())
                .unwrap_or_default()
                .into_iter()
                .chain(self.state.iter().flat_map(|s| {
                    s.physical.reused.iter().map(|r| {
                        format!("column mapping: {r} (readers that resolve physical names read one for the other or refuse the version)")
                    })
                }))
                .collect(),
        })
    }

    async fn set_aside_relocated(&self) -> Result<SetAside, TargetError> {
        Ok(SetAside::Nothing)
    }

    async fn orphans(&self, cutoff_ms: i64) -> Result<Orphans, TargetError> {
        Ok(retention::orphans(&self.store, cutoff_ms).await?)
    }

    async fn exists(&self) -> Result<bool, TargetError> {
        Ok(Self::oldest_commit(&self.store).await?.is_some())
    }

    fn pointer(&self) -> Option<Pointer> {
        None
    }

    fn identify(&self, _name: &str, _uuid: &str) -> IdentifyFuture {
        Box::pin(async { Ok(Identified::Missing) })
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn iso_instant(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| ms.to_string())
}
