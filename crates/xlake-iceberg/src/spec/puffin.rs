//! Deletion vectors for format version 3: Puffin files of `deletion-vector-v1` blobs.
//!
//! A blob is the source's vector as stored: length (4 bytes, big-endian), magic
//! `D1 D3 39 64`, a portable 64-bit Roaring bitmap, CRC-32 (4 bytes, big-endian), the
//! framing Delta Lake uses on disk. A vector stored in a file is copied without decoding;
//! its length, CRC, magic and cardinality are checked on the way. One Puffin file per
//! snapshot holds every vector the snapshot adds; each becomes a position-delete entry with
//! `referenced_data_file`, `content_offset` and `content_size_in_bytes`.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, PuffinWriter, DELETION_VECTOR_V1};
use roaring::RoaringTreemap;
use xlake_model::{DeletionVector, VectorBytes};
use xlake_storage::TableStore;

use crate::spec::written::persist;

use crate::spec::error::CodecError;

/// The magic bytes of a serialized vector.
pub const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// Field id of `_pos` (Iceberg's reserved row position column): what a vector is about.
const ROW_POSITION_ID: i32 = i32::MAX - 2;
/// Bytes of the Puffin header (its magic) before the first blob.
const HEADER_LEN: u64 = 4;

/// One vector ready for a Puffin file: the framed blob and what it deletes from.
#[derive(Debug, Clone)]
pub struct VectorBlob {
    /// Location of the data file, as in its manifest entry.
    pub referenced_data_file: String,
    /// Deleted rows.
    pub cardinality: u64,
    /// The framed blob: length, magic, bitmap, CRC.
    pub framed: Vec<u8>,
}

/// The framed blob of `vector`, read from where the source stores it (stored vectors are
/// copied as they are), checked: framing, CRC, magic, cardinality, and no position at or
/// beyond `record_count`.
pub async fn read_vector(
    store: &TableStore,
    vector: &DeletionVector,
    record_count: u64,
) -> Result<Vec<u8>, CodecError> {
    let framed = match &vector.bytes {
        VectorBytes::Inline(bytes) => frame(bytes)?,
        VectorBytes::Stored { path, offset, size } => {
            let end = offset
                .checked_add(8)
                .and_then(|e| e.checked_add(*size))
                .ok_or_else(|| {
                    format!("deletion vector file {path}: offset {offset} and size {size} overflow")
                })?;
            let file_size = store
                .size(path)
                .await
                .map_err(|e| format!("deletion vector file {path}: {e}"))?
                .ok_or_else(|| format!("deletion vector file {path} does not exist"))?;
            if end > file_size {
                return Err(format!(
                    "deletion vector file {path}: the vector at offset {offset} of {size} bytes ends at {end}, past the file's end ({file_size} bytes)"
                ).into());
            }
            let bytes = store
                .get_range(path, *offset..end)
                .await
                .map_err(|e| format!("deletion vector file {path}: {e}"))?;
            check_framed(&bytes).map_err(|e| format!("deletion vector file {path}: {e}"))?;
            bytes.to_vec()
        }
    };
    let which = match &vector.bytes {
        VectorBytes::Inline(_) => "inline deletion vector".to_string(),
        VectorBytes::Stored { path, offset, .. } => {
            format!("deletion vector file {path} (offset {offset})")
        }
    };
    let bitmap = bitmap_of(&framed).map_err(|e| format!("{which}: {e}"))?;
    if bitmap.len() != vector.cardinality {
        return Err(format!(
            "{which}: the vector holds {} rows, the source's log says {}",
            bitmap.len(),
            vector.cardinality
        )
        .into());
    }
    if let Some(max) = bitmap.max().filter(|&m| m >= record_count) {
        return Err(format!("{which}: deletes row {max} of a file of {record_count} rows").into());
    }
    Ok(framed)
}

/// A framed blob for a serialized vector (magic and bitmap): length and CRC added.
pub fn frame(serialized: &[u8]) -> Result<Vec<u8>, CodecError> {
    let len = u32::try_from(serialized.len()).map_err(|_| "deletion vector over 4 GiB")?;
    let mut out = Vec::with_capacity(serialized.len() + 8);
    out.extend(len.to_be_bytes());
    out.extend_from_slice(serialized);
    out.extend(crc32fast::hash(serialized).to_be_bytes());
    Ok(out)
}

/// A framed blob deleting `positions` (for a source that gives decoded rows only).
pub fn frame_positions(positions: &[u64]) -> Result<Vec<u8>, CodecError> {
    let bitmap: RoaringTreemap = positions.iter().copied().collect();
    let mut serialized = MAGIC.to_vec();
    bitmap
        .serialize_into(&mut serialized)
        .map_err(CodecError::library)?;
    frame(&serialized)
}

/// Check the framing of a blob: its length field and its CRC-32.
pub fn check_framed(framed: &[u8]) -> Result<(), CodecError> {
    let (len, rest) = framed
        .split_first_chunk::<4>()
        .ok_or("truncated deletion vector")?;
    let (body, crc) = rest
        .split_last_chunk::<4>()
        .ok_or("truncated deletion vector")?;
    let len = u32::from_be_bytes(*len) as usize;
    if len != body.len() {
        return Err(format!(
            "vector length field says {len} bytes, the log says {}",
            body.len()
        )
        .into());
    }
    let (stored, computed) = (u32::from_be_bytes(*crc), crc32fast::hash(body));
    if stored != computed {
        return Err(
            format!("CRC-32 mismatch: stored {stored:08x}, computed {computed:08x}").into(),
        );
    }
    Ok(())
}

/// The bitmap of a framed blob.
pub fn bitmap_of(framed: &[u8]) -> Result<RoaringTreemap, CodecError> {
    let body = framed
        .get(4..framed.len().saturating_sub(4))
        .ok_or("truncated deletion vector")?;
    let vector = body
        .strip_prefix(&MAGIC)
        .ok_or("not a deletion vector (wrong magic)")?;
    let mut reader = vector;
    let bitmap = RoaringTreemap::deserialize_from(&mut reader)
        .map_err(|e| format!("corrupt deletion vector bitmap: {e}"))?;
    if !reader.is_empty() {
        return Err(format!("{} bytes after the deletion vector bitmap", reader.len()).into());
    }
    Ok(bitmap)
}

/// Write one Puffin file of `blobs` at `location`; returns each blob's (offset, length),
/// in order, as its footer records them.
pub async fn write_puffin(
    store: &TableStore,
    location: &str,
    blobs: Vec<VectorBlob>,
) -> Result<Vec<(u64, u64)>, CodecError> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(CodecError::library)?;
    let properties = HashMap::from([(
        iceberg::puffin::CREATED_BY_PROPERTY.to_string(),
        format!("xlake {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output, properties, false)
        .await
        .map_err(CodecError::library)?;
    let mut at = HEADER_LEN;
    let mut placed = Vec::with_capacity(blobs.len());
    for b in blobs {
        let len = b.framed.len() as u64;
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![ROW_POSITION_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(b.framed)
            .properties(HashMap::from([
                ("referenced-data-file".to_string(), b.referenced_data_file),
                ("cardinality".to_string(), b.cardinality.to_string()),
            ]))
            .build();
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(CodecError::library)?;
        placed.push((at, len));
        at += len;
    }
    writer.close().await.map_err(CodecError::library)?;
    persist(store, &io, location).await?;
    Ok(placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_catches_a_bad_crc() {
        let framed = frame_positions(&[3, 70_000, 1 << 33]).unwrap();
        check_framed(&framed).unwrap();
        assert_eq!(&framed[4..8], &MAGIC);
        let bitmap = bitmap_of(&framed).unwrap();
        assert_eq!(bitmap.iter().collect::<Vec<_>>(), [3, 70_000, 1 << 33]);
        let mut bad = framed.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(check_framed(&bad)
            .unwrap_err()
            .to_string()
            .contains("CRC-32"));
        let mut short = framed;
        short[3] += 1;
        assert!(check_framed(&short)
            .unwrap_err()
            .to_string()
            .contains("length"));
    }
}
