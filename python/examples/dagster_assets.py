"""A Dagster asset per table: materialising it mirrors the table's pending commits as
Iceberg snapshots and records what was written as metadata. The asset's body is
`mirror_table`, plain Python; a failure raises, so Dagster marks the run failed.
"""

from __future__ import annotations

import xlake

TABLE = "s3://lake/orders"


def mirror_table(location: str) -> dict:
    """The asset's body: sync one table; the metadata Dagster shows for the materialisation."""
    result = xlake.sync(location)
    return {
        "format": result.format,
        "source_commits": result.source_commits,
        "snapshots_written": len(result.written),
        "latest_snapshot": result.written[-1].snapshot_id if result.written else None,
    }


try:
    import dagster as dg
except ImportError:  # Dagster is not installed: the asset's body above still runs alone.
    dg = None

if dg is not None:

    @dg.asset(name="orders_iceberg_mirror")
    def orders_iceberg_mirror(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata=mirror_table(TABLE))

    defs = dg.Definitions(assets=[orders_iceberg_mirror])
