//! [`PathKeySet`]: a set of [`path_key`](crate::path_key)s that a table of millions of
//! files can afford, for a source's live paths.
//!
//! A `HashSet<u128>` costs 17 bytes a bucket at a load of at most 7/8, and its buckets
//! double: 10M keys sit in 16.7M buckets (285 MB), and the doubling that reaches them holds
//! the old table beside the new one for a moment (427 MB). Here the bulk of the keys is one
//! sorted vector (16 bytes a key, nothing more), and only what changed since it was last
//! merged is hashed; the changes are merged into it in place once they reach an eighth of
//! it, so the merges cost a few passes over the keys in all. Keys stay 128 bits: a source
//! takes a key it finds for the path it names, with no full path to check it against.

use std::collections::HashSet;

/// Changes kept beside the sorted keys before they are merged (at least this many, or an
/// eighth of the sorted keys); few in tests, to merge often.
const MIN_PENDING: usize = if cfg!(test) { 256 } else { 1 << 16 };

/// A set of 128-bit path keys: sorted keys, and the keys added to and removed from them
/// since they were last merged.
#[derive(Debug, Clone, Default)]
pub struct PathKeySet {
    /// Sorted, each once.
    sorted: Vec<u128>,
    /// Added since the last merge, none of them in `sorted`.
    added: HashSet<u128>,
    /// Removed from `sorted` since the last merge.
    removed: HashSet<u128>,
}

impl PathKeySet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: &u128) -> bool {
        self.added.contains(key) || (!self.removed.contains(key) && self.in_sorted(*key))
    }

    /// Add `key`; whether it was not there.
    pub fn insert(&mut self, key: u128) -> bool {
        let new = if self.in_sorted(key) {
            self.removed.remove(&key)
        } else {
            self.added.insert(key)
        };
        self.merge_when_due();
        new
    }

    /// Remove `key`; whether it was there.
    pub fn remove(&mut self, key: &u128) -> bool {
        if self.added.remove(key) {
            return true;
        }
        let was = self.in_sorted(*key) && self.removed.insert(*key);
        self.merge_when_due();
        was
    }

    /// How many keys the set holds.
    pub fn len(&self) -> usize {
        self.sorted.len() + self.added.len() - self.removed.len()
    }

    /// Whether the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn in_sorted(&self, key: u128) -> bool {
        find(&self.sorted, key)
    }

    fn merge_when_due(&mut self) {
        let pending = self.added.len() + self.removed.len();
        if pending >= MIN_PENDING.max(self.sorted.len() / 8) {
            self.merge();
        }
    }

    /// Merge the changes into the sorted keys, in place: the removed keys are dropped in
    /// one pass, the added ones (sorted) merged in from the back into room reserved
    /// exactly (a large vector grows by remapping its pages, not by a copy beside it).
    fn merge(&mut self) {
        if !self.removed.is_empty() {
            let mut gone: Vec<u128> = self.removed.drain().collect();
            gone.sort_unstable();
            let mut next = gone.iter().peekable();
            self.sorted.retain(|k| {
                while next.next_if(|g| *g < k).is_some() {}
                next.next_if_eq(&k).is_none()
            });
            self.removed.shrink_to(MIN_PENDING);
        }
        let mut fresh: Vec<u128> = self.added.drain().collect();
        self.added.shrink_to(MIN_PENDING);
        fresh.sort_unstable();
        let old = self.sorted.len();
        self.sorted.reserve_exact(fresh.len());
        self.sorted.resize(old + fresh.len(), 0);
        let (mut i, mut write) = (old, self.sorted.len());
        while let Some(&key) = fresh.last() {
            write -= 1;
            if i > 0 && self.sorted[i - 1] > key {
                i -= 1;
                self.sorted[write] = self.sorted[i];
            } else {
                self.sorted[write] = key;
                fresh.pop();
            }
        }
    }
}

impl Extend<u128> for PathKeySet {
    fn extend<I: IntoIterator<Item = u128>>(&mut self, keys: I) {
        for key in keys {
            self.insert(key);
        }
    }
}

impl FromIterator<u128> for PathKeySet {
    fn from_iter<I: IntoIterator<Item = u128>>(keys: I) -> Self {
        let mut sorted: Vec<u128> = keys.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.shrink_to_fit();
        Self {
            sorted,
            ..Self::default()
        }
    }
}

/// Whether sorted `keys` hold `key`. Path keys are hashes, spread evenly over the 128
/// bits, so the search looks first where the key's value puts it (within a few thousand
/// places at 10M keys), guesses again from the ends of that window (within a few dozen)
/// and only then bisects; keys of any other spread are still found, by bisecting more.
fn find(keys: &[u128], key: u128) -> bool {
    narrow(narrow(keys, key, 4096), key, 64)
        .binary_search(&key)
        .is_ok()
}

/// The part of sorted `keys` that holds `key` if any does: the `window` places either
/// side of where its value puts it, or the part before or after them, or all of `keys`
/// where they are too few to guess from.
fn narrow(keys: &[u128], key: u128, window: usize) -> &[u128] {
    let n = keys.len();
    let (Some(&first), Some(&last)) = (keys.first(), keys.last()) else {
        return keys;
    };
    if n <= 4 * window || key <= first || key >= last {
        return keys;
    }
    // (key - first) / (last - first) of the way along: f64 is exact enough for a guess.
    let along = (key - first) as f64 / (last - first) as f64;
    let guess = ((n - 1) as f64 * along) as usize;
    let lo = guess.saturating_sub(window);
    let hi = (guess + window).min(n);
    if keys[lo] > key {
        &keys[..lo]
    } else if keys[hi - 1] < key {
        &keys[hi..]
    } else {
        &keys[lo..hi]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path_key;

    #[test]
    fn the_set_follows_a_hash_set_through_merges() {
        let mut set = PathKeySet::new();
        let mut model = HashSet::new();
        let key = |i: u64| path_key(&format!("day={}/part-{i}.parquet", i % 100));
        // Enough keys for several merges, with removals and re-adds between them.
        for i in 0..40_000u64 {
            assert_eq!(set.insert(key(i)), model.insert(key(i)));
            if i % 7 == 3 {
                let gone = key(i / 2);
                assert_eq!(set.remove(&gone), model.remove(&gone));
            }
            if i % 11 == 5 {
                let back = key(i / 3);
                assert_eq!(set.insert(back), model.insert(back));
            }
        }
        assert_eq!(set.len(), model.len());
        for i in 0..50_000u64 {
            assert_eq!(set.contains(&key(i)), model.contains(&key(i)), "key {i}");
        }
        assert!(set.sorted.is_sorted() && set.sorted.len() > 4 * 4096);
    }

    #[test]
    fn keys_far_from_their_even_place_are_found() {
        // Half of them tiny, half near the top: every guess from the ends is far off.
        let skewed: Vec<u128> = (0..12_000u128)
            .map(|k| k * 3)
            .chain((0..12_000u128).map(|k| u128::MAX - k * 3))
            .collect();
        let set: PathKeySet = skewed.iter().copied().collect();
        assert_eq!(set.len(), 24_000);
        assert!(skewed.iter().all(|k| set.contains(k)));
        for absent in [
            1,
            35_999,
            36_000,
            u128::MAX / 2,
            u128::MAX - 1,
            u128::MAX - 36_000,
        ] {
            assert!(!set.contains(&absent), "{absent}");
        }
        let empty = PathKeySet::new();
        assert!(!empty.contains(&0) && empty.is_empty());
    }
}
