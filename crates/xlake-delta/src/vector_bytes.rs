//! Where a deletion vector descriptor's serialized bytes are, in the neutral model's terms
//! ([`DeletionVector`]), so a target can carry the vector without decoding it.

use xlake_model::{DeletionVector, VectorBytes};

use crate::deletion_vector::{inline_vector, uuid_path, Descriptor};
use crate::error::Reason;

/// The neutral form of a descriptor: inline bytes decoded from Z85 (the one valid reading,
/// see [`inline_vector`]; `num_records` is the file's row count when the log gives it), or
/// the file, offset and size of a `u` or `p` vector.
pub fn vector_of(d: &Descriptor, num_records: Option<u64>) -> Result<DeletionVector, Reason> {
    let stored = |path: String| VectorBytes::Stored {
        path,
        // Delta's default: the vector follows the file's one-byte format version.
        offset: d.offset.unwrap_or(1),
        size: d.size_in_bytes,
    };
    let bytes = match d.storage_type.as_str() {
        // Read as its writer encoded it, like the vectors a v2 mirror decodes.
        "i" => VectorBytes::Inline(inline_vector(d, num_records)?.0),
        "u" => stored(uuid_path(&d.path_or_inline_dv)?),
        "p" => stored(d.path_or_inline_dv.clone()),
        other => return Err(format!("unknown deletion vector storage type {other:?}").into()),
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
        let u = vector_of(&descriptor("u", &"0".repeat(20), Some(9)), None).unwrap();
        assert_eq!(
            u.bytes,
            VectorBytes::Stored {
                path: "deletion_vector_00000000-0000-0000-0000-000000000000.bin".into(),
                offset: 9,
                size: 4
            }
        );
        let p = vector_of(&descriptor("p", "s3://b/t/dv.bin", None), None).unwrap();
        assert!(matches!(p.bytes, VectorBytes::Stored { offset: 1, .. }));
        // delta-kernel-rs's cdf-table-with-dv, version 5: row 3, a '#'-marked tail.
        let mut inline = descriptor("i", "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093", None);
        inline.size_in_bytes = 34;
        let i = vector_of(&inline, Some(10)).unwrap();
        let VectorBytes::Inline(bytes) = i.bytes else {
            panic!("inline bytes")
        };
        assert_eq!(bytes.len(), 34);
        assert_eq!(crate::deletion_vector::positions(&bytes).unwrap(), [3]);
        assert!(vector_of(&descriptor("x", "", None), None).is_err());
    }
}
