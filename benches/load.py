"""Load: one `xlake run --once` cycle over many tables, and one table's long backlog,
each measured for wall time and peak memory (GNU time), at two sizes in one run.

    python benches/load.py [--workdir DIR] [--quick]

- tables: 10 and then 100 tables (each 100 commits x 10 files), `concurrency = 4`:
  peak RSS should follow the concurrency, not the table count;
- backlog: a first sync of 1,000 and then 10,000 pending commits (1 file each) on one table;
  then, to tell what the backlog costs from what the table's history costs, on the
  10,000-commit table: a sync with nothing pending, a sync of only the last 100 commits
  (9,900 already mirrored), and a sync with nothing pending after
  `expire --keep-snapshots 100`;
- a long-running job: `xlake run --every 1s` over 10 tables for 90 s while a new commit
  lands on one of them every second; resident memory sampled throughout, so growth from
  cycle to cycle (a cache or registry that only grows) would show.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import time

import gen_delta
import run

ROOT = pathlib.Path(__file__).resolve().parents[1]


def history_rows(table, synced, commits):
    """Peak memory of syncs that differ in backlog but not in history, and the reverse."""
    rows = []

    def row(what, args):
        wall, rss = run.measure(*args)
        rows.append((what, f"{wall:.2f} s", f"peak {rss:.0f} MiB"))
        print(rows[-1], flush=True)

    row(f"sync with nothing pending, {commits} snapshots", ["sync", synced])
    tail = run.fresh_copy(table, "tail")
    run.measure("commit", tail, "--version", commits - 101)
    row(f"sync of the last 100 pending commits, {commits - 100} snapshots", ["sync", tail])
    run.measure("expire", tail, "--keep-snapshots", 100)
    row("sync with nothing pending after `expire --keep-snapshots 100`", ["sync", tail])
    shutil.rmtree(tail)
    return rows


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def job_cycles(workdir, tables=10, seconds=90, commits=True):
    """Resident memory of one `xlake run --every 1s` process over `seconds`, with a new
    commit on one table each second (unless not `commits`): (peak in the first 15 s, peak
    in the last 15 s, cycles run)."""
    root = workdir / "job_cycles"
    shutil.rmtree(root, ignore_errors=True)
    config = ["concurrency = 4"]
    for i in range(tables):
        gen_delta.generate(root / f"t{i}", 20, 2)
        config.append(f'[[tables]]\nlocation = "{root / f"t{i}"}"')
    (root / "tables.toml").write_text("\n".join(config) + "\n")
    proc = subprocess.Popen([run.BIN, "run", "--config", root / "tables.toml", "--every", "1s"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples, start, n = [], time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < seconds:
        if commits:
            gen_delta.append_commit(root / f"t{n % tables}", 2, n)
        n += 1
        time.sleep(0.5)
        samples.append((elapsed, rss_mib(proc.pid)))
        time.sleep(0.5)
        samples.append((time.monotonic() - start, rss_mib(proc.pid)))
    proc.terminate()
    out, _ = proc.communicate(timeout=60)
    cycles = sum(1 for line in out.splitlines() if " tables: " in line)
    if "FAILED" in out:
        raise SystemExit(f"a table failed in the job:\n{out}")
    early = max(r for t, r in samples if t < 15)
    late = max(r for t, r in samples if t > seconds - 15)
    shutil.rmtree(root)
    return early, late, cycles


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="/tmp/xlake-bench")
    p.add_argument("--quick", action="store_true", help="10x smaller shapes")
    a = p.parse_args()
    scale = 10 if a.quick else 1
    workdir = pathlib.Path(a.workdir) / ("quick" if a.quick else "full")
    workdir.mkdir(parents=True, exist_ok=True)
    run.BIN = run.binary()
    rows = []

    # Many tables in one job cycle.
    base = run.table(workdir, f"job_{100 // scale}x10", 100 // scale, 10)
    for count in (10, 100):
        copies = workdir / f"job_{count}_tables"
        shutil.rmtree(copies, ignore_errors=True)
        copies.mkdir()
        config = ["concurrency = 4"]
        for i in range(count):
            dest = copies / f"t{i}"
            # Symlinks: the data files are already hard links at ext4's per-inode limit.
            shutil.copytree(base, dest, copy_function=lambda s, d: os.symlink(os.path.abspath(s), d),
                            ignore=shutil.ignore_patterns("metadata", "_bench_src", "_generated"))
            config.append(f'[[tables]]\nlocation = "{dest}"')
        (copies / "tables.toml").write_text("\n".join(config) + "\n")
        wall, rss = run.measure("run", "--config", copies / "tables.toml", "--once")
        rows.append((f"`xlake run --once`, {count} tables of {100 // scale} commits, concurrency 4", f"{wall:.2f} s", f"peak {rss:.0f} MiB"))
        print(rows[-1], flush=True)
        shutil.rmtree(copies)

    # One long backlog.
    for commits in (1000 // scale, 10_000 // scale):
        t = run.table(workdir, f"check_{commits}x1", commits, 1)
        wall, rss, synced = run.backfill(t, 1)
        rows.append((f"first sync of {commits} pending commits x 1 file", f"{wall:.2f} s",
                     f"peak {rss:.0f} MiB"))
        print(rows[-1], flush=True)
        if commits == 10_000 // scale:
            rows += history_rows(t, synced, commits)
        shutil.rmtree(synced)

    for commits in (False, True):
        early, late, cycles = job_cycles(workdir, seconds=90 // scale, commits=commits)
        landing = "a commit landing each second" if commits else "no new commits"
        rows.append((f"`xlake run --every 1s`, 10 tables, {landing}, {cycles} cycles",
                     "RSS first 15 s / last 15 s", f"{early:.1f} / {late:.1f} MiB"))
        print(rows[-1], flush=True)

    print("\n| load | wall | peak memory |\n|---|---|---|")
    for what, value, note in rows:
        print(f"| {what} | {value} | {note} |")


if __name__ == "__main__":
    main()
