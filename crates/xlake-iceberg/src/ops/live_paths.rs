//! Per process, the paths each manifest's live entries are about, kept with the table
//! ([`IcebergTable`](crate::IcebergTable)) and read by the planner's removals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use xlake_model::short_path_key;

/// Per manifest read or written by this process, the paths its live entries are about
/// (data file paths; for delete manifests, the data files deleted from). Manifests are
/// immutable once written, so entries never go stale. Kept as sorted 64-bit path keys
/// (8 bytes a path: a 10M-file backfill caches every path it writes).
pub(crate) type PathCache = Arc<Mutex<HashMap<String, Arc<PathKeys>>>>;

/// The paths a manifest's live entries are about, as sorted [`short_path_key`]s. A key
/// says that the manifest may hold a path: the planner then reads the manifest and
/// matches the full paths, so two paths sharing a key cost one read, never a wrong
/// removal (the 128-bit keys this cache held before took twice the memory for nothing).
#[derive(Debug)]
pub(crate) struct PathKeys(Box<[u64]>);

impl PathKeys {
    /// `keys` sorted.
    pub(crate) fn sorted(mut keys: Vec<u64>) -> Self {
        keys.sort_unstable();
        Self(keys.into_boxed_slice())
    }

    /// Whether the manifest may hold `path` (see above).
    pub(crate) fn may_hold(&self, path: &str) -> bool {
        self.0.binary_search(&short_path_key(path)).is_ok()
    }

    /// The keys, sorted.
    pub(crate) fn keys(&self) -> &[u64] {
        &self.0
    }
}
