//! The pointer rules, the same for every catalog kind:
//!
//! - an entry that points outside this table's `metadata/` folder (or at a file there that
//!   is not one of xlake's `vN.metadata.json`) is foreign: refused, never moved;
//! - no entry: register one at the current version (creating the namespace);
//! - an entry at an older `vN` of ours: compare-and-swap it to the current one; a lost race
//!   re-reads and tries again;
//! - an entry at the current or a newer `vN` (another writer got further): left as it is.
//!   The pointer only moves forward. A newer `vN` counts only if it is spelled as xlake
//!   writes it and the table's own folder ([`History`]) holds every version of this table
//!   from the current one up to it, as a writer that got further leaves them; an entry
//!   naming a missing file (the metadata was removed and mirrored afresh), a version past
//!   a gap (a copy of an old one), another table's file or `v01.metadata.json` is behind,
//!   whatever its N, and is moved.
//!
//! "This table's folder" is judged by [`TableRoot`]: the table's storage says which
//! spellings (a symlink, `..`, a `file:` URL) name its root.

use async_trait::async_trait;

use crate::commit::{self, Position, Refusal};
use crate::contract::{Catalog, Committed, Pointer, Swap};
use crate::error::{CatalogError, Result};
use crate::ident::TableIdent;

/// An error of the table's own storage, as [`History`] gives it.
pub use crate::error::TableError;

/// The table's side of the rules, which a catalog cannot know: what its folder holds.
#[async_trait]
pub trait History: Send + Sync {
    /// Whether `vN.metadata.json` (`version`) exists in the table's `metadata/` folder and
    /// is a version of this table (its `table-uuid`).
    async fn holds(&self, version: u64) -> std::result::Result<bool, TableError>;
    /// The table metadata of `vN.metadata.json` (`version`), as JSON: what a catalog that
    /// moves by commit is brought to.
    async fn metadata(&self, version: u64) -> std::result::Result<serde_json::Value, TableError> {
        Err(format!("v{version}.metadata.json: this table's history gives no metadata").into())
    }
}

/// The table's own storage failed ([`History`]) while judging or moving `table`'s entry
/// toward `location`.
fn table_error(
    catalog: &dyn Catalog,
    table: &TableIdent,
    location: &str,
    source: TableError,
) -> CatalogError {
    CatalogError::Table {
        catalog: catalog.describe(),
        table: table.to_string(),
        location: location.to_string(),
        source,
    }
}

/// Attempts before giving up on a pointer that keeps changing under us.
const MAX_ATTEMPTS: usize = 20;

/// What [`advance`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advanced {
    /// Registered a new entry at this location.
    Registered(String),
    /// Moved the entry from the first location to the second.
    Moved(String, String),
    /// The entry already pointed at this version or a newer one (this location).
    Current(String),
}

/// The `metadata/` folder of the table at `table_root` (how messages name it).
pub fn metadata_dir(table_root: &str) -> String {
    format!("{}/metadata/", table_root.trim_end_matches('/'))
}

/// The location of `vN.metadata.json` of the table at `table_root`.
pub fn metadata_location(table_root: &str, version: u64) -> String {
    format!("{}v{version}.metadata.json", metadata_dir(table_root))
}

/// Where the table is, as the pointer rules ask: its root as messages and new entries
/// spell it, and whether another spelling names the same folder. A plain root (`str`)
/// knows only its `file:` URL spellings, which other writers of the catalog may use; the
/// table's storage also knows symlinks and `..` (xlake-storage's `TableStore::is_here`).
pub trait TableRoot: Sync {
    /// The root as given.
    fn root(&self) -> &str;
    /// Whether `location` names this root.
    fn is_here(&self, location: &str) -> bool;
}

impl TableRoot for str {
    fn root(&self) -> &str {
        self
    }

    fn is_here(&self, location: &str) -> bool {
        let tidy = |l: &str| strip_file_scheme(l).trim_end_matches('/').to_string();
        tidy(location) == tidy(self)
    }
}

/// The N of `location` when it is one of this table's `vN.metadata.json`: a file directly
/// in the `metadata/` folder of a root that [`TableRoot::is_here`] takes as the table's.
pub fn our_version<R: TableRoot + ?Sized>(location: &str, table: &R) -> Option<u64> {
    let (root, name) = location.rsplit_once("/metadata/")?;
    if name.contains('/') || !table.is_here(root) {
        return None;
    }
    let n = name.strip_prefix('v')?.strip_suffix(".metadata.json")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// [`our_version`], only when `location` names the file as xlake names it
/// ([`metadata_location`]): `v01.metadata.json` is no version xlake writes.
pub fn written_version<R: TableRoot + ?Sized>(location: &str, table: &R) -> Option<u64> {
    let n = our_version(location, table)?;
    location
        .ends_with(&format!("/metadata/v{n}.metadata.json"))
        .then_some(n)
}

fn strip_file_scheme(location: &str) -> &str {
    if let Some(rest) = location.strip_prefix("file://") {
        rest
    } else if let Some(rest) = location.strip_prefix("file:") {
        rest
    } else {
        location
    }
}

/// The error for an entry that names no version of this table: another table's metadata, or
/// another writer's file in this table's own `metadata/` folder.
fn foreign<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    found: &str,
    table_root: &R,
) -> CatalogError {
    let (catalog, table, found) = (catalog.describe(), table.to_string(), found.to_string());
    let folder = metadata_dir(table_root.root());
    let in_our_folder = found
        .rsplit_once("/metadata/")
        .is_some_and(|(root, name)| !name.contains('/') && table_root.is_here(root));
    if in_our_folder {
        return CatalogError::OtherWriter {
            catalog,
            table,
            found,
            folder,
        };
    }
    CatalogError::Foreign {
        catalog,
        table,
        found,
        expected: folder,
    }
}

/// Before publishing: refuse when the entry exists and is not this table's (or, in a
/// catalog that moves by commit, holds another writer's commit); also proves the catalog is
/// reachable with the credentials given. `current` is the table's current version, if any
/// (named in messages). Returns the entry as found.
pub async fn precheck<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    table_root: &R,
    current: Option<u64>,
) -> Result<Option<Pointer>> {
    let found = catalog.load_pointer(table).await?;
    let Some(p) = &found else {
        return Ok(found);
    };
    if !catalog.moves_by_commit() {
        if our_version(&p.location, table_root).is_none() {
            return Err(foreign(catalog, table, &p.location, table_root));
        }
        return Ok(found);
    }
    let Some(metadata) = &p.metadata else {
        return Err(CatalogError::request(
            &catalog.describe(),
            table,
            format!(
                "the entry at {} came without its table metadata",
                p.location
            ),
        ));
    };
    match commit::judge(metadata, |l| table_root.is_here(l)) {
        Ok(()) => Ok(found),
        Err(refusal) => Err(refused(catalog, table, p, (table_root, current), refusal)),
    }
}

/// The error for an entry a catalog that moves by commit may not move.
fn refused<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    p: &Pointer,
    (table_root, current): (&R, Option<u64>),
    refusal: Refusal,
) -> CatalogError {
    let reason = match refusal {
        Refusal::Elsewhere(location) if !location.is_empty() => {
            return foreign(catalog, table, &location, table_root);
        }
        Refusal::Elsewhere(_) => "a table without a location".to_string(),
        Refusal::ForeignSnapshot(id) => format!(
            "whose current snapshot {id} on main is not one xlake wrote (another writer committed to the table)"
        ),
        Refusal::OtherUuid(uuid) => format!(
            "another table at this location (table-uuid {uuid}; the metadata here was rebuilt since)"
        ),
    };
    CatalogError::Diverged {
        catalog: catalog.describe(),
        table: table.to_string(),
        found: p.location.clone(),
        expected: match current {
            Some(n) => metadata_location(table_root.root(), n),
            None => metadata_dir(table_root.root()),
        },
        reason,
    }
}

/// Whether the entry at `location` is at `version` (the table's current, which the caller
/// has read) or ahead of it along the table's chain: every version after the current one
/// up to the entry's is one `history` holds, as a writer that got further leaves them. A
/// version past a gap (a copy of an old one, a leftover) is behind, whatever its N.
async fn at_or_ahead<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    history: &dyn History,
    location: &str,
    (table_root, version): (&R, u64),
) -> Result<bool> {
    let n = match written_version(location, table_root) {
        Some(n) if n >= version => n,
        _ => return Ok(false),
    };
    for next in version.saturating_add(1)..=n {
        let held = history
            .holds(next)
            .await
            .map_err(|source| table_error(catalog, table, location, source))?;
        if !held {
            tracing::warn!(catalog = %catalog.describe(), table = %table, entry = %location, missing = next, "the entry names no version along this table's chain from the current one; moving it to the current one");
            return Ok(false);
        }
    }
    Ok(true)
}

/// After the hint: make the entry point at `vN` (`version`) of the table at `table_root`,
/// or leave it at a newer one along the chain that `history` holds.
pub async fn advance<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    history: &dyn History,
    table_root: &R,
    version: u64,
) -> Result<Advanced> {
    if catalog.moves_by_commit() {
        return advance_by_commit(catalog, table, history, table_root, version).await;
    }
    let target = metadata_location(table_root.root(), version);
    // What this call changed; after a write, the entry is read once more, so that a
    // catalog without an atomic swap (REST by register) that let an older writer in gets
    // moved again.
    let mut done: Option<Advanced> = None;
    for _ in 0..MAX_ATTEMPTS {
        let swapped = match precheck(catalog, table, table_root, Some(version)).await? {
            None => match catalog.register(table, &target).await? {
                Swap::Done => Advanced::Registered(target.clone()),
                Swap::Lost => continue,
            },
            Some(p) => {
                let here = (table_root, version);
                if at_or_ahead(catalog, table, history, &p.location, here).await? {
                    return Ok(done.unwrap_or(Advanced::Current(p.location)));
                }
                match catalog.swap(table, &p, &target).await? {
                    Swap::Done => Advanced::Moved(p.location, target.clone()),
                    Swap::Lost => continue,
                }
            }
        };
        tracing::info!(catalog = %catalog.describe(), table = %table, done = ?swapped, "catalog pointer written");
        done = Some(match (done, swapped) {
            // Registered, then moved again after an older writer: still registered here.
            (Some(Advanced::Registered(_)), _) => Advanced::Registered(target.clone()),
            (Some(Advanced::Moved(from, _)), _) => Advanced::Moved(from, target.clone()),
            (_, s) => s,
        });
    }
    Err(contended(catalog, table))
}

fn contended(catalog: &dyn Catalog, table: &TableIdent) -> CatalogError {
    CatalogError::Contended {
        catalog: catalog.describe(),
        table: table.to_string(),
        attempts: MAX_ATTEMPTS,
    }
}

/// [`advance`] for a catalog that moves by commit: register `vN` when there is no entry;
/// otherwise commit, with the entry's `main` snapshot as the requirement, what takes it to
/// `vN`'s snapshots, unless it is at `vN`'s snapshot or a newer one of xlake's. A failed
/// requirement (another writer got there first) re-reads and tries again.
async fn advance_by_commit<R: TableRoot + ?Sized>(
    catalog: &dyn Catalog,
    table: &TableIdent,
    history: &dyn History,
    table_root: &R,
    version: u64,
) -> Result<Advanced> {
    let target = metadata_location(table_root.root(), version);
    let ours = history
        .metadata(version)
        .await
        .map_err(|source| table_error(catalog, table, &target, source))?;
    for _ in 0..MAX_ATTEMPTS {
        let Some(p) = precheck(catalog, table, table_root, Some(version)).await? else {
            match catalog.register(table, &target).await? {
                Swap::Done => return Ok(Advanced::Registered(target)),
                Swap::Lost => continue,
            }
        };
        let entry = p.metadata.as_ref().unwrap_or(&serde_json::Value::Null);
        let position = commit::position(entry, &ours)
            .map_err(|r| refused(catalog, table, &p, (table_root, Some(version)), r))?;
        if position != Position::Behind {
            return Ok(Advanced::Current(p.location));
        }
        match catalog.commit(table, &p, &ours).await? {
            Committed::Done(location) => {
                tracing::info!(catalog = %catalog.describe(), table = %table, from = %p.location, to = %location, "catalog entry committed");
                return Ok(Advanced::Moved(p.location, location));
            }
            Committed::Lost => continue,
        }
    }
    Err(contended(catalog, table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_vn_files_are_ours() {
        let root = "/data/t";
        assert_eq!(
            our_version("/data/t/metadata/v12.metadata.json", root),
            Some(12)
        );
        assert_eq!(
            our_version("file:///data/t/metadata/v3.metadata.json", root),
            Some(3)
        );
        assert_eq!(
            our_version("file:/data/t/metadata/v3.metadata.json", root),
            Some(3)
        );
        assert_eq!(
            our_version("/data/t2/metadata/v3.metadata.json", root),
            None
        );
        assert_eq!(
            our_version("/data/t/metadata/00001-x.metadata.json", root),
            None
        );
        assert_eq!(our_version("/data/t/metadata/v.metadata.json", root), None);
        assert_eq!(
            our_version("/data/t/metadata/sub/v1.metadata.json", root),
            None
        );
        assert_eq!(
            our_version("s3://b/t/metadata/v1.metadata.json", "s3://b/t"),
            Some(1)
        );
    }

    #[test]
    fn written_versions_are_spelled_as_xlake_writes_them() {
        let root = "/data/t";
        for (location, n) in [
            ("/data/t/metadata/v12.metadata.json", Some(12)),
            ("file:///data/t/metadata/v3.metadata.json", Some(3)),
            ("file:/data/t/metadata/v3.metadata.json", Some(3)),
            ("/data/t/metadata/v03.metadata.json", None),
            ("/data/t/metadata/v+3.metadata.json", None),
            ("/data/t2/metadata/v3.metadata.json", None),
        ] {
            assert_eq!(written_version(location, root), n, "{location}");
        }
    }
}
