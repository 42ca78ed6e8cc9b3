//! [`HudiSource`]: a Hudi table's completed instants as neutral change sets.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use xlake_model::{ChangeSet, CommitListing, DataFile, DeclaredTable, ListedCommit};
use xlake_source::{Collected, MirrorState};
use xlake_storage::{StorageError, TableStore};

use crate::commit_metadata::{RestoreMetadata, RollbackMetadata};
use crate::error::{HistoryLost, HudiError, Reason, Result};
use crate::file_group::{parse_base_file_path, BaseFile, Effect};
use crate::instant::{gets_snapshot, kind, Kind};
use crate::instant::{instant_millis, Instant};
use crate::partition_path::{partition_spec, partition_values};
use crate::properties::{parse_properties, TableConfig, TableType};
use crate::resume::seconds;
use crate::schema::{avro_to_schema, META_COLUMNS};
use crate::timeline::Timeline;

/// Summary note a merge-on-read table mirrored as its read-optimized view puts on its
/// snapshots (value [`READ_OPTIMIZED`]): the operator's choice, read back by later
/// commands through the kind's [`RecordedChoice`](xlake_source::RecordedChoice).
pub const VIEW_NOTE: &str = "xlake.hudi.view";
/// The value of [`VIEW_NOTE`] for the read-optimized view.
pub const READ_OPTIMIZED: &str = "read_optimized";

/// Choices the operator makes: the neutral source options (`mor_read_optimized` mirrors a
/// merge-on-read table's base files only; without it, merge-on-read tables are refused).
pub type HudiOptions = xlake_source::SourceOptions;

/// A Hudi table opened for reading.
#[derive(Debug)]
pub struct HudiSource {
    store: TableStore,
    config: TableConfig,
    /// The timeline as opened: whole, or from [`Self::listed_from`] on.
    timeline: Timeline,
    /// Opened after the newest mirrored instant ([`Self::open_after`]): the instant time
    /// the timeline was listed from and the pending instants looked up (see
    /// [`crate::resume`]).
    pub(crate) listed_from: Option<crate::resume::Floor>,
    /// The whole timeline, listed once when the part listed does not give what the whole
    /// would (see [`crate::partial`]).
    pub(crate) whole: std::sync::OnceLock<Timeline>,
    /// The incremental start found for the mirror's newest instant while deciding whether
    /// the part listed is enough, kept for the replay that follows.
    pub(crate) start: std::sync::Mutex<Option<(String, crate::start::Start)>>,
    /// A listing was given while the part was in use: a replay over the whole timeline
    /// then gives nothing before the part (see [`crate::partial`]).
    pub(crate) part_listed: std::sync::atomic::AtomicBool,
    pub(crate) options: HudiOptions,
    /// After the completed instant at the index held, the base files live before the
    /// file groups the later instants write to again, or `None` when those are not known
    /// without the mirror's live files (see [`incremental`](crate::incremental)), once
    /// read.
    pub(crate) earlier_groups: std::sync::Mutex<Option<(usize, Option<Vec<BaseFile>>)>>,
}

impl HudiSource {
    /// Open the table: read `hoodie.properties` and list the timeline. A merge-on-read
    /// table is refused unless `options.mor_read_optimized`.
    pub async fn open(store: TableStore, options: HudiOptions) -> Result<Self> {
        Self::open_if_there(store, options)
            .await?
            .ok_or_else(|| HudiError::Properties {
                reason: "missing: not a Hudi table".into(),
            })
    }

    /// [`Self::open`]; `None` when there is no `hoodie.properties` (one request either way).
    pub async fn open_if_there(store: TableStore, options: HudiOptions) -> Result<Option<Self>> {
        let Some(config) = read_config(&store, &options).await? else {
            return Ok(None);
        };
        let timeline = Timeline::load(&store, &config.timeline_dir).await?;
        Self::with_timeline(store, options, config, timeline, None).map(Some)
    }

    /// The source over `timeline`, listed from `listed_from` on if given; refused when it
    /// holds a bootstrap instant.
    pub(crate) fn with_timeline(
        store: TableStore,
        options: HudiOptions,
        config: TableConfig,
        timeline: Timeline,
        listed_from: Option<crate::resume::Floor>,
    ) -> Result<Self> {
        if let Some(i) = timeline
            .completed
            .iter()
            .chain(&timeline.pending)
            .find(|i| i.requested().starts_with("0000000000000"))
        {
            return Err(HudiError::Unsupported {
                what: format!(
                    "bootstrap instant {} ({}): bootstrapped tables cannot be mirrored",
                    i.requested(),
                    store.absolute(i.file())
                ),
            });
        }
        Ok(Self {
            store,
            config,
            timeline,
            listed_from,
            whole: Default::default(),
            start: Default::default(),
            part_listed: Default::default(),
            options,
            earlier_groups: Default::default(),
        })
    }
}

/// The table's configuration from `hoodie.properties`, refused for what cannot be mirrored
/// with `options`; `None` when the file is not there.
pub(crate) async fn read_config(
    store: &TableStore,
    options: &HudiOptions,
) -> Result<Option<TableConfig>> {
    let text = match store.get(".hoodie/hoodie.properties").await {
        Ok(bytes) => String::from_utf8(bytes.to_vec()).map_err(|_| HudiError::Properties {
            reason: "not UTF-8 text".into(),
        })?,
        Err(StorageError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let config = TableConfig::from_properties(&parse_properties(&text))
        .map_err(|reason| HudiError::Properties { reason })?;
    if config.table_type == TableType::MergeOnRead && !options.mor_read_optimized {
        return Err(HudiError::Unsupported {
            what: format!("merge-on-read (MOR) table: {} cannot read Hudi log files. Pass --mor-read-optimized to mirror its base files only (the read-optimized view; log changes appear after compaction)", options.target_readers()),
        });
    }
    if config.bootstrapped {
        return Err(HudiError::Unsupported {
            what: "bootstrapped table (hoodie.bootstrap.base.path is set): its skeleton files hold only the _hoodie_* columns, so they cannot be mirrored".into(),
        });
    }
    Ok(Some(config))
}

impl HudiSource {
    /// The table's configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The completed instants that each get a snapshot, from the timeline's file names.
    pub fn listing(&self) -> CommitListing {
        self.listing_after(&BTreeSet::new())
    }

    /// [`Self::listing`] for a mirror holding `mirrored`: with the timeline listed from an
    /// instant time on ([`Self::listed_from`]), the mirrored instants requested before it
    /// come first, as the mirror names them (every completed instant there is mirrored:
    /// see [`crate::resume`]).
    pub fn listing_after(&self, mirrored: &BTreeSet<String>) -> CommitListing {
        let before: Vec<&String> = match self.listed_from() {
            Some(from) => {
                self.part_listed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                mirrored.iter().filter(|id| seconds(id) < from).collect()
            }
            None => Vec::new(),
        };
        let timeline = self.timeline();
        let listed = timeline
            .completed
            .iter()
            .filter(|i| gets_snapshot(i.action()))
            .map(|i| ListedCommit {
                id: i.requested().to_string(),
                time_ms: instant_millis(i.commit_time()).unwrap_or(0),
            });
        let earlier = before.iter().map(|id| ListedCommit {
            id: id.to_string(),
            time_ms: instant_millis(id).unwrap_or(0),
        });
        let on_timeline = timeline.completed.iter().chain(&timeline.pending);
        let oldest = on_timeline.map(|i| i.requested()).min();
        CommitListing {
            commits: earlier.chain(listed).collect(),
            retained_from: before
                .first()
                .map(|id| id.as_str())
                .or(oldest)
                .map(str::to_string),
            strictly_ordered: self.config.version >= 8,
            completed_late: Default::default(),
            gone_unmirrored: Default::default(),
        }
    }

    /// What the no-op shortcut compares ([`xlake_source::TableSource::tip`]):
    /// `<listFrom>:<ids>:<pending>`, the instant time the next sync lists from
    /// ([`crate::resume::floor`]), every completed instant that gets a snapshot requested
    /// from then on, and the pending instants before it (looked up one by one; the third
    /// part is left out when they are not named), the same whether the timeline was
    /// listed whole or from the floor the last sync left. A new instant moves the floor
    /// or joins the list, a pending one that completes leaves the last; an instant
    /// requested before the floor that completes unseen is the case [`crate::resume`]
    /// misses too. [`crate::resume::of_tip`] reads the floor back.
    ///
    /// On a local-time table whose clock may have gone back since the floor (see
    /// [`crate::clock`]) the ids are those from an hour before it, as the check lists
    /// from there ([`Self::open_part`]): an instant of the repeated hour requested before
    /// the floor joins them, so the check does not say nothing new (the settled record,
    /// made before the change, named fewer; made after it, the same ones).
    pub fn tip(&self) -> String {
        let floor = crate::resume::floor(self.timeline(), crate::resume::MARGIN);
        let floor = floor.unwrap_or_default();
        let from = floor.list_from.as_str();
        let listed = floor
            .clone()
            .for_listing(self.config().utc_instants, crate::clock::now());
        let ids_from = listed.list_from.as_str().min(from);
        let ids: Vec<&str> = self
            .timeline()
            .completed
            .iter()
            .filter(|i| gets_snapshot(i.action()) && seconds(i.requested()) >= ids_from)
            .map(|i| i.requested())
            .collect();
        match &floor.pending {
            Some(_) => format!("{from}:{}:{}", ids.join(","), floor.lookups().join(",")),
            None => format!("{from}:{}", ids.join(",")),
        }
    }

    /// The instants the active timeline's completed rollbacks and restores undid, each with
    /// the rollback or restore that undid it (read from their metadata).
    pub async fn undone_commits(&self) -> Result<BTreeMap<String, String>> {
        let mut undone = BTreeMap::new();
        for instant in &self.timeline().completed {
            let ids = match kind(instant.action()) {
                Some(Kind::Rollback) => {
                    let json = crate::timeline::read_instant(&self.store, instant).await?;
                    let meta: RollbackMetadata = serde_json::from_value(json).map_err(|e| {
                        self.instant_error(instant, format!("not rollback metadata: {e}"))
                    })?;
                    meta.commits_rollback.unwrap_or_default()
                }
                Some(Kind::Restore) => {
                    let json = crate::timeline::read_instant(&self.store, instant).await?;
                    let meta: RestoreMetadata = serde_json::from_value(json).map_err(|e| {
                        self.instant_error(instant, format!("not restore metadata: {e}"))
                    })?;
                    meta.rolled_back()
                }
                _ => continue,
            };
            // Only an instant made after a commit can undo it.
            for id in ids
                .into_iter()
                .filter(|id| id.as_str() < instant.requested())
            {
                undone.insert(id, instant.requested().to_string());
            }
        }
        Ok(undone)
    }

    /// The table root.
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// The table's timeline: whole, or the part listed from [`Self::listed_from`] on
    /// while that is enough (see [`crate::partial`]).
    pub fn timeline(&self) -> &Timeline {
        self.whole.get().unwrap_or(&self.timeline)
    }

    /// The instant time the timeline in use was listed from; `None` when it is whole.
    pub fn listed_from(&self) -> Option<&str> {
        match self.whole.get() {
            Some(_) => None,
            None => self.listed_from.as_ref().map(|f| f.list_from.as_str()),
        }
    }

    /// The saved floor the timeline in use was listed from; `None` when it is whole.
    /// The state the mirror's newest change set saved (where its sync listed from, the
    /// instants pending then), if it saved one this build reads.
    pub(crate) fn saved_floor(&self, mirrored: &MirrorState) -> Option<crate::resume::Floor> {
        let (newest, _) = mirrored.newest.as_ref()?;
        crate::resume::of(mirrored.source_state.as_deref(), newest)
    }

    pub(crate) fn part_floor(&self) -> Option<&crate::resume::Floor> {
        match self.whole.get() {
            Some(_) => None,
            None => self.listed_from.as_ref(),
        }
    }

    pub(crate) fn instant_error(&self, instant: &Instant, reason: impl Into<Reason>) -> HudiError {
        HudiError::Instant {
            instant: instant.requested().to_string(),
            file: self.store.absolute(instant.file()),
            reason: reason.into(),
        }
    }

    /// When early instants are archived: the base files live before the active timeline,
    /// found by listing. That is the newest base file of each file group written by an
    /// instant older than every write instant on the active timeline (in any state) and not
    /// itself on it, as Hudi's own file system view decides. Empty when nothing is archived.
    pub(crate) async fn archived_state(
        &self,
        mirrored: &BTreeSet<String>,
    ) -> Result<Vec<BaseFile>> {
        let on_timeline: HashSet<&str> = self
            .timeline()
            .completed
            .iter()
            .chain(&self.timeline().pending)
            .map(|i| i.requested())
            .collect();
        let Some(cutoff) = self.timeline().oldest_write() else {
            return Ok(Vec::new());
        };
        if self
            .store
            .list_recursive(&self.config.archive_dir)
            .await?
            .is_empty()
        {
            return Ok(Vec::new());
        }
        let mut newest: BTreeMap<(String, String), (String, BaseFile)> = BTreeMap::new();
        for entry in self.store.list_recursive("").await? {
            if entry.path.split('/').any(|part| part.starts_with('.'))
                || entry.path.starts_with("metadata/")
            {
                continue;
            }
            let Some((partition, file_id, written)) = parse_base_file_path(&entry.path) else {
                continue;
            };
            if written >= cutoff || on_timeline.contains(written) {
                continue;
            }
            let file = BaseFile {
                path: entry.path.clone(),
                partition: partition.to_string(),
                file_id: file_id.to_string(),
                size: entry.size,
                records: None,
            };
            let key = (partition.to_string(), file_id.to_string());
            if newest.get(&key).is_none_or(|(w, _)| w.as_str() < written) {
                newest.insert(key, (written.to_string(), file));
            }
        }
        if let Some(last) = mirrored.iter().next_back() {
            if let Some((written, _)) = newest.values().find(|(w, _)| w > last) {
                return Err(HistoryLost {
                    what: format!(
                        "instant {written} was archived before it was mirrored (the last mirrored instant is {last}); its commit metadata is gone, so its snapshot cannot be written"
                    ),
                }
                .into());
            }
        }
        Ok(newest.into_values().map(|(_, f)| f).collect())
    }

    /// Every change set of the table from the start of its timeline, in memory (for tests
    /// and small tables; a sync streams them, see [`Self::replay_from`]).
    pub async fn change_sets(&self, mirrored: &MirrorState) -> Result<Collected> {
        Ok(xlake_source::collect(Box::new(self.replay_from(mirrored).await?)).await)
    }

    /// The table as `hoodie.table.create.schema` declares it, for a table with no completed
    /// commit yet; `None` when the property is absent.
    pub fn declared_table(&self) -> Result<Option<DeclaredTable>> {
        let Some(text) = &self.config.create_schema else {
            return Ok(None);
        };
        let schema =
            avro_to_schema(text, self.config.meta_fields).map_err(|e| HudiError::Properties {
                reason: e.context("hoodie.table.create.schema"),
            })?;
        let (partition_spec, _) = partition_spec(&self.config, &schema);
        Ok(Some(DeclaredTable {
            format: crate::FORMAT,
            schema,
            partition_spec,
            ignored_columns: self.ignored_columns(),
        }))
    }

    /// Columns base files hold that readers skip: with `hoodie.populate.meta.fields=false`
    /// Hudi still writes the five meta columns (null but `_hoodie_file_name`), and
    /// leaves them out of the table's rows.
    pub(crate) fn ignored_columns(&self) -> Vec<String> {
        if self.config.meta_fields {
            Vec::new()
        } else {
            META_COLUMNS.iter().map(|c| c.to_string()).collect()
        }
    }

    pub(crate) fn fill(
        &self,
        change: &mut ChangeSet,
        effect: Effect,
        instant: &Instant,
    ) -> Result<()> {
        for f in effect.added {
            let values = partition_values(
                &f.partition,
                &self.config,
                &change.partition_spec,
                &change.schema,
            )
            .map_err(|e| self.instant_error(instant, format!("{}: {e}", f.path)))?;
            // Written by this instant (its time in the file's name): its write stat
            // records the size it wrote.
            let proven = !f.path.contains("://")
                && !f.path.starts_with('/')
                && parse_base_file_path(&f.path).is_some_and(|(_, _, t)| t == instant.requested());
            let mut file = DataFile::parquet(f.path, f.size, f.records).with_partition(values);
            file.proven = proven;
            change.added.push(file);
        }
        change.removed = effect.removed.into_iter().map(|f| f.path).collect();
        Ok(())
    }
}
