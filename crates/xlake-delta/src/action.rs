//! The actions of a Delta commit file (one JSON object per line), the fields xlake needs.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::error::Reason;

/// A file added.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// URI-encoded path, relative to the table root or absolute.
    pub path: String,
    /// Partition column (physical name) to value as text; null is null.
    #[serde(default)]
    pub partition_values: HashMap<String, Option<String>>,
    /// Bytes.
    pub size: i64,
    /// When the logical file was created (ms since the epoch): required by the protocol,
    /// kept as written (see [`Add::created`]), since xlake never needed it to be valid.
    #[serde(default)]
    pub modification_time: Option<Json>,
    /// Whether the commit changed data (false for OPTIMIZE and the like).
    #[serde(default = "yes")]
    pub data_change: bool,
    /// Statistics JSON.
    #[serde(default)]
    pub stats: Option<String>,
    /// Deletion vector, if any.
    #[serde(default)]
    pub deletion_vector: Option<Json>,
}

impl Add {
    /// Its `modificationTime`, if the log gives one as a whole number.
    pub fn created(&self) -> Option<i64> {
        self.modification_time.as_ref().and_then(Json::as_i64)
    }
}

fn yes() -> bool {
    true
}

/// A file removed.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    /// URI-encoded path.
    pub path: String,
    /// Whether the commit changed data.
    #[serde(default = "yes")]
    pub data_change: bool,
}

/// Table metadata.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetaData {
    /// The table's id, a writer's uuid given when the table is created (required by the
    /// protocol; optional here so that a state saved without it still loads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The schema as Delta's JSON.
    pub schema_string: String,
    /// Partition columns (logical names).
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// Table properties.
    #[serde(default)]
    pub configuration: HashMap<String, Option<String>>,
}

impl MetaData {
    /// A table property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.configuration.get(key)?.as_deref()
    }
}

/// Protocol versions and features.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    /// Minimum reader version.
    pub min_reader_version: i32,
    /// Reader features (reader version 3).
    #[serde(default)]
    pub reader_features: Option<Vec<String>>,
}

/// Commit provenance.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    /// Wall-clock time of the commit, ms.
    #[serde(default)]
    pub timestamp: Option<i64>,
    /// In-commit timestamp, ms (the authoritative time when present).
    #[serde(default)]
    pub in_commit_timestamp: Option<i64>,
    /// Operation name (WRITE, MERGE, OPTIMIZE, …).
    #[serde(default)]
    pub operation: Option<String>,
}

/// The actions of one commit that matter to the mirror.
#[derive(Debug, Clone, Default)]
pub struct Commit {
    /// Files added.
    pub adds: Vec<Add>,
    /// Files removed.
    pub removes: Vec<Remove>,
    /// New metadata, if the commit changed it.
    pub metadata: Option<MetaData>,
    /// New protocol, if the commit changed it.
    pub protocol: Option<Protocol>,
    /// Provenance.
    pub info: Option<CommitInfo>,
}

/// Parse a commit file. Unknown action kinds (txn, cdc, domainMetadata, …) are ignored.
/// An `Err` keeps serde_json's error as its source.
pub fn parse_commit(text: &str) -> Result<Commit, Reason> {
    let mut commit = Commit::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: HashMap<String, Json> = serde_json::from_str(line).map_err(|e| {
            Reason::library(e).context(format_args!("line {}: corrupt JSON", n + 1))
        })?;
        for (kind, body) in value {
            let bad = |e: serde_json::Error| {
                Reason::library(e).context(format_args!("line {}: {kind} action", n + 1))
            };
            match kind.as_str() {
                "add" => commit.adds.push(serde_json::from_value(body).map_err(bad)?),
                "remove" => commit
                    .removes
                    .push(serde_json::from_value(body).map_err(bad)?),
                "metaData" => commit.metadata = Some(serde_json::from_value(body).map_err(bad)?),
                "protocol" => commit.protocol = Some(serde_json::from_value(body).map_err(bad)?),
                "commitInfo" => commit.info = Some(serde_json::from_value(body).map_err(bad)?),
                _ => {}
            }
        }
    }
    Ok(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_actions_that_matter() {
        let text = r#"{"commitInfo":{"timestamp":1700000000000,"operation":"WRITE","inCommitTimestamp":1700000000123}}
{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["columnMapping"]}}
{"metaData":{"id":"x","format":{"provider":"parquet"},"schemaString":"{}","partitionColumns":["p"],"configuration":{"delta.columnMapping.mode":"name"}}}
{"add":{"path":"p=a/part-0.parquet","partitionValues":{"p":"a"},"size":10,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":2}"}}
{"remove":{"path":"old.parquet","dataChange":true}}
{"txn":{"appId":"a","version":1}}"#;
        let c = parse_commit(text).unwrap();
        assert_eq!(c.info.unwrap().in_commit_timestamp, Some(1_700_000_000_123));
        assert_eq!(c.adds[0].partition_values["p"].as_deref(), Some("a"));
        assert_eq!(c.adds[0].created(), Some(1));
        assert_eq!(c.removes[0].path, "old.parquet");
        assert_eq!(
            c.metadata.unwrap().property("delta.columnMapping.mode"),
            Some("name")
        );
        assert_eq!(
            c.protocol.unwrap().reader_features.unwrap(),
            ["columnMapping"]
        );
        assert!(parse_commit("{\"add\":")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(parse_commit("{\"add\":{\"path\":1}}")
            .unwrap_err()
            .to_string()
            .contains("add action"));
    }

    #[test]
    fn a_corrupt_commit_reads_as_before_and_keeps_the_json_error() {
        use std::error::Error;
        let e = parse_commit("{\"add\":").unwrap_err();
        let json = serde_json::from_str::<Json>("{\"add\":").unwrap_err();
        assert_eq!(e.to_string(), format!("line 1: corrupt JSON: {json}"));
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
        let e = parse_commit("{\"add\":{\"path\":1}}").unwrap_err();
        assert!(e.to_string().starts_with("line 1: add action: "), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
    }
}
