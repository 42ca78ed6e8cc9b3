//! [`DeltaReplay`]: the versions of a Delta table not yet mirrored, streamed one change set
//! at a time.
//!
//! Two passes over the commit files: the first parses only their `remove` lines (see
//! [`removed_paths`]) to know which added files a later version removes (skipped when one
//! version is replayed); the second reads
//! each version in full when the engine asks for it. Memory is bounded by one change set,
//! the keys of the live paths and the keys of the removed paths, never by the history.

use std::collections::HashSet;

use xlake_model::{path_key, ChangeSet, PathKeySet, RemovedLater};
use xlake_source::{ChangeStream, MirrorState, SourceError};

use crate::action::{parse_commit, Add};
use crate::error::{DeltaError, HistoryLost, Reason, Result};
use crate::resume::{self, Learnt};
use crate::same_table::Standing;
use crate::source::{commit_time, local_path, BaseLive, State};
use crate::DeltaSource;

/// A replay of a Delta table's versions in progress.
pub struct DeltaReplay<'a> {
    source: &'a DeltaSource,
    /// Schema state in force before the next version.
    state: Option<State>,
    /// Keys of the live paths, for telling an add of a path already live. Exact from the
    /// start of a full replay; in an incremental one only the paths added since, until a
    /// commit needs the whole set (see [`BaseLive`]). A [`PathKeySet`]: 10M live paths
    /// take 160 MB, not the 285-427 MB of a hash set.
    live: PathKeySet,
    base: BaseLive,
    /// How late a file live where an incremental replay starts can say it was created
    /// ([`DeltaSource::created_by`]), once asked (`Some(None)`: not known), so that the
    /// base is read only for adds that may re-add one of its files (see
    /// [`Self::may_be_in_base`]).
    base_created_by: Option<Option<i64>>,
    /// The checkpoint's state, given first when the replay starts at a checkpoint.
    checkpoint: Option<(u64, ChangeSet)>,
    /// The next version to read, and the last.
    next: u64,
    latest: u64,
    later: RemovedLater,
    notes: Vec<String>,
    done: bool,
}

impl DeltaSource {
    /// The replay of every version not yet mirrored, in order, each commit file read in full
    /// once (and its `remove` lines once before). `mirrored` names the versions the target
    /// holds: only versions after the newest of them are read. On a first sync whose early
    /// commits are gone the replay starts at a checkpoint, whose whole state is the first
    /// change set; that is refused if the target mirrors versions before it but not it
    /// (those between can no longer be told apart).
    pub async fn replay_from(&self, state: &MirrorState) -> Result<DeltaReplay<'_>> {
        let mut replay = self.empty_replay();
        let Some((start, from_checkpoint)) = self.log().start()? else {
            replay.done = true;
            return Ok(replay);
        };
        let latest = self.log().latest().unwrap_or(start);
        // Incremental: only the versions after the newest mirrored one are read; the
        // schema in force there is the state the last sync saved with it, else read from
        // the log (the checkpoint's two columns and the commits since, without the file
        // list), never by replaying the whole log.
        let first = match self.standing(state).await? {
            Standing::UpToDate(m) => m + 1,
            Standing::Resumed {
                m,
                state,
                created_by,
            } => {
                replay.state = Some(*state);
                replay.base = BaseLive::NotLoaded {
                    version: m,
                    removed: HashSet::new(),
                };
                // The last sync read version m's commit: what it learnt is saved.
                replay.base_created_by = created_by.map(Some);
                m + 1
            }
            Standing::PastCheckpoint(m) => {
                return Err(HistoryLost {
                    what: format!(
                        "versions after {m} up to {start} were removed from the log before they were mirrored"
                    ),
                }
                .into());
            }
            Standing::Elsewhere if from_checkpoint => {
                replay.notes.push(format!("commits before version {start} are gone from the log; the first snapshot holds the checkpoint's state at version {start}"));
                self.start_at_checkpoint(&mut replay, start).await?
            }
            Standing::Elsewhere => start,
        };
        self.plan(&mut replay, first, latest).await;
        Ok(replay)
    }

    /// A replay for a checker comparing versions from `from` on: from the newest
    /// checkpoint at or before `from` after which every commit is in the log (its whole
    /// state first, then every version after it), else from the log's start as a first
    /// sync's. Versions the checkpoint supersedes are not read, nor the files only they
    /// name: a vacuumed deletion vector, data file or commit file of those versions.
    pub async fn replay_covering(&self, from: u64) -> Result<DeltaReplay<'_>> {
        let start = self.log().start()?.map(|(s, _)| s);
        let checkpoint = self
            .log()
            .checkpoints
            .range(..=from)
            .next_back()
            .copied()
            .filter(|c| start.is_some_and(|s| *c >= s));
        let Some(checkpoint) = checkpoint else {
            return self.replay_from(&MirrorState::default()).await;
        };
        let mut replay = self.empty_replay();
        let first = self.start_at_checkpoint(&mut replay, checkpoint).await?;
        let latest = self.log().latest().unwrap_or(checkpoint);
        self.plan(&mut replay, first, latest).await;
        Ok(replay)
    }

    fn empty_replay(&self) -> DeltaReplay<'_> {
        DeltaReplay {
            source: self,
            state: None,
            live: PathKeySet::new(),
            base: BaseLive::Loaded,
            base_created_by: None,
            checkpoint: None,
            next: 1,
            latest: 0,
            later: RemovedLater::default(),
            notes: Vec::new(),
            done: false,
        }
    }

    /// Make `replay` give the checkpoint of `version`'s whole state first; the next
    /// version to read.
    async fn start_at_checkpoint(&self, replay: &mut DeltaReplay<'_>, version: u64) -> Result<u64> {
        let (s, mut change) = self.checkpoint_state(version).await?;
        // Its commit file is known by its time and tag to the next sync, as a commit's is
        // (`read`).
        let learnt = Learnt {
            created_by: None,
            commit_stamp: self.commit_stamp(version).await?,
        };
        change.source_state = Some(resume::save_with(version, &s.metadata, &s.protocol, learnt));
        replay.live = change.added.iter().map(|f| path_key(&f.path)).collect();
        replay.state = Some(s);
        replay.checkpoint = Some((version, change));
        Ok(version + 1)
    }

    /// Set `replay` to read versions `first..=latest`, with the first pass over them.
    async fn plan(&self, replay: &mut DeltaReplay<'_>, first: u64, latest: u64) {
        replay.next = first;
        replay.latest = latest;
        // One change set alone has no later one to remove its files: no first pass. (A
        // start at a checkpoint gives its state first, then the versions from `first`.)
        let first_given = replay.checkpoint.as_ref().map_or(first, |(c, _)| *c);
        if first_given < latest {
            replay.later = self.removals(first, latest).await;
        }
    }

    /// The first pass: what versions `first..=latest` remove, from their `remove` lines
    /// alone. It stops quietly at a commit it cannot read: the replay stops there too, and
    /// reports it.
    async fn removals(&self, first: u64, latest: u64) -> RemovedLater {
        let mut later = RemovedLater::default();
        for version in first..=latest {
            let Some((path, _)) = self.log().commits.get(&version) else {
                break;
            };
            let Ok(bytes) = self.store().get(path).await else {
                break;
            };
            let Ok(paths) = std::str::from_utf8(&bytes)
                .map_err(Reason::library)
                .and_then(removed_paths)
            else {
                break;
            };
            for p in &paths {
                later.removed(version, p);
            }
        }
        later
    }
}

/// The paths a commit file's `remove` actions name, as the replay names them; only lines
/// that can hold one are parsed (an `add` line's statistics are never decoded here).
pub(crate) fn removed_paths(text: &str) -> std::result::Result<Vec<String>, Reason> {
    let lines: String = text
        .lines()
        .filter(|l| l.contains("\"remove\""))
        .flat_map(|l| [l, "\n"])
        .collect();
    parse_commit(&lines)?
        .removes
        .iter()
        .map(|r| local_path(&r.path))
        .collect()
}

impl DeltaReplay<'_> {
    /// The next change set, marked; `None` at the end and after an error.
    async fn next_change(&mut self) -> Option<Result<ChangeSet>> {
        if self.done {
            return None;
        }
        if let Some((version, mut change)) = self.checkpoint.take() {
            self.later.mark(version, &mut change);
            return Some(Ok(change));
        }
        if self.next > self.latest {
            self.finish();
            return None;
        }
        let version = self.next;
        self.next += 1;
        match self.read(version).await {
            Ok(mut change) => {
                self.later.mark(version, &mut change);
                Some(Ok(change))
            }
            Err(e) => {
                self.finish();
                Some(Err(e))
            }
        }
    }

    /// End the replay, and free the keys it followed the table with (160 MB at 10M live
    /// files) before the engine commits its last batch.
    fn finish(&mut self) {
        self.done = true;
        self.live = PathKeySet::new();
        self.later = RemovedLater::default();
    }

    /// Version `version` as a change set; the live set follows it.
    async fn read(&mut self, version: u64) -> Result<ChangeSet> {
        let source = self.source;
        let (path, _) =
            source
                .log()
                .commits
                .get(&version)
                .cloned()
                .ok_or_else(|| DeltaError::Incomplete {
                    reason: format!("commit {version:020}.json is missing"),
                })?;
        let log_error = |reason: Reason| DeltaError::Log {
            version,
            file: source.store().absolute(&path),
            reason,
        };
        // The file's time and tag come with its bytes: no stat (or HEAD) of it for them.
        // As listed when the listing gives them, so that the next sync, which compares
        // with its listing, compares like with like.
        let (bytes, read_stamp) = source.store().get_timed(&path).await?;
        let stamp = source.listed_stamp(version).cloned().or(read_stamp);
        let modified = stamp.as_ref().map(|s| s.modified_ms);
        let text = std::str::from_utf8(&bytes).map_err(|_| log_error("not UTF-8".into()))?;
        let commit = parse_commit(text).map_err(log_error)?;
        if commit.metadata.is_some() || commit.protocol.is_some() {
            let metadata = commit
                .metadata
                .clone()
                .or_else(|| self.state.as_ref().map(|s| s.metadata.clone()))
                .ok_or_else(|| log_error("no metaData action before this version".into()))?;
            let protocol = commit
                .protocol
                .clone()
                .or_else(|| self.state.as_ref().map(|s| s.protocol.clone()))
                .unwrap_or_default();
            self.state = Some(source.state(version, metadata, protocol)?);
        }
        let s = self
            .state
            .as_ref()
            .ok_or_else(|| log_error("no metaData action before this version".into()))?;
        let time = commit_time(commit.info.as_ref(), modified);
        let action = commit
            .info
            .as_ref()
            .and_then(|i| i.operation.clone())
            .unwrap_or_else(|| "commit".into());
        let mut change = s.change_set(version, source.commit(version, action, time));
        // As `DeltaSource::created_by` would read it from this commit, saved for the next
        // sync, which starts after this version.
        let created_by = commit
            .adds
            .iter()
            .filter_map(Add::created)
            .fold(time, i64::max);
        // Each version's commit file is known by its time and tag to the next sync: any
        // version may be the newest one mirrored (in-commit mode stops at its own, a
        // failing version ends a sync early), which the next sync resumes from.
        let learnt = Learnt {
            created_by: Some(created_by),
            commit_stamp: stamp,
        };
        change.source_state = Some(resume::save_with(version, &s.metadata, &s.protocol, learnt));
        for add in &commit.adds {
            let mut file = source.data_file(s, add).await.map_err(&log_error)?;
            // The writer's own record of the file it wrote, inside the table.
            let inside = !file.path.contains("://") && !file.path.starts_with('/');
            file.proven = add.created().is_some() && inside;
            change.added.push(file);
        }
        change.removed = commit
            .removes
            .iter()
            .map(|r| local_path(&r.path))
            .collect::<std::result::Result<_, _>>()
            .map_err(&log_error)?;
        self.replace_live(&mut change, &commit.adds, &log_error)
            .await?;
        let touched = commit
            .adds
            .iter()
            .map(|a| a.data_change)
            .chain(commit.removes.iter().map(|r| r.data_change));
        change.data_change = touched.clone().count() == 0 || touched.into_iter().any(|d| d);
        Ok(change)
    }
}

impl DeltaReplay<'_> {
    /// Make each of `change`'s added files (one per add of `adds`, in order) replace the
    /// live file of its path, as the Delta protocol has it: an add of a path live before
    /// this version (earlier in this replay, or where it starts) is taken as its remove
    /// and add, as if the log named the remove; then the live set follows the version.
    /// Two adds of one path in one version (which the protocol forbids: which one holds
    /// is not said) are refused with `refuse`, naming the path.
    async fn replace_live(
        &mut self,
        change: &mut ChangeSet,
        adds: &[Add],
        refuse: &(dyn Fn(Reason) -> DeltaError + Sync),
    ) -> Result<()> {
        let mut once = HashSet::new();
        if let Some(twice) = change
            .added
            .iter()
            .find(|f| !once.insert(path_key(&f.path)))
        {
            return Err(refuse(
                format!(
                    "adds {} twice (the Delta protocol allows one add of a path per version)",
                    twice.path
                )
                .into(),
            ));
        }
        // A remove and an add of one path in one version (a new deletion vector) is
        // already a replacement.
        let named: HashSet<u128> = change.removed.iter().map(|p| path_key(p)).collect();
        for (f, add) in change.added.iter().zip(adds) {
            let key = path_key(&f.path);
            if named.contains(&key) {
                continue;
            }
            let mut live = self.live.contains(&key);
            if !live && self.may_be_in_base(add).await {
                self.base.load_into(&mut self.live, self.source).await?;
                live = self.live.contains(&key);
            }
            if live {
                change.removed.push(f.path.clone());
            }
        }
        for p in &change.removed {
            self.live.remove(&path_key(p));
            self.base.removed(p);
        }
        self.live
            .extend(change.added.iter().map(|f| path_key(&f.path)));
        Ok(())
    }

    /// Whether `add`, of a path not live in this replay, may re-add a file live where an
    /// incremental replay starts (whose paths are read only when an add may): a file that
    /// changes no data (statistics recomputed, a row-tracking backfill), or one whose
    /// `modificationTime` is not after the base version's time (a re-add keeps the time
    /// its logical file was created). A file created after it is new. Without a time on
    /// either side, it may. Never once the base is read (its paths are in the live set).
    async fn may_be_in_base(&mut self, add: &Add) -> bool {
        let BaseLive::NotLoaded { version, .. } = self.base else {
            return false;
        };
        if !add.data_change {
            return true;
        }
        let created_by = match self.base_created_by {
            Some(known) => known,
            None => *self
                .base_created_by
                .insert(self.source.created_by(version).await),
        };
        match (add.created(), created_by) {
            (Some(created), Some(by)) => created <= by,
            _ => true,
        }
    }
}

#[async_trait::async_trait]
impl ChangeStream for DeltaReplay<'_> {
    async fn next(&mut self) -> Option<std::result::Result<ChangeSet, SourceError>> {
        self.next_change().await.map(|r| r.map_err(Into::into))
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pass_reads_remove_lines_only() {
        let text = concat!(
            "{\"commitInfo\":{\"timestamp\":1,\"operation\":\"MERGE\"}}\n",
            "{\"remove\":{\"path\":\"x=A%2FA/a.parquet\",\"dataChange\":true}}\n",
            // An add line is never decoded: its broken statistics do not matter here.
            "{\"add\":{\"path\":\"b.parquet\",\"size\":1,\"stats\":{not json\n",
            "{\"remove\":{\"path\":\"c.parquet\",\"dataChange\":false}}\n",
        );
        assert_eq!(
            removed_paths(text).unwrap(),
            ["x=A/A/a.parquet", "c.parquet"]
        );
        assert!(removed_paths("{\"remove\":{}}\n").is_err());
        assert!(removed_paths("").unwrap().is_empty());
    }
}
