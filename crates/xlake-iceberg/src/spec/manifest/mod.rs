//! Manifests and manifest lists: encoded into memory ([`crate::manifest_write`] and
//! [`crate::list_write`], iceberg-rust's writers as their fallback), then persisted
//! through the table's own [`TableStore`], so there is one I/O stack.
//!
//! v3 row lineage: a data file entry carried into a new manifest (merged, or rewritten
//! around a removed file) gets the first row id it had written
//! explicitly ([`carry_row_ids`], [`with_first_row_id`]), and the manifest list gives a
//! manifest of such entries no new row ids ([`write_manifest_list`]), so `_row_id` of an
//! unchanged row never changes and `next-row-id` grows by the rows added only.

pub(crate) mod read;
pub(crate) mod record;
pub(crate) mod write;

use std::collections::HashSet;

use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, DataFileBuilder, FormatVersion, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestStatus, PartitionSpec, SchemaRef, UNASSIGNED_SEQUENCE_NUMBER,
};
use xlake_storage::TableStore;

use crate::list_carry::{self, ParentList};
use crate::list_write::{self, ListOf};
use crate::manifest_write::{self, Sink};

/// A manifest's live and deleted entries (see [`crate::manifest_read`]), with inherited
/// snapshot ids and sequence numbers filled in from the manifest list.
pub(crate) async fn read_entries(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, String> {
    entries_of(&read_manifest_bytes(store, manifest).await?, manifest)
}

/// What was read of a manifest to learn which files it holds.
pub(crate) enum Held {
    /// A data manifest's live data files (path, row count, size), read without their stats.
    Paths(Vec<crate::manifest_read::Live>),
    /// Every entry, decoded whole (a delete manifest, or one the fast read does not take).
    Entries(Vec<ManifestEntry>),
}

/// [`Held`] of `manifest`'s file, read as `bytes`: the paths only where the fast read
/// takes a data manifest (`manifest_read::live_files`), else the entries.
pub(crate) fn held(bytes: &[u8], manifest: &ManifestFile) -> Result<Held, String> {
    if manifest.content == ManifestContentType::Data {
        if let Some(files) = crate::manifest_read::live_files(bytes) {
            return Ok(Held::Paths(files));
        }
    }
    entries_of(bytes, manifest).map(Held::Entries)
}

/// The paths of `manifest`'s files: of a data manifest its live data files (read without
/// their stats where the fast read takes it), of a delete manifest every delete file.
pub(crate) async fn read_paths(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Vec<String>, String> {
    let bytes = read_manifest_bytes(store, manifest).await?;
    let data = manifest.content == ManifestContentType::Data;
    Ok(match held(&bytes, manifest)? {
        Held::Paths(files) => files.into_iter().map(|f| f.path).collect(),
        Held::Entries(entries) => entries
            .iter()
            .filter(|e| !data || e.is_alive())
            .map(|e| e.file_path().to_string())
            .collect(),
    })
}

/// The bytes of `manifest`'s file.
pub(crate) async fn read_manifest_bytes(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Bytes, String> {
    store
        .get_written_once(&manifest.manifest_path)
        .await
        .map_err(|e| e.to_string())
}

/// [`read_entries`] of `manifest`'s file, read as `bytes`.
pub(crate) fn entries_of(
    bytes: &[u8],
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, String> {
    let entries = crate::manifest_read::entries(bytes, &manifest.manifest_path)?;
    Ok(entries
        .into_iter()
        .map(|mut entry| {
            if entry.snapshot_id.is_none() {
                entry.snapshot_id = Some(manifest.added_snapshot_id);
            }
            if entry.status == ManifestStatus::Added {
                entry.sequence_number = entry.sequence_number.or(Some(manifest.sequence_number));
                entry.file_sequence_number = entry
                    .file_sequence_number
                    .or(Some(manifest.sequence_number));
            }
            entry
        })
        .collect())
}

/// `entries` of a data `manifest` with every live data file's first row id written
/// explicitly: its own, or the one it inherits (spec, "First Row ID Inheritance": the
/// manifest's `first_row_id` plus the record counts of the live files before it in the
/// manifest that have none; what Iceberg's Java `ManifestReader` assigns). Unchanged when
/// the list gave the manifest no `first_row_id` (format version 2, or a manifest of a
/// snapshot older than the upgrade to 3: its files get ids from the new list instead),
/// and for delete manifests.
pub(crate) fn carry_row_ids(
    manifest: &ManifestFile,
    entries: Vec<ManifestEntry>,
) -> Result<Vec<ManifestEntry>, String> {
    let Some(first) = manifest.first_row_id else {
        return Ok(entries);
    };
    if manifest.content != ManifestContentType::Data {
        return Ok(entries);
    }
    let mut next = i64::try_from(first).map_err(|e| e.to_string())?;
    entries
        .into_iter()
        .map(|mut e| {
            if e.status != ManifestStatus::Deleted && e.data_file.first_row_id().is_none() {
                let rows = e.data_file.record_count();
                e.data_file = with_first_row_id(&e.data_file, manifest.partition_spec_id, next)
                    .map_err(|reason| format!("{}: {reason}", e.data_file.file_path()))?;
                next = i64::try_from(rows)
                    .ok()
                    .and_then(|rows| next.checked_add(rows))
                    .ok_or("row id overflow")?;
            }
            Ok(e)
        })
        .collect()
}

/// `file` with `first_row_id` set (iceberg-rust's `DataFile` has no setter: every field
/// is copied into a builder; the partition spec id, which has no getter and is not
/// written, is the manifest's).
fn with_first_row_id(file: &DataFile, spec_id: i32, first_row_id: i64) -> Result<DataFile, String> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(first_row_id))
        .partition_spec_id(spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| e.to_string())
}

/// Whether every one of a new manifest's live data `files` has its first row id written
/// (see [`carry_row_ids`]): a manifest list gives such a manifest no new row ids.
pub(crate) fn carries_row_ids<'a>(mut files: impl Iterator<Item = &'a DataFile>) -> bool {
    files.all(|f| f.first_row_id().is_some())
}

/// Whether a listed manifest may hold live entries (its counts, when written, say so;
/// without them it is assumed to).
pub(crate) fn may_hold_live(manifest: &ManifestFile) -> bool {
    manifest.added_files_count.unwrap_or(1) + manifest.existing_files_count.unwrap_or(1) > 0
}

/// The manifests of a manifest list (see [`crate::list_read`]).
pub(crate) async fn read_manifest_list(
    store: &TableStore,
    location: &str,
) -> Result<Vec<ManifestFile>, String> {
    read_list_file(store, location).await?.manifests()
}

/// A manifest list as read or written: its location, its bytes (which a list keeping all
/// its manifests may carry, see [`crate::list_carry`]) and its manifests, once read from
/// them or when written (not when it carried its parent's records unread).
#[derive(Debug, Clone)]
pub(crate) struct ListFile {
    pub(crate) location: String,
    pub(crate) decoded: Option<Vec<ManifestFile>>,
    pub(crate) bytes: Bytes,
}

impl ListFile {
    /// Its manifests, read from its bytes unless they are already known.
    pub(crate) fn manifests(self) -> Result<Vec<ManifestFile>, String> {
        match self.decoded {
            Some(manifests) => Ok(manifests),
            None => crate::list_read::manifests(&self.bytes, &self.location),
        }
    }
}

/// The manifest list at `location`, its records not read yet (an append may carry them
/// unread, see [`crate::list_carry::whole`]).
pub(crate) async fn read_list_file(store: &TableStore, location: &str) -> Result<ListFile, String> {
    let bytes = store
        .get_written_once(location)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ListFile {
        location: location.to_string(),
        decoded: None,
        bytes,
    })
}

/// Write one manifest (of data files, or of delete files when `deletes`) at `location`,
/// filled by `fill`, in the table's format `version` (2 or 3): encoded directly where
/// [`manifest_write`](crate::manifest_write) can, else by iceberg-rust's writer.
pub(crate) async fn write_manifest(
    store: &TableStore,
    location: &str,
    (snapshot_id, version): (i64, FormatVersion),
    (schema, spec): (SchemaRef, PartitionSpec),
    deletes: bool,
    fill: impl FnOnce(&mut Sink) -> iceberg::Result<()>,
) -> Result<ManifestFile, String> {
    let content = match deletes {
        true => ManifestContentType::Deletes,
        false => ManifestContentType::Data,
    };
    let mut sink = Sink::new(snapshot_id, content);
    fill(&mut sink).map_err(|e| e.to_string())?;
    let shape = (&schema, &spec);
    let partition = manifest_write::partition_type(&sink, shape)?;
    let encoded = manifest_write::encode(&sink, location, shape, version, &partition).await;
    let (bytes, manifest) = match encoded {
        Some((bytes, manifest)) => (bytes.into(), manifest),
        None => manifest_write::iceberg_write(sink, location, shape, version).await?,
    };
    store
        .put(location, bytes)
        .await
        .map_err(|e| e.to_string())?;
    Ok(manifest)
}

/// Write the manifest list of a snapshot at `location`; with `first_row_id` (a v3 table's
/// `next-row-id`), a v3 list that gives each data manifest without one its row id range:
/// iceberg-rust's `ManifestListWriter::v3` gives a new manifest its added and existing
/// rows. A manifest of `carried` (every live file's id written, see [`carry_row_ids`])
/// gets the next id as its `first_row_id` and no rows: the spec makes counting existing
/// rows optional when their files have ids, and counting them would give rows that have
/// ids new ones. Returns the manifests as the list holds them: the new ones with the
/// snapshot's sequence number (and v3 first row id), as the writer assigns them (so the
/// next commit of a batch need not read the list back), the rows given ids (v3
/// `added-rows`) and the list's bytes. With `parent_list`, when the last of `manifests`
/// are the parent's, the parent's records may be carried as written
/// ([`crate::list_carry`]); when it is carried whole, `manifests` are only the new ones,
/// the parent's records follow them unread, and no manifests are returned.
pub(crate) async fn write_manifest_list(
    store: &TableStore,
    location: &str,
    (snapshot_id, parent): (i64, Option<i64>),
    (sequence_number, first_row_id): (i64, Option<u64>),
    mut manifests: Vec<ManifestFile>,
    carried: &HashSet<String>,
    parent_list: Option<&ParentList>,
) -> Result<(Option<Vec<ManifestFile>>, u64, Bytes), String> {
    let of = ListOf {
        snapshot_id,
        parent,
        sequence_number,
        first_row_id,
    };
    let counted = assign(of, &mut manifests, carried)?;
    let whole = parent_list.filter(|p| p.whole);
    let bytes = match whole {
        // `list_carry::whole` checked what `encode` checks.
        Some(parent) => list_carry::encode(of, &manifests, parent)
            .ok_or("the parent's manifest list cannot be carried after all")??
            .into(),
        None => encode_list(of, &manifests, &counted, parent_list).await?,
    };
    store
        .put(location, bytes.clone())
        .await
        .map_err(|e| e.to_string())?;
    // Never negative: row ids only grow from `first_row_id` (checked in `assign`).
    let added_rows = counted.next_row_id.unwrap_or(0) - first_row_id.unwrap_or(0);
    Ok((whole.is_none().then_some(manifests), added_rows, bytes))
}

/// The list of `manifests`: the parent's records carried when they are its tail, else
/// encoded here, else by iceberg-rust.
async fn encode_list(
    of: ListOf,
    manifests: &[ManifestFile],
    counted: &Counted,
    parent_list: Option<&ParentList>,
) -> Result<Bytes, String> {
    let tail = parent_list.and_then(|p| Some((p, list_carry::tail_of(manifests, p)?)));
    let carried_list = match tail {
        Some((parent, new)) => list_carry::encode(of, &manifests[..new], parent),
        None => None,
    };
    let encoded = match carried_list {
        Some(encoded) => Some(encoded),
        None => list_write::encode(of, manifests),
    };
    match encoded {
        Some(bytes) => Ok(Bytes::from(bytes?)),
        None => iceberg_list(of, manifests, counted).await,
    }
}

/// The manifests a list assigned row ids to (by index), and the next row id after them.
struct Counted {
    indices: Vec<usize>,
    next_row_id: Option<u64>,
}

/// What iceberg-rust's list writer assigns, assigned in place: the snapshot's sequence
/// number to its own new manifests, and (v3) row id ranges in list order, a carried
/// manifest getting the next id and no rows.
fn assign(
    of: ListOf,
    manifests: &mut [ManifestFile],
    carried: &HashSet<String>,
) -> Result<Counted, String> {
    let mut counted = Counted {
        indices: Vec::new(),
        next_row_id: of.first_row_id,
    };
    for (i, m) in manifests.iter_mut().enumerate() {
        // A v3 list gives a delete manifest no row ids (iceberg-rust's writer drops any).
        if of.first_row_id.is_some() && m.content == ManifestContentType::Deletes {
            m.first_row_id = None;
        }
        if let (Some(next), ManifestContentType::Data, None) =
            (counted.next_row_id, m.content, m.first_row_id)
        {
            m.first_row_id = Some(next);
            if !carried.contains(&m.manifest_path) {
                // Row ids are Iceberg longs: signed.
                let rows = m.added_rows_count.unwrap_or(0);
                let next = rows
                    .checked_add(m.existing_rows_count.unwrap_or(0))
                    .and_then(|rows| next.checked_add(rows))
                    .filter(|n| i64::try_from(*n).is_ok())
                    .ok_or_else(|| format!("{}: row ids overflow", m.manifest_path))?;
                counted.next_row_id = Some(next);
                counted.indices.push(i);
            }
        }
        for n in [&mut m.sequence_number, &mut m.min_sequence_number] {
            if *n == UNASSIGNED_SEQUENCE_NUMBER {
                if m.added_snapshot_id != of.snapshot_id {
                    return Err(format!(
                        "{}: an unassigned sequence number in a manifest of snapshot {}",
                        m.manifest_path, m.added_snapshot_id
                    ));
                }
                *n = of.sequence_number;
            }
        }
    }
    Ok(counted)
}

/// The list written by iceberg-rust's writer, which assigns the row ids of `counted`
/// itself (and must arrive at the same next row id).
async fn iceberg_list(
    of: ListOf,
    manifests: &[ManifestFile],
    counted: &Counted,
) -> Result<Bytes, String> {
    let mut given = manifests.to_vec();
    for &i in &counted.indices {
        given[i].first_row_id = None;
    }
    let (bytes, assigned) = list_write::iceberg_write(of, given).await?;
    if assigned != counted.next_row_id {
        return Err(format!(
            "row ids assigned up to {assigned:?}, expected {:?}",
            counted.next_row_id
        ));
    }
    Ok(bytes)
}

/// The bytes an iceberg-rust writer left at `location` in the in-memory `io`.
pub(crate) async fn written(io: &FileIO, location: &str) -> Result<Bytes, String> {
    let input = io.new_input(location).map_err(|e| e.to_string())?;
    input.read().await.map_err(|e| e.to_string())
}

/// Copy a file written to the in-memory `io` into the store.
pub(crate) async fn persist(store: &TableStore, io: &FileIO, location: &str) -> Result<(), String> {
    let bytes = written(io, location).await?;
    store.put(location, bytes).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use iceberg::spec::{DataContentType, DataFileFormat, Datum, Literal, Struct};

    use super::*;

    fn data_file(path: &str, rows: u64, first_row_id: Option<i64>) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(rows)
            .file_size_in_bytes(10)
            .first_row_id(first_row_id)
            .build()
            .unwrap()
    }

    fn entry(status: ManifestStatus, file: DataFile) -> ManifestEntry {
        ManifestEntry {
            status,
            snapshot_id: Some(1),
            sequence_number: Some(1),
            file_sequence_number: Some(1),
            data_file: file,
        }
    }

    fn listed(first_row_id: Option<u64>, content: ManifestContentType) -> ManifestFile {
        ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: Some(0),
            existing_files_count: Some(0),
            deleted_files_count: Some(0),
            added_rows_count: Some(0),
            existing_rows_count: Some(0),
            deleted_rows_count: Some(0),
            partitions: None,
            key_metadata: None,
            first_row_id,
        }
    }

    /// Every field of a data file survives setting its first row id.
    #[test]
    fn with_first_row_id_copies_every_field() {
        let full = |first_row_id| {
            DataFileBuilder::default()
                .content(DataContentType::PositionDeletes)
                .file_path("s3://b/t/x.puffin".into())
                .file_format(DataFileFormat::Puffin)
                .partition(Struct::from_iter([Some(Literal::long(7))]))
                .record_count(3)
                .file_size_in_bytes(99)
                .column_sizes(HashMap::from([(1, 5)]))
                .value_counts(HashMap::from([(1, 3)]))
                .null_value_counts(HashMap::from([(1, 1)]))
                .nan_value_counts(HashMap::from([(2, 0)]))
                .lower_bounds(HashMap::from([(1, Datum::long(1))]))
                .upper_bounds(HashMap::from([(1, Datum::long(9))]))
                .key_metadata(Some(vec![1, 2]))
                .split_offsets(Some(vec![4]))
                .equality_ids(Some(vec![1]))
                .sort_order_id(3)
                .first_row_id(first_row_id)
                .partition_spec_id(5)
                .referenced_data_file(Some("s3://b/t/d.parquet".into()))
                .content_offset(Some(4))
                .content_size_in_bytes(Some(20))
                .build()
                .unwrap()
        };
        assert_eq!(
            with_first_row_id(&full(None), 5, 42).unwrap(),
            full(Some(42))
        );
    }

    /// The spec's example (format/spec.md, "Row lineage example"): a manifest listed at
    /// 1000 holding an existing file with id 800 and two added files without one.
    #[test]
    fn carried_entries_get_the_ids_they_inherit() {
        let entries = vec![
            entry(ManifestStatus::Existing, data_file("data1", 25, Some(800))),
            entry(ManifestStatus::Added, data_file("data2", 50, None)),
            entry(ManifestStatus::Deleted, data_file("gone", 10, None)),
            entry(ManifestStatus::Added, data_file("data3", 50, None)),
        ];
        let ids = |m: &ManifestFile| -> Vec<Option<i64>> {
            carry_row_ids(m, entries.clone())
                .unwrap()
                .iter()
                .map(|e| e.data_file().first_row_id())
                .collect()
        };
        let data = listed(Some(1000), ManifestContentType::Data);
        assert_eq!(ids(&data), [Some(800), Some(1000), None, Some(1050)]);
        // Listed without a first row id (v2, or before an upgrade): nothing to carry.
        let v2 = listed(None, ManifestContentType::Data);
        assert_eq!(ids(&v2), [Some(800), None, None, None]);
        let deletes = listed(Some(1000), ManifestContentType::Deletes);
        assert_eq!(ids(&deletes), [Some(800), None, None, None]);
    }

    /// A carried manifest gets the next id and no rows; new manifests their added and
    /// existing rows, as the spec's example.
    #[tokio::test]
    async fn a_carried_manifest_gets_no_new_row_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let manifest = |path: &str, added: u64, existing: u64| ManifestFile {
            manifest_path: store.absolute(path),
            added_rows_count: Some(added),
            existing_rows_count: Some(existing),
            ..listed(None, ManifestContentType::Data)
        };
        let kept = ManifestFile {
            first_row_id: Some(925),
            ..manifest("kept.avro", 75, 0)
        };
        let manifests = [
            kept,
            manifest("added1.avro", 100, 25),
            manifest("carried.avro", 0, 100),
            manifest("added3.avro", 125, 25),
        ];
        let carried = HashSet::from([store.absolute("carried.avro")]);
        let list = store.absolute("metadata/list.avro");
        let (listed, added_rows, _) = write_manifest_list(
            &store,
            &list,
            (1, None),
            (1, Some(1000)),
            manifests.to_vec(),
            &carried,
            None,
        )
        .await
        .unwrap();
        let listed = listed.unwrap();
        let ids: Vec<_> = listed.iter().map(|m| m.first_row_id).collect();
        assert_eq!(ids, [Some(925), Some(1000), Some(1125), Some(1125)]);
        assert_eq!(added_rows, 275);
        let written = read_manifest_list(&store, &list).await.unwrap();
        let ids: Vec<_> = written.iter().map(|m| m.first_row_id).collect();
        assert_eq!(ids, [Some(925), Some(1000), Some(1125), Some(1125)]);
        // iceberg-rust's writer, given the same assignments to redo, writes the same list.
        let of = ListOf {
            snapshot_id: 1,
            parent: None,
            sequence_number: 1,
            first_row_id: Some(1000),
        };
        let mut again = manifests.clone();
        let counted = assign(of, &mut again, &carried).unwrap();
        assert_eq!(again.to_vec(), listed);
        let bytes = iceberg_list(of, &again, &counted).await.unwrap();
        assert_eq!(crate::list_read::manifests(&bytes, &list).unwrap(), written);
        // Row ids that would overflow are refused, naming the manifest.
        let mut huge = manifests.to_vec();
        huge[1].added_rows_count = Some(u64::MAX - 10);
        let err = assign(of, &mut huge, &carried).err().unwrap();
        assert!(err.ends_with("added1.avro: row ids overflow"), "{err}");
        let near = ListOf {
            first_row_id: Some(i64::MAX as u64 - 5),
            ..of
        };
        let mut ids = manifests.to_vec();
        ids[0].first_row_id = None;
        let err = assign(near, &mut ids, &carried).err().unwrap();
        assert!(err.ends_with("kept.avro: row ids overflow"), "{err}");
        // A delete manifest comes back without a row id, as the list holds it.
        let mut deletes = [ManifestFile {
            content: ManifestContentType::Deletes,
            first_row_id: Some(5),
            ..manifest("deletes.avro", 0, 0)
        }];
        assign(of, &mut deletes, &carried).unwrap();
        assert_eq!(deletes[0].first_row_id, None);
    }
}
