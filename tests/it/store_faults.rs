//! The engine on stores that misbehave: no put-if-absent, a put-if-absent that is
//! ignored (refused before anything is written, unless the operator vouches for a single
//! writer, since the commit's atomicity rests on put-if-absent); requests that fail,
//! lose their reply or are cut short (retried); outages (a clean failure, then recovery);
//! a write held up while readers look (they see only whole versions).
use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::table::StaticTable;
use iceberg::TableIdent;
use object_store::local::LocalFileSystem;
use xlake_iceberg::SyncMetadata;
use xlake_storage::faults::{Fault, FaultyStore, Op, PutIfAbsent};
use xlake_storage::{RetryPolicy, TableStore};
use xlake_sync::{check, sync, sync_store, SyncOptions};

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
        let report = sync_store(store.clone().with_single_writer(true), &options, |_| {})
            .await
            .unwrap();
        assert_eq!(report.written.len(), 3, "{mode:?}");
        let checked = check(root.to_str().unwrap(), &options, true).await.unwrap();
        assert!(checked.consistent(), "{mode:?}: {checked:?}");
        // An upgrade writes a `vN` too: refused on such a store, nothing written.
        let before = xlake_test_utils::metadata_snapshot(&root);
        let err = xlake_sync::upgrade::upgrade(&store, 3, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("put-if-absent"), "{mode:?}: {err}");
        assert_eq!(
            xlake_test_utils::metadata_snapshot(&root),
            before,
            "{mode:?}"
        );
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
    common::sync_consistent(root, 3, case).await;
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
    let retries_before = xlake_storage::retries();
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
    // The retries are counted, for /metrics. (Not one per fault: a request whose failure
    // its caller survives is not retried; and other tests of this process retry too.)
    let retried = xlake_storage::retries() - retries_before;
    assert!(retried > 0, "no retry counted for {fired} faults");
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
    let (mut fired, mut orphan_free) = (0, 0);
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
            let e = e.to_string();
            assert!(
                e.contains(root.to_str().unwrap()),
                "{op:?} {n} {fault:?}: {e}"
            );
            // Files written for what was not published are deleted again, unless the
            // failed write was the `vN` itself (which may have landed: kept).
            if !e.contains(".metadata.json") {
                let left = common::leftovers(&root).await;
                assert!(left.is_empty(), "{op:?} {n} {fault:?}: {e}: {left:?}");
                orphan_free += 1;
            }
        }
        recovers(&root, &format!("{op:?} {n} {fault:?}")).await;
    }
    assert!(fired >= 30, "only {fired} faults fired");
    assert!(
        orphan_free >= 10,
        "only {orphan_free} failed syncs were checked for orphans"
    );
}

/// Rows of one snapshot as iceberg-rust scans them, a sorted line per row.
async fn scan_rows(metadata_file: &Path, snapshot_id: i64) -> Result<Vec<String>, String> {
    let table = StaticTable::from_metadata_file(
        metadata_file.to_str().unwrap(),
        TableIdent::from_strs(["db", "t"]).unwrap(),
        FileIO::new_with_fs(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let batches: Vec<RecordBatch> = table
        .scan()
        .snapshot_id(snapshot_id)
        .select_all()
        .build()
        .map_err(|e| e.to_string())?
        .to_arrow()
        .await
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for batch in &batches {
        let options = FormatOptions::default();
        let columns: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for i in 0..batch.num_rows() {
            let row: Vec<String> = columns.iter().map(|c| c.value(i).to_string()).collect();
            rows.push(row.join("|"));
        }
    }
    rows.sort();
    Ok(rows)
}

/// What a reader finds at `metadata_file`: the source version its current snapshot
/// mirrors, and that snapshot's rows.
async fn current(metadata_file: &Path) -> Result<(String, Vec<String>), String> {
    let bytes = std::fs::read(metadata_file).map_err(|e| e.to_string())?;
    let metadata = xlake_iceberg::table::parse_metadata(&bytes).map_err(|e| e.to_string())?;
    let snapshot = metadata.current_snapshot().ok_or("no current snapshot")?;
    let version = SyncMetadata::from_summary(&snapshot.summary().additional_properties)
        .and_then(|m| m.source_identifier)
        .ok_or("no source commit in the summary")?;
    Ok((
        version,
        scan_rows(metadata_file, snapshot.snapshot_id()).await?,
    ))
}

/// What readers see now: through `version-hint.text` (pyiceberg, DuckDB) and through the
/// newest `vN.metadata.json` listed (readers that list); `None` for a reader that finds
/// nothing published.
async fn readers_now(root: &Path) -> Vec<Option<Result<(String, Vec<String>), String>>> {
    let dir = root.join("metadata");
    let hinted = std::fs::read_to_string(dir.join("version-hint.text"))
        .ok()
        .map(|n| dir.join(format!("v{n}.metadata.json")));
    let newest = std::fs::read_dir(&dir).ok().and_then(|entries| {
        entries
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_prefix('v')?
                    .strip_suffix(".metadata.json")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .map(|n| dir.join(format!("v{n}.metadata.json")))
    });
    let mut seen = Vec::new();
    for file in [hinted, newest] {
        seen.push(match file {
            Some(f) => Some(current(&f).await),
            None => None,
        });
    }
    seen
}

#[tokio::test]
async fn a_reader_during_a_stalled_write_sees_only_whole_versions() {
    // Version 0 is mirrored; then the sync of versions 1 and 2 is held before its nth
    // write while readers look at the table: each must find either nothing new or a
    // whole version, whose rows equal those of that version in a table synced apart,
    // without faults (other manifests, same data).
    let (_clean_dir, clean) = common::delta::extract("partitioned_3commits");
    sync(clean.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let clean_metadata = clean.join("metadata/v1.metadata.json");
    let metadata =
        xlake_iceberg::table::parse_metadata(&std::fs::read(&clean_metadata).unwrap()).unwrap();
    let mut reference = std::collections::HashMap::new();
    for s in metadata.snapshots() {
        let version = SyncMetadata::from_summary(&s.summary().additional_properties)
            .and_then(|m| m.source_identifier)
            .unwrap();
        let rows = scan_rows(&clean_metadata, s.snapshot_id()).await.unwrap();
        reference.insert(version, rows);
    }
    assert_eq!(reference.len(), 3);
    let mut stalled = 0;
    // Held at the hint's write, the new vN is there whole for readers that list.
    let mut listed_new = false;
    for n in 1..=12 {
        let (_dir, root) = common::delta::extract("partitioned_3commits");
        let aside = tempfile::tempdir().unwrap();
        let later = common::delta::set_aside(&root, &[1, 2], aside.path());
        let location = root.to_str().unwrap();
        sync(location, &SyncOptions::default(), |_| {})
            .await
            .unwrap();
        common::delta::put_back(later);
        let before = readers_now(&root).await;

        let faults = FaultyStore::new(Arc::new(LocalFileSystem::new())).fault(
            Op::Put,
            n,
            Fault::Delay(Duration::from_secs(30)),
        );
        let (store, faults) = through(&root, faults, RetryPolicy::none());
        // The sync runs until it is held at its nth write; then readers look, and the
        // held sync is dropped there, as a killed process would be.
        let options = SyncOptions::default();
        let held = sync_store(store, &options, |_| {});
        let watch = async {
            while faults.fired().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            readers_now(&root).await
        };
        let during = tokio::select! {
            done = held => {
                done.unwrap();
                continue;
            }
            during = watch => during,
        };
        stalled += 1;
        let version = |i: usize| match &during[i] {
            Some(Ok((v, _))) => v.clone(),
            other => format!("{other:?}"),
        };
        assert_eq!(
            version(0),
            "0",
            "put {n}: through the hint, the held commit is not there yet"
        );
        listed_new |= version(1) == "2";
        // The dropped writer left its table for the next sync to complete.
        sync(location, &SyncOptions::default(), |_| {})
            .await
            .unwrap();
        let after = readers_now(&root).await;

        for (when, seen) in [("before", &before), ("during", &during), ("after", &after)] {
            for view in seen {
                let Some(view) = view else { continue };
                let (version, rows) = view
                    .as_ref()
                    .unwrap_or_else(|e| panic!("put {n}, {when}: a reader failed: {e}"));
                assert_eq!(
                    Some(rows),
                    reference.get(version),
                    "put {n}, {when}: version {version}"
                );
            }
        }
        let (version, _) = after[0].as_ref().unwrap().as_ref().unwrap();
        assert_eq!(version, "2", "put {n}: the next sync completed the table");
    }
    assert!(stalled >= 4, "only {stalled} writes stalled");
    assert!(listed_new, "no stall came after the new vN was written");
}

/// Each mirrored version's commit file is read for its actions and its time comes with
/// the listing (an object store's gives it for nothing) or the read: no `head` of it
/// (hostile review 4, F8: one more request per version, since the read gave no time).
#[tokio::test]
async fn a_commit_file_is_not_asked_for_its_time_apart() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let faults = FaultyStore::new(Arc::new(LocalFileSystem::new()));
    let (store, faults) = through(&root, faults, RetryPolicy::none());
    let report = sync_store(store.clone(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    assert_eq!(report.written.len(), 3);
    let commit = "_delta_log/00000000000000000001.json";
    let reads = |faults: &FaultyStore| {
        let reads = faults.reads();
        reads.iter().filter(|r| r.ends_with(commit)).count()
    };
    // The first pass over its removals, then the version itself.
    assert_eq!(reads(&faults), 2, "{:?}", faults.reads());
    // An incremental sync of one more version: read once (one version, no first pass).
    let body =
        "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n";
    std::fs::write(root.join("_delta_log/00000000000000000003.json"), body).unwrap();
    let faults = FaultyStore::new(Arc::new(LocalFileSystem::new()));
    let (store, faults) = through(&root, faults, RetryPolicy::none());
    let report = sync_store(store, &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    assert_eq!(report.written.len(), 1);
    let newest = "_delta_log/00000000000000000003.json";
    let read = faults
        .reads()
        .iter()
        .filter(|r| r.ends_with(newest))
        .count();
    assert_eq!(read, 1, "{:?}", faults.reads());
}
