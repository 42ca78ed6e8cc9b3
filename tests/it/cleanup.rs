//! `xlake cleanup --orphans`: removes only unreferenced metadata files, never data files,
//! never files of a commit that may still be in progress.
use crate::common;

use std::path::Path;
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
        age(p, Duration::from_secs(7200));
    }
    let young = metadata.join("00000000-dead-beef-0000-000000000002-m0.avro");
    std::fs::copy(&some_manifest, &young).unwrap();
    // Referenced files are old too, and must stay.
    for p in files_under(&metadata) {
        if !stale.contains(&p) && p != young {
            age(&p, Duration::from_secs(7200));
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
            "1h",
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
