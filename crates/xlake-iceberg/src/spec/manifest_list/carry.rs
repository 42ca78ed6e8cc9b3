//! A manifest list that keeps every manifest of its parent's list, in the parent's order,
//! after the commit's own (an append that merges nothing): the parent's records are
//! carried as the Avro blocks they were written as (issue 16). At 100k files a parent
//! holds ~1,000 manifests; encoding them again was ~0.5 ms of every commit.
//!
//! An Avro container file is a header (magic, metadata, a 16-byte sync marker) and blocks,
//! each ending with the file's sync marker. The new list is a header of its own (its
//! snapshot's metadata) with the parent's sync marker, a block of the new records, then
//! the parent's blocks byte for byte. It is carried only when the parent was written under
//! the very schema (same text) and without compression, as [`crate::spec::manifest_list::write`] writes;
//! its blocks all hold records, end with its sync marker and hold as many records as the
//! parent's manifests; there are at most [`MAX_BLOCKS`] of them (a list encoded whole is
//! one block, and each carried commit adds one: past that the list is encoded whole
//! again); and the new list's last manifests are the same manifest files as the parent's,
//! in order (paths, lengths, snapshots and sequence numbers, by a digest). Any other
//! parent, and v3 lists (whose row ids a commit may assign to the parent's manifests),
//! are encoded whole as before.
//!
//! An append (a v2 commit removing nothing) need not read the parent's records at all:
//! [`whole`] reads of each only what decides whether the commit keeps every manifest as
//! it is (live files, counts, sequence numbers, and no small manifests to merge), and the
//! new list is then its own manifests followed by all the parent's blocks. Reading the
//! ~1,000 records into manifest files was the largest part of such a commit that grows
//! with the table.

use bytes::Bytes;
use iceberg::spec::{FormatVersion, ManifestFile};

use xlake_storage::avro;

use crate::spec::error::CodecError;
use crate::spec::manifest_list::write::{records, schema, ListOf};

/// Most blocks a carried parent may have.
const MAX_BLOCKS: usize = 64;

/// A parent's list as a new list may carry it: its bytes, and the [`digest`] of its
/// manifests.
pub(crate) struct ParentList {
    pub(crate) bytes: Bytes,
    pub(crate) digest: (usize, u32),
    /// All its records follow the new list's manifests as given, checked without decoding
    /// them (see [`whole`]; the digest's checksum is then not taken); else they may be the
    /// tail of the new list's manifests ([`tail_of`]).
    pub(crate) whole: bool,
}

/// How many `manifests` there are, and a CRC-32 of their paths, lengths, snapshots and
/// sequence numbers in order: what tells a new list's tail is its parent's manifests.
pub(crate) fn digest(manifests: &[ManifestFile]) -> (usize, u32) {
    let mut crc = crc32fast::Hasher::new();
    for m in manifests {
        crc.update(m.manifest_path.as_bytes());
        for n in [m.manifest_length, m.added_snapshot_id, m.sequence_number] {
            crc.update(&n.to_le_bytes());
        }
    }
    (manifests.len(), crc.finalize())
}

/// Where the records of `parent` start among `manifests`, if they are their tail.
pub(crate) fn tail_of(manifests: &[ManifestFile], parent: &ParentList) -> Option<usize> {
    let new = manifests.len().checked_sub(parent.digest.0)?;
    (digest(&manifests[new..]) == parent.digest).then_some(new)
}

/// The list of `new` manifests followed by the records of the list `parent`, if the
/// parent's blocks can be carried; `None` to encode the whole list.
pub(crate) fn encode(
    of: ListOf,
    new: &[ManifestFile],
    parent: &ParentList,
) -> Option<Result<Vec<u8>, CodecError>> {
    let blocks = carriable(of.version(), &parent.bytes)?;
    (blocks.records == parent.digest.0).then_some(())?;
    Some(
        records(&blocks.schema, of, new, Some(blocks.sync)).map(|mut out| {
            out.reserve_exact(blocks.bytes.len());
            out.extend_from_slice(blocks.bytes);
            out
        }),
    )
}

/// The list of `manifests` whose last ones are some of the records of the list `parent`,
/// in its order (a commit that rewrites or drops some of its parent's manifests and keeps
/// the others as they are, a removal's): the manifests before them encoded, then those
/// records copied as written, in one block of their own. `None` to encode the list whole:
/// the parent's blocks cannot be carried (as for [`encode`]), or the last manifest is not
/// one of the parent's. At 100k files a removal keeps ~1,000 records and rewrites ~5;
/// encoding them again was ~1 ms of every such commit (issue 46).
///
/// A manifest is the parent's record when its path, length, adding snapshot and sequence
/// number are the record's (as [`digest`] takes them: manifest files are written once,
/// under names of their own); manifests are matched from the last one back, in order.
pub(crate) fn spliced(
    of: ListOf,
    manifests: &[ManifestFile],
    parent: &ParentList,
) -> Option<Result<Vec<u8>, CodecError>> {
    let blocks = carriable(of.version(), &parent.bytes)?;
    let spans =
        crate::spec::manifest_list::shape::spans(blocks.bytes, &blocks.sync, blocks.records)?;
    let at: std::collections::HashMap<&[u8], usize> =
        spans.iter().enumerate().map(|(n, r)| (r.path, n)).collect();
    // The longest tail of `manifests` that are parent records, in the parent's order.
    let (mut new, mut before) = (manifests.len(), spans.len());
    while let Some(m) = new.checked_sub(1).map(|n| &manifests[n]) {
        let Some(&n) = at.get(m.manifest_path.as_bytes()) else {
            break;
        };
        let ident = [m.manifest_length, m.added_snapshot_id, m.sequence_number];
        if n >= before || spans[n].ident != ident {
            break;
        }
        (new, before) = (new - 1, n);
    }
    (new < manifests.len()).then_some(())?;
    let kept: Vec<&[u8]> = manifests[new..]
        .iter()
        .filter_map(|m| Some(spans[*at.get(m.manifest_path.as_bytes())?].bytes))
        .collect();
    let size: usize = kept.iter().map(|r| r.len()).sum();
    let header = [kept.len(), size].map(|n| i64::try_from(n).ok());
    let [Some(count), Some(length)] = header else {
        return None;
    };
    Some(
        records(&blocks.schema, of, &manifests[..new], Some(blocks.sync)).map(|mut out| {
            out.reserve_exact(size + 36);
            zigzag(&mut out, count);
            zigzag(&mut out, length);
            kept.iter().for_each(|r| out.extend_from_slice(r));
            out.extend_from_slice(&blocks.sync);
            out
        }),
    )
}

/// Append the Avro `long` `n` (a zig-zag varint).
fn zigzag(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The blocks of a list a new list of `version` may carry, under `schema`.
struct Blocks<'a> {
    schema: std::sync::Arc<serde_avro_fast::Schema>,
    sync: [u8; 16],
    bytes: &'a [u8],
    records: usize,
}

/// The blocks of the list `bytes`, if a new list of `version` may carry them: a v2 list
/// under the very schema this crate writes, not compressed, of records in at most
/// [`MAX_BLOCKS`] blocks.
fn carriable(version: FormatVersion, bytes: &[u8]) -> Option<Blocks<'_>> {
    if version != FormatVersion::V2 {
        return None;
    }
    let schema = schema(version)?;
    let header = avro::header(bytes).ok()??;
    let plain = header.get(b"avro.codec").is_none_or(|c| c == b"null");
    (plain && header.get(b"avro.schema") == Some(schema.json().as_bytes())).then_some(())?;
    let sync = header.sync?;
    let blocks = &bytes[header.len..];
    let records = held(blocks, &sync)?;
    Some(Blocks {
        schema,
        sync,
        bytes: blocks,
        records,
    })
}

/// The v2 list `bytes` as a parent an append carries whole, when the append keeps every
/// one of its manifests as it is, without reading them into manifest files (issue 16:
/// at 100k files that read was the largest part of a commit that grows with the table).
/// Each record is read only for what decides that: its counts (a manifest without live
/// files is dropped; none may be negative), content and spec (no small manifests are
/// merged), sequence numbers (assigned) and path (text, not empty). `None` when the list
/// cannot be carried or the append would change its manifests; then it is read whole, as
/// before.
pub(crate) fn whole(bytes: &Bytes) -> Option<ParentList> {
    let blocks = carriable(FormatVersion::V2, bytes)?;
    let shapes =
        crate::spec::manifest_list::shape::shapes(blocks.bytes, &blocks.sync, blocks.records)?;
    (!crate::spec::manifest_list::merging::merges(shapes.into_iter())).then(|| ParentList {
        bytes: bytes.clone(),
        digest: (blocks.records, 0),
        whole: true,
    })
}

/// How many records `bytes` (a container file after its header) holds, if it is nothing
/// but at most [`MAX_BLOCKS`] blocks, each of records and ending with `sync`. (A block of
/// no records ends the file for some readers, Java's and apache-avro's, not for others.)
fn held(bytes: &[u8], sync: &[u8; 16]) -> Option<usize> {
    let (mut at, mut blocks, mut records) = (0, 0, 0usize);
    while at < bytes.len() {
        blocks += 1;
        let count = usize::try_from(avro::long(bytes, &mut at)?).ok()?;
        let size = usize::try_from(avro::long(bytes, &mut at)?).ok()?;
        (count > 0 && blocks <= MAX_BLOCKS).then_some(())?;
        at = at.checked_add(size)?;
        (bytes.get(at..at.checked_add(16)?)? == sync).then_some(())?;
        at += 16;
        records = records.checked_add(count)?;
    }
    Some(records)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use iceberg::spec::ManifestList;
    use xlake_storage::TableStore;

    use super::*;
    use crate::spec::manifest_list::write::sample_manifest;
    use crate::spec::manifest_list::write_manifest_list;

    /// A list carrying its parent's blocks reads back, with iceberg-rust's reader (which
    /// checks every block's sync marker) and with xlake's, as the new manifests followed
    /// by the parent's, exactly as the same list encoded whole.
    #[tokio::test]
    async fn a_carried_list_reads_as_the_list_encoded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let parent: Vec<_> = (1..30).map(|n| sample_manifest(n, None)).collect();
        let at = |name: &str| store.absolute(&format!("metadata/{name}.avro"));
        let none = HashSet::new();
        write_manifest_list(
            &store,
            &at("parent"),
            (8, Some(7)),
            (30, None),
            parent.clone(),
            &none,
            None,
        )
        .await
        .unwrap();
        let parent_bytes = store.get(&at("parent")).await.unwrap();
        let mut child = vec![sample_manifest(40, None), sample_manifest(41, None)];
        child.extend(parent.iter().cloned());
        let of = ListOf {
            snapshot_id: 9,
            parent: Some(8),
            sequence_number: 31,
            first_row_id: None,
        };
        let list = ParentList {
            bytes: parent_bytes.clone(),
            digest: digest(&parent),
            whole: false,
        };
        let carried = encode(of, &child[..2], &list).unwrap().unwrap();
        let whole = crate::spec::manifest_list::write::encode(of, &child)
            .unwrap()
            .unwrap();
        let read = |bytes: &[u8]| -> Vec<ManifestFile> {
            ManifestList::parse_with_version(bytes, FormatVersion::V2)
                .unwrap()
                .consume_entries()
                .into_iter()
                .collect()
        };
        assert_eq!(read(&carried), read(&whole));
        assert_eq!(read(&carried).len(), 31);
        let ours = crate::spec::manifest_list::read::manifests(&carried, "carried").unwrap();
        assert_eq!(ours, read(&whole));
        // The header is the child's own; the parent's blocks follow it unchanged.
        let blocks_of = |bytes: &[u8]| {
            let h = avro::header(bytes).unwrap().unwrap();
            (h.len, held(&bytes[h.len..], &h.sync.unwrap()))
        };
        let parent_blocks = &parent_bytes[blocks_of(&parent_bytes).0..];
        assert!(carried.ends_with(parent_blocks));
        assert_eq!(blocks_of(&carried).1, Some(31));
        let meta = apache_avro::Reader::new(&carried[..]).unwrap();
        assert_eq!(meta.user_metadata()["snapshot-id"], b"9");
        // No new manifest (a commit that changes nothing but its metadata): the header
        // and the parent's blocks, no empty block (which readers take for the end).
        let alone = encode(of, &[], &list).unwrap().unwrap();
        assert_eq!(alone.len(), blocks_of(&alone).0 + parent_blocks.len());
        assert_eq!(read(&alone), read(&parent_bytes));
        // The tail is the parent's only if its digest says so.
        assert_eq!(tail_of(&child, &list), Some(2));
        assert_eq!(tail_of(&child[1..], &list), Some(1));
        assert_eq!(tail_of(&child[..30], &list), None, "not the tail");
        assert_eq!(tail_of(&parent[1..], &list), None, "too short");
        // A parent of too many blocks, of blocks not ending with its marker, or of
        // another number of records than its manifests, is not carried.
        let mut chain = list;
        let mut manifests = parent.clone();
        // The list encoded whole is one block; each carried commit adds one.
        for n in 1..MAX_BLOCKS {
            let next = sample_manifest(100 + n as u32, None);
            let bytes = encode(of, std::slice::from_ref(&next), &chain);
            manifests.insert(0, next);
            chain = ParentList {
                bytes: bytes.unwrap().unwrap().into(),
                digest: digest(&manifests),
                whole: false,
            };
        }
        assert_eq!(blocks_of(&chain.bytes).1, Some(29 + MAX_BLOCKS - 1));
        assert_eq!(read(&chain.bytes).len(), 29 + MAX_BLOCKS - 1);
        let last = [sample_manifest(99, None)];
        let full = encode(of, &last, &chain).unwrap().unwrap();
        manifests.insert(0, last[0].clone());
        let full = ParentList {
            bytes: full.into(),
            digest: digest(&manifests),
            whole: false,
        };
        assert_eq!(blocks_of(&full.bytes).1, None, "{} blocks", MAX_BLOCKS + 1);
        assert!(encode(of, &[], &full).is_none(), "too many blocks");
        let mut broken = parent_bytes.to_vec();
        let end = broken.len() - 1;
        broken[end] ^= 1;
        let broken = ParentList {
            bytes: broken.into(),
            digest: digest(&parent),
            whole: false,
        };
        assert!(encode(of, &[], &broken).is_none(), "a marker changed");
        let fewer = ParentList {
            bytes: parent_bytes.clone(),
            digest: digest(&parent[1..]),
            whole: false,
        };
        assert!(encode(of, &[], &fewer).is_none(), "another count");
    }

    /// A list keeping some of its parent's manifests (a removal's: some rewritten, some
    /// dropped) copies their records and reads back, with iceberg-rust's reader and with
    /// xlake's, exactly as the same list encoded whole.
    #[tokio::test]
    async fn a_spliced_list_reads_as_the_list_encoded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let parent: Vec<_> = (1..30).map(|n| sample_manifest(n, None)).collect();
        let at = store.absolute("metadata/parent.avro");
        let none = HashSet::new();
        write_manifest_list(
            &store,
            &at,
            (8, Some(7)),
            (30, None),
            parent.clone(),
            &none,
            None,
        )
        .await
        .unwrap();
        let list = ParentList {
            bytes: store.get(&at).await.unwrap(),
            digest: digest(&parent),
            whole: false,
        };
        let of = ListOf {
            snapshot_id: 9,
            parent: Some(8),
            sequence_number: 31,
            first_row_id: None,
        };
        let read = |bytes: &[u8]| -> Vec<ManifestFile> {
            ManifestList::parse_with_version(bytes, FormatVersion::V2)
                .unwrap()
                .consume_entries()
                .into_iter()
                .collect()
        };
        let whole = |manifests: &[ManifestFile]| {
            crate::spec::manifest_list::write::encode(of, manifests)
                .unwrap()
                .unwrap()
        };
        // Two new manifests (one a rewrite of the parent's 4th), the parent's 4th and 11th
        // gone, the others kept in order.
        let mut child = vec![sample_manifest(40, None), sample_manifest(41, None)];
        let kept = parent
            .iter()
            .enumerate()
            .filter(|(n, _)| ![3, 10].contains(n));
        child.extend(kept.map(|(_, m)| m.clone()));
        let copied = spliced(of, &child, &list).unwrap().unwrap();
        assert_eq!(read(&copied), read(&whole(&child)));
        assert_eq!(read(&copied).len(), 29);
        let ours = crate::spec::manifest_list::read::manifests(&copied, "spliced").unwrap();
        let whole_ours = crate::spec::manifest_list::read::manifests(&whole(&child), "whole");
        assert_eq!(ours, whole_ours.unwrap());
        let h = avro::header(&copied).unwrap().unwrap();
        assert_eq!(held(&copied[h.len..], &h.sync.unwrap()), Some(29));
        // No new manifest: the kept records alone.
        let alone = spliced(of, &child[2..], &list).unwrap().unwrap();
        assert_eq!(read(&alone), read(&whole(&child[2..])));
        // A kept manifest that is not the parent's record as listed (another length) ends
        // the copied tail: it and those before it are encoded.
        let mut changed = child.clone();
        changed[20].manifest_length += 1;
        let partly = spliced(of, &changed, &list).unwrap().unwrap();
        assert_eq!(read(&partly), read(&whole(&changed)));
        // Out of the parent's order, or a last manifest that is not the parent's: encoded.
        let mut swapped = child.clone();
        swapped.swap(27, 28);
        let partly = spliced(of, &swapped, &list).unwrap().unwrap();
        assert_eq!(read(&partly), read(&whole(&swapped)));
        let mut last_new = child.clone();
        last_new.push(sample_manifest(42, None));
        assert!(spliced(of, &last_new, &list).is_none());
        let v3 = ListOf {
            first_row_id: Some(5),
            ..of
        };
        assert!(spliced(v3, &child, &list).is_none(), "a v3 list");
    }

    #[tokio::test]
    async fn other_parents_are_not_carried() {
        let of = ListOf {
            snapshot_id: 9,
            parent: Some(8),
            sequence_number: 31,
            first_row_id: None,
        };
        let new = [sample_manifest(1, None)];
        let raw = |bytes: &'static [u8]| ParentList {
            bytes: Bytes::from_static(bytes),
            digest: (0, 0),
            whole: false,
        };
        assert!(encode(of, &new, &raw(b"not avro")).is_none());
        assert!(encode(of, &new, &raw(b"Obj\x01")).is_none());
        let v3 = ListOf {
            first_row_id: Some(5),
            ..of
        };
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let list = store.absolute("metadata/p.avro");
        let none = HashSet::new();
        write_manifest_list(
            &store,
            &list,
            (8, Some(7)),
            (30, None),
            new.to_vec(),
            &none,
            None,
        )
        .await
        .unwrap();
        let bytes = store.get(&list).await.unwrap();
        let parent = |bytes: Bytes| ParentList {
            bytes,
            digest: digest(&new),
            whole: false,
        };
        assert!(
            encode(v3, &new, &parent(bytes.clone())).is_none(),
            "a v3 list"
        );
        // Another schema text (a list another writer wrote, with other spacing).
        let h = avro::header(&bytes).unwrap().unwrap();
        let schema = h.get(b"avro.schema").unwrap();
        let at = bytes
            .windows(schema.len())
            .position(|w| w == schema)
            .unwrap();
        let mut other = bytes.to_vec();
        other[at + schema.len() - 1] = b' ';
        assert!(encode(of, &new, &parent(other.into())).is_none());
    }

    /// An append carries a list whole, unread, exactly when the full read would keep all
    /// its manifests as they are: the list it writes is the one it writes after that read.
    #[tokio::test]
    async fn a_list_is_carried_whole_when_an_append_keeps_it_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let at = |name: &str| store.absolute(&format!("metadata/{name}.avro"));
        let none = HashSet::new();
        let write = |name: &'static str, manifests: Vec<ManifestFile>, parent| {
            let (store, none, path) = (&store, &none, at(name));
            async move {
                let written = write_manifest_list(
                    store,
                    &path,
                    (9, Some(8)),
                    (40, None),
                    manifests,
                    none,
                    parent,
                )
                .await
                .unwrap();
                (written.manifests, written.bytes)
            }
        };
        let parent: Vec<_> = (1..30).map(|n| sample_manifest(n, None)).collect();
        let (_, bytes) = write("parent", parent.clone(), None).await;
        let carry = whole(&bytes).expect("carried whole");
        assert_eq!((carry.digest.0, carry.whole), (29, true));
        let new = vec![sample_manifest(40, None)];
        let (listed, carried) = write("child", new.clone(), Some(&carry)).await;
        assert!(listed.is_none(), "the parent's records were not read");
        let mut all = new.clone();
        all.extend(parent.iter().cloned());
        let (_, encoded) = write("encoded", all.clone(), None).await;
        let read = |b: &[u8]| crate::spec::manifest_list::read::manifests(b, "list").unwrap();
        assert_eq!(read(&carried), read(&encoded));
        assert_eq!(read(&carried).len(), 30);
        // Read whole instead: a manifest with no live files (the full read drops it),
        // small manifests to merge, a list that is not one this crate carries.
        let mut empty = parent.clone();
        empty[3].added_files_count = Some(0);
        empty[3].existing_files_count = Some(0);
        let (_, bytes) = write("empty", empty, None).await;
        assert!(whole(&bytes).is_none(), "a manifest without live files");
        let small: Vec<_> = (1..=100)
            .map(|n| ManifestFile {
                partition_spec_id: 0,
                content: iceberg::spec::ManifestContentType::Data,
                added_files_count: Some(1),
                existing_files_count: Some(0),
                ..sample_manifest(n, None)
            })
            .collect();
        let (_, bytes) = write("small", small.clone(), None).await;
        assert!(crate::spec::manifest_list::merging::merges(
            small.iter().map(crate::spec::manifest_list::merging::shape)
        ));
        assert!(whole(&bytes).is_none(), "small manifests to merge");
        assert!(whole(&Bytes::from_static(b"not avro")).is_none());
    }
}
