"""The baseline: the same translation done with pyiceberg 0.12. For each Delta commit of a
table made by gen_delta.py, one pyiceberg transaction adds and removes the same files
(a fast append when it only adds, an overwrite otherwise) with the same summary
properties xlake writes. The table lives in its own folder beside the Delta table, under a
SQLite catalog, so the two never share metadata.

Only the Iceberg side is timed by the caller; the Delta JSON is parsed up front.
"""
import json
import pathlib

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "value", DoubleType(), required=False),
    NestedField(3, "day", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "day"))


def delta_commits(table, first=0):
    """(version, timestamp, adds, removes) of every commit file from `first` on."""
    log = pathlib.Path(table) / "_delta_log"
    out = []
    for path in sorted(log.glob("*.json")):
        version = int(path.stem)
        if version < first:
            continue
        adds, removes, ts = [], [], 0
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
            elif "remove" in action:
                removes.append(action["remove"]["path"])
            elif "commitInfo" in action:
                ts = action["commitInfo"]["timestamp"]
        out.append((version, ts, adds, removes))
    return out


def open_table(workdir, create):
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{workdir}/catalog.db",
                         warehouse=f"file://{workdir}")
    if create:
        catalog.create_namespace_if_not_exists("bench")
        return catalog.create_table("bench.t", SCHEMA, partition_spec=SPEC,
                                    location=f"file://{workdir}/t")
    return catalog.load_table("bench.t")


def data_file(root, add):
    stats = json.loads(add["stats"])
    f = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"{root}/{add['path']}",
        file_format=FileFormat.PARQUET,
        partition=Record(add["partitionValues"]["day"]),
        record_count=stats["numRecords"],
        file_size_in_bytes=add["size"],
    )
    f.spec_id = 0
    return f


class Mirror:
    """pyiceberg doing xlake's job: one transaction per source commit."""

    def __init__(self, root, workdir, create=True):
        self.root = str(pathlib.Path(root).resolve())
        self.table = open_table(workdir, create)
        # Removes need the DataFile objects the appends used.
        self.live = {}
        if not create:
            for task in self.table.scan().plan_files():
                self.live[task.file.file_path] = task.file

    def commit(self, version, ts, adds, removes):
        props = {
            "XTABLE_METADATA": json.dumps({
                "lastInstantSynced": ts, "instantsToConsiderForNextSync": [], "version": 0,
                "sourceTableFormat": "DELTA", "sourceIdentifier": str(version),
                "latestTableOperationIdentifier": f"{version}.WRITE"}),
            "xlake.source-commit-time-ms": str(ts),
        }
        files = [data_file(self.root, a) for a in adds]
        with self.table.transaction() as tx:
            update = tx.update_snapshot(snapshot_properties=props)
            producer = update.overwrite() if removes else update.fast_append()
            with producer as p:
                for f in files:
                    p.append_data_file(f)
                for path in removes:
                    p.delete_data_file(self.live.pop(f"{self.root}/{path}"))
        for f in files:
            self.live[f.file_path] = f
