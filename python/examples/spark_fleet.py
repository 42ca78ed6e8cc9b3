"""Sync a fleet of tables on the Spark cluster you already run: each executor runs the
`xlake` binary of the wheel (`pip install xlake` on the executors, or ship it in the
job's Python environment), one table per task element; the driver collects a report.
`xlake.try_sync` never raises for a table's own failure, so one broken table is reported
and never stops the others. Every process may sync any table: the commit point is
put-if-absent in the table's own metadata/, so overlapping runs are safe.

    spark-submit spark_fleet.py --partitions 16 --report report.json tables.txt
    python spark_fleet.py --master 'local[2]' tables.txt      (one location per line)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from pyspark.sql import SparkSession

import xlake


def sync_fleet(spark: SparkSession, tables: list[str], partitions: int) -> list[xlake.SyncOutcome]:
    """One `xlake.try_sync` per table, `partitions` tasks at a time across the executors."""
    return spark.sparkContext.parallelize(tables, partitions).map(xlake.try_sync).collect()


def report(outcomes: list[xlake.SyncOutcome]) -> dict:
    """What the driver writes down: counts, and every failure with its reason."""
    failed = [o for o in outcomes if not o.ok]
    return {
        "tables": len(outcomes),
        "synced": len(outcomes) - len(failed),
        "snapshots_written": sum(len(o.result.written) for o in outcomes if o.result),
        "failed": [dataclasses.asdict(o) for o in failed],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tables", help="a file with one table location per line")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", help="e.g. local[2]; spark-submit's own when absent")
    parser.add_argument("--report", help="write the report here as JSON")
    args = parser.parse_args()
    with open(args.tables) as f:
        tables = [line.strip() for line in f if line.strip()]
    builder = SparkSession.builder.appName("xlake-fleet").config("spark.ui.enabled", "false")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        summary = report(sync_fleet(spark, tables, args.partitions))
    finally:
        spark.stop()
    text = json.dumps(summary, indent=2)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    print(
        f"{summary['synced']} of {summary['tables']} tables synced, {len(summary['failed'])} failed"
    )
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
