"""The documented operations routine, sync -> expire -> cleanup -> sync, on a Delta and a
Hudi table (issue 48): after each step `check` is consistent and every retained snapshot
reads, in each engine, the rows the source's own reader returns at its commit. The last
commit is held back until the second sync, so that it mirrors something new on top of the
expired and cleaned table. A Hudi table whose partition folder is named `metadata` (the
mirror's folder) is refused before anything is written."""
import json
import pathlib
import shutil

import delta_source as delta
import hudi_source as hudi
import pytest
from readers import ENGINES, PyIceberg, zoned_columns
from rows import canonical_rows
from xlake_cli import sync, xlake


def delta_oracle(table, commit):
    got = delta.oracle_table(table, int(commit))
    return got.column_names, got.to_pylist()


def hudi_oracle(table, commit):
    got = hudi.oracle_table(table, commit)
    return got.column_names, got.to_pylist()


def hold_back_delta(table, aside):
    """Move the newest commit file aside; returns how to put it back."""
    version = max(delta.commit_files(table))
    path = delta.commit_files(table)[version]
    moved = aside / path.name
    shutil.move(path, moved)
    return lambda: shutil.move(moved, path)


def hold_back_hudi(table, aside):
    """Move the completed file of the newest completed instant aside (the instant then
    looks in flight); returns how to put it back."""
    requested, action, completion = hudi.snapshot_instants(table)[-1]
    path = pathlib.Path(table) / ".hoodie" / "timeline" / f"{requested}_{completion}.{action}"
    assert path.is_file(), path
    moved = aside / path.name
    shutil.move(path, moved)
    return lambda: shutil.move(moved, path)


CASES = {
    "delta": ("partitioned_3commits", delta.extract, delta_oracle, hold_back_delta),
    "hudi": ("sample_table_cow_v9_txns_simple_nometa", hudi.extract, hudi_oracle, hold_back_hudi),
}


def ok(result, step):
    assert result.returncode == 0, f"{step}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def assert_readable(readers, table, step):
    """`check` is consistent, and each retained snapshot reads, in every engine
    (`readers["get"]`), the source's rows at its commit (`readers["oracle"]`)."""
    ok(xlake("check", table, "--deep", "--all"), f"{step}: check")
    snapshots = PyIceberg().snapshots(str(table))
    assert snapshots, f"{step}: no snapshot"
    zoned = zoned_columns(str(table))
    for snapshot in snapshots:
        commit = json.loads(snapshot["summary"]["XTABLE_METADATA"])["sourceIdentifier"]
        columns, rows = readers["oracle"](table, commit)
        want = canonical_rows(rows, columns)
        for name in ENGINES:
            got = readers["get"](name).rows_at_snapshot(str(table), snapshot["snapshot_id"])
            where = f"{step}: {name} at snapshot {snapshot['snapshot_id']} (source commit {commit})"
            assert canonical_rows(got, columns, zoned) == want, where
    return len(snapshots)


@pytest.mark.parametrize("case", sorted(CASES))
def test_sync_expire_cleanup_sync(tmp_path, engines, case):
    fixture, extract, oracle, hold_back = CASES[case]
    table = extract(fixture, tmp_path / "table")
    aside = tmp_path / "aside"
    aside.mkdir()
    put_back = hold_back(table, aside)
    readers = {"oracle": oracle, "get": engines}

    ok(sync(table), "first sync")
    before = assert_readable(readers, table, "after the first sync")
    assert before >= 2, f"{case}: too few snapshots to expire some"

    out = ok(xlake("expire", table, "--keep-snapshots", "1"), "expire")
    assert f"{before - 1} snapshots expired" in out, out
    assert_readable(readers, table, "after expire")

    # The default age (3 days) keeps everything just written; then the crash-recovery form.
    for args in (["cleanup", table, "--dry-run"], ["cleanup", table], ["cleanup", table, "--older-than", "0s", "--no-writer-running"]):
        out = ok(xlake(*args), " ".join(map(str, args[:1] + args[2:])))
        assert ": 0 orphan metadata files" in out, out
    assert_readable(readers, table, "after cleanup")

    put_back()
    out = ok(sync(table), "second sync")
    assert "1 snapshots written" in out, out
    assert assert_readable(readers, table, "after the second sync") == 2


def test_a_hudi_partition_named_metadata_is_refused(tmp_path):
    """Non-hive-style partition folders: partition `30` renamed `metadata` (folder and commit
    metadata). Its files would sit among the mirror's, where cleanup deletes orphans."""
    table = hudi.extract("sample_table_cow_v6_simplekeygen_nonhivestyle", tmp_path)
    (table / "30").rename(table / "metadata")
    commit = table / ".hoodie" / "20240418172804498.commit"
    commit.write_text(commit.read_text().replace('"30"', '"metadata"').replace('"30/', '"metadata/'))
    before = sorted(p.name for p in (table / "metadata").iterdir())
    result = sync(table)
    assert result.returncode == 1, result.stderr
    assert "lies in metadata/, the folder the Iceberg mirror is written to" in result.stderr, result.stderr
    assert sorted(p.name for p in (table / "metadata").iterdir()) == before, "nothing written"
    out = ok(xlake("inspect", table), "inspect")
    assert "metadata/ clash: 2 files" in out, out
