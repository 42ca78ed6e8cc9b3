//! The scheduled job: sync every table of a config file, a few at a time; one table's
//! failure never stops the others, and every result is reported.

use futures::StreamExt;
use serde::Deserialize;

use crate::{sync, SyncError, SyncOptions, SyncReport};
use xlake_hudi::HudiOptions;

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
    /// Mirror a merge-on-read Hudi table's base files only.
    #[serde(default)]
    pub mor_read_optimized: bool,
    /// Do not check that live data files exist.
    #[serde(default)]
    pub skip_file_check: bool,
}

impl JobConfig {
    /// Parse the TOML text of a config file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        if config.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
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
                hudi: HudiOptions {
                    mor_read_optimized: entry.mor_read_optimized,
                },
                skip_file_check: entry.skip_file_check,
                ..Default::default()
            };
            let outcome = sync(&entry.location, &options, |_| {}).await;
            TableResult {
                location: entry.location,
                outcome,
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
    }
}
