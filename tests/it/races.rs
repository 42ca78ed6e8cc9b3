//! Races and crashes: several `xlake sync` processes on one table while commits arrive,
//! and syncs killed with SIGKILL at random moments; every round ends with exactly one
//! snapshot per source commit and a consistent check.
use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use xlake_sync::{check, SyncOptions};

fn spawn_sync(root: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["sync", root.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A small deterministic generator (no extra dependency): xorshift.
struct Rng(u64);

impl Rng {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn rounds(default: u64) -> u64 {
    std::env::var("XLAKE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn assert_exactly_once(root: &Path, versions: u64, round: u64) {
    let report = check(root.to_str().unwrap(), &SyncOptions::default(), false)
        .await
        .unwrap();
    assert!(report.consistent(), "round {round}: {report:?}");
    assert_eq!(
        (report.snapshots as u64, report.source_commits as u64),
        (versions, versions),
        "round {round}: {report:?}"
    );
}

#[tokio::test]
async fn four_writers_with_commits_arriving_mirror_each_commit_once() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let mut next_version = 3u64;
    let mut rng = Rng(0x5eed);
    for round in 0..rounds(50) {
        for _ in 0..=rng.next(3) {
            std::fs::write(
                root.join(format!("_delta_log/{next_version:020}.json")),
                format!(
                    "{{\"commitInfo\":{{\"timestamp\":{},\"operation\":\"SET TBLPROPERTIES\"}}}}\n",
                    1_900_000_000_000u64 + next_version
                ),
            )
            .unwrap();
            next_version += 1;
        }
        let children: Vec<Child> = (0..4).map(|_| spawn_sync(&root)).collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_exactly_once(&root, next_version, round).await;
    }
}

#[cfg(unix)]
#[tokio::test]
async fn syncs_killed_at_random_moments_leave_a_table_the_next_sync_completes() {
    let mut rng = Rng(0xdead_beef);
    for round in 0..rounds(25) {
        let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
        let instants = common::hudi::data_instants(&root).len() as u64;
        let child = spawn_sync(&root);
        std::thread::sleep(std::time::Duration::from_millis(rng.next(400)));
        Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status()
            .unwrap();
        let _ = child.wait_with_output();
        // Whatever the kill left, the table reads at some earlier snapshot and the next
        // sync completes the work.
        let out = spawn_sync(&root).wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_exactly_once(&root, instants, round).await;
        let deep = check(root.to_str().unwrap(), &SyncOptions::default(), true)
            .await
            .unwrap();
        assert!(deep.file_differences.is_empty(), "round {round}: {deep:?}");
    }
}
