"""Finding and running the `xlake` binary the wheel installs (as ruff's `find_ruff_bin`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence

EXE = "xlake" + (sysconfig.get_config_var("EXE") or "")


def find_xlake_bin() -> str:
    """The binary installed with this package: a `pip install --target` folder's `bin/`,
    the environment's scripts folder, the user's (`pip install --user`), else PATH."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [os.path.join(package_root, "bin", EXE)]
    candidates.append(os.path.join(sysconfig.get_path("scripts"), EXE))
    if sys.version_info >= (3, 10):
        user = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        user = "nt_user"
    else:
        user = "posix_user"
    candidates.append(os.path.join(sysconfig.get_path("scripts", scheme=user), EXE))
    for path in candidates:
        if os.path.isfile(path):
            return path
    found = shutil.which(EXE)
    if found:
        return found
    raise FileNotFoundError(
        f"the xlake binary was not found (looked at {', '.join(candidates)} and PATH)"
    )


def run(
    args: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the binary with `args`; stdout and stderr captured as text."""
    return subprocess.run(
        [find_xlake_bin(), *args],
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        check=False,
    )
