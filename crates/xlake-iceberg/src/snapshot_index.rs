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
//! **When it is trusted**: the index names the file it was written in. A metadata file is
//! never rewritten in place (each version is a put-if-absent of a new name), so an index
//! read from the file it names describes that file exactly. Another tool's next version
//! copies the table's properties, and with them an index naming the file before: that file
//! is read as before, snapshot by snapshot, and the next version xlake writes has a fresh
//! index. Even in the file it names, each snapshot's text is checked (an object, holding
//! `"snapshot-id":` and its id, one comma between snapshots, the list's end where the
//! index ends) before any of it is used; any difference falls back to the full read.
//!
//! Format (no JSON, so nothing in it is escaped in the file): `1;<file>` then, for each
//! snapshot in file order, `;<id>,<sequence number>,<timestamp ms>,<length>` followed by
//! `,-` for a record without a source identifier or `,=<identifier>` for one with, and by
//! nothing for a snapshot that records no source commit. An identifier holding `;` is not
//! indexed: the table then has no index, and commits read every snapshot.

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
    /// without an identifier.
    pub(crate) mirrors: Option<Option<String>>,
}

impl Entry {
    /// The order of snapshots in a `vN.metadata.json`: commit order.
    pub(crate) fn order(&self) -> [i64; 3] {
        [self.sequence_number, self.timestamp_ms, self.id]
    }
}

/// The index of `file` (a `vN.metadata.json`'s name) whose snapshots, in file order, are
/// `entries` with the length of their text; `None` when one cannot be written.
pub(crate) fn render<'a>(
    file: &str,
    entries: impl Iterator<Item = (&'a Entry, usize)>,
) -> Option<String> {
    use std::fmt::Write;
    if file.contains(';') {
        return None;
    }
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(FORMAT);
    out.push(';');
    out.push_str(file);
    for (e, len) in entries {
        let (id, seq, ts) = (e.id, e.sequence_number, e.timestamp_ms);
        write!(out, ";{id},{seq},{ts},{len}").ok()?;
        match &e.mirrors {
            None => {}
            Some(None) => out.push_str(",-"),
            Some(Some(id)) if id.contains(';') => return None,
            Some(Some(id)) => {
                out.push_str(",=");
                out.push_str(id);
            }
        }
    }
    Some(out)
}

/// The entries of index `text`, with each snapshot's length, if it names `file` and is
/// well formed.
pub(crate) fn parse(text: &str, file: &str) -> Option<Vec<(Entry, usize)>> {
    let mut items = text.split(';');
    if items.next()? != FORMAT || items.next()? != file {
        return None;
    }
    items.map(entry).collect()
}

fn entry(item: &str) -> Option<(Entry, usize)> {
    let mut fields = item.splitn(5, ',');
    let mut number = || fields.next()?.parse::<i64>().ok();
    let (id, sequence_number, timestamp_ms) = (number()?, number()?, number()?);
    let len = usize::try_from(number()?).ok()?;
    let mirrors = match fields.next() {
        None => None,
        Some("-") => Some(None),
        Some(other) => Some(Some(other.strip_prefix('=')?.to_string())),
    };
    let entry = Entry {
        id,
        sequence_number,
        timestamp_ms,
        mirrors,
    };
    Some((entry, len))
}

/// The text of each snapshot `index` describes, in the `snapshots` list that starts at
/// byte `at` of `text` (its `[`), and where the list ends (past its `]`); `None` unless
/// every snapshot is where the index says (see the module docs).
pub(crate) fn spans<'a>(
    text: &'a str,
    mut at: usize,
    index: &[(Entry, usize)],
) -> Option<(Vec<&'a str>, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::with_capacity(index.len());
    let mut expect = b'[';
    for (entry, len) in index {
        (bytes.get(at) == Some(&expect)).then_some(())?;
        let end = at.checked_add(1)?.checked_add(*len)?;
        let span = text.get(at + 1..end)?;
        let inner = span.strip_prefix('{')?.strip_suffix('}')?;
        holds_id(inner, entry.id).then_some(())?;
        spans.push(span);
        (at, expect) = (end, b',');
    }
    if index.is_empty() {
        (bytes.get(at) == Some(&b'[')).then_some(())?;
        at += 1;
    }
    (bytes.get(at) == Some(&b']')).then_some((spans, at + 1))
}

/// Whether an object's text (without its braces) has key `snapshot-id` with value `id`.
/// The key is found with its quotes, so neither `parent-snapshot-id` nor an escaped
/// `\"snapshot-id\"` in a summary value matches; whitespace around the `:` is allowed.
fn holds_id(inner: &str, id: i64) -> bool {
    const KEY: &str = "\"snapshot-id\"";
    let is_id = |after_key: &str| {
        let Some(value) = after_key.trim_start().strip_prefix(':') else {
            return false;
        };
        let value = value.trim_start();
        let end = value
            .find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(value.len());
        let number = value[end..].starts_with(['.', 'e', 'E']);
        !number && value[..end].parse() == Ok(id)
    };
    // xlake writes a snapshot's keys in alphabetical order and Java puts the id second:
    // either way it comes before the summary, and the search ends there.
    inner
        .match_indices(KEY)
        .any(|(at, _)| is_id(&inner[at + KEY.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, mirrors: Option<Option<&str>>) -> Entry {
        Entry {
            id,
            sequence_number: id,
            timestamp_ms: 1_700_000_000_000 + id,
            mirrors: mirrors.map(|m| m.map(str::to_string)),
        }
    }

    #[test]
    fn an_index_reads_back_as_written_in_the_file_it_names() {
        let entries = [
            entry(1, None),
            entry(2, Some(None)),
            entry(3, Some(Some("20240101000000000"))),
            entry(4, Some(Some("a,b=c"))),
        ];
        let lens = [10, 20, 30, 40];
        let text = render("v7.metadata.json", entries.iter().zip(lens)).unwrap();
        assert!(text.starts_with("1;v7.metadata.json;1,1,1700000000001,10;2,2,"));
        let read = parse(&text, "v7.metadata.json").unwrap();
        let expected: Vec<(Entry, usize)> = entries.into_iter().zip(lens).collect();
        assert_eq!(read, expected);
        assert_eq!(parse(&text, "v8.metadata.json"), None, "another file");
        assert_eq!(parse("2;v7.metadata.json", "v7.metadata.json"), None);
        assert_eq!(
            parse("1;v7.metadata.json", "v7.metadata.json"),
            Some(vec![])
        );
        for bad in [
            "1;v7.metadata.json;1,2,3",
            "1;v7.metadata.json;1,2,3,x",
            "1;v7.metadata.json;1,2,3,4,x",
        ] {
            assert_eq!(parse(bad, "v7.metadata.json"), None, "{bad}");
        }
        let semicolon = [entry(1, Some(Some("a;b")))];
        assert_eq!(render("v1.metadata.json", semicolon.iter().zip([1])), None);
    }

    #[test]
    fn spans_are_used_only_where_the_index_says() {
        let a = r#"{"snapshot-id":12,"x":"}"}"#;
        let b = r#"{"summary":{},"snapshot-id":3}"#;
        let text = format!(r#"{{"snapshots":[{a},{b}],"x":1}}"#);
        let at = text.find('[').unwrap();
        let index = vec![(entry(12, None), a.len()), (entry(3, None), b.len())];
        let (found, end) = spans(&text, at, &index).unwrap();
        assert_eq!(found, [a, b]);
        assert_eq!(&text[end..], r#","x":1}"#);
        let wrong = |index: Vec<(Entry, usize)>| spans(&text, at, &index).is_none();
        assert!(wrong(vec![(entry(12, None), a.len())]), "the list goes on");
        assert!(
            wrong(vec![(entry(1, None), a.len()), (entry(3, None), b.len())]),
            "a prefix of 12"
        );
        assert!(wrong(vec![
            (entry(3, None), a.len()),
            (entry(12, None), b.len())
        ]));
        assert!(wrong(vec![
            (entry(12, None), a.len() + 1),
            (entry(3, None), b.len())
        ]));
        assert!(wrong(vec![
            (entry(12, None), a.len()),
            (entry(3, None), usize::MAX)
        ]));
        assert!(wrong(vec![]));
        let spaced = r#"{ "parent-snapshot-id" : 1, "snapshot-id" : 12 }"#;
        assert!(holds_id(&spaced[1..spaced.len() - 1], 12));
        assert!(!holds_id(r#""parent-snapshot-id":12"#, 12));
        assert!(!holds_id(r#""s":"\"snapshot-id\":12""#, 12));
        assert!(!holds_id(r#""snapshot-id":12.5"#, 12));
        let empty = r#"{"snapshots":[]}"#;
        assert_eq!(spans(empty, 13, &[]), Some((vec![], 15)));
    }
}
