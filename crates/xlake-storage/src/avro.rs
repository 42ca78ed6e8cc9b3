//! Avro object container headers read without an Avro reader: the one place that knows
//! how a header is laid out (magic, a metadata map, a 16-byte sync marker), for sources
//! that vet a file before apache-avro parses it (Hudi's instants) and for the target,
//! which carries a manifest list's blocks into the next list (as [`crate::footer`] is
//! for Parquet footers).

/// A container's header: its metadata entries in order, and its sync marker and length
/// when it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    /// Metadata entries (key, value), in the order written.
    pub metadata: Vec<(&'a [u8], &'a [u8])>,
    /// The sync marker, if the bytes go on that far.
    pub sync: Option<[u8; 16]>,
    /// Where the first block starts (past the sync marker, or the map without one).
    pub len: usize,
}

impl Header<'_> {
    /// The value of metadata key `key` (the last, as apache-avro's map keeps it).
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.metadata
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

/// Why an Avro container's header was refused.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// Its metadata map claims more entries than its bytes can hold.
    #[error("corrupt Avro container: its header claims {entries} entries in {bytes} bytes")]
    Oversized {
        /// The entries claimed.
        entries: u64,
        /// The container's length.
        bytes: usize,
    },
}

/// The header of the Avro container `bytes`: `Ok(None)` for bytes that are not one or
/// end inside its map, an error for a map claiming more entries than its bytes can hold
/// (apache-avro would reserve room for them first).
pub fn header(bytes: &[u8]) -> Result<Option<Header<'_>>, HeaderError> {
    if !bytes.starts_with(b"Obj\x01") {
        return Ok(None);
    }
    let (mut at, mut metadata) = (4, Vec::new());
    loop {
        let Some(count) = long(bytes, &mut at) else {
            return Ok(None);
        };
        if count == 0 {
            break;
        }
        if count < 0 && long(bytes, &mut at).is_none() {
            return Ok(None); // (the block's size in bytes)
        }
        // Each entry takes at least two bytes (the lengths of its key and value).
        if count.unsigned_abs() > (bytes.len().saturating_sub(at) / 2) as u64 {
            return Err(HeaderError::Oversized {
                entries: count.unsigned_abs(),
                bytes: bytes.len(),
            });
        }
        for _ in 0..count.unsigned_abs() {
            let (Some(key), Some(value)) = (field(bytes, &mut at), field(bytes, &mut at)) else {
                return Ok(None);
            };
            metadata.push((key, value));
        }
    }
    let sync = bytes.get(at..at + 16).and_then(|s| s.try_into().ok());
    let len = at + sync.map_or(0, |_| 16);
    Ok(Some(Header {
        metadata,
        sync,
        len,
    }))
}

/// An Avro `long` (zig-zag varint) at `at`, which moves past it.
pub fn long(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    None
}

/// Whether `s` is a name as the Avro specification allows one (a record field's, or a
/// part of a full name): a letter or `_`, then letters, digits and `_`.
pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Avro `bytes` or `string` at `at`, which moves past it.
pub fn field<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = usize::try_from(long(bytes, at)?).ok()?;
    let value = bytes.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_those_the_specification_allows() {
        for (name, allowed) in [("day", true), ("_p2", true), ("2p", false), ("a-b", false)] {
            assert_eq!(is_name(name), allowed, "{name}");
        }
        assert!(!is_name("") && !is_name("é"));
    }

    #[test]
    fn a_header_reads_its_entries_sync_and_length() {
        // Two entries in a block of -2 (with its byte size), then the end of the map.
        let mut bytes = b"Obj\x01\x03\x14\x02a\x02x\x02b\x02y\x00".to_vec();
        bytes.extend([7; 16]);
        bytes.extend(b"blocks");
        let h = header(&bytes).unwrap().unwrap();
        assert_eq!(h.metadata, [(&b"a"[..], &b"x"[..]), (b"b", b"y")]);
        assert_eq!((h.get(b"b"), h.get(b"c")), (Some(&b"y"[..]), None));
        assert_eq!((h.sync, h.len), (Some([7; 16]), bytes.len() - 6));
        assert_eq!(header(&bytes[..10]).unwrap(), None, "ends in the map");
        assert_eq!(header(b"not avro").unwrap(), None);
        assert!(
            header(b"Obj\x01\xfe\xff\xff\x0f").is_err(),
            "too many entries"
        );
        let no_sync = header(&bytes[..17]).unwrap().unwrap();
        assert_eq!((no_sync.sync, no_sync.len), (None, 15));
        assert_eq!(long(&[0x80], &mut 0), None, "a varint cut short");
        assert_eq!(long(&[0x03], &mut 0), Some(-2));
    }
}
