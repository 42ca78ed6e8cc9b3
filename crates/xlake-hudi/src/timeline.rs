//! The timeline: which instants exist, which completed, and what each completed one says.
//!
//! Table version 6 keeps instants flat in `.hoodie/`; versions 8 and 9 in
//! `.hoodie/timeline/` with completion times in the names. Completed commit metadata is
//! JSON (v6 commits) or a single-record Avro container (v6 rollbacks and cleans, all of
//! v8/v9); both are read into the same JSON shape. `.hoodie/metadata/` (the metadata
//! table) and other stray files are not instants and are ignored.

use rustc_hash::FxHashSet;
use serde_json::Value as Json;
use xlake_storage::TableStore;

use crate::error::{HudiError, Reason, Result};
use crate::instant::{instants, Instant, Named, State};

/// The instants of a table.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Completed instants, in the order they take effect (completion time, then requested).
    pub completed: Vec<Instant>,
    /// Requested or inflight instants with no completed file: not mirrored.
    pub pending: Vec<Instant>,
}

impl Timeline {
    /// The requested time of the oldest instant on the write timeline, in any state
    /// ([`crate::instant::is_write`]): archival takes those in requested order, so every
    /// write instant before it is archived (or was rolled back).
    pub(crate) fn oldest_write(&self) -> Option<&str> {
        let all = self.completed.iter().chain(&self.pending);
        let writes = all.filter(|i| crate::instant::is_write(i.action()));
        writes.map(|i| i.requested()).min()
    }

    /// List the timeline in `dir` (`.hoodie` for table version 6, `.hoodie/timeline` after).
    pub async fn load(store: &TableStore, dir: &str) -> Result<Self> {
        // Names only: on local disk the thousands of instant files are not each stat-ed.
        let names = store.list_names(dir).await?;
        Ok(Self::from_names(dir, names.iter()))
    }

    /// The part of the timeline in `dir` requested after `from` (an instant time's first
    /// digits): its files only, listed from there ([`TableStore::list_digit_names_from`]).
    pub async fn load_from(store: &TableStore, dir: &str, from: &str) -> Result<Self> {
        let names = store.list_digit_names_from(dir, from).await?;
        Ok(Self::from_names(dir, names.iter()))
    }

    /// [`Self::load_from`], with the files of each instant time of `lookups` (requested
    /// before `from`: pending when the last sync listed) listed on its own
    /// ([`TableStore::list_names_starting`], one request each). Only files of exactly
    /// that time are kept: a shorter time is the prefix of longer ones.
    pub async fn load_part(
        store: &TableStore,
        dir: &str,
        from: &str,
        lookups: &[&str],
    ) -> Result<Self> {
        let mut names: Vec<String> = store
            .list_digit_names_from(dir, from)
            .await?
            .iter()
            .map(str::to_string)
            .collect();
        for time in lookups {
            let found = store.list_names_starting(dir, time).await?;
            let digits = |n: &str| n.bytes().take_while(u8::is_ascii_digit).count();
            let own = found.iter().filter(|n| digits(n) == time.len());
            names.extend(own.map(str::to_string));
        }
        Ok(Self::from_names(dir, names.iter().map(String::as_str)))
    }

    /// The timeline in `dir` whose file names are `names` (in any order).
    pub fn from_names<'a, I>(dir: &str, names: I) -> Self
    where
        I: IntoIterator<Item = &'a str>,
        I::IntoIter: Clone,
    {
        // Each name is parsed at most once and borrowed until the few kept are made
        // instants: a long timeline's folder holds thousands, a third of them completed
        // instants, and most of the others their requested and inflight files, told by
        // their ends (`pending_file`) and read after the completed ones.
        let names = names.into_iter();
        let (mut completed, mut others) = (Vec::new(), Vec::new());
        completed.reserve(names.size_hint().0 / 3 + 1);
        for n in names
            .clone()
            .filter(|n| !pending_file(n))
            .filter_map(Named::parse)
        {
            match n.state {
                State::Completed => completed.push(n),
                _ => others.push(n),
            }
        }
        let done: FxHashSet<&str> = completed.iter().map(|n| n.requested).collect();
        others.retain(|n| !done.contains(n.requested));
        // A requested or inflight file of a completed instant is not parsed: its
        // requested time is the digits it starts with.
        let of_done =
            |n: &&str| done.contains(&n[..n.bytes().take_while(u8::is_ascii_digit).count()]);
        let pending = names.filter(|n| pending_file(n) && !of_done(n));
        others.extend(pending.filter_map(Named::parse));
        let mut pending = sorted(&others);
        pending.dedup_by(|a, b| a.requested == b.requested);
        Self {
            completed: instants(dir, &sorted(&completed)),
            pending: instants(dir, &pending),
        }
    }
}

/// Whether [`Named::parse`] gives file `name`, if an instant's, the requested or inflight
/// state, told by its end alone: `.inflight`, or `.requested` after an action (a bare
/// `<time>.requested` is a completed instant of action `requested` to it). Not every
/// such file: a requested file whose action ends in a digit is not told, and is read
/// with the completed ones (which keep only what parses as completed).
fn pending_file(name: &str) -> bool {
    name.ends_with(".inflight")
        || name
            .strip_suffix(".requested")
            .is_some_and(|rest| !rest.ends_with(|c: char| c.is_ascii_digit()))
}

/// `named` in the order instants take effect in ([`in_order`]). References are sorted:
/// a `Named` is a hundred bytes, which a sort would move often.
fn sorted<'n, 'a>(named: &'n [Named<'a>]) -> Vec<&'n Named<'a>> {
    let mut sorted: Vec<&Named> = named.iter().collect();
    sorted.sort_unstable_by(|a, b| in_order(a, b));
    sorted
}

/// The order instants take effect in: completion time, then requested time, then state
/// (then the name, so that the folder's own order never shows). The times' keys first:
/// they differ for nearly every two instants of a timeline, which is then sorted by
/// compares of integers.
fn in_order(a: &Named, b: &Named) -> std::cmp::Ordering {
    a.key.cmp(&b.key).then_with(|| order(a).cmp(&order(b)))
}

/// See [`in_order`].
fn order<'a>(n: &Named<'a>) -> (&'a str, &'a str, State, &'a str) {
    (
        n.completed.unwrap_or(n.requested),
        n.requested,
        n.state,
        n.name,
    )
}

/// The contents of a completed instant's file, as JSON.
pub async fn read_instant(store: &TableStore, instant: &Instant) -> Result<Json> {
    let bytes = store.get(instant.file()).await?;
    decode(&bytes).map_err(|reason| HudiError::Instant {
        instant: instant.requested().to_string(),
        file: store.absolute(instant.file()),
        reason,
    })
}

/// Largest count or length one Avro value may claim. apache-avro reserves room for a
/// sequence's claimed length before reading it, up to 512 Mi entries by default: tens of
/// GB from one corrupt length (found by fuzzing). 16 Mi bounds that to about 1 GB of
/// address space and still admits Avro instants of up to 16 MiB. apache-avro holds one
/// limit per process: xlake-iceberg sets the same one.
pub const AVRO_MAX_ALLOCATION: usize = 16 << 20;

/// JSON text, or a single-record Avro container (its first record), as JSON.
pub fn decode(bytes: &[u8]) -> Result<Json, Reason> {
    if bytes.is_empty() {
        return Ok(Json::Null);
    }
    if bytes.starts_with(b"Obj\x01") {
        apache_avro::util::max_allocation_bytes(AVRO_MAX_ALLOCATION);
        // apache-avro 0.21 panics (an unwrap) on an invalid record, enum or fixed name in
        // the writer schema (found by fuzzing): refuse those before it parses the schema.
        if let Some(name) = header_schema(bytes)?.as_ref().and_then(bad_name) {
            return Err(format!(
                "corrupt Avro container: invalid type name {name:?} in its schema"
            )
            .into());
        }
        let mut reader =
            apache_avro::Reader::new(bytes).map_err(Reason::within("corrupt Avro container"))?;
        let record = reader
            .next()
            .ok_or("Avro container holds no record")?
            .map_err(Reason::within("corrupt Avro record"))?;
        return Json::try_from(record).map_err(Reason::within("Avro record not convertible"));
    }
    serde_json::from_slice(bytes).map_err(Reason::within("corrupt JSON"))
}

/// The writer schema (JSON) from an Avro container's header, if the header reads. As in
/// apache-avro (a map), the last `avro.schema` entry wins. A header claiming more entries
/// than its bytes can hold is refused: apache-avro would reserve room for them first.
fn header_schema(bytes: &[u8]) -> Result<Option<Json>, Reason> {
    let header = xlake_storage::avro::header(bytes).map_err(Reason::library)?;
    let schema = header.as_ref().and_then(|h| h.get(b"avro.schema"));
    Ok(schema.and_then(|schema| serde_json::from_slice(schema).ok()))
}

/// The first name of a named type (record, enum, fixed) that the Avro specification
/// does not allow, anywhere in `schema`.
fn bad_name(schema: &Json) -> Option<String> {
    let identifier = xlake_storage::avro::is_name;
    let full_name = |s: &str| match s.rsplit_once('.') {
        Some((ns, name)) => identifier(name) && (ns.is_empty() || ns.split('.').all(identifier)),
        None => identifier(s),
    };
    match schema {
        Json::Array(items) => items.iter().find_map(bad_name),
        Json::Object(map) => {
            let named = matches!(
                map.get("type").and_then(Json::as_str),
                Some("record" | "error" | "enum" | "fixed")
            );
            match map.get("name") {
                Some(Json::String(name)) if named && !full_name(name) => {
                    return Some(name.clone());
                }
                _ => {}
            }
            map.values().find_map(bad_name)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder lists its names in an order of its own: the timeline does not show it.
    #[test]
    fn the_timeline_is_the_same_in_any_listing_order() {
        let names: Vec<String> = [
            "20240101000003000.commit.requested",
            "20240101000001000.commit",
            "20240101000002000.inflight",
            "20240101000002000.commit.requested",
            "20240101000001000.inflight",
            "20240101000003000.inflight",
            "20240101000003000.commit",
            "20240101000004000.rollback",
            "hoodie.properties",
            "20240101000001000.commit.requested",
        ]
        .map(String::from)
        .to_vec();
        let ids = |t: &Timeline| {
            let each = |is: &[Instant]| is.iter().map(|i| i.file().to_string()).collect::<Vec<_>>();
            (each(&t.completed), each(&t.pending))
        };
        let listed = Timeline::from_names(".hoodie", names.iter().map(String::as_str));
        assert_eq!(
            ids(&listed),
            (
                vec![
                    ".hoodie/20240101000001000.commit".to_string(),
                    ".hoodie/20240101000003000.commit".into(),
                    ".hoodie/20240101000004000.rollback".into(),
                ],
                vec![".hoodie/20240101000002000.commit.requested".to_string()],
            )
        );
        let mut reversed = names.clone();
        reversed.reverse();
        assert_eq!(
            ids(&Timeline::from_names(
                ".hoodie",
                reversed.iter().map(String::as_str)
            )),
            ids(&listed)
        );
    }

    /// Sorting by the times' keys first gives the order itself: times that share their
    /// first 16 bytes, times of 14 and 17 digits, completion times.
    #[test]
    fn keys_order_instants_as_their_times_do() {
        let names = [
            "20240101000000001.commit",
            "20240101000000002.commit",
            "20240101000000002.commit.requested",
            "20240101000000002.inflight",
            "20240101000000.commit",
            "20240101000000.rollback",
            "2024010100000010.commit",
            "20240101000000000_20240101000000003.commit",
            "20240101000000001_20240101000000002.deltacommit",
            "20240101000000001_2024010100000000.clean",
            "99999999999999999999.commit",
            "20240101000000000_99999999999999999999.commit",
        ];
        let named: Vec<Named> = names.iter().filter_map(|n| Named::parse(n)).collect();
        assert_eq!(named.len(), names.len());
        for a in &named {
            for b in &named {
                assert_eq!(in_order(a, b), order(a).cmp(&order(b)), "{a:?} {b:?}");
            }
        }
    }

    /// The timeline is what parsing every name gives (the completed instants, and the
    /// others whose requested time none of them has, one per time), whatever the names.
    #[test]
    fn a_timeline_is_what_parsing_every_name_gives() {
        let names = [
            "20240101000000001.commit",
            "20240101000000001.commit.requested",
            "20240101000000001.inflight",
            "20240101000000002.commit.requested",
            "20240101000000002.inflight",
            "20240101000000003.requested",
            "20240101000000004.commit2.requested",
            "20240101000000004.commit2",
            "20240101000000005..requested",
            "20240101000000006.clean.inflight",
            "20240101000000006.clean.requested",
            "123.commit.requested",
            "20240101000000007_20240101000000009.commit",
            "20240101000000007.commit.requested",
            "20240101000000008.deltacommit.inflight",
            "hoodie.properties",
            ".aux",
            "20240101000000009.rollback.inflight",
            "20240101000000009.rollback",
        ];
        // Every name parsed, then sorted and filtered.
        let parsed: Vec<Named> = names.iter().filter_map(|n| Named::parse(n)).collect();
        let (mut done, mut rest): (Vec<Named>, Vec<Named>) = parsed
            .into_iter()
            .partition(|n| n.state == State::Completed);
        let times: FxHashSet<&str> = done.iter().map(|n| n.requested).collect();
        rest.retain(|n| !times.contains(n.requested));
        done.sort_by_key(order);
        rest.sort_by_key(order);
        rest.dedup_by(|a, b| a.requested == b.requested);
        let files = |named: &[Named]| {
            named
                .iter()
                .map(|n| format!(".hoodie/{}", n.name))
                .collect::<Vec<_>>()
        };
        let each = |is: &[Instant]| is.iter().map(|i| i.file().to_string()).collect::<Vec<_>>();
        for reversed in [false, true] {
            let mut listed = names.to_vec();
            if reversed {
                listed.reverse();
            }
            let timeline = Timeline::from_names(".hoodie", listed.iter().copied());
            assert_eq!(each(&timeline.completed), files(&done));
            assert_eq!(each(&timeline.pending), files(&rest));
            // Built over one text, each reads its parts as one parsed alone does.
            let parts = |i: &Instant| {
                (
                    i.requested().to_string(),
                    i.completed().map(String::from),
                    i.action().to_string(),
                    i.state,
                )
            };
            for i in timeline.completed.iter().chain(&timeline.pending) {
                let name = i.file().strip_prefix(".hoodie/").unwrap();
                let alone = Instant::parse(".hoodie", name).unwrap();
                assert_eq!((parts(i), i), (parts(&alone), &alone));
            }
        }
        assert!(files(&done).contains(&".hoodie/20240101000000003.requested".to_string()));
        let pending = files(&rest);
        assert!(pending.contains(&".hoodie/20240101000000006.clean.requested".to_string()));
        assert!(!pending.contains(&".hoodie/20240101000000004.commit2.requested".to_string()));
    }
}
