"""Spark 3.5.6 + Iceberg 1.10.2's `HiveCatalog` reading a table by name from a Hive 4
metastore, in a process of its own: Spark's built-in Hive 2.3.9 client calls `get_table`,
which Hive 4 no longer serves, so Hive 4's own metastore client (hive-standalone-metastore-
common 4.0.1 and libthrift 0.16, from the metastore's jars) goes first on the driver's class
path, which the suite's shared Spark session cannot change.

    python spark_hive4.py <thrift://host:port> <db>.<table>

prints {"tables": [names in <db>], "rows": [rows of the table]} as JSON."""
import glob
import json
import os
import sys

import snowpark_connect_deps_iceberg
from catalog_servers import JARS
from pyspark.sql import SparkSession


def main(uri, name):
    runtime = glob.glob(os.path.join(os.path.dirname(snowpark_connect_deps_iceberg.__file__), "jars",
                                     "iceberg-spark-runtime-3.5_2.12-*.jar"))[0]
    hive4 = JARS / "hive-metastore-4.0.1"
    client = [hive4 / "hive-standalone-metastore-common-4.0.1.jar", hive4 / "libthrift-0.16.0.jar"]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", runtime)
        .config("spark.driver.extraClassPath", ":".join(map(str, client)))
        .config("spark.sql.catalog.hms", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.hms.type", "hive")
        .config("spark.sql.catalog.hms.uri", uri)
        .config("spark.sql.catalog.hms.cache-enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        db = name.split(".")[0]
        tables = [r.tableName for r in spark.sql(f"SHOW TABLES IN hms.{db}").collect()]
        rows = [r.asDict(recursive=True) for r in spark.table(f"hms.{name}").collect()]
        print(json.dumps({"tables": tables, "rows": rows}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
