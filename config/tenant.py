"""A tenant (one ML team's virtual cluster): its config model and its checks against the environment.
Its GPU pools are config/tenant_pools.py, the pools derived from it config/tenant_plan.py.

The same model serves `gpu-platform:tenants[i]` in an environment stack and `gpu-platform:tenant`
in a team's own stack; the checks produce the same messages in both.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Literal

from pydantic import Field, field_validator, model_validator

from . import isolation
from . import node_properties as props
from .base import DNS_LABEL, ConfigModel, Syntax, parse_cidr, quantity, read_cidr
from .errors import Broken, Problems, derived, shown
from .facts import PLATFORM_NAMESPACE, TENANT_CLUSTER_CIDRS, EnvironmentFacts, TenantClaim
from .tenant_pools import GpuPool, check_gpu_pools
from .isolation import GcpProject, project_id_alone_too
from .monitoring import TenantMonitoring, check_alert_after_watchdog, check_tenant_monitoring, resolve_tenant_monitoring
from .reliability import Backup, NodeShutdown, check_reliability
from .tenant_security import check_tenant_security
from .versions import GPU_OPERATOR_VERSION

# Derived GCP names must fit: the node service account id "<env>-<name>-nodes" has at most 30
# characters and environments have at most 7 ("staging").
MAX_TENANT_NAME = 16
# The platform's built-in project; teams' platform projects are named after the team.
RESERVED_PLATFORM_PROJECT = "default"
# Names no tenant takes: the platform's own project, and the one whose host namespace
# (vcluster-<name>, components/tenant_vcluster.py) would be the platform's.
RESERVED_NAMES = (RESERVED_PLATFORM_PROJECT, PLATFORM_NAMESPACE.removeprefix("vcluster-"))


def reserved_name(name: str) -> str | None:
    """Why no tenant may be called `name` (one of RESERVED_NAMES), or None."""
    if name == RESERVED_PLATFORM_PROJECT:
        return f"{name!r} is the vCluster Platform's own default project; each team gets a platform project named after it"
    if f"vcluster-{name}" == PLATFORM_NAMESPACE:
        return f"{name!r} would put the team's control plane into the platform's namespace {PLATFORM_NAMESPACE}"
    return None


# Where `suggest_cidr` looks for free tenant subnets.
TENANT_CIDR_POOL = ipaddress.IPv4Network("10.160.0.0/12")


class CpuPool(ConfigModel):
    """The tenant's CPU pool, for its system pods."""

    max_cpus: int = Field(8, ge=1)
    """The pool's vCPU limit, at least the smallest CPU node type's."""


class Access(ConfigModel):
    """Who is cluster-admin inside the tenant: vCluster Platform users and teams."""

    users: tuple[str, ...] = ()
    """Platform user names, each a Kubernetes object name (lowercase DNS subdomain)."""
    teams: tuple[str, ...] = ()
    """Platform team names, each a Kubernetes object name (lowercase DNS subdomain)."""


class GpuOperator(ConfigModel):
    """The NVIDIA GPU Operator inside the tenant."""

    version: str = GPU_OPERATOR_VERSION
    """The gpu-operator chart version, a pinned release like v25.10.1."""
    service_monitor: bool = False
    """A ServiceMonitor for its DCGM exporter (needs the Prometheus Operator CRDs inside the tenant)."""
    dcgm_exporter: bool = True
    """Run NVIDIA's DCGM exporter (GPU metrics) on every GPU node; its image is the largest the operator pulls."""
    mig_manager: bool = True
    """Run the operator's MIG manager on nodes whose GPUs support Multi-Instance GPU (A100, H100, H200, B200)."""


class TenantNetwork(ConfigModel):
    """The tenant's node network in its GCP project."""

    cidr: str
    """The node subnet, a private /16–/26 clear of the host cluster's ranges, vCluster's 10.244.0.0/16 and 10.96.0.0/12, and every other tenant's (an error suggests a free one)."""
    iap_ssh: bool = False
    """A firewall rule for SSH through Identity-Aware Proxy."""
    nat_addresses: int = Field(1, ge=1, le=8)
    """Static external addresses of the tenant's Cloud NAT: its nodes' only egress and the only sources its control plane accepts (one serves up to 64512 connections to one destination)."""


class Requests(ConfigModel):
    """Requests of the control-plane pod, room kept for it on the host cluster."""

    cpu: str = "200m"
    """CPU request, a Kubernetes quantity like 500m or 2."""
    memory: str = "512Mi"
    """Memory request, a Kubernetes quantity like 512Mi or 4Gi."""


class Limits(ConfigModel):
    """Limits of the control-plane pod, which keep it from starving the other tenants' control planes."""

    cpu: str = "2"
    """CPU limit, a Kubernetes quantity like 500m or 2."""
    memory: str = "4Gi"
    """Memory limit, a Kubernetes quantity like 512Mi or 4Gi."""


class ControlPlane(ConfigModel):
    """Requests and limits of the tenant's control-plane pod on the host cluster: requests keep
    room for it, limits keep it from starving the other tenants' control planes. Each of the four
    values has its own default, so `{limits: {memory: 8Gi}}` changes that one value only."""

    requests: Requests = Requests()
    """What the host cluster keeps for the pod (each request at most its limit)."""
    limits: Limits = Limits()
    """The most the pod may use."""


class Tenant(ConfigModel):
    """A team's virtual cluster with its private GPU nodes."""

    name: str
    """The team's name, a DNS-1123 label of at most 16 characters, unique in the environment."""
    network: TenantNetwork
    """The tenant's node network."""
    gpu_pools: tuple[GpuPool, ...] = Field(min_length=1)
    """The tenant's GPU pools, at least one, no two of the same GPU type, GPUs per node and capacity list."""
    cpu_pool: CpuPool = CpuPool()
    """The tenant's CPU pool."""
    access: Access = Access()
    """Who is cluster-admin inside the tenant."""
    gpu_operator: GpuOperator = GpuOperator()
    """The GPU Operator inside the tenant."""
    smoke_test: bool = False
    """A Job running nvidia-smi on one GPU of the tenant, then printing what its node sees of NVSwitches (docs/gpu-nodes.md, "Fabric Manager")."""
    persistent_disks: bool = True
    """Persistent volumes through the PD CSI driver on the tenant's nodes, whose node identity then holds project-wide disk rights (docs/security.md, "Node service account"); unset: true with isolation: project, false with isolation: shared, where true is refused (the environment's project holds the host cluster's volumes)."""
    load_balancer_services: bool = False
    """Let the tenant's cloud controller manager create Google load balancers for its Services (load-balancer and firewall rights for its node identity); off: Services stay internal."""
    isolation: Literal["project", "shared"] = "project"
    """project: the team's VMs, disks, network and node identity in a GCP project of its own; shared: in the environment's project, beside every other shared tenant (warned about), whose names must not start with this one's name and a hyphen (their VM names would not tell them apart)."""
    gcp_project: GcpProject | None = Field(None, json_schema_extra=project_id_alone_too)
    """Project mode: an existing project id, or {id, create: true}, neither the environment's project nor another tenant's; unset: created under platform.tenantProjects, else an error (never set with isolation: shared)."""
    node_metadata: Literal["concealed", "exposed"] = "concealed"
    """concealed: pods on the tenant's nodes cannot reach the metadata server (the node identity's token); exposed: they can, e.g. to call Google APIs as the node identity."""
    control_plane: ControlPlane = ControlPlane()
    """The control-plane pod on the host cluster; each of the four values has its own default, so {limits: {memory: 8Gi}} changes that value only, each at most platform.controlPlaneMaximum."""
    node_shutdown: NodeShutdown = NodeShutdown()
    """The kubelet's graceful shutdown on every node of the tenant: pods get SIGTERM and this long to stop before a preempted or stopped VM powers off."""
    backup: Backup = Backup()
    """The scheduled backup of the tenant's control plane and its data volume (Backup for GKE), and how long backups are kept."""
    pod_security_standard: Literal["baseline", "restricted", "privileged"] = "baseline"
    """The Pod Security Standard every namespace of the tenant must enforce but the few the product runs host-level components in (docs/security.md, "Pod Security"); privileged: none, so any pod may use hostNetwork and reach the node identity's token (in prod it needs platform.approvedTenantSecurity)."""
    monitoring: TenantMonitoring = TenantMonitoring()
    """The team's GPU metrics, Kubernetes object metrics and dashboard (config/monitoring.py); default: as the environment's monitoring."""

    @model_validator(mode="before")
    @classmethod
    def _no_disks_when_shared(cls, value):
        """persistentDisks defaults to false for a shared tenant: its node identity gets no disk
        role on the environment's project (config/tenant_security.py)."""
        if isinstance(value, dict) and value.get("isolation") == "shared" and "persistentDisks" not in value and "persistent_disks" not in value:
            return {**value, "persistentDisks": False}
        return value

    @field_validator("gcp_project", mode="before")
    @classmethod
    def _project_id_alone(cls, value):
        return isolation.coerce_gcp_project(value)


def check_tenant(
    path: str,
    tenant: Tenant,
    facts: EnvironmentFacts,
    others: list[TenantClaim],
    problems: Problems,
    *,
    claimed: list[TenantClaim] | None = None,
) -> None:
    """Check one tenant against its environment and the tenants already claimed there (`others`).
    `claimed`: every other tenant of the environment, whose ranges a suggested CIDR keeps clear of
    (default: `others`). The tenant and the facts may be partly broken (config/errors.py): each
    `checking` block is one independent check, so every check that does not need a broken value runs."""
    with problems.checking(f"{path}.name"):
        if not DNS_LABEL.match(tenant.name) or len(tenant.name) > MAX_TENANT_NAME:
            problems.add(f"{path}.name", f"{tenant.name!r} must be a DNS-1123 label of at most {MAX_TENANT_NAME} characters")
        elif (why := reserved_name(tenant.name)) is not None:
            problems.add(f"{path}.name", why)
    for other in others:
        with problems.checking(f"{path}.name"):
            if other.name == tenant.name:
                problems.add(f"{path}.name", f"{tenant.name!r} is already used by {other.source}")
    _check_network(path, tenant, facts, others, problems, others if claimed is None else claimed)
    with problems.checking(f"{path}.isolation"):
        isolation.check_placement(path, tenant, facts, others, problems)
    with problems.checking(f"{path}.controlPlane"):
        check_control_plane(f"{path}.controlPlane", tenant.control_plane, problems, maximum=facts.control_plane_maximum)
    check_tenant_security(path, tenant, facts, others, problems)
    check_reliability(path, tenant, facts, problems)

    with problems.checking(f"{path}.gpuPools"):
        check_gpu_pools(path, tenant, facts, problems)

    with problems.checking(f"{path}.cpuPool"):
        cpu_types = facts.node_types_for(None, props.ON_DEMAND)
        smallest = min((nt.vcpus for nt in cpu_types), default=None)
        if smallest is None:
            problems.add(f"{path}.cpuPool", f"environment {facts.environment} offers no CPU node types")
        elif tenant.cpu_pool.max_cpus < smallest:
            problems.add(
                f"{path}.cpuPool.maxCpus",
                f"{tenant.cpu_pool.max_cpus} is below the smallest CPU node type ({smallest} vCPU): no node could start",
            )
    with problems.checking(f"{path}.access"):
        for kind, names in (("users", tenant.access.users), ("teams", tenant.access.teams)):
            for i, name in enumerate(names):
                if not is_object_name(name):
                    problems.add(
                        f"{path}.access.{kind}[{i}]",
                        f"{shown(name)} is not a platform {kind[:-1]} name; allowed: a Kubernetes object name, at most 253 lowercase "
                        "letters, digits, '-' and '.', starting and ending with a letter or digit",
                    )
    with problems.checking(f"{path}.monitoring"):
        check_tenant_monitoring(f"{path}.monitoring", tenant.monitoring, facts, problems)
    with problems.checking(f"{path}.gpuPools"):
        check_alert_after_watchdog(path, tenant, facts, problems)
    with problems.checking(f"{path}.gpuOperator.serviceMonitor"):
        if tenant.gpu_operator.service_monitor and not tenant.gpu_operator.dcgm_exporter:
            problems.add(f"{path}.gpuOperator.serviceMonitor", "true needs dcgmExporter: true (the ServiceMonitor scrapes the DCGM exporter)")
    with problems.checking(f"{path}.gpuOperator.dcgmExporter"):
        if not tenant.gpu_operator.dcgm_exporter and resolve_tenant_monitoring(tenant.monitoring, facts).enabled:
            problems.add(
                f"{path}.gpuOperator.dcgmExporter",
                "false, but monitoring is on for this tenant, and its GPU metrics come from the DCGM exporter; "
                "keep dcgmExporter: true, or set monitoring.enabled: false",
            )
    with problems.checking(f"{path}.gpuOperator.version"):
        version = tenant.gpu_operator.version
        if not (version.startswith("v") and len(version.split(".")) == 3 and all(p.isdigit() for p in version[1:].split("."))):
            problems.add(f"{path}.gpuOperator.version", f"{version!r} is not a pinned release like {GPU_OPERATOR_VERSION}")


# Platform users and teams are the cluster-scoped custom resources users.storage.loft.sh and
# teams.storage.loft.sh (loft-sh/vcluster tag v0.36.1, pkg/cli/destroy/destroy.go deletes them as
# storage.loft.sh/v1 CRDs), and the API server accepts a custom resource's name only as a DNS-1123
# subdomain (kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/registry/
# customresource/validator.go: `validation.NameIsDNSSubdomain`).
_DNS_SUBDOMAIN = Syntax(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_object_name(name: str) -> bool:
    return bool(_DNS_SUBDOMAIN.match(name)) and len(name) <= 253


def _check_network(
    path: str, tenant: Tenant, facts: EnvironmentFacts, others: list[TenantClaim], problems: Problems, claimed: list[TenantClaim]
) -> None:
    cidr_path = f"{path}.network.cidr"
    net = None
    with problems.checking(cidr_path):
        net, problem = read_cidr(tenant.network.cidr, "10.160.0.0/22")

        def try_free() -> str:
            # Computed only for a message (it scans every claimed range); a suggestion only where
            # the facts allow one, the problem is reported either way.
            free = derived(lambda: suggest_cidr(facts, claimed))
            return "" if isinstance(free, Broken) else f"; try {free}"

        if problem:
            problems.add(cidr_path, problem)
            net = None
        elif not net.is_private:
            problems.add(cidr_path, f"{net} is not a private IPv4 range{try_free()}")
            net = None
        elif not 16 <= net.prefixlen <= 26:
            problems.add(cidr_path, f"{net} must be between /16 and /26 (a /22 fits 1000 nodes)")
            net = None
    if net is None:
        return
    taken: list[tuple[str, str]] = list(TENANT_CLUSTER_CIDRS)
    with problems.checking(cidr_path):
        taken = list(facts.reserved_cidrs) + taken
    for what, cidr in taken:
        with problems.checking(cidr_path):
            if net.overlaps(ipaddress.IPv4Network(cidr)):
                problems.add(cidr_path, f"{net} overlaps {what} {cidr}{try_free()}")
    for other in others:
        with problems.checking(cidr_path):
            if net.overlaps(ipaddress.IPv4Network(other.cidr)):
                who = other.source if isinstance(other.name, Broken) else f"tenant {other.name} ({other.source})"
                problems.add(cidr_path, f"{net} overlaps {who} {other.cidr}{try_free()}")


def suggest_cidr(facts: EnvironmentFacts, others: list[TenantClaim], *, seed: str | None = None) -> str:
    """A free /22 for a tenant, clear of the host cluster's ranges, the tenant clusters' own and
    every valid range `others` claim: pass every other tenant of the environment, inline and in
    team stacks, not only the ones checked so far (ranges with problems are not known, and do not
    hold the suggestion up). The first free one of the pool; with a `seed` (the new team's name,
    `make team`), the first free one from a place of the pool the name picks, so two teams added
    on two branches at once get different ranges (one chance in 1024 that two names pick the same
    place: the merge's check then fails the second with a free range, `try_free` below)."""
    claimed = [c for _, c in facts.reserved_cidrs] + [c for _, c in TENANT_CLUSTER_CIDRS] + [o.cidr for o in others]
    taken = [net for net in (None if isinstance(c, Broken) else parse_cidr(c) for c in claimed) if net is not None]
    candidates = list(TENANT_CIDR_POOL.subnets(new_prefix=22))
    start = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big") % len(candidates) if seed else 0
    for candidate in candidates[start:] + candidates[:start]:
        if not any(candidate.overlaps(t) for t in taken):
            return str(candidate)
    return "a free private /22"


def check_control_plane(path: str, control_plane: ControlPlane, problems: Problems, *, maximum: dict[str, str] | None = None) -> None:
    """Requests and limits are quantities, requests within limits, and each within the
    environment's `maximum` (platform.controlPlaneMaximum: resource → quantity)."""
    values: dict[tuple[str, str], float | None] = {}
    for kind in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            with problems.checking(f"{path}.{kind}.{resource}"):
                text = getattr(getattr(control_plane, kind), resource)
                values[kind, resource] = quantity(text)
                if values[kind, resource] is None:
                    example = "500m or 2" if resource == "cpu" else "512Mi or 4Gi"
                    problems.add(f"{path}.{kind}.{resource}", f"{shown(text)} is not a Kubernetes quantity like {example}")
    for resource in ("cpu", "memory"):
        request, limit = values.get(("requests", resource)), values.get(("limits", resource))
        if request is not None and limit is not None and request > limit:
            problems.add(f"{path}.requests.{resource}", f"{getattr(control_plane.requests, resource)} is above limits.{resource} {getattr(control_plane.limits, resource)}")
    most: dict[str, float | None] = {}
    with problems.checking(path):  # against the environment's maximum, once it is known
        most = {resource: quantity(maximum[resource]) for resource in ("cpu", "memory")} if maximum else {}
    for kind in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            with problems.checking(f"{path}.{kind}.{resource}"):
                value = values.get((kind, resource))
                if most.get(resource) is not None and value is not None and value > most[resource]:
                    problems.add(
                        f"{path}.{kind}.{resource}",
                        f"{getattr(getattr(control_plane, kind), resource)} is above the environment's maximum {maximum[resource]} "
                        f"(platform.controlPlaneMaximum.{resource}: every tenant's control plane shares the host cluster's system nodes)",
                    )
