//! The Avro records of a manifest, field for field and in order as iceberg-rust's own
//! `manifest::_serde` (`ManifestEntryV2`, `DataFileSerde`) writes and reads them in
//! format versions 2 and 3: [`crate::manifest_read`] reads them, [`crate::manifest_write`]
//! writes them (by field name; the writer needs the schema's order, which it checks).
//! The partition record `P` is each side's own.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// One `manifest_entry` record.
#[derive(Serialize, Deserialize)]
pub(crate) struct EntryRecord<P> {
    pub(crate) status: i32,
    pub(crate) snapshot_id: Option<i64>,
    pub(crate) sequence_number: Option<i64>,
    pub(crate) file_sequence_number: Option<i64>,
    pub(crate) data_file: FileRecord<P>,
}

/// Its `data_file` (`content` required: a writer schema without it, which iceberg-rust
/// reads as 0, is left to iceberg-rust).
#[derive(Serialize, Deserialize)]
pub(crate) struct FileRecord<P> {
    pub(crate) content: i32,
    pub(crate) file_path: String,
    pub(crate) file_format: String,
    pub(crate) partition: P,
    pub(crate) record_count: i64,
    pub(crate) file_size_in_bytes: i64,
    pub(crate) column_sizes: Option<Vec<Counted>>,
    pub(crate) value_counts: Option<Vec<Counted>>,
    pub(crate) null_value_counts: Option<Vec<Counted>>,
    pub(crate) nan_value_counts: Option<Vec<Counted>>,
    pub(crate) lower_bounds: Option<Vec<Bound>>,
    pub(crate) upper_bounds: Option<Vec<Bound>>,
    pub(crate) key_metadata: Option<ByteBuf>,
    pub(crate) split_offsets: Option<Vec<i64>>,
    pub(crate) equality_ids: Option<Vec<i32>>,
    pub(crate) sort_order_id: Option<i32>,
    pub(crate) first_row_id: Option<i64>,
    pub(crate) referenced_data_file: Option<String>,
    pub(crate) content_offset: Option<i64>,
    pub(crate) content_size_in_bytes: Option<i64>,
}

/// The data file fields of the manifest schema, in its order: [`FileRecord`]'s.
pub(crate) const FILE_FIELDS: &[&str] = &[
    "content",
    "file_path",
    "file_format",
    "partition",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "key_metadata",
    "split_offsets",
    "equality_ids",
    "sort_order_id",
    "first_row_id",
    "referenced_data_file",
    "content_offset",
    "content_size_in_bytes",
];

/// A map entry of the counts (an Avro array of key/value records).
#[derive(Serialize, Deserialize)]
pub(crate) struct Counted {
    pub(crate) key: i32,
    pub(crate) value: i64,
}

/// A map entry of the bounds.
#[derive(Serialize, Deserialize)]
pub(crate) struct Bound {
    pub(crate) key: i32,
    pub(crate) value: ByteBuf,
}
