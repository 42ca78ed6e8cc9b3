"""A table folder copied elsewhere, rebuilt there with `xlake sync --rebuild`, then the
original deleted: pyiceberg and DuckDB read, at every source commit's snapshot, the rows the
source engine (hudi-rs, delta-rs) returns. And snapshots come out in commit order as
pyiceberg lists them (`snapshots()[0]` is the first commit), also for a table whose
metadata an older xlake wrote with the list scrambled, once it has committed again. The
same copy and rebuild on S3 (moto), between two prefixes of a bucket."""
import json
import pathlib
import random
import shutil

import delta_source as delta
import hudi_source as hudi
import pytest
from readers import current_metadata_path, snapshot_for, zoned_columns
from remote import assert_rows_match, delta_expected, delta_history, ok, sync_and_check
from rows import canonical_rows
from test_s3 import S3DuckDB, S3PyIceberg, s3  # noqa: F401 (s3: the moto server fixture)
from xlake_cli import sync, xlake

HUDI = "sample_table_cow_v9_txns_simple_nometa"
DELTA = "table_with_deletion_logs"  # deletion vectors: position-delete files in metadata/
READERS = ["pyiceberg", "duckdb"]


def _relocate(original, new):
    """Copy `original` to `new`, see the copy refused, rebuild it, delete the original."""
    shutil.copytree(original, new, symlinks=True)
    refused = sync(new)
    assert refused.returncode != 0, refused.stdout
    assert str(original) in refused.stderr and "--rebuild" in refused.stderr, refused.stderr
    rebuilt = sync(new, ["--rebuild"])
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "metadata.relocated-" in rebuilt.stdout, rebuilt.stdout
    shutil.rmtree(original)
    meta = json.loads(pathlib.Path(current_metadata_path(new)).read_text())
    assert meta["location"] == str(new)
    assert all(s["manifest-list"].startswith(f"{new}/metadata/") for s in meta["snapshots"])
    check = xlake("check", "--deep", "--all", new)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.fixture(scope="module")
def relocated(tmp_path_factory):
    """relocated(kind) -> the Hudi or Delta fixture synced, copied, rebuilt at the copy,
    its original deleted; once per module."""
    done = {}

    def get(kind):
        if kind not in done:
            base = tmp_path_factory.mktemp(f"reloc-{kind}")
            if kind == "hudi":
                original = hudi.extract(HUDI, base / "orig")
            else:
                original = delta.extract(DELTA, base / "orig")
            first = sync(original)
            assert first.returncode == 0, first.stderr
            new = (base / "elsewhere" / original.name).resolve()
            new.parent.mkdir()
            _relocate(original, new)
            done[kind] = new
        return done[kind]

    return get


def _commits(kind, table):
    """(source id, oracle (columns, canonical rows)) per commit with a snapshot, in order."""
    if kind == "hudi":
        for requested, _action, _ in hudi.snapshot_instants(table):
            got = hudi.oracle_table(table, requested)
            yield requested, (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
    else:
        for v in delta.snapshot_versions(table):
            got = delta.oracle_table(table, v)
            yield str(v), (got.column_names, canonical_rows(got.to_pylist(), got.column_names))


@pytest.mark.parametrize("engine", READERS)
@pytest.mark.parametrize("kind", ["hudi", "delta"])
def test_rows_at_every_commit_after_a_rebuild_elsewhere(relocated, engines, kind, engine):
    table = relocated(kind)
    reader = engines(engine)
    snapshots = engines("pyiceberg").snapshots(str(table))
    zoned = zoned_columns(table)
    compared = 0
    for source_id, (columns, want) in _commits(kind, table):
        where = f"{kind} @ {source_id}, {engine}, rebuilt at {table}"
        rows = reader.rows_at_snapshot(str(table), snapshot_for(snapshots, source_id)["snapshot_id"])
        assert canonical_rows(rows, columns, zoned) == want, f"{where}: rows differ from the source engine"
        compared += 1
    assert compared > 5, f"{kind}: only {compared} commits"


def _pyiceberg_order(table):
    """(sequence numbers as pyiceberg's snapshots() lists them, source id of snapshots()[0],
    source id of the first row of inspect.snapshots())."""
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(current_metadata_path(table))
    snaps = t.snapshots()
    first = json.loads(snaps[0].summary.additional_properties["XTABLE_METADATA"])["sourceIdentifier"]
    inspected = t.inspect.snapshots().to_pylist()
    first_inspected = json.loads(dict(inspected[0]["summary"])["XTABLE_METADATA"])["sourceIdentifier"]
    return [s.sequence_number for s in snaps], first, first_inspected


@pytest.mark.parametrize("kind", ["hudi", "delta"])
def test_pyiceberg_lists_snapshots_in_commit_order(relocated, kind):
    table = relocated(kind)
    seq, first, first_inspected = _pyiceberg_order(table)
    assert seq == sorted(seq) and len(set(seq)) == len(seq), f"{kind}: {seq}"
    oldest = next(_commit_ids(kind, table))
    assert first == oldest and first_inspected == oldest, f"{kind}: snapshots()[0] mirrors {first}, not {oldest}"


def _commit_ids(kind, table):
    if kind == "hudi":
        return (i[0] for i in hudi.snapshot_instants(table))
    return (str(v) for v in delta.snapshot_versions(table))


def test_a_scrambled_snapshot_list_is_fixed_by_the_next_commit(tmp_path):
    """A vN as older xlake wrote it (snapshots in hash order) misleads pyiceberg; the next
    commit writes them in order."""
    table = delta.extract(DELTA, tmp_path)
    versions = delta.snapshot_versions(table)
    part = xlake("commit", table, "--version", versions[-4])
    assert part.returncode == 0, part.stderr
    path = pathlib.Path(current_metadata_path(table))
    meta = json.loads(path.read_text())
    random.Random(7).shuffle(meta["snapshots"])
    path.write_text(json.dumps(meta))
    seq, first, _ = _pyiceberg_order(table)
    assert seq != sorted(seq) and first != "0", "the scrambled list should mislead pyiceberg"
    rest = sync(table)
    assert rest.returncode == 0, rest.stderr
    seq, first, first_inspected = _pyiceberg_order(table)
    assert seq == list(range(1, len(versions) + 1)), seq
    assert first == first_inspected == "0"



def test_a_table_copied_to_another_s3_prefix_is_rebuilt_there(s3):  # noqa: F811 (the fixture)
    """On S3 (moto on loopback), where locations are URLs and setting aside is a copy and a
    delete: a Delta table copied to another prefix is refused, rebuilt there, and once the
    original prefix is emptied reads in pyiceberg and DuckDB as delta-rs reads it."""
    prefix, copy = "reloc_src", "reloc_copy"
    versions = delta_history(s3, prefix)
    sync_and_check(s3, prefix)
    for key in s3.keys(f"{prefix}/"):
        s3.client.copy_object(Bucket=s3.bucket, CopySource={"Bucket": s3.bucket, "Key": key}, Key=copy + key[len(prefix):])
    refused = s3.xlake("sync", s3.url(copy))
    assert refused.returncode != 0, refused.stdout
    assert s3.url(prefix) in refused.stderr and "--rebuild" in refused.stderr, refused.stderr
    assert s3.xlake("check", s3.url(copy)).returncode == 1
    rebuilt = ok(s3.xlake("sync", s3.url(copy), "--rebuild"), "sync --rebuild")
    assert "metadata.relocated-" in rebuilt.stdout, rebuilt.stdout
    aside = [k for k in s3.keys(f"{copy}/") if "/metadata.relocated-" in k]
    assert any(k.endswith(".metadata.json") for k in aside), aside
    for key in s3.keys(f"{prefix}/"):
        s3.client.delete_object(Bucket=s3.bucket, Key=key)
    ok(s3.xlake("check", s3.url(copy), "--deep", "--all"), "check --deep --all")
    assert_rows_match(s3, [S3PyIceberg(s3), S3DuckDB(s3)], copy, delta_expected(s3, copy, versions))
