"""A/B of two xlake builds on one incremental Delta commit.

    python benches/ab.py TABLE RUNS XLAKE_A XLAKE_B [...]

On TABLE (a Delta table already mirrored, e.g. one `run.py` left in its workdir), append a
10-file commit (`gen_delta.append_commit`) and time `xlake commit --version` with each
build in turn, RUNS rounds; prints each build's median and minimum. The builds alternate,
so a noisy machine slows both alike; each commit adds one snapshot.

Each build works on its own copy of TABLE (its data and log hard-linked, made once as
`TABLE.ab-<n>` and mirrored by that build with `xlake sync`), because a build may leave
state for its next commit (the saved source state) that another would not keep up to date.
"""
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_delta


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    table, runs, builds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    walls = {b: [] for b in builds}
    tables = {b: own_copy(table, n, b) for n, b in enumerate(builds)}
    seed = random.randint(1000, 10**6)
    for _ in range(runs):
        for build in builds:
            seed += 1
            table = tables[build]
            version = gen_delta.append_commit(table, 10, seed)
            start = time.perf_counter()
            proc = subprocess.run([build, "commit", str(table), "--version", str(version)],
                                  capture_output=True, check=False)
            walls[build].append(time.perf_counter() - start)
            if proc.returncode:
                sys.exit(proc.stderr.decode())
    for build in builds:
        print(f"{build}: median {statistics.median(walls[build]) * 1000:.1f} ms, "
              f"min {min(walls[build]) * 1000:.1f} ms")


def own_copy(table, n, build):
    """A copy of `table` for the n-th build, mirrored by it, made once."""
    copy = table.parent / f"{table.name}.ab-{n}"
    if not copy.exists():
        shutil.copytree(table, copy, copy_function=os.link,
                        ignore=shutil.ignore_patterns("metadata", "_bench_src"))
        subprocess.run([build, "sync", str(copy)], check=True, capture_output=True)
    return copy


if __name__ == "__main__":
    main()
