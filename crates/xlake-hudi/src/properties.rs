//! `.hoodie/hoodie.properties`: the table's configuration.

use crate::error::Reason;
use std::collections::HashMap;

/// Copy-on-write or merge-on-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableType {
    /// Base files only.
    CopyOnWrite,
    /// Base files plus log files merged at read time.
    MergeOnRead,
}

/// How partition paths are derived from records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyGenerator {
    /// No partitioning.
    NonPartitioned,
    /// One or more fields' values, as they are (simple, complex, custom without timestamps).
    Fields,
    /// A timestamp-based generator: the path is a formatted time, not the field's value.
    Timestamp,
}

/// The parts of `hoodie.properties` xlake needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// `hoodie.table.name`.
    pub name: String,
    /// `hoodie.table.version` (6, 8 or 9).
    pub version: u32,
    /// `hoodie.table.type`.
    pub table_type: TableType,
    /// `hoodie.table.partition.fields`, without `:type` suffixes.
    pub partition_fields: Vec<String>,
    /// Kind of key generator.
    pub key_generator: KeyGenerator,
    /// `hoodie.datasource.write.hive_style_partitioning`.
    pub hive_style: bool,
    /// `hoodie.datasource.write.partitionpath.urlencode`.
    pub url_encoded: bool,
    /// `hoodie.populate.meta.fields` (default true): files carry the `_hoodie_*` columns.
    pub meta_fields: bool,
    /// `hoodie.table.create.schema`, an Avro schema, if recorded.
    pub create_schema: Option<String>,
    /// Folder of the active timeline, relative to the table root.
    pub timeline_dir: String,
    /// Folder of archived instants, relative to the table root.
    pub archive_dir: String,
    /// `hoodie.bootstrap.base.path`: the table was bootstrapped from existing files.
    pub bootstrapped: bool,
    /// `hoodie.table.format` when it names a pluggable table format (`xlake`, XTable's
    /// `ICEBERG`), not Hudi's own `native`: its writers promise an Iceberg snapshot per
    /// instant, written in the commit path.
    pub table_format: Option<String>,
    /// `hoodie.table.timeline.timezone` is `UTC`: instant times never go back with the
    /// clock (Hudi's default, `LOCAL`, repeats an hour when summer time ends).
    pub utc_instants: bool,
}

/// Parse Java properties text (`key=value`, `#` comments, `\` escapes).
pub fn parse_properties(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            let c = if c == '\\' {
                match chars.next() {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some(other) => other,
                    None => break,
                }
            } else if !in_value && (c == '=' || c == ':') {
                in_value = true;
                continue;
            } else {
                c
            };
            if in_value {
                value.push(c);
            } else {
                key.push(c);
            }
        }
        out.insert(key.trim().to_string(), value.trim_start().to_string());
    }
    out
}

impl TableConfig {
    /// Read the configuration from parsed properties.
    pub fn from_properties(props: &HashMap<String, String>) -> Result<Self, Reason> {
        let get = |k: &str| props.get(k).map(String::as_str);
        let flag =
            |k: &str, default: bool| get(k).map_or(default, |v| v.eq_ignore_ascii_case("true"));
        let version = table_version(props)?;
        let table_type = match get("hoodie.table.type").unwrap_or("COPY_ON_WRITE") {
            "COPY_ON_WRITE" => TableType::CopyOnWrite,
            "MERGE_ON_READ" => TableType::MergeOnRead,
            other => return Err(format!("unknown hoodie.table.type {other}").into()),
        };
        let (key_generator, partition_fields) = partitioning(props);
        let (timeline_dir, archive_dir) = timeline_dirs(props, version);
        Ok(Self {
            name: get("hoodie.table.name").unwrap_or("").to_string(),
            version,
            table_type,
            partition_fields,
            key_generator,
            hive_style: flag("hoodie.datasource.write.hive_style_partitioning", false),
            url_encoded: flag("hoodie.datasource.write.partitionpath.urlencode", false),
            meta_fields: flag("hoodie.populate.meta.fields", true),
            create_schema: get("hoodie.table.create.schema").map(String::from),
            timeline_dir,
            archive_dir,
            bootstrapped: get("hoodie.bootstrap.base.path").is_some_and(|p| !p.is_empty()),
            table_format: get("hoodie.table.format")
                .map(str::trim)
                .filter(|f| !f.is_empty() && !f.eq_ignore_ascii_case("native"))
                .map(String::from),
            utc_instants: get("hoodie.table.timeline.timezone")
                .is_some_and(|z| z.trim().eq_ignore_ascii_case("UTC")),
        })
    }
}

/// `hoodie.table.version`, one of those xlake reads (6, 8, 9).
fn table_version(props: &HashMap<String, String>) -> Result<u32, Reason> {
    let version = props
        .get("hoodie.table.version")
        .ok_or("hoodie.table.version is missing")?
        .parse::<u32>()
        .map_err(|_| "hoodie.table.version is not a number".to_string())?;
    if !matches!(version, 6 | 8 | 9) {
        return Err(format!("table version {version} is not supported (6, 8 and 9 are)").into());
    }
    Ok(version)
}

/// The key generator and the partition fields it partitions by (none when the table is
/// not partitioned, whatever `hoodie.table.partition.fields` says).
fn partitioning(props: &HashMap<String, String>) -> (KeyGenerator, Vec<String>) {
    let get = |k: &str| props.get(k).map(String::as_str);
    let partition_fields: Vec<String> = get("hoodie.table.partition.fields")
        .unwrap_or("")
        .split(',')
        .map(|f| f.split(':').next().unwrap_or("").trim().to_string())
        .filter(|f| !f.is_empty())
        .collect();
    let generator = get("hoodie.table.keygenerator.type")
        .or(get("hoodie.table.keygenerator.class"))
        .unwrap_or("")
        .to_ascii_uppercase();
    let key_generator = if partition_fields.is_empty()
        || generator.contains("NONPARTITION")
        || generator.contains("NON_PARTITION")
    {
        KeyGenerator::NonPartitioned
    } else if generator.contains("TIMESTAMP")
        || generator.contains("CUSTOM") && props.values().any(|v| v.contains(":timestamp"))
    {
        KeyGenerator::Timestamp
    } else {
        KeyGenerator::Fields
    };
    match key_generator {
        KeyGenerator::NonPartitioned => (key_generator, Vec::new()),
        _ => (key_generator, partition_fields),
    }
}

/// The active timeline's folder and the archive's, as the table version lays them out.
fn timeline_dirs(props: &HashMap<String, String>, version: u32) -> (String, String) {
    let get = |k: &str| props.get(k).map(String::as_str);
    if version >= 8 {
        let timeline = get("hoodie.timeline.path").unwrap_or("timeline");
        let history = get("hoodie.timeline.history.path").unwrap_or("history");
        (
            format!(".hoodie/{timeline}"),
            format!(".hoodie/{timeline}/{history}"),
        )
    } else {
        let archived = get("hoodie.archivelog.folder")
            .filter(|f| !f.is_empty())
            .unwrap_or("archived");
        (".hoodie".into(), format!(".hoodie/{archived}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_escaped_java_properties() {
        let props = parse_properties(
            "#comment\nhoodie.table.version=9\nhoodie.table.create.schema={\"type\"\\:\"record\"}\nhoodie.table.partition.fields=a,b:timestamp\nhoodie.table.keygenerator.type=SIMPLE\n",
        );
        assert_eq!(props["hoodie.table.create.schema"], "{\"type\":\"record\"}");
        let config = TableConfig::from_properties(&props).unwrap();
        assert_eq!(config.partition_fields, ["a", "b"]);
        assert_eq!(config.key_generator, KeyGenerator::Fields);
        assert_eq!(config.table_type, TableType::CopyOnWrite);
        assert!(config.meta_fields);
    }

    #[test]
    fn refuses_unknown_versions_and_missing_keys() {
        assert!(TableConfig::from_properties(&parse_properties("hoodie.table.version=5")).is_err());
        assert!(TableConfig::from_properties(&parse_properties("x=y")).is_err());
        let nonpart = parse_properties("hoodie.table.version=6\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.NonpartitionedKeyGenerator");
        assert_eq!(
            TableConfig::from_properties(&nonpart)
                .unwrap()
                .key_generator,
            KeyGenerator::NonPartitioned
        );
    }

    #[test]
    fn a_pluggable_table_format_is_named_but_hudis_own_is_not() {
        let config = |extra: &str| {
            TableConfig::from_properties(&parse_properties(&format!(
                "hoodie.table.version=9\n{extra}"
            )))
            .unwrap()
            .table_format
        };
        assert_eq!(
            config("hoodie.table.format=xlake").as_deref(),
            Some("xlake")
        );
        assert_eq!(
            config("hoodie.table.format=ICEBERG").as_deref(),
            Some("ICEBERG")
        );
        assert_eq!(config("hoodie.table.format=native"), None);
        assert_eq!(config(""), None);
    }
}
