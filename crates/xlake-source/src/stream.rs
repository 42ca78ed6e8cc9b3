//! [`ChangeStream`]: a replay, given one change set at a time, so that no replay holds a
//! table's history in memory.

use std::collections::VecDeque;

use xlake_model::{ChangeSet, DataFile, RemovedLater};

use crate::SourceError;

/// A replay in progress: the change sets of the commits a source replays, in source
/// order, each read when asked for, with [`DataFile::removed_later`] already set (a source
/// finds which files later commits remove in a cheap first pass over removals, see
/// [`RemovedLater`]).
///
/// A commit the source cannot read ends the stream: the change sets before it come first,
/// then that error, then `None`.
#[async_trait::async_trait]
pub trait ChangeStream: Send {
    /// The next change set; `None` at the end (and after an error).
    async fn next(&mut self) -> Option<Result<ChangeSet, SourceError>>;

    /// Notes for the operator, as far as the replay has come (complete at its end).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A replay as the engine gets it from [`TableSource::replay`](crate::TableSource::replay).
pub type Replay<'a> = Box<dyn ChangeStream + 'a>;

/// A replay of change sets already in memory (a source whose replay is one change set,
/// tests); marks the files later ones remove, as [`DataFile::mark_removed_later`] does.
#[derive(Debug)]
pub struct VecReplay {
    changes: VecDeque<ChangeSet>,
    notes: Vec<String>,
    stopped: Option<SourceError>,
}

impl VecReplay {
    /// The replay of `changes` (in source order), then `stopped`, if any.
    pub fn new(
        mut changes: Vec<ChangeSet>,
        notes: Vec<String>,
        stopped: Option<SourceError>,
    ) -> Self {
        DataFile::mark_removed_later(&mut changes);
        Self {
            changes: changes.into(),
            notes,
            stopped,
        }
    }
}

impl VecReplay {
    /// The replay with `note` for the operator after its own notes.
    pub fn noted(mut self, note: Option<String>) -> Self {
        self.notes.extend(note);
        self
    }
}

#[async_trait::async_trait]
impl ChangeStream for VecReplay {
    async fn next(&mut self) -> Option<Result<ChangeSet, SourceError>> {
        match self.changes.pop_front() {
            Some(c) => Some(Ok(c)),
            None => self.stopped.take().map(Err),
        }
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

/// The first pass of a source that has no cheaper way to know its removals: read the
/// whole replay once, keeping only what each change set removes (or, a full state, keeps)
/// at its position (0, 1, … in stream order). It stops quietly at an error: the second
/// pass stops there too, and reports it.
pub async fn removals_of(replay: &mut dyn ChangeStream) -> RemovedLater {
    let mut later = RemovedLater::default();
    let mut position = 0;
    while let Some(Ok(change)) = replay.next().await {
        later.record(position, &change);
        position += 1;
    }
    later
}

/// A replay drained: its change sets, notes, and the error that stopped it.
#[derive(Debug)]
pub struct Collected {
    /// Change sets in source order.
    pub changes: Vec<ChangeSet>,
    /// Notes for the operator.
    pub notes: Vec<String>,
    /// Why the replay stopped early.
    pub stopped: Option<SourceError>,
}

/// Drain a replay into memory (for tests and small replays).
pub async fn collect(mut replay: Replay<'_>) -> Collected {
    let mut changes = Vec::new();
    let mut stopped = None;
    while let Some(next) = replay.next().await {
        match next {
            Ok(c) => changes.push(c),
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    Collected {
        changes,
        notes: replay.notes(),
        stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn change(id: &str, added: &[&str], removed: &[&str]) -> ChangeSet {
        xlake_test_utils::change_set(id, added, removed)
    }

    fn bad(commit: &str) -> SourceError {
        SourceError::new(
            ErrorKind::Corrupt {
                commit: Some(commit.into()),
                file: None,
            },
            format!("commit {commit} is corrupt"),
        )
    }

    #[test]
    fn a_replay_gives_its_change_sets_then_its_error_then_ends() {
        futures::executor::block_on(async {
            let mut replay = VecReplay::new(
                vec![change("0", &["a"], &[]), change("1", &["b"], &["a"])],
                vec!["n".into()],
                Some(bad("2")),
            );
            let first = replay.next().await.unwrap().unwrap();
            assert!(first.added[0].removed_later, "1 removes a");
            assert_eq!(replay.next().await.unwrap().unwrap().commit.id, "1");
            assert!(replay.next().await.unwrap().is_err());
            assert!(replay.next().await.is_none());
            assert_eq!(replay.notes(), ["n"]);
        });
    }

    #[test]
    fn a_first_pass_keeps_removals_only_and_stops_at_an_error() {
        futures::executor::block_on(async {
            let changes = vec![
                change("0", &["a", "b"], &[]),
                change("1", &["c"], &["a"]),
                change("2", &[], &["b"]),
            ];
            // The first pass sees 0 and 1 only: 2 is unreadable to it.
            let mut first = VecReplay::new(changes[..2].to_vec(), Vec::new(), Some(bad("2")));
            let later = removals_of(&mut first).await;
            let mut c = changes[0].clone();
            later.mark(0, &mut c);
            let marks: Vec<bool> = c.added.iter().map(|f| f.removed_later).collect();
            assert_eq!(marks, [true, false]);
            let all = collect(Box::new(VecReplay::new(changes, Vec::new(), None))).await;
            let marks: Vec<bool> = all.changes[0]
                .added
                .iter()
                .map(|f| f.removed_later)
                .collect();
            assert_eq!(marks, [true, true]);
            assert!(all.stopped.is_none());
        });
    }
}
