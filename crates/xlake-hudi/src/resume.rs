//! The state a sync leaves for the next one ([`ChangeSet::source_state`]): the instant
//! time from which the next sync lists the timeline (`listFrom`), so that a long active
//! timeline is not listed whole for every incremental commit, and the instants that were
//! pending then (`pending`).
//!
//! Instant files are named by requested time, and an instant requested before the newest
//! mirrored one may complete after it. `listFrom` is therefore the older of: the newest
//! instant the sync listed, in any state, less [`MARGIN`]; and, for a change set the sync
//! gives before others, the oldest requested time of the completed instants after it (a
//! sync that stops part-way leaves them unmirrored); and never after the instant itself (a
//! late completion, mirrored last). The instants pending when the sync
//! listed are named in `pending`: the next sync looks each one requested before
//! `listFrom` up on its own (a listing of its instant time's files, one request each:
//! table version 8 and 9 name a completed instant by its completion time too, so it
//! cannot be read by name), so that one pending for good does not hold the listing back
//! to its time. Past [`MAX_LOOKUPS`] pending instants `listFrom` is the oldest of them
//! less the margin, as before the lookups. Every instant not mirrored then was either
//! pending when listed, or not listed at all: one requested more than [`MARGIN`] before
//! the newest instant listed whose files appeared only after the listing (a writer whose
//! clock lags the others', or that names its instant long before it writes the requested
//! file) is the case it misses. On a table whose instant times are local, a clock that
//! went back since the floor was saved is the other: the floor is then lowered by an hour
//! where it is used ([`Floor::for_listing`], [`crate::clock`]).
//!
//! `owed` names the late completions still owed after the change set's instant (see
//! `list_from_after` in `replay`), so that a sync stopped there (in-commit mode, an
//! error) leaves them known late to the next one, not taken as expired (hostile review
//! hr13); kept apart from `pending`, which past [`MAX_LOOKUPS`] names none (hostile review
//! hr15: owed instants were dropped with it).
//!
//! `pending` also tells, of an unmirrored completed instant in the part listed before the
//! newest mirrored one, whether it completed late (it was pending) or was mirrored and its
//! snapshot expired since (`xlake expire`): see `incremental`.
//!
//! A saved state is trusted only for the instant it names (the mirror's newest); a mirror
//! written by an older build has none, and its next sync lists the timeline whole; a
//! state without `pending` (written before it) is read as it was written: `listFrom`
//! covers its pending instants.
//!
//! [`ChangeSet::source_state`]: xlake_model::ChangeSet::source_state

use serde::{Deserialize, Serialize};

use crate::instant::completes_with_snapshot;
use crate::timeline::Timeline;

pub use crate::clock::{LOCAL_MARGIN, MARGIN};

/// `{"hudi": {"instant": …, "listFrom": …, "pending": […]}}`.
#[derive(Serialize, Deserialize)]
struct Saved {
    hudi: Resume,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resume {
    /// The instant (requested time) of the change set that carries this state.
    instant: String,
    /// The instant time (14 digits, `yyyyMMddHHmmss`) the next sync lists from.
    list_from: String,
    /// The requested times of the instants pending when the sync listed; absent in a
    /// state written before them, or past [`MAX_NAMED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending: Option<Vec<String>>,
    /// The late completions the mirror still owes after this change set's instant (named
    /// by the state the sync started from, completed, not mirrored: a sync that stops
    /// here leaves them unmirrored); after its `listFrom`, so not looked up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    owed: Vec<String>,
    /// Of `pending`, the instants whose completion gets no snapshot (a clean, a
    /// savepoint, ...); absent in a state written before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quiet: Option<Vec<String>>,
}

/// Pending instants looked up one by one at most; past that the listing starts at the
/// oldest of them (one listing's pages cost less than that many requests).
pub const MAX_LOOKUPS: usize = 16;

/// Pending instants named in a saved state at most (past [`MAX_LOOKUPS`] named, not looked
/// up: the listing covers them), so that one completing late is known late wherever it
/// falls; past this many none is named (~20 bytes each: the Iceberg target keeps the
/// newest state only, a Delta target one per commit).
pub const MAX_NAMED: usize = 256;

/// Where the next sync lists from: [`Floor::list_from`] on, and each of
/// [`Floor::pending`] requested before it looked up on its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Floor {
    /// An instant time, 14 digits.
    pub list_from: String,
    /// The instants pending when the timeline was listed (requested times), sorted;
    /// `None`: not known (a state written before them, or past [`MAX_LOOKUPS`]).
    pub pending: Option<Vec<String>>,
    /// Late completions still owed to the mirror after the instant whose state this is
    /// (requested times, sorted): known to have been pending, whatever `pending` says.
    pub owed: Vec<String>,
    /// Of [`Self::pending`], the instants whose completion gets no snapshot (sorted);
    /// `None`: not known (a state written before them).
    pub quiet: Option<Vec<String>>,
}

impl Floor {
    /// The floor to list from on a table whose instant times are UTC (`utc`) or local,
    /// at `now`: a local table's `list_from` lowered by the hour more of [`LOCAL_MARGIN`]
    /// when a clock may have gone back since it was saved ([`crate::clock`]).
    pub(crate) fn for_listing(mut self, utc: bool, now: chrono::DateTime<chrono::Utc>) -> Self {
        if !utc {
            if let Some(lowered) = crate::clock::listing_floor(&self.list_from, now) {
                self.list_from = lowered;
            }
        }
        self
    }

    /// The pending instants requested before [`Self::list_from`]: to look up.
    pub(crate) fn lookups(&self) -> Vec<&str> {
        let pending = self.pending.iter().flatten();
        pending
            .filter(|p| seconds(p) < self.list_from.as_str())
            .map(String::as_str)
            .collect()
    }

    /// Whether `id` was pending when the timeline was listed (or is owed, having been);
    /// `None`: not known.
    pub(crate) fn was_pending(&self, id: &str) -> Option<bool> {
        if self.owed.binary_search_by(|p| p.as_str().cmp(id)).is_ok() {
            return Some(true);
        }
        let pending = self.pending.as_ref()?;
        Some(pending.binary_search_by(|p| p.as_str().cmp(id)).is_ok())
    }
}

/// The state to save with the change set of `instant`.
pub(crate) fn save(instant: &str, floor: &Floor) -> String {
    let saved = Saved {
        hudi: Resume {
            instant: instant.to_string(),
            list_from: floor.list_from.clone(),
            pending: floor.pending.clone(),
            owed: floor.owed.clone(),
            quiet: floor.quiet.clone(),
        },
    };
    serde_json::to_string(&saved).unwrap_or_default()
}

/// Where to list from, if `saved` is the state of the change set of `newest` (the
/// mirror's newest instant) and lists from at or before it.
pub(crate) fn of(saved: Option<&str>, newest: &str) -> Option<Floor> {
    let Saved { hudi } = serde_json::from_str(saved?).ok()?;
    let floor = checked(hudi.list_from, hudi.pending, hudi.owed, hudi.quiet)?;
    (hudi.instant == newest && floor.list_from.as_str() <= newest).then_some(floor)
}

/// A floor read back, if its times are instant times and it has no more than
/// [`MAX_LOOKUPS`] to look up (the lists sorted again); a `quiet` list that does not read
/// is taken as not known. The late completions still owed after a change set's instant
/// come after its `listFrom` and are no lookups: a state naming them beside 16 pending
/// instants was not read back at all, and the next sync, from no state, took them as
/// expired (hostile review hr15: 15 rows lost, exit 0).
fn checked(
    list_from: String,
    pending: Option<Vec<String>>,
    owed: Vec<String>,
    quiet: Option<Vec<String>>,
) -> Option<Floor> {
    let valid = list_from.len() == 14 && list_from.bytes().all(|b| b.is_ascii_digit());
    let owed = instant_times(owed)?;
    let lookups = |p: &Vec<String>| {
        let before = p.iter().filter(|t| seconds(t) < list_from.as_str());
        before.count() <= MAX_LOOKUPS
    };
    let pending = match pending {
        Some(p) => Some(instant_times(p).filter(lookups)?),
        None => None,
    };
    valid.then_some(Floor {
        list_from,
        pending,
        owed,
        quiet: quiet.and_then(instant_times),
    })
}

/// `times` sorted, if each is an instant time (14 digits or more).
fn instant_times(mut times: Vec<String>) -> Option<Vec<String>> {
    let time = |t: &String| t.len() >= 14 && t.bytes().all(|b| b.is_ascii_digit());
    times.iter().all(time).then(|| {
        times.sort();
        times
    })
}

/// Where the next sync lists from after a sync that listed `timeline`, before what the
/// instants it gives after each change set lower it: the newest instant listed less the
/// margin (the caller's: [`MARGIN`]), and the pending instants named; past [`MAX_LOOKUPS`] of them, the
/// oldest pending instant less the margin if older (none to look up), and past
/// [`MAX_NAMED`] none named (before, none was named past [`MAX_LOOKUPS`], and one of them
/// that completed before where the mirror begins was taken as expired). `None` when the
/// timeline is empty or a time does not read (the next sync then lists whole).
pub(crate) fn floor(timeline: &Timeline, margin: chrono::TimeDelta) -> Option<Floor> {
    let all = || timeline.completed.iter().chain(&timeline.pending);
    let newest = all().map(|i| i.requested()).max()?;
    let mut pending: Vec<String> = timeline
        .pending
        .iter()
        .map(|i| i.requested().to_string())
        .collect();
    pending.sort();
    pending.dedup();
    let quiet = timeline
        .pending
        .iter()
        .filter(|i| !completes_with_snapshot(i.action()));
    let mut quiet: Vec<String> = quiet.map(|i| i.requested().to_string()).collect();
    quiet.sort();
    quiet.dedup();
    let named = pending.len() <= MAX_NAMED;
    let bound = match pending.len() > MAX_LOOKUPS {
        true => pending.first().map_or(newest, |p| p.as_str().min(newest)),
        false => newest,
    };
    Some(Floor {
        list_from: minus_margin(bound, margin)?,
        pending: named.then_some(pending),
        owed: Vec::new(),
        quiet: named.then_some(quiet),
    })
}

/// The floor a no-op check reads from the tip a settled sync recorded
/// ([`crate::HudiSource::tip`]: `<listFrom>:<ids>:<pending looked up>`), if it reads.
pub(crate) fn of_tip(tip: &str) -> Option<Floor> {
    let mut parts = tip.split(':');
    let list_from = parts.next()?.to_string();
    let _ids = parts.next()?;
    let pending = match parts.next() {
        Some("") => Some(Vec::new()),
        Some(p) => Some(p.split(',').map(str::to_string).collect()),
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    checked(list_from, pending, Vec::new(), None)
}

/// `time` (an instant time, 14 digits or more) less `margin`, as 14 digits.
fn minus_margin(time: &str, margin: chrono::TimeDelta) -> Option<String> {
    let seconds = time.get(..14)?;
    let at = chrono::NaiveDateTime::parse_from_str(seconds, "%Y%m%d%H%M%S").ok()?;
    Some((at - margin).format("%Y%m%d%H%M%S").to_string())
}

/// The first 14 digits of an instant time: listing from them lists the instant.
pub(crate) fn seconds(time: &str) -> &str {
    time.get(..14).unwrap_or(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A floor listed from `list_from` naming `pending` (writes: none quiet).
    fn at(list_from: &str, pending: Option<&[&str]>) -> Floor {
        Floor {
            list_from: list_from.to_string(),
            pending: pending.map(|p| p.iter().map(|t| t.to_string()).collect()),
            owed: Vec::new(),
            quiet: pending.map(|_| Vec::new()),
        }
    }

    /// [`at`] as a tip or a state written before `quiet` gives it back.
    fn unknown_quiet(floor: Floor) -> Floor {
        Floor {
            quiet: None,
            ..floor
        }
    }

    #[test]
    fn a_state_is_trusted_for_its_own_instant_only() {
        let floor = at("20240101015000", Some(&["20240101003000000"]));
        let saved = save("20240101020000000", &floor);
        assert_eq!(of(Some(&saved), "20240101020000000"), Some(floor));
        assert_eq!(of(Some(&saved), "20240101030000000"), None);
        assert_eq!(of(None, "20240101020000000"), None);
        assert_eq!(of(Some(r#"{"delta":{}}"#), "20240101020000000"), None);
        // Written before `pending`: its floor covers the pending instants.
        let old = r#"{"hudi":{"instant":"20240101020000000","listFrom":"20240101015000"}}"#;
        assert_eq!(
            of(Some(old), "20240101020000000"),
            Some(at("20240101015000", None))
        );
        // A floor after the instant, or not 14 digits, or a pending time not one: not
        // trusted.
        for bad in [
            at("20240101030000", None),
            at("2024", None),
            at("20240101015000", Some(&["2024x"])),
        ] {
            assert_eq!(
                of(Some(&save("20240101020000000", &bad)), "20240101020000000"),
                None
            );
        }
    }

    #[test]
    fn the_floor_is_the_newest_instant_less_the_margin_and_the_pending_ones() {
        let timeline = |names: &[&str]| Timeline::from_names(".hoodie", names.iter().copied());
        let done = ["20240101020000000.commit", "20240101010000000.commit"];
        assert_eq!(
            floor(&timeline(&done), MARGIN),
            Some(at("20240101015000", Some(&[])))
        );
        let pending = [&done[..], &["20240101003000000.commit.requested"]].concat();
        let floor_of = floor(&timeline(&pending), MARGIN).unwrap();
        assert_eq!(floor_of, at("20240101015000", Some(&["20240101003000000"])));
        assert_eq!(floor_of.lookups(), ["20240101003000000"]);
        assert_eq!(floor_of.was_pending("20240101003000000"), Some(true));
        assert_eq!(floor_of.was_pending("20240101010000000"), Some(false));
        assert_eq!(floor(&timeline(&[]), MARGIN), None);
        assert_eq!(
            minus_margin("20240101000500", MARGIN),
            Some("20231231235500".into())
        );
        assert_eq!(minus_margin("2024x101000500", MARGIN), None);
    }

    /// Past [`MAX_LOOKUPS`] pending instants the floor is the oldest of them less the
    /// margin, as before the lookups: they are named, none to look up; past
    /// [`MAX_NAMED`] none is named.
    #[test]
    fn many_pending_instants_hold_the_floor_back_as_before() {
        let times: Vec<String> = (0..=MAX_LOOKUPS)
            .map(|n| format!("20240101{n:02}0000000"))
            .collect();
        let names: Vec<String> = times
            .iter()
            .map(|t| format!("{t}.commit.requested"))
            .chain(["20240102000000000.commit".to_string()])
            .collect();
        let timeline = Timeline::from_names(".hoodie", names.iter().map(String::as_str));
        let named: Vec<&str> = times.iter().map(String::as_str).collect();
        let floor_of = floor(&timeline, MARGIN).unwrap();
        assert_eq!(floor_of, at("20231231235000", Some(&named)));
        assert!(floor_of.lookups().is_empty());
        let saved = save("20240102000000000", &floor_of);
        assert_eq!(of(Some(&saved), "20240102000000000"), Some(floor_of));
        let names: Vec<String> = (0..=MAX_NAMED)
            .map(|n| {
                format!(
                    "2024010{}{:02}{:02}00000.commit.requested",
                    1 + n / 1440,
                    n / 60 % 24,
                    n % 60
                )
            })
            .collect();
        let timeline = Timeline::from_names(".hoodie", names.iter().map(String::as_str));
        assert_eq!(floor(&timeline, MARGIN), Some(at("20231231235000", None)));
    }

    #[test]
    fn a_tip_gives_back_its_floor() {
        let floor = unknown_quiet(at("20240101015000", Some(&["20240101003000000"])));
        assert_eq!(
            of_tip("20240101015000:20240101020000000:20240101003000000"),
            Some(floor)
        );
        assert_eq!(
            of_tip("20240101015000::"),
            Some(unknown_quiet(at("20240101015000", Some(&[]))))
        );
        assert_eq!(
            of_tip("20240101015000:20240101020000000"),
            Some(at("20240101015000", None))
        );
        assert_eq!(of_tip(""), None);
        assert_eq!(of_tip("2024:x"), None);
    }
}
