//! Deletion vectors: which rows of a data file are deleted, read from the descriptor of an
//! `add` action (stored inline, in a file named by a UUID, or at an absolute path).

use serde::Deserialize;
use xlake_storage::TableStore;

/// `RoaringBitmapArray` magic number of a serialized deletion vector.
const MAGIC: u32 = 1_681_511_377;
const Z85: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// The `deletionVector` field of an add action.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// `u` (UUID-named file), `i` (inline) or `p` (absolute path).
    pub storage_type: String,
    /// Encoded UUID with optional prefix, inline bytes, or a path.
    pub path_or_inline_dv: String,
    /// Byte offset of the vector in its file.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Size of the serialized vector.
    pub size_in_bytes: u64,
    /// Number of deleted rows.
    pub cardinality: u64,
}

/// Decode Z85 (ZeroMQ base-85) text; its length must be a multiple of 5.
pub fn z85_decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(5) {
        return Err(format!(
            "Z85 text of length {} is not a multiple of 5",
            bytes.len()
        ));
    }
    let mut out = Vec::with_capacity(bytes.len() / 5 * 4);
    for chunk in bytes.chunks(5) {
        let mut value: u64 = 0;
        for &c in chunk {
            let digit = Z85
                .iter()
                .position(|&z| z == c)
                .ok_or_else(|| format!("{:?} is not a Z85 character", c as char))?;
            value = value * 85 + digit as u64;
        }
        let value = u32::try_from(value).map_err(|_| "Z85 group overflows 32 bits".to_string())?;
        out.extend_from_slice(&value.to_be_bytes());
    }
    Ok(out)
}

/// Deleted row positions of a serialized `RoaringBitmapArray`, ascending.
pub fn positions(serialized: &[u8]) -> Result<Vec<u64>, String> {
    let take = |at: usize, n: usize| {
        serialized
            .get(at..at + n)
            .ok_or("truncated deletion vector")
    };
    let magic = u32::from_le_bytes(take(0, 4)?.try_into().map_err(|_| "bad magic")?);
    if magic != MAGIC {
        return Err(format!("not a deletion vector (magic {magic})"));
    }
    let count = u64::from_le_bytes(take(4, 8)?.try_into().map_err(|_| "bad count")?);
    let mut reader = std::io::Cursor::new(&serialized[12..]);
    let mut out = Vec::new();
    for _ in 0..count {
        let mut key = [0u8; 4];
        std::io::Read::read_exact(&mut reader, &mut key)
            .map_err(|_| "truncated deletion vector")?;
        let high = u64::from(u32::from_le_bytes(key)) << 32;
        let bitmap = roaring::RoaringBitmap::deserialize_from(&mut reader)
            .map_err(|e| format!("corrupt deletion vector bitmap: {e}"))?;
        out.extend(bitmap.iter().map(|low| high | u64::from(low)));
    }
    Ok(out)
}

/// The file of a `u` descriptor, relative to the table root.
pub(crate) fn uuid_path(encoded: &str) -> Result<String, String> {
    let split = encoded
        .len()
        .checked_sub(20)
        .ok_or("deletion vector id shorter than 20 characters")?;
    let (prefix, id) = encoded.split_at(split);
    let bytes = z85_decode(id)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
    let name = format!("deletion_vector_{uuid}.bin");
    Ok(if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    })
}

/// Read the deleted row positions a descriptor names; checks the cardinality.
pub async fn read(store: &TableStore, d: &Descriptor) -> Result<Vec<u64>, String> {
    let serialized = match d.storage_type.as_str() {
        "i" => z85_decode(&d.path_or_inline_dv)?,
        "u" | "p" => {
            let path = if d.storage_type == "u" {
                uuid_path(&d.path_or_inline_dv)?
            } else {
                d.path_or_inline_dv.clone()
            };
            let offset = d.offset.unwrap_or(1);
            // At the offset: the size (4 bytes, big-endian), the vector, its CRC-32.
            let bytes = store
                .get_range(&path, offset..offset + 4 + d.size_in_bytes)
                .await
                .map_err(|e| format!("deletion vector file: {e}"))?;
            let size = u32::from_be_bytes(
                bytes
                    .get(..4)
                    .ok_or("truncated")?
                    .try_into()
                    .map_err(|_| "truncated")?,
            );
            if u64::from(size) != d.size_in_bytes {
                return Err(format!(
                    "{path}: vector of {size} bytes, the log says {}",
                    d.size_in_bytes
                ));
            }
            bytes[4..].to_vec()
        }
        other => return Err(format!("unknown deletion vector storage type {other:?}")),
    };
    let positions = positions(&serialized)?;
    if positions.len() as u64 != d.cardinality {
        return Err(format!(
            "deletion vector holds {} rows, the log says {}",
            positions.len(),
            d.cardinality
        ));
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z85_round_trip_of_the_spec_example() {
        // From the ZeroMQ Z85 spec: "HelloWorld" encodes 0x86 0x4F 0xD2 0x6F 0xB5 0x59 0xF7 0x5B.
        assert_eq!(
            z85_decode("HelloWorld").unwrap(),
            [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]
        );
        assert!(z85_decode("abc").is_err());
    }

    #[test]
    fn uuid_paths_keep_their_prefix() {
        let zeros = "0".repeat(20);
        assert_eq!(
            uuid_path(&zeros).unwrap(),
            "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
        );
        assert_eq!(
            uuid_path(&format!("ab{zeros}")).unwrap(),
            "ab/deletion_vector_00000000-0000-0000-0000-000000000000.bin"
        );
        assert!(uuid_path("short").is_err());
    }

    #[test]
    fn bitmap_array_positions() {
        let mut bitmap = roaring::RoaringBitmap::new();
        bitmap.insert(3);
        bitmap.insert(70_000);
        let mut bytes = MAGIC.to_le_bytes().to_vec();
        bytes.extend(1u64.to_le_bytes());
        bytes.extend(1u32.to_le_bytes());
        bitmap.serialize_into(&mut bytes).unwrap();
        assert_eq!(
            positions(&bytes).unwrap(),
            [(1 << 32) | 3, (1 << 32) | 70_000]
        );
        assert!(positions(&[0; 12]).is_err());
    }
}
