//! An uncompressed Avro container read with its schema parsed once per process (issue
//! 16). serde_avro_fast's `Reader` parses the writer schema of every file it opens; every
//! manifest of one partition spec that xlake writes holds the same schema text, and a
//! Hudi sync seeding its replay reads each manifest of the current snapshot (~50 at
//! 5,000 live files), so that parse was ~40% of reading them. Here the header is read by
//! [`xlake_storage::avro::header`], the schema taken from a cache keyed by its text, and
//! the blocks walked as the `Reader` walks them: a record count, a byte size, exactly
//! that many records in exactly that many bytes, the file's sync marker.
//!
//! Only the `null` codec is read here (xlake's manifests and iceberg-rust's); for any
//! other, or anything malformed, [`Container::open`] and [`Container::records`] give
//! `None` and the caller reads the file as before, which says what is wrong.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde_avro_fast::de::DeserializerState;
use serde_avro_fast::Schema;
use xlake_storage::avro::{header, long, Header};

/// A container's header, its parsed schema and its blocks.
pub(crate) struct Container<'a> {
    pub(crate) header: Header<'a>,
    schema: Arc<Schema>,
    blocks: &'a [u8],
    sync: [u8; 16],
}

impl<'a> Container<'a> {
    /// The container `bytes`, if it is one with the `null` codec (or none named) and a
    /// schema serde_avro_fast reads.
    pub(crate) fn open(bytes: &'a [u8]) -> Option<Self> {
        let header = header(bytes).ok()??;
        if !matches!(header.get(b"avro.codec"), None | Some(b"null")) {
            return None;
        }
        let sync = header.sync?;
        let schema = parsed(header.get(b"avro.schema")?)?;
        Some(Self {
            sync,
            blocks: bytes.get(header.len..)?,
            header,
            schema,
        })
    }

    /// Every record, in order; `None` if a block is malformed or a record does not read
    /// as a `T`. (A `T` read from no bytes at all would be read as many times as a block
    /// claims: every record read here has fields.)
    pub(crate) fn records<T: DeserializeOwned>(&self) -> Option<Vec<T>> {
        let (blocks, mut at) = (self.blocks, 0);
        let mut records = Vec::new();
        while at < blocks.len() {
            let count = usize::try_from(long(blocks, &mut at)?).ok()?;
            let size = usize::try_from(long(blocks, &mut at)?).ok()?;
            let end = at.checked_add(size)?;
            let block = blocks.get(at..end)?;
            // Read from the slice, as the Reader reads an uncompressed block: a string
            // claiming more bytes than the block holds fails at its end (a reader over
            // `io::Read` would first allocate what it claims). Room is not reserved by
            // the claimed count: a record that does not read ends the loop.
            let mut state = DeserializerState::from_slice(block, &self.schema);
            for _ in 0..count {
                records.push(T::deserialize(state.deserializer()).ok()?);
            }
            let all_read = std::io::BufRead::fill_buf(&mut state.into_reader())
                .ok()?
                .is_empty();
            (all_read && blocks.get(end..end.checked_add(16)?)? == self.sync).then_some(())?;
            at = end + 16;
        }
        Some(records)
    }
}

/// Schemas parsed by this process, by their text. Bounded: a process reads manifests of a
/// few partition specs; past [`PARSED_MAX`] texts the cache starts again.
fn parsed(text: &[u8]) -> Option<Arc<Schema>> {
    static PARSED: OnceLock<Mutex<HashMap<Vec<u8>, Arc<Schema>>>> = OnceLock::new();
    let cache = PARSED.get_or_init(Default::default);
    if let Some(found) = cache.lock().ok()?.get(text) {
        return Some(found.clone());
    }
    let schema: Arc<Schema> = Arc::new(std::str::from_utf8(text).ok()?.parse().ok()?);
    let mut cache = cache.lock().ok()?;
    if cache.len() >= PARSED_MAX {
        cache.clear();
    }
    cache.insert(text.to_vec(), schema.clone());
    Some(schema)
}

/// The most schema texts [`parsed`] keeps.
const PARSED_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use serde_avro_fast::object_container_file_encoding::{
        Compression, CompressionLevel, Reader, WriterBuilder,
    };
    use serde_avro_fast::ser::SerializerConfig;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Rec {
        n: i64,
        s: String,
    }

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"n","type":"long"},{"name":"s","type":"string"}]}"#;

    /// `count` records in a container of blocks of about `block` bytes.
    fn container(count: i64, block: u32, compression: Compression) -> Vec<u8> {
        let schema: Schema = SCHEMA.parse().unwrap();
        let mut config = SerializerConfig::new(&schema);
        let mut writer = WriterBuilder::new(&mut config)
            .approx_block_size(block)
            .compression(compression)
            .build(Vec::new())
            .unwrap();
        let records = (0..count).map(|n| Rec {
            n: n * 1_000_003 - 7,
            s: "x".repeat(n as usize % 40),
        });
        writer.serialize_all(records).unwrap();
        writer.into_inner().unwrap()
    }

    fn read_by_reader(bytes: &[u8]) -> Vec<Rec> {
        let mut reader = Reader::from_slice(bytes).unwrap();
        reader.deserialize::<Rec>().map(Result::unwrap).collect()
    }

    /// One block or many, empty or not: the records the Reader reads.
    #[test]
    fn reads_what_the_reader_reads() {
        for (count, block) in [(0, 64), (1, 64), (500, 64 * 1024), (500, 200)] {
            let bytes = container(count, block, Compression::Null);
            let read = Container::open(&bytes).unwrap().records::<Rec>().unwrap();
            assert_eq!(read.len(), count as usize);
            assert_eq!(read, read_by_reader(&bytes), "{count} {block}");
        }
        // The schema is parsed once for both files.
        let (a, b) = (
            container(3, 64, Compression::Null),
            container(4, 64, Compression::Null),
        );
        let (a, b) = (Container::open(&a).unwrap(), Container::open(&b).unwrap());
        assert!(Arc::ptr_eq(&a.schema, &b.schema));
    }

    /// Damaged blocks, another codec and records of another shape give `None`.
    #[test]
    fn anything_else_is_none() {
        let bytes = container(150, 200, Compression::Null);
        let start = Container::open(&bytes).unwrap().header.len;
        let records = |b: &[u8]| Container::open(b).and_then(|c| c.records::<Rec>());
        // Cut anywhere after the header: only a cut between blocks still reads, as a
        // container of fewer blocks (as the Reader reads it).
        let by_reader = |b: &[u8]| -> Option<Vec<Rec>> {
            let mut reader = Reader::from_slice(b).ok()?;
            reader.deserialize::<Rec>().collect::<Result<_, _>>().ok()
        };
        let mut shorter = 0;
        for cut in start + 1..bytes.len() {
            let read = records(&bytes[..cut]);
            assert_eq!(read, by_reader(&bytes[..cut]), "cut at {cut}");
            shorter += usize::from(read.is_some());
        }
        assert!(shorter > 5, "{shorter}");
        // A wrong sync marker after the last block.
        let mut wrong = bytes.clone();
        let last = wrong.len() - 1;
        wrong[last] ^= 1;
        assert!(records(&wrong).is_none());
        // A block claiming one record more, or holding a byte its records do not use.
        let mut at = start;
        let count = long(&bytes, &mut at).unwrap();
        let size = long(&bytes, &mut at).unwrap();
        let body = &bytes[at..at + size as usize];
        let block = |count: i64, size: i64, body: &[u8]| {
            let mut b = bytes[..start].to_vec();
            b.extend(zigzag(count));
            b.extend(zigzag(size));
            b.extend(body);
            b.extend(Container::open(&bytes).unwrap().sync);
            b
        };
        assert!(records(&block(count, size, body)).is_some());
        assert!(records(&block(count + 1, size, body)).is_none());
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(records(&block(count, size + 1, &longer)).is_none());
        // A string claiming far more bytes than its block holds.
        let mut claim = zigzag(5);
        claim.extend(zigzag(500_000_000));
        claim.extend(b"abc");
        assert!(records(&block(1, claim.len() as i64, &claim)).is_none());
        // Other records, another codec.
        #[derive(Deserialize)]
        struct Other {
            #[allow(dead_code)]
            missing: i64,
        }
        assert!(Container::open(&bytes)
            .unwrap()
            .records::<Other>()
            .is_none());
        let deflated = Compression::Deflate {
            level: CompressionLevel::default(),
        };
        assert!(Container::open(&container(5, 64, deflated)).is_none());
        assert!(Container::open(b"not avro").is_none());
    }

    fn zigzag(n: i64) -> Vec<u8> {
        let mut v = ((n << 1) ^ (n >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }
}
