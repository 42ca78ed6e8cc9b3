"""Trino 476 finds mirrored tables by name: one coordinator on loopback (catalog_servers.trino,
Java 25) with three Iceberg catalogs, each over a server the suite starts: `jdbc` on the
PostgreSQL cluster of test_catalog.py, `rest` on Apache Iceberg's REST fixture 1.10.1, and
`hive_metastore` on the Hive standalone metastore 4.0.1. xlake syncs a Delta table into each
after every commit; Trino lists it, reads it equal to delta-rs at the newest version, and
`FOR VERSION AS OF <snapshot id>` returns each mirrored commit. And Trino's Delta Lake
connector reads xlake's Delta target (a Hudi fixture mirrored with `--target delta`),
registered by `register_table`, equal to hudi-rs at every version.

Slow (Trino's cold start is about a minute on 2 cores, its unpacked server 900 MB): run by
`.ci/run-slow`, which sets XLAKE_SLOW=1; skipped otherwise."""
import datetime as dt
import json
import os
import pathlib
import re

import catalog_servers
import pytest
from rows import canonical_rows
from test_catalog import oracle, postgres, write  # noqa: F401 (postgres: the fixture)
from xlake_cli import xlake

pytestmark = pytest.mark.skipif(not os.environ.get("XLAKE_SLOW"), reason="slow: .ci/run-slow runs it (XLAKE_SLOW=1)")

NAMESPACE = f"sales{os.getpid()}"


@pytest.fixture(scope="module")
def servers(tmp_path_factory, postgres):  # noqa: F811
    if not catalog_servers.TRINO_JAVA.exists():
        pytest.skip(f"Trino 476 needs Java 24 or newer: {catalog_servers.TRINO_JAVA} is missing (set TRINO_JAVA_HOME)")
    folder = tmp_path_factory.mktemp("trino")
    hms, hms_uri = catalog_servers.hive_metastore(folder)
    rest, rest_url = catalog_servers.iceberg_rest(folder)
    pg = f"127.0.0.1:{postgres['port']}/postgres"
    local = {"fs.hadoop.enabled": "true"}  # the tables are local folders
    catalogs = {
        "pg": {"iceberg.catalog.type": "jdbc", "iceberg.jdbc-catalog.catalog-name": "xlake",
               "iceberg.jdbc-catalog.driver-class": "org.postgresql.Driver",
               "iceberg.jdbc-catalog.connection-url": f"jdbc:postgresql://{pg}",
               "iceberg.jdbc-catalog.connection-user": "xlake",
               "iceberg.jdbc-catalog.connection-password": postgres["password"],
               "iceberg.jdbc-catalog.default-warehouse-dir": f"{folder}/warehouse", **local},
        "rest": {"iceberg.catalog.type": "rest", "iceberg.rest-catalog.uri": rest_url, **local},
        "hms": {"iceberg.catalog.type": "hive_metastore", "hive.metastore.uri": hms_uri, **local},
        # Trino's Delta Lake connector over a file metastore, for xlake's Delta target.
        "dl": {"connector.name": "delta_lake", "hive.metastore": "file",
               "hive.metastore.catalog.dir": f"file://{folder}/delta-metastore",
               "delta.register-table-procedure.enabled": "true", **local},
    }
    trino, url = catalog_servers.trino(folder, catalogs)
    started = []
    try:
        for server in (hms, rest, trino):
            server.start(timeout=300)
            started.append(server)
        catalog_servers.trino_ready(url)
        yield {
            "url": url,
            "pg": ([f"postgresql://xlake@{pg}", "--catalog-name", "xlake"], {"PGPASSWORD": postgres["password"]}),
            "rest": ([f"rest+{rest_url}"], {}),
            "hms": ([hms_uri], {}),
        }
    finally:
        for server in reversed(started):
            server.stop()


def current(table):
    """xlake's current snapshot id."""
    version = (pathlib.Path(table) / "metadata" / "version-hint.text").read_text()
    metadata = json.loads((pathlib.Path(table) / "metadata" / f"v{version}.metadata.json").read_text())
    return metadata["current-snapshot-id"]


TRINO_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)( UTC)?$")


def trino_timestamps(row):
    """Trino's client protocol sends timestamps as text (`2024-01-15 15:00:00.000 UTC`):
    back to datetimes, so that rows compare as other engines' do."""
    def parse(value):
        m = TRINO_TIMESTAMP.match(value) if isinstance(value, str) else None
        if not m:
            return value
        t = dt.datetime.fromisoformat(m.group(1))
        return t.replace(tzinfo=dt.UTC) if m.group(2) else t
    return {k: parse(v) for k, v in row.items()}


def rows(url, sql, columns):
    return canonical_rows(catalog_servers.trino_query(url, sql), columns)


@pytest.mark.parametrize("kind", ["pg", "rest", "hms"])
def test_trino_reads_each_mirrored_commit_by_name(tmp_path, servers, kind):
    table = tmp_path / "orders"
    catalog, env = servers[kind]
    mirrored = []
    for step in range(4):
        version = write(table, step)
        result = xlake("sync", table, "--catalog", *catalog, "--catalog-table", f"{NAMESPACE}.orders",
                       env={**os.environ, **env})
        assert result.returncode == 0, result.stdout + result.stderr
        mirrored.append((current(table), version))
    url, name = servers["url"], f"{kind}.{NAMESPACE}.orders"
    listed = catalog_servers.trino_query(url, f"SHOW TABLES FROM {kind}.{NAMESPACE}")
    assert {"Table": "orders"} in listed, listed
    columns, want = oracle(table, mirrored[-1][1])
    assert rows(url, f"SELECT * FROM {name}", columns) == want, f"{kind}: newest"
    for snapshot, version in mirrored:
        columns, want = oracle(table, version)
        got = rows(url, f"SELECT * FROM {name} FOR VERSION AS OF {snapshot}", columns)
        assert got == want, f"{kind}: FOR VERSION AS OF {snapshot} (Delta version {version})"


def test_trinos_delta_connector_reads_every_version_of_a_delta_target(tmp_path, servers):
    import hudi_source as hudi
    from test_delta_target import version_of, zoned
    from test_hudi import oracle as hudi_oracle

    name = "sample_table_cow_v9_txns_simple_nometa"
    table = hudi.extract(name, tmp_path)
    result = xlake("sync", table, "--target", "delta")
    assert result.returncode == 0, result.stdout + result.stderr
    url, schema = servers["url"], f"dl.{NAMESPACE}"
    catalog_servers.trino_query(url, f"CREATE SCHEMA IF NOT EXISTS {schema} WITH (location = 'file://{tmp_path}/schema')")
    catalog_servers.trino_query(url, f"CALL dl.system.register_table(schema_name => '{NAMESPACE}', "
                                     f"table_name => 'trips', table_location => 'file://{table}')")
    at = version_of(table)
    assert at, "no Delta version written"
    for requested, action, _ in hudi.snapshot_instants(table):
        columns, want = hudi_oracle(name, str(table), requested)
        v = at[requested]
        read = catalog_servers.trino_query(url, f"SELECT * FROM {schema}.trips FOR VERSION AS OF {v}")
        got = canonical_rows([trino_timestamps(r) for r in read], columns, zoned(table, v))
        assert got == want, f"{name} @ {requested} ({action}), Delta version {v}: Trino's rows differ from hudi-rs"
