"""Real catalog servers, started once per module from pinned jars (catalog_servers.py):
Apache Iceberg's REST fixture 1.10.1. xlake registers a Delta table on the first sync and
moves it by commitTable (requirements on the table's uuid and `main`'s snapshot) after each
later commit; pyiceberg, Spark and DuckDB read it by name and equal delta-rs at the mirrored
version. Also: concurrent syncs end at the newest snapshot, another writer's commit is
refused, and a stopped server leaves `metadata/` published and the pointer for the next
sync."""
import concurrent.futures
import itertools
import json
import os
import pathlib

import catalog_servers
import pytest
from rows import canonical_rows
from test_catalog import oracle, write
from xlake_cli import xlake

NAMES = itertools.count()


@pytest.fixture(scope="module")
def iceberg_rest(tmp_path_factory):
    folder = tmp_path_factory.mktemp("iceberg-rest")
    server, url = catalog_servers.iceberg_rest(folder)
    server.start()
    server.url = url
    try:
        yield server
    finally:
        server.stop()


def table_name():
    return f"ns{os.getpid()}_{next(NAMES)}.orders"


def run(server, name, *args):
    return xlake(*args, "--catalog", f"rest+{server.url}", "--catalog-table", name, env=dict(os.environ))


def entry(server, name):
    """The entry as the catalog returns it (metadata-location and metadata)."""
    ns, table = name.rsplit(".", 1)
    return catalog_servers.http_json("GET", f"{server.url}/v1/namespaces/{ns}/tables/{table}")


def ours(table):
    """xlake's current metadata: its file and its content."""
    version = (pathlib.Path(table) / "metadata" / "version-hint.text").read_text()
    path = pathlib.Path(table) / "metadata" / f"v{version}.metadata.json"
    return str(path), json.loads(path.read_text())


def main_of(metadata):
    return metadata["refs"]["main"]["snapshot-id"]


def reader(server):
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("rest", uri=server.url)


def by_name_pyiceberg(server, name, columns):
    t = reader(server).load_table(name)
    rows = [r for b in t.scan().to_arrow_batch_reader() for r in b.to_pylist()]
    return canonical_rows(rows, columns)


def by_name_spark(spark, catalog, conf, tmp_path, name, columns):
    prefix = f"spark.sql.catalog.{catalog}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.warehouse", f"file://{tmp_path}/spark-wh")
    spark.conf.set(f"{prefix}.cache-enabled", "false")
    for k, v in conf.items():
        spark.conf.set(f"{prefix}.{k}", v)
    rows = spark.table(f"{catalog}.{name}").collect()
    return canonical_rows([r.asDict(recursive=True) for r in rows], columns)


def by_name_duckdb(server, name, columns):
    from readers import DuckDB

    con = DuckDB().con
    con.execute("LOAD httpfs")
    con.execute(f"ATTACH 'warehouse' AS rest_cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')")
    rows = con.execute(f"SELECT * FROM rest_cat.{name}").fetch_arrow_table().to_pylist()
    return canonical_rows(rows, columns)


def test_first_sync_registers_and_each_commit_moves_the_pointer(tmp_path, iceberg_rest, spark):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    result = run(iceberg_rest, name, "sync", table)
    assert result.returncode == 0 and "catalog: registered at" in result.stdout, result.stdout + result.stderr
    first = entry(iceberg_rest, name)
    assert first["metadata-location"] == ours(table)[0]
    seen = [first["metadata-location"]]
    for step in range(1, 11):
        version = write(table, step)
        result = run(iceberg_rest, name, "commit", table, "--version", version)
        assert result.returncode == 0 and "catalog: moved from" in result.stdout, result.stdout + result.stderr
        now = entry(iceberg_rest, name)
        # The server wrote its own metadata file; the entry holds xlake's snapshots.
        assert now["metadata-location"] not in seen
        seen.append(now["metadata-location"])
        assert main_of(now["metadata"]) == main_of(ours(table)[1])
        assert {s["snapshot-id"] for s in now["metadata"]["snapshots"]} == {s["snapshot-id"] for s in ours(table)[1]["snapshots"]}
        columns, want = oracle(table, version)
        assert by_name_pyiceberg(iceberg_rest, name, columns) == want, f"pyiceberg at version {version}"
        if step in (1, 10):
            conf = {"type": "rest", "uri": iceberg_rest.url}
            assert by_name_spark(spark, f"xl_ice_{step}", conf, tmp_path, name, columns) == want, f"spark at {version}"
            assert by_name_duckdb(iceberg_rest, name, columns) == want, f"duckdb at {version}"
    assert run(iceberg_rest, name, "check", table).returncode == 0
    # An expiry moves the entry too: remove-snapshots.
    result = run(iceberg_rest, name, "expire", table, "--keep-snapshots", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    now = entry(iceberg_rest, name)["metadata"]
    assert len(now["snapshots"]) == 3
    assert {s["snapshot-id"] for s in now["snapshots"]} == {s["snapshot-id"] for s in ours(table)[1]["snapshots"]}
    assert run(iceberg_rest, name, "check", table).returncode == 0
    # Cleanup deletes none of the server's metadata files (it deletes only names xlake writes).
    server_files = {p.rsplit("/", 1)[1] for p in seen[1:]}
    assert server_files <= {p.name for p in (table / "metadata").iterdir()}
    result = xlake("cleanup", table, "--older-than", "0s", "--no-writer-running")
    assert result.returncode == 0, result.stdout + result.stderr
    assert server_files <= {p.name for p in (table / "metadata").iterdir()}
    columns, want = oracle(table, version)
    assert by_name_pyiceberg(iceberg_rest, name, columns) == want, "pyiceberg after expire and cleanup"


def test_concurrent_syncs_end_at_the_newest_snapshot(tmp_path, iceberg_rest):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(iceberg_rest, name, "sync", table).returncode == 0
    sequence = [entry(iceberg_rest, name)["metadata"]["last-sequence-number"]]
    for step in range(1, 6):
        write(table, step)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(iceberg_rest, name, "sync", table), range(4)))
        for r in results:
            assert r.returncode == 0, r.stdout + r.stderr
        now = entry(iceberg_rest, name)["metadata"]
        assert main_of(now) == main_of(ours(table)[1])
        sequence.append(now["last-sequence-number"])
    assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence), sequence


def test_another_writers_commit_is_refused(tmp_path, iceberg_rest):
    import pyarrow as pa

    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(iceberg_rest, name, "sync", table).returncode == 0
    t = reader(iceberg_rest).load_table(name)
    t.append(pa.table({"id": [99], "region": ["xx"], "amount": [9.0]}).cast(t.schema().as_arrow()))
    before = entry(iceberg_rest, name)
    hint = (table / "metadata" / "version-hint.text").read_text()
    write(table, 1)
    result = run(iceberg_rest, name, "sync", table)
    assert result.returncode != 0
    for part in (iceberg_rest.url, name, before["metadata-location"], ours(table)[0], "not one xlake wrote"):
        assert part in result.stderr, result.stderr
    assert (table / "metadata" / "version-hint.text").read_text() == hint
    assert entry(iceberg_rest, name) == before


def test_a_stopped_server_leaves_the_pointer_to_the_next_sync(tmp_path, iceberg_rest):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(iceberg_rest, name, "sync", table).returncode == 0
    before = entry(iceberg_rest, name)
    write(table, 1)
    # The server goes away after the sync's precheck (GET /v1/config, load table): the
    # sync publishes metadata/ and fails at the pointer.
    proxy = catalog_servers.CutProxy(int(iceberg_rest.url.rsplit(":", 1)[1]), allow=2)
    cut = xlake("sync", table, "--catalog", f"rest+{proxy.url}", "--catalog-table", name)
    assert cut.returncode != 0 and name in cut.stderr and proxy.url in cut.stderr, cut.stdout + cut.stderr
    assert main_of(ours(table)[1]) != main_of(before["metadata"]), "metadata/ was not published"
    iceberg_rest.stop()
    try:
        write(table, 3)
        down = run(iceberg_rest, name, "sync", table)
        # Down before the precheck: refused before publishing, naming catalog and table.
        assert down.returncode != 0 and name in down.stderr and iceberg_rest.url in down.stderr, down.stderr
    finally:
        iceberg_rest.start()
    assert entry(iceberg_rest, name) == before
    assert run(iceberg_rest, name, "check", table).returncode == 1
    result = run(iceberg_rest, name, "sync", table)
    assert result.returncode == 0 and "catalog: moved from" in result.stdout, result.stdout + result.stderr
    assert main_of(entry(iceberg_rest, name)["metadata"]) == main_of(ours(table)[1])
    assert run(iceberg_rest, name, "check", table).returncode == 0


def test_an_upgrade_to_v3_is_committed_and_read_by_name(tmp_path, iceberg_rest):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(iceberg_rest, name, "sync", table).returncode == 0
    result = run(iceberg_rest, name, "upgrade", table, "--format-version", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    now = entry(iceberg_rest, name)["metadata"]
    assert now["format-version"] == 3 and main_of(now) == main_of(ours(table)[1])
    assert run(iceberg_rest, name, "check", table).returncode == 0
    version = write(table, 1)
    assert run(iceberg_rest, name, "sync", table).returncode == 0
    assert main_of(entry(iceberg_rest, name)["metadata"]) == main_of(ours(table)[1])
    columns, want = oracle(table, version)
    assert by_name_pyiceberg(iceberg_rest, name, columns) == want
