//! The registry of source formats: the one module of the engine that names the concrete
//! source crates. Everything else holds a [`TableSource`] and asks it.

use xlake_source::{SourceKind, TableSource};
use xlake_storage::TableStore;

use crate::{SyncError, SyncOptions};

/// Every source format, in the order a folder is tried against them.
pub const KINDS: &[SourceKind] = &[xlake_hudi::KIND, xlake_delta::KIND];

/// The format named `name` (`hudi`, `delta`, ...), case-insensitive.
pub fn kind(name: &str) -> Option<&'static SourceKind> {
    KINDS.iter().find(|k| k.name.eq_ignore_ascii_case(name))
}

/// Open the table at the store's root: as the format `options.format` names, else as the
/// first detectable format that recognises it.
pub async fn open(
    store: &TableStore,
    options: &SyncOptions,
) -> Result<Box<dyn TableSource>, SyncError> {
    let table = store.location().to_string();
    let candidates: Vec<&SourceKind> = match options.format.as_deref() {
        Some(name) => vec![kind(name).ok_or_else(|| SyncError::UnknownFormat {
            format: name.to_string(),
            known: KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
        })?],
        None => KINDS.iter().filter(|k| k.detectable).collect(),
    };
    for k in &candidates {
        if let Some(source) = (k.open)(store.clone(), options.source).await? {
            return Ok(source);
        }
    }
    let list = |f: fn(&SourceKind) -> &'static str, sep| {
        candidates
            .iter()
            .map(|k| f(k))
            .collect::<Vec<_>>()
            .join(sep)
    };
    Err(SyncError::NotATable {
        table,
        formats: list(|k| k.title, " or "),
        markers: list(|k| k.marker, ", "),
    })
}
