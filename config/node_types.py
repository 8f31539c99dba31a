"""Node types of the GPU NodeProvider, generated from the catalog and the environment's config.

One node type per (machine shape, zone, capacity type, rank) for every offered GPU type, one per
tenant slice of each reservation of the environment, plus CPU types for tenants' system pods. Everything a node type claims comes from the catalog: its `resources` are
the machine's full shape and its `overhead.kubeReserved` the reserve of `catalog.reserve`, as the
platform's API defines them (loft-sh/loft api/openapi-spec/swagger.json at tag v4.11.2,
`TerraformNodeTypeSpec`: "Resources lists the full resources for a single node", `NodeTypeOverhead`:
"KubeReserved is the resource overhead for kubelet and other Kubernetes system daemons"); its cost is
the region's list price; only a reserved slice's type has a `maxCapacity` (see `generate_node_types`). A pairing the catalog does not hold (E2 with a GPU, 8 × T4, L4 on N1)
cannot be produced because only catalog shapes are iterated, and a GPU node type exists only in the
zones where the catalog records its machine family and only as the capacity types the family is
sold with (config/availability.py).

Names: `<machine type>[-<gpu>x<count>]-<zone>[-spot|-flex][-r<rank>]` (rank 1 unsuffixed, so the
names of on-demand and Spot types are what they were before ranks), and `rsv-<reservation>-<tenant>`
for a tenant's slice of a reservation; one zone and one capacity type each, so a node claim's zone
(a PersistentVolume's, a spread constraint's) is decided by the node type. The
platform labels a node `node.kubernetes.io/instance-type` = its node type (platform docs, node
providers overview, "In-built properties"), which inside the tenant's Karpenter is
`<provider>.<node type>` (vcluster-docs vcluster/_fragments/deploy/auto-nodes-scheduling.mdx: the
NodeClaim requirement `node.kubernetes.io/instance-type In [my-node-provider.large, …]`;
platform/administer/projects/allowed/node-types.mdx: node types are named like `aws.large`). The
cloud controller manager's node controller overwrites that label with the bare machine type when it
initializes the node (kubernetes/cloud-provider-gcp at tag ccm/v33.1.1, the image the tenant runs:
vendor/k8s.io/cloud-provider/controllers/node/node_controller.go `getNodeModifiersFromCloudProvider`
sets the instance-type and zone labels unconditionally, providers/gce/gce_instances.go
`InstanceMetadata` returns the machine type and the VM's zone). No node type name can equal that value
(a `<provider>.` prefix on one side, a zone on the other): naming node types after machine types, as
upstream does, would not make them agree either. So after initialization the label names no node
type at all, never a wrong one; the zone labels (topology.kubernetes.io/zone, topology.gke.io/zone)
do agree, as node_properties.py explains. Karpenter looks a running node's instance type up by that
label for *underutilization* consolidation only (kubernetes-sigs/karpenter v1.14.1
pkg/controllers/disruption/types.go `NewCandidate` "We only care if instanceType in non-empty
consolidation"; consolidation.go `ShouldDisrupt` "Instance Type … not found"); empty nodes are
removed regardless (emptiness.go `ShouldDisrupt`), which is what the GPU pools use (`WhenEmpty`).
Karpenter v1.0.x refused every disruption of such a node ("Instance Type … not found": v1.0.0 to
v1.0.9 pkg/controllers/disruption/types.go `NewCandidate`), as it would for upstream's nodes; from
v1.1.0 the same function no longer does. Which Karpenter vCluster embeds is not public, so
`make acceptance` measures that an idle GPU VM is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import capacity as cap
from . import node_properties as props
from .availability import FLEX_LIST_PRICE, Availability, Family, load_availability
from .catalog import BUILTIN, EVICTION_THRESHOLD_MI, GUEST, NONE, Catalog, Shape, reserve
from .prices import Price

GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class NodeType:
    name: str
    machine_type: str
    gpu: str | None
    gpu_count: int
    attach: str  # GUEST | BUILTIN | NONE
    zone: str
    capacity: str  # props.ON_DEMAND | SPOT | FLEX_START | RESERVED
    vcpus: int  # the machine's full shape
    capacity_memory_mi: int
    reserved_cpu_millis: int  # overhead.kubeReserved
    reserved_memory_mi: int
    usd_per_hour: float | None  # the option's price; None: not recorded in the region
    price_estimate: bool  # the price comes (partly) from an estimate
    max_capacity: int | None  # None: no limit from us (every type but a reserved slice's)
    properties: dict[str, str] = field(hash=False)
    rank: int = 1  # config/capacity.py: 0 for reserved types, 1.. for the others
    # What the option costs at most where its own price is unknown: the on-demand price of a
    # discounted Flex-start type. Orders the type within its rank; the plan shows it as "< …".
    price_bound: float | None = None
    # Below the price in `cost`: the zone's place in nodeProvider.zones × 100 + the shape's place
    # (config/capacity.py `tie_break`), so no two types of a pool cost the same.
    tie_break: int = 0

    @property
    def spot(self) -> bool:
        return self.capacity == props.SPOT

    @property
    def reserved(self) -> bool:
        return self.capacity == props.RESERVED

    @property
    def option(self) -> str:
        """What pools select it by (props.CAPACITY_OPTION)."""
        return self.properties.get(props.CAPACITY_OPTION, cap.option_value(self.capacity, self.rank))

    @property
    def cpu_millis(self) -> int:
        """CPU pods can use: the shape minus the reserve."""
        return self.vcpus * 1000 - self.reserved_cpu_millis

    @property
    def memory_mi(self) -> int:
        """Memory pods can use: the shape minus the reserve and the kubelet's hard eviction
        threshold (config/catalog.py `reserve`)."""
        return self.capacity_memory_mi - self.reserved_memory_mi - EVICTION_THRESHOLD_MI

    @property
    def resources(self) -> dict[str, str]:
        """The node's full resources (TerraformNodeTypeSpec.resources)."""
        resources = {"cpu": str(self.vcpus), "memory": f"{self.capacity_memory_mi}Mi"}
        if self.gpu_count:
            resources[GPU_RESOURCE] = str(self.gpu_count)
        return resources

    @property
    def kube_reserved(self) -> dict[str, str]:
        """What the node keeps for itself (TerraformNodeTypeSpec.overhead.kubeReserved)."""
        return {"cpu": f"{self.reserved_cpu_millis}m", "memory": f"{self.reserved_memory_mi}Mi"}

    @property
    def cost(self) -> int | None:
        """The NodeProvider's integer cost: the rank first, then the list price in thousandths of a
        USD per hour (config/capacity.py `cost`), so the platform, which picks the cheapest
        available type that fits, follows each pool's order and within it the cheapest shape and
        zone. A CPU type without a recorded price leaves it out: the platform then derives one from
        the resources (platform docs, node providers overview, "cost")."""
        price = self.usd_per_hour if self.usd_per_hour is not None else self.price_bound
        if self.gpu is None:
            return None if price is None else round(price * 1000)
        return cap.cost(self.rank, price, self.tie_break)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "machineType": self.machine_type,
            "gpu": self.gpu,
            "gpuCount": self.gpu_count,
            "attach": self.attach,
            "zone": self.zone,
            "capacity": self.capacity,
            "rank": self.rank,
            "spot": self.spot,
            "vcpus": self.vcpus,
            "memoryMi": self.capacity_memory_mi,
            "reservedCpuMillis": self.reserved_cpu_millis,
            "reservedMemoryMi": self.reserved_memory_mi,
            "usdPerHour": self.usd_per_hour,
            "priceBound": self.price_bound,
            "tieBreak": self.tie_break,
            "priceEstimate": self.price_estimate,
            "maxCapacity": self.max_capacity,
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeType:
        # Exports of environments deployed before capacity lists carry `spot` only: rank 1.
        capacity = data.get("capacity") or (props.SPOT if data.get("spot") else props.ON_DEMAND)
        return cls(
            name=data["name"],
            machine_type=data["machineType"],
            gpu=data.get("gpu"),
            gpu_count=int(data["gpuCount"]),
            attach=data["attach"],
            zone=data["zone"],
            capacity=capacity,
            rank=int(data.get("rank", 1)),
            vcpus=int(data["vcpus"]),
            capacity_memory_mi=int(data["memoryMi"]),
            reserved_cpu_millis=int(data["reservedCpuMillis"]),
            reserved_memory_mi=int(data["reservedMemoryMi"]),
            usd_per_hour=None if data.get("usdPerHour") is None else float(data["usdPerHour"]),
            price_bound=None if data.get("priceBound") is None else float(data["priceBound"]),
            tie_break=int(data.get("tieBreak", 0)),
            price_estimate=bool(data.get("priceEstimate", True)),
            max_capacity=None if data.get("maxCapacity") is None else int(data["maxCapacity"]),
            properties=dict(data["properties"]),
        )


@dataclass(frozen=True)
class QuotaUse:
    """A GPU type's regional quota and the shapes it excludes (larger than the quota, not offered)."""

    gpu: str
    quota: int
    excluded: tuple[str, ...]


@dataclass(frozen=True)
class NodeTypeOffer:
    node_types: tuple[NodeType, ...]
    quota: tuple[QuotaUse, ...]


@dataclass(frozen=True)
class ReservedSlice:
    """One tenant's slice of one reservation of the environment (config/reservations.py)."""

    reservation: str
    project: str  # the reservation's owner project
    zone: str
    machine_type: str
    gpu: str | None  # N1: the attached GPU type (config/reservations.py); None: the machine's built-in GPUs
    tenant: str
    count: int  # VMs: the node type's maxCapacity
    bound: bool  # consumed with the reservation-bound provisioning model
    usd_per_hour: float | None = None  # a reserved VM's own rate, where stated


@dataclass(frozen=True)
class Offering:
    """What the environment offers besides on-demand: which capacity types, and at which ranks."""

    spot: bool = False
    flex_start_seconds: int | None = None  # nodeProvider.flexStart.maxRunDuration; None: no Flex-start
    # (GPU type, capacity type) → ranks above 1 some pool of the environment lists it at.
    extra_ranks: dict[tuple[str, str], frozenset[int]] = field(default_factory=dict, hash=False)
    reserved: tuple[ReservedSlice, ...] = ()
    preemptible_quota: dict[str, int] = field(default_factory=dict, hash=False)  # Spot and Flex-start draw on it

    def pooled(self) -> tuple[str, ...]:
        return (props.ON_DEMAND, *((props.SPOT,) if self.spot else ()), *((props.FLEX_START,) if self.flex_start_seconds else ()))

    def ranks(self, gpu: str, capacity: str) -> tuple[int, ...]:
        return tuple(sorted({1, *self.extra_ranks.get((gpu, capacity), ())}))


def generate_node_types(
    *,
    catalog: Catalog,
    region: str,
    zones: tuple[str, ...],
    gpu_types: tuple[str, ...],
    offering: Offering,
    gpu_quota: dict[str, int],
    cpu_machine_types: tuple[str, ...],
    gpu_disk: tuple[int, str],
    cpu_disk: tuple[int, str],
    gpu_image_family: str | None = None,
    prices: dict[str, float] | None = None,
    availability: Availability | None = None,
) -> NodeTypeOffer:
    availability = availability or load_availability()
    node_types: list[NodeType] = []
    quota_use: list[QuotaUse] = []
    image = (gpu_image_family or catalog.gpu_image.family, catalog.gpu_image.project)

    for gpu in gpu_types:
        # None: a GPU Google sells on demand nowhere here states no on-demand quota (config/node_provider.py).
        quota = gpu_quota.get(gpu)
        excluded = []
        for shape_place, shape in enumerate(catalog.shapes_for(gpu)):
            if quota is not None and quota // shape.gpu_count == 0:
                excluded.append(f"{shape.machine.name} ({shape.gpu_count} GPUs)")
                continue
            family = availability.family_of(shape)
            offered = family.zones_in(region) or ()
            for zone_place, zone in ((i, z) for i, z in enumerate(zones) if z in offered):
                for capacity in (c for c in offering.pooled() if c in family.capacity_types):
                    # Spot and Flex-start VMs draw on the preemptible GPU quota where one is set: a
                    # shape that quota cannot hold once is not offered as them.
                    pool_quota = offering.preemptible_quota.get(gpu) if capacity != props.ON_DEMAND else None
                    if (pool_quota or quota) is not None and (pool_quota or quota) // shape.gpu_count == 0:
                        continue
                    # No maxCapacity on pooled types: the platform counts a type's nodes across the
                    # whole NodeProvider, every tenant's together ("the platform tracks how many
                    # nodes of this type have been created and marks the node type as unavailable
                    # once the limit is reached", vcluster-docs platform/administer/node-providers/
                    # overview.mdx at commit 0f45a06, "Max capacity"), while GPU quota is each
                    # project's own, per region and GPU type across every shape, zone and capacity
                    # type. A cap of quota ÷ GPUs per VM would let one team's nodes make the type
                    # unavailable to a team with its own quota, and even for tenants sharing one
                    # project it bounds one type, never their sum. Each tenant's NodePool limits
                    # (maxGpus, checked against the quota) bound its nodes; the plan's quota table
                    # sums them per project (config/quota.py); past a quota Compute Engine refuses
                    # the VM and the capacity fallback asks for the next option.
                    max_capacity = None
                    for rank in offering.ranks(gpu, capacity):
                        node_types.append(
                            _node_type(
                                catalog, region, shape, family, zone, capacity, rank, max_capacity, gpu_disk, image, prices, offering,
                                cap.tie_break(zone_place, shape_place),
                            )
                        )
        quota_use.append(QuotaUse(gpu, quota or 0, tuple(excluded)))

    for place, reserved in enumerate(offering.reserved):
        zone_place = zones.index(reserved.zone) if reserved.zone in zones else 0
        node_types.append(_reserved_type(catalog, region, reserved, gpu_disk, image, prices, cap.tie_break(zone_place, place)))

    for machine_name in cpu_machine_types:
        machine = catalog.machines[machine_name]
        price = catalog.machine_price(machine.name, region, False, prices)
        for zone in zones:
            node_types.append(
                NodeType(
                    name=_name(machine.name, zone, props.ON_DEMAND, 1),
                    machine_type=machine.name,
                    gpu=None,
                    gpu_count=0,
                    attach=NONE,
                    zone=zone,
                    capacity=props.ON_DEMAND,
                    **_shape_and_price(catalog, region, machine, price),
                    max_capacity=None,
                    properties=_properties(
                        machine.name, props.NO_ACCELERATOR, 0, props.ON_DEMAND, 1, region, zone,
                        _disk(cpu_disk, machine.disk_types), catalog.cpu_image.family, catalog.cpu_image.project,
                    ),
                )
            )
    return NodeTypeOffer(tuple(node_types), tuple(quota_use))


def _shape_and_price(catalog: Catalog, region: str, machine, price: Price | None) -> dict[str, Any]:
    reserved_cpu, reserved_memory = reserve(machine.vcpus, machine.memory_gb)
    regional = catalog.prices.get(region)
    return {
        "vcpus": machine.vcpus,
        "capacity_memory_mi": int(machine.memory_gb * 1024),
        "reserved_cpu_millis": reserved_cpu,
        "reserved_memory_mi": reserved_memory,
        "usd_per_hour": None if price is None else price.usd_per_hour,
        "price_estimate": price is None or regional is None or regional.is_estimate(price),
    }


def option_price(catalog: Catalog, region: str, shape: Shape, family: Family, capacity: str, prices) -> tuple[Price | None, Price | None]:
    """(the option's price, an upper bound where that price is unknown) for one VM of `shape`:
    on-demand and Spot from the catalog; Flex-start at the on-demand price where Google sells it at
    the list price (G2), else unknown and bounded by the on-demand price (no Flex-start figure is
    recorded: config/catalog.yaml `availability`, `flexStart`)."""
    if capacity == props.SPOT:
        return shape.price(catalog, region, True, prices), None
    on_demand = shape.price(catalog, region, False, prices)
    if capacity == props.FLEX_START and family.flex_start != FLEX_LIST_PRICE:
        return None, on_demand
    return on_demand, None


def _node_type(catalog, region, shape: Shape, family: Family, zone, capacity, rank, max_capacity, gpu_disk, image, prices, offering, tie) -> NodeType:
    machine = shape.machine
    price, bound = option_price(catalog, region, shape, family, capacity, prices)
    properties = _properties(
        machine.name, shape.gpu, shape.gpu_count, capacity, rank, region, zone, _disk(gpu_disk, machine.disk_types), *image
    )
    if capacity == props.FLEX_START:
        properties[props.MAX_RUN_DURATION] = str(offering.flex_start_seconds)
    return NodeType(
        name=_name(_base_name(catalog, shape), zone, capacity, rank),
        machine_type=machine.name,
        gpu=shape.gpu,
        gpu_count=shape.gpu_count,
        attach=shape.attach,
        zone=zone,
        capacity=capacity,
        rank=rank,
        **_shape_and_price(catalog, region, machine, price),
        price_bound=None if bound is None else bound.usd_per_hour,
        max_capacity=max_capacity,
        properties=properties,
        tie_break=tie,
    )


def _reserved_type(catalog: Catalog, region: str, reserved: ReservedSlice, gpu_disk, image, prices, tie: int) -> NodeType:
    """A tenant's slice of a reservation: the reservation's shape in its zone, at most the slice's
    count of VMs (maxCapacity: "the platform tracks how many nodes of this type have been created
    and marks the node type as unavailable once the limit is reached", vcluster-docs
    platform/administer/node-providers/overview.mdx at commit 0f45a06, "Max capacity"). Its price
    is what a reserved VM is billed, used or not: the stated rate, else the on-demand list price
    (reservations are "charged at the same on-demand rate as running VMs",
    https://cloud.google.com/compute/docs/instances/reservations-overview)."""
    machine = catalog.machines[reserved.machine_type]
    shape = next(s for s in catalog.shapes_for(reserved.gpu or machine.gpu) if s.machine.name == machine.name)
    price = Price(reserved.usd_per_hour, ("nodeProvider.reservations",)) if reserved.usd_per_hour is not None else shape.price(catalog, region, False, prices)
    name = cap.reserved_type_name(reserved.reservation, reserved.tenant)
    properties = _properties(
        machine.name, shape.gpu, shape.gpu_count, props.RESERVED, cap.RESERVED_RANK, region, reserved.zone,
        _disk(gpu_disk, machine.disk_types), *image, option=name,
    )
    properties.update(
        {
            props.RESERVATION: reserved.reservation,
            props.RESERVATION_PROJECT: reserved.project,
            props.RESERVATION_TENANT: reserved.tenant,
            props.RESERVATION_BOUND: "true" if reserved.bound else "false",
        }
    )
    shaped = _shape_and_price(catalog, region, machine, price)
    if reserved.usd_per_hour is not None:
        shaped["price_estimate"] = False  # the stack's own figure
    return NodeType(
        name=name,
        machine_type=machine.name,
        gpu=shape.gpu,
        gpu_count=shape.gpu_count,
        attach=shape.attach,
        zone=reserved.zone,
        capacity=props.RESERVED,
        rank=cap.RESERVED_RANK,
        **shaped,
        max_capacity=reserved.count,
        properties=properties,
        tie_break=tie,
    )


def _base_name(catalog: Catalog, shape: Shape) -> str:
    if shape.attach == BUILTIN:
        return shape.machine.name
    return f"{shape.machine.name}-{catalog.gpus[shape.gpu].short}x{shape.gpu_count}"


_SUFFIX = {props.ON_DEMAND: "", props.SPOT: "-spot", props.FLEX_START: "-flex"}


def _name(base: str, zone: str, capacity: str, rank: int) -> str:
    return f"{base}-{zone}{_SUFFIX[capacity]}" + (f"-r{rank}" if rank > 1 else "")


# The platform names a node type `<provider>.<name>` and labels nodes with it
# (node.kubernetes.io/instance-type, vcluster.com/node-type; see the module docstring): a label value.
MAX_QUALIFIED_NAME = 63


def longest_qualified_name(provider: str, catalog: Catalog, gpu_types, cpu_machine_types, zones, reserved_names=(), availability=None) -> str:
    """The longest `<provider>.<node type>` the configuration can produce: each shape as each
    capacity type its family is sold as, at the highest rank a pool could list it at (the number
    of those capacity types), CPU types on-demand, and the reserved types' names."""
    availability = availability or load_availability()
    names = list(reserved_names) + [_name(m, z, props.ON_DEMAND, 1) for m in cpu_machine_types for z in zones]
    for gpu in gpu_types:
        for shape in catalog.shapes_for(gpu):
            kinds = availability.family_of(shape).capacity_types or (props.ON_DEMAND,)
            names += [_name(_base_name(catalog, shape), z, k, len(kinds)) for k in kinds for z in zones]
    return max((f"{provider}.{n}" for n in names), key=len, default=provider)


def _disk(requested: tuple[int, str], allowed: tuple[str, ...]) -> tuple[int, str]:
    """The configured disk, or the machine's first supported type where it cannot take that one
    (A3 Ultra and A4 boot only from Hyperdisk)."""
    size, disk_type = requested
    return size, disk_type if disk_type in allowed else allowed[0]


def _properties(machine, accelerator, count, capacity, rank, region, zone, disk, image_family, image_project, option=None) -> dict[str, str]:
    # A GPU node type also carries the labels the GPU Operator finds GPU nodes by
    # (node_properties.GPU_NODE_LABELS): its operands start as the node registers.
    gpu_labels = dict(props.GPU_NODE_LABELS) if accelerator != props.NO_ACCELERATOR else {}
    return {
        props.INSTANCE_TYPE: machine,
        props.ACCELERATOR: accelerator,
        props.ACCELERATOR_COUNT: str(count),
        props.CAPACITY_TYPE: capacity,
        props.CAPACITY_RANK: str(rank),
        props.CAPACITY_OPTION: option or cap.option_value(capacity, rank),
        props.ZONE: zone,
        props.DISK_SIZE_GB: str(disk[0]),
        props.DISK_TYPE: disk[1],
        props.IMAGE_FAMILY: image_family,
        props.IMAGE_PROJECT: image_project,
        props.TOPOLOGY_ZONE: zone,
        props.TOPOLOGY_REGION: region,
        props.PD_CSI_ZONE: zone,
        **gpu_labels,
    }


__all__ = ["GPU_RESOURCE", "GUEST", "BUILTIN", "NONE", "NodeType", "NodeTypeOffer", "Offering", "QuotaUse", "ReservedSlice", "generate_node_types"]
