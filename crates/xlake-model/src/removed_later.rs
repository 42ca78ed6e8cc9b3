//! Which added files a later change set removes ([`DataFile::removed_later`]), known
//! before the change sets are read in full.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::commit::ChangeSet;
use crate::file::{path_key, DataFile};

impl DataFile {
    /// Mark, in change sets given in order, every added file that a later change set
    /// removes (by name, or by leaving it out of a full state).
    pub fn mark_removed_later(changes: &mut [ChangeSet]) {
        let mut later = RemovedLater::default();
        for (i, change) in changes.iter().enumerate() {
            later.record(i as u64, change);
        }
        for (i, change) in changes.iter_mut().enumerate() {
            later.mark(i as u64, change);
        }
    }
}

/// Which added files a later change set removes, known before the change sets are read in
/// full: a source records, in a first pass, the removals (and full states) of its replay at
/// their positions (any increasing number: an index, a version), then marks each change set
/// as it is read ([`DataFile::removed_later`]). It holds one key per removed path and the
/// live paths of each full state, never the change sets.
#[derive(Debug, Clone, Default)]
pub struct RemovedLater {
    /// Path key to the last position that removes it.
    removed: HashMap<u128, u64>,
    /// Positions of full-state change sets, with the paths live there.
    full_states: BTreeMap<u64, HashSet<u128>>,
}

impl RemovedLater {
    /// The change set at `position` removes `path`.
    pub fn removed(&mut self, position: u64, path: &str) {
        let last = self.removed.entry(path_key(path)).or_insert(position);
        *last = (*last).max(position);
    }

    /// The change set at `position` is a full state with these live paths.
    pub fn full_state<'a>(&mut self, position: u64, live: impl IntoIterator<Item = &'a str>) {
        self.full_states
            .insert(position, live.into_iter().map(path_key).collect());
    }

    /// Record what the change set at `position` removes (or, a full state, keeps).
    pub fn record(&mut self, position: u64, change: &ChangeSet) {
        if change.full_state {
            self.full_state(position, change.added.iter().map(|f| f.path.as_str()));
        }
        for path in &change.removed {
            self.removed(position, path);
        }
    }

    /// Set [`DataFile::removed_later`] on the files the change set at `position` adds.
    pub fn mark(&self, position: u64, change: &mut ChangeSet) {
        let next_full_state = position
            .checked_add(1)
            .and_then(|after| self.full_states.range(after..).next())
            .map(|(_, live)| live);
        for file in &mut change.added {
            let key = path_key(&file.path);
            file.removed_later = self.removed.get(&key).is_some_and(|&p| p > position)
                || next_full_state.is_some_and(|live| !live.contains(&key));
        }
    }

    /// Whether nothing is removed and there is no full state.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.full_states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PartitionSpec, Schema, SourceCommit, SourceFormat};

    fn change(id: &str, added: &[&str], removed: &[&str], full_state: bool) -> ChangeSet {
        let commit = SourceCommit {
            format: SourceFormat::new("DELTA"),
            id: id.into(),
            action: "WRITE".into(),
            requested_ms: None,
            commit_time_ms: 0,
        };
        let mut c = ChangeSet::new(commit, Schema::default(), PartitionSpec::unpartitioned());
        c.added = added
            .iter()
            .map(|p| DataFile::parquet(*p, 1, None))
            .collect();
        c.removed = removed.iter().map(|p| p.to_string()).collect();
        c.full_state = full_state;
        c
    }

    #[test]
    fn files_removed_by_later_commits_are_marked() {
        let mut changes = vec![
            change("0", &["a", "b", "c"], &[], false),
            change("1", &["d"], &["a"], false),
            change("2", &["c", "d"], &[], true),
        ];
        DataFile::mark_removed_later(&mut changes);
        let marks: Vec<Vec<bool>> = changes
            .iter()
            .map(|c| c.added.iter().map(|f| f.removed_later).collect())
            .collect();
        assert_eq!(
            marks,
            vec![vec![true, true, false], vec![false], vec![false, false]]
        );
    }

    #[test]
    fn removals_recorded_first_mark_change_sets_read_later() {
        let mut later = RemovedLater::default();
        // A first pass that sees only removals, at versions 3 and 7.
        later.removed(3, "a");
        later.removed(7, "b");
        later.removed(2, "b");
        let at = |position, paths: &[&str]| {
            let mut c = change("x", paths, &[], false);
            later.mark(position, &mut c);
            c.added.iter().map(|f| f.removed_later).collect::<Vec<_>>()
        };
        assert_eq!(at(1, &["a", "b", "c"]), [true, true, false]);
        // Removed at 3, added again at 3 or after: live.
        assert_eq!(at(3, &["a", "b"]), [false, true]);
        assert_eq!(at(7, &["b"]), [false]);
    }

    #[test]
    fn a_later_full_state_marks_what_it_leaves_out() {
        let mut later = RemovedLater::default();
        later.record(5, &change("5", &["a"], &[], true));
        later.record(9, &change("9", &["b"], &[], true));
        let mut c = change("1", &["a", "b"], &[], false);
        later.mark(1, &mut c);
        // Only the nearest full state counts.
        assert_eq!(
            c.added.iter().map(|f| f.removed_later).collect::<Vec<_>>(),
            [false, true]
        );
        let mut c = change("5", &["a"], &[], true);
        later.mark(5, &mut c);
        assert!(c.added[0].removed_later);
        assert!(!later.is_empty());
        assert_ne!(path_key("a"), path_key("b"));
    }
}
