"""tools/team_stacks.py: which stacks are an environment's team stacks (CI's deploy jobs deploy them
after the environment stack: tests/test_deploy.py). Run on a scratch project."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.stack_files import PROJECT_DIR
from tools import team_stacks


def team_stack(environment_stack: str, team: str) -> str:
    return f"config:\n  gpu-platform:environment: dev\n  gpu-platform:environmentStack: acme/gpu-platform/{environment_stack}\n  gpu-platform:tenant: {{name: {team}}}\n"


@pytest.fixture
def project(tmp_path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (project / "Pulumi.dev.yaml").write_text("config:\n  gpu-platform:environment: dev\n")
    (project / "Pulumi.prod.yaml").write_text("config:\n  gpu-platform:environment: prod\n")
    (project / "Pulumi.team-b-dev.yaml").write_text(team_stack("dev", "b"))
    (project / "Pulumi.team-a-dev.yaml").write_text(team_stack("dev", "a"))
    (project / "Pulumi.team-c-prod.yaml").write_text(team_stack("prod", "c").replace("environment: dev", "environment: prod"))
    return project


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
