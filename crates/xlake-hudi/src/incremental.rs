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
//! create, or builds on a group one of them started), or write to groups whose previous
//! base file the instant they build on names (its `prevCommit`, a write instant still
//! on the timeline, whose write stat for the group gives its path), and replace nothing,
//! the replay starts after it with those few base files: the engine then does not read
//! the mirror's manifests.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashSet;

use xlake_model::Schema;
use xlake_source::MirrorState;

use crate::commit_metadata::{CommitMetadata, RestoreMetadata, RollbackMetadata};
use crate::error::Result;
use crate::file_group::{is_log_file, parse_base_file_path, BaseFile};
use crate::instant::Instant;
use crate::instant::{gets_snapshot, kind, Kind};
use crate::schema::avro_to_schema;
use crate::start::Start;
use crate::timeline::read_instant;
use crate::HudiSource;

/// Write instants looked back through for the schema before giving up on the shortcut.
const SCHEMA_LOOKBACK: usize = 20;

/// Write instants after the newest mirrored one read to find the file groups they write to
/// again (beyond that, reading the mirror's live files costs less).
const FRESH_LOOKAHEAD: usize = 8;

impl HudiSource {
    /// From names alone: the index of the newest mirrored instant when the timeline allows
    /// starting after it (see the module doc), else `None`.
    pub(crate) fn incremental_base(&self, mirrored: &MirrorState) -> Option<usize> {
        let (newest, _) = mirrored.newest.as_ref()?;
        let completed = &self.timeline().completed;
        let at = completed.iter().position(|i| i.requested() == newest)?;
        // Every instant before it is looked up: a hash set, not the ordered one's compares.
        let commits: FxHashSet<&str> = mirrored.commits.iter().map(String::as_str).collect();
        // Where the mirror begins (as `CommitListing::mirror_start`): the oldest snapshot's
        // instant, else the first mirrored one.
        let first = mirrored.first.as_deref();
        let first_mirrored = || {
            let oldest = first.and_then(|f| completed.iter().position(|i| i.requested() == f));
            oldest.or_else(|| {
                completed
                    .iter()
                    .position(|i| commits.contains(i.requested()))
            })
        };
        let oldest = match self.part_floor() {
            Some(floor) => self.oldest_not_expired(floor, mirrored, first_mirrored()?),
            // An instant the saved state names pending, completed since, before the first
            // mirrored one: the replay from it mirrors it (not taken as expired).
            None => {
                let first = first_mirrored()?;
                let floor = self.saved_floor(mirrored);
                let late = floor.and_then(|f| {
                    completed[..first]
                        .iter()
                        .position(|i| f.was_pending(i.requested()) == Some(true))
                });
                late.unwrap_or(first)
            }
        };
        // The newest snapshot's instant may come before where the mirror begins (a late
        // completion after a `--from-latest` first snapshot): nothing between to look at.
        let gap = completed[oldest.min(at)..at]
            .iter()
            .any(|i| gets_snapshot(i.action()) && !commits.contains(i.requested()));
        (!gap).then_some(at)
    }

    /// In a timeline listed from `floor`, the index from which an unmirrored completed
    /// instant before the newest mirrored one completed late (the replay from the first
    /// instant mirrors it), given the first mirrored one at `first`. The whole timeline
    /// takes every instant before the first mirrored one as mirrored and expired
    /// (`xlake expire`); the part does so only when the mirror holds nothing requested
    /// before the part (its snapshots expired up to there) and the saved state names the
    /// instants pending when it was saved: the part holds one of them before `first`,
    /// which completed late, from it; else from `first`. Otherwise from the start: a
    /// part holds no instant the mirror expired.
    fn oldest_not_expired(
        &self,
        floor: &crate::resume::Floor,
        mirrored: &MirrorState,
        first: usize,
    ) -> usize {
        let from = floor.list_from.as_str();
        let expired_into_part = floor.pending.is_some()
            && !mirrored
                .commits
                .iter()
                .any(|id| crate::resume::seconds(id) < from);
        if !expired_into_part {
            return 0;
        }
        let completed = &self.timeline().completed;
        let late = completed[..first]
            .iter()
            .position(|i| floor.was_pending(i.requested()) != Some(false));
        late.unwrap_or(first)
    }

    /// How many instant files the shortcut saves reading when given the mirror's live
    /// files; 0 when it does not apply, or when it applies without them (see
    /// [`Self::earlier_groups`]).
    pub(crate) async fn incremental_saving(&self, mirrored: &MirrorState) -> usize {
        // The listing and the replay that follow use the timeline this settles on; a
        // failure to list it whole is reported by the replay, which settles again.
        if let Err(e) = self.settle(mirrored, mirrored.live_files.is_none()).await {
            tracing::debug!(table = %self.store().location(), error = %e, "could not settle the timeline");
        }
        let Some(at) = self.incremental_base(mirrored) else {
            return 0;
        };
        if self.earlier_groups(at).await.is_some() {
            return 0;
        }
        let listed = self.timeline().completed[..=at]
            .iter()
            .filter(|i| gets_snapshot(i.action()))
            .count();
        // Listed from an instant time: without the live files the whole timeline is
        // listed and replayed, about as many instants as the mirror holds.
        match self.listed_from() {
            Some(_) => listed.max(mirrored.commits.len()),
            None => listed,
        }
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
            None => match self.earlier_groups(at).await {
                Some(seed) => seed,
                None => return Ok(None),
            },
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

    /// The base files live after the completed instant at index `at` of the file groups
    /// the write instants after it (at most [`FRESH_LOOKAHEAD`]) write to again: each such
    /// write stat's `prevCommit` names the instant its group builds on, whose own write
    /// stat for the group names the base file. Empty when they only start new groups
    /// (`prevCommit` `"null"`, Hudi's create) or build on groups started among them.
    /// `None` (the mirror's live files are needed) when they replace groups, or when a
    /// group's previous instant is not a write instant at or before `at`, or does not
    /// name exactly one Parquet base file of the group. Rollbacks and restores change no
    /// file group in a replay that starts after `at` (one that undoes a mirrored instant
    /// stops the shortcut). Unreadable metadata: `None`, and the replay reports it where
    /// it belongs. Cached: the engine asks before the replay does.
    async fn earlier_groups(&self, at: usize) -> Option<Vec<BaseFile>> {
        let cached = self.earlier_groups.lock().ok().and_then(|c| c.clone());
        if let Some((_, seed)) = cached.filter(|(k, _)| *k == at) {
            return seed;
        }
        let seed = self.read_earlier_groups(at).await;
        if let Ok(mut cached) = self.earlier_groups.lock() {
            *cached = Some((at, seed.clone()));
        }
        seed
    }

    /// [`Self::earlier_groups`], uncached.
    async fn read_earlier_groups(&self, at: usize) -> Option<Vec<BaseFile>> {
        let completed = &self.timeline().completed;
        let builds_on = self.builds_on(completed.get(at + 1..)?).await?;
        // One commit file per instant built on: past a few, the live files cost less.
        if builds_on.len() > FRESH_LOOKAHEAD {
            return None;
        }
        let mut seed = Vec::new();
        for (prev, groups) in builds_on {
            let instant = completed[..=at]
                .iter()
                .rev()
                .find(|i| i.requested() == prev)?;
            if !matches!(kind(instant.action()), Some(Kind::Commit)) {
                return None;
            }
            let meta = self.commit_metadata(instant).await?;
            for (key, named) in &groups {
                seed.push(base_file_of(&meta, key, named.as_deref())?);
            }
        }
        Some(seed)
    }

    /// Of the write instants in `later` (at most [`FRESH_LOOKAHEAD`]), the file groups
    /// they build on that none of them wrote first, by the instant built on (`prevCommit`),
    /// each with the base file name the write stat names (`prevBaseFile`) if any. `None`
    /// when they replace groups, or a stat lacks what this needs, or on unreadable
    /// metadata.
    async fn builds_on(&self, later: &[Instant]) -> Option<BTreeMap<String, Groups>> {
        let writes: Vec<&Instant> = later
            .iter()
            .filter(|i| matches!(kind(i.action()), Some(Kind::Commit)))
            .collect();
        if writes.len() > FRESH_LOOKAHEAD {
            return None;
        }
        let skip_logs = self.options.mor_read_optimized;
        let mut written: BTreeSet<(String, String)> = BTreeSet::new();
        let mut builds_on: BTreeMap<String, Groups> = BTreeMap::new();
        for instant in writes {
            let meta = self.commit_metadata(instant).await?;
            if meta.replaced().next().is_some() {
                return None;
            }
            for stat in meta.write_stats() {
                let path = stat.path.as_deref().unwrap_or_default();
                if skip_logs && is_log_file(path) {
                    continue;
                }
                let (Some(file_id), partition) = (&stat.file_id, &stat.partition_path) else {
                    return None;
                };
                let key = (partition.clone().unwrap_or_default(), file_id.clone());
                if !stat.starts_file_group() && !written.contains(&key) {
                    let named = stat.prev_base_file.clone().filter(|n| !n.is_empty());
                    let groups = builds_on.entry(stat.prev_commit.clone()?).or_default();
                    groups.insert(key.clone(), named);
                }
                written.insert(key);
            }
        }
        Some(builds_on)
    }

    /// The commit metadata of a write instant; `None` when it cannot be read.
    async fn commit_metadata(&self, instant: &Instant) -> Option<CommitMetadata> {
        let json = read_instant(self.store(), instant).await.ok()?;
        serde_json::from_value::<CommitMetadata>(json).ok()
    }

    /// Whether a rollback or restore among `later` undoes a mirrored instant (its effect
    /// is then taken as a whole state, which needs the full replay).
    async fn undoes_mirrored(
        &self,
        later: &[Instant],
        mirrored: &BTreeSet<String>,
    ) -> Result<bool> {
        for instant in later {
            let undone = match kind(instant.action()) {
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
            .filter(|i| matches!(kind(i.action()), Some(Kind::Commit)))
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
        // An older write instant may record the schema: the full replay finds it (also
        // one before the instant time the timeline was listed from).
        if writes.len() > SCHEMA_LOOKBACK || self.listed_from().is_some() {
            return Ok(None);
        }
        Ok(self
            .config()
            .create_schema
            .as_ref()
            .and_then(|text| avro_to_schema(text, meta_fields).ok()))
    }
}

/// File groups `(partition, file id)`, each with the name of its base file where a later
/// write stat names it.
type Groups = BTreeMap<(String, String), Option<String>>;

/// The one Parquet base file that `meta` writes for the file group `(partition, file id)`;
/// `None` also when it is not the file `named` (a later write's `prevBaseFile`) names.
fn base_file_of(
    meta: &CommitMetadata,
    key: &(String, String),
    named: Option<&str>,
) -> Option<BaseFile> {
    let mut files = meta.write_stats().filter(|stat| {
        let path = stat.path.as_deref().unwrap_or_default();
        stat.file_id.as_ref() == Some(&key.1)
            && stat.partition_path.as_deref().unwrap_or_default() == key.0
            && path.ends_with(".parquet")
            && !is_log_file(path)
    });
    let (stat, None) = (files.next()?, files.next()) else {
        return None;
    };
    let path = stat.path.as_deref()?;
    let name = path.rsplit('/').next()?;
    if named.is_some_and(|n| n.rsplit('/').next() != Some(name)) {
        return None;
    }
    BaseFile::written(stat, path).ok()
}

#[cfg(test)]
mod tests {
    use xlake_model::ChangeSet;
    use xlake_source::TableSource;
    use xlake_storage::TableStore;

    use super::*;

    const PROPERTIES: &str = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\nhoodie.table.partition.fields=p\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\n";

    /// A commit writing `files` (file id, prevCommit) in partition `p=1`, with the schema.
    fn commit(instant: &str, files: &[(&str, &str)]) -> String {
        crate::partial::tests::commit(instant, files, true)
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

    /// The full replay's change sets after `mirrored`'s newest instant: those of a replay
    /// from the first instant that no mirror state shortens.
    async fn replayed_after(source: &HudiSource, newest: &str) -> Vec<ChangeSet> {
        let all = source.change_sets(&MirrorState::default()).await.unwrap();
        let at = all
            .changes
            .iter()
            .position(|c| c.commit.id == newest)
            .unwrap();
        all.changes[at + 1..].to_vec()
    }

    #[tokio::test]
    async fn a_rewritten_mirrored_group_is_seeded_from_the_instant_it_builds_on() {
        // c2 rewrites a (written by c1) and starts b; c3 rewrites b and a again.
        let (_dir, source) = table(&[
            (C1, commit(C1, &[("a", "null"), ("z", "null")])),
            (C2, commit(C2, &[("a", C1), ("b", "null")])),
            (C3, commit(C3, &[("b", C2), ("a", C2)])),
        ])
        .await;
        let state = mirrored(&[C1]);
        assert_eq!(source.reads_saved_by_live_files(&state).await, 0);
        let got = source.change_sets(&state).await.unwrap().changes;
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [C2, C3]);
        assert_eq!(got[0].removed, [format!("p=1/a_0-1-1_{C1}.parquet")]);
        assert_eq!(
            got[1].removed,
            [
                format!("p=1/b_0-1-1_{C2}.parquet"),
                format!("p=1/a_0-1-1_{C2}.parquet")
            ]
        );
        assert_eq!(got, replayed_after(&source, C1).await);
    }

    /// Groups built on instants further back (c1, behind c2) and on two instants at
    /// once; a later write's `prevBaseFile` agreeing with the seed.
    #[tokio::test]
    async fn groups_are_seeded_from_every_instant_they_build_on() {
        let c4 = "20240101000003000";
        let mut c4_json: serde_json::Value =
            serde_json::from_str(&commit(c4, &[("a", C1), ("y", C2)])).unwrap();
        c4_json["partitionToWriteStats"]["p=1"][0]["prevBaseFile"] =
            format!("a_0-1-1_{C1}.parquet").into();
        let (_dir, source) = table(&[
            (C1, commit(C1, &[("a", "null")])),
            (C2, commit(C2, &[("y", "null")])),
            (C3, commit(C3, &[("n", "null")])),
            (c4, c4_json.to_string()),
        ])
        .await;
        let state = mirrored(&[C1, C2, C3]);
        assert_eq!(source.reads_saved_by_live_files(&state).await, 0);
        let got = source.change_sets(&state).await.unwrap().changes;
        let mut removed = got[0].removed.clone();
        removed.sort();
        let expected = [
            format!("p=1/a_0-1-1_{C1}.parquet"),
            format!("p=1/y_0-1-1_{C2}.parquet"),
        ];
        assert_eq!(removed, expected);
        assert_eq!(got, replayed_after(&source, C3).await);
    }

    #[tokio::test]
    async fn a_group_whose_previous_file_is_not_named_needs_the_live_files() {
        let gone = "20231231000000000";
        let cases = [
            // Built on an instant no longer on the timeline (archived).
            commit(C2, &[("a", gone)]),
            // Built on c1, which wrote no file of the group.
            commit(C2, &[("y", C1)]),
        ];
        // A later write naming another previous base file than the instant wrote.
        let mut other: serde_json::Value = serde_json::from_str(&commit(C2, &[("a", C1)])).unwrap();
        other["partitionToWriteStats"]["p=1"][0]["prevBaseFile"] = "a_9-9-9_x.parquet".into();
        let cases = cases.into_iter().chain([other.to_string()]);
        for c2 in cases {
            let (_dir, source) = table(&[(C1, commit(C1, &[("a", "null")])), (C2, c2)]).await;
            let state = mirrored(&[C1]);
            assert_eq!(source.reads_saved_by_live_files(&state).await, 1);
            // Without them: the replay starts at the first instant (the engine skips c1).
            let got = source.change_sets(&state).await.unwrap().changes;
            let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
            assert_eq!(ids, [C1, C2]);
        }
        // A replace commit needs the groups it replaces.
        let mut replace: serde_json::Value =
            serde_json::from_str(&commit(C2, &[("b", "null")])).unwrap();
        replace["partitionToReplaceFileIds"] = serde_json::json!({"p=1": ["a"]});
        let (_dir, source) = table(&[
            (C1, commit(C1, &[("a", "null")])),
            (C2, replace.to_string()),
        ])
        .await;
        assert_eq!(source.reads_saved_by_live_files(&mirrored(&[C1])).await, 1);
        // Nine groups built on nine instants: past 8, the live files cost less.
        let times: Vec<String> = (0..10).map(|i| format!("2024010100001{i}000")).collect();
        let mut instants: Vec<(&str, String)> = times[..9]
            .iter()
            .map(|t| (t.as_str(), commit(t, &[(&t[12..], "null")])))
            .collect();
        let built: Vec<(&str, &str)> = times[..9].iter().map(|t| (&t[12..], t.as_str())).collect();
        instants.push((&times[9], commit(&times[9], &built)));
        let (_dir, source) = table(&instants).await;
        let mirrored_all: Vec<&str> = times[..9].iter().map(String::as_str).collect();
        assert_eq!(
            source
                .reads_saved_by_live_files(&mirrored(&mirrored_all))
                .await,
            9
        );
    }
}
