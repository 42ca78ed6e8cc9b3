//! The shape of each record of a manifest list this crate wrote, read by hand: what
//! [`crate::list_carry::whole`] decides on (issue 16). Only a list under the very schema
//! `list_schema_v2.json` (same text, checked first) is read here, so its fields come in
//! that file's order, and each is decoded as the Avro spec encodes its type: `int` and
//! `long` as zig-zag varints, `string` and `bytes` as a length then the bytes, a union as
//! its branch's index then the value, an array as blocks of items ending with a block of
//! none. Read by serde_avro_fast instead, the same records cost about 2 ms of every append
//! on the benchmark tables (lists of ~100 and ~1,100 records; benches/README.md).

use iceberg::spec::ManifestContentType;
use xlake_storage::avro::{field, long};

use crate::merge::Shape;

/// Each record's shape in `blocks` (every block of a v2 list under this crate's schema,
/// after its header), if they are exactly `records` records in blocks ending with `sync`,
/// and each one an append may carry as it is: a path of text, sequence numbers assigned,
/// no negative count, and live files. `None` otherwise (the list is then read whole).
pub(crate) fn shapes(blocks: &[u8], sync: &[u8; 16], records: usize) -> Option<Vec<Shape>> {
    let mut shapes = Vec::with_capacity(records);
    let mut at = 0;
    while at < blocks.len() {
        let count = u64::try_from(long(blocks, &mut at)?).ok()?;
        let size = usize::try_from(long(blocks, &mut at)?).ok()?;
        let end = at.checked_add(size)?;
        let block = blocks.get(..end)?;
        for _ in 0..count {
            shapes.push(record(block, &mut at)?);
        }
        (at == end && blocks.get(end..end.checked_add(16)?)? == sync).then_some(())?;
        at = end + 16;
    }
    (shapes.len() == records).then_some(shapes)
}

/// One record, its fields in `list_schema_v2.json`'s order.
fn record(b: &[u8], at: &mut usize) -> Option<Shape> {
    let path = field(b, at)?;
    let named = !path.is_empty() && std::str::from_utf8(path).is_ok();
    let _length = long(b, at)?;
    let spec = int(b, at)?;
    let content = ManifestContentType::try_from(int(b, at)?).ok()?;
    let sequence_numbers = [long(b, at)?, long(b, at)?];
    let _snapshot = long(b, at)?;
    let files = [int(b, at)?, int(b, at)?, int(b, at)?];
    let rows = [long(b, at)?, long(b, at)?, long(b, at)?];
    skip_partitions(b, at)?;
    skip_optional(b, at, |b, at| field(b, at).map(drop))?;
    let counted = files.iter().all(|n| *n >= 0) && rows.iter().all(|n| *n >= 0);
    let assigned = sequence_numbers.iter().all(|n| *n >= 0);
    let live = u32::try_from(files[0]).ok()? + u32::try_from(files[1]).ok()?;
    (named && counted && assigned && live > 0).then_some((spec, content, live))
}

/// An Avro `int`.
fn int(b: &[u8], at: &mut usize) -> Option<i32> {
    i32::try_from(long(b, at)?).ok()
}

/// An Avro `boolean`: one byte, 0 or 1.
fn boolean(b: &[u8], at: &mut usize) -> Option<()> {
    let byte = *b.get(*at)?;
    *at += 1;
    (byte <= 1).then_some(())
}

/// A `["null", T]` union, `value` reading a `T`.
fn skip_optional(
    b: &[u8],
    at: &mut usize,
    value: impl FnOnce(&[u8], &mut usize) -> Option<()>,
) -> Option<()> {
    match long(b, at)? {
        0 => Some(()),
        1 => value(b, at),
        _ => None,
    }
}

/// `partitions`: an optional array of field summaries (`contains_null`, then optional
/// `contains_nan`, `lower_bound` and `upper_bound`).
fn skip_partitions(b: &[u8], at: &mut usize) -> Option<()> {
    skip_optional(b, at, |b, at| loop {
        let mut items = long(b, at)?;
        if items == 0 {
            return Some(());
        }
        if items < 0 {
            // A negative count is followed by the block's size in bytes.
            long(b, at)?;
            items = items.checked_neg()?;
        }
        for _ in 0..items {
            boolean(b, at)?;
            skip_optional(b, at, boolean)?;
            skip_optional(b, at, |b, at| field(b, at).map(drop))?;
            skip_optional(b, at, |b, at| field(b, at).map(drop))?;
        }
    })
}

#[cfg(test)]
mod tests {
    use iceberg::spec::ManifestFile;

    use super::*;
    use crate::list_write::{encode, sample_manifest, ListOf};

    /// A list of `manifests` as this crate writes it: its blocks and sync marker.
    fn blocks(manifests: &[ManifestFile]) -> (Vec<u8>, [u8; 16]) {
        let of = ListOf {
            snapshot_id: 9,
            parent: Some(8),
            sequence_number: 40,
            first_row_id: None,
        };
        let bytes = encode(of, manifests).unwrap().unwrap();
        let header = xlake_storage::avro::header(&bytes).unwrap().unwrap();
        (bytes[header.len..].to_vec(), header.sync.unwrap())
    }

    /// Every kind of record the writer writes (partition summaries with and without each
    /// optional field, key metadata or none, delete manifests) reads as the full reader
    /// reads it.
    #[test]
    fn shapes_are_what_the_full_read_finds() {
        let manifests: Vec<_> = (1..30).map(|n| sample_manifest(n, None)).collect();
        let (blocks, sync) = blocks(&manifests);
        let expected: Vec<Shape> = manifests.iter().map(crate::merge::shape).collect();
        assert_eq!(shapes(&blocks, &sync, 29), Some(expected));
    }

    /// Anything but whole records in blocks that end with the sync marker is refused.
    #[test]
    fn a_damaged_list_has_no_shapes() {
        let manifests: Vec<_> = (1..4).map(|n| sample_manifest(n, None)).collect();
        let (blocks, sync) = blocks(&manifests);
        assert!(shapes(&blocks, &sync, 3).is_some());
        assert!(shapes(&blocks, &sync, 4).is_none(), "a record short");
        assert!(
            shapes(&blocks[..blocks.len() - 1], &sync, 3).is_none(),
            "cut"
        );
        let mut other = sync;
        other[0] ^= 1;
        assert!(shapes(&blocks, &other, 3).is_none(), "another sync marker");
        let mut empty = manifests.clone();
        empty[1].added_files_count = Some(0);
        empty[1].existing_files_count = Some(0);
        let (blocks, sync) = self::blocks(&empty);
        assert!(shapes(&blocks, &sync, 3).is_none(), "no live files");
        let mut unnamed = manifests;
        unnamed[0].manifest_path.clear();
        let (blocks, sync) = self::blocks(&unnamed);
        assert!(shapes(&blocks, &sync, 3).is_none(), "no path");
    }
}
