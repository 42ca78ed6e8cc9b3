//! Where an expiry may cut a mirror's history (its snapshots, oldest first) so that the
//! sync's rule still holds: a listed commit older, in source order, than the oldest one a
//! snapshot records was mirrored and then expired; any other unrecorded one is pending and
//! mirrored. A cut keeps one snapshot and every snapshot after it. Where snapshot order is
//! source order any cut keeps the rule; a late completion (Hudi table version 6: an
//! instant that completes after later instants were mirrored gets its snapshot last)
//! breaks that order, and a cut that expires a commit listed after one it keeps would have
//! the next sync mirror that commit again, its files a second time (hostile review 9).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use xlake_model::CommitListing;
use xlake_target::{Ancestor, SnapshotEntry};

/// The snapshots (of `snapshots`, oldest first) an expiry may keep from: those where
/// every snapshot before records a commit listed before every listed commit the snapshot
/// and those after it record (commits the listing no longer names are never mirrored
/// again, so they do not count), and no listed commit still to mirror (completed since
/// the last sync) comes before every kept one, up to `floor` (a snapshot id) and no
/// later.
pub(crate) fn allowed(
    snapshots: &[SnapshotEntry],
    listing: &CommitListing,
    floor: Option<i64>,
    order: impl Fn(&str, &str) -> Ordering,
) -> BTreeSet<i64> {
    let recorded: Vec<_> = snapshots
        .iter()
        .map(|s| (s.snapshot_id, s.source_commit.as_deref()))
        .collect();
    let positions = listing.positions();
    let listed = recorded_positions(&recorded, &positions);
    // A commit the source knows completed late counts wherever it comes: mirrored next, it
    // becomes the oldest mirrored one, and a commit after it whose snapshot an expiry let
    // go would be mirrored again.
    let late = listing.completed_late.iter();
    let late = late
        .filter_map(|c| positions.get(c.as_str()).copied())
        .min();
    let first = recorded.iter().find_map(|(_, c)| *c);
    let unmirrored = first_unmirrored(&listed, listing, &positions, (first, &order))
        .into_iter()
        .chain(late)
        .min();
    let starts = starts(&recorded, listing, &positions, &order);
    let mut allowed = BTreeSet::new();
    for (k, fits) in cut_before(&listed).into_iter().enumerate() {
        // Keeping from here, the sync would take every unmirrored listed commit before
        // where the kept mirror begins as expired, and never mirror it (hostile review
        // hr10: an instant that completed late between a sync and the expiry). Where it
        // begins at an unmirrored commit (the kept oldest one's is unlisted), that one is
        // pending.
        let keeps_unmirrored =
            k == 0 || unmirrored.is_none_or(|u| starts[k].is_some_and(|s| s <= u));
        if fits && keeps_unmirrored {
            allowed.insert(recorded[k].0);
        }
        if floor == Some(recorded[k].0) {
            break;
        }
    }
    allowed
}

/// Of the `ancestry` (oldest first), the snapshots that hold a state of the source, each
/// by the listed commit that state follows: those of a listed commit where every snapshot
/// up to it records a commit listed before every one after it records (the newest
/// always). After a late completion the snapshots between it and the instants before it
/// hold no such state. A commit the source dropped normally (before
/// `listing.retained_from`: an archived instant) keeps its place in source order
/// (`order`): a late completion archived since is still late (hostile review hr10).
pub(crate) fn source_states(
    ancestry: &[Ancestor],
    listing: &CommitListing,
    order: impl Fn(&str, &str) -> Ordering,
) -> HashMap<String, i64> {
    let recorded: Vec<_> = ancestry
        .iter()
        .map(|a| (a.snapshot_id, a.source_commit.as_deref()))
        .collect();
    let placed = places(&recorded, listing, order);
    let mut cuts = cut_before(&placed);
    cuts.push(true);
    let mut states = HashMap::new();
    let mut newest: Option<i64> = None;
    for (k, (snapshot, _)) in recorded.iter().enumerate() {
        newest = newest.max(placed[k]);
        // A snapshot of a commit the listing does not name (one a rollback undid) holds
        // its files, which no state of the source has; one whose newest commit is
        // archived holds no state the replay gives.
        let listed = newest.and_then(|n| usize::try_from(n).ok());
        if let (true, Some(_), Some(n)) = (cuts[k + 1], placed[k], listed) {
            states.insert(listing.commits[n].id.clone(), *snapshot);
        }
    }
    states
}

/// Each snapshot's commit's place in source order: its listing position if listed; for
/// one the source dropped normally (before `listing.retained_from`), a place before every
/// listed one, in `order` among those; `None` for any other (a commit undone).
fn places(
    recorded: &[(i64, Option<&str>)],
    listing: &CommitListing,
    order: impl Fn(&str, &str) -> Ordering,
) -> Vec<Option<i64>> {
    let listed = recorded_positions(recorded, &listing.positions());
    let dropped = |c: &str| {
        let from = listing.retained_from.as_deref();
        from.is_some_and(|from| order(c, from) == Ordering::Less)
    };
    let mut archived: Vec<&str> = recorded
        .iter()
        .zip(&listed)
        .filter_map(|((_, c), at)| c.filter(|c| at.is_none() && dropped(c)))
        .collect();
    archived.sort_by(|a, b| order(a, b));
    archived.dedup();
    let before = archived.len() as i64;
    let rank: HashMap<&str, i64> = archived
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c, i as i64 - before))
        .collect();
    recorded
        .iter()
        .zip(listed)
        .map(|((_, c), at)| match at {
            Some(at) => i64::try_from(at).ok(),
            None => rank.get((*c)?).copied(),
        })
        .collect()
}

/// Each snapshot's commit's position in the listing, if listed (`positions`: the
/// listing's, by id, built once by the caller).
fn recorded_positions(
    recorded: &[(i64, Option<&str>)],
    positions: &HashMap<&str, usize>,
) -> Vec<Option<usize>> {
    recorded
        .iter()
        .map(|(_, commit)| positions.get((*commit)?).copied())
        .collect()
}

/// The listed position of the oldest commit no snapshot records but that the sync would
/// mirror (listed after where the mirror begins, [`CommitListing::mirror_start`], given
/// the commit the oldest snapshot records and the source's order, `begin`), if any;
/// `listed`: each snapshot's commit's position (`positions`: the listing's, by id).
fn first_unmirrored(
    listed: &[Option<usize>],
    listing: &CommitListing,
    positions: &HashMap<&str, usize>,
    begin: (Option<&str>, impl Fn(&str, &str) -> Ordering),
) -> Option<usize> {
    let recorded: BTreeSet<usize> = listed.iter().flatten().copied().collect();
    let is_recorded = |id: &str| positions.get(id).is_some_and(|p| recorded.contains(p));
    let start = listing.mirror_start(begin.0, is_recorded, begin.1)?;
    (start..listing.commits.len()).find(|p| !recorded.contains(p))
}

/// For each snapshot, where the mirror would begin ([`CommitListing::mirror_start`]) if
/// it were the oldest kept, given the first commit recorded from it on: that commit's
/// position when listed (`positions`: the listing's, by id), else by source order
/// (`order`), as the sync finds it.
fn starts(
    recorded: &[(i64, Option<&str>)],
    listing: &CommitListing,
    positions: &HashMap<&str, usize>,
    order: impl Fn(&str, &str) -> Ordering,
) -> Vec<Option<usize>> {
    let mut first: Option<&str> = None;
    let mut out = vec![None; recorded.len()];
    for k in (0..recorded.len()).rev() {
        first = recorded[k].1.or(first);
        out[k] = first.and_then(|c| match positions.get(c) {
            Some(&p) => Some(p),
            None => listing.mirror_start(Some(c), |_| false, &order),
        });
    }
    out
}

/// The smallest listed position from each snapshot on (`None`: none listed), with one
/// more entry (`None`) past the last.
fn oldest_from<T: Ord + Copy>(listed: &[Option<T>]) -> Vec<Option<T>> {
    let mut from_here = vec![None; listed.len() + 1];
    for i in (0..listed.len()).rev() {
        from_here[i] = match (listed[i], from_here[i + 1]) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    from_here
}

/// For each snapshot `k`, whether a cut just before it keeps the sync's rule: every
/// listed commit before it precedes every listed commit from it on.
fn cut_before<T: Ord + Copy>(listed: &[Option<T>]) -> Vec<bool> {
    let from_here = oldest_from(listed);
    let mut before: Option<T> = None;
    let mut fits = Vec::with_capacity(listed.len());
    for (i, position) in listed.iter().enumerate() {
        fits.push(match (before, from_here[i]) {
            (None, _) => true,
            (Some(b), Some(kept)) => b < kept,
            // Every commit kept is unlisted: the sync would take each expired listed
            // commit as pending.
            (Some(_), None) => false,
        });
        before = before.max(*position);
    }
    fits
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlake_test_utils::listing;

    /// Snapshots 10, 11, ... recording `commits` in that order.
    fn snapshots(commits: &[&str]) -> Vec<SnapshotEntry> {
        commits
            .iter()
            .enumerate()
            .map(|(i, c)| SnapshotEntry {
                sequence_number: i as i64 + 1,
                snapshot_id: 10 + i as i64,
                parent_snapshot_id: None,
                timestamp_ms: 0,
                time: String::new(),
                operation: "append".into(),
                current: i + 1 == commits.len(),
                source_format: None,
                source_commit: Some(c.to_string()),
                source_operation: None,
            })
            .collect()
    }

    /// The ancestry of [`snapshots`] of `commits`.
    fn ancestry(commits: &[&str]) -> Vec<Ancestor> {
        snapshots(commits)
            .into_iter()
            .map(|s| Ancestor {
                snapshot_id: s.snapshot_id,
                source_commit: s.source_commit,
            })
            .collect()
    }

    fn ids(set: &BTreeSet<i64>) -> Vec<i64> {
        set.iter().copied().collect()
    }

    #[test]
    fn in_source_order_every_cut_is_allowed() {
        let l = listing(&["a", "b", "c"]);
        assert_eq!(
            ids(&allowed(&snapshots(&["a", "b", "c"]), &l, None, str::cmp)),
            [10, 11, 12]
        );
    }

    #[test]
    fn a_late_completion_allows_no_cut_past_an_older_commit() {
        // b completed last: its snapshot (14) comes after d and e's.
        let l = listing(&["a", "b", "c", "d", "e"]);
        let s = snapshots(&["a", "c", "d", "e", "b"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 11]);
        // Once later commits follow it, a cut after it is allowed again.
        let l = listing(&["a", "b", "c", "d", "e", "f"]);
        let s = snapshots(&["a", "c", "b", "d", "e", "f"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 11, 13, 14, 15]);
    }

    #[test]
    fn the_floor_is_the_last_cut() {
        let l = listing(&["a", "b", "c"]);
        assert_eq!(
            ids(&allowed(
                &snapshots(&["a", "b", "c"]),
                &l,
                Some(11),
                str::cmp
            )),
            [10, 11]
        );
    }

    #[test]
    fn no_cut_passes_a_commit_completed_since_the_last_sync() {
        // c completed after the sync that mirrored d (hostile review hr10): keeping only
        // d's snapshot, the sync would take c as expired and never mirror it.
        let l = listing(&["a", "b", "c", "d"]);
        let s = snapshots(&["a", "b", "d"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 11]);
        // Newer than every recorded one, it is mirrored whatever the cut.
        let l = listing(&["a", "b", "c"]);
        let s = snapshots(&["a", "b"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 11]);
    }

    #[test]
    fn a_commit_folded_into_a_from_latest_first_snapshot_holds_no_cut() {
        // `--from-latest` mirrored c (folding a and b) while a was pending; a completed
        // late. b is not to mirror: where the mirror begins is c, the oldest snapshot's.
        let l = listing(&["a", "b", "c", "d", "e"]);
        let s = snapshots(&["c", "a", "d", "e"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 12, 13]);
    }

    #[test]
    fn a_cut_keeping_an_undone_commit_first_begins_where_the_sync_would() {
        // bx (between b2 and c) was undone; b completed late; b2 and c are not mirrored.
        // Keeping from bx's snapshot, the sync begins at c, the first listed after bx, and
        // would take b2 as expired: that cut is not allowed (it was, by the smallest kept
        // listed position, b's). Keeping from a or from b, both are pending.
        let l = listing(&["a", "b", "b2", "c", "d"]);
        let s = snapshots(&["a", "bx", "b", "d"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 12]);
        // With b2 mirrored, c is where the mirror kept from bx begins: pending, allowed.
        let s = snapshots(&["a", "bx", "b", "b2", "d"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10, 11, 12, 13]);
    }

    #[test]
    fn after_a_late_completion_the_newest_state_is_the_current_snapshot() {
        let l = listing(&["a", "b", "c", "d"]);
        let states = source_states(&ancestry(&["a", "c", "d", "b"]), &l, str::cmp);
        let mut states: Vec<_> = states.iter().map(|(c, s)| (c.as_str(), *s)).collect();
        states.sort();
        assert_eq!(states, [("a", 10), ("d", 13)]);
    }

    #[test]
    fn an_archived_late_completion_still_comes_before_later_commits() {
        // b completed after d was mirrored, then a and b were archived (hostile review
        // hr10): c's snapshot holds no state (it lacks b), d's current one holds d's.
        let mut l = listing(&["c", "d"]);
        l.retained_from = Some("c".into());
        let states = source_states(&ancestry(&["a", "c", "d", "b"]), &l, str::cmp);
        let mut states: Vec<_> = states.iter().map(|(c, s)| (c.as_str(), *s)).collect();
        states.sort();
        assert_eq!(states, [("d", 13)]);
    }

    #[test]
    fn unlisted_commits_do_not_count_but_an_unlisted_rest_allows_no_cut() {
        // "x" is no longer listed (archived): it may go with anything.
        let l = listing(&["a", "b"]);
        assert_eq!(
            ids(&allowed(&snapshots(&["x", "a", "b"]), &l, None, str::cmp)),
            [10, 11, 12]
        );
        // Keeping only unlisted commits while a listed one is expired: not allowed.
        let s = snapshots(&["a", "x", "y"]);
        assert_eq!(ids(&allowed(&s, &l, None, str::cmp)), [10]);
    }
}
