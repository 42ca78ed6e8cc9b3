"""What the tests share besides fixtures (a module of its own: `conftest` is a name the
interop suite's conftest.py also has, in the same pytest run)."""

from __future__ import annotations

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent


def env_with(site: pathlib.Path) -> dict:
    """This process's environment, with the installed wheel on PYTHONPATH (for scripts and
    for Spark's Python workers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(HERE), env.get("PYTHONPATH", "")]).strip(
        os.pathsep
    )
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env
