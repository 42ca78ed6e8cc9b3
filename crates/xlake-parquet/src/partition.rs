//! Hive-style partition paths (`year=2024/region=eu/part-0.parquet`) to typed values.

use percent_encoding::percent_decode_str;
use xlake_model::{PrimitiveType, Value};

use crate::error::ParquetError;

/// The null partition value Hive and Spark write.
const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// The `key=value` segments of a file's folder, decoded (`%2F` is `/`), in path order.
pub fn segments(path: &str) -> Vec<(String, Option<String>)> {
    let folder = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    folder
        .split('/')
        .filter_map(|segment| segment.split_once('='))
        .map(|(key, value)| {
            let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
            (key.to_string(), (value != HIVE_NULL).then_some(value))
        })
        .collect()
}

/// The type a partition column takes when the files do not hold it: `long` if every
/// value is an integer, else `string`.
pub fn infer_type<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> PrimitiveType {
    let all_integers = values
        .into_iter()
        .flatten()
        .all(|v| v.parse::<i64>().is_ok());
    if all_integers {
        PrimitiveType::Long
    } else {
        PrimitiveType::String
    }
}

/// A partition value in its column's type; `Err` names what does not parse.
pub fn typed(value: Option<&str>, ty: &PrimitiveType) -> Result<Option<Value>, ParquetError> {
    let Some(v) = value else {
        return Ok(None);
    };
    let bad = || format!("partition value {v:?} is not a {ty:?}");
    Ok(Some(match ty {
        PrimitiveType::String => Value::String(v.to_string()),
        PrimitiveType::Long => Value::Long(v.parse().map_err(|_| bad())?),
        PrimitiveType::Int => Value::Int(v.parse().map_err(|_| bad())?),
        PrimitiveType::Boolean => Value::Boolean(v.parse().map_err(|_| bad())?),
        PrimitiveType::Double => Value::Double(v.parse().map_err(|_| bad())?),
        PrimitiveType::Float => Value::Float(v.parse().map_err(|_| bad())?),
        other => {
            return Err(ParquetError::Refused(format!(
                "partition column of type {other:?} in a path"
            )))
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_hive_segments_decoded_with_nulls() {
        assert_eq!(
            segments("y=2024/r=a%2Fb/c=__HIVE_DEFAULT_PARTITION__/part-0.parquet"),
            vec![
                ("y".to_string(), Some("2024".to_string())),
                ("r".to_string(), Some("a/b".to_string())),
                ("c".to_string(), None),
            ]
        );
        assert!(segments("part-0.parquet").is_empty());
    }

    #[test]
    fn infers_long_or_string() {
        assert_eq!(
            infer_type([Some("1"), None, Some("-3")]),
            PrimitiveType::Long
        );
        assert_eq!(infer_type([Some("1"), Some("x")]), PrimitiveType::String);
        assert_eq!(
            typed(Some("7"), &PrimitiveType::Long).unwrap(),
            Some(Value::Long(7))
        );
        assert!(typed(Some("x"), &PrimitiveType::Long).is_err());
    }
}
