"""An Airflow DAG (Airflow 3, `airflow.sdk`) that mirrors tables every ten minutes, one
mapped task per table. The task's body is `mirror_table`, plain Python: a failure raises
(`xlake.Failed`, `xlake.RefusedInput`), so Airflow marks that table's task failed and
retries it, and the other tables' tasks go on. The result is returned as a dict (XCom).
"""

from __future__ import annotations

import dataclasses

import xlake

TABLES = ["s3://lake/orders", "s3://lake/events"]


def mirror_table(
    location: str, catalog: str | None = None, catalog_table: str | None = None
) -> dict:
    """The task: sync one table (and its catalog entry), return what was written."""
    result = xlake.sync(location, catalog=catalog, catalog_table=catalog_table)
    return dataclasses.asdict(result)


try:
    from airflow.sdk import dag, task
except ImportError:  # Airflow is not installed: the task's body above still runs alone.
    dag = task = None

if dag is not None and task is not None:

    @task(retries=2)
    def mirror(location: str) -> dict:
        return mirror_table(location)

    @dag(schedule="*/10 * * * *", catchup=False, tags=["xlake"])
    def xlake_mirror() -> None:
        mirror.expand(location=TABLES)

    xlake_mirror()
