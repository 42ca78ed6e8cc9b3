"""Glue catalogs: xlake registers and moves the table in the AWS Glue Data Catalog of a moto
server on loopback (SigV4-signed JSON API); pyiceberg's GlueCatalog, pointed at the same
server, loads the table by name and returns delta-rs's rows. moto does not check signatures
or keys, so wrong credentials are not testable here; missing ones are."""
import concurrent.futures
import os
import pathlib
import subprocess
import sys

import pytest
from remote import free_port, stop, wait_until_up
from rows import canonical_rows
from test_catalog import current, oracle, write
from xlake_cli import xlake

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def glue():
    port = free_port()
    moto = pathlib.Path(sys.executable).parent / "moto_server"
    server = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(endpoint, server, "moto_server")
        yield endpoint
    finally:
        stop(server)


def run(glue, *args, table_name, env=None):
    # The process's environment is left alone: concurrent syncs run this from threads.
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
    }
    environment.update(env if env is not None else {**KEYS, "AWS_ENDPOINT_URL_GLUE": glue})
    return xlake(*args, "--catalog", "glue://", "--catalog-table", table_name, env=environment)


def reader(glue):
    from pyiceberg.catalog.glue import GlueCatalog

    return GlueCatalog(
        "glue",
        **{
            "glue.endpoint": glue,
            "glue.region": "us-east-1",
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
        },
    )


def parameters(glue, db, name):
    import boto3

    client = boto3.client("glue", endpoint_url=glue, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    return client.get_table(DatabaseName=db, Name=name)["Table"]["Parameters"]


def test_pyiceberg_finds_the_table_by_name_in_glue(tmp_path, glue):
    table = tmp_path / "orders"
    name = f"sales_{os.getpid()}.orders"
    for step in range(3):
        version = write(table, step)
        args = ("sync", table) if step == 0 else ("commit", table, "--version", version)
        result = run(glue, *args, table_name=name)
        assert result.returncode == 0, result.stdout + result.stderr
        t = reader(glue).load_table(name)
        assert t.metadata_location == current(table)
        columns, want = oracle(table, version)
        rows = [r for b in t.scan().to_arrow_batch_reader() for r in b.to_pylist()]
        assert canonical_rows(rows, columns) == want, f"pyiceberg at version {version}"
    params = parameters(glue, *name.split("."))
    assert params["table_type"] == "ICEBERG" and params["previous_metadata_location"].startswith(f"{table}/metadata/v")
    assert run(glue, "check", table, table_name=name).returncode == 0


def test_concurrent_syncs_lagging_pointer_and_bad_input(tmp_path, glue):
    table, other = tmp_path / "orders", tmp_path / "other"
    name = f"sales_{os.getpid()}.concurrent"
    # Missing credentials: refused before anything is published.
    write(table, 0)
    result = run(glue, "sync", table, table_name=name, env={"AWS_ENDPOINT_URL_GLUE": glue, "AWS_REGION": "us-east-1"})
    assert result.returncode != 0 and "AWS_ACCESS_KEY_ID" in result.stderr and name in result.stderr, result.stderr
    assert not (table / "metadata").exists()
    for step in range(3):
        write(table, step + 1)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(glue, "sync", table, table_name=name), range(4)))
        for r in results:
            assert r.returncode == 0, r.stdout + r.stderr
        assert reader(glue).load_table(name).metadata_location == current(table)
    write(table, 6)
    assert xlake("sync", table).returncode == 0
    assert run(glue, "check", table, table_name=name).returncode == 1
    assert run(glue, "sync", table, table_name=name).returncode == 0
    assert reader(glue).load_table(name).metadata_location == current(table)
    # Another table under the same name is refused, before publishing.
    write(other, 0)
    result = run(glue, "sync", other, table_name=name)
    assert result.returncode != 0 and current(table) in result.stderr and f"{other}/metadata/" in result.stderr, result.stderr
    assert not (other / "metadata").exists()
