//! `xlake expire`: snapshots referencing files the source deleted are expired, so Iceberg
//! time travel never reaches a missing file; syncing goes on afterwards.
use crate::common;

use std::path::Path;
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

/// The live delete files of every snapshot, by the Delta version it mirrors.
async fn delete_files(
    table: &IcebergTable,
    version: iceberg::spec::FormatVersion,
) -> std::collections::BTreeMap<u64, Vec<String>> {
    use iceberg::spec::{Manifest, ManifestContentType, ManifestList};
    let mut out = std::collections::BTreeMap::new();
    for (id, _, meta) in table.ancestry().await.unwrap() {
        let m = table.load().await.unwrap().unwrap().metadata;
        let snapshot = m.snapshot_by_id(id).unwrap();
        let list = std::fs::read(snapshot.manifest_list()).unwrap();
        let list = ManifestList::parse_with_version(&list, version).unwrap();
        let mut files = Vec::new();
        for mf in list.entries() {
            if mf.content != ManifestContentType::Deletes {
                continue;
            }
            let manifest = Manifest::parse_avro(&std::fs::read(&mf.manifest_path).unwrap());
            for e in manifest.unwrap().entries().iter().filter(|e| e.is_alive()) {
                files.push(e.data_file().file_path().to_string());
            }
        }
        let v: u64 = meta.unwrap().source_identifier.unwrap().parse().unwrap();
        out.insert(v, files);
    }
    out
}

/// A deletion vector fixture (`table_with_deletion_logs`: version 3's vector 8e4ca8be…
/// is replaced by version 4's, a2084964…, live since) with a vector file removed.
fn vacuumed_fixture(vector: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let (dir, root) = common::delta::extract("table_with_deletion_logs");
    let t = root.to_str().unwrap().to_string();
    std::fs::remove_file(root.join(format!("deletion_vector_{vector}.bin"))).unwrap();
    (dir, root, t)
}

const REPLACED: &str = "8e4ca8be-7615-43cf-bc06-5d131148683f";
const LIVE: &str = "a2084964-69d4-4e1e-95f5-9bbd6571d5c3";

/// Issue 41: a first sync after `VACUUM … RETAIN 0 HOURS` deleted the vector of version 3
/// (replaced by version 4's) mirrors every version: version 3's snapshot names the gone
/// vector where Delta kept it, so readers of it fail on the missing file (as Delta's own
/// readers of version 3 do) instead of showing its deleted row, and says so in
/// `xlake.degraded`; the versions after it are exact. `expire` then drops the snapshots up
/// to it, as for a vacuumed data file, and deletes nothing outside `metadata/`. Rows at
/// every version: tests/interop/test_iceberg_v3.py.
#[tokio::test]
async fn a_vector_vacuumed_before_the_first_sync_is_named_and_then_expired() {
    use iceberg::spec::FormatVersion;
    for (format_version, v) in [(None, FormatVersion::V2), (Some(3), FormatVersion::V3)] {
        let (_dir, root, t) = vacuumed_fixture(REPLACED);
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        let report = sync(&t, &options, |_| {}).await.unwrap();
        assert_eq!(report.written.len(), 21, "{v:?}");
        assert!(
            report.degraded.len() == 1
                && report.degraded[0].contains(&format!("deletion_vector_{REPLACED}.bin"))
                && report.degraded[0].contains("cannot be read")
                && report.degraded[0].ends_with("(from commit 3)"),
            "{v:?}: {:?}",
            report.degraded
        );
        let table = IcebergTable::new(TableStore::open(&t).unwrap());
        let deletes = delete_files(&table, v).await;
        let gone = root.join(format!("deletion_vector_{REPLACED}.bin"));
        assert_eq!(deletes[&3], [gone.to_str().unwrap()], "{v:?}");
        for (version, files) in deletes.range(4..) {
            assert!(
                files.len() == 1 && files[0].contains("/metadata/"),
                "{v:?} {version}: {files:?}"
            );
        }
        assert!(check(&t, &options, true).await.unwrap().consistent());
        // The snapshot naming the gone vector, and those before it, expire; nothing of
        // the source is deleted.
        let before: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
        let expired = table.expire(&Retention::default()).await.unwrap();
        assert_eq!(expired.snapshots.len(), 4, "{v:?}: {expired:?}");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), before.len());
        assert!(root.join(format!("deletion_vector_{LIVE}.bin")).exists());
        let kept = delete_files(&table, v).await;
        assert_eq!(kept.keys().next(), Some(&4), "{v:?}");
        assert!(kept.values().flatten().all(|f| Path::new(f).exists()));
        let report = check(&t, &options, true).await.unwrap();
        assert!(
            report.consistent() && report.before_mirroring == 4,
            "{report:?}"
        );
    }
}

/// The current version stays exact: a vector gone whose data file no later version
/// removes (Delta's own readers need it) stops the sync at its version, after the
/// versions before it are mirrored, naming the vector and its data file.
#[tokio::test]
async fn a_live_vector_gone_stops_the_sync_at_its_version() {
    for format_version in [None, Some(3)] {
        let (_dir, _root, t) = vacuumed_fixture(LIVE);
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        let e = sync(&t, &options, |_| {}).await.unwrap_err().to_string();
        assert!(
            e.contains(&format!("deletion_vector_{LIVE}.bin"))
                && e.contains("part-00000-cb251d5e")
                && e.contains("does not exist")
                && e.contains("no later source commit removes"),
            "{format_version:?}: {e}"
        );
        let table = IcebergTable::new(TableStore::open(&t).unwrap());
        let mirrored = table.ancestry().await.unwrap();
        assert_eq!(
            mirrored.len(),
            4,
            "{format_version:?}: versions 0-3 mirrored"
        );
    }
}

/// The vector of a commit mirrored before VACUUM deleted it stays readable: xlake copied
/// its rows (v2: a position-delete file; v3: a Puffin blob) into `metadata/`, so the
/// snapshot needs nothing of the source's vector file and `expire` rightly keeps it
/// (issue 41 asked whether it keeps a snapshot it should drop: it does not). A lost delete
/// file expires its snapshots like a lost data file.
#[tokio::test]
async fn a_vector_vacuumed_after_it_was_mirrored_leaves_its_snapshot_readable() {
    use iceberg::spec::FormatVersion;
    for (format_version, v) in [(None, FormatVersion::V2), (Some(3), FormatVersion::V3)] {
        let (_dir, root) = common::delta::extract("table_with_deletion_logs");
        let t = root.to_str().unwrap();
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        sync(t, &options, |_| {}).await.unwrap();
        std::fs::remove_file(root.join(format!("deletion_vector_{REPLACED}.bin"))).unwrap();
        let table = IcebergTable::new(TableStore::open(t).unwrap());
        let deletes = delete_files(&table, v).await;
        assert!(
            deletes[&3].len() == 1
                && deletes[&3][0].contains("/metadata/")
                && Path::new(&deletes[&3][0]).exists(),
            "{v:?}: {:?}",
            deletes[&3]
        );
        let expired = table.expire(&Retention::default()).await.unwrap();
        assert!(expired.snapshots.is_empty(), "{v:?}: {expired:?}");
        // That copy lost (a delete file only older snapshots read) makes version 3's
        // snapshot unreadable: it expires, with those before it, as for a data file.
        std::fs::remove_file(&deletes[&3][0]).unwrap();
        let expired = table.expire(&Retention::default()).await.unwrap();
        assert_eq!(expired.snapshots.len(), 4, "{v:?}: {expired:?}");
    }
}

/// Another Iceberg writer that committed to the mirror through a catalog (pyiceberg's
/// `register_table`, then an append) keeps the mirror's snapshots and their manifests in
/// its own: the expiry deleted them and that writer's table failed to read (hostile review
/// hr14, exit 0). The expiry is published; the files are kept, with a warning.
#[test]
fn expire_keeps_the_files_when_another_writer_committed_in_metadata() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = root.to_str().unwrap();
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let current = std::fs::read_to_string(metadata.join("v1.metadata.json")).unwrap();
    let theirs = metadata.join("00001-6f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.metadata.json");
    std::fs::write(&theirs, current.replace("XTABLE_METADATA", "SOMEONE_ELSE")).unwrap();
    let before: Vec<_> = std::fs::read_dir(&metadata)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let (code, out) = common::xlake(&["expire", t, "--keep-snapshots", "1"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("2 snapshots expired, 0 metadata files deleted"),
        "{out}"
    );
    assert!(before.iter().all(|p| p.exists()), "{out}");
}
