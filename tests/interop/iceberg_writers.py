"""Iceberg tables written by pyiceberg (SqlCatalog over SQLite, which names metadata files
`NNNNN-<uuid>.metadata.json` and writes no version hint), for the Iceberg source: appends,
an overwrite, a delete, schema evolution with a rename, identity partitions, at a chosen
format version. `history` is what each step did, for the oracle."""
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType


def catalog(warehouse):
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(
        "xlake_source",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=f"file://{warehouse}",
    )


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "score", DoubleType(), required=False),
    NestedField(4, "region", StringType(), required=False),
)


def rows(ids, region, **extra):
    columns = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i}" for i in ids], pa.string()),
        "score": pa.array([i * 1.5 for i in ids], pa.float64()),
        "region": pa.array([region] * len(ids), pa.string()),
    }
    for name, values in extra.items():
        columns[name] = values
    return pa.table(columns)


def write_table(warehouse, name, format_version, partitioned=True):
    """The table `db.<name>` after its steps; returns the pyiceberg table."""
    cat = catalog(warehouse)
    cat.create_namespace_if_not_exists("db")
    spec = PartitionSpec(PartitionField(4, 1000, IdentityTransform(), "region")) if partitioned else PartitionSpec()
    table = cat.create_table(
        f"db.{name}", schema=SCHEMA, partition_spec=spec,
        properties={"format-version": str(format_version)},
    )
    table.append(rows([1, 2, 3], "eu"))
    table.append(rows([4, 5], "us"))
    # Overwrite of one partition: deletes its files, adds new ones (one snapshot each).
    table.overwrite(rows([6, 7], "eu"), overwrite_filter=EqualTo("region", "eu"))
    # A delete of some rows of a file: pyiceberg rewrites the file (copy-on-write).
    table.delete(GreaterThanOrEqual("id", 5))
    # Schema evolution: a column added, one renamed; then an append with the new schema.
    with table.update_schema() as update:
        update.add_column("tag", StringType())
        update.rename_column("score", "points")
    table = cat.load_table(f"db.{name}")
    table.append(
        pa.table({
            "id": pa.array([8, 9], pa.int64()),
            "name": pa.array(["n8", "n9"], pa.string()),
            "points": pa.array([12.0, 13.5], pa.float64()),
            "region": pa.array(["us", "ap"], pa.string()),
            "tag": pa.array(["x", None], pa.string()),
        })
    )
    return cat.load_table(f"db.{name}")
