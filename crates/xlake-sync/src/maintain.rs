//! Table maintenance the binary and the scheduled job share: expiring snapshots (the
//! catalog entry then follows the version the expiry published) and deleting orphan
//! metadata files. Each lives here once; callers only print what they return.

use xlake_catalog::{Advanced, CatalogTarget};
use xlake_storage::TableStore;
pub use xlake_target::{Expired, Retention};

use crate::error::InTable;
use crate::targets::{self, SAFE_AGE};
use crate::SyncError;

/// What [`expire`] did.
#[derive(Debug)]
pub struct Expiry {
    /// The snapshots and files expired; its `held_at` names the snapshot kept, with every
    /// one after it, when the source's order or its pending commit held the expiry back.
    pub expired: Expired,
    /// Where the catalog entry moved, if it did.
    pub catalog: Option<Advanced>,
    /// The source's oldest pending commit and the newest snapshot before it, kept with
    /// every one after it, when there is one (see [`bounds`]).
    pub held_back: Option<HeldBack>,
}

/// A pending source commit that holds an expiry back (see [`bounds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    /// The source's oldest pending commit.
    pub pending: String,
    /// The snapshot kept for it: the newest of a source commit before it, else the oldest
    /// of a source commit.
    pub snapshot_id: i64,
}

/// Where the source lets an expiry cut (see [`bounds`]).
#[derive(Debug, Default)]
pub struct Bounds {
    /// The snapshots an expiry may keep from ([`Retention::cuts`]); `None`: any.
    pub cuts: Option<std::collections::BTreeSet<i64>>,
    /// The source's oldest pending commit, which no cut passes.
    pub held_back: Option<HeldBack>,
}

/// Expire what `retention` says (and what the source deleted) in the `target` named
/// (Iceberg when `None`), cutting only where the source allows ([`bounds`]), then point
/// the catalog entry, if any, at the version the expiry published.
pub async fn expire(
    store: &TableStore,
    retention: &Retention,
    catalog: Option<&CatalogTarget>,
    target: Option<&str>,
) -> Result<Expiry, SyncError> {
    let opened = open(store, target)?;
    let bounds = bounds(store, target).await?;
    let retention = Retention {
        cuts: bounds.cuts,
        ..retention.clone()
    };
    let expired = opened.expire(&retention).await?;
    let catalog = match catalog {
        Some(target) => crate::catalog::point(store, target).await?,
        None => None,
    };
    Ok(Expiry {
        expired,
        catalog,
        held_back: bounds.held_back,
    })
}

/// Where an expiry may cut, for a format whose commits may complete out of source order
/// (Hudi; for others every cut is allowed and nothing of the source is read):
/// - never past the newest snapshot of a source commit before the source's oldest pending
///   commit, so that commit, once completed, comes after the oldest retained snapshot,
///   where a sync mirrors it (Hudi's archival likewise never passes its oldest pending
///   instant); when no snapshot precedes it, never past the oldest snapshot (once
///   completed it is mirrored before them all, and a commit after it whose snapshot
///   expired would be mirrored again);
/// - where the source lists commits out of snapshot order (a late completion), only where
///   every expired snapshot's commit is listed before every kept one's ([`crate::cuts`]);
/// - never past a listed commit no snapshot records yet (one that completed late after the
///   last sync, no longer pending), which the next sync would otherwise take as expired.
///
/// The source is opened from where the mirror stands, as a sync opens it (a Hudi
/// timeline listed from the saved instant time, its pending instants looked up). One that
/// does not open gives a warning and no bounds: the expiry goes on as asked.
pub async fn bounds(store: &TableStore, target: Option<&str>) -> Result<Bounds, SyncError> {
    let options = crate::SyncOptions {
        target: target.map(str::to_string),
        ..Default::default()
    };
    let mut mirror = targets::open_chosen(store, &options)?;
    // The format the mirror records, from its current version as found: nothing of a
    // source whose commits complete in order is read, nor every snapshot of its mirror
    // (hostile review 9: detecting the format read a Delta table's first commit).
    let Some(found) = mirror.load(xlake_target::Read::AsFound).await? else {
        return Ok(Bounds::default());
    };
    let recorded = found.source_format.as_deref();
    let late = crate::sources::detectable()
        .iter()
        .any(|k| Some(k.format.as_str()) == recorded && k.late_completions);
    if !late {
        return Ok(Bounds::default());
    }
    let Some(loaded) = mirror.load(xlake_target::Read::Whole).await? else {
        return Ok(Bounds::default());
    };
    let options = crate::sources::with_recorded_choices(&options, mirror.as_ref());
    let state = mirror.mirror_state();
    let opened = crate::sources::open_as_recorded(store, &options, Some(&loaded), Some(&state));
    let source = match opened.await {
        Ok(source) => source,
        Err(e) => {
            tracing::warn!(table = %store.location(), error = %e, "the source did not open: expiring without regard to its order or its pending commits (a commit pending now and older than the oldest snapshot kept would never be mirrored; after a late completion, a commit expired after an older one kept would be mirrored again)");
            return Ok(Bounds::default());
        }
    };
    let snapshots = mirror.view().snapshots;
    let held_back = held_back(source.as_ref(), &snapshots);
    let listing = source.listing(&state).in_table(store)?;
    let floor = held_back.as_ref().map(|h| h.snapshot_id);
    Ok(Bounds {
        cuts: Some(crate::cuts::allowed(&snapshots, &listing, floor, |a, b| {
            source.order(a, b)
        })),
        held_back,
    })
}

/// The source's oldest pending commit and the snapshot an expiry keeps for it (with every
/// one after it): the newest of a commit before it; when none precedes it, the oldest
/// (once completed it is mirrored before them all, and a commit after it whose snapshot
/// expired would be mirrored again: hostile review hr12).
fn held_back(
    source: &dyn xlake_source::TableSource,
    snapshots: &[xlake_target::SnapshotEntry],
) -> Option<HeldBack> {
    let pending = source.oldest_pending()?;
    let recorded = || snapshots.iter().filter(|s| s.source_commit.is_some());
    let before = |c: &String| source.order(c, &pending) == std::cmp::Ordering::Less;
    let newest_before = recorded()
        .filter(|s| s.source_commit.as_ref().is_some_and(before))
        .max_by_key(|s| s.sequence_number);
    let kept = newest_before.or_else(|| recorded().min_by_key(|s| s.sequence_number))?;
    Some(HeldBack {
        snapshot_id: kept.snapshot_id,
        pending,
    })
}

/// What [`cleanup`] found.
#[derive(Debug)]
pub struct Cleanup {
    /// Orphan metadata files (absolute locations): deleted, or with `dry_run` not.
    pub orphans: Vec<String>,
    /// Files under `metadata/` that xlake did not write, left alone (absolute locations).
    pub left_alone: Vec<String>,
    /// `vN.metadata.json` files above the current version past a gap, which no reader
    /// loads (absolute locations): reported, never taken as current; what they name stays.
    pub strays: Vec<String>,
}

/// Why [`cleanup`] refuses an age, if it does: under [`SAFE_AGE`] a cleanup may delete the
/// files of a commit a running writer has written but not yet published, unless the
/// caller vouches that no writer runs.
pub fn refuse_age(older_than: std::time::Duration, no_writer_running: bool) -> Option<String> {
    (older_than < SAFE_AGE && !no_writer_running).then(|| {
        format!(
            "--older-than under {}h refused: such a cleanup may delete the files of a commit that a running sync, commit, serve, run or expire has written but not yet published, and the table would then name missing files; pass --no-writer-running if nothing writes the table meanwhile",
            SAFE_AGE.as_secs() / 3600
        )
    })
}

/// Delete (unless `dry_run`) the metadata files xlake wrote in the `target` named
/// (Iceberg when `None`) that nothing references and that are older than `cutoff_ms`;
/// never a file xlake did not write.
pub async fn cleanup(
    store: &TableStore,
    cutoff_ms: i64,
    dry_run: bool,
    target: Option<&str>,
) -> Result<Cleanup, SyncError> {
    let found = open(store, target)?.orphans(cutoff_ms).await?;
    for path in &found.files {
        if !dry_run {
            store.delete(path).await?;
        }
    }
    let absolute = |paths: Vec<String>| paths.iter().map(|p| store.absolute(p)).collect();
    Ok(Cleanup {
        orphans: absolute(found.files),
        left_alone: absolute(found.others),
        strays: absolute(found.strays),
    })
}

/// The `target` named (Iceberg when `None`), opened for maintenance (default options).
fn open(
    store: &TableStore,
    target: Option<&str>,
) -> Result<Box<dyn xlake_target::TableTarget>, SyncError> {
    let kind = targets::kind(target)?;
    Ok((kind.open)(
        store.clone(),
        &xlake_target::TargetOptions::default(),
    )?)
}
