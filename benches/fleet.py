"""The fleet's no-op pass: `xlake run --once` over 1,000 small Delta tables that are all
mirrored already (nothing new), against the floor of reading each table's
`metadata/version-hint.text` once, one run each (issue 44).

    python benches/fleet.py [--tables 1000] [--passes 1] [--workdir DIR]

XLAKE_BIN names the binary (default: a release build, `cargo build --release --bin xlake`).
The floor is measured two ways: one process (`cat`) reading the 1,000 hint files, which
like `xlake run` pays one process start; and this Python process reading them in a loop.
The ratio is taken against the first. Peak memory is GNU time's maximum RSS of the run.
With `--passes N` the no-op pass and the `cat` floor are each run N times, one after the
other in turn, and their medians are reported (a shared machine's noise).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "python" / "tests"


def binary() -> str:
    if os.environ.get("XLAKE_BIN"):
        return os.environ["XLAKE_BIN"]
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "xlake"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "xlake")


def timed(args: list[str]) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB), by GNU time, of one run."""
    with tempfile.NamedTemporaryFile("r") as peak:
        start = time.perf_counter()
        run = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", peak.name, *args],
                             check=False, capture_output=True, text=True)
        took = time.perf_counter() - start
        user, system, rss = peak.read().split()[-3:]
    return took, float(user) + float(system), int(rss) / 1024, run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--workdir")
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    from tables import delta_table  # the tests' generator: one Parquet file, one commit

    if not os.path.exists("/usr/bin/time"):
        sys.exit("needs GNU time (/usr/bin/time, Debian package `time`)")
    xlake = binary()
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="xlake-fleet-"))
    if work.exists() and args.workdir:
        shutil.rmtree(work)
    tables = [delta_table(work / f"t{i:04}", rows=1 + i % 5) for i in range(args.tables)]
    config = work / "tables.toml"
    config.write_text("".join(f'[[tables]]\nlocation = "{t}"\n' for t in tables))
    first, _, first_rss, run = timed([xlake, "run", "--config", str(config), "--once"])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    hints = [str(t / "metadata" / "version-hint.text") for t in tables]
    noops, floors = [], []
    for _ in range(max(args.passes, 1)):
        noops.append(timed([xlake, "run", "--config", str(config), "--once"]))
        run = noops[-1][3]
        assert run.returncode == 0 and f"{args.tables} synced (0 snapshots written)" in run.stdout, run.stdout[-500:]
        floors.append(timed(["cat", *hints]))
        assert floors[-1][3].returncode == 0
    median = lambda runs, i: statistics.median(r[i] for r in runs)
    noop, noop_cpu, noop_rss = median(noops, 0), median(noops, 1), max(r[2] for r in noops)
    floor_cat, floor_cpu = median(floors, 0), median(floors, 1)
    start = time.perf_counter()
    for h in hints:
        with open(h, "rb") as f:
            f.read()
    floor_loop = time.perf_counter() - start
    print(f"tables: {args.tables}, binary: {xlake}")
    print(f"first pass (mirror all):   {first:.3f} s, peak {first_rss:.0f} MiB")
    print(f"no-op pass (nothing new):  {noop:.3f} s ({noop_cpu:.2f} s CPU), peak {noop_rss:.0f} MiB")
    print(f"floor, one `cat` process:  {floor_cat:.4f} s ({floor_cpu:.2f} s CPU); "
          f"in-process loop {floor_loop:.4f} s")
    if len(noops) > 1:
        print(f"no-op passes (s):          {' '.join(f'{r[0]:.3f}' for r in noops)}; medians above")
        print(f"floors (s):                {' '.join(f'{r[0]:.4f}' for r in floors)}")
    print(f"ratio no-op / floor (cat): {noop / floor_cat:.1f}x (target <= 3x); peak < 256 MiB: {noop_rss < 256}")
    if not args.workdir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
