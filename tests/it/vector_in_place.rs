//! A data file removed and added again unchanged (Delta replacing its deletion vector) keeps
//! its Iceberg data entry as it is: the manifest holding it is not rewritten, its
//! sequence numbers stay; only its delete files change (v2: a position-delete file of all
//! its deleted rows; v3: a deletion vector in the commit's Puffin file). A re-add of
//! another size is a new entry as before; one of a path no manifest holds is refused; a
//! re-add without a vector drops the old delete file, so the rows show again. Read from
//! the raw metadata here; rows read back by pyiceberg, DuckDB and Spark:
//! tests/interop/test_iceberg_v3.py.
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use iceberg::spec::{FormatVersion, Manifest, ManifestContentType, ManifestList, ManifestStatus};
use xlake_iceberg::IcebergTable;
use xlake_model::{ChangeSet, DataFile};
use xlake_storage::TableStore;

fn change(id: u64, added: Vec<DataFile>, removed: &[&str]) -> ChangeSet {
    use xlake_model::{Field, PartitionSpec, PrimitiveType, Schema, SourceCommit, SourceFormat};
    let commit = SourceCommit {
        format: SourceFormat::new("DELTA"),
        id: id.to_string(),
        action: "DELETE".into(),
        requested_ms: None,
        commit_time_ms: 1_700_000_000_000 + id as i64,
    };
    let schema = Schema::new(vec![Field::required("id", PrimitiveType::Long)]);
    let mut change = ChangeSet::new(commit, schema, PartitionSpec::unpartitioned());
    change.added = added;
    change.removed = removed.iter().map(|p| p.to_string()).collect();
    change
}

/// A data file of 10 rows and 100 bytes, `deleted` rows deleted (decoded, as the Delta
/// source gives them to a v2 table; a v3 table frames them into a vector).
fn file(path: &str, deleted: &[u64]) -> DataFile {
    let mut f = DataFile::parquet(path, 100, Some(10));
    f.column_stats = vec![("id".into(), Default::default())];
    f.deleted_rows = deleted.to_vec();
    f
}

fn table(dir: &Path, version: FormatVersion) -> IcebergTable {
    let store = TableStore::open(dir.to_str().unwrap()).unwrap();
    IcebergTable::new(store)
        .verify_files(false)
        .format_version(version)
}

/// A live entry as the current snapshot lists it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manifest: String,
    status: ManifestStatus,
    snapshot_id: Option<i64>,
    sequence: Option<i64>,
    file_sequence: Option<i64>,
    records: u64,
    first_row_id: Option<i64>,
    /// The first row id the manifest list gives its manifest (v3: the file's rows' ids
    /// are inherited from it).
    manifest_first_row_id: Option<u64>,
    /// A delete file's own path (a data file's is the key).
    path: String,
    /// A deletion vector's blob: offset and length in its Puffin file.
    blob: Option<(i64, i64)>,
}

/// The current snapshot: its summary, data entries by file name and live delete entries
/// by the name of the data file they delete from.
struct Current {
    summary: HashMap<String, String>,
    operation: String,
    data: BTreeMap<String, Entry>,
    deletes: BTreeMap<String, Entry>,
}

async fn current(table: &IcebergTable, version: FormatVersion) -> Current {
    let loaded = table.load().await.unwrap().unwrap();
    let snapshot = loaded.metadata.current_snapshot().unwrap();
    let list = std::fs::read(snapshot.manifest_list()).unwrap();
    let list = ManifestList::parse_with_version(&list, version).unwrap();
    let (mut data, mut deletes) = (BTreeMap::new(), BTreeMap::new());
    for mf in list.entries() {
        let m = Manifest::parse_avro(&std::fs::read(&mf.manifest_path).unwrap()).unwrap();
        for e in m.entries().iter().filter(|e| e.is_alive()) {
            let f = e.data_file();
            // Inherited values as a reader fills them in: the manifest list's.
            let added = e.status() == ManifestStatus::Added;
            let inherit = |own: Option<i64>| own.or(added.then_some(mf.sequence_number));
            let entry = Entry {
                manifest: mf.manifest_path.clone(),
                status: e.status(),
                snapshot_id: e.snapshot_id().or(Some(mf.added_snapshot_id)),
                sequence: inherit(e.sequence_number()),
                file_sequence: inherit(e.file_sequence_number),
                records: f.record_count(),
                first_row_id: f.first_row_id(),
                manifest_first_row_id: mf.first_row_id,
                path: f.file_path().to_string(),
                blob: f.content_offset().zip(f.content_size_in_bytes()),
            };
            let (map, name) = match mf.content {
                ManifestContentType::Data => (&mut data, f.file_path().to_string()),
                ManifestContentType::Deletes => {
                    (&mut deletes, f.referenced_data_file().unwrap().to_string())
                }
            };
            let name = name.rsplit('/').next().unwrap().to_string();
            assert!(map.insert(name, entry).is_none(), "live twice");
        }
    }
    Current {
        summary: snapshot.summary().additional_properties.clone(),
        operation: snapshot.summary().operation.as_str().to_string(),
        data,
        deletes,
    }
}

/// What a delete entry carried into a rewritten delete manifest keeps: its file, row
/// count, snapshot id and sequence numbers.
fn carried(c: &Current, data: &str) -> (String, u64, Option<i64>, Option<i64>, Option<i64>) {
    let e = &c.deletes[&format!("{data}.parquet")];
    (
        e.path.clone(),
        e.records,
        e.snapshot_id,
        e.sequence,
        e.file_sequence,
    )
}

/// A deletion vector entry's blob bytes.
fn vector_bytes(e: &Entry) -> Vec<u8> {
    let (offset, len) = e.blob.unwrap();
    std::fs::read(&e.path).unwrap()[offset as usize..(offset + len) as usize].to_vec()
}

fn versions() -> [FormatVersion; 2] {
    [FormatVersion::V2, FormatVersion::V3]
}

/// Version 1: a with 1 deleted row, b with 2, c with none.
async fn first(table: &IcebergTable, version: FormatVersion) -> Current {
    let files = vec![
        file("a.parquet", &[1]),
        file("b.parquet", &[2, 3]),
        file("c.parquet", &[]),
    ];
    table.commit(&change(1, files, &[])).await.unwrap();
    current(table, version).await
}

#[tokio::test]
async fn a_new_vector_leaves_the_data_entry_and_its_manifest_as_they_are() {
    for version in versions() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), version);
        let before = first(&table, version).await;
        // Version 2: a's vector replaced by one of 3 rows (a removed and added again).
        let again = change(2, vec![file("a.parquet", &[1, 4, 5])], &["a.parquet"]);
        table.commit(&again).await.unwrap();
        let after = current(&table, version).await;
        // The data entries, their manifest (not rewritten), status, snapshot id, sequence
        // numbers and row ids: all as they were.
        assert_eq!(after.data, before.data, "{version}");
        assert_eq!(after.data["a.parquet"].status, ManifestStatus::Added);
        let v3 = version == FormatVersion::V3;
        assert_eq!(after.data["a.parquet"].manifest_first_row_id.is_some(), v3);
        // a's old delete file is gone, the new one (all 3 rows) live at this snapshot's
        // sequence number; b's is untouched.
        let (old, new) = (&before.deletes["a.parquet"], &after.deletes["a.parquet"]);
        assert_ne!(old.path, new.path, "{version}");
        assert_eq!(new.records, 3);
        let sequence = before.data["a.parquet"].sequence.unwrap() + 1;
        assert_eq!(
            (new.status, new.sequence),
            (ManifestStatus::Added, Some(sequence))
        );
        assert_eq!(carried(&after, "b"), carried(&before, "b"), "{version}");
        assert_eq!(after.deletes.len(), 2);
        // The summary counts the delete files only.
        let s = &after.summary;
        assert!(
            !s.contains_key("added-data-files") && !s.contains_key("deleted-data-files"),
            "{s:?}"
        );
        assert!(
            !s.contains_key("added-records") && !s.contains_key("deleted-records"),
            "{s:?}"
        );
        assert_eq!(
            (
                s["added-delete-files"].as_str(),
                s["removed-delete-files"].as_str()
            ),
            ("1", "1")
        );
        assert_eq!(
            (
                s["added-position-deletes"].as_str(),
                s["removed-position-deletes"].as_str()
            ),
            ("3", "1")
        );
        assert_eq!(
            (s["total-data-files"].as_str(), s["total-records"].as_str()),
            ("3", "30")
        );
        assert_eq!(
            (
                s["total-delete-files"].as_str(),
                s["total-position-deletes"].as_str()
            ),
            ("2", "5")
        );
        assert_eq!(after.operation, "delete", "{version}");
    }
}

#[tokio::test]
async fn a_re_add_of_another_size_is_a_new_entry() {
    for version in versions() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), version);
        let before = first(&table, version).await;
        let mut bigger = file("a.parquet", &[1, 4]);
        bigger.size_bytes = 200;
        table
            .commit(&change(2, vec![bigger], &["a.parquet"]))
            .await
            .unwrap();
        let after = current(&table, version).await;
        let (was, now) = (&before.data["a.parquet"], &after.data["a.parquet"]);
        assert_ne!(now.manifest, was.manifest, "{version}");
        assert_eq!(now.status, ManifestStatus::Added);
        assert_eq!(now.sequence, Some(was.sequence.unwrap() + 1));
        // b and c carried by the rewritten manifest, as existing entries.
        assert_eq!(after.data["b.parquet"].status, ManifestStatus::Existing);
        assert_eq!(after.data["b.parquet"].sequence, was.sequence);
        let s = &after.summary;
        assert_eq!(
            (
                s["added-data-files"].as_str(),
                s["deleted-data-files"].as_str()
            ),
            ("1", "1")
        );
        assert_eq!(after.deletes["a.parquet"].records, 2);
        assert_eq!(after.operation, "overwrite");
    }
}

#[tokio::test]
async fn a_re_add_of_a_path_no_manifest_holds_is_refused() {
    for version in versions() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), version);
        first(&table, version).await;
        let before = metadata_files(dir.path());
        let err = table
            .commit(&change(2, vec![file("z.parquet", &[1])], &["z.parquet"]))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("z.parquet") && err.contains("commit 2"),
            "{err}"
        );
        assert_eq!(
            metadata_files(dir.path()),
            before,
            "{version}: metadata/ changed"
        );
    }
}

/// Every file under `metadata/` with its bytes.
fn metadata_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

#[tokio::test]
async fn a_re_add_without_a_vector_drops_the_old_one_and_keeps_the_entry() {
    for version in versions() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), version);
        let before = first(&table, version).await;
        // Delta's RESTORE to before a's vector: a added again with none.
        table
            .commit(&change(2, vec![file("a.parquet", &[])], &["a.parquet"]))
            .await
            .unwrap();
        let after = current(&table, version).await;
        assert_eq!(after.data, before.data, "{version}");
        assert!(
            !after.deletes.contains_key("a.parquet"),
            "{version}: {:?}",
            after.deletes
        );
        let s = &after.summary;
        let v3 = version == FormatVersion::V3;
        if v3 {
            // b's vector shared a's Puffin file: it is moved (the same blob) into a Puffin
            // file of this commit, so no live entry names the file of a's dropped vector
            // (pyiceberg applies every blob of a file it reads).
            let b = &after.deletes["b.parquet"];
            assert_ne!(b.path, before.deletes["b.parquet"].path);
            assert_eq!((b.records, b.sequence), (2, Some(2)));
            assert_eq!(vector_bytes(b), vector_bytes(&before.deletes["b.parquet"]));
            let old = &before.deletes["a.parquet"].path;
            assert!(after.deletes.values().all(|e| &e.path != old));
        } else {
            assert_eq!(carried(&after, "b"), carried(&before, "b"), "{version}");
        }
        let (removed, added) = if v3 { ("2", Some("1")) } else { ("1", None) };
        assert_eq!(
            (
                s["removed-delete-files"].as_str(),
                s.get("added-delete-files").map(String::as_str),
                s["total-position-deletes"].as_str()
            ),
            (removed, added, "2")
        );
        assert!(!s.contains_key("added-data-files"), "{s:?}");
        // Rows come back: an overwrite, not a delete.
        assert_eq!(after.operation, "overwrite", "{version}");
        // And a vector again on the kept entry: it applies (sequence number above the
        // data file's).
        table
            .commit(&change(3, vec![file("a.parquet", &[7])], &["a.parquet"]))
            .await
            .unwrap();
        let last = current(&table, version).await;
        assert_eq!(last.data, before.data, "{version}");
        let a = &last.deletes["a.parquet"];
        assert_eq!((a.records, a.sequence), (1, Some(3)));
        assert!(a.sequence >= last.data["a.parquet"].sequence);
    }
}

/// The same in a partitioned table (string, date, timestamp, decimal and a null): the
/// partition tuple read back from the manifest equals the one the re-add describes, so the
/// entry stays; a re-add in another partition is new content.
#[tokio::test]
async fn a_new_vector_in_a_partitioned_table_keeps_the_entry() {
    use xlake_model::{
        Field, PartitionField, PartitionSpec, PrimitiveType, Schema, TimeUnit, Value,
    };
    let schema = Schema::new(vec![
        Field::required("id", PrimitiveType::Long),
        Field::optional("s", PrimitiveType::String),
        Field::optional("d", PrimitiveType::Date),
        Field::optional(
            "ts",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: true,
            },
        ),
        Field::optional(
            "dec",
            PrimitiveType::Decimal {
                precision: 10,
                scale: 2,
            },
        ),
        Field::optional("n", PrimitiveType::Int),
    ]);
    let spec = PartitionSpec::new(
        ["s", "d", "ts", "dec", "n"]
            .into_iter()
            .map(PartitionField::identity)
            .collect(),
    );
    let partitioned = |id: u64, files: Vec<DataFile>, removed: &[&str]| {
        let mut c = change(id, files, removed);
        c.schema = schema.clone();
        c.partition_spec = spec.clone();
        c
    };
    let tuple = |s: &str| {
        vec![
            Some(Value::String(s.into())),
            Some(Value::Date(19_000)),
            Some(Value::Timestamp(1_700_000_000_123_456)),
            Some(Value::Decimal(12_345)),
            None,
        ]
    };
    let a = |deleted: &[u64], s: &str| file("s=x/a.parquet", deleted).with_partition(tuple(s));
    for version in versions() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), version);
        table
            .commit(&partitioned(1, vec![a(&[1], "x")], &[]))
            .await
            .unwrap();
        let before = current(&table, version).await;
        let again = partitioned(2, vec![a(&[1, 2], "x")], &["s=x/a.parquet"]);
        table.commit(&again).await.unwrap();
        let after = current(&table, version).await;
        assert_eq!(after.data, before.data, "{version}: the entry stays");
        assert_eq!(after.deletes["a.parquet"].records, 2);
        // In another partition: its old entry goes, a new one comes.
        let moved = partitioned(3, vec![a(&[1, 2], "y")], &["s=x/a.parquet"]);
        table.commit(&moved).await.unwrap();
        let last = current(&table, version).await;
        assert_ne!(
            last.data["a.parquet"].manifest,
            before.data["a.parquet"].manifest
        );
        assert_eq!(last.data["a.parquet"].sequence, Some(3), "{version}");
        assert_eq!(last.deletes["a.parquet"].sequence, Some(3));
    }
}

/// v3: a vector replaced by one deleting fewer rows (a RESTORE to an older, smaller
/// vector) moves the live vectors out of every Puffin file holding an older blob of its
/// file, the first commit's too; one deleting more moves nothing.
#[tokio::test]
async fn a_smaller_vector_moves_the_vectors_sharing_a_file_with_its_older_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path(), FormatVersion::V3);
    let files = vec![file("a.parquet", &[1, 2]), file("b.parquet", &[3])];
    table.commit(&change(1, files, &[])).await.unwrap();
    let before = current(&table, FormatVersion::V3).await;
    let larger = change(2, vec![file("a.parquet", &[1, 2, 4])], &["a.parquet"]);
    table.commit(&larger).await.unwrap();
    let after = current(&table, FormatVersion::V3).await;
    assert_eq!(carried(&after, "b"), carried(&before, "b"), "b stays");
    // Version 3: a's vector of version 2 dropped for a smaller one; version 1's Puffin
    // file (a's first blob, b's live one) is left by b.
    let smaller = change(3, vec![file("a.parquet", &[1])], &["a.parquet"]);
    table.commit(&smaller).await.unwrap();
    let last = current(&table, FormatVersion::V3).await;
    let b = &last.deletes["b.parquet"];
    assert_ne!(b.path, before.deletes["b.parquet"].path);
    assert_eq!(vector_bytes(b), vector_bytes(&before.deletes["b.parquet"]));
    assert_eq!((b.records, b.sequence), (1, Some(3)));
    assert_eq!(last.deletes["a.parquet"].records, 1);
    assert_eq!(last.data, before.data);
    let s = &last.summary;
    assert_eq!(
        (
            s["removed-delete-files"].as_str(),
            s["added-delete-files"].as_str()
        ),
        ("2", "2")
    );
    assert_eq!(s["total-position-deletes"], "2");
}
