//! An Iceberg table's schema, partition spec and partition tuples in the neutral model:
//! field ids kept ([`Field::id`]), the name mapping's names as aliases, identity
//! partitions only.

use std::collections::HashMap;

use iceberg::spec::{
    Literal, MappedField, NameMapping, NestedFieldRef, PartitionSpec as IcebergSpec,
    PrimitiveLiteral, PrimitiveType as IcebergPrimitive, Schema as IcebergSchema, Struct,
    Transform as IcebergTransform, Type,
};
use xlake_model::{
    DataType, Field, PartitionField, PartitionSpec, PrimitiveType, Schema, TimeUnit, Value,
};

use crate::spec::error::CodecError;

/// The neutral schema of an Iceberg schema, every field with its Iceberg id.
pub(crate) fn schema(schema: &IcebergSchema) -> Schema {
    Schema::new(schema.as_struct().fields().iter().map(field).collect())
}

/// `schema` with each field's [`Field::aliases`] the names `mapping` (the table's
/// `schema.name-mapping.default`) gives its field id: the names a data file without field
/// ids holds it under, as Iceberg readers resolve them.
pub(crate) fn with_name_mapping(mut schema: Schema, mapping: &NameMapping) -> Schema {
    fn collect<'a>(f: &'a MappedField, out: &mut HashMap<i32, &'a [String]>) {
        if let Some(id) = f.field_id() {
            out.insert(id, f.names());
        }
        for child in f.fields() {
            collect(child, out);
        }
    }
    fn apply(fields: &mut [Field], names: &HashMap<i32, &[String]>) {
        for f in fields {
            if let Some(given) = f.id.and_then(|id| names.get(&id)) {
                f.aliases = given.to_vec();
            }
            match &mut f.data_type {
                DataType::Primitive(_) => {}
                DataType::Struct(children) => apply(children, names),
                DataType::List(element) => apply(std::slice::from_mut(element), names),
                DataType::Map { key, value } => {
                    apply(std::slice::from_mut(key), names);
                    apply(std::slice::from_mut(value), names);
                }
            }
        }
    }
    let mut names = HashMap::new();
    for f in mapping.fields() {
        collect(f, &mut names);
    }
    apply(&mut schema.fields, &names);
    schema
}

fn field(f: &NestedFieldRef) -> Field {
    let mut out = Field::new(f.name.clone(), data_type(&f.field_type), !f.required);
    out.id = Some(f.id);
    out.doc = f.doc.clone();
    out
}

fn data_type(t: &Type) -> DataType {
    match t {
        Type::Primitive(p) => DataType::Primitive(primitive(p)),
        Type::Struct(s) => DataType::Struct(s.fields().iter().map(field).collect()),
        Type::List(l) => DataType::List(Box::new(field(&l.element_field))),
        Type::Map(m) => DataType::Map {
            key: Box::new(field(&m.key_field)),
            value: Box::new(field(&m.value_field)),
        },
    }
}

fn primitive(p: &IcebergPrimitive) -> PrimitiveType {
    let timestamp = |unit, with_zone| PrimitiveType::Timestamp { unit, with_zone };
    match p {
        IcebergPrimitive::Boolean => PrimitiveType::Boolean,
        IcebergPrimitive::Int => PrimitiveType::Int,
        IcebergPrimitive::Long => PrimitiveType::Long,
        IcebergPrimitive::Float => PrimitiveType::Float,
        IcebergPrimitive::Double => PrimitiveType::Double,
        // Iceberg allows precision up to 38, so both fit in a byte.
        IcebergPrimitive::Decimal { precision, scale } => PrimitiveType::Decimal {
            precision: u8::try_from(*precision).unwrap_or(38),
            scale: u8::try_from(*scale).unwrap_or(38),
        },
        IcebergPrimitive::Date => PrimitiveType::Date,
        IcebergPrimitive::Time => PrimitiveType::Time,
        IcebergPrimitive::Timestamp => timestamp(TimeUnit::Micros, false),
        IcebergPrimitive::Timestamptz => timestamp(TimeUnit::Micros, true),
        IcebergPrimitive::TimestampNs => timestamp(TimeUnit::Nanos, false),
        IcebergPrimitive::TimestamptzNs => timestamp(TimeUnit::Nanos, true),
        IcebergPrimitive::String => PrimitiveType::String,
        IcebergPrimitive::Uuid => PrimitiveType::Uuid,
        IcebergPrimitive::Fixed(n) => PrimitiveType::Fixed(u32::try_from(*n).unwrap_or(u32::MAX)),
        IcebergPrimitive::Binary => PrimitiveType::Binary,
    }
}

/// The neutral partition spec of an Iceberg spec: identity fields only. Any other
/// transform is refused by name (`Err` says which field and transform): a target such as
/// Delta partitions by column values only.
pub(crate) fn partition_spec(
    spec: &IcebergSpec,
    schema: &IcebergSchema,
) -> Result<PartitionSpec, CodecError> {
    let mut fields = Vec::with_capacity(spec.fields().len());
    for f in spec.fields() {
        if f.transform == IcebergTransform::Void {
            continue;
        }
        let source = schema.name_by_field_id(f.source_id).ok_or_else(|| {
            format!(
                "partition field {} of spec {} names column id {}, which the schema does not hold",
                f.name,
                spec.spec_id(),
                f.source_id
            )
        })?;
        if f.transform != IcebergTransform::Identity {
            return Err(format!(
                "partition field {} is {}({source}) in spec {}: only identity partitions are mirrored",
                f.name,
                f.transform,
                spec.spec_id()
            )
            .into());
        }
        fields.push(PartitionField::new(
            source,
            f.name.clone(),
            xlake_model::Transform::Identity,
        ));
    }
    Ok(PartitionSpec::new(fields))
}

/// A data file's partition tuple as neutral values, one per field of `spec` (void fields
/// left out, as [`partition_spec`] leaves them out), each in its source column's type.
pub(crate) fn partition_values(
    tuple: &Struct,
    spec: &IcebergSpec,
    schema: &IcebergSchema,
) -> Result<Vec<Option<Value>>, CodecError> {
    // Never a field left without its value (a tuple read short would be zipped away).
    let values = tuple.iter().count();
    if values != spec.fields().len() {
        return Err(format!(
            "a partition tuple of {values} values for the {} fields of partition spec {}",
            spec.fields().len(),
            spec.spec_id()
        )
        .into());
    }
    let mut out = Vec::with_capacity(spec.fields().len());
    for (f, literal) in spec.fields().iter().zip(tuple.iter()) {
        if f.transform == IcebergTransform::Void {
            continue;
        }
        let column = schema
            .field_by_id(f.source_id)
            .map(|c| c.field_type.as_ref());
        let Some(Type::Primitive(ty)) = column else {
            return Err(
                format!("partition field {} has no primitive source column", f.name).into(),
            );
        };
        let value =
            match literal {
                None => None,
                Some(Literal::Primitive(p)) => Some(value(p, ty).ok_or_else(|| {
                    format!("partition field {}: value {p:?} is not a {ty}", f.name)
                })?),
                Some(other) => {
                    return Err(format!(
                        "partition field {}: value {other:?} is not a primitive",
                        f.name
                    )
                    .into())
                }
            };
        out.push(value);
    }
    Ok(out)
}

/// A literal read in its column's type.
fn value(p: &PrimitiveLiteral, ty: &IcebergPrimitive) -> Option<Value> {
    use IcebergPrimitive as T;
    use PrimitiveLiteral as L;
    Some(match (p, ty) {
        (L::Boolean(b), T::Boolean) => Value::Boolean(*b),
        (L::Int(i), T::Int) => Value::Int(*i),
        (L::Int(i), T::Date) => Value::Date(*i),
        (L::Long(l), T::Long) => Value::Long(*l),
        (L::Long(l), T::Time) => Value::Time(*l),
        (L::Long(l), T::Timestamp | T::Timestamptz | T::TimestampNs | T::TimestamptzNs) => {
            Value::Timestamp(*l)
        }
        (L::Float(f), T::Float) => Value::Float(f.0),
        (L::Double(d), T::Double) => Value::Double(d.0),
        (L::String(s), T::String) => Value::String(s.clone()),
        (L::Binary(b), T::Binary | T::Fixed(_)) => Value::Binary(b.clone()),
        (L::Int128(d), T::Decimal { .. }) => Value::Decimal(*d),
        (L::UInt128(u), T::Uuid) => Value::Uuid(u.to_be_bytes()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, UnboundPartitionSpec};

    use super::*;

    fn table_schema() -> IcebergSchema {
        IcebergSchema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(IcebergPrimitive::Long)).into(),
                NestedField::optional(2, "day", Type::Primitive(IcebergPrimitive::Date)).into(),
            ])
            .build()
            .unwrap()
    }

    fn spec(transform: IcebergTransform) -> IcebergSpec {
        UnboundPartitionSpec::builder()
            .add_partition_field(2, "p", transform)
            .unwrap()
            .build()
            .bind(table_schema())
            .unwrap()
    }

    #[test]
    fn field_ids_and_identity_partitions_are_kept() {
        let schema = table_schema();
        let neutral = super::schema(&schema);
        assert_eq!(neutral.fields[0].id, Some(1));
        assert!(!neutral.fields[0].nullable);
        assert_eq!(neutral.fields[1].id, Some(2));
        let spec = spec(IcebergTransform::Identity);
        let p = partition_spec(&spec, &schema).unwrap();
        assert_eq!(
            p.fields,
            vec![PartitionField::new(
                "day",
                "p",
                xlake_model::Transform::Identity
            )]
        );
        let tuple = Struct::from_iter([Some(Literal::date(19000))]);
        assert_eq!(
            partition_values(&tuple, &spec, &schema).unwrap(),
            vec![Some(Value::Date(19000))]
        );
    }

    #[test]
    fn other_transforms_are_refused_by_name() {
        let schema = table_schema();
        let err = partition_spec(&spec(IcebergTransform::Month), &schema)
            .unwrap_err()
            .to_string();
        assert!(err.contains("partition field p is month(day)"), "{err}");
    }

    #[test]
    fn the_name_mapping_gives_each_field_id_its_names_as_aliases() {
        let mapping: NameMapping = serde_json::from_str(
            r#"[{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["day", "d"]}]"#,
        )
        .unwrap();
        let neutral = with_name_mapping(super::schema(&table_schema()), &mapping);
        assert_eq!(neutral.fields[0].aliases, ["id"]);
        assert_eq!(neutral.fields[1].aliases, ["day", "d"]);
    }
}
