"""An Iceberg table whose Parquet files carry no field ids (imported with pyiceberg's
`add_files`, read through `schema.name-mapping.default`) mirrored into Delta: column
mapping mode `name` from the first file without ids on (delta-spark refuses a file
without ids in mode `id`), each field's physical name the name its files hold it under,
and delta-rs and Spark with delta-spark read every version as pyiceberg reads the
snapshot (DuckDB's delta extension the newest). A file that holds a field under another name than the other files (written
after a rename) is refused, naming table, snapshot and file."""
import json
import pathlib
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_writers import catalog
from rows import normalize
from test_iceberg_source import ancestry, by_id, deltars_rows
from xlake_cli import sync

HERE = pathlib.Path(__file__).resolve().parent
DELTA = ["--target", "delta"]


def table_of(tmp_path, name):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    cat = catalog(tmp_path / "wh")
    cat.create_namespace_if_not_exists("db")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    return cat, cat.create_table(f"db.{name}", schema=schema, properties={"format-version": "2"})


def rows(ids, names):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})


def add_without_ids(table, file_name, data):
    """`add_files` of a Parquet file pyarrow writes (no field ids) inside the table."""
    path = pathlib.Path(table.metadata.location.removeprefix("file://")) / "data" / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path)
    assert pq.read_schema(path).field("id").metadata is None  # no PARQUET:field_id
    table.add_files([str(path)])


def delta_log(table_dir):
    log = pathlib.Path(table_dir) / "_delta_log"
    return [[json.loads(line) for line in f.read_text().splitlines() if line]
            for f in sorted(log.glob("*.json"))]


def mode_at(table_dir):
    """`delta.columnMapping.mode` in force at each version."""
    mode, out = None, []
    for actions in delta_log(table_dir):
        for a in actions:
            if "metaData" in a:
                mode = a["metaData"]["configuration"].get("delta.columnMapping.mode")
        out.append(mode)
    return out


def duckdb_rows(table_dir):
    """DuckDB's delta extension over the newest version (it reads no other)."""
    import duckdb
    import duckdb_ext

    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{pathlib.Path(next(iter(duckdb_ext.__path__))) / 'extensions'}'")
    con.execute("LOAD delta")
    return con.execute("SELECT * FROM delta_scan(?)", [str(table_dir)]).fetch_arrow_table().to_pylist()


def spark_rows(tmp_path, table_dir, versions):
    """Spark+delta-spark's rows of each version, in a process of its own; None without Spark."""
    if shutil.which("java") is None:
        return None
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return None
    ask, out = tmp_path / "ask.json", tmp_path / "rows.json"
    ask.write_text(json.dumps([[str(table_dir), v] for v in versions]))
    run = subprocess.run([sys.executable, str(HERE / "delta_target_spark.py"), str(ask), str(out)],
                         capture_output=True, text=True, cwd=HERE, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


def test_files_without_field_ids_read_alike_in_delta_rs_spark_and_pyiceberg(tmp_path):
    """An append with ids, then add_files without ids (mode id becomes name), an append,
    a copy-on-write delete, add_files again, a rename and a delete that drops the last
    imported file whole, synced after each (the mode read back from the log): every
    version reads as pyiceberg reads its snapshot."""
    cat, t = table_of(tmp_path, "imported")
    table_dir = t.metadata.location.removeprefix("file://")

    def synced():
        done = sync(table_dir, DELTA)
        assert done.returncode == 0, done.stderr
        return cat.load_table("db.imported")

    t.append(rows([1, 2], ["a", "b"]))
    t = synced()
    add_without_ids(t, "imported-1.parquet", rows([3, 4, 5], ["c", "d", "e"]))
    t = synced()
    assert t.metadata.properties.get("schema.name-mapping.default"), "add_files sets the mapping"
    t.append(rows([6], ["f"]))
    t = synced()
    t.delete("id = 4")  # rewrites the imported file (copy-on-write), with ids
    t = synced()
    add_without_ids(t, "imported-2.parquet", rows([7, 8], ["g", "h"]))
    t = synced()
    with t.update_schema() as u:
        u.rename_column("name", "label")
    t = cat.load_table("db.imported")
    t.delete("id >= 7")  # drops imported-2 whole: a snapshot of the renamed schema
    t = synced()
    chain = ancestry(t)
    assert len(delta_log(table_dir)) == len(chain) == 6
    assert mode_at(table_dir) == ["id"] + ["name"] * (len(chain) - 1)
    last = json.loads(next(a["metaData"] for a in delta_log(table_dir)[-1] if "metaData" in a)["schemaString"])
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in last["fields"]}
    assert physical == {"id": "id", "label": "name"}, physical
    expected = [t.scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist() for s in chain]
    assert [r["label"] for r in sorted(expected[-1], key=lambda r: r["id"])] == ["a", "b", "c", "e", "f"]
    for version, want in enumerate(expected):
        assert by_id(deltars_rows(table_dir, version)) == by_id(want), f"delta-rs, version {version}"
    assert by_id(duckdb_rows(table_dir)) == by_id(expected[-1]), "DuckDB, newest version"
    spark = spark_rows(tmp_path, table_dir, range(len(chain)))
    if spark is None:
        pytest.skip("no Spark here: delta-rs compared only")
    for version, (got, want) in enumerate(zip(spark, expected)):
        want = [{k: normalize(v) for k, v in r.items()} for r in want]
        assert by_id(got) == by_id(want), f"Spark+delta-spark, version {version}"


def test_a_file_written_after_a_rename_beside_files_without_ids_is_refused(tmp_path):
    """add_files without ids (column `name`), a rename to `label`, an append (column
    `label`, field id 2): mode id cannot read the first file in delta-spark, mode name has
    no one physical name for field 2. Refused naming table, snapshot and file; the
    version before stays and reads as pyiceberg."""
    cat, t = table_of(tmp_path, "renamed")
    add_without_ids(t, "imported.parquet", rows([1, 2], ["a", "b"]))
    t = cat.load_table("db.renamed")
    with t.update_schema() as u:
        u.rename_column("name", "label")
    t = cat.load_table("db.renamed")
    t.append(pa.table({"id": pa.array([3], pa.int64()), "label": pa.array(["c"], pa.string())}))
    t = cat.load_table("db.renamed")
    table_dir = t.metadata.location.removeprefix("file://")
    synced = sync(table_dir, DELTA)
    assert synced.returncode != 0, synced.stdout
    chain = ancestry(t)
    written = [task.file.file_path for task in t.scan(snapshot_id=chain[-1].snapshot_id).plan_files()
               if "imported" not in task.file.file_path]
    appended = pathlib.Path(written[0]).name
    for part in (table_dir, str(chain[-1].snapshot_id), appended, "field id 2", "no physical name"):
        assert part in synced.stderr, (part, synced.stderr)
    assert len(delta_log(table_dir)) == 1 and mode_at(table_dir) == ["name"]
    want = t.scan(snapshot_id=chain[0].snapshot_id).to_arrow().to_pylist()
    assert by_id(deltars_rows(table_dir, 0)) == by_id(want)


def test_add_files_after_a_rename_mirrored_by_id_is_refused(tmp_path):
    """Appends with ids before and after a rename (mode id: `label`'s physical name is
    `name`, the newer file holds `label`), then add_files without ids: mode id cannot read
    it in delta-spark, and by name the older files would not all read. Refused naming
    the snapshot, the file and the version that renamed."""
    cat, t = table_of(tmp_path, "late")
    t.append(rows([1], ["a"]))
    with t.update_schema() as u:
        u.rename_column("name", "label")
    t = cat.load_table("db.late")
    t.append(pa.table({"id": pa.array([2], pa.int64()), "label": pa.array(["b"], pa.string())}))
    t = cat.load_table("db.late")
    table_dir = t.metadata.location.removeprefix("file://")
    first = sync(table_dir, DELTA)
    assert first.returncode == 0, first.stderr
    assert mode_at(table_dir) == ["id", "id"]
    add_without_ids(t, "imported.parquet", pa.table({"id": pa.array([3], pa.int64()),
                                                     "label": pa.array(["c"], pa.string())}))
    t = cat.load_table("db.late")
    refused = sync(table_dir, DELTA)
    assert refused.returncode != 0, refused.stdout
    for part in (str(ancestry(t)[-1].snapshot_id), "imported.parquet carries no Parquet field ids",
                 "version 1: field id 2 (label) has physical name name"):
        assert part in refused.stderr, (part, refused.stderr)
    assert len(delta_log(table_dir)) == 2
