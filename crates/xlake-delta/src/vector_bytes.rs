//! Where a deletion vector descriptor's serialized bytes are, in the neutral model's terms
//! ([`DeletionVector`]), so a target can carry the vector without decoding it.

use xlake_model::{DeletionVector, VectorBytes};

use crate::deletion_vector::{uuid_path, z85_decode_sized, Descriptor};

/// The neutral form of a descriptor: inline bytes decoded from Z85, or the file, offset
/// and size of a `u` or `p` vector.
pub fn vector_of(d: &Descriptor) -> Result<DeletionVector, String> {
    let stored = |path: String| VectorBytes::Stored {
        path,
        // Delta's default: the vector follows the file's one-byte format version.
        offset: d.offset.unwrap_or(1),
        size: d.size_in_bytes,
    };
    let bytes = match d.storage_type.as_str() {
        // Decoded as Delta's reference codec does (the padded last group wraps, the bytes
        // are cut to the size the log records), like the vectors a v2 mirror decodes.
        "i" => VectorBytes::Inline(z85_decode_sized(&d.path_or_inline_dv, d.size_in_bytes)?),
        "u" => stored(uuid_path(&d.path_or_inline_dv)?),
        "p" => stored(d.path_or_inline_dv.clone()),
        other => return Err(format!("unknown deletion vector storage type {other:?}")),
    };
    Ok(DeletionVector {
        bytes,
        cardinality: d.cardinality,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(storage_type: &str, path: &str, offset: Option<u64>) -> Descriptor {
        Descriptor {
            storage_type: storage_type.into(),
            path_or_inline_dv: path.into(),
            offset,
            size_in_bytes: 4,
            cardinality: 1,
        }
    }

    #[test]
    fn each_storage_type_has_its_neutral_form() {
        let u = vector_of(&descriptor("u", &"0".repeat(20), Some(9))).unwrap();
        assert_eq!(
            u.bytes,
            VectorBytes::Stored {
                path: "deletion_vector_00000000-0000-0000-0000-000000000000.bin".into(),
                offset: 9,
                size: 4
            }
        );
        let p = vector_of(&descriptor("p", "s3://b/t/dv.bin", None)).unwrap();
        assert!(matches!(p.bytes, VectorBytes::Stored { offset: 1, .. }));
        let i = vector_of(&descriptor("i", "Hello", None)).unwrap();
        assert_eq!(i.bytes, VectorBytes::Inline(vec![0x86, 0x4F, 0xD2, 0x6F]));
        assert!(vector_of(&descriptor("x", "", None)).is_err());
    }
}
