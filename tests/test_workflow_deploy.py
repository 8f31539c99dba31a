"""The delivery workflow (.github/workflows/pulumi.yml): who may change which environment. Each
preview and deploy job has the identities of what it may change, derived from this checkout's
bootstrap entry of the environment it previews or deploys, never from a list of job names; tests
run before anything is previewed or deployed; each environment is deployed only from main in its
GitHub environment, the deploy step executed with a fake `pulumi`: the environment stack, then
every committed team stack of it, each behind the destroy gate; the variables and OIDC subjects the
workflows use are the ones the bootstrap creates and trusts. Shared helpers: workflow_support.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fake_commands import install_fake
from workflow_support import (  # noqa: F401 (fixtures)
    DRIFT, GOOGLE_AUTH, PULUMI, PULUMI_ACTION, PULUMI_AUTH, SETUP_GCLOUD, TEAM_TOKEN, action,
    bootstrap_outputs, ci_environments, condition, deploy_job, deploy_jobs, deploy_step, drift,
    environment_name, google_identity, index_of, is_true, job_text, load, only_on_push_to_main,
    permissions, preview_job, pulumi_jobs, pulumi_steps, pulumi_team, step_of, steps, triggers,
    workflow,
)

from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values


@pytest.fixture(scope="module")
def ci_outputs(committed_bootstrap_run) -> dict:
    """What this checkout's bootstrap grants (its subjects, its GitHub variables)."""
    return committed_bootstrap_run.outputs


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
