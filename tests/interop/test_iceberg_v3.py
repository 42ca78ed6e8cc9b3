"""Iceberg format version 3 (docs/iceberg-v3.md): the Delta deletion-vector fixture mirrored
with `--format-version 3` (vectors as Puffin `deletion-vector-v1` blobs copied from the
Delta files), read back by pyiceberg, DuckDB and Spark at every version and compared with
delta-rs; the Puffin files parsed by pyiceberg's own parser; a v2 mirror upgraded in place
with every old snapshot still returning its rows; a corrupt vector stopping the sync at its
version; Spark's `_row_id` and `_last_updated_sequence_number` of rows staying as they were
when a commit rewrites their manifest or gives their file a new vector (whose data entry
and manifest stay as they are)."""
import json
import pathlib

import delta_source as delta
import pytest
from readers import ENGINES, DuckDB, PyIceberg, current_metadata_path, snapshot_for
from rows import canonical_rows
from xlake_cli import ROOT, xlake

NAME = "table_with_deletion_logs"


def metadata(table):
    return json.loads(pathlib.Path(current_metadata_path(table)).read_text())


def rows_match(reader, table, versions, where):
    snapshots = PyIceberg().snapshots(str(table))
    for v in versions:
        got = delta.oracle_table(str(table), v)
        columns = got.column_names
        want = canonical_rows(got.to_pylist(), columns)
        snap = snapshot_for(snapshots, str(v))
        rows = reader.rows_at_snapshot(str(table), snap["snapshot_id"])
        assert canonical_rows(rows, columns) == want, f"{where} @ version {v}, {reader.name}: rows differ from delta-rs"


@pytest.fixture(scope="module")
def v3_table(tmp_path_factory):
    table = delta.extract(NAME, tmp_path_factory.mktemp("v3"))
    result = xlake("sync", table, "--format-version", "3")
    assert result.returncode == 0, result.stderr
    return table


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """The fixture mirrored as v2 up to version 3 (its first vector, a position-delete
    file), then upgraded by the next sync, which mirrors the rest as v3."""
    table = delta.extract(NAME, tmp_path_factory.mktemp("upgrade"))
    first = xlake("commit", table, "--version", "3")
    assert first.returncode == 0, first.stderr
    assert metadata(table)["format-version"] == 2
    second = xlake("sync", table, "--format-version", "3")
    assert second.returncode == 0, second.stderr
    return table, first, second


def test_v3_metadata_row_lineage_and_puffin_entries(v3_table):
    m = metadata(v3_table)
    assert m["format-version"] == 3
    snaps = sorted(m["snapshots"], key=lambda s: s["sequence-number"])
    next_row_id = 0
    for s in snaps:
        assert s["first-row-id"] == next_row_id, s
        next_row_id += s["added-rows"]
    assert m["next-row-id"] == next_row_id
    # pyiceberg 0.12 reads manifests with the v2 schema (no content_offset): read the
    # delete manifests' Avro with DuckDB's avro extension instead.
    table = PyIceberg()._table(str(v3_table))
    con = DuckDB().con
    entries = []
    for manifest in table.current_snapshot().manifests(table.io):
        if manifest.content.value == 1:
            rows = con.execute("SELECT status, data_file FROM read_avro(?)", [manifest.manifest_path]).fetchall()
            entries += [f for status, f in rows if status != 2]
    assert entries, "no deletion vector entry in the current snapshot"
    for f in entries:
        assert f["file_format"] == "PUFFIN" and f["content"] == 1, f
        assert f["referenced_data_file"].endswith(".parquet"), f
        assert f["content_offset"] >= 4 and f["content_size_in_bytes"] > 8, f
        assert f["record_count"] == 2, f  # version 4's vector deletes two rows
    assert not list(pathlib.Path(v3_table, "metadata").glob("*-deletes.parquet")), "a v3 table got a position-delete file"


def test_puffin_files_parse_and_blobs_are_the_delta_bytes(v3_table):
    from pyiceberg.table.puffin import PuffinFile

    puffins = sorted(pathlib.Path(v3_table, "metadata").glob("*.puffin"))
    assert puffins
    vector_files = [f.read_bytes() for f in pathlib.Path(v3_table).glob("deletion_vector_*.bin")]
    for p in puffins:
        puffin = PuffinFile(p.read_bytes())
        for blob in puffin.footer.blobs:
            assert blob.type == "deletion-vector-v1"
            assert (blob.snapshot_id, blob.sequence_number) == (-1, -1)
            assert blob.compression_codec is None
            payload = puffin.get_blob_payload(blob)
            assert len(payload) == blob.length
            assert payload[4:8] == bytes.fromhex("D1D33964")
            # The blob is the bytes after a Delta vector file's format byte, unchanged.
            assert any(f[1:] == payload for f in vector_files), f"{p.name}: blob is not a Delta vector file's bytes"
            assert int(blob.properties["cardinality"]) > 0
            assert blob.properties["referenced-data-file"].endswith(".parquet")


@pytest.mark.parametrize("engine", ENGINES)
def test_v3_rows_at_every_version(v3_table, engines, engine):
    rows_match(engines(engine), v3_table, delta.snapshot_versions(v3_table), f"{NAME} (v3)")


def test_upgrade_says_so_and_bumps_the_version(upgraded):
    table, _, second = upgraded
    assert "upgraded the Iceberg table from format version 2 to 3" in second.stdout, second.stdout
    m = metadata(table)
    assert m["format-version"] == 3
    # The old position-delete file stays; new vectors are Puffin.
    meta_dir = pathlib.Path(table, "metadata")
    assert list(meta_dir.glob("*-deletes.parquet")) and list(meta_dir.glob("*.puffin"))


@pytest.mark.parametrize("engine", ENGINES)
def test_upgraded_table_reads_every_old_and_new_snapshot(upgraded, engines, engine):
    table, _, _ = upgraded
    rows_match(engines(engine), table, delta.snapshot_versions(table), f"{NAME} (v2 -> v3)")


@pytest.fixture(scope="module")
def upgraded_by_command(tmp_path_factory):
    """The fixture mirrored as v2 up to version 3, upgraded by `xlake upgrade` (nothing
    mirrored by it), then synced as v3 by a plain sync (the table's own version)."""
    table = delta.extract(NAME, tmp_path_factory.mktemp("upgrade-cmd"))
    assert xlake("commit", table, "--version", "3").returncode == 0
    before = metadata(table)
    result = xlake("upgrade", table, "--format-version", "3")
    assert result.returncode == 0, result.stderr
    assert "from format version 2 to 3" in result.stdout, result.stdout
    after = metadata(table)
    assert after["format-version"] == 3
    assert after["snapshots"] == before["snapshots"]
    again = xlake("upgrade", table, "--format-version", "3")
    assert again.returncode == 0 and "nothing to upgrade" in again.stdout, again.stdout
    down = xlake("upgrade", table, "--format-version", "2")
    assert down.returncode == 1 and "never downgraded" in down.stderr, down.stderr
    assert metadata(table) == after
    rest = xlake("sync", table)
    assert rest.returncode == 0, rest.stderr
    assert metadata(table)["format-version"] == 3
    return table


@pytest.mark.parametrize("engine", ENGINES)
def test_upgrade_command_keeps_every_snapshot_readable(upgraded_by_command, engines, engine):
    table = upgraded_by_command
    assert list(pathlib.Path(table, "metadata").glob("*.puffin"))
    rows_match(engines(engine), table, delta.snapshot_versions(table), f"{NAME} (xlake upgrade)")


def test_a_vector_with_a_wrong_crc_stops_the_sync_at_its_version(tmp_path):
    table = delta.extract(NAME, tmp_path)
    # Version 4's vector (cardinality 2, the larger of the two files).
    vector = max(pathlib.Path(table).glob("deletion_vector_*.bin"), key=lambda f: f.stat().st_size)
    data = bytearray(vector.read_bytes())
    data[-1] ^= 0xFF  # its CRC
    vector.write_bytes(bytes(data))
    result = xlake("sync", table, "--format-version", "3")
    assert result.returncode != 0
    err = result.stderr
    assert "CRC-32" in err and vector.name in err and "source commit" in err and str(table) in err, err
    mirrored = [json.loads(s["summary"]["XTABLE_METADATA"])["sourceIdentifier"] for s in PyIceberg().snapshots(str(table))]
    assert "3" in mirrored and "4" not in mirrored, mirrored
    # The last mirrored version shows exactly delta-rs's rows (no deleted row).
    rows_match(PyIceberg(), table, [int(v) for v in mirrored], f"{NAME} (bad CRC)")


def generated(tmp_path_factory, version):
    """A generated Delta table (benches/gen_delta_dv.py) whose commits each replace the
    vectors of several data files, so one Puffin file holds several vectors and a later
    commit replaces some of them; then version 6 adds a file with a vector again without
    one (as Delta's RESTORE to before the vector does: its rows show again) and version 7
    removes another file outright (its manifest is rewritten). Mirrored with format
    `version`. Expected ids per Delta version come from the log and the generator's
    vectors, not from xlake, and are checked against delta-rs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_delta_dv", ROOT / "benches" / "gen_delta_dv.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    table = tmp_path_factory.mktemp(f"many-v{version}") / "t"
    rows = 500
    gen.generate(table, commits=6, files=6, dvs=3, rows=rows)
    # Absolute vector paths as URIs, as Delta writes them (delta-rs refuses bare paths).
    for f in (table / "_delta_log").glob("*.json"):
        f.write_text(f.read_text().replace('"pathOrInlineDv": "/', '"pathOrInlineDv": "file:///'))
    live_adds = {}
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                live_adds[a["add"]["path"]] = a["add"]
    with_dv = sorted(p for p, a in live_adds.items() if "deletionVector" in a)
    restored, dropped = with_dv[0], min(p for p in live_adds if p != with_dv[0])
    ts = gen.T0 + 10 * 60_000
    add = {k: v for k, v in live_adds[restored].items() if k != "deletionVector"}
    restore = [
        {"remove": {"path": restored, "deletionTimestamp": ts, "dataChange": True, "size": add["size"], "deletionVector": live_adds[restored]["deletionVector"]}},
        {"add": {**add, "modificationTime": ts}},
        {"commitInfo": {"timestamp": ts, "operation": "RESTORE"}},
    ]
    remove = {"path": dropped, "deletionTimestamp": ts + 60_000, "dataChange": True, "size": live_adds[dropped]["size"]}
    if "deletionVector" in live_adds[dropped]:
        remove["deletionVector"] = live_adds[dropped]["deletionVector"]
    drop = [{"remove": remove}, {"commitInfo": {"timestamp": ts + 60_000, "operation": "DELETE"}}]
    for v, actions in [(6, restore), (7, drop)]:
        (table / "_delta_log" / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    args = ["sync", table] + (["--format-version", "3"] if version == 3 else [])
    result = xlake(*args)
    assert result.returncode == 0, result.stderr
    expected = {}
    live = {}
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "remove" in a:
                live.pop(a["remove"]["path"], None)
            if "add" in a:
                dv = a["add"].get("deletionVector")
                live[a["add"]["path"]] = gen_positions(dv) if dv else set()
        v = int(f.stem)
        expected[v] = sorted(i for deleted in live.values() for i in range(rows) if i not in deleted)
        oracle = sorted(r["id"] for r in delta.oracle_table(str(table), v).to_pylist())
        assert oracle == expected[v], f"generated table @ version {v}: the expected rows are not delta-rs's"
    return table, expected


@pytest.fixture(scope="module")
def many_vectors(tmp_path_factory):
    return generated(tmp_path_factory, 3)


@pytest.fixture(scope="module")
def many_vectors_v2(tmp_path_factory):
    return generated(tmp_path_factory, 2)


def gen_positions(dv):
    """The positions of a generated vector file (one array container, key 0)."""
    data = pathlib.Path(dv["pathOrInlineDv"].removeprefix("file://")).read_bytes()[dv["offset"]:]
    size = int.from_bytes(data[:4], "big")
    vector = data[4 : 4 + size]
    assert vector[:4] == bytes.fromhex("D1D33964")
    body = vector[4 + 8 + 4 :]
    card = int.from_bytes(body[10:12], "little") + 1
    start = 12 + 4
    return {int.from_bytes(body[start + 2 * k : start + 2 * k + 2], "little") for k in range(card)}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version", [3, 2])
def test_vectors_sharing_a_puffin_file_are_replaced_one_by_one(request, version, engines, engine):
    """Every version of the generated table (new vectors, a vector dropped, a file
    removed) reads as the log says, as v3 (Puffin vectors) and v2 (position deletes). In
    v3 the dropped vector's blob shared Puffin files with live ones, which pyiceberg 0.12
    would still apply: those are moved (docs/iceberg-v3.md)."""
    table, expected = request.getfixturevalue("many_vectors" if version == 3 else "many_vectors_v2")
    reader = engines(engine)
    snapshots = PyIceberg().snapshots(str(table))
    for v, ids in expected.items():
        snap = snapshot_for(snapshots, str(v))
        rows = reader.rows_at_snapshot(str(table), snap["snapshot_id"])
        assert sorted(r["id"] for r in rows) == ids, f"generated table (Iceberg v{version}) @ version {v}, {engine}"


@pytest.mark.parametrize("version", [3, 2])
def test_new_vectors_leave_the_data_manifests_as_they_are(request, version):
    """Versions 1 to 6 of the generated table only change vectors (new ones, then one
    dropped): each snapshot lists exactly version 0's data manifest, not rewritten, and
    only the delete manifests change."""
    table, _ = request.getfixturevalue("many_vectors" if version == 3 else "many_vectors_v2")
    snapshots = PyIceberg().snapshots(str(table))
    iceberg = PyIceberg()._table(str(table))

    def manifests(v, content):
        snap = snapshot_for(snapshots, str(v))
        listed = iceberg.snapshot_by_id(snap["snapshot_id"]).manifests(iceberg.io)
        return sorted((m.manifest_path, m.sequence_number, m.added_files_count, m.existing_files_count) for m in listed if m.content.value == content)

    first = manifests(0, 0)
    for v in range(1, 7):
        assert manifests(v, 0) == first, f"Iceberg v{version} @ version {v}: data manifests changed"
        assert manifests(v, 1) != manifests(v - 1, 1), f"Iceberg v{version} @ version {v}: delete manifests unchanged"


def spark_lineage(spark, table, snapshot_id):
    """(data file name, id) -> (_row_id, _last_updated_sequence_number) of every row Spark
    reads at the snapshot."""
    df = spark.read.format("iceberg").option("snapshot-id", str(snapshot_id)).load(str(table))
    rows = df.select("_file", "id", "_row_id", "_last_updated_sequence_number").collect()
    return {(r["_file"].rsplit("/", 1)[-1], r["id"]): (r["_row_id"], r["_last_updated_sequence_number"]) for r in rows}


def test_spark_row_ids_survive_manifest_rewrites_and_new_vectors(many_vectors, spark):
    """Row lineage (docs/iceberg-v3.md): the generated table's commits replace the vectors
    of some data files (Delta removes each and adds it again, unchanged: the mirror keeps
    its entry as it is), drop a vector (its rows show again) and remove a file (the data
    manifest holding it is rewritten, the other files carried as existing entries). Spark
    3.5 + Iceberg 1.10 reads `_row_id` and `_last_updated_sequence_number` (pyiceberg 0.12
    and DuckDB 1.4.4 have no such columns): every row keeps both from the version it first
    shows in, in a file given a new vector, in a carried file, and when shown again (Iceberg
    Java inherits the sequence number from the entry's file sequence number, which a new
    vector does not change); every row id is unique."""
    table, _ = many_vectors
    added = {}
    for f in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in f.read_text().splitlines()]
        added[int(f.stem)] = {a["add"]["path"].rsplit("/", 1)[-1] for a in actions if "add" in a}
    snapshots = PyIceberg().snapshots(str(table))
    iceberg = PyIceberg()._table(str(table))
    first_seen, before, rewrites = {}, None, 0
    kept = {"carried": 0, "re-added": 0, "shown again": 0}
    for version in sorted(added):
        snap = snapshot_for(snapshots, str(version))
        now = spark_lineage(spark, table, snap["snapshot_id"])
        ids = [row_id for row_id, _ in now.values()]
        assert None not in ids and len(set(ids)) == len(ids), f"version {version}: row ids not unique"
        if before is not None:
            manifests = iceberg.snapshot_by_id(snap["snapshot_id"]).manifests(iceberg.io)
            data = [m for m in manifests if m.content.value == 0]
            rewrites += any(m.existing_files_count and m.deleted_files_count for m in data)
        for (name, i), lineage in now.items():
            was = first_seen.setdefault((name, i), lineage)
            assert lineage == was, f"version {version}: {name} row {i}: (_row_id, _last_updated_sequence_number) {was} -> {lineage}"
            if before is not None:
                again = "shown again" if (name, i) not in before else None
                kept[again or ("re-added" if name in added[version] else "carried")] += 1
        before = now
    assert all(kept.values()) and rewrites, f"rows kept: {kept}, {rewrites} snapshots rewrote a data manifest"


REPLACED_VECTOR = "deletion_vector_8e4ca8be-7615-43cf-bc06-5d131148683f.bin"


@pytest.mark.parametrize("format_version", ["2", "3"])
def test_a_vector_vacuumed_before_the_first_sync(tmp_path, format_version):
    """Issue 41: VACUUM deleted version 3's vector (version 4 replaced it) before the
    table's first sync. Every version is mirrored; version 3's snapshot names the gone
    vector, so pyiceberg and DuckDB fail on it as delta-rs fails on version 3, never
    showing its deleted row; every other version equals delta-rs; `expire` drops the
    snapshots up to version 3, after which every retained snapshot reads."""
    table = delta.extract(NAME, tmp_path)
    pathlib.Path(table, REPLACED_VECTOR).unlink()
    result = xlake("sync", table, "--format-version", format_version)
    assert result.returncode == 0, result.stderr
    assert f"{REPLACED_VECTOR}) is gone from storage" in result.stdout and "(from commit 3)" in result.stdout, result.stdout
    versions = delta.snapshot_versions(table)
    snapshots = PyIceberg().snapshots(str(table))
    degraded = [s for s in snapshots if "xlake.degraded" in s["summary"]]
    assert degraded == [snapshot_for(snapshots, "3")], degraded
    with pytest.raises(Exception, match="8e4ca8be"):
        delta.oracle_table(str(table), 3)
    for reader in (PyIceberg(), DuckDB()):
        with pytest.raises(Exception, match="8e4ca8be"):
            reader.rows_at_snapshot(str(table), snapshot_for(snapshots, "3")["snapshot_id"])
        rows_match(reader, table, [v for v in versions if v != 3], f"{NAME} (v{format_version}, vector vacuumed)")
    expired = xlake("expire", table)
    assert expired.returncode == 0 and "4 snapshots expired" in expired.stdout, expired.stdout
    for reader in (PyIceberg(), DuckDB()):
        rows_match(reader, table, [v for v in versions if v > 3], f"{NAME} (v{format_version}, expired)")
    assert xlake("check", table, "--deep", "--all").returncode == 0
