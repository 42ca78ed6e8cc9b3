//! The catalog entry of a mirrored table (`--catalog`, `--catalog-table`): checked before
//! anything is published (a foreign entry or an unreachable catalog stops the sync with
//! `metadata/` untouched), moved to the current `vN.metadata.json` after the hint, and
//! moved again by the next sync when a crash or a failed call left it behind.

use async_trait::async_trait;
use serde::Serialize;
use xlake_catalog::pointer::{metadata_location, our_version, written_version, TableError};
use xlake_catalog::{
    Advanced, Catalog, CatalogError, CatalogTarget, History, TableIdent, TableRoot,
};
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

    /// Before publishing: the catalog answers and the entry, if any, is this table's (and,
    /// in a catalog that moves by commit, holds no other writer's commit).
    pub(crate) async fn precheck(&self, store: &TableStore) -> Result<(), SyncError> {
        let here = Here(store);
        match xlake_catalog::precheck(self.catalog.as_ref(), &self.ident, &here, None).await {
            Ok(_) => Ok(()),
            // Name the table's current version in the refusal (read only then; a table that
            // cannot be loaded is named by its metadata folder, as the catalog crate did).
            Err(CatalogError::Diverged {
                catalog,
                table,
                found,
                expected,
                reason,
            }) => {
                let loaded = match targets::open_default(store) {
                    Ok(mut target) => target.load(Read::ForCommit).await.ok().flatten(),
                    Err(_) => None,
                };
                let expected = match loaded {
                    Some(l) => metadata_location(store.location(), l.version),
                    None => expected,
                };
                Err(CatalogError::Diverged {
                    catalog,
                    table,
                    found,
                    expected,
                    reason,
                }
                .into())
            }
            Err(e) => Err(e.into()),
        }
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
            store,
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
    store: &'a TableStore,
    uuid: String,
}

#[async_trait]
impl History for Folder<'_> {
    async fn holds(&self, version: u64) -> Result<bool, TableError> {
        let location = metadata_location(self.store.location(), version);
        let found = self.target.identify(file_name(&location), &self.uuid).await;
        Ok(found.map_err(|e| -> TableError { Box::new(e) })? == Identified::Ours)
    }

    async fn metadata(&self, version: u64) -> Result<serde_json::Value, TableError> {
        let location = metadata_location(self.store.location(), version);
        let path = format!("metadata/{}", file_name(&location));
        let bytes = self.store.get(&path).await?;
        Ok(serde_json::from_slice(&bytes)?)
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
    let problem = match (&found, loaded) {
        (None, Some(_)) => Some("no catalog entry: readers cannot find the table by name".into()),
        (None, None) => None,
        (Some(p), loaded) if entry.catalog.moves_by_commit() => {
            committed_problem(&entry, store, p, loaded).await?
        }
        (Some(p), loaded) => problem(store, &p.location, loaded).await?,
    };
    let pointer = found.map(|p| p.location);
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

/// What is wrong with an entry of a catalog that moves by commit (`p`, with the metadata
/// the catalog returned): it is judged by its table and its `main` snapshot, since the
/// server names its own metadata files.
async fn committed_problem(
    at_catalog: &Entry,
    store: &TableStore,
    p: &xlake_catalog::Pointer,
    loaded: Option<&Pointer>,
) -> Result<Option<String>, SyncError> {
    use xlake_catalog::commit::{judge, main_snapshot, position, table_uuid, Position, Refusal};
    let location = &p.location;
    let entry = p.metadata.as_ref().unwrap_or(&serde_json::Value::Null);
    let at = main_snapshot(entry).map_or("no snapshot".into(), |id| format!("snapshot {id}"));
    match judge(entry, |l| store.is_here(l)) {
        Err(Refusal::Elsewhere(l)) => {
            return Ok(Some(format!(
                "the entry points at {location}, a table at {l}, outside this table's folder"
            )))
        }
        Err(Refusal::ForeignSnapshot(id)) => {
            return Ok(Some(format!("the entry points at {location}, whose main is at snapshot {id}, which xlake did not write (another writer committed)")))
        }
        _ => {}
    }
    let Some(loaded) = loaded else {
        return Ok(Some(format!(
            "the entry points at {location} ({at}), but the table has no metadata"
        )));
    };
    let uuid = loaded.uuid.clone();
    if table_uuid(entry).is_none_or(|u| !u.eq_ignore_ascii_case(&uuid)) {
        return Ok(Some(format!(
            "the entry points at {location}, another table (table-uuid {}) than this one ({uuid})",
            table_uuid(entry).unwrap_or("none")
        )));
    }
    let ours = loaded.snapshot_id;
    if main_snapshot(entry) == ours {
        let target = targets::open_default(store)?;
        let folder = Folder {
            target: target.as_ref(),
            store,
            uuid,
        };
        let current = folder.metadata(loaded.version).await;
        let current = current.map_err(|e| {
            SyncError::Catalog(CatalogError::Table {
                catalog: at_catalog.catalog.describe(),
                table: at_catalog.ident.to_string(),
                location: metadata_location(store.location(), loaded.version),
                source: e,
            })
        })?;
        return Ok((position(entry, &current).ok() != Some(Position::Same)).then(|| format!(
            "the entry points at {location}, at the current snapshot but without what v{} published since (an expiry, an upgrade): a sync moves it",
            loaded.version
        )));
    }
    Ok((main_snapshot(entry) != ours).then(|| {
        let want = ours.map_or("no snapshot".into(), |id| format!("snapshot {id}"));
        format!(
            "the entry points at {location} ({at}), not the current v{}'s {want}: readers by name see a stale table",
            loaded.version
        )
    }))
}
