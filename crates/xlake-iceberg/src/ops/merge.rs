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
//! see [`crate::spec::manifest_list::carry`]).

use std::collections::{BTreeMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{ManifestEntry, ManifestFile, PartitionSpec, SchemaRef, TableMetadata};

use crate::error::Result;
use crate::ops::table::{IcebergTable, FILE_CHECK_CONCURRENCY};
use crate::spec::manifest::{carries_row_ids, carry_row_ids, read_entries, write_manifest};
use crate::spec::manifest_list::merging::{bin_sizes, is_small, live, merges, shape};
// Public under the feature `testing` (the integration tests read them).
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use crate::spec::manifest_list::merging::{MIN_COUNT_TO_MERGE, TARGET_ENTRIES};

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

/// The newest schema that still has every source column of `spec` (a manifest of an old
/// spec whose partition column was dropped since is rewritten with the schema it had).
pub(crate) fn schema_holding(
    metadata: &TableMetadata,
    spec: &PartitionSpec,
    current: &SchemaRef,
) -> SchemaRef {
    let holds = |s: &SchemaRef| {
        spec.fields()
            .iter()
            .all(|f| s.field_by_id(f.source_id).is_some())
    };
    if holds(current) {
        return current.clone();
    }
    let mut schemas: Vec<&SchemaRef> = metadata.schemas_iter().collect();
    schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
    schemas
        .into_iter()
        .find(|s| holds(s))
        .cloned()
        .unwrap_or_else(|| current.clone())
}
