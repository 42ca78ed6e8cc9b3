//! The scheduled job (`xlake run`): twenty tables, one broken.
use crate::common;

use std::process::Command;

#[test]
fn one_broken_table_never_stops_the_others_and_is_reported() {
    let mut dirs = Vec::new();
    let mut config = String::from("concurrency = 3\n");
    for i in 0..19 {
        let name = if i % 2 == 0 {
            "simple_table"
        } else {
            "partitioned_3commits"
        };
        let (dir, root) = common::delta::extract(name);
        config.push_str(&format!("[[tables]]\nlocation = \"{}\"\n", root.display()));
        dirs.push(dir);
    }
    let broken = tempfile::tempdir().unwrap();
    config.push_str(&format!(
        "[[tables]]\nlocation = \"{}\"\n",
        broken.path().display()
    ));
    let file = broken.path().join("tables.toml");
    std::fs::write(&file, config).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["run", "--config", file.to_str().unwrap(), "--once"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        19,
        "{stdout}"
    );
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 1, "{stdout}");
    assert!(
        failed[0].contains("not a Hudi, Delta or Iceberg table"),
        "{stdout}"
    );
    assert!(stdout.contains("20 tables: 19 synced"), "{stdout}");

    // A second cycle finds the 19 up to date.
    let again = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["run", "--config", file.to_str().unwrap(), "--once"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("(0 snapshots written)"), "{stdout}");
}

#[cfg(unix)]
#[test]
fn a_repeating_job_stops_on_sigterm() {
    let (_dir, root) = common::delta::extract("simple_table");
    let file = root.join("tables.toml");
    std::fs::write(
        &file,
        format!("[[tables]]\nlocation = \"{}\"\n", root.display()),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["run", "--config", file.to_str().unwrap(), "--every", "1h"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first cycle to finish (the table gets its metadata), then terminate.
    for _ in 0..200 {
        if root.join("metadata/version-hint.text").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_job_expires_snapshots_as_each_table_asks() {
    let (_a, kept) = common::delta::extract("partitioned_3commits");
    let (_b, limited) = common::delta::extract("partitioned_3commits");
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!(
            "[[tables]]\nlocation = \"{}\"\n[[tables]]\nlocation = \"{}\"\nkeep_snapshots = 1\n",
            kept.display(),
            limited.display()
        ),
    )
    .unwrap();
    let (code, out) =
        common::xlake(&["run", "--config", config.path().to_str().unwrap(), "--once"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 snapshots written, 2 expired"), "{out}");
    let snapshots = |root: &std::path::Path| {
        common::xlake(&["snapshots", root.to_str().unwrap()])
            .1
            .matches("DELTA ")
            .count()
    };
    assert_eq!((snapshots(&kept), snapshots(&limited)), (3, 1));
}

#[test]
fn a_pass_with_nothing_new_still_expires_what_a_vacuum_deleted() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!("[[tables]]\nlocation = \"{}\"\n", root.display()),
    )
    .unwrap();
    let run = || common::xlake(&["run", "--config", config.path().to_str().unwrap(), "--once"]);
    let (code, out) = run();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 snapshots written\n"), "{out}");
    // VACUUM (no new version): the files version 1 removed are gone.
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000001.json")).unwrap();
    let removed: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("remove")?.get("path")?.as_str().map(String::from))
        .collect();
    assert!(!removed.is_empty());
    for p in &removed {
        let _ = std::fs::remove_file(root.join(p));
    }
    let (code, out) = run();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 snapshots written, 1 expired"), "{out}");
    // Two snapshots are left: a further pass has nothing new and nothing to expire.
    let (code, out) = run();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 snapshots written\n"), "{out}");
}

#[test]
fn the_job_expires_a_delta_targets_log_to_its_checkpoint() {
    let (_d, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!(
            "[[tables]]\nlocation = \"{}\"\ntarget = \"delta\"\nkeep_snapshots = 1\n",
            root.display()
        ),
    )
    .unwrap();
    let (code, out) =
        common::xlake(&["run", "--config", config.path().to_str().unwrap(), "--once"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("12 snapshots written, 10 expired"), "{out}");
    let log = root.join("_delta_log");
    assert!(!log.join("00000000000000000009.json").exists());
    assert!(log.join("00000000000000000010.json").exists());
    assert!(log.join("00000000000000000010.checkpoint.parquet").exists());
}
