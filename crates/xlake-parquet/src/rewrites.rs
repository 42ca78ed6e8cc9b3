//! Which files changed since the listing the mirror recorded last, by when each last
//! changed ([`Change`]: a local file's status change time, an object's modification time
//! and `ETag`), which a rewrite of the same size keeping an old modification time moves
//! (`cp -p`, `rsync -t`, an S3 overwrite within the listed second).
//!
//! Two notes in the change set's summary, whatever the folder's size: the listing's newest
//! change time, and a hash of each file that changed at that very time (its *edge*: a
//! time is a clock tick, on S3 a whole second, so a file may change again within it), or
//! of them all together when they are more than [`EDGE_FILES`]. A later listing's file
//! that changed after that time changed since; one that changed at that time changed
//! since when its own hash is not recorded (with one hash of them all: when that differs,
//! and then every file of the edge counts as changed, which costs their footers read again
//! and their entries replaced by the same, a snapshot that incremental readers take for a
//! rewrite). So a file added within the edge's time (a writer that keeps adding files, on
//! S3 within the listed second) leaves the others be: an append stays an append. A file
//! whose status alone changed (a `chmod`) counts as changed once: its new change time is
//! recorded by the change set that replaces it.

use std::collections::BTreeMap;

use xlake_storage::{Change, Entry};

use crate::listing::Fnv;

/// The note holding the listing's newest change time (ns since the epoch).
pub const CHANGED_NOTE: &str = "xlake.parquet.changed";

/// The note holding the hashes of the files that changed at the listing's newest change
/// time (of each one's path and tag, comma-separated; one hash of them all when they are
/// more than [`EDGE_FILES`], and from the builds that recorded only that one).
pub const EDGE_NOTE: &str = "xlake.parquet.edge";

/// The most files at the newest change time recorded by one hash each (17 bytes each in
/// every snapshot's summary); above it, by one hash of them all.
pub const EDGE_FILES: usize = 64;

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
        let now = (
            edge(files, changes, self.newest_ns),
            whole(files, changes, self.newest_ns),
        );
        let unmoved = self.edge == now.0 || self.edge == now.1;
        let recorded: Vec<&str> = self.edge.split(',').collect();
        files
            .iter()
            .zip(changes)
            .map(|(f, c)| {
                let at_edge = c.at_ns == self.newest_ns && !unmoved;
                c.at_ns > self.newest_ns || (at_edge && !recorded.contains(&one(f, c).as_str()))
            })
            .collect()
    }
}

/// What records the files that changed at `at_ns`: a hash of each (comma-separated), or
/// of them all when they are more than [`EDGE_FILES`].
fn edge(files: &[Entry], changes: &[Change], at_ns: i64) -> String {
    let hashes: Vec<String> = at(files, changes, at_ns).map(|(f, c)| one(f, c)).collect();
    match hashes.len() > EDGE_FILES {
        true => whole(files, changes, at_ns),
        false => hashes.join(","),
    }
}

/// The files that changed at `at_ns`, with their changes.
fn at<'a>(
    files: &'a [Entry],
    changes: &'a [Change],
    at_ns: i64,
) -> impl Iterator<Item = (&'a Entry, &'a Change)> {
    files
        .iter()
        .zip(changes)
        .filter(move |(_, c)| c.at_ns == at_ns)
}

/// One hash of all the files that changed at `at_ns` (for one file, [`one`]'s).
fn whole(files: &[Entry], changes: &[Change], at_ns: i64) -> String {
    let mut hash = Fnv::new();
    at(files, changes, at_ns).for_each(|(f, c)| eat(&mut hash, f, c));
    hash.hex()
}

/// The hash of one file's path and tag.
fn one(f: &Entry, c: &Change) -> String {
    let mut hash = Fnv::new();
    eat(&mut hash, f, c);
    hash.hex()
}

/// A file's path and tag (a file without a tag by its size) into `hash`.
fn eat(hash: &mut Fnv, f: &Entry, c: &Change) {
    hash.eat(f.path.as_bytes());
    hash.eat(&[0]);
    match &c.tag {
        Some(tag) => hash.eat(tag.as_bytes()),
        None => hash.eat(&f.size.to_le_bytes()),
    }
    hash.eat(&[0]);
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

    /// On S3 an overwrite within the listed second keeps the time: the edge's tags tell
    /// which file changed; the others of the edge and a file before it did not.
    #[test]
    fn a_file_written_again_within_the_newest_time_changes_the_edge() {
        let before = [file("a", 5, "x"), file("b", 9, "y"), file("c", 9, "z")];
        let after = [file("a", 5, "x"), file("b", 9, "y2"), file("c", 9, "z")];
        assert_eq!(changed(&before, &after), [false, true, false]);
        // The same bytes written again (S3: the same ETag) are no change.
        assert_eq!(changed(&before, &before.clone()), [false; 3]);
    }

    /// A file added within the newest time leaves the files already there be (hostile
    /// review hr11: on S3 a file added within the listed second made the next snapshot
    /// delete and add again every file of that second, an overwrite where the folder only
    /// grew, which streaming readers refuse or read twice); one removed from it too.
    #[test]
    fn a_file_added_or_removed_within_the_newest_time_changes_no_other() {
        let before = [file("a", 5, "x"), file("b", 9, "y"), file("c", 9, "z")];
        let after = [file("a", 5, "x"), file("b", 9, "y"), file("bb", 9, "n")];
        let after = [after.as_slice(), &[file("c", 9, "z")]].concat();
        assert_eq!(changed(&before, &after), [false, false, true, false]);
        let after = [file("a", 5, "x"), file("c", 9, "z")];
        assert_eq!(changed(&before, &after), [false, false]);
    }

    /// Past [`EDGE_FILES`] files at the newest time, one hash of them all is recorded:
    /// any change there counts them all as changed, as a mirror recorded by the build
    /// that kept only that hash does.
    #[test]
    fn a_crowded_edge_is_recorded_by_one_hash() {
        let many = |n: usize| -> Vec<(Entry, Change)> {
            (0..n).map(|i| file(&format!("f{i:03}"), 9, "t")).collect()
        };
        let before = many(EDGE_FILES + 1);
        assert!(!Recorded::of(&split(&before).0, &split(&before).1)
            .edge
            .contains(','));
        assert_eq!(changed(&before, &before), vec![false; EDGE_FILES + 1]);
        let after = many(EDGE_FILES + 2);
        assert_eq!(changed(&before, &after), vec![true; EDGE_FILES + 2]);
        // An older build's one hash of a small edge: unchanged, nothing; changed, all.
        let small = [file("a", 9, "x"), file("b", 9, "y")];
        let (files, changes) = split(&small);
        let old = Recorded {
            newest_ns: 9,
            edge: whole(&files, &changes, 9),
        };
        assert_eq!(old.changed_since(&files, &changes), [false, false]);
        let (files, changes) = split(&[file("a", 9, "x"), file("b", 9, "y2")]);
        assert_eq!(old.changed_since(&files, &changes), [true, true]);
    }

    #[test]
    fn a_mirror_without_the_notes_tells_no_change() {
        let notes = BTreeMap::from([(CHANGED_NOTE.to_string(), "5".to_string())]);
        assert_eq!(Recorded::from_notes(&notes), None);
        assert_eq!(Recorded::from_notes(&BTreeMap::new()), None);
    }
}
