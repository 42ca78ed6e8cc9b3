//! What the engine makes of a source's replay ([`xlake_source::Replay`]), one change set at
//! a time: which change sets are still to mirror ([`Pending`]), read in batches of them
//! ([`Batches`]), a replay reduced to the
//! table's latest state ([`LatestState`], `--from-latest`), and a replay whose first change
//! set stands for the whole table ([`FirstFullState`], after history was lost).

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;

use xlake_model::{ChangeSet, CommitListing, DataFile};
use xlake_source::{ChangeStream, Replay, SourceError, TableSource};

/// Which change sets of a replay are still to mirror, decided as they stream by: those
/// whose commit no snapshot records, except commits listed before where the mirror
/// begins ([`CommitListing::mirror_start`]: mirrored and then expired, or folded into a
/// `--from-latest` first snapshot), unless the source knows one completed late
/// ([`CommitListing::completed_late`]). A commit that completes late (Hudi table
/// version 6 orders by requested time) is still mirrored after newer ones. Source order
/// is the listing's (a replay gives its commits in that order).
pub(crate) struct Pending<'a> {
    /// The mirrored commits, looked up once for each listed commit: hashed (a long history
    /// has thousands), not the ordered set's compares.
    mirrored: FxHashSet<&'a str>,
    listing: &'a CommitListing,
    /// The listed commits before where the mirror begins that no snapshot records
    /// (expired, or folded): nearly always none. (Listed ids are unique, so a commit not
    /// mirrored that is listed is either one of these or after the mirror's start.)
    expired: FxHashSet<&'a str>,
}

impl<'a> Pending<'a> {
    /// Of `listing`, given the commits `mirrored`, the one the oldest snapshot records
    /// (`first`) and the source's order of commit ids.
    pub(crate) fn new<S: AsRef<str> + ?Sized + 'a>(
        mirrored: impl IntoIterator<Item = &'a S>,
        first: Option<&str>,
        listing: &'a CommitListing,
        order: impl Fn(&str, &str) -> std::cmp::Ordering,
    ) -> Self {
        let mirrored: FxHashSet<&str> = mirrored.into_iter().map(AsRef::as_ref).collect();
        let start = listing.mirror_start(first, |id| mirrored.contains(id), order);
        let expired = listing.commits[..start.unwrap_or(0)].iter().filter(|c| {
            !listing.completed_late.contains(&c.id) && !mirrored.contains(c.id.as_str())
        });
        Self {
            expired: expired.map(|c| c.id.as_str()).collect(),
            mirrored,
            listing,
        }
    }

    /// Whether the change set of commit `id`, next in the replay, is to be mirrored. (Not
    /// by what streamed before it: a commit mirrored late may come before commits folded
    /// into the first snapshot, hostile-review hr12's case.)
    pub(crate) fn keep(&self, id: &str) -> bool {
        !self.mirrored.contains(id) && !self.expired.contains(id)
    }

    /// How many listed commits come before where the mirror begins and are not to mirror
    /// (expired, or folded).
    pub(crate) fn expired(&self) -> usize {
        self.expired.len()
    }

    /// Whether listed commit `id` comes before where the mirror begins and is not to
    /// mirror: the mirror holds it without a snapshot of its own (its snapshot expired,
    /// or it was folded into a `--from-latest` first snapshot).
    pub(crate) fn is_expired(&self, id: &str) -> bool {
        self.expired.contains(id)
    }

    /// How many listed commits are pending, up to and including `until` (for progress).
    pub(crate) fn count(&self, until: Option<&str>) -> usize {
        let mut n = 0;
        for c in &self.listing.commits {
            n += usize::from(self.keep(&c.id));
            if until == Some(c.id.as_str()) {
                break;
            }
        }
        n
    }
}

/// The commits the source names gone unmirrored ([`CommitListing::gone_unmirrored`])
/// that none of its listed rollbacks or restores undid, each with why.
pub(crate) async fn gone_unmirrored(
    source: &dyn TableSource,
    listing: &CommitListing,
) -> Result<Vec<String>, SourceError> {
    if listing.gone_unmirrored.is_empty() {
        return Ok(Vec::new());
    }
    let undone = source.undone_commits().await?;
    let gone = listing.gone_unmirrored.iter();
    Ok(gone
        .filter(|(id, _)| !undone.contains_key(*id))
        .map(|(_, why)| why.clone())
        .collect())
}

/// A replay read in batches of pending change sets, counting what streams by; it ends
/// after the commit in-commit mode asks for (`until`), at the replay's end, or at the
/// error that stopped it (kept in `stopped`).
pub(crate) struct Batches<'a> {
    replay: Replay<'a>,
    pending: Pending<'a>,
    until: Option<&'a str>,
    /// What the replay gave after a full batch, read to learn whether it had ended.
    ahead: Option<Result<ChangeSet, SourceError>>,
    /// Change sets the replay gave.
    pub(crate) streamed: usize,
    /// Of these, the ones skipped (mirrored already, or expired).
    pub(crate) skipped: usize,
    /// The commit asked for came by: what follows is not this call's concern.
    pub(crate) reached: bool,
    /// Why the replay stopped early.
    pub(crate) stopped: Option<SourceError>,
    /// Nothing more to read.
    pub(crate) ended: bool,
}

impl<'a> Batches<'a> {
    /// Batches of `replay`; with `done` (in-commit mode for a commit already mirrored)
    /// nothing is read.
    pub(crate) fn new(
        replay: Replay<'a>,
        pending: Pending<'a>,
        until: Option<&'a str>,
        done: bool,
    ) -> Self {
        Self {
            replay,
            pending,
            until,
            ahead: None,
            streamed: 0,
            skipped: 0,
            reached: done,
            stopped: None,
            ended: done,
        }
    }

    /// Up to `n` pending change sets, read from the replay as they are needed. A full
    /// batch reads one change set ahead, so that `ended` tells the last batch (the
    /// target writes its path index only then in a backfill).
    pub(crate) async fn next_batch(&mut self, n: usize) -> Vec<ChangeSet> {
        let mut batch = Vec::new();
        while !self.ended && batch.len() < n {
            let next = match self.ahead.take() {
                Some(next) => Some(next),
                None => self.replay.next().await,
            };
            match next {
                None => self.ended = true,
                Some(Err(e)) => {
                    self.stopped = Some(e);
                    self.ended = true;
                }
                Some(Ok(change)) => {
                    self.streamed += 1;
                    let asked = self.until == Some(change.commit.id.as_str());
                    if self.pending.keep(&change.commit.id) {
                        batch.push(change);
                    } else {
                        self.skipped += 1;
                    }
                    if asked {
                        self.reached = true;
                        self.ended = true;
                    }
                }
            }
        }
        if !self.ended {
            self.ahead = self.replay.next().await;
            self.ended = self.ahead.is_none();
        }
        batch
    }

    /// The replay's notes.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.replay.notes()
    }
}

/// A replay reduced to one full-state change set: the newest commit, holding every file
/// live after it. It holds the live files, not the history; a commit the source cannot
/// read ends it there (the state up to it is given, then the error).
pub(crate) struct LatestState<'a> {
    inner: Replay<'a>,
    stopped: Option<SourceError>,
    done: bool,
}

impl<'a> LatestState<'a> {
    pub(crate) fn new(inner: Replay<'a>) -> Self {
        Self {
            inner,
            stopped: None,
            done: false,
        }
    }
}

#[async_trait::async_trait]
impl ChangeStream for LatestState<'_> {
    async fn next(&mut self) -> Option<Result<ChangeSet, SourceError>> {
        if self.done {
            return self.stopped.take().map(Err);
        }
        self.done = true;
        let mut live: BTreeMap<String, DataFile> = BTreeMap::new();
        let mut last: Option<ChangeSet> = None;
        while let Some(next) = self.inner.next().await {
            match next {
                Ok(mut change) => {
                    if change.full_state {
                        live.clear();
                    }
                    for path in &change.removed {
                        live.remove(path);
                    }
                    for file in change.added.drain(..) {
                        live.insert(file.path.clone(), file);
                    }
                    last = Some(change);
                }
                Err(e) => {
                    self.stopped = Some(e);
                    break;
                }
            }
        }
        let Some(mut state) = last else {
            return self.stopped.take().map(Err);
        };
        state.added = live
            .into_values()
            .map(|mut f| {
                f.removed_later = false;
                f
            })
            .collect();
        state.removed.clear();
        state.full_state = true;
        state.data_change = true;
        Some(Ok(state))
    }

    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
}

/// A replay whose first change set is taken as the table's whole state (the oldest
/// retained commit, when commits after the last mirrored one are gone from the source).
pub(crate) struct FirstFullState<'a> {
    inner: Replay<'a>,
    first: bool,
}

impl<'a> FirstFullState<'a> {
    pub(crate) fn new(inner: Replay<'a>) -> Self {
        Self { inner, first: true }
    }
}

#[async_trait::async_trait]
impl ChangeStream for FirstFullState<'_> {
    async fn next(&mut self) -> Option<Result<ChangeSet, SourceError>> {
        let mut next = self.inner.next().await;
        if let (Some(Ok(change)), true) = (next.as_mut(), std::mem::take(&mut self.first)) {
            change.full_state = true;
        }
        next
    }

    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use xlake_source::{collect, ErrorKind, VecReplay};
    use xlake_test_utils::listing;

    fn change(id: &str, added: &[&str], removed: &[&str]) -> ChangeSet {
        xlake_test_utils::change_set(id, added, removed)
    }

    #[test]
    fn pending_skips_mirrored_and_expired_but_not_late_completions() {
        let all = listing(&["1", "2", "3", "4", "5"]);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let pending = |mirrored: &BTreeSet<String>, streamed: &[&str]| {
            let p = Pending::new(mirrored, None, &all, str::cmp);
            streamed
                .iter()
                .filter(|id| p.keep(id))
                .map(|id| id.to_string())
                .collect::<Vec<_>>()
        };
        let ids = ["1", "2", "3", "4", "5"];
        assert_eq!(pending(&set(&[]), &ids), ids);
        assert_eq!(pending(&set(&["1", "2"]), &ids), ["3", "4", "5"]);
        // 1 and 2 expired from the Iceberg metadata.
        assert_eq!(pending(&set(&["3"]), &ids), ["4", "5"]);
        // 3 completed after 4 was mirrored (v6 requested-time order).
        assert_eq!(pending(&set(&["1", "2", "4"]), &ids), ["3", "5"]);
        // Mirrored commits the source no longer lists are fine.
        assert_eq!(pending(&set(&["0", "1"]), &ids), ["2", "3", "4", "5"]);
        // A replay that starts after the newest mirrored commit (Delta).
        assert_eq!(pending(&set(&["1", "2"]), &["3", "4"]), ["3", "4"]);
        // Progress counts, up to a commit asked for.
        let (some, one) = (set(&["1", "2", "4"]), set(&["1"]));
        assert_eq!(Pending::new(&some, None, &all, str::cmp).count(None), 2);
        assert_eq!(Pending::new(&one, None, &all, str::cmp).count(Some("3")), 2);
        // The oldest snapshot is 3's (`--from-latest` folded 1 and 2), 1 completed late
        // after it: 2 is not to mirror, 4 and 5 are.
        let folded = set(&["3", "1"]);
        let p = Pending::new(&folded, Some("3"), &all, str::cmp);
        let kept: Vec<&str> = ids.into_iter().filter(|id| p.keep(id)).collect();
        assert_eq!(kept, ["4", "5"]);
    }

    #[test]
    fn a_late_completion_streamed_before_where_the_mirror_begins_keeps_the_folded_commits_out() {
        // `--from-latest` mirrored 4 (folding 2 and 3) while 1 was pending; 1 completed
        // late and was mirrored. A replay from the start gives 1 first: 2 and 3 are still
        // not to mirror (hostile review hr13: they were, their files listed twice).
        let mut all = listing(&["1", "2", "3", "4", "5"]);
        let mirrored: BTreeSet<String> = ["4", "1"].map(String::from).into();
        let streamed = |all: &CommitListing| {
            let p = Pending::new(&mirrored, Some("4"), all, str::cmp);
            let n = p.count(None);
            let kept: Vec<&str> = ["1", "2", "3", "4", "5"]
                .into_iter()
                .filter(|id| p.keep(id))
                .collect();
            (n, kept)
        };
        assert_eq!(streamed(&all), (1, vec!["5"]));
        // 2 also pending at the first sync, completed late since: it is mirrored.
        all.completed_late.insert("2".into());
        assert_eq!(streamed(&all), (2, vec!["2", "5"]));
    }

    #[tokio::test]
    async fn batches_stop_after_the_commit_asked_for_or_at_an_error() {
        let all = listing(&["1", "2", "3", "4"]);
        let mirrored: BTreeSet<String> = ["1".to_string()].into();
        let changes = || {
            ["1", "2", "3", "4"]
                .iter()
                .map(|id| change(id, &[], &[]))
                .collect::<Vec<_>>()
        };
        let replay = Box::new(VecReplay::new(changes(), Vec::new(), None));
        let mut b = Batches::new(
            replay,
            Pending::new(&mirrored, None, &all, str::cmp),
            Some("3"),
            false,
        );
        let ids = |v: Vec<ChangeSet>| v.into_iter().map(|c| c.commit.id).collect::<Vec<_>>();
        assert_eq!(ids(b.next_batch(1).await), ["2"]);
        assert_eq!(ids(b.next_batch(10).await), ["3"]);
        assert!(b.ended && b.reached && b.stopped.is_none());
        assert_eq!((b.streamed, b.skipped), (3, 1));
        // Stopped by commit 3: 2 comes first, then the replay ends with the error.
        let stopped = SourceError::new(ErrorKind::Storage, "commit 3 unreadable");
        let replay = Box::new(VecReplay::new(
            changes()[..2].to_vec(),
            Vec::new(),
            Some(stopped),
        ));
        let mut b = Batches::new(
            replay,
            Pending::new(&mirrored, None, &all, str::cmp),
            None,
            false,
        );
        assert_eq!(ids(b.next_batch(10).await), ["2"]);
        assert!(b.ended && !b.reached && b.stopped.is_some());
        // In-commit mode for a commit already mirrored reads nothing.
        let replay = Box::new(VecReplay::new(changes(), Vec::new(), None));
        let mut b = Batches::new(
            replay,
            Pending::new(&mirrored, None, &all, str::cmp),
            Some("1"),
            true,
        );
        assert!(b.next_batch(10).await.is_empty() && b.streamed == 0);
        // A batch the replay's end fills exactly is known as the last; one before is not.
        let replay = Box::new(VecReplay::new(changes(), Vec::new(), None));
        let mut b = Batches::new(
            replay,
            Pending::new(&mirrored, None, &all, str::cmp),
            None,
            false,
        );
        assert_eq!(ids(b.next_batch(2).await), ["2", "3"]);
        assert!(!b.ended && b.streamed == 3);
        assert_eq!(ids(b.next_batch(1).await), ["4"]);
        assert!(b.ended && b.streamed == 4 && b.next_batch(1).await.is_empty());
    }

    #[tokio::test]
    async fn latest_state_holds_the_live_files_of_the_newest_commit() {
        let stopped = SourceError::new(
            ErrorKind::Corrupt {
                commit: Some("3".into()),
                file: None,
            },
            "bad commit 3",
        );
        let changes = vec![change("1", &["a", "b"], &[]), change("2", &["c"], &["a"])];
        let replay = VecReplay::new(changes, vec!["note".into()], Some(stopped));
        let got = collect(Box::new(LatestState::new(Box::new(replay)))).await;
        assert_eq!(got.changes.len(), 1);
        let state = &got.changes[0];
        assert_eq!(state.commit.id, "2");
        assert!(state.full_state && state.removed.is_empty());
        let files: Vec<(&str, bool)> = state
            .added
            .iter()
            .map(|f| (f.path.as_str(), f.removed_later))
            .collect();
        assert_eq!(files, [("b", false), ("c", false)]);
        // The state up to the bad commit, then its error.
        assert!(got.stopped.unwrap().to_string().contains("bad commit 3"));
        assert_eq!(got.notes, ["note"]);
    }

    #[tokio::test]
    async fn the_first_change_set_after_lost_history_is_a_full_state() {
        let changes = vec![change("7", &["a"], &[]), change("8", &["b"], &[])];
        let replay = VecReplay::new(changes, Vec::new(), None);
        let got = collect(Box::new(FirstFullState::new(Box::new(replay)))).await;
        let full: Vec<bool> = got.changes.iter().map(|c| c.full_state).collect();
        assert_eq!(full, [true, false]);
    }
}
