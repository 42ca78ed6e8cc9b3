//! Delta's textual values (partition values) and JSON statistics to typed values.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use xlake_model::{ColumnStats, DataType, PrimitiveType, Schema, TimeUnit, Value};

use crate::error::Reason;
use crate::schema::TableSchema;

/// Microseconds of a Delta timestamp text (`2024-01-01 10:00:00[.ffffff]`, ISO-8601 with or
/// without zone); text without a zone is read as UTC.
fn timestamp_micros(text: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_micros());
    }
    let text = text.trim_end_matches('Z');
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ]
    .iter()
    .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
    .map(|t| t.and_utc().timestamp_micros())
}

fn date_days(text: &str) -> Option<i32> {
    let d = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    i32::try_from((d - chrono::NaiveDate::default()).num_days()).ok()
}

/// A partition value as Delta writes it in `partitionValues` (`None` and `""`: null).
/// Timestamps without a zone are read as UTC; the protocol says the writer's zone, which
/// the log does not record (Spark writers should run with a UTC session zone).
pub fn partition_value(text: Option<&str>, ty: &PrimitiveType) -> Result<Option<Value>, Reason> {
    let Some(text) = text else { return Ok(None) };
    // The protocol: "An empty string for any type translates to a null partition value."
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || Reason::from(format!("partition value {text:?} is not a valid {ty:?}"));
    Ok(Some(match ty {
        PrimitiveType::String => Value::String(text.to_string()),
        PrimitiveType::Int => Value::Int(text.parse().map_err(|e| bad().because(e))?),
        PrimitiveType::Long => Value::Long(text.parse().map_err(|e| bad().because(e))?),
        PrimitiveType::Boolean => Value::Boolean(text.parse().map_err(|e| bad().because(e))?),
        PrimitiveType::Float => Value::Float(text.parse().map_err(|e| bad().because(e))?),
        PrimitiveType::Double => Value::Double(text.parse().map_err(|e| bad().because(e))?),
        PrimitiveType::Date => Value::Date(date_days(text).ok_or_else(bad)?),
        PrimitiveType::Timestamp { .. } => {
            Value::Timestamp(timestamp_micros(text).ok_or_else(bad)?)
        }
        PrimitiveType::Binary => Value::Binary(text.as_bytes().to_vec()),
        PrimitiveType::Decimal { scale, .. } => {
            let (neg, digits) = text.strip_prefix('-').map_or((false, text), |d| (true, d));
            let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
            if frac.len() > usize::from(*scale) {
                return Err(bad());
            }
            let unscaled: i128 = format!("{int}{frac:0<width$}", width = usize::from(*scale))
                .parse()
                .map_err(|e| bad().because(e))?;
            Value::Decimal(if neg { -unscaled } else { unscaled })
        }
        _ => return Err(format!("partition columns of type {ty:?} are not supported").into()),
    }))
}

/// A bound from JSON stats, rounded outwards where Delta truncated it: Delta writes
/// timestamps to the millisecond, so an upper bound gains 999 µs.
fn stat_value(v: &Json, ty: &PrimitiveType, upper: bool) -> Option<Value> {
    Some(match ty {
        PrimitiveType::Int => Value::Int(i32::try_from(v.as_i64()?).ok()?),
        PrimitiveType::Long => Value::Long(v.as_i64()?),
        PrimitiveType::Float => Value::Float(v.as_f64()? as f32),
        PrimitiveType::Double => Value::Double(v.as_f64()?),
        PrimitiveType::String => Value::String(v.as_str()?.to_string()),
        PrimitiveType::Date => Value::Date(date_days(v.as_str()?)?),
        PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            ..
        } => {
            let micros = timestamp_micros(v.as_str()?)?;
            Value::Timestamp(if upper {
                micros.checked_add(999)?
            } else {
                micros
            })
        }
        // Booleans and binaries carry no stats; decimals in JSON are floats and may be off.
        _ => return None,
    })
}

/// Record count and per-column stats (keyed by logical dotted path) of an add's stats JSON.
pub fn parse_stats(
    stats: &str,
    table: &TableSchema,
) -> Result<(Option<u64>, BTreeMap<String, ColumnStats>), Reason> {
    let json: Json = serde_json::from_str(stats).map_err(Reason::within("stats are not JSON"))?;
    let records = json.get("numRecords").and_then(Json::as_u64);
    let mut out: BTreeMap<String, ColumnStats> = BTreeMap::new();
    let flat_leaves = flat_leaf_paths(&table.schema);
    for (key, setter) in [("minValues", 0), ("maxValues", 1), ("nullCount", 2)] {
        let mut leaves = Vec::new();
        if let Some(obj) = json.get(key) {
            flatten(obj, "", &mut leaves);
        }
        for (physical, value) in leaves {
            let path = table.logical_path(&physical).to_string();
            let Some(ty) = table.schema.primitive_at(&path) else {
                continue;
            };
            let entry = out.entry(path).or_default();
            match setter {
                0 => entry.lower = stat_value(value, ty, false),
                1 => entry.upper = stat_value(value, ty, true),
                _ => entry.null_count = value.as_u64(),
            }
        }
    }
    for (path, stats) in out.iter_mut() {
        if flat_leaves.contains(path) {
            stats.value_count = records;
        }
    }
    Ok((records, out))
}

fn flatten<'a>(v: &'a Json, prefix: &str, out: &mut Vec<(String, &'a Json)>) {
    match v {
        Json::Object(map) => {
            for (k, child) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(child, &p, out);
            }
        }
        leaf => out.push((prefix.to_string(), leaf)),
    }
}

/// Dotted paths of leaves reachable through structs only (one value per row).
fn flat_leaf_paths(schema: &Schema) -> Vec<String> {
    fn walk(fields: &[xlake_model::Field], prefix: &str, out: &mut Vec<String>) {
        for f in fields {
            let p = if prefix.is_empty() {
                f.name.clone()
            } else {
                format!("{prefix}.{}", f.name)
            };
            match &f.data_type {
                DataType::Primitive(_) => out.push(p),
                DataType::Struct(children) => walk(children, &p, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&schema.fields, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::parse_schema;

    #[test]
    fn typed_partition_values() {
        let ts = PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: true,
        };
        assert_eq!(
            partition_value(Some("2021-01-01 10:00:00.5"), &ts).unwrap(),
            Some(Value::Timestamp(1_609_495_200_500_000))
        );
        assert_eq!(
            partition_value(Some("null"), &PrimitiveType::String).unwrap(),
            Some(Value::String("null".into()))
        );
        assert_eq!(partition_value(None, &PrimitiveType::String).unwrap(), None);
        assert_eq!(
            partition_value(Some(""), &PrimitiveType::Int).unwrap(),
            None
        );
        assert_eq!(
            partition_value(
                Some("-1.5"),
                &PrimitiveType::Decimal {
                    precision: 5,
                    scale: 2
                }
            )
            .unwrap(),
            Some(Value::Decimal(-150))
        );
        assert!(partition_value(Some("x"), &PrimitiveType::Long).is_err());
    }

    #[test]
    fn stats_map_physical_names_and_widen_timestamps() {
        let text = r#"{"type":"struct","fields":[
            {"name":"id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}},
            {"name":"t","type":"timestamp","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2"}}]}"#;
        let table = parse_schema(text, true, &[]).unwrap();
        let (n, stats) = parse_stats(
            r#"{"numRecords":3,"minValues":{"col-1":1,"col-2":"2024-01-01T00:00:00.001Z"},"maxValues":{"col-1":9,"col-2":"2024-01-01T00:00:00.002Z"},"nullCount":{"col-1":0,"col-2":1}}"#,
            &table,
        )
        .unwrap();
        assert_eq!(n, Some(3));
        assert_eq!(stats["id"].lower, Some(Value::Long(1)));
        assert_eq!(stats["id"].value_count, Some(3));
        assert_eq!(
            stats["t"].upper,
            Some(Value::Timestamp(1_704_067_200_002_999))
        );
        assert_eq!(stats["t"].null_count, Some(1));
    }
}
