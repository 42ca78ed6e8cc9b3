//! Each command: find the table, call the library, print. A location that is not a table
//! (missing, a file, an empty folder, a scheme this build cannot open) is refused first,
//! with exit code 2, before anything is read or written.

use std::fmt::Display;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use xlake_source::SourceOptions;
use xlake_sync::access::{Allowed, Key};
use xlake_sync::inspect::inspect;
use xlake_sync::job::{run_once, JobConfig};
use xlake_sync::locate::{locate, Located};
use xlake_sync::maintain::Retention;
use xlake_sync::maintain::{self, Expiry};
use xlake_sync::serve::{bind, serve, MetricsEndpoint, ServeConfig};
use xlake_sync::snapshots::snapshots_of;
use xlake_sync::{check_with, mirror_commit, sync, SyncError, SyncOptions};

use crate::args::{
    AllowArg, CatalogArgs, Command, MirrorArgs, TableArg, TargetArg, ViewArg, WriterArg,
};
use crate::demo::{self, DemoError};
use crate::out::outln;
use crate::print;
use crate::progress::Progress;
use crate::signals::StopSignals;

/// Why a command stopped, and the exit code that says so.
#[derive(Debug)]
pub struct Failure {
    /// 1: it ran and failed; 2: it could not start.
    pub code: u8,
    /// One line for the operator.
    pub message: String,
}

/// A command that could not start: bad input, a location that is not a table.
/// An age in ms; one past what an i64 holds (292 million years) is taken as the most it
/// holds: older than anything (a hostile review's `--older-than 99999999999999d` was an
/// error naming no flag).
fn millis(age: std::time::Duration) -> i64 {
    i64::try_from(age.as_millis()).unwrap_or(i64::MAX)
}

fn usage(e: impl Display) -> Failure {
    Failure {
        code: 2,
        message: e.to_string(),
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Self {
        Self {
            code: 1,
            message: e.to_string(),
        }
    }
}

/// A library error: exit 2 when it refused what was asked ([`SyncError::is_refusal`]:
/// a format or target that does not apply, a target place another writer holds), else 1.
fn failed(e: SyncError) -> Failure {
    match e.is_refusal() {
        true => usage(e),
        false => e.into(),
    }
}

type Outcome = Result<ExitCode, Failure>;

/// Run one command.
pub async fn run(command: Command) -> Outcome {
    match command {
        Command::Demo { dir } => demo(&dir).await,
        Command::Sync {
            table: TableArg { table },
            skip_file_check,
            check_every_file,
            from_latest,
            rebuild,
            format,
            allow,
            json,
            mirror,
        } => {
            // With no format named, the sync itself finds the table (and refuses a
            // location without one, as this would): a mirrored table is opened as the
            // format its mirror records, with no look for the others' markers.
            if format.is_some() {
                source_table_of(&table, format.as_deref()).await?;
            }
            let options = SyncOptions {
                format,
                skip_file_check,
                check_every_file,
                from_latest,
                rebuild,
                data_roots: data_roots(&table, &allow)?,
                ..mirror_options(&mirror)?
            };
            match json {
                true => sync_json(&table, &options).await,
                false => sync_and_print(&table, &options).await,
            }
        }
        Command::Commit {
            table: TableArg { table },
            instant,
            version,
            allow,
            json,
            mirror,
        } => {
            let commit = CommitId {
                by_version: version.is_some(),
                id: instant.unwrap_or_else(|| version.map(|v| v.to_string()).unwrap_or_default()),
            };
            commit_and_print(&table, &commit, &allow, json, &mirror).await
        }
        command @ Command::Serve { .. } => serve_command(command).await,
        Command::Run {
            config,
            once,
            every,
            metrics_listen,
            check_every,
            shard,
        } => {
            let every = every.filter(|_| !once);
            let mut config = read_job_config(&config)?;
            if let Some(shard) = shard {
                config = config.in_shard(shard);
            }
            job(config, every, metrics_listen, check_every).await
        }
        other => table_command(other).await,
    }
}

/// The commands on one table's mirror: check, inspect, expire, upgrade, cleanup,
/// snapshots.
async fn table_command(command: Command) -> Outcome {
    match command {
        check @ Command::Check { .. } => check_command(check).await,
        Command::Inspect {
            table: TableArg { table },
            json,
            view,
            to,
        } => {
            source_table(&table).await?;
            let delta = is_delta(&to);
            let options = SyncOptions {
                target: to.target,
                ..options(&view, &WriterArg::default())
            };
            let report = inspect(&table, &options).await.map_err(failed)?;
            if json {
                print::json(&report)?;
            } else {
                print::inspect(&report, delta);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Expire {
            table: TableArg { table },
            keep_snapshots,
            max_snapshot_age,
            catalog,
            writer,
            to,
        } => {
            if is_delta(&to) && catalog.catalog.is_some() {
                return Err(usage(format!(
                    "{table}: a catalog entry is kept for the Iceberg target only"
                )));
            }
            let catalog = catalog_target(&catalog)?;
            let retention = (keep_snapshots, max_snapshot_age);
            expire(&table, retention, catalog, &writer, &to).await
        }
        Command::Upgrade {
            table: TableArg { table },
            format_version,
            catalog,
            writer,
        } => {
            let catalog = catalog_target(&catalog)?;
            upgrade(&table, format_version, catalog, &writer).await
        }
        Command::Cleanup {
            table: TableArg { table },
            orphans: _,
            older_than,
            no_writer_running,
            dry_run,
            to,
        } => cleanup(&table, (older_than, no_writer_running), dry_run, &to).await,
        Command::Snapshots {
            table: TableArg { table },
            json,
            to,
        } => list_snapshots(&table, json, to.target.as_deref()).await,
        _ => Err(usage("not a table command")),
    }
}

/// `xlake check`: the mirror compared with its source, the exit code saying whether they
/// agree.
async fn check_command(command: Command) -> Outcome {
    let Command::Check {
        table: TableArg { table },
        deep,
        all,
        allowed_lag,
        json,
        catalog,
        view,
        to,
    } = command
    else {
        return Err(usage("not a check"));
    };
    source_table(&table).await?;
    let options = SyncOptions {
        catalog: catalog_target(&catalog)?,
        target: to.target,
        ..options(&view, &WriterArg::default())
    };
    let report = check_with(&table, &options, deep, all)
        .await?
        .with_allowed_lag(allowed_lag);
    if json {
        print::json(&report)?;
    } else {
        print::check(&report);
    }
    Ok(exit(report.consistent))
}

/// Whether the target chosen is Delta (for printing).
fn is_delta(to: &TargetArg) -> bool {
    to.target
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("delta"))
}

/// Exit 0 when `ok`, else 1.
fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn options(view: &ViewArg, writer: &WriterArg) -> SyncOptions {
    SyncOptions {
        source: SourceOptions {
            mor_read_optimized: view.mor_read_optimized,
            ..Default::default()
        },
        single_writer: writer.single_writer,
        ..Default::default()
    }
}

/// The sync options the mirroring commands share (view, format version, catalog entry,
/// single writer); bad catalog options are a usage error (exit 2).
fn mirror_options(m: &MirrorArgs) -> Result<SyncOptions, Failure> {
    Ok(SyncOptions {
        catalog: catalog_target(&m.catalog)?,
        format_version: m.target.format_version,
        target: m.to.target.clone(),
        ..options(&m.view, &m.writer)
    })
}

/// With `--allow`: the table and the prefixes, normalised, that the files a log names
/// must lie under; bad locations are a usage error (exit 2).
fn data_roots(table: &str, allow: &AllowArg) -> Result<Option<Vec<String>>, Failure> {
    if allow.allow.is_empty() {
        return Ok(None);
    }
    let table = xlake_sync::access::normalise(table).map_err(usage)?;
    let allowed = Allowed::new(&allow.allow, &[]).map_err(usage)?;
    Ok(Some(allowed.data_roots(&table)))
}

/// The catalog entry the options name, if any; bad options are a usage error (exit 2).
fn catalog_target(c: &CatalogArgs) -> Result<Option<xlake_catalog::CatalogTarget>, Failure> {
    xlake_catalog::CatalogTarget::from_options(
        c.catalog.as_deref(),
        c.catalog_name.as_deref(),
        c.catalog_table.as_deref(),
    )
    .map_err(usage)
}

/// A sync's (or a commit's) error, as the look before other commands would have made it
/// when that look fails (exit 2: a location without a table, or one that cannot be
/// read); else the error itself, exit 2 when it refused what was asked
/// ([`SyncError::is_refusal`]), else 1. The look comes after, not before: a mirrored table is
/// opened as the format its mirror records, with no look for the others' markers.
async fn refused_or(table: &str, format: Option<&str>, e: SyncError) -> Failure {
    match source_table_of(table, format).await {
        Err(refused) => refused,
        Ok(_) if e.is_refusal() => usage(e),
        Ok(_) => e.into(),
    }
}

/// Refuse (exit 2) a location without a source table (of `format`, when named).
async fn source_table_of(location: &str, format: Option<&str>) -> Result<Located, Failure> {
    locate(location, format)
        .await
        .and_then(Located::require_source)
        .map_err(usage)
}

/// Refuse (exit 2) a location without a source table.
async fn source_table(location: &str) -> Result<Located, Failure> {
    locate(location, None)
        .await
        .and_then(Located::require_source)
        .map_err(usage)
}

/// Refuse (exit 2) a location with neither a source table nor Iceberg metadata.
async fn any_table(location: &str) -> Result<Located, Failure> {
    locate(location, None)
        .await
        .and_then(Located::require_table)
        .map_err(usage)
}

/// Now, in ms since the epoch.
fn now_ms() -> Result<i64, Failure> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    i64::try_from(now.as_millis()).map_err(usage)
}

async fn sync_and_print(table: &str, options: &SyncOptions) -> Outcome {
    let mut progress = Progress::new();
    let synced = sync(table, options, |m| {
        progress.snapshot(&print::mirrored_line(m), m.remaining)
    })
    .await;
    let report = match synced {
        Ok(report) => report,
        Err(e) => return Err(refused_or(table, options.format.as_deref(), e).await),
    };
    for note in &report.notes {
        outln!("note: {note}");
    }
    for d in &report.degraded {
        outln!("degraded: {d}");
    }
    match report.written.len() {
        0 if report.created_empty.is_some() => {
            let delta = options.target.as_deref();
            let kind = match delta.is_some_and(|t| t.eq_ignore_ascii_case("delta")) {
                true => "Delta table (`_delta_log/`, version 0)",
                false => "Iceberg table",
            };
            outln!("{table}: no completed commit yet; created the {kind} with the source's schema and no snapshot")
        }
        0 => outln!("{table}: up to date, nothing to mirror"),
        n => outln!("{table}: {n} snapshots written"),
    }
    print::catalog(&report);
    if let Some(r) = &report.rebuilt {
        outln!(
            "{table}: rebuilt here; the old metadata (written for {}) was moved, not deleted, to {} ({} files)",
            r.old_locations.join(", "),
            r.set_aside_in,
            r.files
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `sync --json`: the report as one JSON document, no lines.
async fn sync_json(table: &str, options: &SyncOptions) -> Outcome {
    let report = match sync(table, options, |_| {}).await {
        Ok(report) => report,
        Err(e) => return Err(refused_or(table, options.format.as_deref(), e).await),
    };
    print::json(&print::SyncJson::of(table, None, &report))?;
    Ok(ExitCode::SUCCESS)
}

async fn demo(dir: &Path) -> Outcome {
    demo::unpack(dir).map_err(|e| match e {
        DemoError::Refused(m) => usage(m),
        DemoError::Failed(message) => Failure { code: 1, message },
    })?;
    let table = std::path::absolute(dir)?.display().to_string();
    outln!("Unpacked a Hudi table (table version 9, copy-on-write, 12 instants) at {table}; mirroring it as Iceberg:");
    sync_and_print(&table, &SyncOptions::default()).await?;
    for line in demo::next_steps(&table) {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A job config file, parsed; errors name the file (exit 2).
fn read_job_config(config: &Path) -> Result<JobConfig, Failure> {
    // Read as `cat` reads it: a pipe is taken (`--config <(generate)`), and waits for
    // its writer; but no more than a job file could need (`/dev/zero` would fill memory).
    const MOST: u64 = 64 << 20;
    let failed = |e: std::io::Error| usage(format!("{}: {e}", config.display()));
    let mut text = String::new();
    let file = std::fs::File::open(config).map_err(failed)?;
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MOST + 1), &mut text)
        .map_err(failed)?;
    if text.len() as u64 > MOST {
        return Err(usage(format!(
            "{}: larger than {} MiB, more than a job file holds",
            config.display(),
            MOST >> 20
        )));
    }
    JobConfig::parse(&text).map_err(|e| usage(format!("{}: {e}", config.display())))
}

async fn job(
    config: JobConfig,
    every: Option<Duration>,
    metrics_listen: Option<String>,
    check_every: Option<Duration>,
) -> Outcome {
    let endpoint = match metrics_listen {
        Some(address) => {
            let listener = bind(&address).await?;
            outln!("metrics on {}", listener.local_addr()?);
            Some(MetricsEndpoint::start(listener))
        }
        None => None,
    };
    let mut signals = StopSignals::install()?;
    let mut last_check: Option<std::time::Instant> = None;
    loop {
        let results = run_once(&config, |r| {
            print::table_result(r);
            if let Some(e) = &endpoint {
                e.record(r);
            }
        })
        .await;
        let failed = results.iter().filter(|r| r.outcome.is_err()).count();
        let written: usize = results
            .iter()
            .filter_map(|r| r.outcome.as_ref().ok())
            .map(|r| r.written.len())
            .sum();
        outln!(
            "{} tables: {} synced ({written} snapshots written), {failed} failed",
            results.len(),
            results.len() - failed
        );
        let Some(interval) = every else {
            return Ok(exit(failed == 0));
        };
        let due = check_every.is_some_and(|c| last_check.is_none_or(|t| t.elapsed() >= c));
        if due {
            last_check = Some(std::time::Instant::now());
            check_tables(&config, endpoint.as_ref()).await;
        }
        if signals.within(interval).await {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// The periodic check of `run --every --check-every`: a line per consistent table, the
/// whole report for one that is not, a line for one that could not be checked.
async fn check_tables(config: &JobConfig, endpoint: Option<&MetricsEndpoint>) {
    xlake_sync::job::check_tables(config, |location, report| {
        if let Some(e) = endpoint {
            e.checked(location, report);
        }
        match report {
            Ok(r) if r.consistent => outln!(
                "check {location}: consistent (lag {} commits)",
                r.lag_commits
            ),
            Ok(r) => print::check(r),
            Err(e) => outln!("check {location}: could not check: {e}"),
        }
    })
    .await;
}

async fn expire(
    table: &str,
    (keep_snapshots, max_age): (Option<usize>, Option<Duration>),
    catalog: Option<xlake_catalog::CatalogTarget>,
    writer: &WriterArg,
    to: &TargetArg,
) -> Outcome {
    let located = any_table(table).await?;
    let delta = is_delta(to);
    if !located.iceberg && !delta {
        outln!("{table}: no Iceberg metadata yet: nothing to expire");
        return Ok(ExitCode::SUCCESS);
    }
    let retention = Retention {
        keep_snapshots,
        max_age_ms: max_age.map(millis),
        now_ms: now_ms()?,
        cuts: None,
    };
    let store = located.store.with_single_writer(writer.single_writer);
    let Expiry {
        expired,
        catalog,
        held_back,
    } = maintain::expire(&store, &retention, catalog.as_ref(), to.target.as_deref())
        .await
        .map_err(failed)?;
    if let Some(at) = expired.held_at {
        print::expiry_held(table, at, held_back.as_ref(), delta);
    }
    print::catalog_advanced(catalog.as_ref());
    if delta {
        print::delta_expired(table, &expired);
        return Ok(ExitCode::SUCCESS);
    }
    for id in &expired.snapshots {
        outln!("expired snapshot {id}");
    }
    outln!(
        "{table}: {} snapshots expired, {} metadata files deleted",
        expired.snapshots.len(),
        expired.deleted_files.len()
    );
    Ok(ExitCode::SUCCESS)
}

async fn upgrade(
    table: &str,
    to: u8,
    catalog: Option<xlake_catalog::CatalogTarget>,
    writer: &WriterArg,
) -> Outcome {
    let store = any_table(table)
        .await?
        .store
        .with_single_writer(writer.single_writer);
    let done = xlake_sync::upgrade::upgrade(&store, to, catalog.as_ref())
        .await
        .map_err(failed)?;
    print::catalog_advanced(done.catalog.as_ref());
    match done.note() {
        Some(note) => outln!("{table}: {note}"),
        None => outln!(
            "{table}: already at Iceberg format version {}: nothing to upgrade",
            done.from
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `older_than`, and whether the operator says no writer runs (which allows any age).
async fn cleanup(
    table: &str,
    older_than: (Duration, bool),
    dry_run: bool,
    to: &TargetArg,
) -> Outcome {
    let (older_than, no_writer_running) = older_than;
    if let Some(why) = maintain::refuse_age(older_than, no_writer_running) {
        return Err(usage(format!("{table}: {why}")));
    }
    let store = any_table(table).await?.store;
    let age_ms = millis(older_than);
    let cutoff = now_ms()?.saturating_sub(age_ms);
    let done = maintain::cleanup(&store, cutoff, dry_run, to.target.as_deref())
        .await
        .map_err(failed)?;
    for path in &done.orphans {
        outln!(
            "{} {path}",
            if dry_run { "would delete" } else { "deleted" }
        );
    }
    let kind = if is_delta(to) {
        "files xlake wrote that no Delta version names"
    } else {
        "orphan metadata files"
    };
    outln!("{table}: {} {kind}", done.orphans.len());
    if let Some(first) = done.left_alone.first() {
        outln!(
            "{table}: left alone: {} files under metadata/ that xlake did not write (e.g. {first})",
            done.left_alone.len()
        );
    }
    if let Some(first) = done.strays.first() {
        outln!(
            "{table}: left alone: {} metadata versions above the current one past a gap, which no reader loads (e.g. {first}); the files they name are kept",
            done.strays.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The commit `xlake commit` names: a Hudi instant (`--instant`), or a Delta version
/// (`--version`).
struct CommitId {
    id: String,
    by_version: bool,
}

/// A commit's error: a `--version` on a table that is not Delta is a usage error (exit 2)
/// naming the flag to use; else as [`refused_or`] says.
async fn commit_refused(table: &str, commit: &CommitId, e: SyncError) -> Failure {
    if commit.by_version {
        if let Ok(Located {
            format: Some(format),
            ..
        }) = source_table(table).await
        {
            if format != "DELTA" {
                let title = xlake_sync::sources::KINDS
                    .iter()
                    .find(|k| k.format.as_str() == format)
                    .map_or(format, |k| k.title);
                let a = if title.starts_with(['A', 'E', 'I', 'O', 'U']) {
                    "an"
                } else {
                    "a"
                };
                return usage(format!(
                    "{table}: --version names a Delta version, but this is {a} {title} table: name its commit with --instant"
                ));
            }
        }
    }
    refused_or(table, None, e).await
}

/// `xlake commit`: mirror up to `commit`, print what was written (`json`: as JSON).
async fn commit_and_print(
    table: &str,
    commit: &CommitId,
    allow: &AllowArg,
    json: bool,
    mirror: &MirrorArgs,
) -> Outcome {
    let options = SyncOptions {
        data_roots: data_roots(table, allow)?,
        ..mirror_options(mirror)?
    };
    if json {
        let report = match mirror_commit(table, &options, &commit.id, |_| {}).await {
            Ok(report) => report,
            Err(e) => return Err(commit_refused(table, commit, e).await),
        };
        print::json(&print::SyncJson::of(table, Some(&commit.id), &report))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut progress = Progress::new();
    let mirrored = mirror_commit(table, &options, &commit.id, |m| {
        progress.snapshot(&print::mirrored_line(m), m.remaining)
    })
    .await;
    let report = match mirrored {
        Ok(report) => report,
        Err(e) => return Err(commit_refused(table, commit, e).await),
    };
    for note in &report.notes {
        outln!("note: {note}");
    }
    for d in &report.degraded {
        outln!("degraded: {d}");
    }
    print::catalog(&report);
    outln!(
        "{table}: source commit {} is mirrored ({} snapshots written)",
        commit.id,
        report.written.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `xlake serve`: the service, until a stop signal.
async fn serve_command(command: Command) -> Outcome {
    let Command::Serve {
        listen,
        metrics_listen,
        key_file,
        insecure_no_key,
        allow_default_key,
        allow,
        config,
        every,
        check_every,
        concurrency,
        header_timeout,
        body_timeout,
        max_body,
        max_tables,
        mirror,
    } = command
    else {
        return Err(usage("not the serve command"));
    };
    let jobs = config.as_deref().map(read_job_config).transpose()?;
    let key = Key::configured(
        std::env::var("XLAKE_CALLBACK_KEY").ok(),
        key_file.as_deref(),
        insecure_no_key,
        allow_default_key,
    )
    .map_err(usage)?;
    if insecure_no_key {
        crate::out::errln!("xlake: WARNING: --insecure-no-key: callbacks are not authenticated");
    }
    let (mut prefixes, tables) = jobs
        .as_ref()
        .map(JobConfig::served_locations)
        .unwrap_or_default();
    prefixes.splice(0..0, allow.iter().cloned());
    let settings = ServeConfig {
        key,
        allowed: Allowed::for_service(&prefixes, &tables).map_err(usage)?,
        options: mirror_options(&mirror)?,
        concurrency: concurrency
            .or(jobs.as_ref().map(|j| j.concurrency))
            .unwrap_or(4),
        header_timeout,
        body_timeout,
        max_body,
        max_tables,
        every,
        check_every,
        jobs,
    };
    let listener = bind(&listen).await?;
    outln!("listening on {}", listener.local_addr()?);
    let metrics = match metrics_listen {
        Some(address) => Some(bind(&address).await?),
        None => None,
    };
    if let Some(m) = &metrics {
        outln!("metrics on {}", m.local_addr()?);
    }
    let mut signals = StopSignals::install()?;
    let stop = async move {
        signals.within(Duration::from_secs(u32::MAX.into())).await;
    };
    serve(listener, metrics, settings, stop).await?;
    Ok(ExitCode::SUCCESS)
}

/// `xlake snapshots`: the snapshot list, as text or JSON.
async fn list_snapshots(table: &str, json: bool, target: Option<&str>) -> Outcome {
    let list = snapshots_of(any_table(table).await?.store, target)
        .await
        .map_err(failed)?;
    if json {
        print::json(&list)?;
    } else {
        print::snapshots(
            &list,
            target.is_some_and(|t| t.eq_ignore_ascii_case("delta")),
        );
    }
    Ok(ExitCode::SUCCESS)
}
