//! The state a sync leaves for the next one ([`ChangeSet::source_state`]): the `metaData`
//! and `protocol` in force after a version. An incremental sync starts from it instead of
//! reading them again, which on a table past its first checkpoint means the checkpoint's
//! two columns (over a million rows at 1M files, a third of a commit). It is trusted only
//! for the version it names, while that version's commit file keeps the modification time
//! it had when mirrored; otherwise the log is read as before (and a table id other than
//! the saved one is refused: the table was written anew at the same place).
//!
//! [`ChangeSet::source_state`]: xlake_model::ChangeSet::source_state

use serde::Deserialize;

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
    pub(crate) commit_modified: Option<i64>,
}

/// What a sync learnt of the commit of the version it saves, besides the schema state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Learnt {
    /// See [`Resume::created_by`].
    pub(crate) created_by: Option<i64>,
    /// See [`Resume::commit_modified`].
    pub(crate) commit_modified: Option<i64>,
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
    if let Some(t) = learnt.commit_modified {
        delta["commitModified"] = t.into();
    }
    serde_json::json!({ "delta": delta }).to_string()
}

/// The saved state, if it is the state after `version` (its `metaData` and `protocol`,
/// and what the sync learnt of that version's commit).
pub(crate) fn of(saved: Option<&str>, version: u64) -> Option<Resume> {
    let Saved { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version).then_some(delta)
}

/// `{"delta": {"version": …, "commitModified": …}}`: only the commit file's time of a
/// saved state, its actions skipped unparsed.
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
}

/// [`Resume::commit_modified`] of the saved state, if it is the state after `version`
/// (`Some(None)`: saved without a commit file's time), without parsing the rest.
pub(crate) fn commit_modified_of(saved: Option<&str>, version: u64) -> Option<Option<i64>> {
    let SavedTime { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version).then_some(delta.commit_modified)
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

    fn commit_modified(saved: Option<&str>, version: u64) -> Option<i64> {
        let full = of(saved, version).map(|r| r.commit_modified);
        assert_eq!(commit_modified_of(saved, version), full);
        full.flatten()
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
            commit_modified: Some(9),
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
        assert_eq!(commit_modified(Some(&saved), 41), None);
        assert_eq!(commit_modified(Some(&timed), 41), Some(9));
        assert_eq!(commit_modified(Some(&timed), 42), None);
    }
}
