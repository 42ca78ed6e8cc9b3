//! Commit, replace-commit and rollback metadata: the parts that say which files changed.

use std::collections::HashMap;

use serde::Deserialize;

/// One file written by an instant.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct WriteStat {
    /// File group id.
    pub file_id: Option<String>,
    /// File path relative to the table root.
    pub path: Option<String>,
    /// Partition path.
    pub partition_path: Option<String>,
    /// Bytes.
    pub file_size_in_bytes: Option<u64>,
    /// Records written to the file: for a base file, all its rows.
    pub num_writes: Option<u64>,
    /// The instant of the file slice this write builds on; `"null"` when the write starts
    /// a new file group (Hudi's `HoodieWriteStat.NULL_COMMIT`).
    pub prev_commit: Option<String>,
    /// The name of the base file this write builds on, where the writer records it.
    pub prev_base_file: Option<String>,
}

impl WriteStat {
    /// Whether the write starts a new file group, as Hudi records it.
    pub fn starts_file_group(&self) -> bool {
        self.prev_commit.as_deref() == Some("null")
    }
}

/// `HoodieCommitMetadata` / `HoodieReplaceCommitMetadata`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommitMetadata {
    /// Files written, by partition path.
    pub partition_to_write_stats: Option<HashMap<String, Option<Vec<WriteStat>>>>,
    /// File groups replaced (replace commits), by partition path.
    pub partition_to_replace_file_ids: Option<HashMap<String, Option<Vec<String>>>>,
    /// `schema` (Avro schema JSON) and other writer metadata.
    pub extra_metadata: Option<HashMap<String, Option<String>>>,
    /// `UPSERT`, `INSERT_OVERWRITE`, `CLUSTER`, `COMPACT`, …
    pub operation_type: Option<String>,
}

impl CommitMetadata {
    /// The writer's Avro schema, if recorded.
    pub fn schema(&self) -> Option<&str> {
        self.extra_metadata
            .as_ref()?
            .get("schema")?
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// All write stats.
    pub fn write_stats(&self) -> impl Iterator<Item = &WriteStat> {
        self.partition_to_write_stats
            .iter()
            .flat_map(|m| m.values())
            .flat_map(|v| v.iter().flatten())
    }

    /// All replaced file groups as (partition path, file id).
    pub fn replaced(&self) -> impl Iterator<Item = (&str, &str)> {
        self.partition_to_replace_file_ids
            .iter()
            .flat_map(|m| m.iter())
            .flat_map(|(p, ids)| {
                ids.iter()
                    .flatten()
                    .map(move |id| (p.as_str(), id.as_str()))
            })
    }
}

/// `HoodieRollbackMetadata`: which instants a rollback undid.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RollbackMetadata {
    /// Requested times of the rolled-back instants.
    pub commits_rollback: Option<Vec<String>>,
}

/// `HoodieRestoreMetadata`: which instants a restore rolled back.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RestoreMetadata {
    /// Requested times of the rolled-back instants.
    pub instants_to_rollback: Option<Vec<String>>,
    /// Per rolled-back instant, the rollbacks that undid it.
    pub hoodie_restore_metadata: Option<HashMap<String, serde_json::Value>>,
}

impl RestoreMetadata {
    /// Every instant the restore rolled back.
    pub fn rolled_back(&self) -> Vec<String> {
        let mut instants: Vec<String> = self.instants_to_rollback.clone().unwrap_or_default();
        instants.extend(
            self.hoodie_restore_metadata
                .iter()
                .flat_map(|m| m.keys().cloned()),
        );
        instants.sort();
        instants.dedup();
        instants
    }
}
