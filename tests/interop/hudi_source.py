"""The Hudi side of the interop suite: the fixture archives, their completed instants (read
from timeline file names alone), and the hudi-rs oracle's rows as of an instant.

Run as a script to print, per fixture, the oracle's row count at every completed instant.
"""
import datetime as dt
import pathlib
import re
import sys
import zipfile

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "hudi"

# Actions that get exactly one Iceberg snapshot (the contract); clean, savepoint,
# indexing and schemacommit get none.
SNAPSHOT_ACTIONS = {"commit", "deltacommit", "replacecommit", "rollback", "restore"}

_V6_COMPLETED = re.compile(r"^(\d+)\.([a-z]+)$")  # <instant>.<action>; "<ts>.inflight" is a state
_V8_COMPLETED = re.compile(r"^(\d+)_(\d+)\.([a-z]+)$")  # <requested>_<completion>.<action>


def fixture_names():
    return sorted(p.stem for p in FIXTURES.glob("*.zip"))


def extract(name, dest):
    """Unzip fixture `name` into `dest` (its own dir: two zips may share the inner folder
    name) and return the absolute table dir, skipping macOS `__MACOSX` debris."""
    dest = pathlib.Path(dest)
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as z:
        z.extractall(dest)
    tables = [p for p in dest.iterdir() if (p / ".hoodie" / "hoodie.properties").is_file()]
    assert len(tables) == 1, f"{name}: expected one table folder, found {tables}"
    return tables[0].resolve()


def table_properties(table):
    props = {}
    for line in (pathlib.Path(table) / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


def table_version(table):
    return int(table_properties(table)["hoodie.table.version"])


def is_mor(table):
    return table_properties(table)["hoodie.table.type"] == "MERGE_ON_READ"


def completed_instants(table):
    """[(requested, action, completion or None)] of the table's own timeline, by requested time.
    v8/v9: `.hoodie/timeline/<requested>_<completion>.<action>`; v6: `.hoodie/<instant>.<action>`."""
    hoodie = pathlib.Path(table) / ".hoodie"
    out = []
    if table_version(table) >= 8:
        for f in (hoodie / "timeline").iterdir():
            m = _V8_COMPLETED.match(f.name)
            if m and f.is_file():
                out.append((m.group(1), m.group(3), m.group(2)))
    else:
        for f in hoodie.iterdir():
            m = _V6_COMPLETED.match(f.name)
            if m and f.is_file() and m.group(2) != "inflight":
                out.append((m.group(1), m.group(2), None))
    return sorted(out)


def snapshot_instants(table):
    """The completed instants that must each have exactly one Iceberg snapshot."""
    return [i for i in completed_instants(table) if i[1] in SNAPSHOT_ACTIONS]


def instant_ms(ts):
    """A Hudi instant time `yyyyMMddHHmmssSSS`, read as UTC, in epoch milliseconds."""
    t = dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    return int(t.timestamp()) * 1000 + int(ts[14:17] or 0)


def commit_time_ms(instant):
    """Snapshot time of a completed instant: completion time (v8/v9), else the instant time."""
    requested, _action, completion = instant
    return instant_ms(completion or requested)


def oracle_table(table, instant):
    """hudi-rs's rows (a pyarrow Table, meta columns included) as of requested time `instant`;
    MOR tables are read read-optimized (base files only), as xlake mirrors them."""
    import pyarrow as pa
    from hudi import HudiReadConfig, HudiReadOptions, HudiTable

    t = HudiTable(str(table))  # hudi-rs needs an absolute path
    opts = HudiReadOptions().with_as_of_timestamp(instant)
    if t.is_mor:
        opts = opts.with_hudi_option(HudiReadConfig.USE_READ_OPTIMIZED_MODE.value, "true")
    batches = t.read(opts)
    if not batches:
        return t.get_schema_with_meta_fields().empty_table()
    return pa.Table.from_batches(batches)


def read_schema(table):
    """The table's latest schema (pyarrow, without meta columns), as hudi-rs reads it."""
    from hudi import HudiTable

    return HudiTable(str(table)).get_schema()


def list_columns(schema):
    """Top-level columns holding a list anywhere inside."""
    import pyarrow as pa

    def walk(ty):
        if pa.types.is_list(ty) or pa.types.is_large_list(ty):
            return True
        if pa.types.is_struct(ty):
            return any(walk(ty.field(i).type) for i in range(ty.num_fields))
        if pa.types.is_map(ty):
            return walk(ty.key_type) or walk(ty.item_type)
        return False

    return [f.name for f in schema if walk(f.type)]


def main(workdir):
    for name in fixture_names():
        table = extract(name, pathlib.Path(workdir) / name)
        print(f"{name} (v{table_version(table)}, {'MOR' if is_mor(table) else 'COW'})")
        for instant in completed_instants(table):
            requested, action, _ = instant
            if action not in SNAPSHOT_ACTIONS:
                print(f"  {requested} {action:<13} (no snapshot)")
                continue
            try:
                got = oracle_table(table, requested)
                print(f"  {requested} {action:<13} {got.num_rows} rows at {commit_time_ms(instant)} ms")
            except Exception as e:  # noqa: BLE001 (report every failing instant, not only the first)
                print(f"  {requested} {action:<13} ORACLE ERROR {type(e).__name__}: {e}")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        main(sys.argv[1] if len(sys.argv) > 1 else d)
