//! The scheduled job: sync every table of a config file, a few at a time; one table's
//! failure never stops the others, and every result is reported.

use futures::StreamExt;
use serde::Deserialize;

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{ConfigError, ConfigKind};
use crate::maintain::{Expired, Retention};
use crate::{noop, open_store, sync_store, SyncError, SyncOptions, SyncReport};
use xlake_catalog::CatalogTarget;
use xlake_source::SourceOptions;
use xlake_storage::TableStore;

/// `tables.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// Tables synced at once (default 4).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// The tables.
    #[serde(default)]
    pub tables: Vec<TableEntry>,
    /// `serve`: location prefixes callbacks may name, besides the listed tables.
    #[serde(default)]
    pub allow: Vec<String>,
}

fn default_concurrency() -> usize {
    4
}

/// One `[[tables]]` entry. Storage credentials come from the process environment (the
/// variables object_store reads for each scheme).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    /// Table root: a path, or a URL with the `cloud` feature.
    pub location: String,
    /// The source format (`hudi`, `delta`, `parquet`); detected when absent, and a
    /// Parquet folder is never detected.
    #[serde(default)]
    pub format: Option<String>,
    /// Mirror a merge-on-read Hudi table's base files only.
    #[serde(default)]
    pub mor_read_optimized: bool,
    /// Do not check that live data files exist.
    #[serde(default)]
    pub skip_file_check: bool,
    /// Check every added data file, also those the source proves exist.
    #[serde(default)]
    pub check_every_file: bool,
    /// Only this job writes the table: accept a store without put-if-absent.
    #[serde(default)]
    pub single_writer: bool,
    /// The Iceberg format version to write (2 or 3; default: the table's own, 2 if new).
    #[serde(default)]
    pub format_version: Option<u8>,
    /// The target format (`iceberg`, `delta`; default `iceberg`). A Delta target expires
    /// its log's older versions up to a checkpoint (docs/targets.md).
    #[serde(default)]
    pub target: Option<String>,
    /// After syncing, expire snapshots that read files the source deleted (default on).
    #[serde(default = "yes")]
    pub expire: bool,
    /// With `expire`: keep at most this many snapshots.
    #[serde(default)]
    pub keep_snapshots: Option<usize>,
    /// With `expire`: expire snapshots older than this (`12h`, `7d`).
    #[serde(default)]
    pub max_snapshot_age: Option<String>,
    /// A catalog to register the table in and keep pointing at its current version
    /// (`sqlite:///…`, `postgresql://…`, `rest+http(s)://…`); needs `catalog_table`.
    #[serde(default)]
    pub catalog: Option<String>,
    /// `namespace.table` in `catalog`.
    #[serde(default)]
    pub catalog_table: Option<String>,
    /// The catalog's own name (default `xlake`).
    #[serde(default)]
    pub catalog_name: Option<String>,
}

fn yes() -> bool {
    true
}

impl TableEntry {
    /// The catalog entry this table asks for, checked.
    pub fn catalog_target(&self) -> Result<Option<CatalogTarget>, ConfigError> {
        CatalogTarget::from_options(
            self.catalog.as_deref(),
            self.catalog_name.as_deref(),
            self.catalog_table.as_deref(),
        )
        .map_err(|e| ConfigError::caused(ConfigKind::Catalog, e.to_string(), e))
    }

    /// The retention this entry asks for, as of `now_ms`.
    pub fn retention(&self, now_ms: i64) -> Result<Retention, ConfigError> {
        let max_age_ms = self
            .max_snapshot_age
            .as_deref()
            .map(|a| parse_duration(a).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
            .transpose()?;
        Ok(Retention {
            keep_snapshots: self.keep_snapshots,
            max_age_ms,
            now_ms,
            cuts: None,
        })
    }
}

/// A duration with its unit: `30s`, `5m`, `2h`, `7d`, `1h 30m` (humantime's syntax:
/// `ms`, `s`, `m`/`min`, `h`, `d`, `w`, ...). A bare number is refused: `5` could mean
/// seconds or minutes.
pub fn parse_duration(text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        let why = match &e {
            humantime::DurationError::NumberExpected(_) if text.trim().is_empty() => {
                "empty".to_string()
            }
            humantime::DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
                "needs a unit".to_string()
            }
            other => other.to_string(),
        };
        let message =
            format!("duration {text:?}: {why}; write a number and a unit, e.g. 30s, 5m, 1h, 7d");
        ConfigError::caused(ConfigKind::Duration, message, e)
    })
}

/// The interval of `xlake run --every`: a [`parse_duration`] of at least one second
/// (shorter would poll storage in a busy loop).
pub fn parse_interval(text: &str) -> Result<Duration, ConfigError> {
    let interval = parse_duration(text)?;
    if interval < Duration::from_secs(1) {
        return Err(ConfigError::new(
            ConfigKind::Duration,
            format!("interval {text:?}: must be at least 1s (e.g. 30s, 5m, 1h)"),
        ));
    }
    Ok(interval)
}

/// One share of a job's tables (`xlake run --shard I/N`): the tables whose location
/// hashes to `index` modulo `count`. The hash is FNV-1a 64 over the UTF-8 bytes of the
/// location as xlake names it ([`TableStore::normalized_location`]: an absolute path
/// without a trailing `/`, `scheme://authority/path` for a URL), written out here so that
/// every version and machine agrees (never the standard library's seeded hasher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// I, from 0.
    pub index: u64,
    /// N, at least 1.
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = ConfigError;

    /// `I/N`, with `0 <= I < N`.
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let bad = |why: &str| {
            let message = format!("shard {text:?}: {why}; write I/N with 0 <= I < N, e.g. 0/4");
            ConfigError::new(ConfigKind::Job, message)
        };
        let (i, n) = text.split_once('/').ok_or_else(|| bad("no /"))?;
        let index = i.trim().parse().map_err(|_| bad("I is not a number"))?;
        let count = n.trim().parse().map_err(|_| bad("N is not a number"))?;
        if count == 0 || index >= count {
            return Err(bad("out of range"));
        }
        Ok(Self { index, count })
    }
}

impl Shard {
    /// The shard, of `count`, that `location` falls in.
    pub fn of(location: &str, count: u64) -> u64 {
        let name = TableStore::normalized_location(location)
            .unwrap_or_else(|_| location.trim_end_matches('/').to_string());
        fnv1a_64(name.as_bytes()) % count.max(1)
    }

    /// Whether the table at `location` is in this shard.
    pub fn contains(&self, location: &str) -> bool {
        Self::of(location, self.count) == self.index
    }
}

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl JobConfig {
    /// What the config lets a service touch: its `allow` prefixes and its tables'
    /// locations (for [`Allowed::for_service`](crate::access::Allowed::for_service)).
    pub fn served_locations(&self) -> (Vec<String>, Vec<String>) {
        let tables = self.tables.iter().map(|t| t.location.clone()).collect();
        (self.allow.clone(), tables)
    }

    /// Only the tables of `shard`.
    pub fn in_shard(mut self, shard: Shard) -> Self {
        self.tables.retain(|t| shard.contains(&t.location));
        self
    }

    /// Parse the TOML text of a config file.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text)
            .map_err(|e| ConfigError::caused(ConfigKind::Job, e.to_string(), e))?;
        config.checked().map_err(ConfigError::job)
    }

    /// The config, if every entry is valid; else why not.
    fn checked(self) -> Result<Self, String> {
        let config = self;
        if config.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
        }
        let mut seen: HashMap<String, &str> = HashMap::new();
        for t in &config.tables {
            let name = table_key(&t.location);
            if let Some(first) = seen.insert(name, &t.location) {
                return Err(format!(
                    "{first}: listed twice (as {first:?} and {:?}, one folder); each table may appear once",
                    t.location
                ));
            }
            t.retention(0).map_err(|e| format!("{}: {e}", t.location))?;
            t.catalog_target()
                .map_err(|e| format!("{}: {e}", t.location))?;
            if let Some(f) = &t.format {
                if crate::sources::kind(f).is_none() {
                    let known: Vec<&str> = crate::sources::KINDS.iter().map(|k| k.name).collect();
                    return Err(format!(
                        "{}: unknown format {f:?} (known: {})",
                        t.location,
                        known.join(", ")
                    ));
                }
            }
            let target = crate::targets::kind(t.target.as_deref())
                .map_err(|e| format!("{}: {e}", t.location))?;
            if let Some(n) = t.format_version {
                if let Some(e) = (target.version_problem)(n) {
                    return Err(format!("{}: {e}", t.location));
                }
            }
            if !crate::targets::is_default(target) && t.catalog.is_some() {
                return Err(format!(
                    "{}: a catalog entry is kept for the Iceberg target only",
                    t.location
                ));
            }
            if !t.expire && (t.keep_snapshots.is_some() || t.max_snapshot_age.is_some()) {
                return Err(format!(
                    "{}: keep_snapshots and max_snapshot_age need expire = true",
                    t.location
                ));
            }
        }
        Ok(config)
    }
}

/// What a job file's table is known by, so that one table is listed once: its normalised
/// location and, for a local folder that exists, the folder's identity on disk (`t/../t`,
/// or a symbolic link to `t`, is `t`: two entries for one table would sync it twice,
/// possibly as two formats). An unusable location fails with that table, not the whole
/// job: compared as written then.
fn table_key(location: &str) -> String {
    let name = TableStore::normalized_location(location)
        .unwrap_or_else(|_| location.trim_end_matches('/').to_string());
    let path = std::path::Path::new(&name);
    if !path.is_absolute() {
        return name;
    }
    folder_identity(path).unwrap_or(name)
}

/// The device and inode of what `path` leads to: one `stat`, where its canonical path
/// costs a `readlink` for every component (issue 44: a job of 1,000 tables made 4,000).
#[cfg(unix)]
fn folder_identity(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}", meta.dev(), meta.ino()))
}

/// Its canonical path, where there are no inodes.
#[cfg(not(unix))]
fn folder_identity(path: &std::path::Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    Some(real.to_string_lossy().into_owned())
}

/// The outcome of one table in one cycle.
#[derive(Debug)]
pub struct TableResult {
    /// The table.
    pub location: String,
    /// What its sync did, or why it failed.
    pub outcome: Result<SyncReport, SyncError>,
    /// What the expiry after it did, if the sync succeeded and the entry asks for one.
    pub expired: Option<Expired>,
    /// How long the sync and expiry took.
    pub took: Duration,
}

/// Sync every table once, `config.concurrency` at a time; `on_result` is called as each
/// table finishes. Returns every result, in completion order.
pub async fn run_once(
    config: &JobConfig,
    mut on_result: impl FnMut(&TableResult),
) -> Vec<TableResult> {
    let mut results = Vec::with_capacity(config.tables.len());
    let mut running = futures::stream::iter(config.tables.iter().cloned())
        .map(sync_entry)
        .buffer_unordered(config.concurrency);
    while let Some(result) = running.next().await {
        if let Err(e) = &result.outcome {
            tracing::error!(table = %result.location, error = %e, "sync failed");
        }
        on_result(&result);
        results.push(result);
    }
    results
}

/// The sync options an entry asks for.
pub fn entry_options(entry: &TableEntry) -> SyncOptions {
    SyncOptions {
        source: SourceOptions {
            mor_read_optimized: entry.mor_read_optimized,
            ..Default::default()
        },
        format: entry.format.clone(),
        skip_file_check: entry.skip_file_check,
        check_every_file: entry.check_every_file,
        single_writer: entry.single_writer,
        // `parse` has validated the catalog options.
        catalog: entry.catalog_target().ok().flatten(),
        format_version: entry.format_version,
        target: entry.target.clone(),
        ..Default::default()
    }
}

/// Sync one entry, then expire its snapshots if it asks for that. A table whose source
/// and target have not moved since a sync left nothing pending is not synced again (see
/// `noop`); its expiry still runs unless it could remove nothing.
pub async fn sync_entry(entry: TableEntry) -> TableResult {
    let started = std::time::Instant::now();
    let options = entry_options(&entry);
    let store = match open_store(&entry.location, &options) {
        Ok(store) => store,
        Err(e) => {
            return TableResult {
                location: entry.location,
                outcome: Err(e),
                expired: None,
                took: started.elapsed(),
            }
        }
    };
    let (mut outcome, found) = match noop::shortcut(&store, &options).await {
        noop::Shortcut::Proven(report) => (Ok(*report), None),
        noop::Shortcut::NotProven(found) => {
            let synced = sync_store(store.clone(), &options, |_| {}).await;
            (synced, Some(found))
        }
    };
    let mut expired = None;
    if entry.expire && !nothing_to_expire(&outcome, &options) {
        match expire(&entry, &options).await {
            Ok(e) => expired = Some(e),
            Err(e) => outcome = Err(e),
        }
    }
    // What a sync on the normal path settled on is kept for the next pass, unless the
    // expiry has published a newer version since.
    let settled = outcome.as_ref().ok().and_then(|r| r.settled.as_ref());
    if let (Some(settled), Some(found)) = (settled, found) {
        if expired.as_ref().is_none_or(|e: &Expired| e.version == 0) {
            noop::remember(&store, &options, settled, found.as_ref()).await;
        }
    }
    TableResult {
        location: entry.location,
        outcome,
        expired,
        took: started.elapsed(),
    }
}

/// Whether an expiry after `outcome` would find nothing to do, so that it need not read
/// the table again: the sync failed, or it wrote nothing on a table retaining at most one
/// snapshot (an expiry never removes the current snapshot). Not with a catalog entry,
/// which an expiry also points at the current version.
fn nothing_to_expire(outcome: &Result<SyncReport, SyncError>, options: &SyncOptions) -> bool {
    match outcome {
        Err(_) => true,
        Ok(report) => {
            options.catalog.is_none() && report.written.is_empty() && report.snapshots_found <= 1
        }
    }
}

/// One check of every table of the config, in order (the periodic check of `xlake run
/// --every --check-every`); `each` is given each table's report, or why it could not be
/// checked, as it comes (as [`run_once`] gives each sync's result).
pub async fn check_tables(
    config: &JobConfig,
    mut each: impl FnMut(&str, Result<&crate::CheckReport, &SyncError>),
) {
    for entry in &config.tables {
        let report = crate::check(&entry.location, &entry_options(entry), false).await;
        each(&entry.location, report.as_ref());
    }
}

/// The expiry of one entry, now.
async fn expire(entry: &TableEntry, options: &SyncOptions) -> Result<Expired, SyncError> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    // `parse` has validated the entry.
    let retention = entry.retention(now_ms).unwrap_or_default();
    let store = open_store(&entry.location, options)?;
    let expiry = crate::maintain::expire(
        &store,
        &retention,
        options.catalog.as_ref(),
        entry.target.as_deref(),
    )
    .await?;
    Ok(expiry.expired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tables_and_refuses_typos() {
        let config = JobConfig::parse(
            "concurrency = 2\n[[tables]]\nlocation = \"/data/a\"\n[[tables]]\nlocation = \"s3://b/t\"\nmor_read_optimized = true\n",
        )
        .unwrap();
        assert_eq!(config.concurrency, 2);
        assert!(config.tables[1].mor_read_optimized);
        assert!(JobConfig::parse("[[tables]]\nlocaton = \"/x\"\n").is_err());
        assert!(JobConfig::parse("concurrency = 0\n").is_err());
        assert_eq!(JobConfig::parse("").unwrap().concurrency, 4);
        assert!(config.tables[0].expire);
    }

    #[test]
    fn a_target_is_chosen_per_table_and_checked_when_parsed() {
        let config =
            JobConfig::parse("[[tables]]\nlocation = \"/a\"\ntarget = \"delta\"\n").unwrap();
        assert_eq!(
            entry_options(&config.tables[0]).target.as_deref(),
            Some("delta")
        );
        let refused = |toml: &str| JobConfig::parse(toml).unwrap_err().to_string();
        assert!(
            refused("[[tables]]\nlocation = \"/a\"\ntarget = \"hive\"\n")
                .contains("unknown target \"hive\"")
        );
        assert!(
            refused("[[tables]]\nlocation = \"/a\"\ntarget = \"delta\"\nformat_version = 3\n")
                .contains("Iceberg format version")
        );
        assert!(refused(
            "[[tables]]\nlocation = \"/a\"\ntarget = \"delta\"\ncatalog = \"sqlite:///x.db\"\ncatalog_table = \"a.b\"\n"
        )
        .contains("Iceberg target only"));
    }

    #[test]
    fn retention_options_are_checked_when_parsed() {
        let config = JobConfig::parse(
            "[[tables]]\nlocation = \"/a\"\nkeep_snapshots = 10\nmax_snapshot_age = \"7d\"\n",
        )
        .unwrap();
        let r = config.tables[0].retention(1_000_000_000).unwrap();
        assert_eq!(r.keep_snapshots, Some(10));
        assert_eq!(r.max_age_ms, Some(7 * 86_400_000));
        assert!(
            JobConfig::parse("[[tables]]\nlocation = \"/a\"\nmax_snapshot_age = \"7x\"\n").is_err()
        );
        assert!(JobConfig::parse(
            "[[tables]]\nlocation = \"/a\"\nexpire = false\nkeep_snapshots = 3\n"
        )
        .is_err());
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        let bare = parse_duration("5").unwrap_err();
        assert!(bare.to_string().contains("needs a unit"), "{bare}");
        assert_eq!(bare.kind, ConfigKind::Duration);
        assert!(
            std::error::Error::source(&bare).is_some(),
            "the cause is kept"
        );
        assert!(
            JobConfig::parse("[[tables]]\nlocation = \"/a\"\nmax_snapshot_age = \"7\"\n").is_err()
        );
    }

    #[test]
    fn shards_hash_the_normalised_location_with_fnv1a() {
        // Published FNV-1a 64 test vectors: the hash never changes between versions.
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(Shard::of("/data/t/", 7), Shard::of("/data/t", 7));
        assert_eq!(Shard::of("s3://b/t", 5), fnv1a_64(b"s3://b/t") % 5);
        assert_eq!(
            "2/8".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 8 }
        );
        for bad in ["8/8", "0/0", "1", "a/2", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_expiry_is_skipped_only_when_it_could_take_nothing() {
        let none = SyncOptions::default();
        let report = |found| {
            Ok(SyncReport {
                snapshots_found: found,
                ..Default::default()
            })
        };
        assert!(nothing_to_expire(&report(1), &none));
        assert!(nothing_to_expire(&report(0), &none));
        // Older snapshots may read files a vacuum or cleaner deleted since.
        assert!(!nothing_to_expire(&report(2), &none));
        let catalog = SyncOptions {
            catalog: xlake_catalog::CatalogTarget::from_options(
                Some("sqlite:///c.db"),
                None,
                Some("ns.t"),
            )
            .unwrap(),
            ..Default::default()
        };
        assert!(!nothing_to_expire(&report(1), &catalog));
    }

    #[test]
    fn intervals_are_at_least_a_second() {
        assert_eq!(parse_interval("5s").unwrap(), Duration::from_secs(5));
        assert!(parse_interval("0s")
            .unwrap_err()
            .to_string()
            .contains("at least 1s"));
        assert!(parse_interval("500ms").is_err());
        assert!(parse_interval("5")
            .unwrap_err()
            .to_string()
            .contains("needs a unit"));
    }

    #[test]
    fn a_table_listed_twice_is_refused_however_spelled() {
        let cwd = std::env::current_dir().unwrap();
        let absolute = cwd.join("t");
        let text = format!(
            "[[tables]]\nlocation = \"t/\"\n[[tables]]\nlocation = {:?}\n",
            absolute.to_str().unwrap()
        );
        let err = JobConfig::parse(&text).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
        assert!(JobConfig::parse(
            "[[tables]]\nlocation = \"s3://b/t\"\n[[tables]]\nlocation = \"s3://b/t/\"\n"
        )
        .is_err());
        assert!(JobConfig::parse(
            "[[tables]]\nlocation = \"s3://b/t\"\n[[tables]]\nlocation = \"s3://b/u\"\n"
        )
        .is_ok());
    }

    #[test]
    fn catalog_options_are_checked_when_parsed() {
        let config = JobConfig::parse(
            "[[tables]]\nlocation = \"/a\"\ncatalog = \"sqlite:///c.db\"\ncatalog_table = \"ns.a\"\ncatalog_name = \"prod\"\n",
        )
        .unwrap();
        let target = config.tables[0].catalog_target().unwrap().unwrap();
        assert_eq!(
            (target.name.as_str(), target.table.as_str()),
            ("prod", "ns.a")
        );
        for bad in [
            "catalog = \"sqlite:///c.db\"\n",
            "catalog_table = \"ns.a\"\n",
            "catalog = \"sqlite:///c.db\"\ncatalog_table = \"a\"\n",
            "catalog = \"oracle://h\"\ncatalog_table = \"ns.a\"\n",
        ] {
            let e = JobConfig::parse(&format!("[[tables]]\nlocation = \"/a\"\n{bad}")).unwrap_err();
            assert!(e.to_string().starts_with("/a: "), "{e}");
        }
    }
}
