//! `xlake cleanup --orphans`: removes only unreferenced metadata files, never data files,
//! never files of a commit that may still be in progress.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn age(path: &Path, by: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn only_old_unreferenced_metadata_files_go() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let xlake = env!("CARGO_BIN_EXE_xlake");
    assert!(Command::new(xlake)
        .args(["sync", root.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    let metadata = root.join("metadata");
    // What a lost race or a crash leaves: a manifest, a manifest list, a delete file.
    let some_manifest = files_under(&metadata)
        .into_iter()
        .find(|p| p.to_str().unwrap().ends_with("-m0.avro"))
        .unwrap();
    let stale = [
        metadata.join("00000000-dead-beef-0000-000000000000-m0.avro"),
        metadata.join("snap-1-1-00000000-dead-beef-0000-000000000000.avro"),
        metadata.join("00000000-dead-beef-0000-000000000001-deletes.parquet"),
    ];
    for p in &stale {
        std::fs::copy(&some_manifest, p).unwrap();
        age(p, Duration::from_secs(4 * 86_400));
    }
    let young = metadata.join("00000000-dead-beef-0000-000000000002-m0.avro");
    std::fs::copy(&some_manifest, &young).unwrap();
    // Referenced files are old too, and must stay.
    for p in files_under(&metadata) {
        if !stale.contains(&p) && p != young {
            age(&p, Duration::from_secs(4 * 86_400));
        }
    }
    let data_before: Vec<_> = files_under(&root)
        .into_iter()
        .filter(|p| !p.starts_with(&metadata))
        .collect();

    let dry = Command::new(xlake)
        .args(["cleanup", root.to_str().unwrap(), "--orphans", "--dry-run"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&dry.stdout).contains("3 orphan metadata files"));
    assert!(
        stale.iter().all(|p| p.exists()),
        "a dry run deletes nothing"
    );

    let out = Command::new(xlake)
        .args([
            "cleanup",
            root.to_str().unwrap(),
            "--orphans",
            "--older-than",
            "1d",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stale.iter().all(|p| !p.exists()));
    assert!(
        young.exists(),
        "younger than --older-than: may belong to a commit in progress"
    );
    let data_after: Vec<_> = files_under(&root)
        .into_iter()
        .filter(|p| !p.starts_with(&metadata))
        .collect();
    assert_eq!(data_before, data_after, "data files are never touched");
    let (code, text) = common::xlake(&["check", root.to_str().unwrap(), "--deep"]);
    assert_eq!(code, 0, "{text}");
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn metadata_names(root: &Path) -> Vec<String> {
    files_under(&root.join("metadata"))
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect()
}

/// A Delta commit adding a copy of version 0's first data file at `path` (relative).
fn add_copy_of_first_file(root: &Path, version: u64, path: &str) {
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
    let mut add = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v.get("add").is_some())
        .unwrap();
    let from = root.join(add["add"]["path"].as_str().unwrap());
    std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
    std::fs::copy(from, root.join(path)).unwrap();
    add["add"]["path"] = serde_json::json!(path);
    let commit = format!(
        "{{\"commitInfo\":{{\"timestamp\":1800000000000,\"operation\":\"WRITE\"}}}}\n{add}\n"
    );
    std::fs::write(root.join(format!("_delta_log/{version:020}.json")), commit).unwrap();
}

/// Issue 48, defect 2: `expire` deletes the lists and manifests of the snapshots it
/// expires, while older `vN.metadata.json` files still name them; cleanup takes what only
/// those name as expired (gone, or an orphan to delete), not as an error.
#[test]
fn cleanup_after_expire_takes_what_only_older_versions_name_as_expired() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let before = metadata_names(&root);
    let (code, out) = common::xlake(&["expire", t, "--keep-snapshots", "1"]);
    assert!(code == 0 && out.contains("2 snapshots expired"), "{out}");
    let after = metadata_names(&root);
    let deleted: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
    assert!(!deleted.is_empty(), "{before:?} {after:?}");
    for dry in [true, false] {
        let mut args = vec!["cleanup", t, "--older-than", "0s", "--no-writer-running"];
        if dry {
            args.push("--dry-run");
        }
        let (code, out) = common::xlake(&args);
        assert_eq!(code, 0, "dry run {dry}: {out}");
        assert!(out.contains(": 0 orphan metadata files"), "{out}");
    }
    // A file of an expired snapshot that expire could not delete is an orphan.
    let leftover = root.join("metadata").join(deleted[0]);
    std::fs::write(&leftover, b"left by an expiry cut short").unwrap();
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert!(
        code == 0 && out.contains(": 1 orphan metadata files"),
        "{out}"
    );
    assert!(!leftover.exists());
    let (code, out) = common::xlake(&["check", t, "--deep"]);
    assert_eq!(code, 0, "{out}");
}

/// Issue 48, defect 3: an age under 24 hours may catch the files of a commit in progress;
/// it is refused (exit 2, nothing deleted) unless the operator says no writer runs.
#[test]
fn cleanup_refuses_ages_under_a_day_unless_no_writer_runs() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let orphan = root.join("metadata/00000000-dead-beef-0000-000000000000-m0.avro");
    std::fs::write(&orphan, b"x").unwrap();
    age(&orphan, Duration::from_secs(2 * 3600));
    for older_than in ["0s", "1h", "23h 59m"] {
        let (code, out) = common::xlake(&["cleanup", t, "--older-than", older_than]);
        assert_eq!(code, 2, "{older_than}: {out}");
        assert!(out.contains("--no-writer-running"), "{out}");
        assert!(orphan.exists(), "{older_than}: nothing deleted");
    }
    // The default (3 days) and a day are allowed; the orphan is younger than both.
    for args in [vec!["cleanup", t], vec!["cleanup", t, "--older-than", "1d"]] {
        let (code, out) = common::xlake(&args);
        assert!(code == 0 && out.contains(": 0 orphan"), "{args:?}: {out}");
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1h", "--no-writer-running"]);
    assert!(code == 0 && out.contains(": 1 orphan"), "{out}");
    assert!(!orphan.exists());
}

/// Issue 48, defect 3: a sync checks, before its commit point, that the manifests it
/// carries over from the version it builds on still exist; an append that carries the
/// parent's list unread would otherwise publish a version naming deleted manifests.
#[test]
fn a_sync_never_publishes_a_version_naming_deleted_manifests() {
    for append in [false, true] {
        deleted_lists_stop_the_next_commit(append);
    }
}

/// The table synced, then a commit (an append of a copy of a live file, or a metadata
/// change) after its current manifest lists are deleted.
fn deleted_lists_stop_the_next_commit(append: bool) {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let info = "{\"commitInfo\":{\"timestamp\":1800000000000,\"operation\":\"WRITE\"}}\n";
    let mut commit = info.to_string();
    if append {
        let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json"));
        let mut add: serde_json::Value = log
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|a| a.get("add").is_some())
            .unwrap();
        let path = add["add"]["path"].as_str().unwrap().to_string();
        let copy = path.replace(".parquet", "-copy.parquet");
        std::fs::copy(root.join(&path), root.join(&copy)).unwrap();
        add["add"]["path"] = copy.into();
        commit.push_str(&format!("{add}\n"));
    }
    std::fs::write(root.join("_delta_log/00000000000000000003.json"), commit).unwrap();
    // What a cleanup that misjudged the current version deletes: its manifest lists (the
    // new version carries the current one over unread). The manifests inside a list are
    // not looked up one by one before each commit (a request each; docs/operating.md).
    let manifests: Vec<_> = files_under(&root.join("metadata"))
        .into_iter()
        .filter(|p| s(p).contains("/snap-"))
        .collect();
    assert!(!manifests.is_empty());
    for m in &manifests {
        std::fs::remove_file(m).unwrap();
    }
    let before = metadata_names(&root);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    // Named, whether the plan read the list or looked for it before the commit point (an
    // append that carries it unread: "is gone").
    assert!(manifests.iter().any(|m| out.contains(s(m))), "{out}");
    assert_eq!(
        metadata_names(&root),
        before,
        "nothing published, nothing left"
    );
}

/// Issue 48, defect 3: `check` finds the manifest lists of retained ancestors that are gone.
#[test]
fn check_reports_ancestors_whose_manifest_list_is_gone() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let lists: Vec<_> = files_under(&root.join("metadata"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("snap-")
        })
        .collect();
    assert_eq!(lists.len(), 3);
    // Not the current snapshot's: the others only time travel reads.
    let current = std::fs::read_to_string(root.join("metadata/v1.metadata.json")).unwrap();
    let current: serde_json::Value = serde_json::from_str(&current).unwrap();
    let id = current["current-snapshot-id"].as_i64().unwrap();
    let ancestor = lists
        .iter()
        .find(|p| !s(p).contains(&format!("snap-{id}-")))
        .unwrap();
    std::fs::remove_file(ancestor).unwrap();
    let (code, out) = common::xlake(&["check", t]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("NOT CONSISTENT") && out.contains(s(ancestor)),
        "{out}"
    );
}

/// Issue 48, defect 6: cleanup deletes only files named as xlake names what it writes; a
/// source's own files in `metadata/` (a Hudi partition named `metadata`: its partition
/// marker, base and log files) and anything else there stay, however old.
#[test]
fn cleanup_deletes_only_files_xlake_names() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let theirs = [
        metadata.join(".hoodie_partition_metadata"),
        metadata.join("6db57019-98ee-480e-8eb1-fb3de48e1c24-0_1-119-167_20240418172804498.parquet"),
        metadata.join(".6db57019-98ee-480e-8eb1-fb3de48e1c24-0_20240418172804498.log.1_0-21-22"),
        metadata.join("stray.avro"),
        metadata.join("sub/00000000-dead-beef-0000-000000000001-m0.avro"),
    ];
    std::fs::create_dir_all(metadata.join("sub")).unwrap();
    let ours = metadata.join("00000000-dead-beef-0000-000000000000-m0.avro");
    for p in theirs.iter().chain([&ours]) {
        std::fs::write(p, b"x").unwrap();
    }
    // A link named as xlake names a manifest, to an old file elsewhere, is not xlake's.
    let elsewhere = root.join("kept.avro");
    std::fs::write(&elsewhere, b"x").unwrap();
    let link = metadata.join("00000000-dead-beef-0000-000000000002-m0.avro");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    age(&elsewhere, Duration::from_secs(4 * 86_400));
    for p in files_under(&metadata) {
        age(&p, Duration::from_secs(4 * 86_400));
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 1 orphan metadata files"), "{out}");
    assert!(out.contains("left alone: 6 files"), "{out}");
    assert!(!ours.exists());
    assert!(theirs.iter().all(|p| p.exists()), "{out}");
    assert!(
        link.symlink_metadata().is_ok() && elsewhere.exists(),
        "{out}"
    );
    std::fs::remove_file(&link).unwrap();
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(
        code == 0 && out.contains("metadata/ clash: 5 files"),
        "{out}"
    );
}

/// Issue 48, defect 6: a Hudi table whose partition folders are not hive-style, with a
/// partition value `metadata`, keeps its files in the mirror's folder: refused, naming
/// the clash, before anything is published.
#[test]
fn sync_refuses_a_hudi_partition_named_metadata() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v6_simplekeygen_nonhivestyle");
    std::fs::rename(root.join("30"), root.join("metadata")).unwrap();
    let instant = root.join(".hoodie/20240418172804498.commit");
    let text = std::fs::read_to_string(&instant).unwrap();
    std::fs::write(
        &instant,
        text.replace("\"30\"", "\"metadata\"")
            .replace("\"30/", "\"metadata/"),
    )
    .unwrap();
    let t = s(&root);
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(
        code == 0 && out.contains("metadata/ clash: 2 files"),
        "{out}"
    );
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("metadata/.hoodie_partition_metadata lies in metadata/"),
        "{out}"
    );
    assert!(!root.join("metadata/v1.metadata.json").exists(), "{out}");
    assert!(!root.join("metadata/version-hint.text").exists(), "{out}");
}

/// Issue 48, defect 6: a data file a later commit adds under `metadata/` is refused too
/// (whatever the format: the target checks every added path), naming commit and file.
#[test]
fn sync_refuses_a_data_file_added_under_metadata() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    add_copy_of_first_file(&root, 3, "metadata/part-00000-x.parquet");
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("source commit 3")
            && out.contains("metadata/part-00000-x.parquet: lies in metadata/"),
        "{out}"
    );
    assert!(!root.join("metadata/v2.metadata.json").exists());
}

/// Issue 48, defect 6: a Parquet folder with files in `metadata/` is refused at its first
/// sync (the listing leaves that folder to xlake, so its files are never data).
#[test]
fn sync_refuses_a_parquet_folder_with_files_in_metadata() {
    let (_dir, delta) = common::delta::extract("partitioned_3commits");
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    std::fs::create_dir_all(table.join("metadata")).unwrap();
    let data: Vec<_> = files_under(&delta.join("region=eu"));
    std::fs::copy(&data[0], table.join("a.parquet")).unwrap();
    std::fs::copy(&data[0], table.join("metadata/b.parquet")).unwrap();
    let (code, out) = common::xlake(&["sync", s(&table), "--format", "parquet"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("metadata/b.parquet lies in metadata/"),
        "{out}"
    );
    assert_eq!(metadata_names(&table), ["b.parquet"]);
}

/// Issue 48, defect 3: a carried file gone because another writer published meanwhile (an
/// expiry after a newer sync) is a lost race, re-planned, not a broken table.
#[tokio::test]
async fn a_carried_file_gone_after_another_writer_published_is_a_lost_race() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("table");
    let expected = common::foundation::build(&root);
    let store = xlake_storage::TableStore::open(s(&root)).unwrap();
    let table = xlake_iceberg::IcebergTable::new(store);
    table.commit(&expected.change_sets[0]).await.unwrap();
    let base = table.load_for_commit().await.unwrap();
    // Another writer's v2, and the manifest list of v1 gone.
    let metadata = root.join("metadata");
    std::fs::copy(
        metadata.join("v1.metadata.json"),
        metadata.join("v2.metadata.json"),
    )
    .unwrap();
    for p in files_under(&metadata) {
        if s(&p).contains("/snap-") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let before = metadata_names(&root);
    let batch = table
        .commit_batch_on(base, &[&expected.change_sets[1]])
        .await;
    assert!(
        matches!(
            batch.error,
            Some(xlake_iceberg::IcebergError::CommitConflict { version: 2, .. })
        ),
        "{:?}",
        batch.error
    );
    assert_eq!(
        metadata_names(&root),
        before,
        "what the batch wrote is gone"
    );
}

/// Review D2: a stray `vN` above the current version past a gap (here a copy of v1 as v9)
/// is no reader's current version; cleanup keeps what the current version (v3, as the
/// loader finds it from the hint) names, and what the stray names too, and reports it.
#[test]
fn cleanup_keeps_the_current_version_when_a_stray_version_lies_above_it() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    for version in [3, 4] {
        common::empty_delta_commit(&root, version);
        assert_eq!(common::xlake(&["sync", t]).0, 0);
    }
    let metadata = root.join("metadata");
    assert!(metadata.join("v3.metadata.json").exists());
    std::fs::copy(
        metadata.join("v1.metadata.json"),
        metadata.join("v9.metadata.json"),
    )
    .unwrap();
    let before = metadata_names(&root);
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 0 orphan metadata files"), "{out}");
    assert!(
        out.contains("1 metadata versions above the current one")
            && out.contains("v9.metadata.json"),
        "{out}"
    );
    assert_eq!(metadata_names(&root), before, "nothing deleted");
    let (code, out) = common::xlake(&["check", t, "--deep"]);
    assert_eq!(code, 0, "{out}");
}

/// Iceberg metadata another writer made under a catalog's names (no `vN`, no hint) is
/// refused as foreign, exit 2, as `check` refuses it (hostile review, 2026-12-06: exit 0).
#[test]
fn cleanup_refuses_catalog_named_foreign_metadata() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    // As a catalog names its versions, and without xlake's marks.
    let metadata = root.join("metadata");
    let ours = std::fs::read_to_string(metadata.join("v1.metadata.json")).unwrap();
    let theirs = metadata.join("00000-6f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.metadata.json");
    std::fs::write(&theirs, ours.replace("XTABLE_METADATA", "SOMEONE_ELSE")).unwrap();
    std::fs::remove_file(metadata.join("v1.metadata.json")).unwrap();
    std::fs::remove_file(metadata.join("version-hint.text")).unwrap();
    let before = files_under(&metadata);
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not written by xlake"), "{out}");
    assert_eq!(files_under(&metadata), before);
}

/// A file under `metadata/` whose name is no object name (not UTF-8, a newline) is
/// another tool's: left alone and named, while the rest is cleaned as always (hostile
/// review, 2026-12-06: `cleanup` and `inspect` failed on it with object_store's error,
/// whose local listing also ends at such a name).
#[test]
fn files_of_odd_names_under_metadata_are_left_alone_and_the_rest_cleaned() {
    use std::os::unix::ffi::OsStrExt;
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let theirs = [
        metadata.join("new\nline"),
        metadata.join(std::ffi::OsStr::from_bytes(b"bad\xffname")),
    ];
    let ours = metadata.join("00000000-dead-beef-0000-000000000000-m0.avro");
    for p in theirs.iter().chain([&ours]) {
        std::fs::write(p, b"x").unwrap();
    }
    for p in files_under(&metadata) {
        age(&p, Duration::from_secs(4 * 86_400));
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 1 orphan metadata files"), "{out}");
    assert!(out.contains("left alone: 2 files"), "{out}");
    assert!(!ours.exists());
    assert!(theirs.iter().all(|p| p.exists()), "{out}");
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(
        code == 0 && out.contains("metadata/ clash: 2 files"),
        "{out}"
    );
}

/// What a write killed between object_store's staging file and its rename leaves,
/// `<name>#<n>`, is deleted once old when the name is one xlake writes; another's staged
/// file is left alone (hostile review, 2026-12-05: object_store's listing hid them, so
/// `cleanup` never deleted them).
#[test]
fn staging_files_of_killed_writes_are_cleaned_once_old() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let ours = [
        metadata.join("00000000-dead-beef-0000-000000000000-m0.avro#1"),
        metadata.join("v9.metadata.json#12"),
        metadata.join("version-hint.text#3"),
    ];
    let theirs = metadata.join("stray.avro#1");
    let young = metadata.join("00000000-dead-beef-0000-000000000001-m0.avro#1");
    for p in ours.iter().chain([&theirs, &young]) {
        std::fs::write(p, b"x").unwrap();
    }
    for p in files_under(&metadata) {
        if p != young {
            age(&p, Duration::from_secs(4 * 86_400));
        }
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 3 orphan metadata files"), "{out}");
    assert!(out.contains("left alone: 1 files"), "{out}");
    assert!(ours.iter().all(|p| !p.exists()), "{out}");
    assert!(theirs.exists() && young.exists(), "{out}");
    assert_eq!(common::xlake(&["check", t, "--deep"]).0, 0);
}

/// A table synced under two spellings of its place (its path, and a symbolic link to it)
/// names its metadata files both ways; cleanup under either spelling deletes none of the
/// live ones (hostile review 3, 2026-12-06: it deleted the manifests and lists named
/// through the other spelling, and the mirror no longer loaded).
#[test]
fn cleanup_keeps_files_named_through_another_spelling_of_the_table() {
    let (dir, root) = common::delta::extract("partitioned_3commits");
    let link = dir.path().join("through a link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    assert_eq!(common::xlake(&["sync", s(&link)]).0, 0);
    common::empty_delta_commit(&root, 3);
    assert_eq!(common::xlake(&["sync", s(&root)]).0, 0);
    let before = metadata_names(&root);
    for t in [s(&root), s(&link)] {
        let args = ["cleanup", t, "--older-than", "0s", "--no-writer-running"];
        let (code, out) = common::xlake(&args);
        assert!(
            code == 0 && out.contains(": 0 orphan metadata files"),
            "{out}"
        );
    }
    assert_eq!(metadata_names(&root), before);
    for t in [s(&root), s(&link)] {
        let (code, out) = common::xlake(&["check", t]);
        assert_eq!(code, 0, "{out}");
    }
}

/// Links in `metadata/` that cannot be followed (one leading to itself, two leading to
/// each other, one to nothing, named as xlake names its files or not) are not xlake's:
/// left alone and named, while the rest is cleaned (hostile review 3, 2026-12-06: a link
/// loop failed `cleanup` and `inspect` with "Too many levels of symbolic links", naming
/// only the folder).
#[test]
fn links_in_metadata_that_cannot_be_followed_are_left_alone() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let ours = metadata.join("00000000-dead-beef-0000-000000000000-m0.avro");
    std::fs::write(&ours, b"x").unwrap();
    let links = [
        ("loop", "loop"),
        ("a", "b"),
        ("b", "a"),
        ("00000000-dead-beef-0000-000000000001-m0.avro", "gone"),
    ];
    for (link, to) in links {
        std::os::unix::fs::symlink(to, metadata.join(link)).unwrap();
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 1 orphan metadata files"), "{out}");
    assert!(out.contains("left alone: 4 files"), "{out}");
    assert!(!ours.exists(), "{out}");
    for (link, _) in links {
        assert!(
            metadata.join(link).symlink_metadata().is_ok(),
            "{link}: {out}"
        );
    }
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(
        code == 0 && out.contains("metadata/ clash: 4 files"),
        "{out}"
    );
    assert_eq!(common::xlake(&["check", t, "--deep"]).0, 0);
}

/// Subfolders of `metadata/` that cannot be walked (one `chmod 000` where that denies, as
/// for a user other than root; one whose path passes the system's limit, which denies
/// even root) are not xlake's, which writes no subfolder there: left alone and named, with
/// a warning saying why, while the rest is cleaned and inspected (hostile review 4, F10:
/// `cleanup` and `inspect` failed whole).
#[test]
fn subfolders_of_metadata_that_cannot_be_read_are_left_alone() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let t = s(&root);
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let metadata = root.join("metadata");
    let ours = metadata.join("00000000-dead-beef-0000-000000000000-m0.avro");
    std::fs::write(&ours, b"x").unwrap();
    // Past PATH_MAX (4096 bytes): two chains of folders within it, one moved into the other.
    let step = "d".repeat(200);
    let chain = |base: &Path| {
        let mut leaf = base.to_path_buf();
        (0..12).for_each(|_| leaf.push(&step));
        std::fs::create_dir_all(&leaf).unwrap();
        leaf
    };
    let leaf = chain(&metadata.join("deep"));
    let other = root.join("other");
    std::fs::write(chain(&other).join("f"), b"x").unwrap();
    std::fs::rename(other.join(&step), leaf.join("e")).unwrap();
    let mut left = vec!["metadata/deep"];
    // chmod denies only a user other than root.
    let locked = metadata.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::write(
        locked.join("00000000-dead-beef-0000-000000000002-m0.avro"),
        b"x",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read_dir(&locked).is_err() {
        left.push("metadata/locked");
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert_eq!(code, 0, "{out}");
    assert!(!ours.exists(), "{out}");
    for folder in &left {
        // Named in the warning, with why.
        assert!(out.contains(&format!("{t}/{folder}")), "{folder}: {out}");
        assert!(out.contains("cannot be walked"), "{out}");
    }
    let (code, out) = common::xlake(&["inspect", t, "--json"]);
    assert_eq!(code, 0, "{out}");
    for folder in &left {
        assert!(out.contains(folder), "{folder}: {out}");
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(common::xlake(&["check", t, "--deep"]).0, 0);
}

/// Another Iceberg writer that committed to the mirror through a catalog (pyiceberg's
/// `register_table`, then an append) writes `00001-<uuid>.metadata.json` and manifests
/// named `<uuid>-m0.avro`, as xlake names its own: cleanup deleted that writer's live
/// manifest, whose table then failed to read (hostile review hr14, exit 0). It refuses,
/// exit 2, nothing deleted; `inspect` counts the file under "metadata/ clash".
#[test]
fn cleanup_refuses_while_another_writer_committed_in_metadata() {
    let (_dir, root, current) = mirrored_with_current();
    let t = s(&root);
    let metadata = root.join("metadata");
    // A REST catalog server's own file carries xlake's snapshots: cleanup goes on.
    let server = metadata.join("00000-1f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.metadata.json");
    std::fs::write(&server, &current).unwrap();
    let stray = metadata.join("00000000-dead-beef-0000-000000000000-m0.avro");
    std::fs::write(&stray, b"x").unwrap();
    for p in files_under(&metadata) {
        age(&p, Duration::from_secs(5 * 86_400));
    }
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert_eq!(code, 0, "{out}");
    assert!(!stray.exists() && server.exists(), "{out}");
    // Another writer's commit: its current snapshot is not xlake's.
    let (_, manifest) = another_writers_commit(&metadata, &current);
    age(&manifest, Duration::from_secs(4 * 86_400));
    let before = files_under(&metadata);
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("another Iceberg writer"), "{out}");
    assert_eq!(files_under(&metadata), before, "nothing deleted");
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(
        code == 0 && out.contains("metadata/ clash: 2 file"),
        "{out}"
    );
}

/// Hostile review hr15: only the newest foreign metadata file was looked at. Another
/// writer's commit (its current snapshot not xlake's), then a REST catalog server's own
/// file written after it (carrying xlake's snapshot, as when the mirror is registered
/// in a second catalog): the newest passed, and cleanup deleted the first writer's
/// manifest, exit 0. Any foreign metadata file with another writer's current snapshot
/// refuses, and one that does not read (gzip-compressed) too.
#[test]
fn cleanup_refuses_for_an_older_foreign_commit_behind_a_catalog_servers_file() {
    let (_dir, root, current) = mirrored_with_current();
    let t = s(&root);
    let metadata = root.join("metadata");
    let (theirs, manifest) = another_writers_commit(&metadata, &current);
    for p in files_under(&metadata) {
        age(&p, Duration::from_secs(4 * 86_400));
    }
    // Written after the other writer's commit: the newest foreign file.
    let server = metadata.join("00000-1f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.metadata.json");
    std::fs::write(&server, &current).unwrap();
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert!(
        manifest.exists(),
        "another writer's manifest deleted, exit {code}: {out}"
    );
    assert_eq!(code, 2, "{out}");
    // Java's metadata compressed (`write.metadata.compression-codec=gzip`) does not read
    // as JSON: it cannot be told from another writer's commit, and refuses too.
    std::fs::remove_file(&theirs).unwrap();
    let gz = metadata.join("00002-7f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.gz.metadata.json");
    std::fs::write(&gz, b"\x1f\x8b\x08\x00 compressed").unwrap();
    age(&gz, Duration::from_secs(4 * 86_400));
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "1d"]);
    assert!(manifest.exists(), "manifest deleted, exit {code}: {out}");
    assert_eq!(code, 2, "{out}");
}

/// The bundled Delta table `partitioned_3commits` mirrored, and the bytes of its current
/// `vN.metadata.json`.
fn mirrored_with_current() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let (dir, root) = common::delta::extract("partitioned_3commits");
    assert_eq!(common::xlake(&["sync", s(&root)]).0, 0);
    let metadata = root.join("metadata");
    let current = std::fs::read(metadata.join("v2.metadata.json"))
        .or_else(|_| std::fs::read(metadata.join("v1.metadata.json")))
        .unwrap();
    (dir, root, current)
}

/// Another Iceberg writer's commit in `metadata` (`current` with its snapshots no longer
/// xlake's) and a manifest of it, named as xlake names its own: (commit, manifest).
fn another_writers_commit(metadata: &Path, current: &[u8]) -> (PathBuf, PathBuf) {
    let text = String::from_utf8(current.to_vec()).unwrap();
    let theirs = metadata.join("00001-6f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.metadata.json");
    std::fs::write(&theirs, text.replace("XTABLE_METADATA", "SOMEONE_ELSE")).unwrap();
    let manifest = metadata.join("0a1b2c3d-0000-4000-8000-000000000000-m0.avro");
    std::fs::write(&manifest, b"theirs").unwrap();
    (theirs, manifest)
}
