//! Files a commit adds or removes, with what is known about their contents.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::{DeletionVector, Value};

/// On-disk format of a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// Apache ORC.
    Orc,
    /// Apache Avro.
    Avro,
}

/// Statistics of one leaf column in one file; every part is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStats {
    /// Number of values, nulls included.
    pub value_count: Option<u64>,
    /// Number of nulls.
    pub null_count: Option<u64>,
    /// Number of NaN values (float and double only).
    pub nan_count: Option<u64>,
    /// A value no larger than any non-null value in the file.
    pub lower: Option<Value>,
    /// A value no smaller than any non-null value in the file.
    pub upper: Option<Value>,
}

/// A data file as the source table records it. The file is referenced in place.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    /// Location: relative to the table root, or absolute (`/…` or `scheme://…`).
    pub path: String,
    /// File format.
    pub format: FileFormat,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Number of rows, when the source records it. `None` makes the target read it from the
    /// file footer: it is never guessed.
    pub record_count: Option<u64>,
    /// One value per partition field, in the spec's order, after the transform.
    pub partition: Vec<Option<Value>>,
    /// Stats per leaf column, by dotted path, one entry per column. Empty means
    /// "unknown": the target may read them from the file footer. (A list, not a map: a
    /// backfill holds millions of these, and a small BTreeMap costs a 1.5 KB node.)
    pub column_stats: Vec<(String, ColumnStats)>,
    /// Positions (0-based row numbers, ascending) of the file's rows that are deleted, as a
    /// Delta deletion vector records them. Empty: every row is live.
    pub deleted_rows: Vec<u64>,
    /// The deletion vector as the source stores it, for a target that carries vectors as
    /// they are (Iceberg v3); `deleted_rows` then holds the same rows, decoded, unless
    /// the vector's file is gone from storage (VACUUM): the target then names the gone
    /// vector for a file a later commit removes (`removed_later`), and refuses it otherwise.
    pub deletion_vector: Option<DeletionVector>,
    /// The source removes this file again in a later commit, so it may already be deleted
    /// from storage (Hudi clean, Delta vacuum): its absence is then not an error, and the
    /// snapshot that adds it is only history.
    pub removed_later: bool,
    /// The file under this path changed since the source last described it (a file of a
    /// Parquet folder rewritten in place): where the target holds the path, its entry is
    /// replaced by this one, never kept as it is.
    pub rewritten: bool,
    /// The source commit that adds this file records it as its writer wrote it, inside the
    /// table (Delta: an `add` with `size` and `modificationTime`; Hudi: a write stat with
    /// `fileSizeInBytes`, in the instant that wrote the file): an incremental sync need not
    /// look it up on storage. Files from a checkpoint or another commit's state are not.
    pub proven: bool,
}

impl DataFile {
    /// A Parquet file with no partition values and no stats.
    pub fn parquet(path: impl Into<String>, size_bytes: u64, record_count: Option<u64>) -> Self {
        Self {
            path: path.into(),
            format: FileFormat::Parquet,
            size_bytes,
            record_count,
            partition: Vec::new(),
            column_stats: Vec::new(),
            deleted_rows: Vec::new(),
            deletion_vector: None,
            removed_later: false,
            rewritten: false,
            proven: false,
        }
    }

    /// Mark, in change sets given in order, every added file that a later change set
    /// removes (by name, or by leaving it out of a full state).
    pub fn mark_removed_later(changes: &mut [crate::ChangeSet]) {
        let mut later = RemovedLater::default();
        for (i, change) in changes.iter().enumerate() {
            later.record(i as u64, change);
        }
        for (i, change) in changes.iter_mut().enumerate() {
            later.mark(i as u64, change);
        }
    }

    /// The same file with these partition values.
    pub fn with_partition(mut self, partition: Vec<Option<Value>>) -> Self {
        self.partition = partition;
        self
    }
}

/// A compact key for a file path (128 bits of two SipHashes): path sets of a table with
/// millions of files are kept as keys, at 16 bytes a path instead of the path's text.
pub fn path_key(path: &str) -> u128 {
    (u128::from(short_path_key(path)) << 64) | u128::from(path_hash(path, 1))
}

/// The high 64 bits of [`path_key`], for sets whose hits are then checked against the full
/// path: a false hit (two of 10M paths share a short key about once in 370,000 tables)
/// then costs a check, never a wrong answer.
pub fn short_path_key(path: &str) -> u64 {
    path_hash(path, 0)
}

fn path_hash(path: &str, salt: u8) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    salt.hash(&mut h);
    path.hash(&mut h);
    h.finish()
}

/// Which added files a later change set removes, known before the change sets are read in
/// full: a source records, in a first pass, the removals (and full states) of its replay at
/// their positions (any increasing number: an index, a version), then marks each change set
/// as it is read ([`DataFile::removed_later`]). It holds one key per removed path and the
/// live paths of each full state, never the change sets.
#[derive(Debug, Clone, Default)]
pub struct RemovedLater {
    /// Path key to the last position that removes it.
    removed: HashMap<u128, u64>,
    /// Positions of full-state change sets, with the paths live there.
    full_states: BTreeMap<u64, HashSet<u128>>,
}

impl RemovedLater {
    /// The change set at `position` removes `path`.
    pub fn removed(&mut self, position: u64, path: &str) {
        let last = self.removed.entry(path_key(path)).or_insert(position);
        *last = (*last).max(position);
    }

    /// The change set at `position` is a full state with these live paths.
    pub fn full_state<'a>(&mut self, position: u64, live: impl IntoIterator<Item = &'a str>) {
        self.full_states
            .insert(position, live.into_iter().map(path_key).collect());
    }

    /// Record what the change set at `position` removes (or, a full state, keeps).
    pub fn record(&mut self, position: u64, change: &crate::ChangeSet) {
        if change.full_state {
            self.full_state(position, change.added.iter().map(|f| f.path.as_str()));
        }
        for path in &change.removed {
            self.removed(position, path);
        }
    }

    /// Set [`DataFile::removed_later`] on the files the change set at `position` adds.
    pub fn mark(&self, position: u64, change: &mut crate::ChangeSet) {
        let next_full_state = position
            .checked_add(1)
            .and_then(|after| self.full_states.range(after..).next())
            .map(|(_, live)| live);
        for file in &mut change.added {
            let key = path_key(&file.path);
            file.removed_later = self.removed.get(&key).is_some_and(|&p| p > position)
                || next_full_state.is_some_and(|live| !live.contains(&key));
        }
    }

    /// Whether nothing is removed and there is no full state.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.full_states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChangeSet, PartitionSpec, Schema, SourceCommit, SourceFormat};

    fn change(id: &str, added: &[&str], removed: &[&str], full_state: bool) -> ChangeSet {
        let commit = SourceCommit {
            format: SourceFormat::new("DELTA"),
            id: id.into(),
            action: "WRITE".into(),
            requested_ms: None,
            commit_time_ms: 0,
        };
        let mut c = ChangeSet::new(commit, Schema::default(), PartitionSpec::unpartitioned());
        c.added = added
            .iter()
            .map(|p| DataFile::parquet(*p, 1, None))
            .collect();
        c.removed = removed.iter().map(|p| p.to_string()).collect();
        c.full_state = full_state;
        c
    }

    #[test]
    fn files_removed_by_later_commits_are_marked() {
        let mut changes = vec![
            change("0", &["a", "b", "c"], &[], false),
            change("1", &["d"], &["a"], false),
            change("2", &["c", "d"], &[], true),
        ];
        DataFile::mark_removed_later(&mut changes);
        let marks: Vec<Vec<bool>> = changes
            .iter()
            .map(|c| c.added.iter().map(|f| f.removed_later).collect())
            .collect();
        assert_eq!(
            marks,
            vec![vec![true, true, false], vec![false], vec![false, false]]
        );
    }

    #[test]
    fn removals_recorded_first_mark_change_sets_read_later() {
        let mut later = RemovedLater::default();
        // A first pass that sees only removals, at versions 3 and 7.
        later.removed(3, "a");
        later.removed(7, "b");
        later.removed(2, "b");
        let at = |position, paths: &[&str]| {
            let mut c = change("x", paths, &[], false);
            later.mark(position, &mut c);
            c.added.iter().map(|f| f.removed_later).collect::<Vec<_>>()
        };
        assert_eq!(at(1, &["a", "b", "c"]), [true, true, false]);
        // Removed at 3, added again at 3 or after: live.
        assert_eq!(at(3, &["a", "b"]), [false, true]);
        assert_eq!(at(7, &["b"]), [false]);
    }

    #[test]
    fn a_later_full_state_marks_what_it_leaves_out() {
        let mut later = RemovedLater::default();
        later.record(5, &change("5", &["a"], &[], true));
        later.record(9, &change("9", &["b"], &[], true));
        let mut c = change("1", &["a", "b"], &[], false);
        later.mark(1, &mut c);
        // Only the nearest full state counts.
        assert_eq!(
            c.added.iter().map(|f| f.removed_later).collect::<Vec<_>>(),
            [false, true]
        );
        let mut c = change("5", &["a"], &[], true);
        later.mark(5, &mut c);
        assert!(c.added[0].removed_later);
        assert!(!later.is_empty());
        assert_ne!(path_key("a"), path_key("b"));
    }
}
