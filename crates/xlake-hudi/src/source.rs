//! [`HudiSource`]: a Hudi table's completed instants as neutral change sets.

use xlake_model::{ChangeSet, DataFile, Schema, SourceCommit, SourceFormat};
use xlake_storage::{StorageError, TableStore};

use crate::commit_metadata::{CommitMetadata, RollbackMetadata};
use crate::error::{HudiError, Result};
use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::file_group::{parse_base_file_name, BaseFile, Effect, FileGroups};
use crate::instant::{instant_millis, Instant};
use crate::partition_path::{partition_spec, partition_values};
use crate::properties::{parse_properties, TableConfig, TableType};
use crate::schema::avro_to_schema;
use crate::timeline::{read_instant, Timeline};

/// Summary note on snapshots of a merge-on-read table mirrored read-optimized.
pub const VIEW_NOTE: &str = "xlake.hudi.view";

/// Choices the operator makes.
#[derive(Debug, Clone, Copy, Default)]
pub struct HudiOptions {
    /// Mirror a merge-on-read table's base files only (its read-optimized view). Without
    /// this, merge-on-read tables are refused.
    pub mor_read_optimized: bool,
}

/// What to do with a completed instant.
enum Kind {
    /// Files changed by commit metadata (commit, deltacommit, replacecommit).
    Commit,
    /// Undo of earlier instants.
    Rollback,
    /// No live file changes, no snapshot (clean, savepoint, indexing, …).
    Skip,
}

fn kind(action: &str) -> Option<Kind> {
    Some(match action {
        "commit" | "deltacommit" | "replacecommit" => Kind::Commit,
        "rollback" => Kind::Rollback,
        "clean" | "savepoint" | "indexing" | "schemacommit" | "compaction" | "logcompaction"
        | "clustering" => Kind::Skip,
        _ => return None,
    })
}

/// A Hudi table opened for reading.
#[derive(Debug)]
pub struct HudiSource {
    store: TableStore,
    config: TableConfig,
    timeline: Timeline,
    options: HudiOptions,
}

impl HudiSource {
    /// Open the table: read `hoodie.properties` and list the timeline. A merge-on-read
    /// table is refused unless `options.mor_read_optimized`.
    pub async fn open(store: TableStore, options: HudiOptions) -> Result<Self> {
        let table = store.location().to_string();
        let text = match store.get(".hoodie/hoodie.properties").await {
            Ok(bytes) => String::from_utf8(bytes.to_vec()).map_err(|_| HudiError::Properties {
                table: table.clone(),
                reason: "not UTF-8 text".into(),
            })?,
            Err(StorageError::NotFound { .. }) => {
                return Err(HudiError::Properties {
                    table,
                    reason: "missing: not a Hudi table".into(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let config = TableConfig::from_properties(&parse_properties(&text)).map_err(|reason| {
            HudiError::Properties {
                table: table.clone(),
                reason,
            }
        })?;
        if config.table_type == TableType::MergeOnRead && !options.mor_read_optimized {
            return Err(HudiError::Unsupported {
                table,
                what: "merge-on-read (MOR) table: Iceberg engines cannot read Hudi log files. Pass --mor-read-optimized to mirror its base files only (the read-optimized view; log changes appear after compaction)".into(),
            });
        }
        let timeline = Timeline::load(&store, config.version).await?;
        Ok(Self {
            store,
            config,
            timeline,
            options,
        })
    }

    /// The table's configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The table's timeline.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The table's storage.
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    fn instant_error(&self, instant: &Instant, reason: impl ToString) -> HudiError {
        HudiError::Instant {
            table: self.store.location().to_string(),
            instant: instant.requested.clone(),
            file: self.store.absolute(&instant.file),
            reason: reason.to_string(),
        }
    }

    /// The first completed instant that gets a snapshot.
    fn first_data_instant(&self) -> Option<&Instant> {
        self.timeline
            .completed
            .iter()
            .find(|i| matches!(kind(&i.action), Some(Kind::Commit | Kind::Rollback)))
    }

    /// When early instants are archived: the base files live just before the oldest
    /// retained instant, found by listing (the newest base file of each file group written
    /// by an instant older than it and not pending). Empty when nothing is archived.
    async fn archived_state(&self, mirrored: &BTreeSet<String>) -> Result<Vec<BaseFile>> {
        let archive = if self.config.version >= 8 {
            ".hoodie/timeline/history"
        } else {
            ".hoodie/archived"
        };
        let Some(first) = self.first_data_instant() else {
            return Ok(Vec::new());
        };
        if self.store.list_recursive(archive).await?.is_empty() {
            return Ok(Vec::new());
        }
        let pending: HashSet<&str> = self
            .timeline
            .pending
            .iter()
            .map(|i| i.requested.as_str())
            .collect();
        let mut newest: BTreeMap<(String, String), (String, BaseFile)> = BTreeMap::new();
        for entry in self.store.list_recursive("").await? {
            if entry.path.split('/').any(|part| part.starts_with('.'))
                || entry.path.starts_with("metadata/")
            {
                continue;
            }
            let (partition, name) = entry
                .path
                .rsplit_once('/')
                .unwrap_or(("", entry.path.as_str()));
            let Some((file_id, written)) = parse_base_file_name(name) else {
                continue;
            };
            if written >= first.requested.as_str() || pending.contains(written) {
                continue;
            }
            let file = BaseFile {
                path: entry.path.clone(),
                partition: partition.to_string(),
                file_id: file_id.to_string(),
                size: entry.size,
            };
            let key = (partition.to_string(), file_id.to_string());
            if newest.get(&key).is_none_or(|(w, _)| w.as_str() < written) {
                newest.insert(key, (written.to_string(), file));
            }
        }
        if let Some(last) = mirrored.iter().next_back() {
            if let Some((written, _)) = newest.values().find(|(w, _)| w > last) {
                return Err(HudiError::Unsupported {
                    table: self.store.location().to_string(),
                    what: format!(
                        "instant {written} was archived before it was mirrored (the last mirrored instant is {last}); its commit metadata is gone, so its snapshot cannot be written"
                    ),
                });
            }
        }
        Ok(newest.into_values().map(|(_, f)| f).collect())
    }

    /// One change set per completed commit, delta commit, replace commit and rollback, in
    /// timeline order, replaying the timeline from its start. `mirrored` names the instants
    /// the target already holds (needed for rollbacks of instants Hudi has dropped from the
    /// timeline, and for tables whose early instants are archived: the first change set
    /// then carries the whole state at the oldest retained instant, unless earlier
    /// instants are mirrored already). Also returns notes for the operator.
    pub async fn change_sets(
        &self,
        mirrored: &BTreeSet<String>,
    ) -> Result<(Vec<ChangeSet>, Vec<String>)> {
        let mut groups = FileGroups::default();
        let mut schema: Option<Schema> = None;
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let seed = self.archived_state(mirrored).await?;
        if let (false, Some(first)) = (seed.is_empty(), self.first_data_instant()) {
            notes.push(format!(
                "early instants are archived: {} base files written before instant {} are taken from the file listing{}",
                seed.len(),
                first.requested,
                if mirrored.is_empty() { "; the first snapshot holds the table as of that instant" } else { "" }
            ));
        }
        groups.seed(seed.clone());
        let mut unmirrored_seed = if mirrored.is_empty() {
            seed
        } else {
            Vec::new()
        };
        for instant in &self.timeline.completed {
            if instant.action == "restore" {
                return Err(self.instant_error(instant, "restore instants are not supported: sync a table restored by Hudi into a fresh Iceberg table"));
            }
            let kind = kind(&instant.action).ok_or_else(|| {
                self.instant_error(instant, format!("unknown action {:?}", instant.action))
            })?;
            let (mut effect, data_change) = match kind {
                Kind::Skip => continue,
                Kind::Commit => {
                    let json = read_instant(&self.store, instant).await?;
                    let meta: CommitMetadata = serde_json::from_value(json).map_err(|e| {
                        self.instant_error(instant, format!("not commit metadata: {e}"))
                    })?;
                    if let Some(text) = meta.schema() {
                        schema = Some(
                            avro_to_schema(text, self.config.meta_fields)
                                .map_err(|e| self.instant_error(instant, e))?,
                        );
                    }
                    let effect = groups
                        .apply_commit(&instant.requested, &meta, self.options.mor_read_optimized)
                        .map_err(|e| self.instant_error(instant, e))?;
                    (effect, meta.operation_type.as_deref() != Some("CLUSTER"))
                }
                Kind::Rollback => {
                    let json = read_instant(&self.store, instant).await?;
                    let meta: RollbackMetadata = serde_json::from_value(json).map_err(|e| {
                        self.instant_error(instant, format!("not rollback metadata: {e}"))
                    })?;
                    let rolled_back = meta.commits_rollback.clone().unwrap_or_default();
                    let elsewhere = if rolled_back
                        .iter()
                        .any(|id| !groups.applied(id) && mirrored.contains(id))
                    {
                        meta.deleted_files()
                    } else {
                        Vec::new()
                    };
                    (
                        groups.apply_rollback(&instant.requested, &rolled_back, &elsewhere),
                        true,
                    )
                }
            };
            if schema.is_none() {
                if let Some(text) = &self.config.create_schema {
                    schema = Some(
                        avro_to_schema(text, self.config.meta_fields)
                            .map_err(|e| self.instant_error(instant, e))?,
                    );
                }
            }
            let schema = schema.clone().ok_or_else(|| {
                self.instant_error(
                    instant,
                    "no schema: neither the commit nor hoodie.properties records one",
                )
            })?;
            let (spec, note) = partition_spec(&self.config, &schema);
            if let Some(note) = note {
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            let commit = SourceCommit {
                format: SourceFormat::Hudi,
                id: instant.requested.clone(),
                action: instant.action.clone(),
                requested_ms: instant_millis(&instant.requested),
                commit_time_ms: instant_millis(instant.commit_time()).ok_or_else(|| {
                    self.instant_error(
                        instant,
                        format!("unreadable instant time {}", instant.commit_time()),
                    )
                })?,
            };
            if !unmirrored_seed.is_empty() {
                // The first snapshot also holds what archived instants left live.
                let (replaced, kept): (Vec<BaseFile>, Vec<BaseFile>) =
                    std::mem::take(&mut unmirrored_seed)
                        .into_iter()
                        .partition(|f| effect.removed.contains(f));
                effect.removed.retain(|f| !replaced.contains(f));
                effect.added.splice(0..0, kept);
            }
            let mut change = ChangeSet::new(commit, schema.clone(), spec.clone());
            change.data_change = data_change;
            self.fill(&mut change, effect, instant)?;
            if self.config.table_type == TableType::MergeOnRead {
                change
                    .notes
                    .insert(VIEW_NOTE.into(), "read_optimized".into());
            }
            out.push(change);
        }
        Ok((out, notes))
    }

    fn fill(&self, change: &mut ChangeSet, effect: Effect, instant: &Instant) -> Result<()> {
        for f in effect.added {
            let values = partition_values(
                &f.partition,
                &self.config,
                &change.partition_spec,
                &change.schema,
            )
            .map_err(|e| self.instant_error(instant, format!("{}: {e}", f.path)))?;
            change
                .added
                .push(DataFile::parquet(f.path, f.size, None).with_partition(values));
        }
        change.removed = effect.removed.into_iter().map(|f| f.path).collect();
        Ok(())
    }
}
