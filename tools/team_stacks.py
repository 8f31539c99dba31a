"""The team stacks of an environment stack (docs/ci.md "Continuous delivery").

    python -m tools.team_stacks dev      # their names, one per line

A team stack belongs to the environment stack its `gpu-platform:environmentStack` names
(`<org>/<project>/<stack>`), as the program reads it (config/stack.py). CI's `up-<env>` job deploys
the environment stack first, then each committed team stack of it (tools/deploy.py), by the same
identity: the environment's deployer, from reviewed `main` (team stacks are never deployed by their
teams). `make test` has checked before that every committed stack is listed for the bootstrap, whose
deploy team may therefore update each of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config.stack_files import PROJECT_DIR, StackFileError, list_stacks, project_name, read_stack_values


def environment_stack_of(stack: str, project_dir: Path = PROJECT_DIR) -> str | None:
    """The environment stack a team stack names (`<org>/<project>/<stack>` → `<stack>`); None for
    an environment stack."""
    reference = read_stack_values(project_dir, stack).get(f"{project_name(project_dir)}:environmentStack")
    return str(reference).split("/")[-1] if reference else None


def team_stacks(environment_stack: str, project_dir: Path = PROJECT_DIR) -> list[str]:
    """Every committed team stack of `environment_stack`, in name order."""
    return [s for s in list_stacks(project_dir) if environment_stack_of(s, project_dir) == environment_stack]


def check_environment_stack(parser: argparse.ArgumentParser, stack: str, project_dir: Path) -> None:
    """Refuse, through the command line's parser, a stack that is not an environment stack of this
    project (a team stack, or no stack file at all)."""
    try:
        if environment_stack_of(stack, project_dir) is not None:
            parser.error(f"{stack} is a team stack; allowed: an environment stack")
    except StackFileError as e:
        parser.error(str(e))


def main(argv: list[str] | None = None, project_dir: Path = PROJECT_DIR) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.team_stacks", description=__doc__.split("\n\n")[0])
    parser.add_argument("environment_stack", help="the environment stack, e.g. dev")
    args = parser.parse_args(argv)
    check_environment_stack(parser, args.environment_stack, project_dir)
    for stack in team_stacks(args.environment_stack, project_dir):
        print(stack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
