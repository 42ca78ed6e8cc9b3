//! The replay: each snapshot of the main branch's ancestry as one change set, from the
//! manifest entries that snapshot wrote (status ADDED or DELETED with its snapshot id),
//! over the live data files and deletion vectors as of its parent.

use std::collections::{BTreeSet, HashMap};

use iceberg::spec::{
    DataContentType, DataFileFormat, ManifestEntry, ManifestFile, ManifestStatus, Snapshot,
    TableMetadata,
};
use xlake_model::{
    ChangeSet, DataFile, DeletionVector, FileFormat, PartitionSpec, SourceCommit, VectorBytes,
};
use xlake_source::{ErrorKind, SourceError};
use xlake_storage::TableStore;

use super::neutral;
use super::FORMAT;

/// What is live as of a snapshot: data files by their location in the manifests, and the
/// deletion vector of each data file that has one.
#[derive(Debug, Default)]
pub(crate) struct Live {
    files: HashMap<String, DataFile>,
    vectors: HashMap<String, DeletionVector>,
}

/// One manifest entry with the partition spec of its manifest.
struct Entry {
    spec_id: i32,
    entry: ManifestEntry,
}

/// Reads snapshots of one table into change sets.
pub(crate) struct Walk<'a> {
    pub(crate) store: &'a TableStore,
    pub(crate) metadata: &'a TableMetadata,
    /// Decode deletion vectors into row positions (for a target that does not take them
    /// as stored).
    pub(crate) decode: bool,
}

impl Walk<'_> {
    fn error(&self, kind: ErrorKind, snapshot: &Snapshot, file: &str, why: String) -> SourceError {
        let file = self.store.absolute(file);
        let message = format!("snapshot {} ({file}): {why}", snapshot.snapshot_id());
        SourceError::new(kind, message)
    }

    fn corrupt(&self, snapshot: &Snapshot, file: &str, why: String) -> SourceError {
        let kind = ErrorKind::Corrupt {
            commit: Some(snapshot.snapshot_id().to_string()),
            file: Some(self.store.absolute(file)),
        };
        self.error(kind, snapshot, file, why)
    }

    fn refuse(&self, snapshot: &Snapshot, file: &str, why: String) -> SourceError {
        self.error(ErrorKind::Unsupported, snapshot, file, why)
    }

    /// The entries of `snapshot`'s manifests: with `own`, those it wrote (ADDED or DELETED
    /// with its id, in the manifests it added); else every live one (ADDED or EXISTING).
    async fn entries(&self, snapshot: &Snapshot, own: bool) -> Result<Vec<Entry>, SourceError> {
        let id = snapshot.snapshot_id();
        let list = snapshot.manifest_list();
        let manifests = crate::spec::manifest_list::read_manifest_list(self.store, list)
            .await
            .map_err(|e| self.corrupt(snapshot, list, format!("manifest list: {e}")))?;
        let mut out = Vec::new();
        for manifest in manifests
            .iter()
            .filter(|m| !own || m.added_snapshot_id == id)
        {
            out.extend(self.manifest_entries(snapshot, manifest, own).await?);
        }
        Ok(out)
    }

    async fn manifest_entries(
        &self,
        snapshot: &Snapshot,
        manifest: &ManifestFile,
        own: bool,
    ) -> Result<Vec<Entry>, SourceError> {
        let id = snapshot.snapshot_id();
        let path = &manifest.manifest_path;
        let entries = crate::spec::manifest::read_entries(self.store, manifest)
            .await
            .map_err(|e| self.corrupt(snapshot, path, format!("manifest: {e}")))?;
        let keep = |e: &ManifestEntry| match own {
            true => e.status != ManifestStatus::Existing && e.snapshot_id == Some(id),
            false => e.is_alive(),
        };
        Ok(entries
            .into_iter()
            .filter(keep)
            .map(|entry| Entry {
                spec_id: manifest.partition_spec_id,
                entry,
            })
            .collect())
    }

    /// The change set of `snapshot` over `live` (the state as of its parent), which it
    /// leaves as of `snapshot`. With `full`, the change set lists every live file instead
    /// (the first snapshot kept of a table whose older snapshots expired).
    pub(crate) async fn change(
        &self,
        snapshot: &Snapshot,
        live: &mut Live,
        full: bool,
    ) -> Result<ChangeSet, SourceError> {
        let mut change = self.change_set(snapshot)?;
        let entries = self.entries(snapshot, !full).await?;
        let mut touched = BTreeSet::new();
        // Deleted entries first: a vector replaced in one snapshot is deleted and added.
        let (deleted, added): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|e| e.entry.status == ManifestStatus::Deleted);
        for e in &deleted {
            self.remove(snapshot, e, live, &mut change, &mut touched)?;
        }
        for e in &added {
            self.add(snapshot, e, live, &change.partition_spec, &mut touched)?;
        }
        if full {
            change.full_state = true;
            touched = live.files.keys().cloned().collect();
        }
        for path in touched {
            let Some(file) = live.files.get(&path) else {
                continue;
            };
            let mut file = file.clone();
            file.deletion_vector = live.vectors.get(&path).cloned();
            if self.decode {
                file.deleted_rows = self.decoded(snapshot, &file).await?;
            }
            change.added.push(file);
        }
        Ok(change)
    }

    /// An empty change set for `snapshot`: its commit, schema and partition spec.
    fn change_set(&self, snapshot: &Snapshot) -> Result<ChangeSet, SourceError> {
        let list = snapshot.manifest_list();
        let schema = snapshot
            .schema(self.metadata)
            .map_err(|e| self.corrupt(snapshot, list, format!("schema: {e}")))?;
        let spec = neutral::partition_spec(self.metadata.default_partition_spec(), &schema)
            .map_err(|e| self.refuse(snapshot, list, e))?;
        let operation = snapshot.summary().operation.as_str().to_string();
        let commit = SourceCommit {
            format: FORMAT,
            id: snapshot.snapshot_id().to_string(),
            action: operation.clone(),
            requested_ms: None,
            commit_time_ms: snapshot.timestamp_ms(),
        };
        let mut change = ChangeSet::new(commit, neutral::schema(&schema), spec);
        change.data_change = operation != "replace";
        Ok(change)
    }

    /// A DELETED entry: a data file removed, or a deletion vector dropped.
    fn remove(
        &self,
        snapshot: &Snapshot,
        e: &Entry,
        live: &mut Live,
        change: &mut ChangeSet,
        touched: &mut BTreeSet<String>,
    ) -> Result<(), SourceError> {
        let file = e.entry.data_file();
        let path = file.file_path();
        match file.content_type() {
            DataContentType::Data => {
                if live.files.remove(path).is_some() {
                    change.removed.push(self.relative(path));
                }
                live.vectors.remove(path);
                touched.remove(path);
            }
            DataContentType::PositionDeletes => {
                let target = self.vector_target(snapshot, e)?;
                if live.vectors.remove(&target).is_some() && live.files.contains_key(&target) {
                    touched.insert(target);
                }
            }
            DataContentType::EqualityDeletes => {}
        }
        Ok(())
    }

    /// An ADDED (or, for a full state, live) entry: a data file, or a deletion vector.
    fn add(
        &self,
        snapshot: &Snapshot,
        e: &Entry,
        live: &mut Live,
        spec: &PartitionSpec,
        touched: &mut BTreeSet<String>,
    ) -> Result<(), SourceError> {
        let path = e.entry.data_file().file_path().to_string();
        match e.entry.data_file().content_type() {
            DataContentType::Data => {
                let file = self.data_file(snapshot, e, spec)?;
                live.files.insert(path.clone(), file);
                touched.insert(path);
            }
            DataContentType::PositionDeletes => {
                let target = self.vector_target(snapshot, e)?;
                let vector = self.vector(snapshot, e)?;
                if !live.files.contains_key(&target) {
                    let why = format!("the deletion vector is for {target}, which is not live");
                    return Err(self.corrupt(snapshot, &path, why));
                }
                live.vectors.insert(target.clone(), vector);
                touched.insert(target);
            }
            DataContentType::EqualityDeletes => {
                let why = "an equality-delete file: equality deletes are not mirrored (a target would have to read every row they apply to); rewrite them with Iceberg's rewrite_position_delete_files or a compaction first".to_string();
                return Err(self.refuse(snapshot, &path, why));
            }
        }
        Ok(())
    }

    /// The neutral data file of a data entry, in the change set's partition spec.
    fn data_file(
        &self,
        snapshot: &Snapshot,
        e: &Entry,
        spec: &PartitionSpec,
    ) -> Result<DataFile, SourceError> {
        let file = e.entry.data_file();
        let path = file.file_path();
        let format = match file.file_format() {
            DataFileFormat::Parquet => FileFormat::Parquet,
            DataFileFormat::Orc => FileFormat::Orc,
            DataFileFormat::Avro => FileFormat::Avro,
            DataFileFormat::Puffin => {
                return Err(self.corrupt(snapshot, path, "a data file in Puffin format".into()))
            }
        };
        let schema = snapshot
            .schema(self.metadata)
            .map_err(|err| self.corrupt(snapshot, path, format!("schema: {err}")))?;
        let iceberg_spec = self
            .metadata
            .partition_spec_by_id(e.spec_id)
            .ok_or_else(|| {
                self.corrupt(snapshot, path, format!("no partition spec {}", e.spec_id))
            })?;
        let own = neutral::partition_spec(iceberg_spec, &schema)
            .map_err(|err| self.refuse(snapshot, path, err))?;
        if own != *spec {
            let why = format!(
                "written under partition spec {}, and the table's spec is now {}: partition evolution is not mirrored yet",
                e.spec_id,
                self.metadata.default_partition_spec_id()
            );
            return Err(self.refuse(snapshot, path, why));
        }
        let partition = neutral::partition_values(file.partition(), iceberg_spec, &schema)
            .map_err(|err| self.corrupt(snapshot, path, err))?;
        let mut out = DataFile::parquet(
            self.relative(path),
            file.file_size_in_bytes(),
            Some(file.record_count()),
        )
        .with_partition(partition);
        out.format = format;
        Ok(out)
    }

    /// The data file (its location in the manifests) a position-delete entry applies to:
    /// only deletion vectors (Puffin, v3) are mirrored; a v2 position-delete file is
    /// refused by name.
    fn vector_target(&self, snapshot: &Snapshot, e: &Entry) -> Result<String, SourceError> {
        let file = e.entry.data_file();
        let path = file.file_path();
        if file.file_format() != DataFileFormat::Puffin {
            let why = "a position-delete file (format version 2 merge-on-read): not mirrored yet; compact the table (rewrite_data_files) or upgrade it to format version 3, whose deletion vectors are mirrored".to_string();
            return Err(self.refuse(snapshot, path, why));
        }
        file.referenced_data_file().ok_or_else(|| {
            self.corrupt(
                snapshot,
                path,
                "a deletion vector without referenced_data_file".into(),
            )
        })
    }

    /// The deletion vector of a Puffin entry, where the blob is: Puffin's
    /// `deletion-vector-v1` blob is Delta's stored layout (length, magic and bitmap, CRC),
    /// so `content_offset` is the offset of the length field, and the vector is the blob
    /// less its 8 framing bytes. Never decoded here.
    fn vector(&self, snapshot: &Snapshot, e: &Entry) -> Result<DeletionVector, SourceError> {
        let file = e.entry.data_file();
        let path = file.file_path();
        let (Some(offset), Some(size)) = (file.content_offset(), file.content_size_in_bytes())
        else {
            let why = "a deletion vector without content_offset and content_size_in_bytes";
            return Err(self.corrupt(snapshot, path, why.into()));
        };
        let (Ok(offset), Some(size)) = (
            u64::try_from(offset),
            u64::try_from(size).ok().and_then(|s| s.checked_sub(8)),
        ) else {
            let why = format!("a deletion vector at offset {offset} of {size} bytes");
            return Err(self.corrupt(snapshot, path, why));
        };
        Ok(DeletionVector {
            bytes: VectorBytes::Stored {
                path: self.relative(path),
                offset,
                size,
            },
            cardinality: file.record_count(),
        })
    }

    /// The rows `file`'s deletion vector deletes, read from its blob and checked.
    async fn decoded(&self, snapshot: &Snapshot, file: &DataFile) -> Result<Vec<u64>, SourceError> {
        let Some(vector) = &file.deletion_vector else {
            return Ok(Vec::new());
        };
        let rows = file.record_count.unwrap_or(0);
        let framed = crate::spec::puffin::read_vector(self.store, vector, rows)
            .await
            .map_err(|e| self.corrupt(snapshot, &file.path, e.to_string()))?;
        let bitmap = crate::spec::puffin::bitmap_of(&framed)
            .map_err(|e| self.corrupt(snapshot, &file.path, e.to_string()))?;
        Ok(bitmap.iter().collect())
    }

    /// A location as the model keeps it: relative to the table root when it lies under it
    /// (`file:///t/data/a.parquet` of a table at `/t` is `data/a.parquet`).
    fn relative(&self, path: &str) -> String {
        let local = path
            .strip_prefix("file://")
            .or_else(|| path.strip_prefix("file:"))
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path);
        match self.store.relative(local) {
            Some(rel) => rel.to_string(),
            None => path.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, ManifestEntry, Operation, Struct, Summary};

    use super::*;

    fn metadata() -> TableMetadata {
        let json = serde_json::json!({
            "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "/t", "last-sequence-number": 1, "last-updated-ms": 1,
            "last-column-id": 1, "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": false, "type": "long"}]}],
            "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999, "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
        });
        serde_json::from_value(json).unwrap()
    }

    fn snapshot() -> Snapshot {
        Snapshot::builder()
            .with_snapshot_id(42)
            .with_sequence_number(1)
            .with_timestamp_ms(1)
            .with_manifest_list("/t/metadata/snap-42.avro")
            .with_summary(Summary {
                operation: Operation::Delete,
                additional_properties: HashMap::new(),
            })
            .build()
    }

    fn entry(content: DataContentType, format: DataFileFormat, path: &str) -> Entry {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(path.to_string())
            .file_format(format)
            .partition(Struct::empty())
            .partition_spec_id(0)
            .record_count(2)
            .file_size_in_bytes(100)
            .referenced_data_file(Some("/t/data/a.parquet".into()))
            .content_offset(Some(4))
            .content_size_in_bytes(Some(50));
        if content == DataContentType::EqualityDeletes {
            b.equality_ids(Some(vec![1]));
        }
        let entry = ManifestEntry::builder()
            .status(ManifestStatus::Added)
            .snapshot_id(42)
            .data_file(b.build().unwrap())
            .build();
        Entry { spec_id: 0, entry }
    }

    fn add(e: &Entry, live: &mut Live) -> Result<BTreeSet<String>, SourceError> {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let metadata = metadata();
        let walk = Walk {
            store: &store,
            metadata: &metadata,
            decode: false,
        };
        let mut touched = BTreeSet::new();
        walk.add(
            &snapshot(),
            e,
            live,
            &PartitionSpec::unpartitioned(),
            &mut touched,
        )?;
        Ok(touched)
    }

    #[test]
    fn equality_and_v2_position_deletes_are_refused_naming_snapshot_and_file() {
        let mut live = Live::default();
        let eq = entry(
            DataContentType::EqualityDeletes,
            DataFileFormat::Parquet,
            "/t/data/eq.parquet",
        );
        let err = add(&eq, &mut live).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unsupported);
        let message = err.to_string();
        assert!(
            message.starts_with("snapshot 42 (/t/data/eq.parquet): an equality-delete file"),
            "{message}"
        );
        let pos = entry(
            DataContentType::PositionDeletes,
            DataFileFormat::Parquet,
            "/t/data/pos.parquet",
        );
        let message = add(&pos, &mut live).unwrap_err().to_string();
        assert!(
            message.starts_with("snapshot 42 (/t/data/pos.parquet): a position-delete file"),
            "{message}"
        );
    }

    #[test]
    fn a_deletion_vector_points_at_its_blob_undecoded() {
        let mut live = Live::default();
        let data = entry(
            DataContentType::Data,
            DataFileFormat::Parquet,
            "/t/data/a.parquet",
        );
        add(&data, &mut live).unwrap();
        let dv = entry(
            DataContentType::PositionDeletes,
            DataFileFormat::Puffin,
            "/t/data/dv.puffin",
        );
        let touched = add(&dv, &mut live).unwrap();
        assert_eq!(
            touched.into_iter().collect::<Vec<_>>(),
            ["/t/data/a.parquet"]
        );
        let vector = &live.vectors["/t/data/a.parquet"];
        // The blob's offset is its length field's; the vector is the blob less length and CRC.
        assert_eq!(
            vector.bytes,
            VectorBytes::Stored {
                path: "/t/data/dv.puffin".into(),
                offset: 4,
                size: 42
            }
        );
        assert_eq!(vector.cardinality, 2);
        // A vector for a file that is not live is corrupt, named.
        let mut empty = Live::default();
        let message = add(&dv, &mut empty).unwrap_err().to_string();
        assert!(message.contains("which is not live"), "{message}");
    }
}
