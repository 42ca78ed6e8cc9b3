"""The Hive Metastore (standalone 4.0.1, and 3.1.3 with its lock tables, each on Derby,
started once per module from the pinned jars: catalog_servers.py). xlake registers a Delta table on the first sync as Iceberg's
HiveCatalog does and moves `metadata_location` by a conditional alter_table after each later
commit (under the metastore's table lock where it has lock tables); pyiceberg's
HiveCatalog reads it by name and equals delta-rs at the mirrored version. Also: concurrent syncs never move the pointer back, another writer's pointer is
refused, the metastore refuses a stale conditional alter itself, and a stopped server
leaves `metadata/` published and the pointer for the next sync.

pyiceberg 0.12's HiveCatalog calls `get_table`, which Hive 4 no longer serves (it has
`get_table_req`): the reader here is that HiveCatalog with only its table lookup switched to
`get_table_req` (docs/catalogs.md). Spark 3.5.6 + Iceberg 1.10.2's HiveCatalog lists and
reads the table in a process of its own, with Hive 4's metastore client first on its class
path (spark_hive4.py; a second Spark start, so .ci/run-slow runs that test)."""
import concurrent.futures
import itertools
import json
import os
import pathlib
import shutil
import subprocess
import sys

import catalog_servers
import pytest
from rows import canonical_rows
from test_catalog import oracle, write
from xlake_cli import xlake

NAMES = itertools.count()


@pytest.fixture(scope="module", params=["4.0.1", "3.1.3"])
def hms(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hive-metastore")
    server, uri = catalog_servers.hive_metastore(folder, request.param)
    server.start()
    server.uri, server.version = uri, request.param
    try:
        yield server
    finally:
        server.stop()


def table_name():
    return f"db{os.getpid()}_{next(NAMES)}.orders"


def run(server, name, *args, uri=None):
    return xlake(*args, "--catalog", uri or server.uri, "--catalog-table", name)


def catalog(server):
    """pyiceberg's HiveCatalog, its table lookup on get_table_req (Hive 4)."""
    from hive_metastore.ttypes import GetTableRequest
    from pyiceberg.catalog.hive import HiveCatalog

    class Hive4Catalog(HiveCatalog):
        def _get_hive_table(self, client, database_name, table_name):
            return client.get_table_req(GetTableRequest(dbName=database_name, tblName=table_name)).table

    return Hive4Catalog("hms", uri=server.uri)


def hive_table(server, name):
    """The metastore's table (Thrift `Table`) under `name`."""
    from hive_metastore.ttypes import GetTableRequest

    db, table = name.split(".")
    with catalog(server)._client as client:
        return client.get_table_req(GetTableRequest(dbName=db, tblName=table)).table


def pointer(server, name):
    return hive_table(server, name).parameters["metadata_location"]


def ours(table):
    version = (pathlib.Path(table) / "metadata" / "version-hint.text").read_text()
    return str(pathlib.Path(table) / "metadata" / f"v{version}.metadata.json")


def by_name(server, name, columns):
    t = catalog(server).load_table(name)
    rows = [r for b in t.scan().to_arrow_batch_reader() for r in b.to_pylist()]
    return canonical_rows(rows, columns)


def test_first_sync_registers_and_each_commit_moves_the_pointer(tmp_path, hms):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    result = run(hms, name, "sync", table)
    assert result.returncode == 0 and "catalog: registered at" in result.stdout, result.stdout + result.stderr
    t = hive_table(hms, name)
    # The metastore qualifies a local location with its file system (file:).
    assert t.tableType == "EXTERNAL_TABLE" and t.sd.location in (str(table), f"file:{table}")
    for key, value in [("table_type", "ICEBERG"), ("EXTERNAL", "TRUE"), ("metadata_location", ours(table)),
                       ("storage_handler", "org.apache.iceberg.mr.hive.HiveIcebergStorageHandler")]:
        assert t.parameters[key] == value, key
    for step in range(1, 11):
        before = pointer(hms, name)
        version = write(table, step)
        result = run(hms, name, "commit", table, "--version", version)
        assert result.returncode == 0 and "catalog: moved from" in result.stdout, result.stdout + result.stderr
        t = hive_table(hms, name)
        assert t.parameters["metadata_location"] == ours(table) != before
        assert t.parameters["previous_metadata_location"] == before
        columns, want = oracle(table, version)
        assert by_name(hms, name, columns) == want, f"pyiceberg at version {version}"
    assert run(hms, name, "check", table).returncode == 0


def test_concurrent_syncs_never_move_the_pointer_back(tmp_path, hms):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    seen = [int(pointer(hms, name).rsplit("/v", 1)[1].split(".")[0])]
    for step in range(1, 6):
        write(table, step)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(hms, name, "sync", table), range(4)))
        for r in results:
            assert r.returncode == 0, r.stdout + r.stderr
        assert pointer(hms, name) == ours(table)
        seen.append(int(pointer(hms, name).rsplit("/v", 1)[1].split(".")[0]))
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


def test_the_metastore_refuses_a_stale_conditional_alter(tmp_path, hms):
    """What the pointer move relies on: Hive 4 checks `expected_parameter_value` itself."""
    from hive_metastore.ttypes import EnvironmentContext

    if hms.version.startswith("3."):
        pytest.skip("Hive 3.x ignores the expected parameter: the table lock is what guards the move there")

    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    write(table, 1)
    assert run(hms, name, "sync", table).returncode == 0
    t = hive_table(hms, name)
    t.parameters["metadata_location"] = str(table / "metadata" / "v1.metadata.json")
    stale = EnvironmentContext({"expected_parameter_key": "metadata_location",
                                "expected_parameter_value": str(table / "metadata" / "v1.metadata.json")})
    with catalog(hms)._client as client, pytest.raises(Exception, match="has been modified"):
        client.alter_table_with_environment_context(t.dbName, t.tableName, t, stale)
    assert pointer(hms, name) == ours(table)


def test_a_move_waits_for_another_writers_table_lock(tmp_path, hms):
    """The move runs under the metastore's table lock (as Iceberg's and pyiceberg's commits
    do): while another writer holds it the pointer stays, once released the move is made.
    The 3.1.3 server has the lock tables (catalog_servers.py), the 4.0.1 one has none."""
    from hive_metastore.ttypes import (
        LockComponent,
        LockLevel,
        LockRequest,
        LockState,
        LockType,
        UnlockRequest,
    )

    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    before = pointer(hms, name)
    write(table, 1)
    if hms.version.startswith("4."):
        # This one's database has no lock tables (DataNucleus made its schema): on Hive 4 the
        # move goes on by the conditional alter alone, and says so.
        result = run(hms, name, "sync", table)
        assert result.returncode == 0 and "cannot lock tables" in result.stderr, result.stdout + result.stderr
        assert pointer(hms, name) == ours(table) != before
        return
    db, short = name.split(".")
    component = LockComponent(type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=db, tablename=short,
                              isTransactional=True)
    with catalog(hms)._client as client:
        held = client.lock(LockRequest(component=[component], user="other", hostname="elsewhere"))
        assert held.state == LockState.ACQUIRED
        sync = subprocess.Popen([os.environ["XLAKE_BIN"], "sync", str(table), "--catalog", hms.uri,
                                 "--catalog-table", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                sync.wait(4)
            assert pointer(hms, name) == before
        finally:
            client.unlock(UnlockRequest(lockid=held.lockid))
    out, err = sync.communicate(timeout=60)
    assert sync.returncode == 0 and "catalog: moved from" in out, out + err
    assert pointer(hms, name) == ours(table) != before


def test_a_pointer_moved_by_another_writer_is_refused(tmp_path, hms):
    from hive_metastore.ttypes import EnvironmentContext

    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    # Another writer commits: its own metadata file, and the pointer moved to it.
    theirs = table / "metadata" / "00001-0f0e0d0c-0000-4000-8000-000000000001.metadata.json"
    shutil.copy(ours(table), theirs)
    t = hive_table(hms, name)
    t.parameters.update(metadata_location=str(theirs), previous_metadata_location=ours(table))
    with catalog(hms)._client as client:
        client.alter_table_with_environment_context(t.dbName, t.tableName, t, EnvironmentContext({}))
    hint = (table / "metadata" / "version-hint.text").read_text()
    write(table, 1)
    result = run(hms, name, "sync", table)
    assert result.returncode != 0
    for part in (hms.uri, name, str(theirs), str(table / "metadata")):
        assert part in result.stderr, result.stderr
    assert (table / "metadata" / "version-hint.text").read_text() == hint
    assert pointer(hms, name) == str(theirs)


def test_a_stopped_server_leaves_the_pointer_to_the_next_sync(tmp_path, hms):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    before = pointer(hms, name)
    write(table, 1)
    # The metastore goes away after the sync's precheck (one get_table_req): the sync
    # publishes metadata/ and fails at the pointer.
    proxy = catalog_servers.CutProxy(int(hms.uri.rsplit(":", 1)[1]), allow=1, per="connection")
    cut = run(hms, name, "sync", table, uri=f"thrift://127.0.0.1:{proxy.port}")
    assert cut.returncode != 0 and name in cut.stderr and str(proxy.port) in cut.stderr, cut.stdout + cut.stderr
    assert ours(table) != before, "metadata/ was not published"
    hms.stop()
    try:
        version = write(table, 3)
        down = run(hms, name, "sync", table)
        # Down before the precheck: refused before publishing, naming catalog and table.
        assert down.returncode != 0 and name in down.stderr and hms.uri in down.stderr, down.stderr
    finally:
        hms.start()
    assert pointer(hms, name) == before
    assert run(hms, name, "check", table).returncode == 1
    result = run(hms, name, "sync", table)
    assert result.returncode == 0 and "catalog: moved from" in result.stdout, result.stdout + result.stderr
    assert pointer(hms, name) == ours(table)
    assert run(hms, name, "check", table).returncode == 0
    columns, want = oracle(table, version)
    assert by_name(hms, name, columns) == want



@pytest.mark.skipif(not os.environ.get("XLAKE_SLOW"), reason="slow (a second Spark, ~80 s): .ci/run-slow runs it")
def test_spark_lists_and_reads_the_table_by_name(tmp_path, hms):
    table, name = tmp_path / "orders", table_name()
    write(table, 0)
    assert run(hms, name, "sync", table).returncode == 0
    version = write(table, 1)
    assert run(hms, name, "sync", table).returncode == 0
    here = pathlib.Path(__file__).resolve().parent
    spark = subprocess.run([sys.executable, str(here / "spark_hive4.py"), hms.uri, name], cwd=here,
                           capture_output=True, text=True, timeout=600, check=False)
    assert spark.returncode == 0, spark.stderr[-4000:]
    found = json.loads(spark.stdout.strip().splitlines()[-1])
    assert name.split(".")[1] in found["tables"]
    columns, want = oracle(table, version)
    assert canonical_rows(found["rows"], columns) == want
