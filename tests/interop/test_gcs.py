"""xlake on Google Cloud Storage: fake-gcs-server (from the Go module proxy; `.ci/run` builds
it into tests/interop/.gcs, or the server XLAKE_GCS_ENDPOINT names) holds the tables, and
xlake reaches them by `gs://bucket/path` URL (built with `--features cloud`; the endpoint
and credentials in GOOGLE_SERVICE_ACCOUNT_KEY, object_store's emulator settings:
`gcs_base_url` and `disable_oauth`). Sync, in-commit mode and concurrent syncs run there,
their atomic commit relying on put-if-absent (`x-goog-if-generation-match: 0`, which the
server enforces). xlake and delta-rs reach the server through gcs.py's XML-upload
translation (fake-gcs-server uploads through the JSON API only).

pyiceberg reads through pyarrow's GcsFileSystem. DuckDB's own `gs://` support is the S3
interoperability API with HMAC keys, which fake-gcs-server does not serve, so DuckDB reads
through the same pyarrow GcsFileSystem, registered with it as an fsspec file system: the
Iceberg reader is DuckDB's, the bytes come from the emulator's JSON API.
"""
import datetime as dt
import json
import os
import pathlib
import subprocess
import urllib.request
import uuid

import hudi_source as hudi
import pytest
from fault_proxy import FaultProxy
from gcs import xml_uploads_as_json
from readers import DuckDB, PyIceberg
from remote import (
    RemoteStore,
    assert_rows_match,
    concurrent_sync_rounds,
    delta_expected,
    delta_history,
    free_port,
    in_commit_mode,
    stop,
    sync_and_check,
    wait_until_up,
)
from rows import canonical_rows

FAKE_GCS = pathlib.Path(__file__).resolve().parent / ".gcs" / "fake-gcs-server"


class GCS(RemoteStore):
    def __init__(self, endpoint, bucket, proxy):
        from pyarrow.fs import GcsFileSystem

        self.endpoint, self.bucket, self.proxy = endpoint, bucket, proxy  # endpoint: http://127.0.0.1:PORT
        self.host = endpoint.removeprefix("http://")
        self.fs = GcsFileSystem(anonymous=True, scheme="http", endpoint_override=self.host)

    def url(self, prefix):
        return f"gs://{self.bucket}/{prefix}"

    def service_account_key(self):
        """object_store's emulator settings: its base URL (the translating proxy), no OAuth."""
        return json.dumps({"gcs_base_url": self.proxy.endpoint, "disable_oauth": True,
                           "client_email": "", "private_key": "", "private_key_id": ""})

    def env(self, **extra):
        """xlake's environment: no inherited GOOGLE_* setting, only these."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOOGLE_")}
        env.update(GOOGLE_SERVICE_ACCOUNT_KEY=self.service_account_key(), **extra)
        return env

    def storage_options(self):
        """delta-rs's settings for this server."""
        return {"google_service_account_key": self.service_account_key()}

    def keys(self, prefix):
        from pyarrow.fs import FileSelector, FileType

        selector = FileSelector(f"{self.bucket}/{prefix}", recursive=True, allow_not_found=True)
        return sorted(i.path.removeprefix(f"{self.bucket}/") for i in self.fs.get_file_info(selector)
                      if i.type == FileType.File)

    def read(self, key):
        with self.fs.open_input_stream(f"{self.bucket}/{key}") as f:
            return f.read()

    def upload(self, local, key):
        with self.fs.open_output_stream(f"{self.bucket}/{key}") as f:
            f.write(local.read_bytes())


@pytest.fixture(scope="module")
def gcs():
    """fake-gcs-server (from tests/interop/.gcs, unless XLAKE_GCS_ENDPOINT names a running
    one, started with `-scheme http -public-host` its own address) and a fresh bucket."""
    server, proxy = None, None
    endpoint = os.environ.get("XLAKE_GCS_ENDPOINT")
    if not endpoint:
        if not FAKE_GCS.exists():
            pytest.skip("fake-gcs-server is not installed (`.ci/run` builds it into tests/interop/.gcs)")
        port = free_port()
        server = subprocess.Popen(
            [str(FAKE_GCS), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
             "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{endpoint}/storage/v1/b", server, "fake-gcs-server")
        host = endpoint.removeprefix("http://")
        proxy = FaultProxy(host, translate=xml_uploads_as_json(host))
        store = GCS(endpoint, f"xlake-{uuid.uuid4().hex[:8]}", proxy)
        request = urllib.request.Request(f"{endpoint}/storage/v1/b?project=xlake", method="POST",
                                         data=json.dumps({"name": store.bucket}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()
        yield store
    finally:
        if proxy is not None:
            proxy.stop()
        stop(server)


class GcsPyIceberg(PyIceberg):
    """readers.PyIceberg, given the metadata file's gs:// URL; pyarrow's GCS client with a
    token the emulator does not check."""

    def __init__(self, gcs):
        expires = int((dt.datetime.now(dt.UTC) + dt.timedelta(hours=6)).timestamp() * 1000)
        self.properties = {"gcs.service.host": gcs.endpoint, "gcs.oauth2.token": "emulator",
                           "gcs.oauth2.token-expires-at": str(expires)}

    def _table(self, metadata_url):
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(metadata_url, properties=self.properties)


class GcsDuckDB(DuckDB):
    """readers.DuckDB reading gs:// through pyarrow's GcsFileSystem, registered as fsspec's."""

    def __init__(self, gcs):
        from fsspec.implementations.arrow import ArrowFSWrapper

        class Gs(ArrowFSWrapper):
            protocol = ("gs", "gcs")

            @classmethod
            def _strip_protocol(cls, path):
                return path.removeprefix("gs://").removeprefix("gcs://").rstrip("/")

        super().__init__()
        self.con.register_filesystem(Gs(gcs.fs))


@pytest.fixture(scope="module")
def readers(gcs):
    return [GcsPyIceberg(gcs), GcsDuckDB(gcs)]


def test_delta_sync_every_version_read_through_gcs(gcs, readers):
    prefix = "lake/delta_sync"
    versions = delta_history(gcs, prefix)
    sync_and_check(gcs, prefix)
    assert sorted(gcs.source_ids(prefix), key=int) == [str(v) for v in versions]
    assert gcs.keys(f"{prefix}/metadata/"), "the metadata is under the table, not beside it"
    assert_rows_match(gcs, readers, prefix, delta_expected(gcs, prefix, versions))


def test_delta_in_commit_mode(gcs, readers):
    in_commit_mode(gcs, readers, "delta_commit")


def test_concurrent_syncs_write_one_snapshot_per_version(gcs, readers):
    prefix = "delta_races"
    versions = concurrent_sync_rounds(gcs, prefix)
    assert_rows_match(gcs, readers, prefix, delta_expected(gcs, prefix, [versions[-1]]))


def test_hudi_uploaded_to_gcs(gcs, readers, tmp_path):
    name, prefix = "sample_table_cow_v9_txns_simple_nometa", "hudi_cow_v9"
    local = hudi.extract(name, tmp_path)
    for f in local.rglob("*"):
        if f.is_file():
            gcs.upload(f, f"{prefix}/{f.relative_to(local).as_posix()}")
    sync_and_check(gcs, prefix)
    instants = hudi.snapshot_instants(local)
    assert instants, f"{name}: no completed data instant"
    assert sorted(gcs.source_ids(prefix)) == [i[0] for i in instants]
    expected = {}
    for requested, _action, _ in instants:
        got = hudi.oracle_table(local, requested)
        expected[requested] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    assert_rows_match(gcs, readers, prefix, expected)
