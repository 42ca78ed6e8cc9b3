#!/usr/bin/env python3
"""Build the fuzz seed corpora from the test fixtures (tests/data) and from the Iceberg
metadata xlake writes for them. Run once; the corpora are committed, and libFuzzer adds
what it finds. Usage: fuzz/seed_corpora.py [path/to/xlake]"""
import hashlib, json, os, subprocess, sys, tarfile, tempfile, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
XLAKE = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/xlake")


def seed(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tables = []
        for f in sorted((ROOT / "tests/data/hudi").glob("*.zip")):
            zipfile.ZipFile(f).extractall(tmp / f.stem)
            tables += [p.parent.parent for p in (tmp / f.stem).rglob(".hoodie/hoodie.properties")]
        for f in sorted((ROOT / "tests/data/delta").glob("*.tar.gz")):
            with tarfile.open(f) as t:
                t.extractall(tmp / f.name[:-7], filter="data")
            tables += [p.parent for p in (tmp / f.name[:-7]).rglob("_delta_log")]
        for table in tables:
            hoodie = table / ".hoodie"
            if hoodie.is_dir():
                seed("hudi_properties", (hoodie / "hoodie.properties").read_bytes())
                for p in hoodie.rglob("*"):
                    if p.is_file() and "metadata" not in p.relative_to(hoodie).parts:
                        seed("hudi_instant_name", p.name)
                        if p.stat().st_size and p.name[:1].isdigit():
                            seed("hudi_commit_metadata", p.read_bytes())
                for p in table.rglob("*.parquet"):
                    rel = p.parent.relative_to(table)
                    if ".hoodie" not in rel.parts:
                        seed("hudi_partition_path", str(rel) if str(rel) != "." else "")
                        seed("hudi_instant_name", p.name)
            else:
                for p in sorted((table / "_delta_log").glob("*.json")):
                    seed("delta_actions", p.read_bytes())
                    for line in p.read_text().splitlines():
                        add = json.loads(line).get("add") if line.strip() else None
                        if add and add.get("stats"):
                            seed("delta_stats", add["stats"])
                        if add and add.get("deletionVector"):
                            dv = add["deletionVector"]
                            if dv.get("storageType") == "i":
                                seed("delta_deletion_vector", dv["pathOrInlineDv"])
                for p in table.rglob("deletion_vector_*.bin"):
                    raw = p.read_bytes()
                    # Each vector: 4-byte size, the vector, 4-byte CRC; seed the vectors.
                    at = 1
                    while at + 4 <= len(raw):
                        size = int.from_bytes(raw[at:at + 4], "big")
                        if size == 0 or at + 4 + size > len(raw):
                            break
                        seed("delta_deletion_vector", raw[at + 4:at + 4 + size])
                        at += 8 + size
            done = subprocess.run([XLAKE, "sync", str(table)], capture_output=True)
            if done.returncode == 0:
                for p in (table / "metadata").glob("*.metadata.json"):
                    seed("iceberg_metadata", p.read_bytes())
                hint = table / "metadata/version-hint.text"
                if hint.exists():
                    seed("iceberg_metadata", hint.read_bytes())


if __name__ == "__main__":
    main()
