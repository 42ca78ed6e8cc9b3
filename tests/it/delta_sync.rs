//! End-to-end: every Delta fixture synced with `xlake-sync`, one snapshot per version;
//! deletion vectors refused, bad logs refused, metadata untouched by failures.
//! (Row-level agreement with the `deltalake` package is proven by tests/interop.)
use crate::common;

use std::path::Path;

use common::delta::{commit_versions, extract, ALL};
use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;
use xlake_sync::{sync, SyncOptions};
use xlake_test_utils::metadata_snapshot;

async fn mirrored(root: &Path) -> Vec<String> {
    IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap())
        .synced_commits()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, m)| m.source_identifier.unwrap())
        .collect()
}

async fn sync_with(root: &Path, options: &SyncOptions) -> Result<xlake_sync::SyncReport, String> {
    sync(root.to_str().unwrap(), options, |_| {})
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn every_version_gets_one_snapshot_in_order() {
    for name in ALL {
        if ["table_with_deletion_logs", "checkpoints_vacuumed"].contains(&name) {
            continue;
        }
        let (_dir, root) = extract(name);
        let versions: Vec<String> = commit_versions(&root).iter().map(u64::to_string).collect();
        let report = sync_with(&root, &SyncOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.written.len(), versions.len(), "{name}");
        assert_eq!(mirrored(&root).await, versions, "{name}");
        let again = sync_with(&root, &SyncOptions::default()).await.unwrap();
        assert_eq!(
            again.written.len(),
            0,
            "{name}: a second sync writes nothing"
        );
    }
}

#[tokio::test]
async fn a_log_that_starts_at_a_checkpoint_starts_there() {
    // Commits 0-4 are gone, checkpoints at 5 and 10; this copy has no data files at all.
    let (_dir, root) = extract("checkpoints_vacuumed");
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("does not exist") && err.contains("source commit 5"),
        "{err}"
    );
    assert!(metadata_snapshot(&root).is_empty());
    let options = SyncOptions {
        skip_file_check: true,
        ..Default::default()
    };
    let report = sync_with(&root, &options).await.unwrap();
    assert!(
        report.notes.iter().any(|n| n.contains("checkpoint")),
        "{:?}",
        report.notes
    );
    assert_eq!(
        mirrored(&root).await,
        (5..=12).map(|v| v.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(report.written[0].added, 5, "the checkpoint's whole state");
}

/// A log that starts at a checkpoint with one version after it: that version's removals
/// mark the checkpoint's files (which a vacuum may have deleted) as removed later.
#[tokio::test]
async fn a_checkpoint_start_with_one_later_version_knows_what_it_removes() {
    use xlake_source::TableSource;
    let (_dir, root) = extract("checkpoints_vacuumed");
    let log = root.join("_delta_log");
    for v in [6, 7, 8, 9, 11, 12] {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    let source = || async {
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        xlake_delta::DeltaSource::open(store).await.unwrap()
    };
    let state = xlake_source::MirrorState::default();
    let first = {
        let delta = source().await;
        let mut replay = delta.replay(&state).await.unwrap();
        replay.next().await.unwrap().unwrap()
    };
    assert_eq!(first.commit.id, "10");
    let gone = first.added[0].path.clone();
    let rel = gone
        .strip_prefix(&format!("{}/", root.display()))
        .unwrap_or(&gone);
    write_commit(
        &root,
        11,
        &format!(
            "{{\"commitInfo\":{{\"timestamp\":1900000000000,\"operation\":\"DELETE\"}}}}\n{}\n",
            serde_json::json!({"remove": {"path": rel, "dataChange": true}})
        ),
    );
    let delta = source().await;
    let mut replay = delta.replay(&state).await.unwrap();
    let first = replay.next().await.unwrap().unwrap();
    let file = first.added.iter().find(|f| f.path == gone).unwrap();
    assert!(file.removed_later, "{gone} is removed by version 11");
    let second = replay.next().await.unwrap().unwrap();
    assert_eq!((second.commit.id.as_str(), second.removed.len()), ("11", 1));
}

/// The summary of the snapshot mirroring a version.
async fn summary_of(root: &Path, version: &str) -> std::collections::HashMap<String, String> {
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let metadata = table.load().await.unwrap().unwrap().metadata;
    let snapshot = metadata
        .snapshots()
        .find(|s| {
            xlake_iceberg::SyncMetadata::from_summary(&s.summary().additional_properties)
                .and_then(|m| m.source_identifier)
                .as_deref()
                == Some(version)
        })
        .unwrap();
    snapshot.summary().additional_properties.clone()
}

#[tokio::test]
async fn deletion_vectors_become_position_deletes() {
    for format_version in [None, Some(3)] {
        let (_dir, root) = extract("table_with_deletion_logs");
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        sync_with(&root, &options).await.unwrap();
        // Version 3 deletes one row through a deletion vector; version 4 rewrites the
        // vector of the same file with two rows: the old delete file goes, a new one comes
        // (v2: position-delete files; v3: Puffin vectors).
        let v3 = summary_of(&root, "3").await;
        assert_eq!(
            (
                v3["added-delete-files"].as_str(),
                v3["added-position-deletes"].as_str()
            ),
            ("1", "1")
        );
        let v4 = summary_of(&root, "4").await;
        assert_eq!(
            (
                v4["removed-delete-files"].as_str(),
                v4["added-position-deletes"].as_str()
            ),
            ("1", "2")
        );
        assert_eq!(
            (
                v4["total-delete-files"].as_str(),
                v4["total-position-deletes"].as_str()
            ),
            ("1", "2")
        );
        // Delta removed and added the data file again, unchanged: its Iceberg entry stays.
        for v in [&v3, &v4] {
            let counted = ["added-data-files", "deleted-data-files", "added-records"];
            assert!(counted.iter().all(|k| !v.contains_key(*k)), "{v:?}");
        }
        assert_eq!(v4["total-data-files"], v3["total-data-files"]);
        assert_eq!(v4["total-records"], v3["total-records"]);
        let check = xlake_sync::check_with(root.to_str().unwrap(), &options, true, true)
            .await
            .unwrap();
        assert!(check.consistent(), "{format_version:?}: {check:?}");
    }
}

/// The commits after the last mirrored version are gone, and the vector of a mirrored
/// file grew meanwhile: the first snapshot after the gap (the checkpoint's whole state)
/// carries the vector it has now, not the one mirrored before.
#[tokio::test]
async fn a_vector_that_grew_while_history_was_lost_is_applied() {
    for format_version in [None, Some(3)] {
        let (_dir, root) = extract("table_with_deletion_logs");
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        let location = root.to_str().unwrap();
        // Version 3 deletes one row of the file; version 4 gives it a vector of two.
        xlake_sync::mirror_commit(location, &options, "3", |_| {})
            .await
            .unwrap();
        assert_eq!(summary_of(&root, "3").await["total-position-deletes"], "1");
        for v in 4..10 {
            std::fs::remove_file(root.join(format!("_delta_log/{v:020}.json"))).unwrap();
        }
        sync_with(&root, &options).await.unwrap();
        let after = summary_of(&root, "10").await;
        assert_eq!(
            (
                after["total-delete-files"].as_str(),
                after["total-position-deletes"].as_str()
            ),
            ("1", "2"),
            "{format_version:?}: {after:?}"
        );
        assert_eq!(
            after["total-data-files"],
            summary_of(&root, "3").await["total-data-files"]
        );
        let check = xlake_sync::check_with(location, &options, true, true)
            .await
            .unwrap();
        assert!(check.consistent(), "{format_version:?}: {check:?}");
    }
}

#[tokio::test]
async fn an_unreadable_deletion_vector_stops_the_sync_before_its_version() {
    let (_dir, root) = extract("table_with_deletion_logs");
    let vector = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "bin"))
        .unwrap();
    std::fs::write(&vector, b"\x01garbage").unwrap();
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("deletion vector") && err.contains("version"),
        "{err}"
    );
    let done = mirrored(&root).await;
    assert!(
        done.len() >= 3 && !done.contains(&"4".to_string()),
        "{done:?}"
    );
}

#[tokio::test]
async fn column_mapping_ids_become_field_ids_and_physical_names_are_mapped() {
    for name in ["column_mapping_id", "table_with_column_mapping"] {
        let (_dir, root) = extract(name);
        sync_with(&root, &SyncOptions::default()).await.unwrap();
        let log =
            std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
        let metadata = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap())
            .load()
            .await
            .unwrap()
            .unwrap()
            .metadata;
        let schema_line = log.lines().find(|l| l.contains("schemaString")).unwrap();
        let meta: serde_json::Value = serde_json::from_str(schema_line).unwrap();
        let schema: serde_json::Value =
            serde_json::from_str(meta["metaData"]["schemaString"].as_str().unwrap()).unwrap();
        let mapping = &metadata.properties()["schema.name-mapping.default"];
        for f in schema["fields"].as_array().unwrap() {
            let id = f["metadata"]["delta.columnMapping.id"].as_i64().unwrap() as i32;
            let physical = f["metadata"]["delta.columnMapping.physicalName"]
                .as_str()
                .unwrap();
            assert_eq!(
                metadata
                    .current_schema()
                    .field_by_name(f["name"].as_str().unwrap())
                    .unwrap()
                    .id,
                id,
                "{name}"
            );
            assert!(mapping.contains(physical), "{name}: {mapping}");
        }
    }
}

/// Append `version` with no file change (`SET TBLPROPERTIES`) and sync.
async fn sync_an_empty_version(root: &Path, version: u64) -> xlake_sync::SyncReport {
    write_commit(
        root,
        version,
        "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
    );
    sync_with(root, &SyncOptions::default()).await.unwrap()
}

#[tokio::test]
async fn an_incremental_sync_reads_only_the_new_commits() {
    let (_dir, root) = extract("evolving_typed_partitions");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // History before the last checkpoint (version 11) is never read again: corrupt it.
    write_commit(&root, 3, "not json at all");
    let report = sync_an_empty_version(&root, 12).await;
    assert_eq!(report.written.len(), 1);
    assert_eq!(report.written[0].commit.id, "12");
    assert_eq!(mirrored(&root).await.last().map(String::as_str), Some("12"));
}

#[tokio::test]
async fn an_incremental_sync_resumes_from_the_state_the_last_one_saved() {
    let (_dir, root) = extract("evolving_typed_partitions");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // The metaData and protocol in force come from the saved state, not from the log: a
    // checkpoint that can no longer be read is not read.
    let log = root.join("_delta_log");
    let mut spoiled = 0;
    for entry in std::fs::read_dir(&log).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".checkpoint.parquet") {
            std::fs::write(&path, b"not parquet").unwrap();
            spoiled += 1;
        }
    }
    assert!(spoiled > 0);
    let report = sync_an_empty_version(&root, 12).await;
    assert_eq!(report.written.len(), 1);
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let loaded = table.load().await.unwrap().unwrap();
    let saved: serde_json::Value = serde_json::from_str(loaded.source_state().unwrap()).unwrap();
    assert_eq!(saved["delta"]["version"], 12);
    assert!(saved["delta"]["metaData"]["schemaString"].is_string());
}

/// For every fixture and every version a sync could stop at, a replay resumed from the
/// saved state gives exactly the change sets one that reads the log again gives.
#[tokio::test]
async fn a_resumed_replay_equals_one_that_reads_the_log_again() {
    use xlake_source::{collect, MirrorState, TableSource};
    for name in ALL {
        let (_dir, root) = extract(name);
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        let Ok(delta) = xlake_delta::DeltaSource::open(store).await else {
            continue;
        };
        let Ok(replay) = delta.replay(&MirrorState::default()).await else {
            continue;
        };
        let full = collect(replay).await.changes;
        for (i, at) in full.iter().enumerate().take(full.len().saturating_sub(1)) {
            let commits = full[..=i].iter().map(|c| c.commit.id.clone()).collect();
            let with = MirrorState {
                commits,
                source_state: at.source_state.clone(),
                ..Default::default()
            };
            let without = MirrorState {
                source_state: None,
                ..with.clone()
            };
            let resumed = collect(delta.replay(&with).await.unwrap()).await.changes;
            let read = collect(delta.replay(&without).await.unwrap()).await.changes;
            assert!(!resumed.is_empty(), "{name} after {}", at.commit.id);
            assert_eq!(resumed, read, "{name} after {}", at.commit.id);
        }
    }
}

#[tokio::test]
async fn from_latest_writes_one_snapshot_of_the_current_state() {
    let (_dir, root) = extract("simple_table");
    let options = SyncOptions {
        from_latest: true,
        ..Default::default()
    };
    let report = sync_with(&root, &options).await.unwrap();
    assert_eq!(report.written.len(), 1);
    assert_eq!(mirrored(&root).await, ["4"]);
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(
        check.consistent() && check.before_mirroring == 4,
        "{check:?}"
    );
    // Later syncs go on commit by commit.
    write_commit(
        &root,
        5,
        "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
    );
    assert_eq!(sync_with(&root, &options).await.unwrap().written.len(), 1);
}

#[tokio::test]
async fn a_log_truncated_past_the_last_mirrored_version_resumes_from_its_checkpoint() {
    let (_dir, root) = extract("evolving_typed_partitions");
    let log = root.join("_delta_log");
    // Mirror versions 0-3 only.
    let parked = root.join("parked");
    std::fs::create_dir_all(&parked).unwrap();
    let version = |name: &str| name.get(..20).and_then(|v| v.parse::<u64>().ok());
    let later = |name: &str| {
        version(name).is_some_and(|v| v > 3)
            || name.contains("compacted")
            || name == "_last_checkpoint"
    };
    for e in std::fs::read_dir(&log).unwrap() {
        let p = e.unwrap().path();
        if later(p.file_name().unwrap().to_str().unwrap()) {
            std::fs::rename(&p, parked.join(p.file_name().unwrap())).unwrap();
        }
    }
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    for e in std::fs::read_dir(&parked).unwrap() {
        let p = e.unwrap().path();
        std::fs::rename(&p, log.join(p.file_name().unwrap())).unwrap();
    }
    // Log retention removes everything before the checkpoint at 11.
    for e in std::fs::read_dir(&log).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name != "_last_checkpoint"
            && (name.contains("compacted") || version(&name).is_some_and(|v| v < 11))
        {
            std::fs::remove_file(&p).unwrap();
        }
    }
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("removed from the log before they were mirrored")),
        "{:?}",
        report.notes
    );
    assert_eq!(mirrored(&root).await, ["0", "1", "2", "3", "11"]);
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

fn write_commit(root: &Path, version: u64, body: &str) {
    std::fs::write(root.join(format!("_delta_log/{version:020}.json")), body).unwrap();
}

#[tokio::test]
async fn bad_logs_name_table_version_and_file_and_change_nothing() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    let location = root.to_str().unwrap();

    write_commit(
        &root,
        3,
        "{\"commitInfo\":{\"timestamp\":1}}\n{\"add\":{\"path\":",
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("version 3")
            && err.contains("00000000000000000003.json")
            && err.contains(location)
            && err.contains("corrupt JSON"),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);

    write_commit(&root, 3, "{\"protocol\":{\"minReaderVersion\":3,\"minWriterVersion\":7,\"readerFeatures\":[\"madeUpFeature\"]}}\n");
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(err.contains("madeUpFeature"), "{err}");
    std::fs::remove_file(root.join("_delta_log/00000000000000000003.json")).unwrap();

    // An add without stats, of a file whose Parquet footer is garbage: the footer is read
    // for the row count and fails, naming the file and the version.
    let garbled = root.join("region=us/part-garbled.parquet");
    std::fs::write(&garbled, b"PAR1 this is not a parquet file at all PAR1").unwrap();
    write_commit(
        &root,
        3,
        "{\"commitInfo\":{\"timestamp\":1}}\n{\"add\":{\"path\":\"region=us/part-garbled.parquet\",\"partitionValues\":{\"region\":\"us\"},\"size\":43,\"modificationTime\":1,\"dataChange\":true}}\n",
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("part-garbled.parquet") && err.contains(location) && err.contains("footer"),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
    std::fs::remove_file(root.join("_delta_log/00000000000000000003.json")).unwrap();

    // A gap: version 4 without version 3.
    write_commit(&root, 4, "{\"commitInfo\":{\"timestamp\":1}}\n");
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("00000000000000000003.json") && err.contains("missing"),
        "{err}"
    );
    std::fs::remove_file(root.join("_delta_log/00000000000000000004.json")).unwrap();

    // _last_checkpoint naming a checkpoint that is not there.
    std::fs::write(
        root.join("_delta_log/_last_checkpoint"),
        "{\"version\":2,\"size\":3}",
    )
    .unwrap();
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("_last_checkpoint") && err.contains("version 2"),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
}

#[tokio::test]
async fn an_add_of_a_live_path_replaces_it_without_a_remove() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // ANALYZE ... COMPUTE STATISTICS re-adds a live file (dataChange false), no remove.
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000002.json")).unwrap();
    let add = log
        .lines()
        .find(|l| l.contains("\"add\""))
        .unwrap()
        .replace("\"dataChange\":true", "\"dataChange\":false");
    write_commit(&root, 3, &format!("{{\"commitInfo\":{{\"timestamp\":1900000000000,\"operation\":\"COMPUTE STATS\"}}}}\n{add}\n"));
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = summary_of(&root, "2").await;
    counted_once(&root, &before).await;
    // The same log mirrored in one first sync: the re-add is of a path live earlier in
    // the same replay, and still replaces it.
    std::fs::remove_dir_all(root.join("metadata")).unwrap();
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    counted_once(&root, &before).await;
}

/// Version 3's snapshot counts the files and records of `before` (version 2's summary),
/// and a deep check finds the mirror consistent.
async fn counted_once(root: &Path, before: &std::collections::HashMap<String, String>) {
    let after = summary_of(root, "3").await;
    assert_eq!(
        after["total-records"], before["total-records"],
        "the file counts once"
    );
    assert_eq!(after["total-data-files"], before["total-data-files"]);
    let check = xlake_sync::check_with(root.to_str().unwrap(), &SyncOptions::default(), true, true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

#[tokio::test]
async fn many_small_commits_merge_manifests_and_keep_every_file() {
    let (_dir, root) = extract("partitioned_3commits");
    let location = root.to_str().unwrap();
    // 150 more commits of one file each (copies of a real file); every 10th also removes
    // a file an earlier one added, so removals meet merged manifests.
    let v0 = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
    let add: serde_json::Value = v0
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v.get("add").is_some())
        .unwrap()["add"]
        .clone();
    let source = add["path"].as_str().unwrap().to_string();
    let dir = Path::new(&source).parent().unwrap();
    for v in 3..153u64 {
        let path = dir.join(format!("part-merge-{v}.parquet"));
        std::fs::copy(root.join(&source), root.join(&path)).unwrap();
        let mut new = add.clone();
        new["path"] = path.to_str().unwrap().into();
        let mut body = format!(
            "{{\"commitInfo\":{{\"timestamp\":{},\"operation\":\"WRITE\"}}}}\n{}\n",
            1_800_000_000_000u64 + v * 1000,
            serde_json::json!({ "add": new })
        );
        if v % 10 == 0 {
            let gone = dir.join(format!("part-merge-{}.parquet", v - 7));
            body.push_str(&format!(
                "{}\n",
                serde_json::json!({"remove": {"path": gone, "dataChange": true}})
            ));
        }
        write_commit(&root, v, &body);
    }
    // Two processes' worth: merging across a batch boundary and a fresh start.
    xlake_sync::mirror_commit(location, &SyncOptions::default(), "80", |_| {})
        .await
        .unwrap();
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!(mirrored(&root).await.len(), 153);
    let report = xlake_sync::inspect::inspect(location, &SyncOptions::default())
        .await
        .unwrap();
    assert!(
        report.iceberg.manifests < xlake_iceberg::merge::MIN_COUNT_TO_MERGE,
        "{} manifests in the current snapshot",
        report.iceberg.manifests
    );
    let check = xlake_sync::check_with(location, &SyncOptions::default(), true, true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

/// The current schema, partition specs and name mapping of a synced table.
async fn iceberg_shape(root: &Path) -> (String, String, Option<String>) {
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let m = table.load().await.unwrap().unwrap().metadata;
    (
        serde_json::to_string(m.current_schema()).unwrap(),
        serde_json::to_string(m.default_partition_spec()).unwrap(),
        m.properties().get("schema.name-mapping.default").cloned(),
    )
}

#[tokio::test]
async fn an_incremental_sync_sees_the_schema_a_full_replay_sees() {
    // The incremental path reads the schema from the newest metaData and protocol (the
    // commits since the last checkpoint, then that checkpoint's two columns); a full
    // replay from the first version must arrive at the same Iceberg schema.
    for name in ALL {
        let (_a, full) = extract(name);
        let (_b, stepped) = extract(name);
        let versions = commit_versions(&stepped);
        if versions.len() < 2 || sync_with(&full, &SyncOptions::default()).await.is_err() {
            continue;
        }
        for v in &versions[..versions.len() - 1] {
            let _ = xlake_sync::mirror_commit(
                stepped.to_str().unwrap(),
                &SyncOptions::default(),
                &v.to_string(),
                |_| {},
            )
            .await;
        }
        sync_with(&stepped, &SyncOptions::default()).await.unwrap();
        assert_eq!(
            iceberg_shape(&stepped).await,
            iceberg_shape(&full).await,
            "{name}"
        );
    }
}

/// With allowed data locations (as `serve` sets them), a commit adding a file outside them
/// stops the sync there, as a commit that cannot be read does: the commits before it are
/// mirrored, it and those after are not, and the error names it.
#[tokio::test]
async fn a_file_outside_the_allowed_locations_stops_the_sync_at_its_commit() {
    let (_dir, root) = extract("partitioned_3commits");
    let location = root.to_str().unwrap();
    write_commit(
        &root,
        3,
        "{\"commitInfo\":{\"timestamp\":1900000000000}}\n{\"add\":{\"path\":\"file:///etc/hostname\",\"partitionValues\":{},\"size\":1,\"modificationTime\":1,\"dataChange\":true,\"stats\":\"{\\\"numRecords\\\":1}\"}}\n",
    );
    write_commit(&root, 4, "{\"commitInfo\":{\"timestamp\":1900000001000}}\n");
    let options = SyncOptions {
        data_roots: Some(vec![location.to_string()]),
        ..Default::default()
    };
    let err = sync_with(&root, &options).await.unwrap_err();
    assert!(
        err.contains("source commit 3") && err.contains("--allow"),
        "{err}"
    );
    assert_eq!(mirrored(&root).await, ["0", "1", "2"]);
}

/// An add whose relative path climbs out of the table through `..` (the file is there):
/// refused naming table, version and path as a path outside the table, not reported as
/// missing. Spark resolves `..`, delta-rs does not: the readers disagree on the file.
#[tokio::test]
async fn a_relative_add_path_through_dot_dot_is_refused_as_outside_the_table() {
    let (dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    let outside = root.parent().unwrap().join("outside");
    assert!(
        outside.starts_with(dir.path()),
        "within the test's own folder"
    );
    std::fs::create_dir_all(&outside).unwrap();
    let add = v2_add(&root, |a| {
        std::fs::copy(
            root.join(a["path"].as_str().unwrap()),
            outside.join("x.parquet"),
        )
        .unwrap();
        a["path"] = "../outside/x.parquet".into();
    });
    write_commit(
        &root,
        3,
        &format!("{{\"commitInfo\":{{\"timestamp\":1900000000000}}}}\n{add}\n"),
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    let resolved = outside.join("x.parquet");
    for part in [
        root.to_str().unwrap(),
        "version 3",
        "../outside/x.parquet",
        "outside the table folder",
        resolved.to_str().unwrap(),
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(!err.contains("does not exist"), "{err}");
    assert_eq!(metadata_snapshot(&root), before, "nothing written");
}

/// Version 2's add line of `partitioned_3commits`, with `edit` applied to its add.
fn v2_add(root: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000002.json")).unwrap();
    let mut line: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .find(|v: &serde_json::Value| v.get("add").is_some())
        .unwrap();
    edit(&mut line["add"]);
    line.to_string()
}

#[tokio::test]
async fn a_data_change_add_of_a_path_live_before_the_sync_replaces_it() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // A writer adds a live file again (dataChange true, no remove): the protocol's
    // replacement, which an incremental sync must see as a first sync does.
    let add = v2_add(&root, |_| {});
    write_commit(
        &root,
        3,
        &format!(
            "{{\"commitInfo\":{{\"timestamp\":1900000000000,\"operation\":\"WRITE\"}}}}\n{add}\n"
        ),
    );
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    let v3 = &report.written[0];
    assert_eq!((v3.added, v3.removed), (1, 1), "+1 -1, as a first sync");
    let before = summary_of(&root, "2").await;
    counted_once(&root, &before).await;
    let incremental = summary_of(&root, "3").await;
    std::fs::remove_dir_all(root.join("metadata")).unwrap();
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    counted_once(&root, &before).await;
    assert_eq!(summary_of(&root, "3").await, incremental);
}

#[tokio::test]
async fn only_an_add_that_may_re_add_a_live_file_reads_the_live_files() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // The live paths before the sync can only be read from the whole log: with version 0
    // broken, reading them fails, which shows when they are read.
    let v0 = root.join("_delta_log/00000000000000000000.json");
    let v0_text = std::fs::read_to_string(&v0).unwrap();
    std::fs::write(&v0, "not json at all").unwrap();
    // A file created after every file before it is new: the live paths are not read.
    let new = "region=eu/part-new.parquet";
    let add = v2_add(&root, |a| {
        std::fs::copy(root.join(a["path"].as_str().unwrap()), root.join(new)).unwrap();
        a["path"] = new.into();
        a["modificationTime"] = 1_900_000_000_000i64.into();
    });
    write_commit(
        &root,
        3,
        &format!("{{\"commitInfo\":{{\"timestamp\":1900000000000}}}}\n{add}\n"),
    );
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // One that keeps its old creation time may be a re-add: they are read (and fail).
    let add = v2_add(&root, |_| {});
    write_commit(
        &root,
        4,
        &format!("{{\"commitInfo\":{{\"timestamp\":1900000001000}}}}\n{add}\n"),
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(err.contains("version 3"), "{err}");
    std::fs::write(&v0, v0_text).unwrap();
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let check = xlake_sync::check_with(root.to_str().unwrap(), &SyncOptions::default(), true, true)
        .await
        .unwrap();
    assert!(check.consistent(), "{check:?}");
}

#[tokio::test]
async fn two_adds_of_one_path_in_one_version_are_refused() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    let add = v2_add(&root, |_| {});
    let other = v2_add(&root, |a| a["size"] = 1013.into());
    write_commit(
        &root,
        3,
        &format!("{{\"commitInfo\":{{\"timestamp\":1900000000000}}}}\n{add}\n{other}\n"),
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    let path = "region=eu/part-00000-3f76a9b9-4203-4148-884f-baf0d99792c6-c000.snappy.parquet";
    assert!(
        err.contains("version 3")
            && err.contains("00000000000000000003.json")
            && err.contains(root.to_str().unwrap())
            && err.contains(path)
            && err.contains("twice"),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
    // A remove and an add of the path (a new deletion vector) is one replacement.
    let remove = serde_json::json!({"remove": {"path": path, "dataChange": true}});
    write_commit(
        &root,
        3,
        &format!("{{\"commitInfo\":{{\"timestamp\":1900000000000}}}}\n{remove}\n{add}\n"),
    );
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!((report.written[0].added, report.written[0].removed), (1, 1));
}

/// The path index a sync leaves (`xlake.path-index`), as its table-relative path.
fn path_index_of(root: &Path) -> String {
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let file = root.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    metadata["properties"]["xlake.path-index"]
        .as_str()
        .expect("a path index")
        .to_string()
}

/// Issue 46: a backfill leaves a path index (which manifest holds which file) for the
/// next commit that removes files. One that misleads, saying no manifest holds anything,
/// is set aside: the removal reads the manifests and mirrors as it would without it; an
/// unreadable one is not used either. Each removal leaves a fresh index.
#[tokio::test]
async fn a_path_index_that_misleads_or_cannot_be_read_is_set_aside() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let index = path_index_of(&root);
    let manifests: Vec<String> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .filter(|p| p.contains("-m") && p.ends_with(".avro"))
        .collect();
    // Every manifest listed, holding no path.
    let mut misleading = b"XLPI1".to_vec();
    misleading.extend((manifests.len() as u32).to_le_bytes());
    for m in &manifests {
        misleading.extend((m.len() as u32).to_le_bytes());
        misleading.extend(m.as_bytes());
        misleading.extend(0u32.to_le_bytes());
    }
    std::fs::write(root.join(&index), &misleading).unwrap();
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
    // Version 1 removes the first and third files version 0 adds; the others stay live.
    let add = |n: usize| {
        let line = log.lines().filter(|l| l.starts_with("{\"add\"")).nth(n);
        let add: serde_json::Value = serde_json::from_str(line.unwrap()).unwrap();
        add["add"]["path"].as_str().unwrap().to_string()
    };
    let remove = |path: &str| {
        format!("{{\"commitInfo\":{{\"timestamp\":1800000000000,\"operation\":\"DELETE\"}}}}\n{{\"remove\":{{\"path\":\"{path}\",\"deletionTimestamp\":1800000000000,\"dataChange\":true}}}}\n")
    };
    write_commit(&root, 3, &remove(&add(1)));
    common::sync_consistent(&root, 4, "a misleading path index").await;
    let fresh = path_index_of(&root);
    assert_ne!(fresh, index, "the removal leaves its own index");

    std::fs::write(root.join(&fresh), b"XLPI1\xff").unwrap();
    write_commit(&root, 4, &remove(&add(3)));
    common::sync_consistent(&root, 5, "an unreadable path index").await;
}

/// A batch whose change fails in staging (here a data file that is not there) after a
/// removal publishes the snapshots before it, and the path index their metadata names
/// with them: the failed change had taken the batch's last manifest list, so the index
/// was named but never written and later removals read every manifest.
#[tokio::test]
async fn a_batch_failing_after_a_removal_publishes_the_path_index_it_names() {
    let (_dir, root) = extract("partitioned_3commits");
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
    let line = log
        .lines()
        .filter(|l| l.starts_with("{\"add\""))
        .nth(1)
        .unwrap();
    let add: serde_json::Value = serde_json::from_str(line).unwrap();
    let path = add["add"]["path"].as_str().unwrap();
    write_commit(
        &root,
        3,
        &format!("{{\"commitInfo\":{{\"timestamp\":1800000000000}}}}\n{{\"remove\":{{\"path\":\"{path}\",\"deletionTimestamp\":1800000000000,\"dataChange\":true}}}}\n"),
    );
    write_commit(
        &root,
        4,
        "{\"commitInfo\":{\"timestamp\":1800000001000}}\n{\"add\":{\"path\":\"missing.parquet\",\"partitionValues\":{},\"size\":1,\"modificationTime\":1,\"dataChange\":true}}\n",
    );
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains("source commit 4") && err.contains("missing.parquet"),
        "{err}"
    );
    assert_eq!(mirrored(&root).await, ["0", "1", "2", "3"]);
    let index = path_index_of(&root);
    assert!(root.join(&index).is_file(), "{index} is named but missing");
}

/// The path index files under `metadata/`.
fn path_index_files(root: &Path) -> usize {
    std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .to_str()
                .unwrap()
                .ends_with("-paths.bin")
        })
        .count()
}

/// A backfill publishes a version per batch of 100 commits but writes the path index
/// only in its last batch (one index, not one per batch: each holds every live file),
/// also when the commits fill the last batch exactly; the next removal uses it.
#[tokio::test]
async fn a_backfill_of_many_batches_writes_one_path_index() {
    let (_dir, root) = extract("partitioned_3commits");
    let add = v2_add(&root, |_| {});
    let source: serde_json::Value = serde_json::from_str(&add).unwrap();
    let source = source["add"]["path"].as_str().unwrap().to_string();
    let dir = Path::new(&source).parent().unwrap().to_path_buf();
    let commit = |v: u64| {
        let path = dir.join(format!("part-batch-{v}.parquet"));
        std::fs::copy(root.join(&source), root.join(&path)).unwrap();
        let new = v2_add(&root, |a| a["path"] = path.to_str().unwrap().into());
        let ts = 1_800_000_000_000u64 + v * 1000;
        write_commit(
            &root,
            v,
            &format!("{{\"commitInfo\":{{\"timestamp\":{ts}}}}}\n{new}\n"),
        );
    };
    // Versions 0..=99: one batch of exactly 100, the last.
    (3..100).for_each(commit);
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!(path_index_files(&root), 1);
    let first = path_index_of(&root);
    // 150 more: two batches, two versions, one more index, named by the second.
    (100..250).for_each(commit);
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!(path_index_files(&root), 2);
    assert_ne!(path_index_of(&root), first);
    let remove = format!(
        "{{\"commitInfo\":{{\"timestamp\":1900000000000,\"operation\":\"DELETE\"}}}}\n{}\n",
        serde_json::json!({"remove": {"path": dir.join("part-batch-7.parquet"), "dataChange": true}})
    );
    write_commit(&root, 250, &remove);
    common::sync_consistent(&root, 251, "a removal after a backfill of many batches").await;
}

/// The ancestors a path index segment names and how many manifests it covers (the
/// `XLPI2` header; crates/xlake-iceberg/src/ops/path_index/segment.rs).
fn segment_header(root: &Path, segment: &str) -> (Vec<String>, u32) {
    let bytes = std::fs::read(root.join(segment)).unwrap();
    assert!(bytes.starts_with(b"XLPI2"), "{segment}");
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let (mut at, mut ancestors) = (9, Vec::new());
    for _ in 0..u32_at(5) {
        let len = u32_at(at) as usize;
        ancestors.push(String::from_utf8(bytes[at + 4..at + 4 + len].to_vec()).unwrap());
        at += 4 + len;
    }
    (ancestors, u32_at(at))
}

/// Issue 46: a commit that removes files writes a small path index segment of the
/// manifests it wrote, naming the chain it builds on, and a full index once the chain
/// holds 8 segments. Cleanup keeps the segments the current one builds on (the next
/// removal still extends the chain); a rebuild of a copy sets them aside.
#[tokio::test]
async fn removals_extend_the_path_index_chain_and_cleanup_keeps_it() {
    let (dir, root) = extract("partitioned_3commits");
    let add = v2_add(&root, |_| {});
    let source: serde_json::Value = serde_json::from_str(&add).unwrap();
    let source = source["add"]["path"].as_str().unwrap().to_string();
    let folder = Path::new(&source).parent().unwrap().to_path_buf();
    let file = |v: u64| folder.join(format!("part-chain-{v}.parquet"));
    for v in 3..23 {
        std::fs::copy(root.join(&source), root.join(file(v))).unwrap();
        let new = v2_add(&root, |a| a["path"] = file(v).to_str().unwrap().into());
        let ts = 1_800_000_000_000u64 + v * 1000;
        write_commit(
            &root,
            v,
            &format!("{{\"commitInfo\":{{\"timestamp\":{ts}}}}}\n{new}\n"),
        );
    }
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let full = path_index_of(&root);
    let (ancestors, covered) = segment_header(&root, &full);
    assert!(
        ancestors.is_empty() && covered > 20,
        "{ancestors:?} {covered}"
    );
    let mut depths = Vec::new();
    for (i, v) in (23..33).enumerate() {
        let gone = serde_json::json!({"remove": {"path": file(3 + i as u64), "dataChange": true}});
        let ts = 1_900_000_000_000u64 + v * 1000;
        write_commit(
            &root,
            v,
            &format!(
                "{{\"commitInfo\":{{\"timestamp\":{ts},\"operation\":\"DELETE\"}}}}\n{gone}\n"
            ),
        );
        common::sync_consistent(&root, v as usize + 1, "a removal on the chain").await;
        let (ancestors, covered) = segment_header(&root, &path_index_of(&root));
        assert!(
            ancestors.is_empty() || covered <= 2,
            "a segment holds what the commit wrote"
        );
        depths.push(ancestors.len());
    }
    assert_eq!(depths, [1, 2, 3, 4, 5, 6, 7, 0, 1, 2]);
    // Everything old: cleanup keeps the current segment and the two it builds on.
    for e in std::fs::read_dir(root.join("metadata")).unwrap() {
        let f = std::fs::File::options()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(4 * 86_400))
            .unwrap();
    }
    let (code, out) = common::xlake(&["cleanup", root.to_str().unwrap(), "--older-than", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(path_index_files(&root), 3, "{out}");
    let gone = serde_json::json!({"remove": {"path": file(13), "dataChange": true}});
    write_commit(
        &root,
        33,
        &format!("{{\"commitInfo\":{{\"timestamp\":1950000000000}}}}\n{gone}\n"),
    );
    common::sync_consistent(&root, 34, "a removal after cleanup").await;
    assert_eq!(segment_header(&root, &path_index_of(&root)).0.len(), 3);
    // A copy rebuilt: the old chain is set aside with the old history, none is orphaned.
    let copy = dir.path().join("copy");
    copy_tree(&root, &copy);
    let at = copy.to_str().unwrap();
    let (code, out) = common::xlake(&["sync", "--rebuild", at]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(path_index_files(&copy), 1, "the rebuild's own index: {out}");
    let args = [
        "cleanup",
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
        "--dry-run",
        at,
    ];
    let (code, out) = common::xlake(&args);
    assert!(
        code == 0 && out.contains(": 0 orphan metadata files"),
        "{out}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        match e.file_type().unwrap().is_dir() {
            true => copy_tree(&e.path(), &to.join(e.file_name())),
            false => drop(std::fs::copy(e.path(), to.join(e.file_name())).unwrap()),
        }
    }
}

/// In-commit mode asked for a commit already mirrored writes nothing and says how many
/// listed commits up to it a snapshot records (not 0 and 0, which read as nothing mirrored).
#[tokio::test]
async fn a_commit_already_mirrored_reports_what_is_mirrored_up_to_it() {
    let (_dir, root) = extract("table_with_deletion_logs");
    let location = root.to_str().unwrap();
    let options = SyncOptions::default();
    let first = xlake_sync::mirror_commit(location, &options, "3", |_| {})
        .await
        .unwrap();
    assert_eq!(first.written.len(), 4, "versions 0-3 mirrored");
    let again = xlake_sync::mirror_commit(location, &options, "3", |_| {})
        .await
        .unwrap();
    assert_eq!(
        (
            again.written.len(),
            again.source_commits,
            again.already_mirrored
        ),
        (0, 4, 4)
    );
}

/// Issue 47: an incremental sync looks up on storage only the added files whose commit does
/// not prove they exist. An add inside the table with its `size` and `modificationTime` is
/// its writer's record of the file it wrote; one without a time is looked up (and refused
/// when missing), as is every file with `--check-every-file`. (A first sync looks up every
/// file: `a_log_that_starts_at_a_checkpoint_starts_there`, the interop suite's log-only
/// tables.)
#[tokio::test]
async fn an_incremental_sync_looks_up_only_the_files_its_commit_does_not_prove() {
    let (_dir, root) = extract("partitioned_3commits");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    let missing = |timed: bool| {
        let add = v2_add(&root, |a| {
            a["path"] = "region=eu/missing-3.parquet".into();
            if !timed {
                a.as_object_mut().unwrap().remove("modificationTime");
            }
        });
        format!("{{\"commitInfo\":{{\"timestamp\":1900000000000}}}}\n{add}\n")
    };
    let refused = |err: String| {
        assert!(
            err.contains("missing-3.parquet")
                && err.contains("does not exist")
                && err.contains("source commit 3"),
            "{err}"
        );
    };
    // No time: not proven, looked up, refused; nothing written.
    write_commit(&root, 3, &missing(false));
    refused(sync_with(&root, &SyncOptions::default()).await.unwrap_err());
    assert_eq!(metadata_snapshot(&root), before);
    // Its writer's time: proven, yet looked up when every file is to be.
    write_commit(&root, 3, &missing(true));
    let every = SyncOptions {
        check_every_file: true,
        ..Default::default()
    };
    refused(sync_with(&root, &every).await.unwrap_err());
    assert_eq!(metadata_snapshot(&root), before);
    // By default the writer's record stands: no request for the file.
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!(report.written.len(), 1);
}

/// A log that now ends before the newest version the mirror holds (the table dropped and
/// written anew at the same place): refused, nothing written (hostile review, 2026-12-06:
/// "up to date", exit 0, and later commits were mirrored on top of the old table's files).
#[tokio::test]
async fn a_log_that_ends_before_the_mirrored_version_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    for v in 1..=4 {
        std::fs::remove_file(root.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains(root.to_str().unwrap())
            && err.contains("the log ends at version 0, before version 4"),
        "{err}"
    );
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// A table dropped and written anew at the same place whose new log has passed the
/// mirrored version: refused by its table id, nothing written (hostile review, 2026-12-06:
/// its commits were mirrored on top of the old table's files). A commit file that only
/// changed its time (a copy) goes on.
#[tokio::test]
async fn a_table_written_anew_past_the_mirrored_version_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let rewrite = |version: u64, edit: &dyn Fn(String) -> String| {
        let path = root.join(format!("_delta_log/{version:020}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, edit(text)).unwrap();
    };
    // The same log, its newest commit file written again (a copy without its times).
    std::thread::sleep(std::time::Duration::from_millis(5));
    rewrite(4, &|text| text);
    let report = sync_an_empty_version(&root, 5).await;
    assert_eq!(report.written.len(), 1);
    // A new table at the same place: another id, versions past the mirrored one.
    let old_id = table_id(&root);
    let new_id = "0c0ffee0-0000-4000-8000-000000000001";
    write_anew(&root, &old_id, new_id, 5);
    write_commit(
        &root,
        6,
        "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"WRITE\"}}\n",
    );
    let before = metadata_snapshot(&root);
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    assert!(
        err.contains(root.to_str().unwrap())
            && err.contains("version 5 is not the one the mirror holds")
            && err.contains(new_id)
            && err.contains(&old_id),
        "{err}"
    );
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// The table id (`metaData.id`) version 0 of the Delta table at `root` gives.
fn table_id(root: &Path) -> String {
    let first = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json"));
    let line = first
        .unwrap()
        .lines()
        .find(|l| l.contains("\"metaData\""))
        .map(str::to_string)
        .unwrap();
    serde_json::from_str::<serde_json::Value>(&line).unwrap()["metaData"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Versions `0..=last` of the log at `root` written anew (later, as new files) with the
/// table id `new_id` for `old_id`: a table dropped and created again at the same place.
fn write_anew(root: &Path, old_id: &str, new_id: &str, last: u64) {
    std::thread::sleep(std::time::Duration::from_millis(5));
    for v in 0..=last {
        let path = root.join(format!("_delta_log/{v:020}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, text.replace(old_id, new_id)).unwrap();
    }
}

/// [`write_anew`], each commit file then given the time the one it replaced had, to the
/// nanosecond, as a copy with its times kept gives it (`cp -p`, `rsync -t`): the same
/// time and (the ids being as long) the same size, perhaps on the inode just freed.
fn write_anew_keeping_times(root: &Path, old_id: &str, new_id: &str, last: u64) {
    let log = root.join("_delta_log");
    let file = |v: u64| log.join(format!("{v:020}.json"));
    let modified = |v: u64| std::fs::metadata(file(v)).unwrap().modified().unwrap();
    let times: Vec<_> = (0..=last).map(modified).collect();
    write_anew(root, old_id, new_id, last);
    for (v, time) in (0..=last).zip(times) {
        let f = std::fs::File::options().write(true).open(file(v)).unwrap();
        f.set_modified(time).unwrap();
        assert_eq!(modified(v), time, "the time kept");
    }
}

/// A table written anew with as many versions as the mirror holds, its commit files
/// given the times the old ones had (a copy of another table's log with its times kept,
/// or a table written anew within the same clock tick): refused by its table id, then
/// with one more version too, nothing written (hostile review 5, D2: the same time was
/// taken for the same file, "up to date", then its versions mirrored on top of the old
/// table's files, exit 0). The same log copied with its times kept still syncs.
#[tokio::test]
async fn a_table_written_anew_with_its_times_kept_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let old_id = table_id(&root);
    // The same log, its commit files written again with their times kept: a copy.
    write_anew_keeping_times(&root, &old_id, &old_id, 4);
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert!(report.written.is_empty(), "{report:?}");
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), false)
        .await
        .unwrap();
    assert!(check.not_the_mirrored_table.is_none(), "{check:?}");
    // Another table's log at the same place, with the times of the mirrored one.
    let new_id = "0c0ffee0-0000-4000-8000-000000000006";
    write_anew_keeping_times(&root, &old_id, new_id, 4);
    let before = metadata_snapshot(&root);
    let refused = |what: &str, err: String| {
        for part in [
            root.to_str().unwrap(),
            "version 4 is not the one the mirror holds",
            new_id,
            &old_id,
        ] {
            assert!(err.contains(part), "{what}: {part}: {err}");
        }
    };
    let as_many = sync_with(&root, &SyncOptions::default()).await;
    refused("as many versions", as_many.unwrap_err());
    let why = not_the_mirrored_table(&root).await;
    assert!(why.contains(new_id) && why.contains(&old_id), "{why}");
    write_commit(
        &root,
        5,
        "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"WRITE\"}}\n",
    );
    let more = sync_with(&root, &SyncOptions::default()).await;
    refused("one more version", more.unwrap_err());
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// In-commit mode mirrors up to its version while the log holds later ones (another
/// writer's): the state it saves knows its commit file's time too, so a table written anew
/// past that version is refused by its id (hostile review 3, 2026-12-06: only the log's
/// newest version kept it, and the new table was mirrored on top of the old one).
#[test]
fn a_table_written_anew_after_an_in_commit_mirror_is_refused() {
    let (_dir, root) = extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["commit", t, "--version", "2"]);
    assert_eq!(code, 0, "{out}");
    let old_id = table_id(&root);
    let new_id = "0c0ffee0-0000-4000-8000-000000000002";
    write_anew(&root, &old_id, new_id, 4);
    let before = metadata_snapshot(&root);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    for part in [
        t,
        "version 2 is not the one the mirror holds",
        new_id,
        &old_id,
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// A table restored from a copy older than the mirror and written past it keeps its id,
/// but its version at the mirrored one is another commit: refused by that commit's time,
/// nothing written (hostile review 3, 2026-12-06: the new commits were mirrored on top of
/// the commits the restore dropped).
#[tokio::test]
async fn a_table_restored_from_an_older_copy_and_written_past_the_mirror_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    // Version 4 written again after a restore to version 3: another commit, same id.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let path = root.join("_delta_log/00000000000000000004.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, text.replace("1587968626537", "1900000000000")).unwrap();
    write_commit(
        &root,
        5,
        "{\"commitInfo\":{\"timestamp\":1900000000001,\"operation\":\"WRITE\"}}\n",
    );
    let before = metadata_snapshot(&root);
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    for part in [
        root.to_str().unwrap(),
        "version 4 is not the one the mirror holds",
        path.to_str().unwrap(),
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// A first sync that starts at a checkpoint, the log's newest version: the state it saves
/// knows that version's commit file's time too, so a table written anew past it is refused
/// by its id (hostile review 3, 2026-12-06: the checkpoint's state kept no time, was
/// trusted, and the new table's commits were mirrored on top of the old one).
#[tokio::test]
async fn a_table_written_anew_past_a_mirrored_checkpoint_is_refused() {
    let (_dir, root) = extract("checkpoints_vacuumed");
    let log = root.join("_delta_log");
    for entry in std::fs::read_dir(&log).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("00000000000000000010.") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let options = SyncOptions {
        skip_file_check: true,
        ..Default::default()
    };
    sync_with(&root, &options).await.unwrap();
    // Another table's log (another id) at the same place, written past version 10.
    std::thread::sleep(std::time::Duration::from_millis(5));
    std::fs::remove_dir_all(&log).unwrap();
    let (_other_dir, other) = extract("simple_table");
    std::fs::create_dir(&log).unwrap();
    for v in 0..=4u64 {
        let name = format!("{v:020}.json");
        std::fs::copy(other.join("_delta_log").join(&name), log.join(&name)).unwrap();
    }
    for v in 5..=11u64 {
        write_commit(
            &root,
            v,
            "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
        );
    }
    let before = metadata_snapshot(&root);
    let err = sync_with(&root, &options).await.unwrap_err();
    for part in [
        root.to_str().unwrap(),
        "version 10 is not the one the mirror holds",
        &table_id(&other),
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

/// The log of the `checkpoints_vacuumed` fixture at `root` cut to start at its checkpoint
/// of version 10 (commits 5-9 and the checkpoint of 5 removed), as log retention leaves it.
fn start_at_checkpoint_10(root: &Path) {
    let log = root.join("_delta_log");
    for v in 5..=9u64 {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    for entry in std::fs::read_dir(&log).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with("00000000000000000005.checkpoint") {
            std::fs::remove_file(path).unwrap();
        }
    }
}

/// A table dropped and written anew at the same place whose new log starts at a
/// checkpoint past the mirrored version: refused by the checkpoint's table id, nothing
/// written (hostile review 4, F8: mirrored as versions removed before they were mirrored,
/// the newest snapshot holding the new table's files and the older ones the old table's).
#[tokio::test]
async fn a_table_written_anew_from_a_checkpoint_past_the_mirror_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let old_id = table_id(&root);
    // Another table's log at the same place, starting at its checkpoint of version 10.
    let (_other_dir, other) = extract("checkpoints_vacuumed");
    start_at_checkpoint_10(&other);
    let log = root.join("_delta_log");
    std::fs::remove_dir_all(&log).unwrap();
    std::fs::rename(other.join("_delta_log"), &log).unwrap();
    let options = SyncOptions {
        skip_file_check: true,
        ..Default::default()
    };
    let before = metadata_snapshot(&root);
    let err = sync_with(&root, &options).await.unwrap_err();
    let checkpoint = log.join("00000000000000000010.checkpoint.parquet");
    for part in [
        root.to_str().unwrap(),
        "the checkpoint of version 10",
        checkpoint.to_str().unwrap(),
        "up to version 4",
        &old_id,
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(metadata_snapshot(&root) == before, "nothing written");
    let why = not_the_mirrored_table(&root).await;
    assert!(why.contains("the checkpoint of version 10"), "{why}");
}

/// What plain `check` says of a table that is not the one its mirror holds: it finds it
/// inconsistent, and why.
async fn not_the_mirrored_table(root: &Path) -> String {
    let report = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), false)
        .await
        .unwrap();
    assert!(!report.consistent, "{report:?}");
    report.not_the_mirrored_table.expect("a finding")
}

/// The same table's log cleaned up past the mirrored version (its commits after it
/// removed, as Delta's log retention does, the log starting at a later checkpoint): the
/// checkpoint's id is the mirror's, and the table is mirrored from there as before.
#[tokio::test]
async fn a_log_cleaned_up_past_the_mirror_still_syncs() {
    let (_dir, root) = extract("checkpoints_vacuumed");
    let log = root.join("_delta_log");
    let aside = tempfile::tempdir().unwrap();
    // Mirror versions 5-7 only: the later files set aside, then put back.
    let mut later: Vec<String> = (8..=12u64).map(|v| format!("{v:020}.json")).collect();
    for entry in std::fs::read_dir(&log).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.starts_with("00000000000000000010.checkpoint") || name == "_last_checkpoint" {
            later.push(name);
        }
    }
    for name in &later {
        std::fs::rename(log.join(name), aside.path().join(name)).unwrap();
    }
    let options = SyncOptions {
        skip_file_check: true,
        ..Default::default()
    };
    sync_with(&root, &options).await.unwrap();
    assert_eq!(mirrored(&root).await, ["5", "6", "7"]);
    for name in &later {
        std::fs::rename(aside.path().join(name), log.join(name)).unwrap();
    }
    start_at_checkpoint_10(&root);
    let report = sync_with(&root, &options).await.unwrap();
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("removed from the log")),
        "{:?}",
        report.notes
    );
    assert_eq!(
        mirrored(&root).await,
        ["5", "6", "7", "10", "11", "12"].map(String::from)
    );
}

/// A table written anew whose log has as many versions as the mirror holds (nothing new
/// to sync): refused by its table id where it was reported up to date (hostile review 4,
/// F8); the same log copied (its newest commit file's time changed, nothing else) is still
/// up to date, and a restore to an older copy that wrote another commit at the mirrored
/// version is refused by that commit's time.
#[tokio::test]
async fn a_table_written_anew_with_as_many_versions_is_refused() {
    let (_dir, root) = extract("simple_table");
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    let before = metadata_snapshot(&root);
    let newest = root.join("_delta_log/00000000000000000004.json");
    let text = std::fs::read_to_string(&newest).unwrap();
    let rewrite = |text: &str| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::remove_file(&newest).unwrap();
        std::fs::write(&newest, text).unwrap();
    };
    // A copy: up to date, nothing written.
    rewrite(&text);
    let report = sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert!(report.written.is_empty());
    assert!(metadata_snapshot(&root) == before, "nothing written");
    let check = xlake_sync::check(root.to_str().unwrap(), &SyncOptions::default(), false)
        .await
        .unwrap();
    assert!(
        check.consistent && check.not_the_mirrored_table.is_none(),
        "{check:?}"
    );
    // Restored from an older copy and written again up to the mirrored version.
    rewrite(&text.replace("1587968626537", "1900000000000"));
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    for part in [
        root.to_str().unwrap(),
        "version 4 is not the one the mirror holds",
        newest.to_str().unwrap(),
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    rewrite(&text);
    // Written anew: another id, as many versions.
    let old_id = table_id(&root);
    let new_id = "0c0ffee0-0000-4000-8000-000000000003";
    write_anew(&root, &old_id, new_id, 4);
    let err = sync_with(&root, &SyncOptions::default()).await.unwrap_err();
    for part in [
        root.to_str().unwrap(),
        "version 4 is not the one the mirror holds",
        new_id,
        &old_id,
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(metadata_snapshot(&root) == before, "nothing written");
    // Plain `check` reports what the sync refuses (it compared listings only).
    let why = not_the_mirrored_table(&root).await;
    assert!(why.contains(new_id) && why.contains(&old_id), "{why}");
}

/// A mirror whose newest version is a checkpoint without its commit file (the log started
/// there on the first sync: the state saved with it has no commit file time), then the
/// table dropped and written anew at the same place with as many versions, then one more:
/// both must be refused by the table id (hostile review 5, D1: "up to date", then the new
/// table's version 12 mirrored on top of the old table's files, exit 0).
#[tokio::test]
async fn a_table_written_anew_over_a_mirror_ending_at_a_bare_checkpoint_is_refused() {
    let (_dir, root) = extract("evolving_typed_partitions");
    let log = root.join("_delta_log");
    let old_id = table_id(&root);
    let commits: Vec<String> = (0..=11u64)
        .map(|v| std::fs::read_to_string(log.join(format!("{v:020}.json"))).unwrap())
        .collect();
    // The log as the first sync sees it: the checkpoint of version 11 alone.
    for entry in std::fs::read_dir(&log).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name != "00000000000000000011.checkpoint.parquet" && name != "_last_checkpoint" {
            std::fs::remove_file(path).unwrap();
        }
    }
    sync_with(&root, &SyncOptions::default()).await.unwrap();
    assert_eq!(mirrored(&root).await, ["11"]);
    // Dropped and written anew: another id, versions 0-11 as commit files.
    std::thread::sleep(std::time::Duration::from_millis(5));
    std::fs::remove_dir_all(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let new_id = "0c0ffee0-0000-4000-8000-000000000005";
    for (v, text) in commits.iter().enumerate() {
        std::fs::write(
            log.join(format!("{v:020}.json")),
            text.replace(&old_id, new_id),
        )
        .unwrap();
    }
    let before = metadata_snapshot(&root);
    let as_many = sync_with(&root, &SyncOptions::default()).await;
    assert!(
        as_many.as_ref().is_err_and(|e| e.contains(new_id)),
        "as many versions: {as_many:?}"
    );
    write_commit(
        &root,
        12,
        "{\"commitInfo\":{\"timestamp\":1900000000000}}\n",
    );
    let more = sync_with(&root, &SyncOptions::default()).await;
    assert!(
        more.as_ref().is_err_and(|e| e.contains(new_id)),
        "more versions: {more:?}"
    );
    assert!(metadata_snapshot(&root) == before, "nothing written");
}
