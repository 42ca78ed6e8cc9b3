//! Values in Delta's words: partition values as text, statistics as JSON, paths as the
//! URI-encoded strings `add` and `remove` carry, inline deletion vectors as Z85.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Map, Value as Json};
use xlake_model::{ColumnStats, PrimitiveType, Schema, TimeUnit, Value};

/// Characters a path keeps as they are (unreserved, `/` and `=` of partition folders).
const KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/')
    .remove(b'=');

/// A model location as a Delta file path: table-relative paths URI-encoded, absolute local
/// paths as `file://` URIs, URLs as they are.
pub(super) fn delta_path(path: &str) -> String {
    if path.contains("://") {
        path.to_string()
    } else if path.starts_with('/') {
        format!("file://{}", utf8_percent_encode(path, KEEP))
    } else {
        utf8_percent_encode(path, KEEP).to_string()
    }
}

/// A model location, made absolute against `root` (a table location), as a URI.
pub(super) fn absolute_uri(root: &str, path: &str) -> String {
    if path.contains("://") || path.starts_with('/') {
        return delta_path(path);
    }
    delta_path(&format!("{}/{}", root.trim_end_matches('/'), path))
}

fn days(d: i32) -> Option<String> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some(
        epoch
            .checked_add_signed(chrono::Duration::days(i64::from(d)))?
            .format("%Y-%m-%d")
            .to_string(),
    )
}

fn micros(v: i64, unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Millis => v.saturating_mul(1000),
        TimeUnit::Micros => v,
        TimeUnit::Nanos => v.div_euclid(1000),
    }
}

/// A partition value as Delta's text; `None` for a type Delta's partition values cannot
/// spell.
pub(super) fn partition_text(v: &Value, ty: &PrimitiveType) -> Option<String> {
    Some(match (v, ty) {
        (Value::Boolean(b), _) => b.to_string(),
        (Value::Int(i), _) => i.to_string(),
        (Value::Long(i), PrimitiveType::Timestamp { unit, with_zone }) => {
            timestamp(*i, *unit, *with_zone)?
        }
        (Value::Timestamp(i), PrimitiveType::Timestamp { unit, with_zone }) => {
            timestamp(*i, *unit, *with_zone)?
        }
        (Value::Long(i), _) => i.to_string(),
        (Value::Float(f), _) => f.to_string(),
        (Value::Double(f), _) => f.to_string(),
        (Value::Decimal(d), PrimitiveType::Decimal { scale, .. }) => decimal(*d, *scale),
        (Value::Date(d), _) => days(*d)?,
        (Value::String(s), _) => s.clone(),
        _ => return None,
    })
}

fn timestamp(v: i64, unit: TimeUnit, with_zone: bool) -> Option<String> {
    let t = DateTime::from_timestamp_micros(micros(v, unit))?;
    Some(match with_zone {
        true => t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        false => t.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
    })
}

fn decimal(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A bound as a JSON statistic; `None` where a bound could mislead a reader (timestamps
/// at a coarser unit, long strings, NaN, decimals beyond a double).
fn stat_value(v: &Value) -> Option<Json> {
    match v {
        Value::Int(i) => Some(json!(i)),
        Value::Long(i) => Some(json!(i)),
        Value::Float(f) if f.is_finite() => Some(json!(f)),
        Value::Double(f) if f.is_finite() => Some(json!(f)),
        Value::Date(d) => days(*d).map(Json::String),
        Value::String(s) if s.chars().count() <= 32 => Some(json!(s)),
        _ => None,
    }
}

/// `stats` of an add: `numRecords`, and per leaf column (by physical names, nested as
/// the schema nests them) `minValues`, `maxValues`, `nullCount`; partition columns left
/// out. `tight`: false when a deletion vector hides rows the bounds include.
pub(super) fn stats_json(
    rows: Option<u64>,
    columns: &[(String, ColumnStats)],
    schema: &Schema,
    physical: &HashMap<String, String>,
    skip: &[String],
    tight: bool,
) -> Option<String> {
    let rows = rows?;
    let (mut min, mut max, mut nulls) = (Map::new(), Map::new(), Map::new());
    for (path, stats) in columns {
        if skip.iter().any(|s| s == path) || schema.primitive_at(path).is_none() {
            continue;
        }
        let keys: Vec<String> = physical_path(path, physical);
        if let Some(v) = stats.lower.as_ref().and_then(stat_value) {
            insert(&mut min, &keys, v);
        }
        if let Some(v) = stats.upper.as_ref().and_then(stat_value) {
            insert(&mut max, &keys, v);
        }
        if let Some(n) = stats.null_count {
            insert(&mut nulls, &keys, json!(n));
        }
    }
    let mut out = Map::new();
    out.insert("numRecords".into(), json!(rows));
    out.insert("minValues".into(), Json::Object(min));
    out.insert("maxValues".into(), Json::Object(max));
    out.insert("nullCount".into(), Json::Object(nulls));
    if !tight {
        out.insert("tightBounds".into(), json!(false));
    }
    Some(Json::Object(out).to_string())
}

/// A dotted logical path's parts as physical names (`physical` maps dotted logical paths).
fn physical_path(path: &str, physical: &HashMap<String, String>) -> Vec<String> {
    let mut keys = Vec::new();
    let mut logical = String::new();
    for part in path.split('.') {
        if !logical.is_empty() {
            logical.push('.');
        }
        logical.push_str(part);
        keys.push(physical.get(&logical).cloned().unwrap_or(part.to_string()));
    }
    keys
}

fn insert(map: &mut Map<String, Json>, keys: &[String], v: Json) {
    match keys {
        [] => {}
        [last] => {
            map.insert(last.clone(), v);
        }
        [first, rest @ ..] => {
            let child = map
                .entry(first.clone())
                .or_insert_with(|| Json::Object(Map::new()));
            if let Json::Object(child) = child {
                insert(child, rest, v);
            }
        }
    }
}

const Z85: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Z85 text of `bytes`, zero-padded to a multiple of 4 (as delta-spark encodes inline
/// vectors; `sizeInBytes` keeps the true length).
pub(super) fn z85(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 5 / 4 + 5);
    for chunk in bytes.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut n = u32::from_be_bytes(word);
        let mut group = [0u8; 5];
        for slot in group.iter_mut().rev() {
            *slot = Z85[(n % 85) as usize];
            n /= 85;
        }
        out.extend(group.iter().map(|&b| b as char));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_delta_spells_them() {
        assert_eq!(decimal(-12345, 2), "-123.45");
        assert_eq!(decimal(5, 3), "0.005");
        assert_eq!(days(19000).unwrap(), "2022-01-08");
        let ts = PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: true,
        };
        assert_eq!(
            partition_text(&Value::Timestamp(1_500_000), &ts).unwrap(),
            "1970-01-01T00:00:01.500000Z"
        );
        assert_eq!(delta_path("p=a b/f.parquet"), "p=a%20b/f.parquet");
        assert_eq!(delta_path("/t/x y"), "file:///t/x%20y");
        // The Z85 spec's own example.
        assert_eq!(
            z85(&[0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]),
            "HelloWorld"
        );
    }
}
