//! Writes the foundation test table (Parquet files of every common type plus six change
//! sets: append, append, overwrite, delete, column added, compaction) into `<dir>/table`,
//! commits it as Iceberg with xlake, and writes `<dir>/expected.json`, the rows every
//! Iceberg reader must return at each source commit. The interop suite reads both.
//!
//! `cargo run --example foundation_table -- /tmp/xlake-foundation`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;
use xlake_test_utils::foundation;

#[tokio::main]
async fn main() {
    let out = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/foundation".into()),
    );
    let root = out.join("table");
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap();
    }
    let expected = foundation::build(&root);
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let committed = table.commit_all(&expected.change_sets).await.unwrap();
    let json = foundation::expected_json(&std::path::absolute(&root).unwrap(), &expected);
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_vec_pretty(&json).unwrap(),
    )
    .unwrap();
    println!(
        "{} snapshots written to {}",
        committed.len(),
        root.display()
    );
}
