//! How a source's data files hold its fields, from their Parquet schemas, and the column
//! mapping mode that follows: `id` while every file carries Parquet field ids; `name` once
//! a file has none (an Iceberg table's files imported by `add_files`, which Iceberg readers
//! resolve through the name mapping, `ChangeSet::name_mapped`). delta-spark refuses a
//! file without ids in mode `id` ("Parquet file schema doesn't contain any field Ids"), so
//! in mode `name` each field's physical name is the name the files hold it under. Where no
//! one name does (a file written after a rename beside one written before it, without
//! ids), no mode reads every file as the source does: the version is refused.
//!
//! The footers are those the target reads for statistics anyway (the Iceberg source
//! records none), read once per added file.

use std::collections::HashSet;

use parquet::basic::{ConvertedType, LogicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::Type as ParquetType;
use serde_json::{Map, Value as Json};
use xlake_model::{DataType, Field, Schema};

use super::schema_out::{physical_names_of, PhysicalNames};

/// How one data file holds the schema's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FileNaming {
    /// Whether the file carries Parquet field ids (then fields resolve by id, else by the
    /// names the source's name mapping gives them).
    pub(super) has_ids: bool,
    /// `(parent field id, field id, name in the file)` of each field the file holds.
    pub(super) held: Vec<(Option<i64>, i64, String)>,
    /// `(parent field id, name)` of the file's columns no field resolves to (the source's
    /// readers skip them).
    pub(super) unresolved: Vec<(Option<i64>, String)>,
}

/// How the file of `meta` holds the fields of `schema` (resolved by Parquet field id where
/// the file has any, else by each field's aliases, the source's name mapping).
pub(super) fn file_naming(meta: &ParquetMetaData, schema: &Schema) -> FileNaming {
    naming_of(meta.file_metadata().schema(), schema)
}

/// [`file_naming`] of a Parquet schema (`root`: the message type).
fn naming_of(root: &ParquetType, schema: &Schema) -> FileNaming {
    let mut out = FileNaming {
        has_ids: any_id(root),
        ..FileNaming::default()
    };
    for node in root.get_fields() {
        out.node(node, &schema.fields, None);
    }
    out
}

fn any_id(node: &ParquetType) -> bool {
    node.get_fields()
        .iter()
        .any(|f| f.get_basic_info().has_id() || (f.is_group() && any_id(f)))
}

impl FileNaming {
    /// A column `node` among the fields `candidates` of the field `parent`.
    fn node(&mut self, node: &ParquetType, candidates: &[Field], parent: Option<i64>) {
        let info = node.get_basic_info();
        let found = candidates.iter().find(|f| match self.has_ids {
            true => info.has_id() && f.id == Some(info.id()),
            false => f.aliases.iter().any(|a| a == info.name()),
        });
        let Some((field, id)) = found.and_then(|f| Some((f, i64::from(f.id?)))) else {
            self.unresolved.push((parent, info.name().to_string()));
            return;
        };
        self.held.push((parent, id, info.name().to_string()));
        self.inside(node, &field.data_type, Some(id));
    }

    /// The struct fields under `node`, of type `ty`, through lists and maps (whose struct
    /// fields Delta names under the list's or map's field, as `schema_out` does).
    fn inside(&mut self, node: &ParquetType, ty: &DataType, parent: Option<i64>) {
        if !node.is_group() {
            return;
        }
        match ty {
            DataType::Primitive(_) => {}
            DataType::Struct(children) => {
                for child in node.get_fields() {
                    self.node(child, children, parent);
                }
            }
            DataType::List(element) => {
                if let Some(e) = list_element(node) {
                    self.inside(e, &element.data_type, parent);
                }
            }
            DataType::Map { key, value } => {
                let pair = node.get_fields().first().filter(|kv| kv.is_group());
                if let Some([k, v]) = pair.map(|kv| kv.get_fields()) {
                    self.inside(k, &key.data_type, parent);
                    self.inside(v, &value.data_type, parent);
                }
            }
        }
    }
}

/// The element of a Parquet list: the repeated group's one field (three levels), or the
/// repeated field itself (the Parquet spec's two-level forms).
fn list_element(list: &ParquetType) -> Option<&ParquetType> {
    let repeated = list.get_fields().first()?;
    let annotated = list.get_basic_info().converted_type() == ConvertedType::LIST
        || matches!(
            list.get_basic_info().logical_type_ref(),
            Some(LogicalType::List)
        );
    let three_level = annotated
        && repeated.is_group()
        && repeated.get_fields().len() == 1
        && repeated.name() != "array"
        && repeated.name() != format!("{}_tuple", list.name());
    match three_level {
        true => repeated.get_fields().first().map(|e| e.as_ref()),
        false => Some(repeated.as_ref()),
    }
}

/// Whether the version that adds files named `namings` (path, naming) uses column mapping
/// mode `name`: the log already does, or a file carries no field ids. From mode `id`, only
/// when no version gave a field a physical name other than its name (`Err` says which
/// did): the files mirrored before hold each field under its physical name then. (A
/// fresh mirror would do no better: its versions before the file are the same.)
pub(super) fn by_name(
    current: Option<&Map<String, Json>>,
    names: &PhysicalNames,
    namings: &[(&str, &FileNaming)],
) -> Result<bool, String> {
    let mode = current.and_then(|m| {
        m.get("configuration")?
            .get("delta.columnMapping.mode")?
            .as_str()
    });
    if mode == Some("name") {
        return Ok(true);
    }
    let Some((path, _)) = namings.iter().find(|(_, n)| !n.has_ids) else {
        return Ok(false);
    };
    match (mode, &names.renamed) {
        (Some("id"), Some(renamed)) => Err(format!(
            "data file {path} carries no Parquet field ids, which Delta readers that resolve by id (delta-spark) refuse, so column mapping must change from mode id to mode name; but {renamed}, so files mirrored before hold that field under another name than its physical one and may read as null by name: no mode reads every file as the source does (not until the files without ids are rewritten with them)"
        )),
        _ => Ok(true),
    }
}

/// Give each field the name the files of `namings` hold it under, as its physical name
/// (mode `name`). `Err` names the file and field when a file holds it under another name
/// than its physical one, or under one another field has.
pub(super) fn settle(
    names: &mut PhysicalNames,
    namings: &[(&str, &FileNaming)],
) -> Result<(), String> {
    for (path, naming) in namings {
        for (parent, id, name) in &naming.held {
            names.give(*parent, *id, name).map_err(|why| {
                format!("data file {path} holds field id {id} as column {name}, but {why}: with column mapping by name (the table's files include some without Parquet field ids), no physical name reads every file as the source does")
            })?;
        }
    }
    Ok(())
}

/// A file column the source's readers skip whose name is a physical name of `schema`
/// (Delta, by name, would read it as that field): `Err` names the file and column.
pub(super) fn check_unresolved(
    schema: &Json,
    namings: &[(&str, &FileNaming)],
) -> Result<(), String> {
    let physical: HashSet<(Option<i64>, String)> = physical_names_of(schema);
    for (path, naming) in namings {
        if let Some((_, name)) = naming.unresolved.iter().find(|k| physical.contains(*k)) {
            return Err(format!("data file {path} holds a column {name} that the source's readers resolve to no field (its name mapping does not name it), and that column mapping by name would read as the field whose physical name is {name}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use parquet::schema::parser::parse_message_type;
    use xlake_model::PrimitiveType;

    use super::*;

    fn field(name: &str, id: i32, aliases: &[&str], data_type: DataType) -> Field {
        let mut f = Field::new(name, data_type, true);
        f.id = Some(id);
        f.aliases = aliases.iter().map(|a| a.to_string()).collect();
        f
    }

    /// `id` (1), `label` (2, once `name`), `s` (3) a struct of `x` (4), `l` (5) a list of
    /// structs of `y` (7).
    fn schema() -> Schema {
        let long = || DataType::Primitive(PrimitiveType::Long);
        let y = field("y", 7, &["y"], long());
        let element = field("element", 6, &["element"], DataType::Struct(vec![y]));
        Schema::new(vec![
            field("id", 1, &["id"], long()),
            field("label", 2, &["name", "label"], long()),
            field(
                "s",
                3,
                &["s"],
                DataType::Struct(vec![field("x", 4, &["x"], long())]),
            ),
            field("l", 5, &["l"], DataType::List(Box::new(element))),
        ])
    }

    #[test]
    fn a_file_without_ids_holds_fields_by_the_names_the_mapping_gives() {
        let root = parse_message_type(
            "message m { optional int64 id; optional int64 name; optional int64 extra;
             optional group s { optional int64 x; }
             optional group l (LIST) { repeated group list { optional group element { optional int64 y; } } } }",
        )
        .unwrap();
        let n = naming_of(&root, &schema());
        assert!(!n.has_ids);
        assert_eq!(
            n.held,
            [
                (None, 1, "id".to_string()),
                (None, 2, "name".to_string()),
                (None, 3, "s".to_string()),
                (Some(3), 4, "x".to_string()),
                (None, 5, "l".to_string()),
                (Some(5), 7, "y".to_string()),
            ]
        );
        assert_eq!(n.unresolved, [(None, "extra".to_string())]);
    }

    #[test]
    fn a_file_with_ids_holds_fields_by_id_whatever_their_names() {
        let root = parse_message_type(
            "message m { optional int64 id = 1; optional int64 label = 2; optional int64 name = 9; }",
        )
        .unwrap();
        let n = naming_of(&root, &schema());
        assert!(n.has_ids);
        assert_eq!(
            n.held,
            [(None, 1, "id".to_string()), (None, 2, "label".to_string())]
        );
        assert_eq!(n.unresolved, [(None, "name".to_string())]);
    }

    fn metadata(mode: &str) -> Map<String, Json> {
        let mut m = Map::new();
        m.insert(
            "configuration".into(),
            serde_json::json!({ "delta.columnMapping.mode": mode }),
        );
        m
    }

    #[test]
    fn mode_name_comes_with_a_file_without_ids_and_not_after_a_rename_in_mode_id() {
        let with_ids = FileNaming {
            has_ids: true,
            ..FileNaming::default()
        };
        let without = FileNaming::default();
        let mut names = PhysicalNames::default();
        let id = metadata("id");
        assert_eq!(by_name(None, &names, &[("a", &with_ids)]), Ok(false));
        assert_eq!(
            by_name(None, &names, &[("a", &with_ids), ("b", &without)]),
            Ok(true)
        );
        assert_eq!(by_name(Some(&id), &names, &[("b", &without)]), Ok(true));
        assert_eq!(
            by_name(Some(&metadata("name")), &names, &[("a", &with_ids)]),
            Ok(true)
        );
        names.renamed = Some("version 3: field id 2 (label) has physical name name".into());
        let err = by_name(Some(&id), &names, &[("b", &without)]).unwrap_err();
        assert!(
            err.contains("data file b carries no Parquet field ids"),
            "{err}"
        );
        assert!(err.contains("version 3: field id 2 (label)"), "{err}");
    }

    #[test]
    fn settle_gives_the_files_name_and_refuses_a_second_one() {
        let held = |name: &str| FileNaming {
            held: vec![(None, 2, name.to_string())],
            ..FileNaming::default()
        };
        let mut names = PhysicalNames::default();
        let (old, new) = (held("name"), held("label"));
        assert_eq!(settle(&mut names, &[("a", &old)]), Ok(()));
        assert_eq!(names.kept.get(&2).map(String::as_str), Some("name"));
        let err = settle(&mut names, &[("b", &new)]).unwrap_err();
        assert!(
            err.starts_with(
                "data file b holds field id 2 as column label, but its physical name is name"
            ),
            "{err}"
        );
        let other = FileNaming {
            held: vec![(None, 3, "name".to_string())],
            ..FileNaming::default()
        };
        let err = settle(&mut names, &[("c", &other)]).unwrap_err();
        assert!(
            err.contains("the physical name name belongs to field id 2"),
            "{err}"
        );
    }
}
