//! What xlake's own `_delta_log/` holds: every version's `commitInfo.xlakeMetadata` (the
//! source commit it mirrors), the live files with the `add` action that made each live,
//! and the `metaData` and `protocol` in force. A version without `xlakeMetadata` was
//! written by another writer: the log is refused, naming the file.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use xlake_storage::TableStore;

use super::error::TargetFault;
use super::schema_out::PhysicalNames;
use super::values_out::absolute_uri;
use crate::deletion_vector::uuid_path;
use crate::error::Reason;
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
    /// The version that made it live (the checkpoint's, for a file read from one).
    pub(super) since: u64,
}

/// A file a version removed: its location as the model spells it, the version that had
/// made it live and the version that removed it (versions `since..at` read it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Removed {
    pub(super) path: String,
    pub(super) since: u64,
    pub(super) at: u64,
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
    /// The files the versions read removed, in order.
    pub(super) removed: Vec<Removed>,
    /// The physical names of column mapping: each field id's now, every one ever given.
    pub(super) physical: PhysicalNames,
    /// The stored deletion vector files of `storageType` `p` any action read names
    /// (`pathOrInlineDv`, a location as written), with the newest version that names
    /// each; [`Self::named_vector_files`] gives these and the `u` ones as locations.
    pub(super) vector_files: BTreeMap<String, u64>,
    /// The files of the `u` vectors any action read names, relative to the table root
    /// (an optional prefix folder, then `deletion_vector_<uuid>.bin`), with the newest
    /// version that names each.
    pub(super) uuid_vector_files: BTreeMap<String, u64>,
}

impl LogState {
    /// The newest version.
    pub(super) fn latest(&self) -> Option<&VersionEntry> {
        self.versions.last()
    }

    /// The refusal of a log whose newest version was written for another location than
    /// `store`'s (a copied or moved folder); `None` at home or for an empty log.
    pub(super) fn relocated(&self, store: &TableStore) -> Option<TargetFault> {
        let latest = self
            .latest()
            .filter(|l| !store.is_here(&l.xlake.table_location))?;
        Some(TargetFault::Relocated {
            file: store.absolute(&super::DeltaTarget::commit_file(latest.version)),
            recorded: latest.xlake.table_location.clone(),
        })
    }

    /// Every stored deletion vector file an action read names (`p` and `u`; an inline
    /// `i` vector has none), as locations under `root` (the table's).
    pub(super) fn named_vector_files(&self, root: &str) -> BTreeSet<String> {
        let relative = self.uuid_vector_files.keys().map(|p| absolute_uri(root, p));
        self.vector_files.keys().cloned().chain(relative).collect()
    }

    /// Every stored deletion vector file an action read names, as the model spells a
    /// location (a `p` decoded, a `u` relative to the table root), with the newest
    /// version that names it.
    pub(super) fn vector_files_read(&self) -> Result<Vec<(String, u64)>, Reason> {
        let mut out = Vec::new();
        for (at, &version) in &self.vector_files {
            out.push((local_path(at)?, version));
        }
        out.extend(self.uuid_vector_files.iter().map(|(p, &v)| (p.clone(), v)));
        Ok(out)
    }

    /// Read the log: every commit file from version 0, or (once `expire` cut its older
    /// versions) the oldest checkpoint after which every commit exists, then those
    /// commits; `None` when there is none.
    pub(super) async fn read(store: &TableStore) -> Result<Option<Self>, TargetFault> {
        let listing = list(store).await?;
        Self::read_listed(store, &listing, None).await
    }

    /// The state as of `upto` (the newest version when `None`) from `listing`; `None` when
    /// the log is empty or `upto` is older than the versions it can read.
    pub(super) async fn read_listed(
        store: &TableStore,
        listing: &LogListing,
        upto: Option<u64>,
    ) -> Result<Option<Self>, TargetFault> {
        let Some(start) = start_of(store, listing).await? else {
            return Ok(None);
        };
        if upto.is_some_and(|u| u < start) {
            return Ok(None);
        }
        let mut state = match start {
            0 => Self::default(),
            v => Self::from_checkpoint(store, v).await?,
        };
        for (&version, (path, _)) in listing.commits.range(start..) {
            if upto.is_some_and(|u| version > u) {
                break;
            }
            let bytes = store.get(path).await?;
            state.apply(version, &bytes, &store.absolute(path))?;
        }
        Ok(Some(state))
    }

    /// The live files, `metaData` and `protocol` of the classic checkpoint of `version`
    /// (as deltalake-core writes it for xlake), with no version entry yet.
    pub(super) async fn from_checkpoint(
        store: &TableStore,
        version: u64,
    ) -> Result<Self, TargetFault> {
        let path = checkpoint_file(version);
        let file = store.absolute(&path);
        let bad = |reason: Reason| TargetFault::Unreadable {
            file: file.clone(),
            reason,
        };
        let bytes = store.get(&path).await?;
        let rows = crate::checkpoint::all_action_rows(bytes).map_err(&bad)?;
        let mut state = Self::default();
        for (n, line) in rows
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let action: Map<String, Json> = serde_json::from_str(line)
                .map_err(|e| bad(Reason::library(e).context(format_args!("row {}", n + 1))))?;
            for (kind, body) in action {
                let Json::Object(body) = body else { continue };
                match kind.as_str() {
                    "add" => state.add(body, version).map_err(&bad)?,
                    "metaData" => {
                        state.physical.note(version, &body);
                        state.metadata = Some(body);
                    }
                    "protocol" => state.protocol = Some(body),
                    _ => {}
                }
            }
        }
        Ok(state)
    }

    /// Apply the commit file of `version` (`file` names it in messages).
    pub(super) fn apply(
        &mut self,
        version: u64,
        bytes: &[u8],
        file: &str,
    ) -> Result<(), TargetFault> {
        let bad = |reason: Reason| TargetFault::Unreadable {
            file: file.to_string(),
            reason,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| bad(Reason::library(e)))?;
        let mut info = None;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let action: Map<String, Json> = serde_json::from_str(line).map_err(|e| {
                bad(Reason::library(e).context(format_args!("line {}: corrupt JSON", n + 1)))
            })?;
            for (kind, body) in action {
                let Json::Object(body) = body else { continue };
                match kind.as_str() {
                    "commitInfo" => info = Some(body),
                    "add" => self.add(body, version).map_err(&bad)?,
                    "remove" => self.remove(&body, version).map_err(&bad)?,
                    "metaData" => {
                        self.physical.note(version, &body);
                        self.metadata = Some(body);
                    }
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

    fn add(&mut self, add: Map<String, Json>, version: u64) -> Result<(), Reason> {
        let path = model_path(&add)?;
        let rows = add
            .get("stats")
            .and_then(Json::as_str)
            .and_then(|s| serde_json::from_str::<Json>(s).ok())
            .and_then(|s| s.get("numRecords")?.as_u64());
        self.note_vector(add.get("deletionVector"), version)?;
        let since = match self.live.get(&path) {
            // A new vector on a live file: the data file was read since then already.
            Some(l) => l.since,
            None => version,
        };
        self.live.insert(path, LiveFile { add, rows, since });
        Ok(())
    }

    fn remove(&mut self, remove: &Map<String, Json>, version: u64) -> Result<(), Reason> {
        let path = model_path(remove)?;
        let id = vector_id(remove.get("deletionVector"));
        self.note_vector(remove.get("deletionVector"), version)?;
        if self.live.get(&path).is_some_and(|l| l.vector_id() == id) {
            if let Some(l) = self.live.remove(&path) {
                self.removed.push(Removed {
                    path,
                    since: l.since,
                    at: version,
                });
            }
        }
        Ok(())
    }

    /// Record the file a stored vector is in: a `p` by its location, a `u` by the file
    /// its Z85 uuid (and prefix) names, relative to the table root (a `u` that does not
    /// decode is refused: what it names could not be kept).
    fn note_vector(&mut self, dv: Option<&Json>, version: u64) -> Result<(), Reason> {
        let Some(dv) = dv.and_then(Json::as_object) else {
            return Ok(());
        };
        let at = dv.get("pathOrInlineDv").and_then(Json::as_str);
        match (dv.get("storageType").and_then(Json::as_str), at) {
            (Some("p"), Some(at)) => {
                self.vector_files.insert(at.to_string(), version);
            }
            (Some("u"), Some(at)) => {
                let path = uuid_path(at).map_err(|e| e.context("a `u` deletion vector"))?;
                self.uuid_vector_files.insert(path, version);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The log listed by names (the pointer checked against it).
pub(super) async fn list(store: &TableStore) -> Result<LogListing, TargetFault> {
    LogListing::load(store, false)
        .await
        .map_err(|e| TargetFault::Unreadable {
            file: store.absolute(LOG_DIR),
            reason: Reason::library(e),
        })
}

/// The classic checkpoint file of `version`.
pub(super) fn checkpoint_file(version: u64) -> String {
    format!("{LOG_DIR}/{version:020}.checkpoint.parquet")
}

/// The version xlake's log is read from: 0 when every commit is there, else the oldest
/// checkpoint after which every commit is (one `expire` kept), whose own commit file must
/// be there too (it holds that version's `xlakeMetadata`); `None` for an empty log. A
/// missing commit is a gap in xlake's log when the newest commit is xlake's, else the
/// folder is another writer's. (Commits before the start are not read, so a hole there
/// is not seen.)
async fn start_of(store: &TableStore, listing: &LogListing) -> Result<Option<u64>, TargetFault> {
    let Some((&latest, (newest, _))) = listing.commits.iter().next_back() else {
        if let Some(v) = listing.checkpoints.iter().next() {
            return Err(TargetFault::Foreign {
                file: store.absolute(&checkpoint_file(*v)),
                why: "a checkpoint without the commits xlake writes".into(),
            });
        }
        return Ok(None);
    };
    let (start, why) = match listing.start() {
        Ok(Some((v, _))) if listing.commits.contains_key(&v) => return Ok(Some(v)),
        Ok(Some((v, _))) => (v, format!("the commit of the checkpoint of version {v}; xlake keeps the commit of the checkpoint it expires to")),
        Ok(None) => return Ok(None),
        Err(_) => (latest, "no checkpoint after it covers it; xlake keeps every commit after its oldest checkpoint".into()),
    };
    // Read the newest commit: an xlake log has a gap, another writer's is refused.
    let bytes = store.get(newest).await?;
    LogState::default().apply(latest, &bytes, &store.absolute(newest))?;
    let missing = (0..=start)
        .rev()
        .find(|v| !listing.commits.contains_key(v))
        .unwrap_or(start);
    Err(TargetFault::Gap {
        log: store.absolute(LOG_DIR),
        missing,
        why,
    })
}

/// The location a file action names, as the model spells it.
fn model_path(action: &Map<String, Json>) -> Result<String, Reason> {
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
