//! One Delta version for one change set: `commitInfo` (the source commit's time and
//! `xlakeMetadata`), `protocol` and `metaData` when they change, then `remove` and `add`
//! actions against the live files of the log.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{json, Map, Value as Json};
use xlake_model::{ChangeSet, ColumnStats, DataFile, DataType, Field, FileFormat, VectorBytes};
use xlake_storage::TableStore;
use xlake_target::footer::{footer_stats, read_footer};

use super::error::TargetFault;
use super::log_state::{vector_id, LogState, XlakeMetadata, XLAKE_FIELD};
use super::schema_out::{
    delta_schema, has_timestamp_ntz, partition_columns, physical_names, protocol,
    wants_column_mapping,
};
use super::values_out::{absolute_uri, delta_path, partition_text, stats_json, z85};

/// What the table's schema state is in Delta's words, for one change set.
struct Shape {
    metadata: Map<String, Json>,
    /// Partition columns: index in the change set's spec, logical name, physical name.
    partitions: Vec<(usize, String, String)>,
    /// Dotted logical path to physical name (column mapping), else empty.
    physical: HashMap<String, String>,
}

/// The actions of the version that mirrors `change` on `state` (`None`: a new table).
pub(super) async fn actions(
    store: &TableStore,
    state: Option<&LogState>,
    change: &ChangeSet,
    verify: bool,
) -> Result<Vec<Json>, TargetFault> {
    let unsupported = |what: String| TargetFault::Unsupported {
        table: store.location().to_string(),
        commit: change.commit.id.clone(),
        what,
    };
    let shape = shape(state, change).map_err(&unsupported)?;
    let empty = LogState::default();
    let state_or_empty = state.unwrap_or(&empty);
    let mut out = vec![json!({"commitInfo": commit_info(store, change, state_or_empty)})];
    let uses_vectors = change.added.iter().any(|f| f.deletion_vector.is_some());
    let mut features = BTreeSet::new();
    if shape
        .metadata
        .get("configuration")
        .and_then(|c| c.get("delta.columnMapping.mode"))
        .is_some()
    {
        features.insert("columnMapping");
    }
    if uses_vectors {
        features.insert("deletionVectors");
    }
    if has_timestamp_ntz(&change.schema.fields) {
        features.insert("timestampNtz");
    }
    let new_protocol = protocol(&features, state_or_empty.protocol.as_ref());
    if state_or_empty
        .protocol
        .as_ref()
        .map(|p| Json::Object(p.clone()))
        != Some(new_protocol.clone())
    {
        out.push(json!({"protocol": new_protocol}));
    }
    let mut metadata = shape.metadata.clone();
    if uses_vectors || vectors_on(state_or_empty) {
        set_config(&mut metadata, "delta.enableDeletionVectors", "true");
    }
    if !same_metadata(state_or_empty.metadata.as_ref(), &metadata) {
        out.push(json!({"metaData": metadata}));
    }
    removals(change, state_or_empty, &mut out);
    for file in &change.added {
        if let Some(live) = state_or_empty.live.get(&file.path) {
            let new_id = vector_of(store, file).and_then(|v| vector_id(Some(&v)));
            let same_vector = new_id == live.vector_id();
            let same_size = live.add.get("size").and_then(Json::as_u64) == Some(file.size_bytes);
            // A full state lists every live file: one unchanged stays as it is.
            if change.full_state && same_vector && same_size && !file.rewritten {
                continue;
            }
            if !same_vector {
                out.push(json!({"remove": remove_of(&live.add, change)}));
            }
        }
        let add = add_action(store, change, file, &shape, verify)
            .await
            .map_err(|e| unsupported(format!("data file {}: {e}", file.path)))?;
        out.push(json!({"add": add}));
    }
    Ok(out)
}

fn vectors_on(state: &LogState) -> bool {
    state.metadata.as_ref().and_then(|m| {
        m.get("configuration")?
            .get("delta.enableDeletionVectors")?
            .as_str()
    }) == Some("true")
}

fn set_config(metadata: &mut Map<String, Json>, key: &str, value: &str) {
    if let Some(Json::Object(c)) = metadata.get_mut("configuration") {
        c.insert(key.into(), json!(value));
    }
}

fn same_metadata(current: Option<&Map<String, Json>>, new: &Map<String, Json>) -> bool {
    let Some(current) = current else { return false };
    ["schemaString", "partitionColumns", "configuration"]
        .iter()
        .all(|k| current.get(*k) == new.get(*k))
}

/// The `metaData` for `change`, keeping the table's id, creation time and partition
/// columns (Delta does not change a table's partition columns in place).
fn shape(state: Option<&LogState>, change: &ChangeSet) -> Result<Shape, String> {
    let current = state.and_then(|s| s.metadata.as_ref());
    let mapping = wants_column_mapping(&change.schema).then(|| physical_names(current));
    let schema = delta_schema(&change.schema, mapping.as_ref())?;
    if let Some(column) = changed_type(current, &schema) {
        return Err(column);
    }
    let physical = match &mapping {
        Some(_) => physical_of(&schema),
        None => HashMap::new(),
    };
    let partitions: Vec<(usize, String, String)> =
        partition_columns(&change.partition_spec, &change.schema)
            .into_iter()
            .map(|(i, c)| {
                let p = physical.get(&c).cloned().unwrap_or(c.clone());
                (i, c, p)
            })
            .collect();
    let names: Vec<&str> = partitions.iter().map(|(_, c, _)| c.as_str()).collect();
    if let Some(was) = current.and_then(|m| m.get("partitionColumns")) {
        if *was != json!(names) {
            return Err(format!("the partition columns change from {was} to {names:?}, which a Delta table cannot do in place"));
        }
    }
    let mut configuration = current
        .and_then(|m| m.get("configuration")?.as_object().cloned())
        .unwrap_or_default();
    if mapping.is_some() {
        configuration.insert("delta.columnMapping.mode".into(), json!("id"));
        let max = max_id(&change.schema.fields).max(
            configuration
                .get("delta.columnMapping.maxColumnId")
                .and_then(Json::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
        );
        configuration.insert(
            "delta.columnMapping.maxColumnId".into(),
            json!(max.to_string()),
        );
    }
    let id = current
        .and_then(|m| m.get("id").cloned())
        .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    let created = current
        .and_then(|m| m.get("createdTime").cloned())
        .unwrap_or_else(|| json!(change.commit.commit_time_ms));
    let mut metadata = Map::new();
    metadata.insert("id".into(), id);
    metadata.insert(
        "format".into(),
        json!({"provider": "parquet", "options": {}}),
    );
    metadata.insert("schemaString".into(), json!(schema.to_string()));
    metadata.insert("partitionColumns".into(), json!(names));
    metadata.insert("configuration".into(), Json::Object(configuration));
    metadata.insert("createdTime".into(), created);
    Ok(Shape {
        metadata,
        partitions,
        physical,
    })
}

/// A top-level column whose type the new schema changes (Delta readers read every file
/// with the table's one type, and older files hold the old one).
fn changed_type(current: Option<&Map<String, Json>>, new: &Json) -> Option<String> {
    let old: Json = serde_json::from_str(current?.get("schemaString")?.as_str()?).ok()?;
    let types = |s: &Json| -> HashMap<String, Json> {
        s.get("fields")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| Some((f.get("name")?.as_str()?.to_string(), f.get("type")?.clone())))
            .collect()
    };
    let before = types(&old);
    types(new).into_iter().find_map(|(name, ty)| {
        let was = before.get(&name)?;
        (was.is_string() && ty.is_string() && *was != ty).then(|| {
            format!("column {name} changes type from {was} to {ty}, which a Delta table cannot hold (its older files keep {was})")
        })
    })
}

fn max_id(fields: &[Field]) -> i64 {
    fields
        .iter()
        .map(|f| {
            let own = f.id.map_or(0, i64::from);
            let nested = match &f.data_type {
                DataType::Struct(c) => max_id(c),
                _ => 0,
            };
            own.max(nested)
        })
        .max()
        .unwrap_or(0)
}

/// Dotted logical path to physical name, through nested structs.
fn physical_of(schema: &Json) -> HashMap<String, String> {
    fn walk(fields: &Json, prefix: &str, out: &mut HashMap<String, String>) {
        for f in fields.as_array().into_iter().flatten() {
            let Some(name) = f.get("name").and_then(Json::as_str) else {
                continue;
            };
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            };
            if let Some(p) = f
                .get("metadata")
                .and_then(|m| m.get("delta.columnMapping.physicalName"))
                .and_then(Json::as_str)
            {
                out.insert(path.clone(), p.to_string());
            }
            if let Some(children) = f.get("type").and_then(|t| t.get("fields")) {
                walk(children, &path, out);
            }
        }
    }
    let mut out = HashMap::new();
    if let Some(fields) = schema.get("fields") {
        walk(fields, "", &mut out);
    }
    out
}

fn commit_info(store: &TableStore, change: &ChangeSet, state: &LogState) -> Json {
    let c = &change.commit;
    let xlake = XlakeMetadata {
        source_table_format: c.format.as_str().to_string(),
        source_identifier: c.id.clone(),
        latest_table_operation_identifier: Some(c.operation_identifier()),
        table_location: store.location().to_string(),
        notes: change.notes.clone(),
        degraded: change.degraded.clone(),
        source_state: change.source_state.clone(),
    };
    let blind = change.removed.is_empty() && !change.full_state;
    let mut info = Map::new();
    info.insert("timestamp".into(), json!(c.commit_time_ms));
    info.insert("operation".into(), json!("WRITE"));
    info.insert(
        "operationParameters".into(),
        json!({"mode": if blind { "Append" } else { "Overwrite" }}),
    );
    info.insert("isBlindAppend".into(), json!(blind));
    // Each attempt's own: a writer that lost the race never finds its bytes there.
    info.insert("txnId".into(), json!(uuid::Uuid::new_v4().to_string()));
    if let Some(v) = state.latest() {
        info.insert("readVersion".into(), json!(v.version));
    }
    info.insert(
        "engineInfo".into(),
        json!(format!("xlake/{}", env!("CARGO_PKG_VERSION"))),
    );
    info.insert(XLAKE_FIELD.into(), json!(xlake));
    Json::Object(info)
}

/// `remove` actions for the files `change` removes (a full state: every live file it does
/// not list); a file the log does not hold live is skipped.
fn removals(change: &ChangeSet, state: &LogState, out: &mut Vec<Json>) {
    let gone: Vec<&String> = if change.full_state {
        let keep: HashSet<&str> = change.added.iter().map(|f| f.path.as_str()).collect();
        let mut gone: Vec<&String> = state
            .live
            .keys()
            .filter(|p| !keep.contains(p.as_str()))
            .collect();
        gone.sort();
        gone
    } else {
        change.removed.iter().collect()
    };
    for path in gone {
        if let Some(live) = state.live.get(path) {
            out.push(json!({"remove": remove_of(&live.add, change)}));
        }
    }
}

fn remove_of(add: &Map<String, Json>, change: &ChangeSet) -> Json {
    let mut remove = Map::new();
    for key in ["path", "partitionValues", "size", "deletionVector"] {
        if let Some(v) = add.get(key) {
            remove.insert(key.into(), v.clone());
        }
    }
    remove.insert(
        "deletionTimestamp".into(),
        json!(change.commit.commit_time_ms),
    );
    remove.insert("dataChange".into(), json!(change.data_change));
    remove.insert("extendedFileMetadata".into(), json!(true));
    Json::Object(remove)
}

/// The deletion vector descriptor of `file`, from the vector as the source stores it.
fn vector_of(store: &TableStore, file: &DataFile) -> Option<Json> {
    let dv = file.deletion_vector.as_ref()?;
    Some(match &dv.bytes {
        VectorBytes::Inline(bytes) => json!({
            "storageType": "i",
            "pathOrInlineDv": z85(bytes),
            "sizeInBytes": bytes.len(),
            "cardinality": dv.cardinality,
        }),
        VectorBytes::Stored { path, offset, size } => json!({
            "storageType": "p",
            "pathOrInlineDv": absolute_uri(store.location(), path),
            "offset": offset,
            "sizeInBytes": size,
            "cardinality": dv.cardinality,
        }),
    })
}

async fn add_action(
    store: &TableStore,
    change: &ChangeSet,
    file: &DataFile,
    shape: &Shape,
    verify: bool,
) -> Result<Json, String> {
    if !file.deleted_rows.is_empty() && file.deletion_vector.is_none() {
        return Err(format!("{} deleted rows given as positions, not as a stored deletion vector: the Delta target carries stored vectors only", file.deleted_rows.len()));
    }
    let mut values = Map::new();
    let mut skip = Vec::new();
    for (i, column, physical) in &shape.partitions {
        let ty = change
            .schema
            .primitive_at(column)
            .ok_or("partition column not in the schema")?;
        let text =
            match file.partition.get(*i).cloned().flatten() {
                Some(v) => Some(partition_text(&v, ty).ok_or_else(|| {
                    format!("partition value {v:?} of {column} has no Delta text")
                })?),
                None => None,
            };
        values.insert(physical.clone(), json!(text));
        skip.push(column.clone());
    }
    let (rows, columns) = measured(store, change, file, verify).await?;
    let tight = file.deletion_vector.is_none();
    let stats = stats_json(
        rows,
        &columns,
        &change.schema,
        &shape.physical,
        &skip,
        tight,
    );
    let mut add = Map::new();
    add.insert("path".into(), json!(delta_path(&file.path)));
    add.insert("partitionValues".into(), Json::Object(values));
    add.insert("size".into(), json!(file.size_bytes));
    add.insert(
        "modificationTime".into(),
        json!(change.commit.commit_time_ms),
    );
    add.insert("dataChange".into(), json!(change.data_change));
    if let Some(stats) = stats {
        add.insert("stats".into(), json!(stats));
    }
    if let Some(dv) = vector_of(store, file) {
        add.insert("deletionVector".into(), dv);
    }
    Ok(Json::Object(add))
}

/// The file's rows and column statistics: as the source records them, else from its
/// Parquet footer (a file a later commit removed may be gone: then what the source gave).
async fn measured(
    store: &TableStore,
    change: &ChangeSet,
    file: &DataFile,
    verify: bool,
) -> Result<(Option<u64>, Vec<(String, ColumnStats)>), String> {
    let known = (file.record_count, file.column_stats.clone());
    if file.record_count.is_some() && !file.column_stats.is_empty() && !verify {
        return Ok(known);
    }
    if file.format != FileFormat::Parquet
        || (file.removed_later
            && store
                .size(&file.path)
                .await
                .map_err(|e| e.to_string())?
                .is_none())
    {
        return Ok(known);
    }
    let meta = read_footer(store, &file.path, file.size_bytes)
        .await
        .map_err(|e| e.to_string())?;
    let footer = footer_stats(&meta, &change.schema);
    if let Some(r) = file.record_count.filter(|r| *r != footer.record_count) {
        return Err(format!(
            "the source records {r} rows, the footer {}",
            footer.record_count
        ));
    }
    let columns = match file.column_stats.is_empty() {
        true => footer.columns.into_iter().collect(),
        false => known.1,
    };
    Ok((Some(footer.record_count), columns))
}

/// `change` with every stored deletion vector that lies in a file of another layout than
/// Delta's (a Puffin file of an Iceberg source: its first byte is not Delta's format
/// version 1, which Delta readers check) copied inline into the log: the blob's bytes as
/// they are (length and CRC checked, then left off), never decoded. A vector in a Delta
/// vector file is still pointed at in place.
pub(super) async fn vectors_in_delta_files(
    store: &TableStore,
    change: &ChangeSet,
) -> Result<Option<ChangeSet>, TargetFault> {
    let mut copied: Option<ChangeSet> = None;
    for (i, file) in change.added.iter().enumerate() {
        let Some(dv) = &file.deletion_vector else {
            continue;
        };
        let VectorBytes::Stored { path, offset, size } = &dv.bytes else {
            continue;
        };
        if store.get_range(path, 0..1).await?.as_ref() == [1] {
            continue;
        }
        let end = offset.saturating_add(*size).saturating_add(8);
        let framed = store.get_range(path, *offset..end).await?;
        let serialized = unframed(&framed, *size).map_err(|reason| TargetFault::Unreadable {
            file: store.absolute(path),
            reason: format!("deletion vector at offset {offset}: {reason}"),
        })?;
        let out = copied.get_or_insert_with(|| change.clone());
        if let Some(vector) = out.added[i].deletion_vector.as_mut() {
            vector.bytes = VectorBytes::Inline(serialized);
        }
    }
    Ok(copied)
}

/// The serialized vector of a framed blob (4-byte big-endian length, vector, 4-byte
/// big-endian CRC-32 of the vector), its length and CRC checked.
fn unframed(framed: &[u8], size: u64) -> Result<Vec<u8>, String> {
    let (len, rest) = framed.split_first_chunk::<4>().ok_or("truncated")?;
    let (body, crc) = rest.split_last_chunk::<4>().ok_or("truncated")?;
    if u64::from(u32::from_be_bytes(*len)) != size || body.len() as u64 != size {
        return Err(format!("the length field does not say {size} bytes"));
    }
    if crc32fast::hash(body) != u32::from_be_bytes(*crc) {
        return Err("CRC-32 mismatch".into());
    }
    Ok(body.to_vec())
}

#[cfg(test)]
mod tests {
    use xlake_model::{DeletionVector, PartitionSpec, Schema, SourceCommit, SourceFormat};

    use super::*;

    fn with_vector_in(
        store_dir: &std::path::Path,
        first: &[u8],
    ) -> (TableStore, ChangeSet, Vec<u8>) {
        let serialized = vec![0xD1, 0xD3, 0x39, 0x64, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut file = first.to_vec();
        let offset = file.len() as u64;
        file.extend((serialized.len() as u32).to_be_bytes());
        file.extend(&serialized);
        file.extend(crc32fast::hash(&serialized).to_be_bytes());
        std::fs::write(store_dir.join("v.bin"), file).unwrap();
        let store = TableStore::open(store_dir.to_str().unwrap()).unwrap();
        let commit = SourceCommit {
            format: SourceFormat::new("ICEBERG"),
            id: "1".into(),
            action: "delete".into(),
            requested_ms: None,
            commit_time_ms: 0,
        };
        let mut change = ChangeSet::new(commit, Schema::default(), PartitionSpec::unpartitioned());
        let mut data = DataFile::parquet("a.parquet", 1, Some(5));
        data.deletion_vector = Some(DeletionVector {
            bytes: VectorBytes::Stored {
                path: "v.bin".into(),
                offset,
                size: serialized.len() as u64,
            },
            cardinality: 0,
        });
        change.added.push(data);
        (store, change, serialized)
    }

    #[tokio::test]
    async fn a_vector_in_a_puffin_file_is_copied_inline_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let (store, change, serialized) = with_vector_in(dir.path(), b"PFA1");
        let copied = vectors_in_delta_files(&store, &change)
            .await
            .unwrap()
            .unwrap();
        let bytes = &copied.added[0].deletion_vector.as_ref().unwrap().bytes;
        assert_eq!(bytes, &VectorBytes::Inline(serialized));
        // In a Delta vector file (first byte 1) it stays where it is.
        let (store, change, _) = with_vector_in(dir.path(), &[1]);
        assert!(vectors_in_delta_files(&store, &change)
            .await
            .unwrap()
            .is_none());
    }
}
