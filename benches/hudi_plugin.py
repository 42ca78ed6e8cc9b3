"""The latency xlake's Hudi table format adds per commit: one Spark session (Hudi 1.2's bundle
and the plugin jar, `.ci/plugin`), two copy-on-write tables written in turn, the same upserts
to each: `native` (Hudi's own format) and `xlake` (`hoodie.table.format=xlake`, each commit
mirrored by the xlake binary in the commit path). Prints each table's median write time and
their difference; the first write of each (table creation, JIT warm-up) is left out.

    XLAKE_BIN=target/release/xlake python benches/hudi_plugin.py [rounds]
"""
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "interop"))

import plugin_writer
import real_writers as rw


def main(rounds=15):
    s = plugin_writer.session(with_plugin=True)
    base = pathlib.Path(tempfile.mkdtemp(prefix="xlake-plugin-bench-"))
    writers = {
        "native": rw.hudi_writer(s, str(base / "native"), lambda: None, **{"hoodie.table.name": "bench_native"}),
        "xlake": rw.hudi_writer(s, str(base / "xlake"), lambda: None,
                                **{"hoodie.table.name": "bench_xlake"}, **plugin_writer.FORMAT),
    }
    times = {name: [] for name in writers}
    for round_ in range(rounds + 1):
        for name, write in writers.items():
            df = rw.hudi_rows(s, round_ * 7 % 40, 20, round_ + 1)
            start = time.monotonic()
            write(df, "insert" if round_ == 0 else "upsert", mode="overwrite" if round_ == 0 else "append")
            if round_:
                times[name].append(time.monotonic() - start)
    s.stop()
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, t in times.items():
        print(f"{name}: median {medians[name]:.0f} ms over {len(t)} upserts "
              f"(min {min(t) * 1000:.0f}, max {max(t) * 1000:.0f})")
    print(f"added by the xlake format: {medians['xlake'] - medians['native']:.0f} ms per commit (median difference)")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:2]))
