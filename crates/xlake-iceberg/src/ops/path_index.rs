//! The path index: which manifest holds which file, carried between versions, so that a
//! commit removing old files reads only the manifests holding them, not every manifest
//! back to them (issue 46).
//!
//! It is the process's [`crate::ops::live_paths::PathCache`] written down: per manifest of the
//! current list that the writing process had read or written, the sorted 128-bit keys
//! ([`xlake_model::path_key`]) of the paths its live entries are about. A commit that
//! removes files writes one (`metadata/<uuid>-paths.bin`, after its last snapshot, in a
//! run of batches by its last batch only) and names it in the table property
//! [`PATH_INDEX`]; later
//! versions carry the property as they carry every property. Appends neither read nor
//! write it. A later removal loads it into its cache before planning, so a manifest it
//! covers is read only if it holds a removed file. Manifests are immutable, so an entry
//! never goes stale: manifests the index covers that the list no longer holds are never
//! asked for, and manifests it does not cover (added or merged since) are read as
//! before. An index that cannot be read, or that no manifest of the list matches, only
//! costs the reads it would have saved (the scan remains the fallback).
//!
//! Layout, little-endian: `XLPI2`, the manifest count (u32), then per manifest its
//! location's length (u32), the location, its key count (u32) and the keys (u64 each:
//! [`xlake_model::short_path_key`]; a key only says where to look, see
//! [`PathKeys`]). `XLPI1`, written before, holds 128-bit [`xlake_model::path_key`]s,
//! whose high halves are the short keys: it is read as well. (A build that knows only
//! `XLPI1` sets an `XLPI2` index aside and reads the manifests.)

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use iceberg::spec::TableMetadata;

use crate::error::Result;
use crate::ops::live_paths::PathKeys;
use crate::ops::plan::Draft;
use crate::ops::table::IcebergTable;
use crate::spec::layout::METADATA_DIR;

/// The table property naming the current path index (table-relative).
pub const PATH_INDEX: &str = "xlake.path-index";

const MAGIC: &[u8] = b"XLPI2";

/// The index as written before, with 128-bit keys.
const MAGIC_V1: &[u8] = b"XLPI1";

/// A fresh path index file's table-relative path.
pub(crate) fn path_index_file() -> String {
    format!("{METADATA_DIR}/{}-paths.bin", uuid::Uuid::new_v4())
}

/// The path index `metadata` names, if the name is one xlake writes
/// (`metadata/<uuid>-paths.bin`). Any writer can set a table property: a value naming
/// anything else (a source file, a path outside the table) is never read, moved or kept.
pub fn named_path_index(metadata: &TableMetadata) -> Option<&str> {
    let name = metadata.properties().get(PATH_INDEX)?;
    let ours = name.ends_with("-paths.bin") && crate::spec::layout::is_written_by_xlake(name);
    if !ours {
        tracing::warn!(property = PATH_INDEX, value = %name, "not a path index xlake writes: ignored");
    }
    ours.then_some(name.as_str())
}

/// The index of `manifests` (location, keys), encoded.
fn encode(manifests: &[(String, Arc<PathKeys>)]) -> Bytes {
    let keys: usize = manifests.iter().map(|(_, k)| k.keys().len()).sum();
    let mut out = BytesMut::with_capacity(16 + keys * 8 + manifests.len() * 96);
    out.put_slice(MAGIC);
    out.put_u32_le(manifests.len() as u32);
    for (location, paths) in manifests {
        out.put_u32_le(location.len() as u32);
        out.put_slice(location.as_bytes());
        out.put_u32_le(paths.keys().len() as u32);
        for key in paths.keys() {
            out.put_u64_le(*key);
        }
    }
    out.freeze()
}

/// The manifests of an encoded index with their sorted keys; an error names what is wrong.
fn decode(bytes: &[u8]) -> std::result::Result<Vec<(String, Vec<u64>)>, String> {
    let (mut rest, width) = match (bytes.strip_prefix(MAGIC), bytes.strip_prefix(MAGIC_V1)) {
        (Some(rest), _) => (rest, 8),
        (None, Some(rest)) => (rest, 16),
        (None, None) => return Err("not a path index (no XLPI2 or XLPI1 header)".into()),
    };
    let mut take = |n: usize| -> std::result::Result<&[u8], String> {
        if rest.len() < n {
            return Err("truncated path index".into());
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let u32_at = |b: &[u8]| b.try_into().map(u32::from_le_bytes).map_err(|_| "bad u32");
    let count = u32_at(take(4)?)?;
    let mut out = Vec::new();
    for _ in 0..count {
        let len = u32_at(take(4)?)? as usize;
        let location = std::str::from_utf8(take(len)?).map_err(|e| e.to_string())?;
        let n = u32_at(take(4)?)? as usize;
        let raw = take(n.checked_mul(width).ok_or("bad key count")?)?;
        // A 128-bit key's high half is its short key: the last 8 of its 16 bytes.
        let keys: Vec<u64> = raw
            .chunks_exact(width)
            .filter_map(|c| c[width - 8..].try_into().ok().map(u64::from_le_bytes))
            .collect();
        if !keys.is_sorted() {
            return Err(format!("keys of {location} not sorted"));
        }
        out.push((location.to_string(), keys));
    }
    Ok(out)
}

impl IcebergTable {
    /// Load the path index `metadata` names into this process's path cache, once per
    /// index. A failure to read or decode it is logged and costs only reads.
    pub(crate) async fn load_path_index(&self, metadata: Option<&TableMetadata>) {
        let Some(path) = metadata.and_then(named_path_index) else {
            return;
        };
        let loaded = self.path_index_loaded.lock().map(|l| l.contains(path));
        if loaded.unwrap_or(true) {
            return;
        }
        let decoded = match self.store.get_written_once(path).await {
            Ok(bytes) => decode(&bytes),
            Err(e) => Err(e.to_string()),
        };
        match decoded {
            Ok(manifests) => {
                let mut indexed = self.path_indexed.lock().ok();
                for (location, keys) in manifests {
                    // What this process read or wrote itself stays as it knows it.
                    if self.cached_paths(&location).is_none() {
                        self.cache_sorted_keys(&location, keys);
                        indexed.as_mut().map(|i| i.insert(location));
                    }
                }
            }
            Err(reason) => {
                let file = self.store.absolute(path);
                tracing::warn!(table = %self.table(), file = %file, %reason, "path index not used: manifests are read instead");
            }
        }
        if let Ok(mut loaded) = self.path_index_loaded.lock() {
            loaded.insert(path.to_string());
        }
    }

    /// Whether the path cache holds what only a path index said.
    pub(crate) fn uses_path_index(&self) -> bool {
        self.path_indexed.lock().is_ok_and(|i| !i.is_empty())
    }

    /// Drop from the path cache what only a path index said; whether there was any.
    pub(crate) fn forget_path_index(&self) -> bool {
        let indexed = match self.path_indexed.lock() {
            Ok(mut indexed) => std::mem::take(&mut *indexed),
            Err(_) => return false,
        };
        if let Ok(mut cache) = self.live_paths.lock() {
            for manifest in &indexed {
                cache.remove(manifest);
            }
        }
        !indexed.is_empty()
    }

    /// Write the path index `draft` names (see [`Draft::path_index`]): of the manifests of
    /// its last list this process knows the paths of.
    pub(crate) async fn write_path_index(&self, draft: &mut Draft<'_>) -> Result<()> {
        let (Some(path), Some(list)) = (draft.path_index.take(), draft.last_list.as_ref()) else {
            return Ok(());
        };
        // Only where a snapshot staged names it (a failed commit's plan named it too).
        let named = draft
            .metadata
            .as_ref()
            .and_then(|m| m.properties().get(PATH_INDEX));
        if named != Some(&path) {
            return Ok(());
        }
        let manifests = match &list.decoded {
            Some(decoded) => decoded.clone(),
            None => crate::spec::manifest_list::read::manifests(&list.bytes, &list.location)
                .map_err(|e| self.corrupt(&list.location, e))?,
        };
        let known: Vec<(String, Arc<PathKeys>)> = manifests
            .iter()
            .map(|m| m.manifest_path.as_str())
            .filter_map(|l| self.cached_paths(l).map(|k| (l.to_string(), k)))
            .collect();
        self.store
            .put_if_absent(&path, encode(&known))
            .await
            .map_err(|e| self.write_failed(&path)(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_decodes_as_encoded_and_refuses_damage() {
        let a = Arc::new(PathKeys::from_sorted(vec![1, 5, u64::MAX]));
        let b = Arc::new(PathKeys::from_sorted(Vec::new()));
        let bytes = encode(&[("s3://b/t/metadata/a-m0.avro".into(), a), ("x".into(), b)]);
        assert!(bytes.starts_with(b"XLPI2"));
        let decoded = decode(&bytes).unwrap();
        assert_eq!(
            decoded,
            vec![
                (
                    "s3://b/t/metadata/a-m0.avro".to_string(),
                    vec![1, 5, u64::MAX]
                ),
                ("x".to_string(), vec![]),
            ]
        );
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(b"XLPI2").is_err());
        assert!(decode(b"XLPI3\0\0\0\0").is_err());
        let mut unsorted = BytesMut::from(MAGIC);
        unsorted.put_u32_le(1);
        unsorted.put_u32_le(1);
        unsorted.put_slice(b"m");
        unsorted.put_u32_le(2);
        unsorted.put_u64_le(9);
        unsorted.put_u64_le(3);
        assert!(decode(&unsorted).is_err());
    }

    /// An index written before the short keys (`XLPI1`, 128-bit keys) gives their high
    /// halves, which are the short keys of the same paths.
    #[test]
    fn an_index_of_128_bit_keys_is_read_as_short_keys() {
        let paths = ["day=1/a.parquet", "day=2/b.parquet", "c.parquet"];
        let mut keys: Vec<u128> = paths.iter().map(|p| xlake_model::path_key(p)).collect();
        keys.sort_unstable();
        let mut old = BytesMut::from(MAGIC_V1);
        old.put_u32_le(1);
        old.put_u32_le(1);
        old.put_slice(b"m");
        old.put_u32_le(keys.len() as u32);
        for key in &keys {
            old.put_u128_le(*key);
        }
        let decoded = decode(&old).unwrap();
        let read = PathKeys::from_sorted(decoded[0].1.clone());
        assert!(paths.iter().all(|p| read.may_hold(p)));
        assert!(!read.may_hold("d.parquet"));
        assert!(decode(&old[..old.len() - 1]).is_err());
    }
}
