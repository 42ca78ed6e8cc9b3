//! `xlake`: command-line entry point. Argument parsing and printing only; every behaviour
//! lives in the library crates under `crates/`.

mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use progress::Progress;
use xlake_iceberg::orphans::orphan_files;
use xlake_iceberg::summary::iso_instant;
use xlake_iceberg::{IcebergTable, Retention, SyncMetadata};
use xlake_source::SourceOptions;
use xlake_storage::TableStore;
use xlake_sync::callback::serve;
use xlake_sync::inspect::{inspect, InspectReport};
use xlake_sync::job::{parse_duration, run_once, JobConfig, TableResult};
use xlake_sync::{check_with, mirror_commit, open_store, sync, CheckReport, Mirrored, SyncOptions};

/// Make a Hudi or Delta table readable as Apache Iceberg, in place.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Log format on stderr (logs are filtered with RUST_LOG, e.g. RUST_LOG=info).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How logs are written.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Mirror every pending completed commit of a Hudi or Delta table as Iceberg snapshots.
    Sync {
        /// Table root: a local path, or a URL with the `cloud` feature.
        table: String,
        /// The source format: `hudi`, `delta` (detected when not given) or `parquet` (a
        /// plain, Hive-partitioned folder of Parquet files: never detected, so name it on
        /// the first sync; later commands read it from the mirror).
        #[arg(long)]
        format: Option<String>,
        /// Mirror a merge-on-read table's base files only (its read-optimized view).
        #[arg(long)]
        mor_read_optimized: bool,
        /// Do not check that live data files exist (a copy of the log without the data).
        #[arg(long)]
        skip_file_check: bool,
        /// On a first sync, write one snapshot of the current state, not the history.
        #[arg(long)]
        from_latest: bool,
        /// Only this process ever writes the table's Iceberg metadata: accept a store
        /// without put-if-absent (conditional writes), whose commits are then not atomic.
        #[arg(long)]
        single_writer: bool,
    },
    /// In-commit mode over HTTP: answer Hudi's write-commit callback
    /// (`hoodie.write.commit.callback.http.url`), mirroring each commit before answering
    /// (200 when mirrored, 500 with the reason when not).
    Serve {
        /// Address to listen on, e.g. 127.0.0.1:8089 (port 0: any free port).
        #[arg(long)]
        listen: String,
        /// Mirror merge-on-read tables' base files only.
        #[arg(long)]
        mor_read_optimized: bool,
        /// Only this process ever writes the table's Iceberg metadata: accept a store
        /// without put-if-absent (conditional writes), whose commits are then not atomic.
        #[arg(long)]
        single_writer: bool,
    },
    /// The scheduled job: sync every table listed in a TOML config, a few at a time.
    /// One table's failure never stops the others; each is reported.
    Run {
        /// Config file: `concurrency = N` and `[[tables]]` entries with `location` and
        /// optionally `mor_read_optimized`, `skip_file_check`, `single_writer`, `expire`
        /// (default true), `keep_snapshots`, `max_snapshot_age` (see the README).
        #[arg(long)]
        config: std::path::PathBuf,
        /// One cycle; exit non-zero if any table failed.
        #[arg(long, conflicts_with = "every", required_unless_present = "every")]
        once: bool,
        /// Repeat every interval (`30s`, `5m`, `1h`) until SIGTERM or Ctrl-C.
        #[arg(long)]
        every: Option<String>,
    },
    /// In-commit mode, the last step of a write job: mirror everything pending up to this
    /// commit; exit 0 only if the commit then has its Iceberg snapshot.
    Commit {
        /// Table root.
        table: String,
        /// Hudi: the instant (requested time) just written.
        #[arg(long, conflicts_with = "version", required_unless_present = "version")]
        instant: Option<String>,
        /// Delta: the version just written.
        #[arg(long)]
        version: Option<u64>,
        /// Mirror a merge-on-read table's base files only.
        #[arg(long)]
        mor_read_optimized: bool,
        /// Only this process ever writes the table's Iceberg metadata: accept a store
        /// without put-if-absent (conditional writes), whose commits are then not atomic.
        #[arg(long)]
        single_writer: bool,
    },
    /// Check that every completed source commit has exactly one Iceberg snapshot, in order.
    /// Exit 0: consistent; 1: violations (missing, unknown, duplicated, out of order,
    /// differing files); 2: could not check.
    Check {
        /// Table root.
        table: String,
        /// Also compare the current snapshot's live files with the source's.
        #[arg(long)]
        deep: bool,
        /// With --deep: compare every retained snapshot, not only the current one.
        #[arg(long, requires = "deep")]
        all: bool,
        /// Newest commits that may be unmirrored without a violation (a scheduled job
        /// between runs); they are still reported as lag.
        #[arg(long, default_value_t = 0)]
        allowed_lag: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The table is merge-on-read and mirrored read-optimized.
        #[arg(long)]
        mor_read_optimized: bool,
    },
    /// The health report: side by side, the metadata each format keeps, and anything
    /// mirrored in a degraded way.
    Inspect {
        /// Table root.
        table: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The table is merge-on-read and mirrored read-optimized.
        #[arg(long)]
        mor_read_optimized: bool,
    },
    /// Expire the Iceberg snapshots that reference data files the source has deleted
    /// (Hudi's cleaner, Delta's vacuum), so time travel never reaches a missing file, and
    /// those beyond the limits given; always the oldest ones, never the current one.
    Expire {
        /// Table root.
        table: String,
        /// Keep at most this many snapshots.
        #[arg(long)]
        keep_snapshots: Option<usize>,
        /// Expire snapshots whose source commit is older than this (`12h`, `7d`).
        #[arg(long)]
        max_snapshot_age: Option<String>,
        /// Only this process ever writes the table's Iceberg metadata: accept a store
        /// without put-if-absent (conditional writes), whose commits are then not atomic.
        #[arg(long)]
        single_writer: bool,
    },
    /// Delete orphan metadata files (left by lost races and crashes): files under
    /// `metadata/` that no retained `vN.metadata.json` references. Never data files.
    Cleanup {
        /// Table root.
        table: String,
        /// Required: what to clean up (orphan metadata files).
        #[arg(long, required = true)]
        orphans: bool,
        /// Only files older than this (`30s`, `5m`, `1h`): younger ones may belong to a
        /// commit in progress.
        #[arg(long, default_value = "1h")]
        older_than: String,
        /// List what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// List the Iceberg snapshots of a table and the source commit each one mirrors.
    Snapshots {
        /// Table root (the folder holding `metadata/`): a local path, or a URL with the
        /// `cloud` feature.
        table: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    // `check` keeps exit code 1 for violations; its errors mean "could not check".
    let error_code = if matches!(cli.command, Command::Check { .. }) {
        2
    } else {
        1
    };
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xlake: {e}");
            ExitCode::from(error_code)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match cli.command {
        Command::Serve {
            listen,
            mor_read_optimized,
            single_writer,
        } => {
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            println!("listening on {}", listener.local_addr()?);
            let options = SyncOptions {
                single_writer,
                ..read_optimized(mor_read_optimized)
            };
            serve(listener, options).await?;
        }
        Command::Inspect {
            table,
            json,
            mor_read_optimized,
        } => {
            let options = read_optimized(mor_read_optimized);
            let report = inspect(&table, &options).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_inspect(&report);
            }
        }
        Command::Expire {
            table,
            keep_snapshots,
            max_snapshot_age,
            single_writer,
        } => {
            let max_age = max_snapshot_age
                .as_deref()
                .map(parse_duration)
                .transpose()?;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            let retention = Retention {
                keep_snapshots,
                max_age_ms: max_age.map(|a| i64::try_from(a.as_millis())).transpose()?,
                now_ms: i64::try_from(now.as_millis())?,
            };
            let options = SyncOptions {
                single_writer,
                ..Default::default()
            };
            let expired = IcebergTable::new(open_store(&table, &options)?)
                .expire(&retention)
                .await?;
            for id in &expired.snapshots {
                println!("expired snapshot {id}");
            }
            println!(
                "{table}: {} snapshots expired, {} metadata files deleted",
                expired.snapshots.len(),
                expired.deleted_files.len()
            );
        }
        Command::Cleanup {
            table,
            orphans: _,
            older_than,
            dry_run,
        } => {
            let store = TableStore::open(&table)?;
            let age = parse_duration(&older_than)?;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            let cutoff = i64::try_from(now.saturating_sub(age).as_millis())?;
            let found = orphan_files(&store, cutoff).await?;
            for path in &found {
                if !dry_run {
                    store.delete(path).await?;
                }
                println!(
                    "{} {}",
                    if dry_run { "would delete" } else { "deleted" },
                    store.absolute(path)
                );
            }
            println!("{table}: {} orphan metadata files", found.len());
        }
        Command::Run {
            config,
            once,
            every,
        } => {
            let text = std::fs::read_to_string(&config)
                .map_err(|e| format!("{}: {e}", config.display()))?;
            let config =
                JobConfig::parse(&text).map_err(|e| format!("{}: {e}", config.display()))?;
            let interval = every.as_deref().map(parse_duration).transpose()?;
            let mut signals = StopSignals::install()?;
            loop {
                let results = run_once(&config, print_table_result).await;
                let failed = results.iter().filter(|r| r.outcome.is_err()).count();
                let written: usize = results
                    .iter()
                    .filter_map(|r| r.outcome.as_ref().ok())
                    .map(|r| r.written.len())
                    .sum();
                println!(
                    "{} tables: {} synced ({written} snapshots written), {failed} failed",
                    results.len(),
                    results.len() - failed
                );
                let Some(interval) = interval.filter(|_| !once) else {
                    return Ok(if failed == 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    });
                };
                if signals.within(interval).await {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        Command::Commit {
            table,
            instant,
            version,
            mor_read_optimized,
            single_writer,
        } => {
            let options = SyncOptions {
                single_writer,
                ..read_optimized(mor_read_optimized)
            };
            let commit =
                instant.unwrap_or_else(|| version.map(|v| v.to_string()).unwrap_or_default());
            let mut progress = Progress::new();
            let report = mirror_commit(&table, &options, &commit, |m| {
                progress.snapshot(&mirrored_line(m), m.remaining)
            })
            .await?;
            println!(
                "{table}: source commit {commit} is mirrored ({} snapshots written)",
                report.written.len()
            );
        }
        Command::Check {
            table,
            deep,
            all,
            allowed_lag,
            json,
            mor_read_optimized,
        } => {
            let options = read_optimized(mor_read_optimized);
            let report = check_with(&table, &options, deep, all).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_check(&report, allowed_lag);
            }
            return Ok(if report.consistent_within(allowed_lag) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Command::Sync {
            table,
            format,
            mor_read_optimized,
            skip_file_check,
            from_latest,
            single_writer,
        } => {
            let options = SyncOptions {
                source: SourceOptions { mor_read_optimized },
                skip_file_check,
                from_latest,
                single_writer,
                format,
                ..Default::default()
            };
            let mut progress = Progress::new();
            let report = sync(&table, &options, |m| {
                progress.snapshot(&mirrored_line(m), m.remaining)
            })
            .await?;
            for note in &report.notes {
                println!("note: {note}");
            }
            match report.written.len() {
                0 => println!("{table}: up to date, nothing to mirror"),
                n => println!("{table}: {n} snapshots written"),
            }
        }
        Command::Snapshots { table } => {
            let iceberg = IcebergTable::new(TableStore::open(&table)?);
            let Some(loaded) = iceberg.load().await? else {
                println!("{table}: no Iceberg metadata yet");
                return Ok(ExitCode::SUCCESS);
            };
            let mut snapshots: Vec<_> = loaded.metadata.snapshots().collect();
            snapshots.sort_by_key(|s| s.sequence_number());
            println!("{table}: metadata/v{}.metadata.json", loaded.version);
            println!(
                "{:>4}  {:<20}  {:<24}  {:<9}  source commit",
                "seq", "snapshot", "time", "operation"
            );
            for s in snapshots {
                let sync = SyncMetadata::from_summary(&s.summary().additional_properties);
                let source = sync.map_or_else(
                    || "-".to_string(),
                    |m| {
                        format!(
                            "{} {}",
                            m.source_table_format.unwrap_or_default(),
                            m.latest_table_operation_identifier
                                .or(m.source_identifier)
                                .unwrap_or_default()
                        )
                    },
                );
                println!(
                    "{:>4}  {:<20}  {:<24}  {:<9}  {source}",
                    s.sequence_number(),
                    s.snapshot_id(),
                    iso_instant(s.timestamp_ms()),
                    s.summary().operation.as_str()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Sync options with nothing but the merge-on-read choice set.
fn read_optimized(mor_read_optimized: bool) -> SyncOptions {
    SyncOptions {
        source: SourceOptions { mor_read_optimized },
        ..Default::default()
    }
}

/// One line per table of a job cycle.
fn print_table_result(r: &TableResult) {
    match &r.outcome {
        Ok(report) => println!(
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
        Err(e) => println!("FAILED {}: {e}", r.location),
    }
}

/// SIGTERM and Ctrl-C, listened to from the job's start so that a signal arriving during
/// a cycle is not lost (nor kills the process mid-commit).
struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Sleep for `interval`; true if a stop signal came (or had come) first.
    async fn within(&mut self, interval: std::time::Duration) -> bool {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                _ = self.terminate.recv() => true,
                _ = self.interrupt.recv() => true,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                _ = tokio::signal::ctrl_c() => true,
            }
        }
    }
}

/// The line of one snapshot written.
fn mirrored_line(m: &Mirrored) -> String {
    format!(
        "{} {} {:<14} +{} -{} files -> snapshot {} (v{})",
        m.commit.format.as_str(),
        m.commit.id,
        m.commit.action,
        m.added,
        m.removed,
        m.committed.snapshot_id,
        m.committed.version
    )
}

fn print_inspect(r: &InspectReport) {
    println!("{}", r.table);
    println!(
        "  {:<8} {}",
        format!("{}:", r.format.to_lowercase()),
        r.source_line
    );
    let i = &r.iceberg;
    println!(
        "  iceberg: metadata/ {} files, {} bytes; v{} ({} bytes); {} snapshots; {} manifests in the current one; {} orphan files; partitioning [{}]",
        i.metadata.files,
        i.metadata.bytes,
        i.version.unwrap_or(0),
        i.current_metadata_bytes,
        i.snapshots,
        i.manifests,
        i.orphan_files,
        i.partitioning.join(", ")
    );
    for d in &r.degraded {
        println!("  degraded: {d}");
    }
}

fn print_check(r: &CheckReport, allowed_lag: usize) {
    let state = if r.consistent_within(allowed_lag) {
        "consistent"
    } else {
        "NOT CONSISTENT"
    };
    println!("{} ({}): {state}", r.table, r.format);
    println!(
        "  {} completed source commits, {} snapshots in the current ancestry, {} before mirroring began",
        r.source_commits, r.snapshots, r.before_mirroring
    );
    println!("  lag: {} commits, {} ms", r.lag_commits, r.lag_ms);
    for id in &r.missing {
        println!(
            "  missing: source commit {id} is completed in {} but missing from iceberg",
            r.format.to_lowercase()
        );
    }
    for u in &r.unknown {
        println!("  unknown: snapshot {} records source commit {}, which the source no longer has as completed", u.snapshot_id, u.commit);
    }
    for id in &r.duplicates {
        println!("  duplicate: source commit {id} is recorded by more than one snapshot");
    }
    for id in &r.out_of_order {
        println!(
            "  out of order: the snapshot of source commit {id} comes after that of a later commit"
        );
    }
    for d in &r.file_differences {
        println!("  file: {d}");
    }
}
