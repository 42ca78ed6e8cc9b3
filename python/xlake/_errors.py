"""The exceptions: one kind per exit code of the binary (docs/cli.md, "Exit codes").

- `RefusedInput`: exit 2 (not `check`): bad options, a location that is not a table;
  nothing was read or written.
- `Failed`: exit 1 (not `check`): the command ran and failed (storage failed or refused,
  a commit could not be mirrored); metadata and catalog are as they were.
- `CannotCheck`: `check` exit 2: could not check (storage, a table that cannot be read).
- `Violations`: `check` exit 1: violations found; `.result` is the whole report.

All derive from `XlakeError`, whose `message` is the binary's one-line error (naming the
table, commit and file) and `exit_code` its exit code. They pickle (Spark sends them back
from executors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._results import CheckResult


class XlakeError(Exception):
    """A command that did not succeed; `exit_code` as the binary returned it."""

    def __init__(
        self, message: str, command: str = "", exit_code: int = 1, stderr: str = ""
    ) -> None:
        super().__init__(message, command, exit_code, stderr)
        self.message = message
        self.command = command
        self.exit_code = exit_code
        self.stderr = stderr

    def __str__(self) -> str:
        return self.message

    @property
    def kind(self) -> str:
        """The exception's class name: `RefusedInput`, `Failed`, `CannotCheck`, ..."""
        return type(self).__name__


class RefusedInput(XlakeError):
    """Exit 2: the command could not start (bad options, not a table); nothing was touched."""


class Failed(XlakeError):
    """Exit 1: the command ran and failed (storage, a commit that cannot be mirrored)."""


class CannotCheck(XlakeError):
    """`check` exit 2: the table could not be checked."""


class Violations(XlakeError):
    """`check` exit 1: the mirror is wrong or behind; `result` says how."""

    def __init__(
        self,
        message: str,
        command: str = "check",
        exit_code: int = 1,
        stderr: str = "",
        result: CheckResult | None = None,
    ) -> None:
        super().__init__(message, command, exit_code, stderr)
        self.args = (message, command, exit_code, stderr, result)
        self.result = result
