//! A `vN.metadata.json` read back whole (a commit's load reads its working snapshots
//! only, see [`crate::spec::history`]).

use iceberg::spec::TableMetadata;

use crate::spec::error::CodecError;

/// A `vN.metadata.json` as read back: the Iceberg spec's table metadata.
pub fn parse_metadata(bytes: &[u8]) -> std::result::Result<TableMetadata, CodecError> {
    serde_json::from_slice(bytes).map_err(CodecError::library)
}
