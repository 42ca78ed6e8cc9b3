"""Tables written by the writers users run: Spark with Hudi's own bundle, Spark with
delta-spark (jars from tests/interop/jars.txt, fetched by `.ci/jars`). Each history runs in
a process of its own (one Spark session per process, and Hudi's and Delta's session
settings do not mix), and writes, beside the table, the source engine's own rows at every
completed commit that gets a snapshot: `<out>/<commit id>.parquet`, the engine's read as of
that commit, made right after the write that made it (a later clean may delete the files an
older commit's rows are in, so a read at the end could not give them; one write may make
two commits, as with inline clustering or compaction).
Each write is followed by `xlake commit` for each commit it made (xlake_cli: XLAKE_BIN, or
cargo run), as a job's last step would run it (Hudi archives old instants out of the active timeline, so a
mirror made only at the end would start from the active ones).

    python real_writers.py <history> <table> <out>
"""
import dataclasses
import json
import pathlib
import subprocess
import sys
from typing import ClassVar

HERE = pathlib.Path(__file__).resolve().parent
JARS = HERE / ".jars"


PLUGIN_JAR = HERE.parents[1] / "integrations" / "hudi-table-format" / "target" / "xlake-hudi-table-format-0.1.0.jar"


def jar(name):
    """A pinned jar from the cache, fetched by `.ci/jars` first if it is missing (or a
    jar's own path)."""
    if pathlib.Path(name).is_absolute():
        return name
    path = JARS / f"{name}.jar"
    if not path.is_file():
        subprocess.run([str(HERE.parents[1] / ".ci" / "jars")], check=True)
    return str(path)


def session(jars, conf):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("xlake-real-writer")
        .config("spark.jars", ",".join(jar(j) for j in jars))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    s = builder.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


# --- Spark + Hudi -------------------------------------------------------------------------

HUDI_SESSION = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
}


def hudi_rows(s, start, n, round_, extra=False):
    from pyspark.sql import Row

    regions = ["eu", "us", "asia"]
    rows = []
    for i in range(start, start + n):
        r = {"id": i, "region": regions[i % 3], "name": f"n{i}-r{round_}", "price": float(i) + round_ / 10, "ts": round_}
        if extra:
            r["note"] = f"note{round_}"
        rows.append(Row(**r))
    return s.createDataFrame(rows)


HUDI_BASE = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.datasource.write.hive_style_partitioning": "true",
    "hoodie.clean.commits.retained": "6",
    "hoodie.keep.min.commits": "7",
    "hoodie.keep.max.commits": "8",
}


def hudi_writer(s, table, done, **table_options):
    """write(df, operation, mode, **options): one Hudi write, then `done()`."""
    base = dict(HUDI_BASE, **table_options)

    def write(df, operation, mode="append", **extra):
        opts = dict(base, **{"hoodie.datasource.write.operation": operation}, **extra)
        df.write.format("hudi").options(**opts).mode(mode).save(table)
        done()

    return write


def hudi_cow(s, table, done):
    """Copy-on-write, partitioned by `region` (hive-style), the metadata table on as by
    default: insert, upsert, delete, insert_overwrite of a partition, a column added,
    delete_partition, insert_overwrite_table, then upserts with inline clustering every 3
    commits and a clean keeping 6 commits (then archival past the active timeline)."""
    write = hudi_writer(s, table, done, **{"hoodie.table.name": "real_cow",
                                           "hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
    write(hudi_rows(s, 0, 30, 1), "insert", mode="overwrite")
    write(hudi_rows(s, 0, 10, 2), "upsert")
    write(hudi_rows(s, 20, 5, 3), "delete")
    write(hudi_rows(s, 100, 4, 4).filter("region = 'eu'"), "insert_overwrite")
    write(hudi_rows(s, 5, 6, 5, extra=True), "upsert")
    write(hudi_rows(s, 0, 3, 6, extra=True).limit(0), "delete_partition",
          **{"hoodie.datasource.write.partitions.to.delete": "region=asia"})
    write(hudi_rows(s, 200, 12, 7, extra=True), "insert_overwrite_table")
    for round_ in range(8, 14):
        write(hudi_rows(s, 200 + round_ % 4, 4, round_, extra=True), "upsert",
              **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"})


def hudi_mor(s, table, done):
    """Merge-on-read, partitioned by `region`: inserts, upserts and a delete as delta
    commits (log files), compacted inline every 3 delta commits; mirrored read-optimized
    (base files only), as Hudi's read_optimized query reads it."""
    write = hudi_writer(s, table, done, **{"hoodie.table.name": "real_mor",
                                           "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                           "hoodie.compact.inline": "true",
                                           "hoodie.compact.inline.max.delta.commits": "3"})
    write(hudi_rows(s, 0, 30, 1), "insert", mode="overwrite")
    for round_ in range(2, 9):
        write(hudi_rows(s, round_ * 3, 8, round_), "upsert")
    write(hudi_rows(s, 0, 6, 9), "delete")
    write(hudi_rows(s, 40, 6, 10), "insert")


def hudi_commits(table):
    sys.path.insert(0, str(HERE))
    import hudi_source

    return [requested for requested, _, _ in hudi_source.snapshot_instants(table)]


def hudi_as_of(table, commit):
    """The time to read commit `commit` as of: its completion time (table versions 8/9; the
    same instants then under either reading of `as.of.instant`), else the instant time."""
    sys.path.insert(0, str(HERE))
    import hudi_source

    return next(done or requested for requested, _, done in hudi_source.completed_instants(table)
                if requested == commit)


def hudi_read(s, table, commit):
    return s.read.format("hudi").option("as.of.instant", hudi_as_of(table, commit)).load(table)


def hudi_read_optimized(s, table, commit):
    return (s.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
            .option("as.of.instant", hudi_as_of(table, commit)).load(table))


# --- Spark + Delta ------------------------------------------------------------------------

DELTA_SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
}


def delta_dv(s, table, done):
    """Partitioned by `region`, deletion vectors on, a classic checkpoint every 5 versions:
    append, overwrite, replaceWhere, DELETE, UPDATE, MERGE (each through deletion vectors),
    a column added, OPTIMIZE, RESTORE."""
    t = f"delta.`{table}`"

    def sql(text):
        s.sql(text)
        done()

    sql(f"CREATE TABLE {t} (id BIGINT, region STRING, name STRING, price DOUBLE) USING delta "
          "PARTITIONED BY (region) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
          "'delta.checkpointInterval' = '5')")
    sql(f"INSERT INTO {t} SELECT id, element_at(array('eu','us','asia'), CAST(id % 3 + 1 AS INT)), "
          f"concat('n', id), id * 1.5 FROM range(0, 60)")
    sql(f"INSERT INTO {t} SELECT id, 'eu', concat('m', id), id * 2.0 FROM range(60, 70)")
    sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    sql(f"UPDATE {t} SET price = price + 100 WHERE id % 5 = 1")
    sql(f"MERGE INTO {t} d USING (SELECT id, 'us' AS region, concat('merged', id) AS name, 1.0 AS price "
          f"FROM range(55, 80)) u ON d.id = u.id AND d.region = u.region "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    sql(f"INSERT INTO {t} REPLACE WHERE region = 'asia' "
          "SELECT id, 'asia', concat('a', id), 3.0 FROM range(300, 305)")
    sql(f"ALTER TABLE {t} ADD COLUMNS (note STRING)")
    sql(f"INSERT INTO {t} SELECT id, 'eu', 'late', 9.0, 'added' FROM range(400, 403)")
    sql(f"DELETE FROM {t} WHERE region = 'eu' AND id < 10")
    sql(f"OPTIMIZE {t}")
    sql(f"RESTORE TABLE {t} TO VERSION AS OF 4")
    sql(f"UPDATE {t} SET name = 'after-restore' WHERE id % 4 = 0")


def delta_commits(table):
    return [p.stem.lstrip("0") or "0" for p in sorted((pathlib.Path(table) / "_delta_log").glob("*.json"))]


def delta_read(s, table, commit):
    return s.read.format("delta").option("versionAsOf", int(commit)).load(table)


@dataclasses.dataclass(frozen=True)
class History:
    jars: list
    session: dict
    write: object  # (session, table, done)
    commits: object  # table -> the ids of its commits that get a snapshot, in order
    read: object  # (session, table, commit) -> the engine's rows as of that commit
    commit_flag: str  # how `xlake commit` names a commit
    xlake_flags: tuple = ()


HISTORIES = {
    # Hudi 1.2 writes table version 9 (.hoodie/timeline/, completion times).
    "hudi_cow": History(["hudi-spark-1.2"], HUDI_SESSION, hudi_cow, hudi_commits, hudi_read, "--instant"),
    # Hudi 0.15 writes table version 6 (instants flat in .hoodie/).
    "hudi_cow_v6": History(["hudi-spark-0.15"], HUDI_SESSION, hudi_cow, hudi_commits, hudi_read, "--instant"),
    "hudi_mor": History(["hudi-spark-1.2"], HUDI_SESSION, hudi_mor, hudi_commits, hudi_read_optimized,
                        "--instant", ("--mor-read-optimized",)),
    "delta_dv": History(["delta-spark-3.3", "delta-storage-3.3"], DELTA_SESSION, delta_dv, delta_commits,
                        delta_read, "--version"),
}


def recorded_commits(table):
    """The source commits the table's current Iceberg metadata records (none before the
    first snapshot), read from the files, not through xlake."""
    hint = pathlib.Path(table) / "metadata" / "version-hint.text"
    if not hint.is_file():
        return set()
    meta = json.loads((hint.parent / f"v{hint.read_text().strip()}.metadata.json").read_text())
    return {json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"]
            for s in meta.get("snapshots", [])}


class Watch:
    """Mirroring by something other than this script (the table-format plugin, in the
    commit path): which of each write's commits a snapshot records when the write returns."""

    options: ClassVar[dict] = {}

    def __init__(self):
        self.writes = []

    def after_write(self, table, new_commits, kind="write"):
        self.writes.append({"commits": new_commits, "mirrored": sorted(set(new_commits) & recorded_commits(table)),
                            "serve_up": True, "kind": kind})


PLUGIN = {"hoodie.table.format": "xlake"}


class Callback(Watch):
    """Mirroring by Hudi's write-commit HTTP callback to a running `xlake serve` instead of
    `xlake commit` (XLAKE_CALLBACK_URL, XLAKE_CALLBACK_KEY): after each write, which of its
    commits a snapshot records the moment the write returns. After XLAKE_CALLBACK_STOP_AFTER
    writes, the service (XLAKE_SERVE_PID) is stopped, and the writes after it go on."""

    def __init__(self, env):
        self.options = {
            "hoodie.write.commit.callback.on": "true",
            "hoodie.write.commit.callback.http.url": env["XLAKE_CALLBACK_URL"],
            "hoodie.write.commit.callback.http.api.key": env["XLAKE_CALLBACK_KEY"],
            "hoodie.write.commit.callback.http.timeout.seconds": "60",
        }
        self.stop_after = int(env.get("XLAKE_CALLBACK_STOP_AFTER", "0")) or None
        self.serve_pid = int(env.get("XLAKE_SERVE_PID", "0"))
        super().__init__()

    def after_write(self, table, new_commits, kind="write"):
        """Record what the write's callback mirrored; stop the service when it is time."""
        self.writes.append({"commits": new_commits, "mirrored": sorted(set(new_commits) & recorded_commits(table)),
                            "serve_up": self.stop_after is None or len(self.writes) < self.stop_after,
                            "kind": kind})
        if self.stop_after is not None and len(self.writes) == self.stop_after and self.serve_pid:
            import os
            import signal
            import time

            os.kill(self.serve_pid, signal.SIGTERM)
            time.sleep(2)


def mirror(table, history, commit):
    """`xlake commit`, as the write job's last step; a failure fails the history."""
    sys.path.insert(0, str(HERE))
    from xlake_cli import xlake

    run = xlake("commit", table, history.commit_flag, commit, *history.xlake_flags)
    if run.returncode != 0:
        raise RuntimeError(f"xlake commit {table} {history.commit_flag} {commit}: {run.returncode}\n{run.stderr}")


def main(history, table, out):
    import os

    h = HISTORIES[history]
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # Who mirrors: `xlake commit` after each commit (default), Hudi's callback to a running
    # `xlake serve` (XLAKE_CALLBACK_URL), or the table-format plugin (XLAKE_MIRROR_BY=plugin).
    plugin = os.environ.get("XLAKE_MIRROR_BY") == "plugin"
    callback = Callback(os.environ) if "XLAKE_CALLBACK_URL" in os.environ else Watch() if plugin else None
    if callback:
        HUDI_BASE.update(callback.options, **(PLUGIN if plugin else {}))
    s = session(h.jars + ([str(PLUGIN_JAR)] if plugin else []), h.session)
    recorded = []

    def done(kind="write"):
        """Record the engine's rows for the commits the last write (or, `kind`, another
        action such as a restore) completed, then mirror them (`xlake commit`), or see what
        the callback or the plugin mirrored."""
        new = [commit for commit in h.commits(table) if commit not in recorded]
        if callback:  # before anything else: what exists the moment the write returned
            callback.after_write(table, new, kind)
        for commit in new:
            h.read(s, table, commit).write.mode("overwrite").parquet(str(out / f"{commit}.parquet"))
            recorded.append(commit)
            if not callback:
                mirror(table, h, commit)

    h.write(s, table, done)
    result = {"history": history, "commits": recorded}
    if callback:
        result["writes"] = callback.writes
    (out / "done.json").write_text(json.dumps(result))
    s.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
