//! A path index as a chain of segments: the one a version names (its head) and the ones
//! it builds on. A removal writes a small segment of the manifests it wrote, naming the
//! chain it builds on; now and then (see [`Chain::extends`]) a full one of every manifest
//! of the list, as manifests are merged.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use super::segment::{encode, Segment};
use crate::ops::live_paths::PathKeys;
use crate::spec::error::CodecError;

/// Per process: the chains read (by head; `None` when it could not be), and the heads of
/// those set aside after they misled a removal.
#[derive(Debug, Default)]
pub(crate) struct IndexState {
    pub(super) chains: HashMap<String, Option<Arc<Chain>>>,
    pub(super) set_aside: HashSet<String>,
}

/// The most segments a chain holds: a removal onto a chain this long writes a full one.
/// Each is a read for a removal (side by side; a request each on an object store).
pub(crate) const MAX_DEPTH: usize = 8;

/// A loaded chain: its head's name and its segments, newest first (the head, then its
/// ancestors as the head names them).
#[derive(Debug)]
pub(crate) struct Chain {
    pub(crate) head: String,
    pub(crate) segments: Vec<Segment>,
    /// The locations of the manifests the segments cover (a removal asks of each manifest
    /// of its list).
    covered: HashSet<Box<str>>,
}

impl Chain {
    pub(crate) fn new(head: String, segments: Vec<Segment>) -> Self {
        let mut covered = HashSet::new();
        for segment in &segments {
            covered.extend((0..segment.manifests()).filter_map(|o| segment.name(o).map(Box::from)));
        }
        Self {
            head,
            segments,
            covered,
        }
    }

    /// Whether a segment covers the manifest at `location` (names every path its live
    /// entries are about).
    pub(crate) fn covers(&self, location: &str) -> bool {
        self.covered.contains(location)
    }

    /// The locations of the covered manifests that may hold a path of `keys` (short path
    /// keys, [`xlake_model::short_path_key`]).
    pub(crate) fn holders(&self, keys: impl Iterator<Item = u64>) -> HashSet<String> {
        let keys: Vec<u64> = keys.collect();
        let mut out = HashSet::new();
        for segment in &self.segments {
            for key in &keys {
                out.extend(segment.holders(*key).map(str::to_string));
            }
        }
        out
    }

    /// Whether a segment of `fresh` keys may build on this chain; else a full one is
    /// written: when the chain is [`MAX_DEPTH`] long, holds a segment of the first layout,
    /// or its later segments would hold more keys than its first (the full one).
    pub(crate) fn extends(&self, fresh: usize) -> bool {
        let Some((base, later)) = self.segments.split_last() else {
            return false;
        };
        let later_keys: usize = later.iter().map(Segment::keys).sum();
        self.segments.len() < MAX_DEPTH
            && !self.segments.iter().any(Segment::is_legacy)
            && later_keys + fresh <= base.keys()
    }

    /// The names a segment building on this chain lists as its ancestors.
    fn lineage(&self) -> Vec<String> {
        let mut out = vec![self.head.clone()];
        out.extend(self.segments[0].ancestors().iter().cloned());
        out
    }
}

/// A segment of the manifests `fresh` (location and the keys of its paths), building on
/// `chain` (see [`Chain::extends`]).
pub(crate) fn delta(chain: &Chain, fresh: &[(&str, Arc<PathKeys>)]) -> Result<Bytes, CodecError> {
    let mut names: Vec<&str> = fresh.iter().map(|(l, _)| *l).collect();
    names.sort_unstable();
    names.dedup();
    let runs = keyed(fresh, &ordinals(&names));
    encode(&chain.lineage(), &names, count(&runs), Merge::new(runs))
}

/// A full segment: of the manifests of `live` that `chain` covers, and of `fresh`.
pub(crate) fn full<'a>(
    chain: Option<&'a Chain>,
    live: &HashSet<&str>,
    fresh: &[(&'a str, Arc<PathKeys>)],
) -> Result<Bytes, CodecError> {
    let segments = chain.map_or(&[][..], |c| &c.segments[..]);
    // Each live manifest's keys come from one place: `fresh`, else the newest segment.
    let mut names: HashSet<&'a str> = fresh.iter().map(|(l, _)| *l).collect();
    let mut picks: Vec<Vec<Option<&'a str>>> = Vec::new();
    for segment in segments {
        let picked = (0..segment.manifests()).map(|ord| {
            let name = segment.name(ord).filter(|n| live.contains(n))?;
            names.insert(name).then_some(name)
        });
        picks.push(picked.collect());
    }
    let mut sorted: Vec<&str> = names.into_iter().collect();
    sorted.sort_unstable();
    let ords = ordinals(&sorted);
    // Each segment's keys are in key order already: one run each, merged.
    let remaps: Vec<Vec<Option<u32>>> = picks
        .iter()
        .map(|picked| {
            let to = |p: &Option<&str>| p.and_then(|n| ords.get(n).copied());
            picked.iter().map(to).collect()
        })
        .collect();
    let mut runs = keyed(fresh, &ords);
    for (segment, remap) in segments.iter().zip(&remaps) {
        let kept = move |(key, ord): (u64, usize)| Some((key, remap.get(ord).copied()??));
        let len = segment.entries().filter_map(kept).count();
        runs.push((len, Box::new(segment.entries().filter_map(kept))));
    }
    encode(&[], &sorted, count(&runs), Merge::new(runs))
}

/// Each name's place in `names`.
fn ordinals<'a>(names: &[&'a str]) -> HashMap<&'a str, u32> {
    (0..)
        .zip(names.iter().copied())
        .map(|(i, n)| (n, i))
        .collect()
}

/// A run of (key, ordinal) in key order, and its length.
type Run<'a> = (usize, Box<dyn Iterator<Item = (u64, u32)> + 'a>);

/// The keys of `manifests` with their ordinals (manifests `ords` does not name left out,
/// each once), a run a manifest: its keys are sorted.
fn keyed<'a>(manifests: &'a [(&str, Arc<PathKeys>)], ords: &HashMap<&str, u32>) -> Vec<Run<'a>> {
    let mut out: Vec<Run<'a>> = Vec::new();
    let mut done = HashSet::new();
    for (location, keys) in manifests {
        if let Some(&ord) = ords.get(location).filter(|_| done.insert(*location)) {
            let keys = keys.keys();
            out.push((keys.len(), Box::new(keys.iter().map(move |k| (*k, ord)))));
        }
    }
    out
}

fn count(runs: &[Run<'_>]) -> usize {
    runs.iter().map(|(len, _)| len).sum()
}

/// Runs each in key order, merged into one in (key, ordinal) order, a heap over the
/// runs' heads: a backfill's full index merges one run per manifest (10,000 at 10M
/// files) without a list of all its entries.
struct Merge<'a> {
    runs: Vec<Box<dyn Iterator<Item = (u64, u32)> + 'a>>,
    heads: BinaryHeap<Reverse<(u64, u32, usize)>>,
}

impl<'a> Merge<'a> {
    fn new(runs: Vec<Run<'a>>) -> Self {
        let mut runs: Vec<_> = runs.into_iter().map(|(_, run)| run).collect();
        let mut heads = BinaryHeap::with_capacity(runs.len());
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some((key, ord)) = run.next() {
                heads.push(Reverse((key, ord, i)));
            }
        }
        Self { runs, heads }
    }
}

impl Iterator for Merge<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        let Reverse((key, ord, i)) = self.heads.pop()?;
        if let Some((k, o)) = self.runs.get_mut(i).and_then(Iterator::next) {
            self.heads.push(Reverse((k, o, i)));
        }
        Some((key, ord))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merge gives what sorting every entry would, with each manifest's keys once.
    #[test]
    fn runs_merge_in_key_then_ordinal_order() {
        let keys = |k: &[u64]| Arc::new(PathKeys::sorted(k.to_vec()));
        let fresh = [
            ("b", keys(&[3, 9, 12])),
            ("a", keys(&[1, 3, 40])),
            ("b", keys(&[100])),
            ("c", keys(&[])),
        ];
        let names = ["a", "b", "c"];
        let runs = keyed(&fresh, &ordinals(&names));
        assert_eq!(count(&runs), 6);
        let merged: Vec<_> = Merge::new(runs).collect();
        assert_eq!(merged, [(1, 0), (3, 0), (3, 1), (9, 1), (12, 1), (40, 0)]);
    }
}
