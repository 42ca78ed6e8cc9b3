//! One Delta version for one change set: `commitInfo` (the source commit's time and
//! `xlakeMetadata`), `protocol` and `metaData` when they change, then `remove` and `add`
//! actions against the live files of the log.

use std::collections::{BTreeSet, HashMap, HashSet};

use delta_kernel::actions::deletion_vector_writer::{
    KernelDeletionVector, StreamingDeletionVectorWriter,
};
use serde_json::{json, Map, Value as Json};
use xlake_model::{ChangeSet, ColumnStats, DataFile, DataType, Field, FileFormat, VectorBytes};
use xlake_storage::{PutOutcome, TableStore};
use xlake_target::footer::{footer_stats, read_footer};

use super::error::TargetFault;
use super::log_state::{vector_id, LogState, XlakeMetadata, XLAKE_FIELD};
use super::naming::{self, file_naming, FileNaming};
use super::schema_out::{
    delta_schema, has_timestamp_ntz, partition_columns, protocol, wants_column_mapping,
};
use super::values_out::{absolute_uri, delta_path, partition_text, stats_json, z85};
use crate::error::Reason;

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
    let unsupported = |what: Reason| TargetFault::Unsupported {
        table: store.location().to_string(),
        commit: change.commit.id.clone(),
        what,
    };
    let mut premeasured = premeasure(store, change, verify)
        .await
        .map_err(|(path, e)| unsupported(format!("data file {path}: {e}").into()))?;
    let namings: Vec<(&str, &FileNaming)> = premeasured
        .iter()
        .filter_map(|(path, m)| Some((path.as_str(), m.naming.as_ref()?)))
        .collect();
    let shape = shape(state, change, &namings).map_err(&unsupported)?;
    if let Some(why) = empty_partition_value(&shape, change) {
        return Err(unsupported(why));
    }
    let empty = LogState::default();
    let state_or_empty = state.unwrap_or(&empty);
    let mut out = vec![json!({"commitInfo": commit_info(store, change, state_or_empty)})];
    let uses_vectors = change
        .added
        .iter()
        .any(|f| f.deletion_vector.is_some() || !f.deleted_rows.is_empty());
    let features = features(&shape, change, uses_vectors);
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
    let mut written = written_vectors(store, change)
        .await
        .map_err(|(path, e)| unsupported(format!("data file {path}: {e}").into()))?;
    for file in &change.added {
        let dv = match written.remove(&file.path) {
            Some(dv) => Some(dv),
            None => vector_of(store, file)
                .await
                .map_err(|e| unsupported(format!("data file {}: {e}", file.path).into()))?,
        };
        if let Some(live) = state_or_empty.live.get(&file.path) {
            let new_id = vector_id(dv.as_ref());
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
        let known = premeasured.remove(&file.path);
        let add = add_action(store, change, file, (&shape, dv), (known, verify))
            .await
            .map_err(|e| unsupported(format!("data file {}: {e}", file.path).into()))?;
        out.push(json!({"add": add}));
    }
    Ok(out)
}

/// Why `change` cannot be written: an added file whose partition value is the empty
/// string. Delta's `partitionValues` hold text, and the protocol reads `""` as null
/// (delta-spark does; Spark writes an empty partition string as null itself), so there
/// is no text that reads back as `""` in every reader: refused, naming the file and the
/// partition field, before anything of the version is written.
fn empty_partition_value(shape: &Shape, change: &ChangeSet) -> Option<Reason> {
    change.added.iter().find_map(|file| {
        shape.partitions.iter().find_map(|(i, column, _)| {
            matches!(file.partition.get(*i), Some(Some(xlake_model::Value::String(s))) if s.is_empty())
                .then(|| format!("data file {}: partition field {column} is the empty string, which a Delta table cannot hold (its protocol reads an empty partition value as null, so Delta readers would show null for these rows)", file.path).into())
        })
    })
}

/// The table features the version uses: column mapping, deletion vectors, zone-less
/// timestamps.
fn features(shape: &Shape, change: &ChangeSet, uses_vectors: bool) -> BTreeSet<&'static str> {
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
    features
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
fn shape(
    state: Option<&LogState>,
    change: &ChangeSet,
    namings: &[(&str, &FileNaming)],
) -> Result<Shape, Reason> {
    let current = state.and_then(|s| s.metadata.as_ref());
    let mut mapping = wants_column_mapping(&change.schema)
        .then(|| state.map(|s| s.physical.clone()).unwrap_or_default());
    let by_name = match &mut mapping {
        Some(names) => {
            let by_name = naming::by_name(current, names, namings)?;
            if by_name {
                naming::settle(names, namings)?;
            }
            by_name
        }
        None => false,
    };
    let schema = delta_schema(&change.schema, mapping.as_mut())?;
    if by_name {
        naming::check_unresolved(&schema, namings)?;
    }
    if let Some(column) = changed_type(current, &schema) {
        return Err(column.into());
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
            return Err(format!("the partition columns change from {was} to {names:?}, which a Delta table cannot do in place").into());
        }
    }
    let mut configuration = current
        .and_then(|m| m.get("configuration")?.as_object().cloned())
        .unwrap_or_default();
    if mapping.is_some() {
        let mode = if by_name { "name" } else { "id" };
        configuration.insert("delta.columnMapping.mode".into(), json!(mode));
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
/// with the table's one type, and older files hold the old one): the same field id with
/// column mapping, else the same name.
fn changed_type(current: Option<&Map<String, Json>>, new: &Json) -> Option<String> {
    let old: Json = serde_json::from_str(current?.get("schemaString")?.as_str()?).ok()?;
    let types = |s: &Json| -> HashMap<String, (String, Json)> {
        s.get("fields")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| {
                let name = f.get("name")?.as_str()?.to_string();
                let key = match f.pointer("/metadata/delta.columnMapping.id") {
                    Some(id) => format!("id {id}"),
                    None => format!("name {name}"),
                };
                Some((key, (name, f.get("type")?.clone())))
            })
            .collect()
    };
    let before = types(&old);
    types(new).into_iter().find_map(|(key, (name, ty))| {
        let (_, was) = before.get(&key)?;
        (was.is_string() && ty.is_string() && *was != ty).then(|| {
            format!("column {name} changes type from {was} to {ty}, which a Delta table cannot hold (its older files keep {was})")
        })
    })
}

fn max_id(fields: &[Field]) -> i64 {
    fn nested(t: &DataType) -> i64 {
        match t {
            DataType::Primitive(_) => 0,
            DataType::Struct(c) => max_id(c),
            DataType::List(e) => nested(&e.data_type),
            DataType::Map { key, value } => nested(&key.data_type).max(nested(&value.data_type)),
        }
    }
    fields
        .iter()
        .map(|f| f.id.map_or(0, i64::from).max(nested(&f.data_type)))
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

/// The deletion vector descriptor of `file`. A vector in a Delta vector file (whose first
/// byte is the format version, 1) is pointed at in place. One stored in another file (a
/// Puffin file begins with its magic, and Delta readers check that byte) is copied, its
/// bytes as they are (length, vector, CRC), into a new `deletion_vector_<uuid>.bin` at the
/// table root; never decoded.
async fn vector_of(store: &TableStore, file: &DataFile) -> Result<Option<Json>, String> {
    let Some(dv) = file.deletion_vector.as_ref() else {
        return Ok(None);
    };
    let (path, offset, size) = match &dv.bytes {
        VectorBytes::Inline(bytes) => {
            return Ok(Some(json!({
                "storageType": "i",
                "pathOrInlineDv": z85(bytes),
                "sizeInBytes": bytes.len(),
                "cardinality": dv.cardinality,
            })))
        }
        VectorBytes::Stored { path, offset, size } => (path, *offset, *size),
    };
    let fail = |e: xlake_storage::StorageError| format!("deletion vector {path}: {e}");
    let first = store.get_range(path, 0..1).await.map_err(fail)?;
    let (at, offset) = if first.as_ref() == [1] {
        (absolute_uri(store.location(), path), offset)
    } else {
        let framed = store
            .get_range(path, offset..offset + size + 8)
            .await
            .map_err(fail)?;
        let length = framed.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok());
        if length.map(u32::from_be_bytes).map(u64::from) != Some(size) {
            return Err(format!("deletion vector {path} at {offset}: its length field is not the {size} bytes the source records"));
        }
        let name = format!("deletion_vector_{}.bin", super::retention::vector_uuid());
        let mut body = vec![1u8];
        body.extend_from_slice(&framed);
        store.put_if_absent(&name, body).await.map_err(fail)?;
        (absolute_uri(store.location(), &name), 1)
    };
    Ok(Some(json!({
        "storageType": "p",
        "pathOrInlineDv": at,
        "offset": offset,
        "sizeInBytes": size,
        "cardinality": dv.cardinality,
    })))
}

/// The deletion vectors of the files `change` gives as row positions only (Iceberg v2
/// position deletes), written as Delta writers write them: one vector file per version,
/// `deletion_vector_<uuid>.bin` at the table root (format version byte 1, then per
/// vector its big-endian length, the RoaringBitmapArray, its big-endian CRC-32; by
/// delta-kernel's writer), each vector a `u` descriptor (the Z85 of the uuid) at its
/// offset. Descriptors by data file path; nothing written when no file needs one.
async fn written_vectors(
    store: &TableStore,
    change: &ChangeSet,
) -> Result<HashMap<String, Json>, (String, String)> {
    let wanted: Vec<&DataFile> = change
        .added
        .iter()
        .filter(|f| f.deletion_vector.is_none() && !f.deleted_rows.is_empty())
        .collect();
    let mut out = HashMap::new();
    let Some(first) = wanted.first() else {
        return Ok(out);
    };
    let uuid = super::retention::vector_uuid();
    let mut body = Vec::new();
    let mut writer = StreamingDeletionVectorWriter::new(&mut body);
    for file in &wanted {
        let mut dv = KernelDeletionVector::new();
        dv.add_deleted_row_indexes(&file.deleted_rows);
        let at = writer
            .write_deletion_vector(dv)
            .map_err(|e| (file.path.clone(), format!("deletion vector: {e}")))?;
        out.insert(
            file.path.clone(),
            json!({
                "storageType": "u",
                "pathOrInlineDv": z85(uuid.as_bytes()),
                "offset": at.offset,
                "sizeInBytes": at.size_in_bytes,
                "cardinality": at.cardinality,
            }),
        );
    }
    let name = format!("deletion_vector_{uuid}.bin");
    let fail = |e: String| {
        (
            first.path.clone(),
            format!("deletion vector file {name}: {e}"),
        )
    };
    writer.finalize().map_err(|e| fail(e.to_string()))?;
    match store.put_if_absent(&name, body).await {
        Ok(PutOutcome::Created) => Ok(out),
        Ok(PutOutcome::AlreadyExists) => Err(fail("already exists".into())),
        Err(e) => Err(fail(e.to_string())),
    }
}

async fn add_action(
    store: &TableStore,
    change: &ChangeSet,
    file: &DataFile,
    (shape, dv): (&Shape, Option<Json>),
    (known, verify): (Option<Measured>, bool),
) -> Result<Json, String> {
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
    let Measured { rows, columns, .. } = match known {
        Some(m) => m,
        None => measured(store, change, file, verify).await?,
    };
    let tight = file.deletion_vector.is_none() && file.deleted_rows.is_empty();
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
    if let Some(dv) = dv {
        add.insert("deletionVector".into(), dv);
    }
    Ok(Json::Object(add))
}

/// What the target knows of a file's contents.
struct Measured {
    rows: Option<u64>,
    columns: Vec<(String, ColumnStats)>,
    /// How the file holds the fields, when its footer was read for a change set whose
    /// source reads files without field ids by name ([`ChangeSet::name_mapped`]).
    naming: Option<FileNaming>,
}

/// [`measured`] of every added file, by path, before the version's column mapping is
/// chosen (it depends on whether the files carry field ids): only for a change set whose
/// source reads files without ids by name; else none (each file is measured as its `add`
/// is written). `Err` names the file.
async fn premeasure(
    store: &TableStore,
    change: &ChangeSet,
    verify: bool,
) -> Result<HashMap<String, Measured>, (String, String)> {
    let mut out = HashMap::new();
    if !change.name_mapped {
        return Ok(out);
    }
    for file in &change.added {
        let m = measured(store, change, file, verify)
            .await
            .map_err(|e| (file.path.clone(), e))?;
        out.insert(file.path.clone(), m);
    }
    Ok(out)
}

/// The file's rows and column statistics: as the source records them, else from its
/// Parquet footer (a file a later commit removed may be gone: then what the source gave);
/// with the footer read, how it holds the fields ([`ChangeSet::name_mapped`] only).
async fn measured(
    store: &TableStore,
    change: &ChangeSet,
    file: &DataFile,
    verify: bool,
) -> Result<Measured, String> {
    let known = Measured {
        rows: file.record_count,
        columns: file.column_stats.clone(),
        naming: None,
    };
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
        false => known.columns,
    };
    Ok(Measured {
        rows: Some(footer.record_count),
        columns,
        naming: change
            .name_mapped
            .then(|| file_naming(&meta, &change.schema)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_model::{PrimitiveType, Schema, SourceCommit, SourceFormat};

    fn change(fields: Vec<Field>) -> ChangeSet {
        let commit = SourceCommit {
            format: SourceFormat::new("ICEBERG"),
            id: "1".into(),
            action: "append".into(),
            requested_ms: None,
            commit_time_ms: 0,
        };
        ChangeSet::new(
            commit,
            Schema::new(fields),
            xlake_model::PartitionSpec::default(),
        )
    }

    /// The state after versions whose `metaData` are `versions`, oldest first.
    fn state_of(versions: &[&Map<String, Json>]) -> LogState {
        let mut state = LogState::default();
        for (v, m) in versions.iter().enumerate() {
            state.physical.note(v as u64, m);
            state.metadata = Some((*m).clone());
        }
        state
    }

    /// The physical names of `shape`'s schema: `(logical path, physical)`, sorted.
    fn physicals(shape: &Shape) -> Vec<(String, String)> {
        let mut all: Vec<_> = shape.physical.clone().into_iter().collect();
        all.sort();
        all
    }

    fn s(text: &str) -> String {
        text.to_string()
    }

    fn with_id(mut f: Field, id: i32) -> Field {
        f.id = Some(id);
        f
    }

    #[test]
    fn a_dropped_then_re_added_name_gets_a_physical_name_no_other_field_had() {
        let id = || with_id(Field::required("id", PrimitiveType::Long), 1);
        let secret = |n| with_id(Field::optional("secret", PrimitiveType::String), n);
        let v0 = shape(None, &change(vec![id(), secret(2)]), &[]).unwrap();
        assert_eq!(
            physicals(&v0),
            [(s("id"), s("id")), (s("secret"), s("secret"))]
        );
        let v1 = shape(Some(&state_of(&[&v0.metadata])), &change(vec![id()]), &[]).unwrap();
        let state = state_of(&[&v0.metadata, &v1.metadata]);
        let v2 = shape(Some(&state), &change(vec![id(), secret(3)]), &[]).unwrap();
        // Old files' `secret` (field 2) never maps to field 3.
        assert_eq!(
            physicals(&v2),
            [(s("id"), s("id")), (s("secret"), s("col-3"))]
        );
        assert_eq!(
            v2.metadata["configuration"]["delta.columnMapping.maxColumnId"],
            "3"
        );
        // A version later, field 3 keeps it; a column added under a new name keeps its
        // name (the source's files hold it under that name).
        let state = state_of(&[&v0.metadata, &v1.metadata, &v2.metadata]);
        let tag = with_id(Field::optional("tag", PrimitiveType::String), 4);
        let v3 = shape(Some(&state), &change(vec![id(), secret(3), tag]), &[]).unwrap();
        assert_eq!(
            physicals(&v3),
            [
                (s("id"), s("id")),
                (s("secret"), s("col-3")),
                (s("tag"), s("tag"))
            ]
        );
        assert!(
            state.physical.reused.is_empty(),
            "{:?}",
            state.physical.reused
        );
    }

    #[test]
    fn a_renamed_field_keeps_its_name_and_one_re_adding_the_old_name_gets_another() {
        let id = || with_id(Field::required("id", PrimitiveType::Long), 1);
        let v0 = change(vec![
            id(),
            with_id(Field::optional("score", PrimitiveType::Double), 2),
        ]);
        let v0 = shape(None, &v0, &[]).unwrap();
        let renamed = || with_id(Field::optional("points", PrimitiveType::Double), 2);
        let v1 = shape(
            Some(&state_of(&[&v0.metadata])),
            &change(vec![id(), renamed()]),
            &[],
        )
        .unwrap();
        let state = state_of(&[&v0.metadata, &v1.metadata]);
        let readded = change(vec![
            id(),
            renamed(),
            with_id(Field::optional("score", PrimitiveType::String), 3),
        ]);
        let v2 = shape(Some(&state), &readded, &[]).unwrap();
        assert_eq!(
            physicals(&v2),
            [
                (s("id"), s("id")),
                (s("points"), s("score")),
                (s("score"), s("col-3"))
            ]
        );
        let state = state_of(&[&v0.metadata, &v1.metadata, &v2.metadata]);
        assert!(
            state.physical.reused.is_empty(),
            "{:?}",
            state.physical.reused
        );
    }

    #[test]
    fn nested_fields_get_fresh_names_by_parent_and_a_taken_col_name_is_skipped() {
        let st = |children: Vec<Field>| {
            let mut f = Field::optional("s", PrimitiveType::Long);
            f.data_type = DataType::Struct(children);
            with_id(f, 1)
        };
        let x = |n| with_id(Field::optional("x", PrimitiveType::Long), n);
        // The first version names a top-level column `col-4` (any name is a name).
        let col4 = with_id(Field::optional("col-4", PrimitiveType::Long), 2);
        let v0 = shape(None, &change(vec![st(vec![x(3)]), col4.clone()]), &[]).unwrap();
        assert_eq!(
            physicals(&v0),
            [
                (s("col-4"), s("col-4")),
                (s("s"), s("s")),
                (s("s.x"), s("x"))
            ]
        );
        let v1 = shape(
            Some(&state_of(&[&v0.metadata])),
            &change(vec![st(vec![])]),
            &[],
        )
        .unwrap();
        let state = state_of(&[&v0.metadata, &v1.metadata]);
        let y = with_id(Field::optional("col-4", PrimitiveType::Long), 4);
        let v2 = shape(Some(&state), &change(vec![st(vec![x(5)]), y]), &[]).unwrap();
        assert_eq!(
            physicals(&v2),
            [
                (s("col-4"), s("col-4-1")),
                (s("s"), s("s")),
                (s("s.x"), s("col-5"))
            ]
        );
        assert_eq!(
            v2.metadata["configuration"]["delta.columnMapping.maxColumnId"],
            "5"
        );
    }

    #[test]
    fn a_physical_name_given_to_two_field_ids_is_noted_naming_the_version() {
        let mut names = super::super::schema_out::PhysicalNames::default();
        let meta = |fields: &str| {
            let mut m = Map::new();
            m.insert(
                "schemaString".into(),
                json!(format!(r#"{{"type":"struct","fields":[{fields}]}}"#)),
            );
            m
        };
        let f = |name: &str, id: i64, physical: &str| {
            format!(
                r#"{{"name":"{name}","type":"string","nullable":true,"metadata":{{"delta.columnMapping.id":{id},"delta.columnMapping.physicalName":"{physical}"}}}}"#
            )
        };
        names.note(0, &meta(&f("score", 2, "score")));
        names.note(1, &meta(&f("points", 2, "score")));
        assert!(names.reused.is_empty());
        let broken = meta(&[f("points", 2, "score"), f("score", 3, "score")].join(","));
        names.note(2, &broken);
        assert_eq!(names.reused.len(), 1, "{:?}", names.reused);
        assert!(names.reused[0].starts_with("version 2: physical name score of field id 3"));
        // The next version gives field 3 a name of its own; field 2 keeps `score`.
        let state = LogState {
            metadata: Some(broken),
            physical: names,
            ..Default::default()
        };
        let next = change(vec![
            with_id(Field::optional("points", PrimitiveType::String), 2),
            with_id(Field::optional("score", PrimitiveType::String), 3),
        ]);
        let next = shape(Some(&state), &next, &[]).unwrap();
        assert_eq!(
            physicals(&next),
            [(s("points"), s("score")), (s("score"), s("col-3"))]
        );
    }

    #[test]
    fn field_ids_turn_column_mapping_on_and_a_rename_keeps_the_physical_name() {
        let first = change(vec![
            with_id(Field::required("id", PrimitiveType::Long), 1),
            with_id(Field::optional("name", PrimitiveType::String), 2),
        ]);
        let shape1 = shape(None, &first, &[]).unwrap();
        let config = &shape1.metadata["configuration"];
        assert_eq!(config["delta.columnMapping.mode"], "id");
        assert_eq!(config["delta.columnMapping.maxColumnId"], "2");
        let state = state_of(&[&shape1.metadata]);
        let renamed = change(vec![
            with_id(Field::required("id", PrimitiveType::Long), 1),
            with_id(Field::optional("label", PrimitiveType::String), 2),
        ]);
        let shape2 = shape(Some(&state), &renamed, &[]).unwrap();
        assert_eq!(shape2.physical["label"], "name");
        assert_eq!(shape2.metadata["id"], shape1.metadata["id"]);
        // Without ids (Hudi, Parquet): no column mapping.
        let plain = change(vec![Field::required("id", PrimitiveType::Long)]);
        let shape3 = shape(None, &plain, &[]).unwrap();
        assert!(shape3.metadata["configuration"]
            .get("delta.columnMapping.mode")
            .is_none());
        // A type change is refused naming the column.
        let state = state_of(&[&shape3.metadata]);
        let changed = change(vec![Field::required("id", PrimitiveType::String)]);
        let err = shape(Some(&state), &changed, &[])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("column id changes type"), "{err}");
    }
}
