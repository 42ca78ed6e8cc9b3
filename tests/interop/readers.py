"""The three independent Iceberg readers, each behind the same small interface:

    snapshots(table) -> [{"snapshot_id", "timestamp_ms", "operation", "summary"}]
    rows_at_snapshot(table, snapshot_id) -> [dict]
    rows_as_of(table, timestamp_ms) -> [dict]
"""
import datetime as dt
import json
import pathlib

import pyarrow as pa

ENGINES = ["pyiceberg", "duckdb", "spark"]


def current_metadata_path(table):
    hint = (pathlib.Path(table) / "metadata" / "version-hint.text").read_text()
    return str(pathlib.Path(table) / "metadata" / f"v{hint}.metadata.json")


def zoned_columns(table):
    meta = json.loads(pathlib.Path(current_metadata_path(table)).read_text())
    names = set()
    for schema in meta["schemas"]:
        for f in schema["fields"]:
            if f["type"] == "timestamptz":
                names.add(f["name"])
    return names


def snapshot_for(snapshots, source_id):
    """The one snapshot whose XTABLE_METADATA names source commit `source_id`."""
    found = [s for s in snapshots if json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"] == source_id]
    assert len(found) == 1, f"source commit {source_id}: {len(found)} snapshots"
    return found[0]


class PyIceberg:
    name = "pyiceberg"

    def _table(self, table):
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(current_metadata_path(table))

    def snapshots(self, table):
        t = self._table(table)
        out = []
        for s in t.snapshots():
            summary = {k: v for k, v in s.summary.additional_properties.items()}
            out.append(
                {
                    "snapshot_id": s.snapshot_id,
                    "timestamp_ms": s.timestamp_ms,
                    "operation": s.summary.operation.value,
                    "summary": summary,
                }
            )
        return out

    def rows_at_snapshot(self, table, snapshot_id, drop=()):
        scan = self._table(table).scan(snapshot_id=snapshot_id)
        try:
            rows = scan.to_arrow().to_pylist()
        except pa.ArrowTypeError as e:
            # pyiceberg 0.12.0 cannot concatenate the per-file tables when some files
            # (delta-rs 1.6.6) read as string_view and others as string ("Unable to merge:
            # Field v has incompatible types: string_view vs string"); each batch is right.
            if "string_view" not in str(e):
                raise
            rows = [r for batch in scan.to_arrow_batch_reader() for r in batch.to_pylist()]
        return [{k: v for k, v in r.items() if k not in drop} for r in rows]

    def rows_as_of(self, table, timestamp_ms):
        t = self._table(table)
        snap = t.snapshot_as_of_timestamp(timestamp_ms)
        return t.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()


class DuckDB:
    name = "duckdb"

    def __init__(self):
        import duckdb
        import duckdb_ext

        if hasattr(duckdb_ext, "get_extension_dir"):
            ext_dir = duckdb_ext.get_extension_dir()
        else:  # the wheels ship a namespace package holding extensions/<version>/<platform>/
            ext_dir = str(pathlib.Path(next(iter(duckdb_ext.__path__))) / "extensions")
        self.con = duckdb.connect()
        self.con.execute(f"SET extension_directory = '{ext_dir}'")
        self.con.execute("LOAD avro")
        self.con.execute("LOAD iceberg")
        self.con.execute("SET TimeZone = 'UTC'")

    def snapshots(self, table):
        rows = self.con.execute("SELECT snapshot_id, timestamp_ms FROM iceberg_snapshots(?)", [table]).fetchall()
        return [{"snapshot_id": r[0], "timestamp_ms": int(r[1].replace(tzinfo=dt.UTC).timestamp() * 1000) if isinstance(r[1], dt.datetime) else r[1]} for r in rows]

    def _rows(self, sql, params):
        return self.con.execute(sql, params).fetch_arrow_table().to_pylist()

    def rows_at_snapshot(self, table, snapshot_id, drop=()):
        rows = self._rows(f"SELECT * FROM iceberg_scan(?, snapshot_from_id => {int(snapshot_id)})", [table])
        return [{k: v for k, v in r.items() if k not in drop} for r in rows]

    def rows_as_of(self, table, timestamp_ms):
        ts = dt.datetime.fromtimestamp(timestamp_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        return self._rows(f"SELECT * FROM iceberg_scan(?, snapshot_from_timestamp => TIMESTAMP '{ts}')", [table])


class Spark:
    name = "spark"

    def __init__(self, session):
        self.spark = session

    def snapshots(self, table):
        rows = self.spark.read.format("iceberg").load(table + "#snapshots").collect()
        return [
            {
                "snapshot_id": r["snapshot_id"],
                "timestamp_ms": int(r["committed_at"].replace(tzinfo=dt.UTC).timestamp() * 1000),
                "operation": r["operation"],
                "summary": dict(r["summary"]),
            }
            for r in rows
        ]

    def rows_at_snapshot(self, table, snapshot_id, drop=()):
        df = self.spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).load(table)
        return [r.asDict(recursive=True) for r in df.drop(*drop).collect()]

    def rows_as_of(self, table, timestamp_ms):
        df = self.spark.read.format("iceberg").option("as-of-timestamp", str(timestamp_ms)).load(table)
        return [r.asDict(recursive=True) for r in df.collect()]
