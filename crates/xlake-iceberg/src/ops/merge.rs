//! Manifest merging, as Iceberg's own writers do it (`commit.manifest-merge.enabled`):
//! every commit adds a manifest, so without merging each manifest list, and the work of
//! every reader planning a scan, grows with the number of commits. When a commit would
//! keep at least [`MIN_COUNT_TO_MERGE`] small data manifests of one partition spec, their
//! live entries are rewritten into manifests of up to [`TARGET_ENTRIES`] entries each.
//!
//! Only manifests older than the commit are merged: the commit's own manifests keep their
//! `added` and `deleted` entries, which incremental readers rely on. Merged entries keep
//! their snapshot id, sequence numbers and (v3) row ids. A commit that merges nothing
//! keeps the parent's manifests in their order (so an append can carry its parent's list,
//! see [`crate::list_carry`]).

use std::collections::{BTreeMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{ManifestContentType, ManifestEntry, ManifestFile, SchemaRef, TableMetadata};

use crate::error::Result;
use crate::manifest::{carries_row_ids, carry_row_ids, read_entries, write_manifest};
use crate::plan::schema_holding;
use crate::table::{IcebergTable, FILE_CHECK_CONCURRENCY};

/// Small data manifests of one spec that trigger a merge (Iceberg's
/// `commit.manifest.min-count-to-merge` default).
pub const MIN_COUNT_TO_MERGE: usize = 100;

/// Live entries a merged manifest holds at most; manifests with fewer are small.
pub const TARGET_ENTRIES: u32 = 100;

/// What merging looks at of a manifest: its partition spec, content and live entries.
pub(crate) type Shape = (i32, ManifestContentType, u32);

pub(crate) fn shape(m: &ManifestFile) -> Shape {
    (m.partition_spec_id, m.content, live(m))
}

/// The live entries of the small data manifests of each partition spec among `kept`, in
/// list order.
fn small_groups(kept: impl Iterator<Item = Shape>) -> BTreeMap<i32, Vec<u32>> {
    let mut groups: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for shape in kept.filter(is_small_shape) {
        groups.entry(shape.0).or_default().push(shape.2);
    }
    groups
}

/// How many manifests each bin of a group holds: whole manifests, in list order, up to
/// [`TARGET_ENTRIES`] live entries a bin (`lives`: each manifest's live entries).
fn bin_sizes(lives: impl Iterator<Item = u32>) -> Vec<usize> {
    let (mut bins, mut size) = (vec![0], 0);
    for live in lives {
        if size + live > TARGET_ENTRIES && size > 0 {
            bins.push(0);
            size = 0;
        }
        size += live;
        if let Some(bin) = bins.last_mut() {
            *bin += 1;
        }
    }
    bins
}

/// Live entries of a manifest, as its list counts them.
fn live(m: &ManifestFile) -> u32 {
    m.added_files_count.unwrap_or(0) + m.existing_files_count.unwrap_or(0)
}

fn is_small(m: &ManifestFile) -> bool {
    is_small_shape(&shape(m))
}

fn is_small_shape((_, content, live): &Shape) -> bool {
    *content == ManifestContentType::Data && *live < TARGET_ENTRIES
}

/// Whether [`IcebergTable::merge_small_manifests`] would merge any of `kept` (else it
/// gives them back as they are, in their order).
pub(crate) fn merges(kept: impl Iterator<Item = Shape>) -> bool {
    small_groups(kept).values().any(|lives| {
        lives.len() >= MIN_COUNT_TO_MERGE
            && bin_sizes(lives.iter().copied()).iter().any(|n| *n >= 2)
    })
}

impl IcebergTable {
    /// Merge the small data manifests among `kept` (a commit's untouched older manifests)
    /// when there are enough of them; `location(n)` names the n-th new manifest. Merged
    /// manifests whose files all carry their row ids (v3) are added to `carried`.
    pub(crate) async fn merge_small_manifests(
        &self,
        kept: Vec<ManifestFile>,
        (metadata, schema): (&TableMetadata, &SchemaRef),
        snapshot_id: i64,
        carried: &mut HashSet<String>,
        mut location: impl FnMut() -> String,
    ) -> Result<Vec<ManifestFile>> {
        if !merges(kept.iter().map(shape)) {
            return Ok(kept);
        }
        let mut small: BTreeMap<i32, Vec<ManifestFile>> = BTreeMap::new();
        let mut out = Vec::with_capacity(kept.len());
        for m in kept {
            if is_small(&m) {
                small.entry(m.partition_spec_id).or_default().push(m);
            } else {
                out.push(m);
            }
        }
        for (spec_id, group) in small {
            if group.len() < MIN_COUNT_TO_MERGE {
                out.extend(group);
                continue;
            }
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                self.corrupt(&group[0].manifest_path, "unknown partition spec id")
            })?;
            let schema = schema_holding(metadata, spec, schema);
            let sizes = bin_sizes(group.iter().map(live));
            let mut group = group.into_iter();
            for n in sizes {
                let bin: Vec<ManifestFile> = group.by_ref().take(n).collect();
                if bin.len() < 2 {
                    out.extend(bin);
                    continue;
                }
                // Read side by side (on an object store each is a round trip), in order.
                let reads: Vec<Result<Vec<ManifestEntry>>> = futures::stream::iter(&bin)
                    .map(|m| async move {
                        read_entries(&self.store, m)
                            .await
                            .and_then(|read| carry_row_ids(m, read))
                            .map_err(|e| self.corrupt(&m.manifest_path, e))
                    })
                    .buffered(FILE_CHECK_CONCURRENCY)
                    .collect()
                    .await;
                let mut entries = Vec::new();
                for read in reads {
                    entries.extend(read?.into_iter().filter(|e| e.is_alive()));
                }
                let path = location();
                self.cache_paths(&path, entries.iter().map(|e| e.data_file()));
                if carries_row_ids(entries.iter().map(|e| e.data_file())) {
                    carried.insert(path.clone());
                }
                let merged = write_manifest(
                    &self.store,
                    &path,
                    (snapshot_id, metadata.format_version()),
                    (schema.clone(), (**spec).clone()),
                    false,
                    |w| {
                        for e in entries {
                            let seq = e.sequence_number().unwrap_or(0);
                            let file_seq = e.file_sequence_number;
                            let snapshot = e.snapshot_id().unwrap_or(0);
                            w.add_existing_file(e.data_file, snapshot, seq, file_seq)?;
                        }
                        Ok(())
                    },
                )
                .await
                .map_err(self.write_failed(&path))?;
                out.push(merged);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list_write::sample_manifest;

    /// `n` data manifests of spec `spec` with `live` live entries each.
    fn manifests(n: u32, spec: i32, live: u32) -> Vec<ManifestFile> {
        (0..n)
            .map(|i| ManifestFile {
                content: ManifestContentType::Data,
                partition_spec_id: spec,
                added_files_count: Some(live),
                existing_files_count: Some(0),
                ..sample_manifest(i + 1, None)
            })
            .collect()
    }

    /// `merges` says whether a merge changes anything: only when a spec has enough small
    /// manifests and two of them share a bin.
    #[test]
    fn merges_says_whether_any_bin_holds_two_manifests() {
        let merges_all = |kept: &[ManifestFile]| merges(kept.iter().map(shape));
        assert_eq!(bin_sizes([10; 25].into_iter()), [10, 10, 5]);
        assert_eq!(bin_sizes([60; 3].into_iter()), [1, 1, 1]);
        assert_eq!(bin_sizes(std::iter::empty()), [0]);
        assert!(merges_all(&manifests(100, 0, 10)));
        assert!(!merges_all(&manifests(99, 0, 10)), "too few");
        assert!(!merges_all(&manifests(100, 0, 60)), "no two share a bin");
        assert!(!merges_all(&manifests(200, 0, 100)), "none small");
        let mut two_specs = manifests(60, 0, 10);
        two_specs.extend(manifests(60, 1, 10));
        assert!(!merges_all(&two_specs), "too few of each spec");
        two_specs.extend(manifests(40, 1, 10));
        assert!(merges_all(&two_specs));
        let deletes: Vec<_> = manifests(100, 0, 10)
            .into_iter()
            .map(|m| ManifestFile {
                content: ManifestContentType::Deletes,
                ..m
            })
            .collect();
        assert!(!merges_all(&deletes), "delete manifests are not merged");
    }
}
