"""The Delta target (`xlake sync --target delta`): the Hudi fixtures and a plain Parquet
folder mirrored into a `_delta_log/` at the table root, one version per source commit, read
back by delta-rs and by Spark with delta-spark at every version: the rows equal the source's
own (hudi-rs as of the instant; pyarrow over the folder). Bad input: another writer's
`_delta_log/`, two syncs at once, and a Delta writer appending to xlake's log."""
import concurrent.futures
import dataclasses
import functools
import json
import pathlib
import subprocess

import pyarrow as pa
import pytest

import hudi_source as hudi
import real_writers
from rows import canonical_rows
from test_hudi import ORACLE_CASTS, REFUSED_AT
from test_parquet import COLUMNS, folder_rows, write
from xlake_cli import sync, xlake

FIXTURES = hudi.fixture_names()
DELTA = ["--target", "delta"]
# Spark starts a JVM: it judges these (partitioned v9, hive-style v6 with two partition
# fields, a MOR table read-optimized) and the Parquet folder; delta-rs judges every fixture.
SPARK_FIXTURES = [
    "sample_table_cow_v9_txns_simple_nometa",
    "sample_table_cow_v6_complexkeygen_hivestyle",
    "sample_table_mor_avro_v9_txns_simple_nometa",
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


@functools.lru_cache(maxsize=None)
def oracle(name, table, instant):
    got = hudi.oracle_table(table, instant)
    for column, type_ in ORACLE_CASTS.get(name, {}).items():
        i = got.schema.get_field_index(column)
        got = got.set_column(i, column, got.column(i).cast(type_))
    return got.column_names, canonical_rows(got.to_pylist(), got.column_names)


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


@pytest.fixture(scope="module")
def delta_spark():
    s = real_writers.session(["delta-spark-3.3", "delta-storage-3.3"], real_writers.DELTA_SESSION)
    yield s
    s.stop()


def spark_rows(s, table, version):
    df = real_writers.delta_read(s, str(table), version)
    return [r.asDict(recursive=True) for r in df.collect()]


@pytest.mark.parametrize("name", SPARK_FIXTURES)
def test_spark_reads_every_version_as_hudi_rs_reads_the_instant(synced, delta_spark, name):
    s = synced(name)
    at = version_of(s.table)
    for requested, action, _ in s.instants:
        columns, want = oracle(name, str(s.table), requested)
        v = at[requested]
        got = canonical_rows(spark_rows(delta_spark, s.table, v), columns, zoned(s.table, v))
        assert got == want, f"{name} @ {requested} ({action}), version {v}: Spark+Delta rows differ from hudi-rs"


def test_a_parquet_folder_at_every_sync(tmp_path, delta_spark):
    table = tmp_path / "t"
    steps = [
        lambda: write(table, [1, 2, 3], "eu"),
        lambda: write(table, [4, 5], "us"),
        lambda: next((table / "region=eu").glob("*.parquet")).unlink(),
        lambda: write(table, [6], "eu"),
    ]
    expected = []
    for i, step in enumerate(steps):
        step()
        flags = DELTA + (["--format", "parquet"] if i == 0 else [])
        r = sync(table, flags)
        assert r.returncode == 0, r.stderr
        expected.append(folder_rows(table))
    assert len(versions(table)) == len(steps)
    for v, want in enumerate(expected):
        assert canonical_rows(deltars_rows(table, v), COLUMNS) == want, f"delta-rs, version {v}"
        assert canonical_rows(spark_rows(delta_spark, table, v), COLUMNS) == want, f"Spark, version {v}"


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
