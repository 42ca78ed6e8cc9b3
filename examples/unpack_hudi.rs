//! Unpacks a bundled Hudi table (table version 9, copy-on-write, 12 instants: upserts,
//! deletes, an insert_overwrite of a partition and a clustering) into a folder, ready for
//! `xlake sync`:
//!
//! `cargo run --example unpack_hudi -- /tmp/hudi-demo && cargo run -- sync /tmp/hudi-demo`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/hudi-demo".into()),
    );
    let archive = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hudi/sample_table_cow_v9_txns_simple_nometa.zip");
    let scratch = tempfile::tempdir().unwrap();
    zip::ZipArchive::new(std::fs::File::open(archive).unwrap())
        .unwrap()
        .extract(scratch.path())
        .unwrap();
    if out.exists() {
        std::fs::remove_dir_all(&out).unwrap();
    }
    std::fs::rename(scratch.path().join("v9_txns_simple_nometa"), &out)
        .or_else(|_| copy_dir(&scratch.path().join("v9_txns_simple_nometa"), &out))
        .unwrap();
    println!("Hudi table unpacked at {}", out.display());
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
