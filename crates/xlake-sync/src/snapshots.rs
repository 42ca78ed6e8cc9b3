//! The snapshot list: every Iceberg snapshot of a table, oldest first, and the source
//! commit each one records.

use serde::Serialize;
use xlake_storage::TableStore;
use xlake_target::Read;
pub use xlake_target::SnapshotEntry;

use crate::{targets, SyncError};

/// The snapshots of one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SnapshotList {
    /// Table location.
    pub table: String,
    /// N of the current `vN.metadata.json`; `None`: no Iceberg metadata yet.
    pub version: Option<u64>,
    /// Oldest first (by sequence number).
    pub snapshots: Vec<SnapshotEntry>,
}

/// List the snapshots of the table at `store` (its Iceberg mirror).
pub async fn snapshots(store: TableStore) -> Result<SnapshotList, SyncError> {
    snapshots_of(store, None).await
}

/// List the snapshots of the table's mirror in the `target` format (Iceberg when `None`;
/// a Delta target lists one entry per version).
pub async fn snapshots_of(
    store: TableStore,
    target: Option<&str>,
) -> Result<SnapshotList, SyncError> {
    let mut list = SnapshotList {
        table: store.location().to_string(),
        ..Default::default()
    };
    let options = crate::SyncOptions {
        target: target.map(str::to_string),
        ..Default::default()
    };
    let mut target = targets::open_chosen(&store, &options)?;
    let Some(loaded) = target.load(Read::Whole).await? else {
        return Ok(list);
    };
    list.version = Some(loaded.version);
    list.snapshots = target.view().snapshots;
    Ok(list)
}
