//! The sync algorithm: plan from the target's state, read the source's pending change
//! sets in batches, publish each batch behind put-if-absent, re-plan after a lost race;
//! in-commit mode, the service's access check (`data_roots`), progress and `--rebuild`.
//! It holds a [`TableSource`] and a [`TableTarget`] and names no format.

use xlake_model::{ChangeSet, CommitListing};
use xlake_source::{CommitState, MirrorState, Replay, TableSource};
use xlake_storage::TableStore;
use xlake_target::{Loaded, Read, SetAside, TableTarget, TargetError};

use crate::{
    access, catalog, rebuild, replay, sources, targets, upgrade, InTable, Mirrored, SyncError,
    SyncOptions, SyncReport,
};

/// How often in a row a commit is re-planned after losing a race while no writer makes
/// progress.
const MAX_CONFLICT_RETRIES: usize = 5;

/// Snapshots published together in one metadata version during a backfill. Every
/// version holds every snapshot, so one version per commit would make a backfill's writes
/// grow with the square of its length.
const BATCH_SIZE: usize = 100;

/// In-commit mode for a commit before where the mirror begins that no snapshot records,
/// where commits may complete out of source order (Hudi table version 6): the mirror may
/// hold it (folded or expired), or it completed late and no saved state named it, never
/// mirrored (docs/known-gaps.md). Answering "mirrored" for the second made a callback
/// succeed for rows the mirror lacks (hostile review hr17), so neither is claimed.
const UNSURE_BEFORE_START: &str = "it comes before where the mirror begins (the commit its oldest snapshot records) and no snapshot records it: it was folded into a `sync --from-latest` first snapshot or its snapshot expired, or (Hudi table version 6, ordered by requested time) it completed late and was never mirrored; `xlake check --deep` tells them apart (its files live in the source, absent from the snapshot)";

/// In-commit mode, the last step of a write job: mirror every pending commit up to and
/// including `commit` (a Hudi instant time or a Delta version) and succeed only if that
/// commit then has its snapshot. A commit that is not completed, or that the source does
/// not have, fails before anything is written.
pub async fn mirror_commit(
    location: &str,
    options: &SyncOptions,
    commit: &str,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    let store = crate::open_store(location, options)?;
    let table = store.location().to_string();
    let not_mirrored = |reason: String| SyncError::NotMirrored {
        table: table.clone(),
        commit: commit.to_string(),
        reason,
    };
    let mut target = targets::open(&store, options)?;
    // The table's metadata first: the format it records is the one opened, and where
    // it stands is where the source's log is read from.
    let loaded = target.load(Read::ForFirstCommit).await;
    let recorded = loaded.as_ref().ok().and_then(Option::as_ref);
    // The mirror recorded another spelling of this table's place: it is kept.
    let spelled = recorded.and_then(|l| store.spelled_as(l.recorded_at.as_deref()?));
    if let Some(spelled) = spelled {
        let location = spelled.location().to_string();
        return Box::pin(mirror_commit(&location, options, commit, progress)).await;
    }
    // A rebuild mirrors the history afresh: the source is read whole.
    let state = (recorded.is_some() && !options.rebuild).then(|| target.mirror_state());
    let mut source = sources::open_as_recorded(&store, options, recorded, state.as_ref()).await?;
    // Opened from where the mirror stands (a Hudi timeline listed from the instant time the
    // last sync saved), the source may not hold an older commit named here (one whose
    // files appeared only after that sync): it is opened whole before the commit is
    // called unknown.
    if state.is_some() && matches!(source.commit_state(commit), CommitState::Unknown) {
        source = sources::open_as_recorded(&store, options, recorded, None).await?;
    }
    if let CommitState::Pending(state) = source.commit_state(commit) {
        return Err(not_mirrored(format!(
            "the commit is {state}, not completed"
        )));
    }
    let loaded = loaded?;
    let state = target.mirror_state();
    let listing = source.listing(&state).in_table(&store)?;
    if !listing.commits.iter().any(|c| c.id == commit) {
        let newest = listing
            .commits
            .last()
            .map_or("none".to_string(), |c| c.id.clone());
        return Err(not_mirrored(format!(
            "the source has no such completed commit that gets a snapshot (newest: {newest})"
        )));
    }
    let entry = precheck_catalog(&store, options).await?;
    // The metadata just read, what it mirrors and the source's listing for that are the
    // first plan's: each is read or built once per command.
    let preloaded = Preloaded {
        loaded,
        state,
        listing: Some(listing),
    };
    let preloaded = (!options.rebuild).then_some(preloaded);
    let sync = Sync::new(store.clone(), target, options, Some(commit));
    let (mut report, mirrored) = sync.run(source.as_mut(), preloaded, progress).await?;
    if !mirrored {
        return Err(not_mirrored(
            "the sync finished without a snapshot for it".into(),
        ));
    }
    // In-commit mode succeeds only once the catalog points at the commit's snapshot too.
    if let Some(entry) = &entry {
        report.catalog = entry.advance(&store).await?;
    }
    Ok(report)
}

/// Mirror every pending completed commit of the table at `location`; `progress` is called
/// after each snapshot is committed.
pub async fn sync(
    location: &str,
    options: &SyncOptions,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    sync_store(crate::open_store(location, options)?, options, progress).await
}

/// [`sync`] on a table root the caller opened (a custom or wrapped store).
pub async fn sync_store(
    store: TableStore,
    options: &SyncOptions,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    if options.rebuild && !targets::kind(options.target.as_deref()).is_ok_and(targets::is_default) {
        return Err(SyncError::NotForTarget {
            table: store.location().to_string(),
            what: "--rebuild sets a relocated Iceberg history aside; a Delta target's log holds one history and has no rebuild (nothing written): move the copied _delta_log/ away to mirror the table afresh".into(),
        });
    }
    if options.rebuild && store.is_local_link("metadata") {
        return Err(crate::rebuild::linked_metadata(&store));
    }
    let (mut source, target, preloaded) = open_both(&store, options).await?;
    // The mirror recorded another spelling of this table's place: it is kept.
    let recorded = recorded_spelling(&store, options, preloaded.as_ref()).await;
    if let Some(spelled) = recorded.and_then(|r| store.spelled_as(&r)) {
        tracing::debug!(table = %store.location(), recorded = %spelled.location(), "synced as the mirror spells the table's place");
        return Box::pin(sync_store(spelled, options, progress)).await;
    }
    let entry = precheck_catalog(&store, options).await?;
    let outcome = match target {
        Ok(target) => {
            let sync = Sync::new(store.clone(), target, options, None);
            sync.run(source.as_mut(), preloaded, progress).await
        }
        Err(e) => Err(e),
    };
    let Some(entry) = entry else {
        return Ok(outcome?.0);
    };
    // A source of another format than the mirror's is refused with nothing written, the
    // catalog included.
    if let Err(e @ SyncError::FormatMismatch { .. }) = outcome {
        return Err(e);
    }
    // Also after a failure part-way: what was published gets its pointer (a sync that
    // stops at the same bad commit every time must not leave the pointer behind forever).
    let pointed = entry.advance(&store).await;
    let mut report = outcome?.0;
    report.catalog = pointed?;
    Ok(report)
}

/// The place the mirror records, as it spells it: from the metadata just read, or, for a
/// rebuild (which reads none before it mirrors), read for it as found (a relocated
/// mirror is not refused here: its place is not this table's, and the rebuild sets it
/// aside).
async fn recorded_spelling(
    store: &TableStore,
    options: &SyncOptions,
    preloaded: Option<&Preloaded>,
) -> Option<String> {
    if let Some(preloaded) = preloaded {
        return preloaded.loaded.as_ref()?.recorded_at.clone();
    }
    if !options.rebuild {
        return None;
    }
    let mut target = targets::open(store, options).ok()?;
    target.load(Read::AsFound).await.ok()??.recorded_at
}

/// The source and the target of a sync, the target's metadata loaded first (not for a
/// rebuild, which loads it as found): the source is opened as the format the mirror
/// records. A load that fails is made again by the sync, which reports it in its place
/// (after the source is known to be a table, and the catalog checked).
async fn open_both(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<
    (
        Box<dyn TableSource>,
        Result<Box<dyn TableTarget>, SyncError>,
        Option<Preloaded>,
    ),
    SyncError,
> {
    let mut target = targets::open(store, options);
    let loaded = match &mut target {
        Ok(t) if !options.rebuild => t.load(Read::ForFirstCommit).await.ok(),
        _ => None,
    };
    let state = match (&loaded, &target) {
        (Some(Some(_)), Ok(t)) => Some(t.mirror_state()),
        _ => None,
    };
    let recorded = loaded.as_ref().and_then(Option::as_ref);
    let source = sources::open_as_recorded(store, options, recorded, state.as_ref()).await?;
    let preloaded = match (loaded, &target) {
        (Some(loaded), Ok(t)) => Some(Preloaded {
            loaded,
            state: state.unwrap_or_else(|| t.mirror_state()),
            listing: None,
        }),
        _ => None,
    };
    Ok((source, target, preloaded))
}

/// Open the catalog entry the options name and check it before anything is published.
async fn precheck_catalog(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<Option<catalog::Entry>, SyncError> {
    let Some(target) = &options.catalog else {
        return Ok(None);
    };
    if targets::kind(options.target.as_deref())?.name != targets::KINDS[0].name {
        return Err(SyncError::NotForTarget {
            table: store.location().to_string(),
            what: "a catalog entry is kept for the Iceberg target only (--catalog with --target delta)".into(),
        });
    }
    let entry = catalog::Entry::open(target)?;
    entry.precheck(store).await?;
    Ok(Some(entry))
}

/// What in-commit mode read before its first plan: the target's load (for a commit, so
/// not relocated; the target keeps it as its base), what it mirrors, and the source's
/// listing for that.
struct Preloaded {
    loaded: Option<Loaded>,
    state: MirrorState,
    listing: Option<CommitListing>,
}

/// Where a plan starts: whether the target has a table yet, what it mirrors and the
/// source's listing for that.
struct PlanStart {
    empty: bool,
    state: MirrorState,
    listing: CommitListing,
}

/// How a plan ended.
enum Planned {
    /// The sync is over; whether `until` is mirrored.
    Done(bool),
    /// Another writer won a commit point: plan again.
    Conflict(TargetError),
}

/// One sync of one table: what stays across its plans.
struct Sync<'a> {
    store: TableStore,
    table: String,
    target: Box<dyn TableTarget>,
    options: &'a SyncOptions,
    until: Option<&'a str>,
    report: SyncReport,
    upgrade_note: Option<String>,
    /// Added files whose source commit proves they exist are not looked up on storage:
    /// not on a first sync (which checks once every file the history names, as a copy of a
    /// log without its data shows), nor when the options ask for every file.
    trust_proven: bool,
    /// The last plan ended with every listed commit mirrored (see [`SyncReport::settled`]).
    settled: bool,
}

impl<'a> Sync<'a> {
    fn new(
        store: TableStore,
        target: Box<dyn TableTarget>,
        options: &'a SyncOptions,
        until: Option<&'a str>,
    ) -> Self {
        Self {
            table: store.location().to_string(),
            store,
            target,
            options,
            until,
            report: SyncReport::default(),
            upgrade_note: None,
            trust_proven: false,
            settled: false,
        }
    }

    /// Mirror pending commits in order, stopping after `until` when given; also says
    /// whether `until` is mirrored at the end. `preloaded` (not for a rebuild): the first
    /// plan's mirror state and listing, as the caller just read them.
    async fn run(
        mut self,
        source: &mut dyn TableSource,
        mut preloaded: Option<Preloaded>,
        mut progress: impl FnMut(&Mirrored),
    ) -> Result<(SyncReport, bool), SyncError> {
        self.report.format = source.format().as_str().into();
        // Conflicts in a row with no progress by anyone; a lost race where another writer
        // mirrored something is progress and resets the count.
        let mut retries = 0;
        let mut last_seen = 0;
        loop {
            let start = self.plan_start(source, preloaded.take()).await?;
            if start.state.commits.len() > last_seen {
                retries = 0;
                last_seen = start.state.commits.len();
            }
            match self.plan(source, start, &mut progress).await? {
                Planned::Done(mirrored) => {
                    if std::mem::take(&mut self.settled) {
                        let tip = source.tip();
                        let commits = self.report.source_commits;
                        self.report.settled =
                            tip.and_then(|t| self.target.settled_record(&t, commits));
                    }
                    return Ok((self.report, mirrored));
                }
                Planned::Conflict(_) if retries < MAX_CONFLICT_RETRIES => {
                    retries += 1;
                    tracing::warn!(table = %self.table, "lost a commit race; re-planning");
                }
                Planned::Conflict(e) => return Err(e.into()),
            }
        }
    }

    /// One read of the metadata per plan: it gives the mirrored commits and is the base
    /// the first batch builds on (each batch hands the next the version it published). A
    /// relocated table is refused, unless rebuilding: then its metadata mirrors nothing
    /// here, and the first batch starts a new history after it. An upgrade the options
    /// ask for happens here, and is noted.
    async fn plan_start(
        &mut self,
        source: &mut dyn TableSource,
        preloaded: Option<Preloaded>,
    ) -> Result<PlanStart, SyncError> {
        let (loaded, mut known) = match preloaded {
            Some(p) => (p.loaded, Some((p.state, p.listing))),
            None if self.options.rebuild => (self.target.load(Read::AsFound).await?, None),
            None => (self.target.load(Read::ForCommit).await?, None),
        };
        sources::same_as_recorded(&self.store, source, loaded.as_ref())?;
        self.report.snapshots_found = loaded.as_ref().map_or(0, |l| l.snapshots);
        // Asked for a newer format version: upgrade first, in its own version, and say
        // so. What an upgraded table mirrors is read from the new version. (A plan after
        // a lost race finds the table upgraded: the note stays.)
        let change = self.target.prepare().await?;
        if let Some(note) = upgrade::Upgraded::from(change).note() {
            self.upgrade_note = Some(note);
            known = None;
        }
        // What the target takes as the source stores it, the source need not decode.
        source.target_takes(self.target.takes());
        // The listing depends on the mirrored commits, not on the live files added below.
        let (mut state, listing) = match known {
            Some((state, listing)) => (state, listing),
            None => (self.target.mirror_state(), None),
        };
        let saved = source.reads_saved_by_live_files(&state).await;
        if saved > 0 {
            state.live_files = self.target.live_files(saved).await?;
        }
        if source.wants_mirrored_deletes(&state) {
            state.deletes = self.target.mirrored_deletes();
        }
        let listing = match listing {
            Some(listing) => listing,
            None => source.listing(&state).in_table(&self.store)?,
        };
        let gone = replay::gone_unmirrored(source, &listing).await;
        let gone = gone.in_table(&self.store)?;
        if !gone.is_empty() {
            return Err(SyncError::GoneUnmirrored {
                table: self.table.clone(),
                gone,
            });
        }
        Ok(PlanStart {
            empty: loaded.is_none(),
            state,
            listing,
        })
    }

    /// The source's replay for `state`: with `--from-latest` on a first sync one change
    /// set of the current state; after lost history, the oldest retained state first.
    /// Also the engine's notes on what it chose.
    async fn replay<'s>(
        &self,
        source: &'s dyn TableSource,
        state: &MirrorState,
    ) -> Result<(Replay<'s>, Vec<String>), SyncError> {
        let mirrored = &state.commits;
        match source.replay(state).await {
            // First sync with --from-latest: one snapshot of the current state.
            Ok(replay) if self.options.from_latest && mirrored.is_empty() => {
                let note = "--from-latest: one snapshot holds the table as of its newest commit";
                Ok((
                    Box::new(replay::LatestState::new(replay)),
                    vec![note.into()],
                ))
            }
            Ok(replay) => Ok((replay, Vec::new())),
            // Commits after the last mirrored one are gone from the source (archived,
            // truncated): the state at the oldest retained commit becomes one snapshot,
            // taken as a difference from what the target holds, then one per later commit.
            Err(e) if !mirrored.is_empty() && e.is_history_lost() => {
                let e = e.in_table(&self.table);
                let replay = source
                    .replay(&MirrorState::default())
                    .await
                    .in_table(&self.store)?;
                let note = format!("{e}; the oldest retained commit's snapshot holds the table's state at that commit instead");
                Ok((Box::new(replay::FirstFullState::new(replay)), vec![note]))
            }
            Err(e) => Err(SyncError::Source(e.in_table(&self.table))),
        }
    }

    /// One plan: replay what `start` leaves pending and publish it batch by batch.
    async fn plan(
        &mut self,
        source: &mut dyn TableSource,
        start: PlanStart,
        progress: &mut impl FnMut(&Mirrored),
    ) -> Result<Planned, SyncError> {
        let (replay, engine_notes) = self.replay(source, &start.state).await?;
        let mirrored = &start.state.commits;
        self.trust_proven = !mirrored.is_empty() && !self.options.check_every_file;
        let reduced = self.options.from_latest && mirrored.is_empty();
        let first = start.state.first.as_deref();
        let order = |a: &str, b: &str| source.order(a, b);
        let pending = replay::Pending::new(mirrored, first, &start.listing, order);
        // In-commit mode for a commit the mirror holds (with a snapshot of its own, or
        // expired, or folded): nothing further to do. Where commits may complete late,
        // one before where the mirror begins may never have been mirrored: refused
        // before anything is published.
        let held = self.until.filter(|u| pending.is_expired(u));
        if let Some(u) = held.filter(|_| !start.listing.strictly_ordered) {
            return Err(SyncError::NotMirrored {
                table: self.table.clone(),
                commit: u.to_string(),
                reason: UNSURE_BEFORE_START.into(),
            });
        }
        let until_done = held.is_some() || self.until.is_some_and(|u| mirrored.contains(u));
        let remaining = match pending.count(self.until) {
            _ if until_done => 0,
            // --from-latest: the one snapshot of the newest state.
            n if reduced => n.min(1),
            n => n,
        };
        let written_before = self.report.written.len();
        let mut batches = replay::Batches::new(replay, pending, self.until, until_done);
        let published = self
            .publish_all(source, &mut batches, start.empty, remaining, progress)
            .await?;
        match published {
            Published::CreatedEmpty => {
                self.report.notes = notes(batches.notes(), engine_notes, None);
                return Ok(Planned::Done(false));
            }
            Published::Conflict(e) => return Ok(Planned::Conflict(e)),
            Published::All => {}
        }
        // A replay may start after the newest mirrored commit: the listed commits it did
        // not give are mirrored already. (Not with --from-latest, which gives one change
        // set for all, nor after an error, which leaves commits unread.)
        let unstreamed = match self.until {
            None if !reduced && batches.stopped.is_none() => {
                start.listing.commits.len().saturating_sub(batches.streamed)
            }
            // In-commit mode for a commit already mirrored: the listed commits up to it
            // that a snapshot records.
            Some(u) if until_done => {
                let upto = start.listing.commits.iter().position(|c| c.id == u);
                let listed = &start.listing.commits[..upto.map_or(0, |p| p + 1)];
                listed.iter().filter(|c| mirrored.contains(&c.id)).count()
            }
            _ => 0,
        };
        let report = &mut self.report;
        report.source_commits = batches.streamed + unstreamed;
        report.already_mirrored = batches.skipped.saturating_sub(written_before) + unstreamed;
        report.notes = notes(batches.notes(), engine_notes, self.upgrade_note.take());
        if let Some(u) = held {
            report.notes.push(format!("source commit {u} comes before where the mirror begins: the mirror holds it without a snapshot of its own (its snapshot expired, or it was folded into the first snapshot by sync --from-latest)"));
        }
        // The commits before the one the source could not read are mirrored; now say why
        // the rest is not. (In-commit mode does not fail for a bad commit after the one it
        // was asked for.)
        let until_mirrored = held.is_some()
            || self.until.is_some_and(|u| {
                mirrored.contains(u) || report.written.iter().any(|m| m.commit.id == u)
            });
        if let Some(e) = batches.stopped.filter(|_| !batches.reached) {
            return Err(SyncError::Source(e.in_table(&self.table)));
        }
        if self.options.rebuild {
            self.set_aside().await?;
        }
        // Every listed commit is mirrored: the version the target holds now is settled.
        self.settled = self.until.is_none() && !self.options.rebuild && !reduced;
        Ok(Planned::Done(until_mirrored))
    }

    /// Publish the pending change sets of `batches`, a batch at a time.
    async fn publish_all(
        &mut self,
        source: &dyn TableSource,
        batches: &mut replay::Batches<'_>,
        empty: bool,
        mut remaining: usize,
        progress: &mut impl FnMut(&Mirrored),
    ) -> Result<Published, SyncError> {
        let mut first = true;
        while first || !batches.ended {
            // The first batch is read beside what its publish reads first of the target.
            let mut batch = match first && !empty && remaining > 0 {
                true => {
                    let read = batches.next_batch(BATCH_SIZE);
                    futures::join!(read, self.target.read_ahead()).0
                }
                false => batches.next_batch(BATCH_SIZE).await,
            };
            // No completed commit yet: a table with the declared schema and no snapshot,
            // so that readers and catalogs find an empty table.
            if std::mem::take(&mut first)
                && empty
                && batches.streamed == 0
                && batches.stopped.is_none()
                && self.until.is_none()
            {
                if let Some(declared) = source.declared_table().await.in_table(&self.store)? {
                    self.report.created_empty = self.target.create_empty(&declared).await?;
                }
                return Ok(Published::CreatedEmpty);
            }
            if batch.is_empty() {
                continue;
            }
            // A change set naming a file outside the allowed locations stops the sync
            // there, as a commit the source cannot read does: those before it are mirrored.
            let mut refused = confine(&self.table, &batch, self.options);
            if let Some((at, _)) = &refused {
                batch.truncate(*at);
            }
            if batch.is_empty() {
                if let Some((_, e)) = refused.take() {
                    return Err(e);
                }
            }
            if !self.trust_proven {
                for file in batch.iter_mut().flat_map(|c| c.added.iter_mut()) {
                    file.proven = false;
                }
            }
            let chunk: Vec<&ChangeSet> = batch.iter().collect();
            let last = batches.ended || refused.is_some();
            let done = self.target.publish(&chunk, last).await;
            for (committed, change) in done.committed.into_iter().zip(batch.iter()) {
                remaining = remaining.saturating_sub(1);
                self.record(change, committed, remaining, progress);
            }
            match done.error {
                None => {}
                Some(e) if e.is_conflict() => return Ok(Published::Conflict(e)),
                Some(e) => return Err(e.into()),
            }
            if let Some((_, e)) = refused {
                return Err(e);
            }
        }
        Ok(Published::All)
    }

    /// One change set written: reported, and its degraded notes kept (each once).
    fn record(
        &mut self,
        change: &ChangeSet,
        committed: xlake_target::Committed,
        remaining: usize,
        progress: &mut impl FnMut(&Mirrored),
    ) {
        // The target logs each entry as it first appears.
        for d in &committed.degraded {
            let line = format!("{d} (from commit {})", change.commit.id);
            if !self
                .report
                .degraded
                .iter()
                .any(|r| r.starts_with(d.as_str()))
            {
                self.report.degraded.push(line);
            }
        }
        let m = Mirrored {
            commit: change.commit.clone(),
            added: change.added.len(),
            removed: change.removed.len(),
            full_state: change.full_state,
            committed,
            remaining,
        };
        progress(&m);
        self.report.written.push(m);
    }

    /// `--rebuild`: once the current version is this place's own, the old history aside.
    async fn set_aside(&mut self) -> Result<(), SyncError> {
        self.report.rebuilt = match self.target.set_aside_relocated().await? {
            SetAside::Moved(rebuilt) => Some(rebuilt),
            SetAside::Nothing => None,
            SetAside::StillElsewhere(recorded) => {
                return Err(rebuild::not_rebuilt(&self.store, &recorded));
            }
        };
        if self.report.rebuilt.is_none() {
            self.report.notes.push("--rebuild: the Iceberg metadata here already belongs to this location; nothing to set aside".into());
        }
        Ok(())
    }
}

/// How publishing a plan's batches ended.
enum Published {
    /// Every pending change set published (or the replay stopped; see its error).
    All,
    /// The source has no commit yet: an empty table was created (if it declares one).
    CreatedEmpty,
    /// A batch lost its commit point to another writer.
    Conflict(TargetError),
}

/// With `options.data_roots`: the first change set adding a data file outside them (a
/// crafted log naming `/etc/...`), by its index, with the error naming its commit (the
/// log names the file).
fn confine(
    table: &str,
    pending: &[ChangeSet],
    options: &SyncOptions,
) -> Option<(usize, SyncError)> {
    let roots = options.data_roots.as_ref()?;
    // A data file, or a deletion vector stored in a file of its own, outside the roots.
    let outside = |f: &&xlake_model::DataFile| {
        let vector = f.deletion_vector.as_ref().and_then(|d| match &d.bytes {
            xlake_model::VectorBytes::Stored { path, .. } => Some(path),
            xlake_model::VectorBytes::Inline(_) => None,
        });
        !access::data_file_allowed(&f.path, roots)
            || vector.is_some_and(|p| !access::data_file_allowed(p, roots))
    };
    pending.iter().enumerate().find_map(|(i, change)| {
        let file = change.added.iter().find(outside)?;
        tracing::error!(table = %table, commit = %change.commit.id, file = %file.path, "data file outside the table and the allowed locations");
        Some((i, SyncError::NotMirrored {
            table: table.to_string(),
            commit: change.commit.id.clone(),
            reason: "it adds a data file (or a deletion vector file) outside the table and the allowed locations (named in the service log); allow that location with --allow".into(),
        }))
    })
}

/// The notes of a sync: the source's, then the engine's (each once), then `extra`.
fn notes(source: Vec<String>, engine: Vec<String>, extra: Option<String>) -> Vec<String> {
    let mut notes = source;
    notes.extend(engine);
    notes.dedup();
    notes.extend(extra);
    notes
}
