"""Which stack files a test runs on: the stacks as shipped, or the stacks of this checkout.

The repository's own `Pulumi.*.yaml` are the user's: the docs tell them to add team stacks and
inline tenants there, so a test of exact figures (costs, resource counts, tenant lists, the docs'
worked examples) would break the moment someone follows the docs. Those tests run on a frozen copy
of the stacks as shipped, `tests/data/shipped/` (its `Pulumi.yaml` is a link to the project's).
Tests about every committed stack iterate whatever stacks this checkout has (`committed_stacks`)
and assert what must hold for any of them: it plans, passes the policy pack, CI selects it.
The CI bootstrap's stack file is the user's too (its `yours:` values), so the bootstrap as shipped
is frozen beside them (`SHIPPED_BOOTSTRAP`); it derives its stacks and team projects from the
shipped stacks' records (tests/conftest.py `shipped_records_dir`), this checkout's from its own.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from config.stack_files import PROJECT_DIR, StackFileError, list_stacks, read_stack_values
from tools.team_stacks import environment_stack_of as team_stack_environment

SHIPPED_DIR = PROJECT_DIR / "tests" / "data" / "shipped"
SHIPPED_STACKS = ("dev", "prod", "team-vision-dev")
SHIPPED_BOOTSTRAP = SHIPPED_DIR / "bootstrap" / "Pulumi.ci.yaml"


def shipped_project(directory: Path, stacks: Iterable[str] = SHIPPED_STACKS, *, bootstrap: bool = False) -> Path:
    """`directory` made a project of this Pulumi.yaml and the given shipped stack files (and, with
    `bootstrap`, the shipped bootstrap/Pulumi.ci.yaml): nothing of what this checkout has added."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", *(f"Pulumi.{stack}.yaml" for stack in stacks)):
        shutil.copy(SHIPPED_DIR / name, directory / name)
    if bootstrap:
        (directory / "bootstrap").mkdir(exist_ok=True)
        shutil.copy(SHIPPED_BOOTSTRAP, directory / "bootstrap" / SHIPPED_BOOTSTRAP.name)
    return directory


def shipped_bootstrap_values() -> dict[str, Any]:
    """A fresh, mutable copy of the bootstrap's configuration as shipped (tests/data/shipped/bootstrap/)."""
    return copy.deepcopy(read_stack_values(SHIPPED_BOOTSTRAP.parent, "ci"))


def shipped_values(stack: str) -> dict[str, Any]:
    """A fresh, mutable copy of a shipped stack's configuration (project defaults included)."""
    return copy.deepcopy(read_stack_values(SHIPPED_DIR, stack))


def committed_stacks(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Every stack file of this checkout, environment stacks first (team stacks need their outputs)."""
    stacks = list_stacks(project_dir)
    return sorted(stacks, key=lambda s: (bool(environment_stack_of(s, project_dir)), s))


def environment_stack_of(stack: str, project_dir: Path = PROJECT_DIR) -> str | None:
    """The environment stack a team stack names (`<org>/<project>/<stack>` → `<stack>`), else None
    (also for a stack file that cannot be read: its own tests say why)."""
    try:
        return team_stack_environment(stack, project_dir)
    except StackFileError:
        return None


def checkout_is_as_shipped(project_dir: Path = PROJECT_DIR) -> bool:
    """This checkout's stacks are exactly the shipped ones (same names, same values). A comparison
    only: not a dependency on the checkout's stack files (tests/checkout_reads.py)."""
    from checkout_reads import exempt

    if list_stacks(project_dir) != sorted(SHIPPED_STACKS):
        return False
    with exempt():
        try:
            return all(read_stack_values(project_dir, s) == read_stack_values(SHIPPED_DIR, s) for s in SHIPPED_STACKS)
        except StackFileError:
            return False


def bootstrap_is_as_shipped() -> bool:
    """This checkout's bootstrap/Pulumi.ci.yaml is the shipped one (same values); a comparison only."""
    from checkout_reads import exempt

    with exempt():
        try:
            return read_stack_values(PROJECT_DIR / "bootstrap", "ci") == shipped_bootstrap_values()
        except StackFileError:
            return False


def problems(values: dict[str, Any], stack: str = "dev", project_dir: Path = SHIPPED_DIR) -> list[str]:
    """The problems `load_stack` reports for a stack's configuration (beside the shipped stack files
    unless `project_dir` says otherwise), one string each as the error lists them; fails the test
    when it reports none."""
    import pytest

    from config.errors import ConfigError
    from config.stack import load_stack

    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack=stack, project_dir=project_dir)
    return [str(p) for p in caught.value.problems]


def refused(values: dict[str, Any], stack: str = "dev") -> str:
    """The program run on a stack's configuration beside the shipped stack files, refused as a user
    sees it: one error, its headline counting the problems it lists ("2 configuration problems in
    stack 'dev'; nothing was created:"), and nothing registered. Returns the error's text."""
    import pulumi
    import pytest

    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(values, stack=stack)
    assert caught.value.registrations == []  # type: ignore[attr-defined]
    message = str(caught.value)
    count = len([line for line in message.splitlines() if line.startswith("  - ")])
    assert message.startswith(f"{count} configuration problem{'s' if count != 1 else ''} in stack '{stack}'; nothing was created:\n"), message
    return message


def run_shipped(values: dict[str, Any], *, stack: str, **options: Any):
    """`run_program` beside the shipped stack files: a program that scans its project for team
    stacks (quota, names, CIDRs) sees the shipped ones, whatever this checkout holds."""
    from tools.mock_engine import run_program

    return run_program(values, stack=stack, project_dir=SHIPPED_DIR, **options)
