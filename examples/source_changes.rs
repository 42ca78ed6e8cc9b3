//! Prints the change sets the Iceberg source reads from the table at `<dir>`, one JSON
//! object per line (snapshot id, operation, time, added and removed files, deletion
//! vectors as stored, schema with field ids, partition fields), for the interop suite to
//! compare with pyiceberg's own view of each snapshot. Deletion vectors are not decoded.
//!
//! `cargo run --example source_changes -- /tmp/warehouse/db.db/t`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use xlake_iceberg::IcebergSource;
use xlake_model::{ChangeSet, DataType, Field, VectorBytes};
use xlake_source::{collect, MirrorState, TableSource, TargetTakes};
use xlake_storage::TableStore;

fn field(f: &Field) -> serde_json::Value {
    let children: Vec<_> = match &f.data_type {
        DataType::Struct(fields) => fields.iter().map(field).collect(),
        DataType::List(e) => vec![field(e)],
        DataType::Map { key, value } => vec![field(key), field(value)],
        DataType::Primitive(_) => Vec::new(),
    };
    json!({"name": f.name, "id": f.id, "nullable": f.nullable, "children": children})
}

fn change(c: &ChangeSet) -> serde_json::Value {
    let added: Vec<_> = c
        .added
        .iter()
        .map(|f| {
            let dv = f.deletion_vector.as_ref().map(|dv| match &dv.bytes {
                VectorBytes::Stored { path, offset, size } => {
                    json!({"path": path, "offset": offset, "size": size, "cardinality": dv.cardinality})
                }
                VectorBytes::Inline(_) => json!({"inline": true}),
            });
            let partition: Vec<_> = f.partition.iter().map(|v| format!("{v:?}")).collect();
            json!({"path": f.path, "rows": f.record_count, "size": f.size_bytes,
                   "partition": partition, "dv": dv, "deleted_rows": f.deleted_rows})
        })
        .collect();
    json!({
        "id": c.commit.id, "action": c.commit.action, "time_ms": c.commit.commit_time_ms,
        "full_state": c.full_state, "data_change": c.data_change,
        "added": added, "removed": c.removed,
        "schema": c.schema.fields.iter().map(field).collect::<Vec<_>>(),
        "partition_fields": c.partition_spec.fields.iter().map(|p| &p.source).collect::<Vec<_>>(),
    })
}

#[tokio::main]
async fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: source_changes <table dir> [decode]");
    let decode = std::env::args().nth(2).as_deref() == Some("decode");
    let store = TableStore::open(&dir).unwrap();
    let mut source = IcebergSource::open(store)
        .await
        .unwrap()
        .expect("an Iceberg table");
    source.target_takes(TargetTakes {
        stored_deletion_vectors: !decode,
    });
    let replay = source.replay(&MirrorState::default()).await.unwrap();
    let collected = collect(replay).await;
    for c in &collected.changes {
        println!("{}", change(c));
    }
    if let Some(e) = collected.stopped {
        println!("{}", json!({"error": e.to_string()}));
    }
}
