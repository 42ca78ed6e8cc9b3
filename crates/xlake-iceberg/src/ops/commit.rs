//! A commit: change sets planned one by one on a draft ([`crate::ops::plan`]), then
//! published together ([`crate::ops::publish`]) in one new `vN.metadata.json`, after an
//! upgrade of the format version when one is asked for ([`crate::ops::v3`]).

use xlake_model::ChangeSet;
use xlake_storage::Journal;

use crate::error::{IcebergError, Result};
use crate::ops::plan::{Draft, Staged};
use crate::ops::publish::{Batch, Committed, Published};
use crate::ops::table::{IcebergTable, LoadedTable, PUT_IF_ABSENT_VERIFIED};
use crate::spec::layout::METADATA_DIR;
use crate::spec::manifest_list::ListFile;

impl IcebergTable {
    /// Commit each change set as its own snapshot, in order.
    pub async fn commit_all(&self, changes: &[ChangeSet]) -> Result<Vec<Committed>> {
        let mut out = Vec::with_capacity(changes.len());
        for change in changes {
            out.push(self.commit(change).await?);
        }
        Ok(out)
    }

    /// Commit one change set as one snapshot (schema, spec and file changes together in one
    /// new `vN.metadata.json`), on the table as it is now.
    pub async fn commit(&self, change: &ChangeSet) -> Result<Committed> {
        let batch = self
            .commit_batch_on(self.load_for_commit().await?, &[change])
            .await;
        match batch.error {
            Some(e) => Err(e),
            None => batch.committed.into_iter().next().ok_or_else(|| {
                self.corrupt(METADATA_DIR, "a commit of one change set wrote nothing")
            }),
        }
    }

    /// Commit change sets as consecutive snapshots, one per change set, published together
    /// in one new `vN.metadata.json` (a backfill writes one metadata file per batch instead
    /// of per commit, since each holds every snapshot), on `base`: a version this process
    /// has loaded (`None`: no metadata yet). A writer that published after `base` was
    /// loaded makes the put-if-absent of the next version fail: the result is then
    /// [`IcebergError::CommitConflict`](crate::IcebergError::CommitConflict), and the caller re-plans. A change set that cannot
    /// be committed ends the batch: the ones before it are published, and its error
    /// returned beside them. A `base` written for another location (a copied or moved
    /// table, from [`Self::load_as_found`]) is replaced, not built on: the batch starts a
    /// new history in the version after it (`xlake sync --rebuild`).
    pub async fn commit_batch_on(
        &self,
        base: Option<LoadedTable>,
        changes: &[&ChangeSet],
    ) -> Batch {
        self.commit_run_batch(base, changes, true).await
    }

    /// [`Self::commit_batch_on`] for one batch of a run of batches: unless it is the
    /// run's `last`, it writes no path index (a backfill of many batches would otherwise
    /// write the growing index whole in each; see docs/design.md, "The path index").
    pub async fn commit_run_batch(
        &self,
        base: Option<LoadedTable>,
        changes: &[&ChangeSet],
        last: bool,
    ) -> Batch {
        // Atomic only on a store whose put-if-absent works (or with one writer, by the
        // operator's word); checked before anything is written, unless the table records
        // that it was checked on this store before.
        if let Some(recorded) = base
            .as_ref()
            .and_then(|l| l.metadata.properties().get(PUT_IF_ABSENT_VERIFIED))
        {
            self.store.put_if_absent_recorded(recorded);
        }
        if let Err(e) = self.store.verify_put_if_absent().await {
            return Batch::failed(e.into());
        }
        match self.upgraded(base).await {
            Ok(base) => self.commit_batch_inner(base, changes, !last).await,
            Err(e) => Batch::failed(e),
        }
    }

    /// `base`, upgraded first in a version of its own when a newer format version is asked
    /// for (see [`Self::upgrade`], the one upgrade path); a base written for another
    /// location is replaced, not upgraded.
    async fn upgraded(&self, base: Option<LoadedTable>) -> Result<Option<LoadedTable>> {
        let Some(loaded) = base
            .as_ref()
            .filter(|l| self.recorded_elsewhere(l).is_none())
        else {
            return Ok(base);
        };
        Ok(self.upgrade(loaded).await?.or(base))
    }

    /// Stage `changes` in turn on `draft` until one fails: the snapshots staged, the
    /// length of `journal` after the last of them (what follows is the failed change's),
    /// and the error.
    async fn stage_each(
        &self,
        changes: &[&ChangeSet],
        draft: &mut Draft<'_>,
        journal: &Journal,
    ) -> (Vec<Staged>, usize, Option<IcebergError>) {
        let mut staged = Vec::new();
        let mut kept = 0;
        let mut error = None;
        for change in changes {
            let last_list = kept_list(draft);
            match self.stage(change, draft).await {
                Ok(snapshot) => {
                    staged.push(snapshot);
                    kept = journal.len();
                }
                Err(e) => {
                    // The staged snapshots' list again (the failed change took it, or
                    // left its own): the batch's path index is built from it.
                    draft.last_list = last_list;
                    error = Some(e);
                    break;
                }
            }
        }
        (staged, kept, error)
    }

    async fn commit_batch_inner(
        &self,
        loaded: Option<LoadedTable>,
        changes: &[&ChangeSet],
        more: bool,
    ) -> Batch {
        let next_version = loaded.as_ref().map_or(1, |l| l.version + 1);
        let on = loaded
            .as_ref()
            .filter(|l| self.recorded_elsewhere(l).is_none());
        let history = on.map(|l| l.history.clone()).unwrap_or_default();
        let mut draft = Draft {
            base: on,
            metadata: on.map(|l| l.metadata.clone()),
            history: history.clone(),
            expired_logs: Vec::new(),
            last_list: None,
            path_index: None,
            index_base: None,
            backfill: changes.len() > 1,
            more,
            base_list_read: false,
        };
        // Manifests, lists and delete files are written through a journal, so that what
        // no `vN` will refer to can be deleted again (a failed commit leaves `metadata/`
        // as it found it; the metadata file and the hint are written by `publish`). Their
        // plain writes are held back and made together just before the commit point.
        let (store, journal) = self.store.journaled();
        let writer = Self {
            store: store.deferring(),
            ..self.clone()
        };
        let (staged, kept, mut error) = writer.stage_each(changes, &mut draft, &journal).await;
        // What the change that failed had written yet (or held: dropped).
        writer.abandon(journal.since(kept)).await;
        if let Some(e) = error.take() {
            error = Some(match on {
                Some(_) => self.lost_race_or(e, next_version).await,
                None => e,
            });
        }
        let mut batch = Batch {
            error,
            ..Batch::default()
        };
        let expired_logs = std::mem::take(&mut draft.expired_logs);
        let index = writer.write_path_index(&mut draft).await;
        let list_read = draft.base_list_read;
        if let Some(metadata) = draft.metadata.filter(|_| !staged.is_empty()) {
            if let Err(e) = index {
                // Nothing refers to the batch's files: the error wins over a later one.
                self.abandon(journal.since(0)).await;
                batch.error = Some(e);
                return batch;
            }
            // The held writes, and the base's list when this batch did not just read it
            // (a lost race after the read is the put-if-absent's to find), side by side
            // with the check before the commit point.
            let written = async {
                let carried = async {
                    match list_read {
                        true => Ok(()),
                        false => self.check_carried(on).await,
                    }
                };
                let (flushed, carried) = futures::join!(writer.store.flush(), carried);
                flushed.map_err(IcebergError::from).and(carried)
            };
            let published = Published {
                version: next_version,
                metadata,
                history,
                expired_logs,
            };
            self.publish_batch(&mut batch, published, (staged, written), &journal)
                .await;
        }
        batch
    }
}

/// The manifest list `draft` last staged, to put back if the next change fails: its
/// location and bytes (shared, not copied; decoded again only if the path index needs it).
fn kept_list(draft: &Draft<'_>) -> Option<ListFile> {
    draft.last_list.as_ref().map(|l| ListFile {
        location: l.location.clone(),
        decoded: None,
        bytes: l.bytes.clone(),
    })
}
