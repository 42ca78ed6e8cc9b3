//! Partition spec: how the table groups files by derived values.

/// A function from a source column value to a partition value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// The value itself.
    Identity,
    /// Years since 1970.
    Year,
    /// Months since 1970-01.
    Month,
    /// Days since 1970-01-01 (a date).
    Day,
    /// Hours since 1970-01-01T00:00.
    Hour,
    /// Murmur3 hash modulo N.
    Bucket(u32),
    /// Value truncated to width W.
    Truncate(u32),
}

/// One partition field: `transform(source)` named `name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionField {
    /// Dotted path of the source column.
    pub source: String,
    /// Name of the partition field.
    pub name: String,
    /// Transform applied to the source column.
    pub transform: Transform,
}

impl PartitionField {
    /// `transform(source)` named `name`.
    pub fn new(source: impl Into<String>, name: impl Into<String>, transform: Transform) -> Self {
        Self {
            source: source.into(),
            name: name.into(),
            transform,
        }
    }

    /// Identity partition on a column, named like it.
    pub fn identity(source: impl Into<String>) -> Self {
        let source = source.into();
        Self::new(source.clone(), source, Transform::Identity)
    }
}

/// The partition fields of a table; no fields means unpartitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PartitionSpec {
    /// Fields in order; a data file's partition tuple follows this order.
    pub fields: Vec<PartitionField>,
}

impl PartitionSpec {
    /// The unpartitioned spec.
    pub fn unpartitioned() -> Self {
        Self::default()
    }

    /// A spec of these fields.
    pub fn new(fields: Vec<PartitionField>) -> Self {
        Self { fields }
    }

    /// True when the table has no partition fields.
    pub fn is_unpartitioned(&self) -> bool {
        self.fields.is_empty()
    }
}
