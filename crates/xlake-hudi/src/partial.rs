//! A timeline listed from the instant time the last sync left ([`crate::resume`]) instead
//! of whole, and when it gives way to the whole one.
//!
//! An incremental sync opens the table with the part of its timeline requested from that
//! time on: on an object store one listing that starts there, so its pages follow the
//! instants since, not the table's age. The part is enough when the replay starts after
//! the newest mirrored instant (the `incremental` shortcut) from what the part holds
//! alone: the newest mirrored instant is there, completed; every completed instant in the
//! part before it is mirrored (else one completed late, and the replay from the first
//! instant mirrors it); no later rollback or restore undoes a mirrored instant; the file
//! groups the later instants build on and the schema are found in the part, or the
//! engine gives the mirror's live files. Anything else lists the timeline whole, once,
//! and the sync goes on as it does without a saved state; so does an instant the saved
//! state names pending that the part does not hold (`crate::gone`).
//!
//! The engine takes the listing before the replay: when the mirror's live files it was
//! asked for do not come (too many manifests to read), the replay lists the timeline
//! whole after the part was listed, and then gives no change set of an instant requested
//! before the part that is mirrored or was and expired (before the oldest mirrored one),
//! as the listing has none; an unmirrored one after the oldest mirrored one (its files
//! appeared after the floor was saved: see [`crate::resume`]) is given, as the whole
//! timeline's replay gives it.

use xlake_source::MirrorState;
use xlake_storage::TableStore;

use crate::error::Result;
use crate::source::{read_config, HudiOptions};
use crate::timeline::Timeline;
use crate::HudiSource;

impl HudiSource {
    /// Open the table to mirror what follows the mirror's newest instant: the timeline
    /// listed from the instant time the saved state of that instant names
    /// ([`crate::resume::of`]), else whole (a mirror written by an older build, a state
    /// of another instant). The newest mirrored instant not completed in the part: whole.
    /// `None` when there is no `hoodie.properties`.
    pub async fn open_after(
        store: TableStore,
        options: HudiOptions,
        state: &MirrorState,
    ) -> Result<Option<Self>> {
        let saved = state.newest.as_ref().and_then(|(newest, _)| {
            let from = crate::resume::of(state.source_state.as_deref(), newest)?;
            Some((newest, from))
        });
        let Some((newest, from)) = saved else {
            return Self::open_if_there(store, options).await;
        };
        let Some(source) = Self::open_part(store, options, from).await? else {
            return Ok(None);
        };
        let found = source
            .timeline()
            .completed
            .iter()
            .any(|i| i.requested() == newest);
        // An instant the state names pending that the part does not hold was rolled back
        // or archived: the whole timeline tells which (`crate::gone`).
        let gone =
            |floor: &crate::resume::Floor| !source.off_timeline(floor, &state.commits).is_empty();
        if !found || source.listed_from.as_ref().is_some_and(gone) {
            source.list_whole().await?;
        }
        Ok(Some(source))
    }

    /// Open the table with the part of its timeline from `floor` on (its pending
    /// instants before it looked up one by one: [`Timeline::load_part`]), an hour lower
    /// on a local-time table when a clock may have gone back since it was saved
    /// ([`crate::resume::Floor::for_listing`]). `None` when there is no
    /// `hoodie.properties`.
    pub(crate) async fn open_part(
        store: TableStore,
        options: HudiOptions,
        floor: crate::resume::Floor,
    ) -> Result<Option<Self>> {
        let Some(config) = read_config(&store, &options).await? else {
            return Ok(None);
        };
        let floor = floor.for_listing(config.utc_instants, crate::clock::now());
        let dir = &config.timeline_dir;
        let timeline = Timeline::load_part(&store, dir, &floor.list_from, &floor.lookups()).await?;
        Self::with_timeline(store, options, config, timeline, Some(floor)).map(Some)
    }

    /// Open the table to compare its tip with `tip`, the one a settled sync recorded
    /// (the scheduled job's no-op check): the timeline listed from the instant time the
    /// tip names ([`crate::resume::of_tip`]), else whole.
    pub async fn open_at_tip(
        store: TableStore,
        options: HudiOptions,
        tip: &str,
    ) -> Result<Option<Self>> {
        match crate::resume::of_tip(tip) {
            Some(floor) => Self::open_part(store, options, floor).await,
            None => Self::open_if_there(store, options).await,
        }
    }

    /// Before the listing and the replay for a mirror holding `state`: with the timeline
    /// listed from an instant time, whether the part gives the replay's start (see the
    /// module doc), kept for the replay; else the timeline listed whole. `asking`: the
    /// engine is about to be asked for the mirror's live files, which may then do.
    pub(crate) async fn settle(&self, state: &MirrorState, asking: bool) -> Result<()> {
        // Settled already for this state (the replay after the engine's question).
        if self.listed_from().is_none() || self.settled_start(state).is_some() {
            return Ok(());
        }
        let Some((newest, _)) = &state.newest else {
            return self.list_whole().await;
        };
        match self.incremental_start(state).await? {
            Some(start) if state.live_files.is_none() => {
                if let Ok(mut kept) = self.start.lock() {
                    *kept = Some((newest.clone(), start));
                }
                Ok(())
            }
            Some(_) => Ok(()),
            None if asking && self.starts_with_live_files(state).await? => Ok(()),
            None => self.list_whole().await,
        }
    }

    /// Whether the part gives the replay's start once the engine gives the mirror's live
    /// files ([`Self::incremental_saving`] asks for them): every condition holds but the
    /// file groups the later instants build on, which the part does not name. Tried with
    /// no live files at all, which every other condition ignores.
    async fn starts_with_live_files(&self, state: &MirrorState) -> Result<bool> {
        let probe = MirrorState {
            live_files: Some(Vec::new()),
            ..state.clone()
        };
        Ok(self.incremental_start(&probe).await?.is_some())
    }

    /// The start [`Self::settle`] found for `state`, if it is still of the part.
    pub(crate) fn settled_start(&self, state: &MirrorState) -> Option<crate::start::Start> {
        let newest = &state.newest.as_ref()?.0;
        if self.listed_from().is_none() || state.live_files.is_some() {
            return None;
        }
        let kept = self.start.lock().ok()?;
        kept.as_ref()
            .filter(|(id, _)| id == newest)
            .map(|(_, start)| start.clone())
    }

    /// For a replay over the whole timeline after the part was listed to the engine: the
    /// instant time before which it gives no change set (see the module doc).
    pub(crate) fn skip_before(&self) -> Option<String> {
        let listed = self.part_listed.load(std::sync::atomic::Ordering::Relaxed);
        match (self.whole.get(), listed) {
            (Some(_), true) => self.listed_from.as_ref().map(|f| f.list_from.clone()),
            _ => None,
        }
    }

    /// List the timeline whole, once: from then on it is the one in use.
    async fn list_whole(&self) -> Result<()> {
        if self.whole.get().is_some() {
            return Ok(());
        }
        let whole = Timeline::load(self.store(), &self.config().timeline_dir).await?;
        let _ = self.whole.set(whole);
        // What was found by index into the part does not hold for the whole.
        if let Ok(mut cached) = self.earlier_groups.lock() {
            *cached = None;
        }
        if let Ok(mut kept) = self.start.lock() {
            *kept = None;
        }
        tracing::debug!(table = %self.store().location(), "the timeline listed from the saved instant time is not enough; listed whole");
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use xlake_model::ChangeSet;
    use xlake_source::TableSource;

    use super::*;

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"p","type":"string"}]}"#;

    /// Commit metadata writing `files` (file id, prevCommit) in partition `p=1`, with the
    /// schema unless `schema` is false.
    pub(crate) fn commit(instant: &str, files: &[(&str, &str)], schema: bool) -> String {
        let stats: Vec<serde_json::Value> = files
            .iter()
            .map(|(id, prev)| {
                serde_json::json!({"fileId": id, "path": format!("p=1/{id}_0-1-1_{instant}.parquet"),
                    "prevCommit": prev, "partitionPath": "p=1", "fileSizeInBytes": 10, "numWrites": 1})
            })
            .collect();
        let extra = match schema {
            true => serde_json::json!({ "schema": SCHEMA }),
            false => serde_json::json!({}),
        };
        serde_json::json!({"partitionToWriteStats": {"p=1": stats},
            "extraMetadata": extra, "operationType": "UPSERT"})
        .to_string()
    }

    /// A table of `version` (6: `.hoodie/`, 9: `.hoodie/timeline/`).
    /// Instant times in UTC (the 10-minute margin), as the tests below place instants.
    fn table(version: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        table_in(version, "UTC")
    }

    /// A table whose instant times are in `zone` (`hoodie.table.timeline.timezone`).
    fn table_in(version: u32, zone: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let timeline = timeline_dir(dir.path(), version);
        std::fs::create_dir_all(&timeline).unwrap();
        let properties = format!("hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version={version}\nhoodie.table.partition.fields=p\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\nhoodie.table.timeline.timezone={zone}\n");
        std::fs::write(dir.path().join(".hoodie/hoodie.properties"), properties).unwrap();
        // What sorts after the instants and is never listed from an instant time.
        std::fs::create_dir_all(dir.path().join(".hoodie/archived")).unwrap();
        (dir, timeline)
    }

    fn timeline_dir(root: &Path, version: u32) -> std::path::PathBuf {
        match version {
            6 => root.join(".hoodie"),
            _ => root.join(".hoodie/timeline"),
        }
    }

    /// Instant `requested` written as pending (requested and inflight files).
    fn pending(timeline: &Path, requested: &str) {
        std::fs::write(timeline.join(format!("{requested}.commit.requested")), "").unwrap();
        std::fs::write(timeline.join(format!("{requested}.inflight")), "").unwrap();
    }

    /// Instant `requested` completed (at `done` on table version 9) with `json`.
    fn completed(timeline: &Path, requested: &str, done: Option<&str>, json: &str) {
        let name = match done {
            Some(done) => format!("{requested}_{done}.commit"),
            None => format!("{requested}.commit"),
        };
        std::fs::write(timeline.join(name), json).unwrap();
    }

    async fn open(root: &Path) -> HudiSource {
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        HudiSource::open(store, Default::default()).await.unwrap()
    }

    /// What the mirror holds after a full sync that ends at `newest`: the instants up to
    /// it and the state its change set saved (unless `saved` is false: an older build).
    async fn mirror_at(root: &Path, newest: &str, saved: bool) -> (MirrorState, Vec<ChangeSet>) {
        let full = open(root)
            .await
            .change_sets(&MirrorState::default())
            .await
            .unwrap();
        let at = full
            .changes
            .iter()
            .position(|c| c.commit.id == newest)
            .unwrap();
        let done = &full.changes[at];
        let state = MirrorState {
            commits: full.changes[..=at]
                .iter()
                .map(|c| c.commit.id.clone())
                .collect(),
            newest: Some((newest.to_string(), done.notes.clone())),
            source_state: done.source_state.clone().filter(|_| saved),
            ..Default::default()
        };
        (state, full.changes[at + 1..].to_vec())
    }

    /// The source opened after `state`'s newest instant, and its change sets for it (as
    /// the engine asks: first whether the mirror's live files save reads).
    async fn after(root: &Path, state: &MirrorState) -> (HudiSource, Vec<ChangeSet>) {
        let store = TableStore::open(root.to_str().unwrap()).unwrap();
        let source = HudiSource::open_after(store, Default::default(), state)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(source.reads_saved_by_live_files(state).await, 0);
        let got = source.change_sets(state).await.unwrap().changes;
        (source, got)
    }

    /// Unmirrored change sets of a replay: the engine skips the mirrored ones.
    fn unmirrored(changes: Vec<ChangeSet>, state: &MirrorState) -> Vec<ChangeSet> {
        changes
            .into_iter()
            .filter(|c| !state.commits.contains(&c.commit.id))
            .collect()
    }

    const C1: &str = "20240101000000000";
    const C2: &str = "20240101010000000";
    const C3: &str = "20240101020000000";
    const C4: &str = "20240101020500000";
    const C5: &str = "20240101020600000";

    /// A timeline of five commits, the last two an hour after the first two: c2
    /// rewrites c1's group, c4 the group c3 started, c5 starts one.
    fn five_commits(timeline: &Path) {
        completed(timeline, C1, None, &commit(C1, &[("a", "null")], true));
        completed(timeline, C2, None, &commit(C2, &[("a", C1)], true));
        completed(timeline, C3, None, &commit(C3, &[("b", "null")], true));
        completed(timeline, C4, None, &commit(C4, &[("b", C3)], true));
        completed(timeline, C5, None, &commit(C5, &[("c", "null")], true));
    }

    #[tokio::test]
    async fn the_part_listed_gives_the_change_sets_and_listing_of_the_whole() {
        let (dir, timeline) = table(6);
        five_commits(&timeline);
        let (state, want) = mirror_at(dir.path(), C3, true).await;
        // The floor: the newest instant (c5, 02:06) less ten minutes.
        assert_eq!(
            crate::resume::of(state.source_state.as_deref(), C3)
                .map(|f| f.list_from)
                .as_deref(),
            Some("20240101015600")
        );
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20240101015600"));
        let ids = |t: &Timeline| {
            t.completed
                .iter()
                .map(|i| i.requested().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(source.timeline()), [C3, C4, C5]);
        assert_eq!(got, want);
        let whole = open(dir.path()).await;
        let listed = |s: &HudiSource| TableSource::listing(s, &state).unwrap().commits;
        assert_eq!(listed(&source), listed(&whole));
        assert_eq!(TableSource::tip(&source), TableSource::tip(&whole));
    }

    #[tokio::test]
    async fn a_mirror_without_a_saved_state_lists_the_timeline_whole() {
        let (dir, timeline) = table(6);
        five_commits(&timeline);
        let (state, want) = mirror_at(dir.path(), C3, false).await;
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), None);
        assert_eq!(source.timeline().completed.len(), 5);
        assert_eq!(got, want);
    }

    /// A schema recorded only before the floor: the timeline is listed whole, and gives
    /// the same change sets.
    #[tokio::test]
    async fn a_schema_recorded_only_before_the_floor_lists_the_timeline_whole() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        completed(&timeline, C2, None, &commit(C2, &[("a", C1)], true));
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], false));
        completed(&timeline, C4, None, &commit(C4, &[("d", "null")], false));
        completed(&timeline, C5, None, &commit(C5, &[("c", "null")], false));
        let (state, want) = mirror_at(dir.path(), C3, true).await;
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), None);
        assert_eq!(source.timeline().completed.len(), 5);
        assert_eq!(unmirrored(got, &state), want);
    }

    /// c4 replaces the group c2 wrote, before the floor: the part is kept when the engine
    /// gives the mirror's live files; when they do not come, the replay lists the
    /// timeline whole, replays it from the first instant and gives no change set before
    /// the part it listed. The same change sets either way.
    #[tokio::test]
    async fn a_group_built_before_the_floor_takes_the_mirrors_live_files() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        completed(&timeline, C2, None, &commit(C2, &[("a", C1)], true));
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], true));
        // c4 replaces the group (clustering, an overwrite): the live files name it.
        let mut c4: serde_json::Value =
            serde_json::from_str(&commit(C4, &[("r", "null")], true)).unwrap();
        c4["partitionToReplaceFileIds"] = serde_json::json!({"p=1": ["a"]});
        completed(&timeline, C4, None, &c4.to_string());
        completed(&timeline, C5, None, &commit(C5, &[("c", "null")], true));
        let (state, want) = mirror_at(dir.path(), C3, true).await;
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let live = [
            format!("p=1/a_0-1-1_{C2}.parquet"),
            format!("p=1/b_0-1-1_{C3}.parquet"),
        ];
        for given in [true, false] {
            let source = HudiSource::open_after(store.clone(), Default::default(), &state)
                .await
                .unwrap()
                .unwrap();
            // As many as the mirror holds: the whole timeline would be replayed.
            assert_eq!(source.reads_saved_by_live_files(&state).await, 3);
            let mut state = state.clone();
            if given {
                let files = live.iter().map(|p| (store.absolute(p), 1)).collect();
                state.live_files = Some(files);
            }
            let listed = TableSource::listing(&source, &state).unwrap().commits;
            let got = source.change_sets(&state).await.unwrap().changes;
            assert_eq!(source.listed_from().is_some(), given);
            let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
            match given {
                true => assert_eq!(ids, [C4, C5]),
                // c3 is at the floor's side of the part: the engine skips it.
                false => assert_eq!(ids, [C3, C4, C5]),
            }
            assert_eq!(unmirrored(got, &state), want, "given {given}");
            let listed: Vec<&str> = listed.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(listed, [C1, C2, C3, C4, C5]);
        }
    }

    /// A saved floor: listed from `list_from`, `pending` looked up.
    fn floor(list_from: &str, pending: &[&str]) -> crate::resume::Floor {
        crate::resume::Floor {
            list_from: list_from.to_string(),
            pending: Some(pending.iter().map(|p| p.to_string()).collect()),
            owed: Vec::new(),
            quiet: Some(Vec::new()),
        }
    }

    fn completed_ids(t: &Timeline) -> Vec<String> {
        t.completed
            .iter()
            .map(|i| i.requested().to_string())
            .collect()
    }

    /// A version 6 table of c1, c2 pending, a completed instant between c2 and c3, and c3.
    fn with_one_pending() -> (tempfile::TempDir, std::path::PathBuf) {
        let (dir, timeline) = table(6);
        let c2b = "20240101013000000";
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        pending(&timeline, C2);
        completed(&timeline, c2b, None, &commit(c2b, &[("d", "null")], true));
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], true));
        (dir, timeline)
    }

    /// An instant pending for good (c2) does not hold the listing back to its time: the
    /// part is listed from the newest instant less the margin, c2 looked up on its own,
    /// and the instants between them (c2b) are not listed. Each later sync names it
    /// again; when it completes it is mirrored once (table version 6: by the replay of
    /// the whole timeline, as it lands among mirrored instants).
    #[tokio::test]
    async fn an_instant_pending_for_good_does_not_hold_the_listing_back() {
        let (dir, timeline) = with_one_pending();
        let (state, _) = mirror_at(dir.path(), C3, true).await;
        completed(&timeline, C4, None, &commit(C4, &[("b", C3)], true));
        completed(&timeline, C5, None, &commit(C5, &[("c", "null")], true));
        let (_, want) = mirror_at(dir.path(), C3, true).await;
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20240101015000"));
        assert_eq!(completed_ids(source.timeline()), [C3, C4, C5]);
        assert_eq!(source.timeline().pending.len(), 1);
        assert_eq!(got, want);
        let whole = open(dir.path()).await;
        assert_eq!(TableSource::tip(&source), TableSource::tip(&whole));
        // The next sync starts from c5's state: c2 still named.
        let newest = got.last().unwrap();
        assert_eq!(
            crate::resume::of(newest.source_state.as_deref(), C5),
            Some(floor("20240101015600", &[C2]))
        );
        let (state, _) = mirror_at(dir.path(), C5, true).await;
        completed(&timeline, C2, None, &commit(C2, &[("e", "null")], true));
        let (_, got) = after(dir.path(), &state).await;
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(ids, [C2]);
    }

    /// The job's no-op check opens the table at the tip a settled sync recorded: the
    /// timeline listed from the floor it names, the pending instant before it looked up,
    /// and the same tip as the whole timeline's while nothing moved; when the pending
    /// instant completes, or a new one does, the tip differs (the sync is not skipped).
    #[tokio::test]
    async fn the_no_op_check_lists_from_the_settled_tip() {
        let (dir, timeline) = with_one_pending();
        let settled = TableSource::tip(&open(dir.path()).await).unwrap();
        assert_eq!(
            settled,
            format!("20240101015000:{C3}:{C2}"),
            "listFrom, the instants since, the pending one before"
        );
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let at_tip = || HudiSource::open_at_tip(store.clone(), Default::default(), &settled);
        let source = at_tip().await.unwrap().unwrap();
        assert_eq!(source.listed_from(), Some("20240101015000"));
        assert_eq!(completed_ids(source.timeline()), [C3]);
        assert_eq!(TableSource::tip(&source).unwrap(), settled);
        completed(&timeline, C2, None, &commit(C2, &[("e", "null")], true));
        let source = at_tip().await.unwrap().unwrap();
        let moved = TableSource::tip(&source).unwrap();
        assert_ne!(moved, settled);
        assert_eq!(moved, TableSource::tip(&open(dir.path()).await).unwrap());
        // A tip that does not read: the timeline whole.
        let whole = HudiSource::open_at_tip(store.clone(), Default::default(), "x")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(whole.listed_from(), None);
    }

    /// `xlake expire` left the mirror c4 and c5 only: c3, in the part before them and not
    /// pending when the state was saved, is taken as mirrored and expired (as the whole
    /// timeline takes the instants before the oldest mirrored one), and the part is
    /// enough; c2, pending then, that completes in the part before them is not.
    #[tokio::test]
    async fn an_expired_mirror_still_lists_from_the_saved_floor() {
        let (dir, timeline) = table(6);
        five_commits(&timeline);
        let (mut state, _) = mirror_at(dir.path(), C5, true).await;
        state.commits = [C4, C5].map(String::from).into();
        let c6 = "20240101020700000";
        completed(&timeline, c6, None, &commit(c6, &[("d", "null")], true));
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20240101015600"));
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [c6]);
        // A mirror that holds history before the part: c3 unmirrored completed late.
        let (mut state, _) = mirror_at(dir.path(), C5, true).await;
        state.commits.remove(C3);
        let (source, _) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), None);
    }

    /// Table version 6: an instant requested before the newest mirrored one, pending when
    /// that was mirrored, completes later. The floor the sync saved is before it; the part
    /// listed shows it completed among mirrored ones, and the timeline is listed whole
    /// (the replay from the first instant mirrors it).
    #[tokio::test]
    async fn a_pending_instant_before_the_newest_mirrored_is_mirrored_when_it_completes_v6() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        pending(&timeline, C2);
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], true));
        let (state, _) = mirror_at(dir.path(), C3, true).await;
        // The newest instant (c3, 02:00) less ten minutes; c2 looked up on its own.
        assert_eq!(
            crate::resume::of(state.source_state.as_deref(), C3),
            Some(floor("20240101015000", &[C2]))
        );
        completed(&timeline, C2, None, &commit(C2, &[("c", "null")], true));
        let (source, got) = after(dir.path(), &state).await;
        let got = unmirrored(got, &state);
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [C2]);
        assert_eq!(source.listed_from(), None);
        let listed = TableSource::listing(&source, &state).unwrap().commits;
        assert_eq!(
            listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            [C1, C2, C3]
        );
    }

    /// Table version 9 (instants in completion order): the same, and the part listed is
    /// enough (the late instant comes after the newest mirrored one).
    #[tokio::test]
    async fn a_pending_instant_before_the_newest_mirrored_is_mirrored_when_it_completes_v9() {
        let (dir, timeline) = table(9);
        let done = |t: &str| format!("{}1{}", &t[..13], &t[14..]);
        completed(
            &timeline,
            C1,
            Some(&done(C1)),
            &commit(C1, &[("a", "null")], true),
        );
        pending(&timeline, C2);
        completed(
            &timeline,
            C3,
            Some(&done(C3)),
            &commit(C3, &[("b", "null")], true),
        );
        let (state, _) = mirror_at(dir.path(), C3, true).await;
        assert_eq!(
            crate::resume::of(state.source_state.as_deref(), C3),
            Some(floor("20240101015000", &[C2]))
        );
        completed(
            &timeline,
            C2,
            Some("20240101030000000"),
            &commit(C2, &[("c", "null")], true),
        );
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20240101015000"));
        // c1 is not listed: c2 was looked up on its own.
        assert_eq!(completed_ids(source.timeline()), [C3, C2]);
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [C2]);
        // As the whole timeline gives it.
        let (_, want) = mirror_at(dir.path(), C3, true).await;
        assert_eq!(got, want);
    }

    /// Hostile review 6: one instant dated ahead of the others (a writer whose clock or
    /// time zone is ahead: Hudi's instant times are local time by default) moves the floor
    /// ahead of every instant the other writers request for as long, hours, not the
    /// 10-minute margin: an instant they complete after it is never listed, and the sync
    /// reports nothing new (exit 0). Listed whole (a mirror without a saved state), the
    /// late completion is mirrored.
    #[tokio::test]
    #[ignore = "open (docs/known-gaps.md): writers whose instant times disagree by more than the margin; check reports what is missed"]
    async fn an_instant_dated_ahead_does_not_hide_the_instants_completed_after_it() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        // Nine hours ahead of the writer of c2 (UTC+9 local time against UTC).
        let ahead = "20240101100000000";
        completed(
            &timeline,
            ahead,
            None,
            &commit(ahead, &[("f", "null")], true),
        );
        let (state, _) = mirror_at(dir.path(), ahead, true).await;
        completed(&timeline, C2, None, &commit(C2, &[("b", "null")], true));
        let whole = open(dir.path()).await.change_sets(&state).await.unwrap();
        let want: Vec<String> = unmirrored(whole.changes, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(want, [C2], "the whole timeline's replay");
        let (_, got) = after(dir.path(), &state).await;
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(ids, want);
    }

    /// Hostile review 6: one writer, Hudi's default time zone (`hoodie.table.timeline.timezone`
    /// LOCAL, as the fixtures' writer in CDT): at the autumn clock change the instant times
    /// go back an hour. The commits of the hour after 02:00 CDT -> 01:00 CST are requested
    /// before the floor the last sync saved (01:45 less 10 minutes) and are never listed;
    /// a sync reports nothing new. Listed whole, they are mirrored as late completions.
    /// The sync after them runs at 02:30 CST (08:30 UTC): the US change is between the
    /// floor and now, so the part is listed from an hour lower (`crate::clock`).
    #[tokio::test]
    async fn commits_after_the_autumn_clock_change_are_mirrored() {
        crate::clock::tests::set_now("20241103083000");
        let (dir, timeline) = autumn_change_mirrored();
        let (state, _) = mirror_at(dir.path(), "20241103014500000", true).await;
        let after_change = [
            "20241103010000000",
            "20241103011500000",
            "20241103013000001",
        ];
        for (n, id) in after_change.iter().enumerate() {
            let group = format!("c{n}");
            completed(
                &timeline,
                id,
                None,
                &commit(id, &[(group.as_str(), "null")], true),
            );
        }
        let whole = open(dir.path()).await.change_sets(&state).await.unwrap();
        let want: Vec<String> = unmirrored(whole.changes, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(want, after_change, "the whole timeline's replay");
        let (source, got) = after(dir.path(), &state).await;
        // Listed from 00:35: the part holds them, completed before the newest mirrored
        // one (late completions), and the timeline is then listed whole.
        assert_eq!(source.listed_from(), None);
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(ids, want);
    }

    /// Hostile review 6's table before the change: two commits of a local-time table
    /// (01:30 and 01:45 CDT on 2024-11-03), mirrored to the second.
    fn autumn_change_mirrored() -> (tempfile::TempDir, std::path::PathBuf) {
        table_with(&[("20241103013000000", "a"), ("20241103014500000", "b")])
    }

    /// A local-time table of the commits `ids` (instant, file group).
    fn table_with(ids: &[(&str, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
        let (dir, timeline) = table_in(6, "LOCAL");
        for (id, group) in ids {
            completed(&timeline, id, None, &commit(id, &[(group, "null")], true));
        }
        (dir, timeline)
    }

    /// Two commits in Beirut before its change of 2026-10-25 00:00 EEST -> 2026-10-24
    /// 23:00 EET (21:00 UTC, the first zone to lower its offset since Gaza's, 22 hours
    /// earlier): 23:30 and 23:45 EEST, 20:30 and 20:45 UTC.
    const MIRRORED: [(&str, &str); 2] = [("20261024233000000", "a"), ("20261024234500000", "b")];

    /// A local-time table synced with no clock change since its floor was saved lists
    /// from that floor, 10 minutes before its newest instant, not 70 (issue 47: 13 pages
    /// instead of 2 at one commit a second); once a zone's clock went back, an hour lower.
    #[tokio::test]
    async fn a_local_table_lists_from_the_saved_floor_unless_a_clock_went_back() {
        let (dir, timeline) = table_with(&MIRRORED);
        let (state, _) = mirror_at(dir.path(), MIRRORED[1].0, true).await;
        let c3 = "20261024235000000";
        completed(&timeline, c3, None, &commit(c3, &[("c", "null")], true));
        // 20:55 UTC: no zone has lowered its offset since the floor less 14 hours.
        crate::clock::tests::set_now("20261024205500");
        let (source, got) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20261024233500"));
        assert_eq!(unmirrored(got, &state)[0].commit.id, c3);
        // 21:05 UTC, past the change: an hour lower; a UTC table's is not.
        crate::clock::tests::set_now("20261024210500");
        let (source, _) = after(dir.path(), &state).await;
        assert_eq!(source.listed_from(), Some("20261024223500"));
        let floor = crate::resume::Floor {
            list_from: "20261024233500".into(),
            ..Default::default()
        };
        let now = crate::clock::now();
        assert_eq!(floor.clone().for_listing(true, now), floor);
    }

    /// The scheduled job's no-op check across the change: the settled record was made
    /// before it (ids from the floor, 23:35), a commit of the repeated hour (23:15 EET)
    /// is requested before that floor. The check lists from an hour lower and names the
    /// ids from there: not the settled tip, so the job syncs.
    #[tokio::test]
    async fn the_no_op_check_sees_the_repeated_hour() {
        let (dir, timeline) = table_with(&MIRRORED);
        crate::clock::tests::set_now("20261024205000");
        let settled = TableSource::tip(&open(dir.path()).await).unwrap();
        assert_eq!(settled, "20261024233500:20261024234500000:");
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let at_tip = || HudiSource::open_at_tip(store.clone(), Default::default(), &settled);
        let source = at_tip().await.unwrap().unwrap();
        assert_eq!(source.listed_from(), Some("20261024233500"));
        assert_eq!(TableSource::tip(&source).unwrap(), settled);
        let repeated = "20261024231500000";
        completed(
            &timeline,
            repeated,
            None,
            &commit(repeated, &[("c", "null")], true),
        );
        crate::clock::tests::set_now("20261024213000");
        let source = at_tip().await.unwrap().unwrap();
        assert_eq!(source.listed_from(), Some("20261024223500"));
        let moved = TableSource::tip(&source).unwrap();
        assert_ne!(moved, settled, "nothing new would be said");
        assert_eq!(moved, TableSource::tip(&open(dir.path()).await).unwrap());
    }

    /// Hostile review 6: a clustering named before the floor whose files appear after the
    /// sync that saved it (its plan took longer than the margin), then a commit that
    /// builds on the group it wrote. Without the mirror's live files the replay lists the
    /// timeline whole: it gives the clustering, as a replay of the whole timeline does
    /// (skipped, the commit after it removed a file the mirror never had, and every sync
    /// failed so until a rebuild).
    #[tokio::test]
    async fn an_instant_below_the_floor_seen_by_the_whole_replay_is_given() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        completed(&timeline, C2, None, &commit(C2, &[("a", C1)], true));
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], true));
        let (state, _) = mirror_at(dir.path(), C3, true).await;
        let r = "20240101014500000";
        let mut clustering: serde_json::Value =
            serde_json::from_str(&commit(r, &[("x", "null")], true)).unwrap();
        clustering["partitionToReplaceFileIds"] = serde_json::json!({"p=1": ["a"]});
        std::fs::write(
            timeline.join(format!("{r}.replacecommit")),
            clustering.to_string(),
        )
        .unwrap();
        completed(&timeline, C4, None, &commit(C4, &[("x", r)], true));
        let whole = open(dir.path()).await;
        let want = unmirrored(whole.change_sets(&state).await.unwrap().changes, &state);
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let source = HudiSource::open_after(store, Default::default(), &state)
            .await
            .unwrap()
            .unwrap();
        assert!(source.reads_saved_by_live_files(&state).await > 0);
        TableSource::listing(&source, &state).unwrap();
        let got = unmirrored(source.change_sets(&state).await.unwrap().changes, &state);
        let ids: Vec<&str> = got.iter().map(|c| c.commit.id.as_str()).collect();
        assert_eq!(ids, [r, C4]);
        assert_eq!(got, want);
    }

    /// Hostile review 6: the same on table version 9 (completion-time order): the instant
    /// dated ahead completes (by its clock) after c2, which is listed before it in the
    /// whole timeline and mirrored by the replay from the first instant.
    #[tokio::test]
    #[ignore = "open (docs/known-gaps.md): writers whose instant times disagree by more than the margin; check reports what is missed"]
    async fn an_instant_dated_ahead_does_not_hide_the_instants_completed_after_it_v9() {
        let (dir, timeline) = table(9);
        completed(
            &timeline,
            C1,
            Some("20240101000001000"),
            &commit(C1, &[("a", "null")], true),
        );
        let ahead = "20240101100000000";
        let done = Some("20240101100001000");
        completed(
            &timeline,
            ahead,
            done,
            &commit(ahead, &[("f", "null")], true),
        );
        let (state, _) = mirror_at(dir.path(), ahead, true).await;
        let c2_done = Some("20240101010001000");
        completed(&timeline, C2, c2_done, &commit(C2, &[("b", "null")], true));
        let whole = open(dir.path()).await.change_sets(&state).await.unwrap();
        let want: Vec<String> = unmirrored(whole.changes, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(want, [C2], "the whole timeline's replay");
        let (_, got) = after(dir.path(), &state).await;
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(ids, want);
    }

    /// Hostile review hr8, open: table version 6, c2 pending when the mirror stood at c5,
    /// the mirror then expired down to c4 and c5 (`xlake expire --keep-snapshots 2`), c2
    /// then completes. The part takes c2 as completed late and lists the timeline whole;
    /// the whole timeline (and the engine's `Pending`) take every unmirrored instant
    /// before the oldest mirrored one, in requested-time order, as expired: c2 is never
    /// mirrored, with exit 0 (`check` on it not tried). An older
    /// build (no saved state) does the same. `xlake expire` no longer leaves this state: it
    /// keeps the snapshot of c1, the newest before the oldest pending instant
    /// ([`TableSource::oldest_pending`]; tests/it/expire.rs). An expiry by an older build,
    /// or one whose source did not open, still may: ignored until the listing can name
    /// such a late completion to the engine.
    #[tokio::test]
    #[ignore = "hr8: a v6 late completion before the oldest retained snapshot is lost (expire no longer leaves this state)"]
    async fn an_expired_mirror_loses_a_late_completion_before_its_oldest_v6() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("a", "null")], true));
        pending(&timeline, C2);
        completed(&timeline, C3, None, &commit(C3, &[("b", "null")], true));
        completed(&timeline, C4, None, &commit(C4, &[("b", C3)], true));
        completed(&timeline, C5, None, &commit(C5, &[("c", "null")], true));
        let (mut state, _) = mirror_at(dir.path(), C5, true).await;
        state.commits = [C4, C5].map(String::from).into();
        completed(&timeline, C2, None, &commit(C2, &[("e", "null")], true));
        let (source, got) = after(dir.path(), &state).await;
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        // Whole timeline, no saved state: what an older build gives.
        let mut old = state.clone();
        old.source_state = None;
        let (_, got_old) = after(dir.path(), &old).await;
        let ids_old: Vec<String> = unmirrored(got_old, &old)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(ids_old, ids);
        assert_eq!(source.listed_from(), None);
        assert_eq!(ids, [C2]);
    }

    /// What an expiry keeps back for: on table version 6 the oldest pending instant that
    /// completes with a snapshot (not a clean); on version 9 none (completion order).
    #[tokio::test]
    async fn the_oldest_pending_instant_is_named_on_v6_only() {
        for version in [6, 9] {
            let (dir, timeline) = table(version);
            let done = |t: &str| (version == 9).then(|| t.to_string());
            completed(
                &timeline,
                C1,
                done(C1).as_deref(),
                &commit(C1, &[("a", "null")], true),
            );
            std::fs::write(timeline.join(format!("{C2}.clean.requested")), "").unwrap();
            pending(&timeline, C3);
            pending(&timeline, C4);
            completed(
                &timeline,
                C5,
                done(C5).as_deref(),
                &commit(C5, &[("c", "null")], true),
            );
            let want = (version == 6).then(|| C3.to_string());
            assert_eq!(open(dir.path()).await.oldest_pending(), want, "v{version}");
        }
    }

    /// Table version 9, the case above: c2 completes after the mirrored instants (the
    /// timeline orders by completion time) and the part mirrors it.
    #[tokio::test]
    async fn an_expired_mirror_mirrors_a_late_completion_v9() {
        let (dir, timeline) = table(9);
        let d = |t: &str| Some(t.to_string());
        completed(
            &timeline,
            C1,
            d(C1).as_deref(),
            &commit(C1, &[("a", "null")], true),
        );
        pending(&timeline, C2);
        completed(
            &timeline,
            C3,
            d(C3).as_deref(),
            &commit(C3, &[("b", "null")], true),
        );
        completed(
            &timeline,
            C4,
            d(C4).as_deref(),
            &commit(C4, &[("b", C3)], true),
        );
        completed(
            &timeline,
            C5,
            d(C5).as_deref(),
            &commit(C5, &[("c", "null")], true),
        );
        let (mut state, _) = mirror_at(dir.path(), C5, true).await;
        state.commits = [C4, C5].map(String::from).into();
        completed(
            &timeline,
            C2,
            Some("20240101030000000"),
            &commit(C2, &[("e", "null")], true),
        );
        let (source, got) = after(dir.path(), &state).await;
        let ids: Vec<String> = unmirrored(got, &state)
            .into_iter()
            .map(|c| c.commit.id)
            .collect();
        assert_eq!(source.listed_from(), Some("20240101015600"));
        assert_eq!(ids, [C2]);
    }

    /// The no-op pass opened at a tip gives the tip the whole timeline gives, with a
    /// pending instant before the floor (milliseconds) and one after it; when either
    /// completes, the tip changes.
    #[tokio::test]
    async fn a_tip_opened_at_is_the_whole_timelines_until_a_pending_one_completes() {
        let (dir, timeline) = table(6);
        five_commits(&timeline);
        let early = "20240101003000123";
        pending(&timeline, early);
        let late = "20240101020550000";
        pending(&timeline, late);
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let whole = TableSource::tip(&open(dir.path()).await).unwrap();
        let at = HudiSource::open_at_tip(store.clone(), Default::default(), &whole)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(TableSource::tip(&at).unwrap(), whole);
        for p in [early, late] {
            completed(&timeline, p, None, &commit(p, &[("z", "null")], true));
            let at = HudiSource::open_at_tip(store.clone(), Default::default(), &whole)
                .await
                .unwrap()
                .unwrap();
            let now = TableSource::tip(&at).unwrap();
            assert_ne!(now, whole);
            std::fs::remove_file(timeline.join(format!("{p}.commit"))).unwrap();
        }
    }

    /// An instant the saved state names pending that the part does not hold (looked up
    /// alone, before the part): rolled back, an older instant still on the timeline, it is
    /// not gone unmirrored, which only the whole timeline tells; archived with the older
    /// instant, it is (`crate::gone`).
    #[tokio::test]
    async fn a_named_pending_instant_off_the_part_lists_the_timeline_whole() {
        let (dir, timeline) = table(6);
        completed(&timeline, C1, None, &commit(C1, &[("f1", "null")], true));
        pending(&timeline, C2);
        completed(&timeline, C3, None, &commit(C3, &[("f3", "null")], true));
        let (state, _) = mirror_at(dir.path(), C3, true).await;
        for name in [format!("{C2}.commit.requested"), format!("{C2}.inflight")] {
            std::fs::remove_file(timeline.join(name)).unwrap();
        }
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let reopen = || HudiSource::open_after(store.clone(), Default::default(), &state);
        let source = reopen().await.unwrap().unwrap();
        assert_eq!(source.listed_from(), None);
        let listing = TableSource::listing(&source, &state).unwrap();
        assert!(listing.gone_unmirrored.is_empty(), "{listing:?}");
        let c1 = format!("{C1}.commit");
        std::fs::rename(timeline.join(&c1), timeline.join("archived").join(&c1)).unwrap();
        let source = reopen().await.unwrap().unwrap();
        let listing = TableSource::listing(&source, &state).unwrap();
        let gone: Vec<&String> = listing.gone_unmirrored.keys().collect();
        assert_eq!(gone, [C2]);
    }
}
