"""REST catalogs: xlake registers and moves the table in an Iceberg REST catalog (the suite's
spec test server, rest_server.py, on loopback, with OAuth2 client credentials and a prefix);
pyiceberg's RestCatalog, Spark's RESTCatalog and DuckDB's `ATTACH … (TYPE iceberg)` read it
by name and return delta-rs's rows."""
import concurrent.futures
import os
import pathlib
import subprocess
import sys
import time

import pytest
import rest_server
from rows import canonical_rows
from test_catalog import by_name_spark_conf, current, oracle, write
from xlake_cli import xlake

CREDENTIAL = f"{rest_server.CLIENT_ID}:{rest_server.CLIENT_SECRET}"


@pytest.fixture
def rest(tmp_path):
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).with_name("rest_server.py")), str(tmp_path / "rest.db"), str(port_file)]
    )
    for _ in range(200):
        if port_file.exists() and port_file.read_text():
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        proc.kill()
        proc.wait()


def run(rest, *args, credential=CREDENTIAL, table_name="sales.orders"):
    # The process's environment is left alone: concurrent syncs run this from threads.
    # This test server shows `register` with `overwrite` (XLAKE_REST_MOVE=register), which
    # the real servers of test_catalog_servers.py do not implement; they show commits.
    environment = {**os.environ, "XLAKE_REST_CREDENTIAL": credential, "XLAKE_REST_MOVE": "register"}
    return xlake(*args, "--catalog", f"rest+{rest}", "--catalog-table", table_name, env=environment)


def reader(rest):
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("rest", uri=rest, credential=CREDENTIAL)


def by_name_duckdb(rest, columns):
    """DuckDB's rows of sales.orders, attached through the REST catalog (a fresh attach)."""
    from readers import DuckDB

    con = DuckDB().con
    con.execute("LOAD httpfs")
    con.execute(
        "CREATE SECRET rest_secret (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, OAUTH2_SERVER_URI ?)".replace("?", "'{}'").format(
            rest_server.CLIENT_ID, rest_server.CLIENT_SECRET, f"{rest}/v1/oauth/tokens"
        )
    )
    con.execute(f"ATTACH 'wh' AS rest_cat (TYPE iceberg, ENDPOINT '{rest}', SECRET rest_secret)")
    rows = con.execute("SELECT * FROM rest_cat.sales.orders").fetch_arrow_table().to_pylist()
    return canonical_rows(rows, columns)


def pointer(rest):
    return reader(rest).load_table("sales.orders").metadata_location


def test_readers_find_the_table_by_name_through_rest(tmp_path, rest, spark):
    table = tmp_path / "orders"
    conf = {"type": "rest", "uri": rest, "credential": CREDENTIAL}
    for step in range(3):
        version = write(table, step)
        if step == 0:
            result = run(rest, "sync", table)
        else:
            result = run(rest, "commit", table, "--version", version)
        assert result.returncode == 0, result.stdout + result.stderr
        assert pointer(rest) == current(table)
        columns, want = oracle(table, version)
        t = reader(rest).load_table("sales.orders")
        rows = [r for b in t.scan().to_arrow_batch_reader() for r in b.to_pylist()]
        assert canonical_rows(rows, columns) == want, f"pyiceberg at version {version}"
        assert by_name_spark_conf(spark, f"xl_rest_{os.getpid()}", conf, tmp_path, columns) == want, f"spark at {version}"
        assert by_name_duckdb(rest, columns) == want, f"duckdb at {version}"
    assert run(rest, "check", table).returncode == 0


def test_concurrent_syncs_and_a_lagging_pointer(tmp_path, rest):
    table = tmp_path / "orders"
    seen = []
    for step in range(3):
        write(table, step)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(rest, "sync", table), range(4)))
        for r in results:
            assert r.returncode == 0, r.stdout + r.stderr
        assert pointer(rest) == current(table)
        seen.append(current(table))
    assert seen == sorted(seen, key=lambda p: int(p.rsplit("/v", 1)[1].split(".")[0]))
    write(table, 6)  # an append (5 would be a delete with nothing left to delete)
    assert xlake("sync", table).returncode == 0
    assert pointer(rest) != current(table)
    assert run(rest, "check", table).returncode == 1
    assert run(rest, "sync", table).returncode == 0
    assert pointer(rest) == current(table)


def test_wrong_credentials_and_foreign_entries_fail_before_publishing(tmp_path, rest):
    first, second = tmp_path / "first", tmp_path / "second"
    write(first, 0)
    write(second, 0)
    result = run(rest, "sync", first, credential="xlake-client:wrong")
    assert result.returncode != 0
    assert "sales.orders" in result.stderr and "XLAKE_REST_CREDENTIAL" in result.stderr, result.stderr
    assert "xlake-client:wrong" not in result.stderr + result.stdout
    assert not (first / "metadata").exists()
    assert run(rest, "sync", first).returncode == 0
    before = pointer(rest)
    result = run(rest, "sync", second)
    assert result.returncode != 0 and before in result.stderr and f"{second}/metadata/" in result.stderr, result.stderr
    assert not (second / "metadata").exists()
    assert pointer(rest) == before
