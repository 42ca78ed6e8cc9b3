"""Whole-process benchmarks of xlake against a pyiceberg baseline, printed as a table.

    python benches/run.py [--quick] [--workdir DIR] [--skip-1m] [--incremental-only | --backfill-only]

Builds `xlake` in release mode (or runs XLAKE_BIN), generates Delta tables with
gen_delta.py (cached in the work dir), and measures, each figure the median of several
runs in this one process so ratios compare like with like:

- full backfill of 1,000 commits x 10 files (every 10th commit rewrites 10 files):
  commits/s, files/s, peak RSS, metadata bytes per commit; the same with pyiceberg;
- one incremental commit of 10 files (`xlake commit --version`) on tables of 1k, 100k and
  1M live files, with 1,000 and then 10 retained snapshots; the same with pyiceberg on
  the 10k-file table;
- the floor of one commit on each of those tables: start the process plus one copy of the
  current `vN.metadata.json` (see `floor`), and the ratios issue 16 asks for;
- `xlake check` and `xlake check --deep` on 10,000 commits.

--quick shrinks every shape by 10 (a smoke run of the script itself).

    python benches/run.py --streamed [--baseline-bin OTHER_XLAKE] [--workdir DIR]

runs only the streamed-replay figures (one run each): the 1M-file backfill (1,000 commits x
1,000 files), also with OTHER_XLAKE (an older build) when given, and the 10M-file backfill
(10,000 commits x 1,000 files) of a log-only table synced with --skip-file-check.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import gen_delta
import gen_hudi
import pyiceberg_baseline

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNS = 5
TIME = os.path.exists("/usr/bin/time")


def binary():
    if os.environ.get("XLAKE_BIN"):
        return os.environ["XLAKE_BIN"]
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "xlake"], cwd=ROOT,
                   check=True)
    return str(ROOT / "target" / "release" / "xlake")


def measure(*args):
    """Run xlake; (wall seconds, peak RSS in MiB). Fails loudly on a non-zero exit.

    The peak comes from GNU time when present: a child forked from this (large) Python
    process inherits its peak in `ru_maxrss`, one forked from `time` does not."""
    with tempfile.NamedTemporaryFile("r") as peak:
        timer = ["/usr/bin/time", "-f", "%M", "-o", peak.name] if TIME else []
        start = time.perf_counter()
        proc = subprocess.run([*timer, BIN, *map(str, args)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"xlake {' '.join(map(str, args))} failed ({proc.returncode}): "
                     f"{proc.stderr.decode()}")
        rss = int(peak.read().strip() or 0) / 1024 if TIME else float("nan")
    return wall, rss


def table(workdir, name, commits, files, rewrite_every=0):
    """A generated Delta table, made once per shape."""
    path = workdir / name
    done = path / "_generated"
    if not done.exists():
        shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        live = gen_delta.generate(path, commits, files, rewrite_every)
        done.write_text(str(live))
        print(f"  generated {name}: {commits} commits, {live} live files "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    return path


def dir_bytes(path):
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def fresh_copy(path, tag):
    """A copy of the Delta table without Iceberg metadata, made of hard links. (Deleting
    `metadata/` and syncing again at once would time ext4 reusing thousands of just-freed
    inodes, which no real backfill meets.)"""
    dest = path.parent / f"{path.name}.{tag}"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(path, dest, copy_function=os.link,
                    ignore=shutil.ignore_patterns("metadata", "_bench_src"))
    return dest


def backfill(path, runs):
    """Median wall time and max RSS of a full `xlake sync` of fresh copies of a table;
    the last copy, synced, is returned for further runs."""
    walls, rss, copies = [], [], []
    for i in range(runs):
        copies.append(fresh_copy(path, f"run{i}"))
    for copy in copies:
        w, r = measure("sync", copy)
        walls.append(w)
        rss.append(r)
    for copy in copies[:-1]:
        shutil.rmtree(copy)
    return statistics.median(walls), max(rss), copies[-1]


def incremental(path, runs, seed):
    """Median wall time and max RSS of `xlake commit --version v` for new 10-file commits."""
    walls, rss = [], []
    for i in range(runs):
        version = gen_delta.append_commit(path, 10, seed + i)
        w, r = measure("commit", path, "--version", version)
        walls.append(w)
        rss.append(r)
    return statistics.median(walls), max(rss)


def floor(path, runs):
    """The floor of one incremental commit on a table: start the xlake process (`xlake
    --version`, timed like every figure here) plus one copy of its current
    `vN.metadata.json` (read whole, written whole under another name, as a commit must
    at least do). Medians of each, summed; (seconds, size of the file in KiB)."""
    meta = path / "metadata"
    current = meta / f"v{int((meta / 'version-hint.text').read_text())}.metadata.json"
    starts = [measure("--version")[0] for _ in range(runs)]
    copies = []
    dest = path.parent / f"{path.name}.floor-copy.json"
    for _ in range(runs):
        start = time.perf_counter()
        dest.write_bytes(current.read_bytes())
        copies.append(time.perf_counter() - start)
        dest.unlink()
    return statistics.median(starts) + statistics.median(copies), current.stat().st_size / 1024

def streamed(workdir, baseline, scale):
    """Peak RSS and wall time of first syncs whose replay is streamed: 1M files, against
    `baseline` (another build) on the same table, and 10M files from a log-only table."""
    global BIN
    commits = 1000 // scale
    t = table(workdir, f"live_{commits}x1000", commits, 1000)
    builds = [("this build", BIN)] + ([("baseline", baseline)] if baseline else [])
    for name, binary in builds:
        BIN, mine = binary, BIN
        wall, rss, copy = backfill(t, 1)
        shutil.rmtree(copy)
        BIN = mine
        print(f"| backfill {commits:,} x 1,000 files ({commits * 1000:,} live), {name} "
              f"| {wall:.1f} s | {rss:.0f} MiB |", flush=True)
    commits = 10_000 // scale
    path = workdir / f"log_{commits}x1000"
    if not (path / "_generated").exists():
        shutil.rmtree(path, ignore_errors=True)
        live = gen_delta.generate(path, commits, 1000, log_only=True, checkpoint_every=0)
        (path / "_generated").write_text(str(live))
    copy = fresh_copy(path, "run")
    wall, rss = measure("sync", copy, "--skip-file-check")
    shutil.rmtree(copy)
    print(f"| backfill {commits:,} x 1,000 files ({commits * 1000:,} live), log only, "
          f"--skip-file-check | {wall:.1f} s | {rss:.0f} MiB |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--skip-1m", action="store_true", help="leave out the 1M-file table")
    p.add_argument("--workdir", default="/tmp/xlake-bench")
    p.add_argument("--no-baseline", action="store_true",
                   help="leave out pyiceberg (its 1,000-commit backfill takes ~11 min)")
    p.add_argument("--incremental-only", action="store_true",
                   help="only the incremental commits, their floors and ratios (section 2)")
    p.add_argument("--backfill-only", action="store_true",
                   help="only the 1,000 x 10 backfill against pyiceberg (section 1)")
    p.add_argument("--streamed", action="store_true",
                   help="only the streamed-replay figures (1M and 10M-file backfills)")
    p.add_argument("--baseline-bin", help="with --streamed: also run this xlake on 1M files")
    a = p.parse_args()
    scale = 10 if a.quick else 1
    workdir = pathlib.Path(a.workdir) / ("quick" if a.quick else "full")
    workdir.mkdir(parents=True, exist_ok=True)
    global BIN
    BIN = binary()
    if a.streamed:
        streamed(workdir, a.baseline_bin, scale)
        return
    rows = []

    def row(what, value, note=""):
        rows.append((what, value, note))
        print(f"  {what}: {value} {note}", flush=True)

    if a.incremental_only:
        incremental_section(a, scale, workdir, row)
    elif a.backfill_only:
        backfill_section(a, scale, workdir, row)
    else:
        all_sections(a, scale, workdir, row)
    print("\n| figure | value | note |\n|---|---|---|")
    for what, value, note in rows:
        print(f"| {what} | {value} | {note} |")


def all_sections(a, scale, workdir, row):
    backfill_section(a, scale, workdir, row)
    incremental_section(a, scale, workdir, row)
    check_and_hudi(scale, workdir, row)


def backfill_section(a, scale, workdir, row):
    # 1. Backfill, xlake and pyiceberg.
    commits = 1000 // scale
    t = table(workdir, f"backfill_{commits}x10", commits, 10, rewrite_every=10)
    wall, rss, t = backfill(t, 3)
    files = commits * 10
    row(f"backfill {commits} commits x 10 files: xlake", f"{wall:.2f} s",
        f"({commits / wall:.0f} commits/s, {files / wall:.0f} files/s, peak {rss:.0f} MiB)")
    row("metadata written per commit", f"{dir_bytes(t / 'metadata') / commits / 1024:.1f} KiB")
    if a.no_baseline:
        measure("sync", t)
        x_inc, _ = incremental(t, RUNS, 200)
        row(f"one commit of 10 files on {files // 1000}k files, {commits} snapshots: xlake",
            f"{x_inc * 1000:.0f} ms", "(whole process)")
    changes = [] if a.no_baseline else pyiceberg_baseline.delta_commits(t)
    shutil.rmtree(workdir / "pyiceberg", ignore_errors=True)
    if not a.no_baseline:
        mirror = pyiceberg_baseline.Mirror(t, workdir / "pyiceberg")
        start = time.perf_counter()
        for c in changes:
            mirror.commit(*c)
        py_wall = time.perf_counter() - start
        row(f"backfill {commits} commits x 10 files: pyiceberg", f"{py_wall:.2f} s",
            f"({commits / py_wall:.1f} commits/s; one run, in-process)")
        row("backfill ratio pyiceberg / xlake", f"{py_wall / wall:.0f}x", "(issue 7 target >= 30x; issue 16 >= 200x)")
        # pyiceberg's incremental commit on its own table of the same shape.
        py_inc = []
        for i in range(RUNS):
            version = gen_delta.append_commit(t, 10, 100 + i)
            (c,) = pyiceberg_baseline.delta_commits(t, first=version)
            start = time.perf_counter()
            mirror.commit(*c)
            py_inc.append(time.perf_counter() - start)
        # xlake on its copy of the table, after the same appended commits.
        measure("sync", t)
        x_inc, _ = incremental(t, RUNS, 200)
        py_med = statistics.median(py_inc)
        row(f"one commit of 10 files on {files // 1000}k files, {commits} snapshots: xlake",
            f"{x_inc * 1000:.0f} ms", "(whole process)")
        row("  the same with pyiceberg", f"{py_med * 1000:.0f} ms",
            f"(in-process, no interpreter start; ratio {py_med / x_inc:.1f}x)")


def incremental_section(a, scale, workdir, row):
    # 2. Incremental commits at 1k, 100k, 1M live files.
    shapes = [(1000 // scale, 1, "1k"), (1000 // scale, 100, "100k")]
    if not a.skip_1m:
        shapes.append((1000 // scale, 1000, "1M"))
    # Labels name the full-scale sizes; --quick tables are ten times smaller.
    results, floors = {}, {}
    for commits, per, label in shapes:
        t = table(workdir, f"live_{commits}x{per}", commits, per)
        wall, rss, t = backfill(t, 1)
        row(f"backfill {commits} commits x {per} files", f"{wall:.2f} s",
            f"({commits * per / wall:.0f} files/s, peak {rss:.0f} MiB)")
        for snapshots in (commits, 10):
            if snapshots == 10:
                measure("expire", t, "--keep-snapshots", 10)
            inc, rss = incremental(t, RUNS, 300)
            results[(label, snapshots)] = inc
            row(f"one commit of 10 files, {label} live files, {snapshots} snapshots",
                f"{inc * 1000:.0f} ms", f"(peak {rss:.0f} MiB)")
            bottom, kib = floor(t, RUNS)
            floors[(label, snapshots)] = bottom
            row(f"  floor: start + copy of vN.metadata.json ({kib:.0f} KiB)",
                f"{bottom * 1000:.1f} ms", f"(commit / floor {inc / bottom:.1f}x)")
    many = 1000 // scale
    big = results.get(("100k", many))
    small = results.get(("1k", many))
    if big and small:
        row("100k / 1k ratio at 1,000 snapshots", f"{big / small:.2f}x",
            "(target <= 1.5x; 100k median target < 50 ms)")
    if big and results.get(("1k", 10)):
        row("100k files, 1,000 snapshots / 1k files, 10 snapshots",
            f"{big / results[('1k', 10)]:.2f}x", "(issue 16 target <= 1.3x)")
    if big and floors.get(("100k", many)):
        row("100k files, 1,000 snapshots / its floor", f"{big / floors[('100k', many)]:.1f}x",
            "(issue 16 target <= 3x)")



def check_and_hudi(scale, workdir, row):
    # 3. check on 10,000 commits.
    commits = 10_000 // scale
    t = table(workdir, f"check_{commits}x1", commits, 1)
    wall, rss, t = backfill(t, 1)
    row(f"backfill {commits} commits x 1 file", f"{wall:.2f} s",
        f"({commits / wall:.0f} commits/s, peak {rss:.0f} MiB)")
    for flags in ([], ["--deep"]):
        walls = [measure("check", t, *flags)[0] for _ in range(3)]
        row(f"check {' '.join(flags)} on {commits} commits".replace("  ", " "),
            f"{statistics.median(walls):.2f} s", "(target < 5 s)")

    # 4. Hudi (table version 6): backfill of an upsert workload, one incremental commit.
    commits = 1000 // scale
    for per in (10, 100):
        path = workdir / f"hudi_{commits}x{per}"
        if not (path / "_generated").exists():
            shutil.rmtree(path, ignore_errors=True)
            groups = gen_hudi.generate(path, commits, per)
            (path / "_generated").write_text(str(groups))
        wall, rss, t = backfill(path, 3 if per == 10 else 1)
        row(f"hudi backfill {commits} commits x {per} files (half upserts)", f"{wall:.2f} s",
            f"({commits / wall:.0f} commits/s, peak {rss:.0f} MiB)")
        walls = []
        for i in range(RUNS):
            ts = gen_hudi.append_commit(t, 10, 400 + i)
            walls.append(measure("commit", t, "--instant", ts)[0])
        row(f"hudi: one commit of 10 files after {commits} commits x {per} files",
            f"{statistics.median(walls) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
