"""`xlake serve` under load on loopback, and the answer time of one callback.

    python benches/serve_load.py [--tables 20] [--commits 10] [--clients 16] [--workdir DIR]

1. Latency: a generated Delta table of 1,000 commits x 10 files is mirrored, then N more
   10-file commits are each announced by one callback, one at a time; p50/p99 answer time
   (Hudi's HTTP callback client gives up after `hoodie.write.commit.callback.http.timeout.seconds`).
2. Load: `--tables` tables of `--commits` 10-file commits; one callback per commit, shuffled,
   sent by `--clients` concurrent clients on keep-alive connections. Every answer must be
   200, and afterwards `xlake check` must find exactly one snapshot per commit. Prints p50/p99
   and the service's peak RSS (VmHWM).

Uses the binary named by XLAKE_BIN, else builds a release one.
"""
import argparse
import http.client
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gen_delta

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEY = "bench-callback-key"


def binary():
    if os.environ.get("XLAKE_BIN"):
        return os.environ["XLAKE_BIN"]
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "xlake"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "xlake")


def start(bin_, allow, concurrency):
    env = dict(os.environ, XLAKE_CALLBACK_KEY=KEY)
    server = subprocess.Popen([bin_, "serve", "--listen", "127.0.0.1:0", "--allow", str(allow),
                               "--concurrency", str(concurrency)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = server.stdout.readline().split()[-1]
    host, port = addr.rsplit(":", 1)
    return server, host, int(port)


class Client:
    """One keep-alive connection."""

    def __init__(self, host, port):
        self.conn = http.client.HTTPConnection(host, port, timeout=600)

    def callback(self, table, version):
        body = json.dumps({"commitTime": str(version), "tableName": table.name,
                           "basePath": f"file:{table}", "commitActionType": "commit"})
        start = time.perf_counter()
        self.conn.request("POST", "/", body=body, headers={"HUDI-CALLBACK-KEY": KEY,
                                                           "Content-Type": "application/json"})
        answer = self.conn.getresponse()
        text = answer.read()
        return answer.status, time.perf_counter() - start, text


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def latency(bin_, workdir, runs):
    table = workdir / "latency_1000x10"
    if not (table / "_generated").exists():
        shutil.rmtree(table, ignore_errors=True)
        gen_delta.generate(table, 1000, 10)
        (table / "_generated").write_text("1")
    subprocess.run([bin_, "sync", table], check=True, stdout=subprocess.DEVNULL)
    server, host, port = start(bin_, workdir, 4)
    try:
        client, times = Client(host, port), []
        for i in range(runs):
            version = gen_delta.append_commit(table, 10, 5000 + i)
            status, took, text = client.callback(table, version)
            assert status == 200, text
            times.append(took)
        return statistics.median(times), pct(times, 99)
    finally:
        server.terminate()
        server.wait()


def load(bin_, workdir, tables, commits, clients):
    base = workdir / "load"
    shutil.rmtree(base, ignore_errors=True)
    paths, work = [], []
    for t in range(tables):
        path = base / f"t{t:02d}"
        gen_delta.generate(path, 1, 10)
        for c in range(commits):
            work.append((path, gen_delta.append_commit(path, 10, t * 1000 + c)))
        paths.append(path)
    random.Random(1).shuffle(work)
    server, host, port = start(bin_, base, 4)
    times, failures, lock = [], [], threading.Lock()

    def worker(items):
        client = Client(host, port)
        for path, version in items:
            status, took, text = client.callback(path, version)
            with lock:
                times.append(took)
                if status != 200:
                    failures.append((status, text))

    try:
        started = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(work[i::clients],)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        rss = peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait()
    assert not failures, failures[:3]
    for path in paths:
        check = subprocess.run([bin_, "check", path, "--json"], capture_output=True, text=True, check=False)
        report = json.loads(check.stdout)
        assert check.returncode == 0 and report["snapshots"] == commits + 1, check.stdout
    return len(work), wall, statistics.median(times), pct(times, 99), rss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=20)
    p.add_argument("--commits", type=int, default=10)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--latency-runs", type=int, default=100)
    p.add_argument("--workdir", default="/tmp/xlake-bench-serve")
    args = p.parse_args()
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    bin_ = binary()
    p50, p99 = latency(bin_, workdir, args.latency_runs)
    print(f"one 10-file commit per callback, 10k live files, 1,000+ snapshots: "
          f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({args.latency_runs} callbacks)")
    n, wall, p50, p99, rss = load(bin_, workdir, args.tables, args.commits, args.clients)
    print(f"load: {n} callbacks over {args.tables} tables from {args.clients} clients in {wall:.1f} s: "
          f"all 200, one snapshot per commit; p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
          f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
