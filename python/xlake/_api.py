"""The typed API: each function runs the bundled `xlake` binary with `--json` and turns its
output into a result, or its exit code into an exception (`_errors`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Union

from ._binary import run
from ._errors import CannotCheck, Failed, RefusedInput, Violations, XlakeError
from ._results import CheckResult, InspectResult, SyncResult

Location = Union[str, "os.PathLike[str]"]


def _mirror_flags(
    catalog: str | None,
    catalog_table: str | None,
    catalog_name: str | None,
    format_version: int | None,
    mor_read_optimized: bool,
    single_writer: bool,
    allow: Iterable[str],
) -> list[str]:
    flags = _catalog_flags(catalog, catalog_table, catalog_name)
    if format_version is not None:
        flags += ["--format-version", str(format_version)]
    flags += ["--mor-read-optimized"] if mor_read_optimized else []
    flags += ["--single-writer"] if single_writer else []
    for prefix in allow:
        flags += ["--allow", prefix]
    return flags


def _catalog_flags(
    catalog: str | None, catalog_table: str | None, catalog_name: str | None
) -> list[str]:
    flags = []
    for flag, value in (
        ("--catalog", catalog),
        ("--catalog-table", catalog_table),
        ("--catalog-name", catalog_name),
    ):
        if value is not None:
            flags += [flag, value]
    return flags


def _message(command: str, proc: subprocess.CompletedProcess[str]) -> str:
    """The binary's one-line error (`xlake: <what>`), without the prefix."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("xlake: "):
            return line[len("xlake: ") :]
    # The command line's own refusals (clap): `error: <what>`, then usage and a hint.
    for line in lines:
        if line.startswith("error: "):
            return line[len("error: ") :]
    return lines[-1] if lines else f"xlake {command} exited with code {proc.returncode}"


def _error(command: str, proc: subprocess.CompletedProcess[str]) -> XlakeError:
    message = _message(command, proc)
    kinds = {2: RefusedInput, 1: Failed}
    if command == "check":
        kinds = {2: CannotCheck}
    kind = kinds.get(proc.returncode, XlakeError)
    return kind(message, command, proc.returncode, proc.stderr)


def _json(command: str, args: list[str], env: Mapping[str, str] | None) -> dict:
    proc = run([command, "--json", *args], env)
    if proc.returncode != 0:
        raise _error(command, proc)
    return json.loads(proc.stdout)


def sync(
    location: Location,
    *,
    catalog: str | None = None,
    catalog_table: str | None = None,
    catalog_name: str | None = None,
    format_version: int | None = None,
    format: str | None = None,
    from_latest: bool = False,
    skip_file_check: bool = False,
    rebuild: bool = False,
    mor_read_optimized: bool = False,
    single_writer: bool = False,
    allow: Iterable[str] = (),
    target: str = "iceberg",
    env: Mapping[str, str] | None = None,
) -> SyncResult:
    """`xlake sync`: mirror every pending completed commit, one snapshot each (and point
    `catalog`'s entry `catalog_table` at the new version). `target` is the format mirrored
    into, `"iceberg"` (`metadata/`) or `"delta"` (`_delta_log/`): the CLI's `--target`.
    `env` replaces the environment (storage credentials); by default the process's."""
    flags = ["--target", target]
    flags += _mirror_flags(
        catalog,
        catalog_table,
        catalog_name,
        format_version,
        mor_read_optimized,
        single_writer,
        allow,
    )
    flags += ["--format", format] if format is not None else []
    flags += ["--from-latest"] if from_latest else []
    flags += ["--skip-file-check"] if skip_file_check else []
    flags += ["--rebuild"] if rebuild else []
    return SyncResult.from_json(_json("sync", [*flags, "--", os.fspath(location)], env))


def commit(
    location: Location,
    *,
    instant: str | None = None,
    version: int | None = None,
    catalog: str | None = None,
    catalog_table: str | None = None,
    catalog_name: str | None = None,
    format_version: int | None = None,
    mor_read_optimized: bool = False,
    single_writer: bool = False,
    allow: Iterable[str] = (),
    target: str = "iceberg",
    env: Mapping[str, str] | None = None,
) -> SyncResult:
    """`xlake commit`, the last step of a write job: mirror everything pending up to the Hudi
    `instant` or Delta `version` just written into `target` (`"iceberg"` or `"delta"`);
    returns only once that commit is mirrored."""
    if (instant is None) == (version is None):
        raise RefusedInput(
            "commit: give exactly one of instant= (Hudi) or version= (Delta)",
            "commit",
            2,
        )
    flags = ["--instant", instant] if instant is not None else ["--version", str(version)]
    flags += ["--target", target]
    flags += _mirror_flags(
        catalog,
        catalog_table,
        catalog_name,
        format_version,
        mor_read_optimized,
        single_writer,
        allow,
    )
    return SyncResult.from_json(_json("commit", [*flags, "--", os.fspath(location)], env))


def check(
    location: Location,
    *,
    deep: bool = False,
    all: bool = False,
    allowed_lag: int = 0,
    catalog: str | None = None,
    catalog_table: str | None = None,
    catalog_name: str | None = None,
    mor_read_optimized: bool = False,
    raise_on_violations: bool = True,
    target: str = "iceberg",
    env: Mapping[str, str] | None = None,
) -> CheckResult:
    """`xlake check`: one snapshot (or Delta version, with `target="delta"`) per completed
    source commit, in order (with `deep`, the same files). Violations raise `Violations`
    (its `result` is the report) unless `raise_on_violations=False`; a table that cannot be
    checked raises `CannotCheck`."""
    flags = ["--target", target]
    flags += ["--deep"] if deep else []
    flags += ["--all"] if all else []
    flags += ["--allowed-lag", str(allowed_lag)]
    flags += _catalog_flags(catalog, catalog_table, catalog_name)
    flags += ["--mor-read-optimized"] if mor_read_optimized else []
    proc = run(["check", "--json", *flags, "--", os.fspath(location)], env)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise _error("check", proc)
    result = CheckResult.from_json(json.loads(proc.stdout))
    if proc.returncode == 1 and raise_on_violations:
        raise Violations(
            f"{result.table}: not consistent (see .result)",
            "check",
            1,
            proc.stderr,
            result,
        )
    return result


def inspect(
    location: Location,
    *,
    mor_read_optimized: bool = False,
    target: str = "iceberg",
    env: Mapping[str, str] | None = None,
) -> InspectResult:
    """`xlake inspect`: the metadata each format keeps, side by side, and anything mirrored
    in a degraded way. With `target="delta"`, the mirror's part (`.iceberg`, named as
    for the default target) describes the Delta log."""
    flags = ["--target", target]
    flags += ["--mor-read-optimized"] if mor_read_optimized else []
    return InspectResult.from_json(_json("inspect", [*flags, "--", os.fspath(location)], env))


def demo(directory: Location) -> str:
    """`xlake demo`: unpack the bundled Hudi table (12 instants) into a new or empty folder
    and mirror it; returns the table's absolute location."""
    proc = run(["demo", "--", os.fspath(directory)])
    if proc.returncode != 0:
        raise _error("demo", proc)
    return os.path.abspath(os.fspath(directory))


@dataclass(frozen=True)
class SyncOutcome:
    """One table's sync in a fleet: `result` when it succeeded, else the error's `kind`
    (the exception's class name), `exit_code` and one-line `error`."""

    location: str
    result: SyncResult | None
    kind: str | None
    error: str | None
    exit_code: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.result is not None


def try_sync(location: Location, **options: object) -> SyncOutcome:
    """`sync`, never raising for the table's own failure: for fleets
    (`rdd.map(xlake.try_sync)`), where one table's failure must not stop the others."""
    started = time.monotonic()
    try:
        result = sync(location, **options)  # type: ignore[arg-type]
    except XlakeError as e:
        return SyncOutcome(
            os.fspath(location),
            None,
            e.kind,
            e.message,
            e.exit_code,
            time.monotonic() - started,
        )
    return SyncOutcome(os.fspath(location), result, None, None, 0, time.monotonic() - started)
