//! The invariant checker: every completed source commit is recorded by exactly one
//! snapshot of the current Iceberg ancestry, in order; `deep` also compares the live files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;
use xlake_model::{ChangeSet, CommitListing, VectorBytes};
use xlake_source::{ErrorKind, MirrorState, SourceError, TableSource, TargetTakes};
use xlake_storage::TableStore;
use xlake_target::{Ancestor, Read, TableTarget};
pub use xlake_target::{MissingFile, MissingList};

use crate::catalog::{self, CatalogState};
use crate::replay::Pending;
use crate::{sources, targets, InTable, SyncError, SyncOptions};

/// A snapshot naming a source commit the source does not hold as completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownCommit {
    /// The snapshot.
    pub snapshot_id: i64,
    /// The source commit it names.
    pub commit: String,
}

/// A snapshot naming a commit that a later completed rollback or restore undid (Hudi's
/// restore to a savepoint): the table's true history, not a violation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UndoneCommit {
    /// The snapshot.
    pub snapshot_id: i64,
    /// The source commit it names.
    pub commit: String,
    /// The rollback or restore that undid it.
    pub undone_by: String,
}

/// One snapshot compared by a deep check with the source's live files after its commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// The snapshot.
    pub snapshot_id: i64,
    /// The source commit it records.
    pub commit: String,
    /// Live data files of the source after that commit.
    pub source_files: usize,
    /// Data files of the snapshot.
    pub snapshot_files: usize,
    /// Each difference, naming the file.
    pub differences: Vec<String>,
}

/// What `check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Table location.
    pub table: String,
    /// `HUDI` or `DELTA`.
    pub format: String,
    /// Completed source commits that must each have a snapshot.
    pub source_commits: usize,
    /// Snapshots in the current Iceberg ancestry.
    pub snapshots: usize,
    /// Source commits older than the first mirrored one: not violations.
    pub before_mirroring: usize,
    /// Completed in the source, recorded by no snapshot (after mirroring began).
    pub missing: Vec<String>,
    /// Commits the mirror still owed that the source no longer holds and that may have
    /// completed unmirrored (a Hudi instant pending at the last sync, archived since), each
    /// with why: no snapshot can record them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gone_unmirrored: Vec<String>,
    /// Snapshots naming a commit the source does not have and no rollback or restore it
    /// holds undid (a commit that never completed, another table's history).
    pub unknown: Vec<UnknownCommit>,
    /// Snapshots naming a commit a later rollback or restore undid: not violations.
    pub undone: Vec<UndoneCommit>,
    /// Source commits recorded by more than one snapshot.
    pub duplicates: Vec<String>,
    /// Snapshots of the current ancestry whose manifest list is gone (deleted beside the
    /// metadata that names it).
    pub missing_manifest_lists: Vec<MissingList>,
    /// Other files retained snapshots read that are gone (a Delta target's deletion
    /// vector files).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_files: Vec<MissingFile>,
    /// Source commits whose snapshot comes before that of an earlier commit.
    pub out_of_order: Vec<String>,
    /// Commits completed after the newest mirrored one.
    pub lag_commits: usize,
    /// Time from the newest mirrored commit to the newest completed one, ms.
    pub lag_ms: i64,
    /// With `deep`: how the compared snapshots' live files differ from the source's
    /// (every [`Comparison::differences`], in order).
    pub file_differences: Vec<String>,
    /// Whether the live files were compared (`deep`).
    pub deep: bool,
    /// With `deep`: the snapshots compared (the current one, or with `all` every retained
    /// one of the current ancestry that records a source commit).
    pub compared: Vec<Comparison>,
    /// Newest commits that may be unmirrored without a violation.
    pub allowed_lag: usize,
    /// [`Self::consistent_within`] `allowed_lag`: what the exit code says.
    pub consistent: bool,
    /// The location the current metadata was written for, when it is not this table's
    /// (the folder was copied or moved): every path in it points at the old place.
    pub relocated_from: Option<String>,
    /// With a catalog: where its entry points, and what is wrong with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogState>,
    /// The source promises a snapshot per commit written in its commit path (Hudi's
    /// `hoodie.table.format`), but completed commits have none: why, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_promise: Option<String>,
    /// The source is not the table the mirror holds (a Delta table dropped and written
    /// anew at the same place, which a sync refuses): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_the_mirrored_table: Option<String>,
}

impl CheckReport {
    /// True when nothing is wrong.
    pub fn consistent(&self) -> bool {
        self.consistent_within(0)
    }

    /// This report judged with `allowed_lag` ([`Self::consistent`] set accordingly).
    pub fn with_allowed_lag(mut self, allowed_lag: usize) -> Self {
        self.allowed_lag = allowed_lag;
        self.consistent = self.consistent_within(allowed_lag);
        self
    }

    /// True when nothing is wrong except that up to `allowed_lag` of the newest commits
    /// are not mirrored yet (a scheduled job between runs). A commit missing before the
    /// newest mirrored one is always a violation.
    pub fn consistent_within(&self, allowed_lag: usize) -> bool {
        let missing_inside = self.missing.len().saturating_sub(self.lag_commits);
        missing_inside == 0
            && self.lag_commits <= allowed_lag
            && self.gone_unmirrored.is_empty()
            && self.unknown.is_empty()
            && self.duplicates.is_empty()
            && self.out_of_order.is_empty()
            && self.missing_manifest_lists.is_empty()
            && self.missing_files.is_empty()
            && self.file_differences.is_empty()
            && self.relocated_from.is_none()
            && self.catalog.as_ref().is_none_or(|c| c.problem.is_none())
            && self.broken_promise.is_none()
            && self.not_the_mirrored_table.is_none()
    }
}

/// Check the table at `location`. Errors mean "could not check" (exit 2), a report with
/// violations means the mirror is wrong or behind (exit 1).
pub async fn check(
    location: &str,
    options: &SyncOptions,
    deep: bool,
) -> Result<CheckReport, SyncError> {
    check_with(location, options, deep, false).await
}

/// [`check`], and with `all` the deep comparison covers every retained snapshot of the
/// current ancestry, not only the current one.
pub async fn check_with(
    location: &str,
    options: &SyncOptions,
    deep: bool,
    all: bool,
) -> Result<CheckReport, SyncError> {
    let mut store = TableStore::open(location)?;
    let mut target = targets::open_chosen(&store, options)?;
    // A copied or moved table is reported, not refused: that is a finding.
    let mut loaded = target.load(Read::AsFound).await?;
    // The mirror recorded another spelling of this table's place: compared as it spells it.
    let recorded = loaded.as_ref().and_then(|l| l.recorded_at.as_deref());
    if let Some(spelled) = recorded.and_then(|r| store.spelled_as(r)) {
        store = spelled;
        target = targets::open_chosen(&store, options)?;
        loaded = target.load(Read::AsFound).await?;
    }
    let options = &sources::with_recorded_choices(options, target.as_ref());
    let relocated_from = loaded.as_ref().and_then(|l| l.relocated_from.clone());
    // Readers must find the current version (else: an error); lost history is a finding.
    let own = target.self_check().await?;
    // The lag is measured in commit times, which a sync's listing may leave out.
    let mut timed = options.clone();
    timed.source.commit_times = true;
    let mut source = sources::open(&store, &timed).await?;
    // The deep comparison is of files and row counts: vectors are not decoded, so one
    // VACUUM deleted with the version that replaced it is not read.
    source.target_takes(TargetTakes {
        stored_deletion_vectors: true,
    });
    let state = target.mirror_state();
    let listing: CommitListing = source.listing(&state).in_table(&store)?;
    let ancestry = target.view().ancestry;
    let mut report = CheckReport {
        table: store.location().to_string(),
        format: source.format().as_str().into(),
        source_commits: listing.commits.len(),
        snapshots: ancestry.len(),
        relocated_from,
        missing_manifest_lists: own.missing_manifest_lists,
        missing_files: own.missing_files,
        ..Default::default()
    };
    report.not_the_mirrored_table = source
        .not_the_mirrored_table(&state)
        .await
        .in_table(&store)?;
    report.gone_unmirrored = crate::replay::gone_unmirrored(source.as_ref(), &listing)
        .await
        .in_table(&store)?;
    let seen = compare_commits(&mut report, source.as_ref(), &listing, &ancestry);
    if !report.unknown.is_empty() {
        let undone = source.undone_commits().await.in_table(&store)?;
        set_apart_undone(&mut report, &undone);
    }
    let first = ancestry.iter().find_map(|a| a.source_commit.as_deref());
    measure_lag(&mut report, source.as_ref(), &listing, &seen, first);
    report.broken_promise = broken_promise(source.as_ref(), &report.missing);
    if deep && report.relocated_from.is_none() {
        let snapshot_of: HashMap<String, i64> = ancestry
            .iter()
            .filter_map(|a| Some((a.source_commit.clone()?, a.snapshot_id)))
            .collect();
        report.deep = true;
        let compare = Compare {
            source: source.as_ref(),
            state: &state,
            target: target.as_ref(),
            store: &store,
            snapshot_of: &snapshot_of,
            ancestry: &ancestry,
            held_undone: &held_undone(&report.undone, &ancestry),
        };
        report.compared = compare.files(all).await?;
        report.file_differences = report
            .compared
            .iter()
            .flat_map(|c| c.differences.iter().cloned())
            .collect();
    }
    if let Some(catalog) = &options.catalog {
        let pointer = target.pointer();
        report.catalog = Some(catalog::state(&store, catalog, pointer.as_ref()).await?);
    }
    Ok(report.with_allowed_lag(0))
}

/// Match the ancestry's snapshots with the listed commits: unknown, duplicate and
/// out-of-order ones into `report`; how often each commit is recorded, returned.
fn compare_commits(
    report: &mut CheckReport,
    source: &dyn TableSource,
    listing: &CommitListing,
    ancestry: &[Ancestor],
) -> BTreeMap<String, usize> {
    let position = listing.positions();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_position: Option<usize> = None;
    for a in ancestry {
        let Some(id) = a.source_commit.clone() else {
            continue;
        };
        *seen.entry(id.clone()).or_default() += 1;
        match position.get(id.as_str()) {
            Some(&p) => {
                if listing.strictly_ordered && last_position.is_some_and(|l| p < l) {
                    report.out_of_order.push(id.clone());
                }
                last_position = Some(last_position.map_or(p, |l| l.max(p)));
            }
            None => {
                let dropped = listing
                    .retained_from
                    .as_deref()
                    .is_some_and(|r| source.order(&id, r).is_lt());
                if !dropped {
                    report.unknown.push(UnknownCommit {
                        snapshot_id: a.snapshot_id,
                        commit: id,
                    });
                }
            }
        }
    }
    report.duplicates = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id.clone())
        .collect();
    seen
}

/// Move the unknown commits a rollback or restore undid to `report.undone`.
fn set_apart_undone(report: &mut CheckReport, undone: &BTreeMap<String, String>) {
    let (found, unknown) = std::mem::take(&mut report.unknown)
        .into_iter()
        .partition::<Vec<_>, _>(|u| undone.contains_key(&u.commit));
    report.unknown = unknown;
    report.undone = found
        .into_iter()
        .filter_map(|u| {
            Some(UndoneCommit {
                undone_by: undone.get(&u.commit)?.clone(),
                snapshot_id: u.snapshot_id,
                commit: u.commit,
            })
        })
        .collect();
}

/// The snapshots of the ancestry after an undone commit's and before that of the rollback
/// or restore that undid it (to the end when it is not mirrored yet): they hold the
/// undone commit's files, which the source's replay no longer gives, so a deep check does
/// not compare them. Undone commits are history, not violations.
fn held_undone(undone: &[UndoneCommit], ancestry: &[Ancestor]) -> HashSet<i64> {
    let mut held = HashSet::new();
    for u in undone {
        let Some(from) = ancestry.iter().position(|a| a.snapshot_id == u.snapshot_id) else {
            continue;
        };
        let to = ancestry
            .iter()
            .position(|a| a.source_commit.as_deref() == Some(u.undone_by.as_str()))
            .unwrap_or(ancestry.len());
        held.extend(
            ancestry
                .get(from + 1..to)
                .into_iter()
                .flatten()
                .map(|a| a.snapshot_id),
        );
    }
    held
}

/// Missing commits, those before mirroring began, and the lag, from the commits `seen`.
/// (`first`: the commit the oldest snapshot records.)
fn measure_lag(
    report: &mut CheckReport,
    source: &dyn TableSource,
    listing: &CommitListing,
    seen: &BTreeMap<String, usize>,
    first: Option<&str>,
) {
    let mirrored: BTreeSet<&str> = seen.keys().map(String::as_str).collect();
    let order = |a: &str, b: &str| source.order(a, b);
    (report.before_mirroring, report.missing) = missing_commits(listing, &mirrored, first, order);
    let newest = listing
        .commits
        .iter()
        .rposition(|c| mirrored.contains(c.id.as_str()));
    report.lag_commits = listing.commits.len() - newest.map_or(0, |n| n + 1);
    if let (Some(n), Some(last)) = (newest, listing.commits.last()) {
        report.lag_ms = (last.time_ms - listing.commits[n].time_ms).max(0);
    }
}

/// What a deep check compares: the source's replay against the target's snapshots.
struct Compare<'a> {
    source: &'a dyn TableSource,
    state: &'a MirrorState,
    target: &'a dyn TableTarget,
    store: &'a TableStore,
    snapshot_of: &'a HashMap<String, i64>,
    /// The current ancestry, oldest first.
    ancestry: &'a [Ancestor],
    /// Snapshots holding an undone commit's files ([`held_undone`]): not compared.
    held_undone: &'a HashSet<i64>,
}

impl Compare<'_> {
    /// Replay the source and compare its live files after the newest mirrored commit with
    /// the current snapshot's, or (`all`) after every mirrored commit with that commit's
    /// snapshot; one [`Comparison`] per snapshot compared, naming each differing file.
    /// After a late completion (its snapshot after those of later commits) a snapshot is
    /// compared with the state after the newest commit it holds, and snapshots that hold
    /// no state of the source (between the late one and those before it) are not
    /// compared ([`crate::cuts::source_states`]).
    async fn files(&self, all: bool) -> Result<Vec<Comparison>, SyncError> {
        let store = self.store;
        // Every commit from the start, the newest mirrored one known (for sources that
        // keep no history).
        let from_start = MirrorState {
            commits: BTreeSet::new(),
            first: None,
            newest: self.state.newest.clone(),
            live_files: None,
            source_state: None,
            deletes: None,
        };
        let listing = self.source.listing(&from_start).in_table(store)?;
        let (oldest, newest) = self.mirrored_span(&listing);
        let state_of =
            crate::cuts::source_states(self.ancestry, &listing, |a, b| self.source.order(a, b));
        // Nothing before the oldest commit compared is needed: the replay may start at
        // the source's full state there (Delta: the newest checkpoint at or before it).
        let from = if all { &oldest } else { &newest };
        let mut replay = match from {
            Some(from) => self.source.replay_covering(from, &from_start).await,
            None => self.source.replay(&from_start).await,
        }
        .in_table(store)?;
        let mut live: BTreeMap<String, Option<u64>> = BTreeMap::new();
        let mut compared = Vec::new();
        let mut past_newest = newest.is_none();
        let mut vectors = LiveVectors::default();
        while let Some(next) = replay.next().await {
            // A commit the source cannot read fails the check, even after the newest
            // mirrored.
            let change = next.in_table(store)?;
            vectors.follow(&change, store);
            if past_newest {
                continue;
            }
            if change.full_state {
                live.clear();
            }
            for path in &change.removed {
                live.remove(&store.absolute(path));
            }
            for f in &change.added {
                live.insert(store.absolute(&f.path), f.record_count);
            }
            let is_newest = newest.as_deref() == Some(change.commit.id.as_str());
            past_newest = is_newest;
            let Some(&snapshot) = state_of.get(&change.commit.id) else {
                continue;
            };
            if (!all && !is_newest) || self.held_undone.contains(&snapshot) {
                continue;
            }
            let Some(entries) = self.target.files_at(snapshot).await? else {
                continue;
            };
            compared.push(compare(snapshot, &change.commit.id, &live, entries));
        }
        vectors.all_there(store).await?;
        Ok(compared)
    }

    /// The oldest and the newest mirrored commit, in source order (a replay gives the
    /// listing's order).
    fn mirrored_span(&self, listing: &CommitListing) -> (Option<String>, Option<String>) {
        let mut mirrored = listing
            .commits
            .iter()
            .filter(|c| self.snapshot_of.contains_key(&c.id));
        let oldest = mirrored.next().map(|c| c.id.clone());
        let newest = mirrored
            .next_back()
            .map(|c| c.id.clone())
            .or(oldest.clone());
        (oldest, newest)
    }
}

/// The source's `live` files after `commit` against the snapshot's `entries`.
fn compare(
    snapshot: i64,
    commit: &str,
    live: &BTreeMap<String, Option<u64>>,
    entries: Vec<(String, u64)>,
) -> Comparison {
    let at = format!("snapshot {snapshot} (source commit {commit})");
    let snapshot_files = entries.len();
    let mut out = Vec::new();
    let mut iceberg: HashMap<String, u64> = HashMap::new();
    for (path, records) in entries {
        if iceberg.insert(path.clone(), records).is_some() {
            out.push(format!(
                "{at}: {path}: listed more than once (its rows count twice)"
            ));
        }
    }
    for (path, records) in live {
        match iceberg.get(path) {
            None => out.push(format!(
                "{at}: {path}: live in the source, absent from the snapshot"
            )),
            Some(n) if records.is_some_and(|r| r != *n) => out.push(format!(
                "{at}: {path}: {} rows in the source, {n} in the snapshot",
                records.unwrap_or_default()
            )),
            Some(_) => {}
        }
    }
    for path in iceberg.keys().filter(|p| !live.contains_key(*p)) {
        out.push(format!(
            "{at}: {path}: in the snapshot, not live in the source"
        ));
    }
    Comparison {
        snapshot_id: snapshot,
        commit: commit.to_string(),
        source_files: live.len(),
        snapshot_files,
        differences: out,
    }
}

/// How many completed commits no snapshot records before where the mirror begins (not
/// violations: expired, or folded into a `--from-latest` first snapshot), and the listed
/// commits a sync would mirror (those after it that no snapshot records, with those
/// before it that completed late): the sync's own rule ([`Pending`]), given the commit
/// the oldest snapshot records (`first`) and the source's order.
pub(crate) fn missing_commits(
    listing: &CommitListing,
    mirrored: &BTreeSet<&str>,
    first: Option<&str>,
    order: impl Fn(&str, &str) -> std::cmp::Ordering,
) -> (usize, Vec<String>) {
    let pending = Pending::new(mirrored.iter().copied(), first, listing, order);
    let missing = listing.commits.iter().filter(|c| pending.keep(&c.id));
    let missing = missing.map(|c| c.id.clone()).collect();
    (pending.expired(), missing)
}

/// When the source promises a snapshot per commit written in its commit path
/// ([`TableSource::commit_path_mirror`]) and `missing` commits have none: the likely cause
/// and the remedy, for the operator.
pub(crate) fn broken_promise(source: &dyn TableSource, missing: &[String]) -> Option<String> {
    let setting = source.commit_path_mirror()?;
    let first = missing.first()?;
    Some(format!(
        "{setting} promises an Iceberg snapshot for every instant, written in the commit path, but {} completed instants have none (the first: {first}): a writer ran without that table format's jar on its classpath, so Hudi silently wrote a native table (or a writer died between completing an instant and mirroring it, which the next write with the jar rolls back). Put the jar on every writer's classpath; `xlake sync` mirrors what is missing",
        missing.len()
    ))
}

/// The stored deletion vectors of the files live after the commits followed: a file
/// VACUUM keeps, whose absence makes the source itself unreadable (a vector only older
/// versions used may be gone).
#[derive(Default)]
struct LiveVectors {
    /// Data file to its vector's file and the commit that gave it.
    of: HashMap<String, (String, String)>,
}

impl LiveVectors {
    fn follow(&mut self, change: &ChangeSet, store: &TableStore) {
        if change.full_state {
            self.of.clear();
        }
        for path in &change.removed {
            self.of.remove(&store.absolute(path));
        }
        for f in &change.added {
            let data = store.absolute(&f.path);
            match f.deletion_vector.as_ref().map(|v| &v.bytes) {
                Some(VectorBytes::Stored { path, .. }) => {
                    let given = (store.absolute(path), change.commit.id.clone());
                    self.of.insert(data, given);
                }
                _ => {
                    self.of.remove(&data);
                }
            }
        }
    }

    /// An error naming the first live vector whose file is gone (with its data file and
    /// the commit that gave it): the source cannot be read, so neither checked.
    async fn all_there(&self, store: &TableStore) -> Result<(), SyncError> {
        let mut sorted: Vec<_> = self.of.iter().collect();
        sorted.sort();
        let mut asked = HashSet::new();
        for (data, (vector, commit)) in sorted {
            if !asked.insert(vector) || store.size(vector).await?.is_some() {
                continue;
            }
            let kind = ErrorKind::Corrupt {
                commit: Some(commit.clone()),
                file: Some(vector.clone()),
            };
            let reason = format!("source commit {commit}: {data}: deletion vector file {vector} does not exist (it is live: the source's own readers need it)");
            return Err(SourceError::new(kind, reason)).in_table(store);
        }
        Ok(())
    }
}
