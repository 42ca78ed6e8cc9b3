//! A table's snapshots, read for a commit without parsing its history (issue 16).
//!
//! A commit builds on the current snapshot; the snapshots before it go into the next
//! `vN.metadata.json` unchanged. So [`split`] parses into iceberg-rust's `TableMetadata`
//! only the *working* snapshots (the current one and those a ref names), reads of every
//! snapshot only its entry (id, order, the source commit it records), and keeps the
//! JSON text of the others as it was read; the encoder ([`crate::spec::encode`]) writes that
//! text back in its place. The entries come from the snapshot index when the file holds
//! the one xlake wrote for it ([`crate::spec::snapshot_index`]): the snapshots are then sliced
//! out of the text, not parsed, and their [`SnapshotHead`]s are read only if asked for.
//! Otherwise each snapshot's head is read (ids, time, manifest list, `XTABLE_METADATA`
//! and the `xlake.*` notes) and its entry taken from it. With 1,000 snapshots this
//! replaces a parse of the whole file into iceberg-rust's types (an untagged enum that
//! buffers the document) and a re-serialization of every snapshot.
//!
//! A table loaded whole ([`IcebergTable::load`](crate::IcebergTable::load)) has the same
//! heads and entries and carries nothing: what needs every snapshot (check, inspect,
//! expiry, cleanup) loads it whole.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use bytes::Bytes;
use iceberg::spec::TableMetadata;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::spec::compact::{self, LogEntry};
use crate::spec::snapshot_index::{self, Carry, Entry, Index, SourceId, SNAPSHOT_INDEX};
use crate::spec::summary::{SyncMetadata, XTABLE_METADATA};

use crate::spec::error::CodecError;

/// Summary keys a head keeps besides [`XTABLE_METADATA`]: xlake's own notes.
const NOTE_PREFIX: &str = "xlake.";

/// Whether a head keeps summary key `key`.
fn kept_key(key: &str) -> bool {
    key == XTABLE_METADATA || key.starts_with(NOTE_PREFIX)
}

/// What the engine and the planner need of a snapshot they do not build on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SnapshotHead {
    /// `snapshot-id`.
    #[serde(rename = "snapshot-id")]
    pub snapshot_id: i64,
    /// `parent-snapshot-id`.
    #[serde(rename = "parent-snapshot-id", default)]
    pub parent_snapshot_id: Option<i64>,
    /// `sequence-number` (0 in a v1 table).
    #[serde(rename = "sequence-number", default)]
    pub sequence_number: i64,
    /// `timestamp-ms`.
    #[serde(rename = "timestamp-ms")]
    pub timestamp_ms: i64,
    /// `manifest-list` (absent only in v1 tables that list manifests inline).
    #[serde(rename = "manifest-list", default)]
    pub manifest_list: Option<String>,
    /// The summary's `XTABLE_METADATA` and `xlake.*` entries.
    #[serde(rename = "summary", default)]
    pub notes: Notes,
}

impl SnapshotHead {
    /// The source commit this snapshot records, if any.
    pub fn sync(&self) -> Option<SyncMetadata> {
        SyncMetadata::from_summary(&self.notes.0)
    }

    /// What a commit needs of this snapshot.
    pub(crate) fn entry(&self) -> Entry {
        Entry {
            id: self.snapshot_id,
            sequence_number: self.sequence_number,
            timestamp_ms: self.timestamp_ms,
            mirrors: SyncMetadata::identifier_in(&self.notes.0).map(|m| m.map(SourceId::from)),
        }
    }
}

/// Summary entries of a snapshot that xlake reads back: [`XTABLE_METADATA`] and keys
/// starting with `xlake.`; other keys are skipped unread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes(pub HashMap<String, String>);

impl<'de> Deserialize<'de> for Notes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kept;
        impl<'de> Visitor<'de> for Kept {
            type Value = Notes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a snapshot summary")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Notes, A::Error> {
                let mut kept = HashMap::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if kept_key(&key) {
                        kept.insert(key.into_owned(), map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Notes(kept))
            }
        }
        d.deserialize_map(Kept)
    }
}

/// Every snapshot of a loaded version, and the JSON of those not parsed.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every snapshot, in file order: what a commit needs of it.
    entries: Vec<Entry>,
    /// Every snapshot's head: read with the entries, or, when they were read from the
    /// snapshot index, from `texts` when first asked for.
    heads: OnceLock<Vec<SnapshotHead>>,
    /// Every snapshot's text, when the heads were not read.
    texts: Vec<Bytes>,
    carried: Vec<Carried>,
    log: Option<CarriedLog>,
    /// The bytes the carried text is a view of (the file split).
    source: Option<Bytes>,
    /// When the entries were read from the snapshot index: what the next index takes.
    index: Option<Carry>,
}

/// The `snapshot-log` entries before the last one, carried as their text: the working
/// metadata holds only the last entry (what iceberg-rust checks a new snapshot's time and
/// the table's last update against, and appends after). A log entry is a time and a
/// snapshot id, and a 1,000-entry log cost as much to parse and write back as the rest of
/// the working metadata.
#[derive(Debug, Clone)]
pub(crate) struct CarriedLog {
    /// The entries, with the commas between them, as read (a view of the file).
    pub(crate) text: Bytes,
    /// The entry they precede, the first the working metadata holds: (snapshot id, time).
    pub(crate) next: (i64, i64),
}

/// A snapshot carried as its JSON text (a view of the file it was read from, not a
/// copy), with its place in the list.
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    pub(crate) entry: Entry,
    pub(crate) json: Bytes,
}

impl History {
    /// The heads of a table parsed whole; nothing carried.
    pub fn of(metadata: &TableMetadata) -> Self {
        let heads: Vec<SnapshotHead> = metadata
            .snapshots()
            .map(|s| SnapshotHead {
                snapshot_id: s.snapshot_id(),
                parent_snapshot_id: s.parent_snapshot_id(),
                sequence_number: s.sequence_number(),
                timestamp_ms: s.timestamp_ms(),
                manifest_list: Some(s.manifest_list().to_string()),
                notes: Notes(
                    s.summary()
                        .additional_properties
                        .iter()
                        .filter(|(k, _)| kept_key(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
            })
            .collect();
        Self::read(heads, Vec::new(), None, None)
    }

    /// A history whose heads were read.
    fn read(
        heads: Vec<SnapshotHead>,
        carried: Vec<Carried>,
        log: Option<CarriedLog>,
        source: Option<Bytes>,
    ) -> Self {
        Self {
            entries: heads.iter().map(SnapshotHead::entry).collect(),
            heads: OnceLock::from(heads),
            texts: Vec::new(),
            carried,
            log,
            source,
            index: None,
        }
    }

    /// Every snapshot's head, in no particular order. (After a read by the snapshot
    /// index, the first call reads them from the snapshots' text: for what reads old
    /// snapshots, which loads whole anyway. A snapshot whose text the index described
    /// but is not a snapshot has no head.)
    pub fn heads(&self) -> &[SnapshotHead] {
        self.heads.get_or_init(|| {
            let heads = self.texts.iter().map(|t| serde_json::from_slice(t));
            heads.filter_map(Result::ok).collect()
        })
    }

    /// What a commit needs of every snapshot, in file order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The head of snapshot `id`.
    pub fn head(&self, id: i64) -> Option<&SnapshotHead> {
        self.heads().iter().find(|h| h.snapshot_id == id)
    }

    /// Whether a snapshot of this history has id `id`.
    pub(crate) fn has(&self, id: i64) -> bool {
        self.entries.iter().any(|e| e.id == id)
    }

    /// When the entries were read from the snapshot index: what the next version's index
    /// takes from it, with every snapshot's text and entry as read, in file order.
    pub(crate) fn index_carry(&self) -> Option<(&Carry, &[Bytes], &[Entry])> {
        let carry = self.index.as_ref()?;
        let whole = self.texts.len() == carry.count && self.entries.len() == carry.count;
        whole.then_some((carry, &self.texts, &self.entries))
    }

    /// The snapshots kept as JSON text, in file order.
    pub(crate) fn carried(&self) -> &[Carried] {
        &self.carried
    }

    /// How many snapshots are carried unparsed.
    pub fn carried_count(&self) -> usize {
        self.carried.len()
    }

    /// The snapshot-log entries carried unparsed, if any.
    pub(crate) fn carried_log(&self) -> Option<&CarriedLog> {
        self.log.as_ref()
    }

    /// The bytes the carried text was read from.
    pub(crate) fn source(&self) -> Option<&Bytes> {
        self.source.as_ref()
    }

    /// Whether everything was parsed (no snapshot and no log entry carried).
    pub(crate) fn is_whole(&self) -> bool {
        self.carried.is_empty() && self.log.is_none()
    }

    /// This history with `added` snapshots (built by this process, parsed) after it.
    pub(crate) fn with_added(&self, metadata: &TableMetadata) -> Self {
        let known: HashSet<i64> = self.entries.iter().map(|e| e.id).collect();
        let mut heads = self.heads().to_vec();
        let added = Self::of(metadata).heads().to_vec();
        heads.extend(
            added
                .into_iter()
                .filter(|h| !known.contains(&h.snapshot_id)),
        );
        Self::read(
            heads,
            self.carried.clone(),
            self.log.clone(),
            self.source.clone(),
        )
    }
}

/// The top level of a `vN.metadata.json`: each value as its text, and each snapshot as
/// its text with its head, or with its entry when the snapshot index was read instead.
#[derive(Default)]
struct Document<'a> {
    /// Each field but `snapshots`, as its text.
    fields: BTreeMap<String, &'a str>,
    snapshots: Vec<&'a str>,
    heads: Option<Vec<SnapshotHead>>,
    /// The snapshot index, when the properties hold one naming the file (see
    /// [`snapshot_index`]).
    index: Option<Index>,
    /// The snapshots' entries, when they were read by the index.
    indexed: Option<Vec<Entry>>,
    /// What the next version's index may take from that index.
    carry: Option<Carry>,
    /// The snapshot log's entries, when its text was read fast ([`compact::log_at`]).
    log: Option<Vec<LogEntry>>,
    /// Where the snapshot index is in the properties' text, with a comma next to it,
    /// when they were read fast ([`compact::string_object`]).
    index_member: Option<std::ops::Range<usize>>,
}

/// Reads a document's text once: the top-level object walked here, each value read by
/// serde_json from where the last ended (`StreamDeserializer::byte_offset`), each
/// snapshot straight into its head, whose text is then the span it was read from. (A
/// serde visitor is told no positions, so taking each snapshot's text and its head in
/// one visit would read the snapshots twice.)
struct Walk<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Walk<'a> {
    /// The next value, read from here; skips the whitespace before it.
    fn value<T: Deserialize<'a>>(&mut self) -> Result<(&'a str, T), CodecError> {
        self.skip_whitespace();
        let rest = &self.text[self.at..];
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = values
            .next()
            .ok_or("the document ends early")?
            .map_err(CodecError::library)?;
        let read = &rest[..values.byte_offset()];
        self.at += read.len();
        Ok((read, value))
    }

    /// Past the next byte, which must be one of `expected`; returns it.
    fn punctuation(&mut self, expected: &[u8]) -> Result<u8, CodecError> {
        self.skip_whitespace();
        match self.text.as_bytes().get(self.at) {
            Some(b) if expected.contains(b) => {
                self.at += 1;
                Ok(*b)
            }
            _ => Err(format!(
                "table metadata: expected one of {:?} at byte {}",
                String::from_utf8_lossy(expected),
                self.at
            )
            .into()),
        }
    }

    fn peek_is(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        self.text.as_bytes().get(self.at) == Some(&byte)
    }

    fn skip_whitespace(&mut self) {
        let rest = &self.text.as_bytes()[self.at..];
        self.at += rest
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\n' | b'\t' | b'\r'))
            .count();
    }
}

/// The document `text`, read in one pass (see [`Walk`]); `file` is its name, which a
/// snapshot index it holds must name to be used.
fn document<'a>(text: &'a str, file: Option<&str>) -> Result<Document<'a>, CodecError> {
    let mut walk = Walk { text, at: 0 };
    let mut doc = Document::default();
    walk.punctuation(b"{")?;
    let mut more = !walk.peek_is(b'}');
    if !more {
        walk.punctuation(b"}")?;
    }
    let mut listed = false;
    while more {
        let (_, key): (_, std::borrow::Cow<str>) = walk.value()?;
        walk.punctuation(b":")?;
        // A key twice is refused, as iceberg-rust's parse refuses it.
        if doc.fields.contains_key(key.as_ref()) || (key == "snapshots" && listed) {
            return Err(format!("table metadata: duplicate field {key:?}").into());
        }
        if key == "snapshots" {
            listed = true;
            read_snapshots(&mut walk, &mut doc)?;
        } else {
            let value = field(&mut walk, &mut doc, &key, file)?;
            doc.fields.insert(key.into_owned(), value);
        }
        more = walk.punctuation(b",}")? == b',';
    }
    walk.skip_whitespace();
    if walk.at != text.len() {
        return Err(format!("table metadata: trailing characters at byte {}", walk.at).into());
    }
    Ok(doc)
}

/// The text of field `key`'s value at `walk`. The two that grow with history are read
/// fast when they have the compact shape Iceberg's writers give them ([`compact`]): the
/// snapshot log (its entries kept in `doc`), and the properties (the snapshot index of
/// `file` taken from them, and where it is). Anything else serde_json reads.
fn field<'a>(
    walk: &mut Walk<'a>,
    doc: &mut Document<'a>,
    key: &str,
    file: Option<&str>,
) -> Result<&'a str, CodecError> {
    walk.skip_whitespace();
    let rest = &walk.text[walk.at..];
    let fast = match key {
        "snapshot-log" => compact::log_at(rest).map(|(entries, after)| {
            doc.log = Some(entries);
            rest.len() - after.len()
        }),
        "properties" => compact::string_object(rest, SNAPSHOT_INDEX).map(|read| {
            if let Some((value, cut)) = read.member {
                doc.index = file.and_then(|file| snapshot_index::parse(&rest[value], file));
                doc.index_member = Some(cut);
            }
            read.len
        }),
        _ => None,
    };
    if let Some(len) = fast {
        walk.at += len;
        return Ok(&rest[..len]);
    }
    let (_, value) = walk.value::<&RawValue>()?;
    if key == "properties" {
        doc.index = file.and_then(|file| index_in(value.get(), file));
    }
    Ok(value.get())
}

/// The snapshot index of `file` in table properties `raw`, if they hold one naming it.
fn index_in(raw: &str, file: &str) -> Option<Index> {
    #[derive(Deserialize)]
    struct Properties<'a> {
        #[serde(rename = "xlake.snapshot-index", borrow)]
        index: Option<&'a str>,
    }
    // Most tables' properties are a few keys; a table without an index parses nothing.
    // The index as xlake writes it has nothing to unescape, so it is read in place; one
    // that has (not xlake's) is not read, and the snapshots are read instead.
    if !raw.contains(SNAPSHOT_INDEX) {
        return None;
    }
    let properties: Properties = serde_json::from_str(raw).ok()?;
    snapshot_index::parse(properties.index?, file)
}

/// The `snapshots` array at `walk` into `doc`: by the snapshot index where it holds one
/// that describes the array, else each snapshot's text and head.
fn read_snapshots<'a>(walk: &mut Walk<'a>, doc: &mut Document<'a>) -> Result<(), CodecError> {
    walk.skip_whitespace();
    if let Some(index) = doc.index.take() {
        if let Some((texts, end, list)) = snapshot_index::spans(walk.text, walk.at, &index) {
            walk.at = end;
            let (entries, carry) = index.into_carry(list);
            doc.snapshots = texts;
            doc.indexed = Some(entries);
            doc.carry = Some(carry);
            return Ok(());
        }
    }
    let (texts, heads) = snapshots(walk)?.into_iter().unzip();
    doc.snapshots = texts;
    doc.heads = Some(heads);
    Ok(())
}

/// The `snapshots` array at `walk`: each snapshot's text and head.
fn snapshots<'a>(walk: &mut Walk<'a>) -> Result<Vec<(&'a str, SnapshotHead)>, CodecError> {
    walk.punctuation(b"[")?;
    let mut snapshots = Vec::new();
    let mut more = !walk.peek_is(b']');
    if !more {
        walk.punctuation(b"]")?;
    }
    while more {
        snapshots.push(walk.value::<SnapshotHead>()?);
        more = walk.punctuation(b",]")? == b',';
    }
    Ok(snapshots)
}

/// Parse `bytes` for a commit: the working metadata (every field, and of the snapshots
/// only the current one and those a ref names) and the [`History`] carrying the others.
pub fn split(bytes: &Bytes, file: Option<&str>) -> Result<(TableMetadata, History), CodecError> {
    // Checked with SIMD: a long history's file is a megabyte, read on every commit (std's
    // check, only on failure, says where it fails).
    let text = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => std::str::from_utf8(bytes).map_err(CodecError::library)?,
    };
    let mut doc = document(text, file)?;
    let working = working_ids(&doc)?;
    let entries: Vec<Entry> = match (&doc.heads, doc.indexed.take()) {
        (Some(heads), _) => heads.iter().map(SnapshotHead::entry).collect(),
        (None, indexed) => indexed.unwrap_or_default(),
    };
    let mut kept = Vec::new();
    let mut carried = Vec::new();
    for (raw, entry) in doc.snapshots.iter().zip(&entries) {
        if working.binary_search(&entry.id).is_ok() {
            kept.push(*raw);
        } else {
            carried.push(Carried {
                entry: entry.clone(),
                json: view(bytes, raw)?,
            });
        }
    }
    let (last_entry, log) = match doc.fields.get("snapshot-log") {
        Some(raw) if *raw != "null" => split_log(bytes, raw, doc.log.take())?,
        _ => (None, None),
    };
    let metadata = parse_working(&doc, &kept, last_entry)?;
    // Heads read with the entries are kept; else each snapshot's text, to read them from.
    let texts = match doc.heads {
        Some(_) => Vec::new(),
        None => doc
            .snapshots
            .iter()
            .map(|t| view(bytes, t))
            .collect::<Result<_, _>>()?,
    };
    let history = History {
        entries,
        heads: doc.heads.map(OnceLock::from).unwrap_or_default(),
        texts,
        carried,
        log,
        source: Some(bytes.clone()),
        index: doc.carry,
    };
    Ok((metadata, history))
}

/// How far back in time a log entry may be from the one before it (iceberg-rust's and
/// Java's check of a snapshot log's order).
const LOG_SKEW_MS: i64 = 60_000;

/// The snapshot log `raw` split into its last entry (for the working metadata) and the
/// entries before it, carried; `(None, None)` for a log of fewer than two entries, or one
/// whose last entry is not plain (its text is found from the end: the last `{`). Every
/// entry is read and the log's order checked as iceberg-rust checks it (also in a file
/// read by its snapshot index, whose checksum does not cover the log).
fn split_log<'a>(
    whole: &Bytes,
    text: &'a str,
    read: Option<Vec<LogEntry>>,
) -> Result<(Option<&'a str>, Option<CarriedLog>), CodecError> {
    let entries = match read.or_else(|| compact::log_entries(text)) {
        Some(entries) => entries,
        None => serde_json::from_str(text).map_err(CodecError::library)?,
    };
    if entries
        .windows(2)
        .any(|w| w[1].timestamp_ms.saturating_sub(w[0].timestamp_ms) < -LOG_SKEW_MS)
    {
        return Err("the snapshot log is out of order".into());
    }
    let (Some(last), true) = (entries.last(), entries.len() > 1) else {
        return Ok((None, None));
    };
    // `[` first, carried entries, `,` last entry, `]` (whitespace allowed between).
    let tail_at = text.rfind('{').unwrap_or(0);
    let tail = text[tail_at..].trim_end().trim_end_matches(']');
    let carried = text[..tail_at].trim_end().strip_suffix(',');
    let carried = carried.and_then(|c| c.trim_start().strip_prefix('['));
    let found: Option<LogEntry> = serde_json::from_str(tail).ok();
    match (carried, found) {
        (Some(carried), Some(f))
            if (f.snapshot_id, f.timestamp_ms) == (last.snapshot_id, last.timestamp_ms) =>
        {
            let log = CarriedLog {
                text: view(whole, carried.trim())?,
                next: (last.snapshot_id, last.timestamp_ms),
            };
            Ok((Some(tail), Some(log)))
        }
        _ => Ok((None, None)),
    }
}

/// `part` (text borrowed from `whole` by the parse) as a view of `whole`.
fn view(whole: &Bytes, part: &str) -> Result<Bytes, CodecError> {
    let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    match start.checked_add(part.len()) {
        Some(end) if end <= whole.len() => Ok(whole.slice(start..end)),
        _ => Err("a snapshot outside the document".into()),
    }
}

/// The snapshots the working metadata must hold: the current one and every ref's (the
/// spec's validation refuses metadata whose refs name a snapshot it does not hold).
fn working_ids(doc: &Document) -> Result<Vec<i64>, CodecError> {
    #[derive(Deserialize)]
    struct RefHead {
        #[serde(rename = "snapshot-id")]
        snapshot_id: i64,
    }
    // A few ids (the current snapshot and the refs'), looked up for every snapshot.
    let mut ids = Vec::new();
    if let Some(current) = doc.fields.get("current-snapshot-id") {
        let id: Option<i64> = serde_json::from_str(current).map_err(CodecError::library)?;
        ids.extend(id);
    }
    if let Some(refs) = doc.fields.get("refs") {
        let refs: HashMap<String, RefHead> =
            serde_json::from_str(refs).map_err(CodecError::library)?;
        ids.extend(refs.values().map(|r| r.snapshot_id));
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// iceberg-rust's parse of the document with only the `kept` snapshots and, when the
/// log is carried, only its `last_entry`.
fn parse_working(
    doc: &Document,
    kept: &[&str],
    last_entry: Option<&str>,
) -> Result<TableMetadata, CodecError> {
    let fields = doc.fields.values().map(|v| v.len());
    let sizes = fields.chain(kept.iter().map(|k| k.len())).map(|n| n + 32);
    let mut text = Vec::with_capacity(sizes.sum());
    text.push(b'{');
    for (key, value) in &doc.fields {
        serde_json::to_writer(&mut text, key).map_err(CodecError::library)?;
        text.push(b':');
        match last_entry.filter(|_| key == "snapshot-log") {
            Some(entry) => {
                text.push(b'[');
                text.extend_from_slice(entry.as_bytes());
                text.push(b']');
            }
            None if key == "properties" => without_index(&mut text, value, &doc.index_member)?,
            None => text.extend_from_slice(value.as_bytes()),
        }
        text.push(b',');
    }
    text.extend_from_slice(b"\"snapshots\":[");
    for (i, raw) in kept.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        text.extend_from_slice(raw.as_bytes());
    }
    text.extend_from_slice(b"]}");
    crate::spec::decode::parse_metadata(&text)
}

/// Table properties `raw` into `out` without the snapshot index: the working metadata
/// does not carry it (the encoder writes the next version's), and at 1,000 snapshots it
/// is most of the text iceberg-rust would parse.
/// `member`: where the index is in `raw`, with a comma next to it, when known.
fn without_index(
    out: &mut Vec<u8>,
    raw: &str,
    member: &Option<std::ops::Range<usize>>,
) -> Result<(), CodecError> {
    if let Some(cut) = member {
        out.extend_from_slice(&raw.as_bytes()[..cut.start]);
        out.extend_from_slice(&raw.as_bytes()[cut.end..]);
        return Ok(());
    }
    if !raw.contains(SNAPSHOT_INDEX) {
        out.extend_from_slice(raw.as_bytes());
        return Ok(());
    }
    let mut properties: BTreeMap<String, &RawValue> =
        serde_json::from_str(raw).map_err(CodecError::library)?;
    properties.remove(SNAPSHOT_INDEX);
    serde_json::to_writer(out, &properties).map_err(CodecError::library)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1",
    "location":"/t","last-sequence-number":3,"last-updated-ms":1700000000300,"last-column-id":1,
    "current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":true,"type":"long"}]}],
    "default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,
    "default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},
    "current-snapshot-id":3,"refs":{"main":{"snapshot-id":3,"type":"branch"},"old":{"snapshot-id":1,"type":"tag"}},
    "snapshots":[
      {"sequence-number":1,"snapshot-id":1,"timestamp-ms":1700000000100,"manifest-list":"/t/metadata/l1.avro","summary":{"operation":"append","XTABLE_METADATA":"{\"lastInstantSynced\":\"x\",\"sourceIdentifier\":\"1\"}","xlake.hudi.view":"read_optimized","added-data-files":"1"},"schema-id":0},
      {"sequence-number":2,"snapshot-id":2,"parent-snapshot-id":1,"timestamp-ms":1700000000200,"manifest-list":"/t/metadata/l2.avro","summary":{"operation":"append"},"schema-id":0},
      {"sequence-number":3,"snapshot-id":3,"parent-snapshot-id":2,"timestamp-ms":1700000000300,"manifest-list":"/t/metadata/l3.avro","summary":{"operation":"append"},"schema-id":0}],
    "snapshot-log":[{"timestamp-ms":1700000000100,"snapshot-id":1},{"timestamp-ms":1700000000200,"snapshot-id":2},{"timestamp-ms":1700000000300,"snapshot-id":3}],
    "metadata-log":[]}"#;

    #[test]
    fn split_parses_the_current_and_referenced_snapshots_and_carries_the_rest() {
        let (working, history) = split(&Bytes::from_static(DOC.as_bytes()), None).unwrap();
        let mut ids: Vec<i64> = working.snapshots().map(|s| s.snapshot_id()).collect();
        ids.sort();
        assert_eq!(ids, [1, 3]);
        assert_eq!(working.history().len(), 1, "the log's last entry only");
        let log = history.carried_log().unwrap();
        let entries = r#"{"timestamp-ms":1700000000100,"snapshot-id":1},{"timestamp-ms":1700000000200,"snapshot-id":2}"#;
        assert_eq!(&log.text[..], entries.as_bytes());
        assert_eq!(log.next, (3, 1700000000300));
        assert_eq!(history.heads().len(), 3);
        let carried: Vec<i64> = history.carried().iter().map(|c| c.entry.id).collect();
        assert_eq!(carried, [2]);
        let first = history.head(1).unwrap();
        assert_eq!(first.manifest_list.as_deref(), Some("/t/metadata/l1.avro"));
        assert_eq!(
            first.sync().unwrap().source_identifier.as_deref(),
            Some("1")
        );
        assert_eq!(first.notes.0.len(), 2, "added-data-files is not kept");
        assert_eq!(history.head(3).unwrap().parent_snapshot_id, Some(2));
    }

    #[test]
    fn heads_of_a_whole_parse_equal_those_of_a_split() {
        let whole = crate::spec::decode::parse_metadata(DOC.as_bytes()).unwrap();
        let mut a = History::of(&whole).heads().to_vec();
        let (_, split) = split(&Bytes::from_static(DOC.as_bytes()), None).unwrap();
        let mut b = split.heads().to_vec();
        a.sort_by_key(|h| h.snapshot_id);
        b.sort_by_key(|h| h.snapshot_id);
        assert_eq!(a, b);
    }

    /// Written back, a split document holds every snapshot in commit order (the carried
    /// one between two parsed ones here) and reads back as the same metadata.
    #[test]
    fn a_split_document_is_written_back_whole_and_in_order() {
        let (working, history) = split(&Bytes::from_static(DOC.as_bytes()), None).unwrap();
        let written = crate::spec::encode::metadata_json(&working, &history, None).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let ids: Vec<i64> = value["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot-id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        let original = crate::spec::decode::parse_metadata(DOC.as_bytes()).unwrap();
        assert_eq!(
            crate::spec::decode::parse_metadata(&written).unwrap(),
            original
        );
    }

    /// The log is carried only when its last entry can be told from the text: else it is
    /// parsed whole, as when it is too short to carry anything.
    #[test]
    fn a_log_is_carried_when_its_last_entry_is_plain() {
        let log_of = |log: &str| {
            let doc = DOC.replace(
                r#""snapshot-log":[{"timestamp-ms":1700000000100,"snapshot-id":1},{"timestamp-ms":1700000000200,"snapshot-id":2},{"timestamp-ms":1700000000300,"snapshot-id":3}]"#,
                &format!(r#""snapshot-log":{log}"#),
            );
            let (working, history) = split(&Bytes::from(doc.clone()), None).unwrap();
            let written = crate::spec::encode::metadata_json(&working, &history, None).unwrap();
            // Entries as iceberg-rust reads them (it keeps no other field).
            let entries = |v: &serde_json::Value| -> Vec<(i64, i64)> {
                let v = v.as_array().cloned().unwrap_or_default();
                let field = |e: &serde_json::Value, k: &str| e[k].as_i64().unwrap();
                v.iter()
                    .map(|e| (field(e, "snapshot-id"), field(e, "timestamp-ms")))
                    .collect()
            };
            let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
            let expected: serde_json::Value = serde_json::from_str(log).unwrap();
            assert_eq!(entries(&value["snapshot-log"]), entries(&expected), "{log}");
            (working.history().len(), history.carried_log().is_some())
        };
        let spaced = r#"[ {"timestamp-ms":1700000000200,"snapshot-id":2} ,
            { "timestamp-ms" : 1700000000300, "snapshot-id":3 } ]"#;
        assert_eq!(log_of(spaced), (1, true));
        let odd = r#"[{"timestamp-ms":1700000000200,"snapshot-id":2},{"snapshot-id":3,"x":{"y":1},"timestamp-ms":1700000000300}]"#;
        assert_eq!(log_of(odd), (2, false));
        let one = r#"[{"timestamp-ms":1700000000300,"snapshot-id":3}]"#;
        assert_eq!(log_of(one), (1, false));
        assert_eq!(log_of("[]"), (0, false));
        assert_eq!(log_of("null"), (0, false));
        // Out of order by more than a minute: refused as iceberg-rust refuses it.
        let doc = DOC.replace(
            r#""timestamp-ms":1700000000100,"snapshot-id":1"#,
            r#""timestamp-ms":1800000000100,"snapshot-id":1"#,
        );
        assert!(split(&Bytes::from(doc), None).is_err());
    }

    /// The one-pass read takes what serde_json takes: any whitespace between tokens, an
    /// escaped key, an empty list; each carried snapshot is the exact text it was read as.
    #[test]
    fn the_document_is_read_in_one_pass_whatever_its_spacing() {
        let value: serde_json::Value = serde_json::from_str(DOC).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        // Whitespace around every `:` and `,` outside strings.
        let (mut spaced, mut in_string, mut escaped) = (String::new(), false, false);
        for c in DOC.chars() {
            match c {
                ':' | ',' if !in_string => spaced.push_str(&format!(" \t{c}\r\n ")),
                _ => spaced.push(c),
            }
            in_string ^= c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
        }
        let escaped = DOC.replace(r#""location""#, r#""loc\u0061tion""#);
        let (working, history) = split(&Bytes::from_static(DOC.as_bytes()), None).unwrap();
        for text in [pretty, spaced, escaped, format!(" \n{DOC}\n ")] {
            let (w, h) = split(&Bytes::from(text.clone()), None).unwrap();
            assert_eq!(w, working, "{text}");
            assert_eq!(h.heads(), history.heads());
            let carried = &h.carried()[0].json;
            let expected: serde_json::Value = serde_json::from_slice(carried).unwrap();
            assert_eq!(expected["snapshot-id"], 2);
            assert!(text.contains(std::str::from_utf8(carried).unwrap()));
        }
        let doc = document(r#"{ "snapshots" : [ ] , "a" : [1, {"b": "}"}] }"#, None).unwrap();
        assert!(doc.snapshots.is_empty());
        assert_eq!(doc.fields["a"], r#"[1, {"b": "}"}]"#);
        assert!(document("{}", None).unwrap().fields.is_empty());
        assert!(document(r#"{"snapshots":[]}"#, None).is_ok());
        for bad in [
            "{}}",
            r#"{"snapshots":[]}}"#,
            r#"{"snapshots":[]]}"#,
            "{",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1,"a":1}"#,
            r#"{"snapshots":[],"snapshots":[]}"#,
        ] {
            assert!(document(bad, None).is_err(), "{bad}");
        }
        for bad in [
            format!("{DOC} x"),
            DOC[..DOC.len() - 1].to_string(),
            DOC.replacen(r#""snapshots":["#, r#""snapshots":[,"#, 1),
            DOC.replacen(r#""location":"/t","#, r#""location":"/t",,"#, 1),
        ] {
            assert!(split(&Bytes::from(bad.clone()), None).is_err(), "{bad}");
        }
    }

    /// Written back as parts, consecutive carried snapshots of at least 64 KiB in all are
    /// one view of the bytes read, not a copy; smaller carried text (the log here) is
    /// copied between views. The whole reads back as the same metadata.
    #[test]
    fn carried_text_is_written_as_views_of_what_was_read() {
        let untagged = DOC.replace(r#","old":{"snapshot-id":1,"type":"tag"}"#, "");
        let four = untagged.replace(
            r#"{"sequence-number":3,"#,
            r#"{"sequence-number":3,"snapshot-id":30,"timestamp-ms":1700000000250,"manifest-list":"/t/metadata/l30.avro","summary":{"operation":"append"},"schema-id":0},{"sequence-number":4,"#,
        );
        let four = four.replace(r#""last-sequence-number":3"#, r#""last-sequence-number":4"#);
        let padded = format!(
            r#""summary":{{"pad":"{}","operation":"append","XTABLE"#,
            "x".repeat(70_000)
        );
        let four = four.replacen(r#""summary":{"operation":"append","XTABLE"#, &padded, 1);
        // Compact, as written: the text between two snapshots is then the comma written.
        let compact: String = four.lines().map(str::trim_start).collect();
        let parts_of = |text: &str| {
            let bytes = Bytes::from(text.to_string());
            let (working, history) = split(&bytes, None).unwrap();
            assert_eq!(history.carried_count(), 3);
            let parts = crate::spec::encode::metadata_parts(&working, &history, None).unwrap();
            let within = |p: &Bytes| {
                let (at, from) = (p.as_ptr() as usize, bytes.as_ptr() as usize);
                at >= from && at + p.len() <= from + bytes.len()
            };
            let views: Vec<Bytes> = parts.iter().filter(|p| within(p)).cloned().collect();
            let written = parts.concat();
            assert_eq!(
                written,
                crate::spec::encode::metadata_json(&working, &history, None).unwrap()
            );
            let original = crate::spec::decode::parse_metadata(text.as_bytes()).unwrap();
            assert_eq!(
                crate::spec::decode::parse_metadata(&written).unwrap(),
                original
            );
            (parts.len(), views)
        };
        let (parts, views) = parts_of(&compact);
        assert_eq!(
            (parts, views.len()),
            (3, 1),
            "copied, the snapshots' run, copied"
        );
        let start = compact.find(r#"{"sequence-number":1"#).unwrap();
        let end = compact.find(r#",{"sequence-number":4"#).unwrap();
        assert_eq!(&views[0][..], &compact.as_bytes()[start..end]);
        // With whitespace between snapshots nothing joins: one buffer, as before.
        let (parts, views) = parts_of(&four);
        assert_eq!(
            (parts, views.len()),
            (3, 1),
            "the padded snapshot alone is a view"
        );
        let (parts, views) = parts_of(&compact.replace(&"x".repeat(70_000), "x"));
        assert_eq!((parts, views.len()), (1, 0));
    }

    /// Written for a file, a document holds a snapshot index naming it; read back as that
    /// file, its snapshots are taken by the index (no head read) and everything a commit
    /// uses is what reading every snapshot gives. Anywhere else, or where a snapshot is not
    /// where the index says, every snapshot is read as before.
    #[test]
    fn a_snapshot_index_is_read_only_in_the_file_it_names() {
        let (working, scanned) = split(&Bytes::from_static(DOC.as_bytes()), None).unwrap();
        let file = "v7.metadata.json";
        let written = crate::spec::encode::metadata_json(&working, &scanned, Some(file)).unwrap();
        let written = Bytes::from(written);
        let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let index = value["properties"][SNAPSHOT_INDEX].as_str().unwrap();
        assert!(index.starts_with("1;v7.metadata.json;"), "{index}");
        assert!(index.contains(";1,1,1700000000100,286,=1;2,2,"), "{index}");
        let (w, indexed) = split(&written, Some(file)).unwrap();
        assert!(
            !w.properties().contains_key(SNAPSHOT_INDEX),
            "not handed on"
        );
        assert!(indexed.heads.get().is_none(), "no head read");
        assert_eq!(indexed.entries(), scanned.entries());
        assert_eq!(
            indexed.entries()[0].mirrors,
            Some(Some(SourceId::from("1")))
        );
        let json =
            |h: &History| -> Vec<Bytes> { h.carried().iter().map(|c| c.json.clone()).collect() };
        assert_eq!(json(&indexed), json(&scanned));
        assert_eq!(indexed.heads(), scanned.heads(), "read when asked for");
        // Written again, the same bytes; the index is rewritten for the new file.
        let again = crate::spec::encode::metadata_json(&w, &indexed, Some(file)).unwrap();
        assert_eq!(again, written);
        let renamed = crate::spec::encode::metadata_json(&w, &indexed, Some("v8.metadata.json"));
        assert!(String::from_utf8(renamed.unwrap())
            .unwrap()
            .contains("1;v8.metadata.json;"));
        let unnamed = crate::spec::encode::metadata_json(&w, &indexed, None).unwrap();
        assert!(!String::from_utf8(unnamed).unwrap().contains(SNAPSHOT_INDEX));
        // Read as another file, or with a snapshot not where the index says: read whole.
        let (_, other) = split(&written, Some("v8.metadata.json")).unwrap();
        assert!(other.heads.get().is_some());
        let text = String::from_utf8(written.to_vec()).unwrap();
        let moved = text.replace(
            r#""manifest-list":"/t/metadata/l2.avro""#,
            r#""manifest-list":"/t/metadata/l22.avro""#,
        );
        let (_, shifted) = split(&Bytes::from(moved), Some(file)).unwrap();
        assert!(shifted.heads.get().is_some());
        assert_eq!(shifted.entries(), scanned.entries());
    }

    #[test]
    fn a_document_that_is_not_metadata_is_refused() {
        assert!(split(&Bytes::from_static(b"[1]"), None).is_err());
        let bad = br#"{"snapshots":[{"snapshot-id":"x"}]}"#;
        assert!(split(&Bytes::from_static(bad), None).is_err());
    }
}
