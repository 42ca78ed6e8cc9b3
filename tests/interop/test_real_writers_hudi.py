"""The long Spark+Hudi histories (real_writers_hudi.py: six histories of 25 commits or more,
Hudi 1.2 and 0.15 bundles), each mirrored one of three ways while it is written:
- `commit`: `xlake commit` after each commit, as a job's next step;
- `callback`: Hudi's own write-commit HTTP callback to a running `xlake serve`;
- `plugin`: xlake's table-format plugin in the commit path (table version 9, copy-on-write:
  what the plugin takes).
Then `sync` mirrors what is left (a clustering commit after the last callback), there is one
snapshot per commit, `expire` drops what the cleaner deleted, and pyiceberg, DuckDB and
Spark+Iceberg equal Spark+Hudi at every snapshot kept; `check --deep --all` is consistent.

Slow (minutes per history on 2 cores): run by `.ci/run-slow` (XLAKE_SLOW=1); skipped
otherwise. XLAKE_HUDI_RUNS=history:mode,... runs only those."""
import json
import os
import subprocess
import sys

import pytest
import real_writers
import real_writers_hudi
from readers import PyIceberg
from test_hudi_callback import assert_readers_equal_hudi
from test_real_writers import source_commit
from test_serve import KEY, start
from xlake_cli import sync, xlake

pytestmark = pytest.mark.skipif(not os.environ.get("XLAKE_SLOW"), reason="slow: .ci/run-slow runs it (XLAKE_SLOW=1)")


def runs():
    """(history, mode) pairs: every history by commit and by callback, and by the plugin
    where it takes the table."""
    chosen = os.environ.get("XLAKE_HUDI_RUNS")
    if chosen:
        return [tuple(r.split(":")) for r in chosen.split(",")]
    out = []
    for name, (_, _, table_type, bundle) in real_writers_hudi.SPECS.items():
        out += [(name, "commit"), (name, "callback")]
        if bundle == "hudi-spark-1.2" and table_type == "COPY_ON_WRITE":
            out.append((name, "plugin"))
    return out


def write(history, mode, base):
    """Write `history`, mirrored by `mode`; (table, out, done.json)."""
    table, out = base / "table", base / "oracle"
    env = dict(os.environ)
    server = None
    flags = real_writers_hudi.HUDI_HISTORIES[history].xlake_flags
    if mode == "callback":
        config = base / "tables.toml"  # the table, read-optimized when merge-on-read
        config.write_text(f'[[tables]]\nlocation = "{table}"\nexpire = false\n'
                          f'mor_read_optimized = {"true" if flags else "false"}\n')
        server, addr = start("--config", config)
        env.update(XLAKE_CALLBACK_URL=f"http://{addr}/hudi", XLAKE_CALLBACK_KEY=KEY)
    elif mode == "plugin":
        env["XLAKE_MIRROR_BY"] = "plugin"
    try:
        run = subprocess.run([sys.executable, str(real_writers.HERE / "real_writers_hudi.py"), history, str(table),
                              str(out)], check=False, capture_output=True, text=True, timeout=5400, env=env)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=60)
    assert run.returncode == 0, f"{history} by {mode}: the writer failed:\n{run.stderr[-4000:]}"
    return str(table), out, json.loads((out / "done.json").read_text())


@pytest.mark.parametrize(("history", "mode"), runs())
def test_every_commit_of_a_long_hudi_history_reads_the_same_through_iceberg(history, mode, tmp_path, engines):
    table, out, done = write(history, mode, tmp_path)
    commits = done["commits"]
    assert len(commits) >= real_writers_hudi.MIN_COMMITS, f"{history}: {len(commits)} commits"
    flags = real_writers_hudi.HUDI_HISTORIES[history].xlake_flags
    for i, w in enumerate(done.get("writes", [])):
        # The callback mirrors the write's own commit before it returns (a restore sends
        # none: the next write's callback mirrors it); the plugin every commit the write
        # or the restore made (a clustering commit after the write too).
        if mode == "callback" and w["kind"] != "write":
            continue
        must = w["commits"][:1] if mode == "callback" else w["commits"]
        assert set(must) <= set(w["mirrored"]), f"{history} by {mode}, write {i}: {w}"
    result = sync(table, flags)
    assert result.returncode == 0, f"sync {history}:\n{result.stdout}{result.stderr}"
    mirrored = [source_commit(s) for s in PyIceberg().snapshots(table)]
    assert sorted(mirrored) == sorted(commits), f"{history} by {mode}: one snapshot per commit"
    assert xlake("expire", table).returncode == 0
    assert_readers_equal_hudi(engines, table, out, commits, real_writers_hudi.ORACLE_CASTS.get(history))
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, f"check {history}:\n{result.stdout}{result.stderr}"
    kept = len(PyIceberg().snapshots(table))
    print(f"{history} by {mode}: {len(commits)} commits, {kept} snapshots kept after expire, 3 readers equal")
