//! The scheduled job's no-op shortcut: a pass over a table whose source and target have
//! not moved since a sync left nothing pending does not read its `vN.metadata.json`; any
//! move, or a record that is stale or damaged, takes the normal path. Whether the
//! shortcut was taken is read from the job's debug log.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const SKIPPED: &str = "nothing new since the settled version; not read";

/// A job config over `root`, and a run of it: (exit code, stdout and log).
struct Job {
    config: tempfile::NamedTempFile,
}

impl Job {
    fn over(root: &Path, extra: &str) -> Self {
        let config = tempfile::NamedTempFile::new().unwrap();
        let text = format!("[[tables]]\nlocation = \"{}\"\n{extra}", root.display());
        std::fs::write(config.path(), text).unwrap();
        Self { config }
    }

    fn run(&self) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_xlake"))
            .args(["run", "--config", self.config.path().to_str().unwrap()])
            .arg("--once")
            .env("RUST_LOG", "xlake_sync::noop=debug")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// A pass that must succeed, and whether it took the shortcut.
    fn pass(&self, written: usize) -> bool {
        let (code, out) = self.run();
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains(&format!(": {written} snapshots written")),
            "{out}"
        );
        out.contains(SKIPPED)
    }
}

fn record(root: &Path) -> PathBuf {
    root.join("metadata/xlake-settled.json")
}

fn record_version(root: &Path) -> u64 {
    let text = std::fs::read_to_string(record(root)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["version"].as_u64().unwrap()
}

fn hint(root: &Path) -> u64 {
    std::fs::read_to_string(root.join("metadata/version-hint.text"))
        .unwrap()
        .parse()
        .unwrap()
}

/// `simple_table` (Delta versions 0 to 4) mirrored by one pass of the job, which keeps
/// the settled record.
fn settled_delta() -> (tempfile::TempDir, PathBuf, Job) {
    let (dir, root) = common::delta::extract("simple_table");
    let job = Job::over(&root, "");
    assert!(!job.pass(5));
    assert_eq!(record_version(&root), hint(&root));
    (dir, root, job)
}

#[test]
fn a_pass_with_nothing_new_takes_the_shortcut_and_a_new_commit_does_not() {
    let (_d, root, job) = settled_delta();
    assert!(job.pass(0), "nothing new: the shortcut");
    assert!(job.pass(0), "and again: the record is kept");
    // A new source commit: mirrored on the normal path, then settled again.
    let before = hint(&root);
    common::empty_delta_commit(&root, 5);
    assert!(!job.pass(1));
    assert_eq!(record_version(&root), before + 1);
    assert!(job.pass(0));
}

/// The newest commit file's status changed (`chmod`, a hard link a backup tool makes),
/// nothing else: still the shortcut (hostile review hr7: its status change time was in
/// the tip's tag, and each such change cost a pass that read the table's id).
#[test]
fn a_commit_file_whose_status_changed_is_still_skipped() {
    use std::os::unix::fs::PermissionsExt;
    let (d, root, job) = settled_delta();
    assert!(job.pass(0), "nothing new: the shortcut");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let newest = root.join(format!("_delta_log/{:020}.json", 4));
    std::fs::set_permissions(&newest, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&newest, d.path().join("backup.json")).unwrap();
    assert!(job.pass(0), "its status changed only: the shortcut");
}

/// A log whose newest version has no commit file (it starts at a checkpoint of that
/// version): never skipped, since nothing there tells a table written anew (hostile
/// review hr7: another table's log of that shape, its checkpoint of the same version,
/// was skipped, "0 snapshots written", while its sync refused it by its id).
#[test]
fn a_log_whose_newest_version_is_only_a_checkpoint_is_not_skipped() {
    let (_d, root) = common::delta::extract("multi-part-checkpoint");
    for v in 0..=1 {
        std::fs::remove_file(root.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    let job = Job::over(&root, "");
    assert!(!job.pass(1));
    assert!(
        !job.pass(0),
        "nothing tells the same table: the normal path"
    );
}

/// A table written anew with as many versions as the mirror holds: its newest commit
/// file's time is in the source's tip, so the pass is not skipped, and its sync refuses
/// the new table by its id (hostile review 4, F8: skipped, and up to date, for ever).
#[test]
fn a_table_written_anew_with_as_many_versions_is_not_skipped() {
    written_anew_is_not_skipped(false);
}

/// The same, the new commit files given the times the old ones had (a copy of another
/// table's log with its times kept, or a table written anew within the same second on an
/// object store): the file's tag is in the tip too (hostile review 5, D2).
#[test]
fn a_table_written_anew_with_its_times_kept_is_not_skipped() {
    written_anew_is_not_skipped(true);
}

fn written_anew_is_not_skipped(keep_times: bool) {
    let (_d, root, job) = settled_delta();
    assert!(job.pass(0), "nothing new: the shortcut");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let log = root.join("_delta_log");
    let first = std::fs::read_to_string(log.join("00000000000000000000.json")).unwrap();
    let id_line = first.lines().find(|l| l.contains("\"metaData\"")).unwrap();
    let id = serde_json::from_str::<serde_json::Value>(id_line).unwrap()["metaData"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for v in 0..=4 {
        let path = log.join(format!("{v:020}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(
            &path,
            text.replace(&id, "0c0ffee0-0000-4000-8000-000000000004"),
        )
        .unwrap();
        if keep_times {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(modified).unwrap();
        }
    }
    let (code, out) = job.run();
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains(SKIPPED), "{out}");
    assert!(
        out.contains("version 4 is not the one the mirror holds") && out.contains(&id),
        "{out}"
    );
}

#[test]
fn a_target_another_writer_moved_is_read() {
    let (_d, root, job) = settled_delta();
    let t = root.to_str().unwrap();
    // Another writer (here `xlake sync`) mirrors a new commit: the hint moves on, the
    // record stays behind, stale.
    common::empty_delta_commit(&root, 5);
    let (code, out) = common::xlake(&["sync", t]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(hint(&root), record_version(&root) + 1);
    assert!(!job.pass(0), "a stale record is not trusted");
    assert_eq!(
        record_version(&root),
        hint(&root),
        "replaced after the pass"
    );
    assert!(job.pass(0));
    // A writer that died after its `v(N+1)` and before the hint: not a no-op either.
    let n = hint(&root);
    let meta = root.join("metadata");
    std::fs::copy(
        meta.join(format!("v{n}.metadata.json")),
        meta.join(format!("v{}.metadata.json", n + 1)),
    )
    .unwrap();
    assert!(!job.pass(0), "a v(N+1) beside the hint");
}

#[test]
fn a_damaged_or_foreign_record_is_ignored_and_replaced() {
    let (_d, root, job) = settled_delta();
    for damaged in [
        "{\"location\":".to_string(),
        String::new(),
        // A record written for another place (a copied folder's).
        std::fs::read_to_string(record(&root))
            .unwrap()
            .replace(root.to_str().unwrap(), "/elsewhere/t"),
        // A record that claims a newer source state than there is.
        std::fs::read_to_string(record(&root))
            .unwrap()
            .replace("\"source_tip\":\"4 written", "\"source_tip\":\"7 written"),
    ] {
        std::fs::write(record(&root), &damaged).unwrap();
        assert!(!job.pass(0), "{damaged:?}");
        assert_ne!(std::fs::read_to_string(record(&root)).unwrap(), damaged);
        assert!(job.pass(0), "replaced by a sound one after {damaged:?}");
    }
    // Missing: the same.
    std::fs::remove_file(record(&root)).unwrap();
    assert!(!job.pass(0));
    assert!(job.pass(0));
}

#[test]
fn an_expiry_still_runs_after_the_shortcut_where_it_can_remove_something() {
    // Three snapshots: the shortcut skips the sync, not the expiry of what a VACUUM
    // deleted (as `job::a_pass_with_nothing_new_still_expires_what_a_vacuum_deleted`).
    let (_d, root) = common::delta::extract("partitioned_3commits");
    let job = Job::over(&root, "");
    assert!(!job.pass(3));
    let log = std::fs::read_to_string(root.join("_delta_log/00000000000000000001.json")).unwrap();
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(p) = v.get("remove").and_then(|r| r["path"].as_str()) {
            let _ = std::fs::remove_file(root.join(p));
        }
    }
    let (code, out) = job.run();
    assert!(
        code == 0 && out.contains("0 snapshots written, 1 expired"),
        "{out}"
    );
    assert!(out.contains(SKIPPED), "the sync part was skipped: {out}");
    // The expiry's version left the record behind: one pass on the normal path.
    assert!(!job.pass(0));
    assert!(job.pass(0));
}

#[test]
fn cleanup_leaves_the_record_and_a_fresh_history_forgets_it() {
    let (_d, root, job) = settled_delta();
    let t = root.to_str().unwrap();
    let (code, out) = common::xlake(&["cleanup", t, "--older-than", "0s", "--no-writer-running"]);
    assert!(
        code == 0 && out.contains(": 0 orphan metadata files"),
        "{out}"
    );
    assert!(!out.contains("xlake-settled"), "{out}");
    assert!(record(&root).exists());
    let (code, out) = common::xlake(&["inspect", t]);
    assert!(code == 0 && !out.contains("metadata/ clash"), "{out}");
    let (code, out) = common::xlake(&["check", t]);
    assert_eq!(code, 0, "{out}");
    // The metadata deleted but the record left, then mirrored afresh by `xlake sync`:
    // the first version of the new history removes the old record.
    for e in std::fs::read_dir(root.join("metadata")).unwrap() {
        let p = e.unwrap().path();
        if p != record(&root) {
            std::fs::remove_file(p).unwrap();
        }
    }
    assert_eq!(common::xlake(&["sync", t]).0, 0);
    assert!(!record(&root).exists());
    assert!(!job.pass(0));
    assert!(job.pass(0));
}

#[test]
fn a_hudi_table_takes_the_shortcut_while_its_listing_is_the_same() {
    let (_d, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let job = Job::over(&root, "");
    let (code, out) = job.run();
    assert_eq!(code, 0, "{out}");
    assert!(job.pass(0));
    // The newest instant's completed file taken away, then put back (as if it completed
    // only now): each time the listing differs from the record's.
    let timeline = root.join(".hoodie/timeline");
    let newest = std::fs::read_dir(&timeline)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".commit"))
        .max()
        .unwrap();
    let bytes = std::fs::read(timeline.join(&newest)).unwrap();
    std::fs::remove_file(timeline.join(&newest)).unwrap();
    let (code, out) = job.run();
    assert!(!out.contains(SKIPPED), "{code} {out}");
    std::fs::write(timeline.join(&newest), bytes).unwrap();
    assert!(!job.pass(0));
    assert!(job.pass(0));
}

#[test]
fn options_a_sync_acts_on_take_the_normal_path() {
    let (_d, root, _) = settled_delta();
    let job = Job::over(&root, "format = \"delta\"\n");
    assert!(!job.pass(0), "a format named is checked against the folder");
    let job = Job::over(&root, "format_version = 3\n");
    assert!(!job.pass(0), "an upgrade asked for");
}
