//! Which files changed since the listing the mirror recorded last, by when each last
//! changed ([`Change`]: a local file's status change time, an object's modification time
//! and `ETag`), which a rewrite of the same size keeping an old modification time moves
//! (`cp -p`, `rsync -t`, an S3 overwrite within the listed second).
//!
//! Two notes in the change set's summary, whatever the folder's size: the listing's newest
//! change time, and a hash of the files that changed at that very time (its *edge*: a
//! time is a clock tick, on S3 a whole second, so a file may change again within it). A
//! later listing's file that changed after that time changed since; one that changed at
//! that time changed since when the edge's hash differs (then all of the edge count as
//! changed, which costs only their footers read again and their entries replaced by
//! the same). A file whose status alone changed (a `chmod`) counts as changed once: its
//! new change time is recorded by the change set that replaces it.

use std::collections::BTreeMap;

use xlake_storage::{Change, Entry};

use crate::listing::Fnv;

/// The note holding the listing's newest change time (ns since the epoch).
pub const CHANGED_NOTE: &str = "xlake.parquet.changed";

/// The note holding the hash of the files that changed at the listing's newest change
/// time: their paths and tags.
pub const EDGE_NOTE: &str = "xlake.parquet.edge";

/// What a listing recorded of when its files changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The newest change time, ns since the epoch.
    newest_ns: i64,
    /// The hash of the files that changed at `newest_ns`.
    edge: String,
}

impl Recorded {
    /// What `files` (with their `changes`, in the same order, sorted by path) record.
    pub fn of(files: &[Entry], changes: &[Change]) -> Self {
        let newest_ns = changes.iter().map(|c| c.at_ns).max().unwrap_or(0);
        Recorded {
            newest_ns,
            edge: edge(files, changes, newest_ns),
        }
    }

    /// What a change set's notes record; `None` for one written before they were kept
    /// (or unreadable), which then tells no change.
    pub fn from_notes(notes: &BTreeMap<String, String>) -> Option<Self> {
        Some(Recorded {
            newest_ns: notes.get(CHANGED_NOTE)?.parse().ok()?,
            edge: notes.get(EDGE_NOTE)?.clone(),
        })
    }

    /// The notes that record this.
    pub fn notes(&self) -> [(String, String); 2] {
        [
            (CHANGED_NOTE.into(), self.newest_ns.to_string()),
            (EDGE_NOTE.into(), self.edge.clone()),
        ]
    }

    /// For each of `files` (with their `changes`), whether it changed since this was
    /// recorded.
    pub fn changed_since(&self, files: &[Entry], changes: &[Change]) -> Vec<bool> {
        let edge_moved = edge(files, changes, self.newest_ns) != self.edge;
        changes
            .iter()
            .map(|c| c.at_ns > self.newest_ns || (edge_moved && c.at_ns == self.newest_ns))
            .collect()
    }
}

/// The hash of the files that changed at `at_ns`: their paths and tags (a file without
/// a tag by its size).
fn edge(files: &[Entry], changes: &[Change], at_ns: i64) -> String {
    let mut hash = Fnv::new();
    for (f, c) in files.iter().zip(changes).filter(|(_, c)| c.at_ns == at_ns) {
        hash.eat(f.path.as_bytes());
        hash.eat(&[0]);
        match &c.tag {
            Some(tag) => hash.eat(tag.as_bytes()),
            None => hash.eat(&f.size.to_le_bytes()),
        }
        hash.eat(&[0]);
    }
    hash.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, at_ns: i64, tag: &str) -> (Entry, Change) {
        let entry = Entry {
            path: path.into(),
            size: 10,
            modified_ms: 1,
            e_tag: None,
        };
        let tag = Some(tag.to_string());
        (entry, Change { at_ns, tag })
    }

    fn split(files: &[(Entry, Change)]) -> (Vec<Entry>, Vec<Change>) {
        files.iter().cloned().unzip()
    }

    fn changed(before: &[(Entry, Change)], after: &[(Entry, Change)]) -> Vec<bool> {
        let (files, changes) = split(before);
        let recorded = Recorded::of(&files, &changes);
        let notes: BTreeMap<String, String> = recorded.notes().into_iter().collect();
        assert_eq!(Recorded::from_notes(&notes), Some(recorded.clone()));
        let (files, changes) = split(after);
        recorded.changed_since(&files, &changes)
    }

    #[test]
    fn nothing_changed_is_no_change() {
        let listing = [file("a", 5, "x"), file("b", 9, "y"), file("c", 9, "z")];
        assert_eq!(changed(&listing, &listing), [false; 3]);
    }

    #[test]
    fn a_file_changed_later_is_changed() {
        let before = [file("a", 5, "x"), file("b", 9, "y")];
        let after = [file("a", 12, "x2"), file("b", 9, "y")];
        assert_eq!(changed(&before, &after), [true, false]);
    }

    /// On S3 an overwrite within the listed second keeps the time: the edge's tags tell,
    /// and every file of the edge counts as changed; a file before the edge does not.
    #[test]
    fn a_file_written_again_within_the_newest_time_changes_the_edge() {
        let before = [file("a", 5, "x"), file("b", 9, "y"), file("c", 9, "z")];
        let after = [file("a", 5, "x"), file("b", 9, "y2"), file("c", 9, "z")];
        assert_eq!(changed(&before, &after), [false, true, true]);
        // The same bytes written again (S3: the same ETag) are no change.
        assert_eq!(changed(&before, &before.clone()), [false; 3]);
    }

    #[test]
    fn a_mirror_without_the_notes_tells_no_change() {
        let notes = BTreeMap::from([(CHANGED_NOTE.to_string(), "5".to_string())]);
        assert_eq!(Recorded::from_notes(&notes), None);
        assert_eq!(Recorded::from_notes(&BTreeMap::new()), None);
    }
}
