//! Hudi fixtures from `tests/data/hudi`, extracted into temp dirs.

use std::path::{Path, PathBuf};

/// Extract `tests/data/hudi/<name>.zip` into a temp dir; returns the dir (keep it alive)
/// and the table root (the one folder inside the archive).
pub fn extract(name: &str) -> (tempfile::TempDir, PathBuf) {
    let archive = crate::data_dir().join(format!("hudi/{name}.zip"));
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
