//! Checkpoints of xlake's log, written by deltalake-core (the classic single-file Parquet
//! checkpoint and `_last_checkpoint`) from the log xlake wrote. A checkpoint only saves
//! readers work: one that fails is reported as a warning, never undoes a version.

use xlake_storage::TableStore;

use crate::error::Reason;
use crate::source::{register_log_store, table_url};

/// Write the checkpoint of `version`.
pub(super) async fn write(store: &TableStore, version: u64) {
    if let Err(reason) = try_write(store, version).await {
        tracing::warn!(table = %store.location(), version, %reason, "no Delta checkpoint written");
    }
}

async fn try_write(store: &TableStore, version: u64) -> Result<(), Reason> {
    let url = table_url(store.location())?;
    register_log_store(&url);
    let table = deltalake_core::DeltaTableBuilder::from_url(url.clone())
        .map_err(Reason::library)?
        .with_storage_backend(store.object_store(), url)
        .with_version(version as i64)
        .load()
        .await
        .map_err(Reason::library)?;
    deltalake_core::checkpoints::create_checkpoint(&table, None)
        .await
        .map_err(Reason::library)
}
