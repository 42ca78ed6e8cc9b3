//! A table folder copied or moved keeps Iceberg metadata naming the old place. Every
//! command that writes or cleans (sync, commit, serve, run, cleanup, expire) refuses it
//! naming both places, `check` fails, `inspect`
//! reports it, nothing is deleted; `sync --rebuild` mirrors it afresh at the new place and
//! sets the old metadata aside. And `vN.metadata.json` lists snapshots in commit order.
use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::xlake;

/// Every file below `dir` with its bytes, by path relative to `dir`.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(base).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The current `vN.metadata.json` as JSON.
fn current(root: &Path) -> serde_json::Value {
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let path = root.join(format!("metadata/v{hint}.metadata.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn sequence_numbers(metadata: &serde_json::Value) -> Vec<i64> {
    metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sequence-number"].as_i64().unwrap())
        .collect()
}

/// Every path a metadata version names, in its JSON (manifest lists) and the location.
fn named_paths(metadata: &serde_json::Value) -> Vec<String> {
    let mut out = vec![metadata["location"].as_str().unwrap().to_string()];
    for s in metadata["snapshots"].as_array().unwrap() {
        out.push(s["manifest-list"].as_str().unwrap().to_string());
    }
    out
}

/// `table` was copied or moved from `old`: every writing or cleaning command refuses,
/// naming both places, and changes nothing; check fails; inspect reports it.
fn assert_refused_everywhere(old: &Path, table: &Path, commit_args: &[&str]) {
    let before = tree(table);
    let names_both = |what: &str, code: i32, out: &str| {
        assert_ne!(code, 0, "{what} should fail: {out}");
        assert!(
            out.contains(s(old)) && out.contains(s(table)) && out.contains("--rebuild"),
            "{what} should name {} and {} and point at --rebuild: {out}",
            old.display(),
            table.display()
        );
    };
    let (code, out) = xlake(&["sync", s(table)]);
    names_both("sync", code, &out);
    let mut commit = vec!["commit", s(table)];
    commit.extend_from_slice(commit_args);
    let (code, out) = xlake(&commit);
    names_both("commit", code, &out);
    let (code, out) = xlake(&["check", s(table)]);
    assert_eq!(code, 1, "check exits 1 on a relocated table: {out}");
    names_both("check", code, &out);
    let (code, out) = xlake(&["check", "--json", s(table)]);
    assert_eq!(code, 1, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["relocated_from"], s(old), "{out}");
    let (code, out) = xlake(&["check", "--deep", s(table)]);
    assert_eq!(code, 1, "{out}");
    let (code, out) = xlake(&["inspect", s(table)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("relocated") && out.contains(s(old)), "{out}");
    assert!(out.contains(" 0 orphan files"), "{out}");
    let (code, out) = xlake(&["inspect", "--json", s(table)]);
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["iceberg"]["relocated_from"][0], s(old), "{out}");
    let (code, out) = xlake(&[
        "cleanup",
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
        s(table),
    ]);
    names_both("cleanup", code, &out);
    let (code, out) = xlake(&["expire", "--keep-snapshots", "1", s(table)]);
    names_both("expire", code, &out);
    let config = table.parent().unwrap().join("job.toml");
    std::fs::write(
        &config,
        format!(
            "[[tables]]\nlocation = \"{}\"\nkeep_snapshots = 1\n",
            s(table)
        ),
    )
    .unwrap();
    let (code, out) = xlake(&["run", "--config", s(&config), "--once"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAILED") && out.contains("--rebuild"), "{out}");
    std::fs::remove_file(config).unwrap();
    assert!(
        tree(table) == before,
        "a refused command changed {}",
        table.display()
    );
}

/// `sync --rebuild` at `table`: a new history here, consistent, naming only this place;
/// the old metadata moved aside whole (returned: the aside folder).
fn rebuild(table: &Path, old_metadata: &BTreeMap<PathBuf, Vec<u8>>) -> PathBuf {
    let (code, out) = xlake(&["sync", "--rebuild", s(table)]);
    assert_eq!(code, 0, "{out}");
    let aside: Vec<PathBuf> = std::fs::read_dir(table)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| s(p).contains("metadata.relocated-"))
        .collect();
    assert_eq!(aside.len(), 1, "{out}");
    assert!(
        out.contains(s(&aside[0])),
        "the output names the aside folder: {out}"
    );
    // Every old metadata file is there, byte for byte (version-hint.text is rewritten).
    let kept = tree(&aside[0]);
    for (rel, bytes) in old_metadata {
        if rel.ends_with("version-hint.text") {
            continue;
        }
        assert_eq!(kept.get(rel), Some(bytes), "{} set aside", rel.display());
    }
    let (code, out) = xlake(&["check", "--deep", "--all", s(table)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("consistent"), "{out}");
    let metadata = current(table);
    for path in named_paths(&metadata) {
        assert!(
            path.starts_with(s(table)),
            "{path} is not under {}",
            table.display()
        );
    }
    // Nothing of the old history is left in metadata/, nothing counts as an orphan.
    let (code, out) = xlake(&[
        "cleanup",
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
        "--dry-run",
        s(table),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 0 orphan metadata files"), "{out}");
    // The rebuilt table is an ordinary one again.
    let (code, out) = xlake(&["sync", s(table)]);
    assert!(code == 0 && out.contains("up to date"), "{out}");
    aside[0].clone()
}

/// `xlake serve` answering Hudi's commit callback for `instant` of `table`: status, body.
fn serve_callback(table: &Path, instant: &str) -> (u16, String) {
    let server = common::serve::Server::start(
        &[
            std::ffi::OsStr::new("--insecure-no-key"),
            "--allow".as_ref(),
            table.as_os_str(),
        ],
        None,
    );
    let body = serde_json::json!({"commitTime": instant, "basePath": s(table)}).to_string();
    server.post(None, &body)
}

#[test]
fn a_copied_table_is_refused_then_rebuilt_and_the_original_is_untouched() {
    let (dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let copy = dir.path().join("copy");
    copy_dir(&root, &copy);
    let original = tree(&root);
    let old_metadata = tree(&root.join("metadata"));
    let newest = common::hudi::data_instants(&root).last().unwrap().0.clone();
    assert_refused_everywhere(&root, &copy, &["--instant", &newest]);
    let before = tree(&copy);
    let (status, body) = serve_callback(&copy, &newest);
    assert_eq!(status, 500, "{body}");
    // The answer names the relocation and the way out, but no path outside the table
    // (the service never echoes those; its log has the full message).
    assert!(
        body.contains("copied or moved") && body.contains("--rebuild") && !body.contains(s(&root)),
        "{body}"
    );
    assert!(tree(&copy) == before, "the callback changed the copy");
    rebuild(&copy, &old_metadata);
    assert!(tree(&root) == original, "the original changed");
    // The original is still a table of its own.
    let (code, out) = xlake(&["check", "--deep", s(&root)]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_moved_table_is_refused_then_rebuilt_with_its_delete_files() {
    let (dir, root) = common::delta::extract("table_with_deletion_logs");
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let old_metadata = tree(&root.join("metadata"));
    assert!(
        old_metadata
            .keys()
            .any(|p| s(p).ends_with("-deletes.parquet")),
        "the table should have position-delete files"
    );
    let moved = dir.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    let newest = common::delta::commit_versions(&moved)
        .last()
        .unwrap()
        .to_string();
    assert_refused_everywhere(&root, &moved, &["--version", &newest]);
    rebuild(&moved, &old_metadata);
}

#[test]
fn an_interrupted_rebuild_leaves_a_valid_table_and_a_rerun_finishes_it() {
    let (dir, root) = common::delta::extract("simple_table");
    assert_eq!(xlake(&["sync", s(&root)]).0, 0);
    let old_metadata = tree(&root.join("metadata"));
    let moved = dir.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    let aside = rebuild(&moved, &old_metadata);
    // As if the rebuild died after its new history, before setting the old one aside.
    for (rel, _) in tree(&aside) {
        std::fs::rename(aside.join(&rel), moved.join("metadata").join(&rel)).unwrap();
    }
    std::fs::remove_dir_all(&aside).unwrap();
    // The current version is this place's: readers and syncs go on.
    let (code, out) = xlake(&["sync", s(&moved)]);
    assert!(code == 0 && out.contains("up to date"), "{out}");
    // What names the old place is still there: nothing counts as an orphan.
    let (code, out) = xlake(&[
        "cleanup",
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
        s(&moved),
    ]);
    assert!(code != 0 && out.contains(s(&root)), "{out}");
    let (code, out) = xlake(&["inspect", s(&moved)]);
    assert!(code == 0 && out.contains("relocated"), "{out}");
    let before = tree(&moved.join("metadata")).len();
    let (code, out) = xlake(&["sync", "--rebuild", s(&moved)]);
    assert!(code == 0 && out.contains("metadata.relocated-"), "{out}");
    assert_eq!(
        tree(&moved.join("metadata")).len() + old_metadata.len() - 1,
        before,
        "every old file but the hint moved aside"
    );
    let (code, out) = xlake(&[
        "cleanup",
        "--orphans",
        "--older-than",
        "0s",
        "--no-writer-running",
        s(&moved),
    ]);
    assert!(code == 0 && out.contains(": 0 orphan"), "{out}");
}

#[test]
fn the_same_place_spelled_otherwise_is_not_a_relocation() {
    let (dir, root) = common::delta::extract("partitioned_3commits");
    assert_eq!(xlake(&["sync", s(&root)]).0, 0);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    for spelling in [
        format!("{}/", s(&root)),
        format!("file://{}", s(&root)),
        s(&link).to_string(),
    ] {
        let (code, out) = xlake(&["sync", &spelling]);
        assert!(code == 0 && out.contains("up to date"), "{spelling}: {out}");
        let (code, out) = xlake(&["check", &spelling]);
        assert_eq!(code, 0, "{spelling}: {out}");
    }
    // `--rebuild` on a table at home is a plain sync that moves nothing.
    let (code, out) = xlake(&["sync", "--rebuild", s(&root)]);
    assert!(code == 0 && out.contains("nothing to set aside"), "{out}");
    assert!(!std::fs::read_dir(&root)
        .unwrap()
        .any(|e| s(&e.unwrap().path()).contains("relocated")));
}

#[test]
fn snapshots_are_listed_in_commit_order_and_a_scrambled_list_is_fixed_on_the_next_commit() {
    let (_dir, root) = common::delta::extract("table_with_deletion_logs");
    let versions = common::delta::commit_versions(&root);
    // Mirror all but the last three versions (one batch: one vN holding every snapshot).
    let upto = versions[versions.len() - 4].to_string();
    let (code, out) = xlake(&["commit", s(&root), "--version", &upto]);
    assert_eq!(code, 0, "{out}");
    let metadata = current(&root);
    let seq = sequence_numbers(&metadata);
    assert!(seq.len() > 10, "{seq:?}");
    assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
    // Keys as Java writes them.
    let text = std::fs::read_to_string(root.join(format!(
        "metadata/v{}.metadata.json",
        std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap()
    )))
    .unwrap();
    assert!(
        text.starts_with("{\"format-version\":2,\"table-uuid\""),
        "{}",
        &text[..60]
    );

    // A version written by the old code: the same, its snapshots in hash order.
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let path = root.join(format!("metadata/v{hint}.metadata.json"));
    let mut scrambled = metadata.clone();
    let snapshots = scrambled["snapshots"].as_array_mut().unwrap();
    snapshots.reverse();
    snapshots.swap(1, 4);
    std::fs::write(&path, serde_json::to_vec(&scrambled).unwrap()).unwrap();
    assert!(!sequence_numbers(&current(&root))
        .windows(2)
        .all(|w| w[0] < w[1]));
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let seq = sequence_numbers(&current(&root));
    assert_eq!(seq, (1..=seq.len() as i64).collect::<Vec<_>>());
}

#[test]
fn a_v3_mirror_is_rebuilt_as_v3_with_its_deletion_vectors() {
    let (dir, root) = common::delta::extract("table_with_deletion_logs");
    let (code, out) = xlake(&["sync", "--format-version", "3", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let old_metadata = tree(&root.join("metadata"));
    let moved = dir.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    // No --format-version: the rebuild keeps the version the old history had, so the
    // deletion vectors (left undecoded for a v3 table) are carried, never dropped.
    rebuild(&moved, &old_metadata);
    let metadata = current(&moved);
    assert_eq!(
        metadata["format-version"], 3,
        "the rebuild kept format version 3"
    );
    let puffins = std::fs::read_dir(moved.join("metadata"))
        .unwrap()
        .filter(|e| s(&e.as_ref().unwrap().path()).ends_with(".puffin"))
        .count();
    assert!(
        puffins > 0,
        "the rebuilt history carries the deletion vectors"
    );
}

/// The path index property names a source file (any writer can set a table property):
/// a rebuild neither moves nor reads it, and the source stays whole.
#[test]
fn a_path_index_property_naming_a_source_file_is_ignored_by_a_rebuild() {
    let (dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let file = root.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let mut metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for named in [".hoodie/hoodie.properties", "/etc/hostname"] {
        metadata["properties"]["xlake.path-index"] = named.into();
        std::fs::write(&file, serde_json::to_vec(&metadata).unwrap()).unwrap();
        let copy = dir.path().join(format!("copy{}", named.len()));
        copy_dir(&root, &copy);
        let source = std::fs::read(copy.join(".hoodie/hoodie.properties")).unwrap();
        let (code, out) = xlake(&["sync", "--rebuild", s(&copy)]);
        assert_eq!(code, 0, "{out}");
        assert_eq!(
            std::fs::read(copy.join(".hoodie/hoodie.properties")).unwrap(),
            source,
            "the rebuild moved a source file the property named"
        );
        assert!(Path::new("/etc/hostname").exists());
        let (code, out) = xlake(&["check", "--deep", s(&copy)]);
        assert_eq!(code, 0, "{out}");
    }
}

/// A copied folder holding Iceberg metadata another writer made is refused by cleanup as
/// foreign (exit 2), not as relocated: the rebuild that advice names would refuse it too.
#[test]
fn cleanup_of_a_copied_foreign_table_is_refused_as_foreign() {
    let (dir, root) = common::delta::extract("simple_table");
    assert_eq!(xlake(&["sync", s(&root)]).0, 0);
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let path = root.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("XTABLE_METADATA", "SOMEONE_ELSE")).unwrap();
    let copy = dir.path().join("copy");
    copy_dir(&root, &copy);
    let before = tree(&copy);
    let (code, out) = xlake(&[
        "cleanup",
        s(&copy),
        "--older-than",
        "0s",
        "--no-writer-running",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("not written by xlake") && !out.contains("--rebuild"),
        "{out}"
    );
    assert!(tree(&copy) == before, "cleanup changed the copy");
}

/// `simple_table` mirrored by its own path up to version 1, its versions 2 to 4 set
/// aside; the function puts one back in the log.
fn mirrored_up_to_version_1() -> (tempfile::TempDir, PathBuf, impl Fn(u64)) {
    let (dir, root) = common::delta::extract("simple_table");
    let log = root.join("_delta_log");
    let aside = dir.path().join("aside");
    std::fs::create_dir(&aside).unwrap();
    let name = |v: u64| format!("{v:020}.json");
    for v in 2..=4 {
        std::fs::rename(log.join(name(v)), aside.join(name(v))).unwrap();
    }
    assert_eq!(xlake(&["sync", s(&root)]).0, 0);
    let restore = move |v: u64| std::fs::rename(aside.join(name(v)), log.join(name(v))).unwrap();
    (dir, root, restore)
}

/// A table synced through a link as well as by its own path keeps the spelling its mirror
/// recorded: the versions synced through the link name their files as the first sync did,
/// so a later removal finds them under either spelling (hostile review, 2026-12-06: the
/// mirror named its files both ways and every removal after that failed).
#[test]
fn a_table_synced_through_a_link_keeps_the_spelling_its_mirror_recorded() {
    let (dir, root, restore) = mirrored_up_to_version_1();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    // Versions 2 to 4 remove what versions 0 and 1 added; each synced through the link.
    for v in 2..=4 {
        restore(v);
        let (code, out) = xlake(&["sync", s(&link)]);
        assert_eq!(code, 0, "version {v}: {out}");
    }
    let named = named_paths(&current(&root));
    assert!(
        !named.is_empty() && named.iter().all(|p| p.contains(s(&root))),
        "{named:?}"
    );
    for spelling in [&root, &link] {
        let (code, out) = xlake(&["check", s(spelling), "--deep"]);
        assert_eq!(code, 0, "{}: {out}", s(spelling));
    }
}

/// A mirror recording its table's place through `..` (written by hand or by another tool)
/// is synced and committed as the place it names, once: the spelling opens as the table's
/// own, so there is no other to adopt (hostile review 4: sync and commit re-opened the
/// table and asked again until the stack overflowed).
#[test]
fn a_recorded_location_through_dot_dot_is_the_tables_own_and_synced_once() {
    let (dir, root, restore) = mirrored_up_to_version_1();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let name = root.file_name().unwrap().to_str().unwrap();
    let climbing = format!("{}/sub/../{name}", dir.path().display());
    let mut metadata = current(&root);
    metadata["location"] = serde_json::Value::String(climbing);
    std::fs::write(
        root.join("metadata/v1.metadata.json"),
        serde_json::to_vec(&metadata).unwrap(),
    )
    .unwrap();
    restore(2);
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    restore(3);
    let (code, out) = xlake(&["commit", s(&root), "--version", "3"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = xlake(&["check", s(&root), "--deep"]);
    assert_eq!(code, 0, "{out}");
}

/// `sync --rebuild` through a link to a table whose mirror records its real path keeps
/// the recorded spelling as a plain sync does: the table is at home, nothing is set
/// aside, and the first removal finds its file (hostile review 4: a rebuild read no
/// metadata before it chose the spelling, and stopped at the first removal).
#[test]
fn a_rebuild_through_a_link_keeps_the_spelling_its_mirror_recorded() {
    let (dir, root, restore) = mirrored_up_to_version_1();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    restore(2);
    let (code, out) = xlake(&["sync", "--rebuild", s(&link)]);
    assert_eq!(code, 0, "{out}");
    let named = named_paths(&current(&root));
    assert!(
        !named.is_empty() && named.iter().all(|p| p.contains(s(&root))),
        "{named:?}"
    );
    assert_eq!(current(&root)["location"], s(&root), "{out}");
}

/// A `metadata/` that is a symbolic link to another table's folder holds that table's
/// mirror, which names the other place: the sync says "copied or moved" and advises
/// `--rebuild`, and the rebuild followed the link, moved the other table's whole mirror
/// into this folder and wrote this table's history in its place (hostile review hr14: the
/// other table's readers then read this one's rows, its catalog entry named a file gone).
/// It is refused, nothing changed on either side.
#[test]
fn a_rebuild_never_moves_what_a_linked_metadata_folder_leads_to() {
    let (dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (code, out) = xlake(&["sync", s(&root)]);
    assert_eq!(code, 0, "{out}");
    let other = dir.path().join("other");
    copy_dir(&root, &other);
    std::fs::remove_dir_all(other.join("metadata")).unwrap();
    std::os::unix::fs::symlink(root.join("metadata"), other.join("metadata")).unwrap();
    let original = tree(&root);
    let (code, out) = xlake(&["sync", "--rebuild", s(&other)]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("symbolic link"), "{out}");
    assert!(tree(&root) == original, "the linked table changed");
    let names: Vec<_> = std::fs::read_dir(&other)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("metadata.relocated")),
        "{names:?}"
    );
    let (code, out) = xlake(&["check", "--deep", s(&root)]);
    assert_eq!(code, 0, "{out}");
}
