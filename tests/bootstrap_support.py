"""Running the CI bootstrap (bootstrap/) under the mock engine on a configuration and the stack
records of a directory (the records the bootstrap derives each environment's stacks and team
projects from: bootstrap/from_policy.py), e.g. the bootstrap as shipped with the shipped stacks' records."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from config.stack_files import PROJECT_DIR
from tools.mock_engine import ProgramRun, run_program

BOOTSTRAP_MAIN = PROJECT_DIR / "bootstrap" / "__main__.py"
BOOTSTRAP_PROJECT = "gpu-platform-bootstrap"


@contextlib.contextmanager
def reading_records(records_dir: Path) -> Iterator[None]:
    """The bootstrap reads its stack records from `records_dir` for a while."""
    import from_policy

    saved = from_policy.RECORDS_DIR
    from_policy.RECORDS_DIR = records_dir
    try:
        yield
    finally:
        from_policy.RECORDS_DIR = saved


def run_shipped_bootstrap(values: dict[str, Any], records_dir: Path) -> ProgramRun:
    with reading_records(records_dir):
        return run_program(values, stack="ci", main=BOOTSTRAP_MAIN, project=BOOTSTRAP_PROJECT)
