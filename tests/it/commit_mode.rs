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
