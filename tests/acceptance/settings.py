"""What one acceptance run deploys: its settings, its unique names, and the environment stack's
configuration, built here and validated by the program's own loader (`config.stack.load_stack`)
before anything is created.

The stack is a `dev` environment (zonal cluster, no deletion protection) with exactly one tenant,
in project mode (the default, as in prod) when a team project is given (TEAM_PROJECT, an existing
project: its network, node identity, VMs and disks go there), else shared (in the run's project).
Every name that GCP keeps globally or per project carries the run id, so runs never collide with
each other or with a real environment in the same project, and the leftover scan can tell this
run's objects from everything else.
"""

from __future__ import annotations

import atexit
import functools
import re
import secrets
import shutil
import string
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from components.tenant_network import tenant_resource_name
from components.tenant_vcluster import host_namespace
from config.catalog import load_catalog
from config.isolation import placement
from config.monitoring import DEFAULT_SCRAPE_INTERVAL
from config.reliability import GPU_TIMEOUT
from config.stack import NS, EnvironmentStack, load_stack
from config.stack_files import PROJECT_DIR, project_defaults
from tools.plan_costs import NOT_INCLUDED, environment_costs

from . import capacity_runs

ENVIRONMENT = "dev"  # zonal cluster, no deletion protection: cheap and destroyable
PROJECT_MODE, SHARED_MODE = "project", "shared"
RUN_LABEL = "gpu-platform-acceptance"  # GCP label on the cluster and its nodes: value = run id
TENANT_CIDR = "10.160.0.0/22"  # the run's own cluster and VPCs: nothing else to overlap
RUN_ID_LENGTH = 6
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
# A Compute Engine resource name (RFC 1035): https://cloud.google.com/compute/docs/naming-resources
RESOURCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

# How long one run keeps what it deploys, for its cost estimate (docs/acceptance.md "Acceptance test" quotes
# `cost_estimate` for the defaults): `pulumi up` of a fresh environment ≈ 20 min, the checks
# ≈ 20 min, `pulumi destroy` ≈ 15 min; the GPU VM lives from the Job's start to its idle deletion.
ENVIRONMENT_HOURS = 1.0
GPU_VM_MINUTES = 15
# The restore drill keeps the environment up longer: a backup, the namespace deleted, a restore
# and the control plane back take about 30 minutes. Backup for GKE's own charges (per protected
# pod and per GiB of backup) are not in the catalog and not included.
RESTORE_DRILL_HOURS = 0.5
# The watchdog drill: a GPU VM for its pod (boot, the GPU offered, then the pool's gpuTimeout of
# 10 minutes and the watchdog's polls: tests/acceptance/watchdog_drill.py, and the VM's deletion),
# and the environment up that much longer.
WATCHDOG_DRILL_GPU_VM_MINUTES = 25
WATCHDOG_DRILL_HOURS = 0.5


@dataclass(frozen=True)
class Settings:
    """What the user chooses (make variables; docs/acceptance.md "Acceptance test")."""

    project: str
    team_project: str = ""  # an existing project for the tenant (project mode)
    isolation: str = ""  # "project" | "shared" | "": project with a team project, else shared
    region: str = "us-central1"
    zones: tuple[str, ...] = ("us-central1-a", "us-central1-b")
    gpu: str = "nvidia-tesla-t4"
    gpu_quota: int = 1  # the regional quota put in nodeProvider.gpuQuota
    gpus_per_node: int = 1
    backend: str = ""  # empty: a file backend in the run directory
    idle_margin_seconds: int = 600  # VM deleted within idleAfter plus this
    node_timeout_seconds: int = 1200  # a GPU node must register within this after the Job
    restore_drill: bool = False  # back up, delete the tenant's host namespace, restore, check (off by default)
    watchdog_drill: bool = False  # a GPU node made to lose its GPU, removed by the watchdog (off by default)
    warm_nodes: int = 0  # the GPU pool's warmNodes: 1 measures a pod's wait on a warm node
    stockout_drill: bool = False  # the pool's first option made to fail: the Job must get the next (off by default)
    flex_start: bool = False  # the pool's node from Flex-start (off by default)
    reservation: str = ""  # the pool's node from this existing reservation of the tenant's project
    # The reservation as the run found it (gcloud, before deploying; tests/acceptance/run.py).
    reservation_found: capacity_runs.Reservation | None = None

    @property
    def decoy_zone(self) -> str:
        """The stockout drill's decoy reservation's zone, where the Job is pinned: RESERVATION's (the
        next option is there alone), else the first of ZONES."""
        return self.reservation_found.zone if self.reservation_found is not None else self.zones[0]

    @property
    def mode(self) -> str:
        """The tenant's isolation: as asked, else project mode when there is a team project."""
        return self.isolation or (PROJECT_MODE if self.team_project else SHARED_MODE)

    @property
    def vm_project(self) -> str:
        """Where the tenant's VMs run, and so where the GPU quota must be."""
        return self.team_project if self.mode == PROJECT_MODE else self.project

    def problems(self) -> list[str]:
        """What is wrong with the settings themselves; the config loader checks the rest."""
        problems = []
        if not PROJECT_ID.match(self.project):
            problems.append(f"PROJECT={self.project!r} is not a GCP project id (6–30 characters of [a-z0-9-])")
        if self.isolation not in ("", PROJECT_MODE, SHARED_MODE):
            problems.append(f"ISOLATION={self.isolation!r}: allowed: project, shared, or empty (project with TEAM_PROJECT, else shared)")
        elif self.mode == PROJECT_MODE and not self.team_project:
            problems.append("ISOLATION=project needs TEAM_PROJECT=<an existing project for the tenant, other than PROJECT>")
        elif self.mode == SHARED_MODE and self.team_project:
            problems.append("TEAM_PROJECT is for ISOLATION=project; a shared tenant runs in PROJECT (leave TEAM_PROJECT out)")
        if self.team_project and not PROJECT_ID.match(self.team_project):
            problems.append(f"TEAM_PROJECT={self.team_project!r} is not a GCP project id (6–30 characters of [a-z0-9-])")
        elif self.team_project and self.team_project == self.project:
            problems.append("TEAM_PROJECT must differ from PROJECT: the tenant's project is not the environment's")
        if not self.zones:
            problems.append("ZONES is empty; give one or more zones of REGION, comma-separated")
        if self.gpus_per_node < 1 or self.gpu_quota < self.gpus_per_node:
            problems.append(f"GPU_QUOTA={self.gpu_quota} must be at least GPUS_PER_NODE={self.gpus_per_node} (≥ 1)")
        if self.idle_margin_seconds < 0 or self.node_timeout_seconds < 60:
            problems.append("IDLE_MARGIN must be ≥ 0 and NODE_TIMEOUT ≥ 60 seconds")
        if self.warm_nodes not in (0, 1):
            problems.append(f"WARM_NODES={self.warm_nodes}: allowed: 0 (the Job waits for a new VM) or 1 (for a warm node; the run's pool holds one node)")
        if self.warm_nodes and (self.stockout_drill or self.flex_start or self.reservation):
            problems.append("WARM_NODES=1 cannot be combined with STOCKOUT_DRILL, FLEX_START or RESERVATION: the Job would run on the warm node, not a new one")
        if self.reservation and not RESOURCE_NAME.match(self.reservation):
            problems.append(f"RESERVATION={self.reservation!r} is not a reservation name ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters)")
        return problems

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_run_id() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return secrets.choice(string.ascii_lowercase) + "".join(secrets.choice(alphabet) for _ in range(RUN_ID_LENGTH - 1))


def stack_name(run_id: str) -> str:
    return f"acceptance-{run_id}"


def stack_values(settings: Settings, run_id: str, machine_type: str | None = None) -> dict[str, Any]:
    """The stack's configuration, as a stack file would hold it. Minimal on purpose: every other
    value is the program's default, so the run deploys what a user's `dev` stack would.
    `machine_type`: the pool's machine type, which the stockout drill's decoy reservation reserves
    (load_run_stack finds it)."""
    values = {
        "pulumi:disable-default-providers": ["kubernetes", "gcp"],
        "gcp:project": settings.project,
        "gcp:region": settings.region,
        f"{NS}:environment": ENVIRONMENT,
        f"{NS}:cluster": {"name": f"gpu-acc-{run_id}", "labels": {RUN_LABEL: run_id}},
        f"{NS}:platform": {"roleIdPrefix": f"gpuPlatformAcc_{run_id}", "serviceAccountId": f"vcp-acc-{run_id}"},
        f"{NS}:nodeProvider": {
            "name": f"acc-{run_id}",
            "zones": list(settings.zones),
            "gpuTypes": [settings.gpu],
            "gpuQuota": {settings.gpu: settings.gpu_quota},
        },
        f"{NS}:tenants": [
            {
                "name": f"acc-{run_id}",
                # Project mode: the team's existing project. Shared: the run's own project (allowed
                # in dev, warned).
                "isolation": settings.mode,
                **({"gcpProject": settings.team_project} if settings.mode == PROJECT_MODE else {}),
                "network": {"cidr": TENANT_CIDR},
                # One node's worth of GPUs: the smoke Job needs one GPU, the pool may make one VM
                # (with WARM_NODES=1, that node is warm: it runs from the tenant's creation on).
                "gpuPools": [
                    {
                        "gpu": settings.gpu,
                        "maxGpus": settings.gpus_per_node,
                        "gpusPerNode": settings.gpus_per_node,
                        **({"warmNodes": settings.warm_nodes} if settings.warm_nodes else {}),
                    }
                ],
            }
        ],
    }
    # The capacity runs (tests/acceptance/capacity_runs.py): the pool's capacity list and what it names.
    options = capacity_runs.capacity(settings.stockout_drill, settings.flex_start, settings.reservation, run_id)
    if options is None:
        return values
    tenant = f"acc-{run_id}"
    values[f"{NS}:tenants"][0]["gpuPools"][0]["capacity"] = options
    provider = values[f"{NS}:nodeProvider"]
    if settings.flex_start:
        provider["flexStart"] = {"maxRunDuration": capacity_runs.FLEX_START_MAX_RUN}
    reservations = []
    if settings.stockout_drill:
        # An N1 host carries guest GPUs: the reservation names their type (machine types with GPUs built in do not).
        machine = load_catalog().machines.get(machine_type or "")
        gpu = settings.gpu if machine is not None and not machine.gpu else None
        decoy = capacity_runs.Reservation(capacity_runs.decoy_name(run_id), settings.decoy_zone, machine_type or "", 1, settings.vm_project, gpu)
        reservations.append(decoy.declared(tenant, 1))
    if settings.reservation_found is not None:
        reservations.append(settings.reservation_found.declared(tenant, 1))
    if reservations:
        provider["reservations"] = reservations
    return values


def load_run_stack(settings: Settings, run_id: str) -> EnvironmentStack:
    """The stack exactly as the program will load it (project defaults first, as the CLI does), beside
    no other stack file: the run's copy of the program has none of the checkout's (pulumi_stack.py
    NOT_COPIED), which are the user's. Raises config.errors.ConfigError naming every bad key."""
    values = {**project_defaults(PROJECT_DIR), **stack_values(settings, run_id, drill_machine_type(settings, run_id))}
    loaded = load_stack(values, stack=stack_name(run_id), project_dir=run_project_dir())
    assert isinstance(loaded, EnvironmentStack), "the acceptance stack is an environment stack"
    return loaded


def drill_machine_type(settings: Settings, run_id: str) -> str | None:
    """The machine type the stockout drill's decoy reserves: the one the run's pool gets without it
    in the decoy's zone (Settings.decoy_zone): its node type of the lowest NodeProvider cost there."""
    if not settings.stockout_drill:
        return None
    plain = Settings(**{**asdict(settings), "stockout_drill": False, "flex_start": False, "reservation": "", "reservation_found": None})
    values = {**project_defaults(PROJECT_DIR), **stack_values(plain, run_id)}
    loaded = load_stack(values, stack=stack_name(run_id), project_dir=run_project_dir())
    assert isinstance(loaded, EnvironmentStack)
    in_zone = [nt for nt in loaded.tenants[0].gpu_pools[0].node_types if nt.zone == settings.decoy_zone]
    return min(in_zone, key=lambda nt: nt.cost).machine_type


@functools.cache
def run_project_dir() -> Path:
    """A directory with this project's Pulumi.yaml and no stack file, removed when the process ends."""
    directory = Path(tempfile.mkdtemp(prefix="gpu-platform-acceptance-project-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", directory / "Pulumi.yaml")
    return directory


@dataclass(frozen=True)
class RunNames:
    """Every name the run gives to something that could outlive it, derived from the loaded stack
    (tests/acceptance/test_acceptance_settings.py checks them against what the program registers)."""

    run_id: str
    stack: str
    project: str
    region: str
    zones: tuple[str, ...]
    environment: str
    cluster: str
    cluster_location: str
    platform_service_account: str  # account id
    role_id_prefix: str
    node_provider: str
    tenant: str
    host_namespace: str
    tenant_prefix: str  # "<environment>-<tenant>-": the tenant's network, subnet, router, NAT, firewalls, node account
    tenant_network: str
    gpu: str
    gpus_per_node: int
    idle_after: str
    # Records of runs from before project mode lack these: they were shared.
    isolation: str = SHARED_MODE
    tenant_project: str = ""  # the tenant's GCP project; "" = `project`
    # Records of runs from before the monitoring checks lack these: the defaults of then.
    gpu_timeout: str = GPU_TIMEOUT  # the GPU pool's: how long the watchdog lets its node go without GPUs
    monitoring: bool = True  # the tenant's GPU metrics collector runs
    scrape_interval: str = DEFAULT_SCRAPE_INTERVAL

    @property
    def vm_project(self) -> str:
        """The project of the tenant's network, node identity, VMs and disks."""
        return self.tenant_project or self.project

    @property
    def projects(self) -> tuple[str, ...]:
        """Every project the run puts something in: the environment's, then the tenant's."""
        return tuple(dict.fromkeys((self.project, self.vm_project)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunNames:
        data = dict(data)
        data["zones"] = tuple(data["zones"])
        return cls(**data)


def run_names(env: EnvironmentStack, run_id: str) -> RunNames:
    (plan,) = env.tenants
    tenant = plan.tenant.name
    (pool,) = plan.gpu_pools
    return RunNames(
        run_id=run_id,
        stack=env.stack,
        project=env.project,
        region=env.region,
        zones=tuple(env.node_provider.zones),
        environment=env.environment,
        cluster=env.cluster.name,
        cluster_location=env.cluster.location,
        platform_service_account=env.platform.service_account_id,
        role_id_prefix=env.platform.role_id_prefix,
        node_provider=env.node_provider.name,
        tenant=tenant,
        host_namespace=host_namespace(tenant),
        tenant_prefix=tenant_resource_name(env.environment, tenant, ""),
        tenant_network=tenant_resource_name(env.environment, tenant, "nodes"),
        gpu=pool.gpu,
        gpus_per_node=pool.gpus_per_node,
        idle_after=pool.idle_after,
        isolation=plan.tenant.isolation,
        tenant_project=placement(plan.tenant, environment=env.environment, host_project=env.project, tenant_projects=env.facts.tenant_projects).project,
        gpu_timeout=pool.gpu_timeout,
        monitoring=plan.monitoring.enabled,
        scrape_interval=plan.monitoring.scrape_interval,
    )


@dataclass(frozen=True)
class CostItem:
    what: str
    usd: float | None  # None: the catalog has no price for it in the region


def cost_estimate(env: EnvironmentStack, *, restore_drill: bool = False, watchdog_drill: bool = False) -> list[CostItem]:
    """List-price estimate of one run: the offline plan's cost lines (tools/plan_costs.py) of the
    run's stack, its always-on parts for ENVIRONMENT_HOURS (and RESTORE_DRILL_HOURS,
    WATCHDOG_DRILL_HOURS more with a drill) and its GPU pool's one VM for GPU_VM_MINUTES (and the
    watchdog drill's for WATCHDOG_DRILL_GPU_VM_MINUTES)."""
    costs = environment_costs(load_catalog(), env)
    gpu_pools = {pool.name: pool for plan in env.tenants for pool in plan.gpu_pools}
    items = [
        CostItem(f"{line.part}, {ENVIRONMENT_HOURS:g} h", None if line.always_on is None else line.always_on * ENVIRONMENT_HOURS)
        for line in costs.lines
        if line.always_on != 0.0  # the GPU pools: nothing while idle, priced below
    ]
    # A warm node is priced with the always-on parts above, for the whole run (the watchdog drill's
    # pod runs on it, and a new warm node replaces it).
    cold = [(pool, gpu_pools[pool.pool]) for pool in costs.pools if pool.pool in gpu_pools and not gpu_pools[pool.pool].warm_nodes]

    def gpu_vm(what: str, minutes: int) -> list[CostItem]:
        return [
            CostItem(
                f"{what}GPU VM ({', '.join(pool.machine_types)} with {plan.gpus_per_node} × {plan.gpu}), {minutes} min",
                None if pool.busy is None else pool.busy * minutes / 60,
            )
            for pool, plan in cold
        ]

    def longer(what: str, hours: float) -> CostItem:
        always_on = [line.always_on for line in costs.lines if line.always_on != 0.0]
        return CostItem(f"{what}: the environment {hours:g} h longer", None if any(a is None for a in always_on) else sum(always_on) * hours)

    items += gpu_vm("", GPU_VM_MINUTES)
    if restore_drill:
        drill = longer("restore drill", RESTORE_DRILL_HOURS)
        items.append(CostItem(f"{drill.what} (Backup for GKE's own charges not included)", drill.usd))
    if watchdog_drill:
        items += [longer("watchdog drill", WATCHDOG_DRILL_HOURS), *gpu_vm("watchdog drill: its ", WATCHDOG_DRILL_GPU_VM_MINUTES)]
    return items


def cost_total(items: list[CostItem]) -> float:
    return sum(i.usd for i in items if i.usd is not None)


def render_cost(items: list[CostItem], prices_read: str | None) -> list[str]:
    lines = [f"Estimated cost of this run (the catalog's list prices, read {prices_read or 'never for this region'}; an estimate, not a bill):"]
    for item in items:
        lines.append(f"  {item.what}: " + ("price unknown" if item.usd is None else f"${item.usd:.2f}"))
    lines.append(f"  total ≈ ${cost_total(items):.2f} (not included: {NOT_INCLUDED})")
    return lines
