//! `_delta_log/`: which versions exist, as commit files and checkpoints, and where a
//! replay must start.

use std::collections::{BTreeMap, BTreeSet};

use xlake_storage::{Stamp, TableStore};

use crate::error::{DeltaError, Result};

/// Log folder.
pub const LOG_DIR: &str = "_delta_log";

/// What the log folder holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogListing {
    /// Commit files: version to (path, modification time and tag when listed with
    /// them).
    pub commits: BTreeMap<u64, (String, Option<Stamp>)>,
    /// Versions with a complete checkpoint (classic, multi-part or V2).
    pub checkpoints: BTreeSet<u64>,
    /// Listed from this version on only ([`Self::load_from`]): what is older is not known.
    pub from: Option<u64>,
}

fn version_of(name: &str) -> Option<u64> {
    let digits = name.get(..20)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
}

impl LogListing {
    /// List `_delta_log/`, with the commit files' times and tags if `times` (else by name
    /// alone, which on local disk spares a `stat` per file; an object store's listing
    /// gives them for nothing, and they are kept, as [`Self::load_from`] keeps them).
    pub async fn load(store: &TableStore, times: bool) -> Result<Self> {
        let listed = match times {
            true => store.list_dir(LOG_DIR).await?,
            false => store.list_dir_by_name(LOG_DIR).await?,
        };
        let entries = listed.into_iter().map(|e| {
            let name = e.path.rsplit('/').next().unwrap_or_default().to_string();
            let timed = times || e.modified_ms != 0;
            (name, timed.then(|| e.stamp()))
        });
        let (mut listing, lacking) = Self::of_names(entries.collect());
        listing.stamp_newest(store).await?;
        let pointer = read_pointer(store).await?;
        listing.check_pointer(store, pointer, &lacking, 0)?;
        Ok(listing)
    }

    /// The log from version `from` on, for a sync of what follows it: one listing that
    /// starts there (and `_last_checkpoint`, read beside it), so that its cost does not
    /// grow with the history. `None` when that part of the log does not show every
    /// version after `from` as a commit file, and `from` itself (a log cleaned past it, a
    /// table written anew): then only the whole listing ([`Self::load`]) tells.
    pub async fn load_from(store: &TableStore, times: bool, from: u64) -> Result<Option<Self>> {
        let offset = format!("{from:020}");
        let (entries, pointer) = futures::join!(
            store.list_dir_from(LOG_DIR, &offset, times),
            read_pointer(store)
        );
        // An object store's listing gives the times and tags for nothing: they are kept.
        let entries = entries?.into_iter().map(|e| {
            let name = e.path.rsplit('/').next().unwrap_or_default().to_string();
            let listed = times || e.modified_ms != 0;
            (name, listed.then(|| e.stamp()))
        });
        let (mut listing, lacking) = Self::of_names(entries.collect());
        let Some(latest) = listing.latest() else {
            return Ok(None);
        };
        let has_from = listing.commits.contains_key(&from) || listing.checkpoints.contains(&from);
        // Every version after `from` as a commit file (no range when there is none).
        let after = latest.saturating_sub(from) as usize;
        let listed = match latest > from {
            true => listing.commits.range(from + 1..=latest).count(),
            false => 0,
        };
        if !has_from || listed != after {
            return Ok(None);
        }
        listing.stamp_newest(store).await?;
        // A pointer to an older checkpoint is not this listing's to check.
        listing.check_pointer(store, pointer?, &lacking, from)?;
        listing.from = Some(from);
        Ok(Some(listing))
    }

    /// The listing of the log folder's `(name, modification time and tag)` entries, and
    /// the parts each incomplete multi-part checkpoint lacks, to name them.
    fn of_names(entries: Vec<(String, Option<Stamp>)>) -> (Self, BTreeMap<u64, Vec<String>>) {
        let mut listing = Self::default();
        let mut parts: BTreeMap<(u64, u32), BTreeSet<u32>> = BTreeMap::new();
        for (name, modified) in entries {
            let Some(version) = version_of(&name) else {
                continue;
            };
            let rest = &name[20..];
            if rest == ".json" {
                let path = format!("{LOG_DIR}/{name}");
                listing.commits.insert(version, (path, modified));
            } else if rest == ".checkpoint.parquet" {
                listing.checkpoints.insert(version);
            } else if let Some(tail) = rest.strip_prefix(".checkpoint.") {
                // Multi-part `.checkpoint.<i>.<n>.parquet` or V2 `.checkpoint.<uuid>.(json|parquet)`.
                let pieces: Vec<&str> = tail.split('.').collect();
                match pieces.as_slice() {
                    [i, n, "parquet"] if i.len() == 10 && n.len() == 10 => {
                        if let (Ok(i), Ok(n)) = (i.parse::<u32>(), n.parse::<u32>()) {
                            parts.entry((version, n)).or_default().insert(i);
                        }
                    }
                    [_uuid, "json" | "parquet"] => {
                        listing.checkpoints.insert(version);
                    }
                    _ => {}
                }
            }
        }
        // The parts each incomplete multi-part checkpoint lacks, to name them.
        let mut lacking: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for ((version, n), have) in parts {
            if have.len() as u32 == n {
                listing.checkpoints.insert(version);
            } else {
                lacking.entry(version).or_default().extend(
                    (1..=n)
                        .filter(|i| !have.contains(i))
                        .map(|i| format!("{version:020}.checkpoint.{i:010}.{n:010}.parquet")),
                );
            }
        }
        (listing, lacking)
    }

    /// `_last_checkpoint` (read by [`read_pointer`]) names a checkpoint that must exist,
    /// if it is of version `from` or later.
    fn check_pointer(
        &self,
        store: &TableStore,
        found: Option<bytes::Bytes>,
        lacking: &BTreeMap<u64, Vec<String>>,
        from: u64,
    ) -> Result<()> {
        let listing = self;
        let pointer = format!("{LOG_DIR}/_last_checkpoint");
        if let Some(bytes) = found {
            let version = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("version")?.as_u64())
                .ok_or_else(|| DeltaError::Incomplete {
                    reason: format!("{}: not a checkpoint pointer", store.absolute(&pointer)),
                })?;
            if version >= from && !listing.checkpoints.contains(&version) {
                let what = match lacking.get(&version) {
                    Some(missing) => format!("whose part(s) {} are missing", missing.join(", ")),
                    None => "which is missing".to_string(),
                };
                return Err(DeltaError::Incomplete {
                    reason: format!(
                        "{} names the checkpoint of version {version}, {what}",
                        store.absolute(&pointer)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Give the newest commit file its modification time and tag when the listing (by
    /// name) did not: one `stat`, so that a commit file written again (a table written
    /// anew with as many versions) shows in the source's tip and is checked even with
    /// nothing new.
    async fn stamp_newest(&mut self, store: &TableStore) -> Result<()> {
        if let Some((_, (path, stamp @ None))) = self.commits.iter_mut().next_back() {
            *stamp = store.stamp(path).await?;
        }
        Ok(())
    }

    /// The newest version.
    pub fn latest(&self) -> Option<u64> {
        self.commits
            .keys()
            .next_back()
            .copied()
            .max(self.checkpoints.iter().next_back().copied())
    }

    /// Where a replay starts: `(version, from_checkpoint)`. Version 0 from its commit file
    /// when every commit exists; else the oldest checkpoint after which every commit exists.
    /// A log listed from a version on starts there.
    pub fn start(&self) -> Result<Option<(u64, bool)>> {
        let Some(latest) = self.latest() else {
            return Ok(None);
        };
        if let Some(from) = self.from {
            return Ok(Some((from, false)));
        }
        // Versions are unique and sorted: every one after `v` is there when as many are.
        let complete_after =
            |v: u64| v >= latest || self.commits.range(v + 1..=latest).count() as u64 == latest - v;
        if self.commits.contains_key(&0) && complete_after(0) {
            return Ok(Some((0, false)));
        }
        if let Some(&c) = self.checkpoints.iter().find(|&&c| complete_after(c)) {
            return Ok(Some((c, true)));
        }
        let missing = (0..=latest)
            .find(|v| !self.commits.contains_key(v))
            .unwrap_or(0);
        Err(DeltaError::Incomplete {
            reason: format!("commit {missing:020}.json is missing and no checkpoint covers it"),
        })
    }
}

/// `_last_checkpoint`'s bytes, if it exists: one request, found or not.
async fn read_pointer(store: &TableStore) -> Result<Option<bytes::Bytes>> {
    match store
        .get_small(&format!("{LOG_DIR}/_last_checkpoint"))
        .await
    {
        Ok(bytes) => Ok(Some(bytes)),
        Err(xlake_storage::StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(commits: &[u64], checkpoints: &[u64]) -> LogListing {
        LogListing {
            commits: commits
                .iter()
                .map(|&v| (v, (format!("{v}"), None)))
                .collect(),
            checkpoints: checkpoints.iter().copied().collect(),
            from: None,
        }
    }

    #[test]
    fn starts_at_zero_or_the_oldest_usable_checkpoint() {
        assert_eq!(listing(&[0, 1, 2], &[]).start().unwrap(), Some((0, false)));
        assert_eq!(
            listing(&[5, 6, 7, 10, 11], &[5, 10]).start().unwrap(),
            Some((10, true))
        );
        assert_eq!(
            listing(&[5, 6, 7, 8, 9, 10], &[5, 10]).start().unwrap(),
            Some((5, true))
        );
        assert!(listing(&[0, 2], &[])
            .start()
            .unwrap_err()
            .to_string()
            .contains("00000000000000000001.json"));
        assert_eq!(listing(&[], &[]).start().unwrap(), None);
        // A checkpoint of the newest version, its commit file gone.
        assert_eq!(listing(&[3], &[4]).start().unwrap(), Some((4, true)));
        assert!(listing(&[1, 3], &[1]).start().is_err());
        assert_eq!(
            version_of("00000000000000000010.checkpoint.parquet"),
            Some(10)
        );
        assert_eq!(version_of("_last_checkpoint"), None);
    }
}

/// A table folder whose `_delta_log/` holds a placeholder file of each of `names`, and a
/// store on it (for tests of what is read from names alone).
#[cfg(test)]
pub(crate) fn names_only_table(names: &[&str]) -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(LOG_DIR);
    std::fs::create_dir(&log).unwrap();
    for name in names {
        std::fs::write(log.join(name), b"x").unwrap();
    }
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    (dir, store)
}

#[cfg(test)]
mod listing_tests {
    use super::*;

    /// A log listed from the newest mirrored version holds that part of the whole
    /// listing; where it cannot stand alone (the version gone, a gap after it), none.
    #[tokio::test]
    async fn a_log_listed_from_a_version_holds_what_follows_it_or_nothing() {
        let names = [
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000002.json",
            "00000000000000000002.checkpoint.parquet",
            "00000000000000000003.json",
            "00000000000000000004.json",
            "_last_checkpoint",
        ];
        let (dir, store) = names_only_table(&names);
        let pointer = dir.path().join("_delta_log/_last_checkpoint");
        std::fs::write(&pointer, br#"{"version":2,"size":1}"#).unwrap();
        for times in [false, true] {
            let whole = LogListing::load(&store, times).await.unwrap();
            let from = LogListing::load_from(&store, times, 2)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(from.from, Some(2));
            assert_eq!(from.start().unwrap(), Some((2, false)));
            assert_eq!(from.latest(), whole.latest());
            let versions: Vec<u64> = from.commits.keys().copied().collect();
            assert_eq!(versions, [2, 3, 4]);
            assert_eq!(from.checkpoints, BTreeSet::from([2]));
            // Nothing after the newest version: the listing from it holds it alone.
            let newest = LogListing::load_from(&store, times, 4)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(newest.latest(), Some(4));
        }
        // A pointer to a newer checkpoint that is missing is refused, as by `load`.
        std::fs::write(&pointer, br#"{"version":3,"size":1}"#).unwrap();
        assert!(LogListing::load_from(&store, false, 2).await.is_err());
        // A pointer older than the listing's start is not its to check.
        let found = LogListing::load_from(&store, false, 4).await.unwrap();
        assert!(found.is_some());
        std::fs::write(&pointer, br#"{"version":2,"size":1}"#).unwrap();
        // A version past the log (a table written anew), or a gap after it: none.
        assert!(LogListing::load_from(&store, false, 9)
            .await
            .unwrap()
            .is_none());
        std::fs::remove_file(dir.path().join("_delta_log/00000000000000000003.json")).unwrap();
        assert!(LogListing::load_from(&store, false, 2)
            .await
            .unwrap()
            .is_none());
        assert!(LogListing::load_from(&store, false, 3)
            .await
            .unwrap()
            .is_none());
    }

    /// By name, a log lists the same versions and checkpoints, only without times.
    #[tokio::test]
    async fn a_log_listed_by_name_holds_what_a_timed_listing_holds() {
        let (_dir, store) = names_only_table(&[
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000001.checkpoint.parquet",
            "00000000000000000002.checkpoint.0000000001.0000000002.parquet",
            "00000000000000000002.json",
            "00000000000000000003.json.tmp",
            "_commits",
        ]);
        let timed = LogListing::load(&store, true).await.unwrap();
        let named = LogListing::load(&store, false).await.unwrap();
        assert_eq!(named.checkpoints, timed.checkpoints);
        assert_eq!(timed.checkpoints, BTreeSet::from([1]));
        let paths = |l: &LogListing| -> Vec<(u64, String)> {
            l.commits
                .iter()
                .map(|(v, (p, _))| (*v, p.clone()))
                .collect()
        };
        assert_eq!(paths(&named), paths(&timed));
        assert_eq!(named.commits.len(), 3);
        assert!(timed.commits.values().all(|(_, t)| t
            .as_ref()
            .is_some_and(|t| t.modified_ms > 0 && t.e_tag.is_some())));
        // By name, only the newest commit file is stat-ed (for the source's tip).
        let times: Vec<Option<Stamp>> = named.commits.values().map(|(_, t)| t.clone()).collect();
        assert_eq!(times[..2], [None, None]);
        assert_eq!(times[2], timed.commits[&2].1);
    }
}
