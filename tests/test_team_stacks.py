"""tools/team_stacks.py, which CI's deploy jobs run after the environment stack
(docs/ci.md "Continuous delivery"): which stacks are an environment's team stacks, and `pulumi up` of
each of them, every one attempted when one fails. Run on a scratch project with a fake `pulumi`
that records its calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_commands import fake_on_path

from config.stack_files import PROJECT_DIR
from tools import team_stacks

FAKE_PULUMI = """#!/usr/bin/env bash
echo "$PWD $*" >> "$PULUMI_LOG"
case " $* " in *" --stack acme/${FAIL_STACK:-none} "*) echo "update failed" >&2; exit 1 ;; esac
"""


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


@pytest.fixture
def pulumi_log(tmp_path, monkeypatch) -> Path:
    return fake_on_path(tmp_path, monkeypatch, "pulumi", FAKE_PULUMI, "PULUMI_LOG")


def test_an_environments_team_stacks_are_those_that_name_it(project):
    assert team_stacks.team_stacks("dev", project) == ["team-a-dev", "team-b-dev"]
    assert team_stacks.team_stacks("prod", project) == ["team-c-prod"]
    assert team_stacks.environment_stack_of("team-c-prod", project) == "prod" and team_stacks.environment_stack_of("dev", project) is None


def test_the_list_command_prints_them(project, capsys):
    assert team_stacks.main(["dev"], project_dir=project) == 0
    assert capsys.readouterr().out == "team-a-dev\nteam-b-dev\n"


def test_each_team_stack_is_updated_with_the_policy_pack_in_the_project(project, pulumi_log):
    assert team_stacks.main(["dev", "--deploy", "--organization", "acme"], project_dir=project) == 0
    assert pulumi_log.read_text().splitlines() == [
        f"{project} up --yes --non-interactive --diff --policy-pack policy --stack acme/team-a-dev",
        f"{project} up --yes --non-interactive --diff --policy-pack policy --stack acme/team-b-dev",
    ]


def test_one_failing_team_stack_does_not_hold_back_the_others_but_fails_the_job(project, pulumi_log, monkeypatch, capsys):
    monkeypatch.setenv("FAIL_STACK", "team-a-dev")
    assert team_stacks.main(["dev", "--deploy", "--organization", "acme"], project_dir=project) == 1
    assert [line.rsplit("/", 1)[-1] for line in pulumi_log.read_text().splitlines()] == ["team-a-dev", "team-b-dev"]
    assert "team stacks of dev that failed to deploy: team-a-dev" in capsys.readouterr().err


def test_an_environment_without_team_stacks_deploys_nothing(project, pulumi_log):
    (project / "Pulumi.team-c-prod.yaml").unlink()
    assert team_stacks.main(["prod", "--deploy", "--organization", "acme"], project_dir=project) == 0
    assert pulumi_log.read_text() == ""


@pytest.mark.parametrize(
    "argv, message",
    [
        (["team-a-dev"], "team-a-dev is a team stack; allowed: an environment stack"),
        (["staging"], "Pulumi.staging.yaml: no such stack file"),
        (["dev", "--deploy"], "--deploy needs --organization"),
    ],
)
def test_a_wrong_command_line_says_what_is_allowed(project, pulumi_log, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        team_stacks.main(argv, project_dir=project)
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert pulumi_log.read_text() == ""
