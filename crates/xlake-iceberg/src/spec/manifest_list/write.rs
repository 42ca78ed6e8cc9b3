//! Writing a manifest list (issue 16): every commit writes one, and at 100k files it holds
//! ~1,000 manifests. iceberg-rust's `ManifestListWriter` turns each into an apache-avro
//! `Value` and resolves it against the schema; here the file is the one it writes, encoded
//! directly, as [`crate::spec::manifest::write`] does for manifests:
//!
//! - the Avro schema is iceberg-rust's own, held as its text per format version
//!   (`list_schema_v2.json`, `list_schema_v3.json`); the user metadata (`snapshot-id`,
//!   `parent-snapshot-id`, `sequence-number`, `format-version`, v3 `first-row-id`) is made
//!   as its `ManifestListWriter::v2`/`v3` makes it. The tests check both against the
//!   lists iceberg-rust writes, so a dependency update that changes them fails there;
//! - each manifest is encoded by serde_avro_fast from [`ListRecord`], which holds the
//!   fields of iceberg-rust's `ManifestFileV2`/`V3`, filled the same way.
//!
//! The caller assigns sequence numbers and row ids first (as the writer would). Errors
//! name the manifest, in xlake's words (a count missing or out of range, as iceberg-rust
//! refuses them).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use iceberg::io::FileIO;
use iceberg::spec::{
    FieldSummary, FormatVersion, ManifestContentType, ManifestFile, ManifestListWriter,
};
use serde::Serialize;
use serde_bytes::ByteBuf;

use crate::spec::error::CodecError;

/// One manifest list record, field for field as iceberg-rust's `ManifestFileV2`/`V3`
/// writes it (`first_row_id` only in v3: always `None` in a v2 list, so never written).
#[derive(Serialize)]
struct ListRecord<'a> {
    manifest_path: &'a str,
    manifest_length: i64,
    partition_spec_id: i32,
    content: i32,
    sequence_number: i64,
    min_sequence_number: i64,
    added_snapshot_id: i64,
    added_files_count: i32,
    existing_files_count: i32,
    deleted_files_count: i32,
    added_rows_count: i64,
    existing_rows_count: i64,
    deleted_rows_count: i64,
    partitions: Option<&'a [FieldSummary]>,
    key_metadata: Option<&'a serde_bytes::Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_row_id: Option<i64>,
}

/// The record fields, in order: [`ListRecord`]'s.
#[cfg(test)]
const FIELDS: &[&str] = &[
    "manifest_path",
    "manifest_length",
    "partition_spec_id",
    "content",
    "sequence_number",
    "min_sequence_number",
    "added_snapshot_id",
    "added_files_count",
    "existing_files_count",
    "deleted_files_count",
    "added_rows_count",
    "existing_rows_count",
    "deleted_rows_count",
    "partitions",
    "key_metadata",
    "first_row_id",
];

/// What a list's header says of its snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListOf {
    pub(crate) snapshot_id: i64,
    pub(crate) parent: Option<i64>,
    pub(crate) sequence_number: i64,
    /// v3: the table's `next-row-id` before this snapshot; `None`: a v2 list.
    pub(crate) first_row_id: Option<u64>,
}

impl ListOf {
    pub(crate) fn version(&self) -> FormatVersion {
        match self.first_row_id {
            Some(_) => FormatVersion::V3,
            None => FormatVersion::V2,
        }
    }

    /// The user metadata `ManifestListWriter::v2`/`v3` writes.
    fn metadata(&self) -> BTreeMap<String, ByteBuf> {
        let or_null = |v: Option<String>| v.unwrap_or_else(|| "null".to_string());
        let version = match self.version() {
            FormatVersion::V3 => "3",
            _ => "2",
        };
        let mut m = BTreeMap::from([
            ("snapshot-id", self.snapshot_id.to_string()),
            ("sequence-number", self.sequence_number.to_string()),
            ("format-version", version.to_string()),
            (
                "parent-snapshot-id",
                or_null(self.parent.map(|p| p.to_string())),
            ),
        ]);
        if self.version() == FormatVersion::V3 {
            m.insert(
                "first-row-id",
                or_null(self.first_row_id.map(|f| f.to_string())),
            );
        }
        m.into_iter()
            .map(|(k, v)| (k.to_string(), ByteBuf::from(v.into_bytes())))
            .collect()
    }
}

/// The Avro schema iceberg-rust's `ManifestListWriter` writes v2 and v3 lists with, as
/// its text (`the_schemas_are_those_iceberg_rust_writes` checks both against lists it
/// writes, field names, order and user metadata included: an iceberg-rust that writes
/// another fails the tests). Taking it from an empty list written at run time cost
/// every commit ~0.5 ms. The check holds for the iceberg-rust of `Cargo.lock` (build with
/// `--locked`); a list written under these texts by another build is still valid
/// Iceberg, only not byte for byte what that iceberg-rust writes. iceberg-rust's writer
/// remains as the fallback for a text that does not parse.
const SCHEMA_TEXTS: [&str; 2] = [
    include_str!("list_schema_v2.json"),
    include_str!("list_schema_v3.json"),
];

/// [`SCHEMA_TEXTS`] parsed, once each; `None` if one did not parse (then iceberg-rust
/// writes every list of its version).
static SCHEMAS: [OnceLock<Option<Arc<serde_avro_fast::Schema>>>; 2] =
    [OnceLock::new(), OnceLock::new()];

/// The list of `manifests` (sequence numbers and row ids assigned) for `of`; `None` when
/// iceberg-rust is to write it.
pub(crate) fn encode(
    of: ListOf,
    manifests: &[ManifestFile],
) -> Option<Result<Vec<u8>, CodecError>> {
    let schema = schema(of.version())?;
    Some(records(&schema, of, manifests, None))
}

/// The schema this module writes lists of `version` with, if it writes them.
pub(crate) fn schema(version: FormatVersion) -> Option<Arc<serde_avro_fast::Schema>> {
    let at = usize::from(version == FormatVersion::V3);
    SCHEMAS[at]
        .get_or_init(|| SCHEMA_TEXTS[at].parse().ok().map(Arc::new))
        .clone()
}

/// The Avro file of `manifests` under `schema`, with sync marker `sync` if given (else a
/// random one), in one block unless its records average over 512 bytes (the file is
/// built in memory anyway; a list carried by the next commit then starts from one
/// block, see [`crate::spec::manifest_list::carry`]).
pub(crate) fn records(
    schema: &serde_avro_fast::Schema,
    of: ListOf,
    manifests: &[ManifestFile],
    sync: Option<[u8; 16]>,
) -> Result<Vec<u8>, CodecError> {
    use serde_avro_fast::object_container_file_encoding::{Compression, WriterBuilder};
    let mut config = serde_avro_fast::ser::SerializerConfig::new(schema);
    // The writer reserves 5/4 of a block up front: a block sized from the list (records
    // are ~150-300 bytes), not an unbounded one.
    let block = manifests
        .len()
        .saturating_mul(512)
        .saturating_add(64 * 1024);
    let mut builder = WriterBuilder::new(&mut config)
        .compression(Compression::Null)
        .approx_block_size(u32::try_from(block).unwrap_or(u32::MAX / 2));
    if let Some(sync) = sync {
        builder = builder.sync_marker(sync);
    }
    let mut writer = builder
        .build_with_user_metadata(Vec::new(), of.metadata())
        .map_err(CodecError::library)?;
    for m in manifests {
        writer
            .serialize(record(m, of)?)
            .map_err(CodecError::library)?;
    }
    writer.into_inner().map_err(CodecError::library)
}

/// The record of `m`, with iceberg-rust's checks (counts present and in range). As its v3
/// writer does, a delete manifest is written without a first row id, whatever it came
/// with (the caller has given every data manifest its own).
fn record(m: &ManifestFile, of: ListOf) -> Result<ListRecord<'_>, CodecError> {
    let missing = |what: &str| format!("{}: {what} is required", m.manifest_path);
    let count = |n: Option<u32>, what: &str| -> Result<i32, CodecError> {
        let n = n.ok_or_else(|| missing(what))?;
        i32::try_from(n).map_err(CodecError::within(format!("{}: {what}", m.manifest_path)))
    };
    let rows = |n: Option<u64>, what: &str| -> Result<i64, CodecError> {
        let n = n.ok_or_else(|| missing(what))?;
        i64::try_from(n).map_err(CodecError::within(format!("{}: {what}", m.manifest_path)))
    };
    let first_row_id = match (of.version(), m.content) {
        (FormatVersion::V3, ManifestContentType::Data) => {
            m.first_row_id.map(i64::try_from).transpose()
        }
        _ => Ok(None),
    };
    Ok(ListRecord {
        manifest_path: &m.manifest_path,
        manifest_length: m.manifest_length,
        partition_spec_id: m.partition_spec_id,
        content: m.content as i32,
        sequence_number: m.sequence_number,
        min_sequence_number: m.min_sequence_number,
        added_snapshot_id: m.added_snapshot_id,
        added_files_count: count(m.added_files_count, "added_files_count")?,
        existing_files_count: count(m.existing_files_count, "existing_files_count")?,
        deleted_files_count: count(m.deleted_files_count, "deleted_files_count")?,
        added_rows_count: rows(m.added_rows_count, "added_rows_count")?,
        existing_rows_count: rows(m.existing_rows_count, "existing_rows_count")?,
        deleted_rows_count: rows(m.deleted_rows_count, "deleted_rows_count")?,
        partitions: m.partitions.as_deref(),
        key_metadata: m
            .key_metadata
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(serde_bytes::Bytes::new),
        first_row_id: first_row_id
            .map_err(|e| format!("{}: first_row_id: {e}", m.manifest_path))?,
    })
}

/// The list iceberg-rust's `ManifestListWriter` writes of `manifests` for `of`, and the
/// writer's next row id after them (v3).
pub(crate) async fn iceberg_write(
    of: ListOf,
    manifests: Vec<ManifestFile>,
) -> Result<(bytes::Bytes, Option<u64>), CodecError> {
    let io = FileIO::new_with_memory();
    let location = "/xlake-manifest-list.avro";
    let output = io.new_output(location).map_err(CodecError::library)?;
    let (id, parent, seq) = (of.snapshot_id, of.parent, of.sequence_number);
    let mut writer = match of.first_row_id {
        Some(first) => ManifestListWriter::v3(output, id, parent, seq, Some(first)),
        None => ManifestListWriter::v2(output, id, parent, seq),
    };
    writer
        .add_manifests(manifests.into_iter())
        .map_err(CodecError::library)?;
    let next_row_id = writer.next_row_id();
    writer.close().await.map_err(CodecError::library)?;
    Ok((
        crate::spec::written::written(&io, location).await?,
        next_row_id,
    ))
}

/// The `n`-th of a sample of manifests for tests: data and (every 7th) delete
/// manifests, with and without partition summaries, key metadata (none, empty, some)
/// and the given first row id.
#[cfg(test)]
pub(crate) fn sample_manifest(n: u32, first_row_id: Option<u64>) -> ManifestFile {
    let summary = |lower: &[u8]| FieldSummary {
        contains_null: n.is_multiple_of(2),
        contains_nan: n.is_multiple_of(3).then_some(false),
        lower_bound: Some(ByteBuf::from(lower.to_vec())),
        upper_bound: (!n.is_multiple_of(4)).then(|| ByteBuf::from(vec![9, 9, n as u8])),
    };
    let content = match n % 7 {
        0 => ManifestContentType::Deletes,
        _ => ManifestContentType::Data,
    };
    ManifestFile {
        manifest_path: format!("/t/metadata/m{n}.avro"),
        manifest_length: 1000 + i64::from(n),
        partition_spec_id: (n % 2) as i32,
        content,
        sequence_number: i64::from(n),
        min_sequence_number: i64::from(n / 2),
        added_snapshot_id: 7_000 + i64::from(n),
        added_files_count: Some(n),
        existing_files_count: Some(n * 2),
        deleted_files_count: Some(n % 3),
        added_rows_count: Some(u64::from(n) * 10),
        existing_rows_count: Some(u64::from(n) * 20),
        deleted_rows_count: Some(u64::from(n % 3) * 10),
        partitions: (!n.is_multiple_of(5)).then(|| vec![summary(b"a"), summary(&[0, 1, 2])]),
        key_metadata: match n % 6 {
            3 => Some(vec![1, 2, 3]),
            4 => Some(Vec::new()),
            _ => None,
        },
        // Delete manifests too (as a foreign parent list might have them).
        first_row_id,
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::ManifestList;
    use serde_avro_fast::object_container_file_encoding::Reader;

    use super::*;

    fn header(bytes: &[u8]) -> (String, BTreeMap<String, ByteBuf>) {
        let slice = serde_avro_fast::de::read::SliceRead::new(bytes);
        let (read, metadata) =
            Reader::new_and_metadata::<BTreeMap<String, ByteBuf>>(slice).unwrap();
        (read.schema().json().to_string(), metadata)
    }

    /// v2 and v3 lists (with and without a parent), summaries, key metadata and row ids
    /// included: iceberg-rust reads the same manifests from both writers' files, whose
    /// schemas and metadata are the same.
    #[tokio::test]
    async fn writes_what_iceberg_rust_writes() {
        for (first_row_id, parent) in [
            (None, Some(8)),
            (None, None),
            (Some(5), Some(8)),
            (Some(0), None),
        ] {
            let of = ListOf {
                snapshot_id: 9,
                parent,
                sequence_number: 40,
                first_row_id,
            };
            let manifests: Vec<_> = (1..40)
                .map(|n| sample_manifest(n, first_row_id.map(|f| f + u64::from(n) * 100)))
                .collect();
            let fast = encode(of, &manifests).expect("encoded here").unwrap();
            let (slow, _) = iceberg_write(of, manifests.clone()).await.unwrap();
            assert_eq!(header(&fast), header(&slow), "{of:?}");
            let read = |bytes: &[u8]| {
                ManifestList::parse_with_version(bytes, of.version())
                    .unwrap()
                    .consume_entries()
                    .into_iter()
                    .collect::<Vec<_>>()
            };
            assert_eq!(read(&fast), read(&slow), "{of:?}");
            assert_eq!(read(&fast).len(), 39);
            // A delete manifest's row id is dropped, as iceberg-rust drops it.
            assert!(read(&fast)
                .iter()
                .all(|m| m.content == ManifestContentType::Data || m.first_row_id.is_none()));
            // Empty key metadata is written as none, as iceberg-rust writes it.
            assert_eq!(read(&fast)[3].key_metadata, None);
            assert_eq!(read(&fast)[2].key_metadata, Some(vec![1, 2, 3]));
        }
    }

    /// A manifest without its counts is refused, naming it (iceberg-rust refuses it too).
    #[tokio::test]
    async fn a_manifest_without_counts_is_refused() {
        let of = ListOf {
            snapshot_id: 9,
            parent: None,
            sequence_number: 1,
            first_row_id: None,
        };
        let mut m = sample_manifest(1, None);
        m.added_rows_count = None;
        let err = encode(of, &[m.clone()]).unwrap().unwrap_err().to_string();
        assert!(
            err.starts_with("/t/metadata/m1.avro: added_rows_count"),
            "{err}"
        );
        assert!(iceberg_write(of, vec![m]).await.is_err());
    }

    /// The schema text of an empty list iceberg-rust writes in `version`, checked to hold
    /// the record fields this module writes and the user metadata it makes.
    async fn written_schema(version: FormatVersion) -> String {
        let of = ListOf {
            snapshot_id: 11,
            parent: Some(7),
            sequence_number: 3,
            first_row_id: (version == FormatVersion::V3).then_some(5),
        };
        let (bytes, _) = iceberg_write(of, Vec::new()).await.unwrap();
        let (schema, metadata) = header(&bytes);
        assert_eq!(metadata, of.metadata());
        let json: serde_json::Value = serde_json::from_str(&schema).unwrap();
        let fields = json["fields"].as_array().unwrap().iter();
        let names = fields.map(|f| f["name"].as_str().unwrap());
        let expected = FIELDS
            .iter()
            .filter(|f| version == FormatVersion::V3 || **f != "first_row_id");
        assert!(names.eq(expected.copied()), "{schema}");
        schema
    }

    #[tokio::test]
    async fn the_schemas_are_those_iceberg_rust_writes() {
        for version in [FormatVersion::V2, FormatVersion::V3] {
            let text = SCHEMA_TEXTS[usize::from(version == FormatVersion::V3)];
            assert_eq!(written_schema(version).await, text, "{version}");
            assert_eq!(schema(version).unwrap().json(), text);
        }
    }
}
