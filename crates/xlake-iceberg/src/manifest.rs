//! Manifests and manifest lists: written by iceberg-rust's writers into memory, then
//! persisted through the table's own [`TableStore`], so there is one I/O stack.

use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, Manifest, ManifestContentType, ManifestEntry, ManifestFile, ManifestList,
    ManifestListWriter, ManifestStatus, ManifestWriter, ManifestWriterBuilder, PartitionSpec,
    SchemaRef, UNASSIGNED_SEQUENCE_NUMBER,
};
use xlake_storage::TableStore;

/// A manifest's live and deleted entries, with inherited snapshot ids and sequence numbers
/// filled in from the manifest list.
pub(crate) async fn read_entries(
    store: &TableStore,
    manifest: &ManifestFile,
) -> Result<Vec<ManifestEntry>, String> {
    let bytes = store
        .get(&manifest.manifest_path)
        .await
        .map_err(|e| e.to_string())?;
    let parsed =
        Manifest::parse_avro(&bytes).map_err(|e| format!("{}: {e}", manifest.manifest_path))?;
    let (entries, _) = parsed.into_parts();
    Ok(entries
        .into_iter()
        .map(|e| {
            let mut entry = (*e).clone();
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

/// The manifests of a manifest list.
pub(crate) async fn read_manifest_list(
    store: &TableStore,
    location: &str,
) -> Result<Vec<ManifestFile>, String> {
    let bytes = store.get(location).await.map_err(|e| e.to_string())?;
    ManifestList::parse_with_version(&bytes, list_version(&bytes))
        .map(|l| l.consume_entries().into_iter().collect())
        .map_err(|e| format!("{location}: {e}"))
}

/// The format version a manifest list was written for (its `format-version` key; v3 lists
/// carry `first_row_id`, which a v2 parse would drop).
fn list_version(bytes: &[u8]) -> FormatVersion {
    let v3 = apache_avro::Reader::new(bytes).is_ok_and(|r| {
        r.user_metadata()
            .get("format-version")
            .is_some_and(|v| v.as_slice() == b"3")
    });
    if v3 {
        FormatVersion::V3
    } else {
        FormatVersion::V2
    }
}

/// Write one manifest (of data files, or of delete files when `deletes`) at `location`,
/// filled by `fill`, in the table's format `version` (2 or 3).
pub(crate) async fn write_manifest(
    store: &TableStore,
    location: &str,
    (snapshot_id, version): (i64, FormatVersion),
    (schema, spec): (SchemaRef, PartitionSpec),
    deletes: bool,
    fill: impl FnOnce(&mut ManifestWriter) -> iceberg::Result<()>,
) -> Result<ManifestFile, String> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(|e| e.to_string())?;
    let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), None, schema, spec);
    let v3 = version >= FormatVersion::V3;
    let mut writer = match (deletes, v3) {
        (true, false) => builder.build_v2_deletes(),
        (false, false) => builder.build_v2_data(),
        (true, true) => builder.build_v3_deletes(),
        (false, true) => builder.build_v3_data(),
    };
    fill(&mut writer).map_err(|e| e.to_string())?;
    let manifest = writer
        .write_manifest_file()
        .await
        .map_err(|e| e.to_string())?;
    persist(store, &io, location).await?;
    Ok(manifest)
}

/// Write the manifest list of a snapshot at `location`; with `first_row_id` (a v3 table's
/// `next-row-id`), a v3 list that gives each data manifest without one its row id range.
/// Returns the manifests as the list holds them: the new ones with the snapshot's sequence
/// number (and v3 first row id), as the writer assigns them (so the next commit of a batch
/// need not read the list back), and the rows given ids (v3 `added-rows`).
pub(crate) async fn write_manifest_list(
    store: &TableStore,
    location: &str,
    snapshot_id: i64,
    parent: Option<i64>,
    (sequence_number, first_row_id): (i64, Option<u64>),
    mut manifests: Vec<ManifestFile>,
) -> Result<(Vec<ManifestFile>, u64), String> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(|e| e.to_string())?;
    let mut writer = match first_row_id {
        Some(first) => {
            ManifestListWriter::v3(output, snapshot_id, parent, sequence_number, Some(first))
        }
        None => ManifestListWriter::v2(output, snapshot_id, parent, sequence_number),
    };
    writer
        .add_manifests(manifests.clone().into_iter())
        .map_err(|e| e.to_string())?;
    // The writer assigned row id ranges in list order; the same walk here keeps them.
    let mut next_row_id = first_row_id;
    for m in manifests.iter_mut().filter(|m| m.first_row_id.is_none()) {
        if let (Some(next), ManifestContentType::Data) = (next_row_id, m.content) {
            m.first_row_id = Some(next);
            let rows = m.added_rows_count.unwrap_or(0) + m.existing_rows_count.unwrap_or(0);
            next_row_id = Some(next + rows);
        }
    }
    if writer.next_row_id() != next_row_id {
        return Err(format!(
            "row ids assigned up to {:?}, expected {next_row_id:?}",
            writer.next_row_id()
        ));
    }
    writer.close().await.map_err(|e| e.to_string())?;
    persist(store, &io, location).await?;
    let added_rows = next_row_id.unwrap_or(0) - first_row_id.unwrap_or(0);
    let listed = manifests
        .into_iter()
        .map(|mut m| {
            if m.sequence_number == UNASSIGNED_SEQUENCE_NUMBER {
                m.sequence_number = sequence_number;
            }
            if m.min_sequence_number == UNASSIGNED_SEQUENCE_NUMBER {
                m.min_sequence_number = sequence_number;
            }
            m
        })
        .collect();
    Ok((listed, added_rows))
}

/// Copy a file written to the in-memory `io` into the store.
pub(crate) async fn persist(store: &TableStore, io: &FileIO, location: &str) -> Result<(), String> {
    let bytes = io
        .new_input(location)
        .map_err(|e| e.to_string())?
        .read()
        .await
        .map_err(|e| e.to_string())?;
    store.put(location, bytes).await.map_err(|e| e.to_string())
}
