//! Manifests and manifest lists: encoded into memory ([`crate::spec::manifest::write`] and
//! [`crate::spec::manifest_list::write`], iceberg-rust's writers as their fallback), then persisted
//! through the table's own [`TableStore`], so there is one I/O stack.
//!
//! v3 row lineage: a data file entry carried into a new manifest (merged, or rewritten
//! around a removed file) gets the first row id it had written
//! explicitly ([`carry_row_ids`], [`with_first_row_id`]), and the manifest list gives a
//! manifest of such entries no new row ids ([`write_manifest_list`]), so `_row_id` of an
//! unchanged row never changes and `next-row-id` grows by the rows added only.

pub(crate) mod avro_name;
pub(crate) mod inflate;
pub(crate) mod read;
pub(crate) mod record;
pub(crate) mod write;

use bytes::Bytes;
use iceberg::spec::{
    DataFile, DataFileBuilder, FormatVersion, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestStatus, PartitionSpec, SchemaRef,
};
use xlake_storage::TableStore;

use crate::spec::manifest::write::{self as manifest_write, Sink};

use crate::spec::error::CodecError;

/// A manifest's live and deleted entries (see [`crate::spec::manifest::read`]), with inherited
/// snapshot ids and sequence numbers filled in from the manifest list.
pub(crate) async fn read_entries(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, CodecError> {
    entries_of(&read_manifest_bytes(store, manifest).await?, manifest)
}

/// What was read of a manifest to learn which files it holds.
pub(crate) enum Held {
    /// A data manifest's live data files (path, row count, size), read without their stats.
    Paths(Vec<crate::spec::manifest::read::Live>),
    /// Every entry, decoded whole (a delete manifest, or one the fast read does not take).
    Entries(Vec<ManifestEntry>),
}

/// [`Held`] of `manifest`'s file, read as `bytes`: the paths only where the fast read
/// takes a data manifest (`manifest_read::live_files`), else the entries.
pub(crate) fn held(bytes: &[u8], manifest: &ManifestFile) -> Result<Held, CodecError> {
    if manifest.content == ManifestContentType::Data {
        if let Some(files) = crate::spec::manifest::read::live_files(bytes) {
            return Ok(Held::Paths(files));
        }
    }
    entries_of(bytes, manifest).map(Held::Entries)
}

/// The paths of `manifest`'s files, each with whether its entry is live: of a data
/// manifest its live data files (read without their stats where the fast read takes it),
/// of a delete manifest every delete file.
pub(crate) async fn read_paths(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Vec<(String, bool)>, CodecError> {
    let bytes = read_manifest_bytes(store, manifest).await?;
    let data = manifest.content == ManifestContentType::Data;
    Ok(match held(&bytes, manifest)? {
        Held::Paths(files) => files.into_iter().map(|f| (f.path, true)).collect(),
        Held::Entries(entries) => entries
            .iter()
            .filter(|e| !data || e.is_alive())
            .map(|e| (e.file_path().to_string(), e.is_alive()))
            .collect(),
    })
}

/// The bytes of `manifest`'s file.
pub(crate) async fn read_manifest_bytes(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Bytes, CodecError> {
    store
        .get_written_once(&manifest.manifest_path)
        .await
        .map_err(CodecError::library)
}

/// [`read_entries`] of `manifest`'s file, read as `bytes`.
pub(crate) fn entries_of(
    bytes: &[u8],
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, CodecError> {
    let entries = crate::spec::manifest::read::entries(bytes, &manifest.manifest_path)?;
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
) -> Result<Vec<ManifestEntry>, CodecError> {
    let Some(first) = manifest.first_row_id else {
        return Ok(entries);
    };
    if manifest.content != ManifestContentType::Data {
        return Ok(entries);
    }
    let mut next = i64::try_from(first).map_err(CodecError::library)?;
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
fn with_first_row_id(
    file: &DataFile,
    spec_id: i32,
    first_row_id: i64,
) -> Result<DataFile, CodecError> {
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
    b.build().map_err(CodecError::library)
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

/// Write one manifest (of data files, or of delete files when `deletes`) at `location`,
/// filled by `fill`, in the table's format `version` (2 or 3): encoded directly where
/// [`manifest_write`](crate::spec::manifest::write) can, else by iceberg-rust's writer.
pub(crate) async fn write_manifest(
    store: &TableStore,
    location: &str,
    (snapshot_id, version): (i64, FormatVersion),
    (schema, spec): (SchemaRef, PartitionSpec),
    deletes: bool,
    fill: impl FnOnce(&mut Sink) -> iceberg::Result<()>,
) -> Result<ManifestFile, CodecError> {
    let content = match deletes {
        true => ManifestContentType::Deletes,
        false => ManifestContentType::Data,
    };
    let mut sink = Sink::new(snapshot_id, content);
    fill(&mut sink).map_err(CodecError::library)?;
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
        .map_err(CodecError::library)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use iceberg::spec::{DataContentType, DataFileFormat, Datum, Literal, Struct};

    use super::*;
    use crate::spec::manifest_list::tests::listed;

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
}
