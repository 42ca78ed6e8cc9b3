"""Fixtures: the foundation table written by xlake, one Spark session for the run, and the
three Iceberg readers (made on first use)."""
import glob
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
JDBC_JARS = [j for j in ("/usr/share/java/sqlite-jdbc.jar", "/usr/share/java/postgresql.jar") if os.path.exists(j)]


@pytest.fixture(scope="session")
def foundation(tmp_path_factory):
    out = tmp_path_factory.mktemp("foundation")
    subprocess.run(
        ["cargo", "run", "--quiet", "--example", "foundation_table", "--", str(out)],
        cwd=ROOT,
        check=True,
    )
    expected = json.loads((out / "expected.json").read_text())
    return expected


@pytest.fixture(scope="session")
def spark():
    import snowpark_connect_deps_iceberg
    from pyspark.sql import SparkSession

    jars = glob.glob(
        os.path.join(os.path.dirname(snowpark_connect_deps_iceberg.__file__), "jars", "iceberg-spark-runtime-3.5_2.12-*.jar")
    )
    assert jars, "Iceberg Spark runtime jar not found"
    session = (
        SparkSession.builder.master("local[1]")
        .appName("xlake-interop")
        .config("spark.jars", jars[0])
        # JDBC drivers (Debian's libxerial-sqlite-jdbc-java, libpostgresql-jdbc-java) for
        # Iceberg's JdbcCatalog in test_catalog.py; on the driver's class path so that
        # java.sql.DriverManager finds them.
        .config("spark.driver.extraClassPath", ":".join(JDBC_JARS))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def engines(request):
    """engines(name) -> the reader for "pyiceberg", "duckdb" or "spark", made once per run."""
    from readers import DuckDB, PyIceberg, Spark

    made = {}

    def get(name):
        if name not in made:
            if name == "pyiceberg":
                made[name] = PyIceberg()
            elif name == "duckdb":
                made[name] = DuckDB()
            else:
                made[name] = Spark(request.getfixturevalue("spark"))
        return made[name]

    return get
