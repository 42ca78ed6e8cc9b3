"""The Iceberg source (before any target): tables written by pyiceberg (appends, an
overwrite, a copy-on-write delete, schema evolution with a rename, identity partitions;
format versions 1, 2 and 3), read by xlake's source into change sets (the
`source_changes` example prints them). For every snapshot of the main branch, oldest
first, the change set's added and removed files are pyiceberg's manifest entries ADDED
and DELETED by that snapshot, the files live after it are what `scan(snapshot_id=…)`
plans, and its schema (names and field ids), time and partition values are pyiceberg's."""
import json
import os
import pathlib
import subprocess

import pytest
from iceberg_writers import write_table
from xlake_cli import ROOT, sync, xlake


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


def deltars_rows(table_dir, version):
    """delta-rs's rows at `version` (QueryBuilder: column mapping and deletion vectors)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    t = DeltaTable(str(table_dir), version=version)
    return pa.table(QueryBuilder().register("t", t).execute("select * from t").read_all()).to_pylist()


def by_id(rows):
    return sorted((tuple(sorted(r.items())) for r in rows), key=str)


@pytest.mark.parametrize("format_version", [1, 2])
def test_mirrored_to_delta_delta_rs_equals_pyiceberg_at_every_snapshot(tmp_path, format_version):
    table = write_table(tmp_path / "wh", f"t{format_version}", format_version)
    table_dir = table.metadata.location.removeprefix("file://")
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    for version, snapshot in enumerate(ancestry(table)):
        expected = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pylist()
        got = deltars_rows(table_dir, version)
        if "points" in got[0]:
            # The mirror maps columns by id (`delta.columnMapping.mode` = id, `points` is
            # field 3 whose physical name is `score`); delta-rs 1.6.6 resolves columns by
            # physical name, so a file written after the rename (column `points`, field
            # id 3) reads as null there. Compared apart: the old files' values come through.
            assert {r["id"]: r["points"] for r in got if r["id"] < 8} == {
                r["id"]: r["points"] for r in expected if r["id"] < 8}
            got = [{k: v for k, v in r.items() if k != "points"} for r in got]
            expected = [{k: v for k, v in r.items() if k != "points"} for r in expected]
        assert by_id(got) == by_id(expected), version
    # Incremental, then refused into its own format with nothing written.
    assert "nothing to mirror" in sync(table_dir, ["--target", "delta"]).stdout
    before = sorted(p.name for p in (pathlib.Path(table_dir) / "metadata").iterdir())
    same = sync(table_dir)
    assert same.returncode != 0
    assert "the source is Iceberg and the target is Iceberg too" in same.stderr
    assert sorted(p.name for p in (pathlib.Path(table_dir) / "metadata").iterdir()) == before



def test_data_files_outside_the_table_folder_are_removed_in_delta_too(tmp_path):
    """`write.data.path` elsewhere (a common Iceberg setting): an overwrite's removals of
    files outside the table folder reach the Delta log, so delta-rs equals pyiceberg at
    every snapshot (hostile review 2026-12-06: the removals were dropped, exit 0)."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("n")
    table = catalog.create_table(
        "n.t", schema=pa.schema([("id", pa.int64())]), location=f"file://{tmp_path}/t",
        properties={"write.data.path": f"file://{tmp_path}/t_data"})
    table.append(pa.table({"id": [1, 2]}))
    table.append(pa.table({"id": [3]}))
    table.overwrite(pa.table({"id": [9]}))
    synced = sync(str(tmp_path / "t"), ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    for version, snapshot in enumerate(ancestry(table)):
        expected = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pylist()
        assert by_id(deltars_rows(tmp_path / "t", version)) == by_id(expected), version
    check = xlake("check", "--target", "delta", "--deep", str(tmp_path / "t"))
    assert check.returncode == 0, check.stdout + check.stderr


def odd_partition_table(warehouse, column):
    """A pyiceberg table partitioned by identity on the string column `column`, whose name
    is not an Avro name: pyiceberg writes the manifest's partition field escaped
    (`part key` as `part_x20key`, `1st` as `_1st`) with `iceberg-field-name` and its
    field id."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    warehouse.mkdir(parents=True)
    catalog = SqlCatalog("c", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace_if_not_exists("db")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, column, StringType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), column))
    table = catalog.create_table("db.t", schema=schema, partition_spec=spec,
                                 properties={"format-version": "2"})
    values = ["eu", "us", None, "e f", "ü表"]
    rows = {"id": pa.array(range(len(values)), pa.int64()), column: pa.array(values, pa.string())}
    table.append(pa.table(rows, schema=table.schema().as_arrow()))
    return table


@pytest.mark.parametrize("column", ["part key", "1st", "a-b", "ünï"])
def test_a_partition_name_iceberg_escapes_reaches_delta(tmp_path, column):
    """The partition values of a field whose Avro name is escaped are the real ones in
    the Delta mirror (they once came through as null for every file)."""
    table = odd_partition_table(tmp_path / "wh", column)
    table_dir = table.metadata.location.removeprefix("file://")
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    expected = table.scan().to_arrow().to_pylist()
    assert by_id(deltars_rows(table_dir, 0)) == by_id(expected)
    log = (pathlib.Path(table_dir) / "_delta_log" / f"{0:020}.json").read_text()
    adds = [json.loads(line)["add"] for line in log.splitlines() if '"add"' in line]
    assert sorted(a["partitionValues"][column] or "" for a in adds) == sorted(
        r[column] or "" for r in expected)
    assert xlake("check", table_dir, "--target", "delta", "--deep").returncode == 0


def test_an_empty_string_partition_value_is_refused_for_delta(tmp_path):
    """pyiceberg appends a row whose identity partition value is `""`: Delta's protocol
    reads an empty partition value as null, so the commit is refused naming table,
    snapshot, file and field, and the versions before it stay as delta-rs reads them."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog = SqlCatalog("c", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace_if_not_exists("db")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("db.t", schema=schema, partition_spec=spec,
                                 properties={"format-version": "2"})
    for i, region in enumerate(["eu", ""]):
        rows = {"id": pa.array([i], pa.int64()), "region": pa.array([region], pa.string())}
        table.append(pa.table(rows, schema=table.schema().as_arrow()))
    table = catalog.load_table("db.t")
    table_dir = table.metadata.location.removeprefix("file://")
    first, second = [s.snapshot_id for s in ancestry(table)]
    for _ in range(2):
        synced = sync(table_dir, ["--target", "delta"])
        assert synced.returncode != 0
        for part in [table_dir, f"source commit {second}", "region=/", ".parquet",
                     "partition field region is the empty string"]:
            assert part in synced.stderr, (part, synced.stderr)
        logs = sorted(p.name for p in (pathlib.Path(table_dir) / "_delta_log").glob("*.json"))
        assert logs == [f"{0:020}.json"], logs
    expected = table.scan(snapshot_id=first).to_arrow().to_pylist()
    assert by_id(deltars_rows(table_dir, 0)) == by_id(expected)


def physical_names(table_dir, version):
    """`delta.columnMapping.physicalName` by column name in the schema of `version`."""
    from deltalake import DeltaTable

    schema = json.loads(DeltaTable(str(table_dir), version=version).schema().to_json())
    return {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"]}


def test_a_name_dropped_or_renamed_then_added_again_never_reads_the_old_fields_values(tmp_path):
    """pyiceberg drops `secret` (field 2) and adds a new `secret` (field 3); renames `score`
    (field 4) to `points` and adds a new `score` (field 5). The mirror gives each new
    field a physical name no other field had: delta-rs reads every version (no duplicate
    physical name), and the dropped values never come back as the new field's."""
    import pyarrow as pa
    from iceberg_writers import catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    cat = catalog(tmp_path / "wh")
    cat.create_namespace_if_not_exists("db")
    t = cat.create_table("db.reuse", schema=Schema(
        NestedField(1, "id", LongType()), NestedField(2, "secret", StringType()),
        NestedField(4, "score", DoubleType())), properties={"format-version": "2"})
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "secret": ["pw1", "pw2"],
                       "score": [1.5, 2.5]}))
    with t.update_schema() as u:
        u.delete_column("secret")
    with cat.load_table("db.reuse").update_schema() as u:
        u.add_column("secret", StringType())
    with cat.load_table("db.reuse").update_schema() as u:
        u.rename_column("score", "points")
    with cat.load_table("db.reuse").update_schema() as u:
        u.add_column("score", StringType())
    t = cat.load_table("db.reuse")
    # Without the new `score`: its file would hold a Parquet column `score` (field 5),
    # which readers resolving by physical name take for `points` (see docs/targets.md).
    t.append(pa.table({"id": pa.array([3], pa.int64()), "secret": ["new"], "points": [3.5]}))
    table_dir = t.metadata.location.removeprefix("file://")
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    snapshots = ancestry(t)
    last = len(snapshots) - 1
    names = physical_names(table_dir, last)
    assert len(set(names.values())) == len(names), names
    assert names["points"] == "score" and names["score"] != "score", names
    assert names["secret"] != "secret", names
    first = deltars_rows(table_dir, 0)
    assert {r["id"]: r["secret"] for r in first} == {1: "pw1", 2: "pw2"}
    got = deltars_rows(table_dir, last)
    # Old files' dropped `secret` and renamed `score` never read as the new fields; the
    # renamed field reads its old values.
    assert {r["id"]: r["secret"] for r in got if r["id"] < 3} == {1: None, 2: None}, got
    assert {r["id"]: r["score"] for r in got if r["id"] < 3} == {1: None, 2: None}, got
    assert {r["id"]: r["points"] for r in got if r["id"] < 3} == {1: 1.5, 2: 2.5}, got


def test_snapshots_pyiceberg_expired_are_history_to_check(tmp_path):
    """pyiceberg's expire_snapshots drops the oldest snapshots and the parent link of the
    oldest kept one: `check --target delta` (plain and `--deep --all`) calls the mirror's
    versions of them history, not unknown, and exits 0."""
    table = write_table(tmp_path / "wh", "t2", 2)
    table_dir = table.metadata.location.removeprefix("file://")
    assert sync(table_dir, ["--target", "delta"]).returncode == 0
    expired = [s.snapshot_id for s in ancestry(table)][:3]
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    for deep in ([], ["--deep", "--all"]):
        check = xlake("check", table_dir, "--target", "delta", *deep)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "unknown" not in check.stdout and "4 completed source commits, 7 snapshots" in check.stdout, (
            check.stdout)

def spark_table(spark, warehouse, name, version, ids=range(1, 7)):
    """A Spark+Iceberg table (hadoop catalog: `vN.metadata.json` and a version hint) of
    format `version`, deletes merge-on-read: an insert, a second insert, a row-level delete."""
    catalog = f"src_{name}"  # one catalog per warehouse: Spark keeps a catalog once loaded
    spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{catalog}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{catalog}.warehouse", str(warehouse))
    spark.sql(
        f"CREATE TABLE {catalog}.db.{name} (id bigint, region string) USING iceberg PARTITIONED BY (region) "
        f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')"
    )
    values = ", ".join(f"({i}, '{'eu' if i % 2 else 'us'}')" for i in ids)
    spark.sql(f"INSERT INTO {catalog}.db.{name} VALUES {values}")
    spark.sql(f"INSERT INTO {catalog}.db.{name} VALUES (100, 'eu'), (101, 'us')")
    spark.sql(f"DELETE FROM {catalog}.db.{name} WHERE id IN (1, 2, 100)")
    return warehouse / "db" / name


def test_spark_v3_deletion_vectors_reach_delta_in_place(tmp_path, spark):
    table_dir = spark_table(spark, tmp_path / "wh", "dv3", 3)
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    history = spark.sql("SELECT snapshot_id FROM src_dv3.db.dv3.history ORDER BY made_current_at").collect()
    for version, row in enumerate(history):
        expected = spark.sql(f"SELECT * FROM src_dv3.db.dv3 VERSION AS OF {row.snapshot_id}").collect()
        expected = [r.asDict() for r in expected]
        assert by_id(deltars_rows(table_dir, version)) == by_id(expected), version
    # Delta readers check a vector file's first byte (format version 1), which a Puffin
    # file does not have: the blobs' bytes are copied into Delta vector files, undecoded.
    dvs = [
        json.loads(line)["add"]["deletionVector"]
        for log in sorted((table_dir / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if '"add"' in line and json.loads(line).get("add", {}).get("deletionVector")
    ]
    assert dvs, "the delete made deletion vectors"
    assert all("/deletion_vector_" in dv["pathOrInlineDv"] for dv in dvs), dvs


def assert_delta_equals_spark(spark, table, table_dir, start=0):
    """delta-rs reads every Delta version from `start` on as Spark reads the snapshot it
    mirrors; the number of snapshots."""
    history = spark.sql(f"SELECT snapshot_id FROM {table}.history ORDER BY made_current_at").collect()
    for version, row in list(enumerate(history))[start:]:
        expected = [r.asDict() for r in spark.sql(f"SELECT * FROM {table} VERSION AS OF {row.snapshot_id}").collect()]
        assert by_id(deltars_rows(table_dir, version)) == by_id(expected), version
    return len(history)


def test_spark_v2_position_deletes_become_delta_deletion_vectors(tmp_path, spark):
    table_dir = spark_table(spark, tmp_path / "wh", "pos2", 2)
    table = "src_pos2.db.pos2"
    delete_files = sorted(p.name for p in table_dir.rglob("*-deletes.parquet"))
    assert delete_files, "Spark wrote position-delete files"
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    assert assert_delta_equals_spark(spark, table, table_dir) == 3
    # More deletes for files that already had some (id 1 of the first insert's `eu`
    # file is deleted), now partition-scoped: one delete file covers several data files.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.granularity'='partition')")
    spark.sql(f"DELETE FROM {table} WHERE id IN (3, 4, 5, 101)")
    spark.sql(f"INSERT INTO {table} VALUES (200, 'eu')")
    synced = sync(table_dir, ["--target", "delta"])
    assert synced.returncode == 0, synced.stderr
    assert len(list((table_dir / "_delta_log").glob("*.json"))) == 5, synced.stdout
    assert assert_delta_equals_spark(spark, table, table_dir, start=3) == 5
    # Delete files are only read; the vectors are Delta vector files, one per version.
    assert set(delete_files) <= {p.name for p in table_dir.rglob("*-deletes.parquet")}
    dvs = [
        json.loads(line)["add"]["deletionVector"]
        for log in sorted((table_dir / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if json.loads(line).get("add", {}).get("deletionVector")
    ]
    assert dvs and all(dv["storageType"] == "u" for dv in dvs), dvs
    assert len({dv["pathOrInlineDv"] for dv in dvs}) == len(list(table_dir.glob("deletion_vector_*.bin"))) == 2
