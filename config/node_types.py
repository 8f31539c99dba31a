"""Node types of the GPU NodeProvider, generated from the catalog and the environment's config.

One node type per (machine shape, zone, capacity type) for every offered GPU type, plus CPU types
for tenants' system pods. Everything a node type claims comes from the catalog: its `resources` are
the machine's full shape and its `overhead.kubeReserved` the reserve of `catalog.reserve`, as the
platform's API defines them (loft-sh/loft api/openapi-spec/swagger.json at tag v4.11.2,
`TerraformNodeTypeSpec`: "Resources lists the full resources for a single node", `NodeTypeOverhead`:
"KubeReserved is the resource overhead for kubelet and other Kubernetes system daemons"); its cost is
the region's list price; its capacity comes from the GPU quota. A pairing the catalog does not hold (E2 with a GPU, 8 × T4, L4 on N1)
cannot be produced because only catalog shapes are iterated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import node_properties as props
from .catalog import BUILTIN, GUEST, NONE, Catalog, Shape, reserve
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
        """Memory pods can use: the shape minus the reserve."""
        return self.capacity_memory_mi - self.reserved_memory_mi

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
) -> NodeTypeOffer:
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
            for zone in zones:
                for is_spot in capacity_types:
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
                    name=f"{machine.name}-{zone}",
                    machine_type=machine.name,
                    gpu=None,
                    gpu_count=0,
                    attach=NONE,
                    zone=zone,
                    spot=False,
                    **_shape_and_price(catalog, region, machine, price),
                    max_capacity=None,
                    properties=_properties(
                        machine.name, props.NO_ACCELERATOR, 0, False, zone,
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
    gpu = catalog.gpus[shape.gpu]
    base = machine.name if shape.attach == BUILTIN else f"{machine.name}-{gpu.short}x{shape.gpu_count}"
    return NodeType(
        name=f"{base}-{zone}" + ("-spot" if is_spot else ""),
        machine_type=machine.name,
        gpu=shape.gpu,
        gpu_count=shape.gpu_count,
        attach=shape.attach,
        zone=zone,
        spot=is_spot,
        **_shape_and_price(catalog, region, machine, shape.price(catalog, region, is_spot, prices)),
        max_capacity=max_capacity,
        properties=_properties(
            machine.name, shape.gpu, shape.gpu_count, is_spot, zone,
            _disk(gpu_disk, machine.disk_types), image_family or catalog.gpu_image.family, catalog.gpu_image.project,
        ),
    )


def _disk(requested: tuple[int, str], allowed: tuple[str, ...]) -> tuple[int, str]:
    """The configured disk, or the machine's first supported type where it cannot take that one
    (A3 Ultra boots only from Hyperdisk)."""
    size, disk_type = requested
    return size, disk_type if disk_type in allowed else allowed[0]


def _properties(machine, accelerator, count, spot, zone, disk, image_family, image_project) -> dict[str, str]:
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
    }


__all__ = ["GPU_RESOURCE", "GUEST", "BUILTIN", "NONE", "NodeType", "NodeTypeOffer", "QuotaUse", "generate_node_types"]
