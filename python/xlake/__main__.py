"""`python -m xlake ...`: the binary, with the same arguments and exit code."""

from __future__ import annotations

import os
import subprocess
import sys

from ._binary import find_xlake_bin


def main() -> None:
    binary = find_xlake_bin()
    if os.name == "posix":
        os.execv(binary, [binary, *sys.argv[1:]])
    sys.exit(subprocess.call([binary, *sys.argv[1:]]))


if __name__ == "__main__":
    main()
