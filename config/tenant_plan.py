"""What a tenant's pools become once checked: the plan of each pool (its node types, limits and
prices) and of the tenant, which components render and the offline plan prices. Split from
config/tenant.py (the model and its checks), which re-exports these names."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import node_properties as props
from .catalog import load_catalog
from .monitoring import OFF, MonitoringPlan
from .node_types import GPU_RESOURCE, NodeType
from .reliability import GPU_TIMEOUT

if TYPE_CHECKING:
    from .tenant import Tenant


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


def _mi(quantity: str) -> int:
    """A memory limit as we write them (`<n>Gi`) in MiB."""
    return int(quantity.removesuffix("Gi")) * 1024
