"""GPU quota across an environment: every tenant's GPU limits added up per quota scope, GPU class
and region, against `nodeProvider.gpuQuota`.

`gpuQuota` is the regional quota for a GPU type that each GCP project running tenant VMs has of its
own (Compute Engine quotas are per project and region): tenants that share the environment's (host)
project add up against it together; a tenant with a project of its own counts against that
project's quota alone. A "quota scope" names that project. Each pool already fits the
quota on its own (`check_tenant`); this is the sum the platform could ask for when every team is
busy at once. Past the quota Compute Engine refuses new VMs and the teams' pods stay pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pydantic import ValidationError

from .facts import EnvironmentFacts
from .isolation import placement
from .stack_files import StackFileError, list_stacks, read_stack_values, structured
from .tenant import Tenant

NS = "gpu-platform"
POLICIES = ("warn", "fail")


@dataclass(frozen=True)
class TenantEntry:
    """A tenant of the environment and where it is declared."""

    tenant: Tenant
    source: str  # "tenants[0]", "stack team-vision-dev"


# Where a project's quotas are seen and an increase is requested (Google Cloud console, "Quotas &
# System Limits"; https://cloud.google.com/docs/quotas/help/request_increase).
QUOTA_PAGE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
NEW_PROJECT = "new project: request quota"
# When quota is a warning and when an error: the plan prints it under its quota table, the docs say it.
QUOTA_RULES = (
    "One pool above nodeProvider.gpuQuota is an error in every environment. The pools of all tenants in one "
    "project together above it follow nodeProvider.quotaPolicy: warn (a warning; the default in dev and staging) "
    "or fail (an error, nothing registered; the default in prod)."
)


@dataclass(frozen=True)
class QuotaLine:
    scope: str  # which project's quota
    gpu: str
    region: str
    quota: int  # nodeProvider.gpuQuota: what each project has, or is to be granted
    asked: int  # the tenants' GPU limits together
    tenants: tuple[str, ...]  # "<name> (<source>): <n>"
    # The project is one Pulumi creates: Compute Engine gives a new project no GPU quota, so it has
    # none (0) until an increase is requested and granted.
    new_project: str | None = None

    @property
    def exceeded(self) -> bool:
        return self.asked > self.quota

    @property
    def state(self) -> str:
        """As the plan shows it: never "ok" for a project that has no quota yet."""
        if self.new_project:
            return f"EXCEEDED; {NEW_PROJECT}" if self.exceeded else NEW_PROJECT
        return "EXCEEDED" if self.exceeded else "ok"

    @property
    def request_url(self) -> str | None:
        return QUOTA_PAGE.format(project=self.new_project) if self.new_project else None

    def message(self) -> str:
        return (
            f"GPU quota: the tenants of {self.scope} may ask for {self.asked} {self.gpu} GPUs together "
            f"({', '.join(self.tenants)}); the quota in {self.region} is {self.quota}"
        )


def quota_scope(tenant: Tenant, facts: EnvironmentFacts) -> str:
    """Whose quota a tenant's VMs count against: the host project's (isolation: shared), or its
    own project's (config/isolation.py placement)."""
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
    if where is None or where.shared:
        return f"host project {facts.project}"
    return f"project {where.project}"


def quota_lines(entries: Iterable[TenantEntry], facts: EnvironmentFacts) -> tuple[QuotaLine, ...]:
    """One line per (scope, GPU class) any tenant asks for, in first-asked order."""
    asked: dict[tuple[str, str], list[tuple[str, int]]] = {}
    created: dict[str, str] = {}
    for entry in entries:
        scope = quota_scope(entry.tenant, facts)
        where = placement(entry.tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        if where is not None and where.create:
            created[scope] = where.project
        for pool in entry.tenant.gpu_pools:
            asked.setdefault((scope, pool.gpu), []).append((f"{entry.tenant.name} ({entry.source})", pool.max_gpus))
    lines = []
    for (scope, gpu), claims in asked.items():
        per_tenant: dict[str, int] = {}
        for who, n in claims:
            per_tenant[who] = per_tenant.get(who, 0) + n
        lines.append(
            QuotaLine(
                scope=scope,
                gpu=gpu,
                region=facts.region,
                quota=facts.gpu_quota.get(gpu, 0),
                asked=sum(per_tenant.values()),
                tenants=tuple(f"{who}: {n}" for who, n in per_tenant.items()),
                new_project=created.get(scope),
            )
        )
    return tuple(lines)


def team_stack_tenants(project_dir: Path, *, environment_stack_name: str, exclude: str | None = None) -> list[TenantEntry]:
    """Tenants of the team stacks in this repo that use the environment (their own problems are
    reported by their own plans; a tenant that does not parse is left out here)."""
    entries = []
    for other in list_stacks(project_dir):
        if other == exclude:
            continue
        try:
            values = read_stack_values(project_dir, other)
        except StackFileError:
            continue
        reference = str(values.get(f"{NS}:environmentStack") or "")
        raw = structured(values.get(f"{NS}:tenant"))
        if reference.split("/")[-1] != environment_stack_name or not isinstance(raw, dict) or not raw:
            continue
        try:
            entries.append(TenantEntry(Tenant.model_validate(raw), f"stack {other}"))
        except ValidationError:
            continue
    return entries
