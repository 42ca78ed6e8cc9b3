//! A deletion vector as the source stores it: which rows of one data file are deleted.
//!
//! The serialized form is the one Delta Lake and the Iceberg v3 Puffin `deletion-vector-v1`
//! blob share: a 4-byte magic (`D1 D3 39 64`) followed by a 64-bit Roaring bitmap in the
//! portable format. In a file, it is framed by its length (4 bytes, big-endian) before and
//! its CRC-32 (4 bytes, big-endian) after. The model only says where the bytes are; a
//! target copies them as they are, or decodes them.

/// Where the serialized vector is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorBytes {
    /// The serialized vector itself (magic and bitmap, no length or CRC), held in the log.
    Inline(Vec<u8>),
    /// In a file: at `offset`, the length (`size`, big-endian u32), `size` bytes of
    /// serialized vector, its CRC-32 (big-endian).
    Stored {
        /// Location: relative to the table root, or absolute (as [`crate::DataFile::path`]).
        path: String,
        /// Byte offset of the length field.
        offset: u64,
        /// Length of the serialized vector (magic and bitmap).
        size: u64,
    },
}

/// The deletion vector of one data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionVector {
    /// Where the serialized vector is.
    pub bytes: VectorBytes,
    /// Number of deleted rows, as the source's log records it.
    pub cardinality: u64,
}
