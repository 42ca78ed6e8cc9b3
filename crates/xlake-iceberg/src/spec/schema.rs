//! Neutral schemas to Iceberg schemas with stable field ids, and the name mapping.
//!
//! Ids are matched by column path (`a.b`, `l.element`, `m.key`, `m.value`) against the
//! table's current schema: a known column keeps its id, a new one takes the next id above
//! `last-column-id`, so ids are never reused. New ids are handed out in the order
//! iceberg-rust's id reassigner uses (siblings first, then their children), so a new table's
//! ids come out the same whichever of the two assigns them.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, MappedField, NameMapping, NestedField, NestedFieldRef,
    PrimitiveType as IcebergPrimitive, Schema as IcebergSchema, StructType, Type,
};
use xlake_model::{DataType, Field, Schema};

use crate::spec::value::iceberg_primitive;

/// Why a schema cannot be written: the column path and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// Dotted path of the column.
    pub column: String,
    /// Why.
    pub reason: String,
}

/// An existing column: its id, type and whether it is required.
#[derive(Clone)]
struct Known {
    id: i32,
    ty: Type,
    required: bool,
}

/// Assigns ids to a neutral schema given the table's current Iceberg schema.
struct Assigner {
    known: HashMap<String, Known>,
    /// The current schema's fields by id (a source id may move to a new path: a rename).
    by_id: HashMap<i32, Known>,
    /// The id each path of the new schema got.
    resolved: HashMap<String, i32>,
    /// Columns of older schemas, by path: a column that comes back under its old name
    /// (a Delta RESTORE; no column mapping) takes its old id, so old files read through it.
    dropped: HashMap<String, Known>,
    next_id: i32,
    /// True when the table already exists: new columns must then be optional.
    evolving: bool,
    /// Other names of fields in data files, by field id.
    aliases: HashMap<i32, Vec<String>>,
}

/// Ids xlake assigns in a schema whose columns carry source ids start here: Delta column
/// mapping numbers new columns from its own counter (`delta.columnMapping.maxColumnId`) and
/// gives list elements and map keys and values no id, so ours must stay out of its way.
pub const OWN_ID_BASE_WITH_SOURCE_IDS: i32 = 1_000_000_000;

fn next_free_id(schema: &Schema, last_column_id: i32) -> i32 {
    let explicit = max_explicit_id(&schema.fields);
    let above = last_column_id.max(explicit).max(0) + 1;
    if explicit > 0 {
        above.max(OWN_ID_BASE_WITH_SOURCE_IDS)
    } else {
        above
    }
}

/// Names a field has in data files besides its own, by field id (for the name mapping).
pub type Aliases = HashMap<i32, Vec<String>>;

fn max_explicit_id(fields: &[Field]) -> i32 {
    fields
        .iter()
        .map(|f| {
            let nested = match &f.data_type {
                DataType::Primitive(_) => 0,
                DataType::Struct(children) => max_explicit_id(children),
                DataType::List(e) => max_explicit_id(std::slice::from_ref(e)),
                DataType::Map { key, value } => {
                    max_explicit_id(&[(**key).clone(), (**value).clone()])
                }
            };
            f.id.unwrap_or(0).max(nested)
        })
        .max()
        .unwrap_or(0)
}

/// Convert `schema` to an Iceberg schema with id `schema_id`, keeping the ids of `current`
/// (the table's schema, if any), using ids the source assigned (Delta column mapping), and
/// starting other new ids above `last_column_id` and every source id. Also returns the
/// fields' other names in data files.
pub fn to_iceberg_schema(
    schema: &Schema,
    current: Option<&IcebergSchema>,
    older: &[&IcebergSchema],
    last_column_id: i32,
    schema_id: i32,
) -> Result<(IcebergSchema, Aliases), SchemaProblem> {
    let mut known = HashMap::new();
    if let Some(current) = current {
        collect_known(current.as_struct().fields(), "", &mut known);
    }
    let mut dropped = HashMap::new();
    for s in older {
        collect_known(s.as_struct().fields(), "", &mut dropped);
    }
    let by_id = known.values().map(|k| (k.id, k.clone())).collect();
    let mut assigner = Assigner {
        known,
        by_id,
        resolved: HashMap::new(),
        dropped,
        next_id: next_free_id(schema, last_column_id),
        evolving: current.is_some(),
        aliases: HashMap::new(),
    };
    let fields = assigner.struct_fields(&schema.fields, "")?;
    let schema = IcebergSchema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| SchemaProblem {
            column: String::new(),
            reason: e.to_string(),
        })?;
    Ok((schema, assigner.aliases))
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn collect_known(fields: &[NestedFieldRef], prefix: &str, out: &mut HashMap<String, Known>) {
    for f in fields {
        collect_field(f, &join(prefix, &f.name), out);
    }
}

fn collect_field(f: &NestedField, path: &str, out: &mut HashMap<String, Known>) {
    out.insert(
        path.to_string(),
        Known {
            id: f.id,
            ty: (*f.field_type).clone(),
            required: f.required,
        },
    );
    match f.field_type.as_ref() {
        Type::Struct(s) => collect_known(s.fields(), path, out),
        Type::List(l) => collect_field(&l.element_field, &join(path, "element"), out),
        Type::Map(m) => {
            collect_field(&m.key_field, &join(path, "key"), out);
            collect_field(&m.value_field, &join(path, "value"), out);
        }
        Type::Primitive(_) => {}
    }
}

/// Whether a column of an older schema can come back with this type under its old id:
/// its files must read through the new type.
fn reusable(old: &Type, new: &DataType) -> bool {
    match (old, new) {
        (Type::Primitive(o), DataType::Primitive(p)) => {
            iceberg_primitive(p).is_ok_and(|n| promotes(o, &n))
        }
        (Type::Struct(_), DataType::Struct(_))
        | (Type::List(_), DataType::List(_))
        | (Type::Map(_), DataType::Map { .. }) => true,
        _ => false,
    }
}

/// Whether Iceberg can read values written as `from` through a column typed `to`.
fn promotes(from: &IcebergPrimitive, to: &IcebergPrimitive) -> bool {
    match (from, to) {
        (a, b) if a == b => true,
        (IcebergPrimitive::Int, IcebergPrimitive::Long) => true,
        (IcebergPrimitive::Float, IcebergPrimitive::Double) => true,
        (
            IcebergPrimitive::Decimal {
                precision: p1,
                scale: s1,
            },
            IcebergPrimitive::Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 == s2 && p1 <= p2,
        _ => false,
    }
}

impl Assigner {
    fn id_for(&mut self, path: &str, field: &Field) -> i32 {
        let returning = self
            .dropped
            .get(path)
            .filter(|k| reusable(&k.ty, &field.data_type))
            .map(|k| k.id);
        // A source's own id (column mapping) wins: a renamed column keeps it.
        let id = match (field.id, self.known.get(path), returning) {
            (Some(explicit), _, _) => explicit,
            (None, Some(k), _) => k.id,
            (None, None, Some(old)) => old,
            (None, None, None) => {
                self.next_id += 1;
                self.next_id - 1
            }
        };
        self.resolved.insert(path.to_string(), id);
        if !field.aliases.is_empty() {
            self.aliases.insert(id, field.aliases.clone());
        }
        id
    }

    /// Required only if the source says so and the column is not new to an existing table
    /// (Iceberg cannot add a required column) nor was optional before.
    /// The current schema's field that the new field at `path` continues, if any.
    fn existing(&self, path: &str) -> Option<&Known> {
        self.resolved.get(path).and_then(|id| self.by_id.get(id))
    }

    fn required(&self, path: &str, nullable: bool) -> bool {
        match self.existing(path) {
            Some(k) => k.required && !nullable,
            None => !self.evolving && !nullable,
        }
    }

    fn struct_fields(
        &mut self,
        fields: &[Field],
        prefix: &str,
    ) -> Result<Vec<NestedFieldRef>, SchemaProblem> {
        let mut seen = std::collections::HashSet::new();
        let ids: Vec<i32> = fields
            .iter()
            .map(|f| {
                let path = join(prefix, &f.name);
                if !seen.insert(f.name.as_str()) {
                    return Err(SchemaProblem {
                        column: path,
                        reason: "duplicate column name".into(),
                    });
                }
                Ok(self.id_for(&path, f))
            })
            .collect::<Result<_, _>>()?;
        fields
            .iter()
            .zip(ids)
            .map(|(f, id)| {
                let path = join(prefix, &f.name);
                let ty = self.convert_type(&f.data_type, &path)?;
                let mut nf =
                    NestedField::new(id, f.name.clone(), ty, self.required(&path, f.nullable));
                if let Some(doc) = &f.doc {
                    nf = nf.with_doc(doc.clone());
                }
                Ok(Arc::new(nf))
            })
            .collect()
    }

    fn convert_type(&mut self, ty: &DataType, path: &str) -> Result<Type, SchemaProblem> {
        let problem = |reason: String| SchemaProblem {
            column: path.to_string(),
            reason,
        };
        let existing = self.existing(path).map(|k| k.ty.clone());
        let existing = existing.as_ref();
        match ty {
            DataType::Primitive(p) => {
                let new = iceberg_primitive(p).map_err(|e| problem(e.to_string()))?;
                match existing {
                    None => Ok(Type::Primitive(new)),
                    Some(Type::Primitive(old)) if promotes(old, &new) => Ok(Type::Primitive(new)),
                    // Files written with a narrower type read fine through the wider column.
                    Some(Type::Primitive(old)) if promotes(&new, old) => {
                        Ok(Type::Primitive(old.clone()))
                    }
                    Some(old) => Err(problem(format!(
                        "type changes from {old} to {new}, which Iceberg cannot read old files as"
                    ))),
                }
            }
            DataType::Struct(children) => {
                if matches!(existing, Some(t) if !t.is_struct()) {
                    return Err(problem("changes from a non-struct type to a struct".into()));
                }
                Ok(Type::Struct(StructType::new(
                    self.struct_fields(children, path)?,
                )))
            }
            DataType::List(element) => {
                if matches!(existing, Some(t) if !matches!(t, Type::List(_))) {
                    return Err(problem("changes from a non-list type to a list".into()));
                }
                let element_path = join(path, "element");
                let id = self.id_for(&element_path, element);
                let required = self.required(&element_path, element.nullable);
                let ty = self.convert_type(&element.data_type, &element_path)?;
                Ok(Type::List(ListType::new(Arc::new(
                    NestedField::list_element(id, ty, required),
                ))))
            }
            DataType::Map { key, value } => {
                if matches!(existing, Some(t) if !matches!(t, Type::Map(_))) {
                    return Err(problem("changes from a non-map type to a map".into()));
                }
                let key_path = join(path, "key");
                let key_id = self.id_for(&key_path, key);
                let key_ty = self.convert_type(&key.data_type, &key_path)?;
                let value_path = join(path, "value");
                let value_id = self.id_for(&value_path, value);
                let value_required = self.required(&value_path, value.nullable);
                let value_ty = self.convert_type(&value.data_type, &value_path)?;
                Ok(Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(key_id, key_ty)),
                    Arc::new(NestedField::map_value_element(
                        value_id,
                        value_ty,
                        value_required,
                    )),
                )))
            }
        }
    }
}

/// The name mapping (`schema.name-mapping.default`) of a schema, with each field's
/// `aliases` as further names. List elements are also known as `array` (two-level lists of
/// Hudi 0.x and old Spark) and `item` (Arrow writers).
pub fn name_mapping(schema: &IcebergSchema, aliases: &Aliases) -> NameMapping {
    NameMapping::new(
        schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| mapped(f, vec![f.name.clone()], aliases))
            .collect(),
    )
}

fn mapped(field: &NestedField, mut names: Vec<String>, aliases: &Aliases) -> MappedField {
    names.extend(aliases.get(&field.id).into_iter().flatten().cloned());
    let children = match field.field_type.as_ref() {
        Type::Struct(s) => s
            .fields()
            .iter()
            .map(|f| mapped(f, vec![f.name.clone()], aliases))
            .collect(),
        Type::List(l) => vec![mapped(
            &l.element_field,
            vec!["element".into(), "array".into(), "item".into()],
            aliases,
        )],
        Type::Map(m) => vec![
            mapped(&m.key_field, vec!["key".into()], aliases),
            mapped(&m.value_field, vec!["value".into()], aliases),
        ],
        Type::Primitive(_) => Vec::new(),
    };
    MappedField::new(Some(field.id), names, children)
}

/// The lowest id a column new to this commit may take: above `last_column_id`, every id
/// of `converted` (the commit's schema, ids assigned) and, when the source assigns ids,
/// at [`OWN_ID_BASE_WITH_SOURCE_IDS`] or above.
pub fn first_free_id(schema: &Schema, converted: &IcebergSchema, last_column_id: i32) -> i32 {
    next_free_id(schema, last_column_id.max(converted.highest_field_id()))
}

/// Name-mapping entries for `ignored` top-level columns: columns data files hold that the
/// schema does not name because the source's readers skip them. A file column the name
/// mapping does not name fails pyiceberg and DuckDB; one mapped to an id no schema field
/// has is read by none. Each ignored column keeps the id `previous` (the table's mapping so
/// far) gave it; a new one takes the next id from `first_id` on. The caller keeps these
/// ids counted in `last-column-id`, so that no later column takes them. A name `current`
/// (the schema's own mapping) holds is a real column, not ignored.
pub fn reserved_mappings(
    ignored: &[String],
    converted: &IcebergSchema,
    current: &NameMapping,
    previous: Option<&NameMapping>,
    first_id: i32,
) -> Vec<MappedField> {
    let taken = |name: &String| current.fields().iter().any(|f| f.names().contains(name));
    let mut next = first_id;
    let mut out: Vec<MappedField> = Vec::new();
    for name in ignored {
        if taken(name) || out.iter().any(|f| f.names().contains(name)) {
            continue;
        }
        let kept = previous
            .into_iter()
            .flat_map(|p| p.fields())
            .filter(|f| f.names().contains(name))
            .filter_map(|f| f.field_id())
            .find(|id| converted.field_by_id(*id).is_none());
        let id = kept.unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        out.push(MappedField::new(Some(id), vec![name.clone()], Vec::new()));
    }
    out
}

/// `current` plus every field of `previous` it lacks (matched by field id, recursively),
/// with the names of both: a column dropped from the schema keeps its mapping, as older
/// snapshots still read files that hold it.
pub fn merge_mappings(current: &NameMapping, previous: &NameMapping) -> NameMapping {
    let current: Vec<&MappedField> = current.fields().iter().collect();
    let previous: Vec<&MappedField> = previous.fields().iter().collect();
    NameMapping::new(merge_fields(&current, &previous))
}

fn merge_fields(current: &[&MappedField], previous: &[&MappedField]) -> Vec<MappedField> {
    fn children(f: &MappedField) -> Vec<&MappedField> {
        f.fields().iter().map(|c| c.as_ref()).collect()
    }
    let mut out: Vec<MappedField> = current
        .iter()
        .map(|c| {
            match previous
                .iter()
                .find(|p| p.field_id().is_some() && p.field_id() == c.field_id())
            {
                None => (*c).clone(),
                Some(old) => {
                    // An old name another current field now holds stays with that field
                    // only (a rename, then a new column under the old name).
                    let held_elsewhere = |n: &String| {
                        current
                            .iter()
                            .any(|o| o.field_id() != c.field_id() && o.names().contains(n))
                    };
                    let mut names = c.names().to_vec();
                    names.extend(
                        old.names()
                            .iter()
                            .filter(|n| !c.names().contains(n) && !held_elsewhere(n))
                            .cloned(),
                    );
                    MappedField::new(
                        c.field_id(),
                        names,
                        merge_fields(&children(c), &children(old)),
                    )
                }
            }
        })
        .collect();
    // A dropped field keeps only the names no current field uses: two ids under one name
    // make readers pick one (pyiceberg, DuckDB) or refuse (Java).
    let taken: Vec<&String> = current.iter().flat_map(|c| c.names()).collect();
    for old in previous
        .iter()
        .filter(|old| !current.iter().any(|c| c.field_id() == old.field_id()))
    {
        let names: Vec<String> = old
            .names()
            .iter()
            .filter(|n| !taken.contains(n))
            .cloned()
            .collect();
        if !names.is_empty() {
            out.push(MappedField::new(
                old.field_id(),
                names,
                merge_fields(&[], &children(old)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_model::PrimitiveType;

    fn nested_schema() -> Schema {
        Schema::new(vec![
            Field::required("id", PrimitiveType::Long),
            Field::new(
                "s",
                DataType::Struct(vec![Field::optional("x", PrimitiveType::String)]),
                true,
            ),
            Field::new(
                "l",
                DataType::List(Box::new(Field::optional("element", PrimitiveType::Int))),
                true,
            ),
            Field::new(
                "m",
                DataType::Map {
                    key: Box::new(Field::required("key", PrimitiveType::String)),
                    value: Box::new(Field::optional("value", PrimitiveType::Double)),
                },
                true,
            ),
        ])
    }

    #[test]
    fn ids_match_iceberg_rust_reassignment_for_new_tables() {
        let ours = to_iceberg_schema(&nested_schema(), None, &[], 0, 0)
            .unwrap()
            .0;
        let theirs = iceberg::spec::TableMetadataBuilder::new(
            ours.clone(),
            iceberg::spec::UnboundPartitionSpec::builder().build(),
            iceberg::spec::SortOrder::unsorted_order(),
            "/tmp/t".into(),
            iceberg::spec::FormatVersion::V2,
            HashMap::new(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        assert_eq!(&ours, theirs.current_schema().as_ref());
        assert_eq!(ours.highest_field_id(), 8);
        assert!(ours.field_by_name("id").unwrap().required);
    }

    #[test]
    fn ids_are_stable_and_never_reused() {
        let v1 = to_iceberg_schema(&nested_schema(), None, &[], 0, 0)
            .unwrap()
            .0;
        // Drop `s`, add `z`: `z` takes 9, not 2 or 3.
        let mut evolved = nested_schema();
        evolved.fields.remove(1);
        evolved
            .fields
            .push(Field::required("z", PrimitiveType::Date));
        let v2 = to_iceberg_schema(&evolved, Some(&v1), &[], v1.highest_field_id(), 1)
            .unwrap()
            .0;
        assert_eq!(v2.field_by_name("id").unwrap().id, 1);
        assert_eq!(
            v2.field_by_name("m.value").unwrap().id,
            v1.field_by_name("m.value").unwrap().id
        );
        let z = v2.field_by_name("z").unwrap();
        assert_eq!(z.id, 9);
        assert!(
            !z.required,
            "a column added to an existing table is optional"
        );
    }

    #[test]
    fn promotion_allowed_and_narrowing_kept_wide() {
        let v1 = to_iceberg_schema(
            &Schema::new(vec![Field::optional("a", PrimitiveType::Int)]),
            None,
            &[],
            0,
            0,
        )
        .unwrap()
        .0;
        let wider = to_iceberg_schema(
            &Schema::new(vec![Field::optional("a", PrimitiveType::Long)]),
            Some(&v1),
            &[],
            1,
            1,
        )
        .unwrap()
        .0;
        assert_eq!(
            *wider.field_by_name("a").unwrap().field_type,
            Type::Primitive(IcebergPrimitive::Long)
        );
        let back = to_iceberg_schema(
            &Schema::new(vec![Field::optional("a", PrimitiveType::Int)]),
            Some(&wider),
            &[],
            1,
            2,
        )
        .unwrap()
        .0;
        assert_eq!(
            *back.field_by_name("a").unwrap().field_type,
            Type::Primitive(IcebergPrimitive::Long)
        );
        let err = to_iceberg_schema(
            &Schema::new(vec![Field::optional("a", PrimitiveType::String)]),
            Some(&v1),
            &[],
            1,
            1,
        )
        .unwrap_err();
        assert_eq!(err.column, "a");
    }

    #[test]
    fn source_ids_are_kept_and_aliases_mapped() {
        let mut a = Field::optional("a", PrimitiveType::Long);
        a.id = Some(7);
        a.aliases = vec!["col-1234".into()];
        let b = Field::optional("b", PrimitiveType::String);
        let (schema, aliases) =
            to_iceberg_schema(&Schema::new(vec![a, b]), None, &[], 0, 0).unwrap();
        assert_eq!(schema.field_by_name("a").unwrap().id, 7);
        assert_eq!(
            schema.field_by_name("b").unwrap().id,
            OWN_ID_BASE_WITH_SOURCE_IDS,
            "our ids stay clear of the ids the source hands out next"
        );
        let json = serde_json::to_string(&name_mapping(&schema, &aliases)).unwrap();
        assert!(
            json.contains(r#"{"field-id":7,"names":["a","col-1234"]}"#),
            "{json}"
        );
    }

    /// The nested schema (v1), then only its first column (the neutral schema, and v2).
    fn with_columns_dropped() -> (IcebergSchema, Schema, IcebergSchema) {
        let v1 = to_iceberg_schema(&nested_schema(), None, &[], 0, 0)
            .unwrap()
            .0;
        let mut fewer = nested_schema();
        fewer.fields.truncate(1);
        let v2 = to_iceberg_schema(&fewer, Some(&v1), &[], v1.highest_field_id(), 1)
            .unwrap()
            .0;
        (v1, fewer, v2)
    }

    #[test]
    fn dropped_columns_stay_mapped() {
        let (v1, _, v2) = with_columns_dropped();
        let merged = merge_mappings(
            &name_mapping(&v2, &Aliases::new()),
            &name_mapping(&v1, &Aliases::new()),
        );
        let json = serde_json::to_string(&merged).unwrap();
        assert_eq!(merged.fields().len(), 4, "{json}");
        assert!(
            json.contains(r#""names":["element","array","item"]"#),
            "{json}"
        );
        let ids: Vec<Option<i32>> = merged.fields().iter().map(|f| f.field_id()).collect();
        assert_eq!(ids, [Some(1), Some(2), Some(3), Some(4)], "{json}");
        assert!(
            json.contains(
                r#"{"field-id":4,"names":["m"],"fields":[{"field-id":7,"names":["key"]}"#
            ),
            "{json}"
        );
    }

    #[test]
    fn a_column_that_comes_back_keeps_its_old_id() {
        let (v1, fewer, v2) = with_columns_dropped();
        // `l` (a list, id 3 with element 6) comes back; `z` is new.
        let mut back = fewer.clone();
        back.fields.push(nested_schema().fields[2].clone());
        back.fields.push(Field::optional("z", PrimitiveType::Int));
        let v3 = to_iceberg_schema(&back, Some(&v2), &[&v1], 8, 2).unwrap().0;
        assert_eq!(v3.field_by_name("l").unwrap().id, 3);
        assert_eq!(v3.field_by_name("l.element").unwrap().id, 6);
        assert_eq!(v3.field_by_name("z").unwrap().id, 9);
        // Back with a type old files cannot be read as: a new id.
        let mut retyped = fewer;
        retyped
            .fields
            .push(Field::optional("s", PrimitiveType::Long));
        let v4 = to_iceberg_schema(&retyped, Some(&v2), &[&v1], 8, 2)
            .unwrap()
            .0;
        assert_eq!(v4.field_by_name("s").unwrap().id, 9);
    }

    #[test]
    fn a_renamed_column_gives_up_its_old_name_to_a_new_column() {
        let b = Field::optional("a", PrimitiveType::Long);
        let v1 = to_iceberg_schema(&Schema::new(vec![b]), None, &[], 0, 0)
            .unwrap()
            .0;
        let first = name_mapping(&v1, &Aliases::new());
        // Renamed a -> b (same id by column mapping), then a new column a.
        let mut renamed = Field::optional("b", PrimitiveType::Long);
        renamed.id = Some(1);
        let mut new_a = Field::optional("a", PrimitiveType::Long);
        new_a.id = Some(2);
        let v2 = to_iceberg_schema(&Schema::new(vec![renamed, new_a]), Some(&v1), &[], 1, 1)
            .unwrap()
            .0;
        let json =
            serde_json::to_string(&merge_mappings(&name_mapping(&v2, &Aliases::new()), &first))
                .unwrap();
        assert_eq!(
            json,
            r#"[{"field-id":1,"names":["b"]},{"field-id":2,"names":["a"]}]"#
        );
    }

    #[test]
    fn ignored_columns_get_reserved_ids_that_stay() {
        let ids = |m: &[MappedField]| -> Vec<(Option<i32>, Vec<String>)> {
            m.iter()
                .map(|f| (f.field_id(), f.names().to_vec()))
                .collect()
        };
        let neutral = Schema::new(vec![Field::optional("a", PrimitiveType::Long)]);
        let v1 = to_iceberg_schema(&neutral, None, &[], 0, 0).unwrap().0;
        let own = name_mapping(&v1, &Aliases::new());
        let ignored = vec!["_x".to_string(), "_y".to_string(), "a".to_string()];
        let first = first_free_id(&neutral, &v1, 0);
        assert_eq!(first, 2);
        let reserved = reserved_mappings(&ignored, &v1, &own, None, first);
        // `a` is a real column: never ignored.
        assert_eq!(
            ids(&reserved),
            [
                (Some(2), vec!["_x".to_string()]),
                (Some(3), vec!["_y".to_string()])
            ]
        );
        let table_mapping = merge_mappings(
            &NameMapping::new(own.fields().iter().cloned().chain(reserved).collect()),
            &own,
        );
        // The next schema, with last-column-id counting the reserved ids: a new column
        // takes 4, and the ignored columns keep 2 and 3.
        let mut evolved = neutral.clone();
        evolved
            .fields
            .push(Field::optional("b", PrimitiveType::Int));
        let v2 = to_iceberg_schema(&evolved, Some(&v1), &[], 3, 1).unwrap().0;
        assert_eq!(v2.field_by_name("b").unwrap().id, 4);
        let own2 = name_mapping(&v2, &Aliases::new());
        let again = reserved_mappings(
            &ignored,
            &v2,
            &own2,
            Some(&table_mapping),
            first_free_id(&evolved, &v2, 3),
        );
        assert_eq!(
            ids(&again),
            [
                (Some(2), vec!["_x".to_string()]),
                (Some(3), vec!["_y".to_string()])
            ]
        );
        // With source ids (Delta column mapping), reserved ids stay clear of the source's.
        let mut mapped = Field::optional("c", PrimitiveType::Long);
        mapped.id = Some(5);
        let with_ids = Schema::new(vec![mapped]);
        let v3 = to_iceberg_schema(&with_ids, None, &[], 0, 0).unwrap().0;
        let first = first_free_id(&with_ids, &v3, 0);
        assert_eq!(first, OWN_ID_BASE_WITH_SOURCE_IDS);
        let r = reserved_mappings(
            &ignored[..1],
            &v3,
            &name_mapping(&v3, &Aliases::new()),
            None,
            first,
        );
        assert_eq!(ids(&r), [(Some(first), vec!["_x".to_string()])]);
    }

    #[test]
    fn name_mapping_lists_element_and_array() {
        let s = to_iceberg_schema(&nested_schema(), None, &[], 0, 0)
            .unwrap()
            .0;
        let json = serde_json::to_string(&name_mapping(&s, &Aliases::new())).unwrap();
        assert!(json.contains(r#"{"field-id":1,"names":["id"]}"#), "{json}");
        assert!(
            json.contains(r#""names":["element","array","item"]"#),
            "{json}"
        );
        assert!(json.contains(r#""names":["key"]"#), "{json}");
    }
}
