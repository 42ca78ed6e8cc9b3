//! The bytes of `vN.metadata.json`: iceberg-rust's serialization, with the lists it keeps
//! in hash maps put back in order. iceberg-rust 0.9 holds snapshots, schemas, partition
//! specs and sort orders in `HashMap`s and writes them in hash order, so `snapshots` came
//! out as sequence numbers 10, 12, 1, 5, … and readers that take the list as history
//! (pyiceberg's `snapshots()[0]`, `inspect.snapshots()`) started in the middle. Java
//! writes each list in the order its items were added: so does this, and keys in Java's
//! order.
//!
//! Snapshots a commit did not parse ([`crate::history`]) are written back as the text they
//! were read as, each in its place in that order.

use std::collections::HashSet;

use iceberg::spec::TableMetadata;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::history::{Carried, History};

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

/// `metadata` as compact JSON, lists in order, with the snapshots `history` carries.
pub fn metadata_json(metadata: &TableMetadata, history: &History) -> serde_json::Result<Vec<u8>> {
    let Value::Object(mut fields) = serde_json::to_value(metadata)? else {
        return serde_json::to_vec(metadata);
    };
    for (list, keys) in LIST_ORDER {
        if let Some(Value::Array(items)) = fields.get_mut(*list) {
            items.sort_by_key(|item| sort_key(item, keys));
        }
    }
    let listed = fields.contains_key("snapshots") || history.carried_count() > 0;
    let parsed = match fields.remove("snapshots") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // A snapshot parsed as well (never, from a split) is written once, as parsed.
    let ids: HashSet<i64> = parsed
        .iter()
        .filter_map(|p| p.get("snapshot-id").and_then(Value::as_i64))
        .collect();
    let carried = history
        .carried()
        .iter()
        .filter(|c| !ids.contains(&c.id))
        .collect();
    let snapshots = Snapshots { parsed, carried };
    let mut out = serde_json::Serializer::new(Vec::new());
    let mut map = out.serialize_map(Some(fields.len()))?;
    for key in KEY_ORDER {
        if *key == "snapshots" {
            if listed {
                map.serialize_entry(key, &snapshots)?;
            }
        } else if let Some(value) = fields.remove(*key) {
            map.serialize_entry(key, &value)?;
        }
    }
    for (key, value) in &fields {
        map.serialize_entry(key, value)?;
    }
    SerializeMap::end(map)?;
    Ok(out.into_inner())
}

/// The `snapshots` list: parsed snapshots and carried ones merged in commit order.
struct Snapshots<'a> {
    parsed: Vec<Value>,
    carried: Vec<&'a Carried>,
}

impl Serialize for Snapshots<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let keys = LIST_ORDER[0].1;
        let mut carried = self.carried.clone();
        carried.sort_by_key(|c| c.order);
        let mut seq = s.serialize_seq(Some(self.parsed.len() + carried.len()))?;
        let mut carried = carried.into_iter().peekable();
        for item in &self.parsed {
            let order = sort_key(item, keys);
            while let Some(c) = carried.next_if(|c| c.order.as_slice() < order.as_slice()) {
                seq.serialize_element(c)?;
            }
            seq.serialize_element(item)?;
        }
        for c in carried {
            seq.serialize_element(c)?;
        }
        seq.end()
    }
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
