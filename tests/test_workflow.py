"""The GitHub Actions workflows (.github/workflows/*.yml) against a hostile branch: rules that hold
for any workflow file that lands (the acceptance workflow included): every action pinned by commit,
no trigger that runs a branch with the base repository's rights, no long-lived token, no deploy
identity for whatever a pull request can run, read-only permissions by default; drift.yml, its
issue step executed against a fake `gh`; Dependabot's configuration; and the review's findings
(caches, the acceptance test's branch, Dependabot's trust). Who may change which environment:
test_workflow_deploy.py; the pull requests' changed-stacks step and gates job:
test_workflow_previews.py; the helpers they share: workflow_support.py."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml
from docs_support import section
from fake_commands import install_fake
from workflow_support import (  # noqa: F401 (fixtures)
    GOOGLE_AUTH, PULUMI_ACTION, PULUMI_AUTH, WORKFLOW_FILES, WORKFLOWS_DIR, action,
    bootstrap_outputs, ci_environments, condition, drift, environment_name, google_identity,
    index_of, is_true, job_text, load, may_run_for_a_pull_request, permissions, preview_job,
    pulumi_team, step_of, steps, triggers, workflow,
)

from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values

# Releases pinned, each SHA read from the action's repository at its tag (git rev-parse <tag>^{commit}).
PINNED = {
    "actions/checkout": ("v7.0.1", "3d3c42e5aac5ba805825da76410c181273ba90b1"),
    "actions/setup-python": ("v7.0.0", "5fda3b95a4ea91299a34e894583c3862153e4b97"),
    "opentofu/setup-opentofu": ("v2.0.2", "a1320f892987e89d278cc92dc5adc984fb93aca4"),
    "google-github-actions/auth": ("v3.0.0", "7c6bc770dae815cd3e89ee6cdf493a5fab2cc093"),
    "google-github-actions/setup-gcloud": ("v3.0.1", "aa5489c8933f4cc7a4f7d45035b3b1440c9c10db"),
    "pulumi/auth-actions": ("v2.1.0", "141415910c3beb54e03b48e9057c204c97b956f2"),
    "pulumi/actions": ("v7.0.0", "8e5e406f4007fca908480587cb9893c07090f58d"),
}
_PINNED_REF = re.compile(r"^(?P<action>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:/[A-Za-z0-9_./-]+)?@(?P<sha>[0-9a-f]{40})$")


# --- Every workflow: pins, triggers, tokens -----------------------------------------------------


def uses_of(document) -> list:
    """Every `uses:` of a workflow, from its parsed YAML whatever the style (block, flow `{uses: …}`,
    quoted): each job's (a reusable workflow) and each step's. Nowhere else does GitHub run one."""
    jobs = document.get("jobs") if isinstance(document, dict) else None
    found = []
    for job in jobs.values() if isinstance(jobs, dict) else []:
        if not isinstance(job, dict):
            continue
        if "uses" in job:
            found.append(job["uses"])
        found += [step["uses"] for step in steps(job) if isinstance(step, dict) and "uses" in step]
    return found


def _version_comment(text: str, ref: str) -> str | None:
    """The `# vX.Y.Z` comment on every line that names `ref`, if they all carry the same one."""
    comments = {line.rsplit(" #", 1)[1].strip() if " #" in line else "" for line in text.splitlines() if ref in line}
    version = comments.pop() if len(comments) == 1 else ""
    return version if re.fullmatch(r"v\d+(\.\d+){0,2}", version) else None


def unpinned(text: str) -> list[str]:
    """Why each `uses:` of a workflow's text is not pinned (none when all are): a third-party action
    or reusable workflow by a 40-hex commit SHA with its release in a `# vX.Y.Z` comment (the one
    PINNED records, where it records one), a Docker image by digest; this repository's own (`./…`)
    is reviewed with it."""
    problems = []
    for ref in uses_of(yaml.safe_load(text)):
        if not isinstance(ref, str):
            problems.append(f"{ref!r} is not an action reference")
            continue
        if ref.startswith("./"):
            continue
        if ref.startswith("docker://"):
            if not re.search(r"@sha256:[0-9a-f]{64}$", ref):
                problems.append(f"{ref} is not pinned by digest")
            continue
        pinned = _PINNED_REF.match(ref)
        if not pinned:
            problems.append(f"{ref} is not pinned by a 40-hex commit SHA")
            continue
        version = _version_comment(text, ref)
        known = PINNED.get(pinned.group("action"))
        if version is None:
            problems.append(f"{ref} has no `# vX.Y.Z` comment")
        elif known and (version, pinned.group("sha")) != known:
            problems.append(f"{ref} ({version}) is not the recorded release {known}")
    return problems


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_by_a_full_commit_sha_with_its_version(path):
    assert uses_of(load(path)), f"{path.name} uses no action"
    assert unpinned(path.read_text()) == []


def test_an_unpinned_action_is_caught_in_any_yaml_style():
    """Read from the parsed YAML, a flow-style step or a job's reusable workflow is no way around the pins."""
    checkout, (version, sha) = "actions/checkout", PINNED["actions/checkout"]
    text = textwrap.dedent(
        f"""\
        on: push
        jobs:
          build:
            runs-on: ubuntu-latest
            steps:
              - {{uses: foo/bar@v1}}
              - {{name: pinned, uses: {checkout}@{sha}}}  # {version}
              - {{uses: "foo/baz@{'0' * 40}"}}
              - uses: >-
                  foo/qux@main
          reuse:
            uses: foo/bar/.github/workflows/build.yml@main
        """
    )
    assert unpinned(text) == [
        "foo/bar@v1 is not pinned by a 40-hex commit SHA",
        f"foo/baz@{'0' * 40} has no `# vX.Y.Z` comment",
        "foo/qux@main is not pinned by a 40-hex commit SHA",
        "foo/bar/.github/workflows/build.yml@main is not pinned by a 40-hex commit SHA",
    ]
    assert unpinned(text.replace(f"{checkout}@{sha}}}  # {version}", f"{checkout}@{sha}}}  # v1.0.0"))[1] == (
        f"{checkout}@{sha} (v1.0.0) is not the recorded release {PINNED[checkout]}"
    )


def test_one_commit_per_action_across_workflows():
    seen: dict[str, set[str]] = {}
    for path in WORKFLOW_FILES:
        for ref in uses_of(load(path)):
            pinned = _PINNED_REF.match(str(ref))
            if pinned:
                seen.setdefault(pinned.group("action"), set()).add(pinned.group("sha"))
    assert {a: s for a, s in seen.items() if len(s) > 1} == {}


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_workflow_runs_a_branch_with_the_base_repositorys_rights(path):
    """pull_request_target and workflow_run run with the base repository's token and secrets, a
    classic way to run a fork's code with write access."""
    assert not {"pull_request_target", "workflow_run"} & set(triggers(load(path)))


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_long_lived_pulumi_token_or_google_key(path):
    text = path.read_text()
    assert "PULUMI_ACCESS_TOKEN" not in text, f"{path.name}: use pulumi/auth-actions (a token per job), not a stored token"
    assert "credentials_json" not in text and "service_account_key" not in text


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_job_that_a_pull_request_runs_can_obtain_a_deploy_identity(path):
    document = load(path)
    for name, job in document["jobs"].items():
        if not may_run_for_a_pull_request(document, job):
            continue
        text = job_text(job)
        assert "DEPLOY_SERVICE_ACCOUNT" not in text and "DEPLOY_TEAM" not in text, f"{path.name} {name}"
        assert "secrets." not in text, f"{path.name} {name}: a pull request's job holds a secret"
        assert environment_name(job) != "production", f"{path.name} {name}"
        team = pulumi_team(job)
        assert team is None or "READ_TEAM" in team, f"{path.name} {name}: {team}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_checkouts_leave_no_token_behind(path):
    """Code of the branch runs after the checkout: it must not find the job's token in .git/config."""
    for name, job in load(path)["jobs"].items():
        for step in steps(job):
            if action(step) == "actions/checkout":
                assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name} {name}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_permissions_are_read_only_by_default(path):
    document = load(path)
    top = document.get("permissions")
    assert isinstance(top, dict) and set(top.values()) <= {"read", "none"}, f"{path.name}: {top}"
    for name, job in document["jobs"].items():
        assert job.get("permissions") != "write-all", f"{path.name} {name}"
        writes = {k for k, v in permissions(document, job).items() if v == "write"}
        if "id-token" in writes:
            assert index_of(job, GOOGLE_AUTH) is not None or index_of(job, PULUMI_AUTH) is not None, f"{path.name} {name}: id-token unused"


# --- drift.yml ----------------------------------------------------------------------------------------


def environment_stacks() -> list[str]:
    return sorted(s for s in list_stacks(PROJECT_DIR) if not read_stack_values(PROJECT_DIR, s).get("gpu-platform:environmentStack"))


def test_drift_runs_on_a_schedule_for_every_environment_stack_with_the_read_only_identity(drift):
    assert "schedule" in triggers(drift)
    job = drift["jobs"]["drift"]
    assert environment_name(job) == "drift"
    matrix = job["strategy"]["matrix"]["include"]
    assert sorted(entry["stack"] for entry in matrix) == environment_stacks()
    for entry in matrix:
        suffix = entry["stack"].upper()
        assert entry["gcp-service-account"] == f"${{{{ vars.GCP_DRIFT_SERVICE_ACCOUNT_{suffix} }}}}"
        assert entry["pulumi-team"] == f"${{{{ vars.PULUMI_READ_TEAM_{suffix} }}}}"
    assert google_identity(job) == "${{ matrix.gcp-service-account }}" and pulumi_team(job) == "team:${{ matrix.pulumi-team }}"
    assert "DEPLOY" not in job_text(job)
    preview = step_of(job, PULUMI_ACTION)
    assert preview["with"]["command"] == "preview" and is_true(preview["with"]["refresh"]) and is_true(preview["with"]["expect-no-changes"])
    assert preview.get("continue-on-error") is True and preview.get("id") == "preview"


def test_drift_has_least_permissions(drift):
    job = drift["jobs"]["drift"]
    assert permissions(drift, job) == {"contents": "read", "id-token": "write", "issues": "write"}


def test_drift_identity_is_read_only_on_the_cloud():
    roles = yaml.safe_load((PROJECT_DIR / "bootstrap" / "ci_roles.yaml").read_text())["identities"]["drift"]["project"]
    assert all(r["role"].startswith(("roles/", "custom:")) for r in roles)
    assert not [r for r in roles if "admin" in r["role"].lower() or r["role"].endswith((".editor", ".user", "Creator"))]


FAKE_GH = """#!/usr/bin/env bash
args="$*"; echo "${args//$'\n'/ }" >> "$GH_LOG"
if [ "$1 $2" = "issue list" ]; then printf '%s' "${FAKE_OPEN_ISSUE:-}"; fi
"""


def _report(drift: dict, tmp_path: Path, outcome: str, open_issue: str) -> tuple[int, list[str]]:
    script = next(s for s in steps(drift["jobs"]["drift"]) if "gh issue" in str(s.get("run", "")))["run"]
    bin_dir, log = install_fake(tmp_path, "gh", FAKE_GH)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GH_LOG": str(log),
        "FAKE_OPEN_ISSUE": open_issue,
        "STACK": "prod",
        "OUTCOME": outcome,
        "RUN_URL": "https://github.com/acme/gpu-platform/actions/runs/1",
    }
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    return result.returncode, log.read_text().splitlines()


def test_drift_opens_one_issue_per_stack(drift, tmp_path):
    code, calls = _report(drift, tmp_path, "failure", "")
    assert code == 1  # the run shows red too
    assert calls[0].startswith("issue list --state open --label drift")
    assert calls[1].startswith("label create drift --force")
    assert calls[2].startswith("issue create --title Drift: stack prod differs from its Pulumi state --label drift --body ")
    assert "https://github.com/acme/gpu-platform/actions/runs/1" in calls[2] and len(calls) == 3


def test_drift_comments_on_the_open_issue_instead_of_opening_another(drift, tmp_path):
    code, calls = _report(drift, tmp_path, "failure", "42")
    assert code == 1 and [c.split(" --")[0] for c in calls] == ["issue list", "issue comment 42"]


def test_a_clean_run_closes_the_issue(drift, tmp_path):
    code, calls = _report(drift, tmp_path, "success", "42")
    assert code == 0 and [c.split(" --")[0] for c in calls] == ["issue list", "issue close 42"]



def test_a_clean_run_without_an_open_issue_does_nothing(drift, tmp_path):
    code, calls = _report(drift, tmp_path, "success", "")
    assert code == 0 and [c.split(" --")[0] for c in calls] == ["issue list"]


# --- Dependabot -------------------------------------------------------------------------------------


def test_dependabot_keeps_actions_and_every_pip_pin_current():
    config = load(PROJECT_DIR / ".github" / "dependabot.yml")
    updates = {u["package-ecosystem"]: u for u in config["updates"]}
    assert updates["github-actions"]["directory"] == "/"
    directories = updates["pip"]["directories"]
    assert sorted(directories) == ["/", "/bootstrap", "/policy"]
    for directory in directories:
        assert (PROJECT_DIR / directory.lstrip("/") / "requirements.txt").exists(), directory
    # The constraints file is reached through requirements.txt, where Dependabot looks for `-c`.
    assert re.search(r"^-c constraints\.txt$", (PROJECT_DIR / "requirements.txt").read_text(), re.MULTILINE)


# --- Review: caches, the acceptance test's branch, Dependabot's trust ------------------------------------


def test_the_approved_previews_restore_no_dependency_cache(workflow):
    """A preview that runs in a GitHub environment (prod's, approved by a reviewer) runs in the pull
    request's cache scope, which unapproved runs of the same pull request (test, preview) could
    have filled: it restores nothing and installs from PyPI."""
    approved = [preview_job(workflow, e) for e, entry in ci_environments().items() if (entry.get("preview") or {}).get("environment")]
    for name in approved:
        job = workflow["jobs"][name]
        [setup] = [s for s in steps(job) if action(s) == "actions/setup-python"]
        assert not setup["with"].get("cache") and "cache-dependency-path" not in setup["with"], name
        assert not [s for s in steps(job) if action(s) in ("actions/cache", "actions/cache/restore")], name
    # The unapproved jobs of a pull request do cache, which is why this one must not.
    assert workflow["jobs"]["test"]["steps"][1]["with"]["cache"] == "pip"


def test_the_acceptance_test_runs_from_main_only():
    """workflow_dispatch runs any branch; the deploy identity is for main's code only."""
    text = (WORKFLOWS_DIR / "acceptance.yml").read_text()
    job = load(WORKFLOWS_DIR / "acceptance.yml")["jobs"]["acceptance"]
    assert condition(job) == "github.ref == 'refs/heads/main'"
    assert environment_name(job) == "acceptance"
    readme = section("In GitHub Actions")
    suggested = "assertion.repository == '<owner>/<repo>' && assertion.environment == 'acceptance' && assertion.ref == 'refs/heads/main'"
    assert suggested in text and suggested in readme
    words = lambda s: " ".join(s.replace("#", " ").split())  # noqa: E731
    assert "a deployment branch policy admitting `main` only" in words(text) and "a deployment branch policy admitting `main` only" in words(readme)


def test_dependabot_runs_are_refused_by_the_trust_as_the_config_says(bootstrap_outputs):
    condition_text = bootstrap_outputs["attributeCondition"]
    assert "(assertion.sub != 'repo:acme/gpu-platform:pull_request' || assertion.actor != 'dependabot[bot]')" in condition_text
    comment = (PROJECT_DIR / ".github" / "dependabot.yml").read_text()
    assert "assertion.actor != 'dependabot[bot]'" in comment and "identities Dependabot runs lack" not in comment
