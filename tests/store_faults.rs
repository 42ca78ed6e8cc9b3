//! The engine on stores that misbehave: no put-if-absent, a put-if-absent that is
//! ignored. The commit's atomicity rests on put-if-absent, so such stores are refused
//! before anything is written, unless the operator vouches for a single writer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::Arc;

use object_store::local::LocalFileSystem;
use xlake_storage::faults::{FaultyStore, PutIfAbsent};
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
