//! # xlake-sync: the engine
//!
//! Wires a source to the Iceberg target: finds the table's format in the [`sources`]
//! registry, asks the source (an [`xlake_source::TableSource`]) for
//! its change sets, asks the target which source commits it already mirrors (from the
//! snapshots' `XTABLE_METADATA`, the only sync state there is), and commits the rest, one
//! snapshot per source commit, in order.
//!
//! | item | what it does |
//! |---|---|
//! | [`sync`], [`sync_store`] | mirror every pending completed commit of one table |
//! | [`SyncOptions`] | operator choices (merge-on-read opt-in, Iceberg table properties) |
//! | [`Mirrored`] | one snapshot written, as reported while syncing |
//! | [`catalog`] | the catalog entry: checked before publishing, moved forward after |
//! | [`check`](check::check) | the invariant checker: one snapshot per completed commit, in order |
//! | [`inspect`](inspect::inspect) | the health report: metadata each format keeps, degraded mirroring |
//! | [`job`] | the scheduled job over the tables of a config file |
//! | [`maintain`] | `expire` (the catalog entry following) and `cleanup`, shared by the binary and the job |
//! | [`snapshots`](snapshots::snapshots) | the snapshot list and the source commit each records |
//! | [`locate`](locate::locate) | what a location holds (source table, Iceberg metadata), before a command acts |
//! | [`rebuild`] | `sync --rebuild`: a copied or moved table mirrored afresh at its new place |
//! | `replay` | the source's replay as the engine reads it: pending change sets, `--from-latest`, lost history |
//! | [`serve`] | the long-running service: Hudi's write-commit callback, scheduled sync, check, metrics |
//! | [`upgrade`](upgrade::upgrade) | `xlake upgrade`: a newer Iceberg format version, at once |
//! | [`sources`] | the registry of source formats: the only module naming Hudi and Delta |
//! | [`SyncError`] | errors of the engine and of the crates it drives |
//!
//! A commit the target has no snapshot for is pending, unless it is older than the oldest
//! commit a snapshot records (those were mirrored, then expired). Pending commits are
//! written in source order, in batches of 100 read from the source's replay as
//! they are needed (a backfill never holds the history); a writer that loses a race
//! re-plans from the target's state.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod catalog;
pub mod check;
pub mod inspect;
pub mod job;
pub mod locate;
pub mod maintain;
pub mod rebuild;
mod replay;
pub mod serve;
pub mod snapshots;
pub mod sources;
pub mod upgrade;

pub use check::{check, check_with, CheckReport};

use std::collections::HashMap;

use xlake_catalog::{Advanced, CatalogError, CatalogTarget};
use xlake_iceberg::{Committed, IcebergError, IcebergTable, LoadedTable, NextBase};
use xlake_model::{ChangeSet, CommitListing, SourceCommit};
use xlake_source::{CommitState, MirrorState, Replay, SourceError, SourceOptions, TableSource};
use xlake_storage::{StorageError, TableStore};

/// How often in a row a commit is re-planned after losing a race while no writer makes
/// progress.
const MAX_CONFLICT_RETRIES: usize = 5;

/// Snapshots published together in one metadata version during a backfill. Every
/// `vN.metadata.json` holds every snapshot, so one version per commit would make a
/// backfill's writes grow with the square of its length.
const BATCH_SIZE: usize = 100;

/// Errors of a sync; the Iceberg metadata is left at its last good version.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Storage access failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The source failed; the table is attached where the error enters the engine
    /// ([`InTable::in_table`]).
    #[error(transparent)]
    Source(SourceError),
    /// The Iceberg target failed.
    #[error(transparent)]
    Iceberg(#[from] IcebergError),
    /// The catalog failed or refused the entry.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The location holds no table of a format xlake reads.
    #[error("{table}: not a {formats} table (looked for {markers})")]
    NotATable {
        /// Table location.
        table: String,
        /// The formats tried (`Hudi or Delta`).
        formats: String,
        /// What marks a table of each (`.hoodie/hoodie.properties, _delta_log/`).
        markers: String,
    },
    /// The format asked for (or detected) is not the table's: its markers or its mirror
    /// say another. Refused before anything is written.
    #[error("{table}: read as {asked}, but {found}; refusing to mirror it (nothing written)")]
    FormatMismatch {
        /// Table location.
        table: String,
        /// The format the source would be read as (`PARQUET`).
        asked: String,
        /// What says otherwise, naming that format.
        found: String,
    },
    /// The format asked for is not one xlake reads.
    #[error("unknown table format {format:?} (known: {known})")]
    UnknownFormat {
        /// The format asked for.
        format: String,
        /// The formats xlake reads.
        known: String,
    },
    /// The location holds no table at all: no source and no Iceberg metadata.
    #[error("{table}: not a table: no {formats} table ({markers}) and no Iceberg metadata (metadata/*.metadata.json) found")]
    NoTable {
        /// Table location.
        table: String,
        /// The formats looked for (`Hudi or Delta`).
        formats: String,
        /// What marks a table of each.
        markers: String,
    },
    /// `--rebuild` could not write a history at the table's new location.
    #[error("{table}: rebuild: {reason}")]
    Rebuild {
        /// Table location.
        table: String,
        /// Why.
        reason: String,
    },
    /// In-commit mode: the named commit is not (or cannot be) mirrored.
    #[error("{table}: source commit {commit} is not mirrored: {reason}")]
    NotMirrored {
        /// Table location.
        table: String,
        /// The commit asked for.
        commit: String,
        /// Why.
        reason: String,
    },
    /// The service cannot start or run as configured.
    #[error("serve: {0}")]
    Service(String),
}

/// A source's result entering the engine: its error gets the table, once, here. No
/// `From<SourceError>` exists, so no source error reaches the engine without its table.
pub(crate) trait InTable<T> {
    /// The result, its error of the table at `store`.
    fn in_table(self, store: &TableStore) -> Result<T, SyncError>;
}

impl<T> InTable<T> for Result<T, SourceError> {
    fn in_table(self, store: &TableStore) -> Result<T, SyncError> {
        self.map_err(|e| SyncError::Source(e.in_table(store.location())))
    }
}

/// Operator choices.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Options a source may honour (the merge-on-read view).
    pub source: SourceOptions,
    /// The source format, when chosen explicitly (`hudi`, `delta`); detected when `None`.
    pub format: Option<String>,
    /// Iceberg table properties to set.
    pub properties: HashMap<String, String>,
    /// On a first sync, write one snapshot of the current state instead of the history.
    pub from_latest: bool,
    /// Do not check that live data files exist with the recorded size (for a copy of a
    /// table's log without its data; a missing file's row count must then be in the log).
    pub skip_file_check: bool,
    /// The operator vouches that only this process writes the table's Iceberg metadata:
    /// a store without put-if-absent is then accepted.
    pub single_writer: bool,
    /// The table folder was copied or moved (its metadata records another location):
    /// mirror the source's history afresh here, then set the old metadata files aside
    /// (see [`rebuild`]). On a table at home, a plain sync.
    pub rebuild: bool,
    /// When set (by `serve`, and `sync --allow`), every data file a commit adds must lie
    /// under one of these normalised locations (the table's own first): a commit naming
    /// any other file, or a deletion vector file elsewhere, fails before anything outside
    /// is read (the store itself is confined, see [`open_store`]).
    pub data_roots: Option<Vec<String>>,
    /// The catalog entry to keep pointing at the current version.
    pub catalog: Option<CatalogTarget>,
    /// The Iceberg format version to write (2 or 3); `None`: the table's own, 2 for a new
    /// table. A v2 table asked for 3 is upgraded in place at the start of the sync.
    pub format_version: Option<u8>,
}

/// Open the table root at `location` as `options` say.
/// With `options.data_roots`, the store is confined to them: a location a log names
/// outside the table and the roots (a data file, a deletion vector's file) is refused
/// before anything there is read, so the answer never tells whether it exists.
pub fn open_store(location: &str, options: &SyncOptions) -> Result<TableStore, SyncError> {
    let store = TableStore::open(location)?.with_single_writer(options.single_writer);
    Ok(match options.data_roots.clone() {
        Some(roots) => store.confined(xlake_storage::Confinement::new(move |path| {
            serve::access::data_file_allowed(path, &roots)
        })),
        None => store,
    })
}

/// `options`, with the merge-on-read view turned on when the table's snapshots record that
/// they mirror the read-optimized view (`xlake.hudi.view`): the operator chose it when
/// syncing, and commands that read the table need not be told again.
pub(crate) fn with_recorded_view(
    options: &SyncOptions,
    loaded: Option<&xlake_iceberg::LoadedTable>,
) -> SyncOptions {
    let recorded = loaded.is_some_and(|l| {
        l.history.heads().iter().any(|h| {
            h.notes
                .0
                .get(xlake_source::VIEW_NOTE)
                .is_some_and(|v| v == xlake_source::READ_OPTIMIZED)
        })
    });
    let mut options = options.clone();
    options.source.mor_read_optimized |= recorded;
    options
}

/// One snapshot written by a sync (what it mirrors, not the file lists, which a long
/// backfill could not keep in memory).
#[derive(Debug, Clone)]
pub struct Mirrored {
    /// The source commit.
    pub commit: SourceCommit,
    /// Data files the commit added.
    pub added: usize,
    /// Data files the commit removed.
    pub removed: usize,
    /// What the target wrote.
    pub committed: Committed,
    /// Commits still to mirror after this one, as planned now (for progress display).
    pub remaining: usize,
}

/// The result of a sync.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// Source format (`HUDI`, `DELTA`).
    pub format: String,
    /// Completed source commits that have (now) a snapshot.
    pub source_commits: usize,
    /// Of these, mirrored before this sync.
    pub already_mirrored: usize,
    /// Snapshots written by this sync.
    pub written: Vec<Mirrored>,
    /// Notes for the operator from the source.
    pub notes: Vec<String>,
    /// With [`SyncOptions::rebuild`]: the old history set aside, if there was one.
    pub rebuilt: Option<rebuild::Rebuilt>,
    /// What the snapshots written by this sync mirror their commits without (each note
    /// once; the snapshots carry them in their summaries as `xlake.degraded`).
    pub degraded: Vec<String>,
    /// The source has no completed commit yet, and this sync created the Iceberg table
    /// with its declared schema and no snapshot (this version of it).
    pub created_empty: Option<u64>,
    /// What was done to the catalog entry, when there is one.
    pub catalog: Option<Advanced>,
}

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
    let store = open_store(location, options)?;
    let table = store.location().to_string();
    let not_mirrored = |reason: String| SyncError::NotMirrored {
        table: table.clone(),
        commit: commit.to_string(),
        reason,
    };
    // The source's log and the table's metadata are read at the same time (each is a
    // few ms on a long history): their I/O overlaps, and so does the metadata's parse
    // (on a blocking thread) with the source's listing.
    let target = IcebergTable::new(store.clone());
    let (source, loaded) = tokio::join!(sources::open(&store, options), target.load_for_commit());
    let mut source = source?;
    if let CommitState::Pending(state) = source.commit_state(commit) {
        return Err(not_mirrored(format!(
            "the commit is {state}, not completed"
        )));
    }
    let loaded = loaded?;
    let state = mirror_state(loaded.as_ref());
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
        listing,
    };
    let outcome = run(
        store.clone(),
        source.as_mut(),
        options,
        Some(commit),
        (!options.rebuild).then_some(preloaded),
        progress,
    )
    .await;
    let (mut report, mirrored) = outcome?;
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
    sync_store(open_store(location, options)?, options, progress).await
}

/// [`sync`] on a table root the caller opened (a custom or wrapped store).
pub async fn sync_store(
    store: TableStore,
    options: &SyncOptions,
    progress: impl FnMut(&Mirrored),
) -> Result<SyncReport, SyncError> {
    let mut source = sources::open(&store, options).await?;
    let entry = precheck_catalog(&store, options).await?;
    let outcome = run(
        store.clone(),
        source.as_mut(),
        options,
        None,
        None,
        progress,
    )
    .await;
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

/// Open the catalog entry the options name and check it before anything is published.
async fn precheck_catalog(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<Option<catalog::Entry>, SyncError> {
    let Some(target) = &options.catalog else {
        return Ok(None);
    };
    let entry = catalog::Entry::open(target)?;
    entry.precheck(store).await?;
    Ok(Some(entry))
}

/// What in-commit mode read before its first plan: the table's metadata (loaded for a
/// commit, so not relocated), what it mirrors, and the source's listing for that.
struct Preloaded {
    loaded: Option<LoadedTable>,
    state: MirrorState,
    listing: CommitListing,
}

/// Mirror pending commits in order, stopping after `until` when given; also says whether
/// `until` is mirrored at the end. `preloaded` (not for a rebuild): the first plan's base,
/// mirror state and listing, as the caller just read them.
async fn run(
    store: TableStore,
    source: &mut dyn TableSource,
    options: &SyncOptions,
    until: Option<&str>,
    mut preloaded: Option<Preloaded>,
    mut progress: impl FnMut(&Mirrored),
) -> Result<(SyncReport, bool), SyncError> {
    let table = store.location().to_string();
    let mut target = IcebergTable::new(store.clone())
        .with_properties(options.properties.clone())
        .verify_files(!options.skip_file_check);
    if let Some(n) = options.format_version {
        let version =
            xlake_iceberg::v3::format_version(n).map_err(|reason| IcebergError::FormatVersion {
                table: table.clone(),
                asked: n,
                reason,
            })?;
        target = target.format_version(version);
    }
    let mut upgrade_note = None;
    let mut report = SyncReport {
        format: source.format().as_str().into(),
        ..Default::default()
    };
    // Conflicts in a row with no progress by anyone; a lost race where another writer
    // mirrored something is progress and resets the count.
    let mut retries = 0;
    let mut last_seen = 0;
    'plan: loop {
        let PlanStart {
            mut base,
            state,
            listing,
        } = plan_start(
            &store,
            &mut target,
            source,
            options,
            preloaded.take(),
            &mut upgrade_note,
        )
        .await?;
        let mirrored = &state.commits;
        let mut engine_notes = Vec::new();
        let replay: Replay<'_> = match source.replay(&state).await {
            // First sync with --from-latest: one snapshot of the current state.
            Ok(replay) if options.from_latest && mirrored.is_empty() => {
                engine_notes.push(
                    "--from-latest: one snapshot holds the table as of its newest commit".into(),
                );
                Box::new(replay::LatestState::new(replay))
            }
            Ok(replay) => replay,
            // Commits after the last mirrored one are gone from the source (archived,
            // truncated): the state at the oldest retained commit becomes one snapshot,
            // taken as a difference from what Iceberg holds, then one per later commit.
            Err(e) if !mirrored.is_empty() && e.is_history_lost() => {
                let e = e.in_table(&table);
                let replay = source
                    .replay(&MirrorState::default())
                    .await
                    .in_table(&store)?;
                engine_notes.push(format!("{e}; the oldest retained commit's snapshot holds the table's state at that commit instead"));
                Box::new(replay::FirstFullState::new(replay))
            }
            Err(e) => return Err(SyncError::Source(e.in_table(&table))),
        };
        if mirrored.len() > last_seen {
            retries = 0;
            last_seen = mirrored.len();
        }
        // In-commit mode for a commit already mirrored: nothing further to do.
        let until_done = until.is_some_and(|u| mirrored.contains(u));
        let reduced = options.from_latest && mirrored.is_empty();
        let pending = replay::Pending::new(mirrored, &listing);
        let mut remaining = match pending.count(until) {
            _ if until_done => 0,
            // --from-latest: the one snapshot of the newest state.
            n if reduced => n.min(1),
            n => n,
        };
        let written_before = report.written.len();
        let mut batches = replay::Batches::new(replay, pending, until, until_done);
        let mut first = true;
        let mut next = None;
        while first || !batches.ended {
            let mut batch = batches.next_batch(BATCH_SIZE).await;
            // No completed commit yet: an Iceberg table with the declared schema and no
            // snapshot, so that readers and catalogs find an empty table.
            if std::mem::take(&mut first)
                && base.is_none()
                && batches.streamed == 0
                && batches.stopped.is_none()
                && until.is_none()
            {
                if let Some(declared) = source.declared_table().await.in_table(&store)? {
                    report.created_empty = target.create_empty(&declared).await?;
                }
                report.notes = notes(batches.notes(), engine_notes, None);
                return Ok((report, false));
            }
            if batch.is_empty() {
                continue;
            }
            // A change set naming a file outside the allowed locations stops the sync
            // there, as a commit the source cannot read does: those before it are mirrored.
            let mut refused = confine(&table, &batch, options);
            if let Some((at, _)) = &refused {
                batch.truncate(*at);
            }
            if batch.is_empty() {
                if let Some((_, e)) = refused.take() {
                    return Err(e);
                }
            }
            let chunk: Vec<&ChangeSet> = batch.iter().collect();
            // The version the batch before published, split only now that it is built on.
            let on = next.take().map(NextBase::load).or_else(|| base.take());
            let last = batches.ended || refused.is_some();
            let mut committed = target.commit_run_batch(on, &chunk, last).await;
            next = committed.table.take();
            for (done, change) in committed.committed.into_iter().zip(batch.iter()) {
                remaining = remaining.saturating_sub(1);
                // The target logs each entry as it first appears.
                for d in &done.degraded {
                    let line = format!("{d} (from commit {})", change.commit.id);
                    if !report.degraded.iter().any(|r| r.starts_with(d.as_str())) {
                        report.degraded.push(line);
                    }
                }
                let m = Mirrored {
                    commit: change.commit.clone(),
                    added: change.added.len(),
                    removed: change.removed.len(),
                    committed: done,
                    remaining,
                };
                progress(&m);
                report.written.push(m);
            }
            match committed.error {
                None => {}
                Some(IcebergError::CommitConflict { .. }) if retries < MAX_CONFLICT_RETRIES => {
                    retries += 1;
                    tracing::warn!(table = %table, "lost a commit race; re-planning");
                    continue 'plan;
                }
                Some(e) => return Err(e.into()),
            }
            if let Some((_, e)) = refused {
                return Err(e);
            }
        }
        // A replay may start after the newest mirrored commit: the listed commits it did
        // not give are mirrored already.
        // (Not with --from-latest, which gives one change set for all, nor after an
        // error, which leaves commits unread.)
        let unstreamed = match until {
            None if !reduced && batches.stopped.is_none() => {
                listing.commits.len().saturating_sub(batches.streamed)
            }
            _ => 0,
        };
        report.source_commits = batches.streamed + unstreamed;
        report.already_mirrored = batches.skipped.saturating_sub(written_before) + unstreamed;
        report.notes = notes(batches.notes(), engine_notes, upgrade_note.take());
        // The commits before the one the source could not read are mirrored; now say why
        // the rest is not.
        // (In-commit mode does not fail for a bad commit after the one it was asked for.)
        let until_mirrored = until.is_some_and(|u| {
            mirrored.contains(u) || report.written.iter().any(|m| m.commit.id == u)
        });
        if let Some(e) = batches.stopped.filter(|_| !batches.reached) {
            return Err(SyncError::Source(e.in_table(&table)));
        }
        if options.rebuild {
            report.rebuilt = rebuild::set_aside_old_history(&store).await?;
            if report.rebuilt.is_none() {
                report.notes.push("--rebuild: the Iceberg metadata here already belongs to this location; nothing to set aside".into());
            }
        }
        return Ok((report, until_mirrored));
    }
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
        !serve::access::data_file_allowed(&f.path, roots)
            || vector.is_some_and(|p| !serve::access::data_file_allowed(p, roots))
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

/// Where a plan starts: its base, what it mirrors and the source's listing for that.
struct PlanStart {
    base: Option<LoadedTable>,
    state: MirrorState,
    listing: CommitListing,
}

/// One read of the metadata per plan: it gives the mirrored commits and is the base the
/// first batch builds on (each batch hands the next the version it published). A
/// relocated table is refused, unless rebuilding: then its metadata mirrors nothing here,
/// and the first batch starts a new history after it. Sets `target`'s format version for
/// a relocated table, and `upgrade_note` when an upgrade happens.
async fn plan_start(
    store: &TableStore,
    target: &mut IcebergTable,
    source: &mut dyn TableSource,
    options: &SyncOptions,
    preloaded: Option<Preloaded>,
    upgrade_note: &mut Option<String>,
) -> Result<PlanStart, SyncError> {
    use xlake_iceberg::v3::version_number;
    let (mut base, mut known) = match preloaded {
        Some(p) => (p.loaded, Some((p.state, p.listing))),
        None if options.rebuild => (target.load_as_found().await?, None),
        None => (target.load_for_commit().await?, None),
    };
    sources::same_as_recorded(store, source, base.as_ref())?;
    let relocated = base
        .as_ref()
        .is_some_and(|l| target.recorded_elsewhere(l).is_some());
    // A writer that died (or lost the reply) between its metadata file and the hint left
    // readers that trust the hint on an old version: point it right first.
    if let Some(loaded) = base.as_mut().filter(|_| !relocated) {
        target.heal_hint(loaded).await?;
        // Asked for a newer format version: upgrade first, in its own `vN`, and say so.
        // What an upgraded table mirrors is read from the new version. (A plan after a
        // lost race finds the table upgraded: the note stays.)
        if let Some(note) = upgrade::upgrade_loaded(target, loaded).await?.note() {
            *upgrade_note = Some(note);
            known = None;
        }
    }
    // The format version written: the table's, or the one asked for if newer. A rebuild
    // keeps the relocated history's version (a v3 mirror's deletion vectors must not fall
    // back to a v2 table).
    let found = base
        .as_ref()
        .map(|l| version_number(l.metadata.format_version()));
    let version = found.max(options.format_version).unwrap_or(2);
    if relocated {
        if let Ok(v) = xlake_iceberg::v3::format_version(version) {
            *target = target.clone().format_version(v);
        }
    }
    // A v3 table takes deletion vectors as they are: the source need not decode them.
    if version >= 3 {
        source.carry_deletion_vectors();
    }
    // The listing depends on the mirrored commits, not on the live files added below.
    let (mut state, listing) = match known {
        Some((state, listing)) => (state, Some(listing)),
        None => (mirror_state(base.as_ref().filter(|_| !relocated)), None),
    };
    // A manifest costs about as much as four small commit files to read and decode.
    let saved = source.reads_saved_by_live_files(&state).await;
    if let Some(loaded) = base.as_ref().filter(|_| !relocated && saved > 0) {
        state.live_files = target.current_files(loaded, saved / 4).await?;
    }
    let listing = match listing {
        Some(listing) => listing,
        None => source.listing(&state).in_table(store)?,
    };
    Ok(PlanStart {
        base,
        state,
        listing,
    })
}

/// What the target records, for the source: the source commits its snapshots name, and
/// the newest of them with its summary (where the source's notes are).
pub(crate) fn mirror_state(loaded: Option<&LoadedTable>) -> MirrorState {
    let Some(loaded) = loaded else {
        return MirrorState::default();
    };
    let synced = loaded.mirrored();
    let newest = synced.last().and_then(|(id, source_id)| {
        // The whole summary when parsed (the current snapshot), else the notes a head keeps
        // (every `xlake.*` key: all a source reads back).
        let notes = match loaded.metadata.snapshot_by_id(*id) {
            Some(s) => s.summary().additional_properties.clone(),
            None => loaded.history.head(*id)?.notes.0.clone(),
        };
        let notes = notes.into_iter().collect();
        Some((source_id.clone()?, notes))
    });
    MirrorState {
        commits: synced.into_iter().filter_map(|(_, id)| id).collect(),
        newest,
        live_files: None,
        source_state: loaded.source_state().map(str::to_string),
    }
}

/// The notes of a sync: the source's, then the engine's (each once), then `extra`.
fn notes(source: Vec<String>, engine: Vec<String>, extra: Option<String>) -> Vec<String> {
    let mut notes = source;
    notes.extend(engine);
    notes.dedup();
    notes.extend(extra);
    notes
}
