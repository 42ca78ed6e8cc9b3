//! Catalogs through the command line, on the embedded SQLite catalog: `serve` (in-commit
//! mode over Hudi's callback) and `run` (the job file) keep the entry at the current
//! version, and `check` says so; a foreign entry is refused by every mode before anything is
//! published. Independent readers (pyiceberg, Spark) read by name in tests/interop.
use crate::common;

use common::serve::Server;

fn catalog_args<'a>(uri: &'a str, table: &'a str) -> [&'a str; 4] {
    ["--catalog", uri, "--catalog-table", table]
}

#[test]
fn serve_moves_the_pointer_before_it_answers_and_refuses_a_second_table() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (_other_dir, other) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (last, action) = common::hudi::data_instants(&root).last().unwrap().clone();
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let catalog = catalog_args(&uri, "lake.txns");
    let mut args: Vec<&std::ffi::OsStr> = vec!["--insecure-no-key".as_ref(), "--allow".as_ref()];
    args.extend([root.as_os_str(), "--allow".as_ref(), other.as_os_str()]);
    args.extend(catalog.iter().map(std::ffi::OsStr::new));
    let server = Server::start(&args, None);
    let message = |base: &std::path::Path| {
        serde_json::json!({
            "commitTime": last,
            "tableName": "txns",
            "basePath": format!("file:{}", base.display()),
            "commitActionType": action,
        })
        .to_string()
    };
    let (status, body) = server.post(None, &message(&root));
    assert_eq!(status, 200, "{body}");
    let table = root.to_str().unwrap();
    let mut args = vec!["check", table];
    args.extend(catalog_args(&uri, "lake.txns"));
    let (code, text) = common::xlake(&args);
    assert_eq!(code, 0, "{text}");

    // A second table's callback under the same name: refused, nothing published.
    let (status, body) = server.post(None, &message(&other));
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("not this table's metadata folder"), "{body}");
    assert!(!other.join("metadata").exists());
}

#[test]
fn the_job_registers_each_table_and_check_reports_a_lagging_pointer() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let config = db.path().join("tables.toml");
    std::fs::write(
        &config,
        format!(
            "[[tables]]\nlocation = \"{}\"\ncatalog = \"{uri}\"\ncatalog_table = \"lake.txns\"\ncatalog_name = \"prod\"\n",
            root.display()
        ),
    )
    .unwrap();
    let (code, text) = common::xlake(&["run", "--config", config.to_str().unwrap(), "--once"]);
    assert_eq!(code, 0, "{text}");
    let table = root.to_str().unwrap();
    let check = |name: &str| {
        let mut args = vec!["check", table, "--json", "--catalog-name", name];
        args.extend(catalog_args(&uri, "lake.txns"));
        common::xlake(&args)
    };
    let (code, text) = check("prod");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"problem\": null"), "{text}");
    // The catalog name matters: the default `xlake` catalog has no such entry.
    let (code, text) = check("xlake");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no catalog entry"), "{text}");

    // A version published without the catalog (as after a crash before the pointer moved).
    let meta = root.join("metadata");
    let hint: u64 = std::fs::read_to_string(meta.join("version-hint.text"))
        .unwrap()
        .parse()
        .unwrap();
    let (code, text) = common::xlake(&["expire", table, "--keep-snapshots", "3"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = check("prod");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("v{hint}, not the current v{}", hint + 1)),
        "{text}"
    );
    // The next job cycle, with nothing to mirror, moves it.
    let (code, text) = common::xlake(&["run", "--config", config.to_str().unwrap(), "--once"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = check("prod");
    assert_eq!(code, 0, "{text}");
    // `expire` given the catalog moves the pointer to the version it publishes.
    let mut args = vec![
        "expire",
        table,
        "--keep-snapshots",
        "2",
        "--catalog-name",
        "prod",
    ];
    args.extend(catalog_args(&uri, "lake.txns"));
    let (code, text) = common::xlake(&args);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("catalog: moved from"), "{text}");
    let (code, text) = check("prod");
    assert_eq!(code, 0, "{text}");
}

#[test]
fn bad_catalog_options_fail_before_anything_is_published() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let table = root.to_str().unwrap();
    for (args, expect) in [
        (
            vec![
                "--catalog",
                "sqlite://relative.db",
                "--catalog-table",
                "a.b",
            ],
            "absolute",
        ),
        (
            vec![
                "--catalog",
                "sqlite:///tmp/x.db",
                "--catalog-table",
                "nonamespace",
            ],
            "<namespace>.<name>",
        ),
        (
            vec!["--catalog", "mysql://h/db", "--catalog-table", "a.b"],
            "unknown catalog kind",
        ),
        (
            vec![
                "--catalog",
                "sqlite:///nonexistent-dir/sub/c.db",
                "--catalog-table",
                "a.b",
            ],
            "a.b",
        ),
    ] {
        let mut all = vec!["sync", table];
        all.extend(args);
        let (code, text) = common::xlake(&all);
        assert_ne!(code, 0, "{text}");
        assert!(text.contains(expect), "{expect}: {text}");
        assert!(!root.join("metadata").exists(), "{text}");
    }
}

/// Issue 48, defect 7: an entry naming a `vN` that does not exist, or that is not a
/// version of this table, is not "ahead": the sync moves it (and says so), and `check`
/// reports it until then.
#[tokio::test]
async fn an_entry_naming_a_missing_or_foreign_file_is_moved_and_reported() {
    let (_dir, root) = common::delta::extract("simple_table");
    let (_other_dir, other) = common::delta::extract("partitioned_3commits");
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let table = root.to_str().unwrap();
    let with_catalog = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(catalog_args(&uri, "lake.t"));
        common::xlake(&all)
    };
    let at = |n: &str| format!("{table}/metadata/v{n}.metadata.json");
    // One version per commit: the entry ends at the last.
    let versions = common::delta::commit_versions(&root);
    for v in &versions {
        let (code, text) = with_catalog(&["commit", table, "--version", &v.to_string()]);
        assert_eq!(code, 0, "{text}");
    }
    let last = versions.len().to_string();
    assert!(with_catalog(&["check", table]).1.contains(&at(&last)));

    // The metadata is gone and mirrored afresh: v1, and the entry's file does not exist.
    std::fs::remove_dir_all(root.join("metadata")).unwrap();
    let (code, text) = with_catalog(&["sync", table]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("catalog: moved from {} to {}", at(&last), at("1"))),
        "{text}"
    );
    let (code, text) = with_catalog(&["check", table]);
    assert_eq!(code, 0, "{text}");

    // Entries the catalog's other writers (or a hand) may leave: a spelling of v1 that is
    // no file, and a file in this folder that is another table's.
    let (code, text) = common::xlake(&["sync", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    let stranger = other.join("metadata/v1.metadata.json");
    std::fs::copy(&stranger, root.join("metadata/v9.metadata.json")).unwrap();
    let target = xlake_catalog::CatalogTarget::new(&uri, None, "lake.t").unwrap();
    let catalog = xlake_catalog::open(&target).unwrap();
    let ident = target.ident().unwrap();
    for (bad, why) in [
        ("01", "does not exist"),
        ("9", "not a version of this table"),
    ] {
        let current = catalog.load_pointer(&ident).await.unwrap().unwrap();
        let swapped = catalog.swap(&ident, &current, &at(bad)).await.unwrap();
        assert_eq!(swapped, xlake_catalog::Swap::Done);
        let (code, text) = with_catalog(&["check", table]);
        assert_eq!(code, 1, "{bad}: {text}");
        assert!(
            text.contains(&at(bad)) && text.contains(why),
            "{bad}: {text}"
        );
        let (code, text) = with_catalog(&["sync", table]);
        assert_eq!(code, 0, "{bad}: {text}");
        assert!(
            text.contains(&format!("catalog: moved from {} to {}", at(bad), at("1"))),
            "{bad}: {text}"
        );
        let (code, text) = with_catalog(&["check", table]);
        assert_eq!(code, 0, "{bad}: {text}");
    }
}

/// Review D3: an entry at a `vN` of this table past a gap (a copy of v1 as v9) is not
/// "ahead": no writer that got further leaves a gap. The sync moves it to the current
/// version (and says so), and `check` then agrees.
#[tokio::test]
async fn an_entry_on_a_stray_version_of_this_table_is_moved() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let table = root.to_str().unwrap();
    let with_catalog = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(catalog_args(&uri, "ns.g"));
        common::xlake(&all)
    };
    let at = |n: u64| format!("{table}/metadata/v{n}.metadata.json");
    for v in common::delta::commit_versions(&root) {
        let (code, text) = with_catalog(&["commit", table, "--version", &v.to_string()]);
        assert_eq!(code, 0, "{text}");
    }
    assert!(root.join("metadata/v3.metadata.json").exists());
    std::fs::copy(
        root.join("metadata/v1.metadata.json"),
        root.join("metadata/v9.metadata.json"),
    )
    .unwrap();
    let target = xlake_catalog::CatalogTarget::new(&uri, None, "ns.g").unwrap();
    let catalog = xlake_catalog::open(&target).unwrap();
    let ident = target.ident().unwrap();
    let current = catalog.load_pointer(&ident).await.unwrap().unwrap();
    assert_eq!(current.location, at(3));
    let swapped = catalog.swap(&ident, &current, &at(9)).await.unwrap();
    assert_eq!(swapped, xlake_catalog::Swap::Done);

    common::empty_delta_commit(&root, 3);
    let (code, text) = with_catalog(&["sync", table]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("catalog: moved from {} to {}", at(9), at(4))),
        "{text}"
    );
    let (code, text) = with_catalog(&["check", table]);
    assert_eq!(code, 0, "{text}");
}

/// Review D4: a symlink or `..` spelling of the table's folder in the entry is this table
/// (compared as `TableStore::is_here` compares locations): a later sync under another
/// spelling moves the entry; a genuinely different folder is still refused.
#[tokio::test]
async fn an_entry_spelling_the_table_through_a_symlink_or_dotdot_is_this_table() {
    let (_dir, root) = common::delta::extract("partitioned_3commits");
    let (_other_dir, other) = common::delta::extract("simple_table");
    let parent = root.parent().unwrap();
    let link = parent.join("tl");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let dotdot = format!(
        "{}/../{}/{}",
        parent.display(),
        parent.file_name().unwrap().to_str().unwrap(),
        root.file_name().unwrap().to_str().unwrap()
    );
    let db = tempfile::tempdir().unwrap();
    let uri = format!("sqlite://{}/c.db", db.path().display());
    let (table, link) = (root.to_str().unwrap(), link.to_str().unwrap());
    let at = |t: &str, n: u64| format!("{t}/metadata/v{n}.metadata.json");
    let run = |command: &str, location: &str| {
        let mut args = vec![command, location];
        args.extend(catalog_args(&uri, "ns.t"));
        common::xlake(&args)
    };
    let (code, text) = run("sync", link);
    assert!(code == 0 && text.contains(&at(link, 1)), "{text}");
    common::empty_delta_commit(&root, 3);
    // Synced under another spelling, the mirror keeps the one it recorded (the link's).
    let (code, text) = run("sync", table);
    assert_eq!(code, 0, "{text}");
    let moved = format!("catalog: moved from {} to {}", at(link, 1), at(link, 2));
    assert!(text.contains(&moved), "{text}");

    // The same version spelled through `..` (as a sync of that spelling registers it).
    let target = xlake_catalog::CatalogTarget::new(&uri, None, "ns.t").unwrap();
    let catalog = xlake_catalog::open(&target).unwrap();
    let ident = target.ident().unwrap();
    let current = catalog.load_pointer(&ident).await.unwrap().unwrap();
    let swapped = catalog.swap(&ident, &current, &at(&dotdot, 2)).await;
    assert_eq!(swapped.unwrap(), xlake_catalog::Swap::Done);
    for location in [table, link] {
        let (code, text) = run("check", location);
        assert_eq!(code, 0, "{location}: {text}");
    }
    common::empty_delta_commit(&root, 4);
    let (code, text) = run("sync", table);
    assert_eq!(code, 0, "{text}");
    let moved = format!("catalog: moved from {} to {}", at(&dotdot, 2), at(link, 3));
    assert!(text.contains(&moved), "{text}");
    let (code, text) = run("check", link);
    assert_eq!(code, 0, "{text}");

    // A sync through `..` keeps the recorded spelling too: later syncs and checks under
    // another spelling read what it wrote.
    common::empty_delta_commit(&root, 5);
    let (code, text) = run("sync", &dotdot);
    assert_eq!(code, 0, "{text}");
    let moved = format!("catalog: moved from {} to {}", at(link, 3), at(link, 4));
    assert!(text.contains(&moved), "{text}");
    common::empty_delta_commit(&root, 6);
    let (code, text) = run("sync", table);
    assert_eq!(code, 0, "{text}");
    let (code, text) = run("check", table);
    assert_eq!(code, 0, "{text}");

    let (code, text) = run("sync", other.to_str().unwrap());
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("which is not this table's metadata folder"),
        "{text}"
    );
}
