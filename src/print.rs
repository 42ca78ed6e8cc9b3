//! The human-readable output of each command (`--json` prints the library's reports as
//! they are).

use xlake_sync::check::Comparison;
use xlake_sync::inspect::InspectReport;
use xlake_sync::job::TableResult;
use xlake_sync::snapshots::SnapshotList;
use xlake_sync::{CheckReport, Mirrored};

use crate::out::outln;

/// `sync --json` and `commit --json`: the [`xlake_sync::SyncReport`], for machines (the
/// Python package's `SyncResult`).
#[derive(serde::Serialize)]
pub struct SyncJson<'a> {
    table: &'a str,
    /// `commit --json`: the commit asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<&'a str>,
    format: &'a str,
    source_commits: usize,
    already_mirrored: usize,
    written: Vec<WrittenJson<'a>>,
    notes: &'a [String],
    degraded: &'a [String],
    created_empty: Option<u64>,
    catalog: Option<CatalogJson<'a>>,
    rebuilt: Option<&'a xlake_sync::rebuild::Rebuilt>,
}

/// One snapshot written.
#[derive(serde::Serialize)]
struct WrittenJson<'a> {
    commit: &'a str,
    action: &'a str,
    commit_time_ms: i64,
    added: usize,
    removed: usize,
    snapshot_id: i64,
    version: u64,
}

/// What was done to the catalog entry: `registered`, `moved` (with `from`) or `current`.
#[derive(serde::Serialize)]
struct CatalogJson<'a> {
    action: &'a str,
    from: Option<&'a str>,
    location: &'a str,
}

impl<'a> SyncJson<'a> {
    /// The report of a sync of `table` (of `commit --json`, with its `commit`).
    pub fn of(table: &'a str, commit: Option<&'a str>, r: &'a xlake_sync::SyncReport) -> Self {
        use xlake_catalog::Advanced;
        let catalog = r.catalog.as_ref().map(|a| match a {
            Advanced::Registered(to) => ("registered", None, to),
            Advanced::Moved(from, to) => ("moved", Some(from.as_str()), to),
            Advanced::Current(at) => ("current", None, at),
        });
        Self {
            table,
            commit,
            format: &r.format,
            source_commits: r.source_commits,
            already_mirrored: r.already_mirrored,
            written: r.written.iter().map(WrittenJson::of).collect(),
            notes: &r.notes,
            degraded: &r.degraded,
            created_empty: r.created_empty,
            catalog: catalog.map(|(action, from, location)| CatalogJson {
                action,
                from,
                location,
            }),
            rebuilt: r.rebuilt.as_ref(),
        }
    }
}

impl<'a> WrittenJson<'a> {
    fn of(m: &'a Mirrored) -> Self {
        Self {
            commit: &m.commit.id,
            action: &m.commit.action,
            commit_time_ms: m.commit.commit_time_ms,
            added: m.added,
            removed: m.removed,
            snapshot_id: m.committed.snapshot_id,
            version: m.committed.version,
        }
    }
}

/// Print `value` as pretty JSON.
pub fn json(value: &impl serde::Serialize) -> Result<(), serde_json::Error> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The line of one snapshot written.
pub fn mirrored_line(m: &Mirrored) -> String {
    // A full state lists every live file, not what the commit changed: "+N -0" would
    // claim N files added.
    let files = match m.full_state {
        true => format!("{} files live (full state)", m.added),
        false => format!("+{} -{} files", m.added, m.removed),
    };
    format!(
        "{} {} {:<14} {files} -> snapshot {} (v{})",
        m.commit.format.as_str(),
        m.commit.id,
        m.commit.action,
        m.committed.snapshot_id,
        m.committed.version
    )
}

/// One line per table of a job cycle.
pub fn table_result(r: &TableResult) {
    match &r.outcome {
        Ok(report) => outln!(
            "ok     {}: {} snapshots written{}",
            r.location,
            report.written.len(),
            r.expired
                .as_ref()
                .filter(|e| !e.snapshots.is_empty())
                .map_or(String::new(), |e| format!(
                    ", {} expired",
                    e.snapshots.len()
                ))
        ),
        Err(e) => outln!("FAILED {}: {e}", r.location),
    }
}

/// The snapshot list as a table.
pub fn snapshots(list: &SnapshotList, delta: bool) {
    let Some(version) = list.version else {
        outln!(
            "{}: no Iceberg metadata yet (run xlake sync first)",
            list.table
        );
        return;
    };
    match delta {
        true => outln!("{}: _delta_log/{version:020}.json", list.table),
        false => outln!("{}: metadata/v{version}.metadata.json", list.table),
    }
    outln!(
        "{:>4}  {:<20}  {:<24}  {:<9}  source commit",
        "seq",
        "snapshot",
        "time",
        "operation"
    );
    for s in &list.snapshots {
        let source = match (&s.source_format, &s.source_operation, &s.source_commit) {
            (Some(f), Some(id), _) | (Some(f), None, Some(id)) => format!("{f} {id}"),
            _ => "-".to_string(),
        };
        outln!(
            "{:>4}  {:<20}  {:<24}  {:<9}  {source}",
            s.sequence_number,
            s.snapshot_id,
            s.time,
            s.operation
        );
    }
}

/// The Delta target's side of the health report.
fn inspect_delta(i: &xlake_sync::TargetHealth) {
    match i.version {
        None => outln!("  delta:   no _delta_log/ yet (run xlake sync --target delta first)"),
        Some(v) => outln!(
            "  delta:   _delta_log/ {} files, {} bytes; version {v} ({} bytes); {} versions; partitioning [{}]",
            i.metadata.files,
            i.metadata.bytes,
            i.current_metadata_bytes,
            i.snapshots,
            i.partitioning.join(", ")
        ),
    }
}

/// The health report (`delta`: of a Delta target).
pub fn inspect(r: &InspectReport, delta: bool) {
    outln!("{}", r.table);
    outln!(
        "  {:<8} {}",
        format!("{}:", r.format.to_lowercase()),
        r.source_line
    );
    let i = &r.iceberg;
    if delta {
        return inspect_delta(i);
    }
    match i.version {
        None => outln!("  iceberg: no metadata yet (run xlake sync first)"),
        Some(v) => outln!(
            "  iceberg: metadata/ {} files, {} bytes; v{v} ({} bytes); {} snapshots; {} manifests in the current one; {} orphan files; partitioning [{}]",
            i.metadata.files,
            i.metadata.bytes,
            i.current_metadata_bytes,
            i.snapshots,
            i.manifests,
            i.orphan_files,
            i.partitioning.join(", ")
        ),
    }
    if let Some(first) = i.not_written_by_xlake.first() {
        outln!("  metadata/ clash: {} files under metadata/ that xlake did not write (e.g. {first}): the source keeps files in the folder the Iceberg mirror is written to; sync refuses such a table, cleanup leaves them alone", i.not_written_by_xlake.len());
    }
    for old in &i.relocated_from {
        outln!("  relocated: metadata/ holds Iceberg metadata written for {old}, not for this location (the folder was copied or moved); orphans are not counted. Run `xlake sync --rebuild {}`", r.table);
    }
    for d in &r.degraded {
        outln!("  degraded: {d}");
    }
    if let Some(why) = &r.broken_promise {
        outln!("  table format: {why}");
    }
}

/// The check report (`consistent` as judged with the report's allowed lag).
pub fn check(r: &CheckReport) {
    let state = if r.consistent {
        "consistent"
    } else {
        "NOT CONSISTENT"
    };
    outln!("{} ({}): {state}", r.table, r.format);
    outln!(
        "  {} completed source commits, {} snapshots in the current ancestry, {} before the oldest snapshot (before mirroring began, or expired)",
        r.source_commits, r.snapshots, r.before_mirroring
    );
    let allowed = match r.allowed_lag {
        0 => String::new(),
        n => format!(" (up to {n} allowed)"),
    };
    outln!("  lag: {} commits, {} ms{allowed}", r.lag_commits, r.lag_ms);
    for id in &r.missing {
        outln!(
            "  missing: source commit {id} is completed in {} but missing from iceberg",
            r.format.to_lowercase()
        );
    }
    for why in &r.gone_unmirrored {
        outln!("  gone unmirrored: {why} (docs/hudi.md, \"Archived before mirrored\")");
    }
    for u in &r.undone {
        outln!(
            "  undone: snapshot {} records source commit {}, which {} later undid (history, not a violation)",
            u.snapshot_id, u.commit, u.undone_by
        );
    }
    for u in &r.unknown {
        outln!("  unknown: snapshot {} records source commit {}, which the source no longer has as completed", u.snapshot_id, u.commit);
    }
    for id in &r.duplicates {
        outln!("  duplicate: source commit {id} is recorded by more than one snapshot");
    }
    for m in &r.missing_manifest_lists {
        outln!(
            "  missing: the manifest list of snapshot {} is gone: {} (readers of that snapshot fail)",
            m.snapshot_id, m.manifest_list
        );
    }
    for m in &r.missing_files {
        outln!(
            "  missing: version {} names {} {}, which is gone (readers of that version fail)",
            m.snapshot_id,
            m.what,
            m.file
        );
    }
    for id in &r.out_of_order {
        outln!(
            "  out of order: the snapshot of source commit {id} comes after that of a later commit"
        );
    }
    if r.deep {
        deep(&r.compared);
    }
    if let Some(c) = &r.catalog {
        let at = c.pointer.as_deref().unwrap_or("(no entry)");
        outln!("  catalog {} table {}: {at}", c.catalog, c.table);
        if let Some(p) = &c.problem {
            outln!("  catalog: {p}");
        }
    }
    if let Some(old) = &r.relocated_from {
        outln!("  relocated: the mirror was written for {old}, but the table is at {} (copied or moved): its paths point at the old place. For an Iceberg mirror run `xlake sync --rebuild {}`; a Delta mirror has no rebuild (docs/targets.md)", r.table, r.table);
    }
    if let Some(why) = &r.broken_promise {
        outln!("  table format: {why}");
    }
    if let Some(why) = &r.not_the_mirrored_table {
        outln!("  not the mirrored table: {why}");
    }
}

/// What a deep check compared, then each difference.
fn deep(compared: &[Comparison]) {
    let differences: usize = compared.iter().map(|c| c.differences.len()).sum();
    let found = match differences {
        0 => "no differences".to_string(),
        n => format!("{n} differences"),
    };
    match compared {
        [] => outln!(
            "  deep: no snapshot holds the source's state after a listed commit: nothing to compare"
        ),
        [c] => outln!(
            "  deep: compared snapshot {} (source commit {}): {} data files in the snapshot, {} live in the source: {found}",
            c.snapshot_id, c.commit, c.snapshot_files, c.source_files
        ),
        all => outln!(
            "  deep: compared {} snapshots with the source's live files after each one's commit ({} data files in all): {found}",
            all.len(),
            all.iter().map(|c| c.snapshot_files).sum::<usize>()
        ),
    }
    for d in compared.iter().flat_map(|c| &c.differences) {
        outln!("  file: {d}");
    }
}

/// What a sync did to the catalog entry.
pub fn catalog(report: &xlake_sync::SyncReport) {
    catalog_advanced(report.catalog.as_ref());
}

/// What was done to the catalog entry, if there is one.
pub fn catalog_advanced(advanced: Option<&xlake_catalog::Advanced>) {
    use xlake_catalog::Advanced;
    match advanced {
        Some(Advanced::Registered(to)) => outln!("catalog: registered at {to}"),
        Some(Advanced::Moved(from, to)) => outln!("catalog: moved from {from} to {to}"),
        Some(Advanced::Current(at)) => outln!("catalog: already at {at}"),
        None => {}
    }
}

/// Why an expiry kept snapshot (a Delta target's version) `at` and every one after it
/// when the retention asked for a later cut: the source's oldest pending commit, or,
/// after a late completion, the source's order.
pub fn expiry_held(
    table: &str,
    at: i64,
    pending: Option<&xlake_sync::maintain::HeldBack>,
    delta: bool,
) {
    let what = if delta { "version" } else { "snapshot" };
    match pending {
        Some(h) => outln!(
            "{table}: source commit {} is pending: {what} {at} and every later one kept, so that it is mirrored when it completes",
            h.pending
        ),
        None => outln!(
            "{table}: {what} {at} and every later one kept: a source commit completed late and its {what} comes after those of later commits, or it is not mirrored yet; expiring past it would have the next sync mirror an expired commit again, or never mirror it"
        ),
    }
}

/// What `expire --target delta` did: the versions whose log files are gone (the log now
/// starts at the checkpoint after them) and the files deleted.
pub fn delta_expired(table: &str, expired: &xlake_sync::maintain::Expired) {
    for path in &expired.deleted_files {
        outln!("deleted {path}");
    }
    match (expired.snapshots.first(), expired.snapshots.last()) {
        (Some(first), Some(last)) => outln!(
            "{table}: versions {first} to {last} expired (the log now starts at version {}, a checkpoint), {} files deleted",
            last + 1,
            expired.deleted_files.len()
        ),
        _ => outln!(
            "{table}: no version expired (the log is cut only at a checkpoint at or before the oldest version kept, never past the newest checkpoint)"
        ),
    }
}
