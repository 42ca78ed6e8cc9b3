//! `xlake expire`: snapshots referencing files the source deleted are expired, so Iceberg
//! time travel never reaches a missing file; syncing goes on afterwards.
use crate::common;

use std::process::Command;

use xlake_iceberg::{IcebergTable, Retention};
use xlake_storage::TableStore;
use xlake_sync::{check, sync, SyncOptions};

/// The manifest list of every snapshot, oldest first.
async fn manifest_lists(table: &IcebergTable) -> Vec<String> {
    let m = table.load().await.unwrap().unwrap().metadata;
    let mut snapshots: Vec<_> = m.snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots
        .iter()
        .map(|s| s.manifest_list().to_string())
        .collect()
}

/// No retained snapshot reads a data file that is not in storage.
async fn assert_retained_files_exist(table: &IcebergTable) {
    let m = table.load().await.unwrap().unwrap().metadata;
    for s in m.snapshots() {
        for (path, _) in table.files_at(&m, s.snapshot_id()).await.unwrap().unwrap() {
            assert!(
                std::path::Path::new(&path).exists(),
                "snapshot {} reads the missing file {path}",
                s.snapshot_id()
            );
        }
    }
}

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
    let table = IcebergTable::new(TableStore::open(t).unwrap());
    let first_list = manifest_lists(&table).await[0].clone();
    let out = Command::new(xlake).args(["expire", t]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 snapshots expired"),
        "{stdout}"
    );
    assert_retained_files_exist(&table).await;
    // The expired snapshot's own metadata files are gone with it.
    assert!(!std::path::Path::new(&first_list).exists(), "{first_list}");
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

#[tokio::test]
async fn files_a_hudi_cleaner_deleted_expire_the_snapshots_that_read_them() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let t = root.to_str().unwrap();
    let instants = common::hudi::data_instants(&root);
    sync(t, &SyncOptions::default(), |_| {}).await.unwrap();
    // The cleaner deletes the base files of the first instant (all replaced since).
    let mut cleaned = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        for f in std::fs::read_dir(&dir).into_iter().flatten() {
            let f = f.unwrap().path();
            if f.to_str()
                .unwrap()
                .ends_with(&format!("_{}.parquet", instants[0].0))
            {
                std::fs::remove_file(f).unwrap();
                cleaned += 1;
            }
        }
    }
    assert!(cleaned > 0);
    let table = IcebergTable::new(TableStore::open(t).unwrap());
    let expired = table.expire(&Retention::default()).await.unwrap();
    assert!(!expired.snapshots.is_empty());
    assert_retained_files_exist(&table).await;
    let report = check(t, &SyncOptions::default(), true).await.unwrap();
    assert!(
        report.consistent() && report.before_mirroring == expired.snapshots.len(),
        "{report:?}"
    );
}

#[tokio::test]
async fn count_and_age_limits_expire_the_oldest_snapshots_and_never_the_current() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = root.to_str().unwrap();
    sync(t, &SyncOptions::default(), |_| {}).await.unwrap();
    let table = IcebergTable::new(TableStore::open(t).unwrap());
    let lists = manifest_lists(&table).await;
    let kept = table
        .expire(&Retention {
            keep_snapshots: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(kept.snapshots.len(), 1);
    assert!(kept.deleted_files.contains(&lists[0]), "{kept:?}");
    assert_eq!(manifest_lists(&table).await, lists[1..]);
    // Ages count from the source commit times: as of the newest commit, with no age
    // allowed, only the current snapshot stays.
    let newest = table.ancestry().await.unwrap().pop().unwrap().1;
    let aged = table
        .expire(&Retention {
            max_age_ms: Some(0),
            now_ms: newest,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(aged.snapshots.len(), 1);
    assert_eq!(manifest_lists(&table).await, lists[2..]);
    for limit in [["--keep-snapshots", "0"], ["--max-snapshot-age", "0s"]] {
        let (code, out) = common::xlake(&["expire", t, limit[0], limit[1]]);
        assert!(code == 0 && out.contains("0 snapshots expired"), "{out}");
    }
    // Expired commits are not mirrored again, and the checker counts them as expired.
    let again = sync(t, &SyncOptions::default(), |_| {}).await.unwrap();
    assert!(again.written.is_empty());
    let report = check(t, &SyncOptions::default(), true).await.unwrap();
    assert!(
        report.consistent() && report.before_mirroring == 2,
        "{report:?}"
    );
    // pyiceberg-style readers see a table whose every file exists.
    assert_retained_files_exist(&table).await;
}
