//! Table maintenance the binary and the scheduled job share: expiring snapshots (the
//! catalog entry then follows the version the expiry published) and deleting orphan
//! metadata files. Each lives here once; callers only print what they return.

use xlake_catalog::{Advanced, CatalogTarget};
use xlake_storage::TableStore;
pub use xlake_target::{Expired, Retention};

use crate::targets::{self, SAFE_AGE};
use crate::SyncError;

/// What [`expire`] did.
#[derive(Debug)]
pub struct Expiry {
    /// The snapshots and files expired.
    pub expired: Expired,
    /// Where the catalog entry moved, if it did.
    pub catalog: Option<Advanced>,
    /// The source's oldest pending commit and the snapshot kept for it (with every one
    /// after it), when one held the expiry back.
    pub held_back: Option<HeldBack>,
}

/// A pending source commit that held an expiry back (see [`pending_floor`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    /// The source's oldest pending commit.
    pub pending: String,
    /// The snapshot kept for it: the newest of a source commit before it.
    pub snapshot_id: i64,
}

/// Expire what `retention` says (and what the source deleted) in the `target` named
/// (Iceberg when `None`), never past the source's oldest pending commit
/// ([`pending_floor`]), then point the catalog entry, if any, at the version the expiry
/// published.
pub async fn expire(
    store: &TableStore,
    retention: &Retention,
    catalog: Option<&CatalogTarget>,
    target: Option<&str>,
) -> Result<Expiry, SyncError> {
    let opened = open(store, target)?;
    let held_back = pending_floor(store, target).await?;
    let retention = Retention {
        keep_from_snapshot: held_back.as_ref().map(|h| h.snapshot_id),
        ..*retention
    };
    let expired = opened.expire(&retention).await?;
    let catalog = match catalog {
        Some(target) => crate::catalog::point(store, target).await?,
        None => None,
    };
    Ok(Expiry {
        expired,
        catalog,
        held_back,
    })
}

/// The snapshot an expiry keeps, with every one after it, for the source's oldest pending
/// commit: the newest snapshot of a source commit before it in source order. So that
/// commit, once completed, comes after the oldest retained snapshot, where a sync mirrors
/// it (Hudi's archival likewise never passes its oldest pending instant). `None` when the
/// format the mirror records cannot hold an expiry back (nothing of the source is read
/// then), when the source has no such commit, when no snapshot precedes it (it is
/// older than the whole mirror: keeping snapshots would not bring it back), or when the
/// source does not open (then a warning: the expiry goes on as asked). The source is
/// opened from where the mirror stands, as a sync opens it (a Hudi timeline listed from
/// the saved instant time, its pending instants looked up).
pub async fn pending_floor(
    store: &TableStore,
    target: Option<&str>,
) -> Result<Option<HeldBack>, SyncError> {
    let options = crate::SyncOptions {
        target: target.map(str::to_string),
        ..Default::default()
    };
    let mut mirror = targets::open_chosen(store, &options)?;
    // The format the mirror records, from its current version as found: nothing of a
    // source that cannot hold an expiry back is read, nor every snapshot of its mirror
    // (hostile review 9: detecting the format read a Delta table's first commit).
    let Some(found) = mirror.load(xlake_target::Read::AsFound).await? else {
        return Ok(None);
    };
    let recorded = found.source_format.as_deref();
    let holds = crate::sources::detectable()
        .iter()
        .any(|k| Some(k.format.as_str()) == recorded && k.pending_holds_expiry);
    if !holds {
        return Ok(None);
    }
    let Some(loaded) = mirror.load(xlake_target::Read::Whole).await? else {
        return Ok(None);
    };
    let options = crate::sources::with_recorded_choices(&options, mirror.as_ref());
    let state = mirror.mirror_state();
    let opened = crate::sources::open_as_recorded(store, &options, Some(&loaded), Some(&state));
    let source = match opened.await {
        Ok(source) => source,
        Err(e) => {
            tracing::warn!(table = %store.location(), error = %e, "the source did not open: expiring without regard to its pending commits (a commit pending now and older than the oldest snapshot kept would never be mirrored)");
            return Ok(None);
        }
    };
    let Some(pending) = source.oldest_pending() else {
        return Ok(None);
    };
    let before = |c: &String| source.order(c, &pending) == std::cmp::Ordering::Less;
    let snapshots = mirror.view().snapshots;
    let newest_before = snapshots
        .iter()
        .filter(|s| s.source_commit.as_ref().is_some_and(before))
        .max_by_key(|s| s.sequence_number);
    Ok(newest_before.map(|s| HeldBack {
        pending: pending.clone(),
        snapshot_id: s.snapshot_id,
    }))
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
