//! [`HudiReplay`]: a Hudi table's completed instants streamed as change sets.
//!
//! Hudi's commit metadata names what an instant adds; what it removes follows from the
//! file groups (a new base file replaces the group's old one), so the replay keeps the live
//! base file of every file group: its memory is bounded by the table's live files (and by
//! the removed paths' keys), not by its history. The first pass, which finds the files a
//! later instant removes, is the same replay run once before, its change sets dropped;
//! a replay of at most one change set has no later instant and skips it.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use xlake_model::{ChangeSet, RemovedLater, Schema, SourceCommit};
use xlake_source::{ChangeStream, MirrorState, SourceError};

use crate::commit_metadata::{CommitMetadata, RestoreMetadata, RollbackMetadata};
use crate::error::Result;
use crate::file_group::{BaseFile, Effect, FileGroups};
use crate::instant::{gets_snapshot, kind, Kind};
use crate::instant::{instant_millis, Instant};
use crate::partition_path::partition_spec;
use crate::properties::TableType;
use crate::resume::seconds;
use crate::schema::avro_to_schema;
use crate::source::{READ_OPTIMIZED, VIEW_NOTE};
use crate::HudiSource;

/// A replay of a Hudi timeline in progress.
pub struct HudiReplay<'a> {
    source: &'a HudiSource,
    /// The instants the target holds that are no longer on the timeline (rolled back
    /// after being mirrored).
    gone: Arc<HashSet<String>>,
    groups: FileGroups,
    schema: Option<Schema>,
    notes: Vec<String>,
    /// What archived instants left live, for the first snapshot of a first sync.
    unmirrored_seed: Vec<BaseFile>,
    /// For each completed instant from `first` on, the instant time the next sync lists
    /// from when the mirror ends at its change set ([`list_from_after`]).
    list_from: Arc<Vec<Option<crate::resume::Floor>>>,
    /// The first completed instant replayed.
    first: usize,
    /// Instants requested before this time give no change set (a replay over the whole
    /// timeline after the part from there was listed: [`HudiSource::skip_before`]), but
    /// those held here: unmirrored ones after the oldest mirrored one, which completed
    /// late or whose files appeared after the floor was saved. They are given, as a
    /// replay of the whole timeline gives them (skipped, a later instant that builds on
    /// them removes a file the mirror never had).
    skip_before: Option<(String, Arc<HashSet<String>>)>,
    /// The next completed instant to look at.
    next: usize,
    /// Change sets given so far (their position for [`RemovedLater`]).
    given: u64,
    later: RemovedLater,
    done: bool,
}

impl HudiSource {
    /// One change set per completed commit, delta commit, replace commit and rollback, in
    /// timeline order, replaying the timeline from its start. `mirrored` names the instants
    /// the target already holds (needed for rollbacks of instants Hudi has dropped from the
    /// timeline, and for tables whose early instants are archived: the first change set
    /// then carries the whole state at the oldest retained instant, unless earlier
    /// instants are mirrored already). The timeline's commit metadata is read twice: once
    /// for the removals, once for the change sets; once when the replay gives at most one
    /// change set (no later one can remove what it adds).
    ///
    /// Given the mirror's live files ([`MirrorState::live_files`]), or without them when
    /// the instants after the newest mirrored one start new file groups or build on groups
    /// whose base file the instant they build on names, the replay starts after that
    /// instant where that gives the same change sets (see the private `incremental`
    /// module), and reads only the instants after it.
    pub async fn replay_from(&self, state: &MirrorState) -> Result<HudiReplay<'_>> {
        let mirrored = &state.commits;
        self.settle(state, false).await?;
        let start = match self.settled_start(state) {
            Some(start) => Some(start),
            None => self.incremental_start(state).await?,
        };
        let (from, schema, seed) = match start {
            Some(s) => (s.from, Some(s.schema), s.seed),
            None => (0, None, self.archived_state(mirrored).await?),
        };
        let mut notes = Vec::new();
        if !seed.is_empty() && from == 0 {
            notes.push(format!(
                "early instants are archived: {} base files they left live are taken from the file listing{}",
                seed.len(),
                if mirrored.is_empty() { "; the first snapshot holds the table as of the oldest retained instant" } else { "" }
            ));
        }
        let completed = &self.timeline().completed;
        let on_timeline: FxHashSet<&str> = completed.iter().map(|i| i.requested()).collect();
        // Listed from an instant time: the mirrored instants before it are not listed.
        let listed_from = self.listed_from().unwrap_or_default();
        let gone: Arc<HashSet<String>> = Arc::new(
            mirrored
                .iter()
                .filter(|id| !on_timeline.contains(id.as_str()) && seconds(id) >= listed_from)
                .cloned()
                .collect(),
        );
        let unmirrored_seed = if mirrored.is_empty() {
            seed.clone()
        } else {
            Vec::new()
        };
        let mut groups = FileGroups::default();
        groups.seed(seed);
        let floor = crate::resume::floor(self.timeline(), crate::resume::MARGIN);
        let owed = owed(completed, state, self.saved_floor(state).as_ref());
        let list_from = Arc::new(list_from_after(completed, from, floor, &owed));
        let skip_before = self.skip_before().map(|b| {
            let late = unmirrored_after_oldest(completed, mirrored, &b);
            (b, Arc::new(late))
        });
        let begin = |groups: FileGroups, unmirrored_seed: Vec<BaseFile>| HudiReplay {
            source: self,
            gone: gone.clone(),
            groups,
            schema: schema.clone(),
            notes: notes.clone(),
            unmirrored_seed,
            list_from: list_from.clone(),
            first: from,
            skip_before: skip_before.clone(),
            next: from,
            given: 0,
            later: RemovedLater::default(),
            done: false,
        };
        // The first pass only marks files that a later change set removes.
        let changes = completed
            .get(from..)
            .unwrap_or_default()
            .iter()
            .filter(|i| gets_snapshot(i.action()))
            .count();
        let later = if changes > 1 {
            let mut first = begin(groups.clone(), unmirrored_seed.clone());
            xlake_source::removals_of(&mut first).await
        } else {
            RemovedLater::default()
        };
        let mut replay = begin(groups, unmirrored_seed);
        replay.later = later;
        Ok(replay)
    }
}

impl<'a> HudiReplay<'a> {
    /// The next change set, marked; `None` at the end and after an error.
    async fn next_change(&mut self) -> Option<Result<ChangeSet>> {
        let completed = &self.source.timeline().completed;
        while !self.done {
            let Some(instant) = completed.get(self.next) else {
                self.done = true;
                break;
            };
            let index = self.next;
            self.next += 1;
            match self.change_of(instant).await {
                Ok(None) => continue,
                Ok(Some(_)) if self.skipped(instant) => continue,
                Ok(Some(mut change)) => {
                    let from = self.list_from.get(index - self.first).cloned().flatten();
                    change.source_state =
                        from.map(|f| crate::resume::save(instant.requested(), &f));
                    self.later.mark(self.given, &mut change);
                    self.given += 1;
                    return Some(Ok(change));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }

    /// Whether `instant`'s change set is not given (see [`Self::skip_before`]); its
    /// effect on the file groups is kept.
    fn skipped(&self, instant: &Instant) -> bool {
        let id = instant.requested();
        let before = self.skip_before.as_ref();
        before.is_some_and(|(b, late)| seconds(id) < b.as_str() && !late.contains(id))
    }

    /// Instants rolled back after being mirrored: Hudi removed them from the timeline.
    fn dropped(&self, ids: &[String]) -> bool {
        ids.iter().any(|id| self.gone.contains(id))
    }

    /// What `instant` did, as a change set; `None` for an instant that changes no file.
    async fn change_of(&mut self, instant: &Instant) -> Result<Option<ChangeSet>> {
        let source = self.source;
        let kind = kind(instant.action()).ok_or_else(|| {
            source.instant_error(instant, format!("unknown action {:?}", instant.action()))
        })?;
        let Some(found) = self.effect_of(instant, kind).await? else {
            return Ok(None);
        };
        if self.schema.is_none() && source.config().create_schema.is_none() {
            self.schema = self.schema_ahead().await?;
        }
        let schema = self.schema_at(instant)?;
        let (spec, note) = partition_spec(source.config(), &schema);
        if let Some(note) = note {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        let Found {
            mut effect,
            mut data_change,
            full_state,
        } = found;
        if !self.unmirrored_seed.is_empty() {
            data_change = true;
            // The first snapshot also holds what archived instants left live.
            let (replaced, kept): (Vec<BaseFile>, Vec<BaseFile>) =
                std::mem::take(&mut self.unmirrored_seed)
                    .into_iter()
                    .partition(|f| effect.removed.contains(f));
            effect.removed.retain(|f| !replaced.contains(f));
            effect.added.splice(0..0, kept);
        }
        if full_state {
            effect = Effect {
                added: self.groups.live().cloned().collect(),
                removed: Vec::new(),
            };
        }
        let mut change = ChangeSet::new(source_commit(source, instant)?, schema, spec);
        change.ignored_columns = source.ignored_columns();
        change.full_state = full_state;
        change.data_change = data_change;
        source.fill(&mut change, effect, instant)?;
        if source.config().table_type == TableType::MergeOnRead {
            change.notes.insert(VIEW_NOTE.into(), READ_OPTIMIZED.into());
        }
        Ok(Some(change))
    }

    /// The files `instant` changed, read from its metadata; `None` for an instant that
    /// changes none (clean, savepoint, ...). Applies a commit to the file groups.
    async fn effect_of(&mut self, instant: &Instant, kind: Kind) -> Result<Option<Found>> {
        let source = self.source;
        let read = || crate::timeline::read_instant(source.store(), instant);
        // A rollback or restore of instants Iceberg mirrors but the timeline no longer
        // holds: their effect is unknown file by file, so the snapshot is given as the
        // whole replayed state (the state before them) and the target takes the difference.
        let undid = |ids: &[String]| Found {
            effect: Effect::default(),
            data_change: true,
            full_state: self.dropped(ids),
        };
        Ok(Some(match kind {
            Kind::Skip => return Ok(None),
            Kind::Commit => {
                let meta: CommitMetadata = serde_json::from_value(read().await?).map_err(|e| {
                    source.instant_error(instant, format!("not commit metadata: {e}"))
                })?;
                if let Some(text) = meta.schema() {
                    self.schema = Some(
                        avro_to_schema(text, source.config().meta_fields)
                            .map_err(|e| source.instant_error(instant, e))?,
                    );
                }
                let effect = self
                    .groups
                    .apply_commit(&meta, &source.options)
                    .map_err(|e| source.instant_error(instant, e))?;
                // Clustering rewrites rows as they are, except that on a merge-on-read
                // table it also merges log records into the read-optimized view.
                let rewrite_only = meta.operation_type.as_deref() == Some("CLUSTER")
                    && source.config().table_type == TableType::CopyOnWrite;
                Found {
                    effect,
                    data_change: !rewrite_only,
                    full_state: false,
                }
            }
            Kind::Rollback => {
                let meta: RollbackMetadata =
                    serde_json::from_value(read().await?).map_err(|e| {
                        source.instant_error(instant, format!("not rollback metadata: {e}"))
                    })?;
                undid(&meta.commits_rollback.unwrap_or_default())
            }
            Kind::Restore => {
                let meta: RestoreMetadata = serde_json::from_value(read().await?).map_err(|e| {
                    source.instant_error(instant, format!("not restore metadata: {e}"))
                })?;
                undid(&meta.rolled_back())
            }
        }))
    }

    /// The schema of the first commit after the replay's position that records one: for an
    /// instant that records none (a rollback, a restore) when no earlier commit is on the
    /// timeline (archived) and `hoodie.properties` has no create schema, as Spark+Hudi 1.2
    /// leaves it. Hudi's schema only gains columns and widens types, so the later schema
    /// reads the older files.
    async fn schema_ahead(&self) -> Result<Option<Schema>> {
        let source = self.source;
        let completed = &source.timeline().completed;
        for instant in completed.get(self.next..).unwrap_or_default() {
            if !matches!(kind(instant.action()), Some(Kind::Commit)) {
                continue;
            }
            let value = crate::timeline::read_instant(source.store(), instant).await?;
            let meta: CommitMetadata = serde_json::from_value(value)
                .map_err(|e| source.instant_error(instant, format!("not commit metadata: {e}")))?;
            if let Some(text) = meta.schema() {
                let schema = avro_to_schema(text, source.config().meta_fields)
                    .map_err(|e| source.instant_error(instant, e))?;
                return Ok(Some(schema));
            }
        }
        Ok(None)
    }

    /// The table schema as of `instant`: the newest a commit recorded, else the one
    /// `hoodie.properties` was created with, else the next one a commit records.
    fn schema_at(&mut self, instant: &Instant) -> Result<Schema> {
        let source = self.source;
        if self.schema.is_none() {
            if let Some(text) = &source.config().create_schema {
                self.schema = Some(
                    avro_to_schema(text, source.config().meta_fields)
                        .map_err(|e| source.instant_error(instant, e))?,
                );
            }
        }
        self.schema.clone().ok_or_else(|| {
            source.instant_error(
                instant,
                "no schema: neither a commit on the timeline nor hoodie.properties records one",
            )
        })
    }
}

/// The positions in `completed` of the instants the mirror's saved state (`saved`, of
/// `state`'s newest instant) names pending that completed since and are not mirrored:
/// late completions still owed to the mirror.
fn owed(
    completed: &[Instant],
    state: &MirrorState,
    saved: Option<&crate::resume::Floor>,
) -> Vec<usize> {
    let Some(saved) = saved else {
        return Vec::new();
    };
    let owed = completed.iter().enumerate().filter(|(_, i)| {
        !state.commits.contains(i.requested()) && saved.was_pending(i.requested()) == Some(true)
    });
    owed.map(|(p, _)| p).collect()
}

/// For each instant of `completed` from `from` on, where the next sync lists from if the
/// mirror ends at its change set (see [`crate::resume`]): the timeline's `floor`
/// ([`crate::resume::floor`]), its instant time lowered to the requested time of the
/// instant and of every later completed instant that gets a snapshot (a sync that stops
/// there leaves them unmirrored); and the late completions still owed (`owed`, positions
/// in `completed`) that come after it. A sync
/// that stops at it (in-commit mode, an error) leaves them unmirrored, and the next one
/// then knows them late, not folded or expired before where the mirror begins (hostile
/// review hr13: taken as expired, never mirrored). `None` throughout when the floor does
/// not read.
fn list_from_after(
    completed: &[Instant],
    from: usize,
    floor: Option<crate::resume::Floor>,
    owed: &[usize],
) -> Vec<Option<crate::resume::Floor>> {
    let later = completed.get(from..).unwrap_or_default();
    let mut low = floor;
    let mut out = vec![None; later.len()];
    for (k, instant) in later.iter().enumerate().rev() {
        let time = seconds(instant.requested());
        // Never after the instant itself: a state is trusted only when it lists from at or
        // before its instant, and the instant may be one that completed late, requested
        // long before the newest listed (a later sync then looks up the instants still
        // pending instead of taking them, before it, as mirrored and expired).
        let mut own = low.clone();
        if let Some(l) = own.as_mut().filter(|l| time < l.list_from.as_str()) {
            l.list_from = time.to_string();
        }
        if let Some(l) = own.as_mut() {
            let after = owed.iter().filter(|&&p| p > from + k);
            let after = after.filter_map(|&p| Some(completed.get(p)?.requested().to_string()));
            l.owed = after.collect();
            l.owed.sort();
        }
        out[k] = own;
        if gets_snapshot(instant.action()) {
            if let Some(l) = low.as_mut().filter(|l| time < l.list_from.as_str()) {
                l.list_from = time.to_string();
            }
        }
    }
    out
}

/// The completed instants requested before `before` that are not `mirrored` and come
/// after the oldest mirrored one (those before it were mirrored and expired).
fn unmirrored_after_oldest(
    completed: &[Instant],
    mirrored: &BTreeSet<String>,
    before: &str,
) -> HashSet<String> {
    let Some(oldest) = completed
        .iter()
        .position(|i| mirrored.contains(i.requested()))
    else {
        return HashSet::new();
    };
    completed[oldest..]
        .iter()
        .map(|i| i.requested())
        .filter(|id| seconds(id) < before && !mirrored.contains(*id))
        .map(str::to_string)
        .collect()
}

/// What an instant did to the live files.
struct Found {
    effect: Effect,
    /// Whether rows changed (a copy-on-write clustering only rewrites them).
    data_change: bool,
    /// Whether the change set is given as the whole live state (see `effect_of`).
    full_state: bool,
}

/// The source commit `instant` is, timed by its completion.
fn source_commit(source: &HudiSource, instant: &Instant) -> Result<SourceCommit> {
    Ok(SourceCommit {
        format: crate::FORMAT,
        id: instant.requested().to_string(),
        action: instant.action().to_string(),
        requested_ms: instant_millis(instant.requested()),
        commit_time_ms: instant_millis(instant.commit_time()).ok_or_else(|| {
            source.instant_error(
                instant,
                format!("unreadable instant time {}", instant.commit_time()),
            )
        })?,
    })
}

#[async_trait::async_trait]
impl ChangeStream for HudiReplay<'_> {
    async fn next(&mut self) -> Option<std::result::Result<ChangeSet, SourceError>> {
        self.next_change().await.map(|r| r.map_err(Into::into))
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
