"""Crashes: N rounds of `xlake sync` killed with SIGKILL after a random delay, each followed
by a clean sync. Every round must end with one Iceberg snapshot per Delta version and with
pyiceberg, DuckDB and Spark all returning the rows delta-rs returns at the newest version.

One Delta table, written with the `deltalake` package (appends, partition overwrites,
deletes, updates; partitioned by the string column `region`), grows by 1-3 commits a round,
so a killed sync has one or several to do. The sync is killed after a delay drawn between 0
and 1.3 times the time a sync takes (first measured on a probe table, then on every sync
that did a whole round's work), so kills land at start-up, inside a commit, between
commits, and after the end (the run prints how many landed where). Each round checks:

- what the kill left reads as a prefix of the history: versions 0..m-1, each once;
- a clean `xlake sync` exits 0 and `xlake check --deep` exits 0;
- snapshots == Delta versions, each version has exactly one, the newest is current;
- the current snapshot's rows from pyiceberg and DuckDB (every round) and Spark (every
  SPARK_EVERY-th round and the last) equal delta-rs's rows at the newest version. Spark
  every round took 200 rounds from ~160 s to ~205 s on 2 cores (its session start, ~9 s,
  is paid once either way).

At the end every version's snapshot, read by pyiceberg, equals delta-rs at that version.

XLAKE_CRASH_ROUNDS (default 200) sets the rounds, XLAKE_CRASH_SEED the seed. The seed fixes
the writes and the delays; where exactly a kill lands still depends on the machine.
"""
import json
import os
import pathlib
import random
import signal
import subprocess
import time

import delta_source as delta
import pyarrow as pa
import xlake_cli
from deltalake import DeltaTable, write_deltalake
from readers import PyIceberg, current_metadata_path, snapshot_for
from rows import canonical_rows
from xlake_cli import ROOT, sync, xlake

ROUNDS = int(os.environ.get("XLAKE_CRASH_ROUNDS", "200"))
SEED = int(os.environ.get("XLAKE_CRASH_SEED", "20240611"))
SPARK_EVERY = 10
REGIONS = ["eu", "us", "apac"]


def spawn_sync(table):
    """`xlake sync <table>` in its own process group, so a kill also reaches the binary
    when it runs under `cargo run` (the same command xlake_cli.xlake runs)."""
    return subprocess.Popen(
        [*xlake_cli.command(), "sync", str(table)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


class Writer:
    """Random Delta commits: the table is created at version 0, and each call to commit()
    adds exactly one version (a delete or update that matches nothing is retried)."""

    def __init__(self, table, rnd):
        self.table, self.rnd, self.next_id = str(table), rnd, 0
        write_deltalake(self.table, self.batch(), partition_by=["region"])

    def batch(self, region=None):
        n = self.rnd.randint(1, 8)
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        regions = [region or self.rnd.choice(REGIONS) for _ in ids]
        return pa.table({"id": ids, "region": regions, "amount": [round(self.rnd.uniform(0, 100), 2) for _ in ids]})

    def commit(self):
        before = DeltaTable(self.table).version()
        while DeltaTable(self.table).version() == before:
            kind = self.rnd.choices(["append", "overwrite", "delete", "update"], [6, 1, 2, 2])[0]
            region = self.rnd.choice(REGIONS)
            if kind == "append":
                write_deltalake(self.table, self.batch(), mode="append")
            elif kind == "overwrite":
                write_deltalake(self.table, self.batch(region), mode="overwrite", predicate=f"region = '{region}'")
            elif kind == "delete":
                DeltaTable(self.table).delete(f"region = '{region}' AND id % 4 = {self.rnd.randint(0, 3)}")
            else:
                predicate = f"id % 3 = {self.rnd.randint(0, 2)}"
                DeltaTable(self.table).update(updates={"amount": "amount + 1"}, predicate=predicate)
        return before + 1


def mirrored_versions(table):
    """The source versions of the snapshots readers see now (none before the first sync)."""
    if not (pathlib.Path(table) / "metadata" / "version-hint.text").exists():
        return []
    snapshots = PyIceberg().snapshots(str(table))  # in no set order: iceberg-rust keeps them in a map
    return sorted(int(json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"]) for s in snapshots)


def oracle(table, version):
    got = delta.oracle_table(table, version)
    return got.column_names, canonical_rows(got.to_pylist(), got.column_names)


def measure_sync(tmp_path):
    probe = tmp_path / "probe"
    write_deltalake(str(probe), pa.table({"id": [1], "region": ["eu"], "amount": [1.0]}), partition_by=["region"])
    started = time.monotonic()
    assert sync(probe).returncode == 0
    return time.monotonic() - started


def test_killed_syncs_then_a_clean_sync_mirror_every_commit_once(tmp_path, engines):
    rnd = random.Random(SEED)
    table = tmp_path / "orders"
    writer = Writer(table, rnd)
    mirrored = 0  # versions mirrored at the end of the last round
    estimate = measure_sync(tmp_path)
    landed = dict.fromkeys(
        ["finished", "before any write", "inside the first commit", "after some commits", "after the last commit"], 0
    )
    spent = dict.fromkeys(["write", "kill", "clean sync", "check", "pyiceberg", "duckdb", "spark", "oracle"], 0.0)
    started = time.monotonic()

    for round in range(1, ROUNDS + 1):
        where = f"round {round} (XLAKE_CRASH_SEED={SEED}, table {table})"
        t = time.monotonic()
        newest = [writer.commit() for _ in range(rnd.choice([1, 1, 2, 3]))][-1]
        spent["write"] += time.monotonic() - t

        t = time.monotonic()
        delay = rnd.uniform(0, 1.3 * estimate)
        files = len(list((table / "metadata").glob("*")))
        proc = spawn_sync(table)
        try:
            proc.wait(timeout=delay)
            took = time.monotonic() - t
            assert proc.returncode == 0, f"{where}: a sync left alone failed: {proc.stderr.read().decode()}"
            estimate, seen = (estimate + took) / 2, None
            landed["finished"] += 1
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            seen = mirrored_versions(table)
            assert seen == list(range(len(seen))), f"{where}: after the kill readers see {seen}"
            if len(seen) == mirrored:
                wrote = len(list((table / "metadata").glob("*"))) > files
                landed["inside the first commit" if wrote else "before any write"] += 1
            else:
                landed["after the last commit" if len(seen) == newest + 1 else "after some commits"] += 1
        proc.stderr.close()
        spent["kill"] += time.monotonic() - t

        t = time.monotonic()
        clean = sync(table)
        assert clean.returncode == 0, f"{where}: clean sync after a kill at {delay:.3f}s\n{clean.stdout}{clean.stderr}"
        if seen == list(range(mirrored)):  # the clean sync did the whole round's work
            estimate = (estimate + time.monotonic() - t) / 2
        spent["clean sync"] += time.monotonic() - t
        t = time.monotonic()
        check = xlake("check", table, "--deep")
        assert check.returncode == 0, f"{where}: check --deep exited {check.returncode}\n{check.stdout}{check.stderr}"
        spent["check"] += time.monotonic() - t

        snapshots = PyIceberg().snapshots(str(table))
        assert len(snapshots) == newest + 1, f"{where}: {len(snapshots)} snapshots for {newest + 1} Delta versions"
        current = snapshot_for(snapshots, str(newest))["snapshot_id"]
        for version in range(newest + 1):
            snapshot_for(snapshots, str(version))
        metadata = json.loads(pathlib.Path(current_metadata_path(table)).read_text())
        assert metadata["current-snapshot-id"] == current, f"{where}: version {newest} is not current"

        t = time.monotonic()
        columns, want = oracle(table, newest)
        spent["oracle"] += time.monotonic() - t
        readers = ["pyiceberg", "duckdb"] + (["spark"] if round % SPARK_EVERY == 0 or round == ROUNDS else [])
        for engine in readers:
            t = time.monotonic()
            got = canonical_rows(engines(engine).rows_at_snapshot(str(table), current), columns)
            spent[engine] += time.monotonic() - t
            assert got == want, f"{where}: {engine} at version {newest}"
        mirrored = newest + 1

    t = time.monotonic()
    snapshots = PyIceberg().snapshots(str(table))
    for version in range(newest + 1):
        columns, want = oracle(table, version)
        got = PyIceberg().rows_at_snapshot(str(table), snapshot_for(snapshots, str(version))["snapshot_id"])
        assert canonical_rows(got, columns) == want, f"time travel to version {version} (XLAKE_CRASH_SEED={SEED})"
    spent["time travel"] = time.monotonic() - t

    print(
        f"\n{ROUNDS} rounds, {newest + 1} Delta versions, {time.monotonic() - started:.1f}s (time travel included); "
        f"kills: {landed}; last sync estimate {estimate * 1000:.0f} ms; "
        + ", ".join(f"{k} {v:.1f}s" for k, v in spent.items())
    )
