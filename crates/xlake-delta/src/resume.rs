//! The state a sync leaves for the next one ([`ChangeSet::source_state`]): the `metaData`
//! and `protocol` in force after a version. An incremental sync starts from it instead of
//! reading them again, which on a table past its first checkpoint means the checkpoint's
//! two columns (over a million rows at 1M files, a third of a commit). It is trusted only
//! for the version it names; otherwise the log is read as before.
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resume {
    version: u64,
    meta_data: MetaData,
    protocol: Protocol,
    /// How late a file live at `version` can say it was created (see
    /// `DeltaSource::created_by`), when the commit of `version` was read.
    #[serde(default)]
    created_by: Option<i64>,
}

/// The state after `version`, to save.
pub(crate) fn save(version: u64, metadata: &MetaData, protocol: &Protocol) -> String {
    save_with(version, metadata, protocol, None)
}

/// [`save`], with how late a file live at `version` can say it was created, as its
/// commit tells it: the next sync then need not read that commit again.
pub(crate) fn save_with(
    version: u64,
    metadata: &MetaData,
    protocol: &Protocol,
    created_by: Option<i64>,
) -> String {
    let mut delta =
        serde_json::json!({"version": version, "metaData": metadata, "protocol": protocol});
    if let Some(t) = created_by {
        delta["createdBy"] = t.into();
    }
    serde_json::json!({ "delta": delta }).to_string()
}

/// The saved `createdBy` of the state after `version`, if it is that state's and has one.
pub(crate) fn created_by(saved: Option<&str>, version: u64) -> Option<i64> {
    let Saved { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version)
        .then_some(delta.created_by)
        .flatten()
}

/// The `metaData` and `protocol` a saved state holds, if it is the state after `version`.
pub(crate) fn load(saved: Option<&str>, version: u64) -> Option<(MetaData, Protocol)> {
    let Saved { delta } = serde_json::from_str(saved?).ok()?;
    (delta.version == version).then_some((delta.meta_data, delta.protocol))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_state_is_loaded_for_its_version_only() {
        let metadata = MetaData {
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
        let timed = save_with(41, &metadata, &protocol, Some(7));
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
    }
}
