"""What the object-store suites (test_s3.py, test_azure.py) share: the store under test
behind one small interface, starting a server on loopback, and Delta histories written
there by delta-rs, whose rows every Iceberg reader must return at every version."""
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import delta_source as delta
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from readers import snapshot_for
from rows import canonical_rows
from xlake_cli import ROOT


def xlake_command():
    binary = os.environ.get("XLAKE_BIN")
    return [binary] if binary else ["cargo", "run", "--quiet", "--features", "cloud", "--"]


class RemoteStore:
    """A bucket or container on a server. Subclasses give `url(prefix)`, `read(key)`,
    `keys(prefix)`, `env(**extra)` (xlake's environment) and `storage_options()`
    (delta-rs's)."""

    def xlake(self, *args, **extra_env):
        return subprocess.run(
            [*xlake_command(), *map(str, args)], cwd=ROOT, env=self.env(**extra_env), capture_output=True, text=True, check=False
        )

    def start_xlake(self, *args):
        return subprocess.Popen(
            [*xlake_command(), *map(str, args)], cwd=ROOT, env=self.env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def metadata_url(self, prefix):
        """The current `vN.metadata.json`, N read from `version-hint.text`."""
        hint = self.read(f"{prefix}/metadata/version-hint.text").decode().strip()
        return f"{self.url(prefix)}/metadata/v{hint}.metadata.json"

    def snapshots(self, prefix):
        """The current metadata's snapshots as its JSON holds them (for their summaries)."""
        hint = self.read(f"{prefix}/metadata/version-hint.text").decode().strip()
        metadata = json.loads(self.read(f"{prefix}/metadata/v{hint}.metadata.json"))
        return [{"snapshot_id": s["snapshot-id"], "summary": s["summary"]} for s in metadata["snapshots"]]

    def source_ids(self, prefix):
        """The sourceIdentifier of every snapshot (one per snapshot)."""
        return [json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"] for s in self.snapshots(prefix)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(endpoint, server, name, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            pytest.fail(f"{name} exited {server.returncode} before answering")
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # answering, if only to refuse an anonymous request
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"no {name} answering at {endpoint} after {timeout}s")


def stop(server):
    if server is not None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def ok(result, what):
    assert result.returncode == 0, f"`xlake {what}` exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def sync_and_check(store, prefix):
    url = store.url(prefix)
    ok(store.xlake("sync", url), f"sync {url}")
    ok(store.xlake("check", url, "--deep"), f"check {url} --deep")


def assert_rows_match(store, readers, prefix, expected):
    """expected: {source commit id: (columns, canonical rows)}; every reader, at the snapshot
    mirroring each commit, must return those rows."""
    metadata = store.metadata_url(prefix)
    snapshots = store.snapshots(prefix)
    for source_id, (columns, want) in expected.items():
        snapshot_id = snapshot_for(snapshots, source_id)["snapshot_id"]
        for reader in readers:
            rows = reader.rows_at_snapshot(metadata, snapshot_id)
            missing = [c for c in columns if rows and c not in rows[0]]
            assert not missing, f"{prefix} @ {source_id}, {reader.name}: columns missing: {missing}"
            assert canonical_rows(rows, columns) == want, f"{prefix} @ {source_id}, {reader.name}: rows differ from the source"


def delta_expected(store, prefix, versions):
    """{str(version): (columns, canonical rows)} as delta-rs reads the table on the store."""
    out = {}
    for v in versions:
        got = delta.oracle_table(store.url(prefix), v, storage_options=store.storage_options())
        out[str(v)] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return out


def batch(ids, region="eu"):
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array([region] * len(ids), pa.string()),
        "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
        "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC")),
    })


def write(store, prefix, data, mode="append"):
    """One delta-rs write to the table on the store; its new version."""
    url, options = store.url(prefix), store.storage_options()
    write_deltalake(url, data, mode=mode, partition_by=["region"], storage_options=options)
    return DeltaTable(url, storage_options=options).version()


def delta_history(store, prefix):
    """A Delta table with appends, an overwrite, a delete and an update; its versions."""
    url, options = store.url(prefix), store.storage_options()
    write(store, prefix, batch([1, 2, 3]), mode="overwrite")
    write(store, prefix, batch([4, 5], region="us"))
    write(store, prefix, batch([10, 11, 12], region="apac"), mode="overwrite")
    write(store, prefix, batch([13, 14], region="us"))
    DeltaTable(url, storage_options=options).delete("id = 11")
    DeltaTable(url, storage_options=options).update(updates={"amount": "amount * 2"}, predicate="region = 'us'")
    return list(range(DeltaTable(url, storage_options=options).version() + 1))


def in_commit_mode(store, readers, prefix):
    """A synced history, then one more delta-rs commit mirrored by `xlake commit
    --version`: it says so, the snapshot is there, and the readers return its rows."""
    versions = delta_history(store, prefix)
    sync_and_check(store, prefix)
    version = write(store, prefix, batch([20, 21], region="eu"))
    assert version == versions[-1] + 1
    result = ok(store.xlake("commit", store.url(prefix), "--version", version), f"commit --version {version}")
    assert f"source commit {version} is mirrored" in result.stdout
    assert str(version) in store.source_ids(prefix)
    assert_rows_match(store, readers, prefix, delta_expected(store, prefix, [version]))


def concurrent_sync_rounds(store, prefix, rounds=3, writers=4):
    """Rounds of new delta-rs commits, each then synced by `writers` xlake processes at once:
    after each round, a deep check passes and there is one snapshot per version. Returns
    the versions."""
    url = store.url(prefix)
    versions = delta_history(store, prefix)
    next_id = 100
    for round_ in range(rounds):
        for _ in range(5):
            versions.append(write(store, prefix, batch([next_id, next_id + 1], region=["eu", "us", "apac"][next_id % 3])))
            next_id += 2
        procs = [store.start_xlake("sync", url) for _ in range(writers)]
        outputs = [p.communicate(timeout=120) for p in procs]
        for i, (p, (out, err)) in enumerate(zip(procs, outputs)):
            assert p.returncode == 0, f"round {round_}, sync {i} exited {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
        ok(store.xlake("check", url, "--deep"), f"check {url} --deep (round {round_})")
        ids = store.source_ids(prefix)
        assert len(ids) == len(versions), f"round {round_}: {len(ids)} snapshots for {len(versions)} versions: {sorted(ids, key=int)}"
        assert set(ids) == {str(v) for v in versions}, f"round {round_}"
    return versions
