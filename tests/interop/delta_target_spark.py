"""Spark with delta-spark reading Delta versions, in its own process (one JVM holds one
Spark context, and the suite's session-wide one is Iceberg's). Reads every
`[table, version]` of the JSON list in argv[1] and writes the rows of each, normalised
(rows.normalize), as a JSON list to argv[2]."""
import json
import pathlib
import sys

import real_writers
from rows import normalize

DELTA_JARS = ["delta-spark-3.3", "delta-storage-3.3"]


def main(requests, out):
    s = real_writers.session(DELTA_JARS, real_writers.DELTA_SESSION)
    got = []
    for table, version in json.loads(pathlib.Path(requests).read_text()):
        df = real_writers.delta_read(s, table, version)
        got.append([{k: normalize(v) for k, v in r.asDict(recursive=True).items()} for r in df.collect()])
    s.stop()
    pathlib.Path(out).write_text(json.dumps(got))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
