//! Issue 48, defect 10: one table, one source format. A format asked for (`--format`, a job
//! file's `format`) that the table's markers or its mirror's `sourceTableFormat` contradict
//! is refused, naming both, before anything is written; so is a job file listing one table
//! twice, however spelled.
use crate::common;

use std::path::Path;

/// Every file of `metadata/` with its bytes.
fn metadata_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(root.join("metadata"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            (e.file_name().into_string().unwrap(), bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_second_format_on_a_mirrored_table_is_refused_naming_both() {
    let (_dir, root) = common::delta::extract("simple_table");
    let table = root.to_str().unwrap();
    let (code, text) = common::xlake(&["sync", table]);
    assert_eq!(code, 0, "{text}");
    let before = metadata_files(&root);

    // The Delta table read as a Parquet folder would bring back every file Delta removed.
    let (code, text) = common::xlake(&["sync", table, "--format", "parquet"]);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains("PARQUET") && text.contains("Delta") && text.contains("_delta_log/"),
        "{text}"
    );
    assert_eq!(metadata_files(&root), before);

    // The same from a job file's `format`.
    let jobs = tempfile::tempdir().unwrap();
    let config = jobs.path().join("tables.toml");
    let entry = format!("[[tables]]\nlocation = \"{table}\"\nformat = \"parquet\"\n");
    std::fs::write(&config, entry).unwrap();
    let (code, text) = common::xlake(&["run", "--config", config.to_str().unwrap(), "--once"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("PARQUET") && text.contains("Delta"), "{text}");
    assert_eq!(metadata_files(&root), before);
}

#[tokio::test]
async fn a_format_the_mirror_does_not_record_is_refused_naming_both() {
    // The folder's Parquet files mirrored as a Parquet folder; then a Delta log appears.
    let (_dir, root) = common::delta::extract("simple_table");
    let table = root.to_str().unwrap();
    let aside = root.parent().unwrap().join("log-aside");
    std::fs::rename(root.join("_delta_log"), &aside).unwrap();
    let (code, text) = common::xlake(&["sync", table, "--format", "parquet"]);
    assert_eq!(code, 0, "{text}");
    std::fs::rename(&aside, root.join("_delta_log")).unwrap();
    let before = metadata_files(&root);

    // Detected as Delta: the mirror holds a Parquet folder's listing. Refused with nothing
    // written, the catalog entry included.
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let args = [
        "sync",
        table,
        "--catalog",
        &uri,
        "--catalog-table",
        "lake.t",
    ];
    let (code, text) = common::xlake(&args);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains("DELTA") && text.contains("sourceTableFormat PARQUET"),
        "{text}"
    );
    assert_eq!(metadata_files(&root), before);
    let target = xlake_catalog::CatalogTarget::new(&uri, None, "lake.t").unwrap();
    let catalog = xlake_catalog::open(&target).unwrap();
    let entry = catalog
        .load_pointer(&target.ident().unwrap())
        .await
        .unwrap();
    assert_eq!(entry, None);
    let (code, text) = common::xlake(&["sync", table, "--format", "delta"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("sourceTableFormat PARQUET"), "{text}");
    assert_eq!(metadata_files(&root), before);
}

#[test]
fn a_job_file_listing_one_table_twice_is_refused_at_load() {
    let (_dir, root) = common::delta::extract("simple_table");
    let table = root.to_str().unwrap();
    let parent = root.parent().unwrap();
    let name = root.file_name().unwrap().to_str().unwrap();
    let link = parent.join("same-table");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let mut spellings = vec![
        format!("{table}/"),
        format!("file://{table}"),
        format!("{}/./{name}", parent.display()),
        format!("{}/{name}/../{name}", parent.display()),
    ];
    if cfg!(unix) {
        spellings.push(link.to_str().unwrap().to_string());
    }
    for (i, second) in spellings.iter().enumerate() {
        let config = parent.join(format!("tables{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "[[tables]]\nlocation = \"{table}\"\nformat = \"delta\"\n[[tables]]\nlocation = \"{second}\"\nformat = \"parquet\"\n"
            ),
        )
        .unwrap();
        let (code, text) = common::xlake(&["run", "--config", config.to_str().unwrap(), "--once"]);
        assert_eq!(code, 2, "{second}: {text}");
        assert!(text.contains("listed twice"), "{second}: {text}");
        assert!(!root.join("metadata").exists(), "{second}: {text}");
    }
}
