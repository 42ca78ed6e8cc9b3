//! Instants: one action on the timeline, named by its requested time.

use std::sync::Arc;

/// Where an instant is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Planned.
    Requested,
    /// Being written.
    Inflight,
    /// Done: the only state xlake mirrors.
    Completed,
}

/// One timeline file, parsed from its name. Its parts are read from its file's path,
/// which the instants of one timeline share a buffer for: one allocation a timeline, of
/// thousands of instants.
#[derive(Clone)]
pub struct Instant {
    /// The file, relative to the table root, is `text[file]`.
    text: Arc<str>,
    file: Span,
    requested: Span,
    completed: Option<Span>,
    /// `None`: a bare `.inflight` (table version 6), a commit's.
    action: Option<Span>,
    /// State.
    pub state: State,
}

/// Where a part of an instant's file path is in its text, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span(usize, usize);

impl Span {
    /// The part of `text` (the instant's text) this span covers.
    fn of(self, text: &str) -> &str {
        text.get(self.0..self.1).unwrap_or_default()
    }
}

/// Instants are the same file in the same state (their parts are read from the file).
impl PartialEq for Instant {
    fn eq(&self, other: &Self) -> bool {
        self.file() == other.file() && self.state == other.state
    }
}

impl Eq for Instant {}

impl std::fmt::Debug for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self.file();
        f.debug_struct("Instant")
            .field("file", &file)
            .field("state", &self.state)
            .finish()
    }
}

impl Instant {
    /// Parse a timeline file name (`20240418173551906.commit`,
    /// `20260307135657661_20260307135659468.commit`, `….commit.requested`, `….inflight`).
    /// `None` for files that are not instants.
    pub fn parse(dir: &str, name: &str) -> Option<Self> {
        instants(dir, &[&Named::parse(name)?]).pop()
    }

    /// Requested time, `yyyyMMddHHmmssSSS`.
    pub fn requested(&self) -> &str {
        self.requested.of(&self.text)
    }

    /// Completion time (table versions 8 and 9 only).
    pub fn completed(&self) -> Option<&str> {
        self.completed.map(|c| c.of(&self.text))
    }

    /// Action (`commit`, `deltacommit`, `replacecommit`, `rollback`, `clean`, …).
    pub fn action(&self) -> &str {
        self.action.map_or("commit", |a| a.of(&self.text))
    }

    /// The file, relative to the table root.
    pub fn file(&self) -> &str {
        self.file.of(&self.text)
    }

    /// The time this instant orders by and is mirrored at: completion time when the
    /// timeline records it, else the requested time.
    pub fn commit_time(&self) -> &str {
        self.completed().unwrap_or(self.requested())
    }
}

/// An instant as its file's name says it, borrowed from the name: what a listing reads
/// of every file before it keeps the few it needs ([`Instant::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Named<'a> {
    pub(crate) requested: &'a str,
    pub(crate) completed: Option<&'a str>,
    action: &'a str,
    pub(crate) state: State,
    pub(crate) name: &'a str,
    /// The first 16 bytes of the time it takes effect at (completion, else requested),
    /// big-endian, zero after a shorter time: two keys that differ order as the times
    /// do (names hold no zero byte), in a compare or two instead of a string compare.
    pub(crate) key: u128,
}

impl<'a> Named<'a> {
    /// See [`Instant::parse`].
    pub(crate) fn parse(name: &'a str) -> Option<Self> {
        // Read byte by byte, once: a long timeline's folder has thousands of names, each
        // read on every sync. The stem is a time, or two joined by `_`, then a `.`.
        let bytes = name.as_bytes();
        let time_at = |from: usize| {
            let digits = bytes[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            (digits >= 14).then_some(from + digits)
        };
        let end = time_at(0)?;
        let requested = &name[..end];
        let (completed, end) = match bytes.get(end) {
            Some(b'_') => {
                let done = time_at(end + 1)?;
                (Some(&name[end + 1..done]), done)
            }
            _ => (None, end),
        };
        let rest = match bytes.get(end) {
            Some(b'.') => &name[end + 1..],
            _ => return None,
        };
        let (action, state) = action_and_state(rest);
        if action.is_empty() || action.contains('.') {
            return None;
        }
        let time = completed.unwrap_or(requested).as_bytes();
        let mut key = [0u8; 16];
        let n = time.len().min(16);
        key[..n].copy_from_slice(&time[..n]);
        Some(Self {
            requested,
            completed,
            action,
            state,
            name,
            key: u128::from_be_bytes(key),
        })
    }

    /// The instant whose file is `text[start..]`, `dir` then `/` then the name.
    fn instant_at(&self, text: &Arc<str>, start: usize, dir: &str) -> Instant {
        // The name is the requested time, `_` and the completion time if any, `.`, then
        // the action (but for a bare `inflight`) and the state.
        let base = start + dir.len() + 1;
        let part = |at: usize, part: &str| Span(base + at, base + at + part.len());
        let stem = self.requested.len() + self.completed.map_or(0, |c| c.len() + 1);
        let after = self.name.get(stem + 1..).unwrap_or_default();
        Instant {
            text: Arc::clone(text),
            file: Span(start, base + self.name.len()),
            requested: part(0, self.requested),
            completed: self.completed.map(|c| part(self.requested.len() + 1, c)),
            action: after
                .starts_with(self.action)
                .then(|| part(stem + 1, self.action)),
            state: self.state,
        }
    }
}

/// The instants `named`, their files in folder `dir`, their paths in one text: one
/// allocation for a timeline's thousands.
pub(crate) fn instants(dir: &str, named: &[&Named]) -> Vec<Instant> {
    let room = named.iter().map(|n| dir.len() + 1 + n.name.len()).sum();
    let mut text = String::with_capacity(room);
    let mut starts = Vec::with_capacity(named.len());
    for n in named {
        starts.push(text.len());
        text.extend([dir, "/", n.name]);
    }
    let text: Arc<str> = Arc::from(text);
    let built = named.iter().zip(starts);
    built
        .map(|(n, start)| n.instant_at(&text, start, dir))
        .collect()
}

/// The action and state a timeline file name gives after its time(s) and `.`: `commit`
/// for a bare `inflight` (table version 6).
fn action_and_state(rest: &str) -> (&str, State) {
    if let Some(action) = rest.strip_suffix(".requested") {
        (action, State::Requested)
    } else if let Some(action) = rest.strip_suffix(".inflight") {
        (action, State::Inflight)
    } else if rest == "inflight" {
        ("commit", State::Inflight)
    } else {
        (rest, State::Completed)
    }
}

/// Milliseconds since the epoch of an instant time (`yyyyMMddHHmmss[SSS]`), read as UTC.
/// Second-precision times stand for the end of their second (`999` ms), as in Hudi.
pub fn instant_millis(time: &str) -> Option<i64> {
    // Digits read by hand: `str::parse` costs several times more, for each of a long
    // timeline's instants on every sync. (It also took a leading `+`, which no instant
    // time has: the timeline keeps only names that start with 14 digits or more.)
    let digits = |r: std::ops::Range<usize>| {
        let part = time.as_bytes().get(r)?;
        part.iter().try_fold(0u32, |n, b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    };
    let date = chrono::NaiveDate::from_ymd_opt(digits(0..4)? as i32, digits(4..6)?, digits(6..8)?)?;
    let millis = if time.len() >= 17 {
        digits(14..17)?
    } else {
        999
    };
    let t = date.and_hms_milli_opt(digits(8..10)?, digits(10..12)?, digits(12..14)?, millis)?;
    Some(t.and_utc().timestamp_millis())
}

/// What to do with a completed instant.
pub(crate) enum Kind {
    /// Files changed by commit metadata (commit, deltacommit, replacecommit).
    Commit,
    /// Undo of earlier instants.
    Rollback,
    /// Undo of every instant after a savepoint.
    Restore,
    /// No live file changes, no snapshot (clean, savepoint, indexing, …).
    Skip,
}

/// The actions that write data files (Hudi's write timeline).
const WRITE_ACTIONS: [&str; 3] = ["commit", "deltacommit", "replacecommit"];

/// Whether a pending instant of `action` gets a snapshot once completed: a write, a
/// rollback, a restore, or a compaction or clustering, which complete as writes.
pub(crate) fn completes_with_snapshot(action: &str) -> bool {
    gets_snapshot(action) || matches!(action, "compaction" | "logcompaction" | "clustering")
}

/// Whether an instant of `action`, in any state, is on Hudi's write timeline (a pending
/// commit of table version 6 is named `inflight`; compaction and clustering complete as
/// writes): what archival takes in requested order.
pub(crate) fn is_write(action: &str) -> bool {
    WRITE_ACTIONS.contains(&action) || matches!(action, "inflight" | "compaction" | "clustering")
}

pub(crate) fn kind(action: &str) -> Option<Kind> {
    Some(match action {
        "commit" | "deltacommit" | "replacecommit" => Kind::Commit,
        "rollback" => Kind::Rollback,
        "restore" => Kind::Restore,
        "clean" | "savepoint" | "indexing" | "schemacommit" | "compaction" | "logcompaction"
        | "clustering" => Kind::Skip,
        _ => return None,
    })
}

/// Whether a completed instant of `action` gets a snapshot (it may change live files).
pub(crate) fn gets_snapshot(action: &str) -> bool {
    matches!(
        kind(action),
        Some(Kind::Commit | Kind::Rollback | Kind::Restore)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_layouts() {
        let v6 = Instant::parse(".hoodie", "20240418173551906.commit").unwrap();
        assert_eq!(
            (v6.state, v6.action(), v6.completed()),
            (State::Completed, "commit", None)
        );
        let v9 = Instant::parse(
            ".hoodie/timeline",
            "20260307135657661_20260307135659468.replacecommit",
        )
        .unwrap();
        assert_eq!(v9.commit_time(), "20260307135659468");
        assert_eq!(
            v9.file(),
            ".hoodie/timeline/20260307135657661_20260307135659468.replacecommit"
        );
        assert_eq!(
            Instant::parse(".hoodie", "20240418173551906.inflight")
                .unwrap()
                .state,
            State::Inflight
        );
        assert_eq!(
            Instant::parse(".hoodie", "20240418173551906.commit.requested")
                .unwrap()
                .state,
            State::Requested
        );
        assert_eq!(Instant::parse(".hoodie", "hoodie.properties"), None);
        assert_eq!(
            Instant::parse(".hoodie", "20240418173551906.commit.crc"),
            None
        );
    }

    /// The byte-by-byte read of a name's time(s) agrees with the plain one it replaced,
    /// on names that are instants and names that only look like them.
    #[test]
    fn a_name_is_read_as_its_parts_say() {
        fn plain(name: &str) -> Option<(&str, Option<&str>, &str, State)> {
            let (stem, rest) = name.split_once('.')?;
            let (requested, completed) = match stem.split_once('_') {
                Some((r, c)) => (r, Some(c)),
                None => (stem, None),
            };
            let is_time = |t: &str| t.len() >= 14 && t.bytes().all(|b| b.is_ascii_digit());
            if !is_time(requested) || completed.is_some_and(|c| !is_time(c)) {
                return None;
            }
            let (action, state) = action_and_state(rest);
            (!action.is_empty() && !action.contains('.'))
                .then_some((requested, completed, action, state))
        }
        let t = "20240418173551906";
        let names = [
            format!("{t}.commit"),
            format!("{t}.deltacommit.inflight"),
            format!("{t}.commit.requested"),
            format!("{t}.inflight"),
            format!("{t}_{t}.replacecommit"),
            format!("{t}_{t}_{t}.commit"),
            format!("{t}_.commit"),
            format!("{t}_2024.commit"),
            format!("{t}x.commit"),
            format!("{t}.commit.crc"),
            format!("{t}."),
            format!("{t}..commit"),
            t.to_string(),
            format!("{t}_{t}"),
            "2024041817355.commit".into(),
            "20240418173551.clean".into(),
            "hoodie.properties".into(),
            ".commit".into(),
            String::new(),
            "２0240418173551906.commit".into(),
        ];
        for name in &names {
            let read = Named::parse(name).map(|n| (n.requested, n.completed, n.action, n.state));
            assert_eq!(read, plain(name), "{name}");
            // An instant reads the same parts back from its file's path.
            let instant = Instant::parse(".hoodie/timeline", name);
            let parts = instant
                .as_ref()
                .map(|i| (i.requested(), i.completed(), i.action(), i.state));
            assert_eq!(parts, plain(name), "{name}");
            if let Some(i) = instant {
                assert_eq!(i.file(), format!(".hoodie/timeline/{name}"));
            }
        }
    }

    #[test]
    fn instant_times_are_utc_millis() {
        assert_eq!(instant_millis("20240418173551906"), Some(1_713_461_751_906));
        assert_eq!(instant_millis("20240418173551"), Some(1_713_461_751_999));
        assert_eq!(instant_millis("2024041817355x906"), None);
        assert_eq!(instant_millis("20241318173551906"), None);
        assert_eq!(instant_millis("+0240418173551906"), None);
        assert_eq!(instant_millis("20240230173551906"), None, "February 30th");
        assert_eq!(instant_millis("20240229235959"), Some(1_709_251_199_999));
        assert_eq!(instant_millis("2024041817355"), None);
    }
}
