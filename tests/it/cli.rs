//! The command line as a new user meets it (issue 20, "First hour with xlake"): the demo
//! never deletes, a closed pipe never panics, intervals need a unit, every wrong location
//! is named with exit code 2, the mirrored view is read from the snapshots, a job file
//! lists each table once, and every command's --help is pinned (tests/it/snapshots/).
use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn xlake() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlake"))
}

/// Exit code, stdout, stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    outcome(xlake().args(args).output().unwrap())
}

fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Everything under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(tree(&p));
        }
        out.push(p.strip_prefix(dir).unwrap().display().to_string());
    }
    out.sort();
    out
}

#[test]
fn the_demo_refuses_a_folder_with_anything_in_it_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("keep")).unwrap();
    std::fs::write(dir.path().join("keep/notes.txt"), b"mine").unwrap();
    let before = tree(dir.path());
    let (code, out, err) = run(&["demo", s(dir.path())]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("not empty") && err.contains("never deletes"),
        "{err}"
    );
    assert_eq!(tree(dir.path()), before);
    assert_eq!(
        std::fs::read(dir.path().join("keep/notes.txt")).unwrap(),
        b"mine"
    );

    let file = dir.path().join("keep/notes.txt");
    let (code, _, err) = run(&["demo", s(&file)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a file, not a folder"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
}

#[test]
fn the_demo_unpacks_into_a_new_folder_mirrors_it_and_says_what_next() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("new/demo");
    let (code, out, err) = run(&["demo", s(&table)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("12 snapshots written"), "{out}");
    assert!(out.contains(&format!("xlake check {}", s(&table))), "{out}");
    assert!(
        out.contains("iceberg_scan") && out.contains("pyiceberg"),
        "{out}"
    );
    let (code, out, err) = run(&["check", s(&table), "--deep"]);
    assert_eq!(code, 0, "{out}{err}");
    // An empty folder is fine too.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(run(&["demo", s(&empty)]).0, 0);
}

/// Run with standard output a pipe whose reader is already gone.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = xlake()
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let (code, _, err) = outcome(out);
    (code, err)
}

#[test]
fn a_closed_pipe_ends_every_printing_command_quietly_with_141() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    assert_eq!(run(&["demo", s(&demo)]).0, 0);
    let (_fresh_dir, fresh) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let config = dir.path().join("tables.toml");
    std::fs::write(&config, format!("[[tables]]\nlocation = {:?}\n", s(&demo))).unwrap();
    let (t, c) = (s(&demo), s(&config));
    let new_demo = dir.path().join("demo2");
    let cases: Vec<Vec<&str>> = vec![
        vec!["demo", s(&new_demo)],
        vec!["sync", s(&fresh)],
        vec!["sync", t],
        vec!["commit", t, "--instant", "20260307135709890"],
        vec!["snapshots", t],
        vec!["snapshots", t, "--json"],
        vec!["check", t, "--deep"],
        vec!["check", t, "--json"],
        vec!["inspect", t],
        vec!["inspect", t, "--json"],
        vec!["expire", t],
        vec!["cleanup", t, "--dry-run"],
        vec!["upgrade", t, "--format-version", "3"],
        vec!["run", "--config", c, "--once"],
        // Would run forever: the closed pipe ends them at the first line.
        vec!["run", "--config", c, "--every", "1s"],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--insecure-no-key",
            "--allow",
            t,
        ],
    ];
    for args in &cases {
        let (code, err) = into_closed_pipe(args);
        assert_eq!(code, 141, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // The sync cut short by the closed pipe left its table consistent.
    let (code, out, err) = run(&["check", s(&fresh), "--allowed-lag", "12"]);
    assert_eq!(code, 0, "{out}{err}");
    // clap prints help itself.
    let (code, err) = into_closed_pipe(&["--help"]);
    assert!(!err.contains("panicked") && code != 101, "{code}: {err}");
}

#[test]
fn intervals_need_a_unit_and_every_at_least_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tables.toml");
    std::fs::write(&config, "").unwrap();
    let c = s(&config);
    for (every, said) in [
        ("0s", "must be at least 1s"),
        ("500ms", "must be at least 1s"),
        ("5", "needs a unit"),
    ] {
        let (code, out, err) = run(&["run", "--config", c, "--every", every]);
        assert_eq!(code, 2, "--every {every}: {out}{err}");
        assert!(err.contains(said), "--every {every}: {err}");
    }
    let (code, _, err) = run(&["expire", s(dir.path()), "--max-snapshot-age", "7"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a unit"), "{err}");
    let (code, _, err) = run(&["cleanup", s(dir.path()), "--older-than", "60"]);
    assert_eq!(code, 2, "{err}");
    std::fs::write(
        &config,
        "[[tables]]\nlocation = \"/x\"\nmax_snapshot_age = \"7\"\n",
    )
    .unwrap();
    let (code, _, err) = run(&["run", "--config", c, "--once"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a unit"), "{err}");
}

#[test]
fn every_wrong_location_exits_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("table.parquet");
    std::fs::write(&file, b"PAR1").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = dir.path().join("missing");
    let mut cases = vec![
        (s(&missing).to_string(), "no such folder"),
        (s(&file).to_string(), "a file, not a folder"),
        ("tbl:1".to_string(), "tbl:1: no such folder"),
        (
            "hdfs://nn/t".to_string(),
            "not supported by any xlake build",
        ),
    ];
    if !cfg!(feature = "cloud") {
        cases.push((
            "s3://bucket/t".to_string(),
            "need xlake built with `--features cloud`",
        ));
    }
    let e = s(&empty);
    // The empty folder's message depends on the command (below).
    for (location, said) in cases.iter().map(|(l, m)| (l.as_str(), *m)).chain([(e, "")]) {
        for command in [
            vec!["sync", location],
            vec!["commit", location, "--version", "0"],
            vec!["check", location],
            vec!["inspect", location],
            vec!["snapshots", location],
            vec!["expire", location],
            vec!["upgrade", location, "--format-version", "3"],
            vec!["cleanup", location],
        ] {
            // With warnings on, a retried request would show.
            let out = xlake()
                .args(&command)
                .current_dir(dir.path())
                .env("RUST_LOG", "warn")
                .output()
                .unwrap();
            let (code, stdout, err) = outcome(out);
            assert_eq!(code, 2, "{command:?}: {stdout}{err}");
            let source_only = ["sync", "commit", "check", "inspect"].contains(&command[0]);
            let said = match (location == e, source_only) {
                (true, true) => "not a Hudi, Delta or Iceberg table",
                (true, false) => "not a table: no Hudi",
                _ => said,
            };
            assert!(err.contains(said), "{command:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{command:?}: {err}");
            assert!(!err.contains("retrying"), "{command:?}: {err}");
        }
    }
    // `tbl:1` is a relative path: where it exists, it is that folder.
    let (_keep, table) = common::delta::extract("partitioned_3commits");
    std::fs::rename(&table, dir.path().join("tbl:1")).unwrap();
    let out = xlake()
        .args(["sync", "tbl:1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (code, stdout, err) = outcome(out);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(dir.path().join("tbl:1/metadata/v1.metadata.json").is_file());
}

/// What refuses what was asked exits 2 like a wrong location: every command on another
/// writer's Delta log under `--target delta`, and `commit --version` on a Hudi table
/// (hostile review, 2026-12-05: they exited 1).
#[test]
fn a_foreign_target_and_a_wrong_commit_flag_exit_2() {
    let (_keep, delta) = common::delta::extract("partitioned_3commits");
    for command in ["check", "inspect", "snapshots", "expire", "cleanup"] {
        let (code, stdout, err) = run(&[command, s(&delta), "--target", "delta"]);
        assert_eq!(code, 2, "{command}: {stdout}{err}");
        assert!(err.contains("not written by xlake"), "{command}: {err}");
    }
    let (_keep, hudi) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (code, stdout, err) = run(&["commit", s(&hudi), "--version", "3"]);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(
        err.contains("--version names a Delta version, but this is a Hudi table"),
        "{err}"
    );
    assert!(!hudi.join("metadata").exists());
}

#[test]
fn a_file_inside_a_table_is_not_retried() {
    // A table whose `.hoodie` is a file: the read through it is refused by the OS, once.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".hoodie"), b"x").unwrap();
    let out = xlake()
        .args(["sync", s(dir.path())])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let (code, stdout, err) = outcome(out);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(!err.contains("retrying"), "{err}");
}

#[test]
fn check_and_inspect_read_the_mirrored_view_from_the_snapshots() {
    let (_dir, root) = common::hudi::extract("sample_table_mor_avro_v9_txns_simple_nometa");
    let t = s(&root);
    let (code, _, err) = run(&["check", t]);
    assert_eq!(code, 2, "not mirrored yet, not opted in: {err}");
    assert!(err.contains("--mor-read-optimized"), "{err}");
    let (code, out, err) = run(&["sync", t, "--mor-read-optimized"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&["check", t, "--deep"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("consistent") && out.contains("deep: compared snapshot"),
        "{out}"
    );
    let (code, out, err) = run(&["inspect", t]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("read-optimized view"), "{out}");
    // Repeating the flag is still accepted.
    assert_eq!(run(&["check", t, "--mor-read-optimized"]).0, 0);
}

#[test]
fn check_json_says_consistent_with_the_allowed_lag_and_what_deep_compared() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    let versions = common::delta::commit_versions(&root);
    let newest = versions.last().unwrap().to_string();
    // Mirror all but the newest version.
    let previous = versions[versions.len() - 2].to_string();
    assert_eq!(run(&["commit", t, "--version", &previous]).0, 0);
    let json = |args: &[&str]| -> serde_json::Value {
        let (_, out, err) = run(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
    };
    let strict = json(&["check", t, "--json"]);
    assert_eq!(strict["consistent"], false);
    assert_eq!(strict["deep"], false);
    let lagging = json(&["check", t, "--json", "--allowed-lag", "1"]);
    assert_eq!(lagging["consistent"], true, "{lagging}");
    assert_eq!(lagging["allowed_lag"], 1);
    assert_eq!(run(&["commit", t, "--version", &newest]).0, 0);
    let deep = json(&["check", t, "--json", "--deep", "--all"]);
    assert_eq!(deep["deep"], true);
    let compared = deep["compared"].as_array().unwrap();
    assert_eq!(compared.len(), versions.len(), "{deep}");
    assert!(compared
        .iter()
        .all(|c| c["differences"] == serde_json::json!([])));
    let (_, out, _) = run(&["check", t, "--deep", "--all"]);
    assert!(
        out.contains(&format!("deep: compared {} snapshots", versions.len())),
        "{out}"
    );
    // snapshots --json lists them, oldest first.
    let list = json(&["snapshots", t, "--json"]);
    let commits: Vec<String> = list["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source_commit"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = versions.iter().map(u64::to_string).collect();
    assert_eq!(commits, expected);
    // inspect says plainly that the log has no checkpoint.
    let (_, out, _) = run(&["inspect", t]);
    assert!(out.contains("no checkpoint: readers replay all"), "{out}");
}

#[test]
fn cleanup_cleans_orphans_by_default_and_still_takes_the_flag() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(run(&["sync", t]).0, 0);
    // Named as xlake names a manifest: cleanup deletes nothing else.
    let stray = root.join("metadata/00000000-dead-beef-0000-000000000000-m0.avro");
    std::fs::write(&stray, b"x").unwrap();
    let (code, out, err) = run(&[
        "cleanup",
        t,
        "--older-than",
        "0s",
        "--no-writer-running",
        "--dry-run",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("would delete") && stray.exists(), "{out}");
    let (code, out, err) = run(&[
        "cleanup",
        t,
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 orphan metadata files") && !stray.exists(),
        "{out}"
    );
}

#[test]
fn a_table_listed_twice_in_a_job_file_is_refused() {
    let (dir, root) = common::delta::extract("partitioned_3commits");
    let relative = root.strip_prefix(dir.path()).unwrap();
    let config = dir.path().join("tables.toml");
    std::fs::write(
        &config,
        format!(
            "[[tables]]\nlocation = {:?}\n[[tables]]\nlocation = \"./{}/\"\n",
            s(&root),
            relative.display()
        ),
    )
    .unwrap();
    let out = xlake()
        .args(["run", "--config", s(&config), "--once"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (code, stdout, err) = outcome(out);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("listed twice"), "{err}");
    assert!(!root.join("metadata").exists(), "nothing ran");
}

/// Every command's help, pinned: a change fails here until reviewed (`cargo insta review`,
/// or INSTA_UPDATE=always then a look at the diff).
#[test]
fn help_texts_are_pinned() {
    let commands = [
        "",
        "demo",
        "sync",
        "commit",
        "serve",
        "run",
        "check",
        "inspect",
        "expire",
        "upgrade",
        "cleanup",
        "snapshots",
    ];
    for command in commands {
        let mut cmd = xlake();
        if !command.is_empty() {
            cmd.arg(command);
        }
        cmd.arg("--help");
        let name = format!(
            "help_{}",
            if command.is_empty() { "xlake" } else { command }
        );
        insta_cmd::assert_cmd_snapshot!(name.as_str(), cmd);
    }
}

/// Options that only mean something when the job repeats are refused with `--once`, not
/// ignored.
#[test]
fn repeat_only_options_are_refused_with_once() {
    for extra in [["--check-every", "1m"], ["--metrics-listen", "127.0.0.1:0"]] {
        let mut args = vec!["run", "--config", "tables.toml", "--once"];
        args.extend(extra);
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("cannot be used with"), "{args:?}: {err}");
    }
}

/// A job file read from an endless device or pipe stops at a size no job file reaches,
/// exit 2 (hostile review, 2026-12-06: `--config /dev/zero` grew by 1 GB a second).
#[test]
fn an_endless_job_file_is_refused_at_a_size() {
    let (code, _, err) = run(&["run", "--config", "/dev/zero", "--once"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/dev/zero: larger than 64 MiB"), "{err}");
}
