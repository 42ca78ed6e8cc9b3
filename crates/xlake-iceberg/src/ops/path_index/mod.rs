//! The path index: which manifest holds which file, carried between versions, so that a
//! commit removing old files reads only the manifests holding them, not every manifest
//! back to them (issue 46).
//!
//! It is a chain of immutable segments (`metadata/<uuid>-paths.bin`, layout in
//! [`segment`]): the table property [`PATH_INDEX`] names the newest (the head), which
//! names the segments it builds on. Together they hold, per manifest they cover, the keys
//! of the paths its live entries are about. A commit that removes files (in a run of
//! batches, the last batch only; also a backfill) writes a head: a small segment of the
//! manifests of its last list that the chain does not cover and the process read or wrote
//! (the ones it rewrote or added), naming the chain; or, when the chain is long or
//! holds more in its later segments than in its first ([`chain::Chain::extends`]), a full
//! segment of every manifest of the list the chain or the process knows. So a removal
//! writes kilobytes, not the whole index, and reads of the index only the pages its
//! lookups touch (large segments are mapped on a local disk). Appends neither read nor
//! write it; later versions carry the property as they carry every property.
//!
//! Manifests are immutable and uniquely named, so an entry never goes stale: entries of
//! manifests the list no longer holds are never asked for, and manifests the chain does
//! not cover (added or merged since) are read as before. A chain that cannot be read, or
//! that misled a removal (a removed file in no manifest it names), is set aside for the
//! process: its reads are done as if it did not exist, and the next index is written
//! full from what the process knows.

pub(crate) mod chain;
mod segment;

use std::collections::HashSet;
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use xlake_storage::{StorageError, TableStore};

pub use crate::spec::layout::PATH_INDEX;
pub(crate) use chain::Chain;

use crate::error::Result;
use crate::ops::live_paths::PathKeys;
use crate::ops::plan::Draft;
use crate::ops::table::IcebergTable;
use crate::spec::error::CodecError;

/// The most ancestors a segment may name when read (a chain xlake writes has fewer than
/// [`chain::MAX_DEPTH`]).
const MAX_ANCESTORS: usize = 64;

/// Whether `name` is one xlake gives a path index (`metadata/<uuid>-paths.bin`).
fn is_index_name(name: &str) -> bool {
    name.ends_with("-paths.bin") && crate::spec::layout::is_written_by_xlake(name)
}

/// The path index `metadata` names, if the name is one xlake writes
/// (`metadata/<uuid>-paths.bin`). Any writer can set a table property: a value naming
/// anything else (a source file, a path outside the table) is never read, moved or kept.
pub fn named_path_index(metadata: &TableMetadata) -> Option<&str> {
    let name = metadata.properties().get(PATH_INDEX)?;
    let ours = is_index_name(name);
    if !ours {
        tracing::warn!(property = PATH_INDEX, value = %name, "not a path index xlake writes: ignored");
    }
    ours.then_some(name.as_str())
}

/// The files of the path index `metadata` names that exist, table-relative: its head,
/// then the segments the head builds on (for cleanup, which keeps them, and a rebuild,
/// which sets them aside). A head that does not read as an index is listed alone;
/// ancestors named outside what xlake writes are not listed.
pub async fn path_index_files(
    store: &TableStore,
    metadata: &TableMetadata,
) -> std::result::Result<Vec<String>, StorageError> {
    let Some(head) = named_path_index(metadata) else {
        return Ok(Vec::new());
    };
    let bytes = match store.get_written_once(head).await {
        Ok(bytes) => bytes,
        Err(StorageError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = vec![head.to_string()];
    if let Ok(segment) = segment::Segment::parse(bytes) {
        for ancestor in segment.ancestors().iter().filter(|a| is_index_name(a)) {
            if store.size(ancestor).await?.is_some() {
                out.push(ancestor.clone());
            }
        }
    }
    Ok(out)
}

impl IcebergTable {
    /// The path index chain `metadata` names, read once per process; `None` when it names
    /// none, or one that cannot be read (logged) or was set aside.
    pub(crate) async fn path_index_chain(
        &self,
        metadata: Option<&TableMetadata>,
    ) -> Option<Arc<Chain>> {
        let head = metadata.and_then(named_path_index)?;
        let known = self.path_index.lock().ok().and_then(|state| {
            let aside = state.set_aside.contains(head);
            state.chains.get(head).map(|c| c.clone().filter(|_| !aside))
        });
        if let Some(known) = known {
            return known;
        }
        let chain = match self.read_chain(head).await {
            Ok(chain) => Some(Arc::new(chain)),
            Err(reason) => {
                let file = self.store.absolute(head);
                tracing::warn!(table = %self.table(), file = %file, %reason, "path index not used: manifests are read instead");
                None
            }
        };
        if let Ok(mut state) = self.path_index.lock() {
            state.chains.insert(head.to_string(), chain.clone());
        }
        chain
    }

    /// The chain whose head is `head`: the head, then the segments it names, read side by
    /// side.
    async fn read_chain(&self, head: &str) -> std::result::Result<Chain, CodecError> {
        let read = |name: String| async move {
            let bytes = self
                .store
                .get_written_once(&name)
                .await
                .map_err(CodecError::library)?;
            segment::Segment::parse(bytes).map_err(|e| e.context(&name))
        };
        let first = read(head.to_string()).await?;
        let ancestors = first.ancestors().to_vec();
        if ancestors.len() > MAX_ANCESTORS {
            return Err(format!(
                "{} segments named, at most {MAX_ANCESTORS} read",
                ancestors.len()
            )
            .into());
        }
        if let Some(odd) = ancestors.iter().find(|a| !is_index_name(a)) {
            return Err(format!("names {odd}, not a path index xlake writes").into());
        }
        let reads = ancestors.into_iter().map(read);
        let mut segments = vec![first];
        for segment in futures::future::join_all(reads).await {
            segments.push(segment?);
        }
        Ok(Chain::new(head.to_string(), segments))
    }

    /// Set `chain` aside for this process (it misled a removal).
    pub(crate) fn set_path_index_aside(&self, chain: &Chain) {
        if let Ok(mut state) = self.path_index.lock() {
            state.set_aside.insert(chain.head.clone());
        }
    }

    /// Whether `chain` was set aside for this process.
    pub(crate) fn is_set_aside(&self, chain: &Chain) -> bool {
        self.path_index
            .lock()
            .map_or(true, |state| state.set_aside.contains(&chain.head))
    }

    /// Write the path index `draft` names (see [`Draft::path_index`]) for its last list:
    /// a segment of the manifests the chain it builds on does not cover and this process
    /// knows, naming that chain; or a full one (see [`chain::Chain::extends`]).
    pub(crate) async fn write_path_index(&self, draft: &mut Draft<'_>) -> Result<()> {
        let (Some(path), Some(list)) = (draft.path_index.take(), draft.last_list.as_ref()) else {
            return Ok(());
        };
        // Only where a snapshot staged names it (a failed commit's plan named it too).
        let named = draft
            .metadata
            .as_ref()
            .and_then(|m| m.properties().get(PATH_INDEX));
        if named != Some(&path) {
            return Ok(());
        }
        // Borrowed when the batch knows them (a copy was ~1,000 manifest files at 100k).
        let manifests = match &list.decoded {
            Some(decoded) => std::borrow::Cow::Borrowed(decoded),
            None => crate::spec::manifest_list::read::manifests(&list.bytes, &list.location)
                .map(std::borrow::Cow::Owned)
                .map_err(|e| self.corrupt(&list.location, e))?,
        };
        let base = draft.index_base.clone().flatten();
        let base = base.filter(|c| !self.is_set_aside(c));
        let live: HashSet<&str> = manifests.iter().map(|m| m.manifest_path.as_str()).collect();
        let fresh: Vec<(&str, Arc<PathKeys>)> = manifests
            .iter()
            .map(|m| m.manifest_path.as_str())
            .filter_map(|l| self.cached_paths(l).map(|k| (l, k)))
            .filter(|(l, _)| !base.as_ref().is_some_and(|c| c.covers(l)))
            .collect();
        let fresh_keys = fresh.iter().map(|(_, k)| k.keys().len()).sum();
        let encoded = match base.as_deref() {
            Some(chain) if chain.extends(fresh_keys) => chain::delta(chain, &fresh),
            chain => chain::full(chain, &live, &fresh),
        };
        let bytes = encoded.map_err(self.write_failed(&path))?;
        self.store
            .put_if_absent(&path, bytes)
            .await
            .map_err(self.write_failed(&path))?;
        Ok(())
    }
}
