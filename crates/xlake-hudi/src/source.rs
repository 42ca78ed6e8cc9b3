//! [`HudiSource`]: a Hudi table's completed instants as neutral change sets.

use xlake_model::{ChangeSet, DataFile, Schema, SourceCommit, SourceFormat};
use xlake_storage::{StorageError, TableStore};

use crate::commit_metadata::{CommitMetadata, RollbackMetadata};
use crate::error::{HudiError, Result};
use crate::file_group::{Effect, FileGroups};
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

    /// One change set per completed commit, delta commit, replace commit and rollback, in
    /// timeline order, replaying the timeline from its start. Also returns notes for the
    /// operator (e.g. why the Iceberg table is unpartitioned).
    pub async fn change_sets(&self) -> Result<(Vec<ChangeSet>, Vec<String>)> {
        let mut groups = FileGroups::default();
        let mut schema: Option<Schema> = None;
        let mut out = Vec::new();
        let mut notes = Vec::new();
        for instant in &self.timeline.completed {
            let kind = kind(&instant.action).ok_or_else(|| {
                self.instant_error(instant, format!("unknown action {:?}", instant.action))
            })?;
            if instant.action == "restore" {
                return Err(self.instant_error(instant, "restore instants are not supported"));
            }
            let (effect, data_change) = match kind {
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
                    (
                        groups.apply_rollback(
                            &instant.requested,
                            &meta.commits_rollback.unwrap_or_default(),
                        ),
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
