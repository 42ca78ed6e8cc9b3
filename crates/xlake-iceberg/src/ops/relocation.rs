//! A copied or moved table: Iceberg metadata names files by absolute location, so after
//! the folder moves every `vN.metadata.json` in `metadata/` still points at the old place.
//! This module finds those versions, the files of that old history found here under the
//! same names (manifest lists, manifests, delete files), and sets them aside in a sibling
//! folder once a rebuild has written a new history: they are moved, never deleted.

use chrono::DateTime;
use xlake_storage::TableStore;

use crate::error::{IcebergError, Result};
use crate::spec::decode::parse_metadata;
use crate::spec::error::CodecError;
use crate::spec::layout::{version_of, METADATA_DIR};
use crate::spec::manifest::read_entries;
use crate::spec::manifest_list::read_manifest_list;
use iceberg::spec::ManifestContentType;

/// A `vN.metadata.json` in `metadata/` written for another location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignVersion {
    /// Table-relative path of the file.
    pub file: String,
    /// The location its metadata records.
    pub recorded: String,
}

/// Whether a table-relative path is a `vN.metadata.json`.
pub(crate) fn is_version_file(path: &str) -> bool {
    version_of(path).is_some()
}

/// Every `vN.metadata.json` directly in `metadata/` whose location is not this table's.
pub async fn foreign_versions(store: &TableStore) -> Result<Vec<ForeignVersion>> {
    let mut out = Vec::new();
    for entry in store.list_dir(METADATA_DIR).await? {
        if !is_version_file(&entry.path) {
            continue;
        }
        let bytes = store.get(&entry.path).await?;
        let metadata = parse_metadata(&bytes).map_err(|e| corrupt(store, &entry.path, e))?;
        if !store.is_here(metadata.location()) {
            out.push(ForeignVersion {
                file: entry.path,
                recorded: metadata.location().to_string(),
            });
        }
    }
    Ok(out)
}

/// The files of the old history present here, table-relative: the foreign versions
/// themselves and, under `metadata/`, the manifest lists, manifests and delete files
/// their snapshots name, and the path indexes they name (each named at the old location, found here by its path relative
/// to that location). Data files are the source's and never listed. In an order safe to
/// move them in: a file comes before every file that names it (delete files, manifests,
/// manifest lists, versions), so a rerun after an interruption finds the rest again.
pub async fn old_history(store: &TableStore, foreign: &[ForeignVersion]) -> Result<Vec<String>> {
    use std::collections::BTreeSet;
    let (mut deletes, mut manifests, mut lists) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut indexes: Vec<String> = Vec::new();
    for version in foreign {
        let bytes = store.get(&version.file).await?;
        let metadata = parse_metadata(&bytes).map_err(|e| corrupt(store, &version.file, e))?;
        let here = |path: &str| -> Option<String> {
            let rest = path.strip_prefix(version.recorded.trim_end_matches('/'))?;
            let rel = rest.trim_start_matches('/');
            rel.starts_with(&format!("{METADATA_DIR}/"))
                .then(|| rel.to_string())
        };
        // Its path index (named table-relative; see crate::path_index): the segments it
        // builds on, then its head, before the versions that name it.
        for index in crate::path_index::path_index_files(store, &metadata)
            .await?
            .into_iter()
            .rev()
        {
            if !indexes.contains(&index) {
                indexes.push(index);
            }
        }
        for snapshot in metadata.snapshots() {
            let Some(list) = here(snapshot.manifest_list()) else {
                continue;
            };
            if lists.contains(&list) || store.size(&list).await?.is_none() {
                continue;
            }
            let listed = read_manifest_list(store, &list)
                .await
                .map_err(|e| corrupt(store, &list, e))?;
            lists.insert(list);
            for mut mf in listed {
                let Some(path) = here(&mf.manifest_path) else {
                    continue;
                };
                if manifests.contains(&path) || store.size(&path).await?.is_none() {
                    continue;
                }
                if mf.content == ManifestContentType::Deletes {
                    mf.manifest_path = path.clone();
                    let entries = read_entries(store, &mf)
                        .await
                        .map_err(|e| corrupt(store, &path, e))?;
                    deletes.extend(entries.iter().filter_map(|e| here(e.file_path())));
                }
                manifests.insert(path);
            }
        }
    }
    let versions = foreign.iter().map(|v| v.file.clone());
    Ok(indexes
        .into_iter()
        .chain(deletes)
        .chain(manifests)
        .chain(lists)
        .chain(versions)
        .collect())
}

/// Where a rebuild at `now_ms` sets the old history aside: `metadata.relocated-<UTC time>`
/// beside `metadata/`.
pub fn aside_dir(now_ms: i64) -> String {
    let stamp = DateTime::from_timestamp_millis(now_ms).map_or_else(
        || now_ms.to_string(),
        |t| t.format("%Y%m%dT%H%M%SZ").to_string(),
    );
    format!("{METADATA_DIR}.relocated-{stamp}")
}

/// Move `files` (table-relative, under `metadata/`) into `dir`, keeping their names below
/// `metadata/`, in order. A file already gone (moved by a concurrent rebuild) is skipped.
/// Returns the files moved.
pub async fn set_aside(store: &TableStore, files: &[String], dir: &str) -> Result<Vec<String>> {
    let mut moved = Vec::new();
    for file in files {
        let rest = file
            .strip_prefix(&format!("{METADATA_DIR}/"))
            .unwrap_or(file.as_str());
        match store.rename(file, &format!("{dir}/{rest}")).await {
            Ok(()) => moved.push(file.clone()),
            Err(xlake_storage::StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(moved)
}

fn corrupt(store: &TableStore, file: &str, reason: impl Into<CodecError>) -> IcebergError {
    IcebergError::CorruptMetadata {
        table: store.location().to_string(),
        file: store.absolute(file),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_files_and_aside_names() {
        assert!(is_version_file("metadata/v12.metadata.json"));
        assert!(!is_version_file("metadata/v.metadata.json"));
        assert!(!is_version_file("metadata/snap-1-1-x.avro"));
        assert_eq!(
            aside_dir(1_764_602_278_000),
            "metadata.relocated-20251201T151758Z"
        );
    }
}
