"""Tables written by the writers users run (real_writers.py: Spark with Hudi 1.2's and
0.15's bundles, copy-on-write and merge-on-read read-optimized, and Spark with delta-spark
3.3), mirrored by `xlake commit` after each write (a `sync` then finds nothing left), then
`xlake expire` (snapshots whose files the source's cleaner deleted go), and read back by
pyiceberg, DuckDB and Spark+Iceberg: at every snapshot left, each reader returns the rows
the source engine returned right after the write that made the commit; `check --deep
--all` calls the mirror consistent."""
import json
import pathlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import real_writers
from readers import ENGINES, PyIceberg
from rows import canonical_rows
from xlake_cli import sync, xlake

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module", params=sorted(real_writers.HISTORIES))
def written(request, tmp_path_factory):
    """(history, table, {commit: (columns, canonical rows)}) for each real-writer history."""
    history = request.param
    base = tmp_path_factory.mktemp(history)
    table, out = base / "table", base / "oracle"
    run = subprocess.run([sys.executable, str(HERE / "real_writers.py"), history, str(table), str(out)],
                         capture_output=True, text=True, timeout=1500, check=False)
    assert run.returncode == 0, f"{history}: the writer failed:\n{run.stderr[-4000:]}"
    commits = json.loads((out / "done.json").read_text())["commits"]
    expected = {}
    for commit in commits:
        got = pq.read_table(out / f"{commit}.parquet")
        expected[commit] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return history, str(table), expected


def source_commit(snapshot):
    return json.loads(snapshot["summary"]["XTABLE_METADATA"])["sourceIdentifier"]


def test_every_commit_a_real_writer_made_reads_the_same_through_iceberg(written, engines):
    history, table, expected = written
    result = sync(table, real_writers.HISTORIES[history].xlake_flags)
    assert result.returncode == 0 and "up to date" in result.stdout, f"sync {history}:\n{result.stdout}{result.stderr}"
    mirrored = [source_commit(s) for s in PyIceberg().snapshots(table)]
    assert sorted(mirrored) == sorted(expected), f"{history}: one snapshot per commit"
    result = xlake("expire", table)
    assert result.returncode == 0, f"expire {history}:\n{result.stderr}"
    kept = {source_commit(s): s for s in PyIceberg().snapshots(table)}
    assert list(expected)[-1] in kept, f"{history}: the newest commit's snapshot is kept"
    for engine in ENGINES:
        reader = engines(engine)
        for commit, (columns, want) in expected.items():
            if commit not in kept:
                continue  # expired: the source's cleaner deleted files it reads
            rows = reader.rows_at_snapshot(table, kept[commit]["snapshot_id"])
            where = f"{history} @ {commit}, {engine}"
            assert not rows or set(columns) <= set(rows[0]), f"{where}: columns {sorted(rows[0])}"
            assert canonical_rows(rows, columns) == want, f"{where}: rows differ from the source engine"
    print(f"{history}: {len(expected)} commits, {len(kept)} snapshots kept after expire, "
          f"compared with {len(ENGINES)} readers")
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, f"check {history}:\n{result.stdout}\n{result.stderr}"
