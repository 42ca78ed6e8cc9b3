//! End-to-end: the foundation table's change sets committed by xlake-iceberg, every
//! snapshot read back by iceberg-rust's scan (a reader we did not write), and the bad
//! inputs that must leave the table exactly as it was.
use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, Manifest, ManifestList, Operation, TableMetadata};
use iceberg::table::StaticTable;
use iceberg::TableIdent;
use xlake_iceberg::{IcebergError, IcebergTable, SyncMetadata};
use xlake_model::{ChangeSet, DataFile, Field, PrimitiveType, TimeUnit};
use xlake_storage::TableStore;

use common::foundation;

/// A temp dir holding the foundation table's data files (no Iceberg metadata yet).
fn fixture() -> (tempfile::TempDir, PathBuf, foundation::Expected) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("table");
    let expected = foundation::build(&root);
    (dir, root, expected)
}

fn table_at(root: &Path) -> IcebergTable {
    IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap())
}

fn read_metadata(root: &Path, version: u64) -> TableMetadata {
    let bytes = std::fs::read(root.join(format!("metadata/v{version}.metadata.json"))).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The data files of the current snapshot, read straight from its manifests.
fn current_data_files(metadata: &TableMetadata) -> Vec<iceberg::spec::DataFile> {
    let list = std::fs::read(metadata.current_snapshot().unwrap().manifest_list()).unwrap();
    let list = ManifestList::parse_with_version(&list, FormatVersion::V2).unwrap();
    list.entries()
        .iter()
        .flat_map(|m| {
            let manifest = Manifest::parse_avro(&std::fs::read(&m.manifest_path).unwrap()).unwrap();
            manifest
                .entries()
                .iter()
                .map(|e| e.data_file().clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn hint(root: &Path) -> String {
    std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap()
}

async fn scan(root: &Path, version: u64, snapshot_id: i64) -> Vec<RecordBatch> {
    let location = root.join(format!("metadata/v{version}.metadata.json"));
    let table = StaticTable::from_metadata_file(
        location.to_str().unwrap(),
        TableIdent::from_strs(["db", "t"]).unwrap(),
        FileIO::new_with_fs(),
    )
    .await
    .unwrap();
    let stream = table
        .scan()
        .snapshot_id(snapshot_id)
        .select_all()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap();
    stream.try_collect().await.unwrap()
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<T>()
        .unwrap()
}

#[tokio::test]
async fn every_snapshot_reads_back_with_iceberg_rust() {
    let (_dir, root, expected) = fixture();
    let table = table_at(&root);
    let committed = table.commit_all(&expected.change_sets).await.unwrap();
    assert_eq!(committed.len(), 6);
    assert_eq!(
        hint(&root),
        "6",
        "version-hint.text holds N with no newline"
    );

    let metadata = read_metadata(&root, 6);
    assert!(metadata
        .properties()
        .contains_key("schema.name-mapping.default"));
    let history = metadata.history();
    assert_eq!(history.len(), 6);
    assert_eq!(metadata.metadata_log().len(), 5);
    let operations = [
        Operation::Append,
        Operation::Append,
        Operation::Overwrite,
        Operation::Delete,
        Operation::Append,
        Operation::Replace,
    ];
    let synced = table.synced_commits().await.unwrap();
    for (i, ((c, (_, rows)), done)) in expected
        .change_sets
        .iter()
        .zip(&expected.snapshots)
        .zip(&committed)
        .enumerate()
    {
        let snapshot = metadata.snapshot_by_id(done.snapshot_id).unwrap();
        assert_eq!(
            snapshot.timestamp_ms(),
            c.commit.commit_time_ms,
            "snapshot time = source commit time"
        );
        assert_eq!(snapshot.sequence_number(), i as i64 + 1);
        assert_eq!(
            snapshot.summary().operation,
            operations[i],
            "commit {}",
            c.commit.id
        );
        let summary = &snapshot.summary().additional_properties;
        assert_eq!(
            summary["total-records"],
            rows.len().to_string(),
            "commit {}",
            c.commit.id
        );
        let sync = SyncMetadata::from_summary(summary).unwrap();
        assert_eq!(
            sync.source_identifier.as_deref(),
            Some(c.commit.id.as_str())
        );
        assert_eq!(sync.source_table_format.as_deref(), Some("HUDI"));
        assert_eq!(synced[i].0, done.snapshot_id);

        let batches = scan(&root, 6, done.snapshot_id).await;
        let mut got: Vec<(i64, String, Option<String>)> = Vec::new();
        for b in &batches {
            let ids = column::<Int64Array>(b, "id");
            let parts = column::<StringArray>(b, "part");
            let s = column::<StringArray>(b, "s");
            for r in 0..b.num_rows() {
                got.push((
                    ids.value(r),
                    parts.value(r).to_string(),
                    s.is_valid(r).then(|| s.value(r).to_string()),
                ));
            }
        }
        got.sort();
        let want: Vec<(i64, String, Option<String>)> = rows
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["part"].as_str().unwrap().to_string(),
                    r["s"].as_str().map(String::from),
                )
            })
            .collect();
        assert_eq!(got, want, "rows at commit {}", c.commit.id);
    }
    // c3 removed two files: one manifest rewritten, counts right.
    let c3 = metadata.snapshot_by_id(committed[2].snapshot_id).unwrap();
    assert_eq!(
        c3.summary().additional_properties["deleted-data-files"],
        "2"
    );
    assert_eq!(c3.summary().additional_properties["added-data-files"], "1");
    // The schema change kept old ids and added one.
    assert_eq!(metadata.schemas_iter().len(), 2);
    let current = metadata.current_schema();
    let old = metadata.schema_by_id(0).unwrap();
    assert_eq!(
        current.field_by_name("id").unwrap().id,
        old.field_by_name("id").unwrap().id
    );
    assert_eq!(
        current.field_by_name("extra").unwrap().id,
        old.highest_field_id() + 1
    );
}

#[tokio::test]
async fn appends_reuse_parent_manifests() {
    let (_dir, root, expected) = fixture();
    let table = table_at(&root);
    table.commit_all(&expected.change_sets[..2]).await.unwrap();
    let avro_files = |root: &Path| {
        std::fs::read_dir(root.join("metadata"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name().into_string().unwrap();
                name.ends_with(".avro") && !name.starts_with("snap-")
            })
            .count()
    };
    // One manifest per append; the second commit wrote one new manifest only.
    assert_eq!(avro_files(&root), 2);
}

fn removing(expected: &foundation::Expected, path: &str) -> ChangeSet {
    let mut c = expected.change_sets[3].clone();
    c.commit.id = "bad".into();
    c.removed = vec![path.into()];
    c
}

/// The live data file paths of the current snapshot of version `version`.
fn live_paths(root: &Path, version: u64) -> Vec<String> {
    let list = std::fs::read(
        read_metadata(root, version)
            .current_snapshot()
            .unwrap()
            .manifest_list(),
    );
    let list = ManifestList::parse_with_version(&list.unwrap(), FormatVersion::V2).unwrap();
    let mut paths: Vec<String> = list
        .entries()
        .iter()
        .flat_map(|m| {
            let manifest = Manifest::parse_avro(&std::fs::read(&m.manifest_path).unwrap()).unwrap();
            let live = manifest.entries().iter().filter(|e| e.is_alive());
            live.map(|e| e.file_path().to_string()).collect::<Vec<_>>()
        })
        .collect();
    paths.sort();
    paths
}

/// A removal reads data manifests newest first, and only until it has found every removed
/// file: an older manifest, even unreadable, is kept unread. One that holds a removed file
/// is read however old.
#[tokio::test]
async fn a_removal_reads_data_manifests_newest_first_until_all_are_found() {
    let (_dir, root, expected) = fixture();
    table_at(&root)
        .commit_all(&expected.change_sets[..2])
        .await
        .unwrap();
    // c1's manifest (f1, f2): the one naming f1. c4 removes f3, which c2 added.
    let f1 = &expected.change_sets[0].added[0].path;
    let c1_manifest = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "avro"))
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            let bytes = std::fs::read(p).unwrap();
            !name.starts_with("snap-") && bytes.windows(f1.len()).any(|w| w == f1.as_bytes())
        })
        .unwrap();
    let good = std::fs::read(&c1_manifest).unwrap();
    std::fs::write(&c1_manifest, b"not a manifest").unwrap();
    table_at(&root)
        .commit(&expected.change_sets[3])
        .await
        .unwrap();
    let (f2, f3) = (
        &expected.change_sets[0].added[1].path,
        &expected.change_sets[1].added[0].path,
    );
    let absolute = |p: &str| root.join(p).to_str().unwrap().to_string();
    // f1's removal must read c1's manifest: it fails naming it, and changes nothing.
    let err = table_at(&root)
        .commit(&removing(&expected, f1))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(c1_manifest.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(hint(&root), "3");
    std::fs::write(&c1_manifest, good).unwrap();
    assert_eq!(live_paths(&root, 3), [absolute(f1), absolute(f2)]);
    assert!(!live_paths(&root, 3).contains(&absolute(f3)));
    table_at(&root)
        .commit(&removing(&expected, f1))
        .await
        .unwrap();
    assert_eq!(live_paths(&root, 4), [absolute(f2)]);
}

/// A path listed in two data manifests, as builds before e9ac639 could leave a Delta add
/// of a live path: a removal stops at the newest entry, a full state without the path
/// drops both.
#[tokio::test]
async fn a_full_state_drops_every_entry_of_a_path_listed_twice() {
    let (_dir, root, expected) = fixture();
    let table = table_at(&root);
    table.commit_all(&expected.change_sets[..1]).await.unwrap();
    let (f1, f2) = (
        &expected.change_sets[0].added[0],
        &expected.change_sets[0].added[1],
    );
    let mut twice = expected.change_sets[1].clone();
    twice.added = vec![f1.clone(), f2.clone()];
    table.commit(&twice).await.unwrap();
    let absolute = |p: &str| root.join(p).to_str().unwrap().to_string();
    let (a1, a2) = (absolute(&f1.path), absolute(&f2.path));
    let both = [a1.clone(), a1.clone(), a2.clone(), a2.clone()];
    assert_eq!(live_paths(&root, 2), both);
    table.commit(&removing(&expected, &f2.path)).await.unwrap();
    assert_eq!(live_paths(&root, 3), [a1.clone(), a1, a2]);
    // c5 as a full state: its one new file is all that is live.
    let mut full = expected.change_sets[4].clone();
    full.full_state = true;
    table.commit(&full).await.unwrap();
    assert_eq!(
        live_paths(&root, 4),
        [absolute(&expected.change_sets[4].added[0].path)]
    );
}

#[tokio::test]
async fn bad_input_leaves_the_table_unchanged() {
    let (_dir, root, expected) = fixture();
    let table = table_at(&root);
    table.commit_all(&expected.change_sets[..2]).await.unwrap();
    let before = std::fs::read(root.join("metadata/v2.metadata.json")).unwrap();

    // Removing a file the table does not have.
    let err = table
        .commit(&removing(&expected, "data/nope.parquet"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, IcebergError::RemovedFileNotFound { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("nope.parquet") && err.to_string().contains("bad"),
        "{err}"
    );

    // Adding a file that does not exist, or whose size is wrong.
    let mut missing = expected.change_sets[1].clone();
    missing.added = vec![DataFile::parquet("data/missing.parquet", 10, Some(1))];
    let err = table.commit(&missing).await.unwrap_err();
    assert!(
        err.to_string().contains("missing.parquet") && err.to_string().contains("does not exist"),
        "{err}"
    );
    let mut resized = expected.change_sets[1].clone();
    resized.added[0].size_bytes += 1;
    assert!(matches!(
        table.commit(&resized).await.unwrap_err(),
        IcebergError::InvalidDataFile { .. }
    ));

    // A file that is not Parquet.
    std::fs::write(root.join("data/junk.parquet"), b"definitely not parquet").unwrap();
    let mut junk = expected.change_sets[1].clone();
    junk.added = vec![DataFile::parquet("data/junk.parquet", 22, None)];
    let err = table.commit(&junk).await.unwrap_err();
    assert!(err.to_string().contains("junk.parquet"), "{err}");

    // A schema change Iceberg cannot represent: a string column becoming a long.
    let mut retyped = expected.change_sets[1].clone();
    retyped.schema.fields[1] = Field::required("part", PrimitiveType::Long);
    let err = table.commit(&retyped).await.unwrap_err();
    assert!(
        matches!(err, IcebergError::SchemaNotRepresentable { ref column, .. } if column == "part"),
        "{err}"
    );
    let mut nanos = expected.change_sets[1].clone();
    nanos.schema.fields.push(Field::optional(
        "tn",
        PrimitiveType::Timestamp {
            unit: TimeUnit::Nanos,
            with_zone: false,
        },
    ));
    assert!(matches!(
        table.commit(&nanos).await.unwrap_err(),
        IcebergError::SchemaNotRepresentable { .. }
    ));

    // Losing the put-if-absent race: someone else's v3 stays, ours is not written.
    std::fs::write(root.join("metadata/v3.metadata.json"), b"{}").unwrap();
    std::fs::write(root.join("metadata/version-hint.text"), b"2").unwrap();
    let winner_bytes = std::fs::read(root.join("metadata/v3.metadata.json")).unwrap();
    // load() follows v3 (Java's rule), finds it corrupt, and refuses before writing anything.
    assert!(table.commit(&expected.change_sets[2]).await.is_err());
    assert_eq!(
        std::fs::read(root.join("metadata/v3.metadata.json")).unwrap(),
        winner_bytes
    );
    std::fs::remove_file(root.join("metadata/v3.metadata.json")).unwrap();

    assert_eq!(
        std::fs::read(root.join("metadata/v2.metadata.json")).unwrap(),
        before
    );
    assert_eq!(hint(&root), "2");
    // And the table still takes the next good commit.
    let next = table.commit(&expected.change_sets[2]).await.unwrap();
    assert_eq!(next.version, 3);
}

#[tokio::test]
async fn concurrent_writer_loses_without_overwriting() {
    let (_dir, root, expected) = fixture();
    let a = table_at(&root);
    let b = table_at(&root);
    a.commit(&expected.change_sets[0]).await.unwrap();
    // Both plan v2 at once; exactly one wins, the other gets CommitConflict.
    let (ra, rb) = tokio::join!(
        a.commit(&expected.change_sets[1]),
        b.commit(&expected.change_sets[1])
    );
    let conflicts = [&ra, &rb]
        .iter()
        .filter(|r| matches!(r, Err(IcebergError::CommitConflict { version: 2, .. })))
        .count();
    let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
    // Both may also serialize (one sees the other's v2 and commits v3): either way nothing is lost.
    assert!(wins >= 1 && wins + conflicts == 2, "{ra:?} {rb:?}");
    let v = hint(&root).parse::<u64>().unwrap();
    assert_eq!(v as usize, 1 + wins);
    assert_eq!(read_metadata(&root, v).snapshots().count(), 1 + wins);
}

#[tokio::test]
async fn foreign_metadata_is_refused() {
    let (dir, root, expected) = fixture();
    // An Iceberg table written by someone else: our own first commit, minus XTABLE_METADATA.
    table_at(&root)
        .commit(&expected.change_sets[0])
        .await
        .unwrap();
    let path = root.join("metadata/v1.metadata.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("XTABLE_METADATA", "SOMEONE_ELSE");
    std::fs::write(&path, &text).unwrap();
    let err = table_at(&root)
        .commit(&expected.change_sets[1])
        .await
        .unwrap_err();
    assert!(matches!(err, IcebergError::ForeignMetadata { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    assert!(!root.join("metadata/v2.metadata.json").exists());

    // A catalog-style metadata file with no version hint.
    let other = dir.path().join("other");
    std::fs::create_dir_all(other.join("metadata")).unwrap();
    std::fs::write(other.join("metadata/00000-abc.metadata.json"), b"{}").unwrap();
    let err = table_at(&other)
        .commit(&expected.change_sets[0])
        .await
        .unwrap_err();
    assert!(matches!(err, IcebergError::ForeignMetadata { .. }), "{err}");
}

#[tokio::test]
async fn metadata_retention_properties_are_honoured() {
    let (_dir, root, expected) = fixture();
    let props = HashMap::from([
        (
            "write.metadata.previous-versions-max".to_string(),
            "2".to_string(),
        ),
        (
            "write.metadata.delete-after-commit.enabled".to_string(),
            "true".to_string(),
        ),
    ]);
    let table = table_at(&root).with_properties(props);
    table.commit_all(&expected.change_sets).await.unwrap();
    let metadata = read_metadata(&root, 6);
    assert_eq!(metadata.metadata_log().len(), 2);
    for v in 1..=3 {
        assert!(
            !root.join(format!("metadata/v{v}.metadata.json")).exists(),
            "v{v} should be deleted"
        );
    }
    for v in 4..=6 {
        assert!(
            root.join(format!("metadata/v{v}.metadata.json")).exists(),
            "v{v} should be kept"
        );
    }
}

#[tokio::test]
async fn timestamps_never_go_backwards() {
    let (_dir, root, expected) = fixture();
    let mut changes = expected.change_sets[..2].to_vec();
    changes[1].commit.commit_time_ms = changes[0].commit.commit_time_ms - 3_600_000;
    let committed = table_at(&root).commit_all(&changes).await.unwrap();
    assert_eq!(
        committed[1].timestamp_ms, changes[0].commit.commit_time_ms,
        "clamped to the previous snapshot"
    );
    let metadata = read_metadata(&root, 2);
    let snap = metadata.snapshot_by_id(committed[1].snapshot_id).unwrap();
    assert_eq!(
        snap.summary().additional_properties["xlake.source-commit-time-ms"],
        changes[1].commit.commit_time_ms.to_string()
    );
}

#[tokio::test]
async fn footer_stats_give_counts_and_safe_bounds() {
    let (_dir, root, expected) = fixture();
    table_at(&root)
        .commit(&expected.change_sets[0])
        .await
        .unwrap();
    let metadata = read_metadata(&root, 1);
    let schema = metadata.current_schema();
    let id = schema.field_by_name("id").unwrap().id;
    let s = schema.field_by_name("s").unwrap().id;
    for f in &current_data_files(&metadata) {
        let rows: Vec<_> = expected.snapshots[0]
            .1
            .iter()
            .filter(|r| {
                f.file_path()
                    .contains(&format!("part={}", r["part"].as_str().unwrap()))
            })
            .collect();
        assert_eq!(f.record_count(), rows.len() as u64);
        let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert_eq!(
            f.lower_bounds()[&id],
            iceberg::spec::Datum::long(*ids.iter().min().unwrap())
        );
        assert_eq!(
            f.upper_bounds()[&id],
            iceberg::spec::Datum::long(*ids.iter().max().unwrap())
        );
        // String bounds are cut to 16 characters and stay bounds.
        let strings: Vec<&str> = rows.iter().filter_map(|r| r["s"].as_str()).collect();
        let lower = f.lower_bounds()[&s].to_human_string();
        let upper = f.upper_bounds()[&s].to_human_string();
        assert!(lower.chars().count() <= 16 && upper.chars().count() <= 16);
        assert!(
            strings
                .iter()
                .all(|v| lower.as_str() <= *v && upper.as_str() >= *v),
            "{lower} {upper} {strings:?}"
        );
        assert_eq!(
            f.null_value_counts()[&s],
            rows.len() as u64 - strings.len() as u64
        );
    }
}

#[tokio::test]
async fn a_crash_between_metadata_and_hint_heals_on_the_next_commit() {
    let (_dir, root, expected) = fixture();
    let table = table_at(&root);
    table.commit_all(&expected.change_sets[..2]).await.unwrap();
    // The writer died after creating v2 but before rewriting the hint.
    std::fs::write(root.join("metadata/version-hint.text"), b"1").unwrap();
    assert_eq!(
        table.load().await.unwrap().unwrap().version,
        2,
        "the newer vN wins, as in Java"
    );
    let next = table.commit(&expected.change_sets[2]).await.unwrap();
    assert_eq!(next.version, 3);
    assert_eq!(hint(&root), "3");
    assert_eq!(read_metadata(&root, 3).snapshots().count(), 3);
}

/// TIME, UUID and FIXED columns (which Spark cannot read) through iceberg-rust, with
/// footer-derived bounds.
#[tokio::test]
async fn time_uuid_and_fixed_columns_round_trip() {
    use arrow_array::{FixedSizeBinaryArray, Time64MicrosecondArray};
    use arrow_schema::{DataType as A, Field as AF, Schema as AS, TimeUnit as AU};
    use xlake_model::{PartitionSpec, SourceCommit, SourceFormat};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("table");
    std::fs::create_dir_all(root.join("data")).unwrap();
    let arrow_schema = std::sync::Arc::new(AS::new(vec![
        AF::new("id", A::Int64, false),
        AF::new("t", A::Time64(AU::Microsecond), true),
        AF::new("u", A::FixedSizeBinary(16), true),
        AF::new("fx", A::FixedSizeBinary(4), true),
    ]));
    let uuids: Vec<[u8; 16]> = vec![[0x11; 16], [0xAB; 16], [0x01; 16]];
    let batch = RecordBatch::try_new(
        arrow_schema.clone(),
        vec![
            std::sync::Arc::new(Int64Array::from(vec![1, 2, 3])),
            std::sync::Arc::new(Time64MicrosecondArray::from(vec![
                Some(1_000_001),
                None,
                Some(86_399_999_999),
            ])),
            std::sync::Arc::new(FixedSizeBinaryArray::try_from_iter(uuids.iter()).unwrap()),
            std::sync::Arc::new(
                FixedSizeBinaryArray::try_from_iter(
                    [[1u8, 2, 3, 4], [0, 0, 0, 0], [255, 1, 2, 3]].iter(),
                )
                .unwrap(),
            ),
        ],
    )
    .unwrap();
    let path = root.join("data/x.parquet");
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        arrow_schema,
        None,
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let schema = xlake_model::Schema::new(vec![
        Field::required("id", PrimitiveType::Long),
        Field::optional("t", PrimitiveType::Time),
        Field::optional("u", PrimitiveType::Uuid),
        Field::optional("fx", PrimitiveType::Fixed(4)),
    ]);
    let commit = SourceCommit {
        format: SourceFormat::new("DELTA"),
        id: "0".into(),
        action: "WRITE".into(),
        requested_ms: None,
        commit_time_ms: 1_700_000_000_000,
    };
    let mut change = ChangeSet::new(commit, schema, PartitionSpec::unpartitioned());
    change.added = vec![DataFile::parquet(
        "data/x.parquet",
        std::fs::metadata(&path).unwrap().len(),
        None,
    )];
    let done = table_at(&root).commit(&change).await.unwrap();

    let metadata = read_metadata(&root, 1);
    let fields: Vec<String> = metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.field_type.to_string())
        .collect();
    assert_eq!(fields, ["long", "time", "uuid", "fixed(4)"]);
    let location = root.join("metadata/v1.metadata.json");
    let table = StaticTable::from_metadata_file(
        location.to_str().unwrap(),
        TableIdent::from_strs(["db", "t"]).unwrap(),
        FileIO::new_with_fs(),
    )
    .await
    .unwrap();
    let batches: Vec<RecordBatch> = table
        .scan()
        .snapshot_id(done.snapshot_id)
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let b = &batches[0];
    let t = b
        .column_by_name("t")
        .unwrap()
        .as_any()
        .downcast_ref::<Time64MicrosecondArray>()
        .unwrap();
    assert_eq!(
        (t.value(0), t.is_null(1), t.value(2)),
        (1_000_001, true, 86_399_999_999)
    );
    let fx = b
        .column_by_name("fx")
        .unwrap()
        .as_any()
        .downcast_ref::<FixedSizeBinaryArray>()
        .unwrap();
    assert_eq!(fx.value(2), [255, 1, 2, 3]);

    // Bounds from the footer: time in micros, uuid and fixed as their bytes.
    let files = current_data_files(&metadata);
    let f = &files[0];
    let id_of = |n: &str| metadata.current_schema().field_by_name(n).unwrap().id;
    assert_eq!(
        f.lower_bounds()[&id_of("t")].to_bytes().unwrap().to_vec(),
        1_000_001i64.to_le_bytes()
    );
    assert_eq!(
        f.upper_bounds()[&id_of("t")].to_bytes().unwrap().to_vec(),
        86_399_999_999i64.to_le_bytes()
    );
    assert_eq!(
        f.lower_bounds()[&id_of("u")].to_bytes().unwrap().to_vec(),
        vec![0x01; 16]
    );
    assert_eq!(
        f.upper_bounds()[&id_of("u")].to_bytes().unwrap().to_vec(),
        vec![0xAB; 16]
    );
    assert_eq!(
        f.lower_bounds()[&id_of("fx")].to_bytes().unwrap().to_vec(),
        vec![0, 0, 0, 0]
    );
    assert_eq!(f.null_value_counts()[&id_of("t")], 1);
}
