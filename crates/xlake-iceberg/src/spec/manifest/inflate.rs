//! A deflate-compressed manifest as pyiceberg writes it, made readable by the fast read.
//! Each block of an Avro container with the `deflate` codec holds raw deflate data
//! (RFC 1951); pyiceberg 0.12 writes zlib's stream with its two header bytes cut and
//! three of its four checksum bytes left after the deflate data, which serde_avro_fast
//! refuses ("data left in the block"), so none of pyiceberg's manifests took the fast
//! read (apache-avro, beneath iceberg-rust, ignores what follows the deflate data). Here
//! such a container is rewritten uncompressed, each block inflated as apache-avro
//! inflates it, for the fast read to read.

use std::io::Read;

use xlake_storage::avro;

/// The container `bytes` with each block inflated and the codec `null`; `None` unless its
/// codec is `deflate` and every block inflates.
pub(crate) fn inflated(bytes: &[u8]) -> Option<Vec<u8>> {
    let header = avro::header(bytes).ok()??;
    if header.get(b"avro.codec") != Some(b"deflate") {
        return None;
    }
    let sync = header.sync?;
    let mut out = b"Obj\x01".to_vec();
    put_long(&mut out, i64::try_from(header.metadata.len()).ok()?);
    for (key, value) in &header.metadata {
        let value: &[u8] = if *key == b"avro.codec" {
            b"null"
        } else {
            value
        };
        put_bytes(&mut out, key);
        put_bytes(&mut out, value);
    }
    put_long(&mut out, 0);
    out.extend_from_slice(&sync);
    let mut at = header.len;
    let mut plain = Vec::new();
    while at < bytes.len() {
        let count = avro::long(bytes, &mut at)?;
        let block = avro::field(bytes, &mut at)?;
        plain.clear();
        flate2::read::DeflateDecoder::new(block)
            .read_to_end(&mut plain)
            .ok()?;
        put_long(&mut out, count);
        put_bytes(&mut out, &plain);
        (bytes.get(at..at.checked_add(16)?)? == sync).then_some(())?;
        out.extend_from_slice(&sync);
        at += 16;
    }
    Some(out)
}

/// An Avro `long` (zig-zag varint).
fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Avro `bytes`: the length, then the bytes.
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A container of one block, deflated as pyiceberg deflates it (zlib's stream, its
    /// header cut and one checksum byte dropped): inflated to the same container
    /// uncompressed, which serde_avro_fast reads.
    #[test]
    fn a_pyiceberg_deflate_block_is_inflated() {
        let sync = [7u8; 16];
        let records: Vec<u8> = [1i64, -2, 300].iter().fold(Vec::new(), |mut b, v| {
            put_long(&mut b, *v);
            b
        });
        let container = |codec: &[u8], block: &[u8]| {
            let mut c = b"Obj\x01".to_vec();
            put_long(&mut c, 2);
            put_bytes(&mut c, b"avro.schema");
            put_bytes(&mut c, br#""long""#);
            put_bytes(&mut c, b"avro.codec");
            put_bytes(&mut c, codec);
            put_long(&mut c, 0);
            c.extend_from_slice(&sync);
            put_long(&mut c, 3);
            put_bytes(&mut c, block);
            c.extend_from_slice(&sync);
            c
        };
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&records).unwrap();
        let zlib = zlib.finish().unwrap();
        let deflated = container(b"deflate", &zlib[2..zlib.len() - 1]);
        let plain = inflated(&deflated).unwrap();
        assert_eq!(plain, container(b"null", &records));
        let mut reader =
            serde_avro_fast::object_container_file_encoding::Reader::from_slice(&plain).unwrap();
        let read: Vec<i64> = reader.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(read, [1, -2, 300]);
        assert!(inflated(&plain).is_none());
    }
}
