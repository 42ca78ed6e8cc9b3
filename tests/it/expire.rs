//! `xlake expire`: snapshots referencing files the source deleted are expired, so Iceberg
//! time travel never reaches a missing file; syncing goes on afterwards.
use crate::common;

use std::path::Path;
use std::process::Command;

use xlake_iceberg::{IcebergTable, Retention};
use xlake_storage::TableStore;
use xlake_sync::{check, check_with, sync, SyncOptions};

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

/// A Hudi table version 6 (copy-on-write, partition `p=1`) in a temp dir: its root.
fn hudi_v6() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    std::fs::create_dir_all(root.join(".hoodie")).unwrap();
    std::fs::create_dir_all(root.join("p=1")).unwrap();
    let properties = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\nhoodie.table.partition.fields=p\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\nhoodie.table.timeline.timezone=UTC\n";
    std::fs::write(root.join(".hoodie/hoodie.properties"), properties).unwrap();
    (dir, root)
}

/// One row (`id` 1, `p` "1") as the Parquet file at `path`: its size.
fn write_parquet(path: &Path) -> u64 {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        std::sync::Arc::new(Int64Array::from(vec![1])),
        std::sync::Arc::new(StringArray::from(vec!["1"])),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Instant `instant` of the table at `root`, pending (requested and inflight), writing a
/// new file group `group` (its base file written too); its completed commit file's path.
fn hudi_v6_instant(root: &Path, instant: &str, group: &str) -> std::path::PathBuf {
    let schema = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"p","type":"string"}]}"#;
    let path = format!("p=1/{group}_0-1-1_{instant}.parquet");
    let size = write_parquet(&root.join(&path));
    let timeline = root.join(".hoodie");
    std::fs::write(timeline.join(format!("{instant}.commit.requested")), "").unwrap();
    std::fs::write(timeline.join(format!("{instant}.inflight")), "").unwrap();
    let stats = serde_json::json!([{"fileId": group, "path": path, "prevCommit": "null",
        "partitionPath": "p=1", "fileSizeInBytes": size, "numWrites": 1}]);
    let json = serde_json::json!({"partitionToWriteStats": {"p=1": stats},
        "extraMetadata": {"schema": schema}, "operationType": "UPSERT"});
    let done = timeline.join(format!("{instant}.commit"));
    std::fs::write(root.join(format!("{instant}.pending")), json.to_string()).unwrap();
    done
}

/// Complete the instant whose commit file is `done` (written by [`hudi_v6_instant`]).
fn complete(root: &Path, done: &Path) {
    let instant = done.file_stem().unwrap().to_str().unwrap();
    std::fs::rename(root.join(format!("{instant}.pending")), done).unwrap();
}

/// Hostile review hr8, end to end: on Hudi table version 6 (timeline ordered by requested
/// time) an instant pending at the sync, with mirrored instants before and after it, then
/// an expiry that asks to keep only the newest two snapshots: the expiry keeps the
/// snapshot of the instant before the pending one (as Hudi's archival never passes its
/// oldest pending instant), so once the instant completes the next sync mirrors it and
/// `check` finds the mirror consistent. Before, the expiry kept the newest two snapshots
/// and the completed instant, older than both, was taken as mirrored and expired: never
/// mirrored, exit 0.
#[tokio::test]
async fn an_expiry_keeps_what_a_pending_v6_instant_needs_to_be_mirrored_once_completed() {
    late_completion_after_an_expiry(None, 5, 1).await;
}

/// The same with a Delta target, which cuts its log at a checkpoint (every 10 versions):
/// 13 instants, so that without the bound the expiry would cut at version 10. Once the
/// late instant is mirrored (version 12), no checkpoint is a cut in source order.
#[tokio::test]
async fn a_delta_target_expiry_keeps_what_a_pending_v6_instant_needs() {
    late_completion_after_an_expiry(Some("delta"), 13, 0).await;
}

/// `instants` instants on a new Hudi table version 6, the second pending at the first
/// sync; an expiry keeping 2 snapshots held back by it, the instant completed and
/// mirrored (its snapshot last); with nothing pending, the expiry lets `expired_after`
/// snapshots go, only those before every later instant's (hostile review 9: it kept the
/// newest two, the next sync mirrored the instants between them again), and the next sync
/// writes nothing.
async fn late_completion_after_an_expiry(
    target: Option<&str>,
    instants: usize,
    expired_after: usize,
) -> (tempfile::TempDir, std::path::PathBuf, Vec<String>) {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times: Vec<String> = (0..instants)
        .map(|i| format!("202401010{}{:02}00000", i / 60, i % 60))
        .collect();
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    for (i, d) in done.iter().enumerate() {
        if i != 1 {
            complete(&root, d);
        }
    }
    let options = SyncOptions {
        target: target.map(str::to_string),
        ..Default::default()
    };
    let first = sync(t, &options, |_| {}).await.unwrap();
    assert_eq!(first.written.len(), instants - 1);
    let store = TableStore::open(t).unwrap();
    let retention = Retention {
        keep_snapshots: Some(2),
        ..Default::default()
    };
    let expiry = xlake_sync::maintain::expire(&store, &retention, None, target)
        .await
        .unwrap();
    let held = expiry
        .held_back
        .clone()
        .expect("held back by the pending instant");
    assert_eq!(held.pending, times[1]);
    assert!(expiry.expired.snapshots.is_empty(), "{expiry:?}");
    complete(&root, &done[1]);
    let second = sync(t, &options, |_| {}).await.unwrap();
    let written: Vec<&str> = second
        .written
        .iter()
        .map(|m| m.commit.id.as_str())
        .collect();
    assert_eq!(written, [times[1].as_str()]);
    // Deep, the current snapshot (the late instant's) holds the state after the newest
    // instant; those between it and the instant before it hold none and are not compared
    // (before, the deep check reported the late file absent from the newest instant's).
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
        let compared = if all { 2 } else { 1 };
        assert_eq!(report.compared.len(), compared, "{report:?}");
    }
    // With nothing pending, the expiry lets the older snapshots go.
    let expiry = xlake_sync::maintain::expire(&store, &retention, None, target)
        .await
        .unwrap();
    assert_eq!(expiry.held_back, None);
    assert_eq!(expiry.expired.snapshots.len(), expired_after, "{expiry:?}");
    assert!(expiry.expired.held_at.is_some(), "{expiry:?}");
    // Asked again, the command says why it keeps what it keeps.
    let mut args = vec!["expire", t, "--keep-snapshots", "2"];
    args.extend(target.map(|t| ["--target", t]).into_iter().flatten());
    let out = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let what = if target.is_some() {
        "version"
    } else {
        "snapshot"
    };
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "and every later one kept: a source commit completed late and its {what}"
        )),
        "{stdout}"
    );
    let third = sync(t, &options, |_| {}).await.unwrap();
    assert!(third.written.is_empty(), "mirrored again: {third:?}");
    let report = check(t, &options, false).await.unwrap();
    assert!(report.consistent(), "{report:?}");
    (_dir, root, times)
}

/// After [`an_expiry_keeps_what_a_pending_v6_instant_needs_to_be_mirrored_once_completed`],
/// two more instants: the late one's snapshot now precedes theirs, so an expiry keeping
/// the newest two cuts there (every expired instant precedes both), and the next sync
/// writes nothing.
#[tokio::test]
async fn an_expiry_cuts_past_a_late_completion_once_later_instants_follow_it() {
    let (_dir, root, _) = late_completion_after_an_expiry(None, 5, 1).await;
    let t = root.to_str().unwrap();
    for (i, time) in ["20240101000500000", "20240101000600000"]
        .iter()
        .enumerate()
    {
        let done = hudi_v6_instant(&root, time, &format!("n{i}"));
        complete(&root, &done);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    let store = TableStore::open(t).unwrap();
    let retention = Retention {
        keep_snapshots: Some(2),
        ..Default::default()
    };
    let expiry = xlake_sync::maintain::expire(&store, &retention, None, None)
        .await
        .unwrap();
    assert_eq!(expiry.expired.snapshots.len(), 4, "{expiry:?}");
    assert_eq!(expiry.expired.held_at, None);
    assert!(sync(t, &options, |_| {}).await.unwrap().written.is_empty());
    assert!(check(t, &options, false).await.unwrap().consistent());
}

/// Hostile review hr10: on Hudi table version 6 an instant pending at the sync that
/// completes before the expiry is neither pending (nothing holds the expiry back for it)
/// nor mirrored: an expiry keeping only the newest snapshot dropped those of every instant
/// before it, so the next sync took it as expired and never mirrored it (3 rows of 4,
/// exit 0, plain `check` consistent). The expiry keeps the snapshot of the instant before
/// it, and the next sync mirrors it.
#[tokio::test]
async fn an_expiry_never_passes_an_instant_completed_since_the_last_sync() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times: Vec<String> = (0..4).map(|i| format!("202401010000{i:02}000")).collect();
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    for i in [0, 1, 3] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 3);
    complete(&root, &done[2]);
    let store = TableStore::open(t).unwrap();
    let retention = Retention {
        keep_snapshots: Some(1),
        ..Default::default()
    };
    let expiry = xlake_sync::maintain::expire(&store, &retention, None, None)
        .await
        .unwrap();
    assert_eq!(expiry.expired.snapshots.len(), 1, "{expiry:?}");
    assert!(expiry.expired.held_at.is_some(), "{expiry:?}");
    let written: Vec<String> = sync(t, &options, |_| {})
        .await
        .unwrap()
        .written
        .iter()
        .map(|m| m.commit.id.clone())
        .collect();
    assert_eq!(written, [times[2].clone()]);
    let report = check(t, &options, true).await.unwrap();
    assert!(report.consistent(), "{report:?}");
}

/// Hostile review hr10: a v6 late completion, then Hudi's archival of it and the instant
/// before (archival goes by requested time, so a late instant leaves the timeline before
/// the later instants mirrored ahead of it). `check --deep` compared nothing ("no
/// snapshot records a source commit") and `--deep --all` reported the late file absent
/// from the snapshot of the instant after it (a false alarm, exit 1): the archived late
/// instant lost its place in source order. Both now compare the current snapshot with
/// the state after the newest instant, and skip the one that holds no state.
#[tokio::test]
async fn an_archived_late_completion_keeps_its_place_for_check_deep() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times: Vec<String> = (0..4).map(|i| format!("202401010000{i:02}000")).collect();
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    for i in [0, 2, 3] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 3);
    complete(&root, &done[1]);
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    // Hudi's archival: the two oldest instants' timeline files into the archive folder.
    let archived = root.join(".hoodie/archived");
    std::fs::create_dir_all(&archived).unwrap();
    for time in &times[..2] {
        for entry in std::fs::read_dir(root.join(".hoodie")).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if name.starts_with(time.as_str()) {
                std::fs::rename(&path, archived.join(name)).unwrap();
            }
        }
    }
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
        assert_eq!(report.compared.len(), 1, "{report:?}");
    }
}

/// Rows of the mirror's current snapshot, by the files it names: the base files of the
/// file groups each instant wrote (one row each).
async fn mirrored_groups(t: &str) -> Vec<String> {
    let table = IcebergTable::new(TableStore::open(t).unwrap());
    let loaded = table.load().await.unwrap().unwrap();
    let mut groups: Vec<String> = table
        .current_files(&loaded, usize::MAX)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|(path, _)| {
            let name = path.rsplit('/').next().unwrap().to_string();
            name.split('_').next().unwrap().to_string()
        })
        .collect();
    groups.sort();
    groups
}

/// Hostile review hr10: on Hudi table version 6, instants pending at the first sync and
/// requested before the only completed one, which that sync mirrors; once they complete
/// the next sync mirrors them (the saved state named them pending). Before, the sync took
/// them as mirrored and expired: 1 row of 3, sync and plain `check` exit 0.
#[tokio::test]
async fn instants_pending_at_the_first_sync_are_mirrored_once_completed() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times: Vec<String> = (0..3).map(|i| format!("202401010000{i:02}000")).collect();
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    complete(&root, &done[0]);
    complete(&root, &done[1]);
    let report = check(t, &options, false).await.unwrap();
    assert_eq!(
        report.missing,
        [times[0].clone(), times[1].clone()],
        "{report:?}"
    );
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
    }
}

/// Hostile review hr10: an instant pending at a sync completes, and Hudi archives the
/// instant before it before the next sync: that sync still mirrors it (the saved state
/// named it pending). Before: 2 rows of 3, sync and plain `check` exit 0.
#[tokio::test]
async fn a_late_completion_mirrored_after_the_instants_before_it_were_archived() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times: Vec<String> = (0..3).map(|i| format!("202401010000{i:02}000")).collect();
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    complete(&root, &done[0]);
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    complete(&root, &done[1]);
    let archived = root.join(".hoodie/archived");
    std::fs::create_dir_all(&archived).unwrap();
    for entry in std::fs::read_dir(root.join(".hoodie")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with(times[0].as_str()) {
            std::fs::rename(&path, archived.join(name)).unwrap();
        }
    }
    let written = sync(t, &options, |_| {}).await.unwrap().written;
    let ids: Vec<&str> = written.iter().map(|m| m.commit.id.as_str()).collect();
    assert_eq!(ids, [times[1].as_str()]);
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
    }
}

/// Hostile review hr12: two instants pending at a sync, requested long (past the margin)
/// before the mirrored one; the newer completes first and is mirrored late, then the older
/// completes: the next sync mirrors it too. Before, the late instant's change set saved a
/// state listing from after it (not trusted), so the older was taken as mirrored and
/// expired: 2 rows of 3, sync and plain `check` exit 0.
#[tokio::test]
async fn two_pending_instants_completing_newer_first_are_both_mirrored() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = [
        "20240101000000000",
        "20240101002000000",
        "20240101010000000",
    ];
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    complete(&root, &done[1]);
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    complete(&root, &done[0]);
    let report = check(t, &options, false).await.unwrap();
    assert_eq!(report.missing, [times[0]], "{report:?}");
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
    }
}

/// Hostile review hr12: on Hudi table version 6 an instant pending at a sync, requested
/// before every mirrored one, then an expiry: it expires no snapshot (before, it expired
/// the oldest, as keeping it would not bring the instant back). Once the instant completes
/// a sync mirrors it (the saved state names it pending) and it is then the oldest mirrored
/// commit: an instant after it whose snapshot expired was mirrored again by the next sync
/// (a duplicate, with `check` still consistent).
#[tokio::test]
async fn an_expiry_before_a_pending_v6_instant_older_than_every_snapshot_expires_nothing() {
    for target in [None, Some("delta")] {
        for expire_between in [false, true] {
            let (_dir, root) = hudi_v6();
            let t = root.to_str().unwrap();
            let times = [
                "20240101000000000",
                "20240101000500000",
                "20240101002000000",
                "20240101010000000",
            ];
            let done: Vec<_> = times
                .iter()
                .enumerate()
                .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
                .collect();
            complete(&root, &done[1]);
            complete(&root, &done[3]);
            let options = SyncOptions {
                target: target.map(str::to_string),
                ..Default::default()
            };
            assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
            complete(&root, &done[2]);
            assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
            if expire_between {
                let store = TableStore::open(t).unwrap();
                let retention = Retention {
                    keep_snapshots: Some(1),
                    ..Default::default()
                };
                let e = xlake_sync::maintain::expire(&store, &retention, None, target)
                    .await
                    .unwrap();
                assert!(e.expired.snapshots.is_empty(), "{target:?}: {e:?}");
                assert_eq!(e.held_back.map(|h| h.pending), Some(times[0].to_string()));
            }
            complete(&root, &done[0]);
            let written = sync(t, &options, |_| {}).await.unwrap().written;
            let ids: Vec<&str> = written.iter().map(|m| m.commit.id.as_str()).collect();
            assert_eq!(ids, [times[0]], "{target:?} {expire_between}");
            let again = sync(t, &options, |_| {}).await.unwrap().written;
            let ids: Vec<&str> = again.iter().map(|m| m.commit.id.as_str()).collect();
            assert!(
                ids.is_empty(),
                "{target:?} {expire_between}: mirrored again {ids:?}"
            );
            for all in [false, true] {
                let report = check_with(t, &options, true, all).await.unwrap();
                assert!(
                    report.consistent(),
                    "{target:?} {expire_between}: {report:?}"
                );
            }
            if target.is_none() {
                assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2", "g3"]);
            }
        }
    }
}

/// Hostile review hr12, open: on Hudi table version 6 a mirror started `--from-latest`
/// while an instant requested before the instants it folds into its first snapshot is
/// pending; once that instant completes a sync mirrors it (the saved state names it
/// pending), it is then the oldest mirrored commit, and the next sync mirrors a folded
/// instant after it again: its base file listed twice, sync and plain `check` exit 0,
/// `check --deep` exit 1. The engine takes commits before the oldest mirrored one in
/// source order as expired or before mirroring; a late completion moves that boundary.
#[tokio::test]
#[ignore = "known gap: docs/known-gaps.md (hostile review hr12, --from-latest and a late v6 completion)"]
async fn a_from_latest_mirror_does_not_mirror_a_folded_instant_again_after_a_late_completion() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = [
        "20240101000000000",
        "20240101000500000",
        "20240101010000000",
    ];
    let done: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(&root, time, &format!("g{i}")))
        .collect();
    complete(&root, &done[1]);
    complete(&root, &done[2]);
    let latest = SyncOptions {
        from_latest: true,
        ..Default::default()
    };
    assert_eq!(sync(t, &latest, |_| {}).await.unwrap().written.len(), 1);
    assert_eq!(mirrored_groups(t).await, ["g1", "g2"]);
    complete(&root, &done[0]);
    let options = SyncOptions::default();
    let written = sync(t, &options, |_| {}).await.unwrap().written;
    let ids: Vec<&str> = written.iter().map(|m| m.commit.id.as_str()).collect();
    assert_eq!(ids, [times[0]]);
    let again = sync(t, &options, |_| {}).await.unwrap().written;
    let ids: Vec<&str> = again.iter().map(|m| m.commit.id.as_str()).collect();
    assert!(ids.is_empty(), "mirrored again: {ids:?}");
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    for all in [false, true] {
        let report = check_with(t, &options, true, all).await.unwrap();
        assert!(report.consistent(), "{report:?}");
    }
}
