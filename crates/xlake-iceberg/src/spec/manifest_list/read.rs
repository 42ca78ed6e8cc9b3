//! Reading a manifest list: every commit reads its parent's, and at 100k files it holds
//! ~1,000 manifests. iceberg-rust's `ManifestList::parse_with_version` builds an
//! apache-avro `Value` tree per record and then deserializes that (about a fifth of an
//! incremental commit at 100k files, benches/README.md); here serde_avro_fast reads the
//! records straight into a struct with the same fields, aliases and defaults as
//! iceberg-rust's own (`manifest_list::_serde::ManifestFileV2`/`V3`), by the writer's
//! schema in the file. A list it cannot read (a codec left out of the build, a schema it
//! refuses) is parsed by iceberg-rust as before, so errors stay iceberg-rust's.

use iceberg::spec::{FieldSummary, FormatVersion, ManifestContentType, ManifestFile, ManifestList};
use serde::Deserialize;
use serde_avro_fast::object_container_file_encoding::Reader;
use serde_bytes::ByteBuf;

use crate::spec::error::CodecError;

/// One manifest list record, by field name: v1 names (`added_data_files_count`) and
/// v1's missing fields (content, sequence numbers) read as iceberg-rust reads them.
#[derive(Deserialize)]
struct Listed {
    manifest_path: String,
    manifest_length: i64,
    partition_spec_id: i32,
    #[serde(default)]
    content: i32,
    #[serde(default)]
    sequence_number: i64,
    #[serde(default)]
    min_sequence_number: i64,
    added_snapshot_id: i64,
    #[serde(alias = "added_data_files_count")]
    added_files_count: Option<i32>,
    #[serde(alias = "existing_data_files_count")]
    existing_files_count: Option<i32>,
    #[serde(alias = "deleted_data_files_count")]
    deleted_files_count: Option<i32>,
    added_rows_count: Option<i64>,
    existing_rows_count: Option<i64>,
    deleted_rows_count: Option<i64>,
    partitions: Option<Vec<FieldSummary>>,
    key_metadata: Option<ByteBuf>,
    #[serde(default)]
    first_row_id: Option<u64>,
}

impl Listed {
    fn counted(&self) -> bool {
        let files = [
            self.added_files_count,
            self.existing_files_count,
            self.deleted_files_count,
        ];
        let rows = [
            self.added_rows_count,
            self.existing_rows_count,
            self.deleted_rows_count,
        ];
        files.iter().all(Option::is_some) && rows.iter().all(Option::is_some)
    }

    fn into_manifest(self) -> Result<ManifestFile, CodecError> {
        let count = |n: Option<i32>| n.map(u32::try_from).transpose();
        let rows = |n: Option<i64>| n.map(u64::try_from).transpose();
        let negative = |_| format!("{}: a negative count", self.manifest_path);
        Ok(ManifestFile {
            content: ManifestContentType::try_from(self.content).map_err(CodecError::library)?,
            added_files_count: count(self.added_files_count).map_err(negative)?,
            existing_files_count: count(self.existing_files_count).map_err(negative)?,
            deleted_files_count: count(self.deleted_files_count).map_err(negative)?,
            added_rows_count: rows(self.added_rows_count).map_err(negative)?,
            existing_rows_count: rows(self.existing_rows_count).map_err(negative)?,
            deleted_rows_count: rows(self.deleted_rows_count).map_err(negative)?,
            manifest_length: self.manifest_length,
            partition_spec_id: self.partition_spec_id,
            sequence_number: self.sequence_number,
            min_sequence_number: self.min_sequence_number,
            added_snapshot_id: self.added_snapshot_id,
            partitions: self.partitions,
            key_metadata: self.key_metadata.map(ByteBuf::into_vec),
            first_row_id: self.first_row_id,
            manifest_path: self.manifest_path,
        })
    }
}

/// The manifests of the manifest list `bytes` (read from `location`).
pub(crate) fn manifests(bytes: &[u8], location: &str) -> Result<Vec<ManifestFile>, CodecError> {
    match fast(bytes) {
        Some(manifests) => Ok(manifests),
        None => ManifestList::parse_with_version(bytes, version(bytes))
            .map(|l| l.consume_entries().into_iter().collect())
            .map_err(CodecError::within(location)),
    }
}

/// The list read by serde_avro_fast; `None` for anything it does not read, and for a
/// record without its file and row counts (which only v1 lists may omit: iceberg-rust
/// reads those by the v1 schema, and refuses them in a v2 list).
fn fast(bytes: &[u8]) -> Option<Vec<ManifestFile>> {
    let mut reader = Reader::from_slice(bytes).ok()?;
    // A record is at least ~100 bytes (its path alone); sized once, the vector of a
    // 1,000-manifest list is not copied as it grows (capped: a corrupt length reserves
    // nothing large).
    let mut manifests = Vec::with_capacity((bytes.len() / 100).min(1 << 14));
    for record in reader.deserialize::<Listed>() {
        manifests.push(record.ok().filter(Listed::counted)?.into_manifest().ok()?);
    }
    Some(manifests)
}

/// The format version a manifest list was written for (its `format-version` key; v3 lists
/// carry `first_row_id`, which iceberg-rust's v2 parse would drop).
fn version(bytes: &[u8]) -> FormatVersion {
    let v3 = apache_avro::Reader::new(bytes).is_ok_and(|r| {
        r.user_metadata()
            .get("format-version")
            .is_some_and(|v| v.as_slice() == b"3")
    });
    if v3 {
        FormatVersion::V3
    } else {
        FormatVersion::V2
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use xlake_storage::TableStore;

    use super::*;
    use crate::spec::manifest_list::write::sample_manifest;
    use crate::spec::manifest_list::write_manifest_list;

    /// xlake's own lists, v2 and v3, read alike by both readers, summaries and row ids
    /// included.
    #[tokio::test]
    async fn reads_what_iceberg_rust_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        for (version, first_row_id) in [(FormatVersion::V2, None), (FormatVersion::V3, Some(5))] {
            let written: Vec<_> = (1..40)
                .map(|n| {
                    let first = first_row_id.filter(|_| n % 2 == 0);
                    sample_manifest(n, first.map(|f| f * u64::from(n)))
                })
                .collect();
            let list = store.absolute(&format!("metadata/list-{version}.avro"));
            write_manifest_list(
                &store,
                &list,
                (9, Some(8)),
                (40, first_row_id),
                written,
                &HashSet::new(),
                None,
            )
            .await
            .unwrap();
            let bytes = store.get(&list).await.unwrap();
            let slow: Vec<_> = ManifestList::parse_with_version(&bytes, version)
                .unwrap()
                .consume_entries()
                .into_iter()
                .collect();
            let fast = fast(&bytes).expect("read by serde_avro_fast");
            assert_eq!(fast.len(), 39);
            assert_eq!(fast, slow, "format version {version}");
            assert_eq!(manifests(&bytes, &list).unwrap(), slow);
        }
    }

    /// What it cannot read goes to iceberg-rust, whose error names the list.
    #[test]
    fn anything_else_is_iceberg_rusts_to_refuse() {
        assert!(fast(b"not avro").is_none());
        let err = manifests(b"not avro", "/t/metadata/snap-1.avro")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/t/metadata/snap-1.avro: "), "{err}");
    }
}
