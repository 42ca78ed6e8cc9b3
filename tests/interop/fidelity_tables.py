"""Delta tables laid out the way other engines write them, built here from pyarrow Parquet
files and a hand-written `_delta_log/` (deltalake 1.6.6 writes neither Parquet field ids nor
millisecond timestamps, and no writer here makes two-level lists):

- `column_mapped(dest, nested_ids)`: column mapping `name` mode with list, map and nested
  columns; field ids on top-level and struct fields only, as Spark's Delta writer puts them,
  or also on list elements and map keys and values with `delta.columnMapping.nested.ids`;
- `millis_timestamps(dest)`: `timestamp` columns stored as Parquet TIMESTAMP_MILLIS;
- `two_level_lists(dest, hudi_file)`: data files holding parquet-avro's legacy two-level
  lists, taken from a Hudi 0.x base file (pyarrow only writes three-level lists).

Each returns the table root; every version is readable by deltalake's QueryBuilder.
"""
import datetime as dt
import json
import pathlib
import shutil
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _commit(table, version, actions):
    log = pathlib.Path(table) / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"commitInfo": {"timestamp": BASE_MS + version * 60_000, "operation": "WRITE"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _add(table, name, rows):
    size = (pathlib.Path(table) / name).stat().st_size
    stats = json.dumps({"numRecords": rows})
    return {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": BASE_MS, "dataChange": True, "stats": stats}}


def _remove(name):
    return {"remove": {"path": name, "deletionTimestamp": BASE_MS, "dataChange": True}}


def _metadata(schema_fields, configuration):
    return {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": schema_fields}),
            "partitionColumns": [],
            "configuration": configuration,
            "createdTime": BASE_MS,
        }
    }


# --- class 2: column mapping with nested list and map columns --------------------------------


def _with_id(field, id_):
    return field.with_metadata({b"PARQUET:field_id": str(id_).encode()})


def _mapped_schema(nested_ids):
    """(Delta schema fields, Arrow schema with physical names and field ids)."""
    ids = {"tags.element": 101, "props.key": 102, "props.value": 103, "s.l.element": 104}

    def cm(id_, physical, extra=None):
        md = {"delta.columnMapping.id": id_, "delta.columnMapping.physicalName": physical}
        if nested_ids and extra:
            md["delta.columnMapping.nested.ids"] = extra
        return md

    delta = [
        {"name": "id", "type": "integer", "nullable": True, "metadata": cm(1, "col-id")},
        {"name": "tags", "type": {"type": "array", "elementType": "integer", "containsNull": True}, "nullable": True,
         "metadata": cm(2, "col-tags", {"col-tags.element": ids["tags.element"]})},
        {"name": "props", "type": {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}, "nullable": True,
         "metadata": cm(3, "col-props", {"col-props.key": ids["props.key"], "col-props.value": ids["props.value"]})},
        {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "a", "type": "string", "nullable": True, "metadata": cm(5, "col-a")},
            {"name": "l", "type": {"type": "array", "elementType": "string", "containsNull": True}, "nullable": True,
             "metadata": cm(6, "col-l", {"col-l.element": ids["s.l.element"]})},
        ]}, "nullable": True, "metadata": cm(4, "col-s")},
    ]

    def nested(field, key):
        return _with_id(field, ids[key]) if nested_ids else field

    tags_el = nested(pa.field("element", pa.int32(), True), "tags.element")
    l_el = nested(pa.field("element", pa.string(), True), "s.l.element")
    key = nested(pa.field("key", pa.string(), False), "props.key")
    value = nested(pa.field("value", pa.int32(), True), "props.value")
    arrow = pa.schema([
        _with_id(pa.field("col-id", pa.int32()), 1),
        _with_id(pa.field("col-tags", pa.list_(tags_el)), 2),
        _with_id(pa.field("col-props", pa.map_(key, value)), 3),
        _with_id(pa.field("col-s", pa.struct([
            _with_id(pa.field("col-a", pa.string()), 5),
            _with_id(pa.field("col-l", pa.list_(l_el)), 6),
        ])), 4),
    ])
    return delta, arrow


def _mapped_rows(start, n):
    rows = []
    for i in range(start, start + n):
        rows.append({
            "col-id": i,
            "col-tags": None if i % 4 == 0 else [i, None, i * 2][: 1 + i % 3],
            "col-props": None if i % 5 == 0 else [("k", i), ("z", None)][: 1 + i % 2],
            "col-s": None if i % 6 == 0 else {"col-a": f"a{i}", "col-l": None if i % 3 == 0 else [f"x{i}", None]},
        })
    return rows


def column_mapped(dest, nested_ids):
    """Versions: 0 creates the table and adds a file; 1 adds another; 2 removes the first."""
    table = pathlib.Path(dest)
    table.mkdir(parents=True, exist_ok=True)
    delta, arrow = _mapped_schema(nested_ids)
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "6"}
    files = []
    for k, (start, n) in enumerate([(0, 7), (7, 6)]):
        name = f"part-{k:05d}-{uuid.uuid4()}.parquet"
        pq.write_table(pa.Table.from_pylist(_mapped_rows(start, n), schema=arrow), table / name)
        files.append((name, n))
    protocol = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    _commit(table, 0, [protocol, _metadata(delta, config), _add(table, *files[0])])
    _commit(table, 1, [_add(table, *files[1])])
    _commit(table, 2, [_remove(files[0][0])])
    return table.resolve()


# --- class 5: TIMESTAMP_MILLIS ---------------------------------------------------------------


def millis_timestamps(dest):
    """Versions: 0 a file with microsecond timestamps; 1 a file with millisecond ones (the
    first to reference TIMESTAMP_MILLIS); 2 removes the microsecond file. Both plain-encoded."""
    table = pathlib.Path(dest)
    table.mkdir(parents=True, exist_ok=True)
    delta = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "local", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
    ]
    t0 = dt.datetime(2026, 1, 1, 12, 0, 0, 123000)
    names = []
    for k, unit in enumerate(["us", "ms"]):
        rows = [{"id": k * 10 + i, "ts": (t0 + dt.timedelta(seconds=i)).replace(tzinfo=dt.UTC) if i != 2 else None,
                 "local": t0 + dt.timedelta(minutes=i)} for i in range(5)]
        schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us"))])
        name = f"part-{k:05d}-{uuid.uuid4()}.parquet"
        # Plain-encoded: Spark's vectorized reader fails on plain TIMESTAMP_MILLIS pages, not
        # on dictionary-encoded ones (writers fall back to plain when a dictionary grows).
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), table / name, coerce_timestamps=unit, use_dictionary=False)
        names.append((name, len(rows)))
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"], "writerFeatures": ["timestampNtz"]}}
    _commit(table, 0, [protocol, _metadata(delta, {}), _add(table, *names[0])])
    _commit(table, 1, [_add(table, *names[1])])
    _commit(table, 2, [_remove(names[0][0])])
    return table.resolve()


# --- class 4: two-level lists -----------------------------------------------------------------


def two_level_lists(dest, hudi_files):
    """A Delta table over copies of Hudi 0.x base files (`hudi_files`, which hold two-level
    lists), one file added per version, then the first removed. Columns are as pyarrow reads
    them; `_hoodie_*` columns are kept (Delta reads every column of its schema)."""
    table = pathlib.Path(dest)
    table.mkdir(parents=True, exist_ok=True)
    schema = pq.read_schema(hudi_files[0])
    delta = [_delta_field(f) for f in schema]
    names = []
    for k, src in enumerate(hudi_files):
        name = f"part-{k:05d}-{uuid.uuid4()}.parquet"
        shutil.copyfile(src, table / name)
        names.append((name, pq.read_metadata(table / name).num_rows))
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    _commit(table, 0, [protocol, _metadata(delta, {}), _add(table, *names[0])])
    for k, n in enumerate(names[1:], start=1):
        _commit(table, k, [_add(table, *n)])
    _commit(table, len(names), [_remove(names[0][0])])
    return table.resolve()


def _delta_type(t):
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "elementType": _delta_type(t.value_type), "containsNull": t.value_field.nullable}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": _delta_type(t.key_type), "valueType": _delta_type(t.item_type), "valueContainsNull": True}
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_delta_field(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    simple = {pa.string(): "string", pa.large_string(): "string", pa.int64(): "long", pa.int32(): "integer", pa.float64(): "double",
              pa.float32(): "float", pa.bool_(): "boolean", pa.binary(): "binary", pa.date32(): "date"}
    return simple[t]


def _delta_field(f):
    return {"name": f.name, "type": _delta_type(f.type), "nullable": True, "metadata": {}}
