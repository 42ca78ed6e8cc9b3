//! Manifests: what a snapshot's manifest list holds. The commit's added data files and
//! delete files get one new manifest each; each parent manifest holding removed files is
//! rewritten (those entries deleted, the others existing); the kept ones are merged when
//! small (see [`crate::ops::merge`]); then the manifest list, which carries the parent's
//! records as written when it keeps them all (see [`crate::spec::manifest_list::carry`]). Counts for the
//! summary are taken on the way. In a v3 table the entries a rewritten or merged manifest
//! carries keep their row ids (see [`crate::spec::manifest`]). Data files the commit adds again
//! unchanged are not here: their entries stay where they are (see [`super::deletes`]).

use std::collections::HashSet;

use bytes::Bytes;
use iceberg::spec::{DataFile as IcebergDataFile, ManifestFile};

use super::deletes::{entry_key, Removals, Rewrite};
use super::files::AddedFiles;
use super::schema::Bound;
use super::Frame;
use crate::error::{IcebergError, Result};
use crate::ops::merge::schema_holding;
use crate::ops::table::IcebergTable;
use crate::spec::error::CodecError;
use crate::spec::layout;
use crate::spec::manifest::{carries_row_ids, write_manifest};
use crate::spec::manifest_list::carry::ParentList;
use crate::spec::manifest_list::write_manifest_list;
use crate::spec::summary::Counts;

/// The manifest list written, and what the summary needs of it.
pub(super) struct Written {
    /// Location of the manifest list.
    pub(super) list: String,
    /// The manifests it holds, as it holds them; `None` when it carries its parent's
    /// records unread (see [`crate::spec::manifest_list::carry::whole`]).
    pub(super) listed: Option<Vec<ManifestFile>>,
    /// Its bytes.
    pub(super) bytes: Bytes,
    /// Rows given ids (v3 `added-rows`).
    pub(super) added_rows: u64,
    pub(super) counts: Counts,
    /// Partitions touched.
    pub(super) partitions: usize,
}

/// The manifests of one commit so far, named `<commit uuid>-m<n>.avro` in order.
struct Manifests<'a> {
    table: &'a IcebergTable,
    commit: uuid::Uuid,
    written: Vec<ManifestFile>,
    /// The written manifests whose live files all carry their row ids (v3).
    carried: HashSet<String>,
    counts: Counts,
    partitions: HashSet<(i32, String)>,
}

impl Manifests<'_> {
    fn next_location(&self, n: usize) -> String {
        self.table
            .store
            .absolute(&layout::manifest_file(&self.commit, n))
    }

    fn touch(&mut self, spec_id: i32, file: &IcebergDataFile) {
        self.partitions
            .insert((spec_id, format!("{:?}", file.partition())));
    }
}

impl IcebergTable {
    pub(crate) fn write_failed<E: Into<CodecError>>(
        &self,
        file: &str,
    ) -> impl Fn(E) -> IcebergError {
        let (table, file) = (self.table(), file.to_string());
        move |reason| IcebergError::WriteFailed {
            table: table.clone(),
            file: file.clone(),
            reason: reason.into(),
        }
    }

    /// Write the snapshot's manifests and its manifest list. `parent_list`: the parent's
    /// list, whose records are carried when its manifests are the new list's last ones,
    /// as they were (see [`crate::spec::manifest_list::carry`]).
    pub(super) async fn write_manifests(
        &self,
        frame: &Frame,
        bound: &Bound,
        (added, mut removals): (AddedFiles, Removals),
        parent_list: Option<ParentList>,
    ) -> Result<Written> {
        let mut out = Manifests {
            table: self,
            commit: uuid::Uuid::new_v4(),
            written: Vec::new(),
            carried: HashSet::new(),
            counts: Counts::default(),
            partitions: HashSet::new(),
        };
        removals.carry_row_ids(self)?;
        if frame.v3() && !removals.in_place.is_empty() {
            self.rehome_stale_vectors(&mut removals, &added.deletes)
                .await?;
        }
        for (files, deletes) in [(added.data, false), (added.deletes, true)] {
            self.write_added(&mut out, frame, bound, files, deletes)
                .await?;
        }
        for rewrite in removals.rewrites {
            self.write_rewrite(&mut out, frame, bound, rewrite).await?;
        }
        let mut n = out.written.len();
        let mut carried = std::mem::take(&mut out.carried);
        let kept = self
            .merge_small_manifests(
                removals.kept,
                (&bound.staged, &bound.schema),
                frame.snapshot_id,
                &mut carried,
                || {
                    n += 1;
                    out.next_location(n - 1)
                },
            )
            .await?;
        out.written.extend(kept);
        let list = self
            .store
            .absolute(&layout::manifest_list_file(frame.snapshot_id, &out.commit));
        let written = write_manifest_list(
            &self.store,
            &list,
            (frame.snapshot_id, frame.parent_id()),
            (frame.sequence_number, frame.first_row_id),
            out.written,
            &carried,
            parent_list.as_ref(),
        )
        .await
        .map_err(self.write_failed(&list))?;
        Ok(Written {
            list,
            listed: written.manifests,
            bytes: written.bytes,
            added_rows: written.added_rows,
            counts: out.counts,
            partitions: out.partitions.len(),
        })
    }

    /// One manifest of the commit's added data files (or delete files), if any.
    async fn write_added(
        &self,
        out: &mut Manifests<'_>,
        frame: &Frame,
        bound: &Bound,
        files: Vec<IcebergDataFile>,
        deletes: bool,
    ) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        for f in &files {
            out.counts
                .count(deletes, true, f.record_count(), f.file_size_in_bytes());
            out.touch(bound.spec.spec_id(), f);
        }
        let location = out.next_location(out.written.len());
        self.cache_paths(&location, files.iter());
        if !deletes && carries_row_ids(files.iter()) {
            out.carried.insert(location.clone());
        }
        let mf = write_manifest(
            &self.store,
            &location,
            (frame.snapshot_id, frame.version),
            (bound.schema.clone(), (*bound.spec).clone()),
            deletes,
            |w| files.into_iter().try_for_each(|f| w.add_file(f, -1)),
        )
        .await
        .map_err(self.write_failed(&location))?;
        out.written.push(mf);
        Ok(())
    }

    /// A parent manifest again, its entries of removed files deleted and the others
    /// existing (with their snapshot ids, sequence numbers and v3 row ids), in its own
    /// spec.
    async fn write_rewrite(
        &self,
        out: &mut Manifests<'_>,
        frame: &Frame,
        bound: &Bound,
        rewrite: Rewrite,
    ) -> Result<()> {
        let Rewrite {
            manifest: old,
            entries,
            data,
            hits,
            added,
        } = rewrite;
        let old_spec = bound
            .staged
            .partition_spec_by_id(old.partition_spec_id)
            .ok_or_else(|| self.corrupt(&old.manifest_path, "unknown partition spec id"))?;
        let location = out.next_location(out.written.len());
        let live: Vec<_> = entries.into_iter().filter(|e| e.is_alive()).collect();
        let removed = |e: &iceberg::spec::ManifestEntry| hits.contains(&entry_key(e, data));
        let kept = live.iter().filter(|e| !removed(e)).map(|e| e.data_file());
        self.cache_paths(&location, kept.chain(&added));
        for e in live.iter().filter(|e| removed(e)) {
            out.counts
                .count(!data, false, e.record_count(), e.file_size_in_bytes());
            out.touch(old.partition_spec_id, e.data_file());
        }
        for f in &added {
            out.counts
                .count(!data, true, f.record_count(), f.file_size_in_bytes());
            out.touch(old.partition_spec_id, f);
        }
        if data && carries_row_ids(live.iter().filter(|e| !removed(e)).map(|e| e.data_file())) {
            out.carried.insert(location.clone());
        }
        let schema = schema_holding(&bound.staged, old_spec, &bound.schema);
        let mf = write_manifest(
            &self.store,
            &location,
            (frame.snapshot_id, frame.version),
            (schema, (**old_spec).clone()),
            !data,
            |w| {
                for e in live {
                    let seq = e.sequence_number().unwrap_or(0);
                    let file_seq = e.file_sequence_number;
                    let snapshot = e.snapshot_id().unwrap_or(0);
                    if removed(&e) {
                        w.add_delete_file(e.data_file, seq, file_seq)?;
                    } else {
                        w.add_existing_file(e.data_file, snapshot, seq, file_seq)?;
                    }
                }
                added.into_iter().try_for_each(|f| w.add_file(f, -1))
            },
        )
        .await
        .map_err(self.write_failed(&location))?;
        out.written.push(mf);
        Ok(())
    }
}
