//! End-to-end: every Hudi fixture synced with `xlake-sync`, one snapshot per completed
//! data instant in timeline order; refusals and bad input leave the metadata as it was.
//! (Row-level agreement with hudi-rs is proven by `tests/interop/test_hudi.py`.)
use crate::common;

use std::path::Path;
use std::process::Command;

use common::hudi::{data_instants, extract};
use xlake_hudi::HudiOptions;
use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;
use xlake_sync::{sync, SyncError, SyncOptions};
use xlake_test_utils::metadata_snapshot;

const COW: [&str; 9] = [
    "sample_table_cow_v6_complexkeygen_hivestyle",
    "sample_table_cow_v6_nonpartitioned",
    "sample_table_cow_v6_simplekeygen_nonhivestyle",
    "sample_table_cow_v6_simplekeygen_nonhivestyle_overwritetable",
    "sample_table_cow_v6_timebasedkeygen_nonhivestyle",
    "sample_table_cow_v8_nonpartitioned",
    "sample_table_cow_v8_simplekeygen_nonhivestyle",
    "sample_table_cow_v9_txns_nonpart_meta",
    "sample_table_cow_v9_txns_simple_nometa",
];
const MOR: [&str; 3] = [
    "sample_table_mor_avro_v9_nonpartitioned_rollback",
    "sample_table_mor_avro_v9_txns_simple_nometa",
    "sample_table_mor_parquet_v6_nonpartitioned",
];

fn read_optimized() -> SyncOptions {
    SyncOptions {
        source: HudiOptions {
            mor_read_optimized: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn mirrored(root: &Path) -> Vec<String> {
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    table
        .synced_commits()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, m)| m.source_identifier.unwrap())
        .collect()
}

#[tokio::test]
async fn every_completed_data_instant_gets_one_snapshot_in_order() {
    for (name, options) in COW
        .iter()
        .map(|n| (n, SyncOptions::default()))
        .chain(MOR.iter().map(|n| (n, read_optimized())))
    {
        let (_dir, root) = extract(name);
        let expected: Vec<String> = data_instants(&root).into_iter().map(|(r, _)| r).collect();
        assert!(!expected.is_empty(), "{name}");
        let report = sync(root.to_str().unwrap(), &options, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.written.len(), expected.len(), "{name}");
        assert_eq!(
            mirrored(&root).await,
            expected,
            "{name}: one snapshot per instant, in order"
        );
        // A backfill of fewer than 100 commits publishes them in one metadata version.
        let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
        assert_eq!(hint, "1", "{name}");
        // A second sync finds nothing pending and writes nothing.
        let again = sync(root.to_str().unwrap(), &options, |_| {})
            .await
            .unwrap();
        assert_eq!(
            (again.written.len(), again.already_mirrored),
            (0, expected.len()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn empty_table_gets_a_table_without_snapshots() {
    let (_dir, root) = extract("sample_table_cow_v6_empty");
    let report = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    assert_eq!((report.source_commits, report.written.len()), (0, 0));
    assert_eq!(report.created_empty, Some(1));
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let metadata = table.load().await.unwrap().unwrap().metadata;
    assert!(metadata.current_snapshot().is_none());
    let names: Vec<&str> = metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(&names[5..], ["id", "name", "isActive"], "{names:?}");
    // A second sync finds the table there and writes nothing.
    let before = metadata_snapshot(&root);
    let again = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    assert_eq!(again.created_empty, None);
    assert_eq!(metadata_snapshot(&root), before);
    let report =
        xlake_sync::check_with(root.to_str().unwrap(), &SyncOptions::default(), true, true)
            .await
            .unwrap();
    assert!(report.consistent(), "{report:?}");
}

#[tokio::test]
async fn merge_on_read_is_refused_by_default() {
    for name in MOR {
        let (_dir, root) = extract(name);
        let err = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("--mor-read-optimized"),
            "{name}: {err}"
        );
        assert!(
            err.to_string()
                .contains("merge-on-read (MOR) table: Iceberg engines cannot read Hudi log files"),
            "{name}: {err}"
        );
        assert!(metadata_snapshot(&root).is_empty());
        // Under `--target delta` the message names the target in use.
        let to_delta = SyncOptions {
            target: Some("delta".into()),
            ..Default::default()
        };
        let err = sync(root.to_str().unwrap(), &to_delta, |_| {})
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("merge-on-read (MOR) table: Delta engines cannot read Hudi log files")
                && err.contains("--mor-read-optimized")
                && !err.contains("Iceberg"),
            "{name}: {err}"
        );
        assert!(!root.join("_delta_log").exists(), "{name}: nothing written");
    }
    let (_dir, root) = extract("sample_table_mor_avro_v9_txns_simple_nometa");
    sync(root.to_str().unwrap(), &read_optimized(), |_| {})
        .await
        .unwrap();
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let metadata = table.load().await.unwrap().unwrap().metadata;
    let summary = &metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(summary["xlake.hudi.view"], "read_optimized");
}

#[tokio::test]
async fn a_type_change_iceberg_cannot_read_stops_the_sync_clearly() {
    // Later commits write the partition column ts_millis as a string; earlier files hold a long.
    let (_dir, root) = extract("sample_table_cow_v9_timebasedkeygen_epochmillis");
    let err = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("ts_millis") && text.contains("long") && text.contains("string"),
        "{text}"
    );
    let instants = data_instants(&root);
    let done = mirrored(&root).await;
    assert!(!done.is_empty() && done.len() < instants.len());
    assert!(
        text.contains(&instants[done.len()].0),
        "names the instant: {text}"
    );
}

fn later_instant(root: &Path, action: &str, body: &[u8]) -> String {
    let name = format!("29990101000000000_29990101000000001.{action}");
    std::fs::write(root.join(".hoodie/timeline").join(&name), body).unwrap();
    name
}

#[tokio::test]
async fn bad_instants_name_table_instant_and_file_and_change_nothing() {
    let (_dir, root) = extract("sample_table_cow_v9_txns_simple_nometa");
    let location = root.to_str().unwrap();
    sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    let before = metadata_snapshot(&root);

    // A truncated Avro commit file.
    let real = std::fs::read_dir(root.join(".hoodie/timeline"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "commit"))
        .unwrap();
    let bytes = std::fs::read(real).unwrap();
    let name = later_instant(&root, "commit", &bytes[..bytes.len() / 2]);
    let err = sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("29990101000000000") && err.contains(&name) && err.contains(location),
        "{err}"
    );
    assert_eq!(metadata_snapshot(&root), before);
    std::fs::remove_file(root.join(".hoodie/timeline").join(&name)).unwrap();

    // Garbage JSON where commit metadata should be.
    let name = later_instant(&root, "commit", b"{not json");
    let err = sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&name) && err.contains("JSON"), "{err}");
    std::fs::remove_file(root.join(".hoodie/timeline").join(&name)).unwrap();

    // An action xlake does not know.
    let name = later_instant(&root, "frobnicate", b"{}");
    let err = sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown action") && err.contains(&name),
        "{err}"
    );
    std::fs::remove_file(root.join(".hoodie/timeline").join(&name)).unwrap();

    assert_eq!(metadata_snapshot(&root), before);

    // Garbled or missing hoodie.properties.
    let props = root.join(".hoodie/hoodie.properties");
    std::fs::write(&props, b"hoodie.table.version=banana\n").unwrap();
    let err = sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hoodie.properties") && err.contains("hoodie.table.version"),
        "{err}"
    );
    std::fs::remove_file(&props).unwrap();
    let err = sync(location, &SyncOptions::default(), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::NotATable { .. }), "{err}");
    assert_eq!(metadata_snapshot(&root), before);
}

#[tokio::test]
async fn a_missing_live_data_file_stops_at_its_instant() {
    let (_dir, root) = extract("sample_table_cow_v9_txns_simple_nometa");
    let instants = data_instants(&root);
    let last = instants.len() - 1;
    // Remove a base file written by the last data instant: it is live, so it must exist.
    let victim = walk(&root)
        .into_iter()
        .find(|p| {
            p.to_str()
                .unwrap()
                .ends_with(&format!("_{}.parquet", instants[last].0))
        })
        .unwrap();
    std::fs::remove_file(&victim).unwrap();
    let err = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap_err()
        .to_string();
    let file = victim.file_name().unwrap().to_str().unwrap();
    assert!(
        err.contains(file) && err.contains("does not exist") && err.contains(&instants[last].0),
        "{err}"
    );
    assert_eq!(
        mirrored(&root).await.len(),
        last,
        "the earlier instants are mirrored, no more"
    );
    // Published together, in the one version the bad instant did not enter.
    assert_eq!(
        std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap(),
        "1"
    );
}

#[tokio::test]
async fn cleaned_files_of_history_do_not_block_a_first_sync() {
    let (_dir, root) = extract("sample_table_cow_v9_txns_simple_nometa");
    let instants = data_instants(&root);
    // A cleaner deleted the base files the first instant wrote (all replaced since).
    let cleaned: Vec<_> = walk(&root)
        .into_iter()
        .filter(|p| {
            p.to_str()
                .unwrap()
                .ends_with(&format!("_{}.parquet", instants[0].0))
        })
        .collect();
    assert!(!cleaned.is_empty());
    for f in &cleaned {
        std::fs::remove_file(f).unwrap();
    }
    let report = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
        .await
        .unwrap();
    assert_eq!(report.written.len(), instants.len());
    // The first snapshot still counts its rows, from the commit metadata.
    let table = IcebergTable::new(TableStore::open(root.to_str().unwrap()).unwrap());
    let metadata = table.load().await.unwrap().unwrap().metadata;
    let first = metadata
        .snapshots()
        .find(|s| s.sequence_number() == 1)
        .unwrap();
    assert_eq!(first.summary().additional_properties["total-records"], "8");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_cli_exits_non_zero_with_the_reason() {
    let (_dir, root) = extract("sample_table_mor_parquet_v6_nonpartitioned");
    let out = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["sync", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("merge-on-read") && stderr.contains(root.to_str().unwrap()),
        "{stderr}"
    );
    let ok = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["sync", "--mor-read-optimized", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("2 snapshots written"));
}

/// A replay that starts after the newest mirrored instant, from the mirror's live files,
/// gives exactly the change sets the full replay gives after that instant, at every
/// point of every fixture's timeline where the shortcut applies (and it applies on the
/// tables without late completions).
#[tokio::test]
async fn an_incremental_replay_equals_the_full_one_after_every_instant() {
    use std::collections::BTreeMap;
    use xlake_hudi::HudiSource;
    use xlake_source::{MirrorState, TableSource};

    for (name, options) in COW
        .iter()
        .map(|n| (n, HudiOptions::default()))
        .chain(MOR.iter().map(|n| {
            (
                n,
                HudiOptions {
                    mor_read_optimized: true,
                    ..Default::default()
                },
            )
        }))
    {
        let (_dir, root) = extract(name);
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        let source = HudiSource::open(store.clone(), options).await.unwrap();
        let full = source
            .change_sets(&MirrorState::default())
            .await
            .unwrap()
            .changes;
        let mut live: BTreeMap<String, u64> = BTreeMap::new();
        let (mut used, mut without_live) = (0, 0);
        for k in 1..full.len() {
            let done = &full[k - 1];
            if done.full_state {
                live.clear();
            }
            for path in &done.removed {
                live.remove(path);
            }
            for f in &done.added {
                live.insert(f.path.clone(), f.record_count.unwrap_or(0));
            }
            let state = MirrorState {
                commits: full[..k].iter().map(|c| c.commit.id.clone()).collect(),
                first: full.first().map(|c| c.commit.id.clone()),
                newest: Some((done.commit.id.clone(), done.notes.clone())),
                live_files: Some(live.iter().map(|(p, n)| (store.absolute(p), *n)).collect()),
                source_state: None,
                deletes: None,
            };
            // The order of files is not meaningful (commit metadata keeps write stats in
            // a map; a replace commit's removals follow the live map's).
            let sorted = |changes: &[xlake_model::ChangeSet]| -> Vec<xlake_model::ChangeSet> {
                changes
                    .iter()
                    .filter(|c| !state.commits.contains(&c.commit.id))
                    .cloned()
                    .map(|mut c| {
                        c.removed.sort();
                        c.added.sort_by(|x, y| x.path.cmp(&y.path));
                        c
                    })
                    .collect()
            };
            // Without the live files: it starts after the newest mirrored instant only
            // when the later instants start new file groups only, else at the first.
            let without = MirrorState {
                live_files: None,
                ..state.clone()
            };
            let alone = source.change_sets(&without).await.unwrap().changes;
            assert!(
                sorted(&alone) == sorted(&full[k..]),
                "{name}: after {}: the replay without live files differs",
                done.commit.id
            );
            if alone.len() == full.len() - k {
                without_live += 1;
            }
            if source.reads_saved_by_live_files(&state).await == 0 {
                continue;
            }
            used += 1;
            let incremental = source.change_sets(&state).await.unwrap().changes;
            let (a, b) = (sorted(&incremental), sorted(&full[k..]));
            assert!(
                a == b,
                "{name}: after {}: the incremental replay differs",
                done.commit.id
            );
        }
        eprintln!("{name}: {used} incremental starts with the live files, {without_live} without");
        assert!(
            used + without_live > 0 || full.len() < 2,
            "{name}: the incremental replay never applied"
        );
    }
}

/// Opened after the newest mirrored instant with the state its change set saved (the
/// timeline listed from the instant time it names), a replay gives exactly the change
/// sets the full replay gives after that instant, and the listing and tip are the whole
/// timeline's, at every point of every fixture's timeline.
#[tokio::test]
async fn a_timeline_listed_from_the_saved_instant_time_gives_what_the_whole_gives() {
    use xlake_hudi::HudiSource;
    use xlake_source::{MirrorState, TableSource};

    let read_optimized = || HudiOptions {
        mor_read_optimized: true,
        ..Default::default()
    };
    let cases = COW.iter().map(|n| (n, HudiOptions::default()));
    for (name, options) in cases.chain(MOR.iter().map(|n| (n, read_optimized()))) {
        let (_dir, root) = extract(name);
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        let whole = HudiSource::open(store.clone(), options).await.unwrap();
        let full = whole
            .change_sets(&MirrorState::default())
            .await
            .unwrap()
            .changes;
        let mut partial = 0;
        for k in 1..full.len() {
            let done = &full[k - 1];
            let state = MirrorState {
                commits: full[..k].iter().map(|c| c.commit.id.clone()).collect(),
                newest: Some((done.commit.id.clone(), done.notes.clone())),
                source_state: done.source_state.clone(),
                ..Default::default()
            };
            assert!(state.source_state.is_some(), "{name}: no state saved");
            let source = HudiSource::open_after(store.clone(), options, &state)
                .await
                .unwrap()
                .unwrap();
            source.reads_saved_by_live_files(&state).await;
            partial += usize::from(source.listed_from().is_some());
            // The order of files is not meaningful (commit metadata keeps write stats in
            // a map).
            let sorted = |changes: &[xlake_model::ChangeSet]| -> Vec<xlake_model::ChangeSet> {
                changes
                    .iter()
                    .filter(|c| !state.commits.contains(&c.commit.id))
                    .cloned()
                    .map(|mut c| {
                        c.removed.sort();
                        c.added.sort_by(|x, y| x.path.cmp(&y.path));
                        c
                    })
                    .collect()
            };
            let got = source.change_sets(&state).await.unwrap().changes;
            let at = done.commit.id.as_str();
            assert!(
                sorted(&got) == sorted(&full[k..]),
                "{name}: after {at}: the change sets differ"
            );
            let listed = |s: &HudiSource| TableSource::listing(s, &state).unwrap().commits;
            assert_eq!(listed(&source), listed(&whole), "{name}: after {at}");
            assert_eq!(source.tip(), whole.tip(), "{name}: after {at}");
        }
        eprintln!("{name}: listed from the saved instant time after {partial} instants");
    }
}

/// A sync that finds an instant pending (requested before the newest instant) and a
/// later sync after it completed, with the timeline listed from the instant time the
/// first saved: every data instant is mirrored.
#[tokio::test]
async fn an_instant_pending_at_one_sync_is_mirrored_by_the_next_once_completed() {
    // The instant made late: one with a mirrored instant before it and after it (an
    // unmirrored instant before every mirrored one is taken as mirrored, then expired).
    // (The table version 6 fixtures have too few instants, and in the others most
    // instants rewrite the groups the next one rewrites: the crate's tests build more.)
    for (name, late) in [("sample_table_cow_v9_txns_simple_nometa", 6)] {
        let (_dir, root) = extract(name);
        let instants = data_instants(&root);
        let (late, _) = &instants[late];
        let timeline = match root.join(".hoodie/timeline").is_dir() {
            true => root.join(".hoodie/timeline"),
            false => root.join(".hoodie"),
        };
        // Its completed file set aside: the instant is inflight.
        let done = std::fs::read_dir(&timeline)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let file = p.file_name().unwrap().to_str().unwrap();
                file.starts_with(late.as_str())
                    && !file.ends_with(".requested")
                    && !file.ends_with(".inflight")
            })
            .unwrap();
        let aside = root.join("aside");
        std::fs::rename(&done, &aside).unwrap();
        let first = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
            .await
            .unwrap();
        assert_eq!(first.written.len(), instants.len() - 1, "{name}");
        assert!(!mirrored(&root).await.contains(late), "{name}");
        std::fs::rename(&aside, &done).unwrap();
        let second = sync(root.to_str().unwrap(), &SyncOptions::default(), |_| {})
            .await
            .unwrap();
        let written: Vec<&str> = second
            .written
            .iter()
            .map(|m| m.commit.id.as_str())
            .collect();
        assert_eq!(written, [late.as_str()], "{name}");
        let mut got = mirrored(&root).await;
        got.sort();
        let mut want: Vec<String> = instants.into_iter().map(|(id, _)| id).collect();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
}
