//! `xlake check`: consistent after every sync, and the failures operators meet are named.
use crate::common;

use std::path::Path;

use common::hudi::{data_instants, extract as extract_hudi, instant_files};
use xlake_hudi::{HudiOptions, HudiSource};
use xlake_iceberg::IcebergTable;
use xlake_storage::TableStore;
use xlake_sync::{check, check_with, mirror_commit, sync, SyncOptions};

fn options(mor: bool) -> SyncOptions {
    SyncOptions {
        source: HudiOptions {
            mor_read_optimized: mor,
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn sync_ok(root: &Path, mor: bool) {
    sync(root.to_str().unwrap(), &options(mor), |_| {})
        .await
        .unwrap();
}

#[tokio::test]
async fn every_fixture_is_consistent_after_sync_deep_all() {
    let hudi = [
        ("sample_table_cow_v6_complexkeygen_hivestyle", false),
        (
            "sample_table_cow_v6_simplekeygen_nonhivestyle_overwritetable",
            false,
        ),
        ("sample_table_cow_v8_simplekeygen_nonhivestyle", false),
        ("sample_table_cow_v9_txns_nonpart_meta", false),
        ("sample_table_cow_v9_txns_simple_nometa", false),
        ("sample_table_mor_avro_v9_nonpartitioned_rollback", true),
        ("sample_table_mor_avro_v9_txns_simple_nometa", true),
    ];
    for (name, mor) in hudi {
        let (_dir, root) = extract_hudi(name);
        sync_ok(&root, mor).await;
        let report = check_with(root.to_str().unwrap(), &options(mor), true, true)
            .await
            .unwrap();
        assert!(report.consistent(), "{name}: {report:?}");
        assert_eq!(report.source_commits, data_instants(&root).len(), "{name}");
    }
    for name in common::delta::ALL
        .iter()
        .filter(|n| **n != "checkpoints_vacuumed")
    {
        let (_dir, root) = common::delta::extract(name);
        sync_ok(&root, false).await;
        let report = check_with(root.to_str().unwrap(), &options(false), true, true)
            .await
            .unwrap();
        assert!(report.consistent(), "{name}: {report:?}");
    }
}

#[tokio::test]
async fn an_unmirrored_hudi_commit_is_named_until_synced() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    let instants = data_instants(&root);
    let (last, _) = instants.last().unwrap().clone();
    // The writer ran once without the translation: its instant is completed, not mirrored.
    let parked = root.join("parked");
    std::fs::create_dir_all(&parked).unwrap();
    for f in instant_files(&root, &last) {
        std::fs::rename(&f, parked.join(f.file_name().unwrap())).unwrap();
    }
    sync_ok(&root, false).await;
    for f in std::fs::read_dir(&parked).unwrap() {
        let f = f.unwrap().path();
        std::fs::rename(
            &f,
            root.join(".hoodie/timeline").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    let location = root.to_str().unwrap();
    let (code, text) = common::xlake(&["check", location]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "source commit {last} is completed in hudi but missing from iceberg"
        )),
        "{text}"
    );
    let report = check(location, &options(false), false).await.unwrap();
    assert_eq!(
        (report.missing.clone(), report.lag_commits),
        (vec![last.clone()], 1)
    );
    assert!(report.lag_ms > 0);
    assert_eq!(
        common::xlake(&["check", location, "--allowed-lag", "1"]).0,
        0,
        "a tail within the allowed lag"
    );
    sync_ok(&root, false).await;
    assert_eq!(common::xlake(&["check", location]).0, 0);
}

#[tokio::test]
async fn a_table_format_promising_snapshots_without_them_is_named() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    let location = root.to_str().unwrap();
    let properties = root.join(".hoodie/hoodie.properties");
    let text = std::fs::read_to_string(&properties).unwrap();
    // Hudi's own format promises nothing: unmirrored commits are plain lag.
    std::fs::write(&properties, format!("{text}hoodie.table.format=native\n")).unwrap();
    let report = check(location, &options(false), false).await.unwrap();
    assert!(
        report.broken_promise.is_none() && !report.missing.is_empty(),
        "{report:?}"
    );
    // The writer named xlake's plugin but ran without its jar: Hudi wrote natively.
    std::fs::write(&properties, format!("{text}hoodie.table.format=xlake\n")).unwrap();
    let (code, out) = common::xlake(&["check", location, "--allowed-lag", "100"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("hoodie.table.format=xlake promises an Iceberg snapshot for every instant")
            && out.contains("without that table format's jar"),
        "{out}"
    );
    let (code, out) = common::xlake(&["inspect", location]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("table format: hoodie.table.format=xlake promises"),
        "{out}"
    );
    sync_ok(&root, false).await;
    let report = check(location, &options(false), false).await.unwrap();
    assert!(
        report.consistent() && report.broken_promise.is_none(),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_mirrored_commit_rolled_back_by_hudi_is_flagged() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    sync_ok(&root, false).await;
    let (last, _) = data_instants(&root).last().unwrap().clone();
    // Hudi's rollback of a completed commit removes it from the timeline.
    for f in instant_files(&root, &last) {
        std::fs::remove_file(f).unwrap();
    }
    let report = check(root.to_str().unwrap(), &options(false), false)
        .await
        .unwrap();
    assert_eq!(report.unknown.len(), 1, "{report:?}");
    assert_eq!(report.unknown[0].commit, last);
    let (code, text) = common::xlake(&["check", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["unknown"][0]["commit"], last.as_str());
}

#[tokio::test]
async fn a_delta_table_ahead_of_iceberg_reports_its_lag() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    sync_ok(&root, false).await;
    for v in [3, 4] {
        std::fs::write(
            root.join(format!("_delta_log/{v:020}.json")),
            "{\"commitInfo\":{\"timestamp\":1900000000000,\"operation\":\"SET TBLPROPERTIES\"}}\n",
        )
        .unwrap();
    }
    let report = check(root.to_str().unwrap(), &options(false), false)
        .await
        .unwrap();
    assert_eq!(report.lag_commits, 2);
    assert_eq!(report.missing, ["3", "4"]);
}

/// Every change set of a Hudi table, as its source replays them.
async fn replay(store: &TableStore) -> Vec<xlake_model::ChangeSet> {
    HudiSource::open(store.clone(), HudiOptions::default())
        .await
        .unwrap()
        .change_sets(&Default::default())
        .await
        .unwrap()
        .changes
}

#[tokio::test]
async fn a_snapshot_with_the_wrong_files_is_caught_by_deep() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    let location = root.to_str().unwrap();
    let store = TableStore::open(location).unwrap();
    let mut changes = replay(&store).await;
    // A faulty writer drops one added file from the last snapshot.
    let dropped = changes.last_mut().unwrap().added.pop().unwrap();
    IcebergTable::new(store).commit_all(&changes).await.unwrap();
    assert!(
        check(location, &options(false), false)
            .await
            .unwrap()
            .consistent(),
        "names and order are fine"
    );
    let report = check(location, &options(false), true).await.unwrap();
    assert_eq!(report.file_differences.len(), 1, "{report:?}");
    assert!(
        report.file_differences[0].contains(&dropped.path)
            && report.file_differences[0].contains("absent")
    );
}

#[tokio::test]
async fn unreadable_iceberg_metadata_means_could_not_check() {
    let (_dir, root) = common::delta::extract("simple_table");
    let location = root.to_str().unwrap();
    // One metadata version per commit, as in-commit mode writes them.
    for version in common::delta::commit_versions(&root) {
        mirror_commit(location, &options(false), &version.to_string(), |_| {})
            .await
            .unwrap();
    }
    let hint = root.join("metadata/version-hint.text");
    std::fs::write(&hint, "3").unwrap();
    let (code, text) = common::xlake(&["check", location]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("version-hint.text") && text.contains("stale"),
        "{text}"
    );
    std::fs::remove_file(&hint).unwrap();
    let (code, text) = common::xlake(&["check", location]);
    assert!(
        code == 2 && text.contains("version-hint.text is missing"),
        "{text}"
    );
    std::fs::write(&hint, "5").unwrap();
    std::fs::remove_file(root.join("metadata/v5.metadata.json")).unwrap();
    let (code, text) = common::xlake(&["check", location]);
    assert!(code == 2 && text.contains("v5.metadata.json"), "{text}");
}

/// Issue 48, defect 8: a hint naming the current version in another spelling (a newline,
/// a space, a leading zero) breaks pyiceberg and DuckDB, which read it verbatim. `check`
/// reports it, and `sync` rewrites it even with nothing to mirror.
#[test]
fn a_hint_not_spelled_exactly_is_reported_and_rewritten() {
    let (_dir, root) = common::delta::extract("simple_table");
    let location = root.to_str().unwrap();
    let (code, text) = common::xlake(&["sync", location]);
    assert_eq!(code, 0, "{text}");
    let hint = root.join("metadata/version-hint.text");
    let n = std::fs::read_to_string(&hint).unwrap();
    for spelled in [format!("{n}\n"), format!(" {n}"), format!("0{n}")] {
        std::fs::write(&hint, &spelled).unwrap();
        let (code, text) = common::xlake(&["check", location]);
        assert_eq!(code, 2, "{spelled:?}: {text}");
        assert!(text.contains("version-hint.text"), "{spelled:?}: {text}");
        let (code, text) = common::xlake(&["sync", location]);
        assert_eq!(code, 0, "{spelled:?}: {text}");
        assert!(text.contains("nothing to mirror"), "{spelled:?}: {text}");
        assert_eq!(std::fs::read_to_string(&hint).unwrap(), n, "{spelled:?}");
        let (code, text) = common::xlake(&["check", location]);
        assert_eq!(code, 0, "{spelled:?}: {text}");
    }
}

#[tokio::test]
async fn a_file_listed_twice_is_named_by_deep() {
    let (_dir, root) = extract_hudi("sample_table_cow_v9_txns_simple_nometa");
    let location = root.to_str().unwrap();
    let store = TableStore::open(location).unwrap();
    let mut changes = replay(&store).await;
    // A faulty writer lists one added file twice: its rows would count twice.
    let last = changes.last_mut().unwrap();
    let twice = last.added[0].clone();
    last.added.push(twice.clone());
    IcebergTable::new(store).commit_all(&changes).await.unwrap();
    let report = check_with(location, &options(false), true, false)
        .await
        .unwrap();
    assert_eq!(report.file_differences.len(), 1, "{report:?}");
    assert!(
        report.file_differences[0].contains(&twice.path)
            && report.file_differences[0].contains("more than once")
    );
}

/// A delta-spark `VACUUM … LITE RETAIN 0 HOURS` deletes the vector a later version
/// replaced (`table_with_deletion_logs`: version 3's vector, 8e4ca8be…, replaced by
/// version 4's, a2084964…, which is live; checkpoints at 10 and 20). The mirror is still
/// right and `check --deep --all` says so; once the mirror keeps no snapshot before the
/// checkpoint of 10, nothing that checkpoint supersedes is read (here a commit file made
/// unreadable). The live vector gone is still "could not check", naming it.
#[tokio::test]
async fn a_vector_vacuumed_after_a_later_version_replaced_it_does_not_stop_check() {
    for format_version in [None, Some(3)] {
        let (_dir, root) = common::delta::extract("table_with_deletion_logs");
        let location = root.to_str().unwrap();
        let options = SyncOptions {
            format_version,
            ..Default::default()
        };
        sync(location, &options, |_| {}).await.unwrap();
        let vector = |uuid: &str| root.join(format!("deletion_vector_{uuid}.bin"));
        std::fs::remove_file(vector("8e4ca8be-7615-43cf-bc06-5d131148683f")).unwrap();
        for all in [false, true] {
            let report = check_with(location, &options, true, all).await.unwrap();
            assert!(report.consistent(), "{format_version:?} {all}: {report:?}");
        }
        // The mirror expires the snapshots of versions 0-9: the deep check starts at the
        // checkpoint of version 10 and reads no commit before it.
        let table = IcebergTable::new(TableStore::open(location).unwrap());
        let retention = xlake_iceberg::Retention {
            keep_snapshots: Some(11),
            ..Default::default()
        };
        assert_eq!(table.expire(&retention).await.unwrap().snapshots.len(), 10);
        std::fs::write(
            root.join("_delta_log/00000000000000000003.json"),
            "{not json",
        )
        .unwrap();
        let report = check_with(location, &options, true, true).await.unwrap();
        assert!(report.consistent(), "{format_version:?}: {report:?}");
        assert_eq!(
            (report.before_mirroring, report.compared.len()),
            (10, 11),
            "{format_version:?}: {report:?}"
        );
        // The vector live now is needed by Delta's own readers: its absence is an error.
        std::fs::remove_file(vector("a2084964-69d4-4e1e-95f5-9bbd6571d5c3")).unwrap();
        let (code, text) = common::xlake(&["check", location, "--deep"]);
        assert!(
            code == 2
                && text.contains("deletion_vector_a2084964")
                && text.contains("does not exist"),
            "{format_version:?}: {text}"
        );
    }
}
