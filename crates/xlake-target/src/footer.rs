//! Record counts and column statistics read from a Parquet footer, for data files whose
//! source recorded none (every target's statistics: Iceberg's metrics, Delta's `stats`). Only the footer is fetched, never the data pages.
//!
//! Bounds are kept only where they are safe: a row group without a bound (other than an
//! all-null one) drops the file's bound; legacy signed min/max of byte arrays, INT96 and
//! unsigned integers are skipped; a bound converted to a coarser unit is rounded outwards.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use parquet::basic::{LogicalType, TimeUnit as ParquetUnit, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::ColumnDescriptor;
use xlake_model::{ColumnStats, PrimitiveType, Schema, TimeUnit, Value};

pub use xlake_storage::footer::read_footer;

/// What a footer says about a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FooterStats {
    /// Rows in the file.
    pub record_count: u64,
    /// Stats of the leaf columns found in the schema, keyed by dotted path.
    pub columns: BTreeMap<String, ColumnStats>,
}

/// Record count and column stats of a decoded footer, for the leaf columns of `schema`.
pub fn footer_stats(meta: &ParquetMetaData, schema: &Schema) -> FooterStats {
    let record_count = meta
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows().max(0) as u64)
        .sum();
    let mut columns = BTreeMap::new();
    let descr = meta.file_metadata().schema_descr();
    for (i, col) in descr.columns().iter().enumerate() {
        if col.max_rep_level() > 0 {
            continue;
        }
        let path = col.path().parts().join(".");
        let Some(ty) = schema.primitive_at(&path) else {
            continue;
        };
        let mut acc = Accumulator::default();
        for rg in meta.row_groups() {
            acc.add(rg.column(i), col, ty);
        }
        columns.insert(path, acc.finish());
    }
    FooterStats {
        record_count,
        columns,
    }
}

#[derive(Default)]
struct Accumulator {
    value_count: Option<u64>,
    null_count: Option<u64>,
    lower: Option<Value>,
    upper: Option<Value>,
    bounds_valid: bool,
    started: bool,
}

impl Accumulator {
    fn add(
        &mut self,
        chunk: &parquet::file::metadata::ColumnChunkMetaData,
        col: &ColumnDescriptor,
        ty: &PrimitiveType,
    ) {
        if !self.started {
            self.started = true;
            self.bounds_valid = true;
            self.value_count = Some(0);
            self.null_count = Some(0);
        }
        let values = chunk.num_values().max(0) as u64;
        self.value_count = self.value_count.map(|v| v + values);
        let Some(stats) = chunk.statistics() else {
            self.null_count = None;
            self.bounds_valid = false;
            return;
        };
        let nulls = stats.null_count_opt();
        self.null_count = match (self.null_count, nulls) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if nulls == Some(values) {
            return; // all null: no bound needed from this row group
        }
        let decoded = if stats.is_min_max_deprecated() && !stats.is_min_max_backwards_compatible() {
            None
        } else {
            stats
                .min_bytes_opt()
                .zip(stats.max_bytes_opt())
                .and_then(|(lo, hi)| {
                    Some((decode(lo, col, ty, false)?, decode(hi, col, ty, true)?))
                })
        };
        let Some((lo, hi)) = decoded else {
            self.bounds_valid = false;
            return;
        };
        self.lower = Some(match self.lower.take() {
            Some(cur) if compare(&cur, &lo) != Some(Ordering::Greater) => cur,
            _ => lo,
        });
        self.upper = Some(match self.upper.take() {
            Some(cur) if compare(&cur, &hi) != Some(Ordering::Less) => cur,
            _ => hi,
        });
    }

    fn finish(self) -> ColumnStats {
        let (lower, upper) = if self.bounds_valid {
            (self.lower, self.upper)
        } else {
            (None, None)
        };
        ColumnStats {
            value_count: self.value_count,
            null_count: self.null_count,
            nan_count: None,
            lower,
            upper,
        }
    }
}

/// Order of two values of the same variant; `None` for mixed variants or NaN.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Boolean(a), Value::Boolean(b)) => Some(a.cmp(b)),
        (Value::Int(a), Value::Int(b)) | (Value::Date(a), Value::Date(b)) => Some(a.cmp(b)),
        (Value::Long(a), Value::Long(b))
        | (Value::Time(a), Value::Time(b))
        | (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
        (Value::Decimal(a), Value::Decimal(b)) => Some(a.cmp(b)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::String(a), Value::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (Value::Binary(a), Value::Binary(b)) => Some(a.cmp(b)),
        (Value::Uuid(a), Value::Uuid(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

fn le<const N: usize>(b: &[u8]) -> Option<[u8; N]> {
    b.try_into().ok()
}

fn parquet_unit(col: &ColumnDescriptor) -> Option<TimeUnit> {
    use parquet::basic::ConvertedType;
    match col.logical_type_ref() {
        Some(LogicalType::Timestamp { unit, .. }) | Some(LogicalType::Time { unit, .. }) => {
            Some(match unit {
                ParquetUnit::MILLIS => TimeUnit::Millis,
                ParquetUnit::MICROS => TimeUnit::Micros,
                ParquetUnit::NANOS => TimeUnit::Nanos,
            })
        }
        _ => match col.converted_type() {
            ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIME_MILLIS => Some(TimeUnit::Millis),
            ConvertedType::TIMESTAMP_MICROS | ConvertedType::TIME_MICROS => Some(TimeUnit::Micros),
            _ => None,
        },
    }
}

fn per_second(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Millis => 1_000,
        TimeUnit::Micros => 1_000_000,
        TimeUnit::Nanos => 1_000_000_000,
    }
}

/// Rescale `v` from one unit to another, rounding outwards (down for a lower bound).
fn rescale(v: i64, from: TimeUnit, to: TimeUnit, upper: bool) -> Option<i64> {
    let (f, t) = (per_second(from), per_second(to));
    if f == t {
        Some(v)
    } else if f < t {
        v.checked_mul(t / f)
    } else {
        let d = f / t;
        Some(if upper {
            v.div_euclid(d) + i64::from(v.rem_euclid(d) != 0)
        } else {
            v.div_euclid(d)
        })
    }
}

fn is_unsigned(col: &ColumnDescriptor) -> bool {
    matches!(
        col.logical_type_ref(),
        Some(LogicalType::Integer {
            is_signed: false,
            ..
        })
    )
}

fn decimal_scale(col: &ColumnDescriptor) -> Option<i32> {
    match col.logical_type_ref() {
        Some(LogicalType::Decimal { scale, .. }) => Some(*scale),
        _ => Some(col.type_scale()),
    }
}

fn be_i128(b: &[u8]) -> Option<i128> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let fill = if b[0] & 0x80 != 0 { 0xFF } else { 0x00 };
    let mut buf = [fill; 16];
    buf[16 - b.len()..].copy_from_slice(b);
    Some(i128::from_be_bytes(buf))
}

/// Decode a plain-encoded statistic into a value of the column's neutral type.
fn decode(b: &[u8], col: &ColumnDescriptor, ty: &PrimitiveType, upper: bool) -> Option<Value> {
    let physical = col.physical_type();
    if is_unsigned(col) {
        return None;
    }
    let int32 = || le::<4>(b).map(i32::from_le_bytes);
    let int64 = || le::<8>(b).map(i64::from_le_bytes);
    let value = match (ty, physical) {
        (PrimitiveType::Boolean, PhysicalType::BOOLEAN) => Value::Boolean(*b.first()? != 0),
        (PrimitiveType::Int, PhysicalType::INT32) => Value::Int(int32()?),
        (PrimitiveType::Long, PhysicalType::INT32) => Value::Long(i64::from(int32()?)),
        (PrimitiveType::Long, PhysicalType::INT64) => Value::Long(int64()?),
        (PrimitiveType::Float, PhysicalType::FLOAT) => {
            Value::Float(f32::from_le_bytes(le::<4>(b)?))
        }
        (PrimitiveType::Double, PhysicalType::FLOAT) => {
            Value::Double(f64::from(f32::from_le_bytes(le::<4>(b)?)))
        }
        (PrimitiveType::Double, PhysicalType::DOUBLE) => {
            Value::Double(f64::from_le_bytes(le::<8>(b)?))
        }
        (PrimitiveType::Decimal { scale, .. }, _) => {
            if decimal_scale(col)? != i32::from(*scale) {
                return None;
            }
            Value::Decimal(match physical {
                PhysicalType::INT32 => i128::from(int32()?),
                PhysicalType::INT64 => i128::from(int64()?),
                PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => be_i128(b)?,
                _ => return None,
            })
        }
        (PrimitiveType::Date, PhysicalType::INT32) => Value::Date(int32()?),
        (PrimitiveType::Time, PhysicalType::INT32) => Value::Time(rescale(
            i64::from(int32()?),
            TimeUnit::Millis,
            TimeUnit::Micros,
            upper,
        )?),
        (PrimitiveType::Time, PhysicalType::INT64) => Value::Time(rescale(
            int64()?,
            parquet_unit(col)?,
            TimeUnit::Micros,
            upper,
        )?),
        (PrimitiveType::Timestamp { unit, .. }, PhysicalType::INT64) => {
            Value::Timestamp(rescale(int64()?, parquet_unit(col)?, *unit, upper)?)
        }
        (PrimitiveType::String, PhysicalType::BYTE_ARRAY) => {
            Value::String(String::from_utf8(b.to_vec()).ok()?)
        }
        (PrimitiveType::Binary, PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY) => {
            Value::Binary(b.to_vec())
        }
        (PrimitiveType::Fixed(_), PhysicalType::FIXED_LEN_BYTE_ARRAY) => Value::Binary(b.to_vec()),
        (PrimitiveType::Uuid, PhysicalType::FIXED_LEN_BYTE_ARRAY) => {
            Value::Uuid(b.try_into().ok()?)
        }
        _ => return None,
    };
    match value {
        Value::Float(f) if f.is_nan() => None,
        Value::Double(f) if f.is_nan() => None,
        v => Some(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescaling_rounds_outwards() {
        assert_eq!(
            rescale(1_500, TimeUnit::Micros, TimeUnit::Millis, false),
            Some(1)
        );
        assert_eq!(
            rescale(1_500, TimeUnit::Micros, TimeUnit::Millis, true),
            Some(2)
        );
        assert_eq!(
            rescale(-1_500, TimeUnit::Micros, TimeUnit::Millis, false),
            Some(-2)
        );
        assert_eq!(
            rescale(-1_500, TimeUnit::Micros, TimeUnit::Millis, true),
            Some(-1)
        );
        assert_eq!(
            rescale(2_000, TimeUnit::Micros, TimeUnit::Millis, true),
            Some(2)
        );
        assert_eq!(
            rescale(3, TimeUnit::Millis, TimeUnit::Micros, true),
            Some(3_000)
        );
    }

    #[test]
    fn big_endian_decimals_sign_extend() {
        assert_eq!(be_i128(&[0xFF]), Some(-1));
        assert_eq!(be_i128(&[0x00, 0x80]), Some(128));
        assert_eq!(be_i128(&[]), None);
    }
}
