//! Whether a table's local instant times may have gone back since a floor was saved.
//!
//! A table whose `hoodie.table.timeline.timezone` is not `UTC` (Hudi's default, `LOCAL`)
//! names its instants by its writer's wall clock, which goes back when the writer's zone
//! lowers its UTC offset (the end of summer time, Morocco's Ramadan hour): the instants of
//! the repeated time then sort below a floor saved just before ([`crate::resume`], hostile
//! review 6). The writer's zone is not known, but the tz database knows every zone's
//! offsets: if no zone lowered its offset between the earliest UTC time the floor's
//! instants can stand for and now, no writer's clock went back, and the floor saved with
//! [`MARGIN`] holds as it is; else the listing starts [`LOCAL_MARGIN`] before the newest
//! instant instead ([`listing_floor`]). Zones whose rules change after the build's tz data
//! are not known (docs/known-gaps.md).

use chrono::{DateTime, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};

/// How long before the newest instant listed an instant not yet listed may have been
/// requested (see [`crate::resume`]). Every floor is saved with it.
pub const MARGIN: TimeDelta = TimeDelta::minutes(10);

/// The same on a table whose instant times are local (Hudi's default) when a clock may
/// have gone back since the floor was saved: an hour more, as the end of summer time
/// sets the clock, and so the instant times, back an hour (hostile review 6: a sync
/// before the change would never list the hour after it). Applied where a saved floor is
/// used to list ([`crate::resume::Floor::for_listing`], [`listing_floor`]); a build before that saved
/// every local table's floor with it (such a floor is read as it is).
pub const LOCAL_MARGIN: TimeDelta = TimeDelta::minutes(70);

/// Offsets are compared this far apart: shorter than any zone keeps a changed offset
/// (Morocco's Ramadan hour lasts about a month), so no back-and-forth falls between two.
pub const STEP: TimeDelta = TimeDelta::hours(6);

/// Past this span the check is not made: the floor is lowered (a sync after a long pause
/// lists more; a check over months would cost more than the pages it saves).
pub const SPAN_CAP: TimeDelta = TimeDelta::days(15);

/// The widest UTC offset ahead of UTC (`Pacific/Kiritimati`, +14:00): an instant named in
/// local time was written no earlier than this before that time read as UTC.
const WIDEST_AHEAD: TimeDelta = TimeDelta::hours(14);

/// The widest backward change of any zone in the tz database: `Antarctica/Troll` goes
/// from +02 to +00 each October (hostile review hr18); what a span past [`SPAN_CAP`] is
/// taken to hold.
const WIDEST_DROP: TimeDelta = TimeDelta::hours(2);

/// The largest fall of any zone's UTC offset between `from` and `to` (offsets sampled
/// every [`STEP`], and at `to`), zero when none fell; [`WIDEST_DROP`] past [`SPAN_CAP`],
/// and for a span that ends before it starts (a floor dated ahead of now: not judged).
pub fn offset_drop(from: DateTime<Utc>, to: DateTime<Utc>) -> TimeDelta {
    if to < from || to - from > SPAN_CAP {
        return WIDEST_DROP;
    }
    let mut at = vec![from.naive_utc()];
    while let Some(last) = at.last().copied() {
        let next = (last + STEP).min(to.naive_utc());
        if next <= last {
            break;
        }
        at.push(next);
    }
    let drop = chrono_tz::TZ_VARIANTS.iter().map(|zone| {
        let offsets: Vec<i32> = at
            .iter()
            .map(|t| zone.offset_from_utc_datetime(t).fix().local_minus_utc())
            .collect();
        let falls = offsets.windows(2).map(|w| w[0].saturating_sub(w[1]));
        falls.max().unwrap_or(0)
    });
    TimeDelta::seconds(i64::from(drop.max().unwrap_or(0).max(0)))
}

/// The instant time (14 digits, local) to list a local-time table from, given the floor
/// `list_from` a sync saved with [`MARGIN`]: when some zone's clock may have gone back
/// since ([`offset_drop`] from the floor less [`WIDEST_AHEAD`] and the margin, to `now`),
/// lowered by that fall, and by no less than the hour more of [`LOCAL_MARGIN`]; `None`
/// when `list_from` does not read (the caller keeps it as it is).
pub fn listing_floor(list_from: &str, now: DateTime<Utc>) -> Option<String> {
    let at = NaiveDateTime::parse_from_str(list_from.get(..14)?, "%Y%m%d%H%M%S").ok()?;
    let earliest = Utc.from_utc_datetime(&(at - WIDEST_AHEAD - MARGIN));
    let drop = offset_drop(earliest, now);
    if drop <= TimeDelta::zero() {
        return Some(list_from.to_string());
    }
    let lowered = at - drop.max(LOCAL_MARGIN - MARGIN);
    Some(lowered.format("%Y%m%d%H%M%S").to_string())
}

/// Now, for the check; tests set it per thread ([`tests::set_now`]).
pub(crate) fn now() -> DateTime<Utc> {
    #[cfg(test)]
    if let Some(now) = tests::NOW.with(|n| n.get()) {
        return now;
    }
    Utc::now()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        pub(crate) static NOW: Cell<Option<DateTime<Utc>>> = const { Cell::new(None) };
    }

    /// Set [`now`] on this thread (a `#[tokio::test]` runs on one).
    pub(crate) fn set_now(at: &str) {
        NOW.with(|n| n.set(Some(utc(at))));
    }

    fn utc(at: &str) -> DateTime<Utc> {
        let naive = NaiveDateTime::parse_from_str(at, "%Y%m%d%H%M%S").unwrap();
        Utc.from_utc_datetime(&naive)
    }

    fn went_back(from: &str, to: &str) -> bool {
        offset_drop(utc(from), utc(to)) > TimeDelta::zero()
    }

    #[test]
    fn a_span_across_a_summer_time_end_says_yes() {
        // EU: 2026-10-25 01:00 UTC; US: 2026-11-01 (06:00 UTC in New York).
        assert!(went_back("20261024120000", "20261025030000"));
        assert!(went_back("20261031120000", "20261101120000"));
        // Inside one step: the sample at the span's end still sees it.
        assert!(went_back("20261025005900", "20261025010100"));
    }

    #[test]
    fn a_span_in_early_december_says_no() {
        assert!(!went_back("20261201000000", "20261207000000"));
        assert!(!went_back("20261203100000", "20261203100500"));
        assert!(!went_back("20261205000000", "20261205000000"));
    }

    #[test]
    fn morocco_suspending_summer_time_for_ramadan_says_yes() {
        // Casablanca goes from +01 to +00 for Ramadan: 2026-02-15 02:00 UTC+1 (tz data
        // 2025+); nothing else in the world lowers its offset in that week.
        let casablanca = chrono_tz::Africa::Casablanca;
        let before = casablanca.offset_from_utc_datetime(&utc("20260210000000").naive_utc());
        let during = casablanca.offset_from_utc_datetime(&utc("20260301000000").naive_utc());
        assert!(during.fix().local_minus_utc() < before.fix().local_minus_utc());
        assert!(went_back("20260210000000", "20260301000000"));
        assert!(!went_back("20260301000000", "20260310000000"));
    }

    #[test]
    fn a_two_hour_fall_lowers_the_floor_two_hours() {
        // Antarctica/Troll: +02 to +00 at 2026-10-25 01:00 UTC (hostile review hr18).
        assert_eq!(
            offset_drop(utc("20261024120000"), utc("20261025030000")),
            TimeDelta::hours(2)
        );
        assert_eq!(
            listing_floor("20261025024000", utc("20261025013000")).as_deref(),
            Some("20261025004000")
        );
    }

    #[test]
    fn a_span_over_the_cap_or_backwards_says_yes() {
        assert!(went_back("20261201000000", "20261217000000"));
        assert!(went_back("20261207000000", "20261206000000"));
    }

    #[test]
    fn the_floor_is_lowered_only_across_a_change() {
        // Saved at 02:40 local less 10 minutes, checked the same night: no change.
        let now = utc("20261203100000");
        assert_eq!(
            listing_floor("20261203023000", now).as_deref(),
            Some("20261203023000")
        );
        // Saved before the EU change, checked after it: lower by the widest fall that
        // night, Antarctica/Troll's two hours (the EU's one hour is within it).
        let now = utc("20261025013000");
        assert_eq!(
            listing_floor("20261025023000", now).as_deref(),
            Some("20261025003000")
        );
        // Across the US change only (New York, a week later): an hour lower.
        let now = utc("20261101070000");
        assert_eq!(
            listing_floor("20261101023000", now).as_deref(),
            Some("20261101013000")
        );
        assert_eq!(listing_floor("2026x", now), None);
    }
}
