//! The engine on stores that misbehave: no put-if-absent, a put-if-absent that is
//! ignored. The commit's atomicity rests on put-if-absent, so such stores are refused
//! before anything is written, unless the operator vouches for a single writer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::Arc;

use object_store::local::LocalFileSystem;
use xlake_storage::faults::{Fault, FaultyStore, Op, PutIfAbsent};
use xlake_storage::TableStore;
use xlake_sync::{check, sync_store, SyncOptions};

/// The table at `root` through a [`FaultyStore`] answering put-if-absent as `mode` says.
fn drill(root: &Path, mode: PutIfAbsent) -> TableStore {
    let store = FaultyStore::new(Arc::new(LocalFileSystem::new())).put_if_absent(mode);
    TableStore::from_store(
        Arc::new(store),
        object_store::path::Path::from_filesystem_path(root).unwrap(),
        root.to_str().unwrap().to_string(),
        String::new(),
    )
}

#[tokio::test]
async fn stores_without_working_put_if_absent_are_refused_unless_single_writer() {
    for mode in [PutIfAbsent::Unsupported, PutIfAbsent::Ignored] {
        let (_dir, root) = common::delta::extract("partitioned_3commits");
        let store = drill(&root, mode);
        let err = sync_store(store.clone(), &SyncOptions::default(), |_| {})
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("put-if-absent") && err.contains("--single-writer"),
            "{mode:?}: {err}"
        );
        assert!(
            std::fs::read_dir(root.join("metadata")).map_or(true, |d| d.count() == 0),
            "{mode:?}: nothing may be written before the refusal"
        );

        let options = SyncOptions {
            single_writer: true,
            ..Default::default()
        };
        let report = sync_store(store.with_single_writer(true), &options, |_| {})
            .await
            .unwrap();
        assert_eq!(report.written.len(), 3, "{mode:?}");
        let checked = check(root.to_str().unwrap(), &options, true).await.unwrap();
        assert!(checked.consistent(), "{mode:?}: {checked:?}");
    }
}

/// The table at `root` through a [`FaultyStore`] whose `nth` request of kind `op` gets
/// `fault`.
fn faulty(root: &Path, op: Op, nth: usize, fault: Fault) -> (TableStore, Arc<FaultyStore>) {
    let store = Arc::new(FaultyStore::new(Arc::new(LocalFileSystem::new())).fault(op, nth, fault));
    let table = TableStore::from_store(
        store.clone(),
        object_store::path::Path::from_filesystem_path(root).unwrap(),
        root.to_str().unwrap().to_string(),
        String::new(),
    );
    (table, store)
}

#[tokio::test]
async fn a_fault_at_any_write_or_read_leaves_a_readable_table_that_the_next_sync_completes() {
    // Every write, and the first 30 reads, of a whole sync, in turn: failed outright, or
    // done with the reply lost (the ambiguous failure: the object exists, the caller
    // hears an error).
    let mut cases = Vec::new();
    for n in 1..=40 {
        cases.push((Op::Put, n, Fault::Fail));
        cases.push((Op::Put, n, Fault::LostReply));
    }
    for n in 1..=30 {
        cases.push((Op::Get, n, Fault::Fail));
    }
    let mut fired = 0;
    for (op, n, fault) in cases {
        let (_dir, root) = common::delta::extract("partitioned_3commits");
        let (store, faults) = faulty(&root, op, n, fault);
        let outcome = sync_store(store, &SyncOptions::default(), |_| {}).await;
        if faults.fired().is_empty() {
            assert!(outcome.is_ok(), "{op:?} {n}: {outcome:?}");
            continue;
        }
        fired += 1;
        if let Err(e) = &outcome {
            assert!(
                e.to_string().contains(root.to_str().unwrap()),
                "{op:?} {n} {fault:?}: {e}"
            );
        }
        // Whatever happened, the table reads (or does not exist yet), and a clean sync
        // ends with one snapshot per version and the source's files.
        let location = root.to_str().unwrap();
        xlake_iceberg::IcebergTable::new(TableStore::open(location).unwrap())
            .load()
            .await
            .unwrap_or_else(|e| panic!("{op:?} {n} {fault:?}: unreadable after the fault: {e}"));
        sync_store(
            TableStore::open(location).unwrap(),
            &SyncOptions::default(),
            |_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("{op:?} {n} {fault:?}: the next sync failed: {e}"));
        let report = check(location, &SyncOptions::default(), true)
            .await
            .unwrap();
        assert!(
            report.consistent() && report.snapshots == 3,
            "{op:?} {n} {fault:?}: {report:?}"
        );
    }
    assert!(fired >= 30, "only {fired} faults fired");
}
