//! Deletes: what a commit takes away. Rows a source deleted from an added file become a
//! position-delete file beside the metadata (format version 2; v3 tables get deletion
//! vectors, see [`crate::v3`]). Files the source removed are found in the parent
//! snapshot's manifests: the manifests that hold none are kept as they are, the others
//! are rewritten with those entries deleted (with the delete files of the removed files).
//! In a v3 table the rewritten entries carry their row ids, and a data file the commit
//! adds again unchanged (Delta's new deletion vector) keeps its ids ([`Removals::re_adds`]).
//!
//! Which paths a manifest holds is remembered per process ([`PathCache`]), so a backfill
//! that removes files reads each manifest once, not once per commit.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat,
    ManifestContentType, ManifestEntry, ManifestFile, Snapshot,
};
use xlake_model::{path_key, ChangeSet, DataFile};

use super::files::Invalid;
use crate::deletes::position_delete_file;
use crate::error::{IcebergError, Result};
use crate::layout;
use crate::manifest::{carry_row_ids, read_entries};
use crate::table::IcebergTable;

/// Per manifest read or written by this process, the paths its live entries are about
/// (data file paths; for delete manifests, the data files deleted from). Manifests are
/// immutable once written, so entries never go stale. Kept as sorted path keys (16 bytes
/// a path: a 10M-file backfill caches every path it writes).
pub(crate) type PathCache = Arc<Mutex<HashMap<String, Arc<PathKeys>>>>;

/// The paths a manifest's live entries are about, as sorted [`path_key`]s.
#[derive(Debug)]
pub(crate) struct PathKeys(Box<[u128]>);

impl PathKeys {
    fn contains(&self, path: &str) -> bool {
        self.0.binary_search(&path_key(path)).is_ok()
    }
}

/// The parent's manifests a commit keeps as they are, and those it rewrites.
pub(super) struct Removals {
    pub(super) kept: Vec<ManifestFile>,
    pub(super) rewrites: Vec<Rewrite>,
}

/// A manifest holding removed files: its entries, and the keys (see [`entry_key`]) of
/// those the commit deletes.
pub(super) struct Rewrite {
    pub(super) manifest: ManifestFile,
    pub(super) entries: Vec<ManifestEntry>,
    /// Whether it is a data manifest (else a delete manifest).
    pub(super) data: bool,
    pub(super) hits: HashSet<String>,
}

impl Removals {
    /// Write every rewritten entry's row id explicitly (v3; a no-op for manifests listed
    /// without a first row id), before the entries are carried or matched to re-adds.
    pub(super) fn carry_row_ids(&mut self, table: &IcebergTable) -> Result<()> {
        for r in &mut self.rewrites {
            let entries = std::mem::take(&mut r.entries);
            r.entries = carry_row_ids(&r.manifest, entries)
                .map_err(|e| table.corrupt(&r.manifest.manifest_path, e))?;
        }
        Ok(())
    }

    /// Of the commit's added data `files`, those that are a removed data file again with
    /// the same size and row count (Delta replacing a file's deletion vector removes and
    /// adds the unchanged file), by path, with the first row id the removed entry had:
    /// its rows are the same rows, so they keep their `_row_id`. (The entry is added
    /// anew, with this snapshot's sequence numbers, so deletes apply to it as before and
    /// `_last_updated_sequence_number` is this snapshot's.)
    pub(super) fn re_adds(&self, files: &[IcebergDataFile]) -> HashMap<String, i64> {
        let added: HashMap<&str, &IcebergDataFile> =
            files.iter().map(|f| (f.file_path(), f)).collect();
        let mut out = HashMap::new();
        for r in self.rewrites.iter().filter(|r| r.data) {
            for e in r.entries.iter().filter(|e| e.is_alive()) {
                let (Some(f), Some(first_row_id)) =
                    (added.get(e.file_path()), e.data_file().first_row_id())
                else {
                    continue;
                };
                let same = f.record_count() == e.record_count()
                    && f.file_size_in_bytes() == e.file_size_in_bytes();
                if same && r.hits.contains(e.file_path()) {
                    out.insert(e.file_path().to_string(), first_row_id);
                }
            }
        }
        out
    }
}

impl IcebergTable {
    /// The delete file of the rows the source deleted from an added file, for a v2 table
    /// (a v3 table gets deletion vectors instead: see `vector_deletes`).
    pub(super) async fn position_deletes(
        &self,
        file: &DataFile,
        (data, spec_id): (&IcebergDataFile, i32),
        v3: bool,
        invalid: &Invalid<'_>,
    ) -> Result<Option<IcebergDataFile>> {
        // A v2 table needs the deleted rows decoded: a vector the source left undecoded
        // (for a v3 table) must never be dropped silently.
        if !v3 && file.deleted_rows.is_empty() {
            if let Some(dv) = file.deletion_vector.as_ref().filter(|d| d.cardinality > 0) {
                return Err(invalid(format!(
                    "its deletion vector ({} deleted rows) was not decoded, and a format version 2 table needs the rows",
                    dv.cardinality
                )));
            }
        }
        if file.deleted_rows.is_empty() || v3 {
            return Ok(None);
        }
        let record_count = data.record_count();
        if let Some(beyond) = file.deleted_rows.iter().find(|&&p| p >= record_count) {
            return Err(invalid(format!(
                "deletes row {beyond} of a file of {record_count} rows"
            )));
        }
        let location = data.file_path();
        let bytes = position_delete_file(location, &file.deleted_rows).map_err(invalid)?;
        let delete_path = self.store.absolute(&layout::position_delete_file());
        let size = bytes.len() as u64;
        self.store.put_if_absent(&delete_path, bytes).await?;
        let deletes = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(delete_path)
            .file_format(DataFileFormat::Parquet)
            .partition(data.partition().clone())
            .partition_spec_id(spec_id)
            .record_count(file.deleted_rows.len() as u64)
            .file_size_in_bytes(size)
            .referenced_data_file(Some(location.to_string()))
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Some(deletes))
    }

    /// The manifests of the parent snapshot: those just staged in this batch if the parent
    /// is the snapshot staged last, else read from its manifest list.
    pub(super) async fn parent_manifests(
        &self,
        parent: Option<&Snapshot>,
        last_list: Option<(String, Vec<ManifestFile>)>,
    ) -> Result<Vec<ManifestFile>> {
        Ok(match (parent, last_list) {
            (Some(p), Some((list, manifests))) if list == p.manifest_list() => manifests,
            (Some(p), _) => self.manifest_list(p).await?,
            (None, _) => Vec::new(),
        })
    }

    /// Which of the parent's `manifests` a commit removing `change.removed` keeps, and which
    /// it rewrites; a removed file no manifest holds is an error. Manifests with no live
    /// entry are dropped.
    pub(super) async fn plan_removals(
        &self,
        change: &ChangeSet,
        manifests: Vec<ManifestFile>,
    ) -> Result<Removals> {
        let mut to_remove: HashMap<String, bool> = change
            .removed
            .iter()
            .map(|p| (self.store.absolute(p), false))
            .collect();
        let mut removals = Removals {
            kept: Vec::new(),
            rewrites: Vec::new(),
        };
        for mf in manifests {
            let live = mf.added_files_count.unwrap_or(1) + mf.existing_files_count.unwrap_or(1);
            if live == 0 {
                continue;
            }
            if to_remove.is_empty() {
                removals.kept.push(mf);
                continue;
            }
            match self.holding(mf, &to_remove).await? {
                Ok(rewrite) => removals.rewrites.push(rewrite),
                Err(kept) => removals.kept.push(kept),
            }
        }
        for rewrite in removals.rewrites.iter().filter(|r| r.data) {
            for path in &rewrite.hits {
                if let Some(found) = to_remove.get_mut(path) {
                    *found = true;
                }
            }
        }
        if let Some((path, _)) = to_remove.iter().find(|(_, found)| !**found) {
            return Err(IcebergError::RemovedFileNotFound {
                table: self.table(),
                commit: change.commit.id.clone(),
                path: path.clone(),
            });
        }
        Ok(removals)
    }

    /// `mf` as a rewrite when it holds a path of `to_remove`; else `mf` back, to keep. A
    /// manifest seen before is read only if it holds one.
    async fn holding(
        &self,
        mf: ManifestFile,
        to_remove: &HashMap<String, bool>,
    ) -> Result<std::result::Result<Rewrite, ManifestFile>> {
        let (paths, mut entries) = match self.cached_paths(&mf.manifest_path) {
            Some(paths) => (paths, None),
            None => {
                let entries = self.read_manifest(&mf).await?;
                let live = entries.iter().filter(|e| e.is_alive());
                let paths = self.cache_paths(&mf.manifest_path, live.map(|e| e.data_file()));
                (paths, Some(entries))
            }
        };
        if !to_remove.keys().any(|p| paths.contains(p)) {
            return Ok(Err(mf));
        }
        let entries = match entries.take() {
            Some(entries) => entries,
            None => self.read_manifest(&mf).await?,
        };
        let data = mf.content == ManifestContentType::Data;
        let removes = |e: &ManifestEntry| match data {
            true => to_remove.contains_key(e.file_path()),
            false => e
                .data_file()
                .referenced_data_file()
                .is_some_and(|r| to_remove.contains_key(&r)),
        };
        let hits = entries
            .iter()
            .filter(|e| e.is_alive() && removes(e))
            .map(|e| entry_key(e, data))
            .collect();
        Ok(Ok(Rewrite {
            manifest: mf,
            entries,
            data,
            hits,
        }))
    }

    async fn read_manifest(&self, mf: &ManifestFile) -> Result<Vec<ManifestEntry>> {
        read_entries(&self.store, mf)
            .await
            .map_err(|e| self.corrupt(&mf.manifest_path, e))
    }

    /// The paths a manifest's live entries are about, if this process has seen it.
    fn cached_paths(&self, manifest: &str) -> Option<Arc<PathKeys>> {
        self.live_paths.lock().ok()?.get(manifest).cloned()
    }

    /// Remember the paths the live `files` of a manifest are about: a data file's own
    /// path, a delete file's data file.
    pub(crate) fn cache_paths<'a>(
        &self,
        manifest: &str,
        files: impl Iterator<Item = &'a IcebergDataFile>,
    ) -> Arc<PathKeys> {
        let mut keys: Vec<u128> = files
            .filter_map(|f| match f.content_type() {
                DataContentType::Data => Some(path_key(f.file_path())),
                _ => f.referenced_data_file().map(|p| path_key(&p)),
            })
            .collect();
        keys.sort_unstable();
        let paths = Arc::new(PathKeys(keys.into_boxed_slice()));
        if let Ok(mut cache) = self.live_paths.lock() {
            cache.insert(manifest.to_string(), paths.clone());
        }
        paths
    }
}

/// What identifies a manifest entry a commit removes: a data file's path; a delete file's
/// data file (v3 deletion vectors of many data files share one Puffin file).
pub(super) fn entry_key(e: &ManifestEntry, data: bool) -> String {
    match e.data_file().referenced_data_file() {
        Some(referenced) if !data => referenced,
        _ => e.file_path().to_string(),
    }
}
