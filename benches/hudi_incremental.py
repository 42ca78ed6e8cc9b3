"""Hudi: is one incremental commit flat in the length of the active timeline? (issue 16)

    python benches/hudi_incremental.py [--workdir DIR] [--runs N] [--quick]

Generates copy-on-write Hudi timelines (gen_hudi.py, table version 6, half upserts) of 30
and of 1,000 commits x 10 files, mirrors each, then times `xlake commit --instant` for new
10-file commits on both (median of N, whole process) and prints the ratios, for commits
that only start new file groups and for upserts (half of their files rewrite groups the
previous commit wrote). Also the floor of a commit on each table, measured in the same
run: start the process, list `.hoodie/` (which grows with the timeline), copy the current
`vN.metadata.json`; and the ratio of what xlake adds above it. Uses XLAKE_BIN, or builds
the release binary as run.py does.
--runs: rounds (default 45: on the 2-core development machine a ratio of medians of 15
rounds moved by +-0.06x from run to run, of 45 by +-0.02x; a round is five processes).
--quick: 30 and 100 commits.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import time

import gen_hudi
import run


def mirrored_table(workdir, commits, per=10):
    """A generated Hudi table (cached) and a mirrored copy of it."""
    path = workdir / f"hudi_{commits}x{per}"
    if not (path / "_generated").exists():
        shutil.rmtree(path, ignore_errors=True)
        groups = gen_hudi.generate(path, commits, per)
        (path / "_generated").write_text(str(groups))
    copy = run.fresh_copy(path, "incr")
    run.measure("sync", copy)
    return copy


def one_commit(table, runs, seed, upserts=0):
    walls = []
    for i in range(runs):
        instant = gen_hudi.append_commit(table, 10, seed + i, upserts)
        walls.append(run.measure("commit", table, "--instant", instant)[0])
    return statistics.median(walls)


def floor(table):
    """The floor of one commit on a Hudi table: start the xlake process (`xlake --version`)
    plus one listing of the timeline's folder (`.hoodie/`, as a sync must at least list it
    to know what completed) plus one copy of the current `vN.metadata.json` (read whole,
    written whole under another name)."""
    start = run.measure("--version")[0]
    meta = table / "metadata"
    current = meta / f"v{int((meta / 'version-hint.text').read_text())}.metadata.json"
    dest = table.parent / f"{table.name}.floor-copy.json"
    t0 = time.perf_counter()
    os.listdir(table / ".hoodie")
    dest.write_bytes(current.read_bytes())
    work = time.perf_counter() - t0
    dest.unlink()
    return start + work


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="/tmp/xlake-bench")
    p.add_argument("--runs", type=int, default=45)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    workdir = pathlib.Path(a.workdir) / "hudi-incremental"
    workdir.mkdir(parents=True, exist_ok=True)
    run.BIN = run.binary()
    long = 100 if a.quick else 1000
    small, big = mirrored_table(workdir, 30), mirrored_table(workdir, long)
    # Alternate the tables and kinds so that a noisy moment hits all alike. Inserts start
    # 10 new file groups; upserts write 5 new base files of groups the previous commit
    # wrote and start 5 groups (the mirror's live files are then needed).
    kinds = {"insert": 0, "upsert": 5}
    walls = {(k, n): [] for k in [*kinds, "floor"] for n in (30, long)}
    for i in range(a.runs):
        for k, upserts in kinds.items():
            walls[(k, 30)].append(one_commit(small, 1, 500 + i, upserts))
            walls[(k, long)].append(one_commit(big, 1, 500 + i, upserts))
        walls[("floor", 30)].append(floor(small))
        walls[("floor", long)].append(floor(big))
    m = {key: statistics.median(w) * 1000 for key, w in walls.items()}
    print(f"| commit of 10 files | after 30 commits | after {long} commits | ratio |")
    print("|---|---|---|---|")
    for k in [*kinds, "floor"]:
        m30, mlong = m[(k, 30)], m[(k, long)]
        print(f"| {k} | {m30:.1f} ms | {mlong:.1f} ms | {mlong / m30:.2f}x |")
    # The floor grows with the timeline too (its listing): what xlake adds above it.
    above = ", ".join(
        f"{k} {(m[(k, long)] - m[('floor', long)]) / (m[(k, 30)] - m[('floor', 30)]):.2f}x"
        for k in kinds)
    print(f"above the floor, after {long} / after 30: {above}")
    print("(issue-16 target: at most 1.3x; floor: start + list .hoodie/ + copy vN.metadata.json)")


if __name__ == "__main__":
    main()
