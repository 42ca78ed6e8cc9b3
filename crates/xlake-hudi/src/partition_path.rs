//! Partition paths (`region=eu`, `10/300`, `2024/01/31`) to partition specs and values.

use xlake_model::{PartitionField, PartitionSpec, PrimitiveType, Schema, Value};

use crate::error::Reason;
use crate::properties::{KeyGenerator, TableConfig};

/// Hudi's name for a null partition value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";
/// The null partition value of old Hudi versions (Hudi's own parser still reads it as null).
pub const LEGACY_DEFAULT_PARTITION: &str = "default";

/// The Iceberg partition spec for a table, and a note when the table is written
/// unpartitioned although Hudi partitions it.
pub fn partition_spec(config: &TableConfig, schema: &Schema) -> (PartitionSpec, Option<String>) {
    match config.key_generator {
        KeyGenerator::NonPartitioned => (PartitionSpec::unpartitioned(), None),
        KeyGenerator::Timestamp => (
            PartitionSpec::unpartitioned(),
            Some(format!(
                "partition paths come from a timestamp-based key generator on {}; the Iceberg table is unpartitioned (rows are exact, pruning uses column bounds)",
                config.partition_fields.join(",")
            )),
        ),
        KeyGenerator::Fields => {
            let missing: Vec<&String> = config
                .partition_fields
                .iter()
                .filter(|f| schema.field(f).is_none_or(|field| !matches!(field.data_type, xlake_model::DataType::Primitive(_))))
                .collect();
            if missing.is_empty() {
                (PartitionSpec::new(config.partition_fields.iter().map(PartitionField::identity).collect()), None)
            } else {
                let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
                (
                    PartitionSpec::unpartitioned(),
                    Some(format!(
                        "partition field(s) {} are not primitive columns of the data files; the Iceberg table is unpartitioned",
                        names.join(",")
                    )),
                )
            }
        }
    }
}

/// The typed partition values of a partition path, one per spec field.
pub fn partition_values(
    path: &str,
    config: &TableConfig,
    spec: &PartitionSpec,
    schema: &Schema,
) -> Result<Vec<Option<Value>>, Reason> {
    if spec.is_unpartitioned() {
        return Ok(Vec::new());
    }
    // One field: the whole path is its value, slashes included (`americas/united_states`).
    let parts: Vec<&str> = if spec.fields.len() == 1 {
        vec![path.trim_matches('/')]
    } else {
        path.split('/').filter(|p| !p.is_empty()).collect()
    };
    if parts.len() != spec.fields.len() {
        return Err(format!(
            "partition path {path:?} has {} segments, the table has {} partition fields",
            parts.len(),
            spec.fields.len()
        )
        .into());
    }
    spec.fields
        .iter()
        .zip(parts)
        .map(|(field, part)| {
            let raw = if config.hive_style {
                let (name, value) = part.split_once('=').ok_or_else(|| {
                    Reason::from(format!("partition path segment {part:?} is not name=value"))
                })?;
                if name != field.source {
                    return Err(Reason::from(format!(
                        "partition path segment {part:?} should name {}",
                        field.source
                    )));
                }
                value
            } else {
                part
            };
            let raw = if config.url_encoded {
                percent_decode(raw)?
            } else {
                raw.to_string()
            };
            if raw == HIVE_DEFAULT_PARTITION || raw == LEGACY_DEFAULT_PARTITION {
                return Ok(None);
            }
            let ty = schema
                .primitive_at(&field.source)
                .ok_or_else(|| Reason::from(format!("no column {}", field.source)))?;
            parse_value(&raw, ty)
                .map(Some)
                .map_err(|e| e.context(format!("partition value {raw:?} of {}", field.source)))
        })
        .collect()
}

fn percent_decode(s: &str) -> std::result::Result<String, Reason> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|d| d.into_owned())
        .map_err(|e| Reason::library(e).context(format!("{s}: not UTF-8 after %-decoding")))
}

/// Parse the text of a partition value as a column of type `ty`.
fn parse_value(raw: &str, ty: &PrimitiveType) -> Result<Value, Reason> {
    let bad = || format!("not a valid {ty:?}");
    Ok(match ty {
        PrimitiveType::String => Value::String(raw.to_string()),
        PrimitiveType::Int => Value::Int(raw.parse().map_err(|_| bad())?),
        PrimitiveType::Long => Value::Long(raw.parse().map_err(|_| bad())?),
        PrimitiveType::Boolean => Value::Boolean(raw.parse().map_err(|_| bad())?),
        PrimitiveType::Float => Value::Float(raw.parse().map_err(|_| bad())?),
        PrimitiveType::Double => Value::Double(raw.parse().map_err(|_| bad())?),
        PrimitiveType::Date => {
            let d = chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d").map_err(Reason::library)?;
            Value::Date((d - chrono::NaiveDate::default()).num_days() as i32)
        }
        PrimitiveType::Decimal { scale, .. } => {
            let (int, frac) = raw.split_once('.').unwrap_or((raw, ""));
            if frac.len() > usize::from(*scale) {
                return Err(format!("more than {scale} decimal places").into());
            }
            let digits = format!("{int}{frac:0<width$}", width = usize::from(*scale));
            Value::Decimal(digits.parse().map_err(|_| bad())?)
        }
        other => {
            return Err(format!("partition columns of type {other:?} are not supported").into())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::parse_properties;
    use xlake_model::Field;

    fn config(text: &str) -> TableConfig {
        TableConfig::from_properties(&parse_properties(text)).unwrap()
    }

    #[test]
    fn hive_style_and_positional_paths() {
        let schema = Schema::new(vec![
            Field::optional("byteField", PrimitiveType::Int),
            Field::optional("shortField", PrimitiveType::Int),
            Field::optional("region", PrimitiveType::String),
        ]);
        let hive = config("hoodie.table.version=6\nhoodie.table.partition.fields=byteField,shortField\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.ComplexKeyGenerator\nhoodie.datasource.write.hive_style_partitioning=true");
        let (spec, note) = partition_spec(&hive, &schema);
        assert!(note.is_none());
        assert_eq!(
            partition_values("byteField=10/shortField=300", &hive, &spec, &schema).unwrap(),
            vec![Some(Value::Int(10)), Some(Value::Int(300))]
        );
        assert_eq!(
            partition_values(
                "byteField=__HIVE_DEFAULT_PARTITION__/shortField=1",
                &hive,
                &spec,
                &schema
            )
            .unwrap()[0],
            None
        );
        assert!(partition_values("byteField=10", &hive, &spec, &schema).is_err());
        assert!(partition_values("shortField=10/byteField=1", &hive, &spec, &schema).is_err());

        let plain = config("hoodie.table.version=8\nhoodie.table.partition.fields=region\nhoodie.table.keygenerator.type=SIMPLE\nhoodie.datasource.write.partitionpath.urlencode=true");
        let (one, _) = partition_spec(&plain, &schema);
        assert_eq!(
            partition_values("americas/united_states", &plain, &one, &schema).unwrap(),
            vec![Some(Value::String("americas/united_states".into()))],
            "a single field takes the whole path"
        );
        let (spec, _) = partition_spec(&plain, &schema);
        assert_eq!(
            partition_values("a%2Fb%20c", &plain, &spec, &schema).unwrap(),
            vec![Some(Value::String("a/b c".into()))]
        );
    }

    #[test]
    fn timestamp_key_generators_stay_unpartitioned_with_a_note() {
        let schema = Schema::new(vec![Field::optional("ts", PrimitiveType::Long)]);
        let c = config("hoodie.table.version=9\nhoodie.table.partition.fields=ts\nhoodie.table.keygenerator.type=TIMESTAMP");
        let (spec, note) = partition_spec(&c, &schema);
        assert!(spec.is_unpartitioned());
        assert!(note.unwrap().contains("timestamp-based"));
    }

    #[test]
    fn typed_values() {
        assert_eq!(
            parse_value("2024-03-01", &PrimitiveType::Date).unwrap(),
            Value::Date(19783)
        );
        assert_eq!(
            parse_value(
                "12.5",
                &PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2
                }
            )
            .unwrap(),
            Value::Decimal(1250)
        );
        assert!(parse_value("x", &PrimitiveType::Int).is_err());
    }
}
