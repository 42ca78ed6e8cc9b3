//! Neutral partition specs and partition tuples to their Iceberg forms.

use iceberg::spec::{
    Literal, PartitionSpec as IcebergSpec, Schema as IcebergSchema, Struct, StructType,
    Transform as IcebergTransform, Type, UnboundPartitionSpec,
};
use xlake_model::{PartitionSpec, Schema, Transform, Value};

use crate::spec::schema::SchemaProblem;
use crate::spec::value::to_datum;

use crate::spec::error::CodecError;

fn transform(t: Transform) -> IcebergTransform {
    match t {
        Transform::Identity => IcebergTransform::Identity,
        Transform::Year => IcebergTransform::Year,
        Transform::Month => IcebergTransform::Month,
        Transform::Day => IcebergTransform::Day,
        Transform::Hour => IcebergTransform::Hour,
        Transform::Bucket(n) => IcebergTransform::Bucket(n),
        Transform::Truncate(w) => IcebergTransform::Truncate(w),
    }
}

/// A partition field name that is a valid Avro name (manifests are Avro records whose
/// fields are the partition fields), made as Iceberg Java's `makeCompatibleName` does:
/// `Company Very Short` becomes `Company_x20Very_x20Short`.
pub fn avro_safe(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()) {
            out.push(c);
        } else if i == 0 && c.is_ascii_digit() {
            out.push('_');
            out.push(c);
        } else {
            out.push_str(&format!("_x{:X}", u32::from(c)));
        }
    }
    out
}

/// The unbound Iceberg spec of a neutral spec, with source ids taken from `schema`.
pub fn to_unbound_spec(
    spec: &PartitionSpec,
    schema: &IcebergSchema,
) -> Result<UnboundPartitionSpec, SchemaProblem> {
    let mut builder = UnboundPartitionSpec::builder();
    for field in &spec.fields {
        let problem = |reason: String| SchemaProblem {
            column: field.source.clone(),
            reason,
        };
        let source = schema.field_by_name(&field.source).ok_or_else(|| {
            problem(format!(
                "partition field {} names a column the schema does not have",
                field.name
            ))
        })?;
        let t = transform(field.transform);
        if let Type::Primitive(p) = source.field_type.as_ref() {
            t.result_type(&Type::Primitive(p.clone()))
                .map_err(|e| problem(format!("partition transform {t}: {e}")))?;
        } else {
            return Err(problem(
                "partition source must be a primitive column".into(),
            ));
        }
        builder = builder
            .add_partition_field(source.id, avro_safe(&field.name), t)
            .map_err(|e| problem(e.to_string()))?;
    }
    Ok(builder.build())
}

/// True when the bound spec has the same fields as the unbound one (ignoring ids).
pub fn same_fields(bound: &IcebergSpec, unbound: &UnboundPartitionSpec) -> bool {
    bound.fields().len() == unbound.fields().len()
        && bound.fields().iter().zip(unbound.fields()).all(|(a, b)| {
            a.source_id == b.source_id && a.name == b.name && a.transform == b.transform
        })
}

/// The Iceberg partition tuple of a data file's neutral partition values.
pub fn partition_tuple(
    values: &[Option<Value>],
    spec: &PartitionSpec,
    schema: &Schema,
    partition_type: &StructType,
) -> Result<Struct, CodecError> {
    if values.len() != spec.fields.len() {
        return Err(format!(
            "has {} partition values, the partition spec has {} fields",
            values.len(),
            spec.fields.len()
        )
        .into());
    }
    values
        .iter()
        .zip(&spec.fields)
        .zip(partition_type.fields())
        .map(|((value, field), target)| {
            let Some(value) = value else { return Ok(None) };
            let source = schema.primitive_at(&field.source).ok_or_else(|| {
                CodecError::invalid(format!(
                    "partition source column {} is not a primitive column",
                    field.source
                ))
            })?;
            let Type::Primitive(target) = target.field_type.as_ref() else {
                return Err(CodecError::invalid(format!(
                    "partition field {} is not primitive",
                    field.name
                )));
            };
            let datum = to_datum(value, source, target)
                .map_err(|e| e.context(format!("partition field {}", field.name)))?;
            Ok(Some(Literal::Primitive(datum.literal().clone())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_become_avro_names() {
        assert_eq!(avro_safe("Company Very Short"), "Company_x20Very_x20Short");
        assert_eq!(avro_safe("1st"), "_1st");
        assert_eq!(avro_safe("a.b-c"), "a_x2Eb_x2Dc");
        assert_eq!(avro_safe("region"), "region");
    }
}
