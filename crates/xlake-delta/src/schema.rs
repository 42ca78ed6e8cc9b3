//! Delta's JSON schema (`metaData.schemaString`) to the neutral schema, honouring column
//! mapping: the column's id becomes its field id, its physical name an alias.

use std::collections::HashMap;

use serde_json::Value as Json;
use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

use crate::error::Reason;

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
    fn id(&self, suffix: &str) -> Result<Option<i32>, String> {
        let key = format!("{}.{suffix}", self.key);
        field_id(self.ids.and_then(|m| m.get(&key)), &key)
    }
}

/// A column mapping id as an Iceberg field id: absent, or a whole number from 1 to
/// 2^31-1; anything else is refused, naming the column (`what`), never wrapped or dropped.
fn field_id(value: Option<&Json>, what: &str) -> Result<Option<i32>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    value
        .as_i64()
        .and_then(|i| i32::try_from(i).ok())
        .filter(|&i| i > 0)
        .map(Some)
        .ok_or_else(|| {
            format!("column {what}: column mapping id {value} is not a field id (1 to 2147483647)")
        })
}

/// A table schema and, for column mapping, the physical-to-logical path map.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    /// The neutral schema (logical names).
    pub schema: Schema,
    /// Dotted physical path (as in stats and partition values) to dotted logical path.
    pub logical: HashMap<String, String>,
    /// Logical paths of the columns left out of `schema` because their type is `void`
    /// (Spark's NullType): every value is null and writers store none in data files, but
    /// the neutral schema has no type for them. A list or map of `void`, and a struct left
    /// with no field, are left out whole.
    pub void_columns: Vec<String>,
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
) -> Result<TableSchema, Reason> {
    let json: Json =
        serde_json::from_str(text).map_err(Reason::within("schemaString is not JSON"))?;
    let fields = json
        .get("fields")
        .and_then(Json::as_array)
        .ok_or("schemaString has no fields")?;
    let mut paths = Paths::default();
    let mut out = struct_fields(fields, "", "", mapped, &mut paths)?;
    for f in &mut out {
        if partition_columns.contains(&f.name) {
            f.nullable = true;
        }
    }
    Ok(TableSchema {
        schema: Schema::new(out),
        logical: paths.logical,
        void_columns: paths.void,
    })
}

/// What parsing learns besides the fields: physical to logical paths, `void` columns.
#[derive(Default)]
struct Paths {
    logical: HashMap<String, String>,
    void: Vec<String>,
}

/// The fields of a struct, less those of type `void` (recorded in `paths.void`).
fn struct_fields(
    fields: &[Json],
    logical_prefix: &str,
    physical_prefix: &str,
    mapped: bool,
    paths: &mut Paths,
) -> Result<Vec<Field>, String> {
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        if let Some(field) = struct_field(f, logical_prefix, physical_prefix, mapped, paths)? {
            out.push(field);
        }
    }
    Ok(out)
}

/// One field of a struct; `None` when its type is `void` (or holds only `void`).
fn struct_field(
    f: &Json,
    logical_prefix: &str,
    physical_prefix: &str,
    mapped: bool,
    paths: &mut Paths,
) -> Result<Option<Field>, String> {
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
    paths.logical.insert(ppath.clone(), lpath.clone());
    let nested = Nested {
        key: physical,
        ids: meta.and_then(|m| m.get(NESTED_IDS)).filter(|_| mapped),
    };
    let Some(data_type) = data_type(
        f.get("type").unwrap_or(&Json::Null),
        (&lpath, &ppath),
        nested,
        mapped,
        paths,
    )?
    else {
        paths.void.push(lpath);
        return Ok(None);
    };
    let nullable = f.get("nullable").and_then(Json::as_bool).unwrap_or(true);
    let mut field = Field::new(name, data_type, nullable);
    if mapped {
        field.id = field_id(meta.and_then(|m| m.get(MAPPING_ID)), &lpath)?;
        if physical != name {
            field.aliases.push(physical.to_string());
        }
    }
    field.doc = meta
        .and_then(|m| m.get("comment"))
        .and_then(Json::as_str)
        .map(String::from);
    Ok(Some(field))
}

/// The neutral type of a Delta type; `None` for `void` and for nested types that hold
/// nothing else (a list or map of `void`, a struct whose every field is `void`).
fn data_type(
    t: &Json,
    (lpath, ppath): (&str, &str),
    nested: Nested<'_>,
    mapped: bool,
    paths: &mut Paths,
) -> Result<Option<DataType>, String> {
    let err = |what: String| format!("column {lpath}: {what}");
    // A list element or map key or value, its nested-ids key `<nested.key>.<suffix>`.
    let child = |key: &str, suffix: &str, paths: &mut Paths| {
        let nested_key = format!("{}.{suffix}", nested.key);
        data_type(
            t.get(key).unwrap_or(&Json::Null),
            (lpath, ppath),
            Nested {
                key: &nested_key,
                ..nested
            },
            mapped,
            paths,
        )
    };
    match t {
        Json::String(name) if name == "void" => Ok(None),
        Json::String(name) => primitive(name)
            .map(|p| Some(DataType::Primitive(p)))
            .map_err(err),
        Json::Object(obj) => match obj.get("type").and_then(Json::as_str) {
            Some("struct") => {
                let fields = obj
                    .get("fields")
                    .and_then(Json::as_array)
                    .ok_or_else(|| err("struct without fields".into()))?;
                let kept = struct_fields(fields, lpath, ppath, mapped, paths)?;
                if kept.is_empty() && !fields.is_empty() {
                    // Left out whole: the struct is named, not each of its fields.
                    let inside = format!("{lpath}.");
                    paths.void.retain(|p| !p.starts_with(&inside));
                    return Ok(None);
                }
                Ok(Some(DataType::Struct(kept)))
            }
            Some("array") => {
                let nullable = obj
                    .get("containsNull")
                    .and_then(Json::as_bool)
                    .unwrap_or(true);
                let Some(element) = child("elementType", "element", paths)? else {
                    return Ok(None);
                };
                let mut element = Field::new("element", element, nullable);
                element.id = nested.id("element")?;
                Ok(Some(DataType::List(Box::new(element))))
            }
            Some("map") => {
                let nullable = obj
                    .get("valueContainsNull")
                    .and_then(Json::as_bool)
                    .unwrap_or(true);
                let (Some(key), Some(value)) = (
                    child("keyType", "key", paths)?,
                    child("valueType", "value", paths)?,
                ) else {
                    return Ok(None);
                };
                let mut key = Field::new("key", key, false);
                key.id = nested.id("key")?;
                let mut value = Field::new("value", value, nullable);
                value.id = nested.id("value")?;
                Ok(Some(DataType::Map {
                    key: Box::new(key),
                    value: Box::new(value),
                }))
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
        assert!(t.void_columns.is_empty());
        assert!(parse_schema(
            r#"{"type":"struct","fields":[{"name":"v","type":"variant"}]}"#,
            false,
            &[]
        )
        .unwrap_err()
        .to_string()
        .contains("column v"));
    }

    #[test]
    fn void_columns_are_left_out_and_named() {
        let text = r#"{"type":"struct","fields":[
            {"name":"id","type":"long","nullable":true,"metadata":{}},
            {"name":"v","type":"void","nullable":true,"metadata":{}},
            {"name":"s","type":{"type":"struct","fields":[
                {"name":"x","type":"integer","nullable":true,"metadata":{}},
                {"name":"n","type":"void","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
            {"name":"all_void","type":{"type":"struct","fields":[
                {"name":"a","type":"void","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
            {"name":"l","type":{"type":"array","elementType":"void","containsNull":true},"nullable":true,"metadata":{}},
            {"name":"m","type":{"type":"map","keyType":"string","valueType":"void","valueContainsNull":true},"nullable":true,"metadata":{}},
            {"name":"empty","type":{"type":"struct","fields":[]},"nullable":true,"metadata":{}}
        ]}"#;
        let t = parse_schema(text, false, &[]).unwrap();
        let names: Vec<&str> = t.schema.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["id", "s", "empty"]);
        assert_eq!(t.schema.primitive_at("s.x"), Some(&PrimitiveType::Int));
        assert_eq!(t.void_columns, ["v", "s.n", "all_void", "l", "m"]);
        // Any other unknown type still refuses the schema.
        assert!(parse_schema(
            r#"{"type":"struct","fields":[{"name":"v","type":"interval"}]}"#,
            false,
            &[]
        )
        .is_err());
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

    #[test]
    fn mapping_ids_outside_the_field_id_range_are_refused() {
        let schema = |id: &str| {
            format!(
                r#"{{"type":"struct","fields":[{{"name":"a b","type":"long","nullable":true,"metadata":{{"delta.columnMapping.id":{id},"delta.columnMapping.physicalName":"col-1"}}}}]}}"#
            )
        };
        for id in ["-1", "0", "99999999999", "1.5", "\"3\""] {
            let err = parse_schema(&schema(id), true, &[])
                .unwrap_err()
                .to_string();
            assert!(err.contains("column a b: column mapping id"), "{id}: {err}");
        }
        let t = parse_schema(&schema("2147483647"), true, &[]).unwrap();
        assert_eq!(t.schema.fields[0].id, Some(i32::MAX));
        let nested = r#"{"type":"struct","fields":[{"name":"l","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,
             "metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-l","delta.columnMapping.nested.ids":{"col-l.element":-7}}}]}"#;
        let err = parse_schema(nested, true, &[]).unwrap_err().to_string();
        assert!(err.contains("col-l.element"), "{err}");
    }
}
