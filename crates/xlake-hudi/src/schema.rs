//! Hudi's Avro schemas (`extraMetadata.schema`, `hoodie.table.create.schema`) to the
//! neutral schema, with the `_hoodie_*` meta columns first when the files carry them.

use crate::error::Reason;
use serde_json::Value as Json;
use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

/// The five meta columns Hudi writes into every base file (unless disabled).
pub const META_COLUMNS: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];

/// Parse an Avro record schema into a table schema.
pub fn avro_to_schema(text: &str, meta_fields: bool) -> Result<Schema, Reason> {
    let json: Json = serde_json::from_str(text).map_err(|e| format!("schema is not JSON: {e}"))?;
    let (DataType::Struct(fields), _) = avro_type(&json, "")? else {
        return Err("schema is not an Avro record".into());
    };
    let mut out: Vec<Field> = Vec::new();
    if meta_fields {
        out.extend(
            META_COLUMNS
                .iter()
                .filter(|m| !fields.iter().any(|f| f.name == **m))
                .map(|m| Field::optional(*m, PrimitiveType::String)),
        );
    }
    out.extend(fields);
    Ok(Schema::new(out))
}

/// The type of an Avro schema node and whether it admits null.
fn avro_type(node: &Json, path: &str) -> Result<(DataType, bool), Reason> {
    let err = |what: Reason| what.context(format!("column {path}"));
    match node {
        Json::String(name) => primitive(name, None)
            .map(|p| (DataType::Primitive(p), false))
            .map_err(err),
        Json::Array(branches) => {
            let nullable = branches.iter().any(|b| b.as_str() == Some("null"));
            let others: Vec<&Json> = branches
                .iter()
                .filter(|b| b.as_str() != Some("null"))
                .collect();
            match others.as_slice() {
                [one] => avro_type(one, path).map(|(t, _)| (t, nullable)),
                _ => Err(err(
                    "unions of several non-null types have no Iceberg form".into()
                )),
            }
        }
        Json::Object(obj) => object_type(obj, path).map(|t| (t, false)),
        _ => Err(err(format!("unreadable Avro type {node}").into())),
    }
}

/// The type a `{"type": ...}` object declares (a named or annotated type).
fn object_type(obj: &serde_json::Map<String, Json>, path: &str) -> Result<DataType, Reason> {
    let err = |what: Reason| what.context(format!("column {path}"));
    let kind = obj
        .get("type")
        .ok_or_else(|| err("type without \"type\"".into()))?;
    let logical = obj.get("logicalType").and_then(Json::as_str);
    let child = |key: &str, name: &str| {
        avro_type(
            obj.get(key).unwrap_or(&Json::Null),
            &format!("{path}.{name}"),
        )
    };
    Ok(match kind.as_str() {
        Some("record") => record_type(obj, path)?,
        Some("array") => {
            let (t, nullable) = child("items", "element")?;
            DataType::List(Box::new(Field::new("element", t, nullable)))
        }
        Some("map") => {
            let (t, nullable) = child("values", "value")?;
            DataType::Map {
                key: Box::new(Field::required("key", PrimitiveType::String)),
                value: Box::new(Field::new("value", t, nullable)),
            }
        }
        Some("enum") => DataType::Primitive(PrimitiveType::String),
        Some("fixed") => DataType::Primitive(fixed_type(obj, logical).map_err(err)?),
        Some(name) => DataType::Primitive(match logical {
            Some("decimal") => decimal(obj).map_err(err)?,
            _ => primitive(name, logical).map_err(err)?,
        }),
        None => avro_type(kind, path)?.0,
    })
}

/// A record's fields, each named `path.name` in errors.
fn record_type(obj: &serde_json::Map<String, Json>, path: &str) -> Result<DataType, Reason> {
    let err = |what: &str| Reason::from(format!("column {path}: {what}"));
    let fields = obj
        .get("fields")
        .and_then(Json::as_array)
        .ok_or_else(|| err("record without fields"))?;
    let fields = fields
        .iter()
        .map(|f| {
            let name = f
                .get("name")
                .and_then(Json::as_str)
                .ok_or_else(|| err("field without name"))?;
            let child = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}.{name}")
            };
            let (t, nullable) = avro_type(f.get("type").unwrap_or(&Json::Null), &child)?;
            let mut field = Field::new(name, t, nullable);
            field.doc = f.get("doc").and_then(Json::as_str).map(String::from);
            Ok(field)
        })
        .collect::<Result<Vec<_>, Reason>>()?;
    Ok(DataType::Struct(fields))
}

/// A `fixed` type: a decimal, a UUID (16 bytes) or plain fixed bytes.
fn fixed_type(
    obj: &serde_json::Map<String, Json>,
    logical: Option<&str>,
) -> Result<PrimitiveType, Reason> {
    let size = obj
        .get("size")
        .and_then(Json::as_u64)
        .ok_or_else(|| "fixed without size".to_string())?;
    Ok(match logical {
        Some("decimal") => decimal(obj)?,
        Some("uuid") if size == 16 => PrimitiveType::Uuid,
        _ => {
            PrimitiveType::Fixed(u32::try_from(size).map_err(|_| format!("fixed of {size} bytes"))?)
        }
    })
}

fn decimal(obj: &serde_json::Map<String, Json>) -> Result<PrimitiveType, Reason> {
    let precision = obj
        .get("precision")
        .and_then(Json::as_u64)
        .ok_or("decimal without precision")?;
    let scale = obj.get("scale").and_then(Json::as_u64).unwrap_or(0);
    Ok(PrimitiveType::Decimal {
        precision: u8::try_from(precision).map_err(|_| "decimal precision too large")?,
        scale: u8::try_from(scale).map_err(|_| "decimal scale too large")?,
    })
}

fn primitive(name: &str, logical: Option<&str>) -> Result<PrimitiveType, Reason> {
    Ok(match (name, logical) {
        ("int", Some("date")) => PrimitiveType::Date,
        ("int", Some("time-millis")) | ("long", Some("time-micros")) => PrimitiveType::Time,
        ("long", Some("timestamp-millis")) => PrimitiveType::Timestamp {
            unit: TimeUnit::Millis,
            with_zone: true,
        },
        ("long", Some("timestamp-micros")) => PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: true,
        },
        ("long", Some("timestamp-nanos")) => PrimitiveType::Timestamp {
            unit: TimeUnit::Nanos,
            with_zone: true,
        },
        ("long", Some("local-timestamp-millis")) => PrimitiveType::Timestamp {
            unit: TimeUnit::Millis,
            with_zone: false,
        },
        ("long", Some("local-timestamp-micros")) => PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: false,
        },
        ("boolean", _) => PrimitiveType::Boolean,
        ("int", _) => PrimitiveType::Int,
        ("long", _) => PrimitiveType::Long,
        ("float", _) => PrimitiveType::Float,
        ("double", _) => PrimitiveType::Double,
        ("bytes", _) => PrimitiveType::Binary,
        ("string", _) => PrimitiveType::String,
        (other, _) => return Err(format!("Avro type {other} has no Iceberg form").into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_hudi_avro_schemas() {
        let text = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":["null","int"]},
            {"name":"amount","type":["null",{"type":"fixed","name":"f","size":7,"logicalType":"decimal","precision":15,"scale":2}]},
            {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
            {"name":"d","type":{"type":"int","logicalType":"date"}},
            {"name":"arr","type":["null",{"type":"array","items":["null",{"type":"record","name":"a","fields":[{"name":"x","type":"string"}]}]}]},
            {"name":"m","type":{"type":"map","values":"double"}}
        ]}"#;
        let schema = avro_to_schema(text, true).unwrap();
        assert_eq!(schema.fields[0].name, "_hoodie_commit_time");
        assert_eq!(schema.fields.len(), 11);
        assert_eq!(
            schema.primitive_at("amount"),
            Some(&PrimitiveType::Decimal {
                precision: 15,
                scale: 2
            })
        );
        assert!(schema.field("id").unwrap().nullable);
        assert!(!schema.field("d").unwrap().nullable);
        assert_eq!(
            schema.primitive_at("ts"),
            Some(&PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: true
            })
        );
        let DataType::List(element) = &schema.field("arr").unwrap().data_type else {
            panic!()
        };
        assert!(element.nullable);
        assert_eq!(avro_to_schema(text, false).unwrap().fields.len(), 6);
    }

    #[test]
    fn refuses_what_iceberg_cannot_hold() {
        let multi =
            r#"{"type":"record","name":"r","fields":[{"name":"u","type":["int","string"]}]}"#;
        assert!(avro_to_schema(multi, true)
            .unwrap_err()
            .to_string()
            .contains("column u"));
        assert!(avro_to_schema("not json", true).is_err());
        assert!(avro_to_schema(r#""int""#, true).is_err());
        // A fixed size beyond 32 bits is refused, not wrapped (2^32 + 16 became 16).
        let fixed = r#"{"type":"record","name":"r","fields":[{"name":"f","type":{"type":"fixed","name":"f","size":4294967312}}]}"#;
        let err = avro_to_schema(fixed, true).unwrap_err().to_string();
        assert!(err.contains("fixed of 4294967312 bytes"), "{err}");
    }
}
