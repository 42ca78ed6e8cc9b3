//! Files a commit adds or removes, with what is known about their contents.

use std::collections::BTreeMap;

use crate::Value;

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
    /// Stats keyed by the leaf column's dotted path. Empty means "unknown": the target may
    /// read them from the file footer.
    pub column_stats: BTreeMap<String, ColumnStats>,
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
            column_stats: BTreeMap::new(),
        }
    }

    /// The same file with these partition values.
    pub fn with_partition(mut self, partition: Vec<Option<Value>>) -> Self {
        self.partition = partition;
        self
    }
}

/// A file of deleted row positions (for deletion vectors), applying to some data files.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteFile {
    /// Location, like [`DataFile::path`].
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Number of deleted positions.
    pub record_count: u64,
    /// The data files whose rows it deletes.
    pub data_files: Vec<String>,
}
