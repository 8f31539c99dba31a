"""Node types of the GPU NodeProvider, generated from the catalog and the environment's config.

One node type per (machine shape, zone, capacity type) for every offered GPU type, plus CPU types
for tenants' system pods. Everything a node type claims comes from the catalog: its `resources` are
the machine's full shape and its `overhead.kubeReserved` the reserve of `catalog.reserve`, as the
platform's API defines them (loft-sh/loft api/openapi-spec/swagger.json at tag v4.11.2,
`TerraformNodeTypeSpec`: "Resources lists the full resources for a single node", `NodeTypeOverhead`:
"KubeReserved is the resource overhead for kubelet and other Kubernetes system daemons"); its cost is
the region's list price; its capacity comes from the GPU quota. A pairing the catalog does not hold (E2 with a GPU, 8 × T4, L4 on N1)
cannot be produced because only catalog shapes are iterated, and a GPU node type exists only in the
zones where the catalog records its machine family and only as the capacity types the family is
sold with (config/availability.py).

Names: `<machine type>[-<gpu>x<count>]-<zone>[-spot]`, one zone and one capacity type each, so a
node claim's zone (a PersistentVolume's, a spread constraint's) is decided by the node type. The
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

from . import node_properties as props
from .availability import Availability, load_availability
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
    spot: bool
    vcpus: int  # the machine's full shape
    capacity_memory_mi: int
    reserved_cpu_millis: int  # overhead.kubeReserved
    reserved_memory_mi: int
    usd_per_hour: float | None  # None: no recorded price in the region
    price_estimate: bool  # the price comes (partly) from an estimate
    max_capacity: int | None  # None: no limit from us (CPU types)
    properties: dict[str, str] = field(hash=False)

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
        """The NodeProvider's integer cost: the list price in thousandths of a USD per hour, so the
        platform picks the cheapest type that fits. None without a recorded price: the field is
        left out and the platform computes one from the resources (platform docs, node providers
        overview, "cost")."""
        return None if self.usd_per_hour is None else round(self.usd_per_hour * 1000)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "machineType": self.machine_type,
            "gpu": self.gpu,
            "gpuCount": self.gpu_count,
            "attach": self.attach,
            "zone": self.zone,
            "spot": self.spot,
            "vcpus": self.vcpus,
            "memoryMi": self.capacity_memory_mi,
            "reservedCpuMillis": self.reserved_cpu_millis,
            "reservedMemoryMi": self.reserved_memory_mi,
            "usdPerHour": self.usd_per_hour,
            "priceEstimate": self.price_estimate,
            "maxCapacity": self.max_capacity,
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeType:
        return cls(
            name=data["name"],
            machine_type=data["machineType"],
            gpu=data.get("gpu"),
            gpu_count=int(data["gpuCount"]),
            attach=data["attach"],
            zone=data["zone"],
            spot=bool(data["spot"]),
            vcpus=int(data["vcpus"]),
            capacity_memory_mi=int(data["memoryMi"]),
            reserved_cpu_millis=int(data["reservedCpuMillis"]),
            reserved_memory_mi=int(data["reservedMemoryMi"]),
            usd_per_hour=None if data.get("usdPerHour") is None else float(data["usdPerHour"]),
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


def generate_node_types(
    *,
    catalog: Catalog,
    region: str,
    zones: tuple[str, ...],
    gpu_types: tuple[str, ...],
    spot: bool,
    gpu_quota: dict[str, int],
    cpu_machine_types: tuple[str, ...],
    gpu_disk: tuple[int, str],
    cpu_disk: tuple[int, str],
    gpu_image_family: str | None = None,
    prices: dict[str, float] | None = None,
    availability: Availability | None = None,
) -> NodeTypeOffer:
    availability = availability or load_availability()
    capacity_types = (False, True) if spot else (False,)
    node_types: list[NodeType] = []
    quota_use: list[QuotaUse] = []

    for gpu in gpu_types:
        quota = gpu_quota[gpu]
        excluded = []
        for shape in catalog.shapes_for(gpu):
            max_capacity = quota // shape.gpu_count
            if max_capacity == 0:
                excluded.append(f"{shape.machine.name} ({shape.gpu_count} GPUs)")
                continue
            family = availability.family_of(shape)
            offered = family.zones_in(region) or ()
            for zone in (z for z in zones if z in offered):
                for is_spot in (c for c in capacity_types if c in family.capacity_types):
                    node_types.append(
                        _node_type(catalog, region, shape, zone, is_spot, max_capacity, gpu_disk, gpu_image_family, prices)
                    )
        quota_use.append(QuotaUse(gpu, quota, tuple(excluded)))

    for machine_name in cpu_machine_types:
        machine = catalog.machines[machine_name]
        price = catalog.machine_price(machine.name, region, False, prices)
        for zone in zones:
            node_types.append(
                NodeType(
                    name=_name(machine.name, zone, False),
                    machine_type=machine.name,
                    gpu=None,
                    gpu_count=0,
                    attach=NONE,
                    zone=zone,
                    spot=False,
                    **_shape_and_price(catalog, region, machine, price),
                    max_capacity=None,
                    properties=_properties(
                        machine.name, props.NO_ACCELERATOR, 0, False, region, zone,
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


def _node_type(catalog, region, shape: Shape, zone, is_spot, max_capacity, gpu_disk, image_family, prices) -> NodeType:
    machine = shape.machine
    base = _base_name(catalog, shape)
    return NodeType(
        name=_name(base, zone, is_spot),
        machine_type=machine.name,
        gpu=shape.gpu,
        gpu_count=shape.gpu_count,
        attach=shape.attach,
        zone=zone,
        spot=is_spot,
        **_shape_and_price(catalog, region, machine, shape.price(catalog, region, is_spot, prices)),
        max_capacity=max_capacity,
        properties=_properties(
            machine.name, shape.gpu, shape.gpu_count, is_spot, region, zone,
            _disk(gpu_disk, machine.disk_types), image_family or catalog.gpu_image.family, catalog.gpu_image.project,
        ),
    )


def _base_name(catalog: Catalog, shape: Shape) -> str:
    if shape.attach == BUILTIN:
        return shape.machine.name
    return f"{shape.machine.name}-{catalog.gpus[shape.gpu].short}x{shape.gpu_count}"


def _name(base: str, zone: str, spot: bool) -> str:
    return f"{base}-{zone}" + ("-spot" if spot else "")


# The platform names a node type `<provider>.<name>` and labels nodes with it
# (node.kubernetes.io/instance-type, vcluster.com/node-type; see the module docstring): a label value.
MAX_QUALIFIED_NAME = 63


def longest_qualified_name(provider: str, catalog: Catalog, gpu_types, cpu_machine_types, zones) -> str:
    """The longest `<provider>.<node type>` the configuration can produce."""
    bases = [_base_name(catalog, shape) for gpu in gpu_types for shape in catalog.shapes_for(gpu)]
    bases += list(cpu_machine_types)
    return max((f"{provider}.{_name(b, z, True)}" for b in bases for z in zones), key=len, default=provider)


def _disk(requested: tuple[int, str], allowed: tuple[str, ...]) -> tuple[int, str]:
    """The configured disk, or the machine's first supported type where it cannot take that one
    (A3 Ultra boots only from Hyperdisk)."""
    size, disk_type = requested
    return size, disk_type if disk_type in allowed else allowed[0]


def _properties(machine, accelerator, count, spot, region, zone, disk, image_family, image_project) -> dict[str, str]:
    # A GPU node type also carries the labels the GPU Operator finds GPU nodes by
    # (node_properties.GPU_NODE_LABELS): its operands start as the node registers.
    gpu_labels = dict(props.GPU_NODE_LABELS) if accelerator != props.NO_ACCELERATOR else {}
    return {
        props.INSTANCE_TYPE: machine,
        props.ACCELERATOR: accelerator,
        props.ACCELERATOR_COUNT: str(count),
        props.CAPACITY_TYPE: props.SPOT if spot else props.ON_DEMAND,
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


__all__ = ["GPU_RESOURCE", "GUEST", "BUILTIN", "NONE", "NodeType", "NodeTypeOffer", "QuotaUse", "generate_node_types"]
