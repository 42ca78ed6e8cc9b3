"""Hudi: is one incremental commit flat in the length of the active timeline? (issue 16)

    python benches/hudi_incremental.py [--workdir DIR] [--runs N] [--quick]

Generates copy-on-write Hudi timelines (gen_hudi.py, table version 6, half upserts) of 30
and of 1,000 commits x 10 files, mirrors each, then times `xlake commit --instant` for new
10-file commits on both (median of N, whole process) and prints the ratio. Uses XLAKE_BIN,
or builds the release binary as run.py does. --quick: 30 and 100 commits.
"""
import argparse
import pathlib
import shutil
import statistics

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


def one_commit(table, runs, seed):
    walls = []
    for i in range(runs):
        instant = gen_hudi.append_commit(table, 10, seed + i)
        walls.append(run.measure("commit", table, "--instant", instant)[0])
    return statistics.median(walls)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="/tmp/xlake-bench")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    workdir = pathlib.Path(a.workdir) / "hudi-incremental"
    workdir.mkdir(parents=True, exist_ok=True)
    run.BIN = run.binary()
    long = 100 if a.quick else 1000
    small, big = mirrored_table(workdir, 30), mirrored_table(workdir, long)
    # Alternate the two tables so that a noisy moment hits both alike.
    walls = {30: [], long: []}
    for i in range(a.runs):
        walls[30].append(one_commit(small, 1, 500 + i))
        walls[long].append(one_commit(big, 1, 500 + i))
    m30, mlong = statistics.median(walls[30]), statistics.median(walls[long])
    print("| figure | value |\n|---|---|")
    print(f"| one commit of 10 files after 30 commits | {m30 * 1000:.0f} ms |")
    print(f"| one commit of 10 files after {long} commits | {mlong * 1000:.0f} ms |")
    print(f"| ratio | {mlong / m30:.2f}x (target at most 1.3x) |")


if __name__ == "__main__":
    main()
