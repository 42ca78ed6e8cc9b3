//! A Parquet file's schema (through its Arrow form) as the neutral schema, and whether a
//! file can be read through the table's schema.

use arrow_schema::{DataType as Arrow, Field as ArrowField, TimeUnit as ArrowUnit};
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::metadata::ParquetMetaData;
use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

use crate::error::ParquetError;

/// The schema of the file whose footer is `meta`.
pub fn file_schema(meta: &ParquetMetaData) -> Result<Schema, ParquetError> {
    let file = meta.file_metadata();
    let arrow = parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata())
        .map_err(ParquetError::Schema)?;
    let fields = arrow
        .fields()
        .iter()
        .map(|f| field(f))
        .collect::<Result<_, _>>()?;
    Ok(Schema::new(fields))
}

fn field(f: &ArrowField) -> Result<Field, ParquetError> {
    Ok(Field::new(
        f.name(),
        data_type(f.name(), f.data_type())?,
        f.is_nullable(),
    ))
}

fn data_type(name: &str, t: &Arrow) -> Result<DataType, ParquetError> {
    let p = |p: PrimitiveType| Ok(DataType::Primitive(p));
    match t {
        Arrow::Boolean => p(PrimitiveType::Boolean),
        Arrow::Int8 | Arrow::Int16 | Arrow::Int32 | Arrow::UInt8 | Arrow::UInt16 => {
            p(PrimitiveType::Int)
        }
        Arrow::Int64 | Arrow::UInt32 => p(PrimitiveType::Long),
        Arrow::Float32 => p(PrimitiveType::Float),
        Arrow::Float64 => p(PrimitiveType::Double),
        Arrow::Decimal128(precision, scale) | Arrow::Decimal256(precision, scale)
            if *precision <= 38 && *scale >= 0 =>
        {
            p(PrimitiveType::Decimal {
                precision: *precision,
                scale: scale.unsigned_abs(),
            })
        }
        Arrow::Date32 => p(PrimitiveType::Date),
        Arrow::Time32(_) | Arrow::Time64(_) => p(PrimitiveType::Time),
        Arrow::Timestamp(unit, zone) => p(PrimitiveType::Timestamp {
            unit: match unit {
                ArrowUnit::Second | ArrowUnit::Millisecond => TimeUnit::Millis,
                ArrowUnit::Microsecond => TimeUnit::Micros,
                ArrowUnit::Nanosecond => TimeUnit::Nanos,
            },
            with_zone: zone.is_some(),
        }),
        Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View => p(PrimitiveType::String),
        Arrow::Binary | Arrow::LargeBinary | Arrow::BinaryView => p(PrimitiveType::Binary),
        Arrow::FixedSizeBinary(n) => p(PrimitiveType::Fixed(n.unsigned_abs())),
        Arrow::List(e) | Arrow::LargeList(e) | Arrow::FixedSizeList(e, _) => {
            Ok(DataType::List(Box::new(field(e)?)))
        }
        Arrow::Struct(children) => Ok(DataType::Struct(
            children
                .iter()
                .map(|c| field(c))
                .collect::<Result<_, _>>()?,
        )),
        Arrow::Map(entries, _) => match entries.data_type() {
            Arrow::Struct(kv) if kv.len() == 2 => Ok(DataType::Map {
                key: Box::new(field(&kv[0])?),
                value: Box::new(field(&kv[1])?),
            }),
            other => Err(ParquetError::Column {
                column: name.to_string(),
                what: format!("map entries of type {other}"),
            }),
        },
        Arrow::Dictionary(_, value) => data_type(name, value),
        other => Err(ParquetError::Column {
            column: name.to_string(),
            what: format!("type {other} has no Iceberg form"),
        }),
    }
}

/// Whether values of type `file` read as `table` (same type, or an Iceberg promotion).
fn reads_as(file: &DataType, table: &DataType) -> bool {
    use PrimitiveType as P;
    match (file, table) {
        (DataType::Primitive(a), DataType::Primitive(b)) => {
            a == b || matches!((a, b), (P::Int, P::Long) | (P::Float, P::Double))
        }
        (DataType::List(a), DataType::List(b)) => reads_as(&a.data_type, &b.data_type),
        (DataType::Map { key: ka, value: va }, DataType::Map { key: kb, value: vb }) => {
            reads_as(&ka.data_type, &kb.data_type) && reads_as(&va.data_type, &vb.data_type)
        }
        (DataType::Struct(a), DataType::Struct(b)) => fits(a, b).is_ok(),
        _ => false,
    }
}

/// Whether a file with `file` columns can be read through the table's `table` columns:
/// every column the file holds is a table column of a type it reads as (a column the
/// file lacks reads as null). `Err` names the first that is not.
pub fn fits(file: &[Field], table: &[Field]) -> Result<(), ParquetError> {
    for f in file {
        let Some(t) = table.iter().find(|t| t.name == f.name) else {
            return Err(ParquetError::Refused(format!(
                "column {} is not in the table's schema (taken from the newest file)",
                f.name
            )));
        };
        if !reads_as(&f.data_type, &t.data_type) {
            return Err(ParquetError::Refused(format!(
                "column {} is {:?} here but {:?} in the newest file",
                f.name, f.data_type, t.data_type
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_fits_with_fewer_or_promoted_columns_only() {
        let table = vec![
            Field::optional("a", PrimitiveType::Long),
            Field::optional("b", PrimitiveType::String),
        ];
        assert!(fits(&[Field::optional("a", PrimitiveType::Int)], &table).is_ok());
        assert!(fits(&[Field::optional("b", PrimitiveType::Long)], &table).is_err());
        assert!(fits(&[Field::optional("c", PrimitiveType::Long)], &table).is_err());
    }

    #[test]
    fn arrow_types_map_to_neutral_ones() {
        assert_eq!(
            data_type(
                "t",
                &Arrow::Timestamp(ArrowUnit::Microsecond, Some("UTC".into()))
            )
            .unwrap(),
            DataType::Primitive(PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: true
            })
        );
        assert!(data_type("x", &Arrow::Float16).is_err());
    }
}
