"""A/B of two xlake builds on one incremental Delta commit.

    python benches/ab.py TABLE RUNS XLAKE_A XLAKE_B [...]

On TABLE (a Delta table already mirrored, e.g. one `run.py` left in its workdir), append a
10-file commit (`gen_delta.append_commit`) and time `xlake commit --version` with each
build in turn, RUNS rounds; prints each build's median and minimum. The builds alternate,
so a noisy machine slows both alike; each commit adds one snapshot.
"""
import pathlib
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_delta  # noqa: E402


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    table, runs, builds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    walls = {b: [] for b in builds}
    seed = random.randint(1000, 10**6)
    for _ in range(runs):
        for build in builds:
            seed += 1
            version = gen_delta.append_commit(table, 10, seed)
            start = time.perf_counter()
            proc = subprocess.run([build, "commit", str(table), "--version", str(version)],
                                  capture_output=True)
            walls[build].append(time.perf_counter() - start)
            if proc.returncode:
                sys.exit(proc.stderr.decode())
    for build in builds:
        print(f"{build}: median {statistics.median(walls[build]) * 1000:.1f} ms, "
              f"min {min(walls[build]) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
