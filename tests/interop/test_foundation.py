"""The foundation table, read by pyiceberg, DuckDB and Spark: at every source commit (by
snapshot id and by timestamp) each engine returns exactly the expected rows, and the
snapshot list carries one snapshot per source commit at the source commit's time."""
import pytest
from readers import ENGINES, PyIceberg, snapshot_for, zoned_columns
from rows import canonical_rows, expected_rows


@pytest.mark.parametrize("engine", ENGINES)
def test_rows_at_every_commit(foundation, engines, engine):
    reader = engines(engine)
    table = foundation["table"]
    snapshots = PyIceberg().snapshots(table)  # ids and summaries; each engine's own list is checked below
    zoned = zoned_columns(table)
    for commit in foundation["commits"]:
        snap = snapshot_for(snapshots, commit["source_id"])
        want = expected_rows(commit)
        got = canonical_rows(reader.rows_at_snapshot(table, snap["snapshot_id"]), commit["columns"], zoned)
        assert got == want, f"{engine}: rows at snapshot of {commit['source_id']}"
        got = canonical_rows(reader.rows_as_of(table, commit["commit_time_ms"]), commit["columns"], zoned)
        assert got == want, f"{engine}: rows as of {commit['commit_time_ms']} ({commit['source_id']})"


@pytest.mark.parametrize("engine", ENGINES)
def test_snapshot_list(foundation, engines, engine):
    reader = engines(engine)
    table = foundation["table"]
    listed = sorted(reader.snapshots(table), key=lambda s: s["timestamp_ms"])
    written = PyIceberg().snapshots(table)
    assert len(listed) == len(foundation["commits"])
    for commit, snap in zip(foundation["commits"], listed):
        mine = snapshot_for(written, commit["source_id"])
        assert snap["snapshot_id"] == mine["snapshot_id"]
        assert snap["timestamp_ms"] == commit["commit_time_ms"]
        if "summary" in snap:
            assert snap["summary"]["XTABLE_METADATA"] == mine["summary"]["XTABLE_METADATA"]
            assert snap["summary"]["total-records"] == str(len(commit["rows"]))
            assert snap["operation"] == mine["operation"]
    ops = [snapshot_for(written, c["source_id"])["operation"] for c in foundation["commits"]]
    assert ops == ["append", "append", "overwrite", "delete", "append", "replace"]
