"""Hudi's own write-commit HTTP callback, sent by Spark+Hudi 1.2 writes (real_writers.py's
`hudi_cow` history) to a running `xlake serve`, instead of `xlake commit` after each write:
- while the service runs, each write's commit has its snapshot the moment the write returns
  (Hudi sends the callback after the commit and waits for the answer); a clustering commit
  a write makes after its callback is mirrored by the next write's callback;
- with the service stopped, the writes still succeed (Hudi only logs a failed callback),
  `check` reports the lag, and the service's scheduled sync heals it;
- at the end every reader equals Spark+Hudi at every snapshot kept, and `check --deep --all`
  calls the mirror consistent."""
import json
import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import real_writers
from readers import ENGINES, PyIceberg
from rows import canonical_rows
from test_real_writers import source_commit
from test_serve import KEY, start
from xlake_cli import xlake

WRITES_WITH_SERVE = 10  # of the history's 13 writes; the last 3 find the service stopped


def write_with_callbacks(tmp_path, addr, serve_pid):
    table, out = tmp_path / "table", tmp_path / "oracle"
    env = dict(os.environ, XLAKE_CALLBACK_URL=f"http://{addr}/hudi", XLAKE_CALLBACK_KEY=KEY,
               XLAKE_CALLBACK_STOP_AFTER=str(WRITES_WITH_SERVE), XLAKE_SERVE_PID=str(serve_pid))
    run = subprocess.run([sys.executable, str(real_writers.HERE / "real_writers.py"), "hudi_cow", str(table),
                          str(out)], capture_output=True, text=True, timeout=1500, env=env, check=False)
    assert run.returncode == 0, f"the writer failed (a failed callback must not fail it):\n{run.stderr[-4000:]}"
    return str(table), out, json.loads((out / "done.json").read_text())


def test_hudi_callbacks_mirror_each_write_and_the_schedule_heals_a_stopped_service(tmp_path, engines):
    server, addr = start("--allow", tmp_path)
    try:
        table, out, done = write_with_callbacks(tmp_path, addr, server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    writes = done["writes"]
    assert len(writes) == 13, writes
    for i, w in enumerate(writes):
        if w["serve_up"]:
            # The write's own commit is its first; a clustering commit after it waits.
            assert w["commits"] and w["commits"][0] in w["mirrored"], f"write {i}: {w}"
        else:
            assert not w["mirrored"], f"write {i} with the service stopped: {w}"
    lagging = sum(len(w["commits"]) for w in writes if not w["serve_up"])
    print(f"hudi_cow by callback: {len(done['commits'])} commits in {len(writes)} writes, "
          f"{sum(len(w['mirrored']) for w in writes)} mirrored when their write returned, {lagging} with serve down")

    check = xlake("check", table, "--json")
    assert check.returncode == 1, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["lag_commits"] >= lagging and len(report["missing"]) >= lagging, report

    (tmp_path / "tables.toml").write_text(f'[[tables]]\nlocation = "{table}"\nexpire = false\n')
    server, addr = start("--config", tmp_path / "tables.toml", "--every", "1s")
    try:
        deadline = time.time() + 120
        while xlake("check", table).returncode != 0:
            assert time.time() < deadline, "the scheduled sync did not heal the lag"
            time.sleep(1)
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0

    assert sorted(source_commit(s) for s in PyIceberg().snapshots(table)) == sorted(done["commits"])
    assert xlake("expire", table).returncode == 0
    assert_readers_equal_hudi(engines, table, out, done["commits"])
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, result.stdout + result.stderr


def assert_readers_equal_hudi(engines, table, out, commits, casts=None):
    """Every reader equals Spark+Hudi at every snapshot kept; `casts` ({column: pyarrow
    type}) turns an oracle column into the type its files store, where Spark+Hudi shows
    another."""
    kept = {source_commit(s): s for s in PyIceberg().snapshots(table)}
    assert commits[-1] in kept
    for engine in ENGINES:
        for commit in commits:
            if commit not in kept:
                continue  # expired: Hudi's cleaner deleted files it reads
            got = pq.read_table(out / f"{commit}.parquet")
            for name, kind in (casts or {}).items():
                i = got.schema.get_field_index(name)
                got = got.set_column(i, name, got.column(name).cast(kind))
            columns = got.column_names
            rows = engines(engine).rows_at_snapshot(table, kept[commit]["snapshot_id"])
            assert canonical_rows(rows, columns) == canonical_rows(got.to_pylist(), columns), \
                f"@ {commit}, {engine}: rows differ from Spark+Hudi"
