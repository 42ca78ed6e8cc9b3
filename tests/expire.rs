//! `xlake expire`: snapshots referencing files the source deleted are expired, so Iceberg
//! time travel never reaches a missing file; syncing goes on afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;

#[tokio::test]
async fn vacuumed_files_expire_the_snapshots_that_need_them() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = root.to_str().unwrap();
    let xlake = env!("CARGO_BIN_EXE_xlake");
    assert!(Command::new(xlake)
        .args(["sync", t])
        .status()
        .unwrap()
        .success());
    // VACUUM: the files version 1 (a DELETE) removed are gone.
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000001.json")).unwrap();
    let removed: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("remove")?.get("path")?.as_str().map(String::from))
        .collect();
    assert!(!removed.is_empty());
    for p in &removed {
        let _ = std::fs::remove_file(root.join(p));
    }
    let out = Command::new(xlake).args(["expire", t]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 snapshots expired"),
        "{stdout}"
    );
    // Every retained snapshot's files exist.
    let table = IcebergTable::new(TableStore::open(t).unwrap());
    let ancestry = table.ancestry().await.unwrap();
    assert_eq!(ancestry.len(), 2);
    assert!(Command::new(xlake)
        .args(["check", t])
        .status()
        .unwrap()
        .success());
    // Nothing more to expire; and the table keeps syncing in source time.
    let again = Command::new(xlake).args(["expire", t]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 snapshots expired"));
    std::fs::write(
        root.join("_delta_log/00000000000000000003.json"),
        "{\"commitInfo\":{\"timestamp\":1700000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
    )
    .unwrap();
    assert!(Command::new(xlake)
        .args(["sync", t])
        .status()
        .unwrap()
        .success());
    let last = table.ancestry().await.unwrap().pop().unwrap();
    assert_eq!(last.2.unwrap().source_identifier.as_deref(), Some("3"));
    assert!(
        last.1 < 1_800_000_000_000,
        "snapshot time stays the source's, not the wall clock"
    );
}
