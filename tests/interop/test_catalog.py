"""Catalogs: after `xlake sync` / `xlake commit` with `--catalog`, independent readers find
the table by NAME and return the source's rows at the mirrored commit.

JDBC layout catalogs on real servers started here on loopback: SQLite (a file) and
PostgreSQL (a throwaway Debian cluster); readers: pyiceberg's `SqlCatalog` and Spark 3.5 with
Iceberg 1.10's `JdbcCatalog` (Debian's JDBC drivers). Also: concurrent syncs never move the
pointer backwards, a lagging pointer is healed by the next sync, and bad catalogs (foreign
entry, unreachable, wrong password) fail before anything is published."""
import concurrent.futures
import glob
import itertools
import json
import os
import pathlib
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time

import delta_source as delta
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from rows import canonical_rows
from xlake_cli import xlake

PASSWORD = "xlake-test-pw"
NAMES = itertools.count()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster on 127.0.0.1 (password auth), as a non-root user."""
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert initdbs, "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
    bindir = pathlib.Path(initdbs[-1]).parent
    root = pathlib.Path(tempfile.mkdtemp(prefix="xlake-pg-"))
    run_as = []
    if os.geteuid() == 0:  # initdb refuses root
        run_as = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    data = root / "data"
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD)
    if run_as:
        shutil.chown(pwfile, "postgres")
    subprocess.run(
        [*run_as, bindir / "initdb", "-D", data, "-U", "xlake", f"--pwfile={pwfile}", "--auth=scram-sha-256"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    subprocess.run(
        [*run_as, bindir / "pg_ctl", "-D", data, "-w", "-l", root / "log",
         "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {root}", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield {"port": port, "user": "xlake", "password": PASSWORD}
    finally:
        subprocess.run([*run_as, bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


class Sqlite:
    kind = "sqlite"

    def __init__(self, tmp, name):
        self.name = name
        self.path = tmp / f"{name}.db"
        self.uri = f"sqlite://{self.path}"
        self.env = {}

    def pyiceberg(self, warehouse):
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.name, uri=f"sqlite:///{self.path}", warehouse=f"file://{warehouse}")

    def spark_conf(self):
        # Iceberg's JdbcCatalog leaves the ResultSet of its "do the tables exist" probe
        # open; on SQLite that keeps a read transaction open on a pooled connection, which
        # then reads a stale snapshot forever (WAL) or blocks every writer (rollback
        # journal). xlake creates the tables, so the probe can be skipped.
        return {"uri": f"jdbc:sqlite:{self.path}", "jdbc.init-catalog-tables": "false"}

    def rows(self, sql, params=()):
        with sqlite3.connect(self.path) as db:
            return db.execute(sql, params).fetchall()


class Postgres:
    kind = "postgres"

    def __init__(self, server, name):
        self.name = name
        self.server = server
        self.uri = f"postgresql://xlake@127.0.0.1:{server['port']}/postgres"
        self.env = {"PGPASSWORD": server["password"]}

    def pyiceberg(self, warehouse):
        from pyiceberg.catalog.sql import SqlCatalog

        s = self.server
        uri = f"postgresql+psycopg2://xlake:{s['password']}@127.0.0.1:{s['port']}/postgres"
        return SqlCatalog(self.name, uri=uri, warehouse=f"file://{warehouse}")

    def spark_conf(self):
        s = self.server
        return {
            "uri": f"jdbc:postgresql://127.0.0.1:{s['port']}/postgres",
            "jdbc.user": "xlake",
            "jdbc.password": s["password"],
        }

    def rows(self, sql, params=()):
        import psycopg2

        s = self.server
        with psycopg2.connect(host="127.0.0.1", port=s["port"], user="xlake", password=s["password"], dbname="postgres") as db:
            cur = db.cursor()
            cur.execute(sql.replace("?", "%s"), params)
            return cur.fetchall()


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request, tmp_path):
    # Each test gets its own catalog name (the JDBC catalog_name, and Spark's catalog).
    name = f"xl_{request.param}_{next(NAMES)}_{os.getpid()}"
    if request.param == "sqlite":
        return Sqlite(tmp_path, name)
    return Postgres(request.getfixturevalue("postgres"), name)


def run(catalog, *args, table_name="sales.orders", env=None):
    """xlake <args> --catalog … --catalog-table … --catalog-name …"""
    # The process's environment is left alone: concurrent syncs run this from threads.
    environment = {**os.environ, **(catalog.env if env is None else env)}
    return xlake(
        *args, "--catalog", catalog.uri, "--catalog-table", table_name, "--catalog-name", catalog.name, env=environment
    )


def pointer(catalog, table_name="sales.orders"):
    ns, name = table_name.rsplit(".", 1)
    found = catalog.rows(
        "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
        (catalog.name, ns, name),
    )
    return found[0][0] if found else None


def current(table):
    return f"{table}/metadata/v{(pathlib.Path(table) / 'metadata' / 'version-hint.text').read_text()}.metadata.json"


def write(table, step):
    data = pa.table({"id": [step * 10 + 1, step * 10 + 2], "region": ["eu", "us"], "amount": [1.5 * step, 2.0]})
    if step % 3 == 2:
        DeltaTable(str(table)).delete("region = 'us'")
    else:
        write_deltalake(str(table), data, mode="append")
    return DeltaTable(str(table)).version()


def oracle(table, version):
    want = delta.oracle_table(table, version)
    return want.column_names, canonical_rows(want.to_pylist(), want.column_names)


def by_name_pyiceberg(catalog, tmp_path, columns):
    t = catalog.pyiceberg(tmp_path / "wh").load_table("sales.orders")
    # Batch by batch: pyiceberg 0.12 cannot concatenate string and string_view files
    # (delta-rs rewrites files with string_view; see readers.py).
    rows = [r for batch in t.scan().to_arrow_batch_reader() for r in batch.to_pylist()]
    return canonical_rows(rows, columns)


def by_name_spark(spark, catalog, tmp_path, columns):
    return by_name_spark_conf(spark, catalog.name, {"type": "jdbc", **catalog.spark_conf()}, tmp_path, columns)


def by_name_spark_conf(spark, name, conf, tmp_path, columns):
    """Spark's rows of sales.orders in the Iceberg catalog `name` configured with `conf`."""
    prefix = f"spark.sql.catalog.{name}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.warehouse", f"file://{tmp_path}/spark-wh")
    spark.conf.set(f"{prefix}.cache-enabled", "false")
    for k, v in conf.items():
        spark.conf.set(f"{prefix}.{k}", v)
    rows = spark.table(f"{name}.sales.orders").collect()
    return canonical_rows([r.asDict(recursive=True) for r in rows], columns)


def test_readers_find_the_table_by_name(tmp_path, catalog, spark):
    table = tmp_path / "orders"
    for step in range(4):
        version = write(table, step)
        if step == 0:
            result = run(catalog, "sync", table)
            assert "catalog: registered at" in result.stdout, result.stdout + result.stderr
        else:
            result = run(catalog, "commit", table, "--version", version)
            assert "catalog: moved from" in result.stdout, result.stdout + result.stderr
        assert result.returncode == 0, result.stdout + result.stderr
        assert pointer(catalog) == current(table)
        columns, want = oracle(table, version)
        assert by_name_pyiceberg(catalog, tmp_path, columns) == want, f"pyiceberg at version {version}"
        assert by_name_spark(spark, catalog, tmp_path, columns) == want, f"spark at version {version}"
    checked = run(catalog, "check", table, "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)["catalog"]
    assert report["pointer"] == current(table) and report["problem"] is None


def test_concurrent_syncs_never_move_the_pointer_back(tmp_path, catalog):
    table = tmp_path / "orders"
    seen = []
    for step in range(4):
        write(table, step)
        write(table, step + 10)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(catalog, "sync", table), range(4)))
        for r in results:
            assert r.returncode == 0, r.stdout + r.stderr
        at = pointer(catalog)
        assert at == current(table), f"round {step}: pointer {at}, current {current(table)}"
        seen.append(int(at.rsplit("/v", 1)[1].split(".")[0]))
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen
    # The catalog's own log of the last move: previous_metadata_location is an older vN.
    (prev,) = catalog.rows("SELECT previous_metadata_location FROM iceberg_tables WHERE catalog_name = ?", (catalog.name,))[0]
    assert prev.startswith(f"{table}/metadata/v")


def test_a_lagging_pointer_is_healed_by_the_next_sync(tmp_path, catalog):
    table = tmp_path / "orders"
    write(table, 0)
    assert run(catalog, "sync", table).returncode == 0
    registered = pointer(catalog)
    # A crash between the publish (metadata and hint) and the pointer move leaves exactly
    # this state: a newer vN published, the entry still at the older one.
    write(table, 1)
    assert xlake("sync", table).returncode == 0
    assert pointer(catalog) == registered != current(table)
    lagging = run(catalog, "check", table)
    assert lagging.returncode == 1 and "not the current" in lagging.stdout, lagging.stdout + lagging.stderr
    healed = run(catalog, "sync", table)
    assert healed.returncode == 0 and "up to date" in healed.stdout, healed.stdout + healed.stderr
    assert pointer(catalog) == current(table)
    assert run(catalog, "check", table).returncode == 0


def test_an_entry_on_a_removed_version_is_moved_to_the_fresh_mirror(tmp_path, catalog):
    """Issue 48, defect 7: the entry at v4, `metadata/` removed and mirrored afresh (v1):
    the sync moves the entry back to v1, and pyiceberg loads the table by name."""
    table = tmp_path / "orders"
    for step in range(4):
        version = write(table, step)
        result = run(catalog, "commit", table, "--version", version)
        assert result.returncode == 0, result.stdout + result.stderr
    old = pointer(catalog)
    assert old == current(table) and old.endswith("/v4.metadata.json")
    shutil.rmtree(table / "metadata")
    result = run(catalog, "sync", table)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"catalog: moved from {old} to {current(table)}" in result.stdout, result.stdout
    assert pointer(catalog) == current(table) != old
    columns, want = oracle(table, version)
    assert by_name_pyiceberg(catalog, tmp_path, columns) == want
    assert run(catalog, "check", table).returncode == 0


def test_a_real_kill_between_publish_and_pointer_is_healed(tmp_path, catalog):
    """Kill syncs at random moments; whatever they left, the next sync ends consistent."""
    table = tmp_path / "orders"
    write(table, 0)
    assert run(catalog, "sync", table).returncode == 0
    from xlake_cli import command

    env = {**os.environ, **catalog.env}
    for step in range(1, 4):
        write(table, step)
        args = [*command(), "sync", str(table), "--catalog", catalog.uri, "--catalog-table", "sales.orders", "--catalog-name", catalog.name]
        p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.05 * step)
        p.kill()
        p.wait()
        healed = run(catalog, "sync", table)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert pointer(catalog) == current(table)


def test_a_foreign_entry_is_refused_before_publishing(tmp_path, catalog):
    first, second = tmp_path / "first", tmp_path / "second"
    write(first, 0)
    write(second, 0)
    assert run(catalog, "sync", first).returncode == 0
    before = pointer(catalog)
    result = run(catalog, "sync", second)
    assert result.returncode != 0
    for part in (catalog.name, "sales.orders", before, f"{second}/metadata/"):
        assert part in result.stderr, result.stderr
    assert not (second / "metadata").exists(), "nothing may be published after a refusal"
    assert pointer(catalog) == before
    # In-commit mode refuses the same way.
    result = run(catalog, "commit", second, "--version", 0)
    assert result.returncode != 0 and "not this table's metadata folder" in result.stderr
    assert not (second / "metadata").exists()


def test_unreachable_catalog_and_wrong_password_fail_before_publishing(tmp_path, postgres):
    table = tmp_path / "orders"
    write(table, 0)
    closed = Postgres({**postgres, "port": free_port()}, "xl_closed")
    result = run(closed, "sync", table)
    assert result.returncode != 0
    assert closed.uri in result.stderr and "sales.orders" in result.stderr, result.stderr
    assert not (table / "metadata").exists()
    wrong = Postgres(postgres, "xl_wrong")
    result = run(wrong, "sync", table, env={"PGPASSWORD": "not-the-password"})
    assert result.returncode != 0
    assert "password authentication failed" in result.stderr, result.stderr
    assert "not-the-password" not in result.stderr + result.stdout
    assert not (table / "metadata").exists()


def test_check_reports_a_missing_entry(tmp_path):
    table = tmp_path / "orders"
    write(table, 0)
    assert xlake("sync", table).returncode == 0
    cat = Sqlite(tmp_path, "xl_missing")
    result = run(cat, "check", table, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)["catalog"]
    assert report["pointer"] is None and "no catalog entry" in report["problem"]


def test_a_hudi_table_is_read_by_name(tmp_path, catalog, spark):
    """The bundled demo table (Hudi v9, 12 instants): both readers by name return hudi-rs's
    rows as of the newest instant."""
    import hudi_source as hudi
    from readers import zoned_columns

    table = hudi.extract("sample_table_cow_v9_txns_simple_nometa", tmp_path / "src")
    result = run(catalog, "sync", table)
    assert result.returncode == 0, result.stdout + result.stderr
    newest = hudi.snapshot_instants(table)[-1][0]
    got = hudi.oracle_table(table, newest)
    columns = got.column_names
    zoned = zoned_columns(str(table))
    want = canonical_rows(got.to_pylist(), columns, zoned)
    t = catalog.pyiceberg(tmp_path / "wh").load_table("sales.orders")
    rows = [r for b in t.scan().to_arrow_batch_reader() for r in b.to_pylist()]
    assert canonical_rows(rows, columns, zoned) == want, "pyiceberg"
    conf = {"type": "jdbc", **catalog.spark_conf()}
    prefix = f"spark.sql.catalog.{catalog.name}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.warehouse", f"file://{tmp_path}/spark-wh")
    for k, v in conf.items():
        spark.conf.set(f"{prefix}.{k}", v)
    spark_rows = [r.asDict(recursive=True) for r in spark.table(f"{catalog.name}.sales.orders").collect()]
    assert canonical_rows(spark_rows, columns, zoned) == want, "spark"
