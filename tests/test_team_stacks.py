"""tools/team_stacks.py: which stacks are an environment's team stacks (CI's deploy jobs deploy them
after the environment stack: tests/test_deploy.py). Run on a scratch project."""

from __future__ import annotations

from pathlib import Path

import pytest
from scratch_stacks import write_stacks

from tools import team_stacks


@pytest.fixture
def project(tmp_path) -> Path:
    return write_stacks(tmp_path / "project")


def test_an_environments_team_stacks_are_those_that_name_it(project):
    assert team_stacks.team_stacks("dev", project) == ["team-a-dev", "team-b-dev"]
    assert team_stacks.team_stacks("prod", project) == ["team-c-prod"]
    assert team_stacks.environment_stack_of("team-c-prod", project) == "prod" and team_stacks.environment_stack_of("dev", project) is None


def test_the_list_command_prints_them(project, capsys):
    assert team_stacks.main(["dev"], project_dir=project) == 0
    assert capsys.readouterr().out == "team-a-dev\nteam-b-dev\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["team-a-dev"], "team-a-dev is a team stack; allowed: an environment stack"),
        (["staging"], "Pulumi.staging.yaml: no such stack file"),
    ],
)
def test_a_wrong_command_line_says_what_is_allowed(project, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        team_stacks.main(argv, project_dir=project)
    assert exited.value.code == 2 and message in capsys.readouterr().err
