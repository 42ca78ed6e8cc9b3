//! The catalog entry of a mirrored table (`--catalog`, `--catalog-table`): checked before
//! anything is published (a foreign entry or an unreachable catalog stops the sync with
//! `metadata/` untouched), moved to the current `vN.metadata.json` after the hint, and
//! moved again by the next sync when a crash or a failed call left it behind.

use async_trait::async_trait;
use serde::Serialize;
use xlake_catalog::pointer::{metadata_location, our_version, written_version, TableError};
use xlake_catalog::{Advanced, Catalog, CatalogTarget, History, TableIdent, TableRoot};
use xlake_storage::TableStore;
use xlake_target::{Identified, Pointer, Read, TableTarget};

use crate::{targets, SyncError};

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
        xlake_catalog::precheck(self.catalog.as_ref(), &self.ident, &Here(store)).await?;
        Ok(())
    }

    /// After publishing: point the entry at the current version (writing a stale hint
    /// first, so the pointer never leads the hint). `None` when the table has no Iceberg
    /// metadata yet.
    pub(crate) async fn advance(&self, store: &TableStore) -> Result<Option<Advanced>, SyncError> {
        let mut target = targets::open_default(store)?;
        // Only the version and the hint are needed: no old snapshot is parsed.
        if target.load(Read::ForCommit).await?.is_none() {
            return Ok(None);
        }
        target.prepare().await?;
        let Some(pointer) = target.pointer() else {
            return Ok(None);
        };
        let history = Folder {
            target: target.as_ref(),
            root: store.location(),
            uuid: pointer.uuid,
        };
        let done = xlake_catalog::advance(
            self.catalog.as_ref(),
            &self.ident,
            &history,
            &Here(store),
            pointer.version,
        )
        .await?;
        Ok(Some(done))
    }
}

/// The table's root, as the pointer rules ask about it: spellings of the same folder (a
/// symlink, `..`, a `file:` URL) are this table, as everywhere else in xlake.
struct Here<'a>(&'a TableStore);

impl TableRoot for Here<'_> {
    fn root(&self) -> &str {
        self.0.location()
    }

    fn is_here(&self, location: &str) -> bool {
        self.0.is_here(location)
    }
}

/// The table's metadata folder, as the pointer rules ask about it: which versions of
/// this table (`uuid`) it holds, as its target identifies them.
struct Folder<'a> {
    target: &'a dyn TableTarget,
    root: &'a str,
    uuid: String,
}

#[async_trait]
impl History for Folder<'_> {
    async fn holds(&self, version: u64) -> Result<bool, TableError> {
        let location = metadata_location(self.root, version);
        let found = self.target.identify(file_name(&location), &self.uuid).await;
        Ok(found.map_err(|e| -> TableError { Box::new(e) })? == Identified::Ours)
    }
}

/// The last part of a location (a file's name).
fn file_name(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
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

/// The entry of `target` against the table's current version (`loaded`).
pub(crate) async fn state(
    store: &TableStore,
    target: &CatalogTarget,
    loaded: Option<&Pointer>,
) -> Result<CatalogState, SyncError> {
    let entry = Entry::open(target)?;
    let found = entry.catalog.load_pointer(&entry.ident).await?;
    let root = store.location();
    let pointer = found.map(|p| p.location);
    let problem = match (&pointer, loaded) {
        (None, Some(_)) => Some("no catalog entry: readers cannot find the table by name".into()),
        (None, None) => None,
        (Some(p), loaded) => problem(store, p, loaded).await?,
    };
    Ok(CatalogState {
        catalog: entry.catalog.describe(),
        table: entry.ident.to_string(),
        pointer,
        expected: loaded.map(|l| metadata_location(root, l.version)),
        problem,
    })
}

/// What is wrong with an entry pointing at `p`, the table's current version being
/// `loaded`'s.
async fn problem(
    store: &TableStore,
    p: &str,
    loaded: Option<&Pointer>,
) -> Result<Option<String>, SyncError> {
    let Some(n) = our_version(p, &Here(store)) else {
        return Ok(Some(format!(
            "the entry points at {p}, outside this table's metadata folder"
        )));
    };
    let Some(loaded) = loaded else {
        return Ok(Some(format!(
            "the entry points at v{n}, not the current v(none): readers by name see a stale table"
        )));
    };
    let written = written_version(p, &Here(store));
    if written == Some(loaded.version) {
        return Ok(None);
    }
    let name = file_name(p);
    let uuid = &loaded.uuid;
    let target = targets::open_default(store)?;
    Ok(Some(match target.identify(name, uuid).await? {
        Identified::Missing => format!("the entry points at {p}, which does not exist: readers by name cannot load the table (a sync moves it)"),
        Identified::Stranger => format!("the entry points at {p}, which is not a version of this table (another table-uuid than {uuid}): readers by name see another table (a sync moves it)"),
        Identified::Ours if written.is_none() => format!("the entry points at {p}, a name xlake does not write; the current is v{}", loaded.version),
        Identified::Ours => format!(
            "the entry points at v{n}, not the current v{}: readers by name see a stale table",
            loaded.version
        ),
    }))
}
