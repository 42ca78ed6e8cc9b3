//! Table schema: named, nested, nullable columns.

/// Precision of a time or timestamp column as the source stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

/// A leaf type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PrimitiveType {
    /// true / false.
    Boolean,
    /// 32-bit signed integer (also used for 8- and 16-bit source integers).
    Int,
    /// 64-bit signed integer.
    Long,
    /// 32-bit IEEE 754 float.
    Float,
    /// 64-bit IEEE 754 float.
    Double,
    /// Fixed-point decimal with `precision` digits, `scale` of them after the point.
    Decimal {
        /// Total number of digits (1..=38).
        precision: u8,
        /// Digits after the decimal point.
        scale: u8,
    },
    /// Calendar date without time zone.
    Date,
    /// Time of day without date or zone.
    Time,
    /// Timestamp; `with_zone` means stored as UTC instants (Iceberg `timestamptz`).
    Timestamp {
        /// Precision the source stores.
        unit: TimeUnit,
        /// True for an instant (UTC adjusted), false for a local date-time.
        with_zone: bool,
    },
    /// UTF-8 text.
    String,
    /// Variable-length bytes.
    Binary,
    /// Bytes of exactly this length.
    Fixed(u32),
    /// 16-byte UUID.
    Uuid,
}

/// A column type: a leaf or a nested type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataType {
    /// A leaf.
    Primitive(PrimitiveType),
    /// A record of named fields.
    Struct(Vec<Field>),
    /// A list; the field describes the element (its name is ignored).
    List(Box<Field>),
    /// A map; keys are never null.
    Map {
        /// The key field (its name is ignored).
        key: Box<Field>,
        /// The value field (its name is ignored).
        value: Box<Field>,
    },
}

/// A named column or nested field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    /// Name as the source spells it.
    pub name: String,
    /// Type of the values.
    pub data_type: DataType,
    /// Whether null is allowed.
    pub nullable: bool,
    /// A field id the source already assigned (Delta column mapping `id` mode); targets may
    /// keep their own ids otherwise.
    pub id: Option<i32>,
    /// Column comment.
    pub doc: Option<String>,
    /// Other names the column has inside data files (Delta column mapping's physical name;
    /// with [`ChangeSet::name_mapped`](crate::ChangeSet::name_mapped), every name the
    /// source's name mapping gives the field id, its own included where the mapping has it).
    pub aliases: Vec<String>,
}

impl Field {
    /// A field without id or doc.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        Self {
            name: name.into(),
            data_type,
            nullable,
            id: None,
            doc: None,
            aliases: Vec::new(),
        }
    }

    /// A nullable leaf field.
    pub fn optional(name: impl Into<String>, primitive: PrimitiveType) -> Self {
        Self::new(name, DataType::Primitive(primitive), true)
    }

    /// A non-nullable leaf field.
    pub fn required(name: impl Into<String>, primitive: PrimitiveType) -> Self {
        Self::new(name, DataType::Primitive(primitive), false)
    }

    /// The same field with a doc string.
    pub fn with_doc(mut self, doc: impl Into<String>) -> Self {
        self.doc = Some(doc.into());
        self
    }
}

/// The columns of a table, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Schema {
    /// Top-level columns.
    pub fields: Vec<Field>,
}

impl Schema {
    /// A schema of these top-level fields.
    pub fn new(fields: Vec<Field>) -> Self {
        Self { fields }
    }

    /// The top-level field of this name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The leaf type at a dotted path of struct fields (`"a.b.c"`), if there is one.
    pub fn primitive_at(&self, path: &str) -> Option<&PrimitiveType> {
        let mut fields = &self.fields;
        let mut parts = path.split('.').peekable();
        while let Some(part) = parts.next() {
            let field = fields.iter().find(|f| f.name == part)?;
            match (&field.data_type, parts.peek()) {
                (DataType::Primitive(p), None) => return Some(p),
                (DataType::Struct(children), Some(_)) => fields = children,
                _ => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_leaves_through_structs() {
        let schema = Schema::new(vec![
            Field::required("id", PrimitiveType::Long),
            Field::new(
                "s",
                DataType::Struct(vec![Field::optional("x", PrimitiveType::String)]),
                true,
            ),
        ]);
        assert_eq!(schema.primitive_at("id"), Some(&PrimitiveType::Long));
        assert_eq!(schema.primitive_at("s.x"), Some(&PrimitiveType::String));
        assert_eq!(schema.primitive_at("s"), None);
        assert_eq!(schema.primitive_at("id.x"), None);
        assert_eq!(schema.primitive_at("nope"), None);
    }
}
