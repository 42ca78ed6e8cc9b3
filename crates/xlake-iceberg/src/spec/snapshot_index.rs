//! The snapshot index (issue 16): what a commit needs of every snapshot, kept in one
//! table property so a commit reads it instead of every snapshot's text.
//!
//! A commit needs of each old snapshot only its id, its place in commit order, the source
//! commit it records, and its text to carry into the next version. Reading those from the
//! snapshots themselves means scanning the whole `vN.metadata.json` and parsing every
//! `XTABLE_METADATA` (at 1,000 snapshots, most of what a commit costs more than at 10).
//! The index holds them, and each snapshot's length, in file order, in table property
//! [`SNAPSHOT_INDEX`], which xlake rewrites with every version it publishes.
//!
//! **It is a cache, never state of its own**: each entry was read from its snapshot's own
//! summary ([`SyncMetadata::identifier_in`](crate::summary::SyncMetadata::identifier_in)),
//! sync state stays in the snapshots' `XTABLE_METADATA`, and `check` reads those.
//!
//! **When it is trusted**: the index names the file it was written in, and carries a
//! CRC-32 of the `snapshots` list's text followed by its own entries. A metadata file is
//! never rewritten in place (each version is a put-if-absent of a new name), so an index
//! read from the file it names, whose checksum matches, describes that file as xlake
//! wrote it. Another tool's next version copies the table's properties, and with them an
//! index naming the file before: that file is read as before, snapshot by snapshot, and
//! the next version xlake writes has a fresh index. A file edited in place (its list or
//! the index) fails the checksum. The list's shape is checked too (each snapshot an
//! object, one comma between, the list's end where the index ends). Any difference falls
//! back to the full read. (The snapshot log is not covered: it is read and checked on
//! every commit.) An entry records what `SyncMetadata::identifier_of` reads of its
//! snapshot's summary: if that ever reads something else, `FORMAT` must change so that
//! no index written before is used.
//!
//! Format: `1;<file>;<checksum, 8 hex digits>` then, for each snapshot in file order,
//! `;<id>,<sequence number>,<timestamp ms>,<length>` followed by `,-` for a record without
//! a source identifier or `,=<identifier>` for one with, and by nothing for a snapshot
//! that records no source commit. For Delta versions and Hudi instants that is digits and
//! separators only (about 50-65 bytes a snapshot); an identifier holding `;`, or
//! anything JSON escapes, is not indexed: the table then has no index, and commits read
//! every snapshot. (The property is written and read as it is, unescaped.)

use std::sync::Arc;

use crate::compact::integer;

/// Table property holding the snapshot index.
pub const SNAPSHOT_INDEX: &str = "xlake.snapshot-index";

/// The format's version, first in the property.
const FORMAT: &str = "1";

/// What a commit needs of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: i64,
    pub(crate) sequence_number: i64,
    pub(crate) timestamp_ms: i64,
    /// The source commit it records: `None` for no record, `Some(None)` for a record
    /// without an identifier. Shared: a carried snapshot's entry is a copy of its entry
    /// in the history, and a thousand are copied a commit.
    pub(crate) mirrors: Option<Option<SourceId>>,
}

/// A source commit's identifier as an entry records it: a part of the index read, which
/// its thousand entries share (not a string each), or a text of its own.
#[derive(Clone)]
pub(crate) struct SourceId {
    text: Arc<str>,
    part: std::ops::Range<usize>,
}

impl From<&str> for SourceId {
    fn from(id: &str) -> Self {
        Self {
            text: Arc::from(id),
            part: 0..id.len(),
        }
    }
}

impl From<String> for SourceId {
    fn from(id: String) -> Self {
        Self::from(id.as_str())
    }
}

impl std::ops::Deref for SourceId {
    type Target = str;

    fn deref(&self) -> &str {
        self.text.get(self.part.clone()).unwrap_or_default()
    }
}

impl PartialEq for SourceId {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for SourceId {}

impl std::fmt::Debug for SourceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Entry {
    /// The order of snapshots in a `vN.metadata.json`: commit order.
    pub(crate) fn order(&self) -> [i64; 3] {
        [self.sequence_number, self.timestamp_ms, self.id]
    }
}

/// An index as read: each snapshot's entry and the length of its text, in file order;
/// its checksum, and the CRC of the entries' text (what the checksum covers after the
/// list).
#[derive(Debug, Clone)]
pub(crate) struct Index {
    pub(crate) entries: Vec<Entry>,
    lens: Vec<usize>,
    checksum: u32,
    tail: crc32fast::Hasher,
    /// The entries' text, for the next version's index ([`Carry`]); the entries'
    /// identifiers are parts of it.
    text: Arc<str>,
}

/// What the next version's index takes from the one read, when the next version's list
/// starts with the snapshots read, unchanged ([`render_after`]): the CRC state of the
/// list read up to its `]`, and the entries' text and its CRC. (At 1,000 snapshots,
/// rendering every entry and a CRC of the megabyte list cost more than the rest of the
/// index.)
#[derive(Debug, Clone)]
pub(crate) struct Carry {
    list: crc32fast::Hasher,
    tail: crc32fast::Hasher,
    text: Arc<str>,
    /// How many snapshots the list read holds.
    pub(crate) count: usize,
}

/// The CRC-32 state after a `snapshots` list whose snapshots' texts are `texts`, as
/// written: `[`, the texts with a comma between, `]`. The index's checksum is this
/// state continued over the index's own entries (see [`render`]), so it binds both.
pub(crate) fn list_crc<'a>(texts: impl Iterator<Item = &'a [u8]>) -> crc32fast::Hasher {
    let mut crc = crc32fast::Hasher::new();
    crc.update(b"[");
    for (i, text) in texts.enumerate() {
        if i > 0 {
            crc.update(b",");
        }
        crc.update(text);
    }
    crc.update(b"]");
    crc
}

/// The index of `file` (a `vN.metadata.json`'s name) whose snapshots, in file order, are
/// `entries` with the length of their text, and whose list's text left CRC state `list`
/// ([`list_crc`]); `None` when one cannot be written.
pub(crate) fn render<'a>(
    file: &str,
    mut list: crc32fast::Hasher,
    entries: impl Iterator<Item = (&'a Entry, usize)>,
) -> Option<String> {
    if unindexable(file) {
        return None;
    }
    let mut out = String::with_capacity(64 * entries.size_hint().0);
    for (e, len) in entries {
        push_entry(&mut out, e, len)?;
    }
    list.update(out.as_bytes());
    Some(format!("{FORMAT};{file};{:08x}{out}", list.finalize()))
}

/// [`render`] of a list that starts with the `carry.count` snapshots read, unchanged (as
/// texts and entries), followed by those whose texts and entries are `more`: the same
/// text, from the index read and `more` alone.
pub(crate) fn render_after<'a>(
    file: &str,
    carry: &Carry,
    more: impl Iterator<Item = (&'a [u8], &'a Entry, usize)>,
) -> Option<String> {
    if unindexable(file) {
        return None;
    }
    let mut list = carry.list.clone();
    let mut out = String::new();
    for (i, (text, e, len)) in more.enumerate() {
        if carry.count + i > 0 {
            list.update(b",");
        }
        list.update(text);
        push_entry(&mut out, e, len)?;
    }
    list.update(b"]");
    list.combine(&carry.tail);
    list.update(out.as_bytes());
    let checksum = list.finalize();
    Some(format!("{FORMAT};{file};{checksum:08x}{}{out}", carry.text))
}

/// Entry `e` of a snapshot whose text is `len` bytes, after `out`; `None` when its
/// identifier cannot be indexed.
fn push_entry(out: &mut String, e: &Entry, len: usize) -> Option<()> {
    // Numbers by itoa: `write!` costs several times more, on a thousand entries a commit.
    let mut number = itoa::Buffer::new();
    out.push(';');
    out.push_str(number.format(e.id));
    for n in [e.sequence_number, e.timestamp_ms] {
        out.push(',');
        out.push_str(number.format(n));
    }
    out.push(',');
    out.push_str(number.format(len));
    match &e.mirrors {
        None => {}
        Some(None) => out.push_str(",-"),
        Some(Some(id)) if unindexable(id) => return None,
        Some(Some(id)) => {
            out.push_str(",=");
            out.push_str(id);
        }
    }
    Some(())
}

/// Whether `text` holds the index's separator `;`, or something JSON escapes (a `"`, a
/// `\\` or a control character): the index is written into the properties as it is,
/// and read in place.
fn unindexable(text: &str) -> bool {
    // Folded, not short-circuited: vectorized, for a thousand identifiers a commit.
    text.bytes().fold(false, |found, b| {
        found | (b == b';') | (b == b'"') | (b == b'\\') | (b < 0x20)
    })
}

/// The index `text`, if it names `file` and is well formed.
pub(crate) fn parse(text: &str, file: &str) -> Option<Index> {
    let mut head = text.splitn(4, ';');
    if head.next()? != FORMAT || head.next()? != file {
        return None;
    }
    let checksum = u32::from_str_radix(head.next()?, 16).ok()?;
    // The entries' text: empty, or each entry after a `;`.
    let rest = head
        .next()
        .map_or("", |rest| &text[text.len() - rest.len() - 1..]);
    // Read in one pass (a thousand entries a commit); entries are 50-65 bytes.
    let room = rest.len() / 48;
    let (mut entries, mut lens) = (Vec::with_capacity(room), Vec::with_capacity(room));
    let shared: Arc<str> = Arc::from(rest);
    let mut next = rest;
    while let Some(item) = next.strip_prefix(';') {
        let (entry, len, after) = entry(item, &shared, rest)?;
        entries.push(entry);
        lens.push(len);
        next = after;
    }
    if !next.is_empty() {
        return None;
    }
    let mut tail = crc32fast::Hasher::new();
    tail.update(rest.as_bytes());
    Some(Index {
        entries,
        lens,
        checksum,
        tail,
        text: shared,
    })
}

/// The entry `text` starts with, its length, and what follows it (the next entry's `;`,
/// or nothing): four numbers, each but the last followed by a comma, then the record.
/// `text` is part of the entries' text `all`, whose copy `shared` the record's
/// identifier is taken from.
fn entry<'a>(text: &'a str, shared: &Arc<str>, all: &str) -> Option<(Entry, usize, &'a str)> {
    let (id, rest) = integer(text)?;
    let (sequence_number, rest) = integer(comma(rest)?)?;
    let (timestamp_ms, rest) = integer(comma(rest)?)?;
    let (len, rest) = integer(comma(rest)?)?;
    let len = usize::try_from(len).ok()?;
    let (mirrors, rest) = match rest.as_bytes().first() {
        None | Some(b';') => (None, rest),
        Some(b',') => {
            let end = memchr::memchr(b';', rest.as_bytes()).unwrap_or(rest.len());
            let record = match &rest[1..end] {
                "-" => None,
                other => {
                    let id = other.strip_prefix('=')?;
                    let start = id.as_ptr() as usize - all.as_ptr() as usize;
                    let part = start..start + id.len();
                    Some(SourceId {
                        text: Arc::clone(shared),
                        part,
                    })
                }
            };
            (Some(record), &rest[end..])
        }
        Some(_) => return None,
    };
    let entry = Entry {
        id,
        sequence_number,
        timestamp_ms,
        mirrors,
    };
    Some((entry, len, rest))
}

/// `rest` after the comma it starts with.
fn comma(rest: &str) -> Option<&str> {
    rest.strip_prefix(',')
}

/// The text of each snapshot `index` describes, in the `snapshots` list that starts at
/// byte `at` of `text` (its `[`), where the list ends (past its `]`), and the CRC state of
/// the list's text before its `]` ([`Index::into_carry`]); `None` unless the list's text
/// has the index's checksum and every snapshot is where the index says (see the module
/// docs).
pub(crate) fn spans<'a>(
    text: &'a str,
    start: usize,
    index: &Index,
) -> Option<(Vec<&'a str>, usize, crc32fast::Hasher)> {
    let (bytes, mut at) = (text.as_bytes(), start);
    let mut spans = Vec::with_capacity(index.lens.len());
    let mut expect = b'[';
    for len in &index.lens {
        (bytes.get(at) == Some(&expect)).then_some(())?;
        let end = at.checked_add(1)?.checked_add(*len)?;
        let span = text.get(at + 1..end)?;
        (span.starts_with('{') && span.ends_with('}')).then_some(())?;
        spans.push(span);
        (at, expect) = (end, b',');
    }
    if index.lens.is_empty() {
        (bytes.get(at) == Some(&b'[')).then_some(())?;
        at += 1;
    }
    (bytes.get(at) == Some(&b']')).then_some(())?;
    let mut list = crc32fast::Hasher::new();
    list.update(&bytes[start..at]);
    let mut crc = list.clone();
    crc.update(b"]");
    crc.combine(&index.tail);
    (crc.finalize() == index.checksum).then_some((spans, at + 1, list))
}

impl Index {
    /// Its entries, and what the next version's index takes from it, given the CRC state
    /// `list` of the list it describes up to its `]` ([`spans`]).
    pub(crate) fn into_carry(self, list: crc32fast::Hasher) -> (Vec<Entry>, Carry) {
        let carry = Carry {
            list,
            tail: self.tail,
            text: self.text,
            count: self.entries.len(),
        };
        (self.entries, carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, mirrors: Option<Option<&str>>) -> Entry {
        Entry {
            id,
            sequence_number: id,
            timestamp_ms: 1_700_000_000_000 + id,
            mirrors: mirrors.map(|m| m.map(SourceId::from)),
        }
    }

    #[test]
    fn an_index_reads_back_as_written_in_the_file_it_names() {
        let entries = [
            entry(1, None),
            entry(2, Some(None)),
            entry(3, Some(Some("20240101000000000"))),
            entry(4, Some(Some("a,b=c"))),
            entry(-5, Some(Some(""))),
            entry(i64::MIN, None),
            entry(i64::MAX - 1_700_000_000_000, Some(None)),
        ];
        let lens = [10, 20, 30, 40, 50, 0, usize::MAX >> 1];
        let crc = crc32fast::Hasher::new();
        let text = render("v7.metadata.json", crc.clone(), entries.iter().zip(lens)).unwrap();
        assert!(text.starts_with("1;v7.metadata.json;"), "{text}");
        assert!(text.contains(";1,1,1700000000001,10;2,2,1700000000002,20,-;3,3,1700000000003,30,=20240101000000000;4,4,1700000000004,40,=a,b=c;-5,-5,1699999999995,50,="), "{text}");
        let read = parse(&text, "v7.metadata.json").unwrap();
        let expected: Vec<(Entry, usize)> = entries.into_iter().zip(lens).collect();
        let read: Vec<(Entry, usize)> = read.entries.into_iter().zip(read.lens).collect();
        assert_eq!(read, expected);
        assert!(parse(&text, "v8.metadata.json").is_none(), "another file");
        let empty = render("v7.metadata.json", crc.clone(), std::iter::empty()).unwrap();
        assert!(parse(&empty, "v7.metadata.json")
            .unwrap()
            .entries
            .is_empty());
        for bad in [
            "2;v7.metadata.json;0",
            "1;v7.metadata.json",
            "1;v7.metadata.json;x",
            "1;v7.metadata.json;0;",
            "1;v7.metadata.json;0;1,2,3",
            "1;v7.metadata.json;0;1,2,3,x",
            "1;v7.metadata.json;0;1,2,3,4,x",
            "1;v7.metadata.json;0;1,2,3,4,",
            "1;v7.metadata.json;0;1,2,-,4",
            "1;v7.metadata.json;0;1,2,3x,4",
            "1;v7.metadata.json;0;1,2,3,-4",
            "1;v7.metadata.json;0;99999999999999999999,2,3,4",
        ] {
            assert!(parse(bad, "v7.metadata.json").is_none(), "{bad}");
        }
        for id in ["a;b", "a\"b", "a\\b", "a\nb"] {
            let unindexed = [entry(1, Some(Some(id)))];
            let crc = crc.clone();
            assert_eq!(
                render("v1.metadata.json", crc, unindexed.iter().zip([1])),
                None
            );
        }
        let crc = crc32fast::Hasher::new();
        assert_eq!(render("v\"1.json", crc, std::iter::empty()), None);
    }

    /// Spans are taken where the index says, and only when the checksum binds the list's
    /// text and the index's entries: a changed list or a changed entry is not used.
    #[test]
    fn spans_are_used_only_where_the_index_says() {
        let a = r#"{"snapshot-id":12,"x":"}"}"#;
        let b = r#"{"summary":{},"snapshot-id":3}"#;
        let text = format!(r#"{{"snapshots":[{a},{b}],"x":1}}"#);
        let at = text.find('[').unwrap();
        let crc = list_crc([a, b].iter().map(|t| t.as_bytes()));
        let written = |entries: &[(Entry, usize)]| {
            render("f", crc.clone(), entries.iter().map(|(e, n)| (e, *n))).unwrap()
        };
        let index = |entries: &[(Entry, usize)]| parse(&written(entries), "f").unwrap();
        let both = [(entry(12, None), a.len()), (entry(3, None), b.len())];
        let (found, end, _) = spans(&text, at, &index(&both)).unwrap();
        assert_eq!(found, [a, b]);
        assert_eq!(&text[end..], r#","x":1}"#);
        // Entries other than those the checksum was made with (edited in the file).
        let forged = |entries: &[(Entry, usize)]| {
            let (original, other) = (written(&both), written(entries));
            let head = |t: &str| t.len() - t.splitn(4, ';').nth(3).map_or(0, |e| e.len() + 1);
            let forged = format!("{}{}", &original[..head(&original)], &other[head(&other)..]);
            spans(&text, at, &parse(&forged, "f").unwrap()).is_none()
        };
        let merged = a.len() + 1 + b.len();
        assert!(forged(&[(entry(12, None), merged)]), "two as one");
        assert!(forged(&[
            (entry(12, None), a.len()),
            (entry(3, Some(None)), b.len())
        ]));
        assert!(!forged(&both), "the original");
        // Entries written with the list's checksum that do not fit it (a writer's mistake).
        let wrong = |entries: &[(Entry, usize)]| spans(&text, at, &index(entries)).is_none();
        assert!(wrong(&[(entry(12, None), a.len())]), "the list goes on");
        assert!(wrong(&[
            (entry(12, None), a.len() + 1),
            (entry(3, None), b.len())
        ]));
        assert!(wrong(&[
            (entry(12, None), a.len()),
            (entry(3, None), i64::MAX as usize)
        ]));
        assert!(wrong(&[]));
        let changed = text.replace(r#""x":"}""#, r#""x":"]""#);
        assert!(spans(&changed, at, &index(&both)).is_none(), "another list");
        let empty = r#"{"snapshots":[]}"#;
        let crc = list_crc(std::iter::empty());
        let none = parse(&render("f", crc, std::iter::empty()).unwrap(), "f").unwrap();
        assert_eq!(
            spans(empty, 13, &none).map(|(s, end, _)| (s, end)),
            Some((vec![], 15))
        );
    }

    /// An index rendered after one read (the list read, then more snapshots) is the one
    /// rendered whole, for any number read and any number more.
    #[test]
    fn an_index_carried_from_the_one_read_is_the_one_rendered_whole() {
        let texts: Vec<String> = (0..5)
            .map(|i| format!(r#"{{"snapshot-id":{i},"pad":"{}"}}"#, "x".repeat(i * 7)))
            .collect();
        let entries: Vec<Entry> = (0..5)
            .map(|i| entry(i, [None, Some(None), Some(Some("2024"))][i as usize % 3]))
            .collect();
        let indexed = |n: usize| entries[..n].iter().zip(texts[..n].iter().map(String::len));
        let whole = |n: usize| {
            let crc = list_crc(texts[..n].iter().map(|t| t.as_bytes()));
            render("v2.metadata.json", crc, indexed(n)).unwrap()
        };
        for read in 0..=5 {
            let doc = format!(r#"{{"snapshots":[{}]}}"#, texts[..read].join(","));
            let index = parse(&whole(read), "v2.metadata.json").unwrap();
            let (_, _, list) = spans(&doc, doc.find('[').unwrap(), &index).unwrap();
            let (read_entries, carry) = index.into_carry(list);
            assert_eq!(read_entries, entries[..read]);
            for total in read..=5 {
                let more =
                    (read..total).map(|i| (texts[i].as_bytes(), &entries[i], texts[i].len()));
                let carried = render_after("v3.metadata.json", &carry, more).unwrap();
                let expected = whole(total).replace("v2.metadata.json", "v3.metadata.json");
                assert_eq!(carried, expected, "{read} read, {total} written");
            }
        }
    }
}
