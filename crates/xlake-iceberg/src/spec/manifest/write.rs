//! Writing a manifest (issue 16). iceberg-rust's `ManifestWriter` turns every entry into an
//! apache-avro `Value`, resolves it against the schema and validates it again while
//! writing; in a Delta backfill that was over a third of the time (benches/README.md).
//! Here the file is the one iceberg-rust writes, encoded directly:
//!
//! - the header (the Avro schema with Iceberg's field ids, and the `schema`,
//!   `partition-spec`, `format-version`, `content` … keys) is iceberg-rust's: its Avro
//!   schema is held as iceberg-rust's text for no partition field
//!   (`manifest_schema_v2.json`, the same for v3), the partition's fields put in its
//!   partition record as iceberg-rust writes them, and the keys are serialized as it
//!   serializes them (the tests compare both with iceberg-rust's for every type encoded
//!   here). A partition field whose name is not an Avro name (`part key`, `1st`) is
//!   written as Iceberg's Java and Python writers write it, under an escaped name with
//!   the name itself in `iceberg-field-name` ([`avro_name`]), where iceberg-rust writes
//!   the name as it is, which Avro's Java and C parsers (Spark, Trino, DuckDB) refuse. A
//!   header not built here is learned from iceberg-rust, by letting it write the same
//!   manifest with no entries;
//! - each entry is encoded by serde_avro_fast from [`Record`], which holds the fields of
//!   iceberg-rust's own `ManifestEntryV2`/`DataFileSerde`, filled the same way;
//! - [`Sink`] takes entries as iceberg-rust's `add_file`, `add_delete_file` and
//!   `add_existing_file` do, with the same checks, and sums the same counts and
//!   partition summaries for the manifest list.
//!
//! A partition value of a type [`PartitionValue`] does not encode, or a table in format
//! version 1, is written by iceberg-rust as before (a partition name that is not an Avro
//! name then written as it is: docs/known-gaps.md).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, Datum, FieldSummary, FormatVersion, Literal, ManifestContentType,
    ManifestEntry, ManifestFile, ManifestStatus, ManifestWriterBuilder, PartitionSpec,
    PrimitiveLiteral, PrimitiveType, SchemaRef, Struct, StructType, UNASSIGNED_SEQUENCE_NUMBER,
};
use iceberg::{Error, ErrorKind};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_avro_fast::object_container_file_encoding::Reader;
use serde_bytes::ByteBuf;

use crate::spec::manifest::avro_name::avro_name;
use crate::spec::manifest::record::{Bound, Counted, EntryRecord, FileRecord, FILE_FIELDS};

use crate::spec::error::CodecError;

/// The entries of one manifest, taken as iceberg-rust's `ManifestWriter` takes them.
pub(crate) struct Sink {
    snapshot_id: i64,
    content: ManifestContentType,
    entries: Vec<ManifestEntry>,
}

impl Sink {
    pub(crate) fn new(snapshot_id: i64, content: ManifestContentType) -> Self {
        Self {
            snapshot_id,
            content,
            entries: Vec::new(),
        }
    }

    /// A file added by this snapshot (its sequence number inherited when negative).
    pub(crate) fn add_file(&mut self, file: DataFile, sequence_number: i64) -> iceberg::Result<()> {
        self.push(ManifestEntry {
            status: ManifestStatus::Added,
            snapshot_id: Some(self.snapshot_id),
            sequence_number: (sequence_number >= 0).then_some(sequence_number),
            file_sequence_number: None,
            data_file: file,
        })
    }

    /// A file this snapshot removes.
    pub(crate) fn add_delete_file(
        &mut self,
        file: DataFile,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> iceberg::Result<()> {
        self.push(ManifestEntry {
            status: ManifestStatus::Deleted,
            snapshot_id: Some(self.snapshot_id),
            sequence_number: Some(sequence_number),
            file_sequence_number,
            data_file: file,
        })
    }

    /// A file an older snapshot added, carried.
    pub(crate) fn add_existing_file(
        &mut self,
        file: DataFile,
        snapshot_id: i64,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> iceberg::Result<()> {
        self.push(ManifestEntry {
            status: ManifestStatus::Existing,
            snapshot_id: Some(snapshot_id),
            sequence_number: Some(sequence_number),
            file_sequence_number,
            data_file: file,
        })
    }

    fn push(&mut self, entry: ManifestEntry) -> iceberg::Result<()> {
        let content = entry.data_file.content_type();
        let fits = match self.content {
            ManifestContentType::Data => content == DataContentType::Data,
            ManifestContentType::Deletes => content != DataContentType::Data,
        };
        if !fits {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!(
                    "{}: a {content:?} file in a {} manifest",
                    entry.data_file.file_path(),
                    self.content
                ),
            ));
        }
        let carried = entry.status != ManifestStatus::Added;
        if carried && (entry.sequence_number.is_none() || entry.file_sequence_number.is_none()) {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                "Manifest entry with status Existing or Deleted should have sequence number",
            ));
        }
        self.entries.push(entry);
        Ok(())
    }
}

/// The partition type of `spec`, once every entry's partition tuple is checked to have
/// one value per field, each a primitive or null: iceberg-rust's writer panics on any
/// other tuple, and a record would be written with missing or extra values.
pub(crate) fn partition_type(
    sink: &Sink,
    (schema, spec): (&SchemaRef, &PartitionSpec),
) -> Result<StructType, CodecError> {
    let partition = spec.partition_type(schema).map_err(CodecError::library)?;
    let fields = partition.fields().len();
    for e in &sink.entries {
        let tuple = e.data_file.partition();
        let values = tuple.iter().count();
        let primitive = tuple
            .iter()
            .all(|v| v.is_none_or(|l| l.as_primitive_literal().is_some()));
        if values != fields || !primitive {
            return Err(format!(
                "{}: a partition tuple of {values} values ({}) for a spec of {fields} fields",
                e.data_file.file_path(),
                if primitive {
                    "primitive"
                } else {
                    "not all primitive"
                }
            )
            .into());
        }
    }
    Ok(partition)
}

/// The manifest `sink` holds as iceberg-rust would write it at `location`, and its list
/// entry; `None` when it is not one this module encodes.
/// `partition` is the spec's partition type ([`partition_type`]).
pub(crate) async fn encode(
    sink: &Sink,
    location: &str,
    (schema, spec): (&SchemaRef, &PartitionSpec),
    version: FormatVersion,
    partition: &StructType,
) -> Option<(Vec<u8>, ManifestFile)> {
    if version == FormatVersion::V1 {
        return None;
    }
    let types = partition_types(partition)?;
    let header = header(sink, (schema, spec), version, partition).await?;
    let bytes = records(sink, &header, &types).ok()?;
    let summaries = summaries(sink, &types).ok()?;
    let listed = list_entry(sink, location, (bytes.len(), spec.spec_id()), summaries);
    Some((bytes, listed))
}

/// The Avro name ([`avro_name`]) and primitive type of each partition field, if every
/// one is a type [`PartitionValue`] encodes.
fn partition_types(partition: &StructType) -> Option<Vec<(String, PrimitiveType)>> {
    partition
        .fields()
        .iter()
        .map(|f| {
            let ty = f.field_type.as_primitive_type()?.clone();
            encodes(&ty).then(|| (avro_name(&f.name), ty))
        })
        .collect()
}

fn encodes(ty: &PrimitiveType) -> bool {
    matches!(
        ty,
        PrimitiveType::Boolean
            | PrimitiveType::Int
            | PrimitiveType::Long
            | PrimitiveType::Date
            | PrimitiveType::String
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
    )
}

/// What iceberg-rust writes before the first entry: the schema (JSON, as its Avro writer
/// serializes it) and the user metadata.
struct Header {
    schema: Arc<serde_avro_fast::Schema>,
    metadata: BTreeMap<String, ByteBuf>,
}

/// Headers by shape; a service syncing many tables keeps a few dozen at most.
static HEADERS: OnceLock<Mutex<HashMap<String, Arc<Header>>>> = OnceLock::new();
const HEADERS_KEPT: usize = 64;

/// The header iceberg-rust writes for this shape (cached): built here ([`held_header`]),
/// else learned from iceberg-rust ([`learned_header`]).
async fn header(
    sink: &Sink,
    (schema, spec): (&SchemaRef, &PartitionSpec),
    version: FormatVersion,
    partition: &StructType,
) -> Option<Arc<Header>> {
    let schema_json = serde_json::to_string(schema.as_ref()).ok()?;
    let spec_json = serde_json::to_string(spec).ok()?;
    let key = format!("{version:?}|{}|{schema_json}|{spec_json}", sink.content);
    let cache = HEADERS.get_or_init(Default::default);
    if let Some(found) = cache.lock().ok()?.get(&key) {
        return Some(found.clone());
    }
    let shape = (schema, spec);
    let header = match held_header(sink.content, shape, version, partition, schema_json) {
        Some(header) => header,
        None => learned_header(sink, shape, version, &partition_types(partition)?).await?,
    };
    let header = Arc::new(header);
    let mut kept = cache.lock().ok()?;
    if kept.len() >= HEADERS_KEPT {
        kept.clear();
    }
    kept.insert(key, header.clone());
    Some(header)
}

/// iceberg-rust's Avro schema of a manifest entry (v2, and v3: the same) when the
/// partition has no field: its partition record is [`NO_PARTITION`].
const SCHEMA_TEXT: &str = include_str!("manifest_schema_v2.json");
const NO_PARTITION: &str = r#"{"type":"record","name":"r102","fields":[]}"#;

/// The header iceberg-rust writes, built as it builds it: [`SCHEMA_TEXT`] with the
/// partition's record ([`partition_record`]), and its user metadata. `None` where that
/// record is not built here (then the header is learned from iceberg-rust).
fn held_header(
    content: ManifestContentType,
    (schema, spec): (&SchemaRef, &PartitionSpec),
    version: FormatVersion,
    partition: &StructType,
    schema_json: String,
) -> Option<Header> {
    (version != FormatVersion::V1).then_some(())?;
    let record = partition_record(partition)?;
    (SCHEMA_TEXT.matches(NO_PARTITION).count() == 1).then_some(())?;
    let avro = SCHEMA_TEXT
        .replacen(NO_PARTITION, &record, 1)
        .parse()
        .ok()?;
    let keys = [
        ("schema", schema_json),
        ("schema-id", schema.schema_id().to_string()),
        ("partition-spec", serde_json::to_string(spec.fields()).ok()?),
        ("partition-spec-id", spec.spec_id().to_string()),
        ("format-version", (version as u8).to_string()),
        ("content", content.to_string()),
    ];
    let metadata = keys
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteBuf::from(v.into_bytes())))
        .collect();
    Some(Header {
        schema: Arc::new(avro),
        metadata,
    })
}

/// The partition record of a manifest's schema as iceberg-rust writes it: each field
/// nullable, with a null default and its field id. A field whose name is not an Avro
/// name is written as Iceberg's Java and Python writers write it, and iceberg-rust does
/// not (it writes the name as it is, which Avro's Java, C and Rust parsers refuse): under
/// its escaped name ([`avro_name`]), the name itself in `iceberg-field-name`. `None` for
/// a field that is not one iceberg-rust writes that way and accepts: of another type than
/// [`avro_type`]'s, required or with a default, or whose id or Avro name is another
/// field's, or whose id is below 1000 (where the entry's own field ids are: iceberg-rust
/// refuses a duplicate).
fn partition_record(partition: &StructType) -> Option<String> {
    let (mut ids, mut names) = (HashSet::new(), HashSet::new());
    let mut fields = Vec::with_capacity(partition.fields().len());
    for f in partition.fields() {
        let ty = avro_type(f.field_type.as_primitive_type()?)?;
        let name = avro_name(&f.name);
        let optional = !f.required && f.initial_default.is_none();
        let unique = f.id >= 1000 && ids.insert(f.id) && names.insert(name.clone());
        (optional && unique).then_some(())?;
        let original = match name == f.name {
            true => String::new(),
            false => format!(
                r#","iceberg-field-name":{}"#,
                serde_json::to_string(&f.name).ok()?
            ),
        };
        let id = f.id;
        fields.push(format!(
            r#"{{"name":"{name}","type":["null",{ty}],"default":null,"field-id":{id}{original}}}"#
        ));
    }
    Some(format!(
        r#"{{"type":"record","name":"r102","fields":[{}]}}"#,
        fields.join(",")
    ))
}

/// The Avro type iceberg-rust writes a partition value of type `ty` as (before the
/// union with null), for the types [`PartitionValue`] encodes.
fn avro_type(ty: &PrimitiveType) -> Option<&'static str> {
    Some(match ty {
        PrimitiveType::Boolean => r#""boolean""#,
        PrimitiveType::Int => r#""int""#,
        PrimitiveType::Long => r#""long""#,
        PrimitiveType::String => r#""string""#,
        PrimitiveType::Date => r#"{"type":"int","logicalType":"date"}"#,
        PrimitiveType::Timestamp | PrimitiveType::Timestamptz => {
            r#"{"type":"long","logicalType":"timestamp-micros"}"#
        }
        _ => return None,
    })
}

/// The header of an empty manifest iceberg-rust writes for this shape, if laid out as
/// this module writes.
async fn learned_header(
    sink: &Sink,
    (schema, spec): (&SchemaRef, &PartitionSpec),
    version: FormatVersion,
    types: &[(String, PrimitiveType)],
) -> Option<Header> {
    let empty = Sink::new(sink.snapshot_id, sink.content);
    let bytes = iceberg_write(
        empty,
        "/xlake-manifest-header.avro",
        (schema, spec),
        version,
    )
    .await
    .ok()?
    .0;
    type Metadata = BTreeMap<String, ByteBuf>;
    let slice = serde_avro_fast::de::read::SliceRead::new(&bytes[..]);
    let (read, metadata) = Reader::new_and_metadata::<Metadata>(slice).ok()?;
    let schema = read.schema().clone();
    laid_out_as_written(schema.json(), types).then_some(Header { schema, metadata })
}

/// Whether a manifest schema (JSON) is laid out as [`EntryRecord`] writes: every field of
/// the entry and its `data_file` of the type iceberg-rust writes (the reader's check,
/// [`crate::spec::manifest::read::parse_partition`]), the `data_file` fields exactly
/// [`FILE_FIELDS`] in that order (a record is written in the order of its fields), and
/// the partition fields those of `types`; so for a header learned from a newer
/// iceberg-rust with another layout, its own writer writes the manifest. (The held
/// header's layout is checked by `the_held_header_is_iceberg_rusts`, against the
/// iceberg-rust xlake is built with.)
fn laid_out_as_written(schema: &str, types: &[(String, PrimitiveType)]) -> bool {
    let Some(partition) = crate::spec::manifest::read::parse_partition(schema) else {
        return false;
    };
    let names = partition.iter().map(|w| &w.name);
    names.eq(types.iter().map(|(name, _)| name)) && data_file_fields_are(schema, FILE_FIELDS)
}

/// Whether the `data_file` record of a manifest schema (JSON) has exactly `fields`, in
/// order.
fn data_file_fields_are(schema: &str, fields: &[&str]) -> bool {
    let Ok(schema) = serde_json::from_str::<serde_json::Value>(schema) else {
        return false;
    };
    let names = |record: &serde_json::Value| -> Vec<String> {
        let fields = record["fields"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        fields
            .iter()
            .filter_map(|f| f["name"].as_str().map(String::from))
            .collect()
    };
    let entry_fields = schema["fields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let file = entry_fields.iter().find(|f| f["name"] == "data_file");
    file.is_some_and(|f| {
        names(&f["type"])
            .iter()
            .map(String::as_str)
            .eq(fields.iter().copied())
    })
}

/// The manifest written by iceberg-rust's `ManifestWriter` (and its list entry).
pub(crate) async fn iceberg_write(
    sink: Sink,
    location: &str,
    (schema, spec): (&SchemaRef, &PartitionSpec),
    version: FormatVersion,
) -> Result<(bytes::Bytes, ManifestFile), CodecError> {
    let io = FileIO::new_with_memory();
    let output = io.new_output(location).map_err(CodecError::library)?;
    let builder = ManifestWriterBuilder::new(
        output,
        Some(sink.snapshot_id),
        None,
        schema.clone(),
        spec.clone(),
    );
    let deletes = sink.content == ManifestContentType::Deletes;
    let mut writer = match (deletes, version >= FormatVersion::V3) {
        (true, false) => builder.build_v2_deletes(),
        (false, false) => builder.build_v2_data(),
        (true, true) => builder.build_v3_deletes(),
        (false, true) => builder.build_v3_data(),
    };
    for e in sink.entries {
        let (seq, file_seq) = (e.sequence_number, e.file_sequence_number);
        let added = match e.status {
            ManifestStatus::Added => writer.add_file(e.data_file, seq.unwrap_or(-1)),
            ManifestStatus::Deleted => {
                writer.add_delete_file(e.data_file, seq.unwrap_or(-1), file_seq)
            }
            ManifestStatus::Existing => {
                let snapshot = e.snapshot_id.unwrap_or(-1);
                writer.add_existing_file(e.data_file, snapshot, seq.unwrap_or(-1), file_seq)
            }
        };
        added.map_err(CodecError::library)?;
    }
    let listed = writer
        .write_manifest_file()
        .await
        .map_err(CodecError::library)?;
    Ok((crate::spec::written::written(&io, location).await?, listed))
}

/// The Avro file of `sink`'s entries under `header`.
fn records(
    sink: &Sink,
    header: &Header,
    types: &[(String, PrimitiveType)],
) -> Result<Vec<u8>, CodecError> {
    use serde_avro_fast::object_container_file_encoding::{Compression, WriterBuilder};
    let mut config = serde_avro_fast::ser::SerializerConfig::new(&header.schema);
    let mut writer = WriterBuilder::new(&mut config)
        .compression(Compression::Null)
        .build_with_user_metadata(Vec::new(), &header.metadata)
        .map_err(CodecError::library)?;
    for entry in &sink.entries {
        let record = record(entry, types).map_err(CodecError::library)?;
        writer.serialize(record).map_err(CodecError::library)?;
    }
    writer.into_inner().map_err(CodecError::library)
}

/// One manifest entry, field for field as iceberg-rust's `ManifestEntryV2` writes it.
type Record<'a> = EntryRecord<PartitionRecord<'a>>;

/// The record of `entry` (values as iceberg-rust's `DataFileSerde::try_from` makes them).
fn record<'a>(
    entry: &'a ManifestEntry,
    types: &'a [(String, PrimitiveType)],
) -> iceberg::Result<Record<'a>> {
    let f = &entry.data_file;
    let status = match entry.status {
        ManifestStatus::Existing => 0,
        ManifestStatus::Added => 1,
        ManifestStatus::Deleted => 2,
    };
    Ok(EntryRecord {
        status,
        snapshot_id: entry.snapshot_id,
        sequence_number: entry.sequence_number,
        file_sequence_number: entry.file_sequence_number,
        data_file: FileRecord {
            content: f.content_type() as i32,
            file_path: f.file_path().to_string(),
            file_format: f.file_format().to_string().to_ascii_uppercase(),
            partition: PartitionRecord {
                values: f.partition(),
                types,
            },
            record_count: signed(f.record_count())?,
            file_size_in_bytes: signed(f.file_size_in_bytes())?,
            column_sizes: Some(counted(f.column_sizes())?),
            value_counts: Some(counted(f.value_counts())?),
            null_value_counts: Some(counted(f.null_value_counts())?),
            nan_value_counts: Some(counted(f.nan_value_counts())?),
            lower_bounds: Some(bounds(f.lower_bounds())?),
            upper_bounds: Some(bounds(f.upper_bounds())?),
            key_metadata: f.key_metadata().map(|k| ByteBuf::from(k.to_vec())),
            split_offsets: f.split_offsets().map(<[i64]>::to_vec),
            equality_ids: f.equality_ids(),
            sort_order_id: f.sort_order_id(),
            first_row_id: f.first_row_id(),
            referenced_data_file: f.referenced_data_file(),
            content_offset: f.content_offset(),
            content_size_in_bytes: f.content_size_in_bytes(),
        },
    })
}

fn signed(n: u64) -> iceberg::Result<i64> {
    i64::try_from(n).map_err(|e| Error::new(ErrorKind::DataInvalid, e.to_string()))
}

fn counted(map: &HashMap<i32, u64>) -> iceberg::Result<Vec<Counted>> {
    let mut out = map
        .iter()
        .map(|(&key, &n)| {
            Ok(Counted {
                key,
                value: signed(n)?,
            })
        })
        .collect::<iceberg::Result<Vec<_>>>()?;
    out.sort_by_key(|c| c.key);
    Ok(out)
}

fn bounds(map: &HashMap<i32, Datum>) -> iceberg::Result<Vec<Bound>> {
    let mut out = map
        .iter()
        .map(|(&key, d)| {
            Ok(Bound {
                key,
                value: d.to_bytes()?,
            })
        })
        .collect::<iceberg::Result<Vec<_>>>()?;
    out.sort_by_key(|b| b.key);
    Ok(out)
}

/// A partition tuple as an Avro record of nullable fields, by field name.
struct PartitionRecord<'a> {
    values: &'a Struct,
    types: &'a [(String, PrimitiveType)],
}

impl Serialize for PartitionRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.types.len()))?;
        for (value, (name, _)) in self.values.iter().zip(self.types) {
            map.serialize_entry(name, &PartitionValue(value))?;
        }
        map.end()
    }
}

/// One partition value: booleans, ints (and dates), longs (and timestamps), strings.
struct PartitionValue<'a>(Option<&'a Literal>);

impl Serialize for PartitionValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            None => s.serialize_none(),
            Some(Literal::Primitive(PrimitiveLiteral::Boolean(v))) => s.serialize_some(v),
            Some(Literal::Primitive(PrimitiveLiteral::Int(v))) => s.serialize_some(v),
            Some(Literal::Primitive(PrimitiveLiteral::Long(v))) => s.serialize_some(v),
            Some(Literal::Primitive(PrimitiveLiteral::String(v))) => s.serialize_some(v),
            Some(other) => Err(serde::ser::Error::custom(format!(
                "a partition value xlake does not encode: {other:?}"
            ))),
        }
    }
}

/// Each partition field's summary, as iceberg-rust's `PartitionFieldStats` makes it.
fn summaries(sink: &Sink, types: &[(String, PrimitiveType)]) -> iceberg::Result<Vec<FieldSummary>> {
    let mut out = Vec::with_capacity(types.len());
    for (i, (_, ty)) in types.iter().enumerate() {
        let mut summary = FieldSummary {
            contains_null: false,
            contains_nan: Some(false),
            lower_bound: None,
            upper_bound: None,
        };
        let (mut low, mut high): (Option<Datum>, Option<Datum>) = (None, None);
        for entry in &sink.entries {
            let value = entry.data_file.partition().iter().nth(i).flatten();
            let Some(value) = value.and_then(Literal::as_primitive_literal) else {
                summary.contains_null = true;
                continue;
            };
            let datum = datum(ty, value)?;
            if low.as_ref().is_none_or(|l| datum < *l) {
                low = Some(datum.clone());
            }
            if high.as_ref().is_none_or(|h| datum > *h) {
                high = Some(datum);
            }
        }
        summary.lower_bound = low.map(|d| d.to_bytes()).transpose()?;
        summary.upper_bound = high.map(|d| d.to_bytes()).transpose()?;
        out.push(summary);
    }
    Ok(out)
}

/// A partition value of type `ty` as a datum (the types [`encodes`] admits).
fn datum(ty: &PrimitiveType, value: PrimitiveLiteral) -> iceberg::Result<Datum> {
    let wrong = || Error::new(ErrorKind::DataInvalid, "value is not compatible with type");
    if !ty.compatible(&value) {
        return Err(wrong());
    }
    Ok(match (ty, value) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(v)) => Datum::bool(v),
        (PrimitiveType::Int, PrimitiveLiteral::Int(v)) => Datum::int(v),
        (PrimitiveType::Date, PrimitiveLiteral::Int(v)) => Datum::date(v),
        (PrimitiveType::Long, PrimitiveLiteral::Long(v)) => Datum::long(v),
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(v)) => Datum::timestamp_micros(v),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(v)) => Datum::timestamptz_micros(v),
        (PrimitiveType::String, PrimitiveLiteral::String(v)) => Datum::string(v),
        _ => return Err(wrong()),
    })
}

/// The manifest list entry of a manifest of `sink` (what `write_manifest_file` returns).
fn list_entry(
    sink: &Sink,
    location: &str,
    (length, spec_id): (usize, i32),
    summaries: Vec<FieldSummary>,
) -> ManifestFile {
    let (mut files, mut rows) = ([0u32; 3], [0u64; 3]);
    let mut min_seq: Option<i64> = None;
    for e in &sink.entries {
        let i = match e.status {
            ManifestStatus::Added => 0,
            ManifestStatus::Existing => 1,
            ManifestStatus::Deleted => 2,
        };
        files[i] += 1;
        rows[i] += e.data_file.record_count();
        if e.status != ManifestStatus::Deleted {
            if let Some(seq) = e.sequence_number {
                min_seq = Some(min_seq.map_or(seq, |m| m.min(seq)));
            }
        }
    }
    ManifestFile {
        manifest_path: location.to_string(),
        manifest_length: length as i64,
        partition_spec_id: spec_id,
        content: sink.content,
        sequence_number: UNASSIGNED_SEQUENCE_NUMBER,
        min_sequence_number: min_seq.unwrap_or(UNASSIGNED_SEQUENCE_NUMBER),
        added_snapshot_id: sink.snapshot_id,
        added_files_count: Some(files[0]),
        existing_files_count: Some(files[1]),
        deleted_files_count: Some(files[2]),
        added_rows_count: Some(rows[0]),
        existing_rows_count: Some(rows[1]),
        deleted_rows_count: Some(rows[2]),
        partitions: Some(summaries),
        key_metadata: None,
        first_row_id: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use iceberg::spec::{
        DataFileBuilder, DataFileFormat, Manifest, NestedField, PrimitiveType, Schema, Transform,
        Type, UnboundPartitionField,
    };

    use super::*;

    /// A table with a column of every partition type this module encodes, and a decimal.
    fn schema() -> SchemaRef {
        let columns = [
            (1, "b", PrimitiveType::Boolean),
            (2, "i", PrimitiveType::Int),
            (3, "l", PrimitiveType::Long),
            (4, "d", PrimitiveType::Date),
            (5, "s", PrimitiveType::String),
            (6, "t", PrimitiveType::Timestamp),
            (7, "tz", PrimitiveType::Timestamptz),
            (8, "f", PrimitiveType::Double),
            (
                9,
                "dec",
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
        ];
        let fields = columns
            .into_iter()
            .map(|(id, name, ty)| Arc::new(NestedField::optional(id, name, Type::Primitive(ty))));
        Arc::new(Schema::builder().with_fields(fields).build().unwrap())
    }

    fn spec(schema: &SchemaRef, columns: &[i32]) -> PartitionSpec {
        let fields = columns
            .iter()
            .enumerate()
            .map(|(i, &id)| UnboundPartitionField {
                source_id: id,
                field_id: Some(1000 + i as i32),
                name: format!("p{id}"),
                transform: Transform::Identity,
            });
        PartitionSpec::builder(schema.clone())
            .with_spec_id(3)
            .add_unbound_fields(fields)
            .unwrap()
            .build()
            .unwrap()
    }

    fn literal(id: i32, n: i64) -> Option<Literal> {
        let n32 = n as i32;
        Some(match id {
            1 => Literal::bool(n % 2 == 0),
            2 => Literal::int(n32 - 3),
            3 => Literal::long(n * 1_000_000_007),
            4 => Literal::date(19_000 + n32),
            5 => Literal::string(format!("day=2024-01-{n:02}/\u{e9}")),
            6 | 7 => Literal::long(1_700_000_000_000_000 + n),
            _ => return None,
        })
    }

    fn file(n: i64, content: DataContentType, partition: &[i32]) -> DataFile {
        let values = partition
            .iter()
            .map(|&id| (n % 4 != 3).then(|| literal(id, n)).flatten());
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(format!("/t/data/f{n}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter(values))
            .partition_spec_id(3)
            .record_count(100 + n as u64)
            .file_size_in_bytes(4096 + n as u64)
            .column_sizes(HashMap::from([(1, 10), (5, 20 + n as u64)]))
            .value_counts(HashMap::from([(1, 100), (5, 100)]))
            .null_value_counts(HashMap::from([(1, 0), (5, n as u64)]))
            .nan_value_counts(HashMap::from([(8, 1)]))
            .lower_bounds(HashMap::from([
                (3, Datum::long(-n)),
                (5, Datum::string("a")),
                (4, Datum::date(19_000)),
                (8, Datum::double(-0.5)),
                (9, Datum::decimal_from_str("-12.34").unwrap()),
            ]))
            .upper_bounds(HashMap::from([
                (3, Datum::long(n)),
                (5, Datum::string("z\u{e9}")),
            ]))
            .split_offsets(Some(vec![4, 4000]))
            .first_row_id((n % 2 == 0).then_some(n * 1000));
        if n % 3 == 0 {
            b.sort_order_id(1).key_metadata(Some(vec![1, 2, n as u8]));
        }
        if content == DataContentType::PositionDeletes {
            b.file_format(DataFileFormat::Puffin)
                .referenced_data_file(Some(format!("/t/data/f{}.parquet", n + 1)))
                .content_offset(Some(4 + n))
                .content_size_in_bytes(Some(40 + n));
        }
        b.build().unwrap()
    }

    fn fill(sink: &mut Sink, content: DataContentType, partition: &[i32]) {
        for n in 0..12 {
            let f = file(n, content, partition);
            match n % 4 {
                0 => sink.add_file(f, -1).unwrap(),
                1 => sink.add_file(f, 7).unwrap(),
                2 => sink
                    .add_existing_file(f, 40 + n, 3 + n, Some(2 + n))
                    .unwrap(),
                _ => sink.add_delete_file(f, 5, Some(4)).unwrap(),
            }
        }
    }

    /// The schema text of an Avro file's header.
    fn schema_text(bytes: &[u8]) -> String {
        let read = apache_avro::Reader::new(bytes).unwrap();
        serde_json::to_string(read.writer_schema()).unwrap()
    }

    /// For v2 and v3, data and delete manifests, partitioned by each encoded type (with
    /// nulls) and not: iceberg-rust reads back the same entries and metadata from both
    /// writers, the headers are the same, and so are the list entries.
    #[tokio::test]
    async fn writes_what_iceberg_rust_writes() {
        let schema = schema();
        let shapes: [&[i32]; 3] = [&[], &[1, 2, 3, 4, 5, 6, 7], &[5]];
        let contents = [DataContentType::Data, DataContentType::PositionDeletes];
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for partition in shapes {
                for content in contents {
                    let spec = spec(&schema, partition);
                    let kind = match content {
                        DataContentType::Data => ManifestContentType::Data,
                        _ => ManifestContentType::Deletes,
                    };
                    let (mut ours, mut theirs) = (Sink::new(77, kind), Sink::new(77, kind));
                    fill(&mut ours, content, partition);
                    fill(&mut theirs, content, partition);
                    let shape = (&schema, &spec);
                    let what = format!("{version:?} {content:?} {partition:?}");
                    let partition = partition_type(&ours, shape).unwrap();
                    let (bytes, listed) = encode(&ours, "/t/m.avro", shape, version, &partition)
                        .await
                        .unwrap_or_else(|| panic!("{what}: not encoded"));
                    let (want, want_listed) = iceberg_write(theirs, "/t/m.avro", shape, version)
                        .await
                        .unwrap();
                    let got = Manifest::parse_avro(&bytes).unwrap();
                    assert_eq!(got, Manifest::parse_avro(&want).unwrap(), "{what}");
                    // xlake's own reader reads what this writes as iceberg-rust does.
                    let fast = crate::spec::manifest::read::entries(&bytes, "/t/m.avro").unwrap();
                    let slow: Vec<ManifestEntry> =
                        got.entries().iter().map(|e| (**e).clone()).collect();
                    assert_eq!(fast, slow, "{what}");
                    assert_eq!(schema_text(&bytes), schema_text(&want), "{what}");
                    let user =
                        |b: &[u8]| apache_avro::Reader::new(b).unwrap().user_metadata().clone();
                    assert_eq!(user(&bytes), user(&want), "{what}");
                    let length = |mut m: ManifestFile| {
                        m.manifest_length = 0;
                        m
                    };
                    assert_eq!(length(listed), length(want_listed), "{what}");
                }
            }
        }
    }

    /// A partition of a type not encoded here (decimal, double) is left to iceberg-rust.
    #[tokio::test]
    async fn other_partition_types_are_left_to_iceberg_rust() {
        let schema = schema();
        for column in [8, 9] {
            let spec = spec(&schema, &[column]);
            let sink = Sink::new(1, ManifestContentType::Data);
            let shape = (&schema, &spec);
            let partition = partition_type(&sink, shape).unwrap();
            let encoded = encode(&sink, "/t/m.avro", shape, FormatVersion::V2, &partition).await;
            assert!(encoded.is_none());
        }
    }

    /// The header built here is the one iceberg-rust writes, for every partition type
    /// encoded here, in v2 and v3, for data and delete manifests, and is laid out as this
    /// module writes; a partition name that is not an Avro name is written escaped.
    #[tokio::test]
    async fn the_held_header_is_iceberg_rusts() {
        let schema = schema();
        let kinds = [ManifestContentType::Data, ManifestContentType::Deletes];
        let shapes: [&[i32]; 4] = [&[], &[1, 2, 3, 4, 5, 6, 7], &[7, 1], &[4]];
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for (content, columns) in kinds.into_iter().flat_map(|k| shapes.map(|c| (k, c))) {
                let what = format!("{version:?} {content:?} {columns:?}");
                let spec = spec(&schema, columns);
                let partition = spec.partition_type(&schema).unwrap();
                let types = partition_types(&partition).unwrap();
                let json = serde_json::to_string(schema.as_ref()).unwrap();
                let shape = (&schema, &spec);
                let held = held_header(content, shape, version, &partition, json).unwrap();
                let sink = Sink::new(1, content);
                let learned = learned_header(&sink, shape, version, &types).await.unwrap();
                assert_eq!(held.schema.json(), learned.schema.json(), "{what}");
                assert_eq!(held.metadata, learned.metadata, "{what}");
                assert!(laid_out_as_written(held.schema.json(), &types), "{what}");
            }
        }
        // Left to iceberg-rust: a field id among the entry's own, two fields of one id or
        // one Avro name.
        let field =
            |id, name: &str| Arc::new(NestedField::optional(id, name, PrimitiveType::Int.into()));
        for fields in [
            vec![field(1000, "a b"), field(1001, "a_x20b")],
            vec![field(102, "p")],
            vec![field(1000, "p"), field(1000, "q")],
            vec![field(1000, "p"), field(1001, "p")],
        ] {
            assert!(partition_record(&StructType::new(fields.clone())).is_none());
        }
        let fine = StructType::new(vec![field(1000, "p"), field(1001, "q")]);
        assert!(partition_record(&fine).is_some());
        // Escaped as Java and Python escape it.
        let odd = StructType::new(vec![field(1000, "part key"), field(1001, "1st")]);
        assert_eq!(
            partition_record(&odd).unwrap(),
            r#"{"type":"record","name":"r102","fields":[{"name":"part_x20key","type":["null","int"],"default":null,"field-id":1000,"iceberg-field-name":"part key"},{"name":"_1st","type":["null","int"],"default":null,"field-id":1001,"iceberg-field-name":"1st"}]}"#
        );
    }

    /// The layout check passes iceberg-rust's own schema and fails any other order.
    #[tokio::test]
    async fn another_layout_is_left_to_iceberg_rust() {
        let schema = schema();
        let spec = spec(&schema, &[5]);
        let sink = Sink::new(1, ManifestContentType::Data);
        let types = partition_types(&spec.partition_type(&schema).unwrap()).unwrap();
        let header = learned_header(&sink, (&schema, &spec), FormatVersion::V3, &types)
            .await
            .unwrap();
        assert!(laid_out_as_written(header.schema.json(), &types));
        assert!(!laid_out_as_written(header.schema.json(), &types[1..]));
        assert!(data_file_fields_are(header.schema.json(), FILE_FIELDS));
        let mut swapped = FILE_FIELDS.to_vec();
        swapped.swap(4, 5);
        assert!(!data_file_fields_are(header.schema.json(), &swapped));
        assert!(!data_file_fields_are("[]", FILE_FIELDS));
    }

    /// A partition tuple that does not fit the spec is refused before either writer runs.
    #[tokio::test]
    async fn a_partition_tuple_of_the_wrong_length_is_refused() {
        let schema = schema();
        let spec = spec(&schema, &[2, 5]);
        for tuple in [&[2][..], &[2, 5, 3]] {
            let mut sink = Sink::new(1, ManifestContentType::Data);
            sink.add_file(file(1, DataContentType::Data, tuple), -1)
                .unwrap();
            let err = partition_type(&sink, (&schema, &spec))
                .unwrap_err()
                .to_string();
            assert!(err.contains("for a spec of 2 fields"), "{err}");
        }
        let mut sink = Sink::new(1, ManifestContentType::Data);
        sink.add_file(file(1, DataContentType::Data, &[2, 5]), -1)
            .unwrap();
        assert!(partition_type(&sink, (&schema, &spec)).is_ok());
    }

    /// A file of the wrong content, and a carried entry without sequence numbers, are
    /// refused as iceberg-rust refuses them.
    #[test]
    fn entries_are_checked_as_iceberg_rust_checks_them() {
        let mut data = Sink::new(1, ManifestContentType::Data);
        assert!(data
            .add_file(file(1, DataContentType::PositionDeletes, &[]), -1)
            .is_err());
        let f = file(1, DataContentType::Data, &[]);
        assert!(data.add_existing_file(f.clone(), 1, 1, None).is_err());
        assert!(data.add_delete_file(f, 1, None).is_err());
        let mut deletes = Sink::new(1, ManifestContentType::Deletes);
        assert!(deletes
            .add_file(file(1, DataContentType::Data, &[]), -1)
            .is_err());
    }
}
