//! Moving an entry by commit (REST `commitTable`), where the server writes its own metadata
//! file: the entry is then judged by the table metadata the catalog returns, not by the
//! file it names.
//!
//! - [`judge`]: the entry is this table's (its `location` is the table's root) and its
//!   `main` snapshot is one xlake wrote (its summary carries `XTABLE_METADATA`); anything
//!   else is another writer's and is refused.
//! - [`position`]: where the entry's `main` stands against xlake's current metadata.
//! - [`requirements`] and [`updates`]: the compare-and-swap (`assert-table-uuid`,
//!   `assert-ref-snapshot-id` on `main` = what the catalog showed) and everything xlake
//!   published since (format version, schemas, specs, sort orders, properties, snapshots,
//!   the `main` ref, expired snapshots).
//!
//! Plain JSON in, JSON out: the table metadata as the Iceberg spec writes it.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

/// The snapshot summary key in which xlake (as Apache XTable) records the source commit a
/// snapshot mirrors: a snapshot without it is another writer's.
pub const MARKER: &str = "XTABLE_METADATA";

/// The branch xlake moves.
const MAIN: &str = "main";

/// Why an entry is not one xlake may move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The entry's table lives elsewhere (its `location`).
    Elsewhere(String),
    /// The entry's `main` is at a snapshot xlake did not write (its id).
    ForeignSnapshot(i64),
    /// The entry is another table at this location (its `table-uuid`).
    OtherUuid(String),
}

/// Where an entry stands against xlake's current metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// At xlake's current snapshot.
    Same,
    /// At an older snapshot of xlake's (or none): to be moved.
    Behind,
    /// At a newer snapshot of xlake's (another sync got further): left alone.
    Ahead,
}

/// The snapshot `main` names (`current-snapshot-id` for writers without refs).
pub fn main_snapshot(metadata: &Value) -> Option<i64> {
    metadata
        .pointer("/refs/main/snapshot-id")
        .or_else(|| metadata.get("current-snapshot-id"))
        .and_then(Value::as_i64)
        .filter(|id| *id >= 0)
}

/// The table's uuid.
pub fn table_uuid(metadata: &Value) -> Option<&str> {
    metadata.get("table-uuid").and_then(Value::as_str)
}

fn snapshots(metadata: &Value) -> impl Iterator<Item = &Value> {
    metadata
        .get("snapshots")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn snapshot(metadata: &Value, id: i64) -> Option<&Value> {
    snapshots(metadata).find(|s| s.get("snapshot-id").and_then(Value::as_i64) == Some(id))
}

fn ids(metadata: &Value, list: &str, key: &str) -> HashSet<i64> {
    items(metadata, list)
        .filter_map(|v| v.get(key).and_then(Value::as_i64))
        .collect()
}

fn items<'a>(metadata: &'a Value, list: &str) -> impl Iterator<Item = &'a Value> {
    metadata
        .get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn format_version(metadata: &Value) -> i64 {
    metadata
        .get("format-version")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn sequence_number(snapshot: Option<&Value>) -> i64 {
    snapshot
        .and_then(|s| s.get("sequence-number"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether the entry (`metadata`) may be moved by xlake: its table lives at the table's
/// root (`is_here`), and `main` is at no snapshot or one xlake wrote.
pub fn judge(metadata: &Value, is_here: impl Fn(&str) -> bool) -> Result<(), Refusal> {
    let location = metadata
        .get("location")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !is_here(location) {
        return Err(Refusal::Elsewhere(location.to_string()));
    }
    match main_snapshot(metadata) {
        Some(id) => match snapshot(metadata, id) {
            Some(s) if s.pointer(&format!("/summary/{MARKER}")).is_some() => Ok(()),
            _ => Err(Refusal::ForeignSnapshot(id)),
        },
        None => Ok(()),
    }
}

/// Where the entry (`entry`, already [`judge`]d) stands against xlake's metadata (`ours`).
/// A `main` snapshot that `ours` no longer holds is behind if older than ours (expired
/// since), ahead if newer (a later version another sync published).
pub fn position(entry: &Value, ours: &Value) -> Result<Position, Refusal> {
    match (table_uuid(entry), table_uuid(ours)) {
        (Some(e), Some(o)) if e.eq_ignore_ascii_case(o) => {}
        (e, _) => return Err(Refusal::OtherUuid(e.unwrap_or("(none)").to_string())),
    }
    let Some(at) = main_snapshot(entry) else {
        return Ok(Position::Behind);
    };
    if Some(at) == main_snapshot(ours) {
        // The same snapshot on main, and ours published since: an expiry (fewer
        // snapshots) or an upgrade (a higher format version).
        let (theirs, mine) = (
            ids(entry, "snapshots", "snapshot-id"),
            ids(ours, "snapshots", "snapshot-id"),
        );
        let expired = mine.is_subset(&theirs) && mine != theirs;
        return Ok(if expired || format_version(ours) > format_version(entry) {
            Position::Behind
        } else {
            Position::Same
        });
    }
    if snapshot(ours, at).is_some() {
        return Ok(Position::Behind);
    }
    let last = ours
        .get("last-sequence-number")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Ok(if sequence_number(snapshot(entry, at)) > last {
        Position::Ahead
    } else {
        Position::Behind
    })
}

/// The requirements that make the commit a compare-and-swap on what the catalog showed.
pub fn requirements(entry: &Value) -> Vec<Value> {
    vec![
        json!({"type": "assert-table-uuid", "uuid": table_uuid(entry)}),
        json!({"type": "assert-ref-snapshot-id", "ref": MAIN, "snapshot-id": main_snapshot(entry)}),
    ]
}

/// The updates that take the entry (`entry`) to xlake's metadata (`ours`).
pub fn updates(entry: &Value, ours: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if format_version(ours) > format_version(entry) {
        out.push(
            json!({"action": "upgrade-format-version", "format-version": format_version(ours)}),
        );
    }
    let last_column = ours.get("last-column-id").cloned().unwrap_or(Value::Null);
    let kinds = [
        (
            "schemas",
            "schema-id",
            "current-schema-id",
            "add-schema",
            "schema",
            "set-current-schema",
            "schema-id",
        ),
        (
            "partition-specs",
            "spec-id",
            "default-spec-id",
            "add-spec",
            "spec",
            "set-default-spec",
            "spec-id",
        ),
        (
            "sort-orders",
            "order-id",
            "default-sort-order-id",
            "add-sort-order",
            "sort-order",
            "set-default-sort-order",
            "sort-order-id",
        ),
    ];
    for (list, key, current, add, field, set, set_field) in kinds {
        let known = ids(entry, list, key);
        let mut last_added = None;
        for item in items(ours, list) {
            let Some(id) = item.get(key).and_then(Value::as_i64) else {
                continue;
            };
            if !known.contains(&id) {
                let mut update = json!({"action": add, field: item});
                if list == "schemas" {
                    update["last-column-id"] = last_column.clone();
                }
                out.push(update);
                last_added = Some(id);
            }
        }
        let want = ours.get(current).and_then(Value::as_i64);
        if want.is_some() && want != entry.get(current).and_then(Value::as_i64) {
            // -1: the one just added (a server may number an added item itself).
            let id = if want == last_added { Some(-1) } else { want };
            out.push(json!({"action": set, set_field: id}));
        }
    }
    out.extend(set_properties(entry, ours));
    out.extend(snapshot_updates(entry, ours));
    out
}

/// `set-properties` for what xlake's properties change; a property only the catalog has
/// (a server's own) is kept.
fn set_properties(entry: &Value, ours: &Value) -> Option<Value> {
    let theirs = entry.get("properties").and_then(Value::as_object);
    let changed: Map<String, Value> = ours
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, v)| theirs.and_then(|t| t.get(*k)) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!changed.is_empty()).then(|| json!({"action": "set-properties", "updates": changed}))
}

/// `add-snapshot` for each of xlake's snapshots the entry lacks (in sequence order), the
/// `main` ref at xlake's current one, and `remove-snapshots` for those xlake expired.
fn snapshot_updates(entry: &Value, ours: &Value) -> Vec<Value> {
    let theirs = ids(entry, "snapshots", "snapshot-id");
    let mine = ids(ours, "snapshots", "snapshot-id");
    let mut added: Vec<&Value> = snapshots(ours)
        .filter(|s| {
            s.get("snapshot-id")
                .and_then(Value::as_i64)
                .is_some_and(|id| !theirs.contains(&id))
        })
        .collect();
    added.sort_by_key(|s| sequence_number(Some(s)));
    let mut out: Vec<Value> = added
        .into_iter()
        .map(|s| json!({"action": "add-snapshot", "snapshot": s}))
        .collect();
    if let Some(current) = main_snapshot(ours) {
        if main_snapshot(entry) != Some(current) {
            out.push(json!({"action": "set-snapshot-ref", "ref-name": MAIN, "type": "branch", "snapshot-id": current}));
        }
    }
    let mut expired: Vec<i64> = theirs.difference(&mine).copied().collect();
    expired.sort_unstable();
    if !expired.is_empty() {
        out.push(json!({"action": "remove-snapshots", "snapshot-ids": expired}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(id: i64, seq: i64, ours: bool) -> Value {
        let summary = if ours {
            json!({"operation": "append", MARKER: "{}"})
        } else {
            json!({"operation": "append"})
        };
        json!({"snapshot-id": id, "sequence-number": seq, "timestamp-ms": seq, "manifest-list": format!("/t/metadata/snap-{id}.avro"), "summary": summary, "schema-id": 0})
    }

    fn table(snaps: Vec<Value>, current: i64, schemas: usize) -> Value {
        let schemas: Vec<Value> = (0..schemas)
            .map(|i| json!({"type": "struct", "schema-id": i, "fields": []}))
            .collect();
        json!({
            "format-version": 2, "table-uuid": "u-1", "location": "/t",
            "last-sequence-number": snaps.len(), "last-column-id": 3,
            "current-schema-id": schemas.len() - 1, "schemas": schemas,
            "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}],
            "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {"a": "1"},
            "current-snapshot-id": current, "snapshots": snaps,
            "refs": {"main": {"snapshot-id": current, "type": "branch"}},
        })
    }

    #[test]
    fn entries_of_other_writers_are_refused() {
        let here = |l: &str| l == "/t";
        assert_eq!(judge(&table(vec![snap(1, 1, true)], 1, 1), here), Ok(()));
        let other = table(vec![snap(1, 1, true), snap(2, 2, false)], 2, 1);
        assert_eq!(judge(&other, here), Err(Refusal::ForeignSnapshot(2)));
        let elsewhere = json!({"location": "/u"});
        assert_eq!(
            judge(&elsewhere, here),
            Err(Refusal::Elsewhere("/u".into()))
        );
    }

    #[test]
    fn positions_follow_snapshots_not_files() {
        let entry = table(vec![snap(1, 1, true)], 1, 1);
        let ours = table(vec![snap(1, 1, true), snap(2, 2, true)], 2, 1);
        assert_eq!(position(&entry, &ours), Ok(Position::Behind));
        assert_eq!(position(&ours, &ours), Ok(Position::Same));
        assert_eq!(position(&ours, &entry), Ok(Position::Ahead));
        let mut other = ours.clone();
        other["table-uuid"] = json!("u-2");
        assert_eq!(
            position(&other, &ours),
            Err(Refusal::OtherUuid("u-2".into()))
        );
        // An expiry since (the same main, fewer snapshots): behind; the other way: not.
        let shorter = table(vec![snap(2, 2, true)], 2, 1);
        let longer = table(vec![snap(1, 1, true), snap(2, 2, true)], 2, 1);
        assert_eq!(position(&longer, &shorter), Ok(Position::Behind));
        assert_eq!(position(&shorter, &longer), Ok(Position::Same));
        let mut v3 = longer.clone();
        v3["format-version"] = json!(3);
        assert_eq!(position(&longer, &v3), Ok(Position::Behind));
        // The entry's snapshot expired from ours since: behind.
        let expired = table(vec![snap(2, 2, true), snap(3, 3, true)], 3, 1);
        assert_eq!(position(&entry, &expired), Ok(Position::Behind));
    }

    #[test]
    fn updates_carry_what_xlake_published_since() {
        let mut entry = table(vec![snap(1, 1, true), snap(2, 2, true)], 2, 1);
        entry["properties"]["server.own"] = json!("x");
        let mut ours = table(
            vec![snap(2, 2, true), snap(4, 4, true), snap(3, 3, true)],
            4,
            2,
        );
        ours["properties"]["b"] = json!("2");
        let actions: Vec<String> = updates(&entry, &ours)
            .iter()
            .map(|u| {
                let id = u.get("snapshot").and_then(|s| s.get("snapshot-id"));
                format!(
                    "{} {}",
                    u["action"].as_str().unwrap(),
                    id.map_or(String::new(), |i| i.to_string())
                )
            })
            .collect();
        assert_eq!(
            actions,
            [
                "add-schema ",
                "set-current-schema ",
                "set-properties ",
                "add-snapshot 3",
                "add-snapshot 4",
                "set-snapshot-ref ",
                "remove-snapshots "
            ]
        );
        let all = updates(&entry, &ours);
        assert_eq!(all[1]["schema-id"], json!(-1));
        assert_eq!(all[2]["updates"], json!({"b": "2"}));
        assert_eq!(all[5]["snapshot-id"], json!(4));
        assert_eq!(all[6]["snapshot-ids"], json!([1]));
        assert_eq!(
            requirements(&entry),
            [
                json!({"type": "assert-table-uuid", "uuid": "u-1"}),
                json!({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 2})
            ]
        );
        assert!(updates(&ours, &ours).is_empty());
    }
}
