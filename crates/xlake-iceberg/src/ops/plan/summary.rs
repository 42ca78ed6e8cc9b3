//! Summary: the snapshot's operation (append, delete, overwrite, replace), the standard
//! summary counters carried on from the parent, `XTABLE_METADATA` naming the source
//! commit, the source commit time, the source's notes, and `xlake.degraded` (layouts found
//! in files stay named while the table lives; a source's notes are per commit).

use std::collections::{BTreeSet, HashMap, HashSet};

use iceberg::spec::{Operation, Summary};
use xlake_model::ChangeSet;

use super::files::AddedFiles;
use super::manifests::Written;
use super::{json, Frame};
use crate::spec::fidelity::{is_layout_entry, Finding};
use crate::spec::summary::{
    degraded_notes, degraded_value, standard_summary, SyncMetadata, DEGRADED, SOURCE_COMMIT_TIME,
    XTABLE_METADATA,
};

/// The parent's degraded entries, and this snapshot's: the parent's layout entries, the
/// source's notes for this commit, the layouts found in its `added` files, and the
/// deletion vectors it names that are gone from storage.
pub(super) fn degraded(
    parent: Option<&HashMap<String, String>>,
    change: &ChangeSet,
    added: &AddedFiles,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let parent: BTreeSet<String> = parent
        .map(degraded_notes)
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut degraded: BTreeSet<String> = parent
        .iter()
        .filter(|e| is_layout_entry(e))
        .cloned()
        .collect();
    degraded.extend(change.degraded.iter().cloned());
    degraded.extend(added.found.iter().map(Finding::entry));
    degraded.extend(added.gone_vectors.iter().cloned());
    (parent, degraded)
}

/// Whether a commit adds data files, and whether it adds delete files, as its operation
/// sees it. A data file added again unchanged is kept in place ([`super::deletes`]) and is
/// not added; but one added again without a new delete file may show deleted rows again
/// (Delta's RESTORE), which counts as adding data (an overwrite, as Iceberg's Java
/// `RowDelta` calls removing delete files). With its new vector it is a delete.
pub(super) fn adds(added: &AddedFiles, in_place: &HashSet<String>) -> (bool, bool) {
    let covered: HashSet<String> = added
        .deletes
        .iter()
        .filter_map(|d| d.referenced_data_file())
        .collect();
    let restores = in_place.iter().any(|p| !covered.contains(p));
    (
        !added.data.is_empty() || restores,
        !added.deletes.is_empty(),
    )
}

/// What a commit did, in Iceberg's words: a commit that changes no data (compaction,
/// clustering) replaces; otherwise it appends, deletes or overwrites.
fn operation(change: &ChangeSet, (adds_files, adds_deletes): (bool, bool)) -> Operation {
    match (adds_files, !change.removed.is_empty() || adds_deletes) {
        (false, false) => Operation::Append,
        _ if !change.data_change => Operation::Replace,
        (true, false) => Operation::Append,
        (false, true) => Operation::Delete,
        (true, true) => Operation::Overwrite,
    }
}

/// The summary of the snapshot `frame` of `change`; `adds` tells whether it adds data
/// files and delete files.
pub(super) fn snapshot_summary(
    change: &ChangeSet,
    frame: &Frame,
    written: &Written,
    adds: (bool, bool),
    degraded: &BTreeSet<String>,
) -> Summary {
    let mut summary = standard_summary(frame.parent_summary(), &written.counts, written.partitions);
    summary.insert(
        XTABLE_METADATA.into(),
        json(&SyncMetadata::for_commit(&change.commit)),
    );
    summary.insert(
        SOURCE_COMMIT_TIME.into(),
        change.commit.commit_time_ms.to_string(),
    );
    for (key, value) in &change.notes {
        summary.entry(key.clone()).or_insert_with(|| value.clone());
    }
    match degraded_value(degraded) {
        Some(value) => summary.insert(DEGRADED.into(), value),
        None => summary.remove(DEGRADED),
    };
    Summary {
        operation: operation(change, adds),
        additional_properties: summary,
    }
}
