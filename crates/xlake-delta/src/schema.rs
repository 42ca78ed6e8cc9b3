//! Delta's JSON schema (`metaData.schemaString`) to the neutral schema, honouring column
//! mapping: the column's id becomes its field id, its physical name an alias.

use std::collections::HashMap;

use serde_json::Value as Json;
use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

const MAPPING_ID: &str = "delta.columnMapping.id";
const PHYSICAL_NAME: &str = "delta.columnMapping.physicalName";
/// Ids of list elements and map keys and values (IcebergCompat), on the nearest struct
/// field, keyed `<physical name>.element`, `<physical name>.key`, … .
const NESTED_IDS: &str = "delta.columnMapping.nested.ids";

/// Where a list element or map key or value stands for `delta.columnMapping.nested.ids`:
/// its key and the map holding the ids, if any.
#[derive(Clone, Copy)]
struct Nested<'a> {
    key: &'a str,
    ids: Option<&'a Json>,
}

impl Nested<'_> {
    fn id(&self, suffix: &str) -> Option<i32> {
        self.ids
            .and_then(|m| m.get(format!("{}.{suffix}", self.key)))
            .and_then(Json::as_i64)
            .and_then(|i| i32::try_from(i).ok())
    }
}

/// A table schema and, for column mapping, the physical-to-logical path map.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    /// The neutral schema (logical names).
    pub schema: Schema,
    /// Dotted physical path (as in stats and partition values) to dotted logical path.
    pub logical: HashMap<String, String>,
}

impl TableSchema {
    /// The logical path of a physical one (the same when there is no mapping).
    pub fn logical_path<'a>(&'a self, physical: &'a str) -> &'a str {
        self.logical.get(physical).map_or(physical, String::as_str)
    }
}

/// Parse `schemaString`; `mapped` when the table's column mapping mode is `name` or `id`.
/// Partition columns are made nullable: Delta never stores them in data files, and an
/// Iceberg reader must fill them from the partition tuple.
pub fn parse_schema(
    text: &str,
    mapped: bool,
    partition_columns: &[String],
) -> Result<TableSchema, String> {
    let json: Json =
        serde_json::from_str(text).map_err(|e| format!("schemaString is not JSON: {e}"))?;
    let fields = json
        .get("fields")
        .and_then(Json::as_array)
        .ok_or("schemaString has no fields")?;
    let mut logical = HashMap::new();
    let mut out = struct_fields(fields, "", "", mapped, &mut logical)?;
    for f in &mut out {
        if partition_columns.contains(&f.name) {
            f.nullable = true;
        }
    }
    Ok(TableSchema {
        schema: Schema::new(out),
        logical,
    })
}

fn struct_fields(
    fields: &[Json],
    logical_prefix: &str,
    physical_prefix: &str,
    mapped: bool,
    map: &mut HashMap<String, String>,
) -> Result<Vec<Field>, String> {
    fields
        .iter()
        .map(|f| {
            let name = f
                .get("name")
                .and_then(Json::as_str)
                .ok_or("field without name")?;
            let meta = f.get("metadata");
            let physical = meta
                .and_then(|m| m.get(PHYSICAL_NAME))
                .and_then(Json::as_str)
                .filter(|_| mapped)
                .unwrap_or(name);
            let join = |p: &str, n: &str| {
                if p.is_empty() {
                    n.to_string()
                } else {
                    format!("{p}.{n}")
                }
            };
            let (lpath, ppath) = (join(logical_prefix, name), join(physical_prefix, physical));
            map.insert(ppath.clone(), lpath.clone());
            let nested = Nested {
                key: physical,
                ids: meta.and_then(|m| m.get(NESTED_IDS)).filter(|_| mapped),
            };
            let data_type = data_type(
                f.get("type").unwrap_or(&Json::Null),
                (&lpath, &ppath),
                nested,
                mapped,
                map,
            )?;
            let nullable = f.get("nullable").and_then(Json::as_bool).unwrap_or(true);
            let mut field = Field::new(name, data_type, nullable);
            if mapped {
                field.id = meta
                    .and_then(|m| m.get(MAPPING_ID))
                    .and_then(Json::as_i64)
                    .and_then(|i| i32::try_from(i).ok());
                if physical != name {
                    field.aliases.push(physical.to_string());
                }
            }
            field.doc = meta
                .and_then(|m| m.get("comment"))
                .and_then(Json::as_str)
                .map(String::from);
            Ok(field)
        })
        .collect()
}

fn data_type(
    t: &Json,
    (lpath, ppath): (&str, &str),
    nested: Nested<'_>,
    mapped: bool,
    map: &mut HashMap<String, String>,
) -> Result<DataType, String> {
    let err = |what: String| format!("column {lpath}: {what}");
    match t {
        Json::String(name) => primitive(name).map(DataType::Primitive).map_err(err),
        Json::Object(obj) => match obj.get("type").and_then(Json::as_str) {
            Some("struct") => {
                let fields = obj
                    .get("fields")
                    .and_then(Json::as_array)
                    .ok_or_else(|| err("struct without fields".into()))?;
                Ok(DataType::Struct(struct_fields(
                    fields, lpath, ppath, mapped, map,
                )?))
            }
            Some("array") => {
                let key = format!("{}.element", nested.key);
                let element = data_type(
                    obj.get("elementType").unwrap_or(&Json::Null),
                    (lpath, ppath),
                    Nested {
                        key: &key,
                        ..nested
                    },
                    mapped,
                    map,
                )?;
                let nullable = obj
                    .get("containsNull")
                    .and_then(Json::as_bool)
                    .unwrap_or(true);
                let mut element = Field::new("element", element, nullable);
                element.id = nested.id("element");
                Ok(DataType::List(Box::new(element)))
            }
            Some("map") => {
                let (key_key, value_key) = (
                    format!("{}.key", nested.key),
                    format!("{}.value", nested.key),
                );
                let key = data_type(
                    obj.get("keyType").unwrap_or(&Json::Null),
                    (lpath, ppath),
                    Nested {
                        key: &key_key,
                        ..nested
                    },
                    mapped,
                    map,
                )?;
                let value = data_type(
                    obj.get("valueType").unwrap_or(&Json::Null),
                    (lpath, ppath),
                    Nested {
                        key: &value_key,
                        ..nested
                    },
                    mapped,
                    map,
                )?;
                let nullable = obj
                    .get("valueContainsNull")
                    .and_then(Json::as_bool)
                    .unwrap_or(true);
                let mut key = Field::new("key", key, false);
                key.id = nested.id("key");
                let mut value = Field::new("value", value, nullable);
                value.id = nested.id("value");
                Ok(DataType::Map {
                    key: Box::new(key),
                    value: Box::new(value),
                })
            }
            other => Err(err(format!("unknown type {other:?}"))),
        },
        other => Err(err(format!("unreadable type {other}"))),
    }
}

fn primitive(name: &str) -> Result<PrimitiveType, String> {
    Ok(match name {
        "string" => PrimitiveType::String,
        "long" => PrimitiveType::Long,
        "integer" | "short" | "byte" => PrimitiveType::Int,
        "float" => PrimitiveType::Float,
        "double" => PrimitiveType::Double,
        "boolean" => PrimitiveType::Boolean,
        "binary" => PrimitiveType::Binary,
        "date" => PrimitiveType::Date,
        "timestamp" => PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: true,
        },
        "timestamp_ntz" => PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: false,
        },
        other => {
            let inner = other
                .strip_prefix("decimal(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("type {other} has no Iceberg form"))?;
            let (p, s) = inner
                .split_once(',')
                .ok_or_else(|| format!("bad decimal {other}"))?;
            PrimitiveType::Decimal {
                precision: p
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad decimal {other}"))?,
                scale: s
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad decimal {other}"))?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_types_and_column_mapping() {
        let text = r#"{"type":"struct","fields":[
            {"name":"Company Very Short","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-173b"}},
            {"name":"d","type":"decimal(10,2)","nullable":false,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2"}},
            {"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"timestamp_ntz","nullable":true,"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-4"}}]},"nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-3"}},
            {"name":"l","type":{"type":"array","elementType":"integer","containsNull":false},"nullable":true,"metadata":{}},
            {"name":"p","type":"date","nullable":false,"metadata":{}}
        ]}"#;
        let t = parse_schema(text, true, &["p".to_string()]).unwrap();
        let f = &t.schema.fields;
        assert_eq!(
            (f[0].id, f[0].aliases.as_slice()),
            (Some(1), &["col-173b".to_string()][..])
        );
        assert_eq!(
            t.schema.primitive_at("d"),
            Some(&PrimitiveType::Decimal {
                precision: 10,
                scale: 2
            })
        );
        assert_eq!(t.logical_path("col-3.col-4"), "s.x");
        assert!(f[4].nullable, "partition columns are nullable");
        let unmapped = parse_schema(text, false, &[]).unwrap();
        assert!(
            unmapped.schema.fields[0].aliases.is_empty() && unmapped.schema.fields[0].id.is_none()
        );
        assert!(parse_schema(
            r#"{"type":"struct","fields":[{"name":"v","type":"variant"}]}"#,
            false,
            &[]
        )
        .unwrap_err()
        .contains("column v"));
    }

    #[test]
    fn nested_ids_name_list_elements_and_map_keys_and_values() {
        let text = r#"{"type":"struct","fields":[
            {"name":"l","type":{"type":"array","elementType":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"containsNull":true},"nullable":true,
             "metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-l",
               "delta.columnMapping.nested.ids":{"col-l.element":10,"col-l.element.key":11,"col-l.element.value":12}}},
            {"name":"m","type":{"type":"map","keyType":"string","valueType":"string","valueContainsNull":true},"nullable":true,
             "metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-m"}}
        ]}"#;
        let t = parse_schema(text, true, &[]).unwrap();
        let DataType::List(element) = &t.schema.fields[0].data_type else {
            panic!("not a list")
        };
        assert_eq!(element.id, Some(10));
        let DataType::Map { key, value } = &element.data_type else {
            panic!("not a map")
        };
        assert_eq!((key.id, value.id), (Some(11), Some(12)));
        let DataType::Map { key, value } = &t.schema.fields[1].data_type else {
            panic!("not a map")
        };
        assert_eq!(
            (key.id, value.id),
            (None, None),
            "no nested ids: xlake assigns"
        );
    }
}
