//! The bytes of `vN.metadata.json`: iceberg-rust's serialization, with the lists it keeps
//! in hash maps put back in order. iceberg-rust 0.9 holds snapshots, schemas, partition
//! specs and sort orders in `HashMap`s and writes them in hash order, so `snapshots` came
//! out as sequence numbers 10, 12, 1, 5, … and readers that take the list as history
//! (pyiceberg's `snapshots()[0]`, `inspect.snapshots()`) started in the middle. Java
//! writes each list in the order its items were added: so does this, and keys in Java's
//! order.

use iceberg::spec::TableMetadata;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

/// Top-level keys in the order Java's `TableMetadataParser` writes them; any other key
/// follows.
const KEY_ORDER: &[&str] = &[
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "next-row-id",
    "last-updated-ms",
    "last-column-id",
    "current-schema-id",
    "schemas",
    "default-spec-id",
    "partition-specs",
    "last-partition-id",
    "default-sort-order-id",
    "sort-orders",
    "properties",
    "current-snapshot-id",
    "refs",
    "snapshots",
    "statistics",
    "partition-statistics",
    "snapshot-log",
    "metadata-log",
    "encryption-keys",
];

/// Lists and the fields that order them: snapshots in commit (sequence number) order,
/// the others by id.
const LIST_ORDER: &[(&str, &[&str])] = &[
    (
        "snapshots",
        &["sequence-number", "timestamp-ms", "snapshot-id"],
    ),
    ("schemas", &["schema-id"]),
    ("partition-specs", &["spec-id"]),
    ("sort-orders", &["order-id"]),
];

/// `metadata` as compact JSON, lists in order.
pub fn metadata_json(metadata: &TableMetadata) -> serde_json::Result<Vec<u8>> {
    let Value::Object(mut fields) = serde_json::to_value(metadata)? else {
        return serde_json::to_vec(metadata);
    };
    for (list, keys) in LIST_ORDER {
        if let Some(Value::Array(items)) = fields.get_mut(*list) {
            items.sort_by_key(|item| sort_key(item, keys));
        }
    }
    let mut out = serde_json::Serializer::new(Vec::new());
    let mut map = out.serialize_map(Some(fields.len()))?;
    for key in KEY_ORDER {
        if let Some(value) = fields.remove(*key) {
            map.serialize_entry(key, &value)?;
        }
    }
    for (key, value) in &fields {
        map.serialize_entry(key, value)?;
    }
    SerializeMap::end(map)?;
    Ok(out.into_inner())
}

fn sort_key(item: &Value, keys: &[&str]) -> Vec<i64> {
    let fields: Option<&Map<String, Value>> = item.as_object();
    keys.iter()
        .map(|k| {
            fields
                .and_then(|f| f.get(*k))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        })
        .collect()
}
