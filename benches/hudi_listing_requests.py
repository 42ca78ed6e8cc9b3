"""Requests of an incremental Hudi sync on S3 in the three cases where the timeline listing
used to grow with history again (hostile review 6, D6): an instant pending for good, a
mirror whose snapshots `xlake expire --keep-snapshots 2` dropped, and the scheduled job's
no-op pass (`xlake run`). Counted at a recording proxy in front of moto, as
`s3_requests.py` does (its proxy and counter are reused).

    python benches/hudi_listing_requests.py XLAKE [XLAKE ...] [--instants 400,1200]

Each table is `gen_hudi.py`'s (table version 6, 2 files a commit), its instants one
minute apart (not one second: the 70-minute margin of a table with local instant times
then covers 70 instants, not 4,200), uploaded once per binary and case, mirrored (not
counted), then one 10-file commit added and the sync, or the job's pass, counted. The
pending instant is the table's second one, a `commit.requested` and `inflight` left
behind; once the counted sync is done it completes, and the next sync must mirror it once
(`xlake check` exit 0).
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import boto3

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_hudi
import s3_requests as s3


def minute_instant(n):
    """The n-th instant time, one minute apart from 2024-01-01 00:00."""
    return f"202401{1 + n // 1440:02d}{n // 60 % 24:02d}{n % 60:02d}00000"


def minute_number(ts):
    day, hh, mm = int(ts[6:8]), int(ts[8:10]), int(ts[10:12])
    return (day - 1) * 1440 + hh * 60 + mm


gen_hudi.instant = minute_instant
gen_hudi.instant_number = minute_number


HELD = "20240101000130000"


def make(local, instants, pending):
    """The table; with `pending`, an instant requested half a minute after the second one
    that stays pending (its requested and inflight files) until `complete`."""
    shutil.rmtree(local, ignore_errors=True)
    gen_hudi.generate(local, instants, 2)
    if not pending:
        return None
    hoodie = local / ".hoodie"
    (hoodie / f"{HELD}.commit.requested").write_text("")
    (hoodie / f"{HELD}.inflight").write_text("")
    return HELD


def complete(local, held):
    """The pending instant completes: one base file of a new file group. Its new files."""
    part = "day=2024-01-001"
    rel = f"{part}/held0000-0000-0000-0000-000000000000-0_0-1-1_{held}.parquet"
    src = gen_hudi.real_file(local, 0)
    (local / part).mkdir(parents=True, exist_ok=True)
    os.link(src, local / rel)
    size = src.stat().st_size
    stat = {"fileId": "held0000-0000-0000-0000-000000000000-0", "path": rel,
            "prevCommit": "null", "numWrites": gen_hudi.ROWS, "numDeletes": 0,
            "numUpdateWrites": 0, "numInserts": gen_hudi.ROWS, "totalWriteBytes": size,
            "totalWriteErrors": 0, "partitionPath": part, "fileSizeInBytes": size}
    meta = {"partitionToWriteStats": {part: [stat]}, "compacted": False,
            "extraMetadata": {"schema": json.dumps(gen_hudi.SCHEMA)},
            "operationType": "INSERT"}
    (local / ".hoodie" / f"{held}.commit").write_text(json.dumps(meta))
    return {rel, f".hoodie/{held}.commit"}


def run(binary, args, env):
    proc = subprocess.run([binary, *args], env=env, capture_output=True, check=False)
    if proc.returncode:
        sys.exit(f"{binary} {' '.join(args)}: {proc.stderr.decode()}")
    return proc


def case(name, binary, b, instants, client, counter, env, work):
    local = work / f"{name}_{instants}"
    held = make(local, instants, name == "pending")
    prefix = f"{name}{instants}-b{b}"
    url = f"s3://{s3.BUCKET}/{prefix}"
    s3.upload(client, local, prefix)
    run(binary, ["sync", url], env)
    if name == "expire":
        run(binary, ["expire", url, "--keep-snapshots", "2"], env)
    config = work / f"{prefix}.toml"
    config.write_text(f'[[tables]]\nlocation = "{url}"\nexpire = false\n')
    if name == "noop":
        run(binary, ["run", "--config", str(config), "--once"], env)  # keeps the record
    else:
        before = {p for p in local.rglob("*") if p.is_file()}
        gen_hudi.append_commit(local, 10, 100, upserts=5)
        new = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()} - {
            p.relative_to(local).as_posix() for p in before}
        s3.upload(client, local, prefix, only=new)
    counter.take()
    args = ["run", "--config", str(config), "--once"] if name == "noop" else ["sync", url]
    run(binary, args, env)
    seen = counter.take()
    by = collections.Counter(s3.kind(m, p) for m, p in seen)
    lists = sum(1 for m, p in seen if m == "GET" and "list-type" in p)
    result = {"all": len(seen), "LIST": lists}
    if held:
        # It completes now: the next sync mirrors it once.
        s3.upload(client, local, prefix, only=complete(local, held))
        run(binary, ["sync", url], env)
        check = subprocess.run([binary, "check", url], env=env, capture_output=True,
                               check=False)
        result["check after it completes"] = check.returncode
    return result, by


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binaries", nargs="+")
    p.add_argument("--instants", default="400,1200")
    p.add_argument("--cases", default="plain,pending,expire,noop")
    p.add_argument("--workdir", default="/tmp/xlake-bench/hudi-listing")
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    work = pathlib.Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    port = s3.free_port()
    moto = subprocess.Popen([str(pathlib.Path(sys.executable).parent / "moto_server"), "-H",
                             "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        counter = s3.Counter()
        server = s3.proxy(port, counter)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                              aws_access_key_id=s3.KEY, aws_secret_access_key=s3.KEY,
                              region_name="us-east-1")
        client.create_bucket(Bucket=s3.BUCKET)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT=endpoint, AWS_ACCESS_KEY_ID=s3.KEY,
                   AWS_SECRET_ACCESS_KEY=s3.KEY, AWS_REGION="us-east-1",
                   AWS_ALLOW_HTTP="true")
        print("| case | instants | binary | requests | LIST pages | check after |")
        print("|---|---|---|---|---|---|")
        for name in a.cases.split(","):
            for instants in map(int, a.instants.split(",")):
                for b, binary in enumerate(a.binaries):
                    result, by = case(name, binary, b, instants, client, counter, env, work)
                    check = result.get("check after it completes", "")
                    print(f"| {name} | {instants} | {binary} | {result['all']} | "
                          f"{result['LIST']} | {check} |", flush=True)
                    if a.verbose:
                        print("   ", dict(by))
    finally:
        moto.terminate()


if __name__ == "__main__":
    main()
