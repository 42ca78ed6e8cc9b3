//! `xlake sync --rebuild`: a table folder copied or moved keeps Iceberg metadata that
//! names the old place (every manifest list, manifest and data file by absolute location).
//! Every command that writes or cleans refuses it ([`IcebergError::Relocated`]); a
//! rebuild mirrors the source's history afresh at the new place and only then sets the
//! old metadata aside.
//!
//! The order keeps a valid table at every step: the new history is written as the
//! versions after the old current one (`v(N+1)…`), each published by put-if-absent as any
//! commit is, while the old files stay where they are; once the current version is this
//! place's own, the old versions and the files they name are moved (never deleted) to
//! `metadata.relocated-<UTC time>/` beside `metadata/`. Interrupted before the first new
//! version, nothing changed; after it, the table is an ordinary mirror and a rerun of
//! `sync --rebuild` finishes setting the old files aside.
//!
//! [`IcebergError::Relocated`]: xlake_iceberg::IcebergError::Relocated

use serde::Serialize;
use xlake_iceberg::relocation::{aside_dir, foreign_versions, old_history, set_aside};
use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;

use crate::SyncError;

/// The old history a rebuild set aside.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rebuilt {
    /// The location(s) the old metadata was written for.
    pub old_locations: Vec<String>,
    /// Where its files are now (a folder beside `metadata/`).
    pub set_aside_in: String,
    /// How many files were moved there.
    pub files: usize,
}

/// Once the table's current version is its own, move every version written for another
/// location, and the files it names, aside. `None`: there was nothing to move.
pub(crate) async fn set_aside_old_history(
    store: &TableStore,
) -> Result<Option<Rebuilt>, SyncError> {
    let table = IcebergTable::new(store.clone());
    let fail = |reason: String| SyncError::Rebuild {
        table: store.location().to_string(),
        reason,
    };
    match table.load_as_found().await? {
        Some(l) => {
            if let Some(recorded) = table.recorded_elsewhere(&l) {
                return Err(fail(format!(
                    "no source commit was mirrored here, so the metadata written for {recorded} was left as it is"
                )));
            }
        }
        None => return Ok(None),
    }
    let foreign = foreign_versions(store).await?;
    if foreign.is_empty() {
        return Ok(None);
    }
    let files = old_history(store, &foreign).await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let dir = aside_dir(now_ms);
    let moved = set_aside(store, &files, &dir).await?;
    let mut old_locations: Vec<String> = foreign.into_iter().map(|v| v.recorded).collect();
    old_locations.sort();
    old_locations.dedup();
    tracing::info!(table = %store.location(), aside = %store.absolute(&dir), files = moved.len(), "set the relocated metadata aside");
    Ok(Some(Rebuilt {
        old_locations,
        set_aside_in: store.absolute(&dir),
        files: moved.len(),
    }))
}
