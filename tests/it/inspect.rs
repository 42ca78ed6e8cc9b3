//! `xlake inspect`: the metadata each format keeps, side by side.
use crate::common;

use std::process::Command;

fn inspect(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sync(args: &[&str]) {
    assert!(Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(args)
        .status()
        .unwrap()
        .success());
}

#[test]
fn delta_versions_since_checkpoint_and_iceberg_counts() {
    let (_dir, root) = common::delta::extract("simple_table");
    let t = root.to_str().unwrap();
    sync(&["sync", t]);
    let r = inspect(&["inspect", t, "--json"]);
    assert_eq!(r["delta"]["latest_version"], 4);
    assert_eq!(r["delta"]["last_checkpoint"], serde_json::Value::Null);
    // No checkpoint: a reader replays every JSON commit, versions 0 to 4.
    assert_eq!(r["delta"]["versions_since_checkpoint"], 5);
    assert_eq!(r["iceberg"]["snapshots"], 5);
    assert_eq!(r["iceberg"]["orphan_files"], 0);
    assert!(r["iceberg"]["manifests"].as_u64().unwrap() >= 1);
    assert_eq!(r["degraded"], serde_json::json!([]));
}

#[test]
fn hudi_file_groups_and_degraded_mirroring() {
    let (_dir, root) = common::hudi::extract("sample_table_mor_avro_v9_txns_simple_nometa");
    let t = root.to_str().unwrap();
    sync(&["sync", t, "--mor-read-optimized"]);
    let r = inspect(&["inspect", t, "--json", "--mor-read-optimized"]);
    assert_eq!(r["hudi"]["completed_instants"], 13);
    assert_eq!(r["hudi"]["metadata_table"], false);
    assert!(
        r["hudi"]["file_groups"].as_u64().unwrap() <= r["hudi"]["base_files"].as_u64().unwrap()
    );
    assert_eq!(
        r["iceberg"]["partitioning"],
        serde_json::json!(["identity(region)"])
    );
    assert!(r["degraded"][0]
        .as_str()
        .unwrap()
        .contains("read-optimized"));
    let (_d2, timebased) =
        common::hudi::extract("sample_table_cow_v6_timebasedkeygen_nonhivestyle");
    let tb = timebased.to_str().unwrap();
    sync(&["sync", tb]);
    let r = inspect(&["inspect", tb, "--json"]);
    assert!(r["degraded"][0].as_str().unwrap().contains("unpartitioned"));
}
