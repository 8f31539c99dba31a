"""The GitHub Actions workflow (.github/workflows/pulumi.yml): previews with the policy pack on pull
requests, deploys dev on main and prod only behind the protected `production` environment, with
keyless Google authentication and every action pinned to a major version. The changed-stacks step
is executed against a scratch git repository."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from config.stack_files import PROJECT_DIR, list_stacks

WORKFLOW = PROJECT_DIR / ".github" / "workflows" / "pulumi.yml"
PULUMI_ACTION = "pulumi/actions"
AUTH_ACTION = "google-github-actions/auth"
SETUP_GCLOUD = "google-github-actions/setup-gcloud"
MAJOR_TAG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@v\d+$")


@pytest.fixture(scope="module")
def workflow() -> dict:
    document = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(document, dict)
    return document


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    on = workflow.get("on", workflow.get(True))
    assert isinstance(on, dict), "triggers must be a mapping"
    return on


def steps(job: dict) -> list[dict]:
    return list(job.get("steps") or [])


def action(step: dict) -> str:
    return str(step.get("uses", "")).split("@", 1)[0]


def index_of(job: dict, name: str) -> int | None:
    return next((i for i, s in enumerate(steps(job)) if action(s) == name), None)


def pulumi_jobs(workflow: dict) -> dict[str, dict]:
    return {name: job for name, job in workflow["jobs"].items() if index_of(job, PULUMI_ACTION) is not None}


def pulumi_steps(workflow: dict, command: str) -> list[tuple[str, dict, dict]]:
    return [
        (name, job, step)
        for name, job in workflow["jobs"].items()
        for step in steps(job)
        if action(step) == PULUMI_ACTION and (step.get("with") or {}).get("command") == command
    ]


def is_true(value) -> bool:
    return value is True or str(value).lower() == "true"


def permissions(workflow: dict, job: dict) -> dict:
    granted = job.get("permissions", workflow.get("permissions"))
    return granted if isinstance(granted, dict) else {}


def only_on_push_to_main(job: dict) -> bool:
    condition = re.sub(r"\s+", " ", str(job.get("if", "")))
    return "github.event_name == 'push'" in condition and "github.ref == 'refs/heads/main'" in condition and "||" not in condition


def environment_name(job: dict) -> str | None:
    environment = job.get("environment")
    return environment.get("name") if isinstance(environment, dict) else environment


# --- Triggers, pins, permissions -----------------------------------------------------------------


def test_triggers(workflow):
    on = triggers(workflow)
    assert "pull_request" in on
    assert "main" in on["push"]["branches"]


def test_every_action_is_pinned_to_a_major_version(workflow):
    uses = [s["uses"] for job in workflow["jobs"].values() for s in steps(job) if "uses" in s]
    assert any(action({"uses": u}) == PULUMI_ACTION for u in uses)
    for ref in uses:
        if not ref.startswith("./"):
            assert MAJOR_TAG.match(ref), f"{ref}: pin third-party actions to a major tag like @v6"
    assert {u for u in uses if u.startswith(PULUMI_ACTION + "@")} == {"pulumi/actions@v6"}


def test_workflow_permissions_are_read_only_by_default(workflow):
    top = workflow.get("permissions")
    assert isinstance(top, dict) and set(top.values()) <= {"read", "none"}, top
    for name, job in workflow["jobs"].items():
        granted = permissions(workflow, job)
        writes = {k for k, v in granted.items() if v == "write"}
        if name in pulumi_jobs(workflow):
            assert "id-token" in writes, f"{name}: needs id-token: write for Workload Identity Federation"
        else:
            assert writes == set(), f"{name} does not talk to GCP or the PR, yet has {writes}"
        assert job.get("permissions") != "write-all"


def test_tests_run_before_anything_is_previewed_or_deployed(workflow):
    test_job = workflow["jobs"]["test"]
    python = next(s for s in steps(test_job) if action(s) == "actions/setup-python")
    assert str(python["with"]["python-version"]) == "3.11"
    assert any("make test" in str(s.get("run", "")) for s in steps(test_job))
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


# --- Google authentication -----------------------------------------------------------------------


def test_no_service_account_keys_anywhere(workflow):
    text = WORKFLOW.read_text()
    assert "credentials_json" not in text and "service_account_key" not in text
    for job in workflow["jobs"].values():
        for step in steps(job):
            assert "credentials_json" not in (step.get("with") or {})


@pytest.mark.parametrize("tool", [AUTH_ACTION, SETUP_GCLOUD])
def test_every_pulumi_job_authenticates_and_installs_the_auth_plugin_first(workflow, tool):
    jobs = pulumi_jobs(workflow)
    assert set(jobs) >= {"preview", "up-dev", "up-prod"}
    for name, job in jobs.items():
        position = index_of(job, tool)
        assert position is not None and position < index_of(job, PULUMI_ACTION), f"{name}: {tool} must run before pulumi"
        settings = steps(job)[position].get("with") or {}
        if tool == AUTH_ACTION:
            assert settings.get("workload_identity_provider") == "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}", name
            assert settings.get("service_account") == "${{ vars.GCP_SERVICE_ACCOUNT }}", name
        else:
            components = [c.strip() for c in str(settings.get("install_components", "")).split(",")]
            assert "gke-gcloud-auth-plugin" in components, name


def test_every_pulumi_step_gets_the_access_token_from_secrets(workflow):
    for command in ("preview", "up"):
        for name, _, step in pulumi_steps(workflow, command):
            assert (step.get("env") or {}).get("PULUMI_ACCESS_TOKEN") == "${{ secrets.PULUMI_ACCESS_TOKEN }}", name
            assert str(step["with"]["stack-name"]).startswith("${{ vars.PULUMI_ORG }}/"), name


# --- Previews ------------------------------------------------------------------------------------


def test_previews_comment_diff_and_run_the_policy_pack(workflow):
    previews = pulumi_steps(workflow, "preview")
    assert previews, "no pulumi preview step"
    for name, job, step in previews:
        settings = step["with"]
        assert is_true(settings.get("comment-on-pr")), name
        assert is_true(settings.get("diff")), name
        assert settings.get("policyPacks") == "policy", name
        assert settings["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}", name
        assert permissions(workflow, job).get("pull-requests") == "write", name
        assert "pull_request" in str(job.get("if", "")), f"{name}: previews run for pull requests"
        assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}", name


def test_policy_pack_also_guards_every_update(workflow):
    for name, _, step in pulumi_steps(workflow, "up"):
        assert step["with"].get("policyPacks") == "policy", name


# --- Deployments ---------------------------------------------------------------------------------


def test_only_dev_and_prod_are_deployed_and_only_from_main(workflow):
    ups = pulumi_steps(workflow, "up")
    stacks = sorted(str(step["with"]["stack-name"]).rsplit("/", 1)[-1] for _, _, step in ups)
    assert stacks == ["dev", "prod"]
    for name, job, _ in ups:
        assert only_on_push_to_main(job), f"{name}: `pulumi up` only on a push to main"
        assert "matrix" not in (job.get("strategy") or {}), name


def test_prod_is_deployed_only_behind_the_production_environment(workflow):
    for name, job, step in pulumi_steps(workflow, "up"):
        stack = str(step["with"]["stack-name"]).rsplit("/", 1)[-1]
        if stack == "prod":
            assert environment_name(job) == "production", name
            needs = job.get("needs", [])
            assert "up-dev" in ([needs] if isinstance(needs, str) else needs), "prod follows a successful dev deployment"
        else:
            assert environment_name(job) != "production", name
    jobs_deploying = {name for name, _, _ in pulumi_steps(workflow, "up")}
    assert len(jobs_deploying) == 2, "dev and prod are deployed by separate jobs"


# --- The changed-stacks step, executed ----------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _changed_stacks(workflow: dict, tmp_path: Path, change) -> list[str]:
    script = next(s for s in steps(workflow["jobs"]["changes"]) if s.get("id") == "changes")["run"]
    repo = tmp_path / "repo"
    repo.mkdir()
    for stack in list_stacks(PROJECT_DIR):
        (repo / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
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
    subprocess.run(
        ["bash", "-c", script],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "BASE_SHA": base, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path)},
    )
    lines = [line for line in output.read_text().splitlines() if line.startswith("stacks=")]
    assert len(lines) == 1, output.read_text()
    return json.loads(lines[0].split("=", 1)[1])


def _touch(name: str):
    return lambda repo: (repo / name).write_text((repo / name).read_text() + "# changed\n")


@pytest.mark.parametrize(
    "change, expected",
    [
        (_touch("Pulumi.prod.yaml"), ["prod"]),
        (_touch("Pulumi.team-vision-dev.yaml"), ["team-vision-dev"]),
        (lambda repo: (repo / "Pulumi.team-nlp-dev.yaml").write_text("config: {}\n"), ["team-nlp-dev"]),
        (lambda repo: (repo / "Pulumi.prod.yaml").unlink(), []),
        (_touch("README.md"), []),
        (_touch("__main__.py"), sorted(list_stacks(PROJECT_DIR))),
        (_touch("Pulumi.yaml"), sorted(list_stacks(PROJECT_DIR))),
    ],
)
def test_changed_stacks(workflow, tmp_path, change, expected):
    assert _changed_stacks(workflow, tmp_path, change) == expected
