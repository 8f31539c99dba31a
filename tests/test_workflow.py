"""The GitHub Actions workflows (.github/workflows/*.yml) against a hostile branch: whatever a pull
request can run gets no deploy identity and no long-lived token; deploy jobs are guarded by ref and
environment; every action is pinned by commit. Rules marked "every workflow" hold for any workflow
file that lands (the acceptance workflow included). The changed-stacks step and the drift issue step
are executed against scratch repositories and a fake `gh`."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from docs_support import section
from fake_commands import install_fake

from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values

WORKFLOWS_DIR = PROJECT_DIR / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS_DIR.glob("*.yml")) + sorted(WORKFLOWS_DIR.glob("*.yaml"))
PULUMI = WORKFLOWS_DIR / "pulumi.yml"
DRIFT = WORKFLOWS_DIR / "drift.yml"
PULUMI_ACTION = "pulumi/actions"
PULUMI_AUTH = "pulumi/auth-actions"
GOOGLE_AUTH = "google-github-actions/auth"
SETUP_GCLOUD = "google-github-actions/setup-gcloud"
TEAM_TOKEN = "urn:pulumi:token-type:access_token:team"

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


def load(path: Path) -> dict:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict), path
    return document


@pytest.fixture(scope="module")
def workflow() -> dict:
    return load(PULUMI)


@pytest.fixture(scope="module")
def drift() -> dict:
    return load(DRIFT)


@pytest.fixture(scope="module")
def bootstrap_outputs(bootstrap_run) -> dict:
    """The bootstrap as shipped (acme's), for what its code derives whatever the checkout holds."""
    return bootstrap_run.outputs


# --- This checkout's CI: its environments, as its bootstrap configures them ----------------------------
# The workflows, bootstrap/Pulumi.ci.yaml and the stack files are the adopter's: an environment
# deleted or added (docs/development.md "Environments of your own") changes all three. The tests of
# who may change which environment derive each job's identities from the bootstrap's entry of the
# environment it previews or deploys, never from a list of job names.


def ci_environments() -> dict[str, dict]:
    """Each environment of this checkout's bootstrap (its `environments` entries), by name."""
    values = read_stack_values(PROJECT_DIR / "bootstrap", "ci")
    return {entry["name"]: entry for entry in values["gpu-platform-bootstrap:environments"]}


@pytest.fixture(scope="module")
def ci_outputs(committed_bootstrap_run) -> dict:
    """What this checkout's bootstrap grants (its subjects, its GitHub variables)."""
    return committed_bootstrap_run.outputs


def deploy_job(workflow: dict, environment: str) -> str | None:
    """The job whose `tools.deploy <environment>` step deploys the environment (and its team stacks)."""
    return next((name for name, deployed in deploy_jobs(workflow).items() if deployed == environment), None)


def preview_job(workflow: dict, environment: str) -> str | None:
    """The job whose `pulumi preview` runs on the environment's changed stacks (the `changes` job's output)."""
    matrix = f"${{{{ fromJSON(needs.changes.outputs.{environment}) }}}}"
    return next((name for name, job, _ in pulumi_steps(workflow, "preview") if (job.get("strategy") or {}).get("matrix", {}).get("stack") == matrix), None)


def triggers(document: dict) -> dict:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    on = document.get("on", document.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    assert isinstance(on, dict), "triggers must be a mapping"
    return on


def steps(job: dict) -> list[dict]:
    return list(job.get("steps") or [])


def action(step: dict) -> str:
    return re.sub(r"^([^/@]+/[^/@]+).*$", r"\1", str(step.get("uses", "")).split("@", 1)[0])


def index_of(job: dict, name: str) -> int | None:
    return next((i for i, s in enumerate(steps(job)) if action(s) == name), None)


def step_of(job: dict, name: str) -> dict:
    position = index_of(job, name)
    assert position is not None, f"no {name} step"
    return steps(job)[position]


def pulumi_jobs(document: dict) -> dict[str, dict]:
    return {name: job for name, job in document["jobs"].items() if index_of(job, PULUMI_ACTION) is not None}


def pulumi_steps(document: dict, command: str) -> list[tuple[str, dict, dict]]:
    return [
        (name, job, step)
        for name, job in document["jobs"].items()
        for step in steps(job)
        if action(step) == PULUMI_ACTION and (step.get("with") or {}).get("command") == command
    ]


def is_true(value) -> bool:
    return value is True or str(value).lower() == "true"


def permissions(document: dict, job: dict) -> dict:
    granted = job.get("permissions", document.get("permissions"))
    return granted if isinstance(granted, dict) else {}


def condition(job: dict) -> str:
    return re.sub(r"\s+", " ", str(job.get("if", "")))


def only_on_push_to_main(job: dict) -> bool:
    text = condition(job)
    return "github.event_name == 'push'" in text and "github.ref == 'refs/heads/main'" in text and "||" not in text


def environment_name(job: dict) -> str | None:
    environment = job.get("environment")
    return environment.get("name") if isinstance(environment, dict) else environment


def may_run_for_a_pull_request(document: dict, job: dict) -> bool:
    """A job of a workflow triggered by pull requests, unless its `if` pins another event."""
    if not {"pull_request", "pull_request_target"} & set(triggers(document)):
        return False
    text = condition(job)
    return "||" in text or not re.search(r"github\.event_name == '(push|schedule|workflow_dispatch)'", text)


def job_text(job: dict) -> str:
    return yaml.safe_dump(job)


def google_identity(job: dict) -> str | None:
    position = index_of(job, GOOGLE_AUTH)
    return None if position is None else str((steps(job)[position].get("with") or {}).get("service_account"))


def pulumi_team(job: dict) -> str | None:
    position = index_of(job, PULUMI_AUTH)
    return None if position is None else str((steps(job)[position].get("with") or {}).get("scope"))


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


# --- pulumi.yml: who may change which environment -------------------------------------------------


def test_triggers(workflow):
    on = triggers(workflow)
    assert "pull_request" in on
    assert "main" in on["push"]["branches"]


def test_the_test_job_has_no_cloud_identity(workflow):
    job = workflow["jobs"]["test"]
    assert "id-token" not in permissions(workflow, job)
    assert index_of(job, GOOGLE_AUTH) is None and index_of(job, PULUMI_AUTH) is None and "vars." not in job_text(job)
    python = step_of(job, "actions/setup-python")
    assert str(python["with"]["python-version"]) == "3.11"
    assert any("make test" in str(s.get("run", "")) for s in steps(job))


def test_tests_run_before_anything_is_previewed_or_deployed(workflow):
    for name, job in pulumi_jobs(workflow).items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert "test" in needs or any("test" in (workflow["jobs"][n].get("needs") or []) for n in needs), name


def test_template_tests_run_with_a_pinned_opentofu(workflow):
    """Without tofu or terraform on PATH the template evaluation tests skip; CI must not."""
    test_steps = steps(workflow["jobs"]["test"])
    position = next(i for i, s in enumerate(test_steps) if action(s) == "opentofu/setup-opentofu")
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(test_steps[position]["with"]["tofu_version"]))
    assert position < next(i for i, s in enumerate(test_steps) if "make test" in str(s.get("run", "")))


def test_the_collector_configuration_is_checked_with_promtool(workflow):
    """Without promtool the collector's configuration test skips; CI must not (CI=true fails it)."""
    test_steps = steps(workflow["jobs"]["test"])
    position = next(i for i, s in enumerate(test_steps) if re.search(r"apt-get install .*\bprometheus$", str(s.get("run", ""))))
    assert position < next(i for i, s in enumerate(test_steps) if "make test" in str(s.get("run", "")))


def expected_identities(workflow: dict) -> dict[str, tuple[str, str, str | None]]:
    """job: (Google service account variable, Pulumi team variable, GitHub environment), for the
    preview and the deploy job of every environment of this checkout's bootstrap: the variables the
    bootstrap names after the environment (bootstrap/__main__.py), the GitHub environment its entry
    gives each kind of job (`deploy: {environment: production}`; none for `{ref: …}`/`{pullRequests: true}`)."""
    expected = {}
    for environment, entry in ci_environments().items():
        suffix = environment.upper()
        preview, deploy = preview_job(workflow, environment), deploy_job(workflow, environment)
        assert preview and deploy, (
            f"environment {environment} of bootstrap/Pulumi.ci.yaml has no {'preview' if not preview else 'deploy'} job in "
            ".github/workflows/pulumi.yml (docs/development.md \"Environments of your own\")"
        )
        expected[preview] = (f"GCP_PREVIEW_SERVICE_ACCOUNT_{suffix}", f"PULUMI_READ_TEAM_{suffix}", (entry.get("preview") or {}).get("environment"))
        expected[deploy] = (f"GCP_DEPLOY_SERVICE_ACCOUNT_{suffix}", f"PULUMI_DEPLOY_TEAM_{suffix}", (entry.get("deploy") or {}).get("environment"))
    return expected


def test_each_job_has_the_identity_of_what_it_may_change(workflow):
    jobs = pulumi_jobs(workflow)
    expected = expected_identities(workflow)
    assert set(jobs) == set(expected)
    for name, (account, team, environment) in expected.items():
        job = jobs[name]
        assert google_identity(job) == f"${{{{ vars.{account} }}}}", name
        assert pulumi_team(job) == f"team:${{{{ vars.{team} }}}}", name
        assert environment_name(job) == environment, name
        auth = step_of(job, GOOGLE_AUTH)["with"]
        assert auth["workload_identity_provider"] == "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}", name


def test_preview_identities_differ_from_deploy_identities(workflow):
    jobs = pulumi_jobs(workflow)
    previews = {google_identity(jobs[n]) for n, _, _ in pulumi_steps(workflow, "preview")}
    deploys = {google_identity(jobs[n]) for n in deploy_jobs(workflow)}
    assert previews and deploys and previews.isdisjoint(deploys)
    assert {pulumi_team(jobs[n]) for n, _, _ in pulumi_steps(workflow, "preview")}.isdisjoint({pulumi_team(jobs[n]) for n in deploy_jobs(workflow)})


def test_every_pulumi_step_follows_a_per_job_team_token_and_google_auth(workflow):
    for name, job in pulumi_jobs(workflow).items():
        auth = step_of(job, PULUMI_AUTH)["with"]
        assert auth["requested-token-type"] == TEAM_TOKEN and auth["organization"] == "${{ vars.PULUMI_ORG }}", name
        order = [index_of(job, PULUMI_AUTH), index_of(job, GOOGLE_AUTH), index_of(job, SETUP_GCLOUD), index_of(job, PULUMI_ACTION)]
        assert None not in order and order == sorted(order), f"{name}: authenticate before pulumi runs"
        components = [c.strip() for c in str(step_of(job, SETUP_GCLOUD)["with"]["install_components"]).split(",")]
        assert "gke-gcloud-auth-plugin" in components, name
        pulumi = step_of(job, PULUMI_ACTION)["with"]
        if "command" in pulumi:  # a preview; the deploy jobs' step installs the CLI only, tools/deploy.py runs it
            assert str(pulumi["stack-name"]).startswith("${{ vars.PULUMI_ORG }}/"), name
        else:
            assert set(pulumi) == {"pulumi-version"} and index_of(job, PULUMI_ACTION) < steps(job).index(deploy_step(job)), name


def test_previews_comment_diff_and_run_the_policy_pack(workflow):
    previews = pulumi_steps(workflow, "preview")
    assert {name for name, _, _ in previews} == {preview_job(workflow, e) for e in ci_environments()}
    for name, job, step in previews:
        settings = step["with"]
        assert is_true(settings.get("comment-on-pr")) and is_true(settings.get("diff")), name
        assert settings.get("policyPacks") == "policy", name
        assert settings["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}", name
        assert permissions(workflow, job).get("pull-requests") == "write", name
        assert "pull_request" in condition(job), f"{name}: previews run for pull requests"


def test_each_environment_is_deployed_only_from_main_in_its_github_environment(workflow):
    """One deploy job per environment of the bootstrap, only on a push to main, in the GitHub
    environment its entry names (prod: `production`, whose reviewers approve), every other
    environment after a successful dev deployment."""
    deploys, environments = deploy_jobs(workflow), ci_environments()
    assert sorted(deploys.values()) == sorted(environments)
    for name, environment_stack in deploys.items():
        job = workflow["jobs"][name]
        assert only_on_push_to_main(job), f"{name}: `pulumi up` only on a push to main"
        assert "matrix" not in (job.get("strategy") or {}), name
        assert environment_name(job) == (environments[environment_stack].get("deploy") or {}).get("environment"), name
        if environment_stack != "dev" and "dev" in environments:
            assert deploy_job(workflow, "dev") in job["needs"], f"{environment_stack} follows a successful dev deployment"
    # No other step runs `pulumi up`: the pulumi/actions steps preview or install the CLI, the
    # previews' destroy gates run `pulumi preview` alone (tests/test_upgrade_check.py).
    assert {(s["with"] or {}).get("command") for _, j in pulumi_jobs(workflow).items() for s in steps(j) if action(s) == PULUMI_ACTION} == {"preview", None}
    for name, job in workflow["jobs"].items():
        for step in steps(job):
            if step.get("name") == "Destroy gate":
                assert re.findall(r"\bpulumi \w+", step["run"]) == ["pulumi preview"], name
            elif "pulumi" in str(step.get("run", "")) or "tools." in str(step.get("run", "")) and name != "test":
                assert name in deploys and step is deploy_step(job), f"{name}: {step.get('name')}"


# --- Deployments: the environment, then its team stacks, each behind the destroy gate -------------

DEPLOY_COMMAND = re.compile(r'^\.venv/bin/python -m tools\.deploy (?P<environment>[a-z0-9]+) --organization "\$PULUMI_ORG" --before "\$BEFORE_SHA"$')


def deploy_step(job: dict) -> dict:
    [step] = [s for s in steps(job) if "tools.deploy" in str(s.get("run", ""))]
    return step


def deploy_jobs(workflow: dict) -> dict[str, str]:
    """Job name → the environment stack its deploy step deploys (tools/deploy.py). Also read when the
    tests are collected, so it does not judge the command: every deploy job's test holds it to
    DEPLOY_COMMAND."""
    found = {}
    for name, job in workflow["jobs"].items():
        for step in steps(job):
            if "tools.deploy" in str(step.get("run", "")):
                named = re.search(r"\btools\.deploy\s+(?P<environment>[^\s\"']+)", str(step["run"]))
                found[name] = named.group("environment") if named else ""
    return found


def committed_team_stacks(environment_stack: str) -> list[str]:
    """Read here independently of tools/team_stacks.py: the stacks whose environmentStack names it."""
    return sorted(
        s for s in list_stacks(PROJECT_DIR) if str(read_stack_values(PROJECT_DIR, s).get("gpu-platform:environmentStack") or "").split("/")[-1] == environment_stack
    )


FAKE_PULUMI = """#!/usr/bin/env bash
echo "$*" >> "$PULUMI_LOG"
case "$1 $2" in "preview --json") echo '{"steps": []}' ;; "stack history") echo '[]' ;; esac
"""


def run_deploy_step(step: dict, tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Runs the step's command as the job would, in this checkout, with a fake `pulumi` on PATH (no
    history, previews that destroy nothing) and this test run's interpreter in place of
    .venv/bin/python (the one `make venv` made, in CI and under make test). The gate's and a failing
    stack's handling: tests/test_deploy.py."""
    command = str(step["run"]).strip()
    assert DEPLOY_COMMAND.fullmatch(command), command
    bin_dir, log = install_fake(tmp_path, "pulumi", FAKE_PULUMI)
    env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "PULUMI_LOG": str(log), "PULUMI_ORG": "acme", "BEFORE_SHA": "", "HOME": str(tmp_path)}
    interpreter = command.replace(".venv/bin/python", shlex.quote(sys.executable), 1)
    result = subprocess.run(["bash", "-c", interpreter], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    return result, log.read_text().splitlines()


@pytest.mark.parametrize("job_name, environment_stack", deploy_jobs(load(PULUMI)).items())
def test_each_deploy_job_gates_and_deploys_its_environment_then_every_committed_team_stack_of_it(workflow, tmp_path, job_name, environment_stack):
    """docs/teams.md "Add a team": team stacks are deployed by the environment's deployer from main: the
    same job, its identities and guards, after the environment stack they read; every committed
    team stack of that environment; each stack's `pulumi preview --json` judged by the destroy gate
    before its `pulumi up` with the policy pack (docs/ci.md "Deletions and replacements")."""
    job = workflow["jobs"][job_name]
    assert (PROJECT_DIR / f"Pulumi.{environment_stack}.yaml").exists(), (
        f"Pulumi.{environment_stack}.yaml is gone, but .github/workflows/pulumi.yml still deploys it in {job_name}: "
        "remove that job (and its preview job) with the environment, or restore the stack file"
    )
    step = deploy_step(job)
    command = DEPLOY_COMMAND.fullmatch(str(step["run"]).strip())
    assert command and command.group("environment") == environment_stack, step["run"]
    assert step["env"] == {"PULUMI_ORG": "${{ vars.PULUMI_ORG }}", "BEFORE_SHA": "${{ github.event.before }}"}
    assert "if" not in step and "continue-on-error" not in step
    [checkout] = [s for s in steps(job) if action(s) == "actions/checkout"]
    assert checkout["with"]["fetch-depth"] == 0, "the gate reads the commits since each stack's last deployment"
    result, calls = run_deploy_step(step, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = []
    for stack in [environment_stack, *committed_team_stacks(environment_stack)]:
        expected += [
            f"stack history --json --page-size 100 --stack acme/{stack}",
            f"preview --json --non-interactive --stack acme/{stack}",
            f"up --yes --non-interactive --diff --policy-pack policy --stack acme/{stack}",
        ]
    assert calls == expected


def test_every_committed_stack_is_deployed_by_ci(workflow):
    """Every environment stack of this checkout has its deploy job, and every team stack is
    deployed by the job of the environment it names."""
    deployed = set(deploy_jobs(workflow).values())
    for stack in list_stacks(PROJECT_DIR):
        environment = str(read_stack_values(PROJECT_DIR, stack).get("gpu-platform:environmentStack") or "").split("/")[-1]
        assert (environment or stack) in deployed, f"{stack}: {'its environment ' + environment if environment else 'it'} has no deploy job"


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


# --- The identities the workflows ask for are the ones the bootstrap creates ---------------------------------


def test_every_variable_the_workflows_read_is_a_bootstrap_output(ci_outputs):
    """The delivery and drift workflows, against this checkout's bootstrap; a workflow with an
    identity of its own (the manually started acceptance test) documents its own variables."""
    used = {v for path in (PULUMI, DRIFT) for v in re.findall(r"vars\.([A-Z0-9_]+)", path.read_text())}
    assert used and used <= set(ci_outputs["githubVariables"]), used - set(ci_outputs["githubVariables"])


def test_github_environments_match_the_bootstrap_subjects(workflow, drift, ci_outputs):
    """Each job's OIDC subject is one this checkout's bootstrap trusts for that job's identities: its
    GitHub environment where it runs in one, else its ref (deploy) or the pull request (preview)."""
    subjects = ci_outputs["subjects"]
    repo = read_stack_values(PROJECT_DIR / "bootstrap", "ci")["gpu-platform-bootstrap:github"]["repository"]
    assert set(subjects) == set(ci_environments())
    for environment in subjects:
        deploy, preview = workflow["jobs"][deploy_job(workflow, environment)], workflow["jobs"][preview_job(workflow, environment)]
        expected_deploy = f"repo:{repo}:environment:{environment_name(deploy)}" if environment_name(deploy) else f"repo:{repo}:ref:refs/heads/main"
        expected_preview = f"repo:{repo}:environment:{environment_name(preview)}" if environment_name(preview) else f"repo:{repo}:pull_request"
        assert (subjects[environment]["deploy"], subjects[environment]["preview"]) == (expected_deploy, expected_preview), environment
    assert {s["drift"] for s in subjects.values()} == {f"repo:{repo}:environment:{environment_name(drift['jobs']['drift'])}"}


def test_the_shipped_bootstrap_trusts_the_shipped_jobs(bootstrap_outputs):
    """acme's bootstrap as shipped: prod's jobs in their protected GitHub environments, dev's by ref
    and pull request (the subjects the workflow's jobs above must present)."""
    subjects, repo = bootstrap_outputs["subjects"], "acme/gpu-platform"
    assert subjects["prod"] == {**subjects["prod"], "deploy": f"repo:{repo}:environment:production", "preview": f"repo:{repo}:environment:production-preview"}
    assert (subjects["dev"]["deploy"], subjects["dev"]["preview"]) == (f"repo:{repo}:ref:refs/heads/main", f"repo:{repo}:pull_request")


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
