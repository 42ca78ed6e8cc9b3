"""Run the xlake command line: `cargo run --quiet --` from the project root, or the binary
named by XLAKE_BIN (a prebuilt one, for CI)."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def command():
    """The command line that runs xlake, before its arguments."""
    binary = os.environ.get("XLAKE_BIN")
    return [binary] if binary else ["cargo", "run", "--quiet", "--"]


def xlake(*args, env=None):
    """Run xlake; `env` replaces the environment (never mutate os.environ for one call:
    other threads may be starting processes meanwhile)."""
    return subprocess.run([*command(), *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=env, check=False)


def sync(table, flags=()):
    """`xlake sync <table> <flags...>`; the CompletedProcess, stdout and stderr captured."""
    return xlake("sync", table, *flags)
