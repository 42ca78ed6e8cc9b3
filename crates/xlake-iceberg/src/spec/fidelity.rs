//! Data file layouts that some Iceberg readers misread, found in Parquet footers, and the
//! `xlake.degraded` snapshot summary key that names the columns affected.
//!
//! The files are referenced in place, so what other engines wrote stays as they wrote it:
//! - two-level lists (parquet-avro's `repeated group array`, Hudi 0.x): the Iceberg spec
//!   requires three levels; Iceberg Java (Spark) fails on them (apache/iceberg#9497);
//! - `TIMESTAMP_MILLIS` columns: Spark's vectorized Iceberg reader fails on them, its row
//!   reader does not, so the table gets `read.parquet.vectorization.enabled=false`;
//! - list elements and map keys and values without a field id in a file whose other columns
//!   carry ids (Delta column mapping without `delta.columnMapping.nested.ids`): readers that
//!   see ids read by ids alone, and cannot resolve those.
//!
//! Layout entries of [`DEGRADED`] are sticky: each snapshot carries its parent's plus its
//! own, so the current snapshot names every column ever mirrored in a degraded layout. A
//! source's notes ([`ChangeSet::degraded`](xlake_model::ChangeSet::degraded)) are per
//! commit.

use std::collections::BTreeSet;

use iceberg::spec::{MappedField, NameMapping, Schema as IcebergSchema};
use parquet::basic::{ConvertedType, LogicalType, Repetition, TimeUnit, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::Type as ParquetType;

pub use crate::summary::DEGRADED;
/// Table property that makes Spark read with its row reader instead of the vectorized one.
pub const PARQUET_VECTORIZATION: &str = "read.parquet.vectorization.enabled";

/// A layout some Iceberg readers misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// A list of two levels instead of the three the Iceberg spec requires.
    TwoLevelList,
    /// An INT64 timestamp in milliseconds.
    TimestampMillis,
    /// Nested fields without a field id in a file whose other fields have one.
    NestedWithoutIds,
}

impl Shape {
    /// Every layout looked for.
    pub const ALL: [Shape; 3] = [
        Shape::TwoLevelList,
        Shape::TimestampMillis,
        Shape::NestedWithoutIds,
    ];

    /// What the operator needs to know, as the text after the column name.
    pub fn describe(self) -> &'static str {
        match self {
            Shape::TwoLevelList => "two-level Parquet list (legacy parquet-avro layout); Iceberg Java/Spark cannot read this column (apache/iceberg#9497), pyiceberg and DuckDB can",
            Shape::TimestampMillis => "Parquet TIMESTAMP_MILLIS; Spark's vectorized reader fails on it, so the table sets read.parquet.vectorization.enabled=false",
            Shape::NestedWithoutIds => "list elements or map keys/values carry no Parquet field id while other columns do; Spark and DuckDB resolve by field id and cannot read its nested values (pyiceberg reads them through the name mapping)",
        }
    }
}

/// One column of one file in a degraded layout.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Finding {
    /// Dotted name of the column in the table schema (the physical name if unmapped).
    pub column: String,
    /// Its layout.
    pub shape: Shape,
}

impl Finding {
    /// The entry for [`DEGRADED`].
    pub fn entry(&self) -> String {
        format!("{}: {}", self.column, self.shape.describe())
    }
}

/// Whether a [`DEGRADED`] entry is a file layout (a [`Finding`]'s): those stay as long as
/// the table exists, since files are never rewritten; the other entries are the source's
/// notes on one commit, given again by every commit they still apply to.
pub fn is_layout_entry(entry: &str) -> bool {
    Shape::ALL.iter().any(|s| entry.ends_with(s.describe()))
}

/// The degraded layouts of a file, named by the columns of `schema` (resolved through the
/// file's field ids, else through `mapping`).
pub fn findings(
    meta: &ParquetMetaData,
    schema: &IcebergSchema,
    mapping: &NameMapping,
) -> BTreeSet<Finding> {
    schema_findings(meta.file_metadata().schema(), schema, mapping)
}

/// [`findings`] of a Parquet schema (`root`: the message type).
pub fn schema_findings(
    root: &ParquetType,
    schema: &IcebergSchema,
    mapping: &NameMapping,
) -> BTreeSet<Finding> {
    let mut walk = Walk {
        schema,
        has_ids: any_id(root.get_fields()),
        out: BTreeSet::new(),
    };
    let mapped: Vec<&MappedField> = mapping.fields().iter().collect();
    for f in root.get_fields() {
        walk.field(f, &mapped, "");
    }
    walk.out
}

fn any_id(fields: &[parquet::schema::types::TypePtr]) -> bool {
    fields
        .iter()
        .any(|f| f.get_basic_info().has_id() || (f.is_group() && any_id(f.get_fields())))
}

struct Walk<'a> {
    schema: &'a IcebergSchema,
    has_ids: bool,
    out: BTreeSet<Finding>,
}

impl Walk<'_> {
    /// Visit `node`, whose siblings map through `mapped`; `name` is the parent's column.
    fn field(&mut self, node: &ParquetType, mapped: &[&MappedField], parent: &str) {
        let info = node.get_basic_info();
        let by_mapping = mapped
            .iter()
            .find(|m| m.names().iter().any(|n| n == info.name()));
        let id = if info.has_id() {
            Some(info.id())
        } else {
            by_mapping.and_then(|m| m.field_id())
        };
        let column = id
            .and_then(|id| self.schema.name_by_field_id(id))
            .map(str::to_string)
            .unwrap_or_else(|| {
                if parent.is_empty() {
                    info.name().to_string()
                } else {
                    parent.to_string()
                }
            });
        let children: Vec<&MappedField> = by_mapping
            .map(|m| m.fields().iter().map(|c| c.as_ref()).collect())
            .unwrap_or_default();
        if node.is_primitive() {
            if is_timestamp_millis(node) {
                self.found(&column, Shape::TimestampMillis);
            }
            return;
        }
        let annotation = info.converted_type();
        let is_list = annotation == ConvertedType::LIST
            || matches!(info.logical_type_ref(), Some(LogicalType::List));
        let is_map = matches!(
            annotation,
            ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE
        ) || matches!(info.logical_type_ref(), Some(LogicalType::Map));
        if is_list || is_map {
            self.nested(node, &children, &column, is_list);
            return;
        }
        for f in node.get_fields() {
            if f.get_basic_info().repetition() == Repetition::REPEATED {
                // A repeated field outside a LIST or MAP group: a bare two-level list.
                self.found(&join(&column, f.name()), Shape::TwoLevelList);
            }
            self.field(f, &children, &column);
        }
    }

    /// A LIST or MAP group: its repeated child, and what lies under it.
    fn nested(&mut self, node: &ParquetType, mapped: &[&MappedField], column: &str, list: bool) {
        for repeated in node.get_fields() {
            let two_level = list && is_two_level(node, repeated);
            if two_level {
                self.found(column, Shape::TwoLevelList);
            }
            // The element (or key and value) fields: the repeated node itself in a
            // two-level list, else its children.
            let inner: Vec<&ParquetType> = if two_level {
                vec![repeated.as_ref()]
            } else if repeated.is_group() {
                repeated.get_fields().iter().map(|f| f.as_ref()).collect()
            } else {
                vec![repeated.as_ref()]
            };
            for f in inner {
                if self.has_ids && !f.get_basic_info().has_id() {
                    self.found(column, Shape::NestedWithoutIds);
                }
                self.field(f, mapped, column);
            }
        }
    }

    fn found(&mut self, column: &str, shape: Shape) {
        self.out.insert(Finding {
            column: column.to_string(),
            shape,
        });
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The Parquet spec's backward-compatibility rules: a repeated primitive, a repeated group
/// of several fields, or one named `array` or `<list>_tuple`, is the element itself.
fn is_two_level(list: &ParquetType, repeated: &ParquetType) -> bool {
    if repeated.is_primitive() {
        return true;
    }
    let fields = repeated.get_fields();
    fields.len() != 1
        || repeated.name() == "array"
        || repeated.name() == format!("{}_tuple", list.name())
}

fn is_timestamp_millis(node: &ParquetType) -> bool {
    if node.get_physical_type() != PhysicalType::INT64 {
        return false;
    }
    let info = node.get_basic_info();
    match info.logical_type_ref() {
        Some(LogicalType::Timestamp {
            unit: TimeUnit::MILLIS,
            ..
        }) => true,
        Some(_) => false,
        None => info.converted_type() == ConvertedType::TIMESTAMP_MILLIS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{name_mapping, to_iceberg_schema};
    use parquet::schema::parser::parse_message_type;
    use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

    fn list(name: &str, element: DataType) -> Field {
        Field::new(
            name,
            DataType::List(Box::new(Field::new("element", element, true))),
            true,
        )
    }

    fn found(message: &str, fields: Vec<Field>) -> Vec<(String, Shape)> {
        let (schema, aliases) = to_iceberg_schema(&Schema::new(fields), None, &[], 0, 0).unwrap();
        let mapping = name_mapping(&schema, &aliases);
        let root = parse_message_type(message).unwrap();
        schema_findings(&root, &schema, &mapping)
            .into_iter()
            .map(|f| (f.column, f.shape))
            .collect()
    }

    #[test]
    fn two_level_lists_are_found_three_level_ones_are_not() {
        let int = DataType::Primitive(PrimitiveType::Int);
        let fields = vec![
            list("a", int.clone()),
            list("b", int.clone()),
            list("c", int),
        ];
        let message = "message m {
            optional group a (LIST) { repeated group array { optional int32 x; optional int32 y; } }
            optional group b (LIST) { repeated int32 element; }
            optional group c (LIST) { repeated group list { optional int32 element; } }
        }";
        assert_eq!(
            found(message, fields),
            vec![
                ("a".to_string(), Shape::TwoLevelList),
                ("b".to_string(), Shape::TwoLevelList)
            ]
        );
    }

    #[test]
    fn millisecond_timestamps_are_found_by_logical_or_converted_type() {
        let ts = |name: &str| {
            Field::new(
                name,
                DataType::Primitive(PrimitiveType::Timestamp {
                    unit: TimeUnit::Micros,
                    with_zone: true,
                }),
                true,
            )
        };
        let message = "message m {
            optional int64 a (TIMESTAMP(MILLIS,true));
            optional int64 b (TIMESTAMP_MILLIS);
            optional int64 c (TIMESTAMP(MICROS,true));
        }";
        assert_eq!(
            found(message, vec![ts("a"), ts("b"), ts("c")]),
            vec![
                ("a".to_string(), Shape::TimestampMillis),
                ("b".to_string(), Shape::TimestampMillis)
            ]
        );
    }

    #[test]
    fn nested_fields_without_ids_count_only_in_files_with_ids() {
        let mut id = Field::new("id", DataType::Primitive(PrimitiveType::Int), true);
        id.id = Some(1);
        id.aliases = vec!["col-1".into()];
        let mut tags = list("tags", DataType::Primitive(PrimitiveType::Int));
        tags.id = Some(2);
        tags.aliases = vec!["col-2".into()];
        let fields = vec![id, tags];
        let with_ids = "message m {
            optional int32 col-1 = 1;
            optional group col-2 (LIST) = 2 { repeated group list { optional int32 element; } }
        }";
        assert_eq!(
            found(with_ids, fields.clone()),
            vec![("tags".to_string(), Shape::NestedWithoutIds)]
        );
        let nested_ids = "message m {
            optional int32 col-1 = 1;
            optional group col-2 (LIST) = 2 { repeated group list { optional int32 element = 7; } }
        }";
        assert_eq!(found(nested_ids, fields.clone()), vec![]);
        let no_ids = "message m {
            optional int32 col-1;
            optional group col-2 (LIST) { repeated group list { optional int32 element; } }
        }";
        assert_eq!(found(no_ids, fields), vec![]);
    }
}
