"""Everything the run needs, checked before anything is created: a run that cannot finish must
not start a GKE cluster. What is missing is reported in one line."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Callable

from config.stack_files import PROJECT_DIR

from . import shell
from .gce import quota_problem
from .settings import Settings

TOOLS = (
    ("pulumi", "the Pulumi CLI (https://www.pulumi.com/docs/iac/download-install/)"),
    ("gcloud", "the gcloud CLI (https://cloud.google.com/sdk/docs/install)"),
    ("gke-gcloud-auth-plugin", "gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)"),
    ("kubectl", "kubectl (gcloud components install kubectl)"),
)


def required_pulumi_version() -> tuple[int, ...]:
    """The minimum of Pulumi.yaml's requiredPulumiVersion (">=3.187.0")."""
    text = (PROJECT_DIR / "Pulumi.yaml").read_text()
    found = re.search(r'requiredPulumiVersion:\s*"?>=\s*(\d+)\.(\d+)\.(\d+)', text)
    return tuple(int(p) for p in found.groups()) if found else (0,)


def pulumi_version_problem(output: str, minimum: tuple[int, ...]) -> str | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", output)
    have = tuple(int(p) for p in found.groups()) if found else None
    if have is None or have < minimum:
        want = ".".join(map(str, minimum))
        return f"the Pulumi CLI ≥ {want} (found {output.strip() or 'no version'}; Pulumi.yaml requiredPulumiVersion)"
    return None


def missing_tools(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    return [why for tool, why in TOOLS if which(tool) is None]


def missing_credentials(succeeds: Callable[[list[str]], bool] = shell.succeeds) -> list[str]:
    missing = []
    if not succeeds(["gcloud", "auth", "print-access-token", "--quiet"]):
        missing.append("gcloud credentials (gcloud auth login, or Workload Identity Federation in CI)")
    if not succeeds(["gcloud", "auth", "application-default", "print-access-token", "--quiet"]):
        missing.append("Application Default Credentials for Pulumi's Google provider (gcloud auth application-default login)")
    return missing


def missing_project_access(settings: Settings, gcloud_for: Callable[[str], shell.Gcloud] = shell.Gcloud) -> list[str]:
    """Read access to every project of the run, and free GPU quota where the tenant's VM runs
    (the team's project in project mode: quota is per project)."""
    found = []
    for project in dict.fromkeys((settings.project, settings.vm_project)):
        gcloud = gcloud_for(project)
        try:
            region = gcloud.json("compute", "regions", "describe", settings.region)
            project_info = gcloud.json("compute", "project-info", "describe")
        except (shell.CommandError, subprocess.TimeoutExpired) as e:
            found.append(f"read access to project {project}'s Compute Engine quotas with the Compute Engine API enabled ({e})")
            continue
        problem = quota_problem(region, project_info, settings.gpu, settings.gpus_per_node) if project == settings.vm_project else None
        if problem:
            found.append(f"in project {project}: {problem}")
    return found


def missing(settings: Settings) -> list[str]:
    """Everything missing, in the order a user fixes it; later checks need the earlier ones."""
    if not settings.project:
        return ["PROJECT=<a GCP project id with billing and GPU quota>"]
    found = missing_tools()
    if shutil.which("pulumi"):
        try:
            version = shell.run(["pulumi", "version"], env={"PULUMI_SKIP_UPDATE_CHECK": "true"}, timeout=60)
        except (shell.CommandError, OSError, subprocess.TimeoutExpired) as e:
            version = str(e)
        problem = pulumi_version_problem(version, required_pulumi_version())
        if problem:
            found.append(problem)
    if shutil.which("gcloud"):
        found += missing_credentials()
    if not found:
        found += missing_project_access(settings)
    return found


def skip_line(needs: list[str]) -> str:
    return "acceptance: skipped, it needs: " + "; ".join(needs)
