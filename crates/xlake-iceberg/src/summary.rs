//! Snapshot summaries: the standard counters and `XTABLE_METADATA`.

use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat};
use serde::{Deserialize, Serialize};
use xlake_model::SourceCommit;

/// Summary key holding the source commit a snapshot mirrors (XTable's key).
pub const XTABLE_METADATA: &str = "XTABLE_METADATA";
/// Summary key holding the source commit's own time when the snapshot's had to be clamped.
pub const SOURCE_COMMIT_TIME: &str = "xlake.source-commit-time-ms";

/// The JSON under [`XTABLE_METADATA`], field for field as XTable's `TableSyncMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncMetadata {
    /// The source commit's time as an ISO-8601 instant (Java `Instant.toString`).
    pub last_instant_synced: String,
    /// Instants XTable would revisit next time; xlake syncs in order, so always empty.
    #[serde(default)]
    pub instants_to_consider_for_next_sync: Vec<String>,
    /// Format of this JSON; 0.
    #[serde(default)]
    pub version: i32,
    /// `HUDI` or `DELTA`.
    #[serde(default)]
    pub source_table_format: Option<String>,
    /// The source commit's identifier (Hudi requested time, Delta version).
    #[serde(default)]
    pub source_identifier: Option<String>,
    /// `<id>.<action>` of the source commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_table_operation_identifier: Option<String>,
}

impl SyncMetadata {
    /// The metadata recording `commit`.
    pub fn for_commit(commit: &SourceCommit) -> Self {
        Self {
            last_instant_synced: iso_instant(commit.commit_time_ms),
            instants_to_consider_for_next_sync: Vec::new(),
            version: 0,
            source_table_format: Some(commit.format.as_str().to_string()),
            source_identifier: Some(commit.id.clone()),
            latest_table_operation_identifier: Some(commit.operation_identifier()),
        }
    }

    /// Parse the summary value; `None` if absent or not this JSON.
    pub fn from_summary(summary: &HashMap<String, String>) -> Option<Self> {
        summary
            .get(XTABLE_METADATA)
            .and_then(|v| serde_json::from_str(v).ok())
    }
}

/// Milliseconds since the epoch as Java's `Instant.toString` prints them.
pub fn iso_instant(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Counts of one kind of change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// Number of files.
    pub files: u64,
    /// Rows in them.
    pub records: u64,
    /// Bytes in them.
    pub bytes: u64,
}

impl FileCounts {
    /// Count one more file.
    pub fn add(&mut self, records: u64, bytes: u64) {
        self.files += 1;
        self.records += records;
        self.bytes += bytes;
    }
}

fn total(parent: Option<&HashMap<String, String>>, key: &str) -> u64 {
    parent
        .and_then(|p| p.get(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The standard summary properties of a snapshot that adds and removes these files, on
/// top of its parent's totals.
pub fn standard_summary(
    parent: Option<&HashMap<String, String>>,
    added: FileCounts,
    removed: FileCounts,
    changed_partitions: usize,
) -> HashMap<String, String> {
    let after = |key: &str, plus: u64, minus: u64| {
        (total(parent, key) + plus)
            .saturating_sub(minus)
            .to_string()
    };
    HashMap::from([
        ("added-data-files".into(), added.files.to_string()),
        ("deleted-data-files".into(), removed.files.to_string()),
        ("added-records".into(), added.records.to_string()),
        ("deleted-records".into(), removed.records.to_string()),
        ("added-files-size".into(), added.bytes.to_string()),
        ("removed-files-size".into(), removed.bytes.to_string()),
        (
            "changed-partition-count".into(),
            changed_partitions.to_string(),
        ),
        (
            "total-data-files".into(),
            after("total-data-files", added.files, removed.files),
        ),
        (
            "total-records".into(),
            after("total-records", added.records, removed.records),
        ),
        (
            "total-files-size".into(),
            after("total-files-size", added.bytes, removed.bytes),
        ),
        ("total-delete-files".into(), "0".into()),
        ("total-position-deletes".into(), "0".into()),
        ("total-equality-deletes".into(), "0".into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_model::SourceFormat;

    #[test]
    fn totals_carry_over_from_the_parent() {
        let first = standard_summary(
            None,
            FileCounts {
                files: 3,
                records: 30,
                bytes: 300,
            },
            FileCounts::default(),
            2,
        );
        assert_eq!(first["total-data-files"], "3");
        assert_eq!(first["total-records"], "30");
        assert_eq!(first["changed-partition-count"], "2");
        let second = standard_summary(
            Some(&first),
            FileCounts {
                files: 1,
                records: 5,
                bytes: 50,
            },
            FileCounts {
                files: 2,
                records: 20,
                bytes: 200,
            },
            1,
        );
        assert_eq!(second["total-data-files"], "2");
        assert_eq!(second["total-records"], "15");
        assert_eq!(second["total-files-size"], "150");
        assert_eq!(second["deleted-records"], "20");
        assert_eq!(second["added-files-size"], "50");
    }

    #[test]
    fn xtable_metadata_matches_xtable_json() {
        let commit = SourceCommit {
            format: SourceFormat::Hudi,
            id: "20200704101530000".into(),
            action: "commit".into(),
            requested_ms: None,
            commit_time_ms: 1_593_857_730_000,
        };
        let json = serde_json::to_string(&SyncMetadata::for_commit(&commit)).unwrap();
        assert_eq!(
            json,
            r#"{"lastInstantSynced":"2020-07-04T10:15:30Z","instantsToConsiderForNextSync":[],"version":0,"sourceTableFormat":"HUDI","sourceIdentifier":"20200704101530000","latestTableOperationIdentifier":"20200704101530000.commit"}"#
        );
        assert_eq!(iso_instant(1_593_857_730_123), "2020-07-04T10:15:30.123Z");
        let summary = HashMap::from([(XTABLE_METADATA.to_string(), json)]);
        assert_eq!(
            SyncMetadata::from_summary(&summary)
                .unwrap()
                .source_identifier
                .as_deref(),
            Some("20200704101530000")
        );
    }
}
