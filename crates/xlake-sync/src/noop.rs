//! The scheduled job's no-op shortcut: a table whose last sync left nothing pending, and
//! whose source and target have not moved since, is not read again.
//!
//! A sync that ends with every listed commit mirrored reports what it settled on
//! ([`SyncReport::settled`]): the target's version, the source's tip (its newest state as
//! listed, [`xlake_source::TableSource::tip`]), the newest mirrored commit. The job asks
//! the target to keep that record beside the version (`TableTarget::remember_settled`).
//! On the next pass the target gives it back only while its current version is still the
//! record's, cheaply proven (Iceberg: the hint names it exactly, no `v(N+1)`, written for
//! this location; `TableTarget::settled`); the source is then opened as the record says
//! (Delta: its log listed from the newest mirrored version, as a sync would; Hudi: its
//! timeline listed from the instant time the recorded tip names, on S3 and GCS) and its tip
//! compared with the record's. Equal: every commit the source lists is one the version
//! mirrors, and the sync is skipped with the version unread. Anything else (no record, a
//! damaged or stale one, a new commit, a moved target, an error on the way, options a
//! sync would act on) takes the normal path, which reports errors as it always did.

use xlake_source::MirrorState;
use xlake_storage::TableStore;
use xlake_target::Settled;

use crate::{sources, targets, SyncOptions, SyncReport};

/// What the shortcut found.
pub(crate) enum Shortcut {
    /// Nothing to do: the report of the sync skipped.
    Proven(Box<SyncReport>),
    /// Take the normal path; the record found, if any (replaced after it when it differs).
    NotProven(Option<Settled>),
}

/// Whether the table at `store` is provably a no-op for a sync with `options`.
pub(crate) async fn shortcut(store: &TableStore, options: &SyncOptions) -> Shortcut {
    // What a sync would act on even with nothing new: a catalog entry to point, a format
    // named (checked against the folder's markers), a rebuild, confinement, properties.
    let acts = options.catalog.is_some()
        || options.format.is_some()
        || options.rebuild
        || options.from_latest
        || options.data_roots.is_some()
        || !options.properties.is_empty();
    if acts {
        return Shortcut::NotProven(None);
    }
    let Ok(target) = targets::open(store, options) else {
        return Shortcut::NotProven(None);
    };
    let Ok(Some(settled)) = target.settled().await else {
        return Shortcut::NotProven(None);
    };
    match unchanged(store, options, &settled).await {
        Some(report) => Shortcut::Proven(Box::new(report)),
        None => Shortcut::NotProven(Some(settled)),
    }
}

/// The report of a sync with nothing to do, when the source's tip is still `settled`'s
/// and the options ask for the version it records.
async fn unchanged(
    store: &TableStore,
    options: &SyncOptions,
    settled: &Settled,
) -> Option<SyncReport> {
    if options
        .format_version
        .is_some_and(|v| v != settled.format_version)
    {
        return None;
    }
    // Opened as `sources::open_as_recorded` opens it for a sync of a mirrored table.
    let kind = sources::KINDS
        .iter()
        .find(|k| k.detectable && k.format.as_str() == settled.source_format)?;
    let state = MirrorState {
        commits: settled.newest.iter().cloned().collect(),
        ..MirrorState::default()
    };
    let source_options = sources::source_options(options);
    let opened = match (kind.open_at_tip, kind.open_after, &settled.newest) {
        (Some(at_tip), _, _) => at_tip(store.clone(), source_options, &settled.source_tip),
        (None, Some(after), Some(_)) => after(store.clone(), source_options, &state),
        _ => (kind.open)(store.clone(), source_options),
    };
    let source = opened.await.ok()??;
    if source.tip()? != settled.source_tip {
        return None;
    }
    tracing::debug!(table = %store.location(), version = settled.version, "nothing new since the settled version; not read");
    Some(SyncReport {
        format: source.format().as_str().into(),
        source_commits: settled.source_commits,
        already_mirrored: settled.source_commits,
        snapshots_found: settled.snapshots,
        ..SyncReport::default()
    })
}

/// After a sync on the normal path: keep what it settled on, when that differs from the
/// record `found` before it. A failure is logged (the record is a cache).
pub(crate) async fn remember(
    store: &TableStore,
    options: &SyncOptions,
    settled: &Settled,
    found: Option<&Settled>,
) {
    if found == Some(settled) {
        return;
    }
    let written = match targets::open(store, options) {
        Ok(target) => target
            .remember_settled(settled)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = written {
        tracing::warn!(table = %store.location(), error = %e, "could not keep the settled record; the next pass reads the metadata");
    }
}
