"""The examples in python/examples/, run through the installed wheel:
- the Airflow task's and the Dagster asset's bodies, called directly (neither Airflow nor
  Dagster is installed: no scheduler server, no decorator);
- the PySpark write followed by `xlake.commit`, with delta-spark's jars, local Spark;
- the Spark fleet over 200 generated tables on `local[2]`, one of them broken."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

from tables import break_table, delta_table
from wheel_site import ROOT, env_with

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
JARS = ROOT / "tests" / "interop" / ".jars"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_airflow_task_body_syncs(xlake, tmp_path):
    dag = load("airflow_dag")
    table = delta_table(tmp_path / "t")
    result = dag.mirror_table(str(table))
    assert result["format"] == "DELTA" and result["written"][0]["commit"] == "0"
    json.dumps(result)  # an XCom value


def test_dagster_asset_body_syncs(xlake, tmp_path):
    assets = load("dagster_assets")
    table = delta_table(tmp_path / "t")
    assert assets.mirror_table(str(table))["snapshots_written"] == 1
    assert assets.mirror_table(str(table))["snapshots_written"] == 0


def test_spark_write_then_commit_in_the_same_driver(site, tmp_path):
    if not (JARS / "delta-spark-3.3.jar").is_file():
        subprocess.run([str(ROOT / ".ci" / "jars")], check=True)
    table = tmp_path / "orders"
    jars = f"{JARS / 'delta-spark-3.3.jar'},{JARS / 'delta-storage-3.3.jar'}"
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "spark_write_commit.py"),
            str(table),
            "--jars",
            jars,
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        env=env_with(site),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "version 0 mirrored: 1 snapshots written" in run.stdout

    from pyiceberg.table import StaticTable

    assert StaticTable.from_metadata(str(table)).scan().to_arrow().num_rows == 3


def test_spark_fleet_over_200_tables_reports_the_broken_one(site, xlake, tmp_path):
    tables = [delta_table(tmp_path / f"t{i:03}", rows=1 + i % 5) for i in range(200)]
    break_table(tables[57])
    listing = tmp_path / "tables.txt"
    listing.write_text("".join(f"{t}\n" for t in tables))
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "spark_fleet.py"),
            str(listing),
            "--master",
            "local[2]",
            "--partitions",
            "8",
            "--report",
            str(tmp_path / "report.json"),
        ],
        capture_output=True,
        text=True,
        env=env_with(site),
    )
    took = time.monotonic() - started
    assert run.returncode == 1, run.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["tables"], report["synced"], report["snapshots_written"]) == (200, 199, 199)
    [failed] = report["failed"]
    assert failed["location"] == str(tables[57]) and failed["kind"] == "Failed"
    assert "00000000000000000000.json" in failed["error"]
    for t in tables[:57] + tables[58:]:
        assert xlake.check(t).consistent
    print(f"spark fleet: 200 tables in {took:.1f} s")
