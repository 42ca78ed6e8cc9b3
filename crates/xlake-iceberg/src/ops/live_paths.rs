//! Per process, the paths each manifest's live entries are about, kept with the table
//! ([`IcebergTable`](crate::IcebergTable)) and read by the planner's removals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use xlake_model::path_key;

/// Per manifest read or written by this process, the paths its live entries are about
/// (data file paths; for delete manifests, the data files deleted from). Manifests are
/// immutable once written, so entries never go stale. Kept as sorted path keys (16 bytes
/// a path: a 10M-file backfill caches every path it writes).
pub(crate) type PathCache = Arc<Mutex<HashMap<String, Arc<PathKeys>>>>;

/// The paths a manifest's live entries are about, as sorted [`path_key`]s.
#[derive(Debug)]
pub(crate) struct PathKeys(Box<[u128]>);

impl PathKeys {
    /// `keys` sorted.
    pub(crate) fn sorted(mut keys: Vec<u128>) -> Self {
        keys.sort_unstable();
        Self(keys.into_boxed_slice())
    }

    pub(crate) fn contains(&self, path: &str) -> bool {
        self.0.binary_search(&path_key(path)).is_ok()
    }

    /// The keys, sorted.
    pub(crate) fn keys(&self) -> &[u128] {
        &self.0
    }
}
