"""Turn what each engine returns into one canonical form, so rows compare as plain data.

Canonical: decimals as strings, dates and times ISO-8601, instants in UTC with "+00:00",
bytes as hex, maps as key-sorted dicts, structs as dicts, lists as lists.
"""
import datetime as dt
import decimal
import json


def normalize(value):
    if value is None:
        return None
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "+00:00"
        return value.isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        if set(value) == {"key", "value"} and isinstance(value["key"], list):
            value = dict(zip(value["key"], value["value"]))  # DuckDB's MAP as two lists
        return {str(k): normalize(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if hasattr(value, "asDict"):  # pyspark Row
        return normalize(value.asDict(recursive=True))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {str(k): normalize(v) for k, v in sorted(value, key=lambda kv: str(kv[0]))}
        return [normalize(x) for x in value]
    if isinstance(value, float) and value == 0.0:
        return 0.0
    return value


def canonical_rows(rows, columns, zoned_columns=()):
    """Project engine rows onto `columns`, normalise, and sort by the first column (ties,
    such as rows sharing a Hudi commit time, by the whole row)."""
    out = []
    for row in rows:
        r = {}
        for c in columns:
            v = normalize(row.get(c))
            if c in zoned_columns and isinstance(v, str) and not v.endswith("+00:00"):
                v += "+00:00"  # Spark hands timestamptz to Python as naive UTC (TZ=UTC)
            r[c] = v
        out.append(r)
    return sorted(out, key=lambda r: (json.dumps(r[columns[0]], sort_keys=True), json.dumps(r, sort_keys=True)))


def expected_rows(commit):
    return canonical_rows(commit["rows"], commit["columns"])
