//! [`LogDeletes`]: what the loaded version of xlake's log deletes from its live data
//! files, for a source that resumes after the commit that version mirrors
//! ([`xlake_source::MirrorState::deletes`]). Each live file's deletion vector descriptor
//! is kept as the log wrote it; a vector is read (one ranged read, or none for an inline
//! one) only when the source asks for that file.

use std::collections::HashMap;

use async_trait::async_trait;
use serde_json::Value as Json;
use xlake_source::{MirrorReadError, MirroredDeletes};
use xlake_storage::TableStore;

use super::log_state::LogState;
use crate::deletion_vector::{read, Descriptor};

/// The live files of one version: each one's deletion vector descriptor, if any, and its
/// rows (`numRecords`), by location as the model spells it.
pub(super) struct LogDeletes {
    store: TableStore,
    commit: String,
    live: HashMap<String, (Option<Json>, Option<u64>)>,
}

impl LogDeletes {
    /// The live files of `state`, which mirrors source commit `commit`.
    pub(super) fn of(store: &TableStore, state: &LogState, commit: String) -> Self {
        let live = state
            .live
            .iter()
            .map(|(path, l)| (path.clone(), (l.add.get("deletionVector").cloned(), l.rows)))
            .collect();
        Self {
            store: store.clone(),
            commit,
            live,
        }
    }
}

#[async_trait]
impl MirroredDeletes for LogDeletes {
    fn commit(&self) -> &str {
        &self.commit
    }

    async fn deleted_rows(&self, path: &str) -> Result<Option<Vec<u64>>, MirrorReadError> {
        let Some((dv, rows)) = self.live.get(path) else {
            return Ok(None);
        };
        let Some(dv) = dv else {
            return Ok(Some(Vec::new()));
        };
        let at = || format!("the deletion vector of {path} in the Delta log");
        let d: Descriptor = serde_json::from_value(dv.clone())
            .map_err(|e| format!("{}: not a descriptor: {e}", at()))?;
        let rows = read(&self.store, &d, *rows)
            .await
            .map_err(|e| format!("{}: {e}", at()))?;
        Ok(Some(rows))
    }
}
