"""The typed results: the same content as the binary's `--json` output, field for field
(`sync --json`, `commit --json`, `check --json`, `inspect --json`; docs/cli.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot a sync wrote, and the source commit it mirrors."""

    commit: str
    action: str
    commit_time_ms: int
    added: int
    removed: int
    snapshot_id: int
    version: int

    @classmethod
    def from_json(cls, d: Json) -> Snapshot:
        return cls(
            commit=d["commit"],
            action=d["action"],
            commit_time_ms=d["commit_time_ms"],
            added=d["added"],
            removed=d["removed"],
            snapshot_id=d["snapshot_id"],
            version=d["version"],
        )


@dataclass(frozen=True)
class CatalogUpdate:
    """What a sync did to the catalog entry: `registered`, `moved` (from `from_location`) or
    `current` (it already pointed there)."""

    action: str
    location: str
    from_location: str | None = None

    @classmethod
    def from_json(cls, d: Json) -> CatalogUpdate:
        return cls(action=d["action"], location=d["location"], from_location=d.get("from"))


@dataclass(frozen=True)
class Rebuilt:
    """`sync(rebuild=True)`: the old history, set aside (moved, never deleted)."""

    old_locations: list[str]
    set_aside_in: str
    files: int

    @classmethod
    def from_json(cls, d: Json) -> Rebuilt:
        return cls(
            old_locations=list(d["old_locations"]),
            set_aside_in=d["set_aside_in"],
            files=d["files"],
        )


@dataclass(frozen=True)
class SyncResult:
    """What `sync` (or `commit`, with `commit` set) did."""

    table: str
    format: str
    source_commits: int
    already_mirrored: int
    written: list[Snapshot]
    notes: list[str]
    degraded: list[str]
    created_empty: int | None = None
    catalog: CatalogUpdate | None = None
    rebuilt: Rebuilt | None = None
    commit: str | None = None

    @classmethod
    def from_json(cls, d: Json) -> SyncResult:
        return cls(
            table=d["table"],
            format=d["format"],
            source_commits=d["source_commits"],
            already_mirrored=d["already_mirrored"],
            written=[Snapshot.from_json(w) for w in d["written"]],
            notes=list(d["notes"]),
            degraded=list(d["degraded"]),
            created_empty=d.get("created_empty"),
            catalog=CatalogUpdate.from_json(d["catalog"]) if d.get("catalog") else None,
            rebuilt=Rebuilt.from_json(d["rebuilt"]) if d.get("rebuilt") else None,
            commit=d.get("commit"),
        )


@dataclass(frozen=True)
class UnknownCommit:
    """A snapshot naming a source commit the source does not hold as completed."""

    snapshot_id: int
    commit: str


@dataclass(frozen=True)
class UndoneCommit:
    """A snapshot naming a commit a later rollback or restore undid: history, not a violation."""

    snapshot_id: int
    commit: str
    undone_by: str


@dataclass(frozen=True)
class MissingList:
    """A snapshot whose manifest list is gone."""

    snapshot_id: int
    manifest_list: str


@dataclass(frozen=True)
class Comparison:
    """One snapshot a deep check compared with the source's live files."""

    snapshot_id: int
    commit: str
    source_files: int
    snapshot_files: int
    differences: list[str]


@dataclass(frozen=True)
class CatalogState:
    """With a catalog: where its entry points, and what is wrong with it."""

    catalog: str
    table: str
    pointer: str | None
    expected: str | None
    problem: str | None


@dataclass(frozen=True)
class CheckResult:
    """What `check` found; `consistent` is what the exit code says (docs/checker.md)."""

    table: str
    format: str
    source_commits: int
    snapshots: int
    before_mirroring: int
    missing: list[str]
    unknown: list[UnknownCommit]
    duplicates: list[str]
    missing_manifest_lists: list[MissingList]
    out_of_order: list[str]
    lag_commits: int
    lag_ms: int
    file_differences: list[str]
    deep: bool
    compared: list[Comparison]
    allowed_lag: int
    consistent: bool
    relocated_from: str | None = None
    catalog: CatalogState | None = None
    undone: list[UndoneCommit] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Json) -> CheckResult:
        return cls(
            table=d["table"],
            format=d["format"],
            source_commits=d["source_commits"],
            snapshots=d["snapshots"],
            before_mirroring=d["before_mirroring"],
            missing=list(d["missing"]),
            unknown=[UnknownCommit(**u) for u in d["unknown"]],
            duplicates=list(d["duplicates"]),
            missing_manifest_lists=[MissingList(**m) for m in d["missing_manifest_lists"]],
            out_of_order=list(d["out_of_order"]),
            lag_commits=d["lag_commits"],
            lag_ms=d["lag_ms"],
            file_differences=list(d["file_differences"]),
            deep=d["deep"],
            compared=[Comparison(**c) for c in d["compared"]],
            allowed_lag=d["allowed_lag"],
            consistent=d["consistent"],
            relocated_from=d.get("relocated_from"),
            catalog=CatalogState(**d["catalog"]) if d.get("catalog") else None,
            undone=[UndoneCommit(**u) for u in d.get("undone", [])],
        )


@dataclass(frozen=True)
class Files:
    """Files and bytes of one kind of metadata."""

    files: int
    bytes: int


@dataclass(frozen=True)
class IcebergHealth:
    """The Iceberg side of `inspect`."""

    metadata: Files
    version: int | None
    current_metadata_bytes: int
    snapshots: int
    manifests: int
    orphan_files: int
    relocated_from: list[str]
    not_written_by_xlake: list[str]
    partitioning: list[str]

    @classmethod
    def from_json(cls, d: Json) -> IcebergHealth:
        return cls(
            metadata=Files(**d["metadata"]),
            version=d.get("version"),
            current_metadata_bytes=d["current_metadata_bytes"],
            snapshots=d["snapshots"],
            manifests=d["manifests"],
            orphan_files=d["orphan_files"],
            relocated_from=list(d["relocated_from"]),
            not_written_by_xlake=list(d["not_written_by_xlake"]),
            partitioning=list(d["partitioning"]),
        )


@dataclass(frozen=True)
class InspectResult:
    """The health report. `source` is the source side as the binary prints it under the
    format's lower-case name (`hudi`, `delta`, `parquet`): its keys differ per format."""

    table: str
    format: str
    iceberg: IcebergHealth
    degraded: list[str]
    source: Json = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Json) -> InspectResult:
        known = {"table", "format", "iceberg", "degraded"}
        return cls(
            table=d["table"],
            format=d["format"],
            iceberg=IcebergHealth.from_json(d["iceberg"]),
            degraded=list(d["degraded"]),
            source={k: v for k, v in d.items() if k not in known},
        )
