"""xlake on Azure Blob Storage: Azurite (Microsoft's emulator, from npm; `.ci/run` installs
it, or the server XLAKE_AZURITE_ENDPOINT names) holds the tables, and xlake reaches them by
`az://container/path` URL (built with `--features cloud`; settings from the environment,
object_store's names). Sync, in-commit mode and concurrent syncs run there, their atomic
commit relying on put-if-absent (`If-None-Match: *`, which Azurite honours as Azure does).
DuckDB (its azure extension) reads the result through the Blob API, and its rows are
compared with delta-rs's at every version. pyiceberg is not used: it has no `az://` scheme.
"""
import os
import pathlib
import shutil
import subprocess
import uuid

import pytest
from readers import DuckDB
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

ACCOUNT = "devstoreaccount1"
# Azurite's well-known development key (public; the emulator accepts no other).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE = pathlib.Path(__file__).resolve().parent / ".azurite" / "node_modules" / ".bin" / "azurite-blob"


class Azure(RemoteStore):
    def __init__(self, endpoint, container):
        from azure.storage.blob import BlobServiceClient

        self.endpoint, self.container = endpoint, container  # endpoint: http://127.0.0.1:PORT
        self.connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={endpoint}/{ACCOUNT};"
        )
        self.client = BlobServiceClient.from_connection_string(self.connection_string).get_container_client(container)

    def url(self, prefix):
        return f"az://{self.container}/{prefix}"

    def env(self, **extra):
        """xlake's environment: no inherited AZURE_* setting, only these."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
        env.update(
            AZURE_STORAGE_USE_EMULATOR="true", AZURITE_BLOB_STORAGE_URL=self.endpoint,
            AZURE_STORAGE_ACCOUNT_NAME=ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=KEY, **extra,
        )
        return env

    def storage_options(self):
        """delta-rs's settings for this server (its endpoint: AZURITE_BLOB_STORAGE_URL in
        this process's environment, which object_store reads there only)."""
        return {
            "azure_storage_use_emulator": "true",
            "azure_storage_account_name": ACCOUNT, "azure_storage_account_key": KEY,
        }

    def keys(self, prefix):
        return [b.name for b in self.client.list_blobs(name_starts_with=prefix)]

    def read(self, key):
        return self.client.download_blob(key).readall()


@pytest.fixture(scope="module")
def azure():
    """Azurite (from `tests/interop/.azurite`, unless XLAKE_AZURITE_ENDPOINT names a running
    one) and a fresh container on it."""
    server = None
    endpoint = os.environ.get("XLAKE_AZURITE_ENDPOINT")
    if not endpoint:
        binary = str(AZURITE) if AZURITE.exists() else shutil.which("azurite-blob")
        if binary is None:
            pytest.skip("Azurite is not installed (`.ci/run` installs it into tests/interop/.azurite)")
        port = free_port()
        server = subprocess.Popen(
            [binary, "--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck",
             "--blobHost", "127.0.0.1", "--blobPort", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
    before = os.environ.get("AZURITE_BLOB_STORAGE_URL")
    os.environ["AZURITE_BLOB_STORAGE_URL"] = endpoint
    try:
        wait_until_up(endpoint, server, "Azurite")
        store = Azure(endpoint, f"xlake-{uuid.uuid4().hex[:8]}")
        store.client.create_container()
        yield store
    finally:
        stop(server)
        if before is None:
            os.environ.pop("AZURITE_BLOB_STORAGE_URL", None)
        else:
            os.environ["AZURITE_BLOB_STORAGE_URL"] = before


class AzureDuckDB(DuckDB):
    """readers.DuckDB with the azure extension and a secret for the server; `iceberg_scan`
    of the metadata file's az:// URL."""

    def __init__(self, azure):
        super().__init__()
        self.con.execute("LOAD azure")  # from the same extension dir (duckdb-ext-azure)
        self.con.execute(f"CREATE SECRET xlake_azure (TYPE AZURE, CONNECTION_STRING '{azure.connection_string}')")


@pytest.fixture(scope="module")
def readers(azure):
    return [AzureDuckDB(azure)]


def test_delta_sync_every_version_read_through_azure(azure, readers):
    # A nested prefix: object_store 0.12 roots `az://container/a/b` at `b` by itself.
    prefix = "lake/delta_sync"
    versions = delta_history(azure, prefix)
    sync_and_check(azure, prefix)
    assert sorted(azure.source_ids(prefix), key=int) == [str(v) for v in versions]
    assert azure.keys(f"{prefix}/metadata/"), "the metadata is under the table, not beside it"
    assert not azure.keys("delta_sync/"), "written outside the table's prefix"
    assert_rows_match(azure, readers, prefix, delta_expected(azure, prefix, versions))


def test_delta_in_commit_mode(azure, readers):
    in_commit_mode(azure, readers, "delta_commit")


def test_concurrent_syncs_write_one_snapshot_per_version(azure, readers):
    prefix = "delta_races"
    versions = concurrent_sync_rounds(azure, prefix)
    assert_rows_match(azure, readers, prefix, delta_expected(azure, prefix, [versions[-1]]))
