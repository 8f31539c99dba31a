"""The policy pack's version comes from its files (policy/pack_version.py), and `make policy-publish`
(tools/policy_publish.py) publishes it under that version, after checking that the checkout may:
two pull requests that change the pack never need the same version (docs/guardrails.md
"Publishing the pack"). Run with a fake `pulumi` that records what it was asked and the version
the pack said during the call."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_commands import fake_on_path
from pack_version import base_version, pack_version, with_version

from config.stack_files import PROJECT_DIR
from tools import policy_publish

POLICY_DIR = PROJECT_DIR / "policy"
COPY = shutil.ignore_patterns(".venv", "__pycache__")

FAKE_PULUMI = """#!/usr/bin/env bash
echo "$PWD $* $(sed -n 's/^version: //p' PulumiPolicy.yaml)" >> "$PULUMI_LOG"
"""


def copy_of_the_pack(directory: Path) -> Path:
    copied = directory / "policy"
    shutil.copytree(POLICY_DIR, copied, ignore=COPY)
    return copied


def test_the_version_is_the_base_and_a_digest_of_the_packs_files(tmp_path):
    copied = copy_of_the_pack(tmp_path)
    version = pack_version(copied)
    assert version == pack_version(POLICY_DIR)  # the same files, the same version, wherever they are
    assert version.startswith(f"{base_version(copied)}-") and len(version.rsplit("-", 1)[1]) == 12
    # Not the pack: its virtualenv and bytecode.
    (copied / ".venv").mkdir()
    (copied / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (copied / "__pycache__").mkdir(exist_ok=True)
    (copied / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert pack_version(copied) == version


def test_two_branches_that_add_two_teams_get_two_versions(tmp_path):
    """Each adds its team's record; neither writes a version; the versions differ, and differ from both after the merge."""
    versions = []
    for records in (["team-robotics-dev"], ["team-audio-dev"], ["team-robotics-dev", "team-audio-dev"]):
        copied = copy_of_the_pack(tmp_path / "-".join(records))
        for stack in records:
            (copied / "stacks" / f"{stack}.json").write_text('{"environment": "dev"}\n')
        versions.append(pack_version(copied))
    assert len(set(versions)) == 3 and pack_version(POLICY_DIR) not in versions


def test_the_published_copy_says_its_version_and_pulumi_accepts_the_characters():
    text = with_version((POLICY_DIR / "PulumiPolicy.yaml").read_text(), "0.4.0-0123456789ab")
    assert "\nversion: 0.4.0-0123456789ab\n" in text
    # pulumi/pulumi pkg/backend/httpstate/client/client.go validatePolicyPackVersion: ^[a-zA-Z0-9-_.]{1,100}$
    import re

    assert re.fullmatch(r"[a-zA-Z0-9\-_.]{1,100}", pack_version())


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A clone with the pack and the bootstrap's stack file, committed, its `origin/main` its HEAD."""
    project = tmp_path / "repo"
    project.mkdir()
    copy_of_the_pack(project)
    (project / "bootstrap").mkdir()
    shutil.copy(PROJECT_DIR / "bootstrap" / "Pulumi.ci.yaml", project / "bootstrap" / "Pulumi.ci.yaml")
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "--all")
    git(project, "commit", "--quiet", "-m", "main")
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    return project


@pytest.fixture
def pulumi_log(tmp_path, monkeypatch) -> Path:
    return fake_on_path(tmp_path, monkeypatch, "pulumi", FAKE_PULUMI, "PULUMI_LOG")


def test_it_publishes_under_the_version_and_puts_the_file_back(checkout, pulumi_log):
    committed = (checkout / "policy" / "PulumiPolicy.yaml").read_text()
    version = policy_publish.publish(checkout, "acme", check_data=False)
    assert version == pack_version(checkout / "policy")
    assert pulumi_log.read_text() == f"{checkout / 'policy'} policy publish acme {version}\n"
    assert (checkout / "policy" / "PulumiPolicy.yaml").read_text() == committed
    assert git(checkout, "status", "--porcelain") == ""


def test_a_checkout_behind_main_or_with_uncommitted_pack_changes_publishes_nothing(checkout, pulumi_log):
    """The pack of a branch behind main lacks the records main has (another team's, merged since);
    an uncommitted change makes a version the bootstrap, applied from the commit, would not enable."""
    (checkout / "policy" / "stacks" / "team-robotics-dev.json").write_text("{}\n")
    git(checkout, "switch", "--quiet", "-c", "team-audio", "HEAD")
    git(checkout, "update-ref", "refs/remotes/origin/main", git(checkout, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "main moved on").strip())
    with pytest.raises(policy_publish.PublishError) as raised:
        policy_publish.publish(checkout, "acme", check_data=False)
    message = str(raised.value)
    assert message.startswith("2 problems; nothing was published:\n")
    assert "policy/ has changes that are not committed" in message and "?? policy/stacks/team-robotics-dev.json" in message
    assert "this checkout does not contain origin/main: its pack lacks what main has (other teams' records)" in message
    assert "git fetch origin && git merge origin/main" in message
    assert pulumi_log.read_text() == ""


def test_the_command_takes_the_organization_from_the_bootstrap_and_says_what_comes_next(checkout, pulumi_log, capsys, monkeypatch):
    monkeypatch.setattr(policy_publish, "problems_before_publishing", lambda project_dir, check_data=True: [])
    assert policy_publish.main(["--organization", ""], project_dir=checkout) == 0
    out = capsys.readouterr().out
    assert out == f"published acme/gpu-platform-guardrails version {pack_version(checkout / 'policy')}; now apply the bootstrap from this commit: cd bootstrap && pulumi up\n"
    assert policy_publish.main(["--dry-run", "--organization", "globex"], project_dir=checkout) == 0
    assert capsys.readouterr().out.startswith("would publish globex/gpu-platform-guardrails version ")
    assert pulumi_log.read_text().count("policy publish") == 1


def test_make_policy_publish_passes_the_organization_as_data(tmp_path):
    """ORG reaches the tool as its text, never as shell code or a make expansion (the Makefile's `data`)."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text('#!/usr/bin/env bash\nfor a in "$@"; do echo "[$a]"; done\n')
    (bin_dir / "python").chmod(0o755)
    for stamp in (".installed-runtime", ".installed"):
        (tmp_path / ".venv" / stamp).write_text("")
    shutil.copy(PROJECT_DIR / "Makefile", tmp_path / "Makefile")
    for name in ("requirements.txt", "requirements-dev.txt", "constraints.txt"):
        shutil.copy(PROJECT_DIR / name, tmp_path / name)
    for name in ("requirements.txt", "requirements-dev.txt", "constraints.txt"):
        os.utime(tmp_path / name, (0, 0))
    given = "acme; touch pwned $(shell touch pwned2)"
    result = subprocess.run(["make", "--no-print-directory", "policy-publish", f"ORG={given}", "DRY_RUN=1"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-5:] == ["[-m]", "[tools.policy_publish]", "[--organization]", f"[{given}]", "[--dry-run]"], result.stdout
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
