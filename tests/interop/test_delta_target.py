"""The Delta target (`xlake sync --target delta`): the Hudi fixtures and a plain Parquet
folder mirrored into a `_delta_log/` at the table root, one version per source commit, read
back by delta-rs and by Spark with delta-spark at every version, and by DuckDB's delta
extension one committed instant at a time: the rows equal the source's
own (hudi-rs as of the instant; pyarrow over the folder). Bad input: another writer's
`_delta_log/`, two syncs at once, and a Delta writer appending to xlake's log."""
import concurrent.futures
import dataclasses
import json
import pathlib
import subprocess
import sys

import hudi_source as hudi
import pyarrow as pa
import pytest
from rows import canonical_rows
from test_hudi import REFUSED_AT, oracle
from test_parquet import COLUMNS, folder_rows, write
from xlake_cli import sync, xlake

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = hudi.fixture_names()
DELTA = ["--target", "delta"]
# Spark starts a JVM (in its own process: delta_target_spark.py): it judges these
# (partitioned v9 with 12 instants and a checkpoint, hive-style v6 with two partition
# fields) and the Parquet folder; delta-rs judges every fixture.
SPARK_FIXTURES = [
    "sample_table_cow_v9_txns_simple_nometa",
    "sample_table_cow_v6_complexkeygen_hivestyle",
]


def versions(table):
    """The actions of each `_delta_log/<n>.json`, oldest first."""
    log = pathlib.Path(table) / "_delta_log"
    files = sorted(p for p in log.glob("*.json"))
    return [[json.loads(line) for line in f.read_text().splitlines() if line] for f in files]


def commit_info(actions):
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def version_of(table):
    """Source commit id -> Delta version."""
    return {commit_info(a)["xlakeMetadata"]["sourceIdentifier"]: v for v, a in enumerate(versions(table))}


@dataclasses.dataclass
class Synced:
    name: str
    table: pathlib.Path
    result: subprocess.CompletedProcess
    instants: list


@pytest.fixture(scope="session")
def synced(tmp_path_factory):
    done = {}

    def get(name):
        if name not in done:
            table = hudi.extract(name, tmp_path_factory.mktemp(f"dt-{name}"))
            flags = DELTA + (["--mor-read-optimized"] if hudi.is_mor(table) else [])
            instants = hudi.snapshot_instants(table)
            if name in REFUSED_AT:
                instants = [i for i in instants if i[0] < REFUSED_AT[name][0]]
            done[name] = Synced(name, table, sync(table, flags), instants)
        return done[name]

    return get


def deltars_rows(table, version):
    """delta-rs's rows at `version` (QueryBuilder: deletion vectors and column mapping)."""
    from deltalake import DeltaTable, QueryBuilder

    t = DeltaTable(str(table), version=version)
    return pa.table(QueryBuilder().register("t", t).execute("select * from t").read_all()).to_pylist()


def zoned(table, version):
    """Columns of type `timestamp` (instants) in the version's schema."""
    schema = None
    for actions in versions(table)[: version + 1]:
        for a in actions:
            if "metaData" in a:
                schema = json.loads(a["metaData"]["schemaString"])
    return {f["name"] for f in schema["fields"] if f["type"] == "timestamp"}


@pytest.mark.parametrize("name", FIXTURES)
def test_one_version_per_instant_at_its_time(synced, name):
    s = synced(name)
    if name in REFUSED_AT:
        assert s.result.returncode != 0 and REFUSED_AT[name][1] in s.result.stderr, s.result.stderr
    else:
        assert s.result.returncode == 0, s.result.stderr
    logged = versions(s.table)
    if not s.instants:
        # An empty table: one version with the schema and no file, readable by delta-rs.
        assert len(logged) == 1 and deltars_rows(s.table, 0) == []
        return
    infos = [commit_info(a) for a in logged]
    assert [i["xlakeMetadata"]["sourceIdentifier"] for i in infos] == [i[0] for i in s.instants]
    assert [i["timestamp"] for i in infos] == [hudi.commit_time_ms(i) for i in s.instants]
    again = sync(s.table, DELTA + (["--mor-read-optimized"] if hudi.is_mor(s.table) else []))
    if name not in REFUSED_AT:
        assert again.returncode == 0 and len(versions(s.table)) == len(logged), again.stderr
        check = xlake("check", s.table, "--target", "delta", "--deep", "--all")
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("name", FIXTURES)
def test_deltars_reads_every_version_as_hudi_rs_reads_the_instant(synced, name):
    s = synced(name)
    if not s.instants:
        pytest.skip("no completed instant")
    at = version_of(s.table)
    for requested, action, _ in s.instants:
        columns, want = oracle(name, str(s.table), requested)
        v = at[requested]
        rows = deltars_rows(s.table, v)
        got = canonical_rows(rows, columns, zoned(s.table, v))
        assert got == want, f"{name} @ {requested} ({action}), version {v}: delta-rs rows differ from hudi-rs"


def spark_read(tmp_path, requests):
    """Spark+Delta's rows of each `(table, version)`, read in one separate process."""
    ask, out = tmp_path / "ask.json", tmp_path / "rows.json"
    ask.write_text(json.dumps([[str(t), v] for t, v in requests]))
    run = subprocess.run([sys.executable, str(HERE / "delta_target_spark.py"), str(ask), str(out)],
                         capture_output=True, text=True, cwd=HERE, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


def test_spark_reads_every_version_as_hudi_rs_reads_the_instant(synced, tmp_path):
    cases = []
    for name in SPARK_FIXTURES:
        s = synced(name)
        at = version_of(s.table)
        cases += [(name, s.table, requested, at[requested]) for requested, _, _ in s.instants]
    # In the same JVM: the versions `expire --keep-snapshots 1` leaves of a copy (10 from
    # its checkpoint, 11 from the checkpoint and its commit).
    name = SPARK_FIXTURES[0]
    expired = hudi.extract(name, tmp_path / "expired")
    assert sync(expired, DELTA).returncode == 0
    done = xlake("expire", expired, "--target", "delta", "--keep-snapshots", "1")
    assert done.returncode == 0 and "versions 0 to 9 expired" in done.stdout, done.stdout + done.stderr
    instants = hudi.snapshot_instants(expired)
    cases += [(name, expired, instants[v][0], v) for v in (10, 11)]
    got = spark_read(tmp_path, [(table, v) for _, table, _, v in cases])
    for (name, table, requested, v), rows in zip(cases, got):
        columns, want = oracle(name, str(table), requested)
        zones = zoned_now(table) if table == expired else zoned(table, v)
        assert canonical_rows(rows, columns, zones) == want, (
            f"{name} @ {requested}, version {v}: Spark+Delta rows differ from hudi-rs")


def test_a_parquet_folder_at_every_sync(tmp_path):
    """delta-rs reads each version right after its sync (a removed file is gone from the
    folder, so older versions cannot be read after it); Spark the last one."""
    table = tmp_path / "t"
    steps = [
        lambda: write(table, [1, 2, 3], "eu"),
        lambda: write(table, [4, 5], "us"),
        lambda: next((table / "region=eu").glob("*.parquet")).unlink(),
        lambda: write(table, [6], "eu"),
    ]
    for v, step in enumerate(steps):
        step()
        r = sync(table, DELTA + (["--format", "parquet"] if v == 0 else []))
        assert r.returncode == 0, r.stderr
        assert len(versions(table)) == v + 1
        want = folder_rows(table)
        assert canonical_rows(deltars_rows(table, v), COLUMNS) == want, f"delta-rs, version {v}"
    [rows] = spark_read(tmp_path, [(table, len(steps) - 1)])
    assert canonical_rows(rows, COLUMNS) == folder_rows(table), "Spark, last version"


TWO_LEVEL_LISTS = {"sample_table_cow_v6_complexkeygen_hivestyle": ("arrayField",)}


def duckdb_delta_rows(table):
    """DuckDB's delta extension (delta-kernel-rs inside DuckDB) over the newest version."""
    import duckdb
    import duckdb_ext

    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{pathlib.Path(next(iter(duckdb_ext.__path__))) / 'extensions'}'")
    con.execute("LOAD delta")
    con.execute("SET TimeZone = 'UTC'")
    return con.execute("SELECT * FROM delta_scan(?)", [str(table)]).fetch_arrow_table().to_pylist()


@pytest.mark.parametrize("name", SPARK_FIXTURES)
def test_duckdb_reads_each_version_as_it_is_committed(tmp_path, name):
    """One instant at a time (`commit --instant`), DuckDB's delta reader (which reads the
    newest version) equals hudi-rs as of that instant."""
    table = hudi.extract(name, tmp_path)
    for requested, action, _ in hudi.snapshot_instants(table):
        result = xlake("commit", table, "--instant", requested, *DELTA)
        assert result.returncode == 0, result.stdout + result.stderr
        columns, want = oracle(name, str(table), requested)
        # DuckDB 1.4.4's delta reader returns the struct elements of a two-level Parquet list
        # (Hudi 0.x files) as nulls; delta-rs and Spark read them (docs/fidelity.md, 4).
        columns = [c for c in columns if c not in TWO_LEVEL_LISTS.get(name, ())]
        want = canonical_rows(want, columns)
        v = version_of(table)[requested]
        got = canonical_rows(duckdb_delta_rows(table), columns, zoned(table, v))
        assert got == want, f"{name} @ {requested} ({action}), version {v}: DuckDB's rows differ from hudi-rs"


def test_another_writers_delta_log_is_refused_by_name(tmp_path):
    table = hudi.extract("sample_table_cow_v9_txns_simple_nometa", tmp_path)
    from deltalake import write_deltalake

    write_deltalake(str(table), pa.table({"x": [1]}))
    before = {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir()}
    r = sync(table, DELTA)
    assert r.returncode != 0
    assert "00000000000000000000.json" in r.stderr and "not written by xlake" in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir()} == before


def test_two_syncs_at_once_and_a_writer_racing_xlake(tmp_path):
    table = hudi.extract("sample_table_cow_v9_txns_simple_nometa", tmp_path)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: sync(table, DELTA), range(2)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    ids = [commit_info(a)["xlakeMetadata"]["sourceIdentifier"] for a in versions(table)]
    assert ids == [i[0] for i in hudi.snapshot_instants(table)]
    # A Delta writer (delta-rs) appends to xlake's log: the next sync names its version.
    from deltalake import DeltaTable

    DeltaTable(str(table)).delete("region = 'eu'")
    theirs = len(ids)
    before = len(versions(table))
    r = sync(table, DELTA)
    assert r.returncode != 0 and f"{theirs:020}.json" in r.stderr, r.stderr
    assert len(versions(table)) == before


def test_deltars_reads_every_version_left_after_expire(tmp_path):
    """`expire --target delta` cuts the log at the checkpoint of version 10 (Hudi's cleaner
    deleted a file version 10 removed, so older versions cannot be read): delta-rs reads
    version 10 and 11 as hudi-rs reads their instants, and no older version."""
    from deltalake import DeltaTable

    name = "sample_table_cow_v9_txns_simple_nometa"
    table = hudi.extract(name, tmp_path)
    assert sync(table, DELTA).returncode == 0
    before = {v: deltars_rows(table, v) for v in range(12)}
    removed = next(a["remove"]["path"] for a in versions(table)[10] if "remove" in a)
    (table / removed).unlink()
    done = xlake("expire", table, "--target", "delta")
    assert done.returncode == 0 and "versions 0 to 9 expired" in done.stdout, done.stdout + done.stderr
    log = sorted(p.name for p in (table / "_delta_log").iterdir())
    assert log[0] == "00000000000000000010.checkpoint.parquet", log
    instants = dict(enumerate(hudi.snapshot_instants(table)))
    for v in (10, 11):
        rows = deltars_rows(table, v)
        assert rows == before[v], f"version {v}"
        columns, want = oracle(name, str(table), instants[v][0])
        assert canonical_rows(rows, columns, zoned_now(table)) == want, f"version {v}"
    with pytest.raises(Exception, match="log segment"):
        DeltaTable(str(table), version=9)
    check = xlake("check", table, "--target", "delta", "--deep", "--all")
    assert check.returncode == 0, check.stdout + check.stderr


def zoned_now(table):
    """`timestamp` columns of the schema in force, as delta-rs reads it (from the checkpoint
    once the older commit files are gone)."""
    from deltalake import DeltaTable

    schema = json.loads(DeltaTable(str(table)).schema().to_json())
    return {f["name"] for f in schema["fields"] if f["type"] == "timestamp"}
