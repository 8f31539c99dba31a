"""A tenant (one ML team's virtual cluster): its config model, its checks against the environment,
and the pools derived from it.

The same model serves `gpu-platform:tenants[i]` in an environment stack and `gpu-platform:tenant`
in a team's own stack; the checks produce the same messages in both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from . import fabric_manager, isolation
from . import node_properties as props
from .availability import load_availability
from .base import DNS_LABEL, DURATION, ConfigModel, Duration, Syntax, duration_seconds, parse_cidr, quantity, read_cidr
from .catalog import load_catalog
from .errors import Broken, Problems, derived, shown
from .facts import PLATFORM_NAMESPACE, TENANT_CLUSTER_CIDRS, EnvironmentFacts, TenantClaim
from .isolation import GcpProject, project_id_alone_too
from .monitoring import OFF, MonitoringPlan, TenantMonitoring, check_alert_after_watchdog, check_tenant_monitoring, resolve_tenant_monitoring
from .node_types import GPU_RESOURCE, NodeType
from .reliability import GPU_TIMEOUT, Backup, NodeShutdown, check_reliability
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


class GpuPool(ConfigModel):
    """One GPU pool of a tenant: nodes of one GPU type, GPU count per node and capacity type."""

    gpu: str
    """The GPU type, one of the environment's nodeProvider.gpuTypes."""
    max_gpus: int = Field(ge=1)
    """The pool's GPU limit, a multiple of gpusPerNode within the environment's gpuQuota."""
    gpus_per_node: int | None = Field(None, ge=1)
    """GPUs per node, a shape of the GPU type; unset: the smallest shape offered."""
    machine_types: tuple[str, ...] | None = None
    """Exactly these machine types of the shape (the platform picks the cheapest that fits each pod); unset: see maxVcpusPerGpu."""
    max_vcpus_per_gpu: int | None = Field(None, ge=1)
    """Every machine type of the shape with at most this many vCPUs per GPU; with neither this nor machineTypes, the smallest machine type of gpusPerNode."""
    spot: bool = False
    """Spot VMs instead of on-demand ones (the environment must set nodeProvider.spot)."""
    zones: tuple[str, ...] | None = None
    """Only these of nodeProvider.zones (e.g. where the team's volumes are), each offering the GPU; unset: all."""
    idle_after: Duration = "60s"
    """How long a node stays empty before it is deleted, a duration like 60s, 10m or 1h30m."""
    termination_grace_period: Duration = "30m"
    """How long a GPU job gets to stop when its node goes, a duration of at least 1m."""
    gpu_timeout: Duration = GPU_TIMEOUT
    """How long a node of this pool may go without offering nvidia.com/gpu after it joins, or after it lost its GPUs, before the GPU watchdog removes it and its VM (at least 2m)."""
    warm_nodes: int = Field(0, ge=0)
    """Nodes of the pool's cheapest shape kept running at all times, so a pod gets a GPU without waiting for a VM (they count against maxGpus and cost money while idle)."""
    spot_warm_nodes: bool = False
    """Allow warmNodes in a Spot pool, whose warm nodes Compute Engine may preempt at any moment."""
    fabric_manager_verified: bool = False
    """The GPU image is checked to ship NVIDIA Fabric Manager, which the pool's NVSwitch machine types (8 or 16 A100, H100 or H200) need; required in prod for them unless config/catalog.yaml records the image family's fabricManager: shipped (otherwise warned about: docs/gpu-nodes.md, "Fabric Manager")."""


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
    """Run the operator's MIG manager on nodes whose GPUs support Multi-Instance GPU (A100, H100, H200)."""


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
    """The tenant's GPU pools, at least one, no two of the same GPU type, GPUs per node and capacity type."""
    cpu_pool: CpuPool = CpuPool()
    """The tenant's CPU pool."""
    access: Access = Access()
    """Who is cluster-admin inside the tenant."""
    gpu_operator: GpuOperator = GpuOperator()
    """The GPU Operator inside the tenant."""
    smoke_test: bool = False
    """A Job running nvidia-smi on one GPU of the tenant."""
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


@dataclass(frozen=True)
class PoolPlan:
    """One dynamic auto-nodes pool, with everything needed to render it and to price it."""

    name: str
    gpu: str | None
    gpus_per_node: int
    spot: bool
    max_nodes: int
    node_types: tuple[NodeType, ...]  # the shapes the pool may get, every zone
    limits: dict[str, str]
    idle_after: str
    termination_grace_period: str
    consolidation_policy: str
    zones: tuple[str, ...] = ()  # the pool's zones when limited, else every zone of its node types
    # Per node type name: one node, the VM with its GPUs and its boot disk, in USD/h at the region's
    # list prices (`node_usd_per_hour`); None where the region records no price. Every money figure
    # of the pool (expected, ceiling, always on) is made of these.
    node_usd_per_hour: dict[str, float | None] = dataclasses.field(default_factory=dict)
    gpu_timeout: str = GPU_TIMEOUT  # GPU pools: the watchdog's limit (config/reliability.py)
    # Nodes of `warm_node_type` kept running (a static pool beside the dynamic one); they are part
    # of `max_nodes`, and `limits` are the dynamic pool's, sized for the nodes they leave.
    warm_nodes: int = 0

    @property
    def max_gpus(self) -> int:
        return self.max_nodes * self.gpus_per_node

    @property
    def dynamic_nodes(self) -> int:
        """The nodes the dynamic pool may add to the warm ones."""
        return self.max_nodes - self.warm_nodes

    @property
    def warm_node_type(self) -> NodeType:
        """The shape warm nodes have: the pool's cheapest, as for `expected`."""
        return self.expected_node_type

    @property
    def warm_usd_per_hour(self) -> float | None:
        """What the warm nodes cost, busy or idle: always on."""
        if not self.warm_nodes:
            return 0.0
        price = self.node_price(self.warm_node_type)
        return None if price is None else self.warm_nodes * price

    @property
    def machine_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(nt.machine_type for nt in self.node_types))

    def node_price(self, nt: NodeType) -> float | None:
        return self.node_usd_per_hour.get(nt.name)

    @property
    def priced(self) -> bool:
        return all(self.node_price(nt) is not None for nt in self.node_types)

    @property
    def price_estimate(self) -> bool:
        return any(nt.price_estimate for nt in self.node_types)

    def nodes_within_limits(self, nt: NodeType) -> int:
        """How many nodes of one type the pool's limits admit. Limits are counted on the node's
        full resources, as Karpenter counts NodePool limits against node capacity
        (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling: `ExceededBy`);
        counting them on what pods can use would admit at least as many."""
        counts = [int(self.limits["cpu"]) * 1000 // (nt.vcpus * 1000), _mi(self.limits["memory"]) // nt.capacity_memory_mi]
        if nt.gpu_count:
            counts.append(int(self.limits[GPU_RESOURCE]) // nt.gpu_count)
        return min(counts)

    @property
    def expected_node_type(self) -> NodeType:
        """The type the platform picks for pods that fit the smallest shape: the cheapest (by list
        price when every type has one)."""
        return min(self.node_types, key=lambda nt: (self.node_price(nt) or 0.0, nt.vcpus))

    @property
    def expected_nodes(self) -> int:
        """How many nodes "expected" counts (EXPECTED, the one definition): a GPU pool busy at its
        GPU limit (its warm nodes and what its dynamic limits admit); a CPU pool at its one node
        for the tenant's system pods, as when idle."""
        return self.nodes_within_limits(self.expected_node_type) + self.warm_nodes if self.gpu else 1

    @property
    def expected_usd_per_hour(self) -> float | None:
        if not self.priced:
            return None
        return self.expected_nodes * self.node_price(self.expected_node_type)  # type: ignore[operator]

    @property
    def ceiling_node_type(self) -> NodeType:
        """The shape whose nodes cost most when the limits are fully used."""
        return max(self.node_types, key=lambda nt: self.nodes_within_limits(nt) * (self.node_price(nt) or 0.0))

    @property
    def usd_per_hour_ceiling(self) -> float | None:
        """The limits fully used by the most expensive way the limits admit: the worst case."""
        if not self.priced:
            return None
        nt = self.ceiling_node_type
        return self.nodes_within_limits(nt) * self.node_price(nt) + self.warm_usd_per_hour  # type: ignore[operator]

    @property
    def cheapest_usd_per_hour(self) -> float | None:
        return None if not self.priced else min(self.node_price(nt) for nt in self.node_types)  # type: ignore[type-var]

    @property
    def selector(self) -> list[dict]:
        # Only the shapes the pool's limits were sized for.
        return self._requirements(self.machine_types)

    @property
    def warm_selector(self) -> list[dict]:
        """The warm nodes' selector: the pool's, narrowed to the warm shape."""
        return self._requirements((self.warm_node_type.machine_type,))

    def _requirements(self, machine_types: tuple[str, ...]) -> list[dict]:
        accelerator = self.gpu or props.NO_ACCELERATOR
        requirements = [{"property": props.ACCELERATOR, "operator": "In", "values": [accelerator]}]
        if self.gpu:
            requirements.append({"property": props.ACCELERATOR_COUNT, "operator": "In", "values": [str(self.gpus_per_node)]})
            requirements.append({"property": props.INSTANCE_TYPE, "operator": "In", "values": list(machine_types)})
        requirements.append(
            {"property": props.CAPACITY_TYPE, "operator": "In", "values": [props.SPOT if self.spot else props.ON_DEMAND]}
        )
        if self.zones:
            # Our own zone property: a custom property is passed through as written, while the
            # built-in topology.kubernetes.io/zone has a platform default (`global`).
            requirements.append({"property": props.ZONE, "operator": "In", "values": list(self.zones)})
        return requirements


def _sum(values) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


@dataclass(frozen=True)
class TenantPlan:
    tenant: Tenant
    gpu_pools: tuple[PoolPlan, ...]
    cpu_pool: PoolPlan
    monitoring: MonitoringPlan = OFF

    @property
    def gpu_expected_usd_per_hour(self) -> float | None:
        return _sum(p.expected_usd_per_hour for p in self.gpu_pools)

    @property
    def gpu_usd_per_hour_ceiling(self) -> float | None:
        return _sum(p.usd_per_hour_ceiling for p in self.gpu_pools)

    @property
    def usd_per_hour_ceiling(self) -> float | None:
        return _sum([self.gpu_usd_per_hour_ceiling, self.cpu_pool.usd_per_hour_ceiling])

    @property
    def always_on_node_usd_per_hour(self) -> float | None:
        """The tenant's system pods keep one CPU node (the cheapest that fits) up at all times."""
        return self.cpu_pool.cheapest_usd_per_hour

    @property
    def warm_usd_per_hour(self) -> float | None:
        """The GPU pools' warm nodes, always on."""
        return _sum(p.warm_usd_per_hour for p in self.gpu_pools)

    @property
    def warm_nodes(self) -> int:
        return sum(p.warm_nodes for p in self.gpu_pools)


# What "expected" means, wherever a cost is shown (the plan's tables, docs/costs.md "Costs").
EXPECTED = (
    "every GPU pool busy at its GPU limit on the node type the platform picks, the cheapest that fits; "
    "everything else as when idle (a tenant's CPU pool: its one node for system pods)"
)


def node_usd_per_hour(nt: NodeType, region: str) -> float | None:
    """One node of `nt` per hour at the region's list prices: the VM with its GPUs (its `cost`)
    and its boot disk. None where the region records either price."""
    regional = load_catalog().prices.get(region)
    disk = regional.disk(nt.properties.get(props.DISK_TYPE, ""), float(nt.properties.get(props.DISK_SIZE_GB, 0))) if regional else None
    if nt.usd_per_hour is None or disk is None:
        return None
    return nt.usd_per_hour + disk.usd_per_hour


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

    seen: dict[tuple, int] = {}
    with problems.checking(f"{path}.gpuPools"):
        for i, pool in enumerate(tenant.gpu_pools):
            _check_pool_zones(f"{path}.gpuPools[{i}]", pool, facts, problems)
            with problems.checking(f"{path}.gpuPools[{i}]"):
                _check_pool(f"{path}.gpuPools[{i}]", i, pool, facts, seen, problems)
            _check_pool_timing(f"{path}.gpuPools[{i}]", pool, problems)
            _check_warm_spot(f"{path}.gpuPools[{i}]", pool, problems)

    with problems.checking(f"{path}.cpuPool"):
        cpu_types = facts.node_types_for(None, False)
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


def _check_pool(pool_path: str, i: int, pool: GpuPool, facts: EnvironmentFacts, seen: dict[tuple, int], problems: Problems) -> None:
    """The pool against what its environment offers."""
    if pool.gpu not in facts.gpu_types:
        problems.add(f"{pool_path}.gpu", f"{pool.gpu!r} is not offered by environment {facts.environment}; offered: {', '.join(facts.gpu_types)}")
        return
    if pool.spot and not facts.spot:
        problems.add(f"{pool_path}.spot", f"environment {facts.environment} offers no Spot node types (nodeProvider.spot is false)")
        return
    if not facts.node_types_for(pool.gpu, pool.spot):
        wanted, other = ("Spot", "on-demand") if pool.spot else ("on-demand", "Spot")
        fix = f"set spot: {str(not pool.spot).lower()}" if facts.node_types_for(pool.gpu, not pool.spot) else "choose another GPU type"
        problems.add(
            f"{pool_path}.spot",
            f"environment {facts.environment} offers no {wanted} {pool.gpu} node types ({purchase_options(pool.gpu)}); {fix}"
            + (f" for {other}" if fix.startswith("set") else ""),
        )
        return
    if problems.has_problems(f"{pool_path}.zones"):
        return  # reported by _check_pool_zones; shapes are counted in the pool's zones
    counts = sorted({nt.gpu_count for nt in facts.node_types_for(pool.gpu, pool.spot, zones=pool.zones)})
    per_node = pool.gpus_per_node or (counts[0] if counts else None)
    if per_node not in counts:
        problems.add(
            f"{pool_path}.gpusPerNode",
            f"{pool.gpus_per_node} is not a shape of {pool.gpu} in environment {facts.environment}; shapes: {', '.join(map(str, counts))}",
        )
        return
    if pool.max_gpus % per_node:
        problems.add(f"{pool_path}.maxGpus", f"{pool.max_gpus} is not a multiple of gpusPerNode {per_node}")
    if pool.warm_nodes > pool.max_gpus // per_node:
        problems.add(
            f"{pool_path}.warmNodes",
            f"{pool.warm_nodes} warm nodes of {per_node} GPU{'s' if per_node > 1 else ''} hold more than maxGpus {pool.max_gpus} admits; "
            f"at most {pool.max_gpus // per_node} (warm nodes count against maxGpus)",
        )
    with problems.checking(f"{pool_path}.machineTypes"):
        _check_shapes(pool_path, pool, per_node, facts, problems)
    if facts.environment == "prod" and not problems.has_problems(f"{pool_path}.machineTypes", f"{pool_path}.maxVcpusPerGpu"):
        problem = fabric_manager.prod_problem(pool_node_types(pool, per_node, facts), pool.fabric_manager_verified)
        if problem:
            problems.add(f"{pool_path}.{fabric_manager.KEY}", problem)
    quota = facts.gpu_quota.get(pool.gpu, 0)
    if pool.max_gpus > quota:
        problems.add(
            f"{pool_path}.maxGpus",
            f"{pool.max_gpus} exceeds the environment's quota of {quota} {pool.gpu} GPUs in {facts.region} "
            f"(nodeProvider.gpuQuota; one pool above it is an error whatever quotaPolicy says)",
        )
    key = (pool.gpu, per_node, pool.spot)
    if key in seen:
        problems.add(pool_path, f"duplicates gpuPools[{seen[key]}] ({pool.gpu}, {per_node} per node, spot={pool.spot})")
    seen[key] = i


def _check_warm_spot(pool_path: str, pool: GpuPool, problems: Problems) -> None:
    """Needs nothing from the environment: checked even when the rest of the pool is not."""
    with problems.checking(f"{pool_path}.warmNodes"):
        if pool.spot and pool.warm_nodes and not pool.spot_warm_nodes:
            problems.add(
                f"{pool_path}.warmNodes",
                f"{pool.warm_nodes} warm node{'s' if pool.warm_nodes > 1 else ''} in a Spot pool: Compute Engine may preempt them "
                "at any moment, and the next pod waits for a new VM after all; keep warm nodes in an on-demand pool, "
                "or set spotWarmNodes: true to keep them anyway",
            )


def _check_pool_timing(pool_path: str, pool: GpuPool, problems: Problems) -> None:
    """Durations need nothing from the environment: checked even when the rest of the pool is not."""
    for field, attribute in (("idleAfter", "idle_after"), ("terminationGracePeriod", "termination_grace_period")):
        with problems.checking(f"{pool_path}.{field}"):
            value = getattr(pool, attribute)
            if not DURATION.match(value):
                problems.add(f"{pool_path}.{field}", f"{value!r} is not a duration like 60s, 10m or 1h30m")
            elif field == "terminationGracePeriod" and duration_seconds(value) < 60:
                problems.add(f"{pool_path}.{field}", f"{value} is too short for a GPU job to checkpoint; at least 1m")


def _check_pool_zones(pool_path: str, pool: GpuPool, facts: EnvironmentFacts, problems: Problems) -> None:
    """A pool's zones: a non-empty list without repeats (checked on its own), each in
    nodeProvider.zones and offering the pool's GPU as the pool's capacity type (checked with the
    pool against its environment; only where the GPU and capacity type are offered at all, as
    otherwise that is the pool's problem, reported by _check_pool)."""
    with problems.checking(f"{pool_path}.zones"):
        zones = pool.zones
        if zones is not None and not zones:
            problems.add(f"{pool_path}.zones", "is empty; leave it out to use every zone")
        for j, zone in enumerate(zones or ()):
            if zone in zones[:j]:
                continue  # reported with every list's repeats (config/base.py parse)
            with problems.checking(pool_path):  # against the environment, as the rest of the pool
                if zone not in facts.zones:
                    problems.add(
                        f"{pool_path}.zones[{j}]",
                        f"{zone} is not in nodeProvider.zones of environment {facts.environment} ({', '.join(facts.zones)})",
                    )
                elif pool.gpu in facts.gpu_types and (facts.spot or not pool.spot):
                    offering = sorted({nt.zone for nt in facts.node_types_for(pool.gpu, pool.spot)})
                    if offering and zone not in offering:
                        capacity = "Spot" if pool.spot else "on-demand"
                        problems.add(
                            f"{pool_path}.zones[{j}]",
                            f"{zone} does not offer {pool.gpu} as {capacity} (config/catalog.yaml availability); zones that do: {', '.join(offering)}",
                        )


def purchase_options(gpu: str) -> str:
    """How the machine families carrying `gpu` are sold, for error messages."""
    catalog, availability = load_catalog(), load_availability()
    families = dict.fromkeys(availability.family_of(shape) for shape in catalog.shapes_for(gpu))
    return "; ".join(f"{f.name} is sold as {f.sold_as()}" for f in families)


def _check_shapes(path: str, pool: GpuPool, per_node: int, facts: EnvironmentFacts, problems: Problems) -> None:
    shapes = sorted({nt.machine_type: nt.vcpus for nt in facts.node_types_for(pool.gpu, pool.spot, per_node, pool.zones)}.items(), key=lambda kv: kv[1])
    names = ", ".join(m for m, _ in shapes)
    if pool.machine_types is not None and pool.max_vcpus_per_gpu is not None:
        problems.add(f"{path}.maxVcpusPerGpu", "set either machineTypes or maxVcpusPerGpu, not both")
    elif pool.machine_types is not None:
        if not pool.machine_types:
            problems.add(f"{path}.machineTypes", f"lists no machine type; shapes of {per_node} × {pool.gpu}: {names}")
        for i, machine in enumerate(pool.machine_types):
            if machine not in dict(shapes):
                problems.add(
                    f"{path}.machineTypes[{i}]",
                    f"{machine!r} is not a shape of {per_node} × {pool.gpu}{' (Spot)' if pool.spot else ''} in environment {facts.environment}; shapes: {names}",
                )
    elif pool.max_vcpus_per_gpu is not None and not any(v <= pool.max_vcpus_per_gpu * per_node for _, v in shapes):
        smallest = shapes[0][1] // per_node if shapes else 0
        problems.add(
            f"{path}.maxVcpusPerGpu",
            f"{pool.max_vcpus_per_gpu} admits no shape of {per_node} × {pool.gpu}; the smallest has {smallest} vCPUs per GPU ({names})",
        )


def pool_node_types(pool: GpuPool, per_node: int, facts: EnvironmentFacts) -> tuple[NodeType, ...]:
    """The node types a pool may get: its machineTypes, or those within maxVcpusPerGpu, or else
    the smallest machine type of its shape."""
    eligible = facts.node_types_for(pool.gpu, pool.spot, per_node, pool.zones)
    if pool.machine_types:
        wanted = set(pool.machine_types)
    elif pool.max_vcpus_per_gpu is not None:
        wanted = {nt.machine_type for nt in eligible if nt.vcpus <= pool.max_vcpus_per_gpu * per_node}
    else:
        wanted = {min(eligible, key=lambda nt: (nt.vcpus, nt.capacity_memory_mi, nt.machine_type)).machine_type}
    return tuple(nt for nt in eligible if nt.machine_type in wanted)


def plan_tenant(tenant: Tenant, facts: EnvironmentFacts) -> TenantPlan:
    """The pools of a tenant that passed `check_tenant`."""
    gpu_pools = []
    for pool in tenant.gpu_pools:
        counts = sorted({nt.gpu_count for nt in facts.node_types_for(pool.gpu, pool.spot, zones=pool.zones)})
        per_node = pool.gpus_per_node or counts[0]
        eligible = pool_node_types(pool, per_node, facts)
        max_nodes = pool.max_gpus // per_node
        warm = pool.warm_nodes
        gpu_pools.append(
            PoolPlan(
                name=_pool_name(pool.gpu, per_node, pool.spot),
                gpu=pool.gpu,
                gpus_per_node=per_node,
                spot=pool.spot,
                max_nodes=max_nodes,
                node_types=eligible,
                # The dynamic pool's: for the nodes and GPUs the warm ones leave.
                limits=_limits(eligible, max_nodes - warm, pool.max_gpus - warm * per_node),
                idle_after=pool.idle_after,
                termination_grace_period=pool.termination_grace_period,
                # Never evict a running job to repack nodes: a GPU node goes only when empty.
                consolidation_policy="WhenEmpty",
                zones=tuple(pool.zones or ()),
                node_usd_per_hour={nt.name: node_usd_per_hour(nt, facts.region) for nt in eligible},
                gpu_timeout=pool.gpu_timeout,
                warm_nodes=warm,
            )
        )
    cpu_types = facts.node_types_for(None, False)
    max_cpu_nodes = max(1, tenant.cpu_pool.max_cpus // min(nt.vcpus for nt in cpu_types))
    cpu_pool = PoolPlan(
        name="system",
        gpu=None,
        gpus_per_node=0,
        spot=False,
        max_nodes=max_cpu_nodes,
        node_types=cpu_types,
        limits={"cpu": str(tenant.cpu_pool.max_cpus), "memory": f"{math.ceil(max_cpu_nodes * max(nt.capacity_memory_mi for nt in cpu_types) / 1024)}Gi"},
        idle_after="5m",
        termination_grace_period="5m",
        # Underutilization consolidation needs the node's instance-type label to name a node type,
        # which the CCM overwrites (config/node_types.py): only empty nodes can be removed anyway.
        consolidation_policy="WhenEmpty",
        node_usd_per_hour={nt.name: node_usd_per_hour(nt, facts.region) for nt in cpu_types},
    )
    return TenantPlan(tenant, tuple(gpu_pools), cpu_pool, resolve_tenant_monitoring(tenant.monitoring, facts))


def _pool_name(gpu: str, per_node: int, spot: bool) -> str:
    short = gpu.removeprefix("nvidia-").removeprefix("tesla-")
    return f"{short}-{per_node}x" + ("-spot" if spot else "")


def _limits(node_types: tuple[NodeType, ...], max_nodes: int, max_gpus: int) -> dict[str, str]:
    """Pool limits as strings (the schema demands strings). CPU and memory are sized for
    `max_nodes` of the largest shape the pool may get (full resources, see
    `PoolPlan.nodes_within_limits`), so they never stop a node that the GPU limit allows, and no
    larger shape can enter through them."""
    cpu = max_nodes * max(nt.vcpus for nt in node_types)
    memory_gi = math.ceil(max_nodes * max(nt.capacity_memory_mi for nt in node_types) / 1024)
    return {GPU_RESOURCE: str(max_gpus), "cpu": str(cpu), "memory": f"{memory_gi}Gi"}


def _mi(quantity: str) -> int:
    """A memory limit as we write them (`<n>Gi`) in MiB."""
    return int(quantity.removesuffix("Gi")) * 1024


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
