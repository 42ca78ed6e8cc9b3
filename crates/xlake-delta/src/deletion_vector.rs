//! Deletion vectors: which rows of a data file are deleted, read from the descriptor of an
//! `add` action (stored inline, in a file named by a UUID, or at an absolute path).

use serde::Deserialize;
use xlake_storage::TableStore;

use crate::error::Reason;

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
pub fn z85_decode(text: &str) -> Result<Vec<u8>, Reason> {
    Ok(whole_groups(&z85_groups(text.as_bytes())?)?)
}

/// How a writer turned an inline vector's bytes into Z85 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Zero-padded to a multiple of 4 bytes, every group plain (delta-spark's
    /// `Base85Codec.encodeBytes`); the bytes past `sizeInBytes` are padding.
    Padded,
    /// The `z85` crate's `encode` (delta-rs, delta-kernel-rs): a last group that begins
    /// with k `#` marks stands for its last 4-k bytes.
    Tail,
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Padded => "zero-padded groups (delta-spark)",
            Self::Tail => "a '#'-marked last group (the z85 crate)",
        })
    }
}

/// The bytes of `size` that the Z85 text of an inline vector reads as, under each encoding
/// that can have written it. A padded reading needs every group to fit 32 bits; a tail
/// reading needs 1-3 `#` marks leading the last group and a tail that fits its bytes. Since
/// `#` is the largest Z85 digit, a group it leads never fits 32 bits, so at most one
/// reading exists today; the caller still checks each reading it gets. Groups are never
/// taken modulo 2^32. An error when no encoding reads the text as `size` bytes.
pub fn inline_readings(text: &str, size: u64) -> Result<Vec<(Encoding, Vec<u8>)>, Reason> {
    let size = usize::try_from(size).map_err(|_| "vector too large")?;
    let mut readings = Vec::new();
    let mut refusals = Vec::new();
    for encoding in [Encoding::Padded, Encoding::Tail] {
        let read = match encoding {
            Encoding::Padded => padded(text, size),
            Encoding::Tail => tail(text, size),
        };
        match read {
            Ok(Some(bytes)) => readings.push((encoding, bytes)),
            Ok(None) => {}
            Err(e) => refusals.push(e),
        }
    }
    if readings.is_empty() {
        return Err(refusals.join("; ").into());
    }
    Ok(readings)
}

/// Zero-padded groups: exactly the groups `size` bytes need, each within 32 bits.
fn padded(text: &str, size: usize) -> Result<Option<Vec<u8>>, String> {
    let groups = z85_groups(text.as_bytes())?;
    if groups.len() != size.div_ceil(4) {
        return Err(format!(
            "inline vector of {} Z85 characters cannot hold {size} bytes",
            text.len()
        ));
    }
    let mut out = whole_groups(&groups)?;
    out.truncate(size);
    Ok(Some(out))
}

/// The z85 crate's tail; `None` when the last group does not begin with `#`.
fn tail(text: &str, size: usize) -> Result<Option<Vec<u8>>, String> {
    let bytes = text.as_bytes();
    let Some(last) = bytes.len().checked_sub(5).and_then(|at| bytes.get(at..)) else {
        return Ok(None);
    };
    let marks = last.iter().take_while(|&&c| c == b'#').count();
    if marks == 0 || !bytes.len().is_multiple_of(5) {
        return Ok(None);
    }
    if marks > 3 {
        return Err("a last Z85 group of more than three '#' marks".into());
    }
    let kept = 4 - marks;
    let whole = bytes.len() / 5 - 1;
    if whole * 4 + kept != size {
        return Err(format!(
            "inline vector of {} Z85 characters with {marks} padding marks cannot hold {size} bytes",
            text.len()
        ));
    }
    let groups = z85_groups(&bytes[..whole * 5])?;
    let mut out = whole_groups(&groups)?;
    let value = z85_digits(&last[marks..])?;
    if value >= 1u64 << (8 * kept) {
        return Err(format!("the last Z85 group does not fit its {kept} bytes"));
    }
    out.extend_from_slice(&value.to_be_bytes()[8 - kept..]);
    Ok(Some(out))
}

/// Big-endian bytes of groups that must each fit 32 bits.
fn whole_groups(groups: &[u64]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(groups.len() * 4);
    for (i, &g) in groups.iter().enumerate() {
        let value = u32::try_from(g)
            .map_err(|_| format!("Z85 group {i} of {} overflows 32 bits", groups.len()))?;
        out.extend_from_slice(&value.to_be_bytes());
    }
    Ok(out)
}

/// The values of the 5-character groups of Z85 text (each below 85^5, so they may
/// exceed 32 bits).
fn z85_groups(bytes: &[u8]) -> Result<Vec<u64>, String> {
    if !bytes.len().is_multiple_of(5) {
        return Err(format!(
            "Z85 text of length {} is not a multiple of 5",
            bytes.len()
        ));
    }
    bytes.chunks(5).map(z85_digits).collect()
}

/// The value of up to 5 Z85 digits.
fn z85_digits(digits: &[u8]) -> Result<u64, String> {
    digits.iter().try_fold(0u64, |value, &c| {
        let digit = Z85
            .iter()
            .position(|&z| z == c)
            .ok_or_else(|| format!("{:?} is not a Z85 character", char::from(c)))?;
        Ok(value * 85 + digit as u64)
    })
}

/// Deleted row positions of a serialized `RoaringBitmapArray`, ascending.
pub fn positions(serialized: &[u8]) -> Result<Vec<u64>, Reason> {
    let take = |at: usize, n: usize| {
        serialized
            .get(at..at + n)
            .ok_or("truncated deletion vector")
    };
    let magic = u32::from_le_bytes(take(0, 4)?.try_into().map_err(|_| "bad magic")?);
    if magic != MAGIC {
        return Err(format!("not a deletion vector (magic {magic})").into());
    }
    let count = u64::from_le_bytes(take(4, 8)?.try_into().map_err(|_| "bad count")?);
    let mut reader = std::io::Cursor::new(&serialized[12..]);
    let mut out = Vec::new();
    let mut previous: Option<u32> = None;
    for _ in 0..count {
        let mut key = [0u8; 4];
        std::io::Read::read_exact(&mut reader, &mut key)
            .map_err(|_| "truncated deletion vector")?;
        let key = u32::from_le_bytes(key);
        // Readers differ on a repeated key (delta-rs keeps the last bitmap): never guess.
        if previous.is_some_and(|p| p >= key) {
            return Err(format!(
                "deletion vector bitmap keys out of order ({key} after {})",
                previous.unwrap_or_default()
            )
            .into());
        }
        previous = Some(key);
        let high = u64::from(key) << 32;
        let bitmap = roaring::RoaringBitmap::deserialize_from(&mut reader)
            .map_err(|e| Reason::library(e).context("corrupt deletion vector bitmap"))?;
        out.extend(bitmap.iter().map(|low| high | u64::from(low)));
    }
    Ok(out)
}

/// The file of a `u` descriptor, relative to the table root: an optional prefix, then
/// the UUID in 20 Z85 characters (text that is not is refused, whatever its characters).
pub fn uuid_path(encoded: &str) -> Result<String, Reason> {
    let split = encoded
        .len()
        .checked_sub(20)
        .ok_or("deletion vector id shorter than 20 characters")?;
    let (Some(prefix), Some(id)) = (encoded.get(..split), encoded.get(split..)) else {
        return Err(
            format!("deletion vector id {encoded:?} does not end in 20 Z85 characters").into(),
        );
    };
    let hex: String = z85_decode(id)?.iter().map(|b| format!("{b:02x}")).collect();
    // 20 Z85 characters are 16 bytes, 32 hex digits.
    let part = |r: std::ops::Range<usize>| hex.get(r).unwrap_or_default();
    let name = format!(
        "deletion_vector_{}-{}-{}-{}-{}.bin",
        part(0..8),
        part(8..12),
        part(12..16),
        part(16..20),
        part(20..32)
    );
    Ok(if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    })
}

/// The serialized vector an inline descriptor holds, and its rows: the one reading of its
/// text ([`inline_readings`]) that is a valid vector of the declared cardinality whose
/// rows all lie below `num_records` (the file's row count, when the log gives it). Two
/// valid readings that differ are refused with both row sets: never a guess.
pub fn inline_vector(
    d: &Descriptor,
    num_records: Option<u64>,
) -> Result<(Vec<u8>, Vec<u64>), Reason> {
    let readings = inline_readings(&d.path_or_inline_dv, d.size_in_bytes)?
        .into_iter()
        .map(|(encoding, bytes)| {
            let rows = valid_rows(&bytes, d.cardinality, num_records);
            (encoding, bytes, rows)
        })
        .collect();
    choose(readings)
}

/// A reading of inline text: how, the bytes, and its rows if they make a valid vector.
type Reading = (Encoding, Vec<u8>, Result<Vec<u64>, Reason>);

/// The bytes and rows of the valid readings, if they agree; else why not (the one
/// reading's reason, its cause kept; or every reading's, joined).
fn choose(readings: Vec<Reading>) -> Result<(Vec<u8>, Vec<u64>), Reason> {
    let several = readings.len() > 1;
    let mut valid: Vec<(Encoding, Vec<u8>, Vec<u64>)> = Vec::new();
    let mut refusals = Vec::new();
    for (encoding, bytes, rows) in readings {
        match rows {
            Ok(rows) => valid.push((encoding, bytes, rows)),
            Err(e) if several => refusals.push(e.context(format_args!("read as {encoding}"))),
            Err(e) => refusals.push(e),
        }
    }
    let mut valid = valid.into_iter();
    let Some((first, bytes, rows)) = valid.next() else {
        if refusals.len() == 1 {
            if let Some(only) = refusals.pop() {
                return Err(only);
            }
        }
        let all: Vec<String> = refusals.iter().map(Reason::to_string).collect();
        return Err(all.join("; ").into());
    };
    if let Some((other, _, other_rows)) = valid.find(|(_, _, r)| *r != rows) {
        return Err(format!(
            "the inline vector reads two ways, as rows {} ({first}) and as rows {} ({other}); refusing to guess",
            row_list(&rows),
            row_list(&other_rows)
        )
        .into());
    }
    Ok((bytes, rows))
}

/// Rows for a message: the first ten, and how many more.
fn row_list(rows: &[u64]) -> String {
    let shown: Vec<String> = rows.iter().take(10).map(u64::to_string).collect();
    match rows.len() {
        n if n > 10 => format!("[{}, … {} more]", shown.join(", "), n - 10),
        _ => format!("[{}]", shown.join(", ")),
    }
}

/// The rows of a serialized vector that must hold `cardinality` rows, all below
/// `num_records` when known.
fn valid_rows(
    serialized: &[u8],
    cardinality: u64,
    num_records: Option<u64>,
) -> Result<Vec<u64>, Reason> {
    let rows = counted_positions(serialized, cardinality)?;
    match (num_records, rows.last()) {
        (Some(n), Some(&last)) if last >= n => {
            Err(format!("deletes row {last} of a file of {n} rows").into())
        }
        _ => Ok(rows),
    }
}

/// Read the deleted row positions a descriptor names; checks the cardinality and, when
/// the log gives the file's row count (`num_records`), that every row lies in the file.
pub async fn read(
    store: &TableStore,
    d: &Descriptor,
    num_records: Option<u64>,
) -> Result<Vec<u64>, Reason> {
    let serialized = match d.storage_type.as_str() {
        "i" => return inline_vector(d, num_records).map(|(_, rows)| rows),
        "u" | "p" => {
            let path = if d.storage_type == "u" {
                uuid_path(&d.path_or_inline_dv)?
            } else {
                d.path_or_inline_dv.clone()
            };
            stored_vector(store, &path, d).await?
        }
        other => return Err(format!("unknown deletion vector storage type {other:?}").into()),
    };
    valid_rows(&serialized, d.cardinality, num_records)
}

/// The serialized vector at the descriptor's offset in `path`: after its size (4 bytes,
/// big-endian, which must be the log's), before its CRC-32.
async fn stored_vector(store: &TableStore, path: &str, d: &Descriptor) -> Result<Vec<u8>, Reason> {
    let offset = d.offset.unwrap_or(1);
    let end = offset
        .checked_add(4)
        .and_then(|e| e.checked_add(d.size_in_bytes))
        .ok_or("offset and size overflow")?;
    let bytes = store
        .get_range(path, offset..end)
        .await
        .map_err(Reason::within("deletion vector file"))?;
    let size = bytes
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or("truncated")?;
    if u64::from(size) != d.size_in_bytes {
        return Err(format!(
            "{path}: vector of {size} bytes, the log says {}",
            d.size_in_bytes
        )
        .into());
    }
    Ok(bytes[4..].to_vec())
}

/// The positions of a serialized vector that must hold `cardinality` rows.
fn counted_positions(serialized: &[u8], cardinality: u64) -> Result<Vec<u64>, Reason> {
    let positions = positions(serialized)?;
    if positions.len() as u64 != cardinality {
        return Err(format!(
            "deletion vector holds {} rows, the log says {cardinality}",
            positions.len()
        )
        .into());
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::actions::deletion_vector::{
        DeletionVectorDescriptor, DeletionVectorStorageType,
    };

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

    /// Z85 of `bytes` zero-padded to a multiple of 4, as delta-spark's `encodeBytes` writes
    /// it (its documented rule).
    fn padded_text(bytes: &[u8]) -> String {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(4) * 4, 0);
        padded
            .chunks(4)
            .map(|c| group(u64::from(u32::from_be_bytes(c.try_into().unwrap()))))
            .collect()
    }

    /// A serialized `RoaringBitmapArray` of these positions (all below 2^32), with run
    /// containers where they are smaller (so that sizes of every remainder mod 4 occur).
    fn serialized(positions: &[u32]) -> Vec<u8> {
        let mut bitmap: roaring::RoaringBitmap = positions.iter().copied().collect();
        bitmap.optimize();
        let mut bytes = MAGIC.to_le_bytes().to_vec();
        bytes.extend(1u64.to_le_bytes());
        bytes.extend(0u32.to_le_bytes());
        bitmap.serialize_into(&mut bytes).unwrap();
        bytes
    }

    fn inline(text: &str, size: usize, cardinality: usize) -> Descriptor {
        Descriptor {
            storage_type: "i".into(),
            path_or_inline_dv: text.into(),
            offset: None,
            size_in_bytes: size as u64,
            cardinality: cardinality as u64,
        }
    }

    /// Fails every call: delta-kernel-rs reads an inline vector without storage.
    struct NoStorage;

    type Listed = Box<dyn Iterator<Item = delta_kernel::DeltaResult<delta_kernel::FileMeta>>>;
    type Read = Box<dyn Iterator<Item = delta_kernel::DeltaResult<bytes::Bytes>>>;

    impl delta_kernel::StorageHandler for NoStorage {
        fn list_from(&self, _: &url::Url) -> delta_kernel::DeltaResult<Listed> {
            Err(delta_kernel::Error::generic("no storage"))
        }
        fn read_files(&self, _: Vec<delta_kernel::FileSlice>) -> delta_kernel::DeltaResult<Read> {
            Err(delta_kernel::Error::generic("no storage"))
        }
        fn copy_atomic(&self, _: &url::Url, _: &url::Url) -> delta_kernel::DeltaResult<()> {
            Err(delta_kernel::Error::generic("no storage"))
        }
        fn head(&self, _: &url::Url) -> delta_kernel::DeltaResult<delta_kernel::FileMeta> {
            Err(delta_kernel::Error::generic("no storage"))
        }
    }

    /// delta-kernel-rs's own reading of an inline vector (the one delta-rs uses).
    fn kernel_rows(text: &str, size: usize, cardinality: usize) -> Vec<u64> {
        let d = DeletionVectorDescriptor {
            storage_type: DeletionVectorStorageType::Inline,
            path_or_inline_dv: text.into(),
            offset: None,
            size_in_bytes: size as i32,
            cardinality: cardinality as i64,
        };
        let root = url::Url::parse("file:///t/").unwrap();
        d.row_indexes(Arc::new(NoStorage), &root).unwrap()
    }

    #[test]
    fn the_z85_crates_tails_read_as_delta_kernel_reads_them() {
        let mut tails = std::collections::BTreeSet::new();
        for base in [0u32, 1 << 16, 1 << 31] {
            let near = |d: u32| base.saturating_sub(2).saturating_add(d);
            // Sets whose serialized sizes leave every remainder mod 4.
            let sets: Vec<Vec<u32>> = vec![
                vec![near(3)],
                vec![near(1), near(5)],
                vec![near(0), near(2), near(4)],
                (0..40).map(near).collect(),
                (0..40).map(near).chain([near(100)]).collect(),
                (0..40).map(near).chain([near(100), near(200)]).collect(),
                (0..40).map(near).chain((90..140).map(near)).collect(),
                // A run container beside an array container of another key.
                (0..40).map(near).chain([near(70_001)]).collect(),
                (0..40)
                    .map(near)
                    .chain([near(70_001), near(70_003)])
                    .collect(),
            ];
            for rows in sets {
                let bytes = serialized(&rows);
                tails.insert(bytes.len() % 4);
                let text = z85::encode(&bytes);
                let want: Vec<u64> = rows.iter().map(|&r| u64::from(r)).collect();
                assert_eq!(kernel_rows(&text, bytes.len(), rows.len()), want);
                let d = inline(&text, bytes.len(), rows.len());
                let (read, got) = inline_vector(&d, None).unwrap();
                assert_eq!((read, got), (bytes.clone(), want.clone()), "{text}");
                // delta-spark's zero-padded text of the same bytes reads the same.
                let spark = inline(&padded_text(&bytes), bytes.len(), rows.len());
                assert_eq!(inline_vector(&spark, None).unwrap().1, want);
            }
        }
        assert_eq!(tails.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    /// The inline vectors the interop suite builds Delta tables from and reads with
    /// delta-rs (`tests/data/inline_vectors.json`): rows near 0 and 2^16 whose serialized
    /// sizes leave each remainder mod 4, as the z85 crate and delta-spark's rule encode
    /// them. The file must be what the encoders give; `XLAKE_WRITE_VECTORS=1` rewrites it.
    #[test]
    fn the_interop_suites_inline_vectors_are_the_encoders() {
        let mut vectors = Vec::new();
        for base in [0u32, 1 << 16] {
            let run = || base..base + 40;
            // A row in the neighbouring 2^16 block: an array container beside the run.
            let neighbour = if base == 0 { 65_540 } else { base - 6 };
            let sets: [Vec<u32>; 4] = [
                vec![base + 1, base + 5],
                run().chain([neighbour]).collect(),
                vec![base + 1, base + 4, base + 6],
                run().collect(),
            ];
            for rows in sets {
                let mut rows = rows;
                rows.sort_unstable();
                let bytes = serialized(&rows);
                let want: Vec<u64> = rows.iter().map(|&r| u64::from(r)).collect();
                assert_eq!(
                    kernel_rows(&z85::encode(&bytes), bytes.len(), rows.len()),
                    want
                );
                vectors.push(serde_json::json!({
                    "rows": rows,
                    "size": bytes.len(),
                    "z85": z85::encode(&bytes),
                    "padded": padded_text(&bytes),
                }));
            }
        }
        let tails: Vec<u64> = vectors
            .iter()
            .map(|v| v["size"].as_u64().unwrap() % 4)
            .collect();
        assert_eq!(tails, [0, 1, 2, 3, 0, 1, 2, 3]);
        let lines: Vec<String> = vectors.iter().map(|v| v.to_string()).collect();
        let text = format!("[\n{}\n]\n", lines.join(",\n"));
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/inline_vectors.json");
        if std::env::var_os("XLAKE_WRITE_VECTORS").is_some() {
            std::fs::write(&file, &text).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "XLAKE_WRITE_VECTORS=1 rewrites it"
        );
    }

    #[test]
    fn delta_kernels_cdf_table_with_dv_version_5_deletes_row_3() {
        let text = "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093";
        assert_eq!(kernel_rows(text, 34, 1), [3]);
        assert_eq!(
            inline_vector(&inline(text, 34, 1), Some(10)).unwrap().1,
            [3]
        );
        // The row range: a file of 3 rows has no row 3.
        let err = inline_vector(&inline(text, 34, 1), Some(3))
            .unwrap_err()
            .to_string();
        assert!(err.contains("deletes row 3 of a file of 3 rows"), "{err}");
    }

    #[test]
    fn two_valid_readings_that_differ_are_refused_with_both() {
        let (a, b) = (serialized(&[1, 2]), serialized(&[1, 3]));
        let reading = |e, bytes: &Vec<u8>| (e, bytes.clone(), valid_rows(bytes, 2, None));
        let err = choose(vec![
            reading(Encoding::Padded, &a),
            reading(Encoding::Tail, &b),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("as rows [1, 2] (zero-padded"), "{err}");
        assert!(err.contains("as rows [1, 3] (a '#'-marked"), "{err}");
        // Two that agree, or one valid, are read.
        let same = choose(vec![
            reading(Encoding::Padded, &a),
            reading(Encoding::Tail, &a),
        ]);
        assert_eq!(same.unwrap().1, [1, 2]);
        let bad = (Encoding::Tail, b.clone(), valid_rows(&b, 5, None));
        let one = choose(vec![reading(Encoding::Padded, &a), bad]);
        assert_eq!(one.unwrap().1, [1, 2]);
    }

    #[test]
    fn malformed_inline_vectors_are_refused() {
        let bytes = serialized(&[3, 5, 7]);
        let size = bytes.len();
        assert_eq!(size % 4, 2);
        let text = padded_text(&bytes);
        // The log's cardinality must match what the vector holds.
        let err = inline_vector(&inline(&text, size, 4), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds 3 rows, the log says 4"), "{err}");
        // A group written 2^32 higher is no encoder's: refused, last group or not.
        for at in [5, text.len() - 5] {
            let value = z85_digits(&text.as_bytes()[at..at + 5]).unwrap();
            if value + (1 << 32) >= 85u64.pow(5) {
                continue;
            }
            let wrapped = format!(
                "{}{}{}",
                &text[..at],
                group(value + (1 << 32)),
                &text[at + 5..]
            );
            let err = inline_vector(&inline(&wrapped, size, 3), None)
                .unwrap_err()
                .to_string();
            assert!(err.contains("overflows 32 bits"), "{err}");
        }
        // Not Z85, not whole groups, or not the size the log gives.
        for (text, size) in [
            (text.replace(&text[..1], "~"), size),
            (text[..text.len() - 1].to_string(), size),
            (text.clone(), size + 4),
            (text.clone(), size - 4),
            (format!("{text}00000"), size),
        ] {
            assert!(
                inline_vector(&inline(&text, size, 3), None).is_err(),
                "{text}"
            );
        }
        // A tail: four marks, a tail too large for its bytes, a size it cannot hold.
        let tail = z85::encode(&bytes);
        let cut = &tail[..tail.len() - 5];
        assert!(tail[cut.len()..].starts_with("##"), "{tail}");
        let four = format!("{cut}####0");
        assert!(inline_vector(&inline(&four, size, 3), None).is_err());
        let big = format!("{cut}##%%%");
        let err = inline_vector(&inline(&big, size, 3), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not fit its 2 bytes"), "{err}");
        assert!(inline_vector(&inline(&tail, size + 1, 3), None).is_err());
        // Multi-byte text is refused, never sliced inside a character.
        let wide = format!("{cut}é{}", &tail[tail.len() - 3..]);
        assert_eq!(wide.len() % 5, 0);
        assert!(inline_vector(&inline(&wide, size, 3), None).is_err());
        // Decodable text that is no vector.
        assert!(inline_vector(&inline("HelloWorld", 8, 0), None).is_err());
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
        // Multi-byte characters where the id would be split: refused, no panic.
        for text in [
            "abécdefghijklmnopqrstu",
            "ééééééééééééééééééééé",
            "0000000000000000000é",
        ] {
            assert!(uuid_path(text).is_err(), "{text}");
        }
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
        // A key repeated or out of order: refused (delta-rs keeps the last bitmap of a
        // repeated key, a plain walk would keep both).
        for keys in [[0u32, 0], [1, 0]] {
            let mut bytes = MAGIC.to_le_bytes().to_vec();
            bytes.extend(2u64.to_le_bytes());
            for key in keys {
                bytes.extend(key.to_le_bytes());
                bitmap.serialize_into(&mut bytes).unwrap();
            }
            let err = positions(&bytes).unwrap_err().to_string();
            assert!(err.contains("out of order"), "{err}");
        }
    }
}
