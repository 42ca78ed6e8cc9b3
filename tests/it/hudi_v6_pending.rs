//! Hudi table version 6 instants that complete out of order (the timeline orders by
//! requested time): pending instants hold `expire` back, a late completion is mirrored
//! after later instants and is never mirrored twice, expired or lost, whatever sync,
//! expire, archival and check do between (hostile reviews 8, 9, 10 and 12).

use std::path::Path;
use std::process::Command;

use xlake_iceberg::{IcebergTable, Retention};
use xlake_storage::TableStore;
use xlake_sync::{check, check_with, sync, SyncError, SyncOptions};

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

/// Instant times one second apart from 2024-01-01 00:00:00, `n` of them.
fn seconds_apart(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("202401010000{i:02}000")).collect()
}

/// Each of `times` a pending instant writing file group `g<i>` (see [`hudi_v6_instant`]):
/// their completed commit files' paths.
fn pending_instants(root: &Path, times: &[impl AsRef<str>]) -> Vec<std::path::PathBuf> {
    times
        .iter()
        .enumerate()
        .map(|(i, time)| hudi_v6_instant(root, time.as_ref(), &format!("g{i}")))
        .collect()
}

/// Hudi's archival of the instants at `times`: their timeline files into the archive
/// folder.
fn archive(root: &Path, times: &[String]) {
    let archived = root.join(".hoodie/archived");
    std::fs::create_dir_all(&archived).unwrap();
    for entry in std::fs::read_dir(root.join(".hoodie")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if times.iter().any(|t| name.starts_with(t.as_str())) {
            std::fs::rename(&path, archived.join(name)).unwrap();
        }
    }
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
    let done = pending_instants(&root, &times);
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
    let times = seconds_apart(4);
    let done = pending_instants(&root, &times);
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
    let times = seconds_apart(4);
    let done = pending_instants(&root, &times);
    for i in [0, 2, 3] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 3);
    complete(&root, &done[1]);
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    // Hudi's archival: the two oldest instants' timeline files into the archive folder.
    archive(&root, &times[..2]);
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
    let times = seconds_apart(3);
    let done = pending_instants(&root, &times);
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
    deep_checks_consistent(t, &options, "").await;
}

/// More instants pending at the first sync than are looked up (`MAX_LOOKUPS`, 16), all
/// requested before the one it mirrors, complete: the next sync mirrors them all. The
/// state named none pending past 16, so they were taken as mirrored and expired: 1 row
/// of 19, sync and plain `check` exit 0. They are named now (up to `MAX_NAMED`).
#[tokio::test]
async fn many_instants_pending_at_the_first_sync_are_mirrored_once_completed() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(19);
    let done = pending_instants(&root, &times);
    complete(&root, &done[18]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    for d in &done[..18] {
        complete(&root, d);
    }
    assert_eq!(check(t, &options, false).await.unwrap().missing.len(), 18);
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 18);
    let mut expected: Vec<String> = (0..19).map(|i| format!("g{i}")).collect();
    expected.sort();
    assert_eq!(mirrored_groups(t).await, expected);
    deep_checks_consistent(t, &options, "").await;
}

/// Hostile review hr10: an instant pending at a sync completes, and Hudi archives the
/// instant before it before the next sync: that sync still mirrors it (the saved state
/// named it pending). Before: 2 rows of 3, sync and plain `check` exit 0.
#[tokio::test]
async fn a_late_completion_mirrored_after_the_instants_before_it_were_archived() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(3);
    let done = pending_instants(&root, &times);
    complete(&root, &done[0]);
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    complete(&root, &done[1]);
    archive(&root, &times[..1]);
    let ids = synced_ids(t, &options).await;
    assert_eq!(ids, [times[1].as_str()]);
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    deep_checks_consistent(t, &options, "").await;
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
    let done = pending_instants(&root, &times);
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
    deep_checks_consistent(t, &options, "").await;
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
            let done = pending_instants(&root, &times);
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
            let ids = synced_ids(t, &options).await;
            assert_eq!(ids, [times[0]], "{target:?} {expire_between}");
            let ids = synced_ids(t, &options).await;
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

/// Hostile review hr12: on Hudi table version 6 a mirror started `--from-latest` while an
/// instant requested before the instants it folds into its first snapshot is pending;
/// once that instant completes a sync mirrors it (the saved state names it pending), it
/// was then the oldest mirrored commit, and the next sync mirrored a folded instant after
/// it again: its base file listed twice, sync and plain `check` exit 0, `check --deep`
/// exit 1. The mirror now begins at the oldest snapshot's commit, wherever a late
/// completion lands (`CommitListing::mirror_start`).
#[tokio::test]
async fn a_from_latest_mirror_does_not_mirror_a_folded_instant_again_after_a_late_completion() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = [
        "20240101000000000",
        "20240101000500000",
        "20240101010000000",
    ];
    let done = pending_instants(&root, &times);
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
    let ids = synced_ids(t, &options).await;
    assert_eq!(ids, [times[0]]);
    let ids = synced_ids(t, &options).await;
    assert!(ids.is_empty(), "mirrored again: {ids:?}");
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    deep_checks_consistent(t, &options, "").await;
}

/// An instant pending at a sync and older than every snapshot completes, and an expiry
/// runs before the next sync: it is no longer pending, so nothing held the expiry, and the
/// sync then mirrored it (the saved state named it) as the oldest mirrored instant, and the
/// commit after it whose snapshot expired a second time. Now a commit the source knows
/// completed late holds every cut (as one still pending does).
#[tokio::test]
async fn an_expiry_before_a_completed_late_instant_is_mirrored_expires_nothing() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = [
        "20240101000000000",
        "20240101000500000",
        "20240101010000000",
    ];
    let done = pending_instants(&root, &times);
    complete(&root, &done[1]);
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    complete(&root, &done[0]);
    let store = TableStore::open(t).unwrap();
    let retention = Retention {
        keep_snapshots: Some(1),
        ..Default::default()
    };
    let expiry = xlake_sync::maintain::expire(&store, &retention, None, None)
        .await
        .unwrap();
    assert!(expiry.expired.snapshots.is_empty(), "{expiry:?}");
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    assert!(sync(t, &options, |_| {}).await.unwrap().written.is_empty());
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2"]);
    let report = check_with(t, &options, true, true).await.unwrap();
    assert!(report.consistent(), "{report:?}");
}

/// Hostile review hr13: a mirror started `--from-latest` (folding the instant before the
/// latest) while three older instants are pending; two complete and are mirrored late,
/// then the third: its gap makes the next sync replay from the first instant, which gives
/// a late-mirrored instant before where the mirror begins. That sync took every later
/// unmirrored instant as pending and mirrored the folded one again (its base file listed
/// twice; sync and plain `check` exit 0, `check --deep` exit 1).
#[tokio::test]
async fn a_full_replay_after_late_completions_does_not_mirror_a_folded_instant_again() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(5);
    let done = pending_instants(&root, &times);
    complete(&root, &done[3]);
    complete(&root, &done[4]);
    let latest = SyncOptions {
        from_latest: true,
        ..Default::default()
    };
    assert_eq!(sync(t, &latest, |_| {}).await.unwrap().written.len(), 1);
    complete(&root, &done[0]);
    complete(&root, &done[2]);
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 2);
    complete(&root, &done[1]);
    let ids = synced_ids(t, &options).await;
    assert_eq!(ids, [times[1].as_str()]);
    assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2", "g3", "g4"]);
    assert!(sync(t, &options, |_| {}).await.unwrap().written.is_empty());
    deep_checks_consistent(t, &options, "").await;
}

/// Hostile review hr13: two instants pending at the first sync both complete before
/// in-commit mode (the callback's path) is asked for the older: it mirrors that one only,
/// and the state its change set saved named nothing pending (the newer had completed).
/// Since the mirror began at its oldest snapshot's instant (589908ed), the newer, listed
/// before that, was then taken as expired: `commit` for it exit 1, sync "up to date" and
/// plain `check` consistent (exit 0), a row lost. The state now names the late
/// completions still owed after its instant.
#[tokio::test]
async fn in_commit_mode_for_one_late_instant_leaves_the_next_one_owed() {
    for from_latest in [false, true] {
        let times = seconds_apart(5);
        let (_dir, root) = owed_after_in_commit_mode(&times, 2, 5, from_latest).await;
        let t = root.to_str().unwrap();
        let options = SyncOptions::default();
        assert!(sync(t, &options, |_| {}).await.unwrap().written.is_empty());
        assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2", "g3", "g4"]);
        deep_checks_consistent(t, &options, &from_latest.to_string()).await;
    }
}

/// Hostile review hr13: an instant pending at a sync completes and Hudi archives it (with
/// the instant before it) before the next sync: its commit metadata is gone, so no
/// snapshot can record it. That sync mirrored nothing ("up to date") and plain `check` was
/// consistent (exit 0), a row lost; only `check --deep` found its file absent. Now the
/// sync refuses, naming it, with nothing written, and `check` reports it.
#[tokio::test]
async fn a_late_completion_archived_before_the_next_sync_is_refused_and_reported() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(4);
    let done = pending_instants(&root, &times);
    for i in [0, 2, 3] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 3);
    complete(&root, &done[1]);
    archive(&root, &times[..2]);
    let before = metadata_files(&root);
    let err = sync(t, &options, |_| {}).await.unwrap_err();
    assert!(
        matches!(&err, SyncError::GoneUnmirrored { gone, .. } if gone.len() == 1 && gone[0].contains(&times[1])),
        "{err}"
    );
    assert_eq!(metadata_files(&root), before);
    let report = check(t, &options, false).await.unwrap();
    assert!(!report.consistent(), "{report:?}");
    assert_eq!(report.gone_unmirrored.len(), 1, "{report:?}");
    assert!(report.gone_unmirrored[0].contains(&times[1]));
}

/// The same instant rolled back instead (a writer that failed: its files and timeline
/// files deleted) is not taken as gone unmirrored: an older write instant is still on
/// the timeline (with instants 20 minutes apart, before the part of the timeline the
/// next sync lists: the whole is listed to tell); nor, once archival has passed it too,
/// when the rollback that undid it is listed. Both syncs mirror what follows.
#[tokio::test]
async fn a_pending_instant_rolled_back_is_not_taken_as_gone_unmirrored() {
    let minutes_apart: Vec<String> = (0..6)
        .map(|i| format!("20240101{:02}{:02}00000", i / 3, i % 3 * 20))
        .collect();
    for times in [seconds_apart(6), minutes_apart] {
        rolled_back_is_not_gone(&times).await;
    }
}

async fn rolled_back_is_not_gone(times: &[String]) {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let done = pending_instants(&root, &times[..4]);
    for i in [0, 2, 3] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 3);
    for entry in std::fs::read_dir(root.join(".hoodie")).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&times[1])
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    std::fs::remove_file(root.join(format!("p=1/g1_0-1-1_{}.parquet", times[1]))).unwrap();
    complete(&root, &hudi_v6_instant(&root, &times[4], "g4"));
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    assert!(check(t, &options, false).await.unwrap().consistent());
    let (rollback, undone) = (times[5].as_str(), times[1].clone());
    let body = crate::hudi_timelines::avro_file(crate::hudi_timelines::ROLLBACK_SCHEMA, |r| {
        use apache_avro::types::Value;
        r.put("startRollbackTime", rollback);
        r.put("timeTakenInMillis", 5i64);
        r.put("totalFilesDeleted", 0i32);
        r.put("commitsRollback", Value::Array(vec![Value::String(undone)]));
        r.put("partitionMetadata", Value::Map(Default::default()));
        r.put("version", Value::Union(0, Box::new(Value::Int(1))));
    });
    std::fs::write(root.join(format!(".hoodie/{rollback}.rollback")), body).unwrap();
    archive(&root, &times[..1]);
    assert_eq!(sync(t, &options, |_| {}).await.unwrap().written.len(), 1);
    deep_checks_consistent(t, &options, "").await;
}

/// In-commit mode for a v6 instant before where the mirror begins fails, as before: it
/// may have been folded into a `--from-latest` first snapshot (its rows in the mirror)
/// or have completed late unseen (they are not), which the mirror cannot tell; the error
/// says so and points at `check --deep`. (Elsewhere such a commit is held: exit 0.)
#[tokio::test]
async fn in_commit_mode_for_a_v6_instant_before_the_mirror_fails_saying_why() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(3);
    for d in pending_instants(&root, &times) {
        complete(&root, &d);
    }
    let latest = SyncOptions {
        from_latest: true,
        ..Default::default()
    };
    assert_eq!(sync(t, &latest, |_| {}).await.unwrap().written.len(), 1);
    let (code, text) = crate::common::xlake(&["commit", t, "--instant", &times[0]]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("check --deep"), "{text}");
}

/// The names of the files under the table's `metadata/`, sorted.
fn metadata_files(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Instants `times[..pending]` pending at a first sync (plain or `--from-latest`) that
/// mirrors the completed `times[pending..listed]`; the pending ones then complete, the
/// rest of `times` are requested (pending), and in-commit mode mirrors `times[0]`, then
/// `times[1]`, each exit 0. The table's folder and root.
async fn owed_after_in_commit_mode(
    times: &[String],
    pending: usize,
    listed: usize,
    from_latest: bool,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let done = pending_instants(&root, &times[..listed]);
    for d in &done[pending..] {
        complete(&root, d);
    }
    let first = SyncOptions {
        from_latest,
        ..Default::default()
    };
    sync(t, &first, |_| {}).await.unwrap();
    for d in &done[..pending] {
        complete(&root, d);
    }
    let timeline = root.join(".hoodie");
    for time in &times[listed..] {
        std::fs::write(timeline.join(format!("{time}.commit.requested")), "").unwrap();
        std::fs::write(timeline.join(format!("{time}.inflight")), "").unwrap();
    }
    for time in &times[..2] {
        let (code, text) = crate::common::xlake(&["commit", t, "--instant", time]);
        assert_eq!(code, 0, "{from_latest}: {text}");
    }
    (dir, root)
}

/// Hostile review hr15: the late completions owed after a change set's instant are named
/// beside the instants pending now, with no cap, but a saved state naming more than
/// `MAX_LOOKUPS` (16) is not read back at all. Sixteen instants pending at the first
/// sync complete, two more are pending when in-commit mode mirrors the oldest: its state
/// names 17, was not read back, and the next `commit` exit 1, sync "up to date" and
/// plain `check` consistent (exit 0), 15 rows lost; only `check --deep` told.
#[tokio::test]
async fn in_commit_mode_with_many_owed_instants_loses_none() {
    for from_latest in [false, true] {
        let times = seconds_apart(20);
        let (_dir, root) = owed_after_in_commit_mode(&times, 16, 18, from_latest).await;
        let t = root.to_str().unwrap();
        let options = SyncOptions::default();
        let synced = sync(t, &options, |_| {}).await.unwrap();
        assert_eq!(synced.written.len(), 14, "{from_latest}: {synced:?}");
        let mut expected: Vec<String> = (0..18).map(|i| format!("g{i}")).collect();
        expected.sort();
        assert_eq!(mirrored_groups(t).await, expected, "{from_latest}");
        deep_checks_consistent(t, &options, &from_latest.to_string()).await;
    }
}

/// Hostile review hr15: instants owed late (pending at the first sync beside two others
/// only, completed since) were named by no state when more than 16 others were pending at
/// the sync that stopped before them (in-commit mode for the oldest): past `MAX_LOOKUPS`
/// the state named none pending, and the owed ones went with them. The next `commit`
/// exit 1, sync "up to date" and plain `check` consistent (exit 0), two rows lost. The
/// state now names the owed ones apart (`owed`).
#[tokio::test]
async fn in_commit_mode_past_max_lookups_pending_loses_no_owed_instant() {
    for from_latest in [false, true] {
        let times = seconds_apart(22);
        let (_dir, root) = owed_after_in_commit_mode(&times, 3, 5, from_latest).await;
        let t = root.to_str().unwrap();
        let options = SyncOptions::default();
        sync(t, &options, |_| {}).await.unwrap();
        assert_eq!(mirrored_groups(t).await, ["g0", "g1", "g2", "g3", "g4"]);
        let report = check(t, &options, false).await.unwrap();
        assert!(report.consistent(), "{from_latest}: {report:?}");
    }
}

/// `check --deep`, then `check --deep --all`, of `t` find it consistent (`label` names the
/// case in a failure).
async fn deep_checks_consistent(t: &str, options: &SyncOptions, label: &str) {
    for all in [false, true] {
        let report = check_with(t, options, true, all).await.unwrap();
        assert!(report.consistent(), "{label}: {report:?}");
    }
}

/// The source commits a `sync` of `t` mirrored, in order.
async fn synced_ids(t: &str, options: &SyncOptions) -> Vec<String> {
    let written = sync(t, options, |_| {}).await.unwrap().written;
    written.into_iter().map(|m| m.commit.id).collect()
}

/// Hostile review hr16: a clean (no rows, no snapshot) pending at a sync, completed and
/// archived with the instants before it by the next: the saved state named it pending,
/// so the next sync took it as a late completion archived unmirrored and refused, exit 1,
/// on every sync after (a healthy table blocked for good; `check` exit 1). Hudi cleans
/// inline after a commit, and archives cleans with the commits. Now the state names
/// apart the pending instants that get no snapshot once completed (`quiet`), and the
/// sync mirrors what follows (found by hr16 and by the lead at once).
#[tokio::test]
async fn a_clean_pending_at_a_sync_and_archived_since_is_not_gone_unmirrored() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(5);
    let writes = [&times[0], &times[1], &times[3], &times[4]];
    let done = pending_instants(&root, &writes);
    for d in &done[..3] {
        complete(&root, d);
    }
    let timeline = root.join(".hoodie");
    for state in ["clean.requested", "clean.inflight"] {
        std::fs::write(timeline.join(format!("{}.{state}", times[2])), "").unwrap();
    }
    let options = SyncOptions::default();
    assert_eq!(
        synced_ids(t, &options).await,
        [times[0].as_str(), &times[1], &times[3]]
    );
    std::fs::write(timeline.join(format!("{}.clean", times[2])), "").unwrap();
    complete(&root, &done[3]);
    archive(&root, &times[..3]);
    assert_eq!(synced_ids(t, &options).await, [times[4].as_str()]);
    deep_checks_consistent(t, &options, "clean").await;
}

/// Hostile review hr16: past `MAX_LOOKUPS` (16) pending instants the saved state named
/// none, so the oldest of 17 pending at a sync, completed and archived (with the instant
/// before it) before the next sync, was not reported: the sync said up to date and plain
/// `check` was consistent, exit 0, its row missing (only `check --deep` told). The state
/// now names them (up to `MAX_NAMED`, 256), none looked up: the sync refuses.
#[tokio::test]
async fn a_late_completion_archived_past_max_lookups_pending_is_refused() {
    let (_dir, root) = hudi_v6();
    let t = root.to_str().unwrap();
    let times = seconds_apart(19);
    let done = pending_instants(&root, &times);
    for i in [0, 18] {
        complete(&root, &done[i]);
    }
    let options = SyncOptions::default();
    assert_eq!(
        synced_ids(t, &options).await,
        [times[0].as_str(), &times[18]]
    );
    complete(&root, &done[1]);
    archive(&root, &times[..2]);
    let err = sync(t, &options, |_| {}).await.unwrap_err();
    assert!(matches!(&err, SyncError::GoneUnmirrored { .. }), "{err}");
    let report = check(t, &options, false).await.unwrap();
    assert!(!report.consistent(), "{report:?}");
}
