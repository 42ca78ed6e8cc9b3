//! The shape of each record of a manifest list this crate wrote, read by hand: what
//! [`crate::spec::manifest_list::carry::whole`] decides on (issue 16). Only a list under the very schema
//! `list_schema_v2.json` (same text, checked first) is read here, so its fields come in
//! that file's order, and each is decoded as the Avro spec encodes its type: `int` and
//! `long` as zig-zag varints, `string` and `bytes` as a length then the bytes, a union as
//! its branch's index then the value, an array as blocks of items ending with a block of
//! none. Read by serde_avro_fast instead, the same records cost about 2 ms of every append
//! on the benchmark tables (lists of ~100 and ~1,100 records; benches/README.md).

use iceberg::spec::ManifestContentType;
use xlake_storage::avro::{field, long};

use crate::spec::manifest_list::merging::Shape;

/// Each record's shape in `blocks` (every block of a v2 list under this crate's schema,
/// after its header), if they are exactly `records` records in blocks ending with `sync`,
/// and each one an append may carry as it is: a path of text, sequence numbers assigned,
/// no negative count, and live files. `None` otherwise (the list is then read whole).
pub(crate) fn shapes(blocks: &[u8], sync: &[u8; 16], records: usize) -> Option<Vec<Shape>> {
    each(blocks, sync, records, record)
}

/// Each record of `blocks` (as for [`shapes`]) as its bytes and what identifies it, if
/// they are exactly `records` records in blocks ending with `sync`: what a list keeping
/// some of its parent's manifests copies of them (see
/// [`crate::spec::manifest_list::carry::spliced`]).
pub(crate) fn spans<'a>(
    blocks: &'a [u8],
    sync: &[u8; 16],
    records: usize,
) -> Option<Vec<Span<'a>>> {
    each(blocks, sync, records, |b, at| {
        let start = *at;
        let f = fields(b, at)?;
        Some(Span {
            path: f.path,
            ident: [f.length, f.snapshot, f.sequence_numbers[0]],
            bytes: b.get(start..*at)?,
        })
    })
}

/// A record of a list: its bytes, its manifest's path, and the manifest's length, adding
/// snapshot and sequence number (with the path, what
/// [`crate::spec::manifest_list::carry::digest`] takes a manifest file by).
pub(crate) struct Span<'a> {
    pub(crate) path: &'a [u8],
    pub(crate) ident: [i64; 3],
    pub(crate) bytes: &'a [u8],
}

/// `read` of each record of `blocks`, if they are exactly `records` records in blocks
/// ending with `sync`, each read whole by `read`.
fn each<'a, T>(
    blocks: &'a [u8],
    sync: &[u8; 16],
    records: usize,
    mut read: impl FnMut(&'a [u8], &mut usize) -> Option<T>,
) -> Option<Vec<T>> {
    // A record takes at least 15 bytes: a corrupt count reserves nothing large.
    let mut out = Vec::with_capacity(records.min(blocks.len() / 15));
    let mut at = 0;
    while at < blocks.len() {
        let count = u64::try_from(long(blocks, &mut at)?).ok()?;
        let size = usize::try_from(long(blocks, &mut at)?).ok()?;
        let end = at.checked_add(size)?;
        let block = blocks.get(..end)?;
        for _ in 0..count {
            out.push(read(block, &mut at)?);
        }
        (at == end && blocks.get(end..end.checked_add(16)?)? == sync).then_some(())?;
        at = end + 16;
    }
    (out.len() == records).then_some(out)
}

/// The fields of one record, in `list_schema_v2.json`'s order (partition summaries and
/// key metadata skipped).
struct Fields<'a> {
    path: &'a [u8],
    length: i64,
    spec: i32,
    content: i32,
    sequence_numbers: [i64; 2],
    snapshot: i64,
    files: [i32; 3],
    rows: [i64; 3],
}

fn fields<'a>(b: &'a [u8], at: &mut usize) -> Option<Fields<'a>> {
    let path = field(b, at)?;
    let length = long(b, at)?;
    let spec = int(b, at)?;
    let content = int(b, at)?;
    let sequence_numbers = [long(b, at)?, long(b, at)?];
    let snapshot = long(b, at)?;
    let files = [int(b, at)?, int(b, at)?, int(b, at)?];
    let rows = [long(b, at)?, long(b, at)?, long(b, at)?];
    skip_partitions(b, at)?;
    skip_optional(b, at, skip_bytes)?;
    Some(Fields {
        path,
        length,
        spec,
        content,
        sequence_numbers,
        snapshot,
        files,
        rows,
    })
}

/// One record's shape, if an append may carry it as it is.
fn record(b: &[u8], at: &mut usize) -> Option<Shape> {
    let f = fields(b, at)?;
    let named = !f.path.is_empty() && std::str::from_utf8(f.path).is_ok();
    let content = ManifestContentType::try_from(f.content).ok()?;
    let counted = f.files.iter().all(|n| *n >= 0) && f.rows.iter().all(|n| *n >= 0);
    let assigned = f.sequence_numbers.iter().all(|n| *n >= 0);
    let live = u32::try_from(f.files[0]).ok()? + u32::try_from(f.files[1]).ok()?;
    (named && counted && assigned && live > 0).then_some((f.spec, content, live))
}

/// An Avro `int`.
fn int(b: &[u8], at: &mut usize) -> Option<i32> {
    i32::try_from(long(b, at)?).ok()
}

/// Avro `bytes`.
fn skip_bytes(b: &[u8], at: &mut usize) -> Option<()> {
    field(b, at).map(drop)
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
/// `contains_nan`, `lower_bound` and `upper_bound`). A block with a negative count gives
/// its size in bytes too, which must be the size of its items: a reader that skips the
/// array by it reads the carried list as this one does.
fn skip_partitions(b: &[u8], at: &mut usize) -> Option<()> {
    skip_optional(b, at, |b, at| loop {
        let mut items = long(b, at)?;
        if items == 0 {
            return Some(());
        }
        let mut size = None;
        if items < 0 {
            size = Some(usize::try_from(long(b, at)?).ok()?);
            items = items.checked_neg()?;
        }
        let start = *at;
        for _ in 0..items {
            boolean(b, at)?;
            skip_optional(b, at, boolean)?;
            skip_optional(b, at, skip_bytes)?;
            skip_optional(b, at, skip_bytes)?;
        }
        size.is_none_or(|size| *at - start == size).then_some(())?;
    })
}

#[cfg(test)]
mod tests {
    use iceberg::spec::ManifestFile;

    use super::*;
    use crate::spec::manifest_list::write::{encode, sample_manifest, ListOf};

    fn list_of() -> ListOf {
        ListOf {
            snapshot_id: 9,
            parent: Some(8),
            sequence_number: 40,
            first_row_id: None,
        }
    }

    /// The blocks and sync marker of the list `bytes`.
    fn blocks_of(bytes: &[u8]) -> (Vec<u8>, [u8; 16]) {
        let header = xlake_storage::avro::header(bytes).unwrap().unwrap();
        (bytes[header.len..].to_vec(), header.sync.unwrap())
    }

    /// A list of `manifests` as this crate writes it: its blocks and sync marker.
    fn blocks(manifests: &[ManifestFile]) -> (Vec<u8>, [u8; 16]) {
        blocks_of(&encode(list_of(), manifests).unwrap().unwrap())
    }

    /// Every kind of record the writer writes (partition summaries with and without each
    /// optional field, key metadata or none, delete manifests) reads as the full reader
    /// reads it, in one block and in a list of several (a carried one).
    #[test]
    fn shapes_are_what_the_full_read_finds() {
        let manifests: Vec<_> = (1..30).map(|n| sample_manifest(n, None)).collect();
        let bytes = encode(list_of(), &manifests).unwrap().unwrap();
        let shape_all = |bytes: &[u8]| -> Vec<Shape> {
            let read = crate::spec::manifest_list::read::manifests(bytes, "list").unwrap();
            read.iter()
                .map(crate::spec::manifest_list::merging::shape)
                .collect()
        };
        let (blocks, sync) = blocks_of(&bytes);
        assert_eq!(shapes(&blocks, &sync, 29), Some(shape_all(&bytes)));
        let parent = crate::spec::manifest_list::carry::ParentList {
            bytes: bytes.into(),
            digest: (29, 0),
            whole: true,
        };
        let new = [sample_manifest(31, None), sample_manifest(32, None)];
        let carried = crate::spec::manifest_list::carry::encode(list_of(), &new, &parent);
        let carried = carried.unwrap().unwrap();
        let (blocks, sync) = blocks_of(&carried);
        assert_eq!(shapes(&blocks, &sync, 31), Some(shape_all(&carried)));
    }

    /// A record with partition summaries in a block of negative count (which gives its
    /// size): read when the size is the items', refused otherwise.
    #[test]
    fn a_sized_array_block_must_hold_its_size() {
        let zz = |n: i64| {
            let (mut v, mut out) = (((n << 1) ^ (n >> 63)) as u64, Vec::new());
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
            out
        };
        // contains_null, contains_nan true, lower bound [7], no upper bound: 7 bytes.
        let item = [vec![1], zz(1), vec![1], zz(1), zz(1), vec![7], zz(0)].concat();
        let record = |size: i64| {
            let mut r = [zz(3), b"m.a".to_vec(), zz(10), zz(0), zz(0), zz(1), zz(1)].concat();
            r.extend([zz(5), zz(1), zz(0), zz(0), zz(10), zz(0), zz(0)].concat());
            r.extend([zz(1), zz(-1), zz(size)].concat());
            r.extend(&item);
            r.extend([zz(0), zz(0)].concat());
            r
        };
        let sync = [3u8; 16];
        let list =
            |record: Vec<u8>| [zz(1), zz(record.len() as i64), record, sync.to_vec()].concat();
        let found = shapes(&list(record(7)), &sync, 1);
        assert_eq!(found, Some(vec![(0, ManifestContentType::Data, 1)]));
        assert!(shapes(&list(record(6)), &sync, 1).is_none());
        assert!(shapes(&list(record(8)), &sync, 1).is_none());
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
        // A block claiming more records than it could hold.
        let huge = [
            vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20],
            vec![0],
        ];
        let claim = [huge.concat(), sync.to_vec()].concat();
        assert!(shapes(&claim, &sync, 1 << 60).is_none(), "a huge count");
    }
}
