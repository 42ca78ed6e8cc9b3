//! One file of the path index (`metadata/<uuid>-paths.bin`), a segment of a chain: which
//! of the manifests it covers hold which paths, laid out by key so that a lookup reads a
//! few pages of a mapped file, not the whole.
//!
//! Layout (`XLPI2`), little-endian:
//!
//! | part | what |
//! |---|---|
//! | `XLPI2` | magic |
//! | ancestors | count (u32), then each as its length (u32) and table-relative name: the segments this one builds on, newest first (none: a full index) |
//! | manifests | count `m` (u32), `m` end offsets (u32) into the names that follow, then the names (manifest locations) in ascending byte order, concatenated; a manifest's ordinal is its place here |
//! | keys | count `n` (u32), `n` keys (u64, ascending), then `n` ordinals (u32): the manifest holding each key (a key held by two manifests is there twice) |
//!
//! A key is the upper half of the path's [`xlake_model::path_key`]: two paths sharing it
//! make a lookup name one manifest too many, which costs a read, never a wrong answer.
//!
//! The first layout (`XLPI1`: per manifest its location and sorted 128-bit keys) is still
//! read, as a segment with no ancestors.

use bytes::{BufMut, Bytes, BytesMut};

use crate::spec::error::CodecError;

const MAGIC: &[u8] = b"XLPI2";
const LEGACY: &[u8] = b"XLPI1";

/// The index key of a path's [`xlake_model::path_key`]: its high half, which is the
/// path's [`xlake_model::short_path_key`] (how the first layout's keys are read).
pub(crate) fn index_key(path_key: u128) -> u64 {
    (path_key >> 64) as u64
}

/// A parsed segment: the file's bytes (mapped when large and local) and where its parts lie.
pub(crate) struct Segment {
    bytes: Bytes,
    ancestors: Vec<String>,
    /// Offset of the `m` name end offsets; the names follow them.
    ends_at: usize,
    manifests: usize,
    /// Offset of the first key; the ordinals follow the keys.
    keys_at: usize,
    keys: usize,
    /// Read from the first layout (re-encoded in memory).
    legacy: bool,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("ancestors", &self.ancestors)
            .field("manifests", &self.manifests)
            .field("keys", &self.keys)
            .field("legacy", &self.legacy)
            .finish()
    }
}

/// Reads the parts of an encoded segment in turn; an error names what is short.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn skip(&mut self, n: usize) -> Result<usize, CodecError> {
        let start = self.at;
        match start.checked_add(n).filter(|end| *end <= self.bytes.len()) {
            Some(end) => {
                self.at = end;
                Ok(start)
            }
            None => Err("truncated path index".into()),
        }
    }

    fn u32(&mut self) -> Result<usize, CodecError> {
        let at = self.skip(4)?;
        Ok(u32_at(self.bytes, at) as usize)
    }

    fn str(&mut self) -> Result<&'a str, CodecError> {
        let len = self.u32()?;
        let at = self.skip(len)?;
        let bytes: &'a [u8] = self.bytes;
        std::str::from_utf8(&bytes[at..at + len]).map_err(CodecError::library)
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

impl Segment {
    /// Parse `bytes` (either layout). Only the framing is checked here, not the order of
    /// keys or names: a segment out of order only misleads lookups, and a removal a
    /// lookup misled sets the index aside (see [`super`]).
    pub(crate) fn parse(bytes: Bytes) -> Result<Self, CodecError> {
        if bytes.starts_with(LEGACY) {
            let mut segment = Self::parse(legacy(&bytes)?)?;
            segment.legacy = true;
            return Ok(segment);
        }
        if !bytes.starts_with(MAGIC) {
            return Err("not a path index (no XLPI2 header)".into());
        }
        let mut c = Cursor {
            bytes: &bytes,
            at: MAGIC.len(),
        };
        let count = c.u32()?;
        let mut ancestors = Vec::new();
        for _ in 0..count {
            ancestors.push(c.str()?.to_string());
        }
        let manifests = c.u32()?;
        let ends_at = c.skip(manifests.checked_mul(4).ok_or("bad manifest count")?)?;
        let mut end = 0;
        for i in 0..manifests {
            let next = u32_at(&bytes, ends_at + 4 * i) as usize;
            if next < end {
                return Err("manifest names out of order".into());
            }
            end = next;
        }
        c.skip(end)?;
        let keys = c.u32()?;
        let keys_at = c.skip(keys.checked_mul(12).ok_or("bad key count")?)?;
        if c.at != bytes.len() {
            return Err("trailing bytes after the path index".into());
        }
        Ok(Self {
            bytes,
            ancestors,
            ends_at,
            manifests,
            keys_at,
            keys,
            legacy: false,
        })
    }

    /// The segments this one builds on, newest first.
    pub(crate) fn ancestors(&self) -> &[String] {
        &self.ancestors
    }

    pub(crate) fn keys(&self) -> usize {
        self.keys
    }

    pub(crate) fn is_legacy(&self) -> bool {
        self.legacy
    }

    /// The location of the manifest with ordinal `ord`.
    pub(crate) fn name(&self, ord: usize) -> Option<&str> {
        if ord >= self.manifests {
            return None;
        }
        let names_at = self.ends_at + 4 * self.manifests;
        let start = match ord {
            0 => 0,
            _ => u32_at(&self.bytes, self.ends_at + 4 * (ord - 1)) as usize,
        };
        let end = u32_at(&self.bytes, self.ends_at + 4 * ord) as usize;
        std::str::from_utf8(&self.bytes[names_at + start..names_at + end]).ok()
    }

    /// Whether the segment covers the manifest at `location` (a chain keeps a set of
    /// them: see [`super::Chain::covers`]).
    #[cfg(test)]
    fn covers(&self, location: &str) -> bool {
        let (mut lo, mut hi) = (0, self.manifests);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.name(mid).map(|n| n.cmp(location)) {
                Some(std::cmp::Ordering::Equal) => return true,
                Some(std::cmp::Ordering::Less) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        false
    }

    fn key(&self, i: usize) -> u64 {
        u64_at(&self.bytes, self.keys_at + 8 * i)
    }

    fn ord(&self, i: usize) -> usize {
        u32_at(&self.bytes, self.keys_at + 8 * self.keys + 4 * i) as usize
    }

    /// The locations of the manifests holding `key`.
    pub(crate) fn holders(&self, key: u64) -> impl Iterator<Item = &str> + '_ {
        let (mut lo, mut hi) = (0, self.keys);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid) < key {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        (lo..self.keys)
            .take_while(move |&i| self.key(i) == key)
            .filter_map(|i| self.name(self.ord(i)))
    }

    /// Every key with its manifest's ordinal, in key order; and the ordinals' locations.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        (0..self.keys).map(|i| (self.key(i), self.ord(i)))
    }

    pub(crate) fn manifests(&self) -> usize {
        self.manifests
    }
}

/// A segment building on `ancestors` (newest first) of the manifests `names` (ascending,
/// distinct) and `entries`, (key, ordinal in `names`) in key order, `count` of them.
/// The entries are written straight into the segment's buffer (keys, then ordinals, at
/// places known from `count`): a backfill's full index of 10M paths holds no list of them
/// beside its 120 MB of bytes.
pub(crate) fn encode(
    ancestors: &[String],
    names: &[&str],
    count: usize,
    entries: impl Iterator<Item = (u64, u32)>,
) -> Result<Bytes, CodecError> {
    let length = |n: usize| u32::try_from(n).map_err(|_| "path index too large".to_string());
    let name_bytes: usize = names.iter().map(|n| n.len()).sum();
    let mut out = BytesMut::with_capacity(64 + name_bytes + names.len() * 4 + count * 12);
    out.put_slice(MAGIC);
    out.put_u32_le(length(ancestors.len())?);
    for a in ancestors {
        out.put_u32_le(length(a.len())?);
        out.put_slice(a.as_bytes());
    }
    out.put_u32_le(length(names.len())?);
    let mut end = 0;
    for n in names {
        end += n.len();
        out.put_u32_le(length(end)?);
    }
    for n in names {
        out.put_slice(n.as_bytes());
    }
    out.put_u32_le(length(count)?);
    let keys_at = out.len();
    out.resize(keys_at + count * 12, 0);
    let (keys, ords) = out[keys_at..].split_at_mut(count * 8);
    let mut written = 0;
    for (i, (key, ord)) in entries.enumerate() {
        let (Some(k), Some(o)) = (
            keys.get_mut(8 * i..8 * i + 8),
            ords.get_mut(4 * i..4 * i + 4),
        ) else {
            return Err("path index: more entries than counted".to_string().into());
        };
        k.copy_from_slice(&key.to_le_bytes());
        o.copy_from_slice(&ord.to_le_bytes());
        written = i + 1;
    }
    if written != count {
        return Err(format!("path index: {written} entries, {count} counted").into());
    }
    Ok(out.freeze())
}

/// The first layout's bytes as a segment of the second with no ancestors.
fn legacy(bytes: &[u8]) -> Result<Bytes, CodecError> {
    let mut c = Cursor { bytes, at: 0 };
    c.skip(LEGACY.len())?;
    let count = c.u32()?;
    let mut manifests: Vec<(&str, Vec<u64>)> = Vec::new();
    for _ in 0..count {
        let location = c.str()?;
        let n = c.u32()?;
        let at = c.skip(n.checked_mul(16).ok_or("bad key count")?)?;
        let keys = bytes[at..at + 16 * n]
            .chunks_exact(16)
            .map(|k| index_key(u128::from_le_bytes(k.try_into().unwrap_or_default())))
            .collect();
        manifests.push((location, keys));
    }
    manifests.sort_by(|a, b| a.0.cmp(b.0));
    manifests.dedup_by(|a, b| a.0 == b.0);
    let names: Vec<&str> = manifests.iter().map(|(n, _)| *n).collect();
    let mut entries = Vec::new();
    for (ord, (_, keys)) in manifests.iter().enumerate() {
        let ord = u32::try_from(ord).map_err(|_| "path index too large")?;
        entries.extend(keys.iter().map(|k| (*k, ord)));
    }
    entries.sort_unstable();
    encode(&[], &names, entries.len(), entries.into_iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_reads_as_written_and_refuses_damage() {
        let names = [
            "s3://b/t/metadata/a-m0.avro",
            "s3://b/t/metadata/b-m0.avro",
            "x",
        ];
        let entries = [(1, 0), (5, 0), (5, 1), (9, 2), (u64::MAX, 0)];
        let ancestors = ["metadata/p-paths.bin".to_string()];
        let bytes = encode(&ancestors, &names, entries.len(), entries.into_iter()).unwrap();
        let s = Segment::parse(bytes.clone()).unwrap();
        assert_eq!(s.ancestors(), &ancestors);
        assert!(s.covers("x") && s.covers(names[1]) && !s.covers("y") && !s.covers(""));
        let holders = |k| s.holders(k).collect::<Vec<_>>();
        assert_eq!(holders(5), vec![names[0], names[1]]);
        assert_eq!(holders(u64::MAX), vec![names[0]]);
        assert!(holders(4).is_empty() && holders(0).is_empty());
        assert_eq!(s.entries().count(), 5);
        assert!(Segment::parse(bytes.slice(..bytes.len() - 1)).is_err());
        assert!(Segment::parse(Bytes::from_static(b"XLPI3")).is_err());
        let empty = Segment::parse(encode(&[], &[], 0, std::iter::empty()).unwrap()).unwrap();
        assert!(!empty.covers("x") && empty.holders(1).next().is_none());
    }

    #[test]
    fn the_first_layout_reads_as_a_full_segment() {
        let mut old = BytesMut::from(LEGACY);
        old.put_u32_le(2);
        for (location, keys) in [
            ("m2", vec![7u128 << 64]),
            ("m1", vec![3u128 << 64, 7 << 64]),
        ] {
            old.put_u32_le(location.len() as u32);
            old.put_slice(location.as_bytes());
            old.put_u32_le(keys.len() as u32);
            keys.iter().for_each(|k| old.put_u128_le(*k));
        }
        let s = Segment::parse(old.freeze()).unwrap();
        assert!(s.is_legacy() && s.ancestors().is_empty());
        assert_eq!(s.holders(7).collect::<Vec<_>>(), vec!["m1", "m2"]);
        assert_eq!(s.holders(3).collect::<Vec<_>>(), vec!["m1"]);
        assert!(Segment::parse(Bytes::from_static(b"XLPI1\xff")).is_err());
    }
}
