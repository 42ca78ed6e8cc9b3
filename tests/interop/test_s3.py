"""xlake on object storage: a real S3-compatible server on loopback (moto in server mode, or
the server XLAKE_S3_ENDPOINT names) holds the tables, and xlake reaches them by s3:// URL
(built with `--features cloud`; settings from the environment, object_store's names). Sync,
in-commit mode and concurrent syncs run there, their atomic commit relying on put-if-absent
(moto honours `If-None-Match: *`); a store without it is refused before anything is written.
pyiceberg (pyarrow's S3 filesystem) and DuckDB (httpfs) read the result through the S3 API.

Spark is not used here: its S3A jars (hadoop-aws and the AWS SDK bundle) are not available
offline. delta-rs 1.6.6 writes its Delta tables straight to the server with no extra option.
"""
import io
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.parse
import uuid

import boto3
import hudi_source as hudi
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from readers import DuckDB, PyIceberg
from remote import (
    RemoteStore,
    assert_rows_match,
    batch,
    concurrent_sync_rounds,
    delta_expected,
    delta_history,
    free_port,
    in_commit_mode,
    ok,
    stop,
    sync_and_check,
    wait_until_up,
    write,
)
from rows import canonical_rows

KEY_ID = os.environ.get("AWS_ACCESS_KEY_ID", "xlake-test")
SECRET = os.environ.get("AWS_SECRET_ACCESS_KEY", "xlake-test")
REGION = "us-east-1"


class S3(RemoteStore):
    def __init__(self, endpoint, bucket):
        self.endpoint, self.bucket = endpoint, bucket  # endpoint: http://127.0.0.1:PORT
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

    def storage_options(self):
        """delta-rs's settings for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true",
        }

    def keys(self, prefix):
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def read(self, key):
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def s3():
    """The S3 server (moto_server from this venv, unless XLAKE_S3_ENDPOINT names one) and a
    fresh bucket on it."""
    server = None
    endpoint = os.environ.get("XLAKE_S3_ENDPOINT")
    if not endpoint:
        port = free_port()
        moto = pathlib.Path(sys.executable).parent / "moto_server"
        server = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(endpoint, server, "moto_server")
        store = S3(endpoint, f"xlake-interop-{uuid.uuid4().hex[:8]}")
        store.client.create_bucket(Bucket=store.bucket)
        yield store
    finally:
        stop(server)


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


# ---- the tests ----


def test_delta_sync_every_version_read_through_s3(s3, readers):
    prefix = "delta_sync"
    versions = delta_history(s3, prefix)
    sync_and_check(s3, prefix)
    assert sorted(s3.source_ids(prefix), key=int) == [str(v) for v in versions]
    assert_rows_match(s3, readers, prefix, delta_expected(s3, prefix, versions))


def test_delta_in_commit_mode(s3, readers):
    in_commit_mode(s3, readers, "delta_commit")


def test_concurrent_syncs_write_one_snapshot_per_version(s3, readers):
    prefix = "delta_races"
    versions = concurrent_sync_rounds(s3, prefix)
    assert_rows_match(s3, readers, prefix, delta_expected(s3, prefix, [versions[-1]]))


def test_store_without_put_if_absent_is_refused(s3):
    prefix = "no_conditional_put"
    write(s3, prefix, batch([1]), mode="overwrite")
    result = s3.xlake("sync", s3.url(prefix), AWS_CONDITIONAL_PUT="disabled")
    assert result.returncode != 0, f"synced without put-if-absent\nstdout:\n{result.stdout}"
    assert "put-if-absent" in result.stderr, result.stderr
    assert s3.keys(f"{prefix}/metadata/") == [], "refused, yet something written under metadata/"


def test_put_if_absent_is_probed_once_per_store_and_recorded(s3):
    """Issue 47: the table records the store on which its first commit found put-if-absent
    working, so later syncs there make no probe; the same bucket reached with conditional
    writes turned off is another store: probed again, and refused with nothing written."""
    prefix = "probe_recorded"
    write(s3, prefix, batch([1]), mode="overwrite")
    first = s3.xlake("sync", s3.url(prefix))
    assert first.returncode == 0, first.stderr
    hint = s3.read(f"{prefix}/metadata/version-hint.text").decode()
    metadata = json.loads(s3.read(f"{prefix}/metadata/v{hint}.metadata.json"))
    recorded = metadata["properties"]["xlake.put-if-absent-verified"]
    assert recorded.startswith(f"s3://{s3.bucket} ") and s3.endpoint in recorded, recorded
    write(s3, prefix, batch([2]))
    before = s3.keys(f"{prefix}/metadata/")
    refused = s3.xlake("sync", s3.url(prefix), AWS_CONDITIONAL_PUT="disabled")
    assert refused.returncode != 0 and "put-if-absent" in refused.stderr, refused.stderr
    assert s3.keys(f"{prefix}/metadata/") == before, "refused, yet metadata/ changed"
    again = s3.xlake("sync", s3.url(prefix))
    assert again.returncode == 0, again.stderr
    assert not [k for k in s3.keys(f"{prefix}/metadata/") if ".xlake-probe-" in k]


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
    assert sorted(s3.source_ids(prefix)) == [i[0] for i in instants]
    expected = {}
    for requested, _action, _ in instants:
        got = hudi.oracle_table(local, requested)
        expected[requested] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    assert_rows_match(s3, readers, prefix, expected)


def _local_delta(path, ids):
    """A local Delta table of two versions (an overwrite, an append) written by delta-rs;
    its files, relative, and its table id."""
    write_deltalake(str(path), batch(ids), mode="overwrite", partition_by=["region"])
    write_deltalake(str(path), batch([i + 100 for i in ids]), mode="append", partition_by=["region"])
    files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*") if f.is_file())
    first = (path / "_delta_log" / f"{0:020}.json").read_text()
    table_id = next(json.loads(line)["metaData"]["id"] for line in first.splitlines() if '"metaData"' in line)
    return files, table_id


def _upload(s3, local, prefix, names):
    for name in names:
        s3.client.upload_file(str(local / name), s3.bucket, f"{prefix}/{name}")


def _written_anew_within_a_second(s3, tmp_path, prefix, job):
    """Table `old` mirrored up to its version 1 (by a pass of the scheduled job, which
    keeps its settled record), then dropped and written anew at the same place as table
    `new`, whose version 1 is uploaded within the same second as old's (S3's LastModified
    is whole seconds). Returns (old id, new id, new's local folder), or None when the
    second was missed (the pass between took too long)."""
    old, new = tmp_path / f"{prefix}_old", tmp_path / f"{prefix}_new"
    old_files, old_id = _local_delta(old, [1, 2])
    new_files, new_id = _local_delta(new, [7, 8, 9])
    newest = f"_delta_log/{1:020}.json"
    new_data = [f for f in new_files if not f.startswith("_delta_log/")]
    _upload(s3, old, prefix, [f for f in old_files if f != newest])
    # The new table's data files, by other names: unread until its log is there.
    _upload(s3, new, prefix, new_data)
    # Version 0 first, so that the sync between the two writes of version 1 is short.
    ok(s3.xlake("sync", s3.url(prefix)), f"sync {prefix} (version 0)")
    time.sleep(1.02 - time.time() % 1)
    _upload(s3, old, prefix, [newest])
    then = s3.client.head_object(Bucket=s3.bucket, Key=f"{prefix}/{newest}")
    ok(s3.xlake("run", "--config", job, "--once"), f"job pass over {prefix} (version 1)")
    # Dropped (its log and data files deleted) and written anew at the same place.
    dropped = [
        {"Key": k} for k in s3.keys(f"{prefix}/")
        if not k.startswith(f"{prefix}/metadata/") and k[len(prefix) + 1:] not in new_data
    ]
    s3.client.delete_objects(Bucket=s3.bucket, Delete={"Objects": dropped})
    _upload(s3, new, prefix, [f"_delta_log/{0:020}.json", newest])
    now = s3.client.head_object(Bucket=s3.bucket, Key=f"{prefix}/{newest}")
    assert now["ETag"] != then["ETag"], "another commit file"
    if now["LastModified"] != then["LastModified"]:
        return None
    return old_id, new_id, new


def test_delta_table_written_anew_within_the_same_second_is_refused(s3, tmp_path):
    """Hostile review 5, D2: a Delta table dropped and written anew with as many versions
    within the same second as the mirrored commit file (S3 lists whole seconds) kept its
    time: "up to date", then the new table's next version mirrored on top of the old
    table's files, exit 0. The file's ETag tells them apart: refused by the table id, with
    as many versions and with one more, nothing written; plain `check` finds it too, and
    the scheduled job's no-op shortcut does not skip it."""
    for attempt in range(5):
        prefix = f"delta_anew_{attempt}"
        job = tmp_path / f"{prefix}.toml"
        job.write_text(f'[[tables]]\nlocation = "{s3.url(prefix)}"\n')
        found = _written_anew_within_a_second(s3, tmp_path, prefix, job)
        if found is not None:
            break
    else:
        pytest.fail("the new table's version 1 never landed within the old one's second")
    old_id, new_id, new = found
    url = s3.url(prefix)
    before = {k: s3.read(k) for k in s3.keys(f"{prefix}/metadata/")}

    def refused(result, what):
        out = result.stdout + result.stderr
        assert result.returncode == 1, f"{what}: exit {result.returncode}\n{out}"
        for part in [url, "version 1 is not the one the mirror holds", new_id, old_id]:
            assert part in out, f"{what}: {part!r} not in\n{out}"

    # The job's no-op shortcut: the same version, its commit file of the same second, but
    # another ETag in the source's tip; not skipped, and refused.
    passed = s3.xlake("run", "--config", job, "--once", RUST_LOG="xlake_sync::noop=debug")
    assert "not read" not in passed.stdout + passed.stderr, passed.stdout + passed.stderr
    assert passed.returncode != 0 and new_id in passed.stdout + passed.stderr, passed.stdout + passed.stderr
    refused(s3.xlake("sync", url), "as many versions")
    check = s3.xlake("check", url)
    assert check.returncode == 1 and "not the mirrored table" in check.stdout + check.stderr, check.stdout + check.stderr
    # One more version of the new table.
    write_deltalake(str(new), batch([40]), mode="append", partition_by=["region"])
    added = sorted(f.relative_to(new).as_posix() for f in new.rglob("*") if f.is_file())
    _upload(s3, new, prefix, [f for f in added if not f.startswith("_delta_log/")] + [f"_delta_log/{2:020}.json"])
    refused(s3.xlake("sync", url), "one more version")
    assert {k: s3.read(k) for k in s3.keys(f"{prefix}/metadata/")} == before, "nothing written"


def _parquet(ids):
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)
    return out.getvalue()


def _parquet_overwritten_within_a_second(s3, prefix, a, b, new):
    """A Parquet folder of `a` and `b` synced, then `a` overwritten with `new` (as many
    bytes) within the second of its first upload, so that its LastModified (whole seconds)
    is the one the sync listed. False when the second was missed."""
    time.sleep(1.02 - time.time() % 1)
    put = lambda name, body: s3.client.put_object(Bucket=s3.bucket, Key=f"{prefix}/region=eu/{name}", Body=body)
    put("a.parquet", a)
    put("b.parquet", b)
    then = s3.client.head_object(Bucket=s3.bucket, Key=f"{prefix}/region=eu/a.parquet")
    ok(s3.xlake("sync", s3.url(prefix), "--format", "parquet"), f"sync {prefix}")
    put("a.parquet", new)
    now = s3.client.head_object(Bucket=s3.bucket, Key=f"{prefix}/region=eu/a.parquet")
    assert now["ETag"] != then["ETag"] and now["ContentLength"] == then["ContentLength"]
    return now["LastModified"] == then["LastModified"]


def test_parquet_file_overwritten_within_the_listed_second_is_seen(s3, readers):
    """A Parquet folder's file overwritten with as many bytes within the second S3 listed
    it in keeps its size and LastModified: the ETag the listing gives tells. The next sync
    replaces its entry (before: its old rows and bounds were kept, and a filtered scan
    missed the new rows, exit 0); check --deep agrees; a sync after it writes nothing."""
    a, b, new = _parquet([1, 2, 3]), _parquet([4, 5]), _parquet([7, 8, 9])
    assert len(new) == len(a)
    for attempt in range(5):
        prefix = f"parquet_same_second_{attempt}"
        if _parquet_overwritten_within_a_second(s3, prefix, a, b, new):
            break
    else:
        pytest.fail("the overwrite never landed within the first upload's second")
    url = s3.url(prefix)
    ok(s3.xlake("sync", url), f"sync {url}")
    metadata = s3.metadata_url(prefix)
    scan = readers[0]._table(metadata).scan(row_filter="id >= 7")
    assert sorted(scan.to_arrow().column("id").to_pylist()) == [7, 8, 9], "pyiceberg"
    duck = readers[1].con.execute("SELECT id FROM iceberg_scan(?) WHERE id >= 7", [metadata])
    assert sorted(r[0] for r in duck.fetchall()) == [7, 8, 9], "duckdb"
    ok(s3.xlake("check", url, "--deep"), f"check {url} --deep")
    snapshots = len(s3.snapshots(prefix))
    assert snapshots == 2
    ok(s3.xlake("sync", url), f"sync {url} (unchanged)")
    assert len(s3.snapshots(prefix)) == snapshots, "an unchanged folder: nothing written"



def test_parquet_file_added_within_the_listed_second_is_an_append(s3):
    """A Parquet folder that only grows, a file added within the second S3 listed the
    newest one in: the next snapshot appends it and leaves the file already there be
    (hostile review hr11: every file of that second was deleted and added again, an
    overwrite snapshot where the folder only grew, which streaming readers refuse or read
    twice)."""
    a, b = _parquet([1, 2, 3]), _parquet([4, 5])
    for attempt in range(5):
        prefix = f"parquet_added_same_second_{attempt}"
        time.sleep(1.02 - time.time() % 1)
        s3.client.put_object(Bucket=s3.bucket, Key=f"{prefix}/a.parquet", Body=a)
        ok(s3.xlake("sync", s3.url(prefix), "--format", "parquet"), f"sync {prefix}")
        s3.client.put_object(Bucket=s3.bucket, Key=f"{prefix}/b.parquet", Body=b)
        times = [
            s3.client.head_object(Bucket=s3.bucket, Key=f"{prefix}/{name}")["LastModified"]
            for name in ("a.parquet", "b.parquet")
        ]
        if times[0] == times[1]:
            break
    else:
        pytest.fail("the second file never landed within the first one's second")
    ok(s3.xlake("sync", s3.url(prefix)), f"sync {prefix}")
    summaries = [s["summary"] for s in s3.snapshots(prefix)]
    assert [s["operation"] for s in summaries] == ["append", "append"], summaries
    assert "deleted-data-files" not in summaries[-1], summaries[-1]
