//! Incremental replay: a sync that starts after the newest mirrored instant, taking the
//! live base files from the mirror's current snapshot instead of replaying every mirrored
//! instant's commit metadata (whose cost grows with the active timeline).
//!
//! It applies only where the mirror's state is exactly the replayed state after that
//! instant: the instant is still on the timeline, every completed instant between the
//! oldest and the newest mirrored one is mirrored (no late completion, Hudi table version
//! 6), no later rollback or restore undoes a mirrored instant, every live file has a Hudi
//! base-file name, and a schema is found at or before the instant. Otherwise the replay
//! starts at the timeline's first instant, as it always did.
//!
//! The live files are only needed for the file groups the later instants write to again
//! or replace. When the few instants after the newest mirrored one only start new file
//! groups (every base file's write stat has `prevCommit` `"null"`, Hudi's mark of a
//! create, or builds on a group one of them started; nothing replaced), the replay
//! starts after it without them: the engine then does not read the mirror's manifests.

use std::collections::BTreeSet;

use xlake_model::Schema;
use xlake_source::MirrorState;

use crate::commit_metadata::{CommitMetadata, RestoreMetadata, RollbackMetadata};
use crate::error::Result;
use crate::file_group::{is_log_file, parse_base_file_path, BaseFile};
use crate::instant::Instant;
use crate::schema::avro_to_schema;
use crate::source::{gets_snapshot, kind, Kind};
use crate::timeline::read_instant;
use crate::HudiSource;

/// Write instants looked back through for the schema before giving up on the shortcut.
const SCHEMA_LOOKBACK: usize = 20;

/// Write instants after the newest mirrored one read to find that they only start new
/// file groups (beyond that, reading the mirror's live files costs less).
const FRESH_LOOKAHEAD: usize = 8;

/// Where an incremental replay starts.
#[derive(Debug)]
pub(crate) struct Start {
    /// Index in the completed timeline of the first instant to replay.
    pub from: usize,
    /// The live base files after the newest mirrored instant.
    pub seed: Vec<BaseFile>,
    /// The schema as of the newest mirrored instant.
    pub schema: Schema,
}

impl HudiSource {
    /// From names alone: the index of the newest mirrored instant when the timeline allows
    /// starting after it (see the module doc), else `None`.
    pub(crate) fn incremental_base(&self, mirrored: &MirrorState) -> Option<usize> {
        let (newest, _) = mirrored.newest.as_ref()?;
        let completed = &self.timeline().completed;
        let at = completed.iter().position(|i| &i.requested == newest)?;
        let oldest = completed
            .iter()
            .position(|i| mirrored.commits.contains(&i.requested))?;
        let gap = completed[oldest..at]
            .iter()
            .any(|i| gets_snapshot(&i.action) && !mirrored.commits.contains(&i.requested));
        (!gap).then_some(at)
    }

    /// How many instant files the shortcut saves reading when given the mirror's live
    /// files; 0 when it does not apply, or when it applies without them (the instants
    /// after the newest mirrored one only start new file groups).
    pub(crate) async fn incremental_saving(&self, mirrored: &MirrorState) -> usize {
        let Some(at) = self.incremental_base(mirrored) else {
            return 0;
        };
        let completed = &self.timeline().completed;
        if self.only_new_groups(&completed[at + 1..]).await {
            return 0;
        }
        completed[..=at]
            .iter()
            .filter(|i| gets_snapshot(&i.action))
            .count()
    }

    /// The start of an incremental replay, when the shortcut applies: with the mirror's
    /// live files when given, else only when the later instants need none of them;
    /// `None`: replay from the first instant.
    pub(crate) async fn incremental_start(&self, mirrored: &MirrorState) -> Result<Option<Start>> {
        let Some(at) = self.incremental_base(mirrored) else {
            return Ok(None);
        };
        let completed = &self.timeline().completed;
        let later = &completed[at + 1..];
        if self.undoes_mirrored(later, &mirrored.commits).await? {
            return Ok(None);
        }
        let seed = match &mirrored.live_files {
            Some(live) => match self.seed_from(live) {
                Some(seed) => seed,
                None => return Ok(None),
            },
            None if self.only_new_groups(later).await => Vec::new(),
            None => return Ok(None),
        };
        let Some(schema) = self.schema_at(&completed[..=at]).await? else {
            return Ok(None);
        };
        Ok(Some(Start {
            from: at + 1,
            seed,
            schema,
        }))
    }

    /// Whether the write instants in `later` (at most [`FRESH_LOOKAHEAD`] of them) only
    /// start new file groups, so that no live file before them is replaced: each base
    /// file's write stat has `prevCommit` `"null"` (Hudi's create) or builds on a group
    /// started in `later`, and nothing is replaced. Rollbacks and restores change no file
    /// group in a replay that starts after the newest mirrored instant (one that undoes a
    /// mirrored instant stops the shortcut). Unreadable metadata: `false`, and the replay
    /// reports it where it belongs. Cached: the engine asks before the replay does.
    async fn only_new_groups(&self, later: &[Instant]) -> bool {
        let key = later.first().map(|i| i.requested.clone());
        let cached = self.only_new_groups.lock().ok().and_then(|c| c.clone());
        if let Some((_, fresh)) = cached.filter(|(k, _)| *k == key) {
            return fresh;
        }
        let fresh = self.read_only_new_groups(later).await;
        if let Ok(mut cached) = self.only_new_groups.lock() {
            *cached = Some((key, fresh));
        }
        fresh
    }

    /// [`Self::only_new_groups`], uncached.
    async fn read_only_new_groups(&self, later: &[Instant]) -> bool {
        let writes: Vec<&Instant> = later
            .iter()
            .filter(|i| matches!(kind(&i.action), Some(Kind::Commit)))
            .collect();
        if writes.len() > FRESH_LOOKAHEAD {
            return false;
        }
        let skip_logs = self.options.mor_read_optimized;
        let mut started: BTreeSet<(String, String)> = BTreeSet::new();
        for instant in writes {
            let Ok(json) = read_instant(self.store(), instant).await else {
                return false;
            };
            let Ok(meta) = serde_json::from_value::<CommitMetadata>(json) else {
                return false;
            };
            if meta.replaced().next().is_some() {
                return false;
            }
            for stat in meta.write_stats() {
                let path = stat.path.as_deref().unwrap_or_default();
                if skip_logs && is_log_file(path) {
                    continue;
                }
                let (Some(file_id), partition) = (&stat.file_id, &stat.partition_path) else {
                    return false;
                };
                let key = (partition.clone().unwrap_or_default(), file_id.clone());
                if stat.starts_file_group() {
                    started.insert(key);
                } else if !started.contains(&key) {
                    return false;
                }
            }
        }
        true
    }

    /// Whether a rollback or restore among `later` undoes a mirrored instant (its effect
    /// is then taken as a whole state, which needs the full replay).
    async fn undoes_mirrored(
        &self,
        later: &[Instant],
        mirrored: &BTreeSet<String>,
    ) -> Result<bool> {
        for instant in later {
            let undone = match kind(&instant.action) {
                Some(Kind::Rollback) => {
                    let json = read_instant(self.store(), instant).await?;
                    serde_json::from_value::<RollbackMetadata>(json)
                        .ok()
                        .map(|m| m.commits_rollback.unwrap_or_default())
                }
                Some(Kind::Restore) => {
                    let json = read_instant(self.store(), instant).await?;
                    serde_json::from_value::<RestoreMetadata>(json)
                        .ok()
                        .map(|m| m.rolled_back())
                }
                _ => continue,
            };
            // Unreadable metadata: the full replay reports it where it belongs.
            match undone {
                Some(ids) if ids.iter().all(|id| !mirrored.contains(id)) => {}
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// The mirror's live files as base files, or `None` if one is not a Hudi base file of
    /// this table (then the mirror is not what a replay would give).
    fn seed_from(&self, live: &[(String, u64)]) -> Option<Vec<BaseFile>> {
        live.iter()
            .map(|(location, rows)| {
                let path = self.store().relative(location)?;
                let (partition, file_id, _) = parse_base_file_path(path)?;
                Some(BaseFile {
                    path: path.to_string(),
                    partition: partition.to_string(),
                    file_id: file_id.to_string(),
                    // Only removed, never added again: its size is not needed.
                    size: 0,
                    records: Some(*rows),
                })
            })
            .collect()
    }

    /// The schema the newest write instant in `upto` that records one records, as the
    /// full replay would have it, or the table's create schema when none does; `None` when
    /// it is not found within a few instants (the full replay looks further).
    async fn schema_at(&self, upto: &[Instant]) -> Result<Option<Schema>> {
        let meta_fields = self.config().meta_fields;
        let writes: Vec<&Instant> = upto
            .iter()
            .rev()
            .filter(|i| matches!(kind(&i.action), Some(Kind::Commit)))
            .collect();
        for instant in writes.iter().take(SCHEMA_LOOKBACK) {
            let json = read_instant(self.store(), instant).await?;
            let Ok(meta) = serde_json::from_value::<CommitMetadata>(json) else {
                return Ok(None);
            };
            if let Some(text) = meta.schema() {
                return Ok(avro_to_schema(text, meta_fields).ok());
            }
        }
        // An older write instant may record the schema: the full replay finds it.
        if writes.len() > SCHEMA_LOOKBACK {
            return Ok(None);
        }
        Ok(self
            .config()
            .create_schema
            .as_ref()
            .and_then(|text| avro_to_schema(text, meta_fields).ok()))
    }
}

#[cfg(test)]
mod tests {
    use xlake_source::TableSource;
    use xlake_storage::TableStore;

    use super::*;

    const PROPERTIES: &str = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\nhoodie.table.partition.fields=p\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\n";

    /// A commit writing `files` (file id, prevCommit) in partition `p=1`.
    fn commit(instant: &str, files: &[(&str, &str)]) -> String {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"p","type":"string"}]}"#;
        let stats: Vec<serde_json::Value> = files
            .iter()
            .map(|(id, prev)| {
                serde_json::json!({"fileId": id, "path": format!("p=1/{id}_0-1-1_{instant}.parquet"),
                    "prevCommit": prev, "partitionPath": "p=1", "fileSizeInBytes": 10, "numWrites": 1})
            })
            .collect();
        serde_json::json!({"partitionToWriteStats": {"p=1": stats},
            "extraMetadata": {"schema": schema}, "operationType": "UPSERT"})
        .to_string()
    }

    async fn table(commits: &[(&str, String)]) -> (tempfile::TempDir, HudiSource) {
        let dir = tempfile::tempdir().unwrap();
        let hoodie = dir.path().join(".hoodie");
        std::fs::create_dir_all(&hoodie).unwrap();
        std::fs::write(hoodie.join("hoodie.properties"), PROPERTIES).unwrap();
        for (instant, json) in commits {
            std::fs::write(hoodie.join(format!("{instant}.commit")), json).unwrap();
        }
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let source = HudiSource::open(store, Default::default()).await.unwrap();
        (dir, source)
    }

    fn mirrored(ids: &[&str]) -> MirrorState {
        MirrorState {
            commits: ids.iter().map(|s| s.to_string()).collect(),
            newest: ids.last().map(|s| (s.to_string(), Default::default())),
            ..Default::default()
        }
    }

    const C1: &str = "20240101000000000";
    const C2: &str = "20240101000001000";
    const C3: &str = "20240101000002000";

    #[tokio::test]
    async fn instants_that_only_start_file_groups_need_no_live_files() {
        // c2 starts group b; c3 rewrites b (started in c2) and starts c.
        let (_dir, source) = table(&[
            (C1, commit(C1, &[("a", "null")])),
            (C2, commit(C2, &[("b", "null")])),
            (C3, commit(C3, &[("b", C2), ("c", "null")])),
        ])
        .await;
        let state = mirrored(&[C1]);
        assert_eq!(source.reads_saved_by_live_files(&state).await, 0);
        let got = source.change_sets(&state).await.unwrap().changes;
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [C2, C3]);
        // The first pass ran: c3 replaces the base file c2 added.
        assert!(got[0].added[0].removed_later);
        assert_eq!(got[1].removed, [format!("p=1/b_0-1-1_{C2}.parquet")]);
    }

    #[tokio::test]
    async fn an_instant_rewriting_a_mirrored_group_needs_the_live_files() {
        let (_dir, source) = table(&[
            (C1, commit(C1, &[("a", "null")])),
            (C2, commit(C2, &[("a", C1), ("b", "null")])),
        ])
        .await;
        let state = mirrored(&[C1]);
        assert_eq!(source.reads_saved_by_live_files(&state).await, 1);
        // Without them: the replay starts at the first instant (the engine skips c1).
        let got = source.change_sets(&state).await.unwrap().changes;
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [C1, C2]);
        assert_eq!(got[1].removed, [format!("p=1/a_0-1-1_{C1}.parquet")]);
    }
}
