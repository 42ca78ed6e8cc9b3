//! Writes held back to be made together ([`crate::TableStore::deferring`], issue 47): a
//! commit's manifests and manifest list are written side by side, beside the check that
//! comes before its commit point, instead of one after another: on an object store one
//! round trip instead of three. A read of a held write is answered from memory, so the
//! code that wrote a file may read it back before it is flushed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Bytes held at most before a write makes them all (a long backfill batch then writes
/// as it goes, its memory bounded).
pub(crate) const HELD_MAX: usize = 16 << 20;

/// Writes made at once by a flush.
pub(crate) const FLUSH_CONCURRENCY: usize = 16;

/// The writes a deferring handle holds: absolute location to (path as given, bytes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Deferred(Arc<Mutex<Held>>);

#[derive(Debug, Default)]
struct Held {
    writes: HashMap<String, (String, Bytes)>,
    bytes: usize,
}

impl Deferred {
    /// Hold a write of `bytes` to `path` (`location`: its absolute form); whether the
    /// bytes held now call for a flush.
    pub(crate) fn hold(&self, location: String, path: &str, bytes: Bytes) -> bool {
        let Ok(mut held) = self.0.lock() else {
            return true;
        };
        let len = bytes.len();
        if let Some((_, old)) = held.writes.insert(location, (path.to_string(), bytes)) {
            held.bytes = held.bytes.saturating_sub(old.len());
        }
        held.bytes += len;
        held.bytes >= HELD_MAX
    }

    /// The bytes held for `location`, if any.
    pub(crate) fn get(&self, location: &str) -> Option<Bytes> {
        let held = self.0.lock().ok()?;
        held.writes.get(location).map(|(_, b)| b.clone())
    }

    /// Drop a held write (its file deleted before it was written).
    pub(crate) fn forget(&self, location: &str) {
        if let Ok(mut held) = self.0.lock() {
            if let Some((_, old)) = held.writes.remove(location) {
                held.bytes = held.bytes.saturating_sub(old.len());
            }
        }
    }

    /// Every held write, as (absolute location, path as given, bytes); they stay held
    /// (and readable) until [`Self::forget`] drops each once written.
    pub(crate) fn held(&self) -> Vec<(String, String, Bytes)> {
        let Ok(held) = self.0.lock() else {
            return Vec::new();
        };
        let writes = held.writes.iter();
        writes
            .map(|(location, (path, bytes))| (location.clone(), path.clone(), bytes.clone()))
            .collect()
    }
}
