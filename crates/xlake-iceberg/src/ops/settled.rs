//! The settled record, `metadata/xlake-settled.json` ([`SETTLED`]): what the last sync that
//! left nothing pending found (see [`xlake_target::Settled`]), kept beside the hint so that
//! the scheduled job's next pass over an unchanged table need not read `vN.metadata.json`.
//!
//! It is a cache, never trusted over the metadata: it is given back only when the hint
//! names its version exactly, no `v(N+1)` exists (a writer that died before its hint),
//! and it was written for this location (a copied folder's record is another place's).
//! Text that does not parse is no record. It is written after a sync that ended with
//! nothing pending, replaced by the next such sync, and deleted before a history's first
//! version is published (a history started afresh reuses the numbers). Readers of the
//! table never look at it; cleanup leaves it; a rebuild's record is written afresh by its
//! own sync.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use xlake_storage::{StorageError, TableStore};
use xlake_target::Settled;

use crate::error::{IcebergError, Result};
use crate::spec::layout::{metadata_file, parse_hint, SETTLED, VERSION_HINT};

/// The file's contents: the record, and the location it was written for.
#[derive(Serialize, Deserialize)]
struct Record {
    location: String,
    #[serde(flatten)]
    settled: Settled,
}

/// Write `settled` as the table's record, replacing the one there.
pub(crate) async fn write(store: &TableStore, settled: &Settled) -> Result<()> {
    let record = Record {
        location: store.location().to_string(),
        settled: settled.clone(),
    };
    let text = serde_json::to_vec(&record).map_err(|e| IcebergError::CorruptMetadata {
        table: store.location().to_string(),
        file: store.absolute(SETTLED),
        reason: e.to_string().into(),
    })?;
    store.put(SETTLED, Bytes::from(text)).await?;
    Ok(())
}

/// The table's record, if it is proven to be of the current version (see the module
/// docs); `None` otherwise. A storage error other than a missing file is an error.
pub(crate) async fn read(store: &TableStore) -> Result<Option<Settled>> {
    let (hint, record) = futures::join!(small(store, VERSION_HINT), small(store, SETTLED));
    let (Some(hint), Some(record)) = (hint?, record?) else {
        return Ok(None);
    };
    let Ok(hint) = parse_hint(&hint) else {
        return Ok(None);
    };
    let Ok(record) = serde_json::from_slice::<Record>(&record) else {
        return Ok(None);
    };
    let version = record.settled.version;
    if !hint.names_exactly(version) || !store.is_here(&record.location) {
        return Ok(None);
    }
    if store
        .size_small(&metadata_file(version + 1))
        .await?
        .is_some()
    {
        return Ok(None);
    }
    Ok(Some(record.settled))
}

/// A small file's bytes, `None` when it does not exist.
async fn small(store: &TableStore, path: &str) -> Result<Option<Bytes>> {
    match store.get_small(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
