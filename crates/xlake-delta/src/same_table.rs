//! Whether the log is still the one the mirror was made from: a Delta table dropped and
//! written anew at the same place (another `metaData.id`), or restored from an older
//! copy (the same id, another commit at the mirrored version), is refused before its
//! versions are taken for changes of what the mirror holds.
//!
//! What the last sync saved with the newest mirrored version `m` (`resume`) is compared
//! with the log: the modification time and tag of `m`'s commit file, as the listing gives
//! them (a stat of that one file on a local disk, whose listing is by name); when either
//! changed, the table id in force at `m`, and `m`'s commit time. The tag (an object
//! store's `ETag`; a local file's inode, size, modification and creation times) tells a file written anew
//! within the second an object store's time is given in, or copied with its times kept.
//! An incremental sync does so where it starts, a sync with nothing new as well, and one
//! whose log starts at a checkpoint past `m` (its commits after `m` removed) compares the
//! checkpoint's id.

use xlake_source::MirrorState;

use crate::action::{parse_commit, Add};
use crate::error::{DeltaError, Result};
use crate::log::LOG_DIR;
use crate::resume::{self, Resume};
use crate::source::{ends_before, State};
use crate::DeltaSource;

/// Where the mirror's newest version `m` stands in the log ([`DeltaSource::standing`]).
pub(crate) enum Standing {
    /// Nothing mirrored, or nothing the log's start tells about (a replay starts there).
    Elsewhere,
    /// `m` is the log's newest version: nothing new.
    UpToDate(u64),
    /// Versions follow `m`: the schema state in force at `m`, and what the last sync
    /// learnt of `m`'s commit (`createdBy`).
    Resumed {
        m: u64,
        state: Box<State>,
        created_by: Option<i64>,
    },
    /// The log starts at a checkpoint past `m`: the versions between are gone.
    PastCheckpoint(u64),
}

/// The advice every refusal here ends with.
const AFRESH: &str = "move metadata/ aside and sync to mirror it afresh";

impl DeltaSource {
    /// For `check`: why the log is not the one `mirrored` holds up to its newest version
    /// (what a sync refuses before it reads on), `None` when it is. Errors are the reads
    /// that failed, not findings.
    pub(crate) async fn not_the_mirrored_table(
        &self,
        mirrored: &MirrorState,
    ) -> Result<Option<String>> {
        match self.holds_mirrored(mirrored).await {
            Ok(()) => Ok(None),
            Err(DeltaError::Incomplete { reason }) => Ok(Some(reason)),
            Err(e) => Err(e),
        }
    }

    /// The checks an incremental replay makes where it starts ([`Self::standing`]),
    /// without its reads of what follows.
    async fn holds_mirrored(&self, mirrored: &MirrorState) -> Result<()> {
        self.standing(mirrored).await.map(drop)
    }

    /// Where the mirror's newest version stands in the log, once checked to be of the
    /// table the mirror holds (else the refusal): what a replay starts from, and what
    /// `check` asks.
    pub(crate) async fn standing(&self, mirrored: &MirrorState) -> Result<Standing> {
        let newest = mirrored
            .commits
            .iter()
            .filter_map(|v| v.parse::<u64>().ok())
            .max();
        let (Some(m), Some((start, from_checkpoint))) = (newest, self.log().start()?) else {
            return Ok(Standing::Elsewhere);
        };
        let latest = self.log().latest().unwrap_or(start);
        let saved = mirrored.source_state.as_deref();
        if m > latest {
            return Err(ends_before(latest, m));
        }
        if m == latest {
            // Nothing new: still, the newest mirrored version must be the table's.
            self.same_newest(saved, m).await?;
            return Ok(Standing::UpToDate(m));
        }
        // Read once: the schema state, and what the last sync learnt of m's commit.
        let resume = resume::of(saved, m);
        match m >= start {
            true => Ok(Standing::Resumed {
                m,
                state: Box::new(self.resumed_state(resume.as_ref(), m).await?),
                created_by: resume.and_then(|r| r.created_by),
            }),
            false if from_checkpoint => {
                // History lost only if the checkpoint is of the same table.
                self.same_id_at_checkpoint(resume.as_ref(), m, start)
                    .await?;
                Ok(Standing::PastCheckpoint(m))
            }
            false => Ok(Standing::Elsewhere),
        }
    }

    /// The schema state in force at the newest mirrored version `m`, where an incremental
    /// replay starts: the state the last sync `saved`, while `m`'s commit file is the one
    /// it was saved from (its time and tag, [`resume::unchanged`]); else read from the
    /// log, and refused if its table id is not the saved one (the table was dropped and
    /// written anew at the same place: its new commits are not changes of what the mirror
    /// holds).
    pub(crate) async fn resumed_state(&self, saved: Option<&Resume>, m: u64) -> Result<State> {
        let Some(saved) = saved else {
            return self.schema_at(m).await;
        };
        // A state saved without the commit file's time (a first sync that started at a
        // checkpoint with no commit file of its version; a mirror older than this check)
        // tells nothing unchanged: the id is read again.
        let unchanged = match saved.commit_stamp() {
            Some(then) => resume::unchanged(&then, self.commit_stamp(m).await?.as_ref()),
            None => false,
        };
        if unchanged {
            return self.state(m, saved.meta_data.clone(), saved.protocol.clone());
        }
        let now = self.schema_at(m).await?;
        match (&saved.meta_data.id, &now.metadata.id) {
            (Some(was), Some(is)) if was != is => Err(DeltaError::Incomplete {
                reason: format!(
                    "version {m} is not the one the mirror holds: the table's id is {is}, the mirror's {was} (the table was written anew at this place; {AFRESH})"
                ),
            }),
            _ => {
                self.same_commit(saved.created_by, m).await?;
                Ok(now)
            }
        }
    }

    /// A sync with nothing new after the newest mirrored version `m` (the log ends
    /// there): `m` is checked as [`Self::resumed_state`] checks it, so that a table
    /// written anew with as many versions as the mirror holds is refused, not reported
    /// up to date. While `m`'s commit file keeps the time and tag the state saved with
    /// it, only those are read of the saved state (its schema is not parsed).
    pub(crate) async fn same_newest(&self, source_state: Option<&str>, m: u64) -> Result<()> {
        let Some(saved_stamp) = resume::commit_stamp_of(source_state, m) else {
            return Ok(());
        };
        if let Some(then) = saved_stamp {
            if resume::unchanged(&then, self.commit_stamp(m).await?.as_ref()) {
                return Ok(());
            }
        }
        let saved = resume::of(source_state, m);
        self.resumed_state(saved.as_ref(), m).await.map(drop)
    }

    /// A log that starts at a checkpoint of `version`, past the newest mirrored version
    /// `m` (the commits between removed before they were mirrored): refused when the
    /// checkpoint's table id is not the one `saved` with `m` (the table was written anew
    /// at this place, and its state is not a later state of the mirrored table). The same
    /// id passes: the log's old commits were cleaned up, as Delta's log retention does.
    pub(crate) async fn same_id_at_checkpoint(
        &self,
        saved: Option<&Resume>,
        m: u64,
        version: u64,
    ) -> Result<()> {
        let Some(was) = saved.and_then(|s| s.meta_data.id.as_deref()) else {
            return Ok(());
        };
        let now = self.schema_at(version).await?;
        let Some(is) = now.metadata.id.as_deref().filter(|is| *is != was) else {
            return Ok(());
        };
        let classic = format!("{LOG_DIR}/{version:020}.checkpoint.parquet");
        let file = match self.store().size(&classic).await? {
            Some(_) => self.store().absolute(&classic),
            None => format!(
                "{} ({version:020}.checkpoint.*)",
                self.store().absolute(LOG_DIR)
            ),
        };
        Err(DeltaError::Incomplete {
            reason: format!(
                "the checkpoint of version {version} ({file}) is not of the table the mirror holds up to version {m}: its table id is {is}, the mirror's {was} (the table was written anew at this place; {AFRESH})"
            ),
        })
    }

    /// Refuse a commit file of version `m` whose time is not the one the mirrored commit
    /// had: a table restored from a backup older than the mirror and written past it keeps
    /// its id, but its version `m` is another commit. Told by the commit's own timestamp
    /// and its adds' times, as the last sync saved them (`createdBy`); a commit without a
    /// timestamp of its own (its time is its file's) cannot be told apart, and passes.
    async fn same_commit(&self, created_by: Option<i64>, m: u64) -> Result<()> {
        let (Some(was), Some((path, _))) = (created_by, self.log().commits.get(&m)) else {
            return Ok(());
        };
        let bytes = self.store().get(path).await?;
        let text = String::from_utf8_lossy(&bytes);
        let Ok(commit) = parse_commit(&text) else {
            return Ok(());
        };
        let Some(time) = commit
            .info
            .as_ref()
            .and_then(|i| i.in_commit_timestamp.or(i.timestamp))
        else {
            return Ok(());
        };
        let is = commit
            .adds
            .iter()
            .filter_map(Add::created)
            .fold(time, i64::max);
        match is == was {
            true => Ok(()),
            false => Err(DeltaError::Incomplete {
                reason: format!(
                    "version {m} is not the one the mirror holds: {} was written at {is} ms, the mirrored commit at {was} ms (the table was restored from an older copy, or written anew, at this place; {AFRESH})",
                    self.store().absolute(path)
                ),
            }),
        }
    }
}
