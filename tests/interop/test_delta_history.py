"""A generated Delta history: with a fixed seed, delta-rs (deltalake 1.6.6) runs random
operations on a fresh table, `xlake sync` runs after every 1-4 new versions, and then every
version must have exactly one Iceberg snapshot at which pyiceberg and DuckDB (Spark: every
10th version and the last) return the rows delta-rs returned at that version.

XLAKE_HISTORY_OPS sets the number of operations per table (default 120), XLAKE_HISTORY_SEED
the seed (default 20261130). A failure names the seed, the step and the operations so far.

What deltalake 1.6.6 can and cannot generate:
- It never writes deletion vectors: with the deletionVectors feature on, delete, update and
  merge still rewrite whole files. So the "unpartitioned_dv" table only carries the feature
  in its protocol (reader version 3, writer version 7). It is added with `alter.add_feature`,
  because `configuration={"delta.enableDeletionVectors": "true"}` (at create or via
  `set_table_properties`) also lists `variantType` as a reader feature, which xlake refuses.
- `cleanup_metadata()` deletes commits only before the latest checkpoint and older than
  `delta.logRetentionDuration`; the tables set it to 0 so cleanup really deletes commits
  (auto cleanup is off, and cleanup only runs right after a sync, so no version is lost
  before it is mirrored). delta-rs cannot time-travel to a deleted commit, so the oracle's
  rows are read as each version is written.
- `compact_logs(a, b)` writes `<a>.<b>.compacted.json` log compaction files.
"""
import dataclasses
import datetime as dt
import os
import pathlib
import random

import delta_source as delta
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableFeatures
from readers import PyIceberg, snapshot_for, zoned_columns
from rows import canonical_rows
from xlake_cli import sync

OPS = int(os.environ.get("XLAKE_HISTORY_OPS", "120"))
SEED = int(os.environ.get("XLAKE_HISTORY_SEED", "20261130"))

# kind -> Delta partition columns; "unpartitioned_dv" carries the deletionVectors feature.
KINDS = {"partitioned": ["part", "day"], "unpartitioned_dv": []}

TYPES = {
    "id": pa.int64(),
    "part": pa.string(),
    "day": pa.date32(),
    "v": pa.float64(),
    "s": pa.string(),
    "ts": pa.timestamp("us", tz="UTC"),
    "e1": pa.int64(),
    "e2": pa.string(),
    "e3": pa.float64(),
    "e4": pa.int32(),
}
BASE = ["id", "part", "day", "v", "s", "ts"]
EXTRA = ["e1", "e2", "e3", "e4"]  # added one at a time by schema-merging appends
PARTS = ["a", "b", "c", "x y", None]  # None: the null partition; "x y" is percent-encoded
DAYS = [dt.date(2024, 1, 1), dt.date(2024, 2, 29), dt.date(1969, 12, 31), None]

WEIGHTS = {
    "append": 20, "merge": 12, "update": 10, "delete": 10, "overwrite_where": 8,
    "optimize": 6, "add_column": 3, "overwrite": 2, "restore": 3,
    "checkpoint": 5, "compact_logs": 3, "cleanup": 3,
}


class Generator:
    def __init__(self, path, kind, rnd):
        self.path, self.kind, self.rnd = str(path), kind, rnd
        self.next_id = 0

    def table(self):
        return DeltaTable(self.path)

    def columns(self):
        return [f.name for f in self.table().schema().fields]

    def value(self, column, id_):
        r, t = self.rnd, TYPES[column]
        if column == "id":
            return id_
        if column == "part":
            return r.choice(PARTS)
        if column == "day":
            return r.choice(DAYS)
        if r.random() < 0.1:
            return None
        if pa.types.is_floating(t):
            return r.choice([0.0, -0.0, 1.5, r.uniform(-1e6, 1e6)])
        if pa.types.is_string(t):
            return r.choice(["", "é", "x,y", f"s{r.randrange(1000)}"])
        if pa.types.is_timestamp(t):  # microseconds: Delta's stats keep milliseconds only
            return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=r.randrange(10**12))
        return r.randrange(-(2**31), 2**31)

    def batch(self, ids, columns=None, **fixed):
        columns = columns or self.columns()
        data = {c: [fixed[c] if c in fixed else self.value(c, i) for i in ids] for c in columns}
        return pa.table(data, schema=pa.schema([(c, TYPES[c]) for c in columns]))

    def new_ids(self, n):
        self.next_id += n
        return list(range(self.next_id - n, self.next_id))

    def create(self):
        write_deltalake(
            self.path, self.batch(self.new_ids(10), BASE), partition_by=KINDS[self.kind] or None,
            configuration={"delta.logRetentionDuration": "interval 0 seconds", "delta.enableExpiredLogCleanup": "false"},
        )
        if self.kind == "unpartitioned_dv":
            self.table().alter.add_feature([TableFeatures.DeletionVectors], allow_protocol_versions_increase=True)
        return "create"

    def run(self, op, live_ids):
        """Run `op`; return what it did (for failure messages)."""
        r, t = self.rnd, self.table()
        m = r.randrange(2, 6)
        pred = r.choice([f"id % {m} = {r.randrange(m)}", "part = 'b'", "part IS NULL", "s IS NULL", "v < 0"])
        if op in ("append", "overwrite"):
            rows = self.batch(self.new_ids(r.randrange(op == "append", 20)))
            write_deltalake(self.path, rows, mode=op)
            return f"{op} {rows.num_rows} rows"
        if op == "overwrite_where":
            part = r.choice(PARTS)
            pred = "part IS NULL" if part is None else f"part = '{part}'"
            rows = self.batch(self.new_ids(r.randrange(0, 8)), part=part)
            write_deltalake(self.path, rows, mode="overwrite", predicate=pred)
            return f"overwrite {rows.num_rows} rows where {pred}"
        if op == "delete":
            t.delete(pred)
            return f"delete where {pred}"
        if op == "update":
            sets = r.choice([{"s": "'upd'"}, {"v": "v * 2"}, {"part": "'c'"}, {"s": "NULL", "day": "NULL"}])
            t.update(sets, predicate=pred)
            return f"update {sets} where {pred}"
        if op == "merge":
            old = r.sample(sorted(live_ids), min(len(live_ids), r.randrange(0, 8)))
            rows = self.batch(old + self.new_ids(r.randrange(0, 8)))
            t.merge(rows, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
            return f"merge {len(old)} matched, {rows.num_rows - len(old)} new"
        if op == "optimize":
            done = t.optimize.compact()
            return f"optimize {done['numFilesRemoved']} files into {done['numFilesAdded']}"
        if op == "add_column":  # the first of EXTRA missing: after a restore, a name comes back
            new = next((c for c in EXTRA if c not in self.columns()), None)
            if new:
                write_deltalake(self.path, self.batch(self.new_ids(3), self.columns() + [new]), mode="append", schema_mode="merge")
            return f"append 3 rows adding column {new}"
        first, last = min(delta.commit_files(self.path)), t.version()
        if op == "restore" and first < last:
            to = r.randrange(first, last)
            t.restore(to, protocol_downgrade_allowed=True)
            return f"restore {to}"
        if op == "checkpoint":
            t.create_checkpoint()
        if op == "compact_logs" and first < last:
            start = r.randrange(first, last)
            t.compact_logs(start, last)
            return f"compact_logs {start}-{last}"
        if op == "cleanup":  # the caller syncs first
            t.cleanup_metadata()
            return f"cleanup: commits left from {min(delta.commit_files(self.path))}"
        return op


@dataclasses.dataclass
class History:
    kind: str
    table: pathlib.Path
    log: list  # (step, what it did, version after it)
    expected: dict  # version -> (columns, canonical rows), read as the version was written
    error: str = ""  # the first `xlake sync` failure, if any

    def where(self, v=None):
        """The seed and the operations up to version `v` (all of them without `v`)."""
        ops = [f"step {s}: {what} -> version {after}" for s, what, after in self.log if v is None or after <= v]
        return f"{self.kind}, seed {SEED}, XLAKE_HISTORY_OPS={OPS}{'' if v is None else f', version {v}'}; ops:\n  " + "\n  ".join(ops)

    def check_synced(self):
        if self.error:
            pytest.fail(f"{self.error}\n{self.where()}")


def generate(kind, path):
    rnd = random.Random(f"{SEED}-{kind}")
    gen = Generator(path, kind, rnd)
    h = History(kind, path, [], {})

    def record(step, text):
        version = gen.table().version()
        for v in range(max(h.expected, default=-1) + 1, version + 1):
            got = delta.oracle_table(path, v)
            h.expected[v] = (got.column_names, canonical_rows(got.to_pylist(), got.column_names))
        h.log.append((step, text, version))

    def xlake_sync(step):
        nonlocal synced, every
        result = sync(path)
        if result.returncode != 0:
            h.error = f"step {step}: `xlake sync` exited {result.returncode}\nstderr:\n{result.stderr}"
        synced, every = max(h.expected), rnd.randrange(1, 5)
        return result.returncode == 0

    record(0, gen.create())
    synced, every = -1, rnd.randrange(1, 5)
    ops, weights = zip(*WEIGHTS.items())
    for step in range(1, OPS + 1):
        op = rnd.choices(ops, weights)[0]
        if op == "cleanup" and not xlake_sync(step):  # never delete a commit not yet mirrored
            return h
        live = {r["id"] for r in h.expected[max(h.expected)][1]}
        record(step, gen.run(op, live))
        if max(h.expected) - synced >= every and not xlake_sync(step):
            return h
    xlake_sync(OPS)
    return h


@pytest.fixture(scope="session")
def history(tmp_path_factory):
    made = {}

    def get(kind):
        if kind not in made:
            made[kind] = generate(kind, tmp_path_factory.mktemp(f"history-{kind}") / "table")
        return made[kind]

    return get


@pytest.mark.parametrize("kind", KINDS)
def test_one_snapshot_per_version(history, kind):
    h = history(kind)
    h.check_synced()
    snapshots = PyIceberg().snapshots(str(h.table))
    for v in h.expected:
        snapshot_for(snapshots, str(v))
    assert len(snapshots) == len(h.expected), f"{len(snapshots)} snapshots for {len(h.expected)} versions\n{h.where()}"


@pytest.mark.parametrize("engine", ["pyiceberg", "duckdb", "spark"])
@pytest.mark.parametrize("kind", KINDS)
def test_rows_at_every_version(history, engines, kind, engine):
    h = history(kind)
    h.check_synced()
    table = str(h.table)
    reader, snapshots, zoned = engines(engine), PyIceberg().snapshots(table), zoned_columns(table)
    last = max(h.expected)
    for v, (columns, want) in h.expected.items():
        if engine == "spark" and v % 10 and v != last:
            continue
        rows = reader.rows_at_snapshot(table, snapshot_for(snapshots, str(v))["snapshot_id"])
        missing = [c for c in columns if rows and c not in rows[0]]
        assert not missing, f"{engine}: columns missing from the Iceberg read: {missing}\n{h.where(v)}"
        got = canonical_rows(rows, columns, zoned)
        assert got == want, f"{engine}: rows differ from delta-rs\n{_diff(want, got)}\n{h.where(v)}"


def _diff(want, got):
    """The rows only one side has, by id (a short, readable difference)."""
    w = {r["id"]: r for r in want}
    g = {r["id"]: r for r in got}
    only_w = [w[i] for i in w if w[i] != g.get(i)][:5]
    only_g = [g[i] for i in g if g[i] != w.get(i)][:5]
    return f"{len(want)} rows expected, {len(got)} read\nexpected, not read: {only_w}\nread, not expected: {only_g}"
