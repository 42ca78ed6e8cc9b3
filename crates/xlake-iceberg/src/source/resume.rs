//! [`Resume`]: an incremental replay that does not read the position-delete files live
//! at the newest mirrored snapshot (its baseline). Their union for each data file is what
//! the target's current snapshot deletes from it ([`MirroredDeletes`]), which the target
//! reads back from its own deletion vectors, for the data files a later snapshot touches
//! only. So the replay reads the delete files the new snapshots add or remove, and one
//! vector per data file they touch, however many delete files are live.
//!
//! Where that cannot give the exact union, the replay is done again with the baseline's
//! delete files read ([`Resume::fallback`]): a snapshot removes a baseline delete file
//! some of whose rows no delete file it adds deletes again (rows would show again, and
//! only the other live delete files tell which), the mirror does not hold a data file
//! live or cannot read its vector, or a data file loses the deletion vector (format
//! version 3) it had at the baseline (the mirror's vector is that one, not the union).

use std::collections::{HashMap, HashSet};

use roaring::RoaringTreemap;
use xlake_source::MirroredDeletesRef;

/// The key under which a data file's rows as the mirror deletes them are kept among the
/// rows of its position-delete files (no delete file location is empty).
pub(super) const MIRRORED: &str = "";

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Resume {
    mirror: MirroredDeletesRef,
    /// While the baseline itself is walked: its delete files are noted, not read.
    pub(super) at_baseline: bool,
    /// The baseline's position-delete files not read (by location in the manifests).
    pub(super) unread: HashSet<String>,
    /// Data files whose rows so far are all known (taken from the mirror, or added since
    /// the baseline, which no baseline delete file can delete from).
    pub(super) known: HashSet<String>,
    /// Data files that had a deletion vector at the baseline.
    pub(super) vector_at_baseline: HashSet<String>,
    /// This snapshot's: rows of removed baseline delete files, by data file, which a
    /// delete file it adds must delete again.
    pub(super) uncovered: HashMap<String, RoaringTreemap>,
    /// This snapshot's: rows the delete files it adds delete, by data file.
    pub(super) added_now: HashMap<String, RoaringTreemap>,
    /// Why the baseline must be read after all.
    pub(crate) fallback: Option<String>,
}

impl Resume {
    /// A resume on `mirror`'s rows.
    pub(crate) fn new(mirror: MirroredDeletesRef) -> Self {
        Self {
            mirror,
            at_baseline: true,
            unread: HashSet::new(),
            known: HashSet::new(),
            vector_at_baseline: HashSet::new(),
            uncovered: HashMap::new(),
            added_now: HashMap::new(),
            fallback: None,
        }
    }

    /// Note the reason to read the baseline after all (the first one stands).
    pub(super) fn give_up(&mut self, why: String) {
        self.fallback.get_or_insert(why);
    }

    /// Whether the rows of data file `key` (a location in the manifests; `relative` as
    /// the model spells it) must be taken from the mirror, and if so, taken: `Some` rows
    /// to keep under [`MIRRORED`] (empty: none deleted). `None` when they are known, or
    /// the resume gave up (then [`Self::fallback`] says why).
    pub(super) async fn mirrored_rows(
        &mut self,
        key: &str,
        relative: &str,
    ) -> Option<RoaringTreemap> {
        if self.at_baseline || self.fallback.is_some() || self.known.contains(key) {
            return None;
        }
        if self.vector_at_baseline.contains(key) {
            self.give_up(format!(
                "{key} no longer has the deletion vector it had at the mirrored snapshot"
            ));
            return None;
        }
        let mirror = std::sync::Arc::clone(&self.mirror.0);
        match mirror.deleted_rows(relative).await {
            Ok(Some(rows)) => {
                self.known.insert(key.to_string());
                Some(rows.into_iter().collect())
            }
            Ok(None) => {
                self.give_up(format!("the mirror does not hold {relative} live"));
                None
            }
            Err(e) => {
                self.give_up(format!("the mirror's deleted rows of {relative}: {e}"));
                None
            }
        }
    }

    /// After a snapshot's entries: give up when a baseline delete file it removed deleted
    /// rows of a live data file that no delete file it adds deletes again.
    pub(super) fn check_covered(&mut self, snapshot: i64, is_live: impl Fn(&str) -> bool) {
        let uncovered = std::mem::take(&mut self.uncovered);
        for (data, rows) in uncovered {
            if !is_live(&data) {
                continue;
            }
            let again = self.added_now.get(&data);
            if !again.is_some_and(|a| rows.is_subset(a)) {
                self.give_up(format!("snapshot {snapshot} removes position deletes of {data} that no delete file it adds deletes again"));
            }
        }
        self.added_now.clear();
    }

    /// The source commit the mirror's rows are as of.
    pub(crate) fn commit(&self) -> &str {
        self.mirror.0.commit()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xlake_source::{MirrorReadError, MirroredDeletes};

    use super::*;

    /// A mirror holding `a` live with rows 0 and 2 deleted, and nothing else.
    struct Mirror;

    #[async_trait::async_trait]
    impl MirroredDeletes for Mirror {
        fn commit(&self) -> &str {
            "7"
        }

        async fn deleted_rows(&self, path: &str) -> Result<Option<Vec<u64>>, MirrorReadError> {
            Ok((path == "a").then(|| vec![0, 2]))
        }
    }

    fn resume() -> Resume {
        let mut r = Resume::new(MirroredDeletesRef(Arc::new(Mirror)));
        r.at_baseline = false;
        r
    }

    fn rows(r: &[u64]) -> RoaringTreemap {
        r.iter().copied().collect()
    }

    #[tokio::test]
    async fn rows_come_from_the_mirror_once_and_a_file_it_lacks_gives_up() {
        let mut r = resume();
        assert_eq!(r.mirrored_rows("/t/a", "a").await, Some(rows(&[0, 2])));
        assert_eq!(r.mirrored_rows("/t/a", "a").await, None, "known now");
        assert!(r.fallback.is_none());
        assert_eq!(r.mirrored_rows("/t/b", "b").await, None);
        assert_eq!(
            r.fallback.as_deref(),
            Some("the mirror does not hold b live")
        );
        // A file that had a deletion vector at the baseline: the mirror holds that one.
        let mut r = resume();
        r.vector_at_baseline.insert("/t/a".into());
        assert_eq!(r.mirrored_rows("/t/a", "a").await, None);
        assert!(r.fallback.is_some());
    }

    #[test]
    fn removed_rows_must_be_deleted_again_by_the_same_snapshot() {
        let mut r = resume();
        r.uncovered.insert("a".into(), rows(&[1]));
        r.added_now.insert("a".into(), rows(&[1, 3]));
        // A file no longer live needs nothing.
        r.uncovered.insert("gone".into(), rows(&[5]));
        r.check_covered(9, |p| p == "a");
        assert!(r.fallback.is_none());
        assert!(r.added_now.is_empty() && r.uncovered.is_empty());
        r.uncovered.insert("a".into(), rows(&[1, 4]));
        r.added_now.insert("a".into(), rows(&[1]));
        r.check_covered(9, |_| true);
        assert_eq!(
            r.fallback.as_deref(),
            Some("snapshot 9 removes position deletes of a that no delete file it adds deletes again")
        );
    }
}
