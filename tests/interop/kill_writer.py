"""One Spark driver of test_hudi_kills.py: Spark with Hudi 1.2's bundle and xlake's table
format jar (`hoodie.table.format=xlake`, the plugin mirrors in the commit path), local[1].
It makes one write that completes (round 1: the table's first insert; later rounds: an upsert,
which rolls back what the previous round's killed write left), writes Hudi's own read of
the table to `<out>/hudi-<round>.parquet`, says `ready`, and waits on stdin: `go` starts the
write the test kills with SIGKILL (it says `writing` right before it, and `written` if it
returns before the kill), `stop` ends the driver.

Round 1 also times one write of the killed write's shape before `ready` (`write_seconds`),
so the test can draw its kill delays within a write.

Lines for the test start with `XLAKE-KILLS ` on stdout (Spark's own output goes to stderr).

    python kill_writer.py <table> <out> <round>
"""
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_writers as rw

OPTIONS = dict(rw.HUDI_BASE, **{"hoodie.table.name": "kills_cow", "hoodie.table.format": "xlake",
                                "hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
if os.environ.get("XLAKE_KILL_METADATA"):  # hoodie.metadata.enable, else Hudi's default (on)
    OPTIONS["hoodie.metadata.enable"] = os.environ["XLAKE_KILL_METADATA"]
KILLED_ROWS = 400  # new ids of each killed write


def say(event, **fields):
    print("XLAKE-KILLS " + json.dumps(dict(fields, event=event)), flush=True)


def completed_ids(round_):
    """The new ids of round `round_`'s completing write (round 1: the first 100)."""
    return range(100) if round_ == 1 else range(round_ * 10000, round_ * 10000 + 20)


def killed_ids(round_):
    return range(round_ * 10000 + 5000, round_ * 10000 + 5000 + KILLED_ROWS)


def write(s, table, ids, round_, operation="upsert", mode="append"):
    """`ids` new, and ids 0-9 updated (named after `round_`): one upsert."""
    df = rw.hudi_rows(s, ids.start, len(ids), round_)
    if mode == "append":
        df = df.unionByName(rw.hudi_rows(s, 0, 10, round_))
    df.write.format("hudi").options(**OPTIONS, **{"hoodie.datasource.write.operation": operation}) \
        .mode(mode).save(table)


def main(table, out, round_):
    round_ = int(round_)
    out = pathlib.Path(out)
    s = rw.session(["hudi-spark-1.2", str(rw.PLUGIN_JAR)], rw.HUDI_SESSION)
    ready = {}
    if round_ == 1:
        write(s, table, completed_ids(1), 1, operation="insert", mode="overwrite")
        started = time.monotonic()
        write(s, table, killed_ids(0), 1)
        ready["write_seconds"] = time.monotonic() - started
    else:
        write(s, table, completed_ids(round_), round_)
    s.read.format("hudi").load(table).select("id", "name", "region") \
        .write.mode("overwrite").parquet(str(out / f"hudi-{round_}.parquet"))
    say("ready", **ready)
    if sys.stdin.readline().strip() != "go":
        s.stop()
        return
    say("writing")
    write(s, table, killed_ids(round_), round_)
    say("written")
    sys.stdin.readline()  # the kill comes while it waits


if __name__ == "__main__":
    main(*sys.argv[1:4])
