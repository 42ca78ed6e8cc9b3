//! A typed scalar: partition values and column bounds.

/// One value, read in the type of the column (or partition field) it belongs to.
///
/// Temporal values are counts since the Unix epoch in the column's own unit:
/// `Date` days, `Time` microseconds of the day, `Timestamp` in the column's [`TimeUnit`].
/// A decimal is its unscaled integer; the scale comes from the column type.
///
/// [`TimeUnit`]: crate::TimeUnit
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A boolean.
    Boolean(bool),
    /// A 32-bit integer.
    Int(i32),
    /// A 64-bit integer.
    Long(i64),
    /// A 32-bit float.
    Float(f32),
    /// A 64-bit float.
    Double(f64),
    /// Unscaled decimal value.
    Decimal(i128),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since midnight.
    Time(i64),
    /// Units (of the column's precision) since 1970-01-01T00:00:00 (UTC for zoned columns).
    Timestamp(i64),
    /// UTF-8 text.
    String(String),
    /// Bytes (binary and fixed).
    Binary(Vec<u8>),
    /// A UUID in its 16 big-endian bytes.
    Uuid([u8; 16]),
}
