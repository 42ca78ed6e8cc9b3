//! Deletes: what a commit takes away. Rows a source deleted from an added file become a
//! position-delete file beside the metadata (format version 2; v3 tables get deletion
//! vectors, see [`crate::ops::v3`]). Files the source removed are found in the parent
//! snapshot's manifests: the manifests that hold none are kept as they are, the others
//! are rewritten with those entries deleted (with the delete files of the removed files).
//! In a v3 table the rewritten entries carry their row ids. A data file the commit removes
//! and adds again unchanged (Delta's new deletion vector) keeps its entry as it is (same
//! manifest, sequence numbers and row ids): only its delete files are removed, and the
//! new ones added ([`Removals::in_place`]).
//!
//! Which paths a manifest holds is remembered per process ([`PathCache`]), so a backfill
//! that removes files reads each manifest once, not once per commit. Data manifests are
//! read newest first, and only until every removed file is found (see
//! [`IcebergTable::plan_removals`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat,
    ManifestContentType, ManifestEntry, ManifestFile, Snapshot,
};
use xlake_model::{short_path_key, ChangeSet, DataFile, VectorBytes};

use super::files::Invalid;
use crate::error::{IcebergError, Result};
use crate::ops::live_paths::PathKeys;
use crate::ops::path_index::Chain;
use crate::ops::table::IcebergTable;
use crate::spec::deletes::position_delete_file;
use crate::spec::layout;
use crate::spec::manifest::{
    carry_row_ids, entries_of, held, may_hold_live, read_entries, read_manifest_bytes, Held,
};
use crate::spec::manifest_list::carry::{self as list_carry, ParentList};
use crate::spec::manifest_list::ListFile;

/// A manifest a removal looked through: to rewrite, or (`Err`) to keep as it is.
type Looked = std::result::Result<Rewrite, ManifestFile>;

/// The parent's manifests a commit keeps as they are, and those it rewrites; and the data
/// files it removes and adds again unchanged, whose entries stay where they are.
pub(super) struct Removals {
    pub(super) kept: Vec<ManifestFile>,
    pub(super) rewrites: Vec<Rewrite>,
    /// Paths of the data files added again unchanged (see [`Targets::unchanged`]): not
    /// added anew, their delete files removed (and the new ones added) as for a removal.
    pub(super) in_place: HashSet<String>,
}

/// A manifest holding removed files: its entries, and the keys (see [`entry_key`]) of
/// those the commit deletes.
pub(super) struct Rewrite {
    pub(super) manifest: ManifestFile,
    pub(super) entries: Vec<ManifestEntry>,
    /// Whether it is a data manifest (else a delete manifest).
    pub(super) data: bool,
    pub(super) hits: HashSet<String>,
    /// Delete files to add to it (v3: vectors moved out of a Puffin file holding a stale
    /// one, see [`super::rehome`]).
    pub(super) added: Vec<IcebergDataFile>,
}

impl Removals {
    /// Write every rewritten entry's row id explicitly (v3; a no-op for manifests listed
    /// without a first row id), before the entries are carried.
    pub(super) fn carry_row_ids(&mut self, table: &IcebergTable) -> Result<()> {
        for r in &mut self.rewrites {
            let entries = std::mem::take(&mut r.entries);
            r.entries = carry_row_ids(&r.manifest, entries)
                .map_err(|e| table.corrupt(&r.manifest.manifest_path, e))?;
        }
        Ok(())
    }
}

/// What a commit takes away from the parent: the removed data paths (with whether a data
/// manifest was found holding each), and of those, the ones the commit adds again (with
/// the file as added), which stay in place when unchanged.
struct Targets<'a> {
    removed: HashMap<String, bool>,
    /// The path index looked up, and the manifests it says hold a removed path.
    index: Option<(Arc<Chain>, HashSet<String>)>,
    re_added: HashMap<&'a str, &'a IcebergDataFile>,
    /// The partition spec the commit's files are added in.
    spec_id: i32,
}

impl Targets<'_> {
    /// Whether the live data entry `e` of a manifest of spec `spec_id` is a file the
    /// commit adds again unchanged: same size, row count, spec and partition (Delta
    /// replacing a file's deletion vector removes and adds the unchanged file). Its entry
    /// then stays as it is: only its delete files change.
    fn unchanged(&self, e: &ManifestEntry, spec_id: i32) -> bool {
        self.re_added.get(e.file_path()).is_some_and(|f| {
            f.file_size_in_bytes() == e.file_size_in_bytes()
                && f.record_count() == e.record_count()
                && spec_id == self.spec_id
                && f.partition() == e.data_file().partition()
        })
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
        // (for a v3 table, or because its file is gone) must never be dropped silently.
        if !v3 && file.deleted_rows.is_empty() {
            if let Some(dv) = file.deletion_vector.as_ref().filter(|d| d.cardinality > 0) {
                if let Some(gone) = self
                    .gone_vector(file, (data, spec_id), false, invalid)
                    .await?
                {
                    return Ok(Some(gone));
                }
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
        let bytes = position_delete_file(location, &file.deleted_rows)
            .map_err(|e| invalid(e.to_string()))?;
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

    /// The delete entry of `file`'s deletion vector when its file is gone from storage
    /// (VACUUM deleted it after a later source commit replaced it): an entry naming the
    /// vector where the source kept it, so readers of the snapshot fail on the missing
    /// file, as the source's own readers fail on that commit, instead of showing its
    /// deleted rows; `expire` drops such snapshots as it drops those of vacuumed data
    /// files. A gone vector of a file no later commit removes is refused (the source's
    /// current state needs it). `None`: the vector is not stored in a file that is gone.
    /// `v3`: the entry is a deletion vector (Puffin), else a position-delete file.
    pub(crate) async fn gone_vector(
        &self,
        file: &DataFile,
        (data, spec_id): (&IcebergDataFile, i32),
        v3: bool,
        invalid: &Invalid<'_>,
    ) -> Result<Option<IcebergDataFile>> {
        let Some(dv) = &file.deletion_vector else {
            return Ok(None);
        };
        let VectorBytes::Stored { path, offset, size } = &dv.bytes else {
            return Ok(None);
        };
        if self.store.size(path).await?.is_some() {
            return Ok(None);
        }
        let location = self.store.absolute(path);
        if !file.removed_later {
            return Err(invalid(format!(
                "its deletion vector file {location} does not exist, and no later source commit removes the file: the source's own readers need that vector"
            )));
        }
        // Iceberg's deletion-vector blob and Delta's stored vector share one framing (size,
        // magic and bitmap, CRC-32), so the entry's offset and length are the vector's.
        let framed = size.saturating_add(8);
        let mut entry = DataFileBuilder::default();
        entry
            .content(DataContentType::PositionDeletes)
            .file_path(location)
            .partition(data.partition().clone())
            .partition_spec_id(spec_id)
            .record_count(dv.cardinality)
            .file_size_in_bytes(offset.saturating_add(framed))
            .referenced_data_file(Some(data.file_path().to_string()));
        if v3 {
            entry
                .file_format(DataFileFormat::Puffin)
                .content_offset(Some(*offset as i64))
                .content_size_in_bytes(Some(framed as i64));
        } else {
            entry.file_format(DataFileFormat::Parquet);
        }
        entry.build().map(Some).map_err(|e| invalid(e.to_string()))
    }

    /// The manifest list of the parent snapshot: the one just staged in this batch if the
    /// parent is the snapshot staged last, else read.
    pub(super) async fn parent_list(
        &self,
        parent: Option<&Snapshot>,
        last_list: Option<ListFile>,
    ) -> Result<Option<ListFile>> {
        Ok(match (parent, last_list) {
            (Some(p), Some(list)) if list.location == p.manifest_list() => Some(list),
            (Some(p), _) => Some(self.list_file(p).await?),
            (None, _) => None,
        })
    }

    /// The parent's manifests, and its list as the new list may carry it (see
    /// [`crate::spec::manifest_list::carry`]). A v2 commit that removes nothing, onto a list it keeps as
    /// it is, carries the list whole, reading of its records only their counts, spec,
    /// content, sequence numbers and path: no manifests then.
    pub(super) fn parent_manifests(
        &self,
        change: &ChangeSet,
        frame: &super::Frame,
        parent: Option<ListFile>,
    ) -> Result<(Vec<ManifestFile>, Option<ParentList>)> {
        let Some(list) = parent else {
            return Ok((Vec::new(), None));
        };
        if change.removed.is_empty() && !frame.v3() && list.decoded.is_none() {
            if let Some(whole) = list_carry::whole(&list.bytes) {
                return Ok((Vec::new(), Some(whole)));
            }
        }
        let (location, bytes) = (list.location.clone(), list.bytes.clone());
        let manifests = list.manifests().map_err(|e| self.corrupt(&location, e))?;
        // A list whose last manifests are still the parent's may carry its records.
        let digest = list_carry::digest(&manifests);
        let whole = false;
        Ok((
            manifests,
            Some(ParentList {
                bytes,
                digest,
                whole,
            }),
        ))
    }

    /// Which of the parent's `manifests` a commit removing `change.removed` keeps, and which
    /// it rewrites; a removed file no data manifest holds is an error, a file added again
    /// included. Manifests with no live entry are dropped. A removed file among the
    /// commit's `added` files (in spec `spec_id`) that is unchanged keeps its entry; its
    /// delete files are removed.
    ///
    /// Data manifests are read newest first (by sequence number), and only until every
    /// removed file is found: a file is live in one manifest, and the files a commit
    /// removes are most often recent ones (an upsert's, a compaction's). The older ones
    /// are kept unread. Delete manifests are all read (their deletes of a removed file
    /// go with it). With `read_all`, every data manifest is read, so that a path listed
    /// in two (by builds before e9ac639) loses both entries. The kept and rewritten
    /// manifests stay in the parent's order.
    pub(super) async fn plan_removals(
        &self,
        change: &ChangeSet,
        manifests: Vec<ManifestFile>,
        (added, spec_id): (&[IcebergDataFile], i32),
        read_all: bool,
        index: Option<Arc<Chain>>,
    ) -> Result<Removals> {
        let removed: HashMap<String, bool> = change
            .removed
            .iter()
            .map(|p| (self.store.absolute(p), false))
            .collect();
        // A file the source says was rewritten is never kept in place, whatever its size.
        let rewritten: HashSet<String> = change
            .added
            .iter()
            .filter(|f| f.rewritten)
            .map(|f| self.store.absolute(&f.path))
            .collect();
        let re_added = added
            .iter()
            .filter(|f| removed.contains_key(f.file_path()) && !rewritten.contains(f.file_path()))
            .map(|f| (f.file_path(), f))
            .collect();
        // Which manifests hold the removed files, where the path index covers them.
        let index = index
            .filter(|chain| !self.is_set_aside(chain))
            .map(|chain| {
                let holders = chain.holders(removed.keys().map(|p| short_path_key(p)));
                (chain, holders)
            });
        let mut targets = Targets {
            removed,
            index,
            re_added,
            spec_id,
        };
        let mut live: Vec<Option<ManifestFile>> = manifests
            .into_iter()
            .filter(may_hold_live)
            .map(Some)
            .collect();
        // Where a path index says which manifests hold what, a removed file found in none
        // sets the index aside and every manifest is read again (see crate::path_index).
        let again = targets.index.is_some().then(|| targets.removed.clone());
        let (mut held, mut in_place) = self
            .read_newest_first(&mut live, &mut targets, read_all)
            .await?;
        let missing = targets.removed.values().any(|found| !found);
        if let Some(removed) = again.filter(|_| missing) {
            if let Some((chain, _)) = targets.index.take() {
                self.set_path_index_aside(&chain);
            }
            tracing::warn!(table = %self.table(), commit = %change.commit.id, "a removed file is in no manifest the path index names: reading every manifest");
            // Every manifest back in its place (read or not), not a copy of the list kept
            // for this rare case: at 100k files that copy was ~1,000 manifest files.
            live = unlooked(live, held);
            targets.removed = removed;
            (held, in_place) = self
                .read_newest_first(&mut live, &mut targets, read_all)
                .await?;
        }
        if let Some((path, _)) = targets.removed.iter().find(|(_, found)| !**found) {
            return Err(IcebergError::RemovedFileNotFound {
                table: self.table(),
                commit: change.commit.id.clone(),
                path: path.clone(),
            });
        }
        let mut removals = Removals {
            kept: Vec::new(),
            rewrites: Vec::new(),
            in_place,
        };
        // Each manifest is either still in `live` (unread) or in `held` (read).
        for (unread, read) in live.into_iter().zip(held) {
            match (unread, read) {
                (Some(mf), _) | (None, Some(Err(mf))) => removals.kept.push(mf),
                (None, Some(Ok(rewrite))) => removals.rewrites.push(rewrite),
                (None, None) => {}
            }
        }
        Ok(removals)
    }

    /// The manifests of `live` that [`Self::plan_removals`] reads, taken out of it in
    /// [`reading_order`] and each read with [`Self::holding`] (at its index), marking in
    /// `targets` the removed files found; and the files to keep in place. Data manifests
    /// are read while a removed file is missing, or all with `read_all`.
    async fn read_newest_first(
        &self,
        live: &mut [Option<ManifestFile>],
        targets: &mut Targets<'_>,
        read_all: bool,
    ) -> Result<(Vec<Option<Looked>>, HashSet<String>)> {
        let mut held = Vec::new();
        held.resize_with(live.len(), || None);
        let mut in_place = HashSet::new();
        let removing = !targets.removed.is_empty();
        let mut missing = targets.removed.len();
        for at in reading_order(live) {
            let wanted = |mf: &mut ManifestFile| match mf.content {
                ManifestContentType::Data => missing > 0 || (read_all && removing),
                ManifestContentType::Deletes => removing,
            };
            let Some(mf) = live[at].take_if(wanted) else {
                continue;
            };
            // A removed file is found where a data manifest holds it (files kept in place
            // come from data manifests only).
            let (found, kept_in_place) = self.holding(mf, targets).await?;
            let hits = found.as_ref().ok().filter(|r| r.data).map(|r| &r.hits);
            for path in kept_in_place.iter().chain(hits.into_iter().flatten()) {
                missing -= usize::from(mark_found(&mut targets.removed, path));
            }
            in_place.extend(kept_in_place);
            held[at] = Some(found);
        }
        Ok((held, in_place))
    }

    /// `mf` as a rewrite when it holds a path of `targets` to delete; else `mf` back, to
    /// keep; and the paths of the data files it holds that the commit adds again
    /// unchanged (which it keeps as they are). A manifest seen before is read only if it
    /// holds a path of `targets`.
    async fn holding(
        &self,
        mf: ManifestFile,
        targets: &Targets<'_>,
    ) -> Result<(Looked, Vec<String>)> {
        let to_remove = &targets.removed;
        let (paths, read) = match self.cached_paths(&mf.manifest_path) {
            Some(paths) => (paths, None),
            None => {
                // A manifest the path index covers is read only if it holds a removed file.
                let location = mf.manifest_path.as_str();
                let indexed = targets.index.as_ref();
                if indexed.is_some_and(|(c, held)| c.covers(location) && !held.contains(location)) {
                    return Ok((Err(mf), Vec::new()));
                }
                let bytes = read_manifest_bytes(&self.store, &mf).await;
                let bytes = bytes.map_err(|e| self.corrupt(&mf.manifest_path, e))?;
                let (paths, held) = self.remember(&mf, &bytes)?;
                let entries = match held {
                    Held::Entries(entries) => Some(entries),
                    Held::Paths(_) => None,
                };
                (paths, Some((bytes, entries)))
            }
        };
        if !to_remove.keys().any(|p| paths.may_hold(p)) {
            return Ok((Err(mf), Vec::new()));
        }
        let entries = match read {
            Some((_, Some(entries))) => entries,
            Some((bytes, None)) => {
                entries_of(&bytes, &mf).map_err(|e| self.corrupt(&mf.manifest_path, e))?
            }
            None => self.read_manifest(&mf).await?,
        };
        let data = mf.content == ManifestContentType::Data;
        let targeted = |e: &&ManifestEntry| match data {
            true => to_remove.contains_key(e.file_path()),
            false => e
                .data_file()
                .referenced_data_file()
                .is_some_and(|r| to_remove.contains_key(&r)),
        };
        let (in_place, hits): (Vec<&ManifestEntry>, Vec<&ManifestEntry>) = entries
            .iter()
            .filter(|e| e.is_alive())
            .filter(targeted)
            .partition(|e| data && targets.unchanged(e, mf.partition_spec_id));
        let in_place = in_place.iter().map(|e| e.file_path().to_string()).collect();
        let hits: HashSet<String> = hits.iter().map(|e| entry_key(e, data)).collect();
        if hits.is_empty() {
            return Ok((Err(mf), in_place));
        }
        Ok((
            Ok(Rewrite {
                manifest: mf,
                entries,
                data,
                hits,
                added: Vec::new(),
            }),
            in_place,
        ))
    }

    /// What `mf` (read as `bytes`) holds ([`Held`]), and the paths its live entries are
    /// about, remembered. Of a data manifest only the live files are read where the fast
    /// read takes it (not the stats: a commit removing 10 files from 100k reads the paths
    /// of the manifests it looks through, and then the entries of only those holding
    /// them; a Hudi replay's seed needs only the files).
    pub(crate) fn remember(
        &self,
        mf: &ManifestFile,
        bytes: &[u8],
    ) -> Result<(Arc<PathKeys>, Held)> {
        let location = &mf.manifest_path;
        let held = held(bytes, mf).map_err(|e| self.corrupt(location, e))?;
        let keys = match &held {
            Held::Paths(files) => {
                self.cache_data_paths(location, files.iter().map(|f| f.path.as_str()))
            }
            Held::Entries(entries) => {
                let live = entries.iter().filter(|e| e.is_alive());
                self.cache_paths(location, live.map(|e| e.data_file()))
            }
        };
        Ok((keys, held))
    }

    pub(super) async fn read_manifest(&self, mf: &ManifestFile) -> Result<Vec<ManifestEntry>> {
        read_entries(&self.store, mf)
            .await
            .map_err(|e| self.corrupt(&mf.manifest_path, e))
    }

    /// The paths a manifest's live entries are about, if this process has seen it.
    pub(crate) fn cached_paths(&self, manifest: &str) -> Option<Arc<PathKeys>> {
        self.live_paths.lock().ok()?.get(manifest).cloned()
    }

    /// Remember the paths the live `files` of a manifest are about: a data file's own
    /// path, a delete file's data file.
    pub(crate) fn cache_paths<'a>(
        &self,
        manifest: &str,
        files: impl Iterator<Item = &'a IcebergDataFile>,
    ) -> Arc<PathKeys> {
        let keys: Vec<u64> = files
            .filter_map(|f| match f.content_type() {
                DataContentType::Data => Some(short_path_key(f.file_path())),
                _ => f.referenced_data_file().map(|p| short_path_key(&p)),
            })
            .collect();
        self.cache_keys(manifest, keys)
    }

    /// [`Self::cache_paths`] of a data manifest whose live files are at `paths`.
    fn cache_data_paths<'a>(
        &self,
        manifest: &str,
        paths: impl Iterator<Item = &'a str>,
    ) -> Arc<PathKeys> {
        self.cache_keys(manifest, paths.map(short_path_key).collect())
    }

    /// Remember the `keys` of a manifest's live entries (see [`PathCache`]).
    fn cache_keys(&self, manifest: &str, keys: Vec<u64>) -> Arc<PathKeys> {
        let paths = Arc::new(PathKeys::sorted(keys));
        if let Ok(mut cache) = self.live_paths.lock() {
            cache.insert(manifest.to_string(), paths.clone());
        }
        paths
    }
}

/// The manifests [`IcebergTable::read_newest_first`] took out of `live` (into `held`, read
/// or skipped) put back in their places: `live` as it was before that read.
fn unlooked(
    live: Vec<Option<ManifestFile>>,
    held: Vec<Option<Looked>>,
) -> Vec<Option<ManifestFile>> {
    live.into_iter()
        .zip(held)
        .map(|(unread, read)| match read {
            Some(Ok(rewrite)) => Some(rewrite.manifest),
            Some(Err(mf)) => Some(mf),
            None => unread,
        })
        .collect()
}

/// The order `live` is read in for a removal: delete manifests first (all are read), then
/// data manifests newest first (by sequence number; the parent's order among equals).
fn reading_order(live: &[Option<ManifestFile>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..live.len()).collect();
    order.sort_by_key(|&at| {
        live[at].as_ref().map(|mf| {
            let data = mf.content == ManifestContentType::Data;
            (data, std::cmp::Reverse(mf.sequence_number))
        })
    });
    order
}

/// Note that a data manifest holds the removed `path`; whether it was first found now.
fn mark_found(removed: &mut HashMap<String, bool>, path: &str) -> bool {
    match removed.get_mut(path) {
        Some(found) => !std::mem::replace(found, true),
        None => false,
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
