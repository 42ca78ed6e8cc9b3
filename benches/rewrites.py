"""The real workload (issue 46): commits that rewrite OLD files, after a short and a long
history, two builds alternating.

    python benches/rewrites.py BEFORE AFTER [--runs N] [--workdir DIR] [--quick] [--only delta|hudi]
        [--tables NAME,NAME,...]

BEFORE and AFTER are xlake binaries. Tables (generated once, cached in the workdir):

- Delta (`gen_delta.py`, partitioned by `day`): 1k files / 10 versions (the reference),
  10k and 100k live files after 30 and after 1,000 versions. Each measured commit is
  `gen_delta.merge_commit`: 10 new files, and 5 live files chosen at random across the
  whole table removed (the shape of a MERGE, UPDATE or DELETE).
- Hudi (`gen_hudi.py`, copy-on-write, version 6, partitioned): 10k file groups after 30
  and after 1,000 instants. Each measured commit is `gen_hudi.random_upsert_commit`: 10
  base files, 5 of them upserts into file groups chosen at random across the table.

Each build mirrors its own copy of every table. A round, per table and build: one such
commit timed with `xlake commit --version/--instant`, then another timed with `xlake
sync`; the tables of the short histories are expired back to their length every 5
rounds (not timed). Also per round the floor of the 100k/1,000 Delta table (`xlake
--version` plus one copy of its `vN.metadata.json`, as flat.py). Prints medians (ms)
and the issue's ratios.
--quick: 10x smaller tables (smoke test only). --tables: only the named tables (e.g.
`delta_1k_10,delta_100k_1000`; the floor is measured when delta_100k_1000 is among them).
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_delta
import gen_hudi

# name: (format, commits, files per commit, snapshots kept between rounds or None)
TABLES = {
    "delta_1k_10": ("delta", 10, 100, 10),
    "delta_10k_30": ("delta", 30, 334, 30),
    "delta_10k_1000": ("delta", 1000, 10, None),
    "delta_100k_30": ("delta", 30, 3334, 30),
    "delta_100k_1000": ("delta", 1000, 100, None),
    "hudi_10k_30": ("hudi", 30, 667, 30),
    "hudi_10k_1000": ("hudi", 1000, 20, None),
}


def run(binary, *args):
    start = time.perf_counter()
    proc = subprocess.run([binary, *map(str, args)], capture_output=True, check=False)
    if proc.returncode:
        sys.exit(f"{binary} {' '.join(map(str, args))}: {proc.stderr.decode()}")
    return time.perf_counter() - start


def generated(workdir, name, quick):
    fmt, commits, files, _ = TABLES[name]
    if quick:
        files = max(1, files // 10)
    path = workdir / name
    if not (path / "_generated").exists():
        shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        if fmt == "delta":
            gen_delta.generate(path, commits, files)
        else:
            gen_hudi.generate(path, commits, files)
        (path / "_generated").write_text("1")
        print(f"generated {name} ({time.perf_counter() - t:.0f} s)", flush=True)
    return path


def mirrored(path, tag, binary):
    """A hard-linked copy of a generated table, mirrored by `binary`. A mirror left by an
    earlier run is deleted first, then written back and left 6 s: ext4 without a journal
    (this machine's) skips, when it allocates an inode, each inode of the group freed in
    the last 5 s (300 s more while its inode table block is dirty), at a cost per inode
    skipped; a commit creating ~10 files beside the ~2,000 just freed of the old mirror's
    `metadata/` paid ~7 ms more for it (benches/README.md, issue 46, 2026-12-06 15:00)."""
    dest = path.parent / f"{path.name}.{tag}"
    if dest.exists():
        shutil.rmtree(dest, ignore_errors=True)
        os.sync()
        time.sleep(6)
    shutil.copytree(path, dest, copy_function=os.link,
                    ignore=shutil.ignore_patterns("metadata", "_bench_src"))
    t = run(binary, "sync", dest)
    print(f"  {dest.name}: mirrored in {t:.1f} s", flush=True)
    return dest


def one(binary, fmt, table, seed, how):
    """One rewriting commit on `table`, mirrored by `binary` with `how` (commit or sync)."""
    if fmt == "delta":
        version = gen_delta.merge_commit(table, 10, 5, seed)
        args = ("commit", table, "--version", version) if how == "commit" else ("sync", table)
    else:
        instant = gen_hudi.random_upsert_commit(table, 10, 5, seed)
        args = ("commit", table, "--instant", instant) if how == "commit" else ("sync", table)
    return run(binary, *args)


def floor(binary, table):
    meta = table / "metadata"
    current = meta / f"v{int((meta / 'version-hint.text').read_text())}.metadata.json"
    start = run(binary, "--version")
    t0 = time.perf_counter()
    copy = table.parent / f"{table.name}.floor-copy.json"
    copy.write_bytes(current.read_bytes())
    copied = time.perf_counter() - t0
    copy.unlink()
    return start + copied


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--workdir", default="/tmp/xlake-bench/rewrites")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", choices=["delta", "hudi"])
    p.add_argument("--tables", help="comma-separated table names, among: " + ", ".join(TABLES))
    a = p.parse_args()
    workdir = pathlib.Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    builds = {"before": a.before, "after": a.after}
    names = [n for n in TABLES if not a.only or TABLES[n][0] == a.only]
    if a.tables:
        wanted = a.tables.split(",")
        unknown = [n for n in wanted if n not in TABLES]
        if unknown:
            p.error(f"unknown tables: {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    tables = {}
    for name in names:
        path = generated(workdir, name, a.quick)
        for build, binary in builds.items():
            tables[name, build] = mirrored(path, build, binary)
    walls = {}
    seed = 1_000
    for i in range(a.runs):
        for name in names:
            fmt, _, _, keep = TABLES[name]
            for build, binary in builds.items():
                seed += 2
                for how, s in (("commit", seed), ("sync", seed + 1)):
                    wall = one(binary, fmt, tables[name, build], s, how)
                    walls.setdefault((name, build, how), []).append(wall)
                if keep and i % 5 == 4:
                    run(binary, "expire", tables[name, build], "--keep-snapshots", keep)
        for build, binary in builds.items():
            if "delta_100k_1000" in names:
                walls.setdefault(("floor", build, "-"), []).append(
                    floor(binary, tables["delta_100k_1000", build]))
        print(f"round {i + 1}/{a.runs}", flush=True)
    report(walls, names, builds, a.runs)


def report(walls, names, builds, runs):
    m = {k: statistics.median(v) * 1000 for k, v in walls.items()}
    print(f"\nmedians of {runs} rounds, ms (before / after):")
    for name in names + ["floor"]:
        for how in ("commit", "sync", "-"):
            if (name, "after", how) in m:
                print(f"  {name:18} {how:6} {m[name, 'before', how]:8.1f} {m[name, 'after', how]:8.1f}")
    ratios = [("delta 100k/1000 vs 1k/10", "delta_100k_1000", "delta_1k_10"),
              ("delta 10k/1000 vs 10k/30", "delta_10k_1000", "delta_10k_30"),
              ("delta 100k/1000 vs 100k/30", "delta_100k_1000", "delta_100k_30"),
              ("hudi 1000 vs 30 instants", "hudi_10k_1000", "hudi_10k_30")]
    print("\nratios (before / after):")
    for label, big, small in ratios:
        for how in ("commit", "sync"):
            if (big, "after", how) in m and (small, "after", how) in m:
                r = [m[big, b, how] / m[small, b, how] for b in builds]
                print(f"  {label:28} {how:6} {r[0]:.2f}x / {r[1]:.2f}x")
    if ("floor", "after", "-") in m:
        for how in ("commit", "sync"):
            r = [m["delta_100k_1000", b, how] / m["floor", b, "-"] for b in builds]
            print(f"  delta 100k/1000 vs its floor {how:6} {r[0]:.2f}x / {r[1]:.2f}x")
    for name in names:
        r = [m[name, b, "sync"] / m[name, b, "commit"] for b in builds]
        print(f"  sync / commit {name:18} {r[0]:.2f}x / {r[1]:.2f}x")
    print(json.dumps({f"{k[0]}|{k[1]}|{k[2]}": round(v, 2) for k, v in m.items()}))


if __name__ == "__main__":
    main()
