//! Manifests and manifest lists: written by iceberg-rust's writers into memory, then
//! persisted through the table's own [`TableStore`], so there is one I/O stack.

use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, Manifest, ManifestEntry, ManifestFile, ManifestList, ManifestListWriter,
    ManifestStatus, ManifestWriter, ManifestWriterBuilder, PartitionSpec, SchemaRef,
    UNASSIGNED_SEQUENCE_NUMBER,
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
    ManifestList::parse_with_version(&bytes, FormatVersion::V2)
        .map(|l| l.consume_entries().into_iter().collect())
        .map_err(|e| format!("{location}: {e}"))
}

/// Write one manifest (of data files, or of delete files when `deletes`) at `location`,
/// filled by `fill`.
pub(crate) async fn write_manifest(
    store: &TableStore,
    location: &str,
    snapshot_id: i64,
    (schema, spec): (SchemaRef, PartitionSpec),
    deletes: bool,
    fill: impl FnOnce(&mut ManifestWriter) -> iceberg::Result<()>,
) -> Result<ManifestFile, String> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(|e| e.to_string())?;
    let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), None, schema, spec);
    let mut writer = if deletes {
        builder.build_v2_deletes()
    } else {
        builder.build_v2_data()
    };
    fill(&mut writer).map_err(|e| e.to_string())?;
    let manifest = writer
        .write_manifest_file()
        .await
        .map_err(|e| e.to_string())?;
    persist(store, &io, location).await?;
    Ok(manifest)
}

/// Write the manifest list of a snapshot at `location`. Returns the manifests as the
/// list holds them: the new ones with the snapshot's sequence number, as the writer
/// assigns it (so the next commit of a batch need not read the list back).
pub(crate) async fn write_manifest_list(
    store: &TableStore,
    location: &str,
    snapshot_id: i64,
    parent: Option<i64>,
    sequence_number: i64,
    manifests: Vec<ManifestFile>,
) -> Result<Vec<ManifestFile>, String> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(|e| e.to_string())?;
    let mut writer = ManifestListWriter::v2(output, snapshot_id, parent, sequence_number);
    writer
        .add_manifests(manifests.clone().into_iter())
        .map_err(|e| e.to_string())?;
    writer.close().await.map_err(|e| e.to_string())?;
    persist(store, &io, location).await?;
    Ok(manifests
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
        .collect())
}

async fn persist(store: &TableStore, io: &FileIO, location: &str) -> Result<(), String> {
    let bytes = io
        .new_input(location)
        .map_err(|e| e.to_string())?
        .read()
        .await
        .map_err(|e| e.to_string())?;
    store.put(location, bytes).await.map_err(|e| e.to_string())
}
