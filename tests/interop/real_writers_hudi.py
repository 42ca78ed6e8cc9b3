"""Long Hudi histories written by Spark with Hudi's own bundles (1.2: table version 9; 0.15:
table version 6), registered into real_writers.HISTORIES beside the short ones when this
script runs (not on import, so test_real_writers.py's list stays the fast four). Each has
25 commits or more that get a snapshot, and between them they hold every action a Spark job
does to a Hudi table:

    insert, upsert, delete, insert_overwrite, insert_overwrite_table, delete_partition;
    inline clustering, clean, archival past the active timeline; a write killed part-way
    (its driver SIGKILLed) and rolled back by the next writer; savepoint then restore;
    a column added, and a column widened from int to long; simple, complex, timestamp and
    non-partitioned key generators; copy-on-write and merge-on-read (read-optimized).

Rows as of each commit are read by Spark+Hudi right after the write that made it (the
oracle, as real_writers.main does for every history).

    python real_writers_hudi.py <history> <table> <out>
    python real_writers_hudi.py killed <history> <table>    (the write that is killed)
"""
import functools
import os
import pathlib
import signal
import subprocess
import sys
import time

import real_writers
from real_writers import (
    HUDI_SESSION,
    History,
    hudi_commits,
    hudi_read,
    hudi_read_optimized,
)

KEYGEN = {
    "simple": {"hoodie.datasource.write.partitionpath.field": "region"},
    "complex": {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
                "hoodie.datasource.write.recordkey.field": "id,region",
                "hoodie.datasource.write.partitionpath.field": "region,bucket"},
    "timestamp": {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
                  "hoodie.datasource.write.partitionpath.field": "event_ms",
                  "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                  "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
                  "hoodie.keygen.timebased.timezone": "UTC"},
    "none": {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
             "hoodie.datasource.write.partitionpath.field": ""},
}
MIN_COMMITS = 25
# Spark+Hudi 1.2 shows a TimestampBasedKeyGenerator's source column as a string
# ('1700086400000'), although every file holds int64 and the writer's schema says long:
# the Iceberg readers are compared with it as stored.
ORACLE_CASTS = {"hudi9_timestamp_cow": {"event_ms": "int64"}}


def rows(s, start, n, round_, note=False, qty="int"):
    """n rows from id `start`; `note` adds a column, `qty` is its type (int, then long)."""
    cols = ["id", "element_at(array('eu','us','asia'), CAST(id % 3 + 1 AS INT)) AS region",
            "CAST(id % 2 AS INT) AS bucket", f"concat('n', id, '-r{round_}') AS name",
            f"CAST(id AS DOUBLE) + {round_ / 10} AS price", f"CAST({round_} AS BIGINT) AS ts",
            f"CAST(IF(id >= 0, id * {round_}, NULL) AS {qty}) AS qty",  # nullable, as added columns must be
            "CAST(1700000000000 + (id % 4) * 86400000 AS BIGINT) AS event_ms"]
    if note:
        cols.append(f"IF(id >= 0, concat('note', {round_}), NULL) AS note")
    return s.range(start, start + n).selectExpr(*cols)


def options(name, keygen, table_type, bundle):
    # Hudi 0.15 cannot restore a table whose metadata table compacted after the savepoint
    # ("no base file in MDT lesser than the commit to restore to"): its table goes without.
    metadata = "false" if bundle == "hudi-spark-0.15" else "true"
    return dict(real_writers.HUDI_BASE, **KEYGEN[keygen], **{
        "hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.hive_style_partitioning": "true", "hoodie.metadata.enable": metadata})


def latest(table):
    return hudi_commits(table)[-1]


def kill_a_write(table, history):
    """A writer of its own (one more JVM) whose driver is SIGKILLed once its instant is
    inflight: the next write of this history must roll it back."""
    run = subprocess.Popen([sys.executable, __file__, "killed", history, table],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    timeline = pathlib.Path(table) / ".hoodie"
    before = {p.name for p in timeline.rglob("*.inflight")}
    deadline = time.time() + 600
    while time.time() < deadline and run.poll() is None:
        if {p.name for p in timeline.rglob("*.inflight")} - before:
            time.sleep(1.5)  # part-way: files being written
            break
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()


def long_history(s, table, done, name, keygen, table_type, bundle):
    """The actions of the module docs, in one history of at least MIN_COMMITS commits."""
    opts = options(name, keygen, table_type, bundle)
    seen = set()  # every commit that got a snapshot, archived or not

    def write(df, operation, mode="append", **extra):
        df.write.format("hudi").options(**opts, **{"hoodie.datasource.write.operation": operation},
                                        **extra).mode(mode).save(table)
        done()
        seen.update(hudi_commits(table))

    partitioned = keygen != "none"
    write(rows(s, 0, 40, 1), "insert", mode="overwrite")
    for round_ in (2, 3, 4):
        write(rows(s, round_ * 7, 9, round_), "upsert")
    write(rows(s, 30, 4, 5), "delete")
    if partitioned:
        write(rows(s, 100, 6, 6).filter("region = 'eu'"), "insert_overwrite")
    write(rows(s, 3, 8, 7, note=True), "upsert")
    write(rows(s, 11, 8, 8, note=True, qty="bigint"), "upsert")
    if partitioned and keygen != "timestamp":
        write(rows(s, 0, 3, 9, note=True, qty="bigint").limit(0), "delete_partition",
              **{"hoodie.datasource.write.partitions.to.delete": delete_partition_of(keygen)})
    saved = latest(table)
    # The procedures build their own write config from the session's: without this, the
    # savepoint would bootstrap the metadata table 0.15's restore then trips over.
    s.sql(f"SET hoodie.metadata.enable={opts['hoodie.metadata.enable']}")
    s.sql(f"CALL create_savepoint(path => '{table}', commit_time => '{saved}')")
    for round_ in (10, 11):
        write(rows(s, 200 + round_, 5, round_, note=True, qty="bigint"), "upsert")
    s.sql(f"CALL rollback_to_savepoint(path => '{table}', instant_time => '{saved}')")
    done("restore")  # no write: Hudi sends no callback for it
    seen.update(hudi_commits(table))
    kill_a_write(table, history_of(name))
    write(rows(s, 300, 5, 12, note=True, qty="bigint"), "upsert")  # rolls the killed write back
    write(rows(s, 400, 20, 13, note=True, qty="bigint"), "insert_overwrite_table")
    round_ = 14
    while len(seen) < MIN_COMMITS + 2:
        write(rows(s, 400 + round_ % 7, 5, round_, note=True, qty="bigint"), "upsert",
              **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "4"})
        round_ += 1


def delete_partition_of(keygen):
    return {"simple": "region=asia", "complex": "region=asia/bucket=1"}[keygen]


def history_of(name):
    return next(h for h, (table_name, *_) in SPECS.items() if table_name == name)


# history -> (hoodie.table.name, key generator, table type, Hudi bundle)
SPECS = {
    "hudi9_simple_cow": ("simple_cow", "simple", "COPY_ON_WRITE", "hudi-spark-1.2"),
    "hudi9_complex_cow": ("complex_cow", "complex", "COPY_ON_WRITE", "hudi-spark-1.2"),
    "hudi9_timestamp_cow": ("timestamp_cow", "timestamp", "COPY_ON_WRITE", "hudi-spark-1.2"),
    "hudi9_flat_cow": ("flat_cow", "none", "COPY_ON_WRITE", "hudi-spark-1.2"),
    "hudi9_simple_mor": ("simple_mor", "simple", "MERGE_ON_READ", "hudi-spark-1.2"),
    "hudi6_complex_cow": ("complex_cow6", "complex", "COPY_ON_WRITE", "hudi-spark-0.15"),
}


def history(name):
    table_name, keygen, table_type, bundle = SPECS[name]
    write = functools.partial(long_history, name=table_name, keygen=keygen, table_type=table_type, bundle=bundle)
    mor = table_type == "MERGE_ON_READ"
    return History([bundle], HUDI_SESSION, lambda s, t, d: write(s, t, d),
                   hudi_commits, hudi_read_optimized if mor else hudi_read, "--instant",
                   ("--mor-read-optimized",) if mor else ())


HUDI_HISTORIES = {name: history(name) for name in SPECS}


def killed(name, table):
    """The write a driver SIGKILL interrupts (it runs until killed)."""
    table_name, keygen, table_type, bundle = SPECS[name]
    plugin = os.environ.get("XLAKE_MIRROR_BY") == "plugin"
    s = real_writers.session([bundle] + ([str(real_writers.PLUGIN_JAR)] if plugin else []), HUDI_SESSION)
    opts = dict(options(table_name, keygen, table_type, bundle), **(real_writers.PLUGIN if plugin else {}))
    (rows(s, 5000, 200000, 99, note=True, qty="bigint").write.format("hudi")
     .options(**opts, **{"hoodie.datasource.write.operation": "upsert"}).mode("append").save(table))


if __name__ == "__main__":
    if sys.argv[1] == "killed":
        killed(*sys.argv[2:4])
    else:
        real_writers.HISTORIES.update(HUDI_HISTORIES)
        real_writers.main(*sys.argv[1:4])
