"""Generate a Delta table at scale, deterministically: C commits of F files each, with
per-file stats, a checkpoint every 100 versions (written by delta-rs), partitioned by a
`day` string over 100 values.

Translation reads metadata only, so the data files are hard links to a few real Parquet
files of the same size (ext4 allows 65,000 links per inode; one inode per 10,000 links).

    python benches/gen_delta.py <dir> --commits C --files F [--rewrite-every K]
        [--log-only] [--checkpoint-every N]

`--rewrite-every K`: every K-th commit also removes F files added earlier (an upsert's
rewrite), so the log has removes and the live file count stays below C*F.

`--log-only`: write the log alone, no data files (for tables too large to link: 10M
files). The adds carry numRecords and stats, so `xlake sync --skip-file-check` reads no
data file. `--checkpoint-every N`: a delta-rs checkpoint every N versions (100 by
default; 0 for none: delta-rs rewrites the whole state in each, which at 10M files takes
longer than the benchmark).
"""
import argparse
import json
import os
import pathlib
import random

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

LINKS_PER_FILE = 10_000
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}
ROWS = 100
T0 = 1_700_000_000_000


def real_file(root, n):
    """The n-th real Parquet file (id, value; `day` lives in the path)."""
    path = root / "_bench_src" / f"src-{n}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = list(range(ROWS))
        pq.write_table(pa.table({"id": ids, "value": [i * 0.5 for i in ids]}), path)
    return path


_SIZES = {}


def size_of(src):
    if src not in _SIZES:
        _SIZES[src] = src.stat().st_size
    return _SIZES[src]


def add_action(rel, day, size, ts, lo):
    """One add action as the JSON line json.dumps writes for it (formatted by hand: a
    10M-file log is written in minutes, not an hour)."""
    stats = (f'{{\\"numRecords\\": {ROWS}, \\"minValues\\": {{\\"id\\": {lo}, '
             f'\\"value\\": {lo * 0.5!r}}}, \\"maxValues\\": {{\\"id\\": {lo + ROWS}, '
             f'\\"value\\": {(lo + ROWS) * 0.5!r}}}, \\"nullCount\\": {{\\"id\\": 0, '
             f'\\"value\\": 0}}}}')
    return (f'{{"add": {{"path": "{rel}", "partitionValues": {{"day": "{day}"}}, '
            f'"size": {size}, "modificationTime": {ts}, "dataChange": true, '
            f'"stats": "{stats}"}}}}')


def generate(root, commits, files, rewrite_every=0, seed=7, log_only=False,
             checkpoint_every=100):
    rng = random.Random(seed)
    root = pathlib.Path(root)
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    live = []
    made = 0
    for version in range(commits):
        actions = []
        ts = T0 + version * 60_000
        if version == 0:
            actions.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            actions.append({"metaData": {
                "id": "bench-0000-0000", "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA), "partitionColumns": ["day"],
                "configuration": {}, "createdTime": T0}})
        removes = []
        if rewrite_every and version and version % rewrite_every == 0 and len(live) >= files:
            for _ in range(files):
                removes.append(live.pop(rng.randrange(len(live))))
        for path, _ in removes:
            actions.append({"remove": {"path": path, "deletionTimestamp": ts, "dataChange": True}})
        for _ in range(files):
            day = f"2024-01-{rng.randrange(1, 101):03d}"
            rel = f"day={day}/part-{made:08d}.parquet"
            src = real_file(root, made // LINKS_PER_FILE if not log_only else 0)
            if not log_only:
                dest = root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.link(src, dest)
            made += 1
            lo = rng.randrange(1_000_000)
            actions.append(add_action(rel, day, size_of(src), ts, lo))
            live.append((rel, day))
        op = "MERGE" if removes else "WRITE"
        actions.append({"commitInfo": {"timestamp": ts, "operation": op}})
        with open(log / f"{version:020d}.json", "w") as f:
            f.write("\n".join(a if isinstance(a, str) else json.dumps(a) for a in actions)
                    + "\n")
        if checkpoint_every and version % checkpoint_every == checkpoint_every - 1:
            DeltaTable(str(root)).create_checkpoint()
    return len(live)


def append_commit(root, files, seed):
    """One more commit of `files` new files on an existing generated table; its version."""
    root = pathlib.Path(root)
    versions = sorted(int(p.stem) for p in (root / "_delta_log").glob("*.json"))
    version = versions[-1] + 1
    rng = random.Random(seed)
    actions = []
    ts = T0 + version * 60_000
    for i in range(files):
        day = f"2024-01-{rng.randrange(1, 101):03d}"
        rel = f"day={day}/part-inc-{version:08d}-{i}.parquet"
        src = real_file(root, 0)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(src, root / rel)
        stats = {"numRecords": ROWS, "minValues": {"id": 0}, "maxValues": {"id": ROWS},
                 "nullCount": {"id": 0}}
        actions.append({"add": {"path": rel, "partitionValues": {"day": day},
                                "size": src.stat().st_size, "modificationTime": ts,
                                "dataChange": True, "stats": json.dumps(stats)}})
    actions.append({"commitInfo": {"timestamp": ts, "operation": "WRITE"}})
    with open(root / "_delta_log" / f"{version:020d}.json", "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    return version


def rewrite_commit(root, seed):
    """One more commit on an existing generated table that rewrites the files the commit
    before it added (removes them, adds as many new ones, as an update does); its
    version."""
    root = pathlib.Path(root)
    log = root / "_delta_log"
    before = max(int(p.stem) for p in log.glob("*.json"))
    with open(log / f"{before:020d}.json") as f:
        adds = [a["add"] for a in map(json.loads, f) if "add" in a]
    version = append_commit(root, len(adds) or 10, seed)
    ts = T0 + version * 60_000
    removes = [json.dumps({"remove": {"path": a["path"], "partitionValues": a["partitionValues"],
                                      "deletionTimestamp": ts, "dataChange": True}})
               for a in adds]
    path = log / f"{version:020d}.json"
    path.write_text("\n".join(removes + path.read_text().splitlines()) + "\n")
    return version


def live_files(root):
    """The table's live data paths, from its JSON log (a checkpoint only repeats it), kept
    in `_bench_live.json` beside the log so that later calls read only that."""
    root = pathlib.Path(root)
    cache = root / "_bench_live.json"
    if cache.exists():
        return json.loads(cache.read_text())
    live = {}
    for path in sorted((root / "_delta_log").glob("*.json")):
        with open(path) as f:
            for line in f:
                action = json.loads(line)
                if "add" in action:
                    live[action["add"]["path"]] = True
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
    paths = list(live)
    _replace(cache, json.dumps(paths))
    return paths


def _replace(path, text):
    """Write `path` as a new file (a table copied with hard links shares the old one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def merge_commit(root, files, removes, seed):
    """One more commit on an existing generated table in the shape of a MERGE, UPDATE or
    DELETE: `files` new files, and `removes` live files chosen at random across the whole
    table removed (with their partition values, as Delta writes a remove); its version."""
    root = pathlib.Path(root)
    live = live_files(root)
    rng = random.Random(seed)
    gone = set()
    while len(gone) < min(removes, len(live)):
        gone.add(rng.randrange(len(live)))
    version = append_commit(root, files, seed)
    ts = T0 + version * 60_000
    lines = []
    for i in sorted(gone):
        path = live[i]
        day = path.split("/", 1)[0].removeprefix("day=")
        lines.append(json.dumps({"remove": {"path": path, "partitionValues": {"day": day},
                                            "deletionTimestamp": ts, "dataChange": True}}))
    log = root / "_delta_log" / f"{version:020d}.json"
    added = log.read_text().splitlines()
    log.write_text("\n".join(lines + added) + "\n")
    kept = [p for i, p in enumerate(live) if i not in gone]
    kept += [json.loads(a)["add"]["path"] for a in added if a.startswith('{"add"')]
    _replace(root / "_bench_live.json", json.dumps(kept))
    return version


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--rewrite-every", type=int, default=0)
    p.add_argument("--log-only", action="store_true")
    p.add_argument("--checkpoint-every", type=int, default=100)
    a = p.parse_args()
    print(generate(a.dir, a.commits, a.files, a.rewrite_every, log_only=a.log_only,
                   checkpoint_every=a.checkpoint_every), "live files")
