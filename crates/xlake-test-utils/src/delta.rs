//! Delta fixtures from `tests/data/delta`, extracted into temp dirs.

use std::path::{Path, PathBuf};

/// Every Delta fixture.
pub const ALL: [&str; 14] = [
    "checkpoint-v2-table",
    "checkpoints_vacuumed",
    "column_mapping_id",
    "data-reader-partition-values",
    "delta-0.8.0-null-partition",
    "delta-0.8.0-special-partition",
    "delta-1.2.1-only-struct-stats",
    "evolving_typed_partitions",
    "multi-part-checkpoint",
    "partitioned_3commits",
    "simple_table",
    "table_with_column_mapping",
    "table_with_deletion_logs",
    "time-travel-schema-changes-b",
];

/// Extract `tests/data/delta/<name>.tar.gz`; returns the dir (keep it alive) and the table
/// root (the folder holding `_delta_log`).
pub fn extract(name: &str) -> (tempfile::TempDir, PathBuf) {
    let archive = crate::data_dir().join(format!("delta/{name}.tar.gz"));
    let dir = tempfile::tempdir().unwrap();
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap());
    tar::Archive::new(gz).unpack(dir.path()).unwrap();
    let root = find_log(dir.path()).unwrap_or_else(|| panic!("{name}: no _delta_log"));
    (dir, root)
}

fn find_log(dir: &Path) -> Option<PathBuf> {
    if dir.join("_delta_log").is_dir() {
        return Some(dir.to_path_buf());
    }
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .find_map(|e| find_log(&e.path()))
}

/// Versions with a commit file, from the file names alone.
pub fn commit_versions(root: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(root.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name.strip_suffix(".json")?;
            (stem.len() == 20).then(|| stem.parse().ok()).flatten()
        })
        .collect();
    v.sort();
    v
}

/// Move the commit files of `versions` into `aside`, as if not written yet; returns the
/// moves for [`put_back`].
pub fn set_aside(root: &Path, versions: &[u64], aside: &Path) -> Vec<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(aside).unwrap();
    versions
        .iter()
        .map(|v| {
            let name = format!("{v:020}.json");
            let (from, to) = (root.join("_delta_log").join(&name), aside.join(&name));
            std::fs::rename(&from, &to).unwrap();
            (from, to)
        })
        .collect()
}

/// Undo [`set_aside`]: the commits are written now.
pub fn put_back(moved: Vec<(PathBuf, PathBuf)>) {
    for (home, aside) in moved {
        std::fs::rename(aside, home).unwrap();
    }
}
