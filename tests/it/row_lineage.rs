//! Iceberg v3 row lineage (docs/iceberg-v3.md): a data file keeps its row ids when a
//! commit carries it into a new manifest (a merge of small manifests, a manifest rewritten
//! because another of its files was removed), a file added again unchanged (Delta's new
//! deletion vector) keeps its entry as it is (row ids and sequence number), and
//! `next-row-id` grows by the rows added only; a v2 mirror's files
//! get ids once, from the first snapshot after the upgrade. The row ids are worked out
//! here from the raw metadata by the spec's rule, not by xlake. (Spark's `_row_id` of the
//! same: tests/interop/test_iceberg_v3.py.)
use std::collections::BTreeMap;
use std::path::Path;

use iceberg::spec::{FormatVersion, Manifest, ManifestContentType, ManifestList, ManifestStatus};
use xlake_iceberg::merge::MIN_COUNT_TO_MERGE;
use xlake_iceberg::IcebergTable;
use xlake_model::{ChangeSet, DataFile};
use xlake_storage::TableStore;

fn change(n: usize, added: &[usize], removed: &[usize]) -> ChangeSet {
    use xlake_model::{Field, PartitionSpec, PrimitiveType, Schema, SourceCommit, SourceFormat};
    let commit = SourceCommit {
        format: SourceFormat::new("DELTA"),
        id: n.to_string(),
        action: "WRITE".into(),
        requested_ms: None,
        commit_time_ms: 1_700_000_000_000 + n as i64,
    };
    let schema = Schema::new(vec![Field::required("id", PrimitiveType::Long)]);
    let mut change = ChangeSet::new(commit, schema, PartitionSpec::unpartitioned());
    change.added = added
        .iter()
        .map(|&i| {
            let mut f = DataFile::parquet(file(i), 100, Some(rows(i)));
            f.column_stats = vec![("id".into(), Default::default())];
            f
        })
        .collect();
    change.removed = removed.iter().map(|&i| file(i)).collect();
    change
}

fn file(i: usize) -> String {
    format!("f{i}.parquet")
}

/// Files of different sizes, so an id computed from the wrong neighbour shows.
fn rows(i: usize) -> u64 {
    (i % 7 + 1) as u64
}

/// A snapshot of the current `vN.metadata.json`, read as JSON.
struct Snap {
    sequence: i64,
    list: String,
    first_row_id: Option<u64>,
    added_rows: Option<u64>,
}

fn metadata(root: &Path) -> serde_json::Value {
    let hint = std::fs::read_to_string(root.join("metadata/version-hint.text")).unwrap();
    let json = std::fs::read(root.join(format!("metadata/v{hint}.metadata.json"))).unwrap();
    serde_json::from_slice(&json).unwrap()
}

fn snapshots(m: &serde_json::Value) -> Vec<Snap> {
    let mut out: Vec<Snap> = m["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Snap {
            sequence: s["sequence-number"].as_i64().unwrap(),
            list: s["manifest-list"].as_str().unwrap().to_string(),
            first_row_id: s["first-row-id"].as_u64(),
            added_rows: s["added-rows"].as_u64(),
        })
        .collect();
    out.sort_by_key(|s| s.sequence);
    out
}

/// A live data file: its first row id, rows and file sequence number (what its rows'
/// `_row_id` and `_last_updated_sequence_number` come from, as Iceberg Java reads them),
/// and whether this snapshot added it.
#[derive(Debug, Clone, Copy)]
struct Live {
    id: Option<i64>,
    rows: u64,
    sequence: i64,
    added_here: bool,
}

/// Per live data file of the snapshot whose manifest list is `list`: the id is the file's
/// own `first_row_id`, else inherited as the spec's "First Row ID Inheritance" says: the
/// manifest's `first_row_id` plus the record counts of the live files before it in that
/// manifest that have none; the file sequence number the entry's, else the manifest's.
/// Also how many manifests carry existing entries (rewritten or merged ones).
fn live_row_ids(s: &Snap, v3: bool) -> (BTreeMap<String, Live>, usize) {
    let version = if v3 {
        FormatVersion::V3
    } else {
        FormatVersion::V2
    };
    let list = ManifestList::parse_with_version(&std::fs::read(&s.list).unwrap(), version).unwrap();
    let (mut out, mut carrying) = (BTreeMap::new(), 0);
    for mf in list.entries() {
        if mf.content != ManifestContentType::Data {
            continue;
        }
        carrying += usize::from(mf.existing_files_count.unwrap_or(0) > 0);
        let manifest = Manifest::parse_avro(&std::fs::read(&mf.manifest_path).unwrap()).unwrap();
        let mut next = mf.first_row_id.map(|f| f as i64);
        for e in manifest.entries() {
            if e.status() == ManifestStatus::Deleted {
                continue;
            }
            let f = e.data_file();
            let id = match f.first_row_id() {
                Some(own) => Some(own),
                None => {
                    let inherited = next;
                    next = next.map(|n| n + f.record_count() as i64);
                    inherited
                }
            };
            let sequence = e.file_sequence_number.unwrap_or(mf.sequence_number);
            let live = Live {
                id,
                rows: f.record_count(),
                sequence,
                added_here: e.status() == ManifestStatus::Added && sequence == s.sequence,
            };
            let name = f.file_path().rsplit('/').next().unwrap().to_string();
            assert!(out.insert(name, live).is_none(), "a file live twice");
        }
    }
    (out, carrying)
}

/// Every row's id is unique and below `next_row_id`: the files' ranges do not overlap.
fn assert_unique(live: &BTreeMap<String, Live>, next_row_id: u64, snapshot: i64) {
    let mut ranges: Vec<(i64, u64)> = live.values().map(|l| (l.id.unwrap(), l.rows)).collect();
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(
            w[0].0 + w[0].1 as i64 <= w[1].0,
            "snapshot {snapshot}: {w:?}"
        );
    }
    assert!(ranges
        .last()
        .is_none_or(|(id, n)| id + *n as i64 <= next_row_id as i64));
}

/// What [`check_snapshots`] saw.
#[derive(Default)]
struct Seen {
    next_row_id: u64,
    merged: bool,
    rewritten: bool,
}

/// Check v3 `snaps` in order, from the live files `before` them and the table's
/// `next_row_id` then: each snapshot starts at `next-row-id` and adds the rows of the
/// files it adds or changes (a file whose row count changed is new content); every other
/// file keeps its row id and its file sequence number (a file added again unchanged
/// too); ids are unique.
fn check_snapshots(snaps: &[Snap], mut before: BTreeMap<String, Live>, next_row_id: u64) -> Seen {
    let mut seen = Seen {
        next_row_id,
        ..Default::default()
    };
    for s in snaps {
        let next_row_id = seen.next_row_id;
        let (live, carrying) = live_row_ids(s, true);
        let new = |f: &String, l: &Live| before.get(f).is_none_or(|b| b.rows != l.rows);
        let added: u64 = live
            .iter()
            .filter(|(f, l)| new(f, l))
            .map(|(_, l)| l.rows)
            .sum();
        let at = s.sequence;
        assert_eq!(s.first_row_id, Some(next_row_id), "snapshot {at}");
        assert_eq!(s.added_rows, Some(added), "snapshot {at}: added-rows");
        for (f, l) in &live {
            assert!(l.id.is_some(), "snapshot {at}: {f} has no row id");
            match before.get(f) {
                Some(b) if !new(f, l) => assert_eq!(
                    (l.id, l.rows, l.sequence, l.added_here),
                    (b.id, b.rows, b.sequence, false),
                    "snapshot {at}: {f}'s lineage changed"
                ),
                _ => assert!(
                    l.id >= Some(next_row_id as i64),
                    "snapshot {at}: {f}: {l:?}"
                ),
            }
        }
        seen.next_row_id += added;
        assert_unique(&live, seen.next_row_id, at);
        seen.merged |= live.len() > 50 && carrying > 0 && carrying < 5;
        seen.rewritten |= before.keys().any(|f| !live.contains_key(f)) && carrying > 0;
        before = live;
    }
    seen
}

async fn run(version: FormatVersion) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    let table = IcebergTable::new(store)
        .verify_files(false)
        .format_version(version);
    // One batch of one file a commit, until the older small manifests get merged.
    let last = MIN_COUNT_TO_MERGE + 1;
    let batch: Vec<ChangeSet> = (1..=last).map(|i| change(i, &[i], &[])).collect();
    table.commit_all(&batch).await.unwrap();
    // Removals: from the merged manifest (rewritten, the others carried as existing), then
    // the file of a manifest of its own, each commit loading the table afresh.
    let n = last + 1;
    table.commit(&change(n, &[n], &[3, 50])).await.unwrap();
    table.commit(&change(n + 1, &[], &[last])).await.unwrap();
    // A batch again: a removal from a rewritten manifest, then one from the same.
    let batch = [
        change(n + 2, &[n + 2, n + 3], &[7]),
        change(n + 4, &[n + 4], &[n, 8]),
    ];
    table.commit_all(&batch).await.unwrap();
    // A file removed and added again unchanged (Delta's new deletion vector), with a new
    // file; then one added again with other contents (a new row count).
    table
        .commit(&change(n + 5, &[5, n + 5], &[5]))
        .await
        .unwrap();
    let mut changed = change(n + 6, &[6], &[6]);
    changed.added[0].record_count = Some(rows(6) + 10);
    table.commit(&changed).await.unwrap();
    dir
}

#[tokio::test]
async fn carried_files_keep_their_row_ids_and_next_row_id_counts_added_rows_only() {
    let dir = run(FormatVersion::V3).await;
    let m = metadata(dir.path());
    let seen = check_snapshots(&snapshots(&m), BTreeMap::new(), 0);
    assert!(
        seen.merged && seen.rewritten,
        "no merge or no removal rewrite"
    );
    assert_eq!(m["next-row-id"].as_u64(), Some(seen.next_row_id));
    // f5 removed and added again unchanged: the entry it had (checked above for every
    // snapshot); f6 added again with a new row count: a new entry of the last snapshot.
    let snaps = snapshots(&m);
    let [.., before, re_added, changed] = snaps.as_slice() else {
        panic!("too few snapshots")
    };
    let (was, _) = live_row_ids(before, true);
    let (kept, _) = live_row_ids(re_added, true);
    let f5 = kept["f5.parquet"];
    assert!(f5.sequence < re_added.sequence && !f5.added_here, "{f5:?}");
    assert_eq!(
        (f5.id, f5.sequence),
        (was["f5.parquet"].id, was["f5.parquet"].sequence)
    );
    let (last, _) = live_row_ids(changed, true);
    assert!(last["f6.parquet"].added_here, "{:?}", last["f6.parquet"]);
}

/// The same commits on a v2 table: no row id anywhere, as before.
#[tokio::test]
async fn a_v2_table_gets_no_row_ids() {
    let dir = run(FormatVersion::V2).await;
    let m = metadata(dir.path());
    assert!(
        m.get("next-row-id").is_none_or(|n| n.is_null()),
        "{}",
        m["next-row-id"]
    );
    for s in snapshots(&m) {
        assert_eq!((s.first_row_id, s.added_rows), (None, None));
        let (live, _) = live_row_ids(&s, false);
        assert!(live.values().all(|l| l.id.is_none()), "{live:?}");
    }
}

/// A v2 mirror upgraded in place: its files have no ids until the first v3 snapshot gives
/// every manifest a range (the spec's "Row Lineage for Upgraded Tables"), a manifest it
/// rewrites included; from then on they keep them.
#[tokio::test]
async fn files_older_than_the_upgrade_get_ids_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
    let v2 = IcebergTable::new(store.clone()).verify_files(false);
    for i in 1..=4 {
        v2.commit(&change(i, &[2 * i - 1, 2 * i], &[]))
            .await
            .unwrap();
    }
    let v3 = IcebergTable::new(store)
        .verify_files(false)
        .format_version(FormatVersion::V3);
    let loaded = v3.load().await.unwrap().unwrap();
    v3.upgrade(&loaded).await.unwrap().unwrap();
    // f1's manifest rewritten by the first v3 snapshot (f2 had no id to carry), then f3's,
    // then the one that carried f2.
    v3.commit(&change(5, &[9], &[1])).await.unwrap();
    v3.commit(&change(6, &[10], &[3])).await.unwrap();
    v3.commit(&change(7, &[], &[2])).await.unwrap();
    let m = metadata(dir.path());
    let snaps = snapshots(&m);
    assert!(snaps[..4].iter().all(|s| s.first_row_id.is_none()));
    let (first, _) = live_row_ids(&snaps[4], true);
    let all_rows: u64 = first.values().map(|l| l.rows).sum();
    assert_eq!(
        (snaps[4].first_row_id, snaps[4].added_rows),
        (Some(0), Some(all_rows))
    );
    assert!(first.values().all(|l| l.id.is_some()), "{first:?}");
    assert_unique(&first, all_rows, snaps[4].sequence);
    let seen = check_snapshots(&snaps[5..], first, all_rows);
    assert_eq!(m["next-row-id"].as_u64(), Some(seen.next_row_id));
}
