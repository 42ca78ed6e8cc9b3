//! Iceberg format version 3: Delta deletion vectors carried as Puffin `deletion-vector-v1`
//! blobs, byte for byte; their checks (CRC, length, cardinality, range); upgrades in place
//! and the refusal to downgrade. (Rows read back by pyiceberg, DuckDB and Spark:
//! tests/interop/test_iceberg_v3.py.)
use crate::common;

use std::path::{Path, PathBuf};

use common::delta::extract;
use iceberg::spec::{FormatVersion, Manifest, ManifestContentType, ManifestList};
use xlake_iceberg::puffin::{frame, frame_positions, read_vector};
use xlake_iceberg::IcebergTable;
use xlake_model::{DeletionVector, VectorBytes};
use xlake_storage::TableStore;
use xlake_sync::{mirror_commit, sync, SyncOptions};

fn v3() -> SyncOptions {
    SyncOptions {
        format_version: Some(3),
        ..Default::default()
    }
}

fn vector_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort_by_key(|f| std::fs::metadata(f).unwrap().len());
    files
}

/// The Puffin footer's blobs: (offset, length, properties).
fn puffin_blobs(bytes: &[u8]) -> Vec<(u64, u64, serde_json::Value)> {
    assert_eq!(&bytes[..4], b"PFA1");
    assert_eq!(&bytes[bytes.len() - 4..], b"PFA1");
    let n = bytes.len();
    let payload_len = u32::from_le_bytes(bytes[n - 12..n - 8].try_into().unwrap()) as usize;
    assert_eq!(bytes[n - 8], 0, "footer not compressed");
    let footer: serde_json::Value =
        serde_json::from_slice(&bytes[n - 12 - payload_len..n - 12]).unwrap();
    footer["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            assert_eq!(b["type"], "deletion-vector-v1");
            assert_eq!(
                (b["snapshot-id"].as_i64(), b["sequence-number"].as_i64()),
                (Some(-1), Some(-1))
            );
            assert!(b.get("compression-codec").is_none());
            (
                b["offset"].as_u64().unwrap(),
                b["length"].as_u64().unwrap(),
                b["properties"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn vectors_are_copied_byte_for_byte_into_puffin_blobs() {
    let (_dir, root) = extract("table_with_deletion_logs");
    sync(root.to_str().unwrap(), &v3(), |_| {}).await.unwrap();
    let store = TableStore::open(root.to_str().unwrap()).unwrap();
    let loaded = IcebergTable::new(store.clone())
        .load()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.metadata.format_version(), FormatVersion::V3);
    // Every Delta vector file (one vector each, after its format byte) is one blob, unchanged.
    let delta_vectors: Vec<Vec<u8>> = vector_files(&root)
        .iter()
        .map(|f| std::fs::read(f).unwrap()[1..].to_vec())
        .collect();
    let mut seen = Vec::new();
    for puffin in std::fs::read_dir(root.join("metadata")).unwrap() {
        let path = puffin.unwrap().path();
        if path.extension().is_none_or(|x| x != "puffin") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for (offset, len, props) in puffin_blobs(&bytes) {
            let blob = &bytes[offset as usize..(offset + len) as usize];
            assert!(props["referenced-data-file"]
                .as_str()
                .unwrap()
                .ends_with(".parquet"));
            let i = delta_vectors.iter().position(|v| v == blob).unwrap();
            assert_eq!(props["cardinality"], (i + 1).to_string());
            seen.push((path.to_str().unwrap().to_string(), offset, len));
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 2, "one blob per vector: {seen:?}");
    // The current snapshot's delete entry points at its blob exactly as the footer does.
    let snapshot = loaded.metadata.current_snapshot().unwrap();
    let list = std::fs::read(snapshot.manifest_list()).unwrap();
    let list = ManifestList::parse_with_version(&list, FormatVersion::V3).unwrap();
    let mut entries = Vec::new();
    for mf in list.entries() {
        if mf.content == ManifestContentType::Deletes {
            let m = Manifest::parse_avro(&std::fs::read(&mf.manifest_path).unwrap()).unwrap();
            entries.extend(m.entries().iter().filter(|e| e.is_alive()).map(|e| {
                let f = e.data_file();
                (
                    f.file_path().to_string(),
                    f.content_offset().unwrap() as u64,
                    f.content_size_in_bytes().unwrap() as u64,
                )
            }));
        } else {
            assert!(mf.first_row_id.is_some(), "v3 data manifests get row ids");
        }
    }
    assert_eq!(entries.len(), 1, "one live vector for the one data file");
    assert!(seen.contains(&entries[0]), "{entries:?} vs {seen:?}");
    assert!(common::leftovers(&root).await.is_empty());
}

async fn store_with(name: &str, bytes: &[u8]) -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    (dir, store)
}

fn stored(size: u64, cardinality: u64) -> DeletionVector {
    DeletionVector {
        bytes: VectorBytes::Stored {
            path: "dv.bin".into(),
            offset: 1,
            size,
        },
        cardinality,
    }
}

#[tokio::test]
async fn bad_vectors_are_refused_with_the_reason() {
    let framed = frame_positions(&[1, 7]).unwrap();
    let size = framed.len() as u64 - 8;
    let mut file = vec![1u8];
    file.extend(&framed);
    let (_d, store) = store_with("dv.bin", &file).await;
    assert_eq!(
        read_vector(&store, &stored(size, 2), 10).await.unwrap(),
        framed
    );
    // The log's cardinality disagrees with the vector.
    let err = read_vector(&store, &stored(size, 3), 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds 2 rows") && err.contains("says 3"),
        "{err}"
    );
    // A row beyond the file's rows.
    let err = read_vector(&store, &stored(size, 2), 5)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("row 7 of a file of 5 rows"), "{err}");
    // A descriptor pointing past the end of its file.
    let err = read_vector(&store, &stored(size + 10, 2), 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("past the file's end") && err.contains("dv.bin"),
        "{err}"
    );
    // A wrong CRC.
    let mut bad = file.clone();
    *bad.last_mut().unwrap() ^= 0xFF;
    let (_d, store) = store_with("dv.bin", &bad).await;
    let err = read_vector(&store, &stored(size, 2), 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("CRC-32") && err.contains("dv.bin"), "{err}");
    // Inline vectors get their length and CRC added.
    let inline = DeletionVector {
        bytes: VectorBytes::Inline(framed[4..framed.len() - 4].to_vec()),
        cardinality: 2,
    };
    assert_eq!(read_vector(&store, &inline, 10).await.unwrap(), framed);
    assert_eq!(frame(&framed[4..framed.len() - 4]).unwrap(), framed);
}

#[tokio::test]
async fn a_v2_mirror_is_upgraded_in_its_own_version_and_never_downgraded() {
    let (_dir, root) = extract("table_with_deletion_logs");
    let location = root.to_str().unwrap();
    mirror_commit(location, &SyncOptions::default(), "3", |_| {})
        .await
        .unwrap();
    let store = TableStore::open(location).unwrap();
    let table = IcebergTable::new(store.clone());
    let before = table.load().await.unwrap().unwrap();
    assert_eq!(before.metadata.format_version(), FormatVersion::V2);
    let report = sync(location, &v3(), |_| {}).await.unwrap();
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("from format version 2 to 3")),
        "{:?}",
        report.notes
    );
    let after = table.load().await.unwrap().unwrap();
    assert_eq!(after.metadata.format_version(), FormatVersion::V3);
    // The upgrade is a version of its own holding the same snapshots.
    let upgraded =
        std::fs::read(root.join(format!("metadata/v{}.metadata.json", before.version + 1)))
            .unwrap();
    let upgraded = xlake_iceberg::table::parse_metadata(&upgraded).unwrap();
    assert_eq!(upgraded.format_version(), FormatVersion::V3);
    assert_eq!(
        upgraded.current_snapshot_id(),
        before.metadata.current_snapshot_id()
    );
    // Asking for 2 now is refused, and changes nothing.
    let options = SyncOptions {
        format_version: Some(2),
        ..Default::default()
    };
    let err = sync(location, &options, |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("never downgraded"), "{err}");
    assert_eq!(table.load().await.unwrap().unwrap().version, after.version);
}

#[tokio::test]
async fn a_bad_vector_stops_the_sync_at_its_version() {
    // Version 4 re-adds the data file with a vector of 2 rows: break it three ways.
    let cases: [(&str, &Breaker); 3] = [
        ("cardinality", &|root| {
            edit_log(root, "\"cardinality\":2", "\"cardinality\":3")
        }),
        ("past the end", &|root| {
            edit_log(
                root,
                "\"offset\":1,\"sizeInBytes\":36",
                "\"offset\":40,\"sizeInBytes\":36",
            )
        }),
        ("CRC", &|root| {
            let f = vector_files(root).pop().unwrap();
            let mut bytes = std::fs::read(&f).unwrap();
            *bytes.last_mut().unwrap() ^= 0xFF;
            std::fs::write(f, bytes).unwrap();
        }),
    ];
    for (what, break_it) in cases {
        let (_dir, root) = extract("table_with_deletion_logs");
        break_it(&root);
        let location = root.to_str().unwrap();
        let err = sync(location, &v3(), |_| {}).await.unwrap_err().to_string();
        assert!(
            err.contains(location) && err.contains(" 4") && err.contains("deletion vector"),
            "{what}: {err}"
        );
        let mirrored: Vec<String> = IcebergTable::new(TableStore::open(location).unwrap())
            .synced_commits()
            .await
            .unwrap()
            .into_iter()
            .map(|(_, m)| m.source_identifier.unwrap())
            .collect();
        assert_eq!(mirrored, ["0", "1", "2", "3"], "{what}");
    }
}

/// Breaks a vector of an extracted fixture.
type Breaker = dyn Fn(&Path);

fn edit_log(root: &Path, from: &str, to: &str) {
    let log = root.join("_delta_log/00000000000000000004.json");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(log, text.replace(from, to)).unwrap();
}

fn change_set(
    id: &str,
    added: Vec<xlake_model::DataFile>,
    removed: &[&str],
) -> xlake_model::ChangeSet {
    use xlake_model::{Field, PartitionSpec, PrimitiveType, Schema, SourceCommit, SourceFormat};
    let commit = SourceCommit {
        format: SourceFormat::new("DELTA"),
        id: id.into(),
        action: "DELETE".into(),
        requested_ms: None,
        commit_time_ms: 1_700_000_000_000 + id.parse::<i64>().unwrap(),
    };
    let schema = Schema::new(vec![Field::required("id", PrimitiveType::Long)]);
    let mut change = xlake_model::ChangeSet::new(commit, schema, PartitionSpec::unpartitioned());
    change.added = added;
    change.removed = removed.iter().map(|p| p.to_string()).collect();
    change
}

fn with_vector(path: &str, rows: &[u64]) -> xlake_model::DataFile {
    let framed = frame_positions(rows).unwrap();
    let mut f = xlake_model::DataFile::parquet(path, 100, Some(10));
    f.column_stats = vec![("id".into(), Default::default())];
    f.deletion_vector = Some(DeletionVector {
        bytes: VectorBytes::Inline(framed[4..framed.len() - 4].to_vec()),
        cardinality: rows.len() as u64,
    });
    f
}

/// Live deletion vector entries of the current snapshot: data file -> (Puffin, cardinality).
async fn live_vectors(table: &IcebergTable) -> Vec<(String, String, u64)> {
    let loaded = table.load().await.unwrap().unwrap();
    let snapshot = loaded.metadata.current_snapshot().unwrap();
    let list = std::fs::read(snapshot.manifest_list()).unwrap();
    let list = ManifestList::parse_with_version(&list, FormatVersion::V3).unwrap();
    let mut out = Vec::new();
    for mf in list.entries() {
        if mf.content == ManifestContentType::Deletes {
            let m = Manifest::parse_avro(&std::fs::read(&mf.manifest_path).unwrap()).unwrap();
            for e in m.entries().iter().filter(|e| e.is_alive()) {
                let f = e.data_file();
                let data = f.referenced_data_file().unwrap();
                let data = data.rsplit('/').next().unwrap().to_string();
                out.push((data, f.file_path().to_string(), f.record_count()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn replacing_one_vector_of_a_shared_puffin_file_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    let table = IcebergTable::new(store)
        .verify_files(false)
        .format_version(FormatVersion::V3);
    // Version 1: vectors for a and b, in one Puffin file.
    table
        .commit(&change_set(
            "1",
            vec![
                with_vector("a.parquet", &[1]),
                with_vector("b.parquet", &[2, 3]),
            ],
            &[],
        ))
        .await
        .unwrap();
    let first = live_vectors(&table).await;
    assert_eq!(first.len(), 2);
    assert_eq!(first[0].1, first[1].1, "one Puffin file for the commit");
    // Version 2: a's vector replaced (a removed and added again); b's stays.
    table
        .commit(&change_set(
            "2",
            vec![with_vector("a.parquet", &[1, 4, 5])],
            &["a.parquet"],
        ))
        .await
        .unwrap();
    let second = live_vectors(&table).await;
    assert_eq!(
        second
            .iter()
            .map(|(d, _, n)| (d.as_str(), *n))
            .collect::<Vec<_>>(),
        [("a.parquet", 3), ("b.parquet", 2)]
    );
    assert_ne!(
        second[0].1, first[0].1,
        "a's new vector is in the new Puffin file"
    );
    assert_eq!(second[1].1, first[1].1, "b's vector is still the old blob");
}

#[tokio::test]
async fn nanosecond_timestamps_are_v3_only() {
    use arrow_array::{Int64Array, RecordBatch, TimestampNanosecondArray};
    use arrow_schema::{DataType as A, Field as AF, Schema as AS, TimeUnit as AU};
    use xlake_model::{Field, PrimitiveType, Schema, TimeUnit};

    let dir = tempfile::tempdir().unwrap();
    let arrow_schema = std::sync::Arc::new(AS::new(vec![
        AF::new("id", A::Int64, false),
        AF::new("ts", A::Timestamp(AU::Nanosecond, None), true),
    ]));
    let batch = RecordBatch::try_new(
        arrow_schema.clone(),
        vec![
            std::sync::Arc::new(Int64Array::from(vec![1, 2])),
            std::sync::Arc::new(TimestampNanosecondArray::from(vec![
                1_700_000_000_000_000_001,
                1_700_000_000_000_000_999,
            ])),
        ],
    )
    .unwrap();
    let path = dir.path().join("x.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        arrow_schema,
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let mut change = change_set("1", vec![], &[]);
    change.schema = Schema::new(vec![
        Field::required("id", PrimitiveType::Long),
        Field::optional(
            "ts",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Nanos,
                with_zone: false,
            },
        ),
    ]);
    change.added = vec![xlake_model::DataFile::parquet(
        "x.parquet",
        std::fs::metadata(&path).unwrap().len(),
        None,
    )];
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    let err = IcebergTable::new(store.clone())
        .commit(&change)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column ts") && err.contains("format version 3"),
        "{err}"
    );
    let table = IcebergTable::new(store).format_version(FormatVersion::V3);
    table.commit(&change).await.unwrap();
    let metadata = table.load().await.unwrap().unwrap().metadata;
    let ts = metadata.current_schema().field_by_name("ts").unwrap();
    assert_eq!(ts.field_type.to_string(), "timestamp_ns");
}
