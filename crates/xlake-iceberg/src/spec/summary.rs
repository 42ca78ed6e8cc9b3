//! Snapshot summaries: the standard counters and `XTABLE_METADATA`.

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat};
use serde::{Deserialize, Serialize};
use xlake_model::SourceCommit;

/// Summary key holding the source commit a snapshot mirrors (XTable's key).
pub const XTABLE_METADATA: &str = "XTABLE_METADATA";
/// Summary key holding the source commit's own time when the snapshot's had to be clamped.
pub const SOURCE_COMMIT_TIME: &str = "xlake.source-commit-time-ms";
/// Summary key listing, as a JSON array of `"<column>: <what>"` strings, what a snapshot
/// mirrors its source commit without: notes of the source
/// ([`ChangeSet::degraded`](xlake_model::ChangeSet::degraded)) and layouts found in the
/// files ([`fidelity`](crate::fidelity)). Sticky: each snapshot carries its parent's
/// entries too. Absent when the snapshot is exact.
pub const DEGRADED: &str = "xlake.degraded";

/// The value of [`DEGRADED`] holding `entries`; `None` when there are none.
pub fn degraded_value(entries: &std::collections::BTreeSet<String>) -> Option<String> {
    (!entries.is_empty())
        .then(|| serde_json::to_string(&entries.iter().collect::<Vec<_>>()).ok())
        .flatten()
}

/// The notes a snapshot summary lists under [`DEGRADED`] (a value that is not a JSON
/// array of strings is taken as one note).
pub fn degraded_notes(summary: &HashMap<String, String>) -> Vec<String> {
    match summary.get(DEGRADED) {
        None => Vec::new(),
        Some(v) => serde_json::from_str(v).unwrap_or_else(|_| vec![v.clone()]),
    }
}

/// The JSON under [`XTABLE_METADATA`], field for field as XTable's `TableSyncMetadata`
/// (read through [`Record`], which says which records are taken).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncMetadata {
    /// The source commit's time as an ISO-8601 instant (Java `Instant.toString`).
    pub last_instant_synced: String,
    /// Instants XTable would revisit next time; xlake syncs in order, so always empty.
    pub instants_to_consider_for_next_sync: Vec<String>,
    /// Format of this JSON; 0.
    pub version: i32,
    /// `HUDI` or `DELTA`.
    pub source_table_format: Option<String>,
    /// The source commit's identifier (Hudi requested time, Delta version).
    pub source_identifier: Option<String>,
    /// `<id>.<action>` of the source commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_table_operation_identifier: Option<String>,
}

/// A [`SyncMetadata`] as read, its strings borrowed where they have no escapes: the one
/// definition of which records are taken (types, defaults), for the whole record and for
/// the identifier alone.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record<'a> {
    #[serde(borrow)]
    last_instant_synced: Cow<'a, str>,
    #[serde(borrow, default)]
    instants_to_consider_for_next_sync: Vec<Cow<'a, str>>,
    #[serde(default)]
    version: i32,
    #[serde(borrow, default)]
    source_table_format: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    source_identifier: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    latest_table_operation_identifier: Option<Cow<'a, str>>,
}

impl<'a> Record<'a> {
    /// The record in `summary`; `None` if absent or not this JSON.
    fn in_summary(summary: &'a HashMap<String, String>) -> Option<Self> {
        Self::of(summary.get(XTABLE_METADATA)?)
    }

    /// The record `text`; `None` if not this JSON.
    fn of(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
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
        let r = Record::in_summary(summary)?;
        let owned = |s: Option<Cow<str>>| s.map(Cow::into_owned);
        Some(Self {
            last_instant_synced: r.last_instant_synced.into_owned(),
            instants_to_consider_for_next_sync: (r.instants_to_consider_for_next_sync.into_iter())
                .map(Cow::into_owned)
                .collect(),
            version: r.version,
            source_table_format: owned(r.source_table_format),
            source_identifier: owned(r.source_identifier),
            latest_table_operation_identifier: owned(r.latest_table_operation_identifier),
        })
    }

    /// Of what [`Self::from_summary`] reads, only its `source_identifier`: what a sync
    /// reads of every snapshot (`Some(None)`: a record without one). The same records are
    /// taken (one [`Record`]), but nothing else is copied.
    pub fn identifier_in(summary: &HashMap<String, String>) -> Option<Option<String>> {
        Self::identifier_of(summary.get(XTABLE_METADATA)?)
    }

    /// [`Self::identifier_in`] of the summary whose `XTABLE_METADATA` is `record`.
    pub(crate) fn identifier_of(record: &str) -> Option<Option<String>> {
        Some(Record::of(record)?.source_identifier.map(Cow::into_owned))
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

/// What a snapshot adds and removes: data files, and position-delete files (whose records
/// are deleted positions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Data files added.
    pub added: FileCounts,
    /// Data files removed.
    pub removed: FileCounts,
    /// Position-delete files added.
    pub added_deletes: FileCounts,
    /// Position-delete files removed.
    pub removed_deletes: FileCounts,
}

impl Counts {
    /// Count one file: a delete file or a data file, added or removed.
    pub fn count(&mut self, delete_file: bool, added: bool, records: u64, bytes: u64) {
        let which = match (delete_file, added) {
            (false, true) => &mut self.added,
            (false, false) => &mut self.removed,
            (true, true) => &mut self.added_deletes,
            (true, false) => &mut self.removed_deletes,
        };
        which.add(records, bytes);
    }
}

fn total(parent: Option<&HashMap<String, String>>, key: &str) -> u64 {
    parent
        .and_then(|p| p.get(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The standard summary properties of a snapshot with these changes, on top of its
/// parent's totals. As in Iceberg's Java `SnapshotSummary`, a counter of this snapshot's
/// changes is written only when it is not zero; totals and the partition count always are.
/// (Every `vN` holds every snapshot's summary, so the zeros cost every reader of the table.)
pub fn standard_summary(
    parent: Option<&HashMap<String, String>>,
    c: &Counts,
    changed_partitions: usize,
) -> HashMap<String, String> {
    let after = |key: &str, plus: u64, minus: u64| {
        (total(parent, key) + plus)
            .saturating_sub(minus)
            .to_string()
    };
    let (added, removed) = (c.added, c.removed);
    let (added_deletes, removed_deletes) = (c.added_deletes, c.removed_deletes);
    let changes = [
        ("added-data-files", added.files),
        ("deleted-data-files", removed.files),
        ("added-records", added.records),
        ("deleted-records", removed.records),
        ("added-files-size", added.bytes + added_deletes.bytes),
        ("removed-files-size", removed.bytes + removed_deletes.bytes),
        ("added-delete-files", added_deletes.files),
        ("added-position-delete-files", added_deletes.files),
        ("added-position-deletes", added_deletes.records),
        ("removed-delete-files", removed_deletes.files),
        ("removed-position-delete-files", removed_deletes.files),
        ("removed-position-deletes", removed_deletes.records),
    ]
    .into_iter()
    .filter(|(_, n)| *n != 0)
    .map(|(k, n)| (k.to_string(), n.to_string()));
    let totals: [(String, String); 7] = [
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
            after(
                "total-files-size",
                added.bytes + added_deletes.bytes,
                removed.bytes + removed_deletes.bytes,
            ),
        ),
        (
            "total-delete-files".into(),
            after(
                "total-delete-files",
                added_deletes.files,
                removed_deletes.files,
            ),
        ),
        (
            "total-position-deletes".into(),
            after(
                "total-position-deletes",
                added_deletes.records,
                removed_deletes.records,
            ),
        ),
        ("total-equality-deletes".into(), "0".into()),
    ];
    changes.chain(totals).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_model::SourceFormat;

    fn files(files: u64, records: u64, bytes: u64) -> FileCounts {
        FileCounts {
            files,
            records,
            bytes,
        }
    }

    /// The identifier alone is read as the whole record reads it, for records written by
    /// xlake, by XTable without one, with escapes, with fields of the wrong types or twice,
    /// and for what is not a record.
    #[test]
    fn the_identifier_alone_is_what_the_whole_record_says() {
        let some = |id: &str| Some(Some(id.to_string()));
        let records = [
            (
                r#"{"lastInstantSynced":"2024-01-01T00:00:00Z","sourceIdentifier":"20240101","version":0}"#,
                some("20240101"),
            ),
            (
                r#"{"lastInstantSynced":"2024-01-01T00:00:00Z","instantsToConsiderForNextSync":[]}"#,
                Some(None),
            ),
            (
                r#"{"lastInstantSynced":"x","sourceIdentifier":"a\"b\u00e9"}"#,
                some("a\"b\u{e9}"),
            ),
            (r#"{"sourceIdentifier":"7"}"#, None),
            (r#"{"lastInstantSynced":1,"sourceIdentifier":"7"}"#, None),
            (
                r#"{"lastInstantSynced":"x","instantsToConsiderForNextSync":null,"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","instantsToConsiderForNextSync":["a",2],"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","version":1.5,"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","version":4294967296,"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","sourceTableFormat":3,"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","latestTableOperationIdentifier":[],"sourceIdentifier":"7"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","sourceIdentifier":"7","sourceIdentifier":"8"}"#,
                None,
            ),
            (
                r#"{"lastInstantSynced":"x","sourceIdentifier":null}"#,
                Some(None),
            ),
            ("not json", None),
        ];
        for (record, expected) in records {
            let summary = HashMap::from([(XTABLE_METADATA.to_string(), record.to_string())]);
            let whole = SyncMetadata::from_summary(&summary).map(|m| m.source_identifier);
            assert_eq!(whole, expected, "{record}");
            assert_eq!(SyncMetadata::identifier_in(&summary), whole, "{record}");
        }
        assert_eq!(SyncMetadata::identifier_in(&HashMap::new()), None);
    }

    #[test]
    fn totals_carry_over_from_the_parent() {
        let first = Counts {
            added: files(3, 30, 300),
            ..Default::default()
        };
        let first = standard_summary(None, &first, 2);
        assert_eq!(first["total-data-files"], "3");
        assert_eq!(first["total-records"], "30");
        assert_eq!(first["changed-partition-count"], "2");
        // Zero counters of this snapshot's changes are left out, as Java does; totals stay.
        assert!(!first.contains_key("deleted-data-files"));
        assert!(!first.contains_key("added-delete-files"));
        assert_eq!(first["total-delete-files"], "0");
        let second = Counts {
            added: files(1, 5, 50),
            removed: files(2, 20, 200),
            ..Default::default()
        };
        let second = standard_summary(Some(&first), &second, 1);
        assert_eq!(second["total-data-files"], "2");
        assert_eq!(second["total-records"], "15");
        assert_eq!(second["total-files-size"], "150");
        assert_eq!(second["deleted-records"], "20");
        assert_eq!(second["added-files-size"], "50");
        // A deletion vector rewritten: one delete file of 2 positions replaces one of 1.
        let third = Counts {
            added_deletes: files(1, 2, 10),
            removed_deletes: files(1, 1, 8),
            ..Default::default()
        };
        let mut with_deletes = second.clone();
        with_deletes.insert("total-delete-files".into(), "1".into());
        with_deletes.insert("total-position-deletes".into(), "1".into());
        let third = standard_summary(Some(&with_deletes), &third, 1);
        assert_eq!(third["total-delete-files"], "1");
        assert_eq!(third["total-position-deletes"], "2");
        assert_eq!(third["added-position-deletes"], "2");
        assert_eq!(
            third["total-records"], "15",
            "data records are not reduced by deletes"
        );
    }

    #[test]
    fn degraded_notes_round_trip() {
        assert_eq!(degraded_value(&Default::default()), None);
        let notes = vec!["a \"quoted\" one".to_string(), "column v: void".to_string()];
        let set = notes.iter().cloned().collect();
        let summary = HashMap::from([(DEGRADED.to_string(), degraded_value(&set).unwrap())]);
        assert_eq!(degraded_notes(&summary), notes);
        assert!(degraded_notes(&HashMap::new()).is_empty());
        let plain = HashMap::from([(DEGRADED.to_string(), "free text".to_string())]);
        assert_eq!(degraded_notes(&plain), ["free text"]);
    }

    #[test]
    fn xtable_metadata_matches_xtable_json() {
        let commit = SourceCommit {
            format: SourceFormat::new("HUDI"),
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
