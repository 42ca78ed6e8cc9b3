//! Partition field names in a manifest's Avro schema. An Iceberg name may be any string,
//! an Avro name only `[A-Za-z_][A-Za-z0-9_]*`; Iceberg's Java and Python writers write a
//! partition field whose name is not one under an escaped name (Java's
//! `AvroSchemaUtil.makeCompatibleName`: a leading digit `d` becomes `_d`, any other
//! character not allowed `_x` and its code in upper-case hex, so `part key` is
//! `part_x20key` and `1st` is `_1st`), with the Iceberg name in an `iceberg-field-name`
//! property and the partition field's id in `field-id`; their readers resolve the fields
//! by id. Here the manifest reader matches the written fields to the spec's the same way
//! ([`WrittenField::names`]), and the manifest writer escapes names as they do
//! ([`avro_name`]; a letter outside ASCII escaped too, where Java and Python keep it, as
//! Avro's C and Rust parsers refuse it).

/// A field of the partition record of a manifest's Avro schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrittenField {
    /// The Avro name.
    pub(crate) name: String,
    /// Its Avro type's name (see `read::parse_partition`); empty where not read.
    pub(crate) ty: String,
    /// Its `field-id` property.
    pub(crate) id: Option<i32>,
    /// Its `iceberg-field-name` property.
    pub(crate) iceberg_name: Option<String>,
}

impl WrittenField {
    /// The field as written in the schema JSON `field`, with its type's name `ty`.
    pub(crate) fn of(field: &serde_json::Value, ty: String) -> Option<Self> {
        Some(Self {
            name: field.get("name")?.as_str()?.to_string(),
            ty,
            id: field
                .get("field-id")
                .and_then(serde_json::Value::as_i64)
                .and_then(|id| i32::try_from(id).ok()),
            iceberg_name: field
                .get("iceberg-field-name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
        })
    }

    /// Whether this is the written field of the spec's partition field `id` named `name`:
    /// by its field id where it has one (as Java and Python read it), else by its name,
    /// its `iceberg-field-name`, or the name's escaped form.
    pub(crate) fn names(&self, id: i32, name: &str) -> bool {
        match self.id {
            Some(written) => written == id,
            None => {
                self.name == name
                    || self.iceberg_name.as_deref() == Some(name)
                    || self.name == escaped(name, false)
                    || self.name == escaped(name, true)
            }
        }
    }
}

/// The fields of the partition record of the manifest schema `writer_schema` (JSON), read
/// with no check of the other fields; `None` where there is no such record.
pub(crate) fn partition_fields(writer_schema: &str) -> Option<Vec<WrittenField>> {
    let schema: serde_json::Value = serde_json::from_str(writer_schema).ok()?;
    let field = |record: &serde_json::Value, name: &str| -> Option<serde_json::Value> {
        let fields = record.get("fields")?.as_array()?;
        let found = fields
            .iter()
            .find(|f| f.get("name") == Some(&name.into()))?;
        found.get("type").cloned()
    };
    let data_file = field(&schema, "data_file")?;
    let partition = field(&data_file, "partition")?;
    partition
        .get("fields")?
        .as_array()?
        .iter()
        .map(|f| WrittenField::of(f, String::new()))
        .collect()
}

/// The Avro name the manifest writer gives a partition field named `name`: `name` when it
/// is an Avro name, else its escaped form (ASCII only; module docs). The Iceberg target
/// names its partition fields so already ([`crate::spec::partition::avro_safe`]); a
/// spec xlake did not name (a table's own) may not be.
pub(crate) fn avro_name(name: &str) -> String {
    crate::spec::partition::avro_safe(name)
}

/// `name` escaped as Iceberg's `makeCompatibleName` does (unchanged when it is a valid
/// name); with `ascii`, only ASCII letters are letters (as [`avro_name`]), else any
/// alphabetic character (as Java's `Character.isLetter` and Python's `str.isalpha`).
fn escaped(name: &str, ascii: bool) -> String {
    let letter = |c: char| match ascii {
        true => c.is_ascii_alphabetic(),
        false => c.is_alphabetic(),
    };
    let digit = |c: char| match ascii {
        true => c.is_ascii_digit(),
        false => c.is_numeric(),
    };
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let allowed = letter(c) || c == '_' || (i > 0 && digit(c));
        if allowed {
            out.push(c);
        } else if digit(c) {
            out.push('_');
            out.push(c);
        } else {
            out.push_str(&format!("_x{:X}", u32::from(c)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_as_iceberg_escapes_them() {
        // pyiceberg 0.12's `make_compatible_name` and Java's `AvroSchemaUtil`.
        for (name, avro) in [
            ("plain", "plain"),
            ("part key", "part_x20key"),
            ("1st", "_1st"),
            ("a-b", "a_x2Db"),
            ("a.b", "a_x2Eb"),
            ("_x", "_x"),
            ("x1", "x1"),
        ] {
            assert_eq!(escaped(name, false), avro, "{name}");
            assert_eq!(avro_name(name), avro, "{name}");
        }
        // Letters outside ASCII: kept by Java and Python, escaped by the writer here.
        assert_eq!(escaped("ünï", false), "ünï");
        assert_eq!(avro_name("ünï"), "_xFCn_xEF");
        assert_eq!(avro_name("表"), "_x8868");
    }

    #[test]
    fn written_fields_name_the_spec_by_id_else_by_name() {
        let json = |f: &str| serde_json::from_str::<serde_json::Value>(f).unwrap();
        let by_id = WrittenField::of(
            &json(r#"{"name":"part_x20key","field-id":1000,"iceberg-field-name":"part key"}"#),
            String::new(),
        )
        .unwrap();
        assert!(by_id.names(1000, "part key"));
        assert!(!by_id.names(1001, "part key"));
        let no_id = |f: &str| WrittenField::of(&json(f), String::new()).unwrap();
        assert!(no_id(r#"{"name":"part_x20key"}"#).names(7, "part key"));
        assert!(no_id(r#"{"name":"k","iceberg-field-name":"part key"}"#).names(7, "part key"));
        assert!(no_id(r#"{"name":"_xFCn_xEF"}"#).names(7, "ünï"));
        assert!(no_id(r#"{"name":"ünï"}"#).names(7, "ünï"));
        assert!(!no_id(r#"{"name":"part_key"}"#).names(7, "part key"));
    }
}
