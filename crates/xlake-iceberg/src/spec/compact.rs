//! Readers of the few parts of a `vN.metadata.json` that grow with history, in the one
//! compact shape Iceberg's writers give them (no whitespace): the snapshot log, the table
//! properties (which hold the snapshot index), and JSON integers. Each gives what
//! serde_json would read from the same text, or `None`, and the caller then lets
//! serde_json read it (and say what is wrong with it); of the properties' other values
//! only the extent is read, and their escapes are left to the parse the caller hands them
//! to. A commit after 1,000 snapshots reads each part once, by hand, instead of two or
//! three times by serde.

use std::ops::Range;

use serde::Deserialize;

/// A JSON integer at the start of `text` as serde_json reads one into an `i64` (an
/// optional `-`, then digits with no leading zero; not `-0`, a float to serde_json), and
/// what follows it; `None` for anything else. (itoa writes the snapshot index's numbers
/// so, and Iceberg's writers the log's.)
pub(crate) fn integer(text: &str) -> Option<(i64, &str)> {
    let bytes = text.as_bytes();
    let negative = bytes.first() == Some(&b'-');
    let start = usize::from(negative);
    // One pass, eight digits at a time while there are eight (ids have 19, times 13);
    // 19 digits or fewer fit a u64 unchecked, the sign and i64's range after.
    let (mut end, mut magnitude) = (start, 0u64);
    while end - start < 16 {
        let Some(word) = bytes.get(end..end + 8).and_then(|w| w.try_into().ok()) else {
            break;
        };
        let word = u64::from_le_bytes(word);
        if !eight_digits(word) {
            break;
        }
        magnitude = magnitude * 100_000_000 + eight_digits_value(word);
        end += 8;
    }
    while let Some(d) = bytes.get(end).filter(|b| b.is_ascii_digit()) {
        if end - start == 19 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(d - b'0');
        end += 1;
    }
    let digits = end - start;
    if digits == 0 || (digits > 1 && bytes[start] == b'0') {
        return None;
    }
    let n = match negative {
        false => i64::try_from(magnitude).ok()?,
        true if magnitude == 0 => return None,
        true => 0i64.checked_sub_unsigned(magnitude)?,
    };
    Some((n, &text[end..]))
}

/// Whether the eight bytes of `word` (read little-endian) are all ASCII digits: each is
/// 0x3_ and stays so with 6 added (simdjson's test).
fn eight_digits(word: u64) -> bool {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let sum = word.wrapping_add(0x0606_0606_0606_0606);
    ((word & HIGH) | ((sum & HIGH) >> 4)) == 0x3333_3333_3333_3333
}

/// The number eight ASCII digits (`word`, read little-endian, first digit lowest) write:
/// pairs, then quads, then the eight combined by multiplication (simdjson's parse).
fn eight_digits_value(word: u64) -> u64 {
    let word = ((word & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561)) >> 8;
    let word = ((word & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601)) >> 16;
    ((word & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001)) >> 32
}

/// A `snapshot-log` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) struct LogEntry {
    #[serde(rename = "snapshot-id")]
    pub(crate) snapshot_id: i64,
    #[serde(rename = "timestamp-ms")]
    pub(crate) timestamp_ms: i64,
}

/// The snapshot log at the start of `text` when each entry has the one shape Iceberg's
/// writers give it (`{"snapshot-id":N,"timestamp-ms":M}`, or the fields the other way
/// round, no spaces, integers as serde_json reads them): its entries and what follows
/// the list. `None` for any other text.
pub(crate) fn log_at(text: &str) -> Option<(Vec<LogEntry>, &str)> {
    let mut rest = text.strip_prefix('[')?;
    if let Some(after) = rest.strip_prefix(']') {
        return Some((Vec::new(), after));
    }
    // Room for a guess, bounded: an entry is 50-65 bytes, and in Iceberg writers' key
    // order only the metadata log follows the snapshot log.
    let mut entries = Vec::with_capacity(text.len().min(1 << 18) / 64);
    loop {
        let (entry, after) = log_entry(rest)?;
        entries.push(entry);
        match after.as_bytes().first()? {
            b',' => rest = &after[1..],
            b']' => return Some((entries, &after[1..])),
            _ => return None,
        }
    }
}

/// [`log_at`] of a whole text: `None` also when anything follows the list.
pub(crate) fn log_entries(text: &str) -> Option<Vec<LogEntry>> {
    let (entries, rest) = log_at(text)?;
    rest.is_empty().then_some(entries)
}

/// One snapshot log entry at the start of `text` (see [`log_at`]), and what follows.
fn log_entry(text: &str) -> Option<(LogEntry, &str)> {
    const ID: &str = "\"snapshot-id\":";
    const TIME: &str = "\"timestamp-ms\":";
    let rest = text.strip_prefix('{')?;
    let id_first = rest.starts_with(ID);
    let (first, second) = if id_first { (ID, TIME) } else { (TIME, ID) };
    let (a, rest) = integer(rest.strip_prefix(first)?)?;
    let (b, rest) = integer(rest.strip_prefix(',')?.strip_prefix(second)?)?;
    let rest = rest.strip_prefix('}')?;
    let (snapshot_id, timestamp_ms) = if id_first { (a, b) } else { (b, a) };
    let entry = LogEntry {
        snapshot_id,
        timestamp_ms,
    };
    Some((entry, rest))
}

/// A JSON object of strings read by [`string_object`]: byte ranges in the text read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StringObject {
    /// The length of the object's text, `{` to `}`.
    pub(crate) len: usize,
    /// The member asked for: its value's text (inside the quotes), and the member's text
    /// with one comma next to it (the one after it, else the one before), which is the
    /// object without it when cut out.
    pub(crate) member: Option<(Range<usize>, Range<usize>)>,
}

/// The object at the start of `text` when it is compact, its keys are strings with
/// nothing to unescape and its values strings (`{"k":"v","k2":"v2"}`, as Iceberg's
/// writers give table properties), and member `key`'s value, if any, has nothing to
/// unescape and no control character: its length and the ranges of that member. `None`
/// for any other text (whitespace, a value that is not a string, an escaped key, which
/// could spell `key`, `key` twice, its value escaped), which serde_json then reads. The
/// other values are only skipped, `\` and the byte after it at a time: the caller
/// hands them to a parse that reads their escapes (and refuses bad ones).
pub(crate) fn string_object(text: &str, key: &str) -> Option<StringObject> {
    let bytes = text.as_bytes();
    (bytes.first() == Some(&b'{')).then_some(())?;
    let mut at = 1;
    let mut member = None;
    if bytes.get(at) == Some(&b'}') {
        return Some(StringObject { len: 2, member });
    }
    loop {
        let start = at;
        let (name, plain_name) = string(bytes, at)?;
        (plain_name && bytes.get(name.end + 1) == Some(&b':')).then_some(())?;
        let (value, plain_value) = string(bytes, name.end + 2)?;
        at = value.end + 1;
        let last = match bytes.get(at)? {
            b',' => false,
            b'}' => true,
            _ => return None,
        };
        if &text[name] == key {
            plain(&bytes[value.clone()], plain_value).then_some(())?;
            // The comma after the member, else (the last member) the one before it.
            let cut = match (last, start) {
                (false, _) => start..at + 1,
                (true, 1) => start..at,
                (true, _) => start - 1..at,
            };
            if member.replace((value, cut)).is_some() {
                return None;
            }
        }
        at += 1;
        if last {
            return Some(StringObject { len: at, member });
        }
    }
}

/// The contents of the string whose `"` is at byte `at` (up to the next `"` that no `\\`
/// escapes), and whether it has no escape.
fn string(bytes: &[u8], at: usize) -> Option<(Range<usize>, bool)> {
    (bytes.get(at) == Some(&b'"')).then_some(())?;
    let start = at + 1;
    let (mut from, mut unescaped) = (start, true);
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[found] == b'"' {
            return Some((start..found, unescaped));
        }
        (from, unescaped) = (found + 2, false);
    }
}

/// Whether string contents `bytes` read with nothing to unescape (`unescaped`) hold no
/// control character either: what serde_json then reads is `bytes` as they are.
fn plain(bytes: &[u8], unescaped: bool) -> bool {
    // Folded, not short-circuited: the compiler vectorizes it (the snapshot index is
    // 60 KiB at 1,000 snapshots).
    unescaped && bytes.iter().fold(true, |ok, b| ok & (*b >= 0x20))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// An integer is read as serde_json reads it into an `i64`, or not at all.
    #[test]
    fn integers_are_read_as_serde_reads_them() {
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "00",
            "01",
            "-",
            "",
            "1",
            "-1",
            "12345678",
            "123456789",
            "1234567890123456",
            "12345678901234567",
            "1234567890123456789",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "18446744073709551615",
            "1700000000000",
            "1234567a",
            "12345678a",
            "1234:678",
            "12/45678",
            "1.5",
            "1e3",
            "0x10",
        ]
        .map(String::from)
        .to_vec();
        // Every length, and a non-digit at every place of every length.
        for len in 1..=21 {
            let digits: String = (0..len).map(|i| char::from(b'1' + (i % 9) as u8)).collect();
            for (at, bad) in (0..len).flat_map(|at| [(at, '/'), (at, ':'), (at, ' ')]) {
                let mut t = digits.clone().into_bytes();
                t[at] = bad as u8;
                texts.push(String::from_utf8(t).unwrap());
            }
            texts.push(format!("-{digits}"));
            texts.push(digits);
        }
        // Each followed by more text, so that words of eight bytes hold the number's end.
        let followed: Vec<String> = texts
            .iter()
            .map(|t| format!(r#"{t},"x":123456789}}"#))
            .collect();
        texts.extend(followed);
        for text in &texts {
            let read = integer(text);
            // serde_json's reading of the number the text starts with, and what follows.
            let mut stream = serde_json::Deserializer::from_str(text).into_iter::<i64>();
            let serde = match stream.next() {
                Some(Ok(n)) => Some((n, &text[stream.byte_offset()..])),
                _ => None,
            };
            // serde reads "1.5" as a float (refused as an i64), "1e3" too, "0x10" as 0
            // then garbage; `integer` stops where its grammar stops.
            match (read, serde) {
                (Some(r), Some(s)) => assert_eq!(r, s, "{text}"),
                (None, None) => {}
                (Some((_, rest)), None) => assert!(
                    rest.starts_with([' ', '/', ':', 'a', '.', 'e', 'x']),
                    "{text}: {read:?}"
                ),
                // serde skips leading whitespace; a value read here starts at its first byte.
                (None, Some(_)) => assert!(text.starts_with(' '), "{text}: serde reads {serde:?}"),
            }
        }
    }

    /// The snapshot log's fast read gives what serde gives, or leaves the text to it.
    #[test]
    fn a_snapshot_log_is_read_fast_only_as_serde_reads_it() {
        let fast = [
            "[]",
            r#"[{"snapshot-id":1,"timestamp-ms":2}]"#,
            r#"[{"timestamp-ms":2,"snapshot-id":-1},{"snapshot-id":0,"timestamp-ms":0}]"#,
            r#"[{"snapshot-id":9223372036854775807,"timestamp-ms":-9223372036854775808}]"#,
        ];
        for text in fast {
            let read = log_entries(text);
            let serde = serde_json::from_str::<Vec<LogEntry>>(text).ok();
            assert!(read.is_some(), "{text}");
            assert_eq!(read, serde, "{text}");
            let followed = format!("{text},\"x\":1}}");
            let (entries, rest) = log_at(&followed).unwrap();
            assert_eq!((Some(entries), rest), (serde, ",\"x\":1}"));
        }
        let left_to_serde = [
            "[ ]",
            r#"[{"snapshot-id": 1,"timestamp-ms":2}]"#,
            r#"[{"snapshot-id":1,"timestamp-ms":2},]"#,
            r#"[{"snapshot-id":1,"timestamp-ms":2}] "#,
            r#"[{"snapshot-id":01,"timestamp-ms":2}]"#,
            r#"[{"snapshot-id":1,"timestamp-ms":-0}]"#,
            r#"[{"snapshot-id":1.0,"timestamp-ms":2}]"#,
            r#"[{"snapshot-id":1,"snapshot-id":2}]"#,
            r#"[{"snapshot-id":1,"timestamp-ms":2,"x":3}]"#,
            r#"[{"snapshot-id":9223372036854775808,"timestamp-ms":2}]"#,
            r#"[{"snapshot-id":-,"timestamp-ms":2}]"#,
            r#"[{"snapshot-id":1,"timestamp-ms":2}"#,
        ];
        for text in left_to_serde {
            assert!(log_entries(text).is_none(), "{text}");
        }
    }

    /// What a string object's fast read finds is what serde reads, and cutting the member
    /// out leaves the object without it; anything else is left to serde.
    #[test]
    fn a_string_object_is_read_fast_only_as_serde_reads_it() {
        let fast = [
            "{}",
            r#"{"k":"v"}"#,
            r#"{"k":"v","a":"b"}"#,
            r#"{"a":"b","k":"v"}"#,
            r#"{"a":"b","k":"","c":"d"}"#,
            r#"{"a":"b","c":"d"}"#,
            r#"{"a":"é;1,2","k":"1;v1.metadata.json;0badcafe;1,1,2,3,=x"}"#,
            r#"{"m":"[{\"field-id\":1,\"names\":[\"a\\\\\"]}]","k":"v","n":"\\"}"#,
        ];
        for text in fast {
            let read = string_object(&format!("{text},\"next\":1}}"), "k").unwrap();
            assert_eq!(read.len, text.len(), "{text}");
            let serde: BTreeMap<String, String> = serde_json::from_str(text).unwrap();
            let value = read.member.clone().map(|(v, _)| &text[v]);
            assert_eq!(value, serde.get("k").map(String::as_str), "{text}");
            if let Some((_, cut)) = read.member {
                let without = format!("{}{}", &text[..cut.start], &text[cut.end..]);
                let mut expected = serde.clone();
                expected.remove("k");
                assert_eq!(
                    serde_json::from_str::<BTreeMap<_, _>>(&without).unwrap(),
                    expected
                );
            }
        }
        let left_to_serde = [
            "{ }",
            r#"{"k": "v"}"#,
            r#"{"k":"v" }"#,
            r#"{"k":"v",}"#,
            r#"{"k":"a\"b"}"#,
            r#"{"k":"a\\b"}"#,
            "{\"k\":\"a\tb\"}",
            r#"{"a":"b\"}"#,
            r#"{"\u006b":"v","k":"w"}"#,
            r#"{"k\u0041":"v"}"#,
            r#"{"k":1}"#,
            r#"{"k":null}"#,
            r#"{"k":"v","k":"w"}"#,
            r#"{"k":"v""#,
            r#"{"k":"v"#,
            r#"["k"]"#,
        ];
        for text in left_to_serde {
            assert!(string_object(text, "k").is_none(), "{text}");
        }
    }
}
