"""A plain Hive-partitioned folder of Parquet files (written by pyarrow's dataset writer),
mirrored in place by `xlake sync --format parquet`: after every sync each Iceberg reader
returns exactly the folder's rows as pyarrow reads them, while files are added and removed
between syncs; a sync with nothing changed writes nothing; bad files fail with nothing
written."""
import json
import os
import pathlib
import subprocess
import time

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from readers import ENGINES, current_metadata_path, snapshot_for
from rows import canonical_rows
from xlake_cli import sync, xlake

COLUMNS = ["id", "name", "score", "region"]


def folder_rows(table):
    """The oracle: pyarrow reads the folder as a Hive-partitioned dataset, skipping
    `metadata/` (xlake's) and files starting with `_` or `.` as pyarrow itself does."""
    files = [
        str(p) for p in pathlib.Path(table).rglob("*.parquet")
        if "metadata" not in p.relative_to(table).parts
        and not any(part.startswith(("_", ".")) for part in p.relative_to(table).parts)
    ]
    if not files:
        return []
    dataset = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(table))
    rows = dataset.to_table().to_pylist()
    return canonical_rows(rows, COLUMNS)


def write(table, ids, region, name="part-{i}.parquet", basename=None):
    batch = pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i}" for i in ids], pa.string()),
        "score": pa.array([i * 1.5 for i in ids], pa.float64()),
        "region": pa.array([region] * len(ids), pa.string()),
    })
    ds.write_dataset(
        batch, table, format="parquet", partitioning=["region"], partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore", basename_template=basename or f"{region}-{ids[0]}-{{i}}.parquet",
    )


def snapshot_count(table):
    meta = pathlib.Path(table) / "metadata"
    hint = (meta / "version-hint.text").read_text()
    return len(json.loads((meta / f"v{hint}.metadata.json").read_text())["snapshots"])


@pytest.mark.parametrize("engine", ENGINES)
def test_folder_rows_after_every_sync(tmp_path, engines, engine):
    reader = engines(engine)
    table = tmp_path / "t"
    write(str(table), [1, 2, 3], "eu")
    write(str(table), [4, 5], "us")
    steps = [
        lambda: None,
        lambda: write(str(table), [6, 7], "eu"),
        lambda: os.remove(next((table / "region=us").glob("*.parquet"))),
        lambda: write(str(table), [8], "apac"),
    ]
    for i, step in enumerate(steps):
        step()
        # A job still writing: ignored until it moves its files into place.
        (table / "_temporary").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": [99]}), table / "_temporary" / "x.parquet")
        result = sync(table, ["--format", "parquet"])
        assert result.returncode == 0, result.stderr
        assert snapshot_count(table) == i + 1
        # Generation i+1 is the listing this sync mirrored.
        newest = snapshot_for(engines("pyiceberg").snapshots(str(table)), str(i + 1))
        got = canonical_rows(reader.rows_at_snapshot(str(table), newest["snapshot_id"]), COLUMNS)
        assert got == folder_rows(table), f"{engine} after sync {i + 1}"
    # Nothing changed: nothing written; check (the format read from the mirror) is clean.
    again = sync(table)
    assert again.returncode == 0, again.stderr
    assert snapshot_count(table) == len(steps)
    check = xlake("check", table, "--deep")
    assert check.returncode == 0, check.stdout + check.stderr
    # A change not yet mirrored is lag, reported by check.
    write(str(table), [9], "eu")
    lagging = xlake("check", table)
    assert lagging.returncode == 1, lagging.stdout


def test_a_file_rewritten_in_place_is_found_by_filtered_scans(tmp_path, engines):
    """A file rewritten under its name (3 rows become 5, ids 7-11) gets an entry with its
    new row count, size and bounds: filtered scans, which skip files by their bounds, find
    its rows as pyarrow does."""
    from pyiceberg.table import StaticTable

    table = tmp_path / "t"
    write(str(table), [1, 2, 3], "eu", basename="a-{i}.parquet")
    write(str(table), [4, 5], "eu", basename="b-{i}.parquet")
    first = sync(table, ["--format", "parquet"])
    assert first.returncode == 0, first.stderr
    write(str(table), [7, 8, 9, 10, 11], "eu", basename="a-{i}.parquet")
    second = sync(table)
    assert second.returncode == 0, second.stderr
    expected = sorted(r["id"] for r in folder_rows(table) if r["id"] >= 7)
    assert expected == [7, 8, 9, 10, 11]
    scan = StaticTable.from_metadata(current_metadata_path(table)).scan(row_filter="id >= 7")
    assert sorted(scan.to_arrow().column("id").to_pylist()) == expected, "pyiceberg"
    duck = engines("duckdb").con.execute("SELECT id FROM iceberg_scan(?) WHERE id >= 7", [str(table)])
    assert sorted(r[0] for r in duck.fetchall()) == expected, "duckdb"
    check = xlake("check", table, "--deep")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_file_copied_onto_with_its_times_kept_is_found_by_filtered_scans(tmp_path, engines):
    """`cp -p` of another file of the same size and an older time onto a mirrored file:
    its inode, size and times stay, only its status change time moves. The next sync
    replaces its entry, so filtered scans find its rows (before: its old rows and bounds
    were kept, the scans found none, exit 0); a sync after it writes nothing, nor after a
    `chmod` once it is mirrored."""
    from pyiceberg.table import StaticTable

    table, other = tmp_path / "t", tmp_path / "other"
    write(str(other), [7, 8, 9], "eu", basename="a-{i}.parquet")
    write(str(table), [1, 2, 3], "eu", basename="a-{i}.parquet")
    write(str(table), [4, 5], "eu", basename="b-{i}.parquet")
    copied, onto = other / "region=eu" / "a-0.parquet", table / "region=eu" / "a-0.parquet"
    assert copied.stat().st_size == onto.stat().st_size
    an_hour_ago = time.time() - 3600
    for f in [copied, onto, table / "region=eu" / "b-0.parquet"]:
        os.utime(f, (an_hour_ago, an_hour_ago))
    first = sync(table, ["--format", "parquet"])
    assert first.returncode == 0, first.stderr
    time.sleep(0.02)
    subprocess.run(["cp", "-p", str(copied), str(onto)], check=True)
    assert onto.stat().st_mtime == an_hour_ago
    second = sync(table)
    assert second.returncode == 0, second.stderr
    assert snapshot_count(table) == 2
    expected = sorted(r["id"] for r in folder_rows(table) if r["id"] >= 7)
    assert expected == [7, 8, 9]
    scan = StaticTable.from_metadata(current_metadata_path(table)).scan(row_filter="id >= 7")
    assert sorted(scan.to_arrow().column("id").to_pylist()) == expected, "pyiceberg"
    duck = engines("duckdb").con.execute("SELECT id FROM iceberg_scan(?) WHERE id >= 7", [str(table)])
    assert sorted(r[0] for r in duck.fetchall()) == expected, "duckdb"
    check = xlake("check", table, "--deep")
    assert check.returncode == 0, check.stdout + check.stderr
    assert sync(table).returncode == 0 and snapshot_count(table) == 2, "unchanged: nothing written"
    onto.chmod(0o600)
    assert sync(table).returncode == 0 and snapshot_count(table) == 3, "a chmod: one snapshot"
    assert sync(table).returncode == 0 and snapshot_count(table) == 3, "then nothing"


def test_bad_files_fail_with_nothing_written(tmp_path):
    table = tmp_path / "t"
    write(str(table), [1, 2], "eu")
    (table / "region=eu" / "notes.parquet").write_text("not parquet at all")
    result = sync(table, ["--format", "parquet"])
    assert result.returncode != 0
    assert "notes.parquet" in result.stderr, result.stderr
    assert not (table / "metadata").exists()
    (table / "region=eu" / "notes.parquet").unlink()
    # A file whose column cannot be read through the newest file's type.
    pq.write_table(pa.table({"id": pa.array(["x"]), "name": ["a"]}), table / "region=eu" / "old.parquet")
    os.utime(table / "region=eu" / "old.parquet", (1, 1))
    result = sync(table, ["--format", "parquet"])
    assert result.returncode != 0
    assert "old.parquet" in result.stderr and "id" in result.stderr, result.stderr
    assert not (table / "metadata").exists()


def test_never_detected_without_format(tmp_path):
    table = tmp_path / "t"
    write(str(table), [1], "eu")
    result = sync(table)
    assert result.returncode != 0
    assert "not a" in result.stderr, result.stderr
    assert not (table / "metadata").exists()
