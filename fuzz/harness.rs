//! Fuzz harnesses: one function per parser of bytes xlake does not control. Whatever the
//! input, each must return (an `Err` is a fine answer) and never panic.
//!
//! Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`) and by the replay of the
//! committed corpora in `cargo test` (`tests/it/fuzz_corpora.rs`).

use std::collections::HashMap;

use xlake_delta::{action, deletion_vector, schema as delta_schema, values};
use xlake_hudi::commit_metadata::{CommitMetadata, RestoreMetadata, RollbackMetadata};
use xlake_hudi::file_group::{parse_base_file_name, FileGroups};
use xlake_hudi::instant::{instant_millis, Instant};
use xlake_hudi::{partition_path, properties, schema as hudi_schema, timeline};
use xlake_iceberg::history::{split, History};
use xlake_iceberg::table::{parse_hint, parse_metadata, LoadedTable};
use xlake_model::{DataType, Field, PrimitiveType, Schema, TimeUnit};

/// A harness: takes any bytes, returns, never panics.
pub type Harness = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/` name it.
pub const TARGETS: &[(&str, Harness)] = &[
    ("hudi_instant_name", hudi_instant_name),
    ("hudi_commit_metadata", hudi_commit_metadata),
    ("hudi_properties", hudi_properties),
    ("hudi_partition_path", hudi_partition_path),
    ("delta_actions", delta_actions),
    ("delta_stats", delta_stats),
    ("delta_deletion_vector", delta_deletion_vector),
    ("iceberg_metadata", iceberg_metadata),
];

/// A timeline file name, and a base file name.
pub fn hudi_instant_name(data: &[u8]) {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(instant) = Instant::parse(".hoodie/timeline", name) {
        assert!(instant.file().ends_with(name));
        // The parts read back from the path are the name's.
        assert!(name.starts_with(instant.requested()));
        assert!(!instant.action().is_empty());
        let _ = instant_millis(instant.commit_time());
    }
    let _ = parse_base_file_name(name);
}

/// A timeline file's body (JSON or single-record Avro) as commit, rollback and restore
/// metadata, and what the source does with each.
pub fn hudi_commit_metadata(data: &[u8]) {
    let Ok(json) = timeline::decode(data) else {
        return;
    };
    if let Ok(meta) = serde_json::from_value::<CommitMetadata>(json.clone()) {
        if let Some(text) = meta.schema() {
            let _ = hudi_schema::avro_to_schema(text, true);
            let _ = hudi_schema::avro_to_schema(text, false);
        }
        let _ = meta.replaced().count();
        for mor_read_optimized in [true, false] {
            let options = xlake_hudi::HudiOptions {
                mor_read_optimized,
                ..Default::default()
            };
            let mut groups = FileGroups::default();
            let _ = groups.apply_commit(&meta, &options);
            let _ = groups.apply_commit(&meta, &options);
        }
    }
    if let Ok(meta) = serde_json::from_value::<RollbackMetadata>(json.clone()) {
        let _ = meta.commits_rollback;
    }
    if let Ok(meta) = serde_json::from_value::<RestoreMetadata>(json) {
        let _ = meta.rolled_back();
    }
}

/// `hoodie.properties`, the table configuration read from it, and the partition spec.
pub fn hudi_properties(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let props = properties::parse_properties(&text);
    let Ok(config) = properties::TableConfig::from_properties(&props) else {
        return;
    };
    if let Some(text) = &config.create_schema {
        let _ = hudi_schema::avro_to_schema(text, config.meta_fields);
    }
    let (spec, _) = partition_path::partition_spec(&config, &typed_schema());
    let _ =
        partition_path::partition_values("a=1/b=2024-01-31/c=x", &config, &spec, &typed_schema());
}

/// A partition path, against one typed multi-field spec and one single-field spec.
pub fn hudi_partition_path(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let schema = typed_schema();
    for fields in ["i,d,s,t,l,dec", "s", "d", "i"] {
        for (hive, encoded) in [("true", "false"), ("false", "true")] {
            let props = HashMap::from([
                ("hoodie.table.version".to_string(), "6".to_string()),
                (
                    "hoodie.table.partition.fields".to_string(),
                    fields.to_string(),
                ),
                (
                    "hoodie.datasource.write.hive_style_partitioning".to_string(),
                    hive.to_string(),
                ),
                (
                    "hoodie.datasource.write.partitionpath.urlencode".to_string(),
                    encoded.to_string(),
                ),
                (
                    "hoodie.table.keygenerator.class".to_string(),
                    "org.apache.hudi.keygen.ComplexKeyGenerator".to_string(),
                ),
            ]);
            let Ok(config) = properties::TableConfig::from_properties(&props) else {
                continue;
            };
            let (spec, _) = partition_path::partition_spec(&config, &schema);
            let _ = partition_path::partition_values(path, &config, &spec, &schema);
        }
    }
}

/// A Delta commit file, and what the source reads from each action: the schema, each
/// add's stats, partition values and deletion vector descriptor.
pub fn delta_actions(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(commit) = action::parse_commit(text) else {
        return;
    };
    let mut table = delta_schema::TableSchema {
        schema: typed_schema(),
        logical: HashMap::new(),
        void_columns: Vec::new(),
    };
    if let Some(meta) = &commit.metadata {
        for mapped in [false, true] {
            if let Ok(parsed) =
                delta_schema::parse_schema(&meta.schema_string, mapped, &meta.partition_columns)
            {
                table = parsed;
            }
        }
        let _ = meta.property("delta.columnMapping.mode");
    }
    for add in &commit.adds {
        if let Some(stats) = &add.stats {
            let _ = values::parse_stats(stats, &table);
        }
        for (column, value) in &add.partition_values {
            if let Some(ty) = table.schema.primitive_at(column) {
                let _ = values::partition_value(value.as_deref(), ty);
            }
        }
        if let Some(dv) = &add.deletion_vector {
            if let Ok(d) = serde_json::from_value::<deletion_vector::Descriptor>(dv.clone()) {
                let records = add
                    .stats
                    .as_deref()
                    .and_then(|s| values::parse_stats(s, &table).ok());
                let _ = deletion_vector::inline_vector(&d, records.and_then(|(n, _)| n));
                let _ = deletion_vector::uuid_path(&d.path_or_inline_dv);
            }
        }
    }
}

/// An add's stats JSON against a schema of every primitive type, nested too.
pub fn delta_stats(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let table = delta_schema::TableSchema {
        schema: typed_schema(),
        logical: HashMap::from([("col-1".to_string(), "i".to_string())]),
        void_columns: Vec::new(),
    };
    let _ = values::parse_stats(text, &table);
    for field in &table.schema.fields {
        if let Some(ty) = table.schema.primitive_at(&field.name) {
            let _ = values::partition_value(Some(text), ty);
        }
    }
}

/// A deletion vector: Z85 text (inline vectors) and a serialized `RoaringBitmapArray`.
/// The same text read as an inline vector of each size near its length, and as the id of a
/// `u` vector's file.
pub fn delta_deletion_vector(data: &[u8]) {
    let _ = deletion_vector::positions(data);
    let text = String::from_utf8_lossy(data);
    if let Ok(bytes) = deletion_vector::z85_decode(&text) {
        let _ = deletion_vector::positions(&bytes);
    }
    let _ = deletion_vector::uuid_path(&text);
    let near = (text.len() / 5 * 4) as u64;
    for size in near.saturating_sub(3)..=near {
        let d = deletion_vector::Descriptor {
            storage_type: "i".into(),
            path_or_inline_dv: text.to_string(),
            offset: None,
            size_in_bytes: size,
            cardinality: 1,
        };
        let _ = deletion_vector::inline_vector(&d, Some(size));
    }
}

/// `version-hint.text`, and a `vN.metadata.json` as read back, whole and split for a
/// commit (as `v1.metadata.json`, so a snapshot index naming it is read): which source
/// commits its snapshots mirror, their ancestry, and (split) the file written back with
/// the carried snapshots.
pub fn iceberg_metadata(data: &[u8]) {
    let _ = parse_hint(data);
    let whole = parse_metadata(data).map(|m| {
        let history = History::of(&m);
        (m, history)
    });
    let split = split(&data.to_vec().into(), Some("v1.metadata.json"));
    for (metadata, history) in [whole, split].into_iter().flatten() {
        let _ = xlake_iceberg::encode::metadata_json(&metadata, &history, Some("v2.metadata.json"));
        let loaded = LoadedTable {
            version: 1,
            metadata,
            history: std::sync::Arc::new(history),
            hint_stale: false,
        };
        let _ = loaded.mirrored();
        let _ = loaded.head();
        let _ = loaded.ancestry();
    }
}

/// One column of each primitive type, partition-path friendly names first.
fn typed_schema() -> Schema {
    Schema::new(vec![
        Field::optional("i", PrimitiveType::Int),
        Field::optional("d", PrimitiveType::Date),
        Field::optional("s", PrimitiveType::String),
        Field::optional(
            "t",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: true,
            },
        ),
        Field::optional("l", PrimitiveType::Long),
        Field::optional(
            "dec",
            PrimitiveType::Decimal {
                precision: 10,
                scale: 2,
            },
        ),
        Field::optional("f", PrimitiveType::Float),
        Field::optional("db", PrimitiveType::Double),
        Field::optional("b", PrimitiveType::Boolean),
        Field::optional("bin", PrimitiveType::Binary),
        Field::optional("tm", PrimitiveType::Time),
        Field::optional("u", PrimitiveType::Uuid),
        Field::optional("fx", PrimitiveType::Fixed(4)),
        Field::new(
            "n",
            DataType::Struct(vec![
                Field::optional("x", PrimitiveType::Int),
                Field::optional("y", PrimitiveType::String),
            ]),
            true,
        ),
        Field::optional(
            "tn",
            PrimitiveType::Timestamp {
                unit: TimeUnit::Micros,
                with_zone: false,
            },
        ),
    ])
}
