//! The neutral schema and partition spec in Delta's words: `schemaString`, identity
//! partition columns, column mapping by id (when the source's fields carry ids; by name
//! when its files carry none, from `naming`), and the
//! lowest protocol that holds the features used.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{json, Map, Value as Json};
use xlake_model::{DataType, Field, PartitionSpec, PrimitiveType, Schema, Transform};

use crate::error::Reason;

/// Column mapping on (mode `id`): every field of the source carries an id.
pub(super) fn wants_column_mapping(schema: &Schema) -> bool {
    !schema.fields.is_empty() && schema.fields.iter().all(|f| f.id.is_some())
}

/// Column mapping as the log has it: the physical name each field id holds now, and every
/// physical name any version gave, with the field id it was given to (by parent field:
/// readers resolve a physical name among its siblings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PhysicalNames {
    /// Field id to the physical name it has in the `metaData` in force.
    pub(super) kept: HashMap<i64, String>,
    /// `(parent field id, physical name)` to the field id that first had it.
    pub(super) used: HashMap<(Option<i64>, String), i64>,
    /// Physical names a version gave to a second field id: `version: what`.
    pub(super) reused: Vec<String>,
    /// The first field a version gave a physical name other than its own name (a rename,
    /// or `col-<id>`): `version N: field id I (name) is physical P`. Files written by the
    /// source after that hold the field under another name than its physical one.
    pub(super) renamed: Option<String>,
}

impl PhysicalNames {
    /// Note the schema of a `metaData` action of `version`: `kept` becomes its mapping.
    pub(super) fn note(&mut self, version: u64, metadata: &Map<String, Json>) {
        let schema = metadata
            .get("schemaString")
            .and_then(Json::as_str)
            .and_then(|s| serde_json::from_str::<Json>(s).ok());
        let mut given = Vec::new();
        if let Some(schema) = schema {
            walk_type(&schema, None, &mut given);
        }
        self.kept.clear();
        for (parent, name, id, logical) in given {
            if name != logical && self.renamed.is_none() {
                self.renamed = Some(format!(
                    "version {version}: field id {id} ({logical}) has physical name {name}"
                ));
            }
            match self.used.get(&(parent, name.clone())) {
                Some(&other) if other != id => self.reused.push(format!(
                    "version {version}: physical name {name} of field id {id} was given to field id {other}"
                )),
                Some(_) => {}
                None => {
                    self.used.insert((parent, name.clone()), id);
                }
            }
            self.kept.insert(id, name);
        }
    }

    /// Give field `id` under `parent` the physical name `name`, which a data file holds it
    /// under (column mapping mode `name`): `Err` names the name it has, or the field id
    /// that has `name`, when that differs.
    pub(super) fn give(&mut self, parent: Option<i64>, id: i64, name: &str) -> Result<(), String> {
        if let Some(kept) = self.kept.get(&id).filter(|k| *k != name) {
            return Err(format!("its physical name is {kept}"));
        }
        match self.used.get(&(parent, name.to_string())) {
            Some(&other) if other != id => Err(format!(
                "the physical name {name} belongs to field id {other}"
            )),
            _ => {
                self.used.insert((parent, name.to_string()), id);
                self.kept.insert(id, name.to_string());
                Ok(())
            }
        }
    }

    /// The physical name of field `id` (`name` now) under `parent`: the one it has; else
    /// its name (the source writes its files under it), unless a field id under `parent`
    /// ever had that name (a column dropped or renamed, its old files keep the name): then
    /// `col-<id>`, or `col-<id>-<n>` if that too was given. A name a log written before
    /// this rule gave to a second field id is given anew (the versions from then on read).
    fn assign(&mut self, parent: Option<i64>, id: i64, name: &str) -> String {
        let taken = |names: &Self, c: &str| {
            names
                .used
                .get(&(parent, c.to_string()))
                .is_some_and(|&other| other != id)
        };
        if let Some(kept) = self.kept.get(&id) {
            if !taken(self, kept) {
                return kept.clone();
            }
        }
        let mut candidate = name.to_string();
        if taken(self, &candidate) {
            candidate = format!("col-{id}");
        }
        let mut n = 1;
        while taken(self, &candidate) {
            candidate = format!("col-{id}-{n}");
            n += 1;
        }
        self.used.insert((parent, candidate.clone()), id);
        candidate
    }
}

/// Every `(parent field id, physical name)` of a Delta schema (column mapping).
pub(super) fn physical_names_of(schema: &Json) -> HashSet<(Option<i64>, String)> {
    let mut given = Vec::new();
    walk_type(schema, None, &mut given);
    given
        .into_iter()
        .map(|(parent, name, _, _)| (parent, name))
        .collect()
}

/// `(parent field id, physical name, field id, name)`.
type Given = (Option<i64>, String, i64, String);

/// Every `(parent field id, physical name, field id, name)` of a Delta type, through
/// structs, array elements and map keys and values.
fn walk_type(t: &Json, parent: Option<i64>, out: &mut Vec<Given>) {
    let Json::Object(o) = t else { return };
    for f in o
        .get("fields")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let meta = f.get("metadata");
        let id = meta
            .and_then(|m| m.get("delta.columnMapping.id"))
            .and_then(Json::as_i64);
        let name = meta
            .and_then(|m| m.get("delta.columnMapping.physicalName"))
            .and_then(Json::as_str);
        let logical = f.get("name").and_then(Json::as_str).unwrap_or_default();
        if let (Some(id), Some(name)) = (id, name) {
            out.push((parent, name.to_string(), id, logical.to_string()));
        }
        if let Some(ty) = f.get("type") {
            walk_type(ty, id.or(parent), out);
        }
    }
    for key in ["elementType", "keyType", "valueType"] {
        if let Some(inner) = o.get(key) {
            walk_type(inner, parent, out);
        }
    }
}

/// Delta's JSON schema for `schema`; with column mapping, each field's id and physical
/// name (see [`PhysicalNames::assign`]). Errors name the column.
pub(super) fn delta_schema(
    schema: &Schema,
    mut mapping: Option<&mut PhysicalNames>,
) -> Result<Json, Reason> {
    Ok(json!({"type": "struct", "fields": fields(&schema.fields, None, &mut mapping)?}))
}

type Mapping<'a, 'b> = &'a mut Option<&'b mut PhysicalNames>;

fn fields(fields: &[Field], parent: Option<i64>, mapping: Mapping) -> Result<Vec<Json>, String> {
    fields.iter().map(|f| field(f, parent, mapping)).collect()
}

fn field(f: &Field, parent: Option<i64>, mapping: Mapping) -> Result<Json, String> {
    let mut metadata = Map::new();
    let id = f.id.map(i64::from);
    if let (Some(names), Some(id)) = (mapping.as_deref_mut(), id) {
        let physical = names.assign(parent, id, &f.name);
        metadata.insert("delta.columnMapping.id".into(), json!(id));
        metadata.insert("delta.columnMapping.physicalName".into(), json!(physical));
    }
    let ty = data_type(&f.data_type, id.or(parent), mapping)
        .map_err(|e| format!("column {}: {e}", f.name))?;
    Ok(json!({"name": f.name, "type": ty, "nullable": f.nullable, "metadata": metadata}))
}

fn data_type(t: &DataType, parent: Option<i64>, mapping: Mapping) -> Result<Json, String> {
    Ok(match t {
        DataType::Primitive(p) => json!(primitive(p)?),
        DataType::Struct(children) => {
            json!({"type": "struct", "fields": fields(children, parent, mapping)?})
        }
        DataType::List(element) => json!({
            "type": "array",
            "elementType": data_type(&element.data_type, parent, mapping)?,
            "containsNull": element.nullable,
        }),
        DataType::Map { key, value } => json!({
            "type": "map",
            "keyType": data_type(&key.data_type, parent, mapping)?,
            "valueType": data_type(&value.data_type, parent, mapping)?,
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
