"""`xlake serve` as a monitoring system sees it: a table written with delta-rs is mirrored by
a callback, a later commit gets none, and the Prometheus project's own text parser
(prometheus-client) reads the lag and the check result from /metrics."""
import json
import os
import subprocess
import time
import urllib.request

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from prometheus_client.parser import text_string_to_metric_families
from xlake_cli import ROOT, command

KEY = "interop-callback-key"


def start(*args):
    env = dict(os.environ, XLAKE_CALLBACK_KEY=KEY)
    server = subprocess.Popen([*command(), "serve", "--listen", "127.0.0.1:0", *map(str, args)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    assert line.startswith("listening on "), line
    return server, line.split()[-1]


def callback(addr, table, version):
    body = json.dumps({"commitTime": str(version), "tableName": "orders",
                       "basePath": f"file:{table}", "commitActionType": "commit"}).encode()
    request = urllib.request.Request(f"http://{addr}/", data=body, method="POST", headers={
        "HUDI-CALLBACK-KEY": KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.status, json.loads(answer.read())


def samples(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_parse_and_show_lag_and_check(tmp_path):
    table = tmp_path / "orders"
    write_deltalake(str(table), pa.table({"id": [1, 2], "region": ["eu", "us"]}), partition_by=["region"])
    server, addr = start("--allow", tmp_path, "--check-every", "1s")
    try:
        status, answer = callback(addr, table, 0)
        assert status == 200 and answer["mirrored"], answer
        write_deltalake(str(table), pa.table({"id": [3], "region": ["eu"]}), mode="append", partition_by=["region"])
        assert DeltaTable(str(table)).version() == 1
        label = (("table", os.path.realpath(table)),)
        deadline = time.time() + 60
        while True:
            found = samples(addr)
            if found.get(("xlake_lag_commits", label)) == 1 and found.get(("xlake_check_result", label)) == 1:
                break
            assert time.time() < deadline, found
            time.sleep(0.5)
        assert found[("xlake_snapshots_written_total", label)] == 1
        assert found[("xlake_sync_duration_seconds_count", label)] == 1
        assert found[("xlake_last_success_timestamp_seconds", label)] > 0
        # The write job's callback arrives late: lag back to 0 and check 0 after the next cycle.
        assert callback(addr, table, 1)[0] == 200
        while True:
            found = samples(addr)
            if found.get(("xlake_lag_commits", label)) == 0 and found.get(("xlake_check_result", label)) == 0:
                break
            assert time.time() < deadline, found
            time.sleep(0.5)
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0
