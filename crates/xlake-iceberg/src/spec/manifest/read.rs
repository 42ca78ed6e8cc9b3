//! Reading a manifest: every commit that removes or merges files reads manifests, and a
//! backfill reads thousands. iceberg-rust's `Manifest::parse_avro` resolves each record
//! against its own reader schema into an apache-avro `Value` tree and then deserializes
//! that (about 30% of a Delta backfill, benches/README.md); here serde_avro_fast reads the
//! `manifest_entry` records straight into a struct with the fields of iceberg-rust's own
//! (`manifest::_serde::ManifestEntryV2`/`DataFileSerde`), by the writer's schema in the
//! file, and builds the same [`ManifestEntry`] values iceberg-rust's
//! `DataFileSerde::try_into` builds: counts without their negative entries, bounds as
//! [`Datum`]s of the column's type in the manifest's schema (columns it no longer has
//! dropped), partition tuples as [`Struct`]s of the spec's field types.
//!
//! The fast read takes only what it reads exactly as iceberg-rust does: format version 2
//! or 3 (the schema iceberg-rust reads v3 manifests with is v2's); a writer schema whose
//! entry and data file fields have the Avro types iceberg-rust writes and reads them with
//! (counts and bounds as arrays of key/value records; fields of other names are skipped,
//! as iceberg-rust's schema resolution skips them); a partition record laid out as
//! iceberg-rust writes it (the spec's fields in order, each with the Avro type
//! iceberg-rust gives its type: boolean, int, long, date, timestamp-micros, string or
//! fixed decimal), its fields matched to the spec's by field id, else by name, where
//! iceberg-rust matches names only: Java and pyiceberg write a name that is not an Avro
//! name escaped ([`crate::spec::manifest::avro_name`]), which iceberg-rust reads as null.
//! Where the fast read does not take a manifest and a spec field is not written under its
//! own name, the manifest is refused ([`unresolved`]) rather than read with nulls. Anything else (v1, another field type, another partition type or
//! layout, a codec left out of the build, a value that does not convert, a corrupt file)
//! is parsed by iceberg-rust as before, so entries and errors are iceberg-rust's. The
//! unit tests write manifests with iceberg-rust's `ManifestWriter` (v2 and v3, data and
//! deletes, partitioned or not, every entry status) and compare both readers.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use iceberg::metadata_columns::get_metadata_field;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    Manifest, ManifestEntry, ManifestMetadata, ManifestStatus, PrimitiveLiteral, PrimitiveType,
    Schema, SchemaRef, Struct,
};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_avro_fast::de::read::SliceRead;
use serde_avro_fast::object_container_file_encoding::Reader;
use serde_bytes::ByteBuf;

use crate::spec::container::Container;
use crate::spec::manifest::avro_name::{partition_fields, WrittenField};
use crate::spec::manifest::record::{Bound, Counted, EntryRecord, FileRecord};

use crate::spec::error::CodecError;

/// The entries of the manifest `bytes` (read from `location`), as written: snapshot ids
/// and sequence numbers not inherited from the manifest list.
pub(crate) fn entries(bytes: &[u8], location: &str) -> Result<Vec<ManifestEntry>, CodecError> {
    if let Some(entries) = fast(bytes) {
        return Ok(entries);
    }
    if let Some(why) = unresolved(bytes) {
        return Err(CodecError::invalid(why).context(location));
    }
    Manifest::parse_avro(bytes)
        .map(|m| {
            let (entries, _) = m.into_parts();
            entries.iter().map(|e| (**e).clone()).collect()
        })
        .map_err(CodecError::within(location))
}

/// Why iceberg-rust would read a partition field of the manifest `bytes` as null in every
/// entry, if it would: its reader resolves the partition record's fields by name, so a
/// spec field the writer wrote under another name (Java and Python escape a name that is
/// not an Avro name, `avro_name`) or not at all has no value. `None` when every field is
/// written under its own name, or when the header does not parse (iceberg-rust then says
/// what is wrong).
fn unresolved(bytes: &[u8]) -> Option<String> {
    let (reader, user) = header(bytes)?;
    let user: HashMap<String, Vec<u8>> = user.into_iter().map(|(k, v)| (k, v.into_vec())).collect();
    let metadata = ManifestMetadata::parse(&user).ok()?;
    let spec = metadata.partition_spec();
    let partition_type = spec.partition_type(metadata.schema()).ok()?;
    let written = partition_fields(reader.schema().json())?;
    let field = partition_type
        .fields()
        .iter()
        .find(|f| !written.iter().any(|w| w.name == f.name))?;
    let why = match written.iter().find(|w| w.names(field.id, &field.name)) {
        Some(w) => format!(
            "written as Avro field `{}`, which this reader only reads for a partition of \
             boolean, int, long, date, timestamp, string or decimal fields in a format \
             version 2 or 3 manifest",
            w.name
        ),
        None => "missing from the manifest's partition record".to_string(),
    };
    Some(format!(
        "partition field `{}` (id {}) of spec {} is {why}: its values would read as null",
        field.name,
        field.id,
        spec.spec_id()
    ))
}

/// The manifest read by serde_avro_fast; `None` for anything it does not read as
/// iceberg-rust does (module docs). A deflated manifest it refuses is read again
/// inflated (pyiceberg's blocks, [`crate::spec::manifest::inflate`]).
fn fast(bytes: &[u8]) -> Option<Vec<ManifestEntry>> {
    read_fast(bytes).or_else(|| read_fast(&crate::spec::manifest::inflate::inflated(bytes)?))
}

fn read_fast(bytes: &[u8]) -> Option<Vec<ManifestEntry>> {
    let (mut reader, layout) = open(bytes)?;
    reader
        .deserialize::<Entry>()
        .map(|r| layout.entry(r.ok()?))
        .collect()
}

/// The reader of a manifest the fast read takes, and its layout.
fn open(bytes: &[u8]) -> Option<(Reader<SliceRead<'_>>, Layout)> {
    let (reader, user) = header(bytes)?;
    let user: HashMap<String, Vec<u8>> = user.into_iter().map(|(k, v)| (k, v.into_vec())).collect();
    let metadata = ManifestMetadata::parse(&user).ok()?;
    if !matches!(
        metadata.format_version(),
        FormatVersion::V2 | FormatVersion::V3
    ) {
        return None;
    }
    let layout = Layout::of(&metadata, reader.schema().json())?;
    Some((reader, layout))
}

/// A manifest's reader (its schema parsed) and user metadata.
fn header(bytes: &[u8]) -> Option<(Reader<SliceRead<'_>>, HashMap<String, ByteBuf>)> {
    Reader::new_and_metadata(SliceRead::new(bytes)).ok()
}

/// Of a data manifest's entry, what [`live_files`] reads: its status, and its file's
/// content, path, row count and size (the other fields skipped, not decoded into values).
#[derive(Deserialize)]
struct LiveEntry {
    status: i32,
    data_file: LiveRecord,
}

#[derive(Deserialize)]
struct LiveRecord {
    content: i32,
    file_path: String,
    record_count: i64,
    file_size_in_bytes: i64,
}

/// A live data file of a manifest: its path, row count and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Live {
    pub(crate) path: String,
    pub(crate) records: u64,
    pub(crate) size: u64,
}

impl Live {
    /// The live data file of `entry`.
    pub(crate) fn of(entry: &ManifestEntry) -> Self {
        Self {
            path: entry.file_path().to_string(),
            records: entry.record_count(),
            size: entry.file_size_in_bytes(),
        }
    }
}

/// The live data files of the data manifest `bytes` (path, row count, size), as [`entries`]
/// gives them without their stats: what a sync seeding a Hudi replay reads of every
/// manifest of the current snapshot, and what a removing commit and an expiry read to
/// learn which files a manifest holds (`crate::spec::manifest::held`). Only an uncompressed
/// (`crate::spec::container`) v2 or v3 data manifest is read so (its
/// `format-version` and `content` keys; its schema and spec are not parsed, as nothing
/// here depends on them), and only entries of an added, existing or deleted data file
/// whose fields have the expected types; `None` for anything else (then [`entries`]
/// reads it, and says what is wrong).
pub(crate) fn live_files(bytes: &[u8]) -> Option<Vec<Live>> {
    // Its schema parsed once per process (see `crate::spec::container`).
    let container = Container::open(bytes)?;
    let key = |k: &[u8]| container.header.get(k);
    let version = key(b"format-version");
    if !matches!(version, Some(b"2" | b"3")) || key(b"content") != Some(b"data") {
        return None;
    }
    let mut live = Vec::new();
    for LiveEntry { status, data_file } in container.records::<LiveEntry>()? {
        if data_file.content != DataContentType::Data as i32 {
            return None;
        }
        match status {
            0 | 1 => live.push(Live {
                path: data_file.file_path,
                records: u64::try_from(data_file.record_count).ok()?,
                size: u64::try_from(data_file.file_size_in_bytes).ok()?,
            }),
            2 => {}
            _ => return None,
        }
    }
    Some(live)
}

/// One `manifest_entry` record, by field name.
type Entry = EntryRecord<Partition>;

/// Its `data_file`.
type File = FileRecord<Partition>;

/// The partition record's values, by name in the writer's order.
struct Partition(Vec<(String, Raw)>);

/// One partition value as serde_avro_fast gives it (a decimal as its decimal string).
enum Raw {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Str(String),
    Other,
}

/// What the fast read needs of a manifest's metadata: its schema, its partition spec id
/// and the spec's field types (checked against the writer's partition record), each
/// with the Avro name the writer gave it.
struct Layout {
    schema: SchemaRef,
    spec_id: i32,
    partition: Vec<(String, PrimitiveType)>,
}

impl Layout {
    /// `None` unless the writer's partition record (`writer_schema`) is laid out as
    /// iceberg-rust writes the spec's partition type: its fields in the spec's order,
    /// each the spec field's by id or name (`avro_name::WrittenField::names`: Java and
    /// Python write a name that is not an Avro name escaped) with its Avro type.
    fn of(metadata: &ManifestMetadata, writer_schema: &str) -> Option<Self> {
        let spec = metadata.partition_spec();
        let partition_type = spec.partition_type(metadata.schema()).ok()?;
        let written = written_partition(writer_schema)?;
        if written.len() != partition_type.fields().len() {
            return None;
        }
        let partition = partition_type
            .fields()
            .iter()
            .zip(written)
            .map(|(field, written)| {
                let primitive = field.field_type.as_primitive_type()?;
                let typed = avro_type(primitive) == Some(written.ty.as_str());
                (written.names(field.id, &field.name) && typed)
                    .then(|| (written.name, primitive.clone()))
            })
            .collect::<Option<_>>()?;
        Some(Self {
            schema: metadata.schema().clone(),
            spec_id: spec.spec_id(),
            partition,
        })
    }

    /// The entry of `record`, as iceberg-rust's `ManifestEntryV2::try_into` makes it.
    fn entry(&self, record: Entry) -> Option<ManifestEntry> {
        Some(ManifestEntry {
            status: ManifestStatus::try_from(record.status).ok()?,
            snapshot_id: record.snapshot_id,
            sequence_number: record.sequence_number,
            file_sequence_number: record.file_sequence_number,
            data_file: self.data_file(record.data_file)?,
        })
    }

    fn data_file(&self, f: File) -> Option<DataFile> {
        let mut b = DataFileBuilder::default();
        b.content(DataContentType::try_from(f.content).ok()?)
            .file_format(f.file_format.parse::<DataFileFormat>().ok()?)
            .partition(self.partition(f.partition)?)
            .record_count(u64::try_from(f.record_count).ok()?)
            .file_size_in_bytes(u64::try_from(f.file_size_in_bytes).ok()?)
            .column_sizes(counts(f.column_sizes))
            .value_counts(counts(f.value_counts))
            .null_value_counts(counts(f.null_value_counts))
            .nan_value_counts(counts(f.nan_value_counts))
            .lower_bounds(bounds(f.lower_bounds, &self.schema)?)
            .upper_bounds(bounds(f.upper_bounds, &self.schema)?)
            .key_metadata(f.key_metadata.map(ByteBuf::into_vec))
            .split_offsets(f.split_offsets)
            .equality_ids(f.equality_ids)
            .first_row_id(f.first_row_id)
            .partition_spec_id(self.spec_id)
            .referenced_data_file(f.referenced_data_file)
            .content_offset(f.content_offset)
            .content_size_in_bytes(f.content_size_in_bytes)
            .file_path(f.file_path);
        if let Some(order) = f.sort_order_id {
            b.sort_order_id(order);
        }
        b.build().ok()
    }

    /// The partition tuple: each value as the spec's field type (iceberg-rust's
    /// `RawLiteral::try_into`, for the layouts [`Layout::of`] lets through).
    fn partition(&self, written: Partition) -> Option<Struct> {
        if written.0.len() != self.partition.len() {
            return None;
        }
        written
            .0
            .into_iter()
            .zip(&self.partition)
            .map(|((name, raw), (field, ty))| (name == *field).then(|| literal(raw, ty))?)
            .collect::<Option<Vec<_>>>()
            .map(Struct::from_iter)
    }
}

/// A partition value of type `ty`: `Some(None)` for null, `None` when it does not convert.
fn literal(raw: Raw, ty: &PrimitiveType) -> Option<Option<Literal>> {
    let value = match (raw, ty) {
        (Raw::Null, _) => return Some(None),
        (Raw::Bool(v), PrimitiveType::Boolean) => Literal::bool(v),
        (Raw::Int(v), PrimitiveType::Int) => Literal::int(v),
        (Raw::Int(v), PrimitiveType::Date) => Literal::date(v),
        (Raw::Long(v), PrimitiveType::Long) => Literal::long(v),
        (Raw::Long(v), PrimitiveType::Timestamp) => Literal::timestamp(v),
        (Raw::Long(v), PrimitiveType::Timestamptz) => Literal::timestamptz(v),
        (Raw::Str(v), PrimitiveType::String) => Literal::string(v),
        (Raw::Str(v), PrimitiveType::Decimal { scale, .. }) => {
            Literal::Primitive(PrimitiveLiteral::Int128(unscaled(&v, *scale)?))
        }
        _ => return None,
    };
    Some(Some(value))
}

/// The Avro type iceberg-rust writes a partition value of type `ty` as (a logical type's
/// name for the logical ones), for the types the fast read converts.
fn avro_type(ty: &PrimitiveType) -> Option<&'static str> {
    Some(match ty {
        PrimitiveType::Boolean => "boolean",
        PrimitiveType::Int => "int",
        PrimitiveType::Long => "long",
        PrimitiveType::Date => "date",
        PrimitiveType::Timestamp | PrimitiveType::Timestamptz => "timestamp-micros",
        PrimitiveType::String => "string",
        PrimitiveType::Decimal { .. } => "decimal",
        _ => return None,
    })
}

/// The unscaled value of serde_avro_fast's decimal string (rust_decimal's `Display`, all
/// `scale` fractional digits written); `None` for anything else.
fn unscaled(text: &str, scale: u32) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    if fraction.len() != usize::try_from(scale).ok()? {
        return None;
    }
    let value: i128 = format!("{whole}{fraction}").parse().ok()?;
    Some(if negative { -value } else { value })
}

/// The partition record of the writer's schema: each field's name and Avro type (see
/// [`avro_type`]); `None` when the schema is not a manifest entry's. The last schema's is
/// kept: a table's manifests share a few schemas, and parsing one is a sizeable part of
/// reading a small manifest.
fn written_partition(writer_schema: &str) -> Option<Vec<WrittenField>> {
    type Last = Mutex<Option<(String, Option<Vec<WrittenField>>)>>;
    static LAST: OnceLock<Last> = OnceLock::new();
    let mut last = LAST.get_or_init(Last::default).lock().ok()?;
    match &*last {
        Some((schema, layout)) if schema == writer_schema => layout.clone(),
        _ => {
            let layout = parse_partition(writer_schema);
            *last = Some((writer_schema.to_string(), layout.clone()));
            layout
        }
    }
}

/// The partition fields (name, Avro type, field id) of a manifest's writer schema, when its
/// entry and data file fields have the shapes iceberg-rust writes (also the writer's
/// check, see [`crate::spec::manifest::write`]).
pub(crate) fn parse_partition(writer_schema: &str) -> Option<Vec<WrittenField>> {
    let schema: serde_json::Value = serde_json::from_str(writer_schema).ok()?;
    let data_file = checked(&schema, ENTRY, "data_file")?;
    let partition = checked(data_file, DATA_FILE, "partition")?;
    partition
        .get("fields")?
        .as_array()?
        .iter()
        .map(|f| WrittenField::of(f, type_name(f.get("type")?)?))
        .collect()
}

/// The fields of a manifest entry other than `data_file`, and their shapes (see [`shape`])
/// as iceberg-rust writes them and reads them (its reader schema: `manifest_schema_v2`).
const ENTRY: &[(&str, &str)] = &[
    ("status", "int"),
    ("snapshot_id", "?long"),
    ("sequence_number", "?long"),
    ("file_sequence_number", "?long"),
];

/// The fields of its `data_file` other than `partition` (`data_file_fields_v2`; shapes
/// apart by `|` are each taken).
const DATA_FILE: &[(&str, &str)] = &[
    ("content", "int"),
    ("file_path", "string"),
    ("file_format", "string"),
    ("record_count", "long"),
    ("file_size_in_bytes", "long"),
    ("column_sizes", "?[{key:int,value:long}]"),
    ("value_counts", "?[{key:int,value:long}]"),
    ("null_value_counts", "?[{key:int,value:long}]"),
    ("nan_value_counts", "?[{key:int,value:long}]"),
    ("lower_bounds", "?[{key:int,value:bytes}]"),
    ("upper_bounds", "?[{key:int,value:bytes}]"),
    ("key_metadata", "?bytes"),
    ("split_offsets", "?[long]"),
    // pyiceberg writes its ids as longs (`array<long>`), iceberg-rust and Java as ints;
    // both read into `i32` (a long beyond it fails the fast read).
    ("equality_ids", "?[int]|?[long]"),
    ("sort_order_id", "?int"),
    ("first_row_id", "?long"),
    ("referenced_data_file", "?string"),
    ("content_offset", "?long"),
    ("content_size_in_bytes", "?long"),
];

/// The type of `record`'s field `nested`, when every other field of a name in `expected`
/// has its shape there, so both readers read it alike (a field of another name is
/// skipped by both; one written with another type, even one apache-avro would promote or
/// refuse, leaves the file to iceberg-rust).
fn checked<'a>(
    record: &'a serde_json::Value,
    expected: &[(&str, &str)],
    nested: &str,
) -> Option<&'a serde_json::Value> {
    let mut found = None;
    for field in record.get("fields")?.as_array()? {
        let (name, ty) = (field.get("name")?.as_str()?, field.get("type")?);
        if name == nested {
            found = Some(ty);
        } else if let Some((_, want)) = expected.iter().find(|(n, _)| *n == name) {
            let shape = shape(ty)?;
            if !want.split('|').any(|w| w == shape) {
                return None;
            }
        }
    }
    found
}

/// An Avro type written compactly: `?` for a union with null, `[items]` for an array,
/// `{name:type,...}` for a record, a logical type by its name.
fn shape(ty: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match ty {
        Value::String(name) => Some(name.clone()),
        Value::Array(branches) => match branches.as_slice() {
            [null, other] if null.as_str() == Some("null") => Some(format!("?{}", shape(other)?)),
            _ => None,
        },
        Value::Object(o) => match o.get("type")?.as_str()? {
            "array" => Some(format!("[{}]", shape(o.get("items")?)?)),
            "record" => {
                let fields = o.get("fields")?.as_array()?.iter().map(|f| {
                    Some(format!(
                        "{}:{}",
                        f.get("name")?.as_str()?,
                        shape(f.get("type")?)?
                    ))
                });
                Some(format!(
                    "{{{}}}",
                    fields.collect::<Option<Vec<_>>>()?.join(",")
                ))
            }
            other => Some(
                o.get("logicalType")
                    .and_then(|t| t.as_str())
                    .unwrap_or(other)
                    .to_string(),
            ),
        },
        _ => None,
    }
}

/// An Avro type's name: its logical type's, if any; a union with null by its other branch.
fn type_name(ty: &serde_json::Value) -> Option<String> {
    match ty {
        serde_json::Value::String(name) => Some(name.clone()),
        serde_json::Value::Array(branches) => match branches.as_slice() {
            [null, other] | [other, null] if null.as_str() == Some("null") => type_name(other),
            _ => None,
        },
        serde_json::Value::Object(o) => o
            .get("logicalType")
            .or_else(|| o.get("type"))
            .and_then(|t| t.as_str())
            .map(str::to_string),
        _ => None,
    }
}

/// Counts without their negative entries (iceberg-rust's `parse_i64_entry`).
fn counts(entries: Option<Vec<Counted>>) -> HashMap<i32, u64> {
    entries
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| Some((e.key, u64::try_from(e.value).ok()?)))
        .collect()
}

/// Bounds as datums of their column's type (iceberg-rust's `parse_bytes_entry`: a column
/// the schema lacks, and that is no metadata column, is dropped); `None` for a column
/// that is not primitive or a bound that does not decode.
fn bounds(entries: Option<Vec<Bound>>, schema: &Schema) -> Option<HashMap<i32, Datum>> {
    let mut out = HashMap::new();
    for e in entries.unwrap_or_default() {
        let field = schema
            .field_by_id(e.key)
            .or_else(|| get_metadata_field(e.key).ok());
        if let Some(field) = field {
            let ty = field.field_type.as_primitive_type()?.clone();
            out.insert(e.key, Datum::try_from_bytes(&e.value, ty).ok()?);
        }
    }
    Some(out)
}

impl<'de> Deserialize<'de> for Partition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Partition;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a partition record")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Partition, A::Error> {
                let mut fields = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    fields.push((name, map.next_value::<Raw>()?));
                }
                Ok(Partition(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a partition value")
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i32<E>(self, v: i32) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Long(v))
    }
    fn visit_f32<E>(self, _: f32) -> Result<Raw, E> {
        Ok(Raw::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Raw, E> {
        Ok(Raw::Other)
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_string()))
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Raw, E> {
        Ok(Raw::Other)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{
        DataFileFormat, ManifestContentType, NestedField, PartitionSpec, Transform, Type,
    };
    use xlake_storage::TableStore;

    use super::*;
    use crate::spec::manifest::write::{iceberg_write, Sink};

    const COLUMNS: [(&str, PrimitiveType); 10] = [
        ("i", PrimitiveType::Int),
        ("s", PrimitiveType::String),
        ("d", PrimitiveType::Date),
        ("ts", PrimitiveType::Timestamp),
        (
            "dec",
            PrimitiveType::Decimal {
                precision: 10,
                scale: 2,
            },
        ),
        ("b", PrimitiveType::Boolean),
        ("l", PrimitiveType::Long),
        ("dbl", PrimitiveType::Double),
        ("tz", PrimitiveType::Timestamptz),
        ("f", PrimitiveType::Float),
    ];

    fn schema() -> SchemaRef {
        let fields = COLUMNS.iter().zip(1..).map(|((name, ty), id)| {
            Arc::new(NestedField::optional(
                id,
                *name,
                Type::Primitive(ty.clone()),
            ))
        });
        Arc::new(Schema::builder().with_fields(fields).build().unwrap())
    }

    /// Identity on the first seven columns, or unpartitioned.
    fn spec(schema: &SchemaRef, partitioned: bool) -> PartitionSpec {
        let mut b = PartitionSpec::builder(schema.clone()).with_spec_id(i32::from(partitioned));
        for (name, _) in COLUMNS.iter().take(if partitioned { 7 } else { 0 }) {
            b = b
                .add_partition_field(name, format!("{name}_p"), Transform::Identity)
                .unwrap();
        }
        b.build().unwrap()
    }

    /// Partition values of file `n`; the long one null for odd `n`.
    fn partition(n: i32) -> Struct {
        Struct::from_iter([
            Some(Literal::int(n - 3)),
            Some(Literal::string(format!("p{n}"))),
            Some(Literal::date(19_000 + n)),
            Some(Literal::timestamp(1_700_000_000_000_000 + i64::from(n))),
            Some(Literal::decimal(i128::from(n) * 1001 - 5000)),
            Some(Literal::bool(n % 2 == 0)),
            (n % 2 == 0).then(|| Literal::long(i64::from(n) << 40)),
        ])
    }

    fn bounds(n: i32, top: i32) -> HashMap<i32, Datum> {
        let v = n + top;
        HashMap::from([
            (1, Datum::int(v)),
            (2, Datum::string(format!("s{v}"))),
            (3, Datum::date(v)),
            (4, Datum::timestamp_micros(i64::from(v) * 1000)),
            (5, Datum::decimal_from_str(format!("{v}.25")).unwrap()),
            (6, Datum::bool(top > 0)),
            (7, Datum::long(-i64::from(v))),
            (8, Datum::double(f64::from(v) / 3.0)),
            (9, Datum::timestamptz_micros(i64::from(v))),
            (10, Datum::float(v as f32 / 7.0)),
            // A column the schema no longer has: dropped by both readers.
            (99, Datum::int(v)),
        ])
    }

    fn file(n: i32, content: DataContentType, partitioned: bool, v3: bool) -> DataFile {
        let puffin = content == DataContentType::PositionDeletes && v3;
        let counts = |k: u64| HashMap::from([(1, k), (2, k + 1), (7, 3)]);
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(format!(
                "s3://b/t/data/f{n}.{}",
                if puffin { "puffin" } else { "parquet" }
            ))
            .file_format(if puffin {
                DataFileFormat::Puffin
            } else {
                DataFileFormat::Parquet
            })
            .partition(if partitioned {
                partition(n)
            } else {
                Struct::empty()
            })
            .partition_spec_id(i32::from(partitioned))
            .record_count(100 + n as u64)
            .file_size_in_bytes(4096 + n as u64)
            .column_sizes(counts(10))
            .value_counts(counts(100))
            .null_value_counts(counts(0))
            .nan_value_counts(HashMap::from([(8, 0), (10, 1)]))
            .lower_bounds(bounds(n, 0))
            .upper_bounds(bounds(n, 50))
            .key_metadata((n == 2).then(|| vec![7, 7]))
            .split_offsets((n % 3 == 0).then(|| vec![4, 1000]))
            .first_row_id(
                (v3 && content == DataContentType::Data && n % 2 == 0).then_some(n.into()),
            );
        if content == DataContentType::EqualityDeletes {
            b.equality_ids(Some(vec![1, 2]));
        }
        if content == DataContentType::PositionDeletes {
            b.referenced_data_file(Some(format!("s3://b/t/data/f{}.parquet", n + 1)));
            if puffin {
                b.content_offset(Some(4))
                    .content_size_in_bytes(Some(40 + i64::from(n)));
            }
        }
        if n % 4 == 1 {
            b.sort_order_id(0);
        }
        b.build().unwrap()
    }

    /// Added (explicit and inherited sequence numbers), existing and deleted entries.
    fn fill(w: &mut Sink, content: DataContentType, partitioned: bool, v3: bool) {
        for n in 0..12 {
            let f = file(n, content, partitioned, v3);
            let seq = i64::from(n);
            match n % 4 {
                0 => w.add_file(f, -1).unwrap(),
                1 => w.add_file(f, seq).unwrap(),
                2 => w
                    .add_existing_file(f, 40 + seq, seq, Some(seq + 1))
                    .unwrap(),
                _ => w.add_delete_file(f, seq, Some(seq)).unwrap(),
            }
        }
    }

    async fn written(
        store: &TableStore,
        name: &str,
        version: FormatVersion,
        content: DataContentType,
        partitioned: bool,
    ) -> Vec<u8> {
        let schema = schema();
        let spec = spec(&schema, partitioned);
        let location = store.absolute(&format!("metadata/{name}.avro"));
        let kind = match content {
            DataContentType::Data => ManifestContentType::Data,
            _ => ManifestContentType::Deletes,
        };
        let mut sink = Sink::new(77, kind);
        fill(
            &mut sink,
            content,
            partitioned,
            version == FormatVersion::V3,
        );
        // iceberg-rust's own writer, not xlake's (crate::spec::manifest::write).
        let (bytes, _) = iceberg_write(sink, &location, (&schema, &spec), version)
            .await
            .unwrap();
        store.put(&location, bytes.clone()).await.unwrap();
        bytes.to_vec()
    }

    fn slow(bytes: &[u8]) -> Vec<ManifestEntry> {
        let (entries, _) = Manifest::parse_avro(bytes).unwrap().into_parts();
        entries.iter().map(|e| (**e).clone()).collect()
    }

    /// v2 and v3, data and delete manifests, partitioned and not: both readers give the
    /// same entries, entry for entry.
    #[tokio::test]
    async fn reads_what_iceberg_rust_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let contents = [
            DataContentType::Data,
            DataContentType::PositionDeletes,
            DataContentType::EqualityDeletes,
        ];
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for content in contents {
                for partitioned in [true, false] {
                    let name = format!("{version}-{content:?}-{partitioned}");
                    let bytes = written(&store, &name, version, content, partitioned).await;
                    let slow = slow(&bytes);
                    assert_eq!(slow.len(), 12, "{name}");
                    let fast = fast(&bytes).unwrap_or_else(|| panic!("{name}: not read fast"));
                    assert_eq!(fast, slow, "{name}");
                    assert_eq!(entries(&bytes, &name).unwrap(), slow, "{name}");
                }
            }
        }
    }

    /// The live files of a data manifest are the live entries' paths and row counts;
    /// a delete manifest, or one the fast read does not take, is left to `entries`.
    #[tokio::test]
    async fn live_files_are_the_live_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for partitioned in [true, false] {
                let name = format!("{version}-{partitioned}");
                let bytes =
                    written(&store, &name, version, DataContentType::Data, partitioned).await;
                let alive: Vec<_> = slow(&bytes)
                    .into_iter()
                    .filter(|e| e.is_alive())
                    .map(|e| Live::of(&e))
                    .collect();
                assert_eq!(alive.len(), 9, "{name}");
                assert_eq!(live_files(&bytes), Some(alive), "{name}");
            }
        }
        let deletes = written(
            &store,
            "d",
            FormatVersion::V2,
            DataContentType::PositionDeletes,
            true,
        )
        .await;
        assert_eq!(live_files(&deletes), None);
        assert_eq!(live_files(b"not avro"), None);
    }

    /// What a removing commit or an expiry reads to learn a manifest's files: of a data
    /// manifest the live entries' paths without their stats, of a delete manifest its
    /// entries whole, as a whole read has them.
    #[tokio::test]
    async fn held_is_what_the_entries_hold() {
        use crate::spec::manifest::{entries_of, held, Held};
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let kinds = [
            (DataContentType::Data, ManifestContentType::Data),
            (
                DataContentType::PositionDeletes,
                ManifestContentType::Deletes,
            ),
        ];
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for (content, kind) in kinds {
                for partitioned in [true, false] {
                    let name = format!("h-{version}-{content:?}-{partitioned}");
                    let bytes = written(&store, &name, version, content, partitioned).await;
                    let mf = iceberg::spec::ManifestFile {
                        content: kind,
                        manifest_path: name.clone(),
                        ..crate::spec::manifest_list::write::sample_manifest(1, None)
                    };
                    let whole = entries_of(&bytes, &mf).unwrap();
                    match held(&bytes, &mf).unwrap() {
                        Held::Paths(files) => {
                            assert_eq!(kind, ManifestContentType::Data, "{name}");
                            let live = whole.iter().filter(|e| e.is_alive());
                            let expected: Vec<_> = live.map(Live::of).collect();
                            assert_eq!(files, expected, "{name}");
                        }
                        Held::Entries(entries) => {
                            assert_eq!(kind, ManifestContentType::Deletes, "{name}");
                            assert_eq!(entries, whole, "{name}");
                        }
                    }
                }
            }
        }
    }

    /// What it cannot read goes to iceberg-rust, whose error names the manifest.
    #[tokio::test]
    async fn anything_else_is_iceberg_rusts_to_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let bytes = written(&store, "m", FormatVersion::V2, DataContentType::Data, true).await;
        let location = "/t/metadata/m.avro";
        for corrupt in [
            &b"not avro"[..],
            &bytes[..bytes.len() / 2],
            &bytes[..bytes.len() - 3],
        ] {
            assert!(fast(corrupt).is_none());
            let expected = Manifest::parse_avro(corrupt).unwrap_err();
            let err = entries(corrupt, location).unwrap_err();
            assert_eq!(err.to_string(), format!("{location}: {expected}"));
        }
    }

    /// A writer schema with a field of another type than iceberg-rust's (one apache-avro
    /// would promote, or refuse) is left to iceberg-rust.
    #[tokio::test]
    async fn another_field_type_is_iceberg_rusts_to_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let bytes = written(&store, "m", FormatVersion::V3, DataContentType::Data, true).await;
        let reader = Reader::from_slice(&bytes).unwrap();
        let json = reader.schema().json();
        assert_eq!(parse_partition(json).unwrap().len(), 7);
        for (from, to) in [
            (
                r#""name":"content","type":"int""#,
                r#""name":"content","type":"long""#,
            ),
            (r#""items":"long""#, r#""items":"int""#),
            (
                r#""name":"status","type":"int""#,
                r#""name":"status","type":["null","int"]"#,
            ),
        ] {
            assert!(json.contains(from), "{from}");
            assert!(
                parse_partition(&json.replacen(from, to, 1)).is_none(),
                "{to}"
            );
        }
    }

    /// A manifest whose partition fields have names that are not Avro names, written as
    /// Java and Python write them (escaped, `iceberg-field-name`, `field-id`; xlake's
    /// writer does the same): read by field id with the real values, where iceberg-rust's
    /// reader, which resolves fields by name, does not read them; where the fast read does
    /// not take such a manifest, it is refused rather than left to iceberg-rust.
    #[tokio::test]
    async fn escaped_partition_names_are_read_by_field_id() {
        use crate::spec::manifest::write::{encode, partition_type};
        let schema = schema();
        let spec = PartitionSpec::builder(schema.clone())
            .with_spec_id(3)
            .add_partition_field("s", "part key", Transform::Identity)
            .unwrap()
            .add_partition_field("i", "1st", Transform::Identity)
            .unwrap()
            .add_partition_field("l", "ünï", Transform::Identity)
            .unwrap()
            .build()
            .unwrap();
        let tuple = |n: i64| {
            Struct::from_iter([
                Some(Literal::string(format!("v {n}"))),
                (n != 1).then(|| Literal::int(n as i32)),
                Some(Literal::long(n << 33)),
            ])
        };
        let mut sink = Sink::new(5, ManifestContentType::Data);
        for n in 0..3 {
            let mut b = DataFileBuilder::default();
            b.content(DataContentType::Data)
                .file_path(format!("s3://b/t/data/f{n}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .partition(tuple(n))
                .partition_spec_id(3)
                .record_count(1)
                .file_size_in_bytes(10);
            sink.add_file(b.build().unwrap(), -1).unwrap();
        }
        let shape = (&schema, &spec);
        let partition = partition_type(&sink, shape).unwrap();
        let (bytes, _) = encode(&sink, "/t/m.avro", shape, FormatVersion::V2, &partition)
            .await
            .unwrap();
        let json = Reader::from_slice(&bytes)
            .unwrap()
            .schema()
            .json()
            .to_string();
        assert!(json.contains(r#""name":"part_x20key""#), "{json}");
        assert!(
            json.contains(r#""iceberg-field-name":"part key""#),
            "{json}"
        );
        let read = entries(&bytes, "/t/m.avro").unwrap();
        let got: Vec<_> = read
            .iter()
            .map(|e| e.data_file().partition().clone())
            .collect();
        assert_eq!(got, (0..3).map(tuple).collect::<Vec<_>>());
        // iceberg-rust does not read them (its reader resolves fields by name: here it
        // fails, pyiceberg's manifests of one field it reads as null) ...
        assert!(Manifest::parse_avro(&bytes).is_err());
        // ... so a manifest the fast read does not take (here: format version 1) is
        // refused, naming the field, rather than read so.
        let v1 = bytes_replaced(&bytes, b"format-version\x022", b"format-version\x021");
        assert!(fast(&v1).is_none());
        let err = entries(&v1, "/t/m.avro").unwrap_err().to_string();
        assert!(
            err.starts_with("/t/m.avro: partition field `part key` (id 1000) of spec 3 is written as Avro field `part_x20key`"),
            "{err}"
        );
        assert!(err.ends_with("its values would read as null"), "{err}");
        // Written under its own name, the field is iceberg-rust's to read.
        assert!(unresolved(&written_plain().await).is_none());
    }

    fn bytes_replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
        [&bytes[..at], to, &bytes[at + from.len()..]].concat()
    }

    async fn written_plain() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        written(&store, "m", FormatVersion::V2, DataContentType::Data, true).await
    }

    #[test]
    fn decimal_strings_to_unscaled_values() {
        assert_eq!(unscaled("-12.05", 2), Some(-1205));
        assert_eq!(unscaled("0.50", 2), Some(50));
        assert_eq!(unscaled("7", 0), Some(7));
        assert_eq!(unscaled("7.5", 2), None);
        assert_eq!(unscaled("1e3", 0), None);
        assert_eq!(unscaled("", 0), None);
    }
}
