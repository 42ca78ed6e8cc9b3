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
}

/// Expire what `retention` says (and what the source deleted) in the `target` named
/// (Iceberg when `None`), then point the catalog entry, if any, at the version the expiry
/// published.
pub async fn expire(
    store: &TableStore,
    retention: &Retention,
    catalog: Option<&CatalogTarget>,
    target: Option<&str>,
) -> Result<Expiry, SyncError> {
    let expired = open(store, target)?.expire(retention).await?;
    let catalog = match catalog {
        Some(target) => crate::catalog::point(store, target).await?,
        None => None,
    };
    Ok(Expiry { expired, catalog })
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
