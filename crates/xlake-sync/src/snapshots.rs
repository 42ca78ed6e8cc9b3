//! The snapshot list: every Iceberg snapshot of a table, oldest first, and the source
//! commit each one records.

use serde::Serialize;
use xlake_iceberg::summary::iso_instant;
use xlake_iceberg::{IcebergTable, SyncMetadata};
use xlake_storage::TableStore;

use crate::SyncError;

/// One snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotEntry {
    /// Its sequence number.
    pub sequence_number: i64,
    /// Its id.
    pub snapshot_id: i64,
    /// Its parent, if any.
    pub parent_snapshot_id: Option<i64>,
    /// Its time (the source commit's), ms since the epoch.
    pub timestamp_ms: i64,
    /// The same as an ISO-8601 instant.
    pub time: String,
    /// `append`, `overwrite`, `delete` or `replace`.
    pub operation: String,
    /// Whether it is the current snapshot.
    pub current: bool,
    /// `HUDI` or `DELTA`, if the snapshot records a source commit.
    pub source_format: Option<String>,
    /// The source commit it records (Hudi instant, Delta version).
    pub source_commit: Option<String>,
    /// `<id>.<action>` of that commit, when recorded.
    pub source_operation: Option<String>,
}

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

/// List the snapshots of the table at `store`.
pub async fn snapshots(store: TableStore) -> Result<SnapshotList, SyncError> {
    let mut list = SnapshotList {
        table: store.location().to_string(),
        ..Default::default()
    };
    let Some(loaded) = IcebergTable::new(store).load().await? else {
        return Ok(list);
    };
    let m = &loaded.metadata;
    let current = m.current_snapshot().map(|s| s.snapshot_id());
    list.version = Some(loaded.version);
    list.snapshots = m
        .snapshots()
        .map(|s| {
            let sync = SyncMetadata::from_summary(&s.summary().additional_properties);
            SnapshotEntry {
                sequence_number: s.sequence_number(),
                snapshot_id: s.snapshot_id(),
                parent_snapshot_id: s.parent_snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
                time: iso_instant(s.timestamp_ms()),
                operation: s.summary().operation.as_str().to_string(),
                current: current == Some(s.snapshot_id()),
                source_format: sync.as_ref().and_then(|m| m.source_table_format.clone()),
                source_commit: sync.as_ref().and_then(|m| m.source_identifier.clone()),
                source_operation: sync.and_then(|m| m.latest_table_operation_identifier),
            }
        })
        .collect();
    list.snapshots.sort_by_key(|s| s.sequence_number);
    Ok(list)
}
