//! Hudi fixtures from `tests/data/hudi`, extracted into temp dirs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// Extract `tests/data/hudi/<name>.zip` into a temp dir; returns the dir (keep it alive)
/// and the table root (the one folder inside the archive).
pub fn extract(name: &str) -> (tempfile::TempDir, PathBuf) {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/hudi/{name}.zip"));
    let dir = tempfile::tempdir().unwrap();
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&archive).unwrap()).unwrap();
    zip.extract(dir.path()).unwrap();
    let root = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && !p.ends_with("__MACOSX"))
        .unwrap();
    (dir, root)
}

/// Completed instants whose action gets a snapshot, as (requested time, action), in
/// timeline order — from the file names alone, independent of xlake-hudi.
pub fn data_instants(root: &Path) -> Vec<(String, String)> {
    let (dir, layout2) = if root.join(".hoodie/timeline").is_dir() {
        (root.join(".hoodie/timeline"), true)
    } else {
        (root.join(".hoodie"), false)
    };
    let mut out: Vec<(String, String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let (stem, action) = name.split_once('.')?;
            if !["commit", "deltacommit", "replacecommit", "rollback"].contains(&action) {
                return None;
            }
            let (requested, completed) = if layout2 {
                stem.split_once('_')?
            } else {
                (stem, stem)
            };
            Some((
                completed.to_string(),
                requested.to_string(),
                action.to_string(),
            ))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, r, a)| (r, a)).collect()
}

/// Every file under `metadata/` with its bytes, to prove a failed sync changed nothing.
pub fn metadata_snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let dir = root.join("metadata");
    if !dir.exists() {
        return Vec::new();
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// The live data files (relative to the table root) of every snapshot, keyed by the source
/// commit it mirrors, read straight from the manifests with iceberg-rust's parsers.
pub fn live_files_by_commit(
    root: &Path,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    use iceberg::spec::{FormatVersion, Manifest, ManifestList, TableMetadata};
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let metadata: TableMetadata = serde_json::from_slice(
        &std::fs::read(root.join(format!("metadata/v{hint}.metadata.json"))).unwrap(),
    )
    .unwrap();
    let prefix = format!("{}/", std::path::absolute(root).unwrap().to_str().unwrap());
    metadata
        .snapshots()
        .map(|s| {
            let meta: serde_json::Value =
                serde_json::from_str(&s.summary().additional_properties["XTABLE_METADATA"])
                    .unwrap();
            let list = ManifestList::parse_with_version(
                &std::fs::read(s.manifest_list()).unwrap(),
                FormatVersion::V2,
            )
            .unwrap();
            let files = list
                .entries()
                .iter()
                .flat_map(|m| {
                    let manifest =
                        Manifest::parse_avro(&std::fs::read(&m.manifest_path).unwrap()).unwrap();
                    manifest
                        .entries()
                        .iter()
                        .filter(|e| e.is_alive())
                        .map(|e| e.file_path().strip_prefix(&prefix).unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            (
                meta["sourceIdentifier"].as_str().unwrap().to_string(),
                files,
            )
        })
        .collect()
}

/// The timeline files (requested, inflight, completed) of one instant.
pub fn instant_files(root: &Path, requested: &str) -> Vec<PathBuf> {
    std::fs::read_dir(root.join(".hoodie/timeline"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(requested)
        })
        .collect()
}
