//! The rest of the bad-input corpus (the Hudi and Delta log cases are in `hudi_sync.rs`
//! and `delta_sync.rs`): a missing checkpoint part, our own metadata damaged, and a disk
//! that fills up mid-commit. Each fails naming the table and the file, exits non-zero
//! through the CLI, and leaves `metadata/` byte-identical.
use crate::common;

use std::path::Path;

use xlake_sync::{sync, SyncOptions};
use xlake_test_utils::metadata_snapshot;

async fn sync_err(root: &Path) -> String {
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .map(|r| format!("unexpectedly synced: {r:?}"))
        .unwrap_or_else(|e| e.to_string())
}

#[tokio::test]
async fn a_missing_checkpoint_part_names_the_part() {
    let (_dir, root) = common::delta::extract("multi-part-checkpoint");
    let log = root.join("_delta_log");
    // The log must start at the checkpoint: without commit 0 it is the only way in.
    std::fs::remove_file(log.join("00000000000000000000.json")).unwrap();
    let part = "00000000000000000001.checkpoint.0000000002.0000000002.parquet";
    std::fs::remove_file(log.join(part)).unwrap();
    let err = sync_err(&root).await;
    assert!(
        err.contains(root.to_str().unwrap()) && err.contains(part),
        "{err}"
    );
    assert!(metadata_snapshot(&root).is_empty(), "nothing written");
    let (code, text) = common::xlake(&["sync", root.to_str().unwrap()]);
    assert!(code != 0 && text.contains(part), "{code}: {text}");
}

/// A commit file deleted below the mirrored version, found when a new commit needs the
/// state there (the incremental listing starts at the mirrored version): named as the gap
/// it is, not as the Delta library's dump of its listing.
#[tokio::test]
async fn a_commit_deleted_below_the_mirrored_one_is_named() {
    let (_dir, root) = common::delta::extract("simple_table");
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let before = metadata_snapshot(&root);
    std::fs::remove_file(root.join("_delta_log/00000000000000000002.json")).unwrap();
    // A commit that needs the schema in force before it (it removes files).
    let log = root.join("_delta_log");
    std::fs::copy(
        log.join("00000000000000000004.json"),
        log.join("00000000000000000005.json"),
    )
    .unwrap();
    let err = sync_err(&root).await;
    assert!(
        err.contains(root.to_str().unwrap())
            && err.contains("commit 00000000000000000002.json is missing")
            && !err.contains("ParsedLogPath"),
        "{err}"
    );
    assert!(metadata_snapshot(&root) == before, "nothing written");
}

#[tokio::test]
async fn damaged_iceberg_metadata_is_named_and_left_alone() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let metadata = root.join("metadata");
    let hint = metadata.join("version-hint.text");
    let version = std::fs::read_to_string(&hint).unwrap();
    let current = metadata.join(format!("v{version}.metadata.json"));
    let good = std::fs::read(&current).unwrap();
    // One more source commit, so that a sync has something to write.
    std::fs::write(
        root.join("_delta_log/00000000000000000003.json"),
        "{\"commitInfo\":{\"timestamp\":1700000000000}}\n",
    )
    .unwrap();

    // A hint that is not a number.
    std::fs::write(&hint, "banana").unwrap();
    let before = metadata_snapshot(&root);
    let err = sync_err(&root).await;
    assert!(
        err.contains("version-hint.text") && err.contains("banana"),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
    std::fs::write(&hint, &version).unwrap();

    // The current metadata file cut in half.
    std::fs::write(&current, &good[..good.len() / 2]).unwrap();
    let before = metadata_snapshot(&root);
    let err = sync_err(&root).await;
    assert!(
        err.contains(current.to_str().unwrap()) && err.contains(root.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
    let (code, text) = common::xlake(&["check", root.to_str().unwrap()]);
    assert!(
        code == 2 && text.contains(current.to_str().unwrap()),
        "{code}: {text}"
    );
    std::fs::write(&current, &good).unwrap();

    // `metadata` is a file, not a folder.
    let aside = root.join("metadata.aside");
    std::fs::rename(&metadata, &aside).unwrap();
    std::fs::write(&metadata, b"not a folder").unwrap();
    let err = sync_err(&root).await;
    assert!(err.contains("metadata"), "{err}");
    assert_eq!(std::fs::read(&metadata).unwrap(), b"not a folder");
    std::fs::remove_file(&metadata).unwrap();
    std::fs::rename(&aside, &metadata).unwrap();

    // Repaired, the table syncs on.
    common::sync_consistent(&root, 4, "repaired").await;
}

/// The regular files of `metadata/` and their bytes, by name (a FIFO is not opened).
fn regular_metadata(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// No hint, and a FIFO at the next version's name (no listing shows it): the sync fails
/// naming the FIFO before it writes anything, the hint included (it used to be rewritten
/// to the listed version first).
#[tokio::test]
async fn a_fifo_at_the_next_version_fails_the_sync_before_the_hint_is_written() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let hint = root.join("metadata/version-hint.text");
    let version: u64 = std::fs::read_to_string(&hint).unwrap().parse().unwrap();
    std::fs::remove_file(&hint).unwrap();
    let fifo = root.join(format!("metadata/v{}.metadata.json", version + 1));
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let before = regular_metadata(&root);
    let err = sync_err(&root).await;
    assert!(err.contains(fifo.to_str().unwrap()), "{err}");
    assert!(!hint.exists(), "the hint was written by a failing sync");
    assert_eq!(regular_metadata(&root), before, "nothing written");
    std::fs::remove_file(&fifo).unwrap();
    common::sync_consistent(&root, 3, "the FIFO gone").await;
}

/// A tmpfs of `bytes`, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(bytes: u64) -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(Self(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_disk_that_fills_up_mid_commit_fails_cleanly_and_the_next_sync_completes() {
    // A real full disk: a small tmpfs (mounting needs root, which CI and these machines
    // have; anywhere else the test says why it cannot run).
    let disk = match SmallDisk::mount(8 << 20) {
        Ok(disk) => disk,
        Err(e) if !e.is_empty() && not_root() => {
            eprintln!("not run: mounting a tmpfs needs root: {e}");
            return;
        }
        Err(e) => panic!("cannot mount a tmpfs: {e}"),
    };
    // Version 0 mirrored or not; then the disk is filled but for `room` bytes, so that
    // the sync of what is pending runs out of space at one write or another.
    let (mut unchanged, mut cleaned_up, mut published_a_prefix) = (0, 0, 0);
    for (case, (mirrored_first, room)) in [false, true]
        .into_iter()
        .flat_map(|m| [4096, 8192, 12288, 16384, 24576].map(|r| (m, r)))
        .enumerate()
    {
        let (_dir, source) = common::delta::extract("partitioned_3commits");
        let root = disk.0.path().join(format!("table{case}"));
        copy_dir(&source, &root);
        if mirrored_first {
            let later = common::delta::set_aside(&root, &[1, 2], &disk.0.path().join("aside"));
            sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
                .await
                .unwrap();
            common::delta::put_back(later);
        }
        let before = metadata_snapshot(&root);
        let filler = disk.0.path().join("filler");
        let free = {
            let out = std::process::Command::new("df")
                .args(["--output=avail", "-B1"])
                .arg(disk.0.path())
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .nth(1)
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        std::fs::write(&filler, vec![0u8; (free - room) as usize]).unwrap();

        let err = sync_err(&root).await;
        let what = format!("mirrored first: {mirrored_first}, room {room}");
        assert!(
            err.contains("No space left on device") && err.contains(root.to_str().unwrap()),
            "{what}: {err}"
        );
        // What was there is untouched (the hint may name a newer version). A sync that
        // ran out of space either left `metadata/` as it was, or published the commits
        // staged before the failing write as one whole new version; no file written for
        // what was not published is left (local disk says for sure when a write failed,
        // so even a failed `vN` write is cleaned up).
        let left = metadata_snapshot(&root);
        let shown = |files: &[(String, Vec<u8>)]| {
            files
                .iter()
                .map(|(n, b)| (n.clone(), b.len()))
                .collect::<Vec<_>>()
        };
        let leftovers = common::leftovers(&root).await;
        assert!(
            before
                .iter()
                .all(|f| f.0 == "version-hint.text" || left.contains(f))
                && leftovers.is_empty(),
            "{what}: {err}\nbefore: {:?}\nafter: {:?}\nleft over: {leftovers:?}",
            shown(&before),
            shown(&left)
        );
        if left == before {
            unchanged += 1;
            cleaned_up += usize::from(!err.contains("-m0.avro"));
        } else {
            let new_version = left
                .iter()
                .any(|(n, _)| n.ends_with(".metadata.json") && !before.iter().any(|(b, _)| b == n));
            assert!(
                new_version,
                "{what}: changed, yet no new version: {:?}",
                shown(&left)
            );
            published_a_prefix += 1;
        }

        std::fs::remove_file(&filler).unwrap();
        common::sync_consistent(&root, 3, &what).await;
        std::fs::remove_dir_all(&root).unwrap();
    }
    eprintln!("unchanged {unchanged} (after deleting written files: {cleaned_up}), a prefix published {published_a_prefix}");
    assert!(
        cleaned_up > 0,
        "no case failed after a write it then had to delete"
    );
}

fn not_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() != "0")
        .unwrap_or(true)
}

/// Issue 48, defect 5: log text that panicked (a `u` vector id split inside a multi-byte
/// character) or was taken silently (column mapping ids that are no field id).
#[tokio::test]
async fn multi_byte_vector_ids_and_out_of_range_mapping_ids_are_refused() {
    let (_dir, root) = common::delta::extract("simple_table");
    common::sync_consistent(&root, 5, "simple_table").await;
    let next = common::delta::commit_versions(&root).last().unwrap() + 1;
    let log = root.join("_delta_log");
    let dv = serde_json::json!({"storageType": "u", "pathOrInlineDv": "abécdefghijklmnopqrstu",
        "offset": 1, "sizeInBytes": 4, "cardinality": 1});
    let file = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".parquet"))
        .unwrap();
    let add = serde_json::json!({"add": {"path": file, "partitionValues": {}, "size": 1,
        "modificationTime": 1, "dataChange": false, "deletionVector": dv}});
    std::fs::write(log.join(format!("{next:020}.json")), format!("{add}\n")).unwrap();
    let before = metadata_snapshot(&root);
    let (code, text) = common::xlake(&["sync", root.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("20 Z85 characters"), "{text}");
    // `check` reports the commit missing, `--deep` that it cannot read it (both panicked
    // before, exit 101).
    for (deep, want) in [(&[][..], 1), (&["--deep"][..], 2)] {
        let (code, text) = common::xlake(&[&["check", root.to_str().unwrap()][..], deep].concat());
        assert_eq!(code, want, "{text}");
    }
    assert_eq!(metadata_snapshot(&root), before);

    for id in ["-1", "99999999999"] {
        let (_dir, root) = common::delta::extract("column_mapping_id");
        let log = root.join("_delta_log");
        let last = *common::delta::commit_versions(&root).last().unwrap();
        let text = std::fs::read_to_string(log.join(format!("{:020}.json", 0))).unwrap();
        let meta = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|a| a.get("metaData").is_some())
            .unwrap();
        let schema = meta["metaData"]["schemaString"].as_str().unwrap();
        let mut schema: serde_json::Value = serde_json::from_str(schema).unwrap();
        let name = schema["fields"][0]["name"].as_str().unwrap().to_string();
        schema["fields"][0]["metadata"]["delta.columnMapping.id"] =
            serde_json::from_str(id).unwrap();
        let mut meta = meta.clone();
        meta["metaData"]["schemaString"] = schema.to_string().into();
        std::fs::write(
            log.join(format!("{:020}.json", last + 1)),
            format!("{meta}\n"),
        )
        .unwrap();
        let (code, text) = common::xlake(&["sync", root.to_str().unwrap()]);
        assert_eq!(code, 1, "{text}");
        assert!(
            text.contains(&format!("column {name}: column mapping id {id}"))
                && text.contains(&format!("version {}", last + 1)),
            "{text}"
        );
    }
}

/// A folder named as the next metadata version (`metadata/v2.metadata.json/`): the sync
/// fails naming it as a folder where a metadata file belongs, exits non-zero and changes
/// nothing (hostile review 4, F9: "another writer committed … first", then "not found").
/// One past the next version is not taken for a version by the hint either: the commit
/// before it goes on, the one at it fails naming it.
#[test]
fn a_folder_named_as_a_metadata_version_is_named_as_one() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    let refused = |next: u64| {
        let before = metadata_snapshot(&root);
        let folder = root.join(format!("metadata/v{next}.metadata.json"));
        std::fs::create_dir(&folder).unwrap();
        let (code, out) = common::xlake(&["sync", t]);
        assert_eq!(code, 1, "{out}");
        for part in [
            folder.to_str().unwrap(),
            "is a folder where a metadata file belongs",
        ] {
            assert!(out.contains(part), "{part}: {out}");
        }
        assert!(!out.contains("another writer"), "{out}");
        std::fs::remove_dir(&folder).unwrap();
        assert!(metadata_snapshot(&root) == before, "nothing changed");
    };
    common::empty_delta_commit(&root, 5);
    refused(2);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    // A folder at v4 while v3 is written: the hint stays at v3.
    let folder = root.join("metadata/v4.metadata.json");
    std::fs::create_dir(&folder).unwrap();
    common::empty_delta_commit(&root, 6);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    assert_eq!(hint.trim(), "3");
    std::fs::remove_dir(&folder).unwrap();
    common::empty_delta_commit(&root, 7);
    refused(4);
}

/// A folder where the version the hint names belongs (`metadata/v2.metadata.json/` with
/// the hint at 2): every command fails naming it as a folder, as at the next version
/// (hostile review 5: "v2.metadata.json: not found" from sync, inspect, check, expire).
#[test]
fn a_folder_at_the_hinted_metadata_version_is_named_as_one() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    common::empty_delta_commit(&root, 5);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    let file = root.join("metadata/v2.metadata.json");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    for command in ["sync", "inspect", "snapshots", "expire", "cleanup"] {
        let (code, out) = common::xlake(&[command, t]);
        assert_eq!(code, 1, "{command}: {out}");
        for part in [
            file.to_str().unwrap(),
            "is a folder where a metadata file belongs",
        ] {
            assert!(out.contains(part), "{command}: {part}: {out}");
        }
    }
}

/// A symbolic link to nothing where a metadata version belongs, the next one or the one
/// the hint names: named as such, nothing changed (hostile review 5, D7: sync lost a race
/// to no one and then failed "v2.metadata.json: not found", naming no table).
#[test]
fn a_link_to_nothing_named_as_a_metadata_version_is_named_as_one() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    let named = |command: &str, link: &std::path::Path, out: &str| {
        for part in [
            t,
            link.to_str().unwrap(),
            "is a link to nothing where a metadata",
        ] {
            assert!(out.contains(part), "{command}: {part}: {out}");
        }
    };
    let next = root.join("metadata/v2.metadata.json");
    std::os::unix::fs::symlink(root.join("gone"), &next).unwrap();
    common::empty_delta_commit(&root, 5);
    let names = || metadata_names(&root);
    let before = names();
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    named("sync", &next, &out);
    assert!(!out.contains("another writer"), "{out}");
    assert_eq!(names(), before, "nothing written");
    std::fs::remove_file(&next).unwrap();
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    // The hinted version itself a link to nothing.
    std::fs::remove_file(&next).unwrap();
    std::os::unix::fs::symlink(root.join("gone"), &next).unwrap();
    for command in ["sync", "inspect", "expire", "cleanup"] {
        let (code, out) = common::xlake(&[command, t]);
        assert_eq!(code, 1, "{command}: {out}");
        named(command, &next, &out);
    }
}

/// Make a link that loops (to itself) or a FIFO at `path`; what the error calls it.
fn unreadable_at(kind: &str, path: &Path) -> &'static str {
    match kind {
        "loop" => {
            std::os::unix::fs::symlink(path, path).unwrap();
            "is a link that cannot be followed where a metadata file belongs"
        }
        _ => {
            let made = std::process::Command::new("mkfifo").arg(path).status();
            assert!(made.unwrap().success());
            "is a FIFO, socket or device where a metadata file belongs"
        }
    }
}

/// A link that loops, or a FIFO, where a metadata version belongs (hostile review hr7):
/// - past the version a sync writes, the sync (and `commit`) mirrors its commit, exit 0,
///   the hint at its version: it failed, exit 1, after publishing, with a bare storage
///   error naming no table (a loop after a second of retries, as if transient);
/// - at the next version and at the one the hint names, every command fails naming it,
///   with the table, nothing changed (cleanup called the hinted one "missing").
#[test]
fn a_link_loop_or_a_fifo_where_a_metadata_version_belongs_is_named() {
    for kind in ["loop", "fifo"] {
        let (_dir, root) = common::delta::extract("simple_table");
        let t = root.to_str().unwrap();
        assert_eq!(common::xlake(&["sync", t]).0, 0, "{kind}");
        let v3 = root.join("metadata/v3.metadata.json");
        let what = unreadable_at(kind, &v3);
        common::empty_delta_commit(&root, 5);
        let (code, out) = common::xlake(&["commit", "--version", "5", t]);
        assert_eq!(code, 0, "{kind}: {out}");
        let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
        assert_eq!(hint.trim(), "2", "{kind}");
        let refused = |when: &str, commands: &[&str]| {
            let before = regular_metadata(&root);
            for command in commands {
                let (code, out) = common::xlake(&[command, t]);
                assert_ne!(code, 0, "{kind} {when} {command}: {out}");
                for part in [t, v3.to_str().unwrap(), what] {
                    assert!(out.contains(part), "{kind} {when} {command}: {part}: {out}");
                }
                assert!(!out.contains("transient"), "{kind} {when} {command}: {out}");
            }
            assert!(
                regular_metadata(&root) == before,
                "{kind} {when}: nothing written"
            );
        };
        common::empty_delta_commit(&root, 6);
        let all = ["sync", "check", "inspect", "expire", "cleanup"];
        refused("next", &all);
        std::fs::remove_file(&v3).unwrap();
        assert_eq!(common::xlake(&["sync", t]).0, 0, "{kind}");
        std::fs::remove_file(&v3).unwrap();
        unreadable_at(kind, &v3);
        refused("hinted", &all);
    }
}

/// A symbolic link at the next metadata version to another table's version file: named
/// as a link, nothing changed, the other table untouched (hostile review 7, D5: sync lost
/// a race to no one, then said the table was copied or moved).
#[test]
fn a_link_to_another_tables_version_at_the_next_one_is_named() {
    let (_dir, root) = common::delta::extract("simple_table");
    let (_other_dir, other) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    for table in [&root, &other] {
        assert_eq!(common::xlake(&["sync", table.to_str().unwrap()]).0, 0);
    }
    let link = root.join("metadata/v2.metadata.json");
    std::os::unix::fs::symlink(other.join("metadata/v1.metadata.json"), &link).unwrap();
    common::empty_delta_commit(&root, 5);
    let (before, theirs) = (metadata_names(&root), metadata_snapshot(&other));
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 1, "{out}");
    for part in [
        t,
        link.to_str().unwrap(),
        "is a symbolic link where a metadata",
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    assert!(!out.contains("copied or moved"), "{out}");
    assert_eq!(metadata_names(&root), before, "nothing written");
    assert!(
        metadata_snapshot(&other) == theirs,
        "the other table untouched"
    );
}

/// A folder named `metadata/version-hint.text`: every command fails naming it, nothing
/// changed (hostile review 5: sync failed with "Unable to rename file: Is a directory"
/// after reading the table without it, check said the hint was missing).
#[test]
fn a_folder_named_as_the_version_hint_is_named_as_one() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    let hint = root.join("metadata/version-hint.text");
    std::fs::remove_file(&hint).unwrap();
    std::fs::create_dir(&hint).unwrap();
    common::empty_delta_commit(&root, 5);
    let names = || metadata_names(&root);
    let before = names();
    for (command, exit) in [("sync", 1), ("inspect", 1), ("check", 2), ("cleanup", 1)] {
        let (code, out) = common::xlake(&[command, t]);
        assert_eq!(code, exit, "{command}: {out}");
        for part in [
            hint.to_str().unwrap(),
            "a folder where the version hint file belongs",
        ] {
            assert!(out.contains(part), "{command}: {part}: {out}");
        }
    }
    assert!(names() == before, "nothing written");
}

/// A FIFO at the next version's name with the hint in place and a commit to mirror: the
/// sync fails naming the FIFO and leaves nothing behind (hostile review 5: each sync left
/// the new snapshot's manifest and manifest list, as if the `vN` write might have landed,
/// and cleanup refuses to run while the FIFO is there).
#[tokio::test]
async fn a_fifo_at_the_next_version_leaves_no_files_of_the_failed_commit() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let hint = root.join("metadata/version-hint.text");
    let version: u64 = std::fs::read_to_string(&hint).unwrap().parse().unwrap();
    let fifo = root.join(format!("metadata/v{}.metadata.json", version + 1));
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    common::empty_delta_commit(&root, 3);
    let names = || -> Vec<String> {
        regular_metadata(&root)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    let before = names();
    let err = sync_err(&root).await;
    assert!(err.contains(fifo.to_str().unwrap()), "{err}");
    assert_eq!(names(), before, "nothing left behind");
}

/// The names under `<root>/metadata`, sorted: what a failed command must leave as it was
/// where a file there cannot be read ([`metadata_snapshot`] reads each).
fn metadata_names(root: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}
