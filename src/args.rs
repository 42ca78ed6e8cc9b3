//! The command line: every command, argument and help text (clap derive). Options shared by
//! several commands are written once ([`TableArg`], [`ViewArg`], [`WriterArg`]) so that
//! they read the same everywhere.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use xlake_sync::job::{parse_duration, parse_interval, Shard};

/// Make a Hudi or Delta table readable as Apache Iceberg, in place.
#[derive(Parser)]
#[command(
    version,
    about,
    after_help = "Exit codes: 0 done; 1 failed (for check: violations found); 2 cannot start (bad arguments, a location that is not a table, a config that does not parse; for check: could not check); 141 standard output closed (e.g. `| head`). See docs/cli.md."
)]
pub struct Cli {
    /// Log format on stderr (logs are filtered with RUST_LOG, e.g. RUST_LOG=info; warnings by default).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        help_heading = "Global options"
    )]
    pub log_format: LogFormat,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// How logs are written.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The table a command acts on.
#[derive(Args)]
pub struct TableArg {
    /// The table's root folder (holding .hoodie/ or _delta_log/, and metadata/): a local
    /// path, or with a `--features cloud` build an s3://, gs:// or az:// URL.
    #[arg(value_name = "TABLE")]
    pub table: String,
}

/// The merge-on-read choice.
#[derive(Args)]
pub struct ViewArg {
    /// Merge-on-read Hudi table: mirror its base files only (the read-optimized view).
    /// Each snapshot records it; check and inspect read it from there after a sync.
    #[arg(long)]
    pub mor_read_optimized: bool,
}

/// The single-writer promise.
#[derive(Args, Default)]
pub struct WriterArg {
    /// Only this process ever writes the table's Iceberg metadata: accept a store without
    /// put-if-absent (conditional writes), whose commits are then not atomic.
    #[arg(long)]
    pub single_writer: bool,
}

/// Where a log may name files outside the table (sync, commit; serve has its own).
#[derive(Args, Default)]
pub struct AllowArg {
    /// Confine the files a log names (data files, deletion vector files) to the table and
    /// these location prefixes (repeatable): a commit naming any other fails before
    /// anything there is read. Without it, absolute locations are read where they are.
    #[arg(long = "allow", value_name = "LOCATION-PREFIX")]
    pub allow: Vec<String>,
}

/// What every command that mirrors commits (sync, commit, serve) is told: the view, the
/// format version, the catalog entry and the single-writer promise.
#[derive(Args)]
pub struct MirrorArgs {
    #[command(flatten)]
    pub view: ViewArg,
    #[command(flatten)]
    pub target: FormatVersionArg,
    #[command(flatten)]
    pub to: TargetArg,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    #[command(flatten)]
    pub writer: WriterArg,
}

/// The format a table is mirrored into.
#[derive(Args, Default)]
pub struct TargetArg {
    /// The format to mirror into: `iceberg` (the default, in `metadata/`) or `delta` (a
    /// `_delta_log/` at the table root, for Hudi, Iceberg and Parquet sources; docs/targets.md).
    #[arg(long = "target", value_name = "FORMAT")]
    pub target: Option<String>,
}

/// The Iceberg format version a sync writes.
#[derive(Args, Default)]
pub struct FormatVersionArg {
    /// Iceberg format version to write (2 or 3; default: the table's own, 2 for a new
    /// table). 3 upgrades a v2 mirror in place and carries deletion vectors as Puffin
    /// deletion vectors (docs/iceberg-v3.md).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub format_version: Option<u8>,
}

/// The catalog entry to keep pointing at the table's current version (docs/catalogs.md).
#[derive(Args, Default)]
pub struct CatalogArgs {
    /// Catalog URI: sqlite:///abs/path.db, postgresql://user@host:port/db,
    /// rest+http(s)://host/path, glue://, thrift://host:port (Hive Metastore); credentials
    /// from the environment.
    #[arg(long, value_name = "URI", requires = "catalog_table")]
    pub catalog: Option<String>,
    /// The table's name in the catalog: <namespace>.<name>.
    #[arg(long, value_name = "NAMESPACE.NAME", requires = "catalog")]
    pub catalog_table: Option<String>,
    /// The catalog's own name (the JDBC catalog's catalog_name; default xlake).
    #[arg(long, value_name = "NAME", requires = "catalog")]
    pub catalog_name: Option<String>,
}

/// The commands.
#[derive(Subcommand)]
pub enum Command {
    /// Unpack a bundled Hudi table (12 instants) into a new folder, mirror it as Iceberg,
    /// and print what to try next.
    #[command(
        after_help = "Examples:\n  xlake demo /tmp/hudi-demo\n  cargo run -- demo /tmp/hudi-demo    (from the source tree)\n\nThe folder must be new or empty: the demo never deletes or overwrites anything."
    )]
    Demo {
        /// A new (or empty) folder to unpack the table into.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Mirror every pending completed commit of a Hudi or Delta table as Iceberg snapshots.
    #[command(
        after_help = "Examples:\n  xlake sync /data/orders\n  xlake sync s3://lake/events --from-latest    (a --features cloud build)"
    )]
    Sync {
        #[command(flatten)]
        table: TableArg,
        /// Do not check that live data files exist (a copy of the log without the data).
        #[arg(long)]
        skip_file_check: bool,
        /// Also check the files a commit proves it wrote (Delta adds, Hudi write stats),
        /// which an incremental sync trusts; a first sync checks every file.
        #[arg(long, conflicts_with = "skip_file_check")]
        check_every_file: bool,
        /// On a first sync, write one snapshot of the current state, not the history.
        #[arg(long)]
        from_latest: bool,
        /// The table folder was copied or moved: mirror the source's history afresh here,
        /// then set the old metadata (which names the old place) aside in
        /// `metadata.relocated-<time>/`. See docs/relocation.md.
        #[arg(long)]
        rebuild: bool,
        /// The source format: `hudi` or `delta` (detected when not given), or `parquet`
        /// (a plain, Hive-partitioned folder of Parquet files: never detected, so name it
        /// on the first sync; later commands read it from the mirror).
        #[arg(long, value_name = "FORMAT")]
        format: Option<String>,
        #[command(flatten)]
        allow: AllowArg,
        /// Print the report as JSON (the snapshots written, notes, catalog), not lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
    /// In-commit mode, the last step of a write job: mirror everything pending up to this
    /// commit; exit 0 only once the mirror holds it (its snapshot, or one it was folded
    /// into or expired with; docs/operating.md).
    #[command(
        after_help = "Examples:\n  xlake commit /data/orders --instant 20250713010536861\n  xlake commit /data/events --version 42"
    )]
    Commit {
        #[command(flatten)]
        table: TableArg,
        /// Hudi: the instant (requested time) just written.
        #[arg(long, conflicts_with = "version", required_unless_present = "version")]
        instant: Option<String>,
        /// Delta: the version just written.
        #[arg(long)]
        version: Option<u64>,
        #[command(flatten)]
        allow: AllowArg,
        /// Print the report as JSON (as `sync --json`, with the commit), not lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
    /// The long-running service: answers Hudi's write-commit callback
    /// (`hoodie.write.commit.callback.http.url`) by mirroring each commit before answering
    /// (200 mirrored, 500 with the reason), serves /healthz, /readyz and /metrics, and with
    /// --config also runs the scheduled sync and the periodic check (see docs/service.md).
    #[command(
        after_help = "Examples:\n  XLAKE_CALLBACK_KEY=... xlake serve --listen 127.0.0.1:8089 --allow /data/lake\n  (then set hoodie.write.commit.callback.http.url=http://127.0.0.1:8089/ and\n   hoodie.write.commit.callback.http.api.key to the same key in the writer)\n  xlake serve --listen 0.0.0.0:8089 --key-file /etc/xlake/key --config tables.toml --every 5m --check-every 10m"
    )]
    Serve {
        /// Address to listen on, `host:port` (`localhost:8089`, `0.0.0.0:8089`; port 0: any
        /// free port).
        #[arg(long)]
        listen: String,
        /// Serve /healthz, /readyz and /metrics on this address instead of --listen.
        #[arg(long)]
        metrics_listen: Option<String>,
        /// File whose first line is the key callbacks must send in HUDI-CALLBACK-KEY
        /// (else XLAKE_CALLBACK_KEY).
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// Accept callbacks without a key: anyone reaching the port can make xlake read and
        /// write the allowed tables.
        #[arg(long)]
        insecure_no_key: bool,
        /// Accept Hudi's public default key (`hudi_write_commit_http_callback`) as the key.
        #[arg(long)]
        allow_default_key: bool,
        /// Location prefix callbacks may name (repeatable; also `allow` in the config).
        /// Without any, only the tables of --config are served.
        #[arg(long = "allow")]
        allow: Vec<String>,
        /// Job config (as for `run`): its tables are served, synced every --every and
        /// checked every --check-every.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Sync the config's tables on this interval (`30s`, `5m`, `1h`).
        #[arg(long, requires = "config", value_name = "INTERVAL", value_parser = parse_interval)]
        every: Option<Duration>,
        /// Check every known table on this interval and export the result and lag.
        #[arg(long, value_name = "INTERVAL", value_parser = parse_interval)]
        check_every: Option<Duration>,
        /// Tables mirrored at once (default: the config's `concurrency`, else 4).
        #[arg(long)]
        concurrency: Option<usize>,
        /// Time a client has to send a request's headers.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        header_timeout: Duration,
        /// Time a client has to send a request's body.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        body_timeout: Duration,
        /// Largest request body, bytes.
        #[arg(long, default_value_t = 64 << 20)]
        max_body: usize,
        /// Most tables outside --config that callbacks may add (each gets its own series on
        /// /metrics); a callback naming a new table past that is answered 503.
        #[arg(long, default_value_t = 10_000)]
        max_tables: usize,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
    /// The scheduled job: sync every table listed in a TOML config, a few at a time.
    /// One table's failure never stops the others; each is reported.
    #[command(
        after_help = "Examples:\n  xlake run --config tables.toml --once\n  xlake run --config tables.toml --every 5m\n  xlake run --config tables.toml --once --shard $JOB_COMPLETION_INDEX/8\n\ntables.toml:\n  concurrency = 4\n  [[tables]]\n  location = \"/data/orders\"\n  max_snapshot_age = \"30d\""
    )]
    Run {
        /// Config file: `concurrency = N` and `[[tables]]` entries with `location` and
        /// optionally `mor_read_optimized`, `skip_file_check`, `single_writer`, `format_version`, `expire`
        /// (default true), `keep_snapshots`, `max_snapshot_age` (see docs/cli.md).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// One cycle; exit 1 if any table failed.
        #[arg(long, conflicts_with = "every", required_unless_present = "every")]
        once: bool,
        /// Repeat every interval (`30s`, `5m`, `1h`; at least 1s) until SIGTERM or Ctrl-C.
        #[arg(long, value_name = "INTERVAL", value_parser = parse_interval)]
        every: Option<Duration>,
        /// With --every: serve /healthz, /readyz and /metrics on this address.
        #[arg(long, requires = "every", conflicts_with = "once")]
        metrics_listen: Option<String>,
        /// With --every: also check every table (as `xlake check`), after a cycle, at most
        /// this often (`10m`); lag and results go to the output and /metrics.
        #[arg(
            long,
            value_name = "INTERVAL",
            requires = "every",
            conflicts_with = "once",
            value_parser = parse_interval
        )]
        check_every: Option<Duration>,
        /// Only the tables of shard I of N (0 <= I < N): those whose location's FNV-1a
        /// 64-bit hash is I modulo N, so N processes (a Kubernetes Indexed Job's
        /// JOB_COMPLETION_INDEX) share one config without overlap (docs/operating.md).
        #[arg(long, value_name = "I/N")]
        shard: Option<Shard>,
    },
    /// Check that every completed source commit has exactly one Iceberg snapshot, in order.
    /// Exit 0: consistent; 1: violations (missing, unknown, duplicated, out of order,
    /// differing files); 2: could not check.
    #[command(
        after_help = "Examples:\n  xlake check /data/orders\n  xlake check /data/orders --deep --all --json\n  xlake check /data/orders --allowed-lag 5    (a scheduled job between runs)"
    )]
    Check {
        #[command(flatten)]
        table: TableArg,
        /// Also compare the current snapshot's data files with the source's live files.
        #[arg(long)]
        deep: bool,
        /// With --deep: compare every retained snapshot, not only the current one.
        #[arg(long, requires = "deep")]
        all: bool,
        /// Newest commits that may be unmirrored without a violation (a scheduled job
        /// between runs); they are still reported as lag.
        #[arg(long, value_name = "N", default_value_t = 0)]
        allowed_lag: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also check that this catalog's entry points at the current version.
        #[command(flatten)]
        catalog: CatalogArgs,
        #[command(flatten)]
        view: ViewArg,
        #[command(flatten)]
        to: TargetArg,
    },
    /// The health report: side by side, the metadata each format keeps, and anything
    /// mirrored in a degraded way.
    #[command(
        after_help = "Examples:\n  xlake inspect /data/orders\n  xlake inspect /data/orders --json"
    )]
    Inspect {
        #[command(flatten)]
        table: TableArg,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        view: ViewArg,
        #[command(flatten)]
        to: TargetArg,
    },
    /// Expire the Iceberg snapshots that reference data files the source has deleted
    /// (Hudi's cleaner, Delta's vacuum), so time travel never reaches a missing file, and
    /// those beyond the limits given; always the oldest ones, never the current one, and
    /// never past a Hudi (table version 6) instant still pending, as Hudi's archival, nor
    /// between an instant that completed late and those requested after it
    /// (docs/hudi.md). With `--target delta`: the same versions, by Delta's log cleanup,
    /// up to the newest checkpoint that covers them (docs/targets.md).
    #[command(
        after_help = "Examples:\n  xlake expire /data/orders\n  xlake expire /data/orders --keep-snapshots 500 --max-snapshot-age 30d"
    )]
    Expire {
        #[command(flatten)]
        table: TableArg,
        /// Keep at most this many snapshots.
        #[arg(long, value_name = "N")]
        keep_snapshots: Option<usize>,
        /// Expire snapshots whose source commit is older than this (`12h`, `7d`).
        #[arg(long, value_name = "AGE", value_parser = parse_duration)]
        max_snapshot_age: Option<Duration>,
        /// The catalog entry to move to the version the expiry publishes.
        #[command(flatten)]
        catalog: CatalogArgs,
        #[command(flatten)]
        writer: WriterArg,
        #[command(flatten)]
        to: TargetArg,
    },
    /// Upgrade the Iceberg mirror to a newer format version now, in one new
    /// `vN.metadata.json` with the same snapshots (a sync with --format-version does the
    /// same before mirroring). Never downgrades. See docs/iceberg-v3.md.
    #[command(
        after_help = "Examples:\n  xlake upgrade /data/events --format-version 3\n  xlake upgrade /data/events --format-version 3 --catalog sqlite:///var/lib/xlake/catalog.db --catalog-table lake.events"
    )]
    Upgrade {
        #[command(flatten)]
        table: TableArg,
        /// The Iceberg format version to move to.
        #[arg(long, required = true, value_parser = clap::value_parser!(u8).range(2..=3))]
        format_version: u8,
        /// The catalog entry to move to the version the upgrade publishes.
        #[command(flatten)]
        catalog: CatalogArgs,
        #[command(flatten)]
        writer: WriterArg,
    },
    /// Delete orphan metadata files (left by lost races, crashes and expiries): files xlake
    /// wrote in `metadata/` that the current `vN.metadata.json` does not reference. Never
    /// data files, nor any file xlake does not write. With `--target delta`: the deletion
    /// vector copies and checkpoint files no version of the log names.
    #[command(
        after_help = "Examples:\n  xlake cleanup /data/orders --dry-run\n  xlake cleanup /data/orders --older-than 1d\n  xlake cleanup /data/orders --older-than 0s --no-writer-running"
    )]
    Cleanup {
        #[command(flatten)]
        table: TableArg,
        /// What to clean up: orphan metadata files, the default and only kind (the flag
        /// is accepted for scripts that pass it).
        #[arg(long)]
        orphans: bool,
        /// Only files older than this (`1d`, `36h`): younger ones may belong to a commit
        /// in progress. At least 24h, as Iceberg's own orphan cleanup asks, unless
        /// `--no-writer-running`.
        #[arg(long, value_name = "AGE", default_value = "3d", value_parser = parse_duration)]
        older_than: Duration,
        /// No sync, commit, serve, run or expire writes this table while cleanup runs:
        /// allows an `--older-than` under 24h. A shorter age racing a writer deletes the
        /// files of its commit in progress and breaks the table.
        #[arg(long)]
        no_writer_running: bool,
        /// List what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        to: TargetArg,
    },
    /// List the Iceberg snapshots of a table and the source commit each one mirrors.
    #[command(
        after_help = "Examples:\n  xlake snapshots /data/orders\n  xlake snapshots /data/orders --json"
    )]
    Snapshots {
        #[command(flatten)]
        table: TableArg,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        to: TargetArg,
    },
}

impl Command {
    /// The exit code of an error that is not a bad start: `check` keeps 1 for violations,
    /// so everything that stops it means "could not check" (2).
    pub fn failure_code(&self) -> u8 {
        match self {
            Self::Check { .. } => 2,
            _ => 1,
        }
    }

    /// Whether the command runs on the main thread alone (no worker threads). `commit`
    /// runs inside every write job and mirrors one commit: starting worker threads and
    /// handing them work cost more than they gave (it also starts at most two blocking
    /// threads for file I/O). Every other command keeps them: a
    /// backfill's HTTP connections progress on them while the main thread plans, and the
    /// service and the job run tasks side by side.
    pub fn single_threaded(&self) -> bool {
        matches!(self, Self::Commit { .. })
    }
}
