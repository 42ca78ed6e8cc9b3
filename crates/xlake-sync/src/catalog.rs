//! The catalog entry of a mirrored table (`--catalog`, `--catalog-table`): checked before
//! anything is published (a foreign entry or an unreachable catalog stops the sync with
//! `metadata/` untouched), moved to the current `vN.metadata.json` after the hint, and
//! moved again by the next sync when a crash or a failed call left it behind.

use serde::Serialize;
use xlake_catalog::pointer::{metadata_location, our_version};
use xlake_catalog::{Advanced, Catalog, CatalogTarget, TableIdent};
use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;

use crate::SyncError;

/// An opened catalog entry.
pub(crate) struct Entry {
    catalog: Box<dyn Catalog>,
    ident: TableIdent,
}

impl Entry {
    /// Open the entry `target` names.
    pub(crate) fn open(target: &CatalogTarget) -> Result<Self, SyncError> {
        Ok(Self {
            catalog: xlake_catalog::open(target)?,
            ident: target.ident()?,
        })
    }

    /// Before publishing: the catalog answers and the entry, if any, is this table's.
    pub(crate) async fn precheck(&self, store: &TableStore) -> Result<(), SyncError> {
        xlake_catalog::precheck(self.catalog.as_ref(), &self.ident, store.location()).await?;
        Ok(())
    }

    /// After publishing: point the entry at the current version (writing a stale hint
    /// first, so the pointer never leads the hint). `None` when the table has no Iceberg
    /// metadata yet.
    pub(crate) async fn advance(&self, store: &TableStore) -> Result<Option<Advanced>, SyncError> {
        let table = IcebergTable::new(store.clone());
        // Only the version and the hint are needed: no old snapshot is parsed.
        let Some(mut loaded) = table.load_for_commit().await? else {
            return Ok(None);
        };
        table.heal_hint(&mut loaded).await?;
        let done = xlake_catalog::advance(
            self.catalog.as_ref(),
            &self.ident,
            store.location(),
            loaded.version,
        )
        .await?;
        Ok(Some(done))
    }
}

/// Point the catalog entry `target` names at the current version of the table in `store`
/// (after an operation that published a version without a sync, such as an expiry).
pub async fn point(
    store: &TableStore,
    target: &CatalogTarget,
) -> Result<Option<Advanced>, SyncError> {
    Entry::open(target)?.advance(store).await
}

/// What `check` found in the catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CatalogState {
    /// The catalog (URI without credentials, and its name).
    pub catalog: String,
    /// `namespace.table`.
    pub table: String,
    /// Where the entry points; `None`: no entry.
    pub pointer: Option<String>,
    /// The current `vN.metadata.json`, where it should point.
    pub expected: Option<String>,
    /// What is wrong, if anything.
    pub problem: Option<String>,
}

/// The entry of `target` against the table's current `version`.
pub(crate) async fn state(
    store: &TableStore,
    target: &CatalogTarget,
    version: Option<u64>,
) -> Result<CatalogState, SyncError> {
    let entry = Entry::open(target)?;
    let found = entry.catalog.load_pointer(&entry.ident).await?;
    let root = store.location();
    let expected = version.map(|v| metadata_location(root, v));
    let pointer = found.map(|p| p.location);
    let problem = match (&pointer, version) {
        (None, Some(_)) => Some("no catalog entry: readers cannot find the table by name".into()),
        (None, None) => None,
        (Some(p), v) => match our_version(p, root) {
            None => Some(format!(
                "the entry points at {p}, outside this table's metadata folder"
            )),
            Some(n) if Some(n) != v => Some(format!(
                "the entry points at v{n}, not the current v{}: readers by name see a stale table",
                v.map_or("(none)".into(), |v| v.to_string())
            )),
            Some(_) => None,
        },
    };
    Ok(CatalogState {
        catalog: entry.catalog.describe(),
        table: entry.ident.to_string(),
        pointer,
        expected,
        problem,
    })
}
