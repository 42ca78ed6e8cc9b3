//! `xlake upgrade`: move a mirror to a newer Iceberg format version on its own, without
//! waiting for the next source commit (a sync with `--format-version` does the same as
//! its first step).
//!
//! The upgrade is one new `vN.metadata.json` with the same snapshots, published through
//! the same put-if-absent commit point as every version; position-delete files stay
//! valid for the snapshots holding them, later deletion vectors are Puffin. A downgrade
//! is refused; a table already at the version is left as it is.

use serde::Serialize;
use xlake_catalog::{Advanced, CatalogTarget};
use xlake_storage::TableStore;
use xlake_target::{FormatChange, TargetOptions};

use crate::{catalog, targets, SyncError};

/// What an upgrade did.
#[derive(Debug, Clone, Serialize)]
pub struct Upgraded {
    /// The format version the table was at.
    pub from: u8,
    /// The format version it is at now.
    pub to: u8,
    /// The `vN` the upgrade published; `None` when the table was already at `to`.
    pub version: Option<u64>,
    /// What was done to the catalog entry, when one was named.
    #[serde(skip)]
    pub catalog: Option<Advanced>,
}

impl From<FormatChange> for Upgraded {
    fn from(change: FormatChange) -> Self {
        Self {
            from: change.from,
            to: change.to,
            version: change.version,
            catalog: None,
        }
    }
}

impl Upgraded {
    /// What the operator is told of an upgrade that happened (`None`: nothing changed).
    pub fn note(&self) -> Option<String> {
        let v = self.version?;
        Some(format!(
            "upgraded the Iceberg table from format version {} to {} in metadata/v{v}.metadata.json; existing position-delete files stay valid for the snapshots that hold them, new deletion vectors are written as Puffin deletion vectors",
            self.from, self.to
        ))
    }
}

/// Upgrade the mirror in `store` to format version `to`. A table with no metadata yet is
/// an error (the first sync with `--format-version` writes that version).
pub async fn upgrade(
    store: &TableStore,
    to: u8,
    target: Option<&CatalogTarget>,
) -> Result<Upgraded, SyncError> {
    let options = TargetOptions {
        format_version: Some(to),
        ..TargetOptions::default()
    };
    let mut table = targets::open_with(store, &options)?;
    let entry = match target {
        Some(t) => {
            let entry = catalog::Entry::open(t)?;
            entry.precheck(store).await?;
            Some(entry)
        }
        None => None,
    };
    let mut done = Upgraded::from(table.upgrade().await?);
    if let Some(entry) = entry {
        done.catalog = entry.advance(store).await?;
    }
    Ok(done)
}
