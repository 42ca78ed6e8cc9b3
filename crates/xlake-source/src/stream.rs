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
