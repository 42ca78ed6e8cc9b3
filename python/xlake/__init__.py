"""xlake: mirror Hudi and Delta Lake commits as Apache Iceberg snapshots, in place.

The wheel carries the `xlake` binary (the command line) and this typed API over it:
`sync`, `commit`, `check`, `inspect` (and `demo`, `try_sync`) return dataclasses with the
content of the command's `--json` output and raise an `XlakeError` subclass that follows
its exit code. See docs/python.md.
"""

from ._api import SyncOutcome, check, commit, demo, inspect, sync, try_sync
from ._binary import find_xlake_bin
from ._errors import CannotCheck, Failed, RefusedInput, Violations, XlakeError
from ._results import (
    CatalogState,
    CatalogUpdate,
    CheckResult,
    Comparison,
    Files,
    IcebergHealth,
    InspectResult,
    MissingList,
    Rebuilt,
    Snapshot,
    SyncResult,
    UndoneCommit,
    UnknownCommit,
)

__all__ = [
    "CannotCheck",
    "CatalogState",
    "CatalogUpdate",
    "CheckResult",
    "Comparison",
    "Failed",
    "Files",
    "IcebergHealth",
    "InspectResult",
    "MissingList",
    "Rebuilt",
    "RefusedInput",
    "Snapshot",
    "SyncOutcome",
    "SyncResult",
    "UndoneCommit",
    "UnknownCommit",
    "Violations",
    "XlakeError",
    "check",
    "commit",
    "demo",
    "find_xlake_bin",
    "inspect",
    "sync",
    "try_sync",
]
