"""Generate a deletion-vector-heavy Delta table, deterministically: version 0 adds F files
of R rows; each later version deletes rows from D of them through deletion vectors (each
data file removed and added again with its new vector, as Delta writes it), every vector
in its own `.bin` file (storage type `p`).

    python benches/gen_delta_dv.py <dir> --commits C --files F --dvs-per-commit D [--rows R]

Then time `xlake sync <dir>` (v2: one position-delete Parquet file per vector) against
`xlake sync <dir> --format-version 3` (vectors copied into one Puffin file per commit) on
two copies.
"""
import argparse
import json
import os
import pathlib
import random
import struct
import zlib

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
T0 = 1_700_000_000_000
MAGIC = bytes.fromhex("D1D33964")


def roaring64(positions):
    """Magic + portable 64-bit Roaring bitmap of positions < 65536 (one array container;
    at most 4096 positions)."""
    positions = sorted(set(positions))
    assert positions and len(positions) <= 4096 and positions[-1] < 65536
    # 32-bit Roaring, no run containers: cookie, container count, key/cardinality-1,
    # offsets, the array container.
    n = 1
    body = struct.pack("<II", 12346, n) + struct.pack("<HH", 0, len(positions) - 1)
    body += struct.pack("<I", 8 + 8 * n)
    body += b"".join(struct.pack("<H", p) for p in positions)
    return MAGIC + struct.pack("<Q", 1) + struct.pack("<I", 0) + body


def vector_file(path, positions):
    """A Delta deletion vector file holding one vector at offset 1; its size in bytes."""
    vector = roaring64(positions)
    data = b"\x01" + struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))
    path.write_bytes(data)
    return len(vector)


def generate(root, commits, files, dvs, rows, seed=7):
    rng = random.Random(seed)
    root = pathlib.Path(root)
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    src = root / "_bench_src.parquet"
    pq.write_table(pa.table({"id": list(range(rows))}), src)
    size = src.stat().st_size
    stats = json.dumps({"numRecords": rows, "minValues": {"id": 0}, "maxValues": {"id": rows - 1}, "nullCount": {"id": 0}})
    deleted = {}
    for version in range(commits):
        ts = T0 + version * 60_000
        actions = []
        if version == 0:
            actions.append({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                         "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}})
            actions.append({"metaData": {"id": "bench-dv", "format": {"provider": "parquet", "options": {}},
                                         "schemaString": json.dumps(SCHEMA), "partitionColumns": [],
                                         "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": T0}})
            for i in range(files):
                os.link(src, root / f"part-{i:06d}.parquet")
                actions.append({"add": {"path": f"part-{i:06d}.parquet", "partitionValues": {}, "size": size,
                                        "modificationTime": ts, "dataChange": True, "stats": stats}})
        else:
            for i in rng.sample(range(files), dvs):
                path = f"part-{i:06d}.parquet"
                old = deleted.get(i)
                new = set(old["rows"] if old else ()) | set(rng.sample(range(rows), 20))
                bin_path = root / f"dv-{version:06d}-{i:06d}.bin"
                dv = {"storageType": "p", "pathOrInlineDv": str(bin_path), "offset": 1,
                      "sizeInBytes": vector_file(bin_path, new), "cardinality": len(new)}
                remove = {"path": path, "deletionTimestamp": ts, "dataChange": True, "size": size}
                if old:
                    remove["deletionVector"] = old["dv"]
                actions.append({"remove": remove})
                actions.append({"add": {"path": path, "partitionValues": {}, "size": size, "modificationTime": ts,
                                        "dataChange": True, "stats": stats, "deletionVector": dv}})
                deleted[i] = {"rows": new, "dv": dv}
        actions.append({"commitInfo": {"timestamp": ts, "operation": "WRITE" if version == 0 else "DELETE"}})
        with open(log / f"{version:020d}.json", "w") as f:
            f.write("\n".join(json.dumps(a) for a in actions) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--dvs-per-commit", type=int, required=True)
    p.add_argument("--rows", type=int, default=4000)
    a = p.parse_args()
    generate(a.dir, a.commits, a.files, a.dvs_per_commit, a.rows)
