//! Timelines the fixtures do not contain, built from a real v9 table: archived early
//! instants, a rollback of an instant already mirrored, clean and savepoint instants.
//! Each is checked against a full sync of the untouched table: the live data files of
//! every snapshot must be the same.
use crate::common;

use std::path::Path;

use apache_avro::types::{Record, Value};
use apache_avro::{Schema, Writer};
use common::hudi::{data_instants, extract, instant_files};
use xlake_sync::{sync, SyncOptions};
use xlake_test_utils::readback::live_files_by_commit;

const TABLE: &str = "sample_table_cow_v9_txns_simple_nometa";

async fn sync_ok(root: &Path) -> xlake_sync::SyncReport {
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap()
}

/// A timeline file as Hudi writes it: a one-record Avro container.
pub(crate) fn avro_file(schema: &str, fill: impl FnOnce(&mut Record)) -> Vec<u8> {
    let schema = Schema::parse_str(schema).unwrap();
    let mut record = Record::new(&schema).unwrap();
    fill(&mut record);
    let mut writer = Writer::new(&schema, Vec::new());
    writer.append(record).unwrap();
    writer.into_inner().unwrap()
}

/// The fields of HoodieRollbackMetadata that matter here (Hudi's record and field names).
pub(crate) const ROLLBACK_SCHEMA: &str = r#"{"type":"record","name":"HoodieRollbackMetadata","namespace":"org.apache.hudi.avro.model","fields":[
  {"name":"startRollbackTime","type":"string"},
  {"name":"timeTakenInMillis","type":"long"},
  {"name":"totalFilesDeleted","type":"int"},
  {"name":"commitsRollback","type":{"type":"array","items":"string"}},
  {"name":"partitionMetadata","type":{"type":"map","values":{"type":"record","name":"HoodieRollbackPartitionMetadata","fields":[
    {"name":"partitionPath","type":"string"},
    {"name":"successDeleteFiles","type":{"type":"array","items":"string"}},
    {"name":"failedDeleteFiles","type":{"type":"array","items":"string"}}]}}},
  {"name":"version","type":["int","null"],"default":1}]}"#;

/// The fields of HoodieCleanMetadata that matter here.
const CLEAN_SCHEMA: &str = r#"{"type":"record","name":"HoodieCleanMetadata","namespace":"org.apache.hudi.avro.model","fields":[
  {"name":"startCleanTime","type":"string"},
  {"name":"timeTakenInMillis","type":"long"},
  {"name":"totalFilesDeleted","type":"int"},
  {"name":"earliestCommitToRetain","type":"string"},
  {"name":"partitionMetadata","type":{"type":"map","values":{"type":"array","items":"string"}}}]}"#;

#[tokio::test]
async fn archived_early_instants_start_from_the_state_at_the_oldest_retained_one() {
    let (_a, reference) = extract(TABLE);
    sync_ok(&reference).await;
    let want = live_files_by_commit(&reference);

    let (_b, root) = extract(TABLE);
    let instants = data_instants(&root);
    // Archive the first four data instants: their timeline files move to the LSM history.
    let history = root.join(".hoodie/timeline/history");
    std::fs::create_dir_all(&history).unwrap();
    for (requested, _) in &instants[..4] {
        for f in instant_files(&root, requested) {
            std::fs::rename(&f, history.join(f.file_name().unwrap())).unwrap();
        }
    }
    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), instants.len() - 4);
    assert!(
        report.notes.iter().any(|n| n.contains("archived")),
        "{:?}",
        report.notes
    );
    let got = live_files_by_commit(&root);
    for (requested, _) in &instants[4..] {
        assert_eq!(
            got[requested], want[requested],
            "live files at instant {requested}"
        );
    }
}

#[tokio::test]
async fn instants_archived_before_they_were_mirrored_resume_from_the_oldest_retained_one() {
    let (_a, reference) = extract(TABLE);
    sync_ok(&reference).await;
    let want = live_files_by_commit(&reference);
    let (_dir, root) = extract(TABLE);
    let instants = data_instants(&root);
    // Mirror the first two instants only (hide the rest while syncing).
    let parked = root.join("parked");
    std::fs::create_dir_all(&parked).unwrap();
    for (requested, _) in &instants[2..] {
        for f in instant_files(&root, requested) {
            std::fs::rename(&f, parked.join(f.file_name().unwrap())).unwrap();
        }
    }
    sync_ok(&root).await;
    for f in std::fs::read_dir(&parked).unwrap() {
        let f = f.unwrap().path();
        std::fs::rename(
            &f,
            root.join(".hoodie/timeline").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    std::fs::remove_dir(&parked).unwrap();
    // Now instants 1..4 are archived: 3 and 4 were never mirrored.
    let history = root.join(".hoodie/timeline/history");
    std::fs::create_dir_all(&history).unwrap();
    for (requested, _) in &instants[..4] {
        for f in instant_files(&root, requested) {
            std::fs::rename(&f, history.join(f.file_name().unwrap())).unwrap();
        }
    }
    // Instants 3 and 4 can no longer be mirrored one by one: the oldest retained instant's
    // snapshot holds the whole state at it, then one snapshot per later instant.
    let report = sync_ok(&root).await;
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("archived before it was mirrored")),
        "{:?}",
        report.notes
    );
    assert_eq!(report.written.len(), instants.len() - 4);
    let got = live_files_by_commit(&root);
    for (requested, _) in &instants[4..] {
        assert_eq!(
            got[requested], want[requested],
            "live files at instant {requested}"
        );
    }
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

#[tokio::test]
async fn a_rollback_of_a_mirrored_instant_restores_the_files_before_it() {
    let (_dir, root) = extract(TABLE);
    sync_ok(&root).await;
    let instants = data_instants(&root);
    let want = live_files_by_commit(&root);
    let (last, _) = instants.last().unwrap().clone();
    let (previous, _) = instants[instants.len() - 2].clone();

    // What Hudi does on rolling back a completed commit: delete the files it wrote and its
    // timeline files, then complete a rollback instant naming it.
    let written: Vec<String> = want[&last].difference(&want[&previous]).cloned().collect();
    assert!(!written.is_empty());
    roll_back(&root, &last, &written);
    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), 1, "one snapshot for the rollback");
    let got = live_files_by_commit(&root);
    assert_eq!(
        got["29990101000000000"], want[&previous],
        "the rollback restores the state before {last}"
    );
    assert_undone(&root, &[last.as_str()], "29990101000000000").await;
}

#[tokio::test]
async fn a_rollback_of_an_instant_before_the_newest_leaves_deep_all_consistent() {
    let (_dir, root) = extract(TABLE);
    sync_ok(&root).await;
    let instants = data_instants(&root);
    let want = live_files_by_commit(&root);
    // The newest commit before the last that wrote files the next instant keeps live.
    let (undone, written) = (1..instants.len() - 1)
        .rev()
        .filter(|&i| instants[i].1 == "commit")
        .map(|i| {
            let id = instants[i].0.clone();
            let written: Vec<String> = want[&id]
                .difference(&want[&instants[i - 1].0])
                .cloned()
                .collect();
            let next = &want[&instants[i + 1].0];
            let kept = !written.is_empty() && written.iter().all(|f| next.contains(f));
            (id, written, kept)
        })
        .find(|(_, _, kept)| *kept)
        .map(|(id, written, _)| (id, written))
        .expect("such an instant");
    roll_back(&root, &undone, &written);
    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), 1, "one snapshot for the rollback");
    // The rollback is given as the full state after it (every live file), not as a diff:
    // the sync line says so rather than "+5 -0".
    let m = &report.written[0];
    assert!(m.full_state && m.removed == 0, "{m:?}");
    // The snapshots between the undone instant and its rollback held its files: they
    // are history, not differences.
    assert_undone(&root, &[undone.as_str()], "29990101000000000").await;
}

/// What Hudi does on rolling back completed instant `id` that wrote `written`: delete
/// those files and its timeline files, then complete a rollback instant naming it (at
/// 29990101000000000).
fn roll_back(root: &Path, id: &str, written: &[String]) {
    let last = id.to_string();
    for f in written {
        std::fs::remove_file(root.join(f)).unwrap();
    }
    for f in instant_files(root, &last) {
        std::fs::remove_file(f).unwrap();
    }
    let mut by_partition: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for f in written {
        let (partition, _) = f.rsplit_once('/').unwrap_or(("", f));
        let full = format!("file:{}/{f}", root.to_str().unwrap());
        by_partition
            .entry(partition.to_string())
            .or_default()
            .push(Value::String(full));
    }
    let body = avro_file(ROLLBACK_SCHEMA, |r| {
        r.put("startRollbackTime", "29990101000000000");
        r.put("timeTakenInMillis", 5i64);
        r.put("totalFilesDeleted", written.len() as i32);
        r.put(
            "commitsRollback",
            Value::Array(vec![Value::String(last.clone())]),
        );
        let partitions = by_partition
            .into_iter()
            .map(|(p, files)| {
                let meta = Value::Record(vec![
                    ("partitionPath".into(), Value::String(p.clone())),
                    ("successDeleteFiles".into(), Value::Array(files)),
                    ("failedDeleteFiles".into(), Value::Array(vec![])),
                ]);
                (p, meta)
            })
            .collect();
        r.put("partitionMetadata", Value::Map(partitions));
        r.put("version", Value::Union(0, Box::new(Value::Int(1))));
    });
    std::fs::write(
        root.join(".hoodie/timeline/29990101000000000_29990101000000001.rollback"),
        body,
    )
    .unwrap();
}

/// `check` calls the mirror consistent, and lists the snapshots of the `undone` commits as
/// undone by `by`, not as unknown; `check --deep --all` agrees (undone commits are
/// history: their snapshots are not compared with a source that no longer holds them).
async fn assert_undone(root: &Path, undone: &[&str], by: &str) {
    let all = xlake_sync::check_with(root.to_str().unwrap(), &SyncOptions::default(), true, true)
        .await
        .unwrap();
    assert!(all.consistent() && all.unknown.is_empty(), "{all:?}");
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(check.consistent() && check.unknown.is_empty(), "{check:?}");
    assert_eq!(all.undone, check.undone);
    let got: Vec<(&str, &str)> = check
        .undone
        .iter()
        .map(|u| (u.commit.as_str(), u.undone_by.as_str()))
        .collect();
    let want: Vec<(&str, &str)> = undone.iter().map(|id| (*id, by)).collect();
    assert_eq!(got, want);
}

/// The restore schema's fields that matter: per rolled-back instant, its rollback metadata.
fn restore_schema() -> String {
    let rollback = ROLLBACK_SCHEMA.replace("\"namespace\":\"org.apache.hudi.avro.model\",", "");
    format!(
        r#"{{"type":"record","name":"HoodieRestoreMetadata","namespace":"org.apache.hudi.avro.model","fields":[
  {{"name":"startRestoreTime","type":"string"}},
  {{"name":"timeTakenInMillis","type":"long"}},
  {{"name":"instantsToRollback","type":{{"type":"array","items":"string"}}}},
  {{"name":"hoodieRestoreMetadata","type":{{"type":"map","values":{{"type":"array","items":{rollback}}}}}}}]}}"#
    )
}

#[tokio::test]
async fn a_restore_undoes_every_mirrored_instant_after_the_savepoint() {
    let (_dir, root) = extract(TABLE);
    sync_ok(&root).await;
    let instants = data_instants(&root);
    let want = live_files_by_commit(&root);
    let keep = &instants[instants.len() - 3].0;
    let undone: Vec<String> = instants[instants.len() - 2..]
        .iter()
        .map(|(r, _)| r.clone())
        .collect();
    // Hudi restores by rolling back each later instant: their files and timeline files go.
    let mut per_instant = Vec::new();
    let mut before = want[keep].clone();
    for id in &undone {
        let written: Vec<String> = want[id].difference(&before).cloned().collect();
        before = want[id].clone();
        per_instant.push((id.clone(), written));
    }
    let mut entries = Vec::new();
    for (id, written) in &per_instant {
        for f in written {
            std::fs::remove_file(root.join(f)).unwrap();
        }
        for f in instant_files(&root, id) {
            std::fs::remove_file(f).unwrap();
        }
        let mut partitions: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
        for f in written {
            let (partition, _) = f.rsplit_once('/').unwrap_or(("", f));
            partitions
                .entry(partition.to_string())
                .or_default()
                .push(Value::String(format!(
                    "file:{}/{f}",
                    root.to_str().unwrap()
                )));
        }
        let rollback = Value::Record(vec![
            (
                "startRollbackTime".into(),
                Value::String("29990101000000000".into()),
            ),
            ("timeTakenInMillis".into(), Value::Long(1)),
            ("totalFilesDeleted".into(), Value::Int(written.len() as i32)),
            (
                "commitsRollback".into(),
                Value::Array(vec![Value::String(id.clone())]),
            ),
            (
                "partitionMetadata".into(),
                Value::Map(
                    partitions
                        .into_iter()
                        .map(|(p, files)| {
                            let meta = Value::Record(vec![
                                ("partitionPath".into(), Value::String(p.clone())),
                                ("successDeleteFiles".into(), Value::Array(files)),
                                ("failedDeleteFiles".into(), Value::Array(vec![])),
                            ]);
                            (p, meta)
                        })
                        .collect(),
                ),
            ),
            ("version".into(), Value::Union(0, Box::new(Value::Int(1)))),
        ]);
        entries.push((id.clone(), Value::Array(vec![rollback])));
    }
    let body = avro_file(&restore_schema(), |r| {
        r.put("startRestoreTime", "29990101000000000");
        r.put("timeTakenInMillis", 5i64);
        r.put(
            "instantsToRollback",
            Value::Array(undone.iter().cloned().map(Value::String).collect()),
        );
        r.put(
            "hoodieRestoreMetadata",
            Value::Map(entries.into_iter().collect()),
        );
    });
    std::fs::write(
        root.join(".hoodie/timeline/29990101000000000_29990101000000001.restore"),
        body,
    )
    .unwrap();
    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), 1, "one snapshot for the restore");
    assert_eq!(
        live_files_by_commit(&root)["29990101000000000"],
        want[keep],
        "the state at the savepoint"
    );
    let undone: Vec<&str> = undone.iter().map(String::as_str).collect();
    assert_undone(&root, &undone, "29990101000000000").await;
}

#[tokio::test]
async fn clean_and_savepoint_instants_get_no_snapshot() {
    let (_a, reference) = extract(TABLE);
    sync_ok(&reference).await;
    let (_b, root) = extract(TABLE);
    let instants = data_instants(&root);
    let clean = avro_file(CLEAN_SCHEMA, |r| {
        r.put("startCleanTime", "20260307135706000");
        r.put("timeTakenInMillis", 3i64);
        r.put("totalFilesDeleted", 0i32);
        r.put("earliestCommitToRetain", instants[0].0.clone());
        r.put("partitionMetadata", Value::Map(Default::default()));
    });
    let timeline = root.join(".hoodie/timeline");
    std::fs::write(
        timeline.join("20260307135706000_20260307135706050.clean"),
        &clean,
    )
    .unwrap();
    std::fs::write(timeline.join("20260307135706000.clean.requested"), b"").unwrap();
    std::fs::write(
        timeline.join("20260307135706500_20260307135706550.savepoint"),
        &clean,
    )
    .unwrap();
    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), instants.len());
    assert_eq!(
        live_files_by_commit(&root),
        live_files_by_commit(&reference)
    );
}

/// Spark+Hudi 1.2 writes no `hoodie.table.create.schema`; once archival has moved every
/// commit before a rollback out of the active timeline (a killed write rolled back by the
/// next writer, then archived past), the rollback is the oldest instant and records no
/// schema. A replay from the start (a first sync, `check --deep`) then takes the schema of
/// the next commit on the timeline.
#[tokio::test]
async fn a_rollback_first_on_the_timeline_takes_the_next_commits_schema() {
    let (_a, reference) = extract(TABLE);
    sync_ok(&reference).await;
    let want = live_files_by_commit(&reference);

    let (_b, root) = extract(TABLE);
    let instants = data_instants(&root);
    let history = root.join(".hoodie/timeline/history");
    std::fs::create_dir_all(&history).unwrap();
    for (requested, _) in &instants[..4] {
        for f in instant_files(&root, requested) {
            std::fs::rename(&f, history.join(f.file_name().unwrap())).unwrap();
        }
    }
    let properties = root.join(".hoodie/hoodie.properties");
    let text = std::fs::read_to_string(&properties).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("hoodie.table.create.schema"))
        .collect();
    assert!(
        kept.len() < text.lines().count(),
        "the fixture had a create schema"
    );
    std::fs::write(&properties, kept.join("\n") + "\n").unwrap();
    // The rollback of a write that never completed, between the archived and the kept.
    let after: u64 = instants[3].0.parse().unwrap();
    let (rollback, killed) = ((after + 1).to_string(), (after + 2).to_string());
    assert!(rollback < instants[4].0);
    let body = avro_file(ROLLBACK_SCHEMA, |r| {
        r.put("startRollbackTime", rollback.as_str());
        r.put("timeTakenInMillis", 5i64);
        r.put("totalFilesDeleted", 0i32);
        r.put("commitsRollback", Value::Array(vec![Value::String(killed)]));
        r.put("partitionMetadata", Value::Map(Default::default()));
        r.put("version", Value::Union(0, Box::new(Value::Int(1))));
    });
    let name = format!("{rollback}_{}.rollback", after + 3);
    std::fs::write(root.join(".hoodie/timeline").join(name), body).unwrap();

    let report = sync_ok(&root).await;
    assert_eq!(report.written.len(), instants.len() - 4 + 1);
    let got = live_files_by_commit(&root);
    assert_eq!(
        got[&rollback], want[&instants[3].0],
        "the state at the rollback"
    );
    for (requested, _) in &instants[4..] {
        assert_eq!(got[requested], want[requested], "live files at {requested}");
    }
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

/// Hostile review hr13: a mirror started `--from-latest`, then a rollback of the instant
/// its one snapshot records (the latest, which folds every earlier one). No mirrored
/// instant was listed any more, so the mirror was taken to begin nowhere and the next sync
/// mirrored every folded instant again on top of the first snapshot, then the rollback:
/// the current snapshot listed each file of the last instant kept twice (its rows counted
/// twice); sync and plain `check` exit 0, `check --deep` exit 1. Where the mirror begins
/// is now found by source order when its oldest snapshot's commit is undone
/// (`CommitListing::mirror_start`).
#[tokio::test]
async fn a_rollback_of_the_from_latest_snapshots_instant_mirrors_no_folded_instant_again() {
    let (_dir, root) = extract(TABLE);
    let (_r, reference) = extract(TABLE);
    sync_ok(&reference).await;
    let want = live_files_by_commit(&reference);
    let instants = data_instants(&root);
    let latest = SyncOptions {
        from_latest: true,
        ..Default::default()
    };
    sync(root.to_str().unwrap(), &latest, |_| {}).await.unwrap();
    let (last, _) = instants.last().unwrap().clone();
    let (previous, _) = instants[instants.len() - 2].clone();
    let written: Vec<String> = want[&last].difference(&want[&previous]).cloned().collect();
    roll_back(&root, &last, &written);
    let report = sync_ok(&root).await;
    let ids: Vec<&str> = report
        .written
        .iter()
        .map(|m| m.commit.id.as_str())
        .collect();
    assert_eq!(ids, ["29990101000000000"]);
    assert_eq!(
        live_files_by_commit(&root)["29990101000000000"],
        want[&previous]
    );
    assert_undone(&root, &[last.as_str()], "29990101000000000").await;
}
