//! In-commit mode (`xlake commit`): the last step of a write job.
use crate::common;

use common::hudi::{data_instants, extract as extract_hudi};

fn snapshot_count(root: &std::path::Path) -> usize {
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join(format!("metadata/v{hint}.metadata.json"))).unwrap(),
    )
    .unwrap();
    meta["snapshots"].as_array().unwrap().len()
}

#[test]
fn mirrors_up_to_the_named_commit_and_no_further() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, text) = common::xlake(&["commit", t, "--version", "2"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("source commit 2 is mirrored"), "{text}");
    assert_eq!(snapshot_count(&root), 3, "versions 0, 1, 2");
    let (code, text) = common::xlake(&["commit", t, "--version", "4"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(snapshot_count(&root), 5);
    // Already mirrored: still success, nothing written.
    assert_eq!(common::xlake(&["commit", t, "--version", "3"]).0, 0);
    assert_eq!(snapshot_count(&root), 5);
}

#[test]
fn an_inflight_or_unknown_commit_fails_with_the_reason() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    let t = root.to_str().unwrap();
    // Make the last instant inflight again: drop its completed file.
    let (last, action) = data_instants(&root).last().unwrap().clone();
    let completed = std::fs::read_dir(root.join(".hoodie/timeline"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(&format!("{last}_")) && name.ends_with(&format!(".{action}"))
        })
        .unwrap();
    std::fs::remove_file(completed).unwrap();
    let (code, text) = common::xlake(&["commit", t, "--instant", &last]);
    assert_ne!(code, 0);
    assert!(
        text.contains(&last) && text.contains("not completed"),
        "{text}"
    );
    assert!(
        !root.join("metadata").exists(),
        "nothing written for a commit that is not done"
    );
    let (code, text) = common::xlake(&["commit", t, "--instant", "20990101000000000"]);
    assert_ne!(code, 0);
    assert!(text.contains("no such completed commit"), "{text}");
}

/// The current version's `vN.metadata.json`, its N and its text.
fn current(root: &std::path::Path) -> (u64, String) {
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let file = root.join(format!("metadata/v{hint}.metadata.json"));
    (
        hint.parse().unwrap(),
        std::fs::read_to_string(file).unwrap(),
    )
}

/// The snapshot index (`xlake.snapshot-index`) of a metadata file's text.
fn index_of(text: &str) -> String {
    let meta: serde_json::Value = serde_json::from_str(text).unwrap();
    meta["properties"]["xlake.snapshot-index"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Each version names itself in its snapshot index, one entry per snapshot with the source
/// commit it records. An index edited in place is not used (had it been, its wrong entry
/// would have been carried into the next version's index), nor one copied into another
/// version by another writer; the next version has a fresh one.
#[test]
fn a_snapshot_index_is_used_only_as_written_for_its_file() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    assert_eq!(common::xlake(&["commit", t, "--version", "2"]).0, 0);
    let (n, text) = current(&root);
    let index = index_of(&text);
    assert!(
        index.starts_with(&format!("1;v{n}.metadata.json;")),
        "{index}"
    );
    let entries: Vec<&str> = index.split(';').skip(3).collect();
    assert_eq!(entries.len(), 3, "{index}");
    for (version, entry) in entries.iter().enumerate() {
        assert!(entry.ends_with(&format!(",={version}")), "{index}");
    }
    // Edited in place: version 1's entry says 7.
    let file = root.join(format!("metadata/v{n}.metadata.json"));
    let edited = text.replacen(",=1;", ",=7;", 1);
    assert_ne!(edited, text);
    std::fs::write(&file, &edited).unwrap();
    assert_eq!(common::xlake(&["commit", t, "--version", "3"]).0, 0);
    let (n, text) = current(&root);
    assert!(index_of(&text).contains(",=1;") && !text.contains(",=7;"));
    // Copied as is into the next version by another writer: the index names the file
    // before it, so the copy is read snapshot by snapshot.
    let copy = root.join(format!("metadata/v{}.metadata.json", n + 1));
    std::fs::write(copy, &text).unwrap();
    std::fs::write(root.join("metadata/version-hint.text"), (n + 1).to_string()).unwrap();
    assert_eq!(common::xlake(&["commit", t, "--version", "4"]).0, 0);
    let (m, text) = current(&root);
    let index = index_of(&text);
    assert_eq!(m, n + 2);
    assert!(
        index.starts_with(&format!("1;v{m}.metadata.json;")),
        "{index}"
    );
    assert!(index.contains(",=1;") && !index.contains(",=7;"), "{index}");
    assert_eq!(index.split(';').skip(3).count(), 5, "{index}");
    let (code, report) = common::xlake(&["check", t]);
    assert_eq!(code, 0, "{report}");
}

/// `commit` runs on the main thread alone; deltalake-core, which reads multi-part and V2
/// (sidecar) checkpoints, then drives its reads from a runtime of its own. A log that
/// starts at such a checkpoint is mirrored all the same.
#[test]
fn a_log_starting_at_a_multi_part_or_v2_checkpoint_is_mirrored_in_commit_mode() {
    for (fixture, first_commit, latest) in [
        ("multi-part-checkpoint", 0, 1),
        ("checkpoint-v2-table", 6, 9),
    ] {
        let (_dir, root) = common::delta::extract(fixture);
        let log = root.join("_delta_log");
        // Without the commits before the checkpoint, it is the only way in.
        for v in 0..=first_commit {
            std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
        }
        let t = root.to_str().unwrap();
        let (code, text) = common::xlake(&["commit", t, "--version", &latest.to_string()]);
        assert_eq!(code, 0, "{fixture}: {text}");
        let (code, report) = common::xlake(&["check", t]);
        assert_eq!(code, 0, "{fixture}: {report}");
    }
}

/// Hostile review 6: a commit whose instant time is below the floor the last sync saved
/// (its files appeared after that sync: a writer behind the others, the autumn clock
/// change under Hudi's LOCAL time zone) is not in the timeline listed from there. Named
/// by in-commit mode (or Hudi's callback), it is looked up in the whole timeline and
/// mirrored, not refused as "no such completed commit".
/// Write into the Hudi table version 6 sample at `root` a completed commit at instant `id`
/// that starts file group `new_group` (a copy of the sample's first base file).
fn write_v6_commit(root: &std::path::Path, id: &str, new_group: &str) {
    let hoodie = root.join(".hoodie");
    let group = "a079bdb3-731c-4894-b855-abfcd6921007-0";
    let base = format!("{group}_0-182-253_20240418173550988.parquet");
    let meta = std::fs::read_to_string(hoodie.join("20240418173550988.commit")).unwrap();
    let file = format!("{new_group}_0-1-1_{id}.parquet");
    std::fs::copy(root.join(&base), root.join(&file)).unwrap();
    let meta = meta.replace(&base, &file).replace(group, new_group);
    std::fs::write(hoodie.join(format!("{id}.commit")), meta).unwrap();
}

#[test]
fn a_commit_requested_before_the_saved_floor_is_mirrored_when_named() {
    let (_dir, root) = extract_hudi("sample_table_cow_v6_nonpartitioned");
    let t = root.to_str().unwrap();
    let write = |id: &str, new_group: &str| write_v6_commit(&root, id, new_group);
    write(
        "20240418183000000",
        "b0000000-0000-0000-0000-000000000000-0",
    );
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    // Half an hour before the newest instant: below its floor (less 10 minutes).
    let late = "20240418180000000";
    write(late, "c0000000-0000-0000-0000-000000000000-0");
    let (code, text) = common::xlake(&["commit", t, "--instant", late]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(snapshot_count(&root), 4);
    assert_eq!(common::xlake(&["check", t]).0, 0);
}

/// In-commit mode for a commit the mirror holds without a snapshot of its own (folded
/// into a `sync --from-latest` first snapshot, or its snapshot expired) succeeds, saying
/// so, and writes nothing: a retried callback for it failed every time ("finished
/// without a snapshot for it", exit 1; hostile review hr13's low item).
#[test]
fn a_commit_folded_or_expired_is_held_and_succeeds() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    let (code, text) = common::xlake(&["sync", t, "--from-latest"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = common::xlake(&["commit", t, "--version", "1"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("before where the mirror begins"), "{text}");
    assert_eq!(snapshot_count(&root), 1);
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    let (code, text) = common::xlake(&["expire", t, "--keep-snapshots", "1"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = common::xlake(&["commit", t, "--version", "0"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("before where the mirror begins"), "{text}");
    assert_eq!(snapshot_count(&root), 1);
}

/// Hostile review hr17: on Hudi table version 6 (ordered by requested time) a commit that
/// completes after the mirror began, requested before the commit its oldest snapshot
/// records, and that no saved state names pending (its writer's clock lags, or it was
/// pending beside more than 255 others) is never mirrored by a sync (docs/known-gaps.md).
/// In-commit mode, Hudi's callback for that very commit, was the one path that said so
/// (exit 1); since a commit before where the mirror begins was taken as held (folded or
/// expired), it said "is mirrored", exit 0, its rows absent from the mirror.
#[test]
fn a_late_v6_commit_before_where_the_mirror_begins_is_not_called_mirrored() {
    let (_dir, root) = extract_hudi("sample_table_cow_v6_nonpartitioned");
    let t = root.to_str().unwrap();
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    // Requested half an hour before the oldest mirrored instant, completed now.
    let late = "20240418170000000";
    write_v6_commit(&root, late, "c0000000-0000-0000-0000-000000000000-0");
    let (code, text) = common::xlake(&["commit", t, "--instant", late]);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains(&format!("source commit {late} is not mirrored")),
        "{text}"
    );
    assert!(text.contains("completed late"), "{text}");
    assert_eq!(snapshot_count(&root), 2, "nothing written");
}
