//! [`IcebergTarget`]: the Iceberg table as the engine sees it, the
//! [`TableTarget`] contract over this crate's public API (the registry in `xlake-sync`
//! opens it; nothing else there names Iceberg).

use std::collections::HashSet;

use xlake_model::{ChangeSet, DeclaredTable};
use xlake_storage::{Entry, StorageError, TableStore};
use xlake_target::{
    Ancestor, Committed, ErrorKind, Expired, Files, FormatChange, Identified, IdentifyFuture,
    Loaded, MirrorState, MissingList, Orphans, Pointer, Published, Read, Rebuilt, Retention,
    SelfCheck, SetAside, Settled, SnapshotEntry, TableTarget, TargetError, TargetHealth,
    TargetOptions, TargetTakes, TargetView,
};

use crate::layout::{is_metadata_json, metadata_file, parse_hint, METADATA_DIR, VERSION_HINT};
use crate::orphans::{not_written_by_xlake_among, orphan_files, orphans};
use crate::relocation::{aside_dir, foreign_versions, old_history, set_aside};
use crate::summary::{degraded_notes, iso_instant};
use crate::v3::{format_version, version_number};
use crate::{IcebergError, IcebergTable, LoadedTable, NextBase, SyncMetadata};

/// The Iceberg format version of a table created without one asked for.
const DEFAULT_VERSION: u8 = 2;

impl From<IcebergError> for TargetError {
    fn from(e: IcebergError) -> Self {
        let kind = match &e {
            IcebergError::CommitConflict { .. } => ErrorKind::Conflict,
            IcebergError::Relocated { .. } => ErrorKind::Relocated,
            IcebergError::ForeignMetadata { .. } | IcebergError::ForeignCommit { .. } => {
                ErrorKind::Foreign
            }
            IcebergError::Storage(_) => ErrorKind::Storage,
            _ => ErrorKind::Other,
        };
        TargetError::new(kind, e)
    }
}

/// The version a publish builds on: the one loaded, or the one the previous publish wrote
/// (split only when built on).
enum Base {
    Loaded(Box<LoadedTable>),
    Next(Box<NextBase>),
}

/// An Iceberg table in the table's own `metadata/` folder, as a [`TableTarget`].
pub struct IcebergTarget {
    store: TableStore,
    table: IcebergTable,
    asked: Option<u8>,
    base: Option<Base>,
}

impl IcebergTarget {
    /// The Iceberg table at the store's root, written as `options` say; a format version
    /// Iceberg does not have is refused.
    pub fn open(store: TableStore, options: &TargetOptions) -> Result<Self, IcebergError> {
        let mut table = IcebergTable::new(store.clone())
            .with_properties(options.properties.clone())
            .verify_files(options.verify_files);
        if let Some(n) = options.format_version {
            table = table.format_version_number(n)?;
        }
        Ok(Self {
            store,
            table,
            asked: options.format_version,
            base: None,
        })
    }

    fn loaded(&self) -> Option<&LoadedTable> {
        match &self.base {
            Some(Base::Loaded(l)) => Some(l),
            _ => None,
        }
    }

    fn relocated(&self) -> bool {
        self.loaded()
            .is_some_and(|l| self.table.recorded_elsewhere(l).is_some())
    }

    /// The format version written: the table's, or the one asked for if newer.
    fn written_version(&self) -> u8 {
        let found = self
            .loaded()
            .map(|l| version_number(l.metadata.format_version()));
        found.max(self.asked).unwrap_or(DEFAULT_VERSION)
    }
}

#[async_trait::async_trait(?Send)]
impl TableTarget for IcebergTarget {
    async fn load(&mut self, read: Read) -> Result<Option<Loaded>, TargetError> {
        let loaded = match read {
            Read::ForCommit => self.table.load_for_commit().await?,
            Read::ForFirstCommit => self.table.load_for_commit_by_hint().await?,
            Read::AsFound => self.table.load_as_found().await?,
            Read::Whole => self.table.load().await?,
        };
        self.base = loaded.map(|l| Base::Loaded(Box::new(l)));
        Ok(self.loaded().map(|l| Loaded {
            version: l.version,
            relocated_from: self.table.recorded_elsewhere(l).map(str::to_string),
            recorded_at: Some(l.metadata.location().to_string()),
            source_format: l.source_format(),
            format_version: version_number(l.metadata.format_version()),
            snapshots: l.history.entries().len(),
        }))
    }

    fn mirror_state(&self) -> MirrorState {
        match self.loaded().filter(|_| !self.relocated()) {
            Some(loaded) => mirror_state(loaded),
            None => MirrorState::default(),
        }
    }

    fn records_note(&self, key: &str, value: &str) -> bool {
        self.loaded().is_some_and(|l| {
            l.history
                .heads()
                .iter()
                .any(|h| h.notes.0.get(key).is_some_and(|v| v == value))
        })
    }

    async fn prepare(&mut self) -> Result<FormatChange, TargetError> {
        let version = self.written_version();
        let relocated = self.relocated();
        let Some(Base::Loaded(loaded)) = self.base.as_mut() else {
            return Ok(FormatChange::default());
        };
        let from = version_number(loaded.metadata.format_version());
        let mut change = FormatChange {
            from,
            to: from,
            version: None,
        };
        // A rebuild keeps the relocated history's version (a v3 mirror's deletion vectors
        // must not fall back to a v2 table).
        if relocated {
            if let Ok(v) = format_version(version) {
                self.table = self.table.clone().format_version(v);
            }
            return Ok(change);
        }
        // A writer that died (or lost the reply) between its metadata file and the hint
        // left readers that trust the hint on an old version: point it right first.
        self.table.heal_hint(loaded).await?;
        if let Some(upgraded) = self.table.upgrade(loaded).await? {
            change.to = version_number(upgraded.metadata.format_version());
            change.version = Some(upgraded.version);
            **loaded = upgraded;
        }
        Ok(change)
    }

    async fn upgrade(&mut self) -> Result<FormatChange, TargetError> {
        if self.load(Read::Whole).await?.is_none() {
            let to = self.asked.unwrap_or(DEFAULT_VERSION);
            return Err(IcebergError::FormatVersion {
                table: self.store.location().to_string(),
                asked: to,
                reason: format!("there is no Iceberg metadata to upgrade yet; `xlake sync --format-version {to}` writes a version-{to} mirror"),
            }
            .into());
        }
        self.prepare().await
    }

    fn takes(&self) -> TargetTakes {
        // A v3 table takes deletion vectors as they are.
        TargetTakes {
            stored_deletion_vectors: self.written_version() >= 3,
        }
    }

    async fn live_files(
        &self,
        reads_saved: usize,
    ) -> Result<Option<Vec<(String, u64)>>, TargetError> {
        let Some(loaded) = self.loaded().filter(|_| !self.relocated()) else {
            return Ok(None);
        };
        // A manifest costs about as much as four small commit files to read and decode.
        Ok(self.table.current_files(loaded, reads_saved / 4).await?)
    }

    async fn read_ahead(&self) {
        if let Some(loaded) = self.loaded().filter(|_| !self.relocated()) {
            self.table.read_ahead_list(loaded).await;
        }
    }

    async fn publish(&mut self, batch: &[&ChangeSet], last: bool) -> Published {
        let on = match self.base.take() {
            Some(Base::Loaded(l)) => Some(*l),
            Some(Base::Next(n)) => Some((*n).load()),
            None => None,
        };
        let mut done = self.table.commit_run_batch(on, batch, last).await;
        self.base = done.table.take().map(|n| Base::Next(Box::new(n)));
        Published {
            committed: done
                .committed
                .into_iter()
                .map(|c| Committed {
                    version: c.version,
                    snapshot_id: c.snapshot_id,
                    timestamp_ms: c.timestamp_ms,
                    degraded: c.degraded,
                })
                .collect(),
            error: done.error.map(TargetError::from),
        }
    }

    async fn create_empty(&mut self, declared: &DeclaredTable) -> Result<Option<u64>, TargetError> {
        Ok(self.table.create_empty(declared).await?)
    }

    async fn expire(&self, retention: &Retention) -> Result<Expired, TargetError> {
        Ok(self.table.expire(retention).await?)
    }

    fn view(&self) -> TargetView {
        let Some(loaded) = self.loaded() else {
            return TargetView::default();
        };
        TargetView {
            snapshots: snapshot_entries(loaded),
            ancestry: loaded
                .ancestry()
                .into_iter()
                .map(|(snapshot_id, _, sync)| Ancestor {
                    snapshot_id,
                    source_commit: sync.and_then(|m| m.source_identifier),
                })
                .collect(),
        }
    }

    async fn files_at(&self, snapshot_id: i64) -> Result<Option<Vec<(String, u64)>>, TargetError> {
        match self.loaded() {
            Some(l) => Ok(self.table.files_at(&l.metadata, snapshot_id).await?),
            None => Ok(None),
        }
    }

    async fn self_check(&self) -> Result<SelfCheck, TargetError> {
        let Some(loaded) = self.loaded() else {
            return Ok(SelfCheck::default());
        };
        check_hint(&self.store, loaded.version).await?;
        // (A relocated table's files are named at the old place: nothing to look up.)
        if self.relocated() {
            return Ok(SelfCheck::default());
        }
        Ok(SelfCheck {
            missing_manifest_lists: missing_lists(&self.store, loaded).await?,
            ..SelfCheck::default()
        })
    }

    async fn health(&self) -> Result<TargetHealth, TargetError> {
        health(self).await
    }

    async fn set_aside_relocated(&self) -> Result<SetAside, TargetError> {
        set_aside_relocated(&self.store).await
    }

    async fn orphans(&self, cutoff_ms: i64) -> Result<Orphans, TargetError> {
        let found = orphans(&self.store, cutoff_ms).await?;
        Ok(Orphans {
            files: found.files,
            others: found.others,
            strays: found.strays,
        })
    }

    async fn exists(&self) -> Result<bool, TargetError> {
        Ok(self.store.size(VERSION_HINT).await?.is_some()
            || self
                .store
                .list_dir(METADATA_DIR)
                .await?
                .iter()
                .any(|e| is_metadata_json(&e.path)))
    }

    fn settled_record(&self, tip: &str, source_commits: usize) -> Option<Settled> {
        let (version, metadata, snapshots) = match self.base.as_ref()? {
            Base::Loaded(l) if !self.relocated() => {
                (l.version, &l.metadata, l.history.entries().len())
            }
            Base::Loaded(_) => return None,
            Base::Next(n) => (n.version(), n.metadata(), n.snapshots()),
        };
        let current = metadata.current_snapshot()?;
        let sync = SyncMetadata::from_summary(&current.summary().additional_properties)?;
        Some(Settled {
            version,
            source_format: sync.source_table_format?,
            newest: sync.source_identifier,
            source_tip: tip.to_string(),
            source_commits,
            snapshots,
            format_version: version_number(metadata.format_version()),
        })
    }

    async fn remember_settled(&self, settled: &Settled) -> Result<(), TargetError> {
        Ok(crate::ops::settled::write(&self.store, settled).await?)
    }

    async fn settled(&self) -> Result<Option<Settled>, TargetError> {
        Ok(crate::ops::settled::read(&self.store).await?)
    }

    fn pointer(&self) -> Option<Pointer> {
        self.loaded().map(|l| Pointer {
            version: l.version,
            uuid: l.metadata.uuid().to_string(),
            snapshot_id: l.metadata.current_snapshot_id(),
        })
    }

    fn identify(&self, name: &str, uuid: &str) -> IdentifyFuture {
        let (store, name, uuid) = (self.store.clone(), name.to_string(), uuid.to_string());
        Box::pin(async move { Ok(identify(&store, &name, &uuid).await?) })
    }
}

/// What `loaded` records, for the source: the source commits its snapshots name, and the
/// newest of them with its summary (where the source's notes are).
fn mirror_state(loaded: &LoadedTable) -> MirrorState {
    let synced = loaded.mirrored();
    let newest = synced.last().and_then(|(id, source_id)| {
        // The whole summary when parsed (the current snapshot), else the notes a head keeps
        // (every `xlake.*` key: all a source reads back).
        let notes = match loaded.metadata.snapshot_by_id(*id) {
            Some(s) => s.summary().additional_properties.clone(),
            None => loaded.history.head(*id)?.notes.0.clone(),
        };
        let notes = notes.into_iter().collect();
        Some((source_id.clone()?, notes))
    });
    let first = synced.iter().find_map(|(_, id)| id.clone());
    MirrorState {
        commits: synced.into_iter().filter_map(|(_, id)| id).collect(),
        first,
        newest,
        live_files: None,
        source_state: loaded.source_state().map(str::to_string),
        deletes: None,
    }
}

/// Every parsed snapshot of `loaded`, oldest (by sequence number) first.
fn snapshot_entries(loaded: &LoadedTable) -> Vec<SnapshotEntry> {
    let m = &loaded.metadata;
    let current = m.current_snapshot().map(|s| s.snapshot_id());
    let mut list: Vec<SnapshotEntry> = m
        .snapshots()
        .map(|s| {
            let sync = SyncMetadata::from_summary(&s.summary().additional_properties);
            SnapshotEntry {
                sequence_number: s.sequence_number(),
                snapshot_id: s.snapshot_id(),
                parent_snapshot_id: s.parent_snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
                time: iso_instant(s.timestamp_ms()),
                operation: s.summary().operation.as_str().to_string(),
                current: current == Some(s.snapshot_id()),
                source_format: sync.as_ref().and_then(|m| m.source_table_format.clone()),
                source_commit: sync.as_ref().and_then(|m| m.source_identifier.clone()),
                source_operation: sync.and_then(|m| m.latest_table_operation_identifier),
            }
        })
        .collect();
    list.sort_by_key(|s| s.sequence_number);
    list
}

/// Readers other than Java read exactly the hint: it must name the current version.
async fn check_hint(store: &TableStore, version: u64) -> Result<(), StorageError> {
    let hint = store.get(VERSION_HINT).await.map_err(|e| match e {
        StorageError::NotFound { location } => StorageError::InvalidLocation {
            location,
            reason: "version-hint.text is missing: pyiceberg and DuckDB cannot find the current metadata".into(),
        },
        other => other,
    })?;
    match hint_problem(&hint, version) {
        Some(reason) => Err(StorageError::InvalidLocation {
            location: store.absolute(VERSION_HINT),
            reason,
        }),
        None => Ok(()),
    }
}

/// What is wrong with the hint `bytes` when the current metadata is `vN` (`version`).
fn hint_problem(bytes: &[u8], version: u64) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    match parse_hint(bytes) {
        Ok(hint) if hint.names_exactly(version) => None,
        Ok(hint) if hint.version == version => Some(format!(
            "holds {text:?}, not exactly \"{version}\": readers that read the hint verbatim (pyiceberg, DuckDB) cannot find the current metadata; a sync rewrites it"
        )),
        _ => Some(format!("holds {text:?} but the current metadata is v{version}: readers that trust the hint see a stale table")),
    }
}

/// The snapshots of the current ancestry whose manifest list is not in storage: lists in
/// `metadata/` looked up in one listing of it, any other one by itself.
async fn missing_lists(
    store: &TableStore,
    loaded: &LoadedTable,
) -> Result<Vec<MissingList>, StorageError> {
    let names = store.list_names(METADATA_DIR).await?;
    let listed: HashSet<&str> = names.iter().collect();
    let mut missing = Vec::new();
    for (snapshot_id, _, _) in loaded.ancestry() {
        let head = loaded.history.head(snapshot_id);
        let Some(list) = head.and_then(|h| h.manifest_list.as_deref()) else {
            continue;
        };
        let in_folder = store
            .relative(list)
            .and_then(|rel| rel.strip_prefix(METADATA_DIR)?.strip_prefix('/'))
            .filter(|name| !name.contains('/'));
        let there = match in_folder {
            Some(name) => listed.contains(name),
            None => store.size(list).await?.is_some(),
        };
        if !there {
            missing.push(MissingList {
                snapshot_id,
                manifest_list: list.to_string(),
            });
        }
    }
    Ok(missing)
}

fn files(entries: &[Entry]) -> Files {
    Files {
        files: entries.len(),
        bytes: entries.iter().map(|e| e.size).sum(),
    }
}

/// The Iceberg side of `inspect`, for the loaded version (as found: a copied or moved
/// table is reported, not refused).
async fn health(target: &IcebergTarget) -> Result<TargetHealth, TargetError> {
    let store = &target.store;
    let (metadata, unnamed) = store.list_recursive_lenient(METADATA_DIR).await?;
    let mut not_written_by_xlake = not_written_by_xlake_among(&metadata);
    not_written_by_xlake.extend(unnamed);
    let Some(loaded) = target.loaded() else {
        return Ok(TargetHealth {
            not_written_by_xlake,
            ..Default::default()
        });
    };
    // The orphan listing reads every version, and refuses at the first one written for
    // another location (the current one, or one a rebuild has yet to set aside).
    let (orphans, relocated_from) = match target.table.recorded_elsewhere(loaded) {
        Some(recorded) => (0, vec![recorded.to_string()]),
        None => match orphan_files(store, i64::MAX).await {
            Ok(found) => (found.len(), Vec::new()),
            Err(IcebergError::Relocated { recorded, .. }) => (0, vec![recorded]),
            // Another writer's metadata file: counted under "metadata/ clash".
            Err(IcebergError::ForeignCommit { .. }) => (0, Vec::new()),
            Err(e) => return Err(e.into()),
        },
    };
    let m = &loaded.metadata;
    let degraded = m.current_snapshot().map_or(Vec::new(), |current| {
        degraded_notes(&current.summary().additional_properties)
    });
    let current_path = metadata_file(loaded.version);
    Ok(TargetHealth {
        metadata: files(&metadata),
        version: Some(loaded.version),
        current_metadata_bytes: metadata
            .iter()
            .find(|e| e.path == current_path)
            .map_or(0, |e| e.size),
        snapshots: m.snapshots().count(),
        manifests: match target.relocated() {
            false => target.table.current_manifests().await?,
            true => 0,
        },
        orphan_files: orphans,
        relocated_from,
        not_written_by_xlake,
        partitioning: partitioning(loaded),
        degraded,
    })
}

/// Partition fields of the current spec (`transform(column)`).
fn partitioning(loaded: &LoadedTable) -> Vec<String> {
    let m = &loaded.metadata;
    m.default_partition_spec()
        .fields()
        .iter()
        .map(|f| {
            let column = m
                .current_schema()
                .name_by_field_id(f.source_id)
                .unwrap_or("?");
            format!("{}({column})", f.transform)
        })
        .collect()
}

/// Once the table's current version is its own, move every version written for another
/// location, and the files it names, aside.
async fn set_aside_relocated(store: &TableStore) -> Result<SetAside, TargetError> {
    let table = IcebergTable::new(store.clone());
    match table.load_as_found().await? {
        Some(l) => {
            if let Some(recorded) = table.recorded_elsewhere(&l) {
                return Ok(SetAside::StillElsewhere(recorded.to_string()));
            }
        }
        None => return Ok(SetAside::Nothing),
    }
    let foreign = foreign_versions(store).await?;
    if foreign.is_empty() {
        return Ok(SetAside::Nothing);
    }
    let files = old_history(store, &foreign).await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let dir = aside_dir(now_ms);
    let moved = set_aside(store, &files, &dir).await?;
    let mut old_locations: Vec<String> = foreign.into_iter().map(|v| v.recorded).collect();
    old_locations.sort();
    old_locations.dedup();
    tracing::info!(table = %store.location(), aside = %store.absolute(&dir), files = moved.len(), "set the relocated metadata aside");
    Ok(SetAside::Moved(Rebuilt {
        old_locations,
        set_aside_in: store.absolute(&dir),
        files: moved.len(),
    }))
}

/// The file `name` of the table's `metadata/` folder, against the table's `uuid`.
async fn identify(store: &TableStore, name: &str, uuid: &str) -> Result<Identified, StorageError> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "table-uuid")]
        uuid: Option<String>,
    }
    let bytes = match store.get(&format!("{METADATA_DIR}/{name}")).await {
        Ok(bytes) => bytes,
        Err(StorageError::NotFound { .. }) => return Ok(Identified::Missing),
        Err(e) => return Err(e),
    };
    let found = serde_json::from_slice::<Head>(&bytes)
        .ok()
        .and_then(|h| h.uuid);
    Ok(match found {
        Some(u) if u.eq_ignore_ascii_case(uuid) => Identified::Ours,
        _ => Identified::Stranger,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_race_is_a_conflict_and_keeps_its_message() {
        let e = TargetError::from(IcebergError::CommitConflict {
            table: "/t".into(),
            version: 3,
        });
        assert!(e.is_conflict());
        assert!(e.inner().downcast_ref::<IcebergError>().is_some());
        assert_eq!(
            e.to_string(),
            IcebergError::CommitConflict {
                table: "/t".into(),
                version: 3
            }
            .to_string()
        );
    }
}
