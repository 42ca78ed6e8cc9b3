"""The Delta side of the interop suite: the fixture archives, the versions that must each
have one Iceberg snapshot and their times (read from `_delta_log/` alone), and the
delta-rs oracle's rows at a version.

Run as a script to print, per fixture, the oracle's row count at every version.
"""
import json
import os
import pathlib
import re
import sys
import tarfile

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "delta"

_COMMIT = re.compile(r"^(\d{20})\.json$")  # not `<v>.<v>.compacted.json`, not v2 checkpoints
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]*)?\.(parquet|json)$")


def fixture_names():
    return sorted(p.name[: -len(".tar.gz")] for p in FIXTURES.glob("*.tar.gz"))


def extract(name, dest):
    """Untar fixture `name` into `dest` (its own dir) and return the absolute table root:
    the one directory holding `_delta_log/`."""
    dest = pathlib.Path(dest)
    with tarfile.open(FIXTURES / f"{name}.tar.gz") as t:
        t.extractall(dest, filter="data")
    roots = [p.parent for p in dest.rglob("_delta_log") if p.is_dir()]
    assert len(roots) == 1, f"{name}: expected one table, found {roots}"
    return roots[0].resolve()


def _log(table):
    return pathlib.Path(table) / "_delta_log"


def commit_files(table):
    """{version: path of its `<v>.json`}."""
    return {int(m.group(1)): f for f in _log(table).iterdir() if (m := _COMMIT.match(f.name))}


def checkpoint_versions(table):
    return sorted({int(m.group(1)) for f in _log(table).iterdir() if (m := _CHECKPOINT.match(f.name))})


def actions(table, version):
    """The actions of commit `version`, as [{kind: body}]."""
    text = commit_files(table)[version].read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def snapshot_versions(table):
    """The versions that must each have exactly one snapshot (the contract): every version
    when the log starts at 0; else from the oldest checkpoint from which every later commit
    exists (the first snapshot then holds the checkpoint's whole state)."""
    commits = commit_files(table)
    if not commits:
        return []
    latest = max(commits)
    if 0 in commits:
        start = 0
    else:
        start = next(c for c in checkpoint_versions(table) if all(v in commits for v in range(c + 1, latest + 1)))
    versions = list(range(start, latest + 1))
    assert all(v in commits for v in versions[1:]), f"{table}: gaps in the log"
    return versions


def commit_time_ms(table):
    """{version: snapshot timestamp-ms}: inCommitTimestamp, else commitInfo.timestamp, else
    the commit file's mtime; clamped so that it never goes backwards."""
    out, last = {}, None
    for v in snapshot_versions(table):
        info = next((a["commitInfo"] for a in actions(table, v) if "commitInfo" in a), {})
        ms = info.get("inCommitTimestamp") or info.get("timestamp")
        if ms is None:
            ms = int(os.stat(commit_files(table)[v]).st_mtime * 1000)
        last = ms if last is None else max(last, ms)
        out[v] = last
    return out


def latest_metadata(table):
    """The newest `metaData` action in the commit files."""
    for v in sorted(commit_files(table), reverse=True):
        for a in actions(table, v):
            if "metaData" in a:
                return a["metaData"]
    raise AssertionError(f"{table}: no metaData in any commit file")


def oracle_table(table, version, storage_options=None):
    """delta-rs's rows (a pyarrow Table, logical column names) at `version`. DataFusion's
    QueryBuilder, because `to_pyarrow_table()` refuses deletion vectors and v2 checkpoints;
    it returns strings as `string_view`. `storage_options`: for a table on object storage."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(str(table), version=version, storage_options=storage_options)
    return pa.RecordBatchReader.from_stream(QueryBuilder().register("t", dt).execute("select * from t")).read_all()


def main(workdir):
    for name in fixture_names():
        table = extract(name, pathlib.Path(workdir) / name)
        times = commit_time_ms(table)
        print(f"{name}: versions {snapshot_versions(table)}, checkpoints {checkpoint_versions(table)}")
        for v, ms in times.items():
            try:
                print(f"  {v:>3} {oracle_table(table, v).num_rows} rows at {ms} ms")
            except Exception as e:  # noqa: BLE001 (report every failing version, not only the first)
                print(f"  {v:>3} ORACLE ERROR {type(e).__name__}: {str(e)[:200]}")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        main(sys.argv[1] if len(sys.argv) > 1 else d)
