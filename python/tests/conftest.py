"""The wheel under test: XLAKE_WHEEL (built by `.ci/run` with maturin), else the newest
wheel in target/wheels/. `site` is that wheel installed with `pip install --target` (no
network, no dependencies), put first on sys.path: these tests use the packaged binary and
package, never the source tree's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from wheel_site import ROOT  # noqa: E402


def wheel_path() -> pathlib.Path:
    given = os.environ.get("XLAKE_WHEEL")
    if given:
        return pathlib.Path(given)
    built = sorted(
        (ROOT / "target" / "wheels").glob("xlake-*.whl"), key=lambda p: p.stat().st_mtime
    )
    if not built:
        pytest.fail(
            "no wheel: build one with `maturin build --profile dev -o ../target/wheels` in python/"
        )
    return built[-1]


@pytest.fixture(scope="session")
def wheel() -> pathlib.Path:
    return wheel_path()


@pytest.fixture(scope="session")
def site(wheel, tmp_path_factory) -> pathlib.Path:
    """The wheel installed into a folder of its own, first on sys.path."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    sys.path.insert(0, str(target))
    for name in [m for m in sys.modules if m == "xlake" or m.startswith("xlake.")]:
        del sys.modules[name]
    return target


@pytest.fixture(scope="session")
def xlake(site):
    """The installed package."""
    import xlake

    assert pathlib.Path(xlake.__file__).is_relative_to(site), xlake.__file__
    return xlake
