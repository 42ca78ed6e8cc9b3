"""xlake's Hudi table format (integrations/hudi-table-format) with Spark and Hudi 1.2's own
bundle (plugin_writer.py): a history of more than 25 instants mirrored by the plugin alone,
in the commit path, read back by pyiceberg, DuckDB and Spark+Iceberg equal to Spark+Hudi at
every completed instant; a write whose mirror fails fails with xlake's text and is rolled
back by the next one; merge-on-read and a missing binary refused at the first write; and
without the jar (the property still set) `check` names the silent native fallback."""
import json
import pathlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from readers import ENGINES, PyIceberg
from rows import canonical_rows
from test_real_writers import source_commit
from xlake_cli import sync, xlake

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run_writer(base, *mode):
    out = base / "out"
    run = subprocess.run([sys.executable, str(HERE / "plugin_writer.py"), str(base), str(out), *mode],
                         capture_output=True, text=True, timeout=1800, check=False)
    assert run.returncode == 0, f"plugin_writer {mode}: the writer failed:\n{run.stderr[-4000:]}"
    return json.loads((out / "done.json").read_text()), out


@pytest.fixture(scope="module")
def plugin_jar():
    """The plugin jar, built (offline after the first time) by `.ci/plugin`."""
    built = subprocess.run([str(ROOT / ".ci" / "plugin")], capture_output=True, text=True, cwd=ROOT, check=False)
    assert built.returncode == 0, f".ci/plugin:\n{built.stderr}"
    return ROOT / built.stdout.strip()


@pytest.fixture(scope="module")
def written(plugin_jar, tmp_path_factory):
    base = tmp_path_factory.mktemp("plugin")
    done, out = run_writer(base)
    expected = {}
    for commit in done["commits"]:
        got = pq.read_table(out / f"{commit}.parquet")
        expected[commit] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return base, done, expected


def instants(table):
    """Every instant file name in the active timeline (any state)."""
    return sorted(p.name for p in (pathlib.Path(table) / ".hoodie" / "timeline").iterdir() if p.is_file())


def test_the_plugin_mirrors_every_instant_in_the_commit_path(written, engines):
    base, _, expected = written
    table = str(base / "history")
    timeline = instants(table)
    cleans = [n for n in timeline if "_" in n and n.endswith(".clean")]
    archived = list((pathlib.Path(table) / ".hoodie" / "timeline" / "history").glob("*.parquet"))
    print(f"history: {len(expected)} instants with a snapshot, {len(cleans)} cleans still active, "
          f"{len(archived)} archive files")
    assert len(expected) + len(cleans) >= 25 and archived and any(n.endswith(".rollback") for n in timeline)
    mirrored = [source_commit(s) for s in PyIceberg().snapshots(table)]
    assert sorted(mirrored) == sorted(expected), "one snapshot per instant, by the plugin alone"
    result = sync(table)
    assert result.returncode == 0 and "up to date" in result.stdout, f"the plugin left work for sync:\n{result.stdout}"
    assert xlake("expire", table).returncode == 0
    kept = {source_commit(s): s for s in PyIceberg().snapshots(table)}
    assert list(expected)[-1] in kept
    for engine in ENGINES:
        reader = engines(engine)
        for commit, (columns, want) in expected.items():
            if commit not in kept:
                continue  # expired: Hudi's cleaner deleted files it reads
            rows = reader.rows_at_snapshot(table, kept[commit]["snapshot_id"])
            assert canonical_rows(rows, columns) == want, f"{commit}, {engine}: rows differ from Spark+Hudi"
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, result.stdout + result.stderr


def test_a_failed_mirror_fails_the_write_and_the_next_write_rolls_it_back(written, engines):
    base, done, expected = written
    table = str(base / "history")
    message = done["failed_write"]
    assert "xlake: injected failure: metadata/ is not writable" in message and "exited 2" in message, message
    # The failed instant is gone from Hudi's timeline (reverted, then rolled back) and no
    # snapshot names it; its rows are in no reader's current table.
    rollbacks = [n for n in instants(table) if n.endswith(".rollback")]
    assert rollbacks, "the next write rolled the failed one back"
    newest = PyIceberg().snapshots(table)[-1]["snapshot_id"]
    for engine in ENGINES:
        ids = {r["id"] for r in engines(engine).rows_at_snapshot(table, newest)}
        assert not ids & set(range(900, 904)), f"{engine} shows the failed write's rows"
    spark_hudi = pq.read_table(pathlib.Path(base) / "out" / f"{list(expected)[-1]}.parquet").column("id").to_pylist()
    assert not set(spark_hudi) & set(range(900, 904)), "Spark+Hudi shows the failed write's rows"
    result = xlake("check", table, "--deep")
    assert result.returncode == 0 and "consistent" in result.stdout, result.stdout + result.stderr


def test_merge_on_read_and_a_missing_binary_are_refused_at_the_first_write(written):
    base, done, _ = written
    assert "MERGE_ON_READ" in done["mor"] and "copy-on-write tables only" in done["mor"], done["mor"]
    assert "no-such-xlake" in done["no_binary"] and "not an executable file" in done["no_binary"], done["no_binary"]
    assert not list((base / "mor").rglob("*.parquet")), "the merge-on-read write wrote data"


def test_without_the_jar_check_names_the_silent_native_fallback(plugin_jar, tmp_path):
    run_writer(tmp_path, "native")
    table = tmp_path / "native"
    assert "hoodie.table.format=xlake" in (table / ".hoodie" / "hoodie.properties").read_text()
    result = xlake("check", table)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "hoodie.table.format=xlake promises an Iceberg snapshot" in result.stdout, result.stdout
    assert "without that table format's jar" in result.stdout, result.stdout
    report = xlake("inspect", table)
    assert report.returncode == 0 and "hoodie.table.format=xlake promises" in report.stdout, report.stdout


def test_a_driver_killed_between_completion_and_mirror_is_rolled_back_by_the_next_write(written, engines):
    """Hudi wrote the completed instant, the driver died before xlake ran: the plugin's
    timeline counts that instant as inflight (the mirror does not hold it), so the next writer
    with the plugin rolls it back and no reader ever shows its rows."""
    import hudi_source

    base = written[0]
    table = str(base / "killed")
    done = [i for i, _, _ in hudi_source.snapshot_instants(table)]
    mirrored = [source_commit(s) for s in PyIceberg().snapshots(table)]
    assert len(done) == 2 and mirrored == done[:1], (done, mirrored)
    result = xlake("check", table)
    assert result.returncode == 1 and "or a writer died between completing an instant and mirroring it" in result.stdout
    run_writer(base, "after_kill")
    done_after = [i for i, _, _ in hudi_source.snapshot_instants(table)]
    assert done[1] not in done_after, "the killed write is no longer completed in Hudi"
    assert any(n.endswith(".rollback") for n in instants(table))
    killed_ids = set(range(700, 704))
    spark_hudi = set(pq.read_table(base / "out" / "after.parquet").column("id").to_pylist())
    assert not spark_hudi & killed_ids, "Spark+Hudi shows the killed write's rows"
    newest = PyIceberg().snapshots(table)[-1]["snapshot_id"]
    for engine in ENGINES:
        rows = engines(engine).rows_at_snapshot(table, newest)
        assert {r["id"] for r in rows} == spark_hudi, f"{engine} differs from Spark+Hudi"
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, result.stdout + result.stderr
