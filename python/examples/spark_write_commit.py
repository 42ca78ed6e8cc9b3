"""A PySpark job that writes a Delta table, then, in the same driver, mirrors the version it
just wrote as an Iceberg snapshot with `xlake.commit` (in-commit mode: the job fails if
the mirror fails, so no reader of the Iceberg side is left behind silently).

    spark-submit --packages io.delta:delta-spark_2.12:3.3.2 spark_write_commit.py /data/orders
    python spark_write_commit.py /tmp/orders --jars delta-spark.jar,delta-storage.jar
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

import xlake

DELTA = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def write_and_commit(spark: SparkSession, table: str) -> xlake.SyncResult:
    orders = spark.createDataFrame(
        [(1, "eu", 9.5), (2, "us", 3.25), (3, "eu", 12.0)], "id long, region string, price double"
    )
    orders.write.format("delta").mode("append").partitionBy("region").save(table)
    # The version this write made: the newest in the table's history.
    version = spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").first()["version"]
    return xlake.commit(table, version=int(version))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("table")
    parser.add_argument("--jars", help="comma-separated delta-spark and delta-storage jars")
    parser.add_argument("--master", default=None)
    args = parser.parse_args()
    builder = SparkSession.builder.appName("write-then-mirror").config("spark.ui.enabled", "false")
    for key, value in DELTA.items():
        builder = builder.config(key, value)
    if args.jars:
        builder = builder.config("spark.jars", args.jars)
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        result = write_and_commit(spark, args.table)
    finally:
        spark.stop()
    print(f"version {result.commit} mirrored: {len(result.written)} snapshots written")


if __name__ == "__main__":
    main()
