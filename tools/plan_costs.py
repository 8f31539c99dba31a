"""What a stack costs, for the offline plan: list prices of the stack's region from the catalog
(config/catalog.yaml), never another region's.

Three figures per part, all in USD:
  always on   what runs with no workload at all (per hour and per 730-hour month);
  busy        config.tenant_plan.BUSY: every GPU pool at its GPU limit, filled in the order of its
              capacity list (its reservation slices, then its first pooled option's cheapest type; a
              pod asking for more than the smallest shape gets a larger one, up to the ceiling);
              everything else as when idle. Not a forecast: what the limits cost when used, on top
              of what is committed;
  ceiling     the pools' limits fully used by the most expensive shapes the limits admit.
A pool's figures are its own (config.tenant_plan.PoolPlan, one node = VM and boot disk); the tenant
output gpuBudgetUsdPerHour is the same GPU ceiling.
A figure that needs a price the region does not record is None ("unknown"), and so is every sum
it enters. Usage-based charges (egress, NAT and load-balancer data processing, tenants' own
volumes, logging) are named as not included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from config import node_properties as props
from config.catalog import Catalog
from config.node_types import NodeType
from config.prices import PRICES_HOURS_PER_MONTH, Price, RegionPrices
from config.quota import team_stack_tenants
from config.stack import EnvironmentStack, TenantStack
from config.tenant_plan import PoolPlan, TenantPlan
from config.versions import VCLUSTER_CONTROL_PLANE_DISK_CLASS, VCLUSTER_CONTROL_PLANE_VOLUME_GI

HOURS_PER_MONTH = PRICES_HOURS_PER_MONTH
# A regional GKE Standard cluster without explicit node locations puts its node pools in three
# zones of the region; a zonal cluster in one.
REGIONAL_CLUSTER_ZONES = 3
# The GKE system pool's boot disk type (components/gke_cluster.py).
SYSTEM_POOL_DISK_TYPE = "pd-balanced"
NOT_INCLUDED = (
    "network egress, Cloud NAT data processing (0.045 USD/GiB), load-balancer data processing, "
    "tenants' own persistent volumes, logging and monitoring, Spot price changes, taxes and discounts"
)


@dataclass
class CostLine:
    part: str
    always_on: float | None  # USD/h
    busy: float | None  # USD/h
    ceiling: float | None  # USD/h
    estimate: bool = True  # uses figures the catalog marks as estimates
    tenant: str | None = None

    @property
    def always_on_per_month(self) -> float | None:
        return None if self.always_on is None else self.always_on * HOURS_PER_MONTH


@dataclass
class PoolCost:
    tenant: str
    pool: str
    machine_types: tuple[str, ...]
    limits: dict[str, str]
    busy: float | None
    ceiling: float | None
    ceiling_shape: str | None  # what the ceiling is made of, e.g. "4 × g2-standard-4"
    warm_nodes: int = 0
    warm_machine_type: str | None = None
    warm: float | None = 0.0  # USD/h of the warm nodes, always on
    bounded: bool = False  # some figure is an upper bound (discounted Flex-start at the on-demand price)

    @property
    def warm_per_month(self) -> float | None:
        return None if self.warm is None else self.warm * HOURS_PER_MONTH


@dataclass
class StackCosts:
    region: str
    prices: RegionPrices | None  # None: the region has no recorded prices
    # Every tenant control plane of the environment (inline and committed team stacks): one
    # forwarding rule each in the host project, sharing its price tier.
    control_planes: tuple[str, ...] = ()
    lines: list[CostLine] = field(default_factory=list)
    pools: list[PoolCost] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # why figures are unknown

    @property
    def forwarding_rules(self) -> float | None:
        """The host project's forwarding rules of the tenant control planes, USD/h."""
        return None if self.prices is None else self.prices.forwarding_rules(len(self.control_planes)).usd_per_hour

    @property
    def load_balancer_share(self) -> float | None:
        """Each control plane's equal share of them, USD/h."""
        total = self.forwarding_rules
        return None if total is None or not self.control_planes else total / len(self.control_planes)

    def total(self, attribute: str) -> float | None:
        values = [getattr(line, attribute) for line in self.lines]
        return None if any(v is None for v in values) else sum(values)


def _add(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _usd(price: Price | None) -> float | None:
    return None if price is None else price.usd_per_hour


_CAPACITY_LABEL = {props.ON_DEMAND: "on-demand", props.SPOT: "Spot", props.FLEX_START: "Flex-start", props.RESERVED: "reservation"}


class _Pricer:
    def __init__(self, catalog: Catalog, region: str, overrides: dict[str, float], costs: StackCosts):
        self.catalog, self.region, self.overrides, self.costs = catalog, region, overrides, costs
        self.regional = catalog.prices.get(region)

    def unknown(self, why: str) -> None:
        if why not in self.costs.unknown:
            self.costs.unknown.append(why)

    def note_unknown(self, nt: NodeType) -> None:
        """Say why a node of this type has no price (the VM's, or its boot disk's)."""
        self.disk(nt.properties.get(props.DISK_TYPE, ""), float(nt.properties.get(props.DISK_SIZE_GB, 0)))
        if nt.usd_per_hour is None and nt.price_bound is None:
            what = f"{nt.machine_type}{' × ' + str(nt.gpu_count) + ' ' + nt.gpu if nt.gpu and nt.attach == 'guest' else ''}"
            self.unknown(f"{self.region} records no {_CAPACITY_LABEL[nt.capacity]} price for {what}")

    def disk(self, disk_type: str, size_gb: float) -> float | None:
        price = self.regional.disk(disk_type, size_gb) if self.regional else None
        if price is None:
            self.unknown(f"{self.region} records no price for {disk_type} disks")
        return _usd(price)

    def machine(self, machine: str) -> float | None:
        price = self.catalog.machine_price(machine, self.region, False, self.overrides)
        if price is None:
            self.unknown(f"{self.region} records no price for {machine}")
        return _usd(price)

    def nat(self, vms: int, addresses: int) -> float:
        return self.catalog.services.nat_gateway(vms, addresses).usd_per_hour


def pool_cost(pricer: _Pricer, tenant: str, pool: PoolPlan) -> PoolCost:
    for nt in pool.node_types:
        pricer.note_unknown(nt)
    worst = pool.ceiling_node_type
    shape = f"{pool.nodes_within_limits(worst)} × {worst.machine_type}" if pool.priced else None
    warm_type = pool.warm_node_type.machine_type if pool.warm_nodes else None
    if shape and pool.warm_nodes:
        shape += f" + {pool.warm_nodes} warm × {warm_type}"
    return PoolCost(
        tenant, pool.name, pool.machine_types, dict(pool.limits), pool.busy_usd_per_hour, pool.usd_per_hour_ceiling, shape,
        pool.warm_nodes, warm_type, pool.warm_usd_per_hour, pool.bounded,
    )


def _max_nodes(pool: PoolPlan) -> int:
    """The most nodes the pool can hold: its warm ones and what its dynamic limits admit."""
    return max(pool.nodes_within_limits(nt) for nt in pool.node_types) + pool.warm_nodes


def tenant_lines(pricer: _Pricer, plan: TenantPlan) -> list[CostLine]:
    """A tenant's parts: its control plane (load balancer and data volume), its Cloud NAT, its
    system node(s) and its GPU pools."""
    name = plan.tenant.name
    pools = [pool_cost(pricer, name, p) for p in plan.gpu_pools]
    cpu = pool_cost(pricer, name, plan.cpu_pool)
    pricer.costs.pools.extend([*pools, cpu])
    always_on_node = plan.always_on_node_usd_per_hour

    # The control plane's LoadBalancer Service is one forwarding rule in the host project, priced
    # together with the other tenants' (one flat charge for up to five): each pays an equal share,
    # the same in every plan of the environment. Its data volume is the vcluster chart's default
    # claim on the host cluster's default StorageClass.
    load_balancer = pricer.costs.load_balancer_share
    volume = pricer.disk(VCLUSTER_CONTROL_PLANE_DISK_CLASS, VCLUSTER_CONTROL_PLANE_VOLUME_GI)
    control_plane = _add(load_balancer, volume)

    # One Cloud NAT gateway per tenant network: per VM using it, and per external address.
    addresses = int(getattr(plan.tenant.network, "nat_addresses", 1) or 1)
    busy_vms = sum(p.max_nodes for p in plan.gpu_pools)
    nat_idle = pricer.nat(1 + plan.warm_nodes, addresses)
    nat_busy = pricer.nat(1 + busy_vms, addresses)
    nat_ceiling = pricer.nat(_max_nodes(plan.cpu_pool) + sum(_max_nodes(p) for p in plan.gpu_pools), addresses)

    gpu_busy = _add(*(p.busy for p in pools))
    gpu_ceiling = _add(*(p.ceiling for p in pools))
    estimate = pricer.regional is None or any(nt.price_estimate for p in (*plan.gpu_pools, plan.cpu_pool) for nt in p.node_types)
    return [
        CostLine(f"tenant {name}: control plane (load balancer, {VCLUSTER_CONTROL_PLANE_VOLUME_GI} GiB volume)", control_plane, control_plane, control_plane, True, name),
        CostLine(f"tenant {name}: Cloud NAT ({addresses} address{'es' if addresses > 1 else ''})", nat_idle, nat_busy, nat_ceiling, False, name),
        CostLine(f"tenant {name}: CPU pool ({', '.join(plan.cpu_pool.machine_types)})", always_on_node, cpu.busy, cpu.ceiling, estimate, name),
        # Idle, GPU pools cost nothing, but for their warm nodes (gpuPools[i].warmNodes).
        CostLine(f"tenant {name}: GPU pools{_warm_part(plan)}", plan.warm_usd_per_hour, gpu_busy, gpu_ceiling, estimate, name),
    ]


def _warm_part(plan: TenantPlan) -> str:
    warm = [f"{p.warm_nodes} × {p.warm_node_type.machine_type}" for p in plan.gpu_pools if p.warm_nodes]
    return f" (warm: {', '.join(warm)})" if warm else ""


def control_planes_of(loaded: EnvironmentStack | TenantStack, stack: str, project_dir: Path) -> tuple[str, ...]:
    """Every tenant of the stack's environment, whose control planes' LoadBalancer Services are all
    in the host project: the environment's inline tenants, then the committed team stacks that name
    it (config.quota.team_stack_tenants, as the GPU quota counts them). The same set in the plan of
    the environment and in the plan of each of its team stacks."""
    if isinstance(loaded, EnvironmentStack):
        inline, environment_stack = [t.tenant.name for t in loaded.tenants], stack
    else:
        inline, environment_stack = [t.name for t in loaded.facts.tenants], loaded.environment_stack.split("/")[-1]
    entries = team_stack_tenants(project_dir, environment_stack_name=environment_stack)
    names = inline + [e.tenant.name for e in entries]
    if isinstance(loaded, TenantStack) and f"stack {stack}" not in {e.source for e in entries}:
        names.append(loaded.tenant.tenant.name)
    return tuple(names)


def environment_costs(catalog: Catalog, env: EnvironmentStack, control_planes: tuple[str, ...] | None = None) -> StackCosts:
    """`control_planes`: every tenant of the environment (control_planes_of); by default its inline
    tenants only, as for an environment without team stacks."""
    if control_planes is None:
        control_planes = tuple(t.tenant.name for t in env.tenants)
    costs = StackCosts(env.region, catalog.prices.get(env.region), control_planes)
    pricer = _Pricer(catalog, env.region, dict(env.node_provider.prices), costs)
    services = catalog.services
    costs.lines.append(CostLine("GKE cluster management fee", services.gke_cluster_fee, services.gke_cluster_fee, services.gke_cluster_fee, False))

    pool = env.cluster.system_pool
    zones = REGIONAL_CLUSTER_ZONES if env.cluster.location == env.region else 1
    node = _add(pricer.machine(pool.machine_type), pricer.disk(SYSTEM_POOL_DISK_TYPE, pool.disk_size_gb))
    minimum, maximum = pool.min_nodes * zones, pool.max_nodes * zones
    idle = None if node is None else max(minimum, 1) * node  # the platform keeps at least one system node
    costs.lines.append(
        CostLine(
            f"GKE system pool ({pool.machine_type} × {minimum}–{maximum}, {pool.disk_size_gb} GB {SYSTEM_POOL_DISK_TYPE} each)",
            idle, idle, None if node is None else maximum * node, True,
        )
    )
    if env.cluster.private_nodes.enabled:
        # The host's Cloud NAT (AUTO_ONLY: at least one address) for the private system nodes.
        costs.lines.append(CostLine("host Cloud NAT (1 address)", pricer.nat(max(minimum, 1), 1), pricer.nat(max(minimum, 1), 1), pricer.nat(maximum, 1), False))
    for reserved in reservation_lines(pricer, env):
        costs.lines.append(reserved)
    for tenant in env.tenants:
        costs.lines.extend(tenant_lines(pricer, tenant))
    _check_region(pricer)
    return costs


def reservation_lines(pricer: _Pricer, env: EnvironmentStack) -> list[CostLine]:
    """Each reservation of the environment, billed from its creation whether its VMs run or not (at
    the on-demand rate of its VMs, or the rate the stack states: nodeProvider.reservations[i].usdPerHour):
    always on, the same busy and at the ceiling. Its VMs' boot disks are the tenants' (their pools)."""
    lines = []
    for r in env.node_provider.reservations:
        reserved = next((nt for nt in env.offer.node_types if nt.reserved and nt.properties.get(props.RESERVATION) == r.name), None)
        per_vm = None if reserved is None else reserved.usd_per_hour
        if per_vm is None:
            pricer.unknown(f"{pricer.region} records no price for {r.machine_type}: set nodeProvider.reservations[].usdPerHour of {r.name}")
        total = None if per_vm is None else r.count * per_vm
        slices = ", ".join(f"{s.tenant} {s.count}" for s in r.slices)
        estimate = r.usd_per_hour is None and (reserved is None or reserved.price_estimate)
        lines.append(CostLine(f"reservation {r.name} ({r.count} × {r.machine_type}, {r.zone}; slices {slices}): committed", total, total, total, estimate))
    return lines


def tenant_stack_costs(catalog: Catalog, stack: TenantStack, control_planes: tuple[str, ...]) -> StackCosts:
    """`control_planes`: as for environment_costs, this stack's tenant among them."""
    region = stack.facts.region
    costs = StackCosts(region, catalog.prices.get(region), control_planes)
    pricer = _Pricer(catalog, region, {}, costs)
    costs.lines.extend(tenant_lines(pricer, stack.tenant))
    _check_region(pricer)
    return costs


def _check_region(pricer: _Pricer) -> None:
    if pricer.regional is None:
        pricer.costs.unknown.insert(0, f"the catalog records no prices for {pricer.region}: its costs are unknown (add a `prices.{pricer.region}` block to config/catalog.yaml)")
