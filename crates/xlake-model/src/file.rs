//! Files a commit adds or removes, with what is known about their contents.

use std::collections::HashSet;

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
    /// they are (Iceberg v3); `deleted_rows` then holds the same rows, decoded.
    pub deletion_vector: Option<DeletionVector>,
    /// The source removes this file again in a later commit, so it may already be deleted
    /// from storage (Hudi clean, Delta vacuum): its absence is then not an error, and the
    /// snapshot that adds it is only history.
    pub removed_later: bool,
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
        }
    }

    /// Mark, in change sets given in order, every added file that a later change set
    /// removes (by name, or by leaving it out of a full state).
    pub fn mark_removed_later(changes: &mut [crate::ChangeSet]) {
        let mut removed_after: HashSet<String> = HashSet::new();
        let mut nearest_full_state: Option<HashSet<String>> = None;
        for change in changes.iter_mut().rev() {
            for file in &mut change.added {
                file.removed_later = removed_after.contains(&file.path)
                    || nearest_full_state
                        .as_ref()
                        .is_some_and(|live| !live.contains(&file.path));
            }
            if change.full_state {
                nearest_full_state = Some(change.added.iter().map(|f| f.path.clone()).collect());
            }
            removed_after.extend(change.removed.iter().cloned());
        }
    }

    /// The same file with these partition values.
    pub fn with_partition(mut self, partition: Vec<Option<Value>>) -> Self {
        self.partition = partition;
        self
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
}
