//! Orphan metadata files: manifests, manifest lists and delete files left by attempts that
//! never committed (a lost race, a crash before `vN.metadata.json`). Only files under
//! `metadata/` are ever considered, so data files are never touched; and none while the
//! folder holds metadata written for another location (a copied or moved table).

use std::collections::HashSet;

use xlake_storage::TableStore;

use crate::error::{IcebergError, Result};
use crate::manifest::{read_entries, read_manifest_list};

/// Every file that any `vN.metadata.json` present in `metadata/` references: its manifest
/// lists, their manifests, and the delete files in those.
async fn referenced(store: &TableStore, metadata_files: &[String]) -> Result<HashSet<String>> {
    let corrupt = |file: &str, reason: String| IcebergError::CorruptMetadata {
        table: store.location().to_string(),
        file: file.to_string(),
        reason,
    };
    let mut lists = HashSet::new();
    for path in metadata_files {
        let bytes = store.get(path).await?;
        let metadata = crate::table::parse_metadata(&bytes).map_err(|e| corrupt(path, e))?;
        // A copied or moved table's versions name the old place: every file here would
        // look unreferenced. Nothing is an orphan until a rebuild sets that history aside.
        if !store.is_here(metadata.location()) {
            return Err(IcebergError::Relocated {
                table: store.location().to_string(),
                file: store.absolute(path),
                recorded: metadata.location().to_string(),
            });
        }
        lists.extend(metadata.snapshots().map(|s| s.manifest_list().to_string()));
    }
    let mut out: HashSet<String> = HashSet::new();
    let mut manifests = HashSet::new();
    for list in &lists {
        for mf in read_manifest_list(store, list)
            .await
            .map_err(|e| corrupt(list, e))?
        {
            if manifests.insert(mf.manifest_path.clone()) {
                for e in read_entries(store, &mf)
                    .await
                    .map_err(|e| corrupt(&mf.manifest_path, e))?
                {
                    out.insert(e.file_path().to_string());
                }
            }
        }
    }
    out.extend(lists);
    out.extend(manifests);
    Ok(out)
}

/// Files under `metadata/` that no retained metadata version references and that were last
/// modified before `cutoff_ms` (ms since the epoch), as table-relative paths. Refuses
/// ([`IcebergError::Relocated`]) while any version there was written for another location.
pub async fn orphan_files(store: &TableStore, cutoff_ms: i64) -> Result<Vec<String>> {
    let listed = store.list_recursive("metadata").await?;
    let is_version = crate::relocation::is_version_file;
    let versions: Vec<String> = listed
        .iter()
        .filter(|e| is_version(&e.path))
        .map(|e| e.path.clone())
        .collect();
    if versions.is_empty() {
        return Ok(Vec::new());
    }
    let keep = referenced(store, &versions).await?;
    Ok(listed
        .into_iter()
        .filter(|e| !is_version(&e.path) && !e.path.ends_with("version-hint.text"))
        .filter(|e| e.modified_ms < cutoff_ms && !keep.contains(&store.absolute(&e.path)))
        .map(|e| e.path)
        .collect())
}
