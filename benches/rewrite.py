"""What a commit that removes files costs against an append (issue 16), alternating.

    python benches/rewrite.py XLAKE TABLE RUNS

TABLE is a mirrored Delta table (e.g. `run.py`'s 100k-file one). Each round appends a
10-file commit and times `xlake commit --version` on it, then a commit rewriting those 10
files (`gen_delta.rewrite_commit`: removed, 10 new ones added) and times that. A removing
commit reads its parent's data manifests newest first until it has found the removed files
(the paths only, and the whole entries of the manifests that hold them). Prints both
medians and their ratio.
Nothing is expired: each round adds two snapshots and 10 live files to TABLE.
"""
import pathlib
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_delta


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, table, runs = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])

    def commit(version):
        start = time.perf_counter()
        proc = subprocess.run([binary, "commit", str(table), "--version", str(version)],
                              capture_output=True, check=False)
        if proc.returncode:
            sys.exit(proc.stderr.decode())
        return time.perf_counter() - start

    seed = random.randint(10**6, 10**7)
    walls = {"append": [], "rewrite": []}
    for i in range(runs):
        walls["append"].append(commit(gen_delta.append_commit(table, 10, seed + 2 * i)))
        walls["rewrite"].append(commit(gen_delta.rewrite_commit(table, seed + 2 * i + 1)))
    m = {k: statistics.median(v) * 1000 for k, v in walls.items()}
    print(f"append of 10 files: {m['append']:.1f} ms; rewrite of 10 files: "
          f"{m['rewrite']:.1f} ms; rewrite / append {m['rewrite'] / m['append']:.1f}x")


if __name__ == "__main__":
    main()
