//! The state a sync leaves for the next one ([`ChangeSet::source_state`]): the `metaData`
//! and `protocol` in force after a version. An incremental sync starts from it instead of
//! reading them again, which on a table past its first checkpoint means the checkpoint's
//! two columns (over a million rows at 1M files, a third of a commit). It is trusted only
//! for the version it names, while that version's commit file keeps the modification time
//! and tag it had when mirrored ([`unchanged`]); otherwise the log is read as before (and
//! a table id other than the saved one is refused: the table was written anew at the
//! same place).
//!
//! [`ChangeSet::source_state`]: xlake_model::ChangeSet::source_state

use serde::Deserialize;
use xlake_storage::Stamp;

use crate::action::{MetaData, Protocol};

/// `{"delta": {"version": …, "metaData": {…}, "protocol": {…}}}`, the actions with the
/// fields xlake reads.
#[derive(Deserialize)]
struct Saved {
    delta: Resume,
}

/// A saved state, read once per sync ([`of`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Resume {
    version: u64,
    pub(crate) meta_data: MetaData,
    pub(crate) protocol: Protocol,
    /// How late a file live at `version` can say it was created (see
    /// `DeltaSource::created_by`), when the commit of `version` was read.
    #[serde(default)]
    pub(crate) created_by: Option<i64>,
    /// The modification time of `version`'s commit file when it was mirrored: a commit
    /// file changed since (a copy, or a table written anew at the same place) is not
    /// trusted to be the version this state is of.
    #[serde(default)]
    commit_modified: Option<i64>,
    /// That file's tag then ([`Stamp::e_tag`]): a file written anew within the same
    /// second (an object store's time) or clock tick, or copied with its times kept,
    /// keeps the time, not the tag. Not saved by a sync before it was kept, nor where the
    /// store gives none: the time alone tells then.
    #[serde(default)]
    commit_tag: Option<String>,
}

impl Resume {
    /// The commit file's time and tag when the state was saved (`None`: not saved).
    pub(crate) fn commit_stamp(&self) -> Option<Stamp> {
        stamp_of(self.commit_modified, self.commit_tag.clone())
    }
}

/// What a sync learnt of the commit of the version it saves, besides the schema state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Learnt {
    /// See [`Resume::created_by`].
    pub(crate) created_by: Option<i64>,
    /// See [`Resume::commit_stamp`].
    pub(crate) commit_stamp: Option<Stamp>,
}

/// Whether the commit file a state was saved with (`saved`) is still the one `now`
/// stamps: the same time and, when a tag was saved, the same tag (a state saved without
/// one, by a sync before tags were kept, is trusted on its time alone, as it was).
/// Without a stamp now it is not known to be: the caller reads the table's id again.
pub(crate) fn unchanged(saved: &Stamp, now: Option<&Stamp>) -> bool {
    now.is_some_and(|is| {
        saved.modified_ms == is.modified_ms && (saved.e_tag.is_none() || saved.e_tag == is.e_tag)
    })
}

fn stamp_of(modified: Option<i64>, tag: Option<String>) -> Option<Stamp> {
    modified.map(|modified_ms| Stamp {
        modified_ms,
        e_tag: tag,
    })
}

/// The state after `version`, to save.
pub(crate) fn save(version: u64, metadata: &MetaData, protocol: &Protocol) -> String {
    save_with(version, metadata, protocol, Learnt::default())
}

/// [`save`], with what the sync learnt of the commit of `version`: the next sync then
/// need not read that commit again, and can tell whether it is still the same file.
pub(crate) fn save_with(
    version: u64,
    metadata: &MetaData,
    protocol: &Protocol,
    learnt: Learnt,
) -> String {
    let mut delta =
        serde_json::json!({"version": version, "metaData": metadata, "protocol": protocol});
    if let Some(t) = learnt.created_by {
        delta["createdBy"] = t.into();
    }
    if let Some(stamp) = learnt.commit_stamp {
        delta["commitModified"] = stamp.modified_ms.into();
        if let Some(tag) = stamp.e_tag {
            delta["commitTag"] = tag.into();
        }
    }
    serde_json::json!({ "delta": delta }).to_string()
}

/// The saved state, if it is the state after `version` (its `metaData` and `protocol`,
/// and what the sync learnt of that version's commit).
pub(crate) fn of(saved: Option<&str>, version: u64) -> Option<Resume> {
    let Saved { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version).then_some(delta)
}

/// `{"delta": {"version": …, "commitModified": …, "commitTag": …}}`: only the commit
/// file's time and tag of a saved state, its actions skipped unparsed.
#[derive(Deserialize)]
struct SavedTime {
    delta: Time,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Time {
    version: u64,
    #[serde(default)]
    commit_modified: Option<i64>,
    #[serde(default)]
    commit_tag: Option<String>,
}

/// [`Resume::commit_stamp`] of the saved state, if it is the state after `version`
/// (`Some(None)`: saved without a commit file's time), without parsing the rest.
pub(crate) fn commit_stamp_of(saved: Option<&str>, version: u64) -> Option<Option<Stamp>> {
    let SavedTime { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version).then(|| stamp_of(delta.commit_modified, delta.commit_tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(saved: Option<&str>, version: u64) -> Option<(MetaData, Protocol)> {
        of(saved, version).map(|r| (r.meta_data, r.protocol))
    }

    fn created_by(saved: Option<&str>, version: u64) -> Option<i64> {
        of(saved, version)?.created_by
    }

    fn commit_stamp(saved: Option<&str>, version: u64) -> Option<Stamp> {
        let full = of(saved, version).map(|r| r.commit_stamp());
        assert_eq!(commit_stamp_of(saved, version), full);
        full.flatten()
    }

    fn stamp(modified_ms: i64, tag: Option<&str>) -> Stamp {
        Stamp {
            modified_ms,
            e_tag: tag.map(str::to_string),
        }
    }

    #[test]
    fn a_saved_state_is_loaded_for_its_version_only() {
        let metadata = MetaData {
            id: Some("5d1b6c6e-0c1a-4f7e-9d1e-2b3c4d5e6f70".into()),
            schema_string: r#"{"type":"struct","fields":[]}"#.into(),
            partition_columns: vec!["day".into()],
            configuration: [("delta.columnMapping.mode".to_string(), Some("name".into()))]
                .into_iter()
                .collect(),
        };
        let protocol = Protocol {
            min_reader_version: 3,
            reader_features: Some(vec!["columnMapping".into()]),
        };
        let saved = save(41, &metadata, &protocol);
        let learnt = Learnt {
            created_by: Some(7),
            commit_stamp: Some(stamp(9, Some("a1"))),
        };
        let timed = save_with(41, &metadata, &protocol, learnt);
        assert_eq!(
            load(Some(&saved), 41),
            Some((metadata.clone(), protocol.clone()))
        );
        assert_eq!(load(Some(&saved), 42), None);
        assert_eq!(load(Some("{\"hudi\":{}}"), 41), None);
        assert_eq!(load(Some("not json"), 41), None);
        assert_eq!(load(None, 41), None);
        assert_eq!(created_by(Some(&saved), 41), None);
        assert_eq!(load(Some(&timed), 41), Some((metadata, protocol)));
        assert_eq!(created_by(Some(&timed), 41), Some(7));
        assert_eq!(created_by(Some(&timed), 42), None);
        assert_eq!(commit_stamp(Some(&saved), 41), None);
        assert_eq!(commit_stamp(Some(&timed), 41), Some(stamp(9, Some("a1"))));
        assert_eq!(commit_stamp(Some(&timed), 42), None);
        // Saved before tags were kept: the time alone.
        let untagged = timed.replace(",\"commitTag\":\"a1\"", "");
        assert!(!untagged.contains("commitTag"), "{untagged}");
        assert_eq!(commit_stamp(Some(&untagged), 41), Some(stamp(9, None)));
    }

    /// The same time and tag; the same time alone for a state saved without a tag; never
    /// without a stamp now.
    #[test]
    fn a_commit_file_is_unchanged_by_its_time_and_saved_tag() {
        let saved = stamp(9, Some("a1"));
        assert!(unchanged(&saved, Some(&stamp(9, Some("a1")))));
        // Written anew within the same second, or copied with its times kept.
        assert!(!unchanged(&saved, Some(&stamp(9, Some("b2")))));
        assert!(!unchanged(&saved, Some(&stamp(9, None))));
        assert!(!unchanged(&saved, Some(&stamp(8, Some("a1")))));
        // Saved before tags were kept: its time alone, as before.
        let legacy = stamp(9, None);
        assert!(unchanged(&legacy, Some(&stamp(9, Some("b2")))));
        assert!(!unchanged(&legacy, Some(&stamp(8, Some("b2")))));
        assert!(!unchanged(&saved, None));
    }
}
