//! Helpers of the integration tests that need the `xlake` binary or the whole engine; the
//! fixtures themselves live in the `xlake-test-utils` crate (re-exported here, so that a
//! test says `common::hudi::extract(..)`).

pub mod serve;

pub use xlake_test_utils::{delta, foundation, hudi};

/// Run the `xlake` binary; its exit code and stdout followed by stderr.
pub fn xlake(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A Delta commit `version` changing nothing but its commit info: a sync mirrors it as a
/// new snapshot in a new metadata version.
pub fn empty_delta_commit(root: &std::path::Path, version: u64) {
    std::fs::write(
        root.join(format!("_delta_log/{version:020}.json")),
        "{\"commitInfo\":{\"timestamp\":1800000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
    )
    .unwrap();
}

/// Files under `<root>/metadata` that no metadata version refers to: with a `vN` there,
/// xlake's orphan listing; with none, every file in the folder.
pub async fn leftovers(root: &std::path::Path) -> Vec<String> {
    let dir = root.join("metadata");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    if !files.iter().any(|f| f.ends_with(".metadata.json")) {
        return files;
    }
    let store = xlake_storage::TableStore::open(root.to_str().unwrap()).unwrap();
    xlake_iceberg::orphans::orphan_files(&store, i64::MAX)
        .await
        .unwrap()
}

/// Sync the table at `root`, then check it deeply: consistent, with `snapshots` snapshots.
/// `what` names the case in a failure.
pub async fn sync_consistent(root: &std::path::Path, snapshots: usize, what: &str) {
    let location = root.to_str().unwrap();
    let options = xlake_sync::SyncOptions::default();
    xlake_sync::sync(location, &options, |_| {})
        .await
        .unwrap_or_else(|e| panic!("{what}: the sync failed: {e}"));
    let report = xlake_sync::check(location, &options, true).await.unwrap();
    assert!(
        report.consistent() && report.snapshots == snapshots,
        "{what}: {report:?}"
    );
}
