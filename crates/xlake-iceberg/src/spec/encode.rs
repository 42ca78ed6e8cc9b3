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
//! entries, before the parsed ones. Written for a version (by its file name), the table
//! properties hold the snapshot index of what is written ([`crate::snapshot_index`]).

use bytes::Bytes;
use iceberg::spec::TableMetadata;
use serde_json::{Map, Value};

use crate::body::Body;
use crate::history::{Carried, CarriedLog, History};
use crate::snapshot_index::{self, Entry, SourceId, SNAPSHOT_INDEX};
use crate::summary::{SyncMetadata, XTABLE_METADATA};

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

/// `metadata` as compact JSON, lists in order, with the snapshots `history` carries; to
/// be written as `file` (a `vN.metadata.json`'s name) if given, which the snapshot index
/// names (none is written without it).
pub fn metadata_json(
    metadata: &TableMetadata,
    history: &History,
    file: Option<&str>,
) -> serde_json::Result<Vec<u8>> {
    Ok(metadata_parts(metadata, history, file)?.concat())
}

/// [`metadata_json`] as the parts it is written from: what this process serializes, and
/// runs of the text the carried snapshots and log entries were read from (views, not
/// copies: at 1,000 snapshots, 900 KiB not copied into a buffer of its own).
pub fn metadata_parts(
    metadata: &TableMetadata,
    history: &History,
    file: Option<&str>,
) -> serde_json::Result<Vec<Bytes>> {
    let Value::Object(mut fields) = serde_json::to_value(metadata)? else {
        return Ok(vec![Bytes::from(serde_json::to_vec(metadata)?)]);
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
    // A snapshot parsed as well (never, from a split) is written once, as parsed. The
    // parsed ones are few (the working snapshots and the new), the carried a thousand:
    // a list, not a hashed set.
    let ids: Vec<i64> = parsed
        .iter()
        .filter_map(|p| p.get("snapshot-id").and_then(Value::as_i64))
        .collect();
    let carried: Vec<&Carried> = history
        .carried()
        .iter()
        .filter(|c| !ids.contains(&c.entry.id))
        .collect();
    let snapshots = in_commit_order(&parsed, carried)?;
    let index = index_snapshots(&mut fields, file.filter(|_| listed), &snapshots, history);
    let log = history.carried_log();
    let mut out = Object::new(Body::new(history.source()));
    for key in KEY_ORDER {
        if *key == "snapshots" {
            if listed {
                out.key(key)?;
                write_snapshots(&mut out.body, &snapshots);
            }
        } else if let (Some(log), "snapshot-log") = (log, *key) {
            out.key(key)?;
            write_log(&mut out.body, fields.remove(*key), log)?;
        } else if let (Some(index), "properties") = (&index, *key) {
            out.key(key)?;
            write_properties(&mut out.body.buf, fields.remove(*key), index)?;
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
struct Object {
    body: Body,
    first: bool,
}

impl Object {
    fn new(mut body: Body) -> Self {
        body.buf.push(b'{');
        Self { body, first: true }
    }

    fn key(&mut self, key: &str) -> serde_json::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.body.buf.push(b',');
        }
        serde_json::to_writer(&mut self.body.buf, key)?;
        self.body.buf.push(b':');
        Ok(())
    }

    fn entry(&mut self, key: &str, value: &Value) -> serde_json::Result<()> {
        self.key(key)?;
        serde_json::to_writer(&mut self.body.buf, value)
    }

    fn end(mut self) -> Vec<Bytes> {
        self.body.buf.push(b'}');
        self.body.finish()
    }
}

/// A snapshot as it is written: serialized here (with its entry), or carried as read.
enum Snapshot<'a> {
    Parsed(Vec<u8>, Entry),
    Carried(&'a Carried),
}

impl Snapshot<'_> {
    /// Its entry in the snapshot index, and the length of its text.
    fn indexed(&self) -> (&Entry, usize) {
        match self {
            Snapshot::Parsed(text, entry) => (entry, text.len()),
            Snapshot::Carried(c) => (&c.entry, c.json.len()),
        }
    }

    /// Its text as written.
    fn text(&self) -> &[u8] {
        match self {
            Snapshot::Parsed(text, _) => text,
            Snapshot::Carried(c) => &c.json,
        }
    }
}

/// Parsed snapshots (serialized) and carried ones merged in commit order.
fn in_commit_order<'a>(
    parsed: &[Value],
    mut carried: Vec<&'a Carried>,
) -> serde_json::Result<Vec<Snapshot<'a>>> {
    let keys = LIST_ORDER[0].1;
    carried.sort_by_key(|c| c.entry.order());
    let mut carried = carried.into_iter().peekable();
    let mut out = Vec::new();
    for item in parsed {
        let order = sort_key(item, keys);
        while let Some(c) = carried.next_if(|c| c.entry.order().as_slice() < order.as_slice()) {
            out.push(Snapshot::Carried(c));
        }
        out.push(Snapshot::Parsed(serde_json::to_vec(item)?, entry_of(item)));
    }
    out.extend(carried.map(Snapshot::Carried));
    Ok(out)
}

/// The snapshot index's entry of a snapshot as serialized.
fn entry_of(snapshot: &Value) -> Entry {
    let field = |k: &str| snapshot.get(k).and_then(Value::as_i64).unwrap_or(0);
    let record = snapshot
        .get("summary")
        .and_then(|s| s.get(XTABLE_METADATA))
        .and_then(Value::as_str);
    Entry {
        id: field("snapshot-id"),
        sequence_number: field("sequence-number"),
        timestamp_ms: field("timestamp-ms"),
        mirrors: record
            .and_then(SyncMetadata::identifier_of)
            .map(|m| m.map(SourceId::from)),
    }
}

/// Table property [`SNAPSHOT_INDEX`] of the properties in `fields`: the index of
/// `snapshots` as written in `file`, to be written with them ([`write_properties`]), or
/// none (an index read from the version before names that one's file, and is dropped).
fn index_snapshots(
    fields: &mut Map<String, Value>,
    file: Option<&str>,
    snapshots: &[Snapshot],
    history: &History,
) -> Option<String> {
    if let Some(Value::Object(properties)) = fields.get_mut("properties") {
        properties.remove(SNAPSHOT_INDEX);
    }
    let index = match history.index_carry() {
        Some((carry, texts, entries)) if starts_with(snapshots, texts, entries) => {
            let more = snapshots[carry.count..].iter().map(|s| {
                let (entry, len) = s.indexed();
                (s.text(), entry, len)
            });
            snapshot_index::render_after(file?, carry, more)?
        }
        _ => {
            let list = snapshot_index::list_crc(snapshots.iter().map(Snapshot::text));
            let entries = snapshots.iter().map(Snapshot::indexed);
            snapshot_index::render(file?, list, entries)?
        }
    };
    match fields.get("properties") {
        Some(Value::Object(_)) => Some(index),
        Some(_) => None,
        None => {
            fields.insert("properties".to_string(), Value::Object(Map::new()));
            Some(index)
        }
    }
}

/// Whether `snapshots` start with those read, each with the text and entry it was read
/// with (`texts`, `entries`): the next index then carries the one read.
fn starts_with(snapshots: &[Snapshot], texts: &[Bytes], entries: &[Entry]) -> bool {
    let same = |(s, (text, entry)): (&Snapshot, (&Bytes, &Entry))| {
        let written = s.text();
        // A carried snapshot is the very view read: its bytes are not compared.
        let view = written.as_ptr() == text.as_ptr() && written.len() == text.len();
        (view || written == &text[..]) && s.indexed().0 == entry
    };
    snapshots.len() >= texts.len() && snapshots.iter().zip(texts.iter().zip(entries)).all(same)
}

/// Table properties `properties` (an object, keys in order) with the snapshot index
/// `index` in its place among them. The index has nothing to escape
/// ([`snapshot_index::render`]): it is written as it is, not through serde_json's
/// escaping (60 KiB at 1,000 snapshots). The bytes are those of the object with the
/// index inserted, serialized whole.
fn write_properties(
    out: &mut Vec<u8>,
    properties: Option<Value>,
    index: &str,
) -> serde_json::Result<()> {
    let properties = match properties {
        Some(Value::Object(properties)) => properties,
        None => Map::new(),
        Some(_) => {
            let reason = "table properties are not an object";
            return Err(serde::ser::Error::custom(reason));
        }
    };
    let (mut index, mut first) = (Some(index), true);
    let mut comma = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    out.push(b'{');
    for (key, value) in &properties {
        if let Some(index) = index.take_if(|_| key.as_str() > SNAPSHOT_INDEX) {
            comma(out);
            write_index(out, index);
        }
        comma(out);
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        serde_json::to_writer(&mut *out, value)?;
    }
    if let Some(index) = index {
        comma(out);
        write_index(out, index);
    }
    out.push(b'}');
    Ok(())
}

/// Property [`SNAPSHOT_INDEX`] with value `index`, which has nothing to escape.
fn write_index(out: &mut Vec<u8>, index: &str) {
    out.push(b'"');
    out.extend_from_slice(SNAPSHOT_INDEX.as_bytes());
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(index.as_bytes());
    out.push(b'"');
}

/// The `snapshots` list.
fn write_snapshots(out: &mut Body, snapshots: &[Snapshot]) {
    out.buf.push(b'[');
    for (i, snapshot) in snapshots.iter().enumerate() {
        if i > 0 {
            out.buf.push(b',');
        }
        match snapshot {
            Snapshot::Parsed(text, _) => out.buf.extend_from_slice(text),
            Snapshot::Carried(c) => out.carried(&c.json),
        }
    }
    out.buf.push(b']');
}

/// The `snapshot-log`: the carried entries, then the parsed ones, which must start with
/// the entry the carried ones precede. (iceberg-rust rewrites the log when snapshots are
/// removed, or when a build adds snapshots that never become current; a commit does
/// neither. If it ever did, the carried entries could not be put back in their place,
/// so the commit fails instead of writing a shortened log.)
fn write_log(out: &mut Body, parsed: Option<Value>, log: &CarriedLog) -> serde_json::Result<()> {
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
    out.buf.push(b'[');
    out.carried(&log.text);
    for item in &parsed {
        out.buf.push(b',');
        serde_json::to_writer(&mut out.buf, item)?;
    }
    out.buf.push(b']');
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The properties with the index are the bytes serde_json writes for the object with
    /// the index inserted (keys in order), whatever the other keys.
    #[test]
    fn the_index_is_written_in_its_place_among_the_properties() {
        let index = "1;v3.metadata.json;0badcafe;1,1,2,3,=20240101000000000";
        let sets: [&[(&str, &str)]; 6] = [
            &[],
            &[("a", "1")],
            &[("zz", "1")],
            &[
                ("xlake.source-format", "HUDI"),
                ("xlake.source-state", "{\"v\":1}"),
            ],
            &[
                ("a", "\"q\"\n"),
                ("write.x", "2"),
                ("xlake.a", "3"),
                ("xlake.t", "4"),
            ],
            &[
                ("xlake.snapshot-indey", "1"),
                ("xlake.snapshot-indexa", "2"),
            ],
        ];
        for set in sets {
            let properties: Map<String, Value> = set
                .iter()
                .map(|(k, v)| (k.to_string(), Value::from(*v)))
                .collect();
            let mut expected = properties.clone();
            expected.insert(SNAPSHOT_INDEX.to_string(), Value::from(index));
            let mut out = Vec::new();
            write_properties(&mut out, Some(Value::Object(properties)), index).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
        let mut out = Vec::new();
        write_properties(&mut out, None, index).unwrap();
        assert_eq!(
            out,
            format!(r#"{{"{SNAPSHOT_INDEX}":"{index}"}}"#).as_bytes()
        );
        assert!(write_properties(&mut out, Some(Value::from(1)), index).is_err());
    }
}
