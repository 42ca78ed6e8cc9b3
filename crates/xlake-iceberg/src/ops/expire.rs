//! Snapshot expiry in step with the source's retention: snapshots that read data files
//! (or deletion vectors) Hudi's cleaner or Delta's vacuum deleted go, so Iceberg time
//! travel never reaches a missing file; optional count and age limits on top. Always a prefix of history, never
//! the current snapshot, so the retained snapshots stay one unbroken line and the sync's
//! rule (commits older than the oldest mirrored one were mirrored and expired) holds; and
//! cut only where the engine allows ([`Retention::cuts`]: source order after a late
//! completion, the source's oldest pending commit).

use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{
    ManifestContentType, ManifestFile, SnapshotRef, TableMetadata, TableMetadataBuilder,
};

use crate::error::Result;
use crate::ops::table::{IcebergTable, LoadedTable, FILE_CHECK_CONCURRENCY};
use crate::spec::layout::{metadata_file, METADATA_DIR};
use crate::spec::manifest::read_paths;

// The contract's own types: an expiry here is the target's expiry.
pub use xlake_target::{Expired, Retention};

impl IcebergTable {
    /// Expire snapshots, always as a prefix of history and never the current one: every
    /// snapshot up to the newest that references a data or delete file no longer in
    /// storage (deleted by Hudi's cleaner or Delta's vacuum), so time travel never reaches
    /// a missing file, and those `retention` asks to drop. Writes a new version only if
    /// anything expires, then deletes the manifest lists, manifests and delete files that
    /// no retained snapshot references (metadata files only, never data files).
    pub async fn expire(&self, retention: &Retention) -> Result<Expired> {
        self.store.verify_put_if_absent().await?;
        let Some(loaded) = self.load().await? else {
            return Ok(Expired::default());
        };
        let m = &loaded.metadata;
        let current = m.current_snapshot().map(|s| s.snapshot_id());
        // The current snapshot is never expired: with no other, nothing is read.
        if m.snapshots().all(|s| Some(s.snapshot_id()) == current) {
            return Ok(Expired::default());
        }
        let mut by_age: Vec<&SnapshotRef> = m.snapshots().collect();
        by_age.sort_by_key(|s| s.sequence_number());
        let (lists, manifests) = self.read_lists_and_manifests(&by_age).await?;
        let needs_missing = self
            .reading_gone_files(&by_age, current, &lists, &manifests)
            .await;
        let (expired, held_at) = expiring(&by_age, current, &needs_missing, retention);
        if expired.is_empty() {
            return Ok(Expired {
                held_at,
                ..Expired::default()
            });
        }
        let metadata = self.without_snapshots(&loaded, &expired)?;
        // Loaded whole: nothing carried, every snapshot kept is in `metadata`.
        let version = loaded.version + 1;
        self.publish(version, &metadata, &Default::default())
            .await
            .map_err(|u| u.error)?;
        let deleted = self
            .delete_unreferenced(m, (&by_age, &expired), &lists, &manifests)
            .await;
        Ok(Expired {
            snapshots: expired,
            deleted_files: deleted,
            version,
            held_at,
        })
    }

    /// The manifest list of every snapshot in `by_age`, and per manifest, read once: a data
    /// manifest's live file paths; a delete manifest's delete files, each with whether its
    /// entry is live.
    async fn read_lists_and_manifests(&self, by_age: &[&SnapshotRef]) -> Result<ListsAndManifests> {
        let mut lists: HashMap<i64, Vec<ManifestFile>> = HashMap::new();
        let mut manifests: HashMap<String, Vec<(String, bool)>> = HashMap::new();
        for s in by_age {
            let list = self.manifest_list(s).await?;
            for mf in &list {
                if !manifests.contains_key(&mf.manifest_path) {
                    let paths = read_paths(&self.store, mf)
                        .await
                        .map_err(|e| self.corrupt(&mf.manifest_path, e))?;
                    manifests.insert(mf.manifest_path.clone(), paths);
                }
            }
            lists.insert(s.snapshot_id(), list);
        }
        Ok((lists, manifests))
    }

    /// The table metadata of `loaded` without the snapshots `expired`, its time kept.
    fn without_snapshots(&self, loaded: &LoadedTable, expired: &[i64]) -> Result<TableMetadata> {
        let m = &loaded.metadata;
        let previous = self.store.absolute(&metadata_file(loaded.version));
        let built = TableMetadataBuilder::new_from_metadata(m.clone(), Some(previous))
            .remove_snapshots(expired)
            .build()
            .map_err(self.spec_error("expire snapshots"))?;
        // Keep the table's time the source's (the builder stamps the wall clock), so later
        // snapshots at source commit times stay in order.
        let mut metadata =
            serde_json::to_value(&built.metadata).map_err(|e| self.corrupt(METADATA_DIR, e))?;
        metadata["last-updated-ms"] = serde_json::json!(m.last_updated_ms());
        serde_json::from_value(metadata).map_err(|e| self.corrupt(METADATA_DIR, e))
    }

    /// The snapshots other than the current one that read a data file or a delete file no
    /// longer in storage: a data file Hudi's cleaner or Delta's vacuum deleted, a deletion
    /// vector vacuumed before the commit holding it was first mirrored (see
    /// `gone_vector`), or a delete file lost. Files the current snapshot reads exist (the
    /// sync checks them); only files that older snapshots alone still read can be gone,
    /// and only manifests the current snapshot does not use can hold them.
    async fn reading_gone_files(
        &self,
        by_age: &[&SnapshotRef],
        current: Option<i64>,
        lists: &HashMap<i64, Vec<ManifestFile>>,
        manifests: &HashMap<String, Vec<(String, bool)>>,
    ) -> HashSet<i64> {
        let paths_of = |id: i64| lists[&id].iter().map(|mf| mf.manifest_path.as_str());
        let live_files = |m: &str| {
            let files = manifests[m].iter().filter(|(_, live)| *live);
            files.map(|(p, _)| p.clone()).collect::<Vec<String>>()
        };
        let current_manifests: HashSet<&str> = current.into_iter().flat_map(paths_of).collect();
        let live: HashSet<String> = current_manifests
            .iter()
            .flat_map(|m| live_files(m))
            .collect();
        let older_manifests: HashSet<&str> = by_age
            .iter()
            .filter(|s| Some(s.snapshot_id()) != current)
            .flat_map(|s| paths_of(s.snapshot_id()))
            .filter(|m| !current_manifests.contains(m))
            .collect();
        let candidates: HashSet<String> = older_manifests
            .iter()
            .flat_map(|m| live_files(m))
            .filter(|f| !live.contains(f))
            .collect();
        let missing: HashSet<String> = futures::stream::iter(candidates)
            .map(|path| async move {
                let size = self.store.size(&path).await;
                (path, size)
            })
            .buffer_unordered(FILE_CHECK_CONCURRENCY)
            .filter_map(|(path, size)| async move { matches!(size, Ok(None)).then_some(path) })
            .collect()
            .await;
        by_age
            .iter()
            .filter(|s| Some(s.snapshot_id()) != current)
            .filter(|s| {
                paths_of(s.snapshot_id()).any(|m| {
                    older_manifests.contains(m) && live_files(m).iter().any(|f| missing.contains(f))
                })
            })
            .map(|s| s.snapshot_id())
            .collect()
    }

    /// Whether another writer committed in `metadata/` (a catalog's append to the mirror),
    /// whose snapshots may name the files of the expired ones too: they are then left as
    /// they are, with a warning (hostile review hr14: the expiry deleted a manifest of a
    /// pyiceberg append's snapshot, whose table then failed to read, exit 0).
    async fn another_writer_may_name_them(&self) -> bool {
        match crate::ops::orphans::another_writers_commit(&self.store).await {
            Ok(None) => false,
            Ok(Some(theirs)) => {
                tracing::warn!(table = %self.table(), other_writer = %theirs, "another Iceberg writer committed in metadata/: the files of the expired snapshots are kept");
                true
            }
            Err(e) => {
                tracing::warn!(table = %self.table(), error = %e, "could not look for another writer's metadata: the files of the expired snapshots are kept");
                true
            }
        }
    }

    /// Delete the files in `metadata/` that only the `expired` snapshots referenced
    /// (manifest lists, manifests, delete files); the deleted ones. Older
    /// `vN.metadata.json` files still name them, as after Iceberg's own expiry; `cleanup
    /// --orphans` never needs them.
    async fn delete_unreferenced(
        &self,
        metadata: &TableMetadata,
        (by_age, expired): (&[&SnapshotRef], &[i64]),
        lists: &HashMap<i64, Vec<ManifestFile>>,
        manifests: &HashMap<String, Vec<(String, bool)>>,
    ) -> Vec<String> {
        let mut referenced: HashSet<&str> = HashSet::new();
        for s in by_age
            .iter()
            .filter(|s| !expired.contains(&s.snapshot_id()))
        {
            referenced.insert(s.manifest_list());
            for mf in &lists[&s.snapshot_id()] {
                referenced.insert(&mf.manifest_path);
                if mf.content == ManifestContentType::Deletes {
                    referenced.extend(manifests[&mf.manifest_path].iter().map(|(p, _)| p.as_str()));
                }
            }
        }
        let mut unreferenced: Vec<String> = Vec::new();
        for id in expired {
            let s = metadata.snapshot_by_id(*id);
            unreferenced.extend(s.map(|s| s.manifest_list().to_string()));
            for mf in &lists[id] {
                unreferenced.push(mf.manifest_path.clone());
                if mf.content == ManifestContentType::Deletes {
                    unreferenced
                        .extend(manifests[&mf.manifest_path].iter().map(|(p, _)| p.clone()));
                }
            }
        }
        let metadata_dir = format!("{}/", self.store.absolute(METADATA_DIR));
        unreferenced.retain(|f| !referenced.contains(f.as_str()));
        unreferenced.retain(|f| self.store.absolute(f).starts_with(&metadata_dir));
        unreferenced.sort();
        unreferenced.dedup();
        // Looked for only when there is something to delete (a listing of `metadata/`).
        if !unreferenced.is_empty() && self.another_writer_may_name_them().await {
            return Vec::new();
        }
        let mut deleted = Vec::new();
        for file in unreferenced {
            // The expiry is committed; a file left behind is an orphan, not an error.
            match self.store.delete(&file).await {
                Ok(()) => deleted.push(file),
                Err(e) => {
                    tracing::warn!(table = %self.table(), file = %file, error = %e, "could not delete the file of an expired snapshot")
                }
            }
        }
        deleted
    }
}

/// Each snapshot's manifest list, and each manifest's paths with whether each is live
/// (see [`IcebergTable::read_lists_and_manifests`]).
type ListsAndManifests = (
    HashMap<i64, Vec<ManifestFile>>,
    HashMap<String, Vec<(String, bool)>>,
);

/// The snapshots to expire, oldest first: every one up to the newest that any rule expires
/// (it reads a file that is gone, or `retention` drops it), never the current one, and
/// only where `retention` allows a cut; with the snapshot the expiry was held at when the
/// allowed cut is earlier than the one asked for.
fn expiring(
    by_age: &[&SnapshotRef],
    current: Option<i64>,
    needs_missing: &HashSet<i64>,
    retention: &Retention,
) -> (Vec<i64>, Option<i64>) {
    // Position in age order of the newest snapshot to expire, by any rule.
    let cut = by_age
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            needs_missing.contains(&s.snapshot_id())
                || retention
                    .keep_snapshots
                    .is_some_and(|keep| by_age.len() - i > keep)
                || retention
                    .max_age_ms
                    .is_some_and(|age| s.timestamp_ms() < retention.now_ms - age)
        })
        .map(|(i, _)| i)
        .max();
    let asked = cut.map_or(0, |c| c + 1);
    // Keeping from position `k` on; keeping every snapshot is always allowed, keeping none
    // only when any cut is.
    let allowed = |k: usize| match by_age.get(k) {
        _ if k == 0 => true,
        Some(s) => retention.may_keep_from(s.snapshot_id()),
        None => retention.cuts.is_none(),
    };
    let take = (0..=asked).rev().find(|&k| allowed(k)).unwrap_or(0);
    let held_at = by_age
        .get(take)
        .filter(|_| take < asked)
        .map(|s| s.snapshot_id());
    let expired = by_age
        .iter()
        .take(take)
        .map(|s| s.snapshot_id())
        .filter(|id| Some(*id) != current)
        .collect();
    (expired, held_at)
}
