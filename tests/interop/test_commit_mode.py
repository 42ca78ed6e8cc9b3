"""In-commit mode as a write job uses it: after each Delta write made with the `deltalake`
package, `xlake commit <table> --version <v>` must succeed, and at every version the Iceberg
readers return the rows delta-rs returns."""
import delta_source as delta
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from readers import PyIceberg, snapshot_for
from rows import canonical_rows
from xlake_cli import xlake


def test_every_write_job_ends_mirrored(tmp_path, engines):
    table = tmp_path / "orders"
    batches = [
        ("append", pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.5, 2.0, 3.25]})),
        ("append", pa.table({"id": [4], "region": ["apac"], "amount": [9.0]})),
        ("delete", "region = 'us'"),
        ("overwrite", pa.table({"id": [5, 6], "region": ["eu", "eu"], "amount": [0.5, 0.75]})),
        ("update", None),
    ]
    for kind, arg in batches:
        if kind in ("append", "overwrite"):
            write_deltalake(str(table), arg, mode=kind, partition_by=["region"])
        elif kind == "delete":
            DeltaTable(str(table)).delete(arg)
        else:
            DeltaTable(str(table)).update(updates={"amount": "amount * 2"}, predicate="id = 5")
        version = DeltaTable(str(table)).version()
        result = xlake("commit", table, "--version", version)
        assert result.returncode == 0, f"after {kind} (version {version}): {result.stdout}{result.stderr}"
        assert f"source commit {version} is mirrored" in result.stdout

    snapshots = PyIceberg().snapshots(str(table))
    assert len(snapshots) == len(batches)
    for engine in ("pyiceberg", "duckdb"):
        reader = engines(engine)
        for version in range(len(batches)):
            want_table = delta.oracle_table(table, version)
            columns = want_table.column_names
            want = canonical_rows(want_table.to_pylist(), columns)
            got = reader.rows_at_snapshot(str(table), snapshot_for(snapshots, str(version))["snapshot_id"])
            assert canonical_rows(got, columns) == want, f"{engine} at version {version}"


def test_a_version_not_yet_written_fails(tmp_path):
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": [1]}))
    result = xlake("commit", table, "--version", 5)
    assert result.returncode != 0
    assert "no such completed commit" in result.stderr
