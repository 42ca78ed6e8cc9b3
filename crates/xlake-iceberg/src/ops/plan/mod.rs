//! The planner: one change set becomes one snapshot on top of a [`Draft`] (the version
//! being built in memory), the way iceberg-rust's `SnapshotProducer` splits the work.
//! [`IcebergTable::stage`] runs the concerns in order, each in its own module:
//!
//! | step | module | what it decides |
//! |---|---|---|
//! | 1 | [`schema`] | schema ids, partition spec, table properties and name mapping; binds them |
//! | 2 | [`files`] | the added files: checked, measured (footers), described with their stats |
//! | 3 | [`deletes`] | rows deleted from added files; removed files and the manifests holding them; files added again unchanged, kept in place |
//! | 4 | [`manifests`] | new, rewritten and merged manifests, and the manifest list; ([`rehome`]) v3 vectors moved out of Puffin files holding a dropped one |
//! | 5 | [`summary`] | the operation, the summary counters, `XTABLE_METADATA`, `xlake.degraded` |
//!
//! Everything a step writes goes through the commit's journal; nothing is visible until
//! the publisher ([`crate::ops::publish`]) creates the `vN.metadata.json`.

mod deletes;
mod files;
mod manifests;
mod rehome;
mod schema;
mod summary;

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, Snapshot, SnapshotRef, SnapshotReference, SnapshotRetention, Summary,
    TableMetadata, MAIN_BRANCH,
};
use xlake_model::ChangeSet;

use crate::error::{IcebergError, Result};
use crate::ops::path_index::chain::Chain;
use crate::ops::table::{IcebergTable, LoadedTable};
use crate::spec::fidelity::PARQUET_VECTORIZATION;
use crate::spec::history::History;
use crate::spec::layout::{path_index_file, PATH_INDEX};
use crate::spec::manifest_list::ListFile;
use manifests::Written;

/// A version being built in memory: the published version it starts from (until the
/// first snapshot is staged) and the metadata so far.
pub(crate) struct Draft<'a> {
    pub(crate) base: Option<&'a LoadedTable>,
    pub(crate) metadata: Option<TableMetadata>,
    /// The snapshots of the published version it starts from (the draft's metadata holds
    /// only its working ones; see [`crate::spec::history`]).
    pub(crate) history: Arc<History>,
    pub(crate) expired_logs: Vec<iceberg::spec::MetadataLog>,
    /// The manifest list staged last, as written (the next snapshot's parent list).
    pub(crate) last_list: Option<ListFile>,
    /// The path index this batch writes after its last snapshot (table-relative), named
    /// by its first commit that removes files (see [`crate::path_index`]).
    pub(crate) path_index: Option<String>,
    /// The path index chain the batch's base names, once a removal or the index's write
    /// asked for it (`Some(None)`: none, or unreadable): removals look up in it, and the
    /// batch's index builds on it.
    pub(crate) index_base: Option<Option<Arc<Chain>>>,
    /// Whether the batch mirrors more than one commit.
    pub(crate) backfill: bool,
    /// Whether more batches of the same run follow: then it writes no path index (the
    /// run's last batch does), so that a backfill writes one, not one per batch.
    pub(crate) more: bool,
    /// The base's current manifest list was read by this batch (to build on it): it need
    /// not be looked up again before the commit point.
    pub(crate) base_list_read: bool,
}

/// What staging one change set added to the draft.
#[derive(Debug)]
pub(crate) struct Staged {
    /// The source commit staged.
    pub(crate) commit: String,
    /// The new snapshot's id.
    pub(crate) snapshot_id: i64,
    /// Its `timestamp-ms`.
    pub(crate) timestamp_ms: i64,
    /// The entries of `xlake.degraded` it added.
    pub(crate) degraded: Vec<String>,
}

/// The new snapshot's place in the table: its id, time, sequence number, parent and (v3)
/// first row id.
struct Frame {
    snapshot_id: i64,
    timestamp_ms: i64,
    sequence_number: i64,
    parent: Option<SnapshotRef>,
    first_row_id: Option<u64>,
    version: FormatVersion,
}

impl Frame {
    fn new(
        change: &ChangeSet,
        (current, history): (Option<&TableMetadata>, &History),
        version: FormatVersion,
    ) -> Self {
        // At the source commit's time, never earlier than the previous snapshot.
        let floor = current.map_or(i64::MIN, |m| {
            m.history()
                .last()
                .map_or(i64::MIN, |l| l.timestamp_ms)
                .max(m.last_updated_ms())
        });
        let v3 = version >= FormatVersion::V3;
        Self {
            snapshot_id: fresh_snapshot_id(current, history),
            timestamp_ms: change.commit.commit_time_ms.max(floor),
            sequence_number: current.map_or(0, |m| m.last_sequence_number()) + 1,
            parent: current.and_then(|m| m.current_snapshot()).cloned(),
            // v3 row lineage: the rows this snapshot gives ids start at the next-row-id.
            first_row_id: v3.then(|| current.map_or(0, |m| m.next_row_id())),
            version,
        }
    }

    fn v3(&self) -> bool {
        self.version >= FormatVersion::V3
    }

    fn parent_id(&self) -> Option<i64> {
        self.parent.as_ref().map(|p| p.snapshot_id())
    }

    fn parent_summary(&self) -> Option<&HashMap<String, String>> {
        self.parent
            .as_ref()
            .map(|p| &p.summary().additional_properties)
    }

    fn snapshot(
        &self,
        manifest_list: String,
        summary: Summary,
        schema_id: i32,
        rows: u64,
    ) -> Snapshot {
        let builder = Snapshot::builder()
            .with_snapshot_id(self.snapshot_id)
            .with_parent_snapshot_id(self.parent_id())
            .with_sequence_number(self.sequence_number)
            .with_timestamp_ms(self.timestamp_ms)
            .with_manifest_list(manifest_list)
            .with_summary(summary)
            .with_schema_id(schema_id);
        match self.first_row_id {
            Some(first) => builder.with_row_range(first, rows).build(),
            None => builder.build(),
        }
    }
}

impl IcebergTable {
    /// Write the manifests and manifest list of one change set as a snapshot on top of
    /// `draft`, and add it to the draft's metadata.
    pub(crate) async fn stage(&self, change: &ChangeSet, draft: &mut Draft<'_>) -> Result<Staged> {
        let last_list = draft.last_list.take();
        let current = draft.metadata.as_ref();
        let version = self.commit_version(change, current)?;
        let logged = current.map_or(0, |m| m.history().len());
        let frame = Frame::new(change, (current, &draft.history), version);
        let resolved;
        // A full state's difference reads every data manifest (`as_difference` has just
        // read them): a path some older build listed twice then loses both entries.
        let read_all = change.full_state;
        let change = if change.full_state {
            resolved = self.as_difference(change, current).await?;
            &resolved
        } else {
            change
        };
        // 1. Schema and properties, bound to learn the ids manifests need.
        let mut plan = self.plan_schema(change, current)?;
        let bound = self.bind(draft, &plan, &frame)?;
        // 2. Files and stats (3. with the delete files of rows deleted from them).
        let mut added = self
            .added_files(change, &bound, &plan.mapping, frame.v3())
            .await?;
        let (parent_degraded, degraded) = summary::degraded(frame.parent_summary(), change, &added);
        if added.turns_off_vectorization() {
            plan.properties
                .insert(PARQUET_VECTORIZATION.into(), "false".into());
        }
        // 3. Removed files: the parent manifests that hold them.
        let read = last_list.is_none();
        let parent = self.parent_list(frame.parent.as_deref(), last_list).await?;
        let base_list = draft
            .base
            .and_then(|b| b.metadata.current_snapshot())
            .map(|s| s.manifest_list());
        if read
            && parent.is_some()
            && frame.parent.as_deref().map(|p| p.manifest_list()) == base_list
        {
            draft.base_list_read = true;
        }
        let (parents, parent_list) = self.parent_manifests(change, &frame, parent)?;
        let spec_id = bound.spec.spec_id();
        // A batch that removes files, or a backfill (which knows every manifest it
        // wrote), leaves a path index for the next removal; a run's last batch only.
        let removes = !change.removed.is_empty();
        let writes_index = !draft.more && (removes || draft.backfill);
        if (removes || writes_index) && draft.index_base.is_none() {
            draft.index_base = Some(self.path_index_chain(current).await);
        }
        if writes_index {
            let index = draft.path_index.get_or_insert_with(path_index_file);
            plan.properties.insert(PATH_INDEX.into(), index.clone());
        }
        let index = draft.index_base.clone().flatten().filter(|_| removes);
        let removals = self
            .plan_removals(change, parents, (&added.data, spec_id), read_all, index)
            .await?;
        // Files added again unchanged keep their entries: only their delete files change.
        added
            .data
            .retain(|f| !removals.in_place.contains(f.file_path()));
        let adds = summary::adds(&added, &removals.in_place);
        // 4. Manifests and the manifest list.
        let written = self
            .write_manifests(&frame, &bound, (added, removals), parent_list)
            .await?;
        // 5. Summary; the snapshot joins the draft.
        let summary = summary::snapshot_summary(change, &frame, &written, adds, &degraded);
        let schema_id = bound.schema.schema_id();
        self.join_draft(draft, &plan, &frame, (schema_id, logged), written, summary)?;
        let added_entries = degraded.difference(&parent_degraded).cloned().collect();
        Ok(Staged {
            commit: change.commit.id.clone(),
            snapshot_id: frame.snapshot_id,
            timestamp_ms: frame.timestamp_ms,
            degraded: added_entries,
        })
    }

    /// The snapshot of `written` (with `summary`, on schema `schema_id`) joins `draft` as
    /// the main branch's head. `logged`: the length of the snapshot log before it, which
    /// must grow.
    fn join_draft(
        &self,
        draft: &mut Draft<'_>,
        plan: &schema::SchemaPlan,
        frame: &Frame,
        (schema_id, logged): (i32, usize),
        written: Written,
        summary: Summary,
    ) -> Result<()> {
        let snapshot = frame.snapshot(written.list.clone(), summary, schema_id, written.added_rows);
        let built = self
            .base_builder(draft, plan)?
            .add_snapshot(snapshot)
            .and_then(|b| {
                let main = SnapshotRetention::branch(None, None, None);
                b.set_ref(MAIN_BRANCH, SnapshotReference::new(frame.snapshot_id, main))
            })
            .and_then(|b| b.build())
            .map_err(self.spec_error("add snapshot"))?;
        // iceberg-rust drops log entries of snapshots it does not hold in some builds; the
        // draft holds only the working ones (see `crate::spec::history`), so make sure not here.
        if built.metadata.history().len() <= logged {
            return Err(self.corrupt(
                crate::spec::layout::METADATA_DIR,
                "adding a snapshot would shorten the snapshot log",
            ));
        }
        draft.expired_logs.extend(built.expired_metadata_logs);
        draft.metadata = Some(built.metadata);
        draft.base = None;
        draft.last_list = Some(ListFile {
            location: written.list,
            decoded: written.listed,
            bytes: written.bytes,
        });
        Ok(())
    }

    /// The format version this commit writes: the table's own (an upgrade is a version of
    /// its own, see [`IcebergTable::upgrade`]), or the one asked for a new table. A v2
    /// table refuses columns only v3 can hold.
    fn commit_version(
        &self,
        change: &ChangeSet,
        current: Option<&TableMetadata>,
    ) -> Result<FormatVersion> {
        let version = match current {
            Some(m) => m.format_version(),
            None => self.target_version(None)?,
        };
        if version < FormatVersion::V3 {
            if let Some((column, reason)) = crate::ops::v3::needs_v3(&change.schema) {
                return Err(IcebergError::SchemaNotRepresentable {
                    table: self.table(),
                    commit: change.commit.id.clone(),
                    column,
                    reason,
                });
            }
        }
        Ok(version)
    }
}

/// A positive snapshot id not used by the table yet.
fn fresh_snapshot_id(current: Option<&TableMetadata>, history: &History) -> i64 {
    loop {
        let bits = uuid::Uuid::new_v4().as_u64_pair();
        let id = (bits.0 ^ bits.1) as i64 & i64::MAX;
        let taken = current.is_some_and(|m| m.snapshot_by_id(id).is_some()) || history.has(id);
        if id != 0 && !taken {
            return id;
        }
    }
}

pub(crate) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
