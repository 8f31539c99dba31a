"""What the workflow tests share (test_workflow.py, test_workflow_deploy.py,
test_workflow_previews.py): the workflows' paths and the actions they name, the workflows parsed
(`workflow`: pulumi.yml, `drift`: drift.yml) and the bootstrap's outputs as module-scoped fixtures,
this checkout's CI environments (its bootstrap's entries), and the helpers that read a job: its
steps, identities, conditions, and the preview and deploy job of each environment.

The fixtures are imported by each test module that uses them (pytest finds a fixture in the test's
own module); each only parses a workflow or reads a session-scoped bootstrap run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from config.stack_files import PROJECT_DIR, read_stack_values

WORKFLOWS_DIR = PROJECT_DIR / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS_DIR.glob("*.yml")) + sorted(WORKFLOWS_DIR.glob("*.yaml"))
PULUMI = WORKFLOWS_DIR / "pulumi.yml"
DRIFT = WORKFLOWS_DIR / "drift.yml"
PULUMI_ACTION = "pulumi/actions"
PULUMI_AUTH = "pulumi/auth-actions"
GOOGLE_AUTH = "google-github-actions/auth"
SETUP_GCLOUD = "google-github-actions/setup-gcloud"
TEAM_TOKEN = "urn:pulumi:token-type:access_token:team"


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
