"""Which tests read this checkout's own stack files (`Pulumi.<stack>.yaml`, `bootstrap/Pulumi.ci.yaml`):
the user's, which an adopter replaces or deletes (docs/development.md "Tests and your stack
files"). Every such test must hold for any stack files, and runs again in tests/test_added_teams.py's
copy, whose stack files are not ours; a test that reads them and is not run there is caught (`unchecked`), so a new test of
exact figures cannot quietly depend on the examples again.

Recorded where every stack file is read (config/stack_files.py `_load_file`), per test, from its
setup (its fixtures) to its teardown; `checkout_is_as_shipped`, which only compares, does not count.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from config import stack_files
from config.stack_files import PROJECT_DIR

READS: dict[str, set[str]] = {}  # test id (without parameters) -> the checkout's stack files it read
current: str | None = None
_exempt = 0


def _is_checkout_stack_file(path: Path) -> bool:
    return _is_checkout_stack_path(str(path))


@functools.lru_cache(maxsize=None)  # every stack file read goes through here: resolve each path once
def _is_checkout_stack_path(text: str) -> bool:
    path = Path(text).resolve()
    return (path.parent == PROJECT_DIR and path.name != "Pulumi.yaml" and bool(re.fullmatch(r"Pulumi\..+\.yaml", path.name))) or (
        path == PROJECT_DIR / "bootstrap" / "Pulumi.ci.yaml"
    )


def install() -> None:
    """Wraps the one function every stack file is read through."""
    original = stack_files._load_file
    if getattr(original, "records_checkout_reads", False):
        return

    def load(path: Path):
        if current is not None and not _exempt and _is_checkout_stack_file(path):
            READS.setdefault(current.split("[", 1)[0], set()).add(Path(path).name)
        return original(path)

    load.records_checkout_reads = True  # type: ignore[attr-defined]
    stack_files._load_file = load


@contextlib.contextmanager
def exempt() -> Iterator[None]:
    global _exempt
    _exempt += 1
    try:
        yield
    finally:
        _exempt -= 1


def unchecked(run_there: Iterable[str]) -> dict[str, set[str]]:
    """The tests that read this checkout's stack files and are not among `run_there` (test ids, a
    file's id standing for all of its tests)."""
    selected = list(run_there)
    return {test: files for test, files in sorted(READS.items()) if not any(test == s or test.startswith(s + "::") for s in selected)}
