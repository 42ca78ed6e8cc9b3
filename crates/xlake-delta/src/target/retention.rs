//! `expire` and `cleanup` on xlake's Delta log, by the Delta protocol's "Metadata
//! Cleanup": a cut is made at a checkpoint (never past the newest one, nor past the one
//! `_last_checkpoint` names), the commit file of that checkpoint's version is kept, and
//! every commit and checkpoint file before it is deleted oldest first, so that readers
//! still read that version and every later one. Data files are never deleted (the source
//! owns them); a deletion vector file xlake copied (`deletion_vector_<uuid>.bin`) goes
//! once no remaining version names it.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value as Json;
use xlake_storage::TableStore;
use xlake_target::{Expired, Orphans, Retention};

use super::error::TargetFault;
use super::log_state::{checkpoint_file, list, LogState};
use super::values_out::absolute_uri;
use crate::log::{LogListing, LOG_DIR};

/// Expire the versions `retention` lets go, and those that read a data file the source
/// deleted, up to the newest checkpoint that covers them.
pub(super) async fn expire(
    store: &TableStore,
    retention: &Retention,
) -> Result<Expired, TargetFault> {
    let listing = list(store).await?;
    let Some(state) = LogState::read_listed(store, &listing, None).await? else {
        return Ok(Expired::default());
    };
    let (Some(first), Some(latest)) = (state.versions.first(), state.latest()) else {
        return Ok(Expired::default());
    };
    let (start, latest) = (first.version, latest.version);
    let keep = keep_from(store, &state, retention).await?;
    let bound = keep.min(pointer(store).await?.unwrap_or(latest));
    // The log's own start when it is a checkpoint: what an expire that stopped midway
    // left below it is deleted.
    let mut cuts = listing
        .checkpoints
        .range(start.max(1)..)
        .rev()
        .filter(|v| **v <= bound);
    let asked = cuts.next();
    let allowed = |v: &u64| i64::try_from(*v).is_ok_and(|v| retention.may_keep_from(v));
    let chosen = asked
        .filter(|v| allowed(v))
        .or_else(|| cuts.find(|v| allowed(v)));
    let held_at = match (asked, chosen) {
        (Some(a), c) if Some(a) != c => Some(c.copied().unwrap_or(start) as i64),
        _ => None,
    };
    let Some(&cut) = chosen else {
        return Ok(Expired {
            version: latest,
            held_at,
            ..Expired::default()
        });
    };
    let (before, after) = checked_cut(store, &listing, cut).await?;
    let mut deleted = Vec::new();
    for path in log_files_before(store, &listing, cut, start).await? {
        store.delete(&path).await?;
        deleted.push(store.absolute(&path));
    }
    let root = store.location();
    let (named, kept) = (
        before.named_vector_files(root),
        after.named_vector_files(root),
    );
    for name in copied_vectors(store, &named, &kept) {
        store.delete(&name).await?;
        deleted.push(store.absolute(&name));
    }
    Ok(Expired {
        snapshots: listing
            .commits
            .range(..cut)
            .map(|(v, _)| *v as i64)
            .collect(),
        deleted_files: deleted,
        version: latest,
        held_at,
    })
}

/// The oldest version `retention` keeps (and every version reading a data file the
/// source deleted lets go): `--keep-snapshots` the newest N; `--max-snapshot-age` the
/// newest version at or before the cutoff and all after it (Delta's cutoff commit, so
/// that time travel to the cutoff still resolves). [`expire`] then cuts at the newest
/// checkpoint up to it that `retention.cuts` allows.
async fn keep_from(
    store: &TableStore,
    state: &LogState,
    retention: &Retention,
) -> Result<u64, TargetFault> {
    let (Some(first), Some(latest)) = (state.versions.first(), state.latest()) else {
        return Ok(0);
    };
    let mut keep = first.version;
    if let Some(n) = retention.keep_snapshots {
        let n = n.max(1) as u64;
        keep = keep.max((latest.version + 1).saturating_sub(n));
    }
    if let Some(age) = retention.max_age_ms {
        let cutoff = retention.now_ms.saturating_sub(age);
        if let Some(v) = state
            .versions
            .iter()
            .rev()
            .find(|e| e.timestamp_ms <= cutoff)
        {
            keep = keep.max(v.version);
        }
    }
    // Versions `since..at` read a removed file: gone, they cannot be read.
    let mut removed: Vec<_> = state.removed.iter().collect();
    removed.sort_by_key(|r| std::cmp::Reverse(r.at));
    let mut asked = BTreeSet::new();
    for r in removed {
        if r.at <= keep {
            break;
        }
        if asked.insert(&r.path) && store.size(&r.path).await?.is_none() {
            keep = r.at;
        }
    }
    Ok(keep.min(latest.version))
}

/// The version `_last_checkpoint` names, if there is one.
async fn pointer(store: &TableStore) -> Result<Option<u64>, TargetFault> {
    let path = format!("{LOG_DIR}/_last_checkpoint");
    match store.get(&path).await {
        Ok(bytes) => serde_json::from_slice::<Json>(&bytes)
            .ok()
            .and_then(|v| v.get("version")?.as_u64())
            .map(Some)
            .ok_or_else(|| TargetFault::Unreadable {
                file: store.absolute(&path),
                reason: "not a checkpoint pointer".into(),
            }),
        Err(xlake_storage::StorageError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The log replayed up to `cut`, and the state from the checkpoint of `cut` on (what
/// readers have once the older versions are gone), after checking that the checkpoint
/// holds the files the replay has live at `cut`: a checkpoint that does not is never made
/// the log's start.
async fn checked_cut(
    store: &TableStore,
    listing: &LogListing,
    cut: u64,
) -> Result<(LogState, LogState), TargetFault> {
    let replayed = LogState::read_listed(store, listing, Some(cut)).await?;
    let mut after = LogState::from_checkpoint(store, cut).await?;
    let live = |s: &LogState| -> HashMap<String, Option<String>> {
        s.live
            .iter()
            .map(|(p, l)| (p.clone(), l.vector_id()))
            .collect()
    };
    if replayed.as_ref().map(live) != Some(live(&after)) {
        return Err(TargetFault::Refused(format!(
            "{}: this checkpoint does not hold the files version {cut} has live; nothing expired (delete it and let the next sync write it again)",
            store.absolute(&checkpoint_file(cut))
        )));
    }
    for (&version, (path, _)) in listing.commits.range(cut..) {
        let bytes = store.get(path).await?;
        after.apply(version, &bytes, &store.absolute(path))?;
    }
    Ok((replayed.unwrap_or_default(), after))
}

/// The commit and checkpoint files of versions before `cut`, in name order (the order
/// the protocol deletes them in). Every commit file is checked to record xlake's
/// `commitInfo` first (those from `start` on were when the log was read): one that does
/// not is refused by name, before anything is deleted.
async fn log_files_before(
    store: &TableStore,
    listing: &LogListing,
    cut: u64,
    start: u64,
) -> Result<Vec<String>, TargetFault> {
    for (&version, (path, _)) in listing.commits.range(..start.min(cut)) {
        let bytes = store.get(path).await?;
        LogState::default().apply(version, &bytes, &store.absolute(path))?;
    }
    let names = store.list_names(LOG_DIR).await?;
    let mut out: Vec<String> = names
        .iter()
        .filter(|name| {
            let Some((version, rest)) = split_version(name) else {
                return false;
            };
            version < cut && (rest == ".json" || rest.starts_with(".checkpoint."))
        })
        .map(|name| format!("{LOG_DIR}/{name}"))
        .collect();
    out.sort();
    Ok(out)
}

/// A log file name's version and what follows its 20 digits.
fn split_version(name: &str) -> Option<(u64, &str)> {
    let digits = name.get(..20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &name[20..]))
}

/// The first bytes of every uuid xlake gives a deletion vector file it writes: Delta
/// writers name theirs alike (`deletion_vector_<uuid>.bin` at the table root), and
/// `cleanup` must never take one of theirs for its own.
const VECTOR_MARK: [u8; 4] = *b"xlak";

/// A new uuid for a deletion vector file xlake writes: a version 8 (custom) uuid that
/// starts with [`VECTOR_MARK`], the rest random. Delta readers read any uuid.
pub(super) fn vector_uuid() -> uuid::Uuid {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[..4].copy_from_slice(&VECTOR_MARK);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Whether `name` is a deletion vector file xlake writes (`deletion_vector_<uuid>.bin`
/// at the table root, the uuid one of [`vector_uuid`]'s, in the one form xlake writes
/// it: lowercase, hyphenated, 36 characters; no other spelling `Uuid::parse_str` would
/// take). Files that xlake wrote before it marked its uuids (random version 4 ones, as
/// other writers' are) are not: left alone (docs/known-gaps.md).
pub(super) fn is_copied_vector(name: &str) -> bool {
    name.strip_prefix("deletion_vector_")
        .and_then(|rest| rest.strip_suffix(".bin"))
        .is_some_and(|id| {
            uuid::Uuid::try_parse(id).is_ok_and(|u| {
                u.hyphenated().to_string() == id
                    && u.get_version_num() == 8
                    && u.as_bytes()[..4] == VECTOR_MARK
            })
        })
}

/// The table-relative names of the vector files xlake wrote that `old` names and
/// `kept` (every version kept and the checkpoint it starts from) does not.
fn copied_vectors(
    store: &TableStore,
    old: &BTreeSet<String>,
    kept: &BTreeSet<String>,
) -> Vec<String> {
    old.difference(kept)
        .filter_map(|uri| {
            let name = uri.rsplit('/').next()?;
            (is_copied_vector(name) && *uri == absolute_uri(store.location(), name))
                .then(|| name.to_string())
        })
        .collect()
}

/// For `cleanup`: the files xlake wrote that no version the log can read names, older
/// than `cutoff_ms`: deletion vector files at the root in xlake's name form that no
/// version names (neither as a `p` location nor as a `u` uuid), and checkpoint files of
/// versions before the oldest one readable (left by an expire that stopped midway).
/// Never a data file, nor a commit file (`expire` deletes those), nor anything that is
/// not a regular file (a symbolic link is listed with the age of what it leads to).
pub(super) async fn orphans(store: &TableStore, cutoff_ms: i64) -> Result<Orphans, TargetFault> {
    let listing = list(store).await?;
    let Some(state) = LogState::read_listed(store, &listing, None).await? else {
        return Ok(Orphans::default());
    };
    // A copied or moved mirror's log names its vector files at the old place: every one
    // here would look unnamed (hostile review, 2026-12-06: they were deleted).
    if let Some(fault) = state.relocated(store) {
        return Err(fault);
    }
    let start = state.versions.first().map_or(0, |e| e.version);
    let mut found = Orphans::default();
    for entry in store.list_dir(LOG_DIR).await? {
        let name = entry.path.rsplit('/').next().unwrap_or_default();
        let Some((version, rest)) = split_version(name) else {
            continue;
        };
        if version < start
            && rest.starts_with(".checkpoint.")
            && entry.modified_ms < cutoff_ms
            && !store.not_regular_local_file(&entry.path)
        {
            found.files.push(entry.path.clone());
        }
    }
    let named = state.named_vector_files(store.location());
    for entry in store.list_dir("").await? {
        let name = entry.path.rsplit('/').next().unwrap_or_default();
        if !is_copied_vector(name) || entry.modified_ms >= cutoff_ms {
            continue;
        }
        if !named.contains(&absolute_uri(store.location(), name))
            && !store.not_regular_local_file(name)
        {
            found.files.push(name.to_string());
        }
    }
    found.files.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_xlake_gives_its_copies_and_log_files_are_read_by_version() {
        let ours = format!("deletion_vector_{}.bin", vector_uuid());
        assert!(is_copied_vector(&ours), "{ours}");
        assert!(is_copied_vector(
            "deletion_vector_786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a.bin"
        ));
        for other in [
            // Another Delta writer's (random, version 4), and the mark with version 4.
            "deletion_vector_6f1c0d52-3a4e-4c1b-9a57-0f3e2d1c4b5a.bin",
            "deletion_vector_786c616b-3a4e-4c1b-9a57-0f3e2d1c4b5a.bin",
            "deletion_vector_theirs.bin",
            "deletion_vector_{786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a}.bin",
            "deletion_vector_786c616b3a4e8c1b9a570f3e2d1c4b5a.bin",
            "deletion_vector_urn:uuid:786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a.bin",
            "deletion_vector_786C616B-3A4E-8C1B-9A57-0F3E2D1C4B5A.bin",
            "deletion_vector_786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a.bin.bin",
            "deletion_vector_786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a.bin.tmp",
            "data/deletion_vector_786c616b-3a4e-8c1b-9a57-0f3e2d1c4b5a.bin",
        ] {
            assert!(!is_copied_vector(other), "{other}");
        }
        assert_eq!(
            split_version("00000000000000000010.checkpoint.parquet"),
            Some((10, ".checkpoint.parquet"))
        );
        assert_eq!(split_version("_last_checkpoint"), None);
        assert_eq!(split_version("0000000000000000001x.json"), None);
    }
}
