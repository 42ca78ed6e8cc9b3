//! Fixtures shared by xlake's tests: the integration suite (`tests/it`), the
//! `foundation_table` example, and any crate's unit tests (as a dev-dependency).
//!
//! | module | holds |
//! |---|---|
//! | [`hudi`] | the Hudi sample tables of `tests/data/hudi`, extracted; their instants from file names |
//! | [`delta`] | the Delta sample tables of `tests/data/delta`, extracted; commits set aside and put back |
//! | [`foundation`] | the foundation table: Parquet files of every common type, its change sets, its expected rows |
//! | [`readback`] | what xlake wrote, read back with iceberg-rust's own parsers (independent of xlake-iceberg) |
//! | [`change_set`] | a change set of named files, for replay logic tested without a store |
//!
//! Helpers panic on a broken fixture: they are test code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

pub mod delta;
pub mod foundation;
pub mod hudi;
pub mod readback;

/// A change set of commit `id` adding and removing the files named (1 byte, no row
/// count, unpartitioned, empty schema): what replay logic is tested with.
pub fn change_set(id: &str, added: &[&str], removed: &[&str]) -> xlake_model::ChangeSet {
    use xlake_model::{ChangeSet, DataFile, PartitionSpec, Schema, SourceCommit, SourceFormat};
    let commit = SourceCommit {
        format: SourceFormat::new("TEST"),
        id: id.into(),
        action: "commit".into(),
        requested_ms: None,
        commit_time_ms: 0,
    };
    let mut c = ChangeSet::new(commit, Schema::default(), PartitionSpec::unpartitioned());
    c.added = added
        .iter()
        .map(|p| DataFile::parquet(*p, 1, None))
        .collect();
    c.removed = removed.iter().map(|p| p.to_string()).collect();
    c
}

/// A listing of the commits `ids`, in that order (no times, nothing retained before).
pub fn listing(ids: &[&str]) -> xlake_model::CommitListing {
    use xlake_model::{CommitListing, ListedCommit};
    CommitListing {
        commits: ids
            .iter()
            .map(|id| ListedCommit {
                id: id.to_string(),
                time_ms: 0,
            })
            .collect(),
        ..Default::default()
    }
}

/// The repository's `tests/data` folder (the fixture archives).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// Every file under `<root>/metadata` with its bytes, to prove a failed sync changed nothing.
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
