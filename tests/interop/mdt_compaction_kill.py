"""A Hudi 1.2.0 defect, reproduced without xlake: the first write of a JVM that finishes a
metadata-table compaction a killed writer left pending fails in Hudi's metadata table writer
(`ArrayIndexOutOfBoundsException` in `HoodieMetadataPayload.getInsertValue`); a second JVM's
write then succeeds. docs/hudi-plugin.md ("A Hudi defect the kill rounds hit") says why.

The steps, each a Spark driver of its own (local[1]) on one copy-on-write table, the kill
test's options (real_writers.HUDI_BASE), `hoodie.table.format` left at Hudi's default unless
`--plugin` (then xlake's, with the jar, and XLAKE_BIN for the binary):

1. a driver inserts, then upserts until the metadata table schedules a compaction (at the
   start of a write, after 10 delta commits); it is SIGKILLed as soon as
   `.hoodie/metadata/.hoodie/timeline/<t>.compaction.requested` appears without its commit;
2. wait out the killed driver's heartbeat (Hudi refuses the pending compaction until then);
3. a fresh driver's upsert: it runs the pending compaction first, then fails;
4. another fresh driver's upsert: it succeeds.

Prints one `MDT-REPRO {...}` line per step. About 5 minutes on 2 cores.

    python mdt_compaction_kill.py <empty dir> [--plugin]
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

HEARTBEAT_EXPIRY_S = 130  # 2 missed beats of Hudi's 60 s interval, and a margin
SIGNATURE = "HoodieMetadataPayload.getInsertValue"


def report(step, **fields):
    print("MDT-REPRO " + json.dumps(dict(fields, step=step)), flush=True)


def pending_compaction(table):
    """The metadata table's requested compaction without its completed commit, if any."""
    timeline = pathlib.Path(table) / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    if not timeline.is_dir():
        return None
    names = [p.name for p in timeline.iterdir()]
    for name in names:
        if name.endswith(".compaction.requested"):
            t = name.split(".")[0]
            if not any(n.startswith(t + "_") and n.endswith(".commit") for n in names):
                return t
    return None


def driver(table, mode, round_, plugin, log):
    return subprocess.Popen([sys.executable, __file__, "--driver", table, mode, str(round_)] + (["--plugin"] if plugin else []),
                            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)


def kill_at_compaction(table, plugin, out):
    """Step 1: upserts until the metadata table's compaction is requested, then SIGKILL."""
    with open(out / "driver-a.log", "w") as log:
        proc = driver(table, "loop", 1, plugin, log)
        while proc.poll() is None:
            instant = pending_compaction(table)
            if instant:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return instant
            time.sleep(0.02)
    raise SystemExit(f"driver a exited ({proc.returncode}) before a compaction was requested: {out / 'driver-a.log'}")


def one_write(table, round_, plugin, out, name):
    with open(out / f"{name}.log", "w") as log:
        proc = driver(table, "once", round_, plugin, log)
        proc.communicate()
    text = (out / f"{name}.log").read_text()
    return proc.returncode == 0, SIGNATURE in text


def run_driver(table, mode, round_, plugin):
    import kill_writer as kw
    import real_writers as rw

    options = dict(rw.HUDI_BASE, **{"hoodie.table.name": "mdt_repro", "hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
    if plugin:
        options["hoodie.table.format"] = "xlake"
    s = rw.session(["hudi-spark-1.2"] + ([str(rw.PLUGIN_JAR)] if plugin else []), rw.HUDI_SESSION)
    if mode == "loop":
        rw.hudi_rows(s, 0, 100, 1).write.format("hudi").options(**options, **{"hoodie.datasource.write.operation": "insert"}) \
            .mode("overwrite").save(table)
    rounds = range(round_ + 1, round_ + 200) if mode == "loop" else [round_]
    for r in rounds:
        ids = kw.completed_ids(r)
        df = rw.hudi_rows(s, ids.start, len(ids), r).unionByName(rw.hudi_rows(s, 0, 10, r))
        df.write.format("hudi").options(**options, **{"hoodie.datasource.write.operation": "upsert"}).mode("append").save(table)
        print(f"wrote round {r}", flush=True)
    s.stop()


def main(root, plugin):
    root = pathlib.Path(root)
    table, out = str(root / "table"), root / "out"
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    instant = kill_at_compaction(table, plugin, out)
    report("killed", compaction=instant, seconds=round(time.monotonic() - started))
    time.sleep(HEARTBEAT_EXPIRY_S)
    ok, signature = one_write(table, 500, plugin, out, "driver-b")
    report("first write after the kill", succeeded=ok, getInsertValue_in_log=signature,
           compaction_still_pending=pending_compaction(table) is not None)
    ok, signature = one_write(table, 501, plugin, out, "driver-c")
    report("second write after the kill", succeeded=ok, getInsertValue_in_log=signature)


if __name__ == "__main__":
    if sys.argv[1] == "--driver":
        run_driver(sys.argv[2], sys.argv[3], int(sys.argv[4]), "--plugin" in sys.argv)
    else:
        main(sys.argv[1], "--plugin" in sys.argv)
