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

/// Decode Z85 (ZeroMQ base-85) text; its length must be a multiple of 5 and every group
/// must fit 32 bits.
pub fn z85_decode(text: &str) -> Result<Vec<u8>, String> {
    let groups = z85_groups(text)?;
    groups
        .iter()
        .map(|&g| u32::try_from(g).map_err(|_| "Z85 group overflows 32 bits".to_string()))
        .collect::<Result<Vec<u32>, String>>()
        .map(|g| g.iter().flat_map(|v| v.to_be_bytes()).collect())
}

/// Decode the Z85 text of an inline deletion vector of `size` bytes, as Delta's reference
/// codec (`Codec.Base85Codec.decodeBytes`) does: the text encodes `size` bytes padded to
/// a multiple of 4, each group is taken modulo 2^32, and only the first `size` bytes are
/// kept. Some writers fill the padded last group so that it does not fit 32 bits; Delta
/// engines read those vectors, so the last group may wrap. Every other group must fit,
/// and the text must hold exactly the groups `size` bytes need.
pub fn z85_decode_sized(text: &str, size: u64) -> Result<Vec<u8>, String> {
    let groups = z85_groups(text)?;
    let needed = size.div_ceil(4);
    if groups.len() as u64 != needed {
        return Err(format!(
            "inline vector of {} Z85 characters cannot hold {size} bytes",
            text.len()
        ));
    }
    let last = groups.len().saturating_sub(1);
    let mut out = Vec::with_capacity(groups.len() * 4);
    for (i, &g) in groups.iter().enumerate() {
        let value = match u32::try_from(g) {
            Ok(v) => v,
            // The reference's `sum.toInt`: the low 32 bits.
            Err(_) if i == last => g as u32,
            Err(_) => {
                return Err(format!(
                    "Z85 group {i} of {} overflows 32 bits",
                    groups.len()
                ))
            }
        };
        out.extend_from_slice(&value.to_be_bytes());
    }
    out.truncate(usize::try_from(size).map_err(|_| "vector too large")?);
    Ok(out)
}

/// The values of the 5-character groups of Z85 text (each below 85^5, so they may
/// exceed 32 bits).
fn z85_groups(text: &str) -> Result<Vec<u64>, String> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(5) {
        return Err(format!(
            "Z85 text of length {} is not a multiple of 5",
            bytes.len()
        ));
    }
    bytes
        .chunks(5)
        .map(|chunk| {
            chunk.iter().try_fold(0u64, |value, &c| {
                let digit = Z85
                    .iter()
                    .position(|&z| z == c)
                    .ok_or_else(|| format!("{:?} is not a Z85 character", c as char))?;
                Ok(value * 85 + digit as u64)
            })
        })
        .collect()
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
        "i" => z85_decode_sized(&d.path_or_inline_dv, d.size_in_bytes)?,
        "u" | "p" => {
            let path = if d.storage_type == "u" {
                uuid_path(&d.path_or_inline_dv)?
            } else {
                d.path_or_inline_dv.clone()
            };
            let offset = d.offset.unwrap_or(1);
            let end = offset
                .checked_add(4)
                .and_then(|e| e.checked_add(d.size_in_bytes))
                .ok_or("offset and size overflow")?;
            // At the offset: the size (4 bytes, big-endian), the vector, its CRC-32.
            let bytes = store
                .get_range(&path, offset..end)
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
    counted_positions(&serialized, d.cardinality)
}

/// The positions of a serialized vector that must hold `cardinality` rows.
fn counted_positions(serialized: &[u8], cardinality: u64) -> Result<Vec<u64>, String> {
    let positions = positions(serialized)?;
    if positions.len() as u64 != cardinality {
        return Err(format!(
            "deletion vector holds {} rows, the log says {cardinality}",
            positions.len()
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

    /// One Z85 group of a value below 85^5 (the reference encoder's digits).
    fn group(mut value: u64) -> String {
        let mut digits = [0u8; 5];
        for d in digits.iter_mut().rev() {
            *d = Z85[(value % 85) as usize];
            value /= 85;
        }
        String::from_utf8(digits.to_vec()).unwrap()
    }

    /// Z85 of `bytes` zero-padded to a multiple of 4, as Delta's `encodeBytes` writes it.
    fn encode(bytes: &[u8]) -> String {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(4) * 4, 0);
        padded
            .chunks(4)
            .map(|c| group(u64::from(u32::from_be_bytes(c.try_into().unwrap()))))
            .collect()
    }

    /// A serialized `RoaringBitmapArray` of these positions (all below 2^32).
    fn serialized(positions: &[u32]) -> Vec<u8> {
        let bitmap: roaring::RoaringBitmap = positions.iter().copied().collect();
        let mut bytes = MAGIC.to_le_bytes().to_vec();
        bytes.extend(1u64.to_le_bytes());
        bytes.extend(0u32.to_le_bytes());
        bitmap.serialize_into(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn inline_vectors_decode_like_the_reference() {
        // 3 positions: 34 bytes, so the last group holds 2 bytes and 2 of padding.
        let bytes = serialized(&[3, 5, 7]);
        assert_eq!(bytes.len() % 4, 2);
        let size = bytes.len() as u64;
        let text = encode(&bytes);
        assert_eq!(z85_decode_sized(&text, size).unwrap(), bytes);
        assert_eq!(counted_positions(&bytes, 3).unwrap(), [3, 5, 7]);

        // The same vector with its last group written 2^32 higher: Delta's decoder keeps
        // the low 32 bits (`sum.toInt`), so it reads the same bytes; so must we.
        let last = u64::from(u32::from_be_bytes(
            [&bytes[bytes.len() - 2..], &[0, 0][..]]
                .concat()
                .try_into()
                .unwrap(),
        ));
        assert!(
            last + (1 << 32) < 85u64.pow(5),
            "the wrapped group must fit 5 digits"
        );
        let wrapped = format!("{}{}", &text[..text.len() - 5], group(last + (1 << 32)));
        assert!(matches!(z85_decode(&wrapped), Err(e) if e.contains("overflows")));
        let decoded = z85_decode_sized(&wrapped, size).unwrap();
        assert_eq!(decoded, bytes);
        assert_eq!(counted_positions(&decoded, 3).unwrap(), [3, 5, 7]);
    }

    #[test]
    fn malformed_inline_vectors_are_refused() {
        let bytes = serialized(&[3, 5, 7]);
        let size = bytes.len() as u64;
        let text = encode(&bytes);
        // The log's cardinality must match what the vector holds.
        let err = counted_positions(&bytes, 4).unwrap_err();
        assert!(err.contains("holds 3 rows, the log says 4"), "{err}");
        // An overflow anywhere but in the last group (the second: the bitmap count's low
        // bytes, small enough to be written 2^32 higher in 5 digits).
        let second = u64::from(u32::from_be_bytes(bytes[4..8].try_into().unwrap()));
        let wrapped = format!("{}{}{}", &text[..5], group(second + (1 << 32)), &text[10..]);
        let err = z85_decode_sized(&wrapped, size).unwrap_err();
        assert!(err.contains("group 1 of 10 overflows"), "{err}");
        // Not Z85, not whole groups, or not the size the log gives.
        assert!(z85_decode_sized(&text.replace(&text[..1], "~"), size).is_err());
        assert!(z85_decode_sized(&text[..text.len() - 1], size).is_err());
        assert!(z85_decode_sized(&text, size + 4).is_err());
        assert!(z85_decode_sized(&text, size - 4).is_err());
        assert!(z85_decode_sized(&format!("{text}00000"), size).is_err());
        // Decodable text that is no vector.
        let garbage = z85_decode_sized("HelloWorld", 8).unwrap();
        assert!(counted_positions(&garbage, 0).is_err());
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
