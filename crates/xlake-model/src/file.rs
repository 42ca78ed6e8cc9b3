//! Files a commit adds or removes, with what is known about their contents.

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
