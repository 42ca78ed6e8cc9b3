"""Generate a copy-on-write Hudi table (table version 6, JSON commit metadata) at scale,
deterministically: C commits of F base files each, partitioned (hive style) by a `day`
string over 100 values. The first commit inserts F file groups; every later one inserts
F/2 new groups and upserts F/2 existing ones (a new base file of the same file group,
which replaces the previous one), so the timeline has the file-group replay of a real
upsert workload. Data files are hard links to a few real Parquet files.

    python benches/gen_hudi.py <dir> --commits C --files F
"""
import argparse
import json
import os
import pathlib
import random

from gen_delta import LINKS_PER_FILE, ROWS, real_file

SCHEMA = {
    "type": "record", "name": "bench_record", "namespace": "hoodie.bench",
    "fields": [
        {"name": "_hoodie_commit_time", "type": ["null", "string"], "default": None},
        {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
        {"name": "_hoodie_partition_path", "type": ["null", "string"], "default": None},
        {"name": "id", "type": ["long", "null"]},
        {"name": "value", "type": ["double", "null"]},
        {"name": "day", "type": ["string", "null"]},
    ],
}
PROPERTIES = """hoodie.table.name=bench
hoodie.table.type=COPY_ON_WRITE
hoodie.table.version=6
hoodie.timeline.layout.version=1
hoodie.archivelog.folder=archived
hoodie.table.recordkey.fields=id
hoodie.table.partition.fields=day
hoodie.datasource.write.hive_style_partitioning=true
hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator
hoodie.table.metadata.partitions=
"""


# The month the instants are named in (`yyyyMM`): `GEN_HUDI_MONTH`, else January 2024. A
# local-time table's listing lowers its floor by an hour when a clock may have gone back
# between an instant and now (docs/hudi.md): on a table dated years ago it always does, so
# a bench of the listing as a live table gets it names its instants this month.
MONTH = os.environ.get("GEN_HUDI_MONTH", "202401")


def instant(n):
    """The n-th instant time: one second apart from 00:00:00.000 on the 1st of `MONTH`."""
    s = n
    return f"{MONTH}{1 + s // 86400:02d}{s // 3600 % 24:02d}{s // 60 % 60:02d}{s % 60:02d}000"


def generate(root, commits, files, seed=7):
    rng = random.Random(seed)
    root = pathlib.Path(root)
    hoodie = root / ".hoodie"
    hoodie.mkdir(parents=True, exist_ok=True)
    (hoodie / "hoodie.properties").write_text(PROPERTIES)
    groups = []  # (file id, partition)
    made = 0
    for c in range(commits):
        ts = instant(c)
        writes = []
        upserts = [] if c == 0 else rng.sample(groups, min(files // 2, len(groups)))
        inserts = files - len(upserts)
        for _ in range(inserts):
            groups.append((f"{made:08d}-0000-0000-0000-000000000000-0", f"day=2024-01-{rng.randrange(1, 101):03d}"))
            writes.append((groups[-1], None))
            made += 1
        for g in upserts:
            writes.append((g, "prev"))
        stats = {}
        for (file_id, part), prev in writes:
            rel = f"{part}/{file_id}_0-1-1_{ts}.parquet"
            src = real_file(root, made // LINKS_PER_FILE)
            (root / part).mkdir(parents=True, exist_ok=True)
            os.link(src, root / rel)
            made += 1
            stats.setdefault(part, []).append({
                "fileId": file_id, "path": rel, "prevCommit": "null" if prev is None else "x",
                "numWrites": ROWS, "numDeletes": 0, "numUpdateWrites": ROWS if prev else 0,
                "numInserts": 0 if prev else ROWS, "totalWriteBytes": src.stat().st_size,
                "totalWriteErrors": 0, "partitionPath": part,
                "fileSizeInBytes": src.stat().st_size})
        meta = {"partitionToWriteStats": stats, "compacted": False,
                "extraMetadata": {"schema": json.dumps(SCHEMA)},
                "operationType": "UPSERT" if c else "INSERT"}
        (hoodie / f"{ts}.commit.requested").write_text("")
        (hoodie / f"{ts}.inflight").write_text("")
        (hoodie / f"{ts}.commit").write_text(json.dumps(meta))
    return len(groups)


def instant_number(ts):
    """The n of `instant(n)`."""
    day, hh, mm, ss = int(ts[6:8]), int(ts[8:10]), int(ts[10:12]), int(ts[12:14])
    return (day - 1) * 86400 + hh * 3600 + mm * 60 + ss


def archive(root, keep):
    """Archive the table's timeline as Hudi does by default (`hoodie.keep.max.commits`
    30): every completed instant but the newest `keep` leaves `.hoodie/` for
    `.hoodie/archived/`. Hudi writes them into archive log files, which xlake does not
    read (it takes what archived instants left live from the file listing): one
    placeholder stands for them. Returns how many were archived."""
    hoodie = pathlib.Path(root) / ".hoodie"
    done = sorted(p.name.split(".")[0] for p in hoodie.glob("*.commit"))
    old = done[:-keep] if keep else done
    for ts in old:
        for name in (f"{ts}.commit", f"{ts}.commit.requested", f"{ts}.inflight"):
            (hoodie / name).unlink()
    if old:
        (hoodie / "archived").mkdir(exist_ok=True)
        (hoodie / "archived" / ".commits_.archive.1_1-0-1").write_text(f"{len(old)} instants\n")
    return len(old)


def append_commit(root, files, seed, upserts=0):
    """One more commit of `files` base files on a generated table; its instant. All start
    new file groups (prevCommit "null"), except `upserts` of them, which write new base
    files of groups the newest commit wrote (prevCommit its instant)."""
    root = pathlib.Path(root)
    hoodie = root / ".hoodie"
    done = sorted(p.name.split(".")[0] for p in hoodie.glob("*.commit"))
    n = instant_number(done[-1]) + 1 if done else 0  # archived instants keep their numbers
    ts = instant(n)
    rng = random.Random(seed)
    previous = []
    if upserts and done:
        last = json.loads((hoodie / f"{done[-1]}.commit").read_text())
        previous = [(s["fileId"], s["partitionPath"]) for ss in
                    last["partitionToWriteStats"].values() for s in ss][:upserts]
    stats = {}
    for i in range(files):
        if i < len(previous):
            (file_id, part), prev = previous[i], done[-1]
        else:
            part = f"day=2024-01-{rng.randrange(1, 101):03d}"
            file_id = f"inc{n:05d}{i:03d}-0000-0000-0000-000000000000-0"
            prev = "null"
        rel = f"{part}/{file_id}_0-1-1_{ts}.parquet"
        src = real_file(root, 0)
        (root / part).mkdir(parents=True, exist_ok=True)
        os.link(src, root / rel)
        stats.setdefault(part, []).append({
            "fileId": file_id, "path": rel, "prevCommit": prev, "numWrites": ROWS,
            "numDeletes": 0, "numUpdateWrites": 0 if prev == "null" else ROWS,
            "numInserts": ROWS if prev == "null" else 0,
            "totalWriteBytes": src.stat().st_size, "totalWriteErrors": 0,
            "partitionPath": part, "fileSizeInBytes": src.stat().st_size})
    meta = {"partitionToWriteStats": stats, "compacted": False,
            "extraMetadata": {"schema": json.dumps(SCHEMA)},
            "operationType": "UPSERT" if previous else "INSERT"}
    (hoodie / f"{ts}.commit.requested").write_text("")
    (hoodie / f"{ts}.inflight").write_text("")
    (hoodie / f"{ts}.commit").write_text(json.dumps(meta))
    return ts


def live_groups(root):
    """The table's file groups as [file id, partition, instant of its base file], from its
    timeline, kept in `_bench_groups.json` so that later calls read only that."""
    root = pathlib.Path(root)
    cache = root / "_bench_groups.json"
    if cache.exists():
        return json.loads(cache.read_text())
    groups = {}
    for path in sorted((root / ".hoodie").glob("*.commit")):
        meta = json.loads(path.read_text())
        for stats in meta["partitionToWriteStats"].values():
            for s in stats:
                groups[s["fileId"]] = [s["fileId"], s["partitionPath"], path.name.split(".")[0]]
    out = list(groups.values())
    _replace(cache, json.dumps(out))
    return out


def _replace(path, text):
    """Write `path` as a new file (a table copied with hard links shares the old one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def random_upsert_commit(root, files, upserts, seed):
    """One more commit of `files` base files: `upserts` of them new base files of file
    groups chosen at random across the whole table (an upsert whose keys live anywhere),
    the others new groups; its instant."""
    root = pathlib.Path(root)
    hoodie = root / ".hoodie"
    groups = live_groups(root)
    n = len(list(hoodie.glob("*.commit")))
    ts = instant(n)
    rng = random.Random(seed)
    chosen = rng.sample(range(len(groups)), min(upserts, len(groups)))
    writes = [(groups[i][0], groups[i][1], groups[i][2]) for i in chosen]
    for i in range(files - len(writes)):
        part = f"day=2024-01-{rng.randrange(1, 101):03d}"
        writes.append((f"rnd{n:05d}{i:03d}-0000-0000-0000-000000000000-0", part, "null"))
    stats = {}
    src = real_file(root, 0)
    for file_id, part, prev in writes:
        rel = f"{part}/{file_id}_0-1-1_{ts}.parquet"
        (root / part).mkdir(parents=True, exist_ok=True)
        os.link(src, root / rel)
        stats.setdefault(part, []).append({
            "fileId": file_id, "path": rel, "prevCommit": prev, "numWrites": ROWS,
            "numDeletes": 0, "numUpdateWrites": 0 if prev == "null" else ROWS,
            "numInserts": ROWS if prev == "null" else 0,
            "totalWriteBytes": src.stat().st_size, "totalWriteErrors": 0,
            "partitionPath": part, "fileSizeInBytes": src.stat().st_size})
    meta = {"partitionToWriteStats": stats, "compacted": False,
            "extraMetadata": {"schema": json.dumps(SCHEMA)}, "operationType": "UPSERT"}
    (hoodie / f"{ts}.commit.requested").write_text("")
    (hoodie / f"{ts}.inflight").write_text("")
    (hoodie / f"{ts}.commit").write_text(json.dumps(meta))
    by_id = {g[0]: i for i, g in enumerate(groups)}
    for file_id, part, _ in writes:
        if file_id in by_id:
            groups[by_id[file_id]][2] = ts
        else:
            groups.append([file_id, part, ts])
    _replace(root / "_bench_groups.json", json.dumps(groups))
    return ts


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--files", type=int, required=True)
    a = p.parse_args()
    print(generate(a.dir, a.commits, a.files), "file groups")
