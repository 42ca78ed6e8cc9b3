"""The Iceberg source (before any target): tables written by pyiceberg (appends, an
overwrite, a copy-on-write delete, schema evolution with a rename, identity partitions;
format versions 1, 2 and 3), read by xlake's source into change sets (the
`source_changes` example prints them). For every snapshot of the main branch, oldest
first, the change set's added and removed files are pyiceberg's manifest entries ADDED
and DELETED by that snapshot, the files live after it are what `scan(snapshot_id=…)`
plans, and its schema (names and field ids), time and partition values are pyiceberg's."""
import json
import os
import subprocess

import pytest
from iceberg_writers import write_table
from xlake_cli import ROOT


def changes(table_dir):
    built = ROOT / "target" / "debug" / "examples" / "source_changes"
    binary = [str(built)] if os.environ.get("XLAKE_BIN") and built.exists() else [
        "cargo", "run", "--quiet", "--example", "source_changes", "--"]
    out = subprocess.run(
        [*binary, str(table_dir)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def relative(table, path):
    root = table.metadata.location.removeprefix("file://").rstrip("/") + "/"
    return path.removeprefix("file://").removeprefix(root)


def ancestry(table):
    snapshots = {s.snapshot_id: s for s in table.metadata.snapshots}
    chain, at = [], table.metadata.current_snapshot_id
    while at is not None and at in snapshots:
        chain.append(snapshots[at])
        at = snapshots[at].parent_snapshot_id
    return chain[::-1]


def entries_of(table, snapshot_id, status):
    """Data files (relative path -> partition region) the snapshot's manifests record
    with `status` (1 added, 2 deleted) by this snapshot."""
    entries = table.inspect.entries(snapshot_id=snapshot_id).to_pylist()
    return {
        relative(table, e["data_file"]["file_path"]): e["data_file"]["partition"].get("region")
        for e in entries
        if e["status"] == status and e["snapshot_id"] == snapshot_id and e["data_file"]["content"] == 0
    }


def schema_of(table, snapshot):
    schema = table.schemas()[snapshot.schema_id]
    return [(f.name, f.field_id) for f in schema.fields]


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_every_snapshot_is_pyicebergs(tmp_path, format_version):
    try:
        table = write_table(tmp_path / "wh", f"t{format_version}", format_version)
    except (NotImplementedError, ValueError) as e:  # a version pyiceberg does not write
        pytest.skip(f"pyiceberg does not write format version {format_version}: {e}")
    table_dir = table.metadata.location.removeprefix("file://")
    got = changes(table_dir)
    assert not [c for c in got if "error" in c], got
    chain = ancestry(table)
    assert [c["id"] for c in got] == [str(s.snapshot_id) for s in chain]
    # pyiceberg's delete rewrote files (copy-on-write): no delete files were written.
    assert all(f["dv"] is None for c in got for f in c["added"])
    live = {}
    for change, snapshot in zip(got, chain):
        sid = snapshot.snapshot_id
        assert change["time_ms"] == snapshot.timestamp_ms
        assert change["action"] == snapshot.summary.operation.value
        added = {f["path"]: f for f in change["added"]}
        assert set(added) == set(entries_of(table, sid, 1)), sid
        assert set(change["removed"]) == set(entries_of(table, sid, 2)), sid
        for path, region in entries_of(table, sid, 1).items():
            assert added[path]["partition"] == [f'Some(String("{region}"))'], path
        for path in change["removed"]:
            del live[path]
        live.update(added)
        planned = {relative(table, t.file.file_path) for t in table.scan(snapshot_id=sid).plan_files()}
        assert set(live) == planned, sid
        rows = sum(f["rows"] for f in live.values())
        assert rows == table.scan(snapshot_id=sid).to_arrow().num_rows, sid
        schema = [(f["name"], f["id"]) for f in change["schema"]]
        assert schema == schema_of(table, snapshot), sid
        assert change["partition_fields"] == ["region"]
    # The rename kept the field id: `points` is field 3, as `score` was.
    assert ("points", 3) in [(f["name"], f["id"]) for f in got[-1]["schema"]]
    assert ("score", 3) in [(f["name"], f["id"]) for f in got[0]["schema"]]
