"""The offline plan (tools/plan.py) as tests/test_plan.py, tests/test_plan_costs.py and
tests/test_plan_failures.py run it: `python -m tools.plan ...` in-process through `main(argv)`, a
section of its text, a stack as the config layer loads it, and the plans of the shipped stacks
(tests/data/shipped/) they share, as module-scoped fixtures a test module imports."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from config.stack import EnvironmentStack, load_stack
from config.stack_files import read_stack_values
from tools.mock_engine import config_strings
from tools.plan import main
from shipped_stacks import SHIPPED_DIR


def plan(*argv: str, project_dir: Path = SHIPPED_DIR) -> tuple[int, str, str]:
    """`python -m tools.plan ARGV`, on the shipped stacks unless ARGV or `project_dir` says otherwise."""
    if "--project-dir" not in argv:
        argv = (*argv, "--project-dir", str(project_dir))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def loaded(stack: str, project_dir: Path = SHIPPED_DIR):
    values = read_stack_values(project_dir, stack)
    return load_stack(config_strings(values)[0], stack=stack, project_dir=project_dir)


def section(text: str, title: str) -> str:
    """The lines of one section of the text plan: from its title to the next blank line."""
    start = next(i for i, line in enumerate(text.splitlines()) if line.startswith(title))
    lines = []
    for line in text.splitlines()[start:]:
        if not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def money(value: float) -> str:
    return f"{value:,.2f}"


@pytest.fixture(scope="module")
def dev_plan(tmp_path_factory) -> tuple[int, str, str, Path]:
    out_dir = tmp_path_factory.mktemp("plan-out")
    return (*plan("--stack", "dev", "--out", str(out_dir)), out_dir)


@pytest.fixture(scope="module")
def dev_json() -> dict:
    code, out, _ = plan("--stack", "dev", "--json")
    assert code == 0
    return json.loads(out)


@pytest.fixture(scope="module")
def vision(tmp_path_factory) -> tuple[str, dict, Path]:
    """team-vision-dev planned once, as `--out DIR` and `--json` show it: text, JSON, DIR."""
    from tools.plan import plan_stack, write_documents
    from tools.plan_json import summary
    from tools.plan_text import render_text

    out_dir = tmp_path_factory.mktemp("vision-out")
    planned = plan_stack("team-vision-dev", SHIPPED_DIR)
    write_documents(planned, out_dir)
    return render_text(planned), json.loads(json.dumps(summary(planned), default=str)), out_dir


@pytest.fixture(scope="module")
def dev_stack() -> EnvironmentStack:
    env = loaded("dev")
    assert isinstance(env, EnvironmentStack)
    return env
