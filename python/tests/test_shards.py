"""`xlake run --shard I/N`: over 1,000 table locations, for N = 1..8, each table is taken by
exactly one shard, the same one in a second process, and the one the documented hash
names (FNV-1a 64 of the location as xlake names it, modulo N)."""

from __future__ import annotations

import subprocess

N_TABLES = 1000


def fnv1a_64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def taken(binary: str, config: str, shard: str) -> list[str]:
    """The tables one `run --once --shard` process takes (each fails: none exists)."""
    run = subprocess.run(
        [binary, "run", "--config", config, "--once", "--shard", shard],
        capture_output=True,
        text=True,
    )
    assert run.returncode in (0, 1), run.stderr
    return [
        line.split(" ", 1)[1].split(": ", 1)[0]
        for line in run.stdout.splitlines()
        if line.startswith("FAILED ")
    ]


def test_every_table_falls_in_exactly_one_shard_in_every_process(xlake, tmp_path):
    locations = [f"{tmp_path}/lake/db{i % 7}/table-{i:04}" for i in range(N_TABLES)]
    config = tmp_path / "tables.toml"
    config.write_text(
        "concurrency = 16\n"
        + "".join(f'[[tables]]\nlocation = "{loc}"\nexpire = false\n' for loc in locations)
    )
    binary = xlake.find_xlake_bin()
    for n in range(1, 9):
        shards = [taken(binary, str(config), f"{i}/{n}") for i in range(n)]
        assert sorted(t for s in shards for t in s) == sorted(locations), n
        for i, shard in enumerate(shards):
            assert all(fnv1a_64(t.encode()) % n == i for t in shard), (n, i)
        again = [taken(binary, str(config), f"{i}/{n}") for i in range(n)]
        assert [sorted(s) for s in again] == [sorted(s) for s in shards], n
    sizes = [len(taken(binary, str(config), f"{i}/8")) for i in range(8)]
    assert min(sizes) > N_TABLES / 8 / 2, sizes


def test_a_bad_shard_is_refused(xlake, tmp_path):
    config = tmp_path / "tables.toml"
    config.write_text("")
    for bad in ["4/4", "1", "x/2", "0/0"]:
        run = subprocess.run(
            [xlake.find_xlake_bin(), "run", "--config", str(config), "--once", "--shard", bad],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 2 and "write I/N" in run.stderr, (bad, run.stderr)
