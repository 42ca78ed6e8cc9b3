//! A `vN.metadata.json` read back whole (a commit's load reads its working snapshots
//! only, see [`crate::spec::history`]).

use iceberg::spec::TableMetadata;

/// A `vN.metadata.json` as read back: the Iceberg spec's table metadata.
pub fn parse_metadata(bytes: &[u8]) -> std::result::Result<TableMetadata, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}
