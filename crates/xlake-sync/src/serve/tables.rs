//! The tables the service knows, and what it keeps for each: a table of `--config` is
//! kept for the process's life; a table a callback names gets its own `table` series on
//! `/metrics` only once a table (a source or a mirror) is found there, and at most
//! `--max-tables` such tables are taken; the lock that serialises mirrors of a table is
//! kept only while a mirror of it is in flight or queued, or for a table of `--config`.
//! So a client naming new empty folders grows neither `/metrics` nor memory (hostile
//! review hr14's open item).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// The lock of one table, shared by the mirrors of it in flight.
type TableLock = Arc<tokio::sync::Mutex<()>>;

/// The tables the service knows (normalised locations).
#[derive(Debug)]
pub(crate) struct Tables {
    /// The most tables outside `--config` that get series.
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The tables of `--config`.
    listed: HashSet<String>,
    /// Tables outside `--config` with series of their own.
    tracked: HashSet<String>,
    /// The lock of each table with a mirror in flight or queued (and of each listed one),
    /// and how many of them hold it.
    locks: HashMap<String, (TableLock, usize)>,
}

impl Inner {
    /// Whether `table` has series, or may get them without a new place under the cap.
    fn counted(&self, table: &str) -> bool {
        self.listed.contains(table) || self.tracked.contains(table)
    }

    /// Tables outside `--config` that have series or may get them: the tracked ones and
    /// the others with a mirror in flight.
    fn taken(&self) -> usize {
        let unsettled = self.locks.keys().filter(|t| !self.counted(t)).count();
        self.tracked.len() + unsettled
    }
}

impl Tables {
    /// The tables of `--config` (`listed`), and at most `max` others.
    pub(crate) fn new(listed: impl IntoIterator<Item = String>, max: usize) -> Self {
        let listed: HashSet<String> = listed.into_iter().collect();
        let locks = listed
            .iter()
            .map(|t| (t.clone(), (TableLock::default(), 0)))
            .collect();
        Self {
            max,
            inner: Mutex::new(Inner {
                listed,
                tracked: HashSet::new(),
                locks,
            }),
        }
    }

    /// The most tables outside `--config` that get series.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A mirror of `table` may start: its place under the lock, or `None` when the table
    /// has no series yet and `max` others have or may get them.
    pub(crate) fn admit(&self, table: &str) -> Option<Entered<'_>> {
        let mut inner = self.inner();
        let new = !inner.counted(table) && !inner.locks.contains_key(table);
        if new && inner.taken() >= self.max {
            return None;
        }
        Some(self.enter(&mut inner, table))
    }

    /// A mirror of `table` starts, whatever the cap (a table of `--config`).
    pub(crate) fn listed(&self, table: &str) -> Entered<'_> {
        let mut inner = self.inner();
        self.enter(&mut inner, table)
    }

    fn enter(&self, inner: &mut Inner, table: &str) -> Entered<'_> {
        let (lock, users) = inner.locks.entry(table.to_string()).or_default();
        *users += 1;
        Entered {
            tables: self,
            table: table.to_string(),
            lock: lock.clone(),
        }
    }

    /// Whether `table` has its own series (listed, or a table was found there).
    pub(crate) fn tracked(&self, table: &str) -> bool {
        self.inner().counted(table)
    }

    /// A table was found at `table`: it has series from now on.
    pub(crate) fn track(&self, table: &str) {
        let mut inner = self.inner();
        if !inner.listed.contains(table) {
            inner.tracked.insert(table.to_string());
        }
    }

    /// The number of lock entries kept (for tests).
    #[cfg(test)]
    fn locks(&self) -> usize {
        self.inner().locks.len()
    }
}

/// A mirror of one table in flight or queued: its lock entry lives while one does.
#[derive(Debug)]
pub(crate) struct Entered<'a> {
    tables: &'a Tables,
    table: String,
    lock: TableLock,
}

impl Entered<'_> {
    /// The lock that serialises mirrors of the table in this process.
    pub(crate) fn lock(&self) -> &tokio::sync::Mutex<()> {
        &self.lock
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut inner = self.tables.inner();
        let keep = inner.listed.contains(&self.table);
        if let Some((_, users)) = inner.locks.get_mut(&self.table) {
            *users = users.saturating_sub(1);
            if *users == 0 && !keep {
                inner.locks.remove(&self.table);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_with_nothing_found_leave_nothing_and_the_cap_holds() {
        let tables = Tables::new(["/l".to_string()], 2);
        for i in 0..100 {
            let entered = tables.admit(&format!("/empty/{i}")).unwrap();
            drop(entered);
        }
        assert_eq!(tables.locks(), 1, "only the listed table's lock stays");
        // Two found tables fill the cap; a third new one is refused, known ones are not.
        for t in ["/a", "/b"] {
            let _in = tables.admit(t).unwrap();
            tables.track(t);
        }
        assert!(tables.admit("/c").is_none());
        assert!(tables.admit("/a").is_some());
        assert!(tables.admit("/l").is_some());
        assert_eq!(tables.locks(), 1);
    }

    #[test]
    fn a_new_table_in_flight_holds_its_place_under_the_cap() {
        let tables = Tables::new([], 1);
        let first = tables.admit("/a").unwrap();
        let second = tables.admit("/a").unwrap();
        assert!(
            tables.admit("/b").is_none(),
            "/a in flight takes the one place"
        );
        drop(first);
        assert_eq!(tables.locks(), 1, "still held by the second");
        drop(second);
        assert_eq!(tables.locks(), 0);
        assert!(tables.admit("/b").is_some(), "nothing was found at /a");
    }
}
