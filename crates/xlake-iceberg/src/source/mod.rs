//! An Iceberg table as a source ([`IcebergSource`], [`KIND`]): each snapshot of the main
//! branch's ancestry, oldest first, is one change set, read with the codecs of
//! [`crate::spec`] (metadata, manifest lists, manifests). The source commit id is the
//! snapshot id in decimal, which the target records as its `sourceIdentifier`.
//!
//! | module | what it does |
//! |---|---|
//! | `current` | the current metadata file (`vN.metadata.json` or `NNNNN-<uuid>.metadata.json`); whether it is a mirror of another format |
//! | `neutral` | schema (field ids kept), identity partition specs, partition tuples |
//! | `walk` | a snapshot's manifest entries into a change set over the live files |
//! | `resume` | an incremental replay that takes the baseline's deleted rows from the mirror |

mod current;
mod neutral;
mod resume;
mod walk;

use std::cmp::Ordering;
use std::collections::HashMap;

use iceberg::spec::{SnapshotRef, TableMetadata};
use xlake_model::{CommitListing, DeclaredTable, ListedCommit, SourceFormat};
use xlake_source::{
    CommitState, DetectFuture, ErrorKind, MirrorState, OpenFuture, Replay, SourceError,
    SourceHealth, SourceKind, SourceOptions, TableSource, TargetTakes, VecReplay,
};
use xlake_storage::TableStore;

use resume::Resume;
use walk::{Live, Walk};

/// The format's name in `XTABLE_METADATA`.
pub const FORMAT: SourceFormat = SourceFormat::new("ICEBERG");

/// The Iceberg format, for the engine's registry. A folder whose `metadata/` is a mirror
/// of another format (its snapshots record `XTABLE_METADATA`) is not an Iceberg source.
pub const KIND: SourceKind = SourceKind {
    name: "iceberg",
    title: "Iceberg",
    format: FORMAT,
    marker: "metadata/*.metadata.json",
    detectable: true,
    detect,
    open,
    open_after: None,
    open_at_tip: None,
    late_completions: false,
    recorded: &[],
};

fn detect(store: TableStore) -> DetectFuture {
    Box::pin(async move { Ok(IcebergSource::open(store).await?.is_some()) })
}

fn open(store: TableStore, _: SourceOptions) -> OpenFuture {
    Box::pin(async move {
        let source = IcebergSource::open(store).await?;
        Ok(source.map(|s| Box::new(s) as Box<dyn TableSource>))
    })
}

/// Whether `metadata/` holds a metadata file that is a mirror of another format's table
/// (xlake's or XTable's: a snapshot records `XTABLE_METADATA`); false without one.
pub async fn metadata_is_a_mirror(store: &TableStore) -> Result<bool, SourceError> {
    let Some(path) = current::newest_metadata(store).await? else {
        return Ok(false);
    };
    Ok(current::is_mirror(
        &current::read_metadata(store, &path).await?,
    ))
}

/// An Iceberg table opened for reading, at its current metadata file.
#[derive(Debug)]
pub struct IcebergSource {
    store: TableStore,
    /// Table-relative path of the current metadata file.
    path: String,
    metadata: TableMetadata,
    /// The main branch's ancestry, oldest first, as far as its snapshots are kept.
    chain: Vec<SnapshotRef>,
    decode: bool,
}

impl IcebergSource {
    /// The Iceberg table at the store's root; `None` when `metadata/` holds no metadata
    /// file, or holds a mirror of another format's table.
    pub async fn open(store: TableStore) -> Result<Option<Self>, SourceError> {
        let Some(path) = current::newest_metadata(&store).await? else {
            return Ok(None);
        };
        let metadata = current::read_metadata(&store, &path).await?;
        if current::is_mirror(&metadata) {
            return Ok(None);
        }
        current::check_hint(&store, &path).await?;
        let chain = ancestry(&metadata);
        Ok(Some(Self {
            store,
            path,
            metadata,
            chain,
            decode: true,
        }))
    }

    /// Table-relative path of the metadata file the source reads.
    pub fn metadata_path(&self) -> &str {
        &self.path
    }

    /// A note when the metadata records the table at another place (a copied or moved
    /// folder): its files are named there, so the mirror reads them there too.
    fn elsewhere(&self) -> Option<String> {
        let recorded = self.metadata.location();
        (!self.store.is_here(recorded)).then(|| {
            format!(
                "{} records the table at {recorded}, not here: the data files it names are read at that place, by the mirror as by Iceberg readers (a copy still reads the original's files; a moved table's mirror breaks when the old place is gone)",
                self.store.absolute(&self.path)
            )
        })
    }

    /// Whether snapshots before the oldest kept one expired: it names a parent that is
    /// gone (Iceberg Java's `expire_snapshots`); or, as pyiceberg's expiry leaves it with no
    /// parent, it is not a table's first snapshot: a sequence number above 1 (format 2 and
    /// 3), or a summary counting files it did not add or removed (format 1 too).
    fn history_expired(&self) -> bool {
        self.chain.first().is_some_and(|s| {
            let count = |key: &str| {
                s.summary()
                    .additional_properties
                    .get(key)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            s.parent_snapshot_id().is_some()
                || s.sequence_number() > 1
                || count("total-data-files") > count("added-data-files")
                || count("deleted-data-files") > 0
                || count("total-delete-files") > count("added-delete-files")
        })
    }

    /// The newest mirrored snapshot is still in the table but no longer in the main
    /// branch's ancestry: the branch was rolled back (or set to another snapshot). A
    /// target cannot undo what it mirrored after that point, so nothing is mirrored.
    fn rolled_back(&self, mirrored: &MirrorState) -> Option<SourceError> {
        let (newest, _) = mirrored.newest.as_ref()?;
        let off_branch = self.position(newest).is_none()
            && self
                .metadata
                .snapshots()
                .any(|s| s.snapshot_id().to_string() == *newest);
        off_branch.then(|| {
            let file = self.store.absolute(&self.path);
            SourceError::new(
                ErrorKind::Unsupported,
                format!(
                    "{file}: snapshot {newest}, the newest the mirror records, is no longer in the main branch's history (the branch was rolled back or set to another snapshot); the mirror cannot undo it, so nothing is mirrored: mirror the table afresh into a new folder"
                ),
            )
        })
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.chain
            .iter()
            .position(|s| s.snapshot_id().to_string() == id)
    }

    /// The change sets after the newest mirrored snapshot of the ancestry, then the error
    /// that stopped them, if any. Given what the mirror deletes as of that snapshot, the
    /// position-delete files live there are not read (see [`resume`]), unless the replay
    /// finds it needs them: then it is done again with them read.
    async fn changes(&self, mirrored: &MirrorState) -> VecReplay {
        if let Some(e) = self.rolled_back(mirrored) {
            return VecReplay::new(Vec::new(), Vec::new(), Some(e));
        }
        let start = self
            .chain
            .iter()
            .rposition(|s| mirrored.commits.contains(&s.snapshot_id().to_string()))
            .map_or(0, |i| i + 1);
        let resume =
            mirrored.deletes.clone().map(Resume::new).filter(|r| {
                start > 0 && r.commit() == self.chain[start - 1].snapshot_id().to_string()
            });
        let mut live = Live::default();
        live.resume = resume;
        let replay = self.walk_from(start, &mut live).await;
        match live.resume.and_then(|r| r.fallback) {
            None => replay,
            Some(why) => {
                tracing::debug!(table = %self.store.location(), %why, "the baseline's position deletes are read after all");
                self.walk_from(start, &mut Live::default()).await
            }
        }
    }

    /// The change sets of the snapshots from `start` on, over the state as of the one
    /// before, read whole into `live` (its position-delete files left to `live.resume`
    /// when there is one); the replay stops where the resume gives up.
    async fn walk_from(&self, start: usize, live: &mut Live) -> VecReplay {
        let walk = Walk {
            store: &self.store,
            metadata: &self.metadata,
            decode: self.decode,
        };
        let mut changes = Vec::new();
        if start > 0 {
            // The state as of the newest mirrored snapshot, read whole.
            if let Err(e) = walk.change(&self.chain[start - 1], live, true).await {
                return VecReplay::new(changes, Vec::new(), Some(e));
            }
            live.baseline_read();
        }
        for (i, snapshot) in self.chain.iter().enumerate().skip(start) {
            let full = i == 0 && self.history_expired();
            let change = walk.change(snapshot, live, full).await;
            if live.resume.as_ref().is_some_and(|r| r.fallback.is_some()) {
                break;
            }
            match change {
                Ok(change) => changes.push(change),
                Err(e) => return VecReplay::new(changes, Vec::new(), Some(e)),
            }
        }
        VecReplay::new(changes, Vec::new(), None)
    }
}

/// The main branch's snapshots from its head back to the oldest kept, oldest first.
fn ancestry(metadata: &TableMetadata) -> Vec<SnapshotRef> {
    let by_id: HashMap<i64, &SnapshotRef> =
        metadata.snapshots().map(|s| (s.snapshot_id(), s)).collect();
    let mut chain = Vec::new();
    let mut next = metadata
        .snapshot_for_ref("main")
        .or_else(|| metadata.current_snapshot())
        .map(|s| s.snapshot_id());
    while let Some(id) = next {
        // A cycle would be corrupt metadata: stop rather than loop.
        let Some(s) = by_id.get(&id).filter(|_| chain.len() < by_id.len()) else {
            break;
        };
        chain.push((*s).clone());
        next = s.parent_snapshot_id();
    }
    chain.reverse();
    chain
}

#[async_trait::async_trait]
impl TableSource for IcebergSource {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    /// Every snapshot of the main branch's ancestry; snapshots before the oldest kept one
    /// expired, as archived commits do.
    fn listing(&self, _: &MirrorState) -> Result<CommitListing, SourceError> {
        Ok(CommitListing {
            commits: self
                .chain
                .iter()
                .map(|s| ListedCommit {
                    id: s.snapshot_id().to_string(),
                    time_ms: s.timestamp_ms(),
                })
                .collect(),
            retained_from: self
                .history_expired()
                .then(|| self.chain[0].snapshot_id().to_string()),
            strictly_ordered: true,
            completed_late: Default::default(),
            gone_unmirrored: Default::default(),
        })
    }

    /// A snapshot of the main branch's ancestry is completed; Iceberg has no pending
    /// commits (a snapshot exists once a metadata file names it).
    fn commit_state(&self, id: &str) -> CommitState {
        match self.position(id) {
            Some(_) => CommitState::Completed,
            None => CommitState::Unknown,
        }
    }

    /// By place in the ancestry; ids not in it (expired, or of another branch) by their
    /// sequence number where the metadata still has them, before those in it.
    fn order(&self, a: &str, b: &str) -> Ordering {
        let key = |id: &str| {
            let sequence = id
                .parse::<i64>()
                .ok()
                .and_then(|n| self.metadata.snapshot_by_id(n))
                .map(|s| s.sequence_number());
            (self.position(id), sequence)
        };
        key(a).cmp(&key(b)).then_with(|| a.cmp(b))
    }

    async fn health(&self) -> Result<SourceHealth, SourceError> {
        let version = (self.metadata.format_version() as u8).to_string();
        let current = self.chain.last().map(|s| s.snapshot_id());
        let line = format!(
            "{}; format version {version}; {} snapshots on main{}; current snapshot {}",
            self.path,
            self.chain.len(),
            if self.history_expired() {
                " (older ones expired)"
            } else {
                ""
            },
            current.map_or("none".into(), |c| c.to_string()),
        );
        Ok(SourceHealth {
            line,
            json: serde_json::json!({
                "metadata": self.path,
                "format_version": version,
                "snapshots": self.chain.len(),
                "current_snapshot": current,
                "history_expired": self.history_expired(),
            }),
            degraded: Vec::new(),
        })
    }

    /// A table created without a snapshot yet: its current schema and spec.
    async fn declared_table(&self) -> Result<Option<DeclaredTable>, SourceError> {
        if !self.chain.is_empty() {
            return Ok(None);
        }
        let schema = self.metadata.current_schema();
        let spec = neutral::partition_spec(self.metadata.default_partition_spec(), schema)
            .map_err(|e| SourceError::new(ErrorKind::Unsupported, format!("{}: {e}", self.path)))?;
        Ok(Some(DeclaredTable {
            format: FORMAT,
            schema: neutral::schema(schema),
            partition_spec: spec,
            ignored_columns: Vec::new(),
        }))
    }

    /// When the replay resumes after a mirrored snapshot that has delete files live (or
    /// whose summary does not say).
    fn wants_mirrored_deletes(&self, mirrored: &MirrorState) -> bool {
        let Some((newest, _)) = &mirrored.newest else {
            return false;
        };
        let Some(at) = self.position(newest).filter(|i| i + 1 < self.chain.len()) else {
            return false;
        };
        let summary = &self.chain[at].summary().additional_properties;
        summary.get("total-delete-files").is_none_or(|n| n != "0")
    }

    fn target_takes(&mut self, takes: TargetTakes) {
        self.decode = !takes.stored_deletion_vectors;
    }

    async fn replay<'a>(&'a self, mirrored: &MirrorState) -> Result<Replay<'a>, SourceError> {
        let changes = self.changes(mirrored).await;
        Ok(Box::new(changes.noted(self.elsewhere())))
    }
}
