//! What xlake's own `_delta_log/` holds: every version's `commitInfo.xlakeMetadata` (the
//! source commit it mirrors), the live files with the `add` action that made each live,
//! and the `metaData` and `protocol` in force. A version without `xlakeMetadata` was
//! written by another writer: the log is refused, naming the file.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use xlake_storage::TableStore;

use super::error::TargetFault;
use crate::log::{LogListing, LOG_DIR};
use crate::source::local_path;

/// The `commitInfo` field that records the source commit a version mirrors (as XTable
/// records `XTABLE_METADATA` in Iceberg snapshot summaries).
pub const XLAKE_FIELD: &str = "xlakeMetadata";

/// What xlake records in each version's `commitInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct XlakeMetadata {
    /// `HUDI`, `PARQUET`, `ICEBERG`.
    pub source_table_format: String,
    /// The source commit (Hudi instant, Iceberg snapshot id, Parquet listing id).
    pub source_identifier: String,
    /// `<id>.<action>`.
    #[serde(default)]
    pub latest_table_operation_identifier: Option<String>,
    /// The table location the version was written for (a copied table names another).
    pub table_location: String,
    /// The change set's notes (a Parquet folder recognises its state by them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
    /// What this version mirrors in a degraded way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
    /// The source's own state as of the commit (kept for the engine's mirror state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_state: Option<String>,
}

/// One version of the log.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct VersionEntry {
    /// Delta version.
    pub(super) version: u64,
    /// `commitInfo.timestamp`: the source commit's time.
    pub(super) timestamp_ms: i64,
    /// `commitInfo.operation`.
    pub(super) operation: String,
    /// The source commit it mirrors.
    pub(super) xlake: XlakeMetadata,
}

/// A live file: the `add` action that made it live (as written), its rows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LiveFile {
    /// The add action's fields.
    pub(super) add: Map<String, Json>,
    /// `numRecords` of its stats, when recorded.
    pub(super) rows: Option<u64>,
}

impl LiveFile {
    /// Its deletion vector's unique id (`storageType` + `pathOrInlineDv` + `@offset`), if any.
    pub(super) fn vector_id(&self) -> Option<String> {
        vector_id(self.add.get("deletionVector"))
    }
}

/// The unique id of a deletion vector descriptor.
pub(super) fn vector_id(dv: Option<&Json>) -> Option<String> {
    let dv = dv?.as_object()?;
    let kind = dv.get("storageType")?.as_str()?;
    let at = dv.get("pathOrInlineDv")?.as_str()?;
    Some(match dv.get("offset").and_then(Json::as_u64) {
        Some(offset) => format!("{kind}{at}@{offset}"),
        None => format!("{kind}{at}"),
    })
}

/// xlake's log as read.
#[derive(Debug, Clone, Default)]
pub(super) struct LogState {
    /// Every version, oldest first.
    pub(super) versions: Vec<VersionEntry>,
    /// Live files by their location as the model spells it (decoded, table-relative).
    pub(super) live: HashMap<String, LiveFile>,
    /// The `metaData` action in force.
    pub(super) metadata: Option<Map<String, Json>>,
    /// The `protocol` action in force.
    pub(super) protocol: Option<Map<String, Json>>,
}

impl LogState {
    /// The newest version.
    pub(super) fn latest(&self) -> Option<&VersionEntry> {
        self.versions.last()
    }

    /// Read every commit file of the log, oldest first; `None` when there is none.
    pub(super) async fn read(store: &TableStore) -> Result<Option<Self>, TargetFault> {
        let listing =
            LogListing::load(store, false)
                .await
                .map_err(|e| TargetFault::Unreadable {
                    file: store.absolute(LOG_DIR),
                    reason: e.to_string(),
                })?;
        if listing.commits.is_empty() {
            if let Some(v) = listing.checkpoints.iter().next() {
                return Err(TargetFault::Foreign {
                    file: store.absolute(&format!("{LOG_DIR}/{v:020}.checkpoint.parquet")),
                    why: "a checkpoint without the commits xlake writes".into(),
                });
            }
            return Ok(None);
        }
        let mut state = Self::default();
        for (expected, (&version, (path, _))) in listing.commits.iter().enumerate() {
            if version != expected as u64 {
                return Err(TargetFault::Foreign {
                    file: store.absolute(path),
                    why: format!("the log does not start at version 0 or skips version {expected} (xlake keeps every commit file)"),
                });
            }
            let bytes = store.get(path).await?;
            state.apply(version, &bytes, &store.absolute(path))?;
        }
        Ok(Some(state))
    }

    /// Apply the commit file of `version` (`file` names it in messages).
    pub(super) fn apply(
        &mut self,
        version: u64,
        bytes: &[u8],
        file: &str,
    ) -> Result<(), TargetFault> {
        let bad = |reason: String| TargetFault::Unreadable {
            file: file.to_string(),
            reason,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
        let mut info = None;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let action: Map<String, Json> = serde_json::from_str(line)
                .map_err(|e| bad(format!("line {}: corrupt JSON: {e}", n + 1)))?;
            for (kind, body) in action {
                let Json::Object(body) = body else { continue };
                match kind.as_str() {
                    "commitInfo" => info = Some(body),
                    "add" => self.add(body).map_err(&bad)?,
                    "remove" => self.remove(&body).map_err(&bad)?,
                    "metaData" => self.metadata = Some(body),
                    "protocol" => self.protocol = Some(body),
                    _ => {}
                }
            }
        }
        let entry = entry_of(version, info.as_ref()).ok_or_else(|| TargetFault::Foreign {
            file: file.to_string(),
            why: format!("its commitInfo has no {XLAKE_FIELD}"),
        })?;
        self.versions.push(entry);
        Ok(())
    }

    fn add(&mut self, add: Map<String, Json>) -> Result<(), String> {
        let path = model_path(&add)?;
        let rows = add
            .get("stats")
            .and_then(Json::as_str)
            .and_then(|s| serde_json::from_str::<Json>(s).ok())
            .and_then(|s| s.get("numRecords")?.as_u64());
        self.live.insert(path, LiveFile { add, rows });
        Ok(())
    }

    fn remove(&mut self, remove: &Map<String, Json>) -> Result<(), String> {
        let path = model_path(remove)?;
        let id = vector_id(remove.get("deletionVector"));
        if self.live.get(&path).is_some_and(|l| l.vector_id() == id) {
            self.live.remove(&path);
        }
        Ok(())
    }
}

/// The location a file action names, as the model spells it.
fn model_path(action: &Map<String, Json>) -> Result<String, String> {
    let path = action
        .get("path")
        .and_then(Json::as_str)
        .ok_or("a file action without a path")?;
    local_path(path)
}

fn entry_of(version: u64, info: Option<&Map<String, Json>>) -> Option<VersionEntry> {
    let info = info?;
    let xlake: XlakeMetadata = serde_json::from_value(info.get(XLAKE_FIELD)?.clone()).ok()?;
    Some(VersionEntry {
        version,
        timestamp_ms: info.get("timestamp").and_then(Json::as_i64).unwrap_or(0),
        operation: info
            .get("operation")
            .and_then(Json::as_str)
            .unwrap_or("WRITE")
            .to_string(),
        xlake,
    })
}
