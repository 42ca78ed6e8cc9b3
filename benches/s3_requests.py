"""Requests per incremental commit on S3 (issue 47): a counting proxy on loopback between
xlake and an S3 server (moto in server mode, from the interop venv).

    python benches/s3_requests.py XLAKE [XLAKE ...] [--versions 10,1000] [--rounds 5] [--format delta|hudi]
        [--keep-active N]

For each history length, generates a table (Delta: `gen_delta.py`, V versions x 1 file;
Hudi: `gen_hudi.py`, V instants x 2 files), uploads one copy per binary, mirrors it with
that binary (not counted), then per round adds one 10-file commit (Hudi: 5 of them
upserts of the newest commit's groups) to every copy and counts the requests of one
`xlake sync` of it, by method and by what they touch. Prints per binary and length the
median of the rounds and the highest, and one round's requests in full.
xlake must be built with `--features cloud`.

With `--latency-ms L` the requests go through `tests/interop/fault_proxy.py` in latency
mode in front of the counting proxy: every request waits L ms. Rounds alternate between
L and no added latency (odd rounds at L), and each `xlake sync` is timed: its round trips
on the critical path are reported as wall / L and, without what the process costs by
itself, (median wall at L - median wall without) / L. Both carry the machine's noise; the
proxy's timeline gives the figure without it: a request that arrives while no other is
in flight starts a round trip, one that arrives while another is in flight shares it.
"""
import argparse
import collections
import concurrent.futures
import http.client
import http.server
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

import boto3

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests" / "interop"))
import gen_delta
import gen_hudi
from fault_proxy import FaultProxy

KEY = "xlake-bench"
BUCKET = "bench"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []

    def add(self, method, path):
        with self.lock:
            self.seen.append((method, path))

    def take(self):
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


def proxy(upstream_port, counter):
    """A forwarding HTTP/1.1 proxy on loopback that records each request."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            counter.add(self.command, self.path)
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            length = resp.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def kind(method, path):
    """What a request touches, for the report."""
    parsed = urllib.parse.urlparse(path)
    key = urllib.parse.unquote(parsed.path)
    query = urllib.parse.parse_qs(parsed.query)
    if "list-type" in query:
        return f"LIST {query.get('prefix', [''])[0].split('/', 1)[-1]}"
    name = key.rsplit("/", 1)[-1]
    for pattern, label in (("-m", "manifest"), ("snap-", "manifest list"),
                           (".metadata.json", "vN.metadata.json"), ("version-hint", "hint"),
                           (".xlake-probe", "probe"), ("-paths.bin", "path index"),
                           ("_last_checkpoint", "_last_checkpoint"),
                           ("hoodie.properties", "hoodie.properties"),
                           (".checkpoint.parquet", "checkpoint"), (".json", "log/commit file"),
                           (".commit", "log/commit file"), (".parquet", "data file")):
        if pattern in name:
            return f"{method} {label}"
    return f"{method} {name}"


def upload(client, local, prefix, only=None):
    files = [p for p in pathlib.Path(local).rglob("*") if p.is_file()
             and "_bench_src" not in p.parts and "metadata" not in p.parts
             and not p.name.startswith("_bench") and p.name != "_generated"]
    if only is not None:
        files = [p for p in files if p.relative_to(local).as_posix() in only]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: client.upload_file(
            str(p), BUCKET, f"{prefix}/{p.relative_to(local).as_posix()}"), files))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binaries", nargs="+")
    p.add_argument("--versions", default="10,1000")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--format", choices=["delta", "hudi"], default="delta")
    p.add_argument("--workdir", default="/tmp/xlake-bench/s3")
    p.add_argument("--skip-file-check", action="store_true")
    p.add_argument("--keep-active", type=int, default=0,
                   help="Hudi: archive all but the newest N instants before the first sync "
                        "(Hudi's default archival keeps 20 to 30; 0: archive nothing)")
    p.add_argument("--verbose", action="store_true", help="print the last round's requests")
    p.add_argument("--latency-ms", type=float, default=0.0,
                   help="add this latency to every request (odd rounds) and time each sync")
    a = p.parse_args()
    workdir = pathlib.Path(a.workdir)
    moto_port = free_port()
    moto = subprocess.Popen([str(pathlib.Path(sys.executable).parent / "moto_server"), "-H",
                             "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):  # moto_server starts in seconds, more on a loaded machine
            try:
                socket.create_connection(("127.0.0.1", moto_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        counter = Counter()
        server = proxy(moto_port, counter)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        a.delay = None
        if a.latency_ms:
            a.delay = FaultProxy(f"127.0.0.1:{server.server_address[1]}")
            endpoint = a.delay.endpoint
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto_port}",
                              aws_access_key_id=KEY, aws_secret_access_key=KEY,
                              region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT=endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=KEY,
                   AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
        extra = ["--skip-file-check"] if a.skip_file_check else []
        for versions in map(int, a.versions.split(",")):
            measure(a, workdir, versions, client, counter, env, extra)
    finally:
        moto.terminate()


def measure(a, workdir, versions, client, counter, env, extra):
    local = workdir / f"{a.format}_{versions}"
    shutil.rmtree(local, ignore_errors=True)
    if a.format == "delta":
        gen_delta.generate(local, versions, 1)
    else:
        gen_hudi.generate(local, versions, 2)
        if a.keep_active:
            print(f"hudi, {versions} instants: {gen_hudi.archive(local, a.keep_active)} archived")
    counts = collections.defaultdict(list)
    walls = collections.defaultdict(lambda: collections.defaultdict(list))
    example = {}
    for b, binary in enumerate(a.binaries):
        prefix = f"{a.format}{versions}-b{b}"
        upload(client, local, prefix)
        proc = subprocess.run([binary, "sync", f"s3://{BUCKET}/{prefix}", *extra], env=env,
                              capture_output=True, check=False)
        if proc.returncode:
            sys.exit(proc.stderr.decode())
    for r in range(a.rounds):
        before = {str(p.relative_to(local).as_posix()) for p in local.rglob("*") if p.is_file()}
        if a.format == "delta":
            gen_delta.append_commit(local, 10, 100 + r)
        else:
            gen_hudi.append_commit(local, 10, 100 + r, upserts=5)
        new = {str(p.relative_to(local).as_posix()) for p in local.rglob("*") if p.is_file()} - before
        for b, binary in enumerate(a.binaries):
            prefix = f"{a.format}{versions}-b{b}"
            upload(client, local, prefix, only=new)
            counter.take()
            latency = a.latency_ms if a.delay and r % 2 else 0.0
            if a.delay:
                a.delay.set("latency", latency=latency / 1000)
                a.delay.timeline.clear()
            start = time.perf_counter()
            proc = subprocess.run([binary, "sync", f"s3://{BUCKET}/{prefix}", *extra],
                                  env=env, capture_output=True, check=False)
            walls[b][latency].append(time.perf_counter() - start)
            if a.delay and latency:
                walls[b]["trips"].append(round_trips(a.delay.timeline))
            if proc.returncode:
                sys.exit(proc.stderr.decode())
            seen = counter.take()
            by = collections.Counter(kind(m, p) for m, p in seen)
            by["all"] = len(seen)
            for method in ("GET", "HEAD", "PUT", "DELETE", "POST"):
                by[method] = sum(1 for m, _ in seen if m == method)
            counts[b].append(by)
            example[b] = seen
    for b, binary in enumerate(a.binaries):
        rounds = counts[b]
        keys = sorted({k for c in rounds for k in c})
        print(f"\n{a.format}, {versions} versions, {binary}: median / max over {len(rounds)} rounds")
        for k in keys:
            vals = [c.get(k, 0) for c in rounds]
            print(f"  {k:36} {statistics.median(vals):6.1f} {max(vals):5d}")
        if a.delay:
            report_latency(a.latency_ms, walls[b])
        if a.verbose:
            print("  the last round's requests, in order:")
            for method, path in example[b]:
                print(f"    {method:6} {urllib.parse.unquote(path)[:110]}")


def round_trips(timeline):
    """Sequential round trips in a proxy timeline of (arrived, answered): a request that
    arrives when none is in flight starts one."""
    trips, busy_until = 0, float("-inf")
    for arrived, answered in sorted(timeline):
        if arrived >= busy_until:
            trips += 1
        busy_until = max(busy_until, answered) if arrived < busy_until else answered
    return trips


def report_latency(latency_ms, walls):
    """Round trips on the critical path, from the syncs timed at `latency_ms` and at 0."""
    slow = statistics.median(walls[latency_ms])
    print(f"  wall at {latency_ms:g} ms per request: median {slow * 1000:.0f} ms over "
          f"{len(walls[latency_ms])} rounds ({', '.join(f'{w * 1000:.0f}' for w in walls[latency_ms])})")
    print(f"  round trips, wall / {latency_ms:g} ms: {slow * 1000 / latency_ms:.1f}")
    print(f"  round trips in the proxy's timeline: {walls['trips']}")
    if walls[0.0]:
        fast = statistics.median(walls[0.0])
        print(f"  wall without added latency: median {fast * 1000:.0f} ms over {len(walls[0.0])} rounds")
        print(f"  round trips, (wall - wall without) / {latency_ms:g} ms: "
              f"{(slow - fast) * 1000 / latency_ms:.1f}")


if __name__ == "__main__":
    main()
