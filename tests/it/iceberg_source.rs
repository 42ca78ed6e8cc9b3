//! The Iceberg source as the engine sees it: which folders are Iceberg sources (metadata
//! that is not a mirror), Iceberg into Iceberg refused with nothing written, a
//! non-identity partition transform refused naming table, snapshot and file. Tables are
//! made by mirroring a Parquet folder, then taking xlake's marks out of its metadata (it
//! is then an Iceberg table some other writer could have written).
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use xlake_sync::{sources, sync, SyncError, SyncOptions};

fn write_parquet(path: &Path, ids: &[i64]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
    let column = Arc::new(Int64Array::from(ids.to_vec()));
    let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// A Parquet folder at `root` mirrored as Iceberg by xlake.
async fn mirrored(root: &Path) {
    write_parquet(&root.join("data/a.parquet"), &[1, 2, 3]);
    let options = SyncOptions {
        format: Some("parquet".into()),
        ..Default::default()
    };
    sync(root.to_str().unwrap(), &options, |_| {})
        .await
        .unwrap();
}

/// Every metadata file of `root` rewritten by `edit`.
fn edit_metadata(root: &Path, mut edit: impl FnMut(&mut serde_json::Value)) {
    for entry in std::fs::read_dir(root.join("metadata")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_str().unwrap().ends_with(".metadata.json") {
            let mut json: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            edit(&mut json);
            std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        }
    }
}

/// xlake's marks taken out: no `XTABLE_METADATA`, no `xlake.*` property.
fn foreign(json: &mut serde_json::Value) {
    for s in json["snapshots"].as_array_mut().unwrap() {
        s["summary"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| !k.starts_with("XTABLE") && !k.starts_with("xlake."));
    }
    json["properties"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with("xlake."));
}

/// Options mirroring into a Delta log.
fn to_delta() -> SyncOptions {
    SyncOptions {
        target: Some("delta".into()),
        ..Default::default()
    }
}

async fn detected(root: &Path) -> Option<&'static str> {
    let store = xlake_storage::TableStore::open(root.to_str().unwrap()).unwrap();
    sources::detect(&store, None).await.unwrap().map(|k| k.name)
}

fn metadata_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_mirror_is_never_an_iceberg_source_and_iceberg_into_iceberg_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mirrored(root).await;
    // xlake's own mirror: the folder is what the mirror records (a Parquet folder).
    assert_eq!(detected(root).await, Some("parquet"));
    edit_metadata(root, foreign);
    assert_eq!(detected(root).await, Some("iceberg"));
    let before = metadata_files(root);
    let err = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::SameFormat { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}: ", root.display())),
        "{message}"
    );
    assert!(message.contains("Iceberg"), "{message}");
    assert_eq!(metadata_files(root), before, "nothing written");
    // Into Delta it is mirrored, one version per snapshot.
    let to_delta = to_delta();
    let report = sync(root.to_str().unwrap(), &to_delta, |_| {})
        .await
        .unwrap();
    assert_eq!(report.written.len(), 1, "{report:?}");
    assert_eq!(report.format, "ICEBERG");
    assert_eq!(
        metadata_files(root),
        before,
        "the Iceberg table is only read"
    );
    // Its Delta mirror does not make the folder a Delta table.
    assert_eq!(detected(root).await, Some("iceberg"));
}

#[tokio::test]
async fn a_bucket_partition_is_refused_naming_table_snapshot_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mirrored(root).await;
    edit_metadata(root, |json| {
        foreign(json);
        let bucket = serde_json::json!({"spec-id": 1, "fields": [
            {"name": "id_bucket", "transform": "bucket[4]", "source-id": 1, "field-id": 1000}]});
        json["partition-specs"].as_array_mut().unwrap().push(bucket);
        json["default-spec-id"] = 1.into();
        json["last-partition-id"] = 1000.into();
    });
    let to_delta = to_delta();
    let err = sync(root.to_str().unwrap(), &to_delta, |_| {})
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}: snapshot ", root.display())),
        "{message}"
    );
    assert!(
        message.contains("snap-"),
        "names the manifest list: {message}"
    );
    assert!(
        message.contains("partition field id_bucket is bucket[4](id)"),
        "{message}"
    );
    assert!(
        !root.join("_delta_log").exists()
            || std::fs::read_dir(root.join("_delta_log")).unwrap().count() == 0
    );
}

#[tokio::test]
async fn a_main_branch_rolled_back_under_its_delta_mirror_is_refused_naming_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mirrored(root).await;
    write_parquet(&root.join("data/b.parquet"), &[4, 5]);
    let parquet = SyncOptions {
        format: Some("parquet".into()),
        ..Default::default()
    };
    sync(root.to_str().unwrap(), &parquet, |_| {})
        .await
        .unwrap();
    edit_metadata(root, foreign);
    let to_delta = to_delta();
    let report = sync(root.to_str().unwrap(), &to_delta, |_| {})
        .await
        .unwrap();
    assert_eq!(report.written.len(), 2);
    // The branch is set back to the first snapshot, and a new one is committed on it: the
    // second, which the Delta log holds, is no longer in the main branch's history.
    let mut second = 0;
    edit_metadata(root, |json| {
        let snapshots = json["snapshots"].as_array_mut().unwrap();
        if snapshots.len() < 2 {
            return; // an older metadata file
        }
        let first = snapshots[0]["snapshot-id"].clone();
        second = snapshots[1]["snapshot-id"].as_i64().unwrap();
        let mut third = snapshots[1].clone();
        third["snapshot-id"] = 777.into();
        third["parent-snapshot-id"] = first;
        snapshots.push(third);
        json["current-snapshot-id"] = 777.into();
        json["refs"]["main"]["snapshot-id"] = 777.into();
    });
    let versions = std::fs::read_dir(root.join("_delta_log")).unwrap().count();
    let err = sync(root.to_str().unwrap(), &to_delta, |_| {})
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("snapshot {second}")) && message.contains("rolled back"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_dir(root.join("_delta_log")).unwrap().count(),
        versions,
        "nothing written"
    );
}

#[tokio::test]
async fn two_metadata_files_of_one_version_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mirrored(root).await;
    edit_metadata(root, foreign);
    let newest = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".metadata.json"))
        .max()
        .unwrap();
    let name = newest.file_name().unwrap().to_str().unwrap().to_string();
    let number: String = name.chars().filter(char::is_ascii_digit).collect();
    let twin = root.join(format!(
        "metadata/{:05}-ffffffff-0000-0000-0000-000000000000.metadata.json",
        number.parse::<u64>().unwrap()
    ));
    std::fs::copy(&newest, &twin).unwrap();
    let to_delta = to_delta();
    let err = sync(root.to_str().unwrap(), &to_delta, |_| {})
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("two metadata files of version"),
        "{message}"
    );
    assert!(!root.join("_delta_log").exists());
}

#[tokio::test]
async fn snapshots_the_source_expired_are_history_not_unknown_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mirrored(root).await;
    let parquet = SyncOptions {
        format: Some("parquet".into()),
        ..Default::default()
    };
    for (name, ids) in [("b", [4, 5]), ("c", [6, 7])] {
        write_parquet(&root.join(format!("data/{name}.parquet")), &ids);
        sync(root.to_str().unwrap(), &parquet, |_| {})
            .await
            .unwrap();
    }
    edit_metadata(root, foreign);
    let location = root.to_str().unwrap();
    let report = sync(location, &to_delta(), |_| {}).await.unwrap();
    assert_eq!(report.written.len(), 3);
    // pyiceberg's expire_snapshots drops the two oldest snapshots from the metadata (the
    // newest metadata file), and the parent of the oldest kept with them (Iceberg Java's
    // keeps it).
    let mut expired = Vec::new();
    edit_metadata(root, |json| {
        let snapshots = json["snapshots"].as_array_mut().unwrap();
        if snapshots.len() < 3 {
            return;
        }
        expired = snapshots
            .drain(..2)
            .map(|s| s["snapshot-id"].to_string())
            .collect();
        snapshots[0]
            .as_object_mut()
            .unwrap()
            .remove("parent-snapshot-id");
        if let Some(log) = json["snapshot-log"].as_array_mut() {
            log.drain(..2);
        }
    });
    assert_eq!(expired.len(), 2);
    let checked = xlake_sync::check_with(location, &to_delta(), true, true)
        .await
        .unwrap();
    assert!(checked.consistent(), "{checked:?}");
    assert!(checked.unknown.is_empty(), "{:?}", checked.unknown);
    assert_eq!(checked.source_commits, 1);
    let (code, out) = crate::common::xlake(&["check", location, "--target", "delta"]);
    assert_eq!(code, 0, "{out}");
}
