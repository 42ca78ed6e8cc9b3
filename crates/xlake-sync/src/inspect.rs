//! The health report: side by side, the metadata each format keeps for one table, and
//! anything mirrored in a degraded way.

use std::collections::BTreeMap;

use serde::Serialize;
use xlake_storage::TableStore;
use xlake_target::Read;
pub use xlake_target::{Files, TargetHealth};

use crate::check::{broken_promise, missing_commits};
use crate::{sources, targets, InTable, SyncError, SyncOptions};

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InspectReport {
    /// Table location.
    pub table: String,
    /// The source format (`HUDI`, `DELTA`).
    pub format: String,
    /// The source side in one line, for people.
    #[serde(skip)]
    pub source_line: String,
    /// The source side for machines, under the format's lower-case name (`"delta": {...}`).
    #[serde(flatten)]
    pub source: BTreeMap<String, serde_json::Value>,
    /// The target's side (under `iceberg`, the one target's name, in JSON).
    pub iceberg: TargetHealth,
    /// What is mirrored in a degraded way (read-optimized view, unpartitioned fallback, and
    /// what the current snapshot's summary lists under `xlake.degraded`).
    pub degraded: Vec<String>,
    /// The source promises a snapshot per commit written in its commit path (Hudi's
    /// `hoodie.table.format`), but completed commits have none (as `check` reports it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_promise: Option<String>,
}

/// Inspect the table at `location`.
pub async fn inspect(location: &str, options: &SyncOptions) -> Result<InspectReport, SyncError> {
    let store = TableStore::open(location)?;
    let mut target = targets::open_chosen(&store, options)?;
    // A copied or moved table is reported, not refused.
    target.load(Read::AsFound).await?;
    let options = sources::with_recorded_choices(options, target.as_ref());
    let source = sources::open(&store, &options).await?;
    let health = source.health().await.in_table(&store)?;
    let format = source.format().as_str();
    let mut report = InspectReport {
        table: store.location().to_string(),
        format: format.to_string(),
        source_line: health.line,
        source: BTreeMap::from([(format.to_lowercase(), health.json)]),
        degraded: health.degraded,
        ..Default::default()
    };
    if source.commit_path_mirror().is_some() {
        let state = target.mirror_state();
        let listing = source.listing(&state).in_table(&store)?;
        let mirrored = state.commits.iter().map(String::as_str).collect();
        let order = |a: &str, b: &str| source.order(a, b);
        let (_, missing) = missing_commits(&listing, &mirrored, state.first.as_deref(), order);
        report.broken_promise = broken_promise(source.as_ref(), &missing);
    }
    report.iceberg = target.health().await?;
    for note in std::mem::take(&mut report.iceberg.degraded) {
        if !report.degraded.contains(&note) {
            report.degraded.push(note);
        }
    }
    Ok(report)
}
