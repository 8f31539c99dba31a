"""Running a target of the project's Makefile for real, with a stand-in for the program: what the
program would receive (its arguments, one per element) and whatever else the recipe did (files it
created), for tests of what a make variable becomes on its way (tests/test_makefile.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from config.stack_files import PROJECT_DIR

# Stands in for .venv/bin/python: records its arguments and the variables of its environment that
# the program reads (ALLOW_DESTROY: tools/plan.py), runs nothing.
PROGRAM_ENVIRONMENT = ("ALLOW_DESTROY",)
_RECORDER = f"""#!{sys.executable}
import json, os, sys
with open({{out!r}}, "w") as f:
    json.dump({{{{"argv": sys.argv[1:], "environment": {{{{k: os.environ[k] for k in {PROGRAM_ENVIRONMENT!r} if k in os.environ}}}}}}}}, f)
"""


@dataclass(frozen=True)
class MakeRun:
    arguments: list[str] | None  # what the program got (None: the recipe never started it)
    environment: dict[str, str] | None  # the program's variables of PROGRAM_ENVIRONMENT it got
    created: set[str]  # files in the directory make ran in, beyond the ones this put there
    returncode: int
    output: str


def run_make(directory: Path, target: str, *variables: str, environment: dict[str, str] | None = None) -> MakeRun:
    """`make <target> <variables>` with the project's Makefile in `directory` (a fresh temporary
    one), its program replaced by the recorder and its .venv taken as installed."""
    shutil.copy(PROJECT_DIR / "Makefile", directory / "Makefile")
    for name in ("requirements.txt", "requirements-dev.txt", "constraints.txt"):
        (directory / name).write_text("")
    (directory / "bin").mkdir()
    recorded = directory / "arguments.json"
    recorder = directory / "bin" / "python"
    recorder.write_text(_RECORDER.format(out=str(recorded)))
    recorder.chmod(0o755)
    runtime_stamp, stamp = directory / "installed-runtime", directory / "installed"
    runtime_stamp.write_text("")
    stamp.write_text("")  # both newer than the requirement files: nothing to install
    before = {p.name for p in directory.iterdir()}
    env = {"PATH": "/usr/bin:/bin", **(environment or {})}
    result = subprocess.run(
        ["make", "--no-print-directory", target, "BIN=bin", f"RUNTIME_STAMP={runtime_stamp.name}", f"STAMP={stamp.name}", *variables],
        cwd=directory,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    got = json.loads(recorded.read_text()) if recorded.exists() else {"argv": None, "environment": None}
    created = {p.name for p in directory.iterdir()} - before - {recorded.name}
    return MakeRun(got["argv"], got["environment"], created, result.returncode, result.stdout + result.stderr)
