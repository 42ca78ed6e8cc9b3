"""Long Delta histories written by Spark with delta-spark 3.3 (the writer most Delta users
run), registered into real_writers.HISTORIES beside the short `delta_dv` when this script
runs (not on import, so test_real_writers.py's list stays the fast four): six seeded
histories of 40 versions or more that between them hold every operation a Spark job does to
a Delta table:

    append, overwrite, replaceWhere, REPLACE TABLE; DELETE, UPDATE, MERGE with deletion
    vectors on and off; column mapping by name and by id, RENAME COLUMN, DROP COLUMN; change
    data feed; generated columns; classic checkpoints and v2 checkpoints with sidecars; type
    widening; row tracking; OPTIMIZE, OPTIMIZE ZORDER BY, REORG ... APPLY (PURGE), RESTORE,
    VACUUM LITE RETAIN 0 HOURS; partitioned and non-partitioned.

Each version is read back by Spark+Delta (`versionAsOf`, the oracle, as real_writers.main
does for every history) and by delta-rs right after the write that made it; delta-rs's
verdict per version lands in `<out>/deltars.json` (it is a second opinion: where it refuses
or differs, Spark+Delta still judges).

    python real_writers_delta.py <history> <table> <out>
"""
import json
import pathlib
import random
import sys

import real_writers
from real_writers import DELTA_SESSION, History, delta_read

DELTA_JARS = ["delta-spark-3.3", "delta-storage-3.3"]

# Small and local: one partition for Delta's log replay (its default, 50, costs a task per
# partition on every read), no console progress bars.
SESSION = dict(DELTA_SESSION, **{
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "1",
})



# LITE: only the files the log removed. A full VACUUM deletes every file in the table's
# folder the log does not name, the Iceberg mirror's metadata/ among them (delta-spark spares
# metadata/ only on a UniForm table): docs/delta.md.
VACUUM = "VACUUM {t} LITE RETAIN 0 HOURS"


def runner(s, table, done):
    """sql(text): one statement against the table (`{t}` names it), then `done()`."""
    t = f"delta.`{table}`"

    def sql(text):
        s.sql(text.replace("{t}", t))
        done()

    return sql


def region_of(expr):
    return f"element_at(array('eu','us','asia'), CAST({expr} % 3 + 1 AS INT))"


def rows_sql(start, n, tag, extra=""):
    """SELECT of `n` rows from id `start`: id, region, name, price (then `extra`)."""
    return (f"SELECT id, {region_of('id')} AS region, concat('{tag}-', id) AS name, "
            f"CAST(id AS DOUBLE) / 4 AS price{extra} FROM range({start}, {start + n})")


NAMES = ("id", "region", "name", "price")


def dml_round(sql, rng, round_, names=NAMES):
    """One seeded DML statement: an append, a DELETE, an UPDATE or a MERGE; `names` are the
    table's current names for id, region, name and price (renamed under column mapping)."""
    op = rng.choice(("insert", "delete", "update", "merge"))
    id_, _, name, price = names
    cols = ", ".join(names)
    if op == "insert":
        sql(f"INSERT INTO {{t}} ({cols}) {rows_sql(1000 + round_ * 10, 6, f'r{round_}')}")
    elif op == "delete":
        sql(f"DELETE FROM {{t}} WHERE {id_} % 11 = {rng.randrange(11)}")
    elif op == "update":
        sql(f"UPDATE {{t}} SET {price} = {price} + {round_}, {name} = concat({name}, '-u{round_}') "
            f"WHERE {id_} % 7 = {rng.randrange(7)}")
    else:
        lo = rng.randrange(0, 60)
        sql(f"MERGE INTO {{t}} d USING ({rows_sql(lo, 8, f'm{round_}')}) u ON d.{id_} = u.id "
            f"WHEN MATCHED AND u.id % 2 = 0 THEN UPDATE SET d.{name} = u.name, d.{price} = u.price "
            f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT ({cols}) "
            f"VALUES (u.id, u.region, u.name, u.price)")


def dv_partitioned(s, table, done):
    """Partitioned by `region`, deletion vectors on, a classic checkpoint every 4 versions:
    append, INSERT OVERWRITE, replaceWhere, DELETE/UPDATE/MERGE through deletion vectors,
    then with deletion vectors off (rewriting files), on again; OPTIMIZE, OPTIMIZE ZORDER
    BY, REORG ... APPLY (PURGE), RESTORE, VACUUM LITE RETAIN 0 HOURS."""
    sql, rng = runner(s, table, done), random.Random(41)
    sql("CREATE TABLE {t} (id BIGINT, region STRING, name STRING, price DOUBLE) USING delta "
        "PARTITIONED BY (region) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.checkpointInterval' = '4')")
    sql(f"INSERT INTO {{t}} {rows_sql(0, 90, 'a')}")
    sql(f"INSERT OVERWRITE {{t}} {rows_sql(0, 80, 'o')}")
    sql(f"INSERT INTO {{t}} REPLACE WHERE region = 'asia' SELECT * FROM ({rows_sql(300, 9, 'rw')}) "
        "WHERE region = 'asia'")
    for round_ in range(12):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t}")
    sql("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    for round_ in range(10, 16):
        dml_round(sql, rng, round_)
    sql("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for round_ in range(16, 22):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t} WHERE region = 'eu' ZORDER BY (price)")
    sql("DELETE FROM {t} WHERE id % 5 = 0")
    sql("REORG TABLE {t} APPLY (PURGE)")
    sql("RESTORE TABLE {t} TO VERSION AS OF 12")
    for round_ in range(22, 26):
        dml_round(sql, rng, round_)
    sql(VACUUM)
    sql(f"INSERT INTO {{t}} {rows_sql(5000, 6, 'end')}")


def cdf_generated_flat(s, table, done):
    """Not partitioned, deletion vectors off, change data feed on, a generated column, a
    classic checkpoint every 3 versions: DataFrame appends and overwrites, replaceWhere
    through the DataFrame writer, copy-on-write DELETE/UPDATE/MERGE (each writes
    _change_data/ files too), REPLACE TABLE (new schema, CDF and DVs on), OPTIMIZE ZORDER BY,
    RESTORE."""
    sql, rng = runner(s, table, done), random.Random(42)
    # Spark SQL's GENERATED ALWAYS AS reaches only catalog tables: the builder for a path.
    delta = s._jvm.io.delta.tables.DeltaTable
    builder = delta.create(s._jsparkSession).location(table)
    for column, kind in (("id", "BIGINT"), ("region", "STRING"), ("name", "STRING"), ("price", "DOUBLE")):
        builder = builder.addColumn(column, kind)
    bucket = delta.columnBuilder(s._jsparkSession, "bucket").dataType("BIGINT").generatedAlwaysAs("id % 10").build()
    builder = builder.addColumn(bucket)
    for key, value in (("delta.enableChangeDataFeed", "true"), ("delta.enableDeletionVectors", "false"),
                       ("delta.checkpointInterval", "3")):
        builder = builder.property(key, value)
    builder.execute()
    done()
    df = s.sql(rows_sql(0, 50, "df"))
    df.write.format("delta").mode("append").save(table)
    done()
    s.sql(rows_sql(0, 40, "ow")).write.format("delta").mode("overwrite").save(table)
    done()
    (s.sql(rows_sql(200, 5, "rw")).where("region = 'us'").write.format("delta").mode("overwrite")
     .option("replaceWhere", "region = 'us'").save(table))
    done()
    for round_ in range(14):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t} ZORDER BY (price)")
    sql("REPLACE TABLE {t} (id BIGINT, name STRING, price DOUBLE, day DATE, "
        "region STRING) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        "'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3')")
    sql("INSERT INTO {t} SELECT id, concat('x', id), id * 1.25, date_add(DATE'2026-01-01', "
        f"CAST(id AS INT)), {region_of('id')} FROM range(0, 50)")
    for round_ in range(14, 32):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t}")
    sql("RESTORE TABLE {t} TO VERSION AS OF 30")
    sql("UPDATE {t} SET name = 'after-restore' WHERE id % 4 = 0")


def column_mapping(mode, partitioned, dvs):
    """Column mapping by `mode` (name or id): columns added, renamed (the partition column
    too, by name) and dropped between DML rounds; REORG ... APPLY (PURGE) rewrites files
    without the dropped columns; OPTIMIZE, RESTORE, VACUUM."""

    def write(s, table, done):
        sql, rng = runner(s, table, done), random.Random(43 if mode == "name" else 44)
        part = "PARTITIONED BY (region) " if partitioned else ""
        sql("CREATE TABLE {t} (id BIGINT, region STRING, name STRING, price DOUBLE, note STRING) "
            f"USING delta {part}TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', "
            f"'delta.enableDeletionVectors' = '{str(dvs).lower()}', 'delta.checkpointInterval' = '5')")
        sql("INSERT INTO {t} " + rows_sql(0, 60, "a", ", concat('note', id) AS note"))
        for round_ in range(6):
            dml_round(sql, rng, round_)
        sql("ALTER TABLE {t} RENAME COLUMN name TO label")
        for round_ in range(6, 10):
            dml_round(sql, rng, round_, LABEL)
        sql("ALTER TABLE {t} DROP COLUMN note")
        sql("ALTER TABLE {t} ADD COLUMNS (note STRING, qty INT)")
        sql("INSERT INTO {t} " + rows_sql(600, 6, "b", ", 'new-note' AS note, 7 AS qty"))
        for round_ in range(10, 16):
            dml_round(sql, rng, round_, LABEL)
        if partitioned:
            sql("ALTER TABLE {t} RENAME COLUMN region TO area")
        else:
            sql("ALTER TABLE {t} RENAME COLUMN price TO cost")
        sql("ALTER TABLE {t} RENAME COLUMN label TO name")
        sql("ALTER TABLE {t} DROP COLUMN qty")
        cols = ("id", "area", "name", "price") if partitioned else ("id", "region", "name", "cost")
        for round_ in range(16, 24):
            dml_round(sql, rng, round_, cols)
        sql("REORG TABLE {t} APPLY (PURGE)")
        sql("OPTIMIZE {t}")
        sql("RESTORE TABLE {t} TO VERSION AS OF 20")
        for round_ in range(24, 28):
            dml_round(sql, rng, round_, LABEL)
        sql(VACUUM)
        sql(f"INSERT INTO {{t}} (id, region, label, price) {rows_sql(7000, 4, 'end')}")

    return write


def v2_checkpoints_row_tracking(s, table, done):
    """Partitioned by `region`, v2 checkpoints (`delta.checkpointPolicy` = v2) every 3
    versions, row tracking and deletion vectors on: appends, DML rounds, OPTIMIZE (row ids
    kept in materialized columns), REORG ... APPLY (PURGE), RESTORE, VACUUM."""
    sql, rng = runner(s, table, done), random.Random(45)
    sql("CREATE TABLE {t} (id BIGINT, region STRING, name STRING, price DOUBLE) USING delta "
        "PARTITIONED BY (region) TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', "
        "'delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true', "
        "'delta.checkpointInterval' = '3')")
    sql(f"INSERT INTO {{t}} {rows_sql(0, 60, 'a')}")
    for round_ in range(18):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t}")
    for round_ in range(18, 26):
        dml_round(sql, rng, round_)
    sql("REORG TABLE {t} APPLY (PURGE)")
    sql("OPTIMIZE {t} ZORDER BY (id)")
    sql("RESTORE TABLE {t} TO VERSION AS OF 10")
    for round_ in range(26, 32):
        dml_round(sql, rng, round_)
    sql(VACUUM)
    sql(f"INSERT INTO {{t}} {rows_sql(8000, 4, 'end')}")


def type_widening(s, table, done):
    """Not partitioned, type widening on (`delta.enableTypeWidening`): a TINYINT column
    widened to SMALLINT and then INT, a SMALLINT to INT, between appends and DML (deletion
    vectors on), so old files keep the narrow types; OPTIMIZE rewrites them wide, RESTORE
    goes back to a narrower schema. (delta-spark 3.3 refuses FLOAT to DOUBLE.)"""
    sql, rng = runner(s, table, done), random.Random(46)
    sql("CREATE TABLE {t} (id BIGINT, region STRING, name STRING, price DOUBLE, qty SMALLINT, "
        "tiny TINYINT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true', "
        "'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '6')")
    sql("INSERT INTO {t} " + rows_sql(0, 50, "a", ", CAST(id AS SMALLINT) AS qty, CAST(id % 100 AS TINYINT) AS tiny"))
    for round_ in range(8):
        dml_round(sql, rng, round_)
    sql("ALTER TABLE {t} ALTER COLUMN qty TYPE INT")
    sql("INSERT INTO {t} " + rows_sql(500, 5, "w", ", 100000 + CAST(id AS INT) AS qty, CAST(1 AS TINYINT) AS tiny"))
    for round_ in range(8, 16):
        dml_round(sql, rng, round_)
    sql("ALTER TABLE {t} ALTER COLUMN tiny TYPE SMALLINT")
    sql("INSERT INTO {t} " + rows_sql(600, 5, "w2", ", 7 AS qty, CAST(30000 AS SMALLINT) AS tiny"))
    sql("ALTER TABLE {t} ALTER COLUMN tiny TYPE INT")
    sql("UPDATE {t} SET qty = qty * 2, tiny = tiny + 70000 WHERE id % 3 = 0")
    for round_ in range(16, 30):
        dml_round(sql, rng, round_)
    sql("OPTIMIZE {t}")
    sql("RESTORE TABLE {t} TO VERSION AS OF 15")
    sql("DELETE FROM {t} WHERE id % 9 = 2")


def delta_commits(table):
    """The versions with a commit file (`<20 digits>.json`; a v2 checkpoint's top-level file
    `<v>.checkpoint.<uuid>.json` sits beside them)."""
    names = (p.name for p in (pathlib.Path(table) / "_delta_log").glob("*.json"))
    return [str(int(n[:20])) for n in sorted(names) if len(n) == 25 and n[:20].isdigit()]


def history(write, *flags):
    return History(DELTA_JARS, SESSION, write, delta_commits, delta_read, "--version", tuple(flags))


LABEL = ("id", "region", "label", "price")
V3 = ("--format-version", "3")
DELTA_HISTORIES = {
    "delta_spark_dv_partitioned": history(dv_partitioned, *V3),
    "delta_spark_cdf_generated": history(cdf_generated_flat),
    "delta_spark_colmap_name": history(column_mapping("name", True, True), *V3),
    "delta_spark_colmap_id": history(column_mapping("id", False, False)),
    "delta_spark_v2_checkpoints": history(v2_checkpoints_row_tracking, *V3),
    "delta_spark_type_widening": history(type_widening),
}


def deltars_verdicts(table, out, versions):
    """delta-rs's read of each version beside Spark's (`<out>/<v>.parquet`): "equal",
    "differs", or the error it raised; for the versions whose files are all still there."""
    import pyarrow.parquet as pq
    from delta_source import oracle_table
    from rows import canonical_rows

    verdicts = {}
    for v in versions:
        want = pq.read_table(out / f"{v}.parquet")
        try:
            got = oracle_table(table, int(v))
        except Exception as e:  # noqa: BLE001 - the verdict is the error's text
            verdicts[v] = f"error: {str(e).splitlines()[0][:200]}"
            continue
        cols = want.column_names
        same = canonical_rows(got.to_pylist(), cols) == canonical_rows(want.to_pylist(), cols)
        verdicts[v] = "equal" if same else "differs"
    return verdicts


def main(name, table, out):
    out = pathlib.Path(out)
    versions = []
    write = DELTA_HISTORIES[name].write

    def write_and_ask_deltars(s, table_, done):
        def each():
            done()
            new = [v for v in delta_commits(table_) if v not in versions]
            versions.extend(new)
            verdicts.update(deltars_verdicts(table_, out, new))

        write(s, table_, each)

    verdicts = {}
    real_writers.HISTORIES.update(DELTA_HISTORIES)
    real_writers.HISTORIES[name] = History(**{**DELTA_HISTORIES[name].__dict__, "write": write_and_ask_deltars})
    real_writers.main(name, table, out)
    (out / "deltars.json").write_text(json.dumps(verdicts, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    main(*sys.argv[1:4])
