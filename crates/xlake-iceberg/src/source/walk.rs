//! The replay: each snapshot of the main branch's ancestry as one change set, from the
//! manifest entries that snapshot wrote (status ADDED or DELETED with its snapshot id),
//! over the live data files, deletion vectors and position deletes as of its parent.

use std::collections::{BTreeSet, HashMap};

use iceberg::spec::{
    DataContentType, DataFileFormat, ManifestEntry, ManifestFile, ManifestStatus, NameMapping,
    Snapshot, TableMetadata, DEFAULT_SCHEMA_NAME_MAPPING,
};
use roaring::RoaringTreemap;
use xlake_model::{
    ChangeSet, DataFile, DeletionVector, FileFormat, PartitionSpec, SourceCommit, VectorBytes,
};
use xlake_source::{ErrorKind, SourceError};
use xlake_storage::TableStore;

use super::neutral;
use super::resume::{Resume, MIRRORED};
use super::FORMAT;
use crate::spec::error::CodecError;

/// What is live as of a snapshot: data files by their location in the manifests, the
/// deletion vector of each data file that has one, and the rows v2 position-delete files
/// delete from each data file, by delete file.
#[derive(Debug, Default)]
pub(crate) struct Live {
    files: HashMap<String, DataFile>,
    vectors: HashMap<String, DeletionVector>,
    /// Data file -> position-delete file -> the rows it deletes there.
    positions: HashMap<String, HashMap<String, RoaringTreemap>>,
    /// Position-delete file -> the live data files it deletes rows of.
    position_files: HashMap<String, Vec<String>>,
    /// An incremental replay that takes the baseline's deleted rows from the mirror.
    pub(crate) resume: Option<Resume>,
}

impl Live {
    /// The baseline is walked: a resume notes which data files had a deletion vector.
    pub(crate) fn baseline_read(&mut self) {
        if let Some(r) = self.resume.as_mut() {
            r.at_baseline = false;
            r.vector_at_baseline = self.vectors.keys().cloned().collect();
        }
    }

    /// The rows every live position-delete file deletes from `path`, ascending (the
    /// union: a later delete adds to the rows earlier ones deleted).
    fn deleted_positions(&self, path: &str) -> Vec<u64> {
        let Some(by_file) = self.positions.get(path) else {
            return Vec::new();
        };
        let mut union = RoaringTreemap::new();
        for rows in by_file.values() {
            union |= rows;
        }
        union.iter().collect()
    }
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

/// What is wrong with a file of a snapshot: `snapshot <id> (<file>): <why>`, the error of
/// the library beneath, where there is one, kept as the source of `why`.
#[derive(Debug, thiserror::Error)]
#[error("snapshot {snapshot} ({file}): {why}")]
struct SnapshotError {
    snapshot: i64,
    file: String,
    #[source]
    why: CodecError,
}

impl Walk<'_> {
    fn error(
        &self,
        kind: ErrorKind,
        snapshot: &Snapshot,
        file: &str,
        why: impl Into<CodecError>,
    ) -> SourceError {
        let error = SnapshotError {
            snapshot: snapshot.snapshot_id(),
            file: self.store.absolute(file),
            why: why.into(),
        };
        SourceError::new(kind, error)
    }

    fn corrupt(&self, snapshot: &Snapshot, file: &str, why: impl Into<CodecError>) -> SourceError {
        let kind = ErrorKind::Corrupt {
            commit: Some(snapshot.snapshot_id().to_string()),
            file: Some(self.store.absolute(file)),
        };
        self.error(kind, snapshot, file, why)
    }

    fn refuse(&self, snapshot: &Snapshot, file: &str, why: impl Into<CodecError>) -> SourceError {
        self.error(ErrorKind::Unsupported, snapshot, file, why)
    }

    /// The entries of `snapshot`'s manifests: with `own`, those it wrote (ADDED or DELETED
    /// with its id, in the manifests it added); else every live one (ADDED or EXISTING).
    async fn entries(&self, snapshot: &Snapshot, own: bool) -> Result<Vec<Entry>, SourceError> {
        let id = snapshot.snapshot_id();
        let list = snapshot.manifest_list();
        let manifests = crate::spec::manifest_list::read_manifest_list(self.store, list)
            .await
            .map_err(|e| self.corrupt(snapshot, list, e.context("manifest list")))?;
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
            .map_err(|e| self.corrupt(snapshot, path, e.context("manifest")))?;
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
            if self.unread(e, live) {
                self.remove_unread(snapshot, e, live, &mut touched).await?;
            } else {
                self.remove(snapshot, e, live, &mut change, &mut touched)?;
            }
        }
        // Data files before deletes: a delete may apply to a file of its own snapshot.
        let (data, deletes): (Vec<_>, Vec<_>) = added
            .into_iter()
            .partition(|e| e.entry.data_file().content_type() == DataContentType::Data);
        for e in data.iter().chain(&deletes) {
            match live.resume.as_mut().filter(|r| r.at_baseline) {
                // The baseline's delete files: noted, not read (the mirror holds them).
                Some(r) if is_position_file(e) => {
                    r.unread.insert(e.entry.data_file().file_path().to_string());
                }
                _ if is_position_file(e) => {
                    self.add_positions(snapshot, e, live, &mut touched).await?;
                }
                _ => self.add(snapshot, e, live, &change.partition_spec, &mut touched)?,
            }
        }
        let Live { files, resume, .. } = &mut *live;
        if let Some(r) = resume.as_mut().filter(|r| !r.at_baseline) {
            r.check_covered(snapshot.snapshot_id(), |p| files.contains_key(p));
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
            if file.deletion_vector.is_none() {
                // A data file with a deletion vector has its older position deletes
                // merged into it (format version 3): the vector wins.
                self.take_mirrored(&path, &file.path, live).await;
                file.deleted_rows = live.deleted_positions(&path);
            } else if self.decode {
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
            .map_err(|e| self.corrupt(snapshot, list, CodecError::within("schema")(e)))?;
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
        let mut neutral = neutral::schema(&schema);
        let mapping = self.metadata.properties().get(DEFAULT_SCHEMA_NAME_MAPPING);
        if let Some(text) = mapping {
            let mapping: NameMapping = serde_json::from_str(text).map_err(|e| {
                let why =
                    CodecError::within(format!("table property {DEFAULT_SCHEMA_NAME_MAPPING}"));
                self.corrupt(snapshot, list, why(e))
            })?;
            neutral = neutral::with_name_mapping(neutral, &mapping);
        }
        let mut change = ChangeSet::new(commit, neutral, spec);
        change.data_change = operation != "replace";
        change.name_mapped = mapping.is_some();
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
                live.positions.remove(path);
                if let Some(r) = live.resume.as_mut() {
                    r.known.remove(path);
                }
                touched.remove(path);
            }
            DataContentType::PositionDeletes if is_position_file(e) => {
                for target in live.position_files.remove(path).unwrap_or_default() {
                    let Some(by_file) = live.positions.get_mut(&target) else {
                        continue;
                    };
                    let rows = by_file.remove(path);
                    // A resume's rows from the mirror may hold rows of a baseline delete
                    // file removed since, which only this one deleted again: they must be
                    // deleted again by this snapshot, or the baseline is read after all
                    // (hostile review, 2026-12-06: they stayed deleted).
                    if let (Some(rows), Some(mirrored), Some(r)) =
                        (rows, by_file.get(MIRRORED), live.resume.as_mut())
                    {
                        let stale = rows & mirrored;
                        if !stale.is_empty() {
                            *r.uncovered.entry(target.clone()).or_default() |= stale;
                        }
                    }
                    if by_file.is_empty() {
                        live.positions.remove(&target);
                    }
                    if live.files.contains_key(&target) {
                        touched.insert(target);
                    }
                }
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
                let new = live.files.insert(path.clone(), file).is_none();
                // A file new since the baseline has no rows a baseline delete file
                // deletes (one added again keeps its rows).
                if let Some(r) = live.resume.as_mut().filter(|r| new && !r.at_baseline) {
                    r.known.insert(path.clone());
                }
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

    /// An ADDED (or, for a full state, live) v2 position-delete file: read whole (it may
    /// delete rows of many data files), its rows kept for each live data file it names
    /// ([`Self::live_positions`]). Never written or changed.
    async fn add_positions(
        &self,
        snapshot: &Snapshot,
        e: &Entry,
        live: &mut Live,
        touched: &mut BTreeSet<String>,
    ) -> Result<(), SourceError> {
        let path = e.entry.data_file().file_path().to_string();
        let mut targets = Vec::new();
        for (named, target, rows) in self.live_positions(snapshot, &path, live).await? {
            let records = live.files.get(&target).and_then(|f| f.record_count);
            if let (Some(n), Some(max)) = (records, rows.max()) {
                if max >= n {
                    let why = format!(
                        "position-delete file: deletes row {max} of {named}, which has {n} rows"
                    );
                    return Err(self.corrupt(snapshot, &path, why));
                }
            }
            if let Some(r) = live.resume.as_mut() {
                *r.added_now.entry(target.clone()).or_default() |= &rows;
            }
            let by_file = live.positions.entry(target.clone()).or_default();
            match by_file.get_mut(&path) {
                Some(held) => *held |= rows,
                None => {
                    by_file.insert(path.clone(), rows);
                }
            }
            touched.insert(target.clone());
            targets.push(target);
        }
        live.position_files.insert(path, targets);
        Ok(())
    }

    /// The rows a position-delete file at `path` deletes, as (data file it names, that
    /// file's key in `live.files`, rows), for the live data files only: one it names that
    /// is not live is skipped (its deletes dangle: the file was removed before, which
    /// Iceberg allows).
    async fn live_positions(
        &self,
        snapshot: &Snapshot,
        path: &str,
        live: &Live,
    ) -> Result<Vec<(String, String, RoaringTreemap)>, SourceError> {
        let by_data_file = self.read_positions(snapshot, path).await?;
        let mut spelled = None;
        Ok(by_data_file
            .into_iter()
            .filter_map(|(named, rows)| {
                let key = self.live_key(live, &named, &mut spelled)?;
                Some((named, key, rows))
            })
            .collect())
    }

    /// The rows a position-delete file at `path` deletes, by the data file it names.
    async fn read_positions(
        &self,
        snapshot: &Snapshot,
        path: &str,
    ) -> Result<HashMap<String, RoaringTreemap>, SourceError> {
        let bytes = self.store.get(&self.relative(path)).await.map_err(|err| {
            self.corrupt(
                snapshot,
                path,
                CodecError::within("position-delete file")(err),
            )
        })?;
        crate::spec::deletes::read_position_deletes(bytes)
            .map_err(|why| self.corrupt(snapshot, path, why.context("position-delete file")))
    }

    /// Whether `e` removes a baseline position-delete file a resume has not read.
    fn unread(&self, e: &Entry, live: &Live) -> bool {
        is_position_file(e)
            && live
                .resume
                .as_ref()
                .is_some_and(|r| r.unread.contains(e.entry.data_file().file_path()))
    }

    /// A DELETED entry of a baseline position-delete file not read: read now (one file),
    /// its rows kept as rows a delete file the snapshot adds must delete again (see
    /// [`Resume::check_covered`]); the data files it names are touched.
    async fn remove_unread(
        &self,
        snapshot: &Snapshot,
        e: &Entry,
        live: &mut Live,
        touched: &mut BTreeSet<String>,
    ) -> Result<(), SourceError> {
        let path = e.entry.data_file().file_path();
        let named = self.live_positions(snapshot, path, live).await?;
        let Some(r) = live.resume.as_mut() else {
            return Ok(());
        };
        r.unread.remove(path);
        for (_, target, rows) in named {
            *r.uncovered.entry(target.clone()).or_default() |= rows;
            touched.insert(target);
        }
        Ok(())
    }

    /// For a resume: the rows the mirror deletes from data file `key` (`relative`, as the
    /// model spells it), kept among its rows when they are not known yet.
    async fn take_mirrored(&self, key: &str, relative: &str, live: &mut Live) {
        let Some(r) = live.resume.as_mut() else {
            return;
        };
        if let Some(rows) = r.mirrored_rows(key, relative).await {
            if !rows.is_empty() {
                let by_file = live.positions.entry(key.to_string()).or_default();
                by_file.insert(MIRRORED.to_string(), rows);
            }
        }
    }

    /// The key in `live.files` of the data file a position-delete file names: the same
    /// string, else the same location spelled another way (`file:/t/a` and `/t/a`), through
    /// `spelled` (live keys by their table-relative form, built at the first miss).
    fn live_key(
        &self,
        live: &Live,
        named: &str,
        spelled: &mut Option<HashMap<String, String>>,
    ) -> Option<String> {
        if live.files.contains_key(named) {
            return Some(named.to_string());
        }
        let index = spelled.get_or_insert_with(|| {
            live.files
                .keys()
                .map(|k| (self.relative(k), k.clone()))
                .collect()
        });
        index.get(&self.relative(named)).cloned()
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
                return Err(self.corrupt(snapshot, path, "a data file in Puffin format"))
            }
        };
        let schema = snapshot
            .schema(self.metadata)
            .map_err(|err| self.corrupt(snapshot, path, CodecError::within("schema")(err)))?;
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

    /// The data file (its location in the manifests) a deletion vector (a Puffin blob,
    /// format version 3) applies to.
    fn vector_target(&self, snapshot: &Snapshot, e: &Entry) -> Result<String, SourceError> {
        let file = e.entry.data_file();
        let path = file.file_path();
        file.referenced_data_file().ok_or_else(|| {
            self.corrupt(
                snapshot,
                path,
                "a deletion vector without referenced_data_file",
            )
        })
    }
}

/// Whether an entry is a v2 position-delete file (not a v3 deletion vector in Puffin).
fn is_position_file(e: &Entry) -> bool {
    let file = e.entry.data_file();
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() != DataFileFormat::Puffin
}

impl Walk<'_> {
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
            return Err(self.corrupt(snapshot, path, why));
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
    /// (`file:///t/data/a.parquet` of a table at `/t` is `data/a.parquet`), else a local
    /// file as its absolute path (`file:///d/a.parquet` is `/d/a.parquet`, as the other
    /// sources and targets spell it: a removal spelled otherwise matched no file the Delta
    /// target held, and was dropped), else as written.
    fn relative(&self, path: &str) -> String {
        let local = path
            .strip_prefix("file://")
            .or_else(|| path.strip_prefix("file:"))
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path);
        match self.store.relative(local) {
            Some(rel) => rel.to_string(),
            None => local.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use iceberg::spec::{DataFileBuilder, ManifestEntry, Operation, Struct, Summary};
    use parquet::arrow::ArrowWriter;

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
    fn equality_deletes_are_refused_naming_snapshot_and_file() {
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
    }

    /// A v2 position-delete file at `root/name` deleting `rows` of each data file named.
    fn position_file(root: &Path, name: &str, rows: &[(&str, &[u64])]) -> Entry {
        let mut paths = Vec::new();
        let mut pos = Vec::new();
        for (file, r) in rows {
            paths.extend(r.iter().map(|_| *file));
            pos.extend(r.iter().map(|p| *p as i64));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("file_path", DataType::Utf8, false),
            Field::new("pos", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(paths)) as ArrayRef,
                Arc::new(Int64Array::from(pos)),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let path = root.join(name);
        std::fs::write(&path, out).unwrap();
        entry(
            DataContentType::PositionDeletes,
            DataFileFormat::Parquet,
            path.to_str().unwrap(),
        )
    }

    #[tokio::test]
    async fn position_deletes_are_the_union_of_the_live_delete_files_of_a_data_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        let metadata = metadata();
        let walk = Walk {
            store: &store,
            metadata: &metadata,
            decode: false,
        };
        let (snap, mut live, mut touched) = (snapshot(), Live::default(), BTreeSet::new());
        let spec = PartitionSpec::unpartitioned();
        // `a` has 2 rows; `gone` is not live (its deletes dangle, and are skipped).
        let a = "/t/data/a.parquet";
        let data = entry(DataContentType::Data, DataFileFormat::Parquet, a);
        walk.add(&snap, &data, &mut live, &spec, &mut touched)
            .unwrap();
        let first = position_file(
            root,
            "d1.parquet",
            &[(a, &[0]), ("/t/data/gone.parquet", &[7])],
        );
        let second = position_file(root, "d2.parquet", &[(a, &[1])]);
        for e in [&first, &second] {
            walk.add_positions(&snap, e, &mut live, &mut touched)
                .await
                .unwrap();
        }
        assert_eq!(live.deleted_positions(a), [0, 1]);
        assert_eq!(touched.iter().collect::<Vec<_>>(), [a]);
        // The first delete file removed (a rewrite of the deletes): its rows show again.
        let mut change = walk.change_set(&snap).unwrap();
        touched.clear();
        walk.remove(&snap, &first, &mut live, &mut change, &mut touched)
            .unwrap();
        assert_eq!(live.deleted_positions(a), [1]);
        assert_eq!(touched.iter().collect::<Vec<_>>(), [a]);
        // Bad delete files name snapshot and file: a row past the file's 2 rows, no file.
        let past = position_file(root, "d3.parquet", &[(a, &[2])]);
        let err = walk
            .add_positions(&snap, &past, &mut live, &mut touched)
            .await;
        let message = err.unwrap_err().to_string();
        let d3 = root.join("d3.parquet");
        assert!(
            message.starts_with(&format!(
                "snapshot 42 ({}): position-delete file: deletes row 2 of {a}, which has 2 rows",
                d3.display()
            )),
            "{message}"
        );
        std::fs::remove_file(&d3).unwrap();
        let err = walk
            .add_positions(&snap, &past, &mut live, &mut touched)
            .await;
        let message = err.unwrap_err().to_string();
        assert!(
            message.starts_with(&format!(
                "snapshot 42 ({}): position-delete file: ",
                d3.display()
            )),
            "{message}"
        );
        assert_eq!(
            live.deleted_positions(a),
            [1],
            "a refused file changes nothing"
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
