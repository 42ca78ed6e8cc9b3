"""The wheel: a fresh venv installs it and runs the README's Python quick start (pyiceberg
reads the result); the typed API returns the `--json` content and raises by exit code."""

from __future__ import annotations

import json
import pathlib
import pickle
import re
import shutil
import subprocess
import sys

import pytest
from tables import break_table, delta_table
from wheel_site import ROOT


def readme_quick_start() -> str:
    """The README's Python quick start: its first ```python block."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found, "README.md has no ```python block"
    return found.group(1)


def oldest_python() -> str:
    """CPython 3.9, the oldest the wheel supports, where the machine has it (on PATH or
    installed by pyenv), else this Python."""
    pyenv = sorted(pathlib.Path.home().glob(".pyenv/versions/3.9*/bin/python3.9"))
    for found in [shutil.which("python3.9"), *map(str, pyenv)]:
        works = found and subprocess.run([found, "-c", "import venv"], capture_output=True)
        if works and works.returncode == 0:
            return found
    return sys.executable


def test_fresh_venv_runs_the_readme_quick_start(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([oldest_python(), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-index",
            str(wheel),
        ],
        check=True,
    )
    version = subprocess.run(
        [str(venv / "bin" / "xlake"), "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("xlake "), version
    table = tmp_path / "hudi-demo"
    script = readme_quick_start().replace("/tmp/hudi-demo", str(table))
    run = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:2] == ["True", "[]"], run.stdout
    print(subprocess.run([str(python), "--version"], capture_output=True, text=True).stdout)

    from pyiceberg.table import StaticTable

    iceberg = StaticTable.from_metadata(str(table))
    assert len(iceberg.metadata.snapshots) == 12
    rows = iceberg.scan().to_arrow()
    assert rows.num_rows > 0 and "region" in rows.column_names


def test_sync_commit_check_inspect_return_the_json_content(xlake, tmp_path):
    table = delta_table(tmp_path / "t", rows=5)
    synced = xlake.sync(table)
    assert isinstance(synced, xlake.SyncResult)
    assert (synced.format, synced.source_commits, synced.already_mirrored) == ("DELTA", 1, 0)
    [snapshot] = synced.written
    assert (snapshot.commit, snapshot.action, snapshot.added, snapshot.version) == (
        "0",
        "WRITE",
        1,
        1,
    )

    committed = xlake.commit(table, version=0)
    assert (committed.commit, committed.written) == ("0", [])

    checked = xlake.check(table, deep=True)
    assert checked.consistent and checked.snapshots == 1 and checked.compared[0].source_files == 1
    raw = json.loads(
        subprocess.run(
            [xlake.find_xlake_bin(), "check", "--json", "--deep", str(table)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert (
        checked.missing == raw["missing"]
        and checked.compared[0].commit == raw["compared"][0]["commit"]
    )

    inspected = xlake.inspect(table)
    assert (inspected.format, inspected.iceberg.snapshots, inspected.iceberg.version) == (
        "DELTA",
        1,
        1,
    )
    assert "delta" in inspected.source


def test_the_demo_table_mirrored_to_delta_reads_in_deltalake_as_in_pyiceberg(xlake, tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    from pyiceberg.table import StaticTable

    table = xlake.demo(tmp_path / "demo")  # a Hudi table, mirrored as Iceberg
    synced = xlake.sync(table, target="delta")
    assert isinstance(synced, xlake.SyncResult)
    assert (synced.format, synced.source_commits) == ("HUDI", 12)
    assert [s.version for s in synced.written] == list(range(12))
    assert xlake.sync(table, target="delta").written == []
    assert xlake.commit(table, instant=synced.written[-1].commit, target="delta").written == []
    checked = xlake.check(table, deep=True, target="delta")
    assert checked.consistent and checked.snapshots == 12
    inspected = xlake.inspect(table, target="delta")
    assert (inspected.format, inspected.iceberg.version) == ("HUDI", 11)
    assert (pathlib.Path(table) / "_delta_log" / f"{11:020}.json").exists()

    delta = DeltaTable(table)
    rows = pa.table(QueryBuilder().register("t", delta).execute("select * from t").read_all())
    newest = max(
        (pathlib.Path(table) / "metadata").glob("v*.metadata.json"),
        key=lambda p: int(p.name[1:].split(".")[0]),
    )
    iceberg = StaticTable.from_metadata(str(newest)).scan().to_arrow()
    key = ["txn_id", "amount", "region"]
    assert sorted(rows.select(key).to_pylist(), key=str) == sorted(
        iceberg.select(key).to_pylist(), key=str
    )
    assert rows.num_rows == iceberg.num_rows > 0


def test_errors_follow_the_exit_codes(xlake, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(xlake.RefusedInput) as refused:
        xlake.sync(empty)
    assert refused.value.exit_code == 2
    assert "not a Hudi, Delta or Iceberg table" in refused.value.message

    broken = delta_table(tmp_path / "broken")
    break_table(broken)
    with pytest.raises(xlake.Failed) as failed:
        xlake.sync(broken)
    assert failed.value.exit_code == 1 and "00000000000000000000.json" in str(failed.value)
    assert not (broken / "metadata").exists()

    behind = delta_table(tmp_path / "behind")
    xlake.sync(behind)
    (behind / "_delta_log" / f"{1:020}.json").write_text(
        json.dumps({"commitInfo": {"timestamp": 1_700_000_001_000, "operation": "WRITE"}}) + "\n"
    )
    with pytest.raises(xlake.Violations) as violations:
        xlake.check(behind)
    assert violations.value.result.missing == ["1"] and not violations.value.result.consistent
    assert xlake.check(behind, raise_on_violations=False).lag_commits == 1
    assert xlake.check(behind, allowed_lag=1).consistent

    (behind / "metadata" / "v1.metadata.json").write_text("{ not json")
    with pytest.raises(xlake.CannotCheck) as cannot:
        xlake.check(behind)
    assert cannot.value.exit_code == 2

    for error in (refused.value, failed.value, violations.value, cannot.value):
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), copy.message, copy.exit_code) == (
            type(error),
            error.message,
            error.exit_code,
        )
    assert pickle.loads(pickle.dumps(violations.value)).result == violations.value.result


def test_try_sync_reports_instead_of_raising(xlake, tmp_path):
    good = delta_table(tmp_path / "good")
    outcome = xlake.try_sync(str(good))
    assert outcome.ok and outcome.result.written[0].commit == "0"
    missing = xlake.try_sync(str(tmp_path / "nowhere"))
    assert (missing.ok, missing.kind, missing.exit_code) == (False, "RefusedInput", 2)
    assert "no such folder" in missing.error


def test_python_m_xlake_is_the_binary(site, tmp_path):
    from wheel_site import env_with

    run = subprocess.run(
        [sys.executable, "-m", "xlake", "sync", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env_with(site),
    )
    assert run.returncode == 2 and "not a Hudi, Delta or Iceberg table" in run.stderr
    assert pathlib.Path(site / "bin" / "xlake").is_file()
