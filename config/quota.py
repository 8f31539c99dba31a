"""GPU quota across an environment: every tenant's GPU limits added up per quota scope, GPU class,
region and kind, against `nodeProvider.gpuQuota` and `preemptibleGpuQuota`.

Compute Engine's GPU quotas are per project, region and kind. `gpuQuota` is the regional on-demand
quota for a GPU type (NVIDIA_<GPU>_GPUS) that each GCP project running tenant VMs has of its own:
on-demand VMs draw on it, VMs consuming a reservation too ("Projects are charged quota for both
creation and consumption of the shared reservation":
https://cloud.google.com/compute/docs/instances/reservations-shared), and a reservation draws on
its owner project's at creation. `preemptibleGpuQuota` is the preemptible quota
(PREEMPTIBLE_NVIDIA_<GPU>_GPUS), which Spot and Flex-start VMs draw on, each falling back to the
standard quota where the project has no preemptible quota (https://cloud.google.com/compute/docs/instances/provisioning-models,
its quota row: "When you create a Flex-start VM, preemptible quota is consumed. If your project lacks
preemptible quota, then standard quota is consumed", the same for Spot; "you must request preemptible
quota" for Flex-start and Spot, https://cloud.google.com/ai-hypercomputer/docs/consumption-models and
Cluster Director's "Obtain capacity", https://cloud.google.com/cluster-director/docs/obtain-capacity).
Future reservations (`reservationBound`: calendar mode, or AI Hypercomputer) draw on no quota of the
team's: "No quota is charged" in calendar mode, and for the others "Quota is automatically increased
before capacity is delivered" (the same page), so neither a bound reservation nor the VMs that consume
it count here, and a GPU Google does not sell on demand needs no `gpuQuota`
(config/node_provider.py). Tenants that share the environment's (host) project add up against it together; a
tenant with a project of its own counts against that project's quota alone. A "quota scope" names
that project. Each pool already fits the quota on its own (`check_tenant`); this is the sum the
platform could ask for when every team is busy at once. Past the quota Compute Engine refuses new
VMs and the teams' pods stay pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pydantic import ValidationError

from . import capacity as cap
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
# A team's own existing project has quotas of its own, which no stack file states: the
# environment's numbers are an assumption there, never shown as "ok".
OWN_PROJECT = "assumed; check the project's quota"
ON_DEMAND_KIND = "on-demand GPUs"
PREEMPTIBLE_KIND = "preemptible GPUs"
RESERVED_KIND = "reservations"
# The quota each kind draws on, as the quota page names it.
KIND_QUOTA = {ON_DEMAND_KIND: "NVIDIA_<GPU>_GPUS", PREEMPTIBLE_KIND: "PREEMPTIBLE_NVIDIA_<GPU>_GPUS", RESERVED_KIND: "NVIDIA_<GPU>_GPUS (the owner's)"}
# When quota is a warning and when an error: the plan prints it under its quota table, the docs say it.
QUOTA_RULES = (
    "One pool above the quota of its capacity options (nodeProvider.gpuQuota, and preemptibleGpuQuota for Spot and "
    "Flex-start) is an error in every environment. The pools of all tenants in one project together above a quota "
    "follow nodeProvider.quotaPolicy: warn (a warning; the default in dev and staging) or fail (an error, nothing "
    "registered; the default in prod)."
)


def quota_key(line: QuotaLine) -> str:
    """The config key a quota line is judged by."""
    return f"nodeProvider.{'preemptibleGpuQuota' if line.kind == PREEMPTIBLE_KIND else 'gpuQuota'}.{line.gpu}"


@dataclass(frozen=True)
class QuotaLine:
    scope: str  # which project's quota
    gpu: str
    region: str
    quota: int  # nodeProvider.gpuQuota / preemptibleGpuQuota: what each project has, or is to be granted
    asked: int  # the tenants' GPU limits (or the reserved GPUs) together
    tenants: tuple[str, ...]  # "<name> (<source>): <n>"
    # The project is one Pulumi creates: Compute Engine gives a new project no GPU quota, so it has
    # none (0) until an increase is requested and granted.
    new_project: str | None = None
    kind: str = ON_DEMAND_KIND
    # GPUs of another line drawing on the same quota (on-demand and reservations in one project).
    shared: int = 0
    # A team's own existing project: the quota is an assumption (OWN_PROJECT).
    own_project: str | None = None

    @property
    def exceeded(self) -> bool:
        return self.asked + self.shared > self.quota

    @property
    def state(self) -> str:
        """As the plan shows it: "ok" only against a quota the stack states for the project, never for
        a project that has no quota yet or whose quota is its own."""
        if self.new_project:
            return f"EXCEEDED; {NEW_PROJECT}" if self.exceeded else NEW_PROJECT
        if self.own_project:
            return f"EXCEEDED if so; {OWN_PROJECT}" if self.exceeded else OWN_PROJECT
        return "EXCEEDED" if self.exceeded else "ok"

    @property
    def request_url(self) -> str | None:
        project = self.new_project or self.own_project
        return QUOTA_PAGE.format(project=project) if project else None

    def message(self) -> str:
        shared = f", beside {self.shared} GPUs of the same quota" if self.shared else ""
        return (
            f"GPU quota: the tenants of {self.scope} may ask for {self.asked} {self.gpu} {self.kind} together "
            f"({', '.join(self.tenants)}{shared}); the quota in {self.region} is {self.quota}"
        )


def quota_scope(tenant: Tenant, facts: EnvironmentFacts) -> str:
    """Whose quota a tenant's VMs count against: the host project's (isolation: shared), or its
    own project's (config/isolation.py placement)."""
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
    if where is None or where.shared:
        return f"host project {facts.project}"
    return f"project {where.project}"


def pool_kinds(pool, facts: EnvironmentFacts) -> tuple[str, ...]:
    """The quota kinds a pool's options draw on (a pool may be served by each, so its maxGpus counts
    against each): on-demand for on-demand and reservation entries, preemptible for Spot and
    Flex-start where a preemptible quota is set, else on-demand; none for a future reservation's
    slice (reservationBound: Google charges the team no quota for it, module docstring)."""
    kinds = []
    for entry in pool.options:
        kind = cap.kind_of(entry)
        if kind == cap.RESERVATION and _bound(entry.name, facts):
            continue
        if kind in (cap.SPOT, cap.FLEX_START) and facts.preemptible_gpu_quota.get(pool.gpu):
            kinds.append(PREEMPTIBLE_KIND)
        else:
            kinds.append(ON_DEMAND_KIND)
    return tuple(dict.fromkeys(kinds))


def quota_lines(entries: Iterable[TenantEntry], facts: EnvironmentFacts) -> tuple[QuotaLine, ...]:
    """One line per (scope, GPU class, kind) any tenant or reservation asks for, in first-asked order."""
    asked: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    created: dict[str, str] = {}
    own: dict[str, str] = {}
    for entry in entries:
        scope = quota_scope(entry.tenant, facts)
        where = placement(entry.tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        if where is not None and where.create:
            created[scope] = where.project
        elif where is not None and not where.shared:
            own[scope] = where.project
        for pool in entry.tenant.gpu_pools:
            for kind in pool_kinds(pool, facts):
                asked.setdefault((scope, pool.gpu, kind), []).append((f"{entry.tenant.name} ({entry.source})", pool.max_gpus))
    for reservation in facts.reservations:
        if reservation.bound is True:
            continue  # a future reservation: no quota charged (module docstring)
        scope = f"host project {facts.project}" if reservation.project == facts.project else f"project {reservation.project}"
        asked.setdefault((scope, reservation.gpu, RESERVED_KIND), []).append(
            (f"reservation {reservation.name} ({reservation.count} × {reservation.machine_type})", reservation.count * reservation.gpu_count)
        )
    totals = {key: sum(n for _, n in claims) for key, claims in asked.items()}
    lines = []
    for (scope, gpu, kind), claims in asked.items():
        per_tenant: dict[str, int] = {}
        for who, n in claims:
            per_tenant[who] = per_tenant.get(who, 0) + n
        quota = facts.preemptible_gpu_quota.get(gpu, 0) if kind == PREEMPTIBLE_KIND else facts.gpu_quota.get(gpu, 0)
        other = {ON_DEMAND_KIND: RESERVED_KIND, RESERVED_KIND: ON_DEMAND_KIND}.get(kind)
        lines.append(
            QuotaLine(
                scope=scope,
                gpu=gpu,
                region=facts.region,
                quota=quota,
                asked=sum(per_tenant.values()),
                tenants=tuple(f"{who}: {n}" for who, n in per_tenant.items()),
                new_project=created.get(scope),
                kind=kind,
                shared=totals.get((scope, gpu, other), 0) if other else 0,
                own_project=own.get(scope) if scope not in created else None,
            )
        )
    return tuple(lines)


def _bound(name: str, facts: EnvironmentFacts) -> bool:
    reservation = facts.reservation(name)
    return reservation is not None and reservation.bound is True


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
