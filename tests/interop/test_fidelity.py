"""Issue 19, fidelity on tables written by other engines (docs/fidelity.md): test tables
built here, synced by `xlake sync` and read by pyiceberg, DuckDB and Spark at every source
commit against the source engine (hudi-rs, delta-rs); `xlake check --deep --all` must call
each one consistent.

1. Columns data files hold that the schema does not name (Hudi meta columns of a table with
   `hoodie.populate.meta.fields=false`; Delta `_change_type` under change data feed).
3. A Hudi table with no completed commit: an Iceberg table with no snapshot.
6. Inline deletion vectors as the z85 crate and delta-spark encode them (issue 45).
7. Delta `void` columns: left out of the Iceberg schema, marked degraded.
"""
import json
import pathlib
import shutil

import delta_source as delta
import hudi_source as hudi
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableFeatures
from readers import (
    ENGINES,
    PyIceberg,
    current_metadata_path,
    snapshot_for,
    zoned_columns,
)
from rows import canonical_rows
from xlake_cli import sync, xlake


def synced(table, flags=()):
    result = sync(table, flags)
    assert result.returncode == 0, f"`xlake sync {table}` exited {result.returncode}:\n{result.stderr}"
    return result


def deep_check(table):
    result = xlake("check", table, "--deep", "--all")
    assert result.returncode == 0 and "consistent" in result.stdout, f"check --deep --all:\n{result.stdout}\n{result.stderr}"


def metadata(table):
    return json.loads(pathlib.Path(current_metadata_path(table)).read_text())


def compare(engines, table, expected, skip=()):
    """expected: {source id: (columns, canonical rows)}; every engine at every snapshot.
    `skip`: oracle columns the Iceberg table must not have (checked), left out of rows."""
    table = str(table)
    snapshots = PyIceberg().snapshots(table)
    zoned = zoned_columns(table)
    for engine in ENGINES:
        reader = engines(engine)
        for source_id, (columns, want) in expected.items():
            rows = reader.rows_at_snapshot(table, snapshot_for(snapshots, str(source_id))["snapshot_id"])
            where = f"{table} @ {source_id}, {engine}"
            if rows:
                assert not set(skip) & set(rows[0]), f"{where}: columns that must be left out: {set(skip) & set(rows[0])}"
                missing = [c for c in columns if c not in skip and c not in rows[0]]
                assert not missing, f"{where}: columns missing from the Iceberg read: {missing}"
            kept = [c for c in columns if c not in skip]
            want = canonical_rows(want, kept)
            assert canonical_rows(rows, kept, zoned) == want, f"{where}: rows differ from the source engine"


def delta_expected(table, versions=None):
    out = {}
    for v in versions if versions is not None else delta.snapshot_versions(table):
        got = delta.oracle_table(table, v)
        out[v] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return out


def hudi_expected(table):
    out = {}
    for requested, _, _ in hudi.snapshot_instants(table):
        got = hudi.oracle_table(table, requested)
        out[requested] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    return out


def reserved_mapping_entries(table):
    """Name-mapping entries whose id no schema field has: {name: id}; each id must be counted
    in last-column-id, so that no later column takes it."""
    meta = metadata(table)
    ids = set()

    def walk(fields):
        for f in fields:
            ids.add(f["id"])
            t = f["type"]
            if isinstance(t, dict):
                walk(t.get("fields", []))
                for key in ("element-id", "key-id", "value-id"):
                    if key in t:
                        ids.add(t[key])
                for key in ("element", "key", "value"):
                    if isinstance(t.get(key), dict):
                        walk(t[key].get("fields", []))

    for schema in meta["schemas"]:
        walk(schema["fields"])
    mapping = json.loads(meta["properties"]["schema.name-mapping.default"])
    out = {n: e["field-id"] for e in mapping if e["field-id"] not in ids for n in e["names"]}
    assert all(i <= meta["last-column-id"] for i in out.values()), f"reserved ids above last-column-id: {out}"
    return out


# --- 1. columns the schema does not name -------------------------------------------------

def test_hudi_meta_columns_not_populated(tmp_path, engines):
    """A copy of a fixture with `hoodie.populate.meta.fields=false`: its base files still hold
    the five `_hoodie_*` columns, which hudi-rs leaves out of its rows."""
    table = hudi.extract("sample_table_cow_v9_txns_simple_nometa", tmp_path)
    with open(table / ".hoodie" / "hoodie.properties", "a") as f:
        f.write("hoodie.populate.meta.fields=false\n")
    files = [p for p in table.rglob("*.parquet") if ".hoodie" not in p.parts]
    assert "_hoodie_commit_time" in pq.read_schema(files[0]).names
    synced(table)
    expected = hudi_expected(table)
    for columns, _ in expected.values():
        assert not [c for c in columns if c.startswith("_hoodie_")], columns
    reserved = reserved_mapping_entries(table)
    assert set(reserved) == {
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"
    }, reserved
    compare(engines, table, expected)
    deep_check(table)


def _scratch_file(tmp_path, name, data):
    """A Parquet data file and its add action, written by delta-rs into a scratch table."""
    scratch = tmp_path / name
    write_deltalake(scratch, data)
    add = next(a["add"] for a in delta.actions(scratch, 0) if "add" in a)
    return scratch / add["path"], add


def _commit(table, version, actions, operation):
    body = [{"commitInfo": {"timestamp": 1_700_000_000_000 + version * 1000, "operation": operation}}, *actions]
    path = pathlib.Path(table) / "_delta_log" / f"{version:020}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in body))


def test_delta_change_type_in_data_files(tmp_path, engines):
    """Change data feed on; one version adds a file that also holds `_change_type` (as Spark's
    Delta 2.x does for some UPDATEs); a later version adds a column. Synced after every
    version, so the reserved id must survive later commits and schema changes."""
    table = tmp_path / "cdf"
    expected = {}

    def step():
        v = DeltaTable(str(table)).version()
        expected.update(delta_expected(table, [v]))
        synced(table)

    write_deltalake(table, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    step()
    file, add = _scratch_file(tmp_path, "scratch", pa.table({
        "id": pa.array([3], pa.int64()), "s": ["c"], "_change_type": pa.array([None], pa.string())}))
    shutil.copy(file, table / file.name)
    _commit(table, 1, [{"add": dict(add, path=file.name)}], "UPDATE")
    assert "_change_type" in pq.read_schema(table / file.name).names
    step()
    write_deltalake(table, pa.table({"id": pa.array([4], pa.int64()), "s": ["d"], "e": pa.array([7], pa.int32())}),
                    mode="append", schema_mode="merge")
    step()
    write_deltalake(table, pa.table({"id": pa.array([5], pa.int64()), "s": ["e"], "e": pa.array([8], pa.int32())}), mode="append")
    step()
    for columns, _ in expected.values():
        assert "_change_type" not in columns
    reserved = reserved_mapping_entries(table)
    assert set(reserved) == {"_change_type"}, reserved
    compare(engines, table, expected)
    deep_check(table)


# --- 3. a source table with no completed commit ------------------------------------------

def _zero_rows_with_columns(engines, table, columns):
    table = str(table)
    assert metadata(table).get("current-snapshot-id", -1) in (-1, None)
    for engine in ENGINES:
        reader = engines(engine)
        if engine == "pyiceberg":
            from pyiceberg.table import StaticTable

            got = StaticTable.from_metadata(current_metadata_path(table)).scan().to_arrow()
            names, n = got.column_names, got.num_rows
        elif engine == "duckdb":
            got = reader.con.execute("SELECT * FROM iceberg_scan(?)", [table]).fetch_arrow_table()
            names, n = got.column_names, got.num_rows
        else:
            df = reader.spark.read.format("iceberg").load(table)
            names, n = df.columns, df.count()
        assert (n, names) == (0, columns), f"{engine}: {n} rows, columns {names}"


def test_hudi_table_without_commits(tmp_path, engines):
    """The empty fixture, and a copy of a fixture whose instants are set aside: an Iceberg
    table with the create schema and no snapshot; once the instants are back, one snapshot
    per instant on top of it."""
    empty = hudi.extract("sample_table_cow_v6_empty", tmp_path / "empty")
    result = synced(empty)
    assert "no snapshot" in result.stdout, result.stdout
    oracle = hudi.oracle_table(empty, "99991231235959999")
    assert oracle.num_rows == 0
    _zero_rows_with_columns(engines, empty, oracle.column_names)
    deep_check(empty)

    table = hudi.extract("sample_table_cow_v9_txns_simple_nometa", tmp_path / "later")
    aside = tmp_path / "aside"
    aside.mkdir()
    instants = [p for p in (table / ".hoodie" / "timeline").iterdir() if p.is_file() and p.name[:1].isdigit()]
    assert instants
    for p in instants:
        shutil.move(p, aside / p.name)
    synced(table)
    columns = [f["name"] for f in metadata(table)["schemas"][0]["fields"]]
    _zero_rows_with_columns(engines, table, columns)
    deep_check(table)
    for p in instants:
        shutil.move(aside / p.name, p)
    uuid = metadata(table)["table-uuid"]
    synced(table)
    assert metadata(table)["table-uuid"] == uuid, "the first commit builds on the empty table"
    expected = hudi_expected(table)
    assert len(PyIceberg().snapshots(str(table))) == len(expected)
    compare(engines, table, expected)
    deep_check(table)


# --- 6. inline deletion vectors as their writers encode them ------------------------------

Z85 = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
# Made by the z85 crate's encoder (delta-rs, delta-kernel-rs) and by delta-spark's rule;
# a Rust test in crates/xlake-delta holds the file to what the encoders give.
VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "data" / "inline_vectors.json").read_text())
FILE_ROWS = 65_600


def _group(value):
    digits = []
    for _ in range(5):
        digits.append(Z85[value % 85])
        value //= 85
    return bytes(reversed(digits)).decode()


def _digits(text):
    value = 0
    for c in text.encode():
        value = value * 85 + Z85.index(c)
    return value


def _replace_with_vectors(table, version, adds, texts, cardinalities):
    """Version `version` removes each of `adds` and adds it again with an inline vector."""
    actions = []
    for add, text, (size, cardinality) in zip(adds, texts, cardinalities):
        dv = {"storageType": "i", "pathOrInlineDv": text, "sizeInBytes": size, "cardinality": cardinality}
        actions.append({"remove": {"path": add["path"], "dataChange": True, "deletionTimestamp": 1_700_000_002_000,
                                   "extendedFileMetadata": True, "partitionValues": {}, "size": add["size"]}})
        actions.append({"add": dict(add, deletionVector=dv)})
    _commit(table, version, actions, "DELETE")


def _files_with_dv_feature(path, files, rows):
    """`files` appends of `rows` rows each (ids numbered on across files), then the
    deletionVectors feature; the adds, in order."""
    for i in range(files):
        ids = pa.array(range(i * rows, (i + 1) * rows), pa.int64())
        write_deltalake(path, pa.table({"id": ids}), mode="append")
    DeltaTable(str(path)).alter.add_feature([TableFeatures.DeletionVectors], allow_protocol_versions_increase=True)
    return [next(a["add"] for a in delta.actions(path, v) if "add" in a) for v in range(files)]


@pytest.mark.parametrize("encoder,format_version", [("z85", 2), ("padded", 2), ("z85", 3)])
def test_inline_deletion_vectors_of_every_tail_read_as_delta_rs_reads_them(tmp_path, engines, encoder,
                                                                          format_version):
    """Eight files of 65,600 rows; then one version gives each an inline vector, as the z85
    crate encodes it (tails of 0-3 bytes, rows near 0 and near 2^16) or as delta-spark does
    (zero-padded). delta-rs must delete exactly the vectors' rows, and every Iceberg reader
    must equal delta-rs at every version, in a v2 mirror (position deletes) and a v3 one
    (Puffin deletion vectors)."""
    table = tmp_path / f"{encoder}-v{format_version}"
    adds = _files_with_dv_feature(table, len(VECTORS), FILE_ROWS)
    assert {json.loads(a["stats"])["numRecords"] for a in adds} == {FILE_ROWS}
    version = len(VECTORS) + 1
    counts = [(v["size"], len(v["rows"])) for v in VECTORS]
    _replace_with_vectors(table, version, adds, [v[encoder] for v in VECTORS], counts)
    if encoder == "z85":
        assert sum(v["z85"] != v["padded"] for v in VECTORS) == 6, "tails of 1-3 bytes are '#'-marked"
    deleted = {i * FILE_ROWS + r for i, v in enumerate(VECTORS) for r in v["rows"]}
    expected = delta_expected(table, [version - 1, version])
    ids = {r["id"] for r in expected[version][1]}
    assert set(range(len(VECTORS) * FILE_ROWS)) - ids == deleted, "delta-rs deletes the vectors' rows"
    synced(table, ["--format-version", str(format_version)])
    assert metadata(table)["format-version"] == format_version
    compare(engines, table, expected)
    deep_check(table)


def test_inline_vectors_no_encoder_writes_are_refused(tmp_path):
    """A vector with a group written 2^32 higher (the last or an earlier one), a cardinality
    it does not hold, a size its text cannot have, or a row beyond the file: refused, naming
    the version, with the versions before it mirrored and `metadata/` left as it was."""
    vector = VECTORS[2]
    assert vector["size"] % 4 == 2 and max(vector["rows"]) < 10
    plain = vector["padded"]

    def wrapped(at):
        value = _digits(plain[at:at + 5]) + 2**32
        assert value < 85**5
        return plain[:at] + _group(value) + plain[at + 5:]

    cases = [
        ("last", wrapped(len(plain) - 5), vector["size"], 3, "overflows 32 bits"),
        ("early", wrapped(5), vector["size"], 3, "overflows 32 bits"),
        ("count", plain, vector["size"], 4, "holds 3 rows, the log says 4"),
        ("size", vector["z85"], vector["size"] + 1, 3, "cannot hold"),
        ("beyond", VECTORS[6]["z85"], VECTORS[6]["size"], 3, "of a file of 10 rows"),
    ]
    for name, text, size, cardinality, message in cases:
        bad = tmp_path / name
        adds = _files_with_dv_feature(bad, 1, 10)
        synced(bad)
        before = sorted((p.name, p.read_bytes()) for p in (bad / "metadata").iterdir())
        _replace_with_vectors(bad, 2, adds, [text], [(size, cardinality)])
        result = sync(bad)
        assert result.returncode != 0 and message in result.stderr and "version 2" in result.stderr, (name, result.stderr)
        assert sorted((p.name, p.read_bytes()) for p in (bad / "metadata").iterdir()) == before, name
        assert len(PyIceberg().snapshots(str(bad))) == 2, "versions before the bad one are mirrored"


# --- 7. Delta void columns ---------------------------------------------------------------

def _set_schema(table, version, edit):
    """Rewrite the metaData of commit `version` with edit(fields) applied to its schema."""
    path = pathlib.Path(table) / "_delta_log" / f"{version:020}.json"
    actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for a in actions:
        if "metaData" in a:
            schema = json.loads(a["metaData"]["schemaString"])
            edit(schema["fields"])
            a["metaData"]["schemaString"] = json.dumps(schema)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_delta_void_columns(tmp_path, engines):
    """A top-level void column `v` and a void field `st.n` inside a struct, which Spark stores
    in no file; then version 2 gives `v` a type (long) and adds a file holding it."""
    table = tmp_path / "void"
    st = pa.struct([("x", pa.int32())])
    write_deltalake(table, pa.table({"id": pa.array([1, 2], pa.int64()), "st": pa.array([{"x": 1}, None], st)}))
    write_deltalake(table, pa.table({"id": pa.array([3], pa.int64()), "st": pa.array([{"x": 3}], st)}), mode="append")

    def add_void(fields):
        fields.append({"name": "v", "type": "void", "nullable": True, "metadata": {}})
        struct_type = next(f for f in fields if f["name"] == "st")["type"]
        struct_type["fields"].append({"name": "n", "type": "void", "nullable": True, "metadata": {}})

    _set_schema(table, 0, add_void)
    expected = delta_expected(table)
    for _, rows in expected.values():
        assert all(r["v"] is None and (r["st"] is None or r["st"]["n"] is None) for r in rows), rows
    result = synced(table)
    assert "degraded: column v: Delta type void" in result.stdout and "column st.n" in result.stdout, result.stdout

    # Version 2: `v` becomes a long (Spark's schema merge of void with long).
    file, add = _scratch_file(tmp_path, "scratch", pa.table({
        "id": pa.array([4], pa.int64()), "st": pa.array([{"x": 4}], st), "v": pa.array([40], pa.int64())}))
    shutil.copy(file, table / file.name)
    meta = next(a["metaData"] for a in delta.actions(table, 0) if "metaData" in a)
    schema = json.loads(meta["schemaString"])
    next(f for f in schema["fields"] if f["name"] == "v")["type"] = "long"
    meta = dict(meta, schemaString=json.dumps(schema))
    _commit(table, 2, [{"metaData": meta}, {"add": dict(add, path=file.name)}], "WRITE")
    expected.update(delta_expected(table, [2]))
    synced(table)

    meta = metadata(table)
    names = lambda s: [f["name"] for f in s["fields"]]
    first, current = min(meta["schemas"], key=lambda s: s["schema-id"]), next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
    assert names(first) == ["id", "st"] and names(current) == ["id", "st", "v"], meta["schemas"]
    snapshots = {json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"]: s for s in PyIceberg().snapshots(str(table))}
    for v in ("0", "1"):
        assert "column v" in snapshots[v]["summary"]["xlake.degraded"], snapshots[v]["summary"]
    assert "column st.n" in snapshots["2"]["summary"]["xlake.degraded"]
    assert "column v:" not in snapshots["2"]["summary"]["xlake.degraded"]
    inspect = json.loads(xlake("inspect", table, "--json").stdout)
    assert any("column st.n" in d for d in inspect["degraded"]), inspect["degraded"]

    # Every version without `st.n`; versions 0 and 1 without `v` (every value null in Delta).
    def without_n(rows):
        return [dict(r, st=None if r["st"] is None else {k: x for k, x in r["st"].items() if k != "n"}) for r in rows]

    expected = {k: (cols, without_n(rows)) for k, (cols, rows) in expected.items()}
    assert len(snapshots) == 3
    compare(engines, table, {k: e for k, e in expected.items() if k < 2}, skip=["v"])
    compare(engines, table, {2: expected[2]})
    assert sorted((r["id"], r["v"]) for r in expected[2][1]) == [(1, None), (2, None), (3, None), (4, 40)]
    deep_check(table)
