//! The engine on stores that misbehave: no put-if-absent, a put-if-absent that is
//! ignored (refused before anything is written, unless the operator vouches for a single
//! writer, since the commit's atomicity rests on put-if-absent); requests that fail,
//! lose their reply or are cut short (retried); outages (a clean failure, then recovery).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::local::LocalFileSystem;
use xlake_storage::faults::{Fault, FaultyStore, Op, PutIfAbsent};
use xlake_storage::{RetryPolicy, TableStore};
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

/// The table at `root` through `faults`, retrying as `retry` says.
fn through(root: &Path, faults: FaultyStore, retry: RetryPolicy) -> (TableStore, Arc<FaultyStore>) {
    let store = Arc::new(faults);
    let table = TableStore::from_store(
        store.clone(),
        object_store::path::Path::from_filesystem_path(root).unwrap(),
        root.to_str().unwrap().to_string(),
        String::new(),
    )
    .with_retry(retry);
    (table, store)
}

/// The table at `root` through a [`FaultyStore`] whose `nth` request of kind `op` gets
/// `fault`, with no retries: every fault is final.
fn faulty(root: &Path, op: Op, nth: usize, fault: Fault) -> (TableStore, Arc<FaultyStore>) {
    let faults = FaultyStore::new(Arc::new(LocalFileSystem::new())).fault(op, nth, fault);
    through(root, faults, RetryPolicy::none())
}

/// Retries without the production pauses.
fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        first_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
    }
}

/// After whatever happened, the table reads (or does not exist yet), and a clean sync
/// ends with one snapshot per version of `partitioned_3commits`.
async fn recovers(root: &Path, case: &str) {
    let location = root.to_str().unwrap();
    xlake_iceberg::IcebergTable::new(TableStore::open(location).unwrap())
        .load()
        .await
        .unwrap_or_else(|e| panic!("{case}: unreadable after the fault: {e}"));
    sync_store(
        TableStore::open(location).unwrap(),
        &SyncOptions::default(),
        |_| {},
    )
    .await
    .unwrap_or_else(|e| panic!("{case}: the next sync failed: {e}"));
    let report = check(location, &SyncOptions::default(), true)
        .await
        .unwrap();
    assert!(
        report.consistent() && report.snapshots == 3,
        "{case}: {report:?}"
    );
}

#[tokio::test]
async fn one_transient_fault_anywhere_is_retried_and_the_sync_completes() {
    // A blip at each of the first 40 writes and 30 reads: a failure, a reply lost after
    // the write took effect, a body cut short halfway. Retried, none is seen.
    let mut cases = Vec::new();
    for n in 1..=40 {
        cases.push((Op::Put, n, Fault::Fail));
        cases.push((Op::Put, n, Fault::LostReply));
    }
    for n in 1..=30 {
        cases.push((Op::Get, n, Fault::Fail));
        cases.push((Op::Get, n, Fault::CutShort));
    }
    for n in 1..=5 {
        cases.push((Op::List, n, Fault::Fail));
    }
    let mut fired = 0;
    for (op, n, fault) in cases {
        let (_dir, root) = common::delta::extract("partitioned_3commits");
        let faults = FaultyStore::new(Arc::new(LocalFileSystem::new())).fault(op, n, fault);
        let (store, faults) = through(&root, faults, quick_retries());
        let report = sync_store(store, &SyncOptions::default(), |_| {})
            .await
            .unwrap_or_else(|e| panic!("{op:?} {n} {fault:?}: not retried: {e}"));
        fired += usize::from(!faults.fired().is_empty());
        assert_eq!(report.written.len(), 3, "{op:?} {n} {fault:?}");
        let checked = check(root.to_str().unwrap(), &SyncOptions::default(), true)
            .await
            .unwrap();
        assert!(checked.consistent(), "{op:?} {n} {fault:?}: {checked:?}");
    }
    assert!(fired >= 50, "only {fired} faults fired");
}

#[tokio::test]
async fn an_outage_fails_the_sync_cleanly_after_its_retries() {
    // From the nth request on, every one fails: the retries run out, the error names the
    // table, and the next sync (the store back) completes the table.
    for (op, n) in [
        (Op::Put, 1),
        (Op::Put, 4),
        (Op::Put, 9),
        (Op::Get, 3),
        (Op::Get, 12),
    ] {
        let (_dir, root) = common::delta::extract("partitioned_3commits");
        let faults = FaultyStore::new(Arc::new(LocalFileSystem::new())).outage_from(op, n);
        let (store, faults) = through(&root, faults, quick_retries());
        let err = sync_store(store, &SyncOptions::default(), |_| {})
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(root.to_str().unwrap()) && err.contains("injected fault"),
            "{op:?} {n}: {err}"
        );
        let fired = faults.fired().len();
        assert!(
            fired >= 4 && fired % 4 == 0,
            "{op:?} {n}: each request failed four attempts, then gave up: {fired}"
        );
        recovers(&root, &format!("outage of {op:?} from {n}")).await;
    }
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
        recovers(&root, &format!("{op:?} {n} {fault:?}")).await;
    }
    assert!(fired >= 30, "only {fired} faults fired");
}
