"""xlake on object storage: a real S3-compatible server on loopback (moto in server mode, or
the server XLAKE_S3_ENDPOINT names) holds the tables, and xlake reaches them by s3:// URL
(built with `--features cloud`; settings from the environment, object_store's names). Sync,
in-commit mode and concurrent syncs run there, their atomic commit relying on put-if-absent
(moto honours `If-None-Match: *`); a store without it is refused before anything is written.
pyiceberg (pyarrow's S3 filesystem) and DuckDB (httpfs) read the result through the S3 API.

Spark is not used here: its S3A jars (hadoop-aws and the AWS SDK bundle) are not available
offline. delta-rs 1.6.6 writes its Delta tables straight to the server with no extra option.
"""
import dataclasses
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import delta_source as delta
import hudi_source as hudi
from readers import DuckDB, PyIceberg, snapshot_for
from rows import canonical_rows
from xlake_cli import ROOT

KEY_ID = os.environ.get("AWS_ACCESS_KEY_ID", "xlake-test")
SECRET = os.environ.get("AWS_SECRET_ACCESS_KEY", "xlake-test")
REGION = "us-east-1"


def xlake_command():
    binary = os.environ.get("XLAKE_BIN")
    return [binary] if binary else ["cargo", "run", "--quiet", "--features", "cloud", "--"]


@dataclasses.dataclass
class S3:
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str

    def __post_init__(self):
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET, region_name=REGION
        )

    def url(self, prefix):
        return f"s3://{self.bucket}/{prefix}"

    def env(self, **extra):
        """xlake's environment: no inherited AWS_* setting, only these."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            AWS_ENDPOINT=self.endpoint, AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET,
            AWS_REGION=REGION, AWS_ALLOW_HTTP="true", **extra,
        )
        return env

    def xlake(self, *args, **extra_env):
        return subprocess.run(
            [*xlake_command(), *map(str, args)], cwd=ROOT, env=self.env(**extra_env), capture_output=True, text=True
        )

    def start_xlake(self, *args):
        return subprocess.Popen(
            [*xlake_command(), *map(str, args)], cwd=ROOT, env=self.env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def storage_options(self):
        """delta-rs's settings for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true",
        }

    def keys(self, prefix):
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def metadata_url(self, prefix):
        """The current `vN.metadata.json`, N read from `version-hint.text`."""
        hint = self.client.get_object(Bucket=self.bucket, Key=f"{prefix}/metadata/version-hint.text")["Body"].read()
        return f"{self.url(prefix)}/metadata/v{hint.decode().strip()}.metadata.json"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(endpoint, server, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            pytest.fail(f"moto_server exited {server.returncode} before answering")
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"no S3 server answering at {endpoint} after {timeout}s")


@pytest.fixture(scope="module")
def s3():
    """The S3 server (moto_server from this venv, unless XLAKE_S3_ENDPOINT names one) and a
    fresh bucket on it."""
    server = None
    endpoint = os.environ.get("XLAKE_S3_ENDPOINT")
    if not endpoint:
        port = _free_port()
        moto = pathlib.Path(sys.executable).parent / "moto_server"
        server = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(endpoint, server)
        store = S3(endpoint, f"xlake-interop-{uuid.uuid4().hex[:8]}")
        store.client.create_bucket(Bucket=store.bucket)
        yield store
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


class S3PyIceberg(PyIceberg):
    """readers.PyIceberg, given the metadata file's s3:// URL instead of a local table."""

    def __init__(self, s3):
        self.properties = {
            "s3.endpoint": s3.endpoint, "s3.access-key-id": KEY_ID, "s3.secret-access-key": SECRET, "s3.region": REGION,
        }

    def _table(self, metadata_url):
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(metadata_url, properties=self.properties)


class S3DuckDB(DuckDB):
    """readers.DuckDB with httpfs and a secret for the server; `iceberg_scan` of the
    metadata file's s3:// URL."""

    def __init__(self, s3):
        super().__init__()
        self.con.execute("LOAD httpfs")  # from the same extension dir (duckdb-ext-httpfs)
        host = urllib.parse.urlparse(s3.endpoint).netloc
        self.con.execute(
            f"CREATE SECRET xlake_s3 (TYPE S3, KEY_ID '{KEY_ID}', SECRET '{SECRET}', REGION '{REGION}', "
            f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )


@pytest.fixture(scope="module")
def readers(s3):
    return [S3PyIceberg(s3), S3DuckDB(s3)]


# ---- helpers shared by the tests ----


def ok(result, what):
    assert result.returncode == 0, f"`xlake {what}` exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def sync_and_check(s3, prefix):
    url = s3.url(prefix)
    ok(s3.xlake("sync", url), f"sync {url}")
    ok(s3.xlake("check", url, "--deep"), f"check {url} --deep")


def source_ids(s3, readers, prefix):
    """The sourceIdentifier of every snapshot, as pyiceberg reads them (one per snapshot)."""
    snaps = readers[0].snapshots(s3.metadata_url(prefix))
    return [json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"] for s in snaps]


def assert_rows_match(s3, readers, prefix, expected):
    """expected: {source commit id: (columns, canonical rows)}; every reader, at the snapshot
    mirroring each commit, must return those rows."""
    metadata = s3.metadata_url(prefix)
    snapshots = readers[0].snapshots(metadata)
    for source_id, (columns, want) in expected.items():
        snapshot_id = snapshot_for(snapshots, source_id)["snapshot_id"]
        for reader in readers:
            rows = reader.rows_at_snapshot(metadata, snapshot_id)
            missing = [c for c in columns if rows and c not in rows[0]]
            assert not missing, f"{prefix} @ {source_id}, {reader.name}: columns missing: {missing}"
            assert canonical_rows(rows, columns) == want, f"{prefix} @ {source_id}, {reader.name}: rows differ from the source"


def delta_expected(s3, prefix, versions):
    """{str(version): (columns, canonical rows)} as delta-rs reads the table on S3."""
    out = {}
    for v in versions:
        got = delta.oracle_table(s3.url(prefix), v, storage_options=s3.storage_options())
        out[str(v)] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return out


def batch(ids, region="eu"):
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array([region] * len(ids), pa.string()),
        "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
        "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC")),
    })


def write(s3, prefix, data, mode="append"):
    """One delta-rs write to the table on S3; its new version."""
    url, options = s3.url(prefix), s3.storage_options()
    write_deltalake(url, data, mode=mode, partition_by=["region"], storage_options=options)
    return DeltaTable(url, storage_options=options).version()


def delta_history(s3, prefix):
    """A Delta table on S3 with appends, an overwrite, a delete and an update; its versions."""
    url, options = s3.url(prefix), s3.storage_options()
    write(s3, prefix, batch([1, 2, 3]), mode="overwrite")
    write(s3, prefix, batch([4, 5], region="us"))
    write(s3, prefix, batch([10, 11, 12], region="apac"), mode="overwrite")
    write(s3, prefix, batch([13, 14], region="us"))
    DeltaTable(url, storage_options=options).delete("id = 11")
    DeltaTable(url, storage_options=options).update(updates={"amount": "amount * 2"}, predicate="region = 'us'")
    return list(range(DeltaTable(url, storage_options=options).version() + 1))


# ---- the tests ----


def test_delta_sync_every_version_read_through_s3(s3, readers):
    prefix = "delta_sync"
    versions = delta_history(s3, prefix)
    sync_and_check(s3, prefix)
    assert sorted(source_ids(s3, readers, prefix), key=int) == [str(v) for v in versions]
    assert_rows_match(s3, readers, prefix, delta_expected(s3, prefix, versions))


def test_delta_in_commit_mode(s3, readers):
    prefix = "delta_commit"
    versions = delta_history(s3, prefix)
    sync_and_check(s3, prefix)
    version = write(s3, prefix, batch([20, 21], region="eu"))
    assert version == versions[-1] + 1
    result = ok(s3.xlake("commit", s3.url(prefix), "--version", version), f"commit --version {version}")
    assert f"source commit {version} is mirrored" in result.stdout
    assert str(version) in source_ids(s3, readers, prefix)
    assert_rows_match(s3, readers, prefix, delta_expected(s3, prefix, [version]))


def test_concurrent_syncs_write_one_snapshot_per_version(s3, readers):
    prefix = "delta_races"
    url = s3.url(prefix)
    versions = delta_history(s3, prefix)
    next_id = 100
    for round_ in range(3):
        for _ in range(5):
            versions.append(write(s3, prefix, batch([next_id, next_id + 1], region=["eu", "us", "apac"][next_id % 3])))
            next_id += 2
        procs = [s3.start_xlake("sync", url) for _ in range(4)]
        outputs = [p.communicate(timeout=120) for p in procs]
        for i, (p, (out, err)) in enumerate(zip(procs, outputs)):
            assert p.returncode == 0, f"round {round_}, sync {i} exited {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
        ok(s3.xlake("check", url, "--deep"), f"check {url} --deep (round {round_})")
        ids = source_ids(s3, readers, prefix)
        assert len(ids) == len(versions), f"round {round_}: {len(ids)} snapshots for {len(versions)} versions: {sorted(ids, key=int)}"
        assert set(ids) == {str(v) for v in versions}, f"round {round_}"
    assert_rows_match(s3, readers, prefix, delta_expected(s3, prefix, [versions[-1]]))


def test_store_without_put_if_absent_is_refused(s3):
    prefix = "no_conditional_put"
    write(s3, prefix, batch([1]), mode="overwrite")
    result = s3.xlake("sync", s3.url(prefix), AWS_CONDITIONAL_PUT="disabled")
    assert result.returncode != 0, f"synced without put-if-absent\nstdout:\n{result.stdout}"
    assert "put-if-absent" in result.stderr, result.stderr
    assert s3.keys(f"{prefix}/metadata/") == [], "refused, yet something written under metadata/"


def test_hudi_uploaded_to_s3(s3, readers, tmp_path):
    name, prefix = "sample_table_cow_v9_txns_simple_nometa", "hudi_cow_v9"
    local = hudi.extract(name, tmp_path)
    assert not hudi.is_mor(local)
    for f in local.rglob("*"):
        if f.is_file():
            s3.client.upload_file(str(f), s3.bucket, f"{prefix}/{f.relative_to(local).as_posix()}")
    sync_and_check(s3, prefix)
    instants = hudi.snapshot_instants(local)
    assert instants, f"{name}: no completed data instant"
    assert sorted(source_ids(s3, readers, prefix)) == [i[0] for i in instants]
    expected = {}
    for requested, _action, _ in instants:
        got = hudi.oracle_table(local, requested)
        expected[requested] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    assert_rows_match(s3, readers, prefix, expected)
