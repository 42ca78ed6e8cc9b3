//! The state a sync leaves for the next one ([`ChangeSet::source_state`]): the instant
//! time from which the next sync lists the timeline (`listFrom`), so that a long active
//! timeline is not listed whole for every incremental commit.
//!
//! Instant files are named by requested time, and an instant requested before the newest
//! mirrored one may complete after it. `listFrom` is therefore the oldest of: the oldest
//! pending (requested or inflight) instant the sync listed, and the newest instant it
//! listed, in any state, each less [`MARGIN`]; and, for a change set the sync gives
//! before others, the oldest requested time of the completed instants after it (a sync
//! that stops part-way leaves them unmirrored). Every instant not mirrored then was
//! either pending when listed, or not listed at all: one requested more than [`MARGIN`]
//! before the newest instant listed whose files appeared only after the listing (a
//! writer whose clock lags the others', or that names its instant long before it writes
//! the requested file) is the case it misses.
//!
//! A saved state is trusted only for the instant it names (the mirror's newest); a mirror
//! written by an older build has none, and its next sync lists the timeline whole.
//!
//! [`ChangeSet::source_state`]: xlake_model::ChangeSet::source_state

use serde::{Deserialize, Serialize};

use crate::timeline::Timeline;

/// How long before the newest instant listed an instant not yet listed may have been
/// requested (see the module doc), on a table whose instant times are UTC.
pub const MARGIN: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// The same on a table whose instant times are local (Hudi's default): an hour more, as
/// the end of summer time sets the clock, and so the instant times, back an hour
/// (hostile review 6: a sync before the change would never list the hour after it).
pub const LOCAL_MARGIN: chrono::TimeDelta = chrono::TimeDelta::minutes(70);

/// The margin for a table whose instant times are UTC (`utc`) or local.
pub(crate) fn margin(utc: bool) -> chrono::TimeDelta {
    match utc {
        true => MARGIN,
        false => LOCAL_MARGIN,
    }
}

/// `{"hudi": {"instant": …, "listFrom": …}}`.
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
}

/// The state to save with the change set of `instant`.
pub(crate) fn save(instant: &str, list_from: &str) -> String {
    let saved = Saved {
        hudi: Resume {
            instant: instant.to_string(),
            list_from: list_from.to_string(),
        },
    };
    serde_json::to_string(&saved).unwrap_or_default()
}

/// Where to list from, if `saved` is the state of the change set of `newest` (the
/// mirror's newest instant) and lists from at or before it.
pub(crate) fn of(saved: Option<&str>, newest: &str) -> Option<String> {
    let Saved { hudi } = serde_json::from_str(saved?).ok()?;
    let valid = hudi.list_from.len() == 14 && hudi.list_from.bytes().all(|b| b.is_ascii_digit());
    (hudi.instant == newest && valid && hudi.list_from.as_str() <= newest).then_some(hudi.list_from)
}

/// The instant time a sync that listed `timeline` leaves to list from, before what the
/// instants it gives after each change set lower it: the oldest pending instant and the
/// newest instant listed, each less the margin ([`margin`]). `None` when the timeline is empty or a
/// time does not read (the next sync then lists whole).
pub(crate) fn floor(timeline: &Timeline, margin: chrono::TimeDelta) -> Option<String> {
    let all = || timeline.completed.iter().chain(&timeline.pending);
    let newest = all().map(|i| i.requested()).max()?;
    let oldest_pending = timeline.pending.iter().map(|i| i.requested()).min();
    let bound = oldest_pending.map_or(newest, |p| p.min(newest));
    minus_margin(bound, margin)
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

    #[test]
    fn a_state_is_trusted_for_its_own_instant_only() {
        let saved = save("20240101020000000", "20240101015000");
        assert_eq!(
            of(Some(&saved), "20240101020000000").as_deref(),
            Some("20240101015000")
        );
        assert_eq!(of(Some(&saved), "20240101030000000"), None);
        assert_eq!(of(None, "20240101020000000"), None);
        assert_eq!(of(Some(r#"{"delta":{}}"#), "20240101020000000"), None);
        // A floor after the instant, or not 14 digits: not trusted.
        assert_eq!(
            of(
                Some(&save("20240101020000000", "20240101030000")),
                "20240101020000000"
            ),
            None
        );
        assert_eq!(
            of(
                Some(&save("20240101020000000", "2024")),
                "20240101020000000"
            ),
            None
        );
    }

    #[test]
    fn the_floor_is_the_oldest_pending_or_newest_instant_less_the_margin() {
        let timeline = |names: &[&str]| Timeline::from_names(".hoodie", names.iter().copied());
        let done = ["20240101020000000.commit", "20240101010000000.commit"];
        assert_eq!(
            floor(&timeline(&done), MARGIN).as_deref(),
            Some("20240101015000")
        );
        let pending = [&done[..], &["20240101003000000.commit.requested"]].concat();
        assert_eq!(
            floor(&timeline(&pending), MARGIN).as_deref(),
            Some("20240101002000")
        );
        assert_eq!(floor(&timeline(&[]), MARGIN), None);
        assert_eq!(
            minus_margin("20240101000500", MARGIN),
            Some("20231231235500".into())
        );
        assert_eq!(minus_margin("2024x101000500", MARGIN), None);
    }
}
