"""Small Delta tables, written by hand (one Parquet file by pyarrow, one commit in
`_delta_log/`), for fleets of hundreds of tables: no Spark, a few milliseconds each."""

from __future__ import annotations

import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def delta_table(root: pathlib.Path, rows: int = 3, t0: int = 1_700_000_000_000) -> pathlib.Path:
    """A Delta table at `root`: version 0 adds one data file of `rows` rows."""
    (root / "_delta_log").mkdir(parents=True)
    data = pa.table({"id": list(range(rows)), "name": [f"n{i}" for i in range(rows)]})
    pq.write_table(data, root / "part-0.parquet")
    size = (root / "part-0.parquet").stat().st_size
    actions = [
        {"commitInfo": {"timestamp": t0, "operation": "WRITE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": t0,
            }
        },
        {
            "add": {
                "path": "part-0.parquet",
                "partitionValues": {},
                "size": size,
                "modificationTime": t0,
                "dataChange": True,
                "stats": json.dumps({"numRecords": rows}),
            }
        },
    ]
    log = root / "_delta_log" / f"{0:020}.json"
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def break_table(root: pathlib.Path) -> None:
    """Cut the table's only commit in half: a sync must fail, naming it."""
    log = root / "_delta_log" / f"{0:020}.json"
    text = log.read_text()
    log.write_text(text[: len(text) // 2])
