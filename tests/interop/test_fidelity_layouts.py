"""Fidelity on files other engines wrote (issue 19, classes 2, 4, 5): Delta tables built in
`fidelity_tables.py`, mirrored one version per `xlake sync` (each `vN` then refers to one
more version), read by pyiceberg, DuckDB and Spark at every version and compared with
deltalake's QueryBuilder. Where a reader cannot read a layout (a reader limit, not ours),
that reader is shown to fail on those columns, still judges every other column, and the
table carries the degraded marker (`xlake.degraded`, `sync` output, `inspect`).

- column mapping with nested lists and maps, with `delta.columnMapping.nested.ids`: fixed,
  every reader reads every column;
- the same without nested ids (Spark's Delta writer without IcebergCompat): pyiceberg reads
  it through the name mapping; Spark and DuckDB cannot (degraded);
- TIMESTAMP_MILLIS: fixed by `read.parquet.vectorization.enabled=false`;
- two-level lists (from Hudi 0.x base files): Spark cannot read them (degraded).
"""
import dataclasses
import functools
import json
import pathlib
import shutil

import delta_source as delta
import fidelity_tables as built
import hudi_source as hudi
import pytest
from readers import (
    ENGINES,
    DuckDB,
    PyIceberg,
    current_metadata_path,
    snapshot_for,
    zoned_columns,
)
from rows import canonical_rows
from xlake_cli import sync, xlake

DEGRADED = "xlake.degraded"


def _hudi_base_files(dest):
    table = hudi.extract("sample_table_cow_v6_nonpartitioned", dest)
    return sorted(p for p in table.glob("*.parquet"))


# name -> (builder, {column: words of its degraded entry}, {engine: columns it cannot read})
TABLES = {
    "mapped_nested_ids": (lambda d: built.column_mapped(d, nested_ids=True), {}, {}),
    "mapped_no_nested_ids": (
        lambda d: built.column_mapped(d, nested_ids=False),
        {c: "no Parquet field id" for c in ["tags", "props", "s.l"]},
        # Spark: "[col-tags, list, element] optional int32 element is not in the store";
        # DuckDB: list elements read as NULL, "Map keys can not be NULL", and an internal
        # error ("Vector::Reference used on vector of different type") on `s`.
        {"spark": ["tags", "props", "s"], "duckdb": ["tags", "props", "s"]},
    ),
    "millis_timestamps": (built.millis_timestamps, {c: "TIMESTAMP_MILLIS" for c in ["ts", "local"]}, {}),
    "two_level_lists": (
        lambda d: built.two_level_lists(d / "table", _hudi_base_files(d / "hudi")),
        {"arrayField": "two-level Parquet list"},
        {"spark": ["arrayField"]},  # "Should not read definition, past page end"
    ),
}


@dataclasses.dataclass
class Synced:
    name: str
    table: pathlib.Path
    outputs: dict  # version -> stdout of the sync that mirrored it
    versions: list


def sync_one_version_at_a_time(table):
    """Hide every commit but the first, then sync after restoring each next one."""
    log = table / "_delta_log"
    hidden = table.parent / f"{table.name}-hidden-log"
    hidden.mkdir()
    versions = sorted(delta.commit_files(table))
    for v in versions[1:]:
        shutil.move(str(delta.commit_files(table)[v]), hidden)
    outputs = {}
    for v in versions:
        if v:
            shutil.move(str(hidden / f"{v:020d}.json"), log)
        result = sync(table)
        assert result.returncode == 0, f"{table}: sync of version {v} exited {result.returncode}\n{result.stderr}"
        outputs[v] = result.stdout
    return outputs, versions


@pytest.fixture(scope="session")
def synced(tmp_path_factory):
    done = {}

    def get(name):
        if name not in done:
            table = TABLES[name][0](tmp_path_factory.mktemp(name))
            outputs, versions = sync_one_version_at_a_time(table)
            done[name] = Synced(name, table, outputs, versions)
        return done[name]

    return get


@functools.cache
def oracle(table, version):
    got = delta.oracle_table(table, version)
    return got.column_names, canonical_rows(got.to_pylist(), got.column_names)


def metadata_version(table, n):
    return json.loads((pathlib.Path(table) / "metadata" / f"v{n}.metadata.json").read_text())


def read(reader, table, snapshot_id, columns):
    """The rows of `columns` only: DuckDB's errors on unreadable columns are fatal to its
    connection, so it is asked for the judged columns alone."""
    if isinstance(reader, DuckDB):
        cols = ", ".join(f'"{c}"' for c in columns)
        return reader._rows(f"SELECT {cols} FROM iceberg_scan(?, snapshot_from_id => {int(snapshot_id)})", [table])
    if reader.name == "spark":
        df = reader.spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).load(table)
        return [r.asDict(recursive=True) for r in df.select(*columns).collect()]
    return reader.rows_at_snapshot(table, snapshot_id)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", TABLES)
def test_rows_at_every_version(synced, engines, name, engine):
    s = synced(name)
    reader = engines(engine)
    unreadable = TABLES[name][2].get(engine, [])
    table = str(s.table)
    snapshots = PyIceberg().snapshots(table)
    zoned = zoned_columns(table)
    for v in s.versions:
        columns, want = oracle(table, v)
        columns = [c for c in columns if c not in unreadable]
        want = canonical_rows(want, columns)
        rows = read(reader, table, snapshot_for(snapshots, str(v))["snapshot_id"], columns)
        assert canonical_rows(rows, columns, zoned) == want, f"{name} @ version {v}, {engine}: rows differ from deltalake"


def _fails_or_differs(engine, engines, table, snapshot_id, column, want):
    reader = DuckDB() if engine == "duckdb" else engines(engine)  # a fresh DuckDB: its errors are fatal
    try:
        rows = read(reader, table, snapshot_id, [column])
    except Exception as e:  # noqa: BLE001 - any failure is the reader limit being shown
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    got = canonical_rows(rows, [column])
    return None if got == want else f"wrong values: {got[:3]} != {want[:3]}"


@pytest.mark.parametrize("name", [n for n in TABLES if TABLES[n][2]])
def test_reader_limits_are_real(synced, engines, name):
    """The columns a reader is excused from are ones it really cannot read: if a reader
    learns to, this fails, and the excuse (and docs/fidelity.md) must go."""
    s = synced(name)
    table = str(s.table)
    v = s.versions[-1]
    snapshot_id = snapshot_for(PyIceberg().snapshots(table), str(v))["snapshot_id"]
    _, all_rows = oracle(table, v)
    for engine, columns in TABLES[name][2].items():
        for column in columns:
            want = canonical_rows([{column: r[column]} for r in all_rows], [column])
            why = _fails_or_differs(engine, engines, table, snapshot_id, column, want)
            assert why, f"{name}: {engine} now reads {column} right; drop it from the reader limits"


@pytest.mark.parametrize("name", TABLES)
def test_degraded_marker_sync_output_and_inspect(synced, name):
    s = synced(name)
    expected = TABLES[name][1]
    table = str(s.table)
    snapshots = PyIceberg().snapshots(table)
    first = {}  # column -> first version whose snapshot names it
    for v in s.versions:
        summary = snapshot_for(snapshots, str(v))["summary"]
        entries = json.loads(summary.get(DEGRADED, "[]"))
        for column, words in expected.items():
            named = [e for e in entries if e.startswith(f"{column}: ") and words in e]
            if named:
                first.setdefault(column, v)
            else:
                assert column not in first, f"{name}: version {v} dropped the marker of {column} (it is sticky)"
        unexpected = [e for e in entries if e.split(": ")[0] not in expected]
        assert not unexpected, f"{name} @ {v}: unexpected degraded entries {unexpected}"
    assert set(first) == set(expected), f"{name}: columns marked {first}, expected {list(expected)}"
    for column, v in first.items():
        assert any(line.startswith(f"degraded: {column}: ") and line.endswith(f"(from commit {v})") for line in s.outputs[v].splitlines()), f"{name}: sync of version {v} did not name {column}:\n{s.outputs[v]}"
    inspect = xlake("inspect", table)
    assert inspect.returncode == 0, inspect.stderr
    for column, words in expected.items():
        assert any(line.strip().startswith(f"degraded: {column}: ") and words in line for line in inspect.stdout.splitlines()), f"{name}: inspect lacks {column}:\n{inspect.stdout}"
    if not expected:
        assert "degraded" not in inspect.stdout, f"{name}: nothing is degraded, yet inspect says:\n{inspect.stdout}"


def test_millis_timestamps_turn_off_vectorized_reads_from_the_first_version_holding_them(synced, engines):
    """Version 1 adds the first TIMESTAMP_MILLIS file: v1 (version 0) leaves Spark's default,
    v2 and every later vN set read.parquet.vectorization.enabled=false. Spark's vectorized
    reader really fails on the file (forced by read option), the row reader reads it."""
    s = synced("millis_timestamps")
    latest = int((s.table / "metadata" / "version-hint.text").read_text())
    assert latest == len(s.versions)
    props = {n: metadata_version(s.table, n)["properties"] for n in range(1, latest + 1)}
    assert "read.parquet.vectorization.enabled" not in props[1]
    for n in range(2, latest + 1):
        assert props[n].get("read.parquet.vectorization.enabled") == "false", f"v{n}: {props[n]}"
    spark = engines("spark").spark
    snapshot_id = snapshot_for(PyIceberg().snapshots(str(s.table)), "1")["snapshot_id"]
    forced = spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).option("vectorization-enabled", "true").load(str(s.table))
    with pytest.raises(Exception, match="ClassCastException|cannot be cast"):
        forced.collect()


@pytest.mark.parametrize("name", TABLES)
def test_check_deep_all(synced, name):
    s = synced(name)
    result = xlake("check", s.table, "--deep", "--all")
    assert result.returncode == 0, f"{name}: check --deep --all exited {result.returncode}\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("name", ["sample_table_cow_v6_nonpartitioned", "sample_table_cow_v8_nonpartitioned"])
def test_hudi_two_level_list_fixtures_are_marked(tmp_path, name):
    table = hudi.extract(name, tmp_path)
    lists = hudi.list_columns(hudi.read_schema(table))
    assert lists, f"{name}: no list column"
    result = sync(table)
    assert result.returncode == 0, result.stderr
    current = json.loads(pathlib.Path(current_metadata_path(table)).read_text())
    snap = next(x for x in current["snapshots"] if x["snapshot-id"] == current["current-snapshot-id"])
    entries = json.loads(snap["summary"].get(DEGRADED, "[]"))
    inspect = xlake("inspect", table).stdout
    for column in lists:
        assert any(e.startswith(f"{column}: two-level Parquet list") for e in entries), f"{name}: {entries}"
        assert f"{column}: two-level" in result.stdout, result.stdout
        assert f"degraded: {column}: two-level" in inspect, inspect
