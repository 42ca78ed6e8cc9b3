"""Spark with Hudi 1.2's bundle and xlake's table format jar (integrations/hudi-table-format,
built by `.ci/plugin`), `hoodie.table.format=xlake`: the plugin mirrors each instant in the
commit path, nothing else runs xlake. One Spark session (one JVM start) writes:

- `history`: a copy-on-write history (insert, upsert, delete, insert_overwrite, a column
  added, delete_partition, insert_overwrite_table, upserts with inline clustering, cleans,
  archival), then one write whose mirror fails (`hoodie.xlake.binary` names a script that
  exits 2), then writes that roll it back and go on. Spark+Hudi's rows at every completed
  instant that gets a snapshot go to `<out>/<instant>.parquet`, read right after the write.
- `mor`: a merge-on-read table with the format, whose first write must be refused;
- `nobinary`: a table whose first write finds no xlake binary;
- `killed`: last, a write whose driver is SIGKILLed between Hudi's completion of its instant
  and the mirror.

Each refusal's Java message goes to `<out>/done.json`. Other modes: `native` runs without
the plugin jar (the property still set): Hudi then falls back to a native table silently,
which `xlake check` must report; `after_kill` is the next writer of `killed`, which must roll
the killed write back.

    python plugin_writer.py <workdir> <out> [native|after_kill]
"""
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_writers as rw

PLUGIN_JAR = rw.PLUGIN_JAR
FORMAT = {"hoodie.table.format": "xlake", "hoodie.datasource.write.table.type": "COPY_ON_WRITE"}
FAILED_IDS = list(range(900, 904))


def session(with_plugin):
    from pyspark.sql import SparkSession

    jars = [rw.jar("hudi-spark-1.2")] + ([str(PLUGIN_JAR)] if with_plugin else [])
    b = (SparkSession.builder.master("local[1]").appName("xlake-plugin-writer")
         .config("spark.jars", ",".join(jars))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1"))
    for k, v in rw.HUDI_SESSION.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def set_binary(s, path):
    """`hoodie.xlake.binary` as a JVM system property (read at each callback); None unsets."""
    system = s._jvm.java.lang.System
    if path is None:
        system.clearProperty("hoodie.xlake.binary")
    else:
        system.setProperty("hoodie.xlake.binary", str(path))


def refused(write):
    """Run `write`; it must fail: the Java error text."""
    from py4j.protocol import Py4JJavaError

    try:
        write()
    except Py4JJavaError as e:  # the Java exception chain is in its text
        return str(e)
    raise AssertionError("the write was not refused")


def history(s, table, out, record, timings):
    write = rw.hudi_writer(s, table, record, **{"hoodie.table.name": "plugin_cow"}, **FORMAT)

    def timed(*args, **kwargs):
        start = time.monotonic()
        write(*args, **kwargs)
        timings.append(time.monotonic() - start)

    timed(rw.hudi_rows(s, 0, 30, 1), "insert", mode="overwrite")
    timed(rw.hudi_rows(s, 0, 10, 2), "upsert")
    timed(rw.hudi_rows(s, 20, 5, 3), "delete")
    timed(rw.hudi_rows(s, 100, 4, 4).filter("region = 'eu'"), "insert_overwrite")
    timed(rw.hudi_rows(s, 5, 6, 5, extra=True), "upsert")
    timed(rw.hudi_rows(s, 0, 3, 6, extra=True).limit(0), "delete_partition",
          **{"hoodie.datasource.write.partitions.to.delete": "region=asia"})
    timed(rw.hudi_rows(s, 200, 12, 7, extra=True), "insert_overwrite_table")
    for round_ in range(8, 18):
        timed(rw.hudi_rows(s, 200 + round_ % 4, 4, round_, extra=True), "upsert",
              **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"})
    # A write whose mirror fails: the Spark write must fail with xlake's text.
    failing = out / "failing-xlake"
    failing.write_text("#!/bin/sh\necho 'xlake: injected failure: metadata/ is not writable' >&2\nexit 2\n")
    failing.chmod(0o755)
    set_binary(s, failing)
    message = refused(lambda: write(rw.hudi_rows(s, FAILED_IDS[0], len(FAILED_IDS), 18, extra=True), "insert"))
    set_binary(s, None)
    # The next writes roll it back (a rollback instant, mirrored) and go on.
    timed(rw.hudi_rows(s, 300, 3, 19, extra=True), "insert")
    timed(rw.hudi_rows(s, 200, 4, 20, extra=True), "upsert")
    return message


KILLED_IDS = list(range(700, 704))


def killed(s, workdir, out):
    """A write whose driver dies by SIGKILL after Hudi completed its instant, before the
    mirror ran (the plugin's xlake is a script that kills its parent, the driver's JVM)."""
    table = str(workdir / "killed")
    write = rw.hudi_writer(s, table, lambda: None, **{"hoodie.table.name": "plugin_killed"}, **FORMAT)
    write(rw.hudi_rows(s, 0, 10, 1), "insert", mode="overwrite")
    killer = out / "killer-xlake"
    killer.write_text("#!/bin/sh\nkill -9 $PPID\n")
    killer.chmod(0o755)
    set_binary(s, killer)
    try:
        write(rw.hudi_rows(s, KILLED_IDS[0], len(KILLED_IDS), 2), "insert")
    except Exception:  # noqa: BLE001 - py4j cannot name the error of a JVM that is gone
        os._exit(0)
    raise AssertionError("the driver outlived its kill")


def after_kill(s, workdir, out):
    """The next write with the plugin on the killed table; Spark+Hudi's rows after it."""
    table = str(workdir / "killed")
    write = rw.hudi_writer(s, table, lambda: None, **{"hoodie.table.name": "plugin_killed"}, **FORMAT)
    write(rw.hudi_rows(s, 0, 5, 3), "upsert")
    s.read.format("hudi").load(table).write.mode("overwrite").parquet(str(out / "after.parquet"))
    return {"after": True}


def main(workdir, out, mode="plugin"):
    workdir, out = pathlib.Path(workdir), pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    s = session(mode != "native")
    result = {}
    if mode == "after_kill":
        result = after_kill(s, workdir, out)
    elif mode == "native":
        table = str(workdir / "native")
        write = rw.hudi_writer(s, table, lambda: None, **{"hoodie.table.name": "plugin_absent"}, **FORMAT)
        write(rw.hudi_rows(s, 0, 10, 1), "insert", mode="overwrite")
    else:
        table = str(workdir / "history")
        recorded, timings = [], []

        def record():
            for commit in rw.hudi_commits(table):
                if commit not in recorded:
                    rw.hudi_read(s, table, commit).write.mode("overwrite").parquet(str(out / f"{commit}.parquet"))
                    recorded.append(commit)

        result["failed_write"] = history(s, table, out, record, timings)
        result["commits"] = recorded
        result["write_seconds"] = timings
        mor = rw.hudi_writer(s, str(workdir / "mor"), lambda: None, **{"hoodie.table.name": "plugin_mor"},
                             **dict(FORMAT, **{"hoodie.datasource.write.table.type": "MERGE_ON_READ"}))
        result["mor"] = refused(lambda: mor(rw.hudi_rows(s, 0, 5, 1), "insert", mode="overwrite"))
        set_binary(s, workdir / "no-such-xlake")
        nobinary = rw.hudi_writer(s, str(workdir / "nobinary"), lambda: None,
                                  **{"hoodie.table.name": "plugin_nobinary"}, **FORMAT)
        result["no_binary"] = refused(lambda: nobinary(rw.hudi_rows(s, 0, 5, 1), "insert", mode="overwrite"))
        set_binary(s, None)
    (out / "done.json").write_text(json.dumps(result))
    if mode == "plugin":
        killed(s, workdir, out)  # the driver dies: last
    s.stop()


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main(*sys.argv[1:4])
