//! The neutral schema and partition spec in Delta's words: `schemaString`, identity
//! partition columns, column mapping by id (when the source's fields carry ids), and the
//! lowest protocol that holds the features used.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Map, Value as Json};
use xlake_model::{DataType, Field, PartitionSpec, PrimitiveType, Schema, Transform};

use crate::error::Reason;

/// Column mapping on (mode `id`): every field of the source carries an id.
pub(super) fn wants_column_mapping(schema: &Schema) -> bool {
    !schema.fields.is_empty() && schema.fields.iter().all(|f| f.id.is_some())
}

/// Physical names already given, by field id (kept: files written under them stay readable).
pub(super) fn physical_names(metadata: Option<&Map<String, Json>>) -> HashMap<i64, String> {
    let mut names = HashMap::new();
    let schema = metadata
        .and_then(|m| m.get("schemaString")?.as_str())
        .and_then(|s| serde_json::from_str::<Json>(s).ok());
    if let Some(schema) = schema {
        collect_physical(&schema, &mut names);
    }
    names
}

fn collect_physical(t: &Json, names: &mut HashMap<i64, String>) {
    match t {
        Json::Object(o) => {
            if let Some(meta) = o.get("metadata") {
                let id = meta.get("delta.columnMapping.id").and_then(Json::as_i64);
                let name = meta
                    .get("delta.columnMapping.physicalName")
                    .and_then(Json::as_str);
                if let (Some(id), Some(name)) = (id, name) {
                    names.insert(id, name.to_string());
                }
            }
            o.values().for_each(|v| collect_physical(v, names));
        }
        Json::Array(a) => a.iter().for_each(|v| collect_physical(v, names)),
        _ => {}
    }
}

/// Delta's JSON schema for `schema`; with column mapping, each field's id and physical
/// name (the one `kept` has for its id, else its name now). Errors name the column.
pub(super) fn delta_schema(
    schema: &Schema,
    mapping: Option<&HashMap<i64, String>>,
) -> Result<Json, Reason> {
    Ok(json!({"type": "struct", "fields": fields(&schema.fields, mapping)?}))
}

fn fields(fields: &[Field], mapping: Option<&HashMap<i64, String>>) -> Result<Vec<Json>, String> {
    fields.iter().map(|f| field(f, mapping)).collect()
}

fn field(f: &Field, mapping: Option<&HashMap<i64, String>>) -> Result<Json, String> {
    let mut metadata = Map::new();
    if let (Some(kept), Some(id)) = (mapping, f.id) {
        let physical = kept.get(&i64::from(id)).cloned().unwrap_or(f.name.clone());
        metadata.insert("delta.columnMapping.id".into(), json!(id));
        metadata.insert("delta.columnMapping.physicalName".into(), json!(physical));
    }
    let ty = data_type(&f.data_type, mapping).map_err(|e| format!("column {}: {e}", f.name))?;
    Ok(json!({"name": f.name, "type": ty, "nullable": f.nullable, "metadata": metadata}))
}

fn data_type(t: &DataType, mapping: Option<&HashMap<i64, String>>) -> Result<Json, String> {
    Ok(match t {
        DataType::Primitive(p) => json!(primitive(p)?),
        DataType::Struct(children) => {
            json!({"type": "struct", "fields": fields(children, mapping)?})
        }
        DataType::List(element) => json!({
            "type": "array",
            "elementType": data_type(&element.data_type, mapping)?,
            "containsNull": element.nullable,
        }),
        DataType::Map { key, value } => json!({
            "type": "map",
            "keyType": data_type(&key.data_type, mapping)?,
            "valueType": data_type(&value.data_type, mapping)?,
            "valueContainsNull": value.nullable,
        }),
    })
}

fn primitive(p: &PrimitiveType) -> Result<String, String> {
    Ok(match p {
        PrimitiveType::Boolean => "boolean".into(),
        PrimitiveType::Int => "integer".into(),
        PrimitiveType::Long => "long".into(),
        PrimitiveType::Float => "float".into(),
        PrimitiveType::Double => "double".into(),
        PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        PrimitiveType::Date => "date".into(),
        PrimitiveType::Timestamp {
            with_zone: true, ..
        } => "timestamp".into(),
        PrimitiveType::Timestamp {
            with_zone: false, ..
        } => "timestamp_ntz".into(),
        PrimitiveType::String => "string".into(),
        PrimitiveType::Binary | PrimitiveType::Fixed(_) | PrimitiveType::Uuid => "binary".into(),
        PrimitiveType::Time => return Err("type time has no Delta type".into()),
    })
}

/// Whether a timestamp without time zone is anywhere in `schema` (feature `timestampNtz`).
pub(super) fn has_timestamp_ntz(fields: &[Field]) -> bool {
    fields.iter().any(|f| ntz(&f.data_type))
}

fn ntz(t: &DataType) -> bool {
    match t {
        DataType::Primitive(PrimitiveType::Timestamp { with_zone, .. }) => !with_zone,
        DataType::Primitive(_) => false,
        DataType::Struct(c) => has_timestamp_ntz(c),
        DataType::List(e) => ntz(&e.data_type),
        DataType::Map { key, value } => ntz(&key.data_type) || ntz(&value.data_type),
    }
}

/// The identity partition fields Delta holds as partition columns: `(index in the spec,
/// column)`. Other transforms are left out (their source columns are in the data files,
/// so readers lose pruning on them only).
pub(super) fn partition_columns(spec: &PartitionSpec, schema: &Schema) -> Vec<(usize, String)> {
    spec.fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.transform == Transform::Identity)
        .filter(|(_, f)| {
            matches!(
                schema.field(&f.source).map(|c| &c.data_type),
                Some(DataType::Primitive(_))
            )
        })
        .map(|(i, f)| (i, f.source.clone()))
        .collect()
}

/// The protocol for `features` (reader-writer table features), never lower than
/// `current`'s.
pub(super) fn protocol(
    features: &BTreeSet<&'static str>,
    current: Option<&Map<String, Json>>,
) -> Json {
    let mut all: BTreeSet<String> = features.iter().map(|f| f.to_string()).collect();
    if let Some(cur) = current {
        for key in ["readerFeatures", "writerFeatures"] {
            if let Some(list) = cur.get(key).and_then(Json::as_array) {
                all.extend(list.iter().filter_map(Json::as_str).map(str::to_string));
            }
        }
    }
    if all.is_empty() {
        return json!({"minReaderVersion": 1, "minWriterVersion": 2});
    }
    json!({
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": all,
        "writerFeatures": all,
    })
}
