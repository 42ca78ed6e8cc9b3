//! Neutral values to Iceberg values: partition tuples and the single-value binary
//! serialisation of column bounds (the encoding itself is iceberg-rust's `Datum::to_bytes`).

use iceberg::spec::{Datum, PrimitiveType as IcebergPrimitive};
use xlake_model::{PrimitiveType, TimeUnit, Value};

use crate::spec::error::CodecError;

/// Bounds of strings and binaries are cut to this many characters or bytes, as Iceberg's
/// default metrics mode `truncate(16)` does.
pub const BOUND_TRUNCATE_LENGTH: usize = 16;

/// The Iceberg type of a neutral leaf type, or why there is none. Nanosecond timestamps
/// map to v3's `timestamp_ns`/`timestamptz_ns`; a v2 table refuses them before this
/// (`crate::ops::v3::refuse_v3_types`).
pub fn iceberg_primitive(p: &PrimitiveType) -> Result<IcebergPrimitive, CodecError> {
    Ok(match p {
        PrimitiveType::Boolean => IcebergPrimitive::Boolean,
        PrimitiveType::Int => IcebergPrimitive::Int,
        PrimitiveType::Long => IcebergPrimitive::Long,
        PrimitiveType::Float => IcebergPrimitive::Float,
        PrimitiveType::Double => IcebergPrimitive::Double,
        PrimitiveType::Decimal { precision, scale } => {
            if *precision == 0 || *precision > 38 || scale > precision {
                return Err(format!(
                    "decimal({precision},{scale}) is outside Iceberg's decimal range"
                )
                .into());
            }
            IcebergPrimitive::Decimal {
                precision: u32::from(*precision),
                scale: u32::from(*scale),
            }
        }
        PrimitiveType::Date => IcebergPrimitive::Date,
        PrimitiveType::Time => IcebergPrimitive::Time,
        PrimitiveType::Timestamp {
            unit: TimeUnit::Nanos,
            with_zone,
        } => {
            if *with_zone {
                IcebergPrimitive::TimestamptzNs
            } else {
                IcebergPrimitive::TimestampNs
            }
        }
        PrimitiveType::Timestamp {
            with_zone: false, ..
        } => IcebergPrimitive::Timestamp,
        PrimitiveType::Timestamp {
            with_zone: true, ..
        } => IcebergPrimitive::Timestamptz,
        PrimitiveType::String => IcebergPrimitive::String,
        PrimitiveType::Binary => IcebergPrimitive::Binary,
        PrimitiveType::Fixed(n) => IcebergPrimitive::Fixed(u64::from(*n)),
        PrimitiveType::Uuid => IcebergPrimitive::Uuid,
    })
}

/// Microseconds from a count in `unit`.
fn to_micros(v: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Millis => v.checked_mul(1000),
        TimeUnit::Micros => Some(v),
        TimeUnit::Nanos => Some(v.div_euclid(1000)),
    }
}

/// Convert a value of a column of neutral type `source` into an Iceberg datum of type
/// `target` (the column's Iceberg type, or a transform's result type).
pub fn to_datum(
    value: &Value,
    source: &PrimitiveType,
    target: &IcebergPrimitive,
) -> Result<Datum, CodecError> {
    let mismatch = || format!("value {value:?} does not fit Iceberg type {target}");
    Ok(match (value, target) {
        (Value::Boolean(b), IcebergPrimitive::Boolean) => Datum::bool(*b),
        (Value::Int(i), IcebergPrimitive::Int) => Datum::int(*i),
        (Value::Int(i), IcebergPrimitive::Long) => Datum::long(i64::from(*i)),
        (Value::Int(i), IcebergPrimitive::Date) => Datum::date(*i),
        (Value::Long(i), IcebergPrimitive::Long) => Datum::long(*i),
        (Value::Long(i), IcebergPrimitive::Int) => {
            Datum::int(i32::try_from(*i).map_err(|_| mismatch())?)
        }
        (Value::Float(f), IcebergPrimitive::Float) => Datum::float(*f),
        (Value::Float(f), IcebergPrimitive::Double) => Datum::double(f64::from(*f)),
        (Value::Double(f), IcebergPrimitive::Double) => Datum::double(*f),
        (Value::Decimal(unscaled), IcebergPrimitive::Decimal { .. }) => {
            Datum::try_from_bytes(&decimal_bytes(*unscaled), target.clone())
                .map_err(CodecError::library)?
        }
        (Value::Date(d), IcebergPrimitive::Date) => Datum::date(*d),
        (Value::Date(d), IcebergPrimitive::Int) => Datum::int(*d),
        (Value::Time(us), IcebergPrimitive::Time) => {
            Datum::time_micros(*us).map_err(CodecError::library)?
        }
        (Value::Timestamp(v), IcebergPrimitive::Timestamp | IcebergPrimitive::Timestamptz) => {
            let unit = match source {
                PrimitiveType::Timestamp { unit, .. } => *unit,
                _ => TimeUnit::Micros,
            };
            let micros = to_micros(*v, unit).ok_or_else(mismatch)?;
            if *target == IcebergPrimitive::Timestamp {
                Datum::timestamp_micros(micros)
            } else {
                Datum::timestamptz_micros(micros)
            }
        }
        (Value::Timestamp(v), IcebergPrimitive::TimestampNs | IcebergPrimitive::TimestamptzNs) => {
            let nanos = match source {
                PrimitiveType::Timestamp { unit, .. } => match unit {
                    TimeUnit::Millis => v.checked_mul(1_000_000),
                    TimeUnit::Micros => v.checked_mul(1_000),
                    TimeUnit::Nanos => Some(*v),
                },
                _ => None,
            }
            .ok_or_else(mismatch)?;
            if *target == IcebergPrimitive::TimestampNs {
                Datum::timestamp_nanos(nanos)
            } else {
                Datum::timestamptz_nanos(nanos)
            }
        }
        (Value::String(s), IcebergPrimitive::String) => Datum::string(s),
        (Value::String(s), IcebergPrimitive::Uuid) => {
            Datum::uuid_from_str(s).map_err(CodecError::library)?
        }
        (Value::Binary(b), IcebergPrimitive::Binary) => Datum::binary(b.iter().copied()),
        (Value::Binary(b), IcebergPrimitive::Fixed(n)) if b.len() as u64 == *n => {
            Datum::fixed(b.iter().copied())
        }
        (Value::Uuid(b), IcebergPrimitive::Uuid) => Datum::uuid(uuid::Uuid::from_bytes(*b)),
        _ => return Err(mismatch().into()),
    })
}

/// Minimal big-endian two's-complement bytes of an unscaled decimal (Iceberg's encoding).
fn decimal_bytes(unscaled: i128) -> Vec<u8> {
    let bytes = unscaled.to_be_bytes();
    let mut start = 0;
    while start < bytes.len() - 1 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

/// A lower bound no larger than `value`, cut to [`BOUND_TRUNCATE_LENGTH`].
pub fn truncate_lower(value: Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > BOUND_TRUNCATE_LENGTH => {
            Value::String(s.chars().take(BOUND_TRUNCATE_LENGTH).collect())
        }
        Value::Binary(b) if b.len() > BOUND_TRUNCATE_LENGTH => {
            Value::Binary(b[..BOUND_TRUNCATE_LENGTH].to_vec())
        }
        other => other,
    }
}

/// An upper bound no smaller than `value`, cut to [`BOUND_TRUNCATE_LENGTH`]; `None` when
/// no shorter upper bound exists (all characters or bytes at their maximum).
pub fn truncate_upper(value: Value) -> Option<Value> {
    match value {
        Value::String(s) if s.chars().count() > BOUND_TRUNCATE_LENGTH => {
            let mut chars: Vec<char> = s.chars().take(BOUND_TRUNCATE_LENGTH).collect();
            while let Some(last) = chars.pop() {
                let mut next = u32::from(last) + 1;
                if (0xD800..=0xDFFF).contains(&next) {
                    next = 0xE000;
                }
                if let Some(c) = char::from_u32(next) {
                    chars.push(c);
                    return Some(Value::String(chars.into_iter().collect()));
                }
            }
            None
        }
        Value::Binary(b) if b.len() > BOUND_TRUNCATE_LENGTH => {
            let mut bytes = b[..BOUND_TRUNCATE_LENGTH].to_vec();
            while let Some(last) = bytes.pop() {
                if last < 0xFF {
                    bytes.push(last + 1);
                    return Some(Value::Binary(bytes));
                }
            }
            None
        }
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(value: Value, source: PrimitiveType) -> Vec<u8> {
        let target = iceberg_primitive(&source).unwrap();
        to_datum(&value, &source, &target)
            .unwrap()
            .to_bytes()
            .unwrap()
            .to_vec()
    }

    /// Expected bytes from the spec's "Binary single-value serialization" table.
    #[test]
    fn single_value_serialisation_per_type() {
        assert_eq!(bytes(Value::Boolean(true), PrimitiveType::Boolean), vec![1]);
        assert_eq!(
            bytes(Value::Boolean(false), PrimitiveType::Boolean),
            vec![0]
        );
        assert_eq!(
            bytes(Value::Int(-2), PrimitiveType::Int),
            (-2i32).to_le_bytes()
        );
        assert_eq!(
            bytes(Value::Long(1 << 40), PrimitiveType::Long),
            (1i64 << 40).to_le_bytes()
        );
        assert_eq!(
            bytes(Value::Int(7), PrimitiveType::Long),
            7i64.to_le_bytes(),
            "int promoted"
        );
        assert_eq!(
            bytes(Value::Float(1.5), PrimitiveType::Float),
            1.5f32.to_le_bytes()
        );
        assert_eq!(
            bytes(Value::Double(-0.25), PrimitiveType::Double),
            (-0.25f64).to_le_bytes()
        );
        let dec = PrimitiveType::Decimal {
            precision: 10,
            scale: 2,
        };
        assert_eq!(bytes(Value::Decimal(12345), dec.clone()), vec![0x30, 0x39]);
        assert_eq!(bytes(Value::Decimal(-1), dec.clone()), vec![0xFF]);
        assert_eq!(bytes(Value::Decimal(128), dec.clone()), vec![0x00, 0x80]);
        assert_eq!(bytes(Value::Decimal(-129), dec), vec![0xFF, 0x7F]);
        assert_eq!(
            bytes(Value::Date(19000), PrimitiveType::Date),
            19000i32.to_le_bytes()
        );
        assert_eq!(
            bytes(Value::Time(3_600_000_000), PrimitiveType::Time),
            3_600_000_000i64.to_le_bytes()
        );
        let ts_ms = PrimitiveType::Timestamp {
            unit: TimeUnit::Millis,
            with_zone: false,
        };
        assert_eq!(
            bytes(Value::Timestamp(1_700_000_000_123), ts_ms),
            1_700_000_000_123_000i64.to_le_bytes(),
            "millis become micros"
        );
        let tstz = PrimitiveType::Timestamp {
            unit: TimeUnit::Micros,
            with_zone: true,
        };
        assert_eq!(bytes(Value::Timestamp(-5), tstz), (-5i64).to_le_bytes());
        assert_eq!(
            bytes(Value::String("héllo".into()), PrimitiveType::String),
            "héllo".as_bytes()
        );
        assert_eq!(
            bytes(Value::Binary(vec![0, 255]), PrimitiveType::Binary),
            vec![0, 255]
        );
        assert_eq!(
            bytes(Value::Binary(vec![1, 2, 3]), PrimitiveType::Fixed(3)),
            vec![1, 2, 3]
        );
        let id = [0x12u8; 16];
        assert_eq!(bytes(Value::Uuid(id), PrimitiveType::Uuid), id.to_vec());
    }

    #[test]
    fn unrepresentable_values_are_errors() {
        let nanos = PrimitiveType::Timestamp {
            unit: TimeUnit::Nanos,
            with_zone: false,
        };
        assert_eq!(
            iceberg_primitive(&nanos).unwrap(),
            IcebergPrimitive::TimestampNs
        );
        assert_eq!(
            to_datum(
                &Value::Timestamp(1_700_000_000_123_456_789),
                &nanos,
                &IcebergPrimitive::TimestampNs
            )
            .unwrap(),
            Datum::timestamp_nanos(1_700_000_000_123_456_789)
        );
        let target = IcebergPrimitive::Fixed(4);
        assert!(to_datum(&Value::Binary(vec![1]), &PrimitiveType::Fixed(4), &target).is_err());
        assert!(to_datum(
            &Value::String("x".into()),
            &PrimitiveType::Int,
            &IcebergPrimitive::Int
        )
        .is_err());
        let bad = PrimitiveType::Decimal {
            precision: 39,
            scale: 0,
        };
        assert!(iceberg_primitive(&bad).is_err());
    }

    #[test]
    fn truncated_bounds_only_widen() {
        let long = "abcdefghijklmnopqrstuvwxyz".to_string();
        let lower = truncate_lower(Value::String(long.clone()));
        let upper = truncate_upper(Value::String(long.clone())).unwrap();
        let (Value::String(l), Value::String(u)) = (lower, upper) else {
            panic!()
        };
        assert!(l.as_str() <= long.as_str() && u.as_str() >= long.as_str());
        assert_eq!(u, "abcdefghijklmnoq");
        let maxed = Value::Binary(vec![0xFF; 20]);
        assert_eq!(truncate_upper(maxed), None, "no shorter upper bound exists");
        let mut mixed = vec![0x01; 20];
        mixed[15] = 0xFF;
        assert_eq!(
            truncate_upper(Value::Binary(mixed)),
            Some(Value::Binary([vec![0x01; 14], vec![0x02]].concat()))
        );
        let short = Value::String("short".into());
        assert_eq!(truncate_upper(short.clone()), Some(short));
    }
}
