"""The delivery workflow's (.github/workflows/pulumi.yml) steps that decide what a pull request
previews: the `changes` step, executed against scratch git repositories, previews each changed
stack under its environment's identities (every stack when the program changes) and refuses a stack
of an environment without CI identities; the `gates` job, the previews' one required check, run with
the `needs` GitHub gives it, fails unless every needed job succeeded or had no reason to run.
Shared helpers: workflow_support.py."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from workflow_support import (  # noqa: F401 (fixtures)
    GOOGLE_AUTH, ci_environments, condition, index_of, job_text, preview_job, pulumi_steps, steps,
    workflow,
)

from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values


# --- The previews' one required check ---------------------------------------------------------------


def gate_previews(workflow: dict) -> dict[str, str]:
    """environment: its preview job, for every environment of this checkout's bootstrap, in its order."""
    return {e: preview_job(workflow, e) for e in ci_environments()}


def test_the_gates_job_needs_every_job_a_pull_request_previews_or_gates_in(workflow):
    """Branch protection requires this job (bootstrap/github_repo.py REQUIRED_CHECKS): it must wait
    for, and judge, every preview and destroy gate, whatever happened before it: the preview job of
    each environment of the bootstrap, each with the environment whose stacks it previews."""
    job = workflow["jobs"]["gates"]
    gated = {n for n, j in workflow["jobs"].items() if any(s.get("name") == "Destroy gate" for s in steps(j))}
    gated |= {n for n, _, _ in pulumi_steps(workflow, "preview")}
    previews = gate_previews(workflow)
    assert gated == set(previews.values())
    assert set(job["needs"]) == {"test", "changes", *gated}
    script = job["steps"][0]["run"]
    [judged] = re.findall(r"^previews = (\{.*\})$", script, flags=re.MULTILINE)
    assert ast.literal_eval(judged) == {j: e for e, j in previews.items()}, "the gates step's `previews`: each preview job and its environment"
    assert condition(job) == "always() && github.event_name == 'pull_request'"
    assert job.get("permissions") == {} and index_of(job, GOOGLE_AUTH) is None and "vars." not in job_text(job)
    # The `changes` job's own condition is the one the gates job takes as "previewed".
    previewed = job["steps"][0]["env"]["PREVIEWED"]
    assert previewed == "${{ " + condition(workflow["jobs"]["changes"]).split(" && ", 1)[1] + " }}"


def _gates(workflow: dict, tmp_path: Path, results: dict[str, str], stacks: dict[str, list[str]] | None, previewed: bool = True) -> subprocess.CompletedProcess:
    """The gates job's step, run as GitHub runs it, with `needs` as GitHub's toJSON(needs) gives it."""
    needs = {job: {"result": result, "outputs": {}} for job, result in results.items()}
    if stacks is not None:
        needs["changes"]["outputs"] = {env: json.dumps(s) for env, s in stacks.items()}
    script = workflow["jobs"]["gates"]["steps"][0]["run"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NEEDS": json.dumps(needs), "PREVIEWED": "true" if previewed else "false"}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)


def _results(previews: dict[str, str], **others: str) -> dict[str, str]:
    """Every needed job succeeded, but `test` or `changes` where given."""
    return {"test": "success", "changes": "success", **dict.fromkeys(previews.values(), "success"), **others}


def _changed(previews: dict[str, str], *environments: str) -> dict[str, list[str]]:
    """The `changes` job's outputs: the environment stack of each of `environments` changed, no other."""
    return {e: [e] if e in environments else [] for e in previews}


def _all(previews: dict[str, str], result: str) -> dict[str, str]:
    return dict.fromkeys(previews.values(), result)


def _first(p: dict[str, str]) -> str:
    return next(iter(p))


def _last(p: dict[str, str]) -> str:
    return list(p)[-1]


# Each case over the preview job of every environment of this checkout's bootstrap (`p`, as
# shipped: dev's `preview`, prod's `preview-prod`; first and last: its first and last environment,
# the same one where it has one): the needed jobs' results, the changes job's outputs, whether the
# pull request is previewed (not a fork's or Dependabot's), and the lines the step fails with.
GATE_CASES = {
    "every preview passed": lambda p: (_results(p), _changed(p, *p), True, []),
    "an environment's stacks unchanged, its preview skipped": lambda p: (
        {**_results(p), p[_last(p)]: "skipped"}, {**_changed(p, *p), _last(p): []}, True, []
    ),
    "documentation only": lambda p: ({**_results(p), **_all(p, "skipped")}, _changed(p), True, []),
    # A pull request from a fork or Dependabot: no identity, no previews; the deploy's gate judges it.
    "a fork's or Dependabot's": lambda p: ({**_results(p, changes="skipped"), **_all(p, "skipped")}, None, False, []),
    "a preview failed": lambda p: ({**_results(p), p[_first(p)]: "failure"}, _changed(p, _first(p)), True, [f"{p[_first(p)]}: failure"]),
    "a preview cancelled": lambda p: ({**_results(p), p[_last(p)]: "cancelled"}, _changed(p, _last(p)), True, [f"{p[_last(p)]}: cancelled"]),
    # Skipped although its stacks changed (the approval never came, a run was cancelled before it).
    "a preview skipped although its stacks changed": lambda p: (
        {**_results(p), p[_last(p)]: "skipped"}, _changed(p, _last(p)), True, [f"{p[_last(p)]}: skipped"]
    ),
    # The tests failed, so no preview ran.
    "the tests failed": lambda p: (
        {**_results(p, test="failure"), **_all(p, "skipped")}, _changed(p, *p), True, ["test: failure", *(f"{j}: skipped" for j in p.values())]
    ),
    "changes skipped for a previewed pull request": lambda p: ({**_results(p, changes="skipped"), **_all(p, "skipped")}, None, True, ["changes: skipped"]),
    "changes failed": lambda p: ({**_results(p, changes="failure"), **_all(p, "skipped")}, None, True, ["changes: failure"]),
    # A preview job added to `needs` but not to the step's `previews` fails closed, even when it passed.
    "a needed job the step does not judge": lambda p: (
        {**_results(p), "preview-qa": "success"}, {**_changed(p, *p), "qa": ["qa"]}, True, ["preview-qa: needed, but not in `previews`: nothing judges it"]
    ),
}


@pytest.mark.parametrize("case", GATE_CASES)
def test_the_gates_job_fails_unless_every_needed_job_succeeded_or_had_no_reason_to_run(workflow, tmp_path, case):
    results, stacks, previewed, failing = GATE_CASES[case](gate_previews(workflow))
    result = _gates(workflow, tmp_path, results, stacks, previewed)
    assert result.returncode == (1 if failing else 0), result.stdout + result.stderr
    assert sorted(line.removeprefix("::error::") for line in result.stdout.splitlines() if line.startswith("::error::")) == sorted(failing)


def test_dependabot_pull_requests_get_tests_only(workflow):
    assert "github.actor != 'dependabot[bot]'" in condition(workflow["jobs"]["changes"])


# --- The changed-stacks step, executed ----------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _stack_file(environment: str) -> str:
    return f"config:\n  gpu-platform:environment: {environment}\n"


def step_environments(workflow: dict) -> list[str]:
    """The environments the `changes` job groups stacks by: its outputs, one per environment."""
    return sorted(workflow["jobs"]["changes"]["outputs"])


def _changed_stacks(workflow: dict, tmp_path: Path, change, stacks: dict[str, str]) -> subprocess.CompletedProcess | dict[str, list[str]]:
    """The step's output for a repository with `stacks` (stack: its environment) after `change`."""
    script = next(s for s in steps(workflow["jobs"]["changes"]) if s.get("id") == "changes")["run"]
    repo = tmp_path / "repo"
    repo.mkdir()
    for stack, environment in stacks.items():
        (repo / f"Pulumi.{stack}.yaml").write_text(_stack_file(environment))
    (repo / "Pulumi.yaml").write_text("name: gpu-platform\n")
    (repo / "__main__.py").write_text("")
    (repo / "README.md").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    change(repo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "change")
    output = tmp_path / "github_output"
    output.write_text("")
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BASE_SHA": base, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path)},
    )
    if result.returncode != 0:
        return result
    pairs = [line.split("=", 1) for line in output.read_text().splitlines() if "=" in line]
    return {key: json.loads(value) for key, value in pairs}


def _touch(name: str):
    return lambda repo: (repo / name).write_text((repo / name).read_text() + "# changed\n")


# Each case over a repository with an environment stack per environment of the step and a team
# stack of the first (as shipped: dev, prod and team-vision-dev): the change, and the stacks it
# previews as (environment, stack) pairs ("*": every stack).
CHANGES = {
    "an environment stack edited": (lambda e: _touch(f"Pulumi.{e[-1]}.yaml"), lambda e: [(e[-1], e[-1])]),
    "a team stack edited": (lambda e: _touch(f"Pulumi.team-vision-{e[0]}.yaml"), lambda e: [(e[0], f"team-vision-{e[0]}")]),
    "a team stack added": (
        lambda e: lambda repo: (repo / f"Pulumi.team-nlp-{e[0]}.yaml").write_text(_stack_file(e[0])),
        lambda e: [(e[0], f"team-nlp-{e[0]}")],
    ),
    "an environment stack deleted": (lambda e: lambda repo: (repo / f"Pulumi.{e[-1]}.yaml").unlink(), lambda e: []),
    "the README": (lambda e: _touch("README.md"), lambda e: []),
    "the program": (lambda e: _touch("__main__.py"), lambda e: "*"),
    "Pulumi.yaml": (lambda e: _touch("Pulumi.yaml"), lambda e: "*"),
}


@pytest.mark.parametrize("case", CHANGES)
def test_changed_stacks(workflow, tmp_path, case):
    environments = step_environments(workflow)
    stacks = {**{e: e for e in environments}, f"team-vision-{environments[0]}": environments[0]}
    change, previewed = CHANGES[case]
    selected = previewed(environments)
    expected = {e: [] for e in environments}
    for environment, stack in ([(env, s) for s, env in stacks.items()] if selected == "*" else selected):
        expected[environment].append(stack)
    assert _changed_stacks(workflow, tmp_path, change(environments), stacks) == {e: sorted(s) for e, s in expected.items()}


def test_the_changes_step_groups_by_the_bootstraps_environments(workflow):
    """One group (and preview job) per environment that has CI identities, as the step's message says."""
    assert step_environments(workflow) == sorted(ci_environments())
    script = next(s for s in steps(workflow["jobs"]["changes"]) if s.get("id") == "changes")["run"]
    groups = ", ".join(f'"{e}": []' for e in step_environments(workflow))
    assert "groups = {" + groups + "}" in script


def test_every_committed_stack_is_previewed_when_the_code_changes(workflow, tmp_path):
    """Whatever stacks this checkout has (a team stack a user added included): a change of the
    program previews each of them, under its environment's identities."""
    stacks = {stack: read_stack_values(PROJECT_DIR, stack)["gpu-platform:environment"] for stack in list_stacks(PROJECT_DIR)}
    selected = _changed_stacks(workflow, tmp_path, _touch("__main__.py"), stacks)
    assert isinstance(selected, dict), selected
    expected: dict[str, list[str]] = {}
    for stack, environment in stacks.items():
        expected.setdefault(environment, []).append(stack)
    assert {env: sorted(found) for env, found in selected.items() if found} == expected


def test_a_stack_of_an_environment_without_ci_identities_fails_the_step(workflow, tmp_path):
    stacks = {e: e for e in step_environments(workflow)}
    result = _changed_stacks(workflow, tmp_path, lambda repo: (repo / "Pulumi.qa.yaml").write_text(_stack_file("qa")), stacks)
    assert isinstance(result, subprocess.CompletedProcess) and result.returncode != 0
    assert "Pulumi.qa.yaml: environment 'qa' has no CI identities" in result.stderr
