//! The timeline: which instants exist, which completed, and what each completed one says.
//!
//! Table version 6 keeps instants flat in `.hoodie/`; versions 8 and 9 in
//! `.hoodie/timeline/` with completion times in the names. Completed commit metadata is
//! JSON (v6 commits) or a single-record Avro container (v6 rollbacks and cleans, all of
//! v8/v9); both are read into the same JSON shape. `.hoodie/metadata/` (the metadata
//! table) and other stray files are not instants and are ignored.

use serde_json::Value as Json;
use xlake_storage::TableStore;

use crate::error::{HudiError, Result};
use crate::instant::{Instant, State};

/// The instants of a table.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Completed instants, in the order they take effect (completion time, then requested).
    pub completed: Vec<Instant>,
    /// Requested or inflight instants with no completed file: not mirrored.
    pub pending: Vec<Instant>,
}

impl Timeline {
    /// List the timeline in `dir` (`.hoodie` for table version 6, `.hoodie/timeline` after).
    pub async fn load(store: &TableStore, dir: &str) -> Result<Self> {
        let mut all: Vec<Instant> = store
            .list_dir(dir)
            .await?
            .iter()
            .filter_map(|e| Instant::parse(dir, e.path.rsplit('/').next()?))
            .collect();
        all.sort_by(|a, b| {
            (a.commit_time(), &a.requested, a.state).cmp(&(b.commit_time(), &b.requested, b.state))
        });
        let done: std::collections::HashSet<String> = all
            .iter()
            .filter(|i| i.state == State::Completed)
            .map(|i| i.requested.clone())
            .collect();
        let (completed, rest): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|i| i.state == State::Completed);
        let mut pending: Vec<Instant> = rest
            .into_iter()
            .filter(|i| !done.contains(&i.requested))
            .collect();
        pending.dedup_by(|a, b| a.requested == b.requested);
        Ok(Self { completed, pending })
    }
}

/// The contents of a completed instant's file, as JSON.
pub async fn read_instant(store: &TableStore, instant: &Instant) -> Result<Json> {
    let bytes = store.get(&instant.file).await?;
    decode(&bytes).map_err(|reason| HudiError::Instant {
        table: store.location().to_string(),
        instant: instant.requested.clone(),
        file: store.absolute(&instant.file),
        reason,
    })
}

/// JSON text, or a single-record Avro container (its first record), as JSON.
pub fn decode(bytes: &[u8]) -> Result<Json, String> {
    if bytes.is_empty() {
        return Ok(Json::Null);
    }
    if bytes.starts_with(b"Obj\x01") {
        let mut reader =
            apache_avro::Reader::new(bytes).map_err(|e| format!("corrupt Avro container: {e}"))?;
        let record = reader
            .next()
            .ok_or("Avro container holds no record")?
            .map_err(|e| format!("corrupt Avro record: {e}"))?;
        return Json::try_from(record).map_err(|e| format!("Avro record not convertible: {e}"));
    }
    serde_json::from_slice(bytes).map_err(|e| format!("corrupt JSON: {e}"))
}
