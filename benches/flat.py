"""Is one incremental commit flat in history and size? (issue 16), alternating.

    python benches/flat.py XLAKE SMALL BIG RUNS

SMALL and BIG are mirrored Delta tables (e.g. `run.py`'s 1k-file and 100k-file ones,
BIG with ~1,000 snapshots). Each round appends a 10-file commit to each and times
`xlake commit --version` on both, then the floor of BIG (`xlake --version` plus one copy
of its current `vN.metadata.json`, as `run.py` measures it); SMALL is expired back to 10
snapshots and BIG to 1,000 (the issue's tables) at the start and every 5 rounds, so that
repeated runs do not grow BIG's history. Prints the medians and the two issue-16 ratios. Alternating
keeps a noisy moment from landing on one table only; `run.py`'s medians of 5 move by a
millisecond or two from run to run.
"""
import json
import pathlib
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_delta


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    binary, runs = sys.argv[1], int(sys.argv[4])
    small, big = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])

    def run(*args):
        start = time.perf_counter()
        proc = subprocess.run([binary, *map(str, args)], capture_output=True, check=False)
        if proc.returncode:
            sys.exit(proc.stderr.decode())
        return time.perf_counter() - start

    def current(table):
        meta = table / "metadata"
        return meta / f"v{int((meta / 'version-hint.text').read_text())}.metadata.json"

    def floor(table):
        start = run("--version")
        t0 = time.perf_counter()
        copy = table.parent / f"{table.name}.floor-copy.json"
        copy.write_bytes(current(table).read_bytes())
        copied = time.perf_counter() - t0
        copy.unlink()
        return start + copied

    def trim():
        run("expire", small, "--keep-snapshots", 10)
        run("expire", big, "--keep-snapshots", 1000)

    trim()
    walls = {"small": [], "big": [], "floor": []}
    seed = random.randint(10**6, 10**7)
    for i in range(runs):
        for name, table in (("small", small), ("big", big)):
            seed += 1
            version = gen_delta.append_commit(table, 10, seed)
            walls[name].append(run("commit", table, "--version", version))
        walls["floor"].append(floor(big))
        if i % 5 == 4:
            trim()
    m = {k: statistics.median(v) * 1000 for k, v in walls.items()}
    snapshots = {n: len(json.loads(current(t).read_text())["snapshots"])
                 for n, t in (("small", small), ("big", big))}
    print(f"small ({snapshots['small']} snapshots now): {m['small']:.1f} ms; "
          f"big ({snapshots['big']}): {m['big']:.1f} ms; floor of big: {m['floor']:.1f} ms")
    print(f"big / small {m['big'] / m['small']:.2f}x (target <= 1.3x); "
          f"big / floor {m['big'] / m['floor']:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
