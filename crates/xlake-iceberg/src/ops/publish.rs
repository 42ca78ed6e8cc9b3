//! The publisher: how a planned version becomes the table's. The commit point is the
//! put-if-absent of `vN.metadata.json` (a writer that loses the race gets
//! [`IcebergError::CommitConflict`] and re-plans, never overwrites); `version-hint.text`
//! follows it. Files a planner wrote for a version that will never be published (the
//! journal of a commit that failed or lost) are abandoned: deleted again, best effort.
//! Metadata files that fell out of the metadata log are deleted after the commit when the
//! table asks for it.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use iceberg::spec::{MetadataLog, TableMetadata};
use xlake_model::DeclaredTable;
use xlake_storage::{Journal, PutOutcome, PutPayload, RetryPolicy, StorageError};

use crate::error::{IcebergError, Result};
use crate::ops::plan::Staged;
use crate::ops::table::{IcebergTable, LoadedTable, DELETE_AFTER_COMMIT, FILE_CHECK_CONCURRENCY};
use crate::spec::encode::metadata_parts;
use crate::spec::history::{split, History};
use crate::spec::layout::{hint_text, metadata_file, metadata_file_name, SETTLED, VERSION_HINT};

/// What one commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// N of the new `vN.metadata.json`.
    pub version: u64,
    /// The new snapshot.
    pub snapshot_id: i64,
    /// Its `timestamp-ms`.
    pub timestamp_ms: i64,
    /// Entries of [`DEGRADED`](crate::spec::fidelity::DEGRADED) this snapshot added (columns of
    /// its files first found in a layout some readers misread).
    pub degraded: Vec<String>,
}

/// What a batch commit did: the snapshots published (all in one version), and the error
/// that ended the batch early, if any.
#[derive(Debug, Default)]
pub struct Batch {
    /// One per change set committed, in order.
    pub committed: Vec<Committed>,
    /// Why the rest was not committed.
    pub error: Option<IcebergError>,
    /// The version published, for the next batch to build on without reading it.
    pub table: Option<NextBase>,
}

impl Batch {
    pub(crate) fn failed(error: IcebergError) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }
}

/// A batch's version to publish.
#[derive(Debug)]
pub(crate) struct Published {
    /// N of its `vN.metadata.json`.
    pub(crate) version: u64,
    /// Its metadata (the working snapshots).
    pub(crate) metadata: TableMetadata,
    /// The snapshots carried beside it.
    pub(crate) history: Arc<History>,
    /// The metadata-log entries that fell out.
    pub(crate) expired_logs: Vec<MetadataLog>,
}

/// Why [`IcebergTable::publish`] failed, and whether the `vN` may exist all the same (a
/// failure of its write or after it).
pub(crate) struct Unpublished {
    pub(crate) error: IcebergError,
    pub(crate) maybe_created: bool,
}

impl Unpublished {
    /// Refused or lost before the `vN` was written: nothing refers to what was staged.
    fn before(error: IcebergError) -> Self {
        Self {
            error,
            maybe_created: false,
        }
    }

    /// Failed at or after the write: the `vN` may exist, and refer to what was staged.
    fn after(error: IcebergError) -> Self {
        Self {
            error,
            maybe_created: true,
        }
    }
}

impl IcebergTable {
    /// The commit point: create `metadata/v{version}.metadata.json` only if nobody else did,
    /// then point the hint at it. Returns the version.
    /// `history` carries the snapshots `metadata` was loaded without (see
    /// [`crate::spec::history`]); they are written back as they were read.
    pub(crate) async fn publish(
        &self,
        version: u64,
        metadata: &TableMetadata,
        history: &History,
    ) -> std::result::Result<PutPayload, Unpublished> {
        self.publish_after(version, metadata, history, async { Ok(()) })
            .await
    }

    /// [`Self::publish`] once `written` has succeeded: the writes the version refers to
    /// (a [`TableStore::deferring`](xlake_storage::TableStore::deferring) handle's flush),
    /// made side by side with the check before the commit point, in one round trip.
    pub(crate) async fn publish_after(
        &self,
        version: u64,
        metadata: &TableMetadata,
        history: &History,
        written: impl std::future::Future<Output = Result<()>>,
    ) -> std::result::Result<PutPayload, Unpublished> {
        // Compact, as Java writes it: every reader loads every `vN` whole, and indentation
        // was a fifth of its bytes. The carried text goes out as the bytes it was read as.
        let file = metadata_file_name(version);
        let parts = metadata_parts(metadata, history, Some(&file))
            .map_err(|e| Unpublished::before(self.corrupt(&metadata_file(version), e)))?;
        let body: PutPayload = parts.into_iter().collect();
        // Refused or failed before the commit point: nothing refers to what was written.
        let (checked, written) = futures::join!(self.check_predecessor(version), written);
        checked.and(written).map_err(Unpublished::before)?;
        self.publish_bytes(version, body.clone()).await?;
        Ok(body)
    }

    /// The commit point of a `vN.metadata.json` already encoded, once its predecessor has
    /// been checked ([`Self::publish_after`]).
    async fn publish_bytes(
        &self,
        version: u64,
        body: PutPayload,
    ) -> std::result::Result<u64, Unpublished> {
        if version == 1 {
            self.check_folder_is_ours()
                .await
                .map_err(Unpublished::before)?;
            // A history started afresh (its metadata deleted, the record left): the record
            // of an old version of the same number must not pass for the new one's.
            self.forget_settled().await.map_err(Unpublished::before)?;
        }
        self.put_version(version, body).await?;
        self.write_hint(version).await.map_err(Unpublished::after)?;
        Ok(version)
    }

    /// Delete the settled record ([`SETTLED`]), if there is one.
    pub(crate) async fn forget_settled(&self) -> Result<()> {
        Ok(self.store.delete(SETTLED).await?)
    }

    /// The version `version` follows must still be there: if metadata retention deleted it
    /// meanwhile, a put-if-absent could succeed beside the real history.
    async fn check_predecessor(&self, version: u64) -> Result<()> {
        if version > 1
            && self
                .store
                .size(&metadata_file(version - 1))
                .await?
                .is_none()
        {
            return Err(self.conflict(version));
        }
        Ok(())
    }

    /// Before a table's first version: `metadata/` holds nothing but files xlake writes (a
    /// commit's own manifests, or those of an earlier attempt). A source that keeps files
    /// there (a Hudi partition or a folder named `metadata`) is refused: its files would
    /// pass for the mirror's. (Later, each added data file is checked instead.)
    async fn check_folder_is_ours(&self) -> Result<()> {
        match crate::ops::orphans::not_written_by_xlake(&self.store)
            .await?
            .first()
        {
            Some(file) => Err(IcebergError::MetadataFolderTaken {
                table: self.table(),
                file: self.store.absolute(file),
            }),
            None => Ok(()),
        }
    }

    /// `error`, or a lost race when another writer has published `next` meanwhile: what
    /// failed may be a file that writer's expiry deleted, and a re-plan reads its state.
    pub(crate) async fn lost_race_or(&self, error: IcebergError, next: u64) -> IcebergError {
        match self.version_exists(next).await {
            Ok(true) => self.conflict(next),
            Err(folder @ IcebergError::NotAMetadataFile { .. }) => folder,
            _ => error,
        }
    }

    /// Before the commit point: the base's current manifest list, which the new version
    /// carries over (an append carries it unread), must still exist: one request. The
    /// manifests inside it are not looked up one by one (a request each, on every commit of
    /// a table of a thousand manifests): cleanup never deletes what the current version
    /// names, nor anything younger than a day unless told no writer runs. A list gone
    /// because another writer published meanwhile (an expiry) is a lost race.
    pub(crate) async fn check_carried(&self, base: Option<&LoadedTable>) -> Result<()> {
        let Some(base) = base else {
            return Ok(());
        };
        let Some(snapshot) = base.metadata.current_snapshot() else {
            return Ok(());
        };
        let file = snapshot.manifest_list().to_string();
        if self.store.size(&file).await?.is_some() {
            return Ok(());
        }
        let missing = IcebergError::CarriedFileMissing {
            table: self.table(),
            version: base.version,
            file,
        };
        Err(self.lost_race_or(missing, base.version + 1).await)
    }

    fn conflict(&self, version: u64) -> IcebergError {
        IcebergError::CommitConflict {
            table: self.table(),
            version,
        }
    }

    /// Put-if-absent of the `vN` itself. (`put_if_absent` tells our own bytes, resent after
    /// a lost reply, from another writer's.)
    async fn put_version(
        &self,
        version: u64,
        body: PutPayload,
    ) -> std::result::Result<(), Unpublished> {
        let path = metadata_file(version);
        let put = self.store.put_if_absent(&path, body.clone()).await;
        if !matches!(put, Ok(PutOutcome::Created)) {
            // A folder or a link to nothing of that name is no other writer's version
            // (nothing was written).
            if let Some(obstacle) = self.not_a_metadata_file(version) {
                return Err(Unpublished::before(obstacle));
            }
            // Nor is a link to a file: writers put a file there, never a link (one to
            // another table's version was read as this table's, "copied or moved").
            if self.store.is_local_link(&path) {
                let link = self.not_a_metadata_file_as(version, "a symbolic link");
                return Err(Unpublished::before(link));
            }
        }
        let e = match put {
            Ok(PutOutcome::Created) => return Ok(()),
            Ok(PutOutcome::AlreadyExists) => {
                return Err(Unpublished::before(self.conflict(version)))
            }
            Err(e) => e,
        };
        // A failed write may have landed all the same: read it back.
        match self.store.get(&path).await {
            Ok(there) if xlake_storage::same(&there, &body) => Ok(()),
            Ok(_) => Err(Unpublished::before(self.conflict(version))),
            // Not there: over a network the write may still land later; on local disk a
            // failed write did not happen.
            Err(StorageError::NotFound { .. }) => Err(Unpublished {
                error: e.into(),
                maybe_created: !self.store.failed_writes_are_definite(),
            }),
            // On a local disk, something other than a regular file there (a FIFO, a link)
            // is no write of ours: nothing of this version landed.
            Err(_) if self.store.not_regular_local_file(&path) => {
                Err(Unpublished::before(e.into()))
            }
            // Cannot tell: keep what the version would refer to.
            Err(_) => Err(Unpublished::after(e.into())),
        }
    }

    /// Delete files written for snapshots that will never be published; best effort, a
    /// few at a time and without retries, so that a store that is down does not hold up
    /// the error (what is left is an orphan for `xlake cleanup --orphans`).
    pub(crate) async fn abandon(&self, paths: Vec<String>) {
        let store = self.store.clone().with_retry(RetryPolicy::none());
        futures::stream::iter(paths)
            .for_each_concurrent(FILE_CHECK_CONCURRENCY, |path| {
                let store = &store;
                async move {
                    if let Err(e) = store.delete(&path).await {
                        tracing::warn!(table = %self.table(), path = %path, error = %e, "could not delete a file of an abandoned commit");
                    }
                }
            })
            .await;
    }

    /// Point `version-hint.text` at `version`, or at a newer version another writer made:
    /// after each write, if a newer `vN` exists the hint is written again, so the last
    /// writer of the hint always leaves the newest version (pyiceberg and DuckDB read
    /// exactly the hint; a stale one shows them an old table).
    async fn write_hint(&self, mut version: u64) -> Result<()> {
        loop {
            self.store
                .put(VERSION_HINT, Bytes::from(hint_text(version)))
                .await?;
            let mut newest = version;
            // A folder (a FIFO, a link to nothing) at the next name is no version: the
            // hint is not pointed at it, and what was just published stands (the next
            // commit, or load, refuses it, naming it).
            loop {
                match self.version_exists(newest + 1).await {
                    Ok(true) => newest += 1,
                    Ok(false) | Err(IcebergError::NotAMetadataFile { .. }) => break,
                    Err(e) => return Err(e),
                }
            }
            if newest == version {
                return Ok(());
            }
            version = newest;
        }
    }

    /// Point a stale `version-hint.text` at the loaded version, or a newer one (see
    /// [`LoadedTable::hint_stale`]); nothing to do otherwise. The versions after the loaded
    /// one are looked at before the hint is written: one that cannot be read (a FIFO at
    /// `v(N+1).metadata.json`, which no listing shows) fails the sync naming it, with the
    /// metadata left as it was.
    pub async fn heal_hint(&self, loaded: &mut LoadedTable) -> Result<()> {
        if loaded.hint_stale {
            let newest = self.newest_from(loaded.version).await?;
            tracing::warn!(table = %self.table(), version = newest, "version-hint.text was stale; rewriting it");
            self.write_hint(newest).await?;
            loaded.hint_stale = false;
        }
        Ok(())
    }

    /// Delete metadata files that fell out of the metadata log, if the table asks for it.
    /// The commit has already happened, so a failure here is logged, not returned.
    pub(crate) async fn expire_metadata_files(
        &self,
        metadata: &TableMetadata,
        expired: &[MetadataLog],
    ) {
        let enabled = metadata
            .properties()
            .get(DELETE_AFTER_COMMIT)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !enabled {
            return;
        }
        for log in expired {
            if let Err(e) = self.store.delete(&log.metadata_file).await {
                tracing::warn!(table = %self.table(), file = %log.metadata_file, error = %e, "could not delete expired metadata file");
            }
        }
    }

    /// Publish a batch's `metadata` as `version`, and record in `batch` the snapshots it
    /// holds (`staged`: source commit, snapshot id, time, degraded entries added). When it
    /// is not published, the batch's files (`journal`) are abandoned unless the `vN` may
    /// exist all the same, and the error of publishing wins over a later one.
    pub(crate) async fn publish_batch(
        &self,
        batch: &mut Batch,
        published: Published,
        (staged, written): (Vec<Staged>, impl std::future::Future<Output = Result<()>>),
        journal: &Journal,
    ) {
        let Published {
            version,
            metadata,
            history,
            expired_logs,
        } = published;
        let body = match self
            .publish_after(version, &metadata, &history, written)
            .await
        {
            Ok(body) => body,
            Err(u) => {
                // Lost race or refused before the write: nothing refers to the batch's
                // files. (After an ambiguous failure they stay: the `vN` may exist.)
                if !u.maybe_created {
                    self.abandon(journal.since(0)).await;
                }
                batch.error = Some(u.error);
                return;
            }
        };
        self.expire_metadata_files(&metadata, &expired_logs).await;
        for Staged {
            commit,
            snapshot_id,
            timestamp_ms,
            degraded,
        } in staged
        {
            tracing::info!(table = %self.table(), commit = %commit, version, snapshot_id, "committed Iceberg snapshot");
            for entry in &degraded {
                tracing::warn!(table = %self.table(), commit = %commit, "degraded: {entry}");
            }
            batch.committed.push(Committed {
                version,
                snapshot_id,
                timestamp_ms,
                degraded,
            });
        }
        batch.table = Some(NextBase {
            version,
            body,
            metadata,
            history,
        });
    }
}

impl IcebergTable {
    /// Create the table with `declared`'s schema and partition spec and no snapshot, for a
    /// source table with no completed commit yet: readers then find an empty table rather
    /// than none. Returns the version written; `None` when the table exists already (or
    /// another writer created it meanwhile).
    pub async fn create_empty(&self, declared: &DeclaredTable) -> Result<Option<u64>> {
        if self.load().await?.is_some() {
            return Ok(None);
        }
        self.refuse_empty(declared)?;
        self.store.verify_put_if_absent().await?;
        let metadata = self.empty_table(declared)?;
        match self.publish(1, &metadata, &Default::default()).await {
            Ok(_) => {
                let version = 1;
                tracing::info!(table = %self.table(), version, "created the Iceberg table without a snapshot: the source has no completed commit");
                Ok(Some(version))
            }
            Err(Unpublished {
                error: IcebergError::CommitConflict { .. },
                ..
            }) => Ok(None),
            Err(u) => Err(u.error),
        }
    }
}

/// The version a batch published, for the next batch to build on: split from the bytes
/// written, as a load for a commit would (so a long backfill does not re-serialize every
/// snapshot it made), but only when a next batch asks ([`Self::load`]): an in-commit run
/// has none.
#[derive(Debug)]
pub struct NextBase {
    version: u64,
    body: PutPayload,
    metadata: TableMetadata,
    history: Arc<History>,
}

impl NextBase {
    /// N of the published version.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Its metadata (the working snapshots, the current one among them).
    pub fn metadata(&self) -> &TableMetadata {
        &self.metadata
    }

    /// How many snapshots it retains: those carried and those built, each once.
    pub fn snapshots(&self) -> usize {
        let known: std::collections::HashSet<i64> =
            self.history.entries().iter().map(|e| e.id).collect();
        let added = self.metadata.snapshots().map(|s| s.snapshot_id());
        known.len() + added.filter(|id| !known.contains(id)).count()
    }

    /// The published version as a loaded table.
    pub fn load(self) -> LoadedTable {
        let file = metadata_file_name(self.version);
        let (metadata, history) = match split(&Bytes::from(self.body), Some(&file)) {
            Ok(split) => split,
            Err(_) => {
                let history = self.history.with_added(&self.metadata);
                (self.metadata, history)
            }
        };
        LoadedTable {
            version: self.version,
            metadata,
            history: Arc::new(history),
            hint_stale: false,
        }
    }
}
