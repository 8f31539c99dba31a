"""The pools derived from a tenant that passed its checks: what the vcluster.yaml renders, and what
the plan prices.

Money, per node (`node_usd_per_hour`): the VM with its GPUs at its option's price plus its boot disk.
A reserved node's VM is paid by its reservation whether used or not (an always-on cost of the
environment, config/reservations.py), so a reserved node adds only its boot disk. A Flex-start node
of a family Google discounts has no recorded price: it is bounded by the on-demand one, and the
figures it enters are marked as bounds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from . import capacity as cap
from . import node_properties as props
from .base import duration_text, duration_seconds
from .capacity import Reserve
from .catalog import load_catalog
from .facts import EnvironmentFacts
from .tenant_pools import per_node_of, pool_name, pool_node_types
from .monitoring import OFF, MonitoringPlan, resolve_tenant_monitoring
from .node_types import GPU_RESOURCE, NodeType
from .reliability import GPU_TIMEOUT
from .reservations import expire_after_seconds

# What "busy" means, wherever a cost is shown (the plan's tables, docs/costs.md "Costs").
BUSY = (
    "every GPU pool busy at its GPU limit, each node of its first capacity option that has room (its reservation slices, "
    "then the cheapest node type of its first pooled option); everything else as when idle (a tenant's CPU pool: its one "
    "node for system pods)"
)


@dataclass(frozen=True)
class PoolPlan:
    """One dynamic auto-nodes pool, with everything needed to render it and to price it."""

    name: str
    gpu: str | None
    gpus_per_node: int
    max_nodes: int
    node_types: tuple[NodeType, ...]  # the shapes the pool may get, every option, every zone
    limits: dict[str, str]
    idle_after: str
    termination_grace_period: str
    consolidation_policy: str
    # The capacity list (config/capacity.py) and the CAPACITY_OPTION values it selects, in order.
    options: tuple[Any, ...] = (cap.ON_DEMAND,)
    option_values: tuple[str, ...] = (cap.option_value(cap.ON_DEMAND, 1),)
    zones: tuple[str, ...] = ()  # the pool's zones when limited, else every zone of its node types
    # Per node type name: one node's marginal cost, USD/h at the region's list prices
    # (`node_usd_per_hour`); None where the region records no price. Every money figure of the pool
    # (busy, ceiling, always on) is made of these.
    node_usd_per_hour: dict[str, float | None] = dataclasses.field(default_factory=dict)
    # Per node type name whose price is unknown but bounded: the bound (discounted Flex-start).
    node_usd_bound: dict[str, float] = dataclasses.field(default_factory=dict)
    gpu_timeout: str = GPU_TIMEOUT  # GPU pools: the watchdog's limit (config/reliability.py)
    # Nodes of `warm_node_type` kept running (a static pool beside the dynamic one); they are part
    # of `max_nodes`, and `limits` are the dynamic pool's, sized for the nodes they leave.
    warm_nodes: int = 0
    # Karpenter expireAfter where the pool has Flex-start (config/reservations.py), else None.
    expire_after: str | None = None

    @property
    def spot(self) -> bool:
        """Spot is the pool's only option."""
        return self.options == (cap.SPOT,)

    @property
    def capacity_label(self) -> str:
        return ", ".join(cap.describe(e) for e in self.options)

    @property
    def max_gpus(self) -> int:
        return self.max_nodes * self.gpus_per_node

    @property
    def dynamic_nodes(self) -> int:
        """The nodes the dynamic pool may add to the warm ones."""
        return self.max_nodes - self.warm_nodes

    def option_types(self, value: str) -> tuple[NodeType, ...]:
        return tuple(nt for nt in self.node_types if nt.option == value)

    @property
    def warm_node_type(self) -> NodeType:
        """The shape warm nodes have: the cheapest of the pool's first option."""
        first = self.option_types(self.option_values[0]) or self.node_types
        return min(first, key=lambda nt: (self._price_or_bound(nt) or 0.0, nt.vcpus))

    @property
    def warm_usd_per_hour(self) -> float | None:
        """What the warm nodes cost, busy or idle: always on."""
        if not self.warm_nodes:
            return 0.0
        price = self._price_or_bound(self.warm_node_type)
        return None if price is None else self.warm_nodes * price

    @property
    def machine_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(nt.machine_type for nt in self.node_types))

    def node_price(self, nt: NodeType) -> float | None:
        return self.node_usd_per_hour.get(nt.name)

    def _price_or_bound(self, nt: NodeType) -> float | None:
        price = self.node_price(nt)
        return self.node_usd_bound.get(nt.name) if price is None else price

    @property
    def priced(self) -> bool:
        return all(self._price_or_bound(nt) is not None for nt in self.node_types)

    @property
    def bounded(self) -> bool:
        """Some figure of the pool is an upper bound (an unknown discounted Flex-start price)."""
        return any(nt.name in self.node_usd_bound and self.node_price(nt) is None for nt in self.node_types)

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
    def busy_nodes(self) -> list[tuple[NodeType, int]]:
        """The nodes "busy" counts (BUSY): a GPU pool at its GPU limit, filled in the pool's order
        (each reserved slice up to its maxCapacity, then the cheapest type of the first pooled
        option), its warm nodes included; a CPU pool at its one node for the tenant's system pods."""
        if not self.gpu:
            return [(self.cheapest_type, 1)]
        left = self.max_nodes - self.warm_nodes
        nodes: list[tuple[NodeType, int]] = [(self.warm_node_type, self.warm_nodes)] if self.warm_nodes else []
        for value in self.option_values:
            types = self.option_types(value)
            if not types or left <= 0:
                continue
            cheapest = min(types, key=lambda nt: (self._price_or_bound(nt) or 0.0, nt.vcpus))
            take = min(left, cheapest.max_capacity or left) if cheapest.reserved else min(left, self.nodes_within_limits(cheapest))
            nodes.append((cheapest, take))
            left -= take
            if not cheapest.reserved:
                break
        return nodes

    @property
    def busy_usd_per_hour(self) -> float | None:
        """Known when every node "busy" counts has a price (or a bound): a pool whose reserved slice
        holds its whole limit is priced even if a later option's price is unknown."""
        prices = [(n, self._price_or_bound(nt)) for nt, n in self.busy_nodes if n]
        if any(price is None for _, price in prices):
            return None
        return sum(n * price for n, price in prices)  # type: ignore[misc]

    @property
    def cheapest_type(self) -> NodeType:
        return min(self.node_types, key=lambda nt: (self._price_or_bound(nt) or 0.0, nt.vcpus))

    @property
    def ceiling_node_type(self) -> NodeType:
        """The shape whose nodes cost most when the limits are fully used (reserved nodes are paid
        by their reservation: they add their disks only)."""
        return max(self.node_types, key=lambda nt: self.nodes_within_limits(nt) * (self._price_or_bound(nt) or 0.0))

    @property
    def usd_per_hour_ceiling(self) -> float | None:
        """The limits fully used by the most expensive way the limits admit: the worst case."""
        if not self.priced:
            return None
        nt = self.ceiling_node_type
        return self.nodes_within_limits(nt) * self._price_or_bound(nt) + self.warm_usd_per_hour  # type: ignore[operator]

    @property
    def cheapest_usd_per_hour(self) -> float | None:
        return None if not self.priced else self._price_or_bound(self.cheapest_type)

    @property
    def selector(self) -> list[dict]:
        # Only the shapes the pool's limits were sized for.
        return self._requirements(self.machine_types, self.option_values)

    @property
    def warm_selector(self) -> list[dict]:
        """The warm nodes' selector: the pool's, narrowed to the warm shape and its option."""
        return self._requirements((self.warm_node_type.machine_type,), (self.warm_node_type.option,))

    def _requirements(self, machine_types: tuple[str, ...], options: tuple[str, ...]) -> list[dict]:
        accelerator = self.gpu or props.NO_ACCELERATOR
        requirements = [{"property": props.ACCELERATOR, "operator": "In", "values": [accelerator]}]
        if self.gpu:
            requirements.append({"property": props.ACCELERATOR_COUNT, "operator": "In", "values": [str(self.gpus_per_node)]})
            requirements.append({"property": props.INSTANCE_TYPE, "operator": "In", "values": list(machine_types)})
        # The (capacity type, rank) pairs of the pool's list, and its own reserved slices: one
        # In requirement, since requirements on different properties must all hold.
        requirements.append({"property": props.CAPACITY_OPTION, "operator": "In", "values": list(options)})
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
    tenant: Any  # config.tenant.Tenant
    gpu_pools: tuple[PoolPlan, ...]
    cpu_pool: PoolPlan
    monitoring: MonitoringPlan = OFF

    @property
    def gpu_busy_usd_per_hour(self) -> float | None:
        return _sum(p.busy_usd_per_hour for p in self.gpu_pools)

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


def node_usd_per_hour(nt: NodeType, region: str, *, bound: bool = False) -> float | None:
    """One node of `nt` per hour at the region's list prices, what it adds to the bill: the VM with
    its GPUs (its option's price; a reserved VM is paid by its reservation, so nothing) and its boot
    disk. None where the region records either price; `bound`: an unknown option price taken at its
    bound (NodeType.price_bound)."""
    regional = load_catalog().prices.get(region)
    disk = regional.disk(nt.properties.get(props.DISK_TYPE, ""), float(nt.properties.get(props.DISK_SIZE_GB, 0))) if regional else None
    vm = 0.0 if nt.reserved else nt.usd_per_hour if nt.usd_per_hour is not None or not bound else nt.price_bound
    if vm is None or disk is None:
        return None
    return vm + disk.usd_per_hour


def plan_tenant(tenant, facts: EnvironmentFacts) -> TenantPlan:
    """The pools of a tenant that passed `check_tenant`."""
    gpu_pools = []
    for pool in tenant.gpu_pools:
        per_node = per_node_of(pool, facts, tenant.name)
        eligible = pool_node_types(pool, per_node, facts, tenant.name)
        max_nodes = pool.max_gpus // per_node
        warm = pool.warm_nodes
        values = tuple(
            cap.reserved_type_name(e.name, tenant.name) if isinstance(e, Reserve) else cap.option_value(e, r)
            for e, r in zip(pool.options, cap.ranks(pool.options), strict=True)
        )
        expire = None
        if cap.FLEX_START in pool.options and facts.flex_start_seconds:
            expire = duration_text(expire_after_seconds(facts.flex_start_seconds, duration_seconds(pool.termination_grace_period)))
        gpu_pools.append(
            PoolPlan(
                name=pool_name(pool.gpu, per_node, pool.options),
                gpu=pool.gpu,
                gpus_per_node=per_node,
                max_nodes=max_nodes,
                node_types=eligible,
                # The dynamic pool's: for the nodes and GPUs the warm ones leave.
                limits=_limits(eligible, max_nodes - warm, pool.max_gpus - warm * per_node),
                idle_after=pool.idle_after,
                termination_grace_period=pool.termination_grace_period,
                # Never evict a running job to repack nodes: a GPU node goes only when empty.
                consolidation_policy="WhenEmpty",
                options=pool.options,
                option_values=values,
                zones=tuple(pool.zones or ()),
                node_usd_per_hour={nt.name: node_usd_per_hour(nt, facts.region) for nt in eligible},
                node_usd_bound={
                    nt.name: b for nt in eligible if nt.price_bound is not None and (b := node_usd_per_hour(nt, facts.region, bound=True)) is not None
                },
                gpu_timeout=pool.gpu_timeout,
                warm_nodes=warm,
                expire_after=expire,
            )
        )
    cpu_types = facts.node_types_for(None, cap.ON_DEMAND)
    max_cpu_nodes = max(1, tenant.cpu_pool.max_cpus // min(nt.vcpus for nt in cpu_types))
    cpu_pool = PoolPlan(
        name="system",
        gpu=None,
        gpus_per_node=0,
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
