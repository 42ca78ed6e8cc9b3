//! The scheduled job: sync every table of a config file, a few at a time; one table's
//! failure never stops the others, and every result is reported.

use futures::StreamExt;
use serde::Deserialize;

use std::time::Duration;

use crate::{open_store, sync, SyncError, SyncOptions, SyncReport};
use xlake_iceberg::{Expired, IcebergTable, Retention};
use xlake_source::SourceOptions;

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
    /// Only this job writes the table: accept a store without put-if-absent.
    #[serde(default)]
    pub single_writer: bool,
    /// After syncing, expire snapshots that read files the source deleted (default on).
    #[serde(default = "yes")]
    pub expire: bool,
    /// With `expire`: keep at most this many snapshots.
    #[serde(default)]
    pub keep_snapshots: Option<usize>,
    /// With `expire`: expire snapshots older than this (`12h`, `7d`).
    #[serde(default)]
    pub max_snapshot_age: Option<String>,
}

fn yes() -> bool {
    true
}

impl TableEntry {
    /// The retention this entry asks for, as of `now_ms`.
    pub fn retention(&self, now_ms: i64) -> Result<Retention, String> {
        let max_age_ms = self
            .max_snapshot_age
            .as_deref()
            .map(|a| parse_duration(a).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
            .transpose()?;
        Ok(Retention {
            keep_snapshots: self.keep_snapshots,
            max_age_ms,
            now_ms,
        })
    }
}

/// `30s`, `5m`, `2h`, `7d` as a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("duration {text:?}: expected e.g. 30s, 5m, 1h, 7d"))?;
    let unit_seconds = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("duration {text:?}: unit must be s, m, h or d")),
    };
    Ok(Duration::from_secs(n.saturating_mul(unit_seconds)))
}

impl JobConfig {
    /// Parse the TOML text of a config file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        if config.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
        }
        for t in &config.tables {
            t.retention(0).map_err(|e| format!("{}: {e}", t.location))?;
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

/// The outcome of one table in one cycle.
#[derive(Debug)]
pub struct TableResult {
    /// The table.
    pub location: String,
    /// What its sync did, or why it failed.
    pub outcome: Result<SyncReport, SyncError>,
    /// What the expiry after it did, if the sync succeeded and the entry asks for one.
    pub expired: Option<Expired>,
}

/// Sync every table once, `config.concurrency` at a time; `on_result` is called as each
/// table finishes. Returns every result, in completion order.
pub async fn run_once(
    config: &JobConfig,
    mut on_result: impl FnMut(&TableResult),
) -> Vec<TableResult> {
    let mut results = Vec::with_capacity(config.tables.len());
    let mut running = futures::stream::iter(config.tables.iter().cloned())
        .map(|entry| async move {
            let options = SyncOptions {
                source: SourceOptions {
                    mor_read_optimized: entry.mor_read_optimized,
                },
                skip_file_check: entry.skip_file_check,
                single_writer: entry.single_writer,
                format: entry.format.clone(),
                ..Default::default()
            };
            let mut outcome = sync(&entry.location, &options, |_| {}).await;
            let mut expired = None;
            if outcome.is_ok() && entry.expire {
                match expire(&entry, &options).await {
                    Ok(e) => expired = Some(e),
                    Err(e) => outcome = Err(e),
                }
            }
            TableResult {
                location: entry.location,
                outcome,
                expired,
            }
        })
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

/// The expiry of one entry, now.
async fn expire(entry: &TableEntry, options: &SyncOptions) -> Result<Expired, SyncError> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    // `parse` has validated the entry.
    let retention = entry.retention(now_ms).unwrap_or_default();
    let store = open_store(&entry.location, options)?;
    Ok(IcebergTable::new(store).expire(&retention).await?)
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
    fn retention_options_are_checked_when_parsed() {
        let config = JobConfig::parse(
            "[[tables]]\nlocation = \"/a\"\nkeep_snapshots = 10\nmax_snapshot_age = \"7d\"\n",
        )
        .unwrap();
        let r = config.tables[0].retention(1_000_000_000).unwrap();
        assert_eq!(r.keep_snapshots, Some(10));
        assert_eq!(r.max_age_ms, Some(7 * 86_400_000));
        assert!(
            JobConfig::parse("[[tables]]\nlocation = \"/a\"\nmax_snapshot_age = \"7w\"\n").is_err()
        );
        assert!(JobConfig::parse(
            "[[tables]]\nlocation = \"/a\"\nexpire = false\nkeep_snapshots = 3\n"
        )
        .is_err());
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("5 m").is_err());
    }
}
