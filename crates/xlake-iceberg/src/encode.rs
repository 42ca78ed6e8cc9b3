//! The bytes of `vN.metadata.json`: iceberg-rust's serialization, with the lists it keeps
//! in hash maps put back in order. iceberg-rust 0.9 holds snapshots, schemas, partition
//! specs and sort orders in `HashMap`s and writes them in hash order, so `snapshots` came
//! out as sequence numbers 10, 12, 1, 5, … and readers that take the list as history
//! (pyiceberg's `snapshots()[0]`, `inspect.snapshots()`) started in the middle. Java
//! writes each list in the order its items were added: so does this, and keys in Java's
//! order.
//!
//! Snapshots a commit did not parse ([`crate::history`]) are written back as the text they
//! were read as, each in its place in that order; so are the snapshot log's carried
//! entries, before the parsed ones.

use std::collections::HashSet;

use iceberg::spec::TableMetadata;
use serde_json::{Map, Value};

use crate::history::{Carried, CarriedLog, History};

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
    let carried: Vec<&Carried> = history
        .carried()
        .iter()
        .filter(|c| !ids.contains(&c.id))
        .collect();
    // The carried text, plus room for what is parsed (a fraction of it at most).
    let log = history.carried_log();
    let carried_len: usize =
        carried.iter().map(|c| c.json.len() + 1).sum::<usize>() + log.map_or(0, |l| l.text.len());
    let mut out = Object::new(carried_len + carried_len / 4 + 16 * 1024);
    for key in KEY_ORDER {
        if *key == "snapshots" {
            if listed {
                out.key(key)?;
                write_snapshots(&mut out.0, &parsed, carried.clone())?;
            }
        } else if let (Some(log), "snapshot-log") = (log, *key) {
            out.key(key)?;
            write_log(&mut out.0, fields.remove(*key), log)?;
        } else if let Some(value) = fields.remove(*key) {
            out.entry(key, &value)?;
        }
    }
    for (key, value) in &fields {
        out.entry(key, value)?;
    }
    Ok(out.end())
}

/// A JSON object written entry by entry (a carried snapshot is bytes, not a value, so
/// the document is assembled here rather than by one `Serialize`).
struct Object(Vec<u8>);

impl Object {
    fn new(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        Self(out)
    }

    fn key(&mut self, key: &str) -> serde_json::Result<()> {
        if self.0.len() > 1 {
            self.0.push(b',');
        }
        serde_json::to_writer(&mut self.0, key)?;
        self.0.push(b':');
        Ok(())
    }

    fn entry(&mut self, key: &str, value: &Value) -> serde_json::Result<()> {
        self.key(key)?;
        serde_json::to_writer(&mut self.0, value)
    }

    fn end(mut self) -> Vec<u8> {
        self.0.push(b'}');
        self.0
    }
}

/// The `snapshots` list: parsed snapshots and carried ones (their text as read) merged
/// in commit order.
fn write_snapshots(
    out: &mut Vec<u8>,
    parsed: &[Value],
    mut carried: Vec<&Carried>,
) -> serde_json::Result<()> {
    let keys = LIST_ORDER[0].1;
    carried.sort_by_key(|c| c.order);
    let mut carried = carried.into_iter().peekable();
    out.push(b'[');
    let mut first = true;
    let mut comma = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    for item in parsed {
        let order = sort_key(item, keys);
        while let Some(c) = carried.next_if(|c| c.order.as_slice() < order.as_slice()) {
            comma(out);
            out.extend_from_slice(&c.json);
        }
        comma(out);
        serde_json::to_writer(&mut *out, item)?;
    }
    for c in carried {
        comma(out);
        out.extend_from_slice(&c.json);
    }
    out.push(b']');
    Ok(())
}

/// The `snapshot-log`: the carried entries, then the parsed ones, which must start with
/// the entry the carried ones precede. (iceberg-rust rewrites the log when snapshots are
/// removed, or when a build adds snapshots that never become current; a commit does
/// neither. If it ever did, the carried entries could not be put back in their place,
/// so the commit fails instead of writing a shortened log.)
fn write_log(out: &mut Vec<u8>, parsed: Option<Value>, log: &CarriedLog) -> serde_json::Result<()> {
    let parsed = match parsed {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let first = parsed.first().and_then(Value::as_object).map(|e| {
        let field = |k: &str| e.get(k).and_then(Value::as_i64);
        (field("snapshot-id"), field("timestamp-ms"))
    });
    if first != Some((Some(log.next.0), Some(log.next.1))) {
        return Err(serde::ser::Error::custom(
            "the snapshot log no longer starts where its carried entries end",
        ));
    }
    out.push(b'[');
    out.extend_from_slice(&log.text);
    for item in &parsed {
        out.push(b',');
        serde_json::to_writer(&mut *out, item)?;
    }
    out.push(b']');
    Ok(())
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
