"""tools/deploy.py, CI's deployment of an environment (docs/ci.md "Continuous delivery"): the
environment stack, then each of its team stacks, each behind the destroy gate on `pulumi preview
--json`, with the declarations of the commits being deployed (those since the stack's last
successful update). Run on a scratch git repository with a fake `pulumi` that records its calls and
answers `stack history` and `preview --json` from files the test writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fake_commands import fake_on_path
from scratch_stacks import write_stacks

from tools import deploy

INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
FAKE_PULUMI = """#!/usr/bin/env bash
echo "$PWD $*" >> "$PULUMI_LOG"
stack="${@: -1}"; stack="${stack#*/}"
case "$1 $2" in
  "stack history") if [ -f "$ANSWERS/history-$stack.json" ]; then cat "$ANSWERS/history-$stack.json"; else echo "error: no stack named '$stack' found" >&2; exit 255; fi ;;
  "preview --json") if [ -f "$ANSWERS/preview-$stack.json" ]; then cat "$ANSWERS/preview-$stack.json"; else echo '{"steps": []}'; fi ;;
  "up "*) case " $* " in *" --stack acme/${FAIL_STACK:-none} "*) echo "update failed" >&2; exit 1 ;; esac ;;
esac
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def project(tmp_path) -> Path:
    """A repository with dev, prod and three team stacks, committed once."""
    project = write_stacks(tmp_path / "project")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "stacks")
    return project


@pytest.fixture
def answers(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "answers"
    directory.mkdir()
    monkeypatch.setenv("ANSWERS", str(directory))
    return directory


@pytest.fixture
def pulumi_log(tmp_path, monkeypatch, answers) -> Path:
    return fake_on_path(tmp_path, monkeypatch, "pulumi", FAKE_PULUMI, "PULUMI_LOG")


def commit(project: Path, message: str) -> str:
    git(project, "commit", "-q", "--allow-empty", "-m", message)
    return git(project, "rev-parse", "HEAD")


def deleting(answers: Path, stack: str, team: str) -> None:
    """`pulumi preview --json` of `stack` deletes team `team`'s virtual cluster."""
    urn = f"urn:pulumi:{stack}::gpu-platform::gpu-platform:tenants:VirtualCluster${INSTANCE}::tenant-{team}-instance"
    (answers / f"preview-{stack}.json").write_text(json.dumps({"steps": [{"op": "delete", "urn": urn}]}))


def deployed_at(answers: Path, stack: str, sha: str, *, result: str = "succeeded", version: int = 7) -> None:
    history = [{"version": version, "kind": "update", "result": result, "environment": {"git.head": sha}}]
    (answers / f"history-{stack}.json").write_text(json.dumps(history))


def calls(log: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()]


def test_each_stack_is_gated_then_updated_with_the_policy_pack_environment_first(project, pulumi_log):
    assert deploy.main(["dev", "--organization", "acme"], project_dir=project) == 0
    expected = []
    for stack in ("dev", "team-a-dev", "team-b-dev"):
        expected += [
            f"stack history --json --page-size 100 --stack acme/{stack}",
            f"preview --json --non-interactive --stack acme/{stack}",
            f"up --yes --non-interactive --diff --policy-pack policy --stack acme/{stack}",
        ]
    assert calls(pulumi_log) == expected
    assert {line.split(" ", 1)[0] for line in pulumi_log.read_text().splitlines()} == {str(project)}


def test_an_undeclared_deletion_stops_its_stack_only(project, pulumi_log, answers, capsys):
    deleting(answers, "team-a-dev", "a")
    assert deploy.main(["dev", "--organization", "acme"], project_dir=project) == 1
    ups = [c.rsplit("/", 1)[-1] for c in calls(pulumi_log) if c.startswith("up ")]
    assert ups == ["dev", "team-b-dev"]
    out, err = capsys.readouterr()
    assert f"DELETE  {INSTANCE}  tenant-a-instance  [NOT DECLARED]" in out and "`Allow-Destroy: tenant-a`" in out
    assert "team stacks of dev that failed to deploy: team-a-dev" in err


def test_an_undeclared_deletion_in_the_environment_stops_everything(project, pulumi_log, answers, capsys):
    deleting(answers, "dev", "nlp")
    assert deploy.main(["dev", "--organization", "acme"], project_dir=project) == 1
    assert [c for c in calls(pulumi_log) if c.startswith("up ")] == []
    assert "environment stack dev failed to deploy: its team stacks were not attempted" in capsys.readouterr().err


def test_declarations_come_from_the_commits_since_the_last_successful_update_only(project, pulumi_log, answers, capsys):
    """An old commit's declaration, deployed before, does not cover a deletion now."""
    old = commit(project, "Remove team a once\n\nAllow-Destroy: tenant-a")
    deployed_at(answers, "dev", old)
    before = commit(project, "Something else")
    commit(project, "Remove team a again, undeclared")
    deleting(answers, "dev", "a")
    assert deploy.main(["dev", "--organization", "acme", "--before", before], project_dir=project) == 1
    out = capsys.readouterr().out
    assert f"stack dev: declarations from 2 commit(s), since {old[:12]}, the stack's last successful update: none" in out
    # A failed update since does not move the start: its commits are still being deployed.
    commit(project, "Remove team a\n\nAllow-Destroy: tenant-a")
    history = [
        {"version": 7, "kind": "update", "result": "succeeded", "environment": {"git.head": old}},
        {"version": 8, "kind": "update", "result": "failed", "environment": {"git.head": before}},
        {"version": 9, "kind": "refresh", "result": "succeeded", "environment": {"git.head": before}},
    ]
    (answers / "history-dev.json").write_text(json.dumps(history))
    assert deploy.main(["dev", "--organization", "acme", "--before", before], project_dir=project) == 0
    assert f"stack dev: declarations from 3 commit(s), since {old[:12]}, the stack's last successful update: tenant-a" in capsys.readouterr().out


def test_without_a_usable_record_the_push_is_what_is_deployed(project, pulumi_log, answers, capsys):
    before = commit(project, "Remove team a\n\nAllow-Destroy: tenant-a")  # before the push: not part of it
    commit(project, "Pushed")
    deleting(answers, "dev", "a")
    deployed_at(answers, "dev", "0123456789abcdef0123456789abcdef01234567")  # a commit this history lacks
    assert deploy.main(["dev", "--organization", "acme", "--before", before], project_dir=project) == 1
    assert "declarations from 1 commit(s), the push's own commits (its last update's commit 0123456789ab is not in this history): none" in capsys.readouterr().out
    (answers / "history-dev.json").unlink()  # a new stack: no history at all, and no earlier commit of the push
    assert deploy.main(["dev", "--organization", "acme", "--before", "0" * 40], project_dir=project) == 1
    assert "declarations from 1 commit(s), this commit alone (no successful update recorded a commit, and no earlier commit of the push): none" in capsys.readouterr().out


def test_a_failing_preview_deploys_nothing(project, pulumi_log, answers, capsys):
    (answers / "preview-dev.json").write_text("error: the program failed")
    assert deploy.main(["dev", "--organization", "acme"], project_dir=project) == 1
    assert [c for c in calls(pulumi_log) if c.startswith("up ")] == []
    assert "stack dev: `pulumi preview --json` failed, so nothing is deployed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["team-a-dev", "--organization", "acme"], "team-a-dev is a team stack; allowed: an environment stack"),
        (["staging", "--organization", "acme"], "Pulumi.staging.yaml: no such stack file"),
        (["dev"], "the following arguments are required: --organization"),
    ],
)
def test_a_wrong_command_line_says_what_is_allowed(project, pulumi_log, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        deploy.main(argv, project_dir=project)
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert pulumi_log.read_text() == ""
