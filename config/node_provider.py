"""Config model of an environment's NodeProvider (gpu-platform:nodeProvider) and its checks: the zones,
GPU types, capacity types (on-demand always; Spot, Flex-start and reservations where turned on),
quotas, disks and images its node types are made of (config/node_types.py).

Every field is documented by the docstring below it; docs/configuration.md is generated from them
(`make docs`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from . import node_properties as props
from .availability import ON_DEMAND, check_gpu_availability, load_availability
from .base import DNS_LABEL, ConfigModel, zone_region
from .capacity import reserved_type_name
from .catalog import Catalog
from .errors import Problems
from .node_types import MAX_QUALIFIED_NAME, longest_qualified_name
from .reservations import FlexStart, Reservation, check_flex_start, check_reservations, reservation_shape
from .zones import zone_problem

# Far above any machine of the catalog (about 100 USD/h for 8 × H200): a larger price is a typo.
MAX_USD_PER_HOUR = 1000
# Compute Engine's largest Persistent Disk or Hyperdisk, 64 TiB (https://cloud.google.com/compute/docs/disks,
# "Persistent Disk" and "Hyperdisk" size limits), in GB as the node pool and the node template take it.
MAX_DISK_GB = 65536


class Disk(ConfigModel):
    """A node's boot disk."""

    size_gb: int = Field(ge=20, le=MAX_DISK_GB)
    """Size in GB."""
    type: str = "pd-balanced"
    """Disk type, one the node's machine series supports (A3 Ultra and A4 always boot from hyperdisk-balanced)."""


class NodeProviderConfig(ConfigModel):
    """The GPU NodeProvider of an environment: the node types tenants' pools are made of."""

    name: str = "gcp-gpu"
    """The NodeProvider's name, a lowercase DNS label short enough for <name>.<node type> labels."""
    zones: tuple[str, ...] = Field(min_length=1)
    """Zones of gcp:region the nodes may run in; every GPU type must be offered in one of them (docs/gpu-nodes.md, "Availability")."""
    gpu_types: tuple[str, ...] = Field(min_length=1)
    """The GPU types offered to tenants, from config/catalog.yaml."""
    spot: bool = False
    """Also offer Spot node types of every GPU type sold as Spot (pools list spot in their capacity)."""
    flex_start: FlexStart | None = None
    """Also offer Flex-start node types of every GPU type sold as Flex-start (A2, A3, A4 discounted, G2 at the list price); unset: none."""
    reservations: tuple[Reservation, ...] = ()
    """Compute Engine reservations of the environment, each sliced per tenant; a tenant's pool lists {reservation: <name>} to use its slice."""
    gpu_quota: dict[str, int] = {}
    """Per GPU type, the regional GPU quota (on-demand) of each project tenants' VMs run in; required for every GPU type Google sells on demand in the zones (not for one sold only as Spot, Flex-start and future reservations, such as H200 and B200)."""
    preemptible_gpu_quota: dict[str, int] = {}
    """Per GPU type, the regional preemptible GPU quota of each such project, which Spot and Flex-start VMs draw on; unset for a GPU type: none granted (Spot and Flex-start VMs then draw on gpuQuota)."""
    cpu_machine_types: tuple[str, ...] = ("e2-standard-2", "e2-standard-4")
    """Machine types of tenants' CPU nodes (their system pods), CPU machine types of config/catalog.yaml."""
    gpu_image_family: str | None = None
    """Image family of GPU nodes in project deeplearning-platform-release; unset: the catalog's Deep Learning VM family."""
    gpu_disk: Disk = Disk(size_gb=200)
    """Boot disk of GPU nodes."""
    cpu_disk: Disk = Disk(size_gb=50)
    """Boot disk of CPU nodes."""
    prices: dict[str, float] = {}
    """Machine type → on-demand USD/h in this region, overriding the catalog (the host for N1, the whole VM otherwise)."""
    quota_policy: Literal["warn", "fail"] | None = None
    """What happens when the tenants' GPU limits together exceed gpuQuota: warn, or fail (registers nothing); unset: fail in prod, warn elsewhere."""
    legacy_infrastructure: bool = False
    """Opt-in: the official infrastructure template and its broad 59-permission role (warned); every tenant must then be isolation: shared, as that template builds networks in the environment's project only, so prod also needs platform.allowSharedIsolation: true."""


def sold_on_demand(gpu: str, region: str, zones) -> bool:
    """Whether Google sells the GPU on demand in any of the zones (config/catalog.yaml
    `availability`): only then does a project have an on-demand quota of it to state (gpuQuota). A
    GPU sold only through Spot, Flex-start and future reservations (H200, B200) needs none: Spot and
    Flex-start are judged by preemptibleGpuQuota, a future reservation charges no quota
    (config/quota.py). Unknown in the region: required, as before."""
    families = [f for f in load_availability().families.values() if f.gpu == gpu and set(f.zones_in(region) or ()) & set(zones)]
    return not families or any(ON_DEMAND in f.purchase for f in families)


def check_node_provider(region: str, np: NodeProviderConfig, catalog: Catalog, problems: Problems) -> None:
    with problems.checking("nodeProvider.name"):
        if not DNS_LABEL.match(np.name):
            problems.add("nodeProvider.name", f"{np.name!r} must be a lowercase DNS label")
    with problems.checking("nodeProvider.zones"):
        for i, zone in enumerate(np.zones):
            if zone_region(zone) != region or not zone.startswith(region + "-") or len(zone) != len(region) + 2:
                problems.add(f"nodeProvider.zones[{i}]", f"{zone!r} is not in region {region}")
            elif zone_problem(zone, region):
                problems.add(f"nodeProvider.zones[{i}]", zone_problem(zone, region))
    known = ", ".join(catalog.gpus)
    where = region if isinstance(region, str) else "the region"
    with problems.checking("nodeProvider.gpuTypes"):
        for i, gpu in enumerate(np.gpu_types):
            with problems.checking(f"nodeProvider.gpuQuota.{gpu}"):
                if gpu not in catalog.gpus:
                    problems.add(f"nodeProvider.gpuTypes[{i}]", f"{gpu!r} is not offered; known: {known}")
                elif gpu not in np.gpu_quota and sold_on_demand(gpu, region, np.zones):
                    problems.add(
                        f"nodeProvider.gpuQuota.{gpu}",
                        f"missing; set it to the project's {gpu} quota in {where} (Compute Engine quota page), e.g. gpuQuota: {{{gpu}: 8}}",
                    )
    for key, quotas, minimum in (("gpuQuota", np.gpu_quota, 1), ("preemptibleGpuQuota", np.preemptible_gpu_quota, 0)):
        with problems.checking(f"nodeProvider.{key}"):
            for gpu, quota in quotas.items():
                path = f"nodeProvider.{key}.{gpu}"
                with problems.checking(path):
                    if gpu not in np.gpu_types:
                        problems.add(path, f"{gpu!r} is not in gpuTypes ({', '.join(np.gpu_types)})")
                    elif quota < minimum:
                        problems.add(path, f"{quota} must be at least {minimum}")
                    # On-demand quota must hold the smallest shape (as before; preemptible quota is not held to it).
                    elif minimum and gpu in catalog.gpus and quota < min(catalog.gpu_counts(gpu)):
                        problems.add(path, f"{quota} is below the smallest {gpu} shape ({min(catalog.gpu_counts(gpu))} GPUs): no node type could start")
    check_flex_start(np.flex_start, problems)
    # Availability and node-type names are judged by the zones only once these are sound.
    zones = problems.derive(lambda: np.zones, "nodeProvider.zones")
    with problems.checking("nodeProvider.reservations"):
        check_reservations(region, zones, np.gpu_types, np.reservations, catalog, problems)
    with problems.checking("nodeProvider.gpuTypes"):
        shapes = (reservation_shape(catalog, r.machine_type, r.gpu) for r in np.reservations)
        reserved = tuple(shape.gpu for shape in shapes if shape is not None)
        check_gpu_availability(region, zones, np.gpu_types, offered_capacity(np), reserved, catalog, problems)
    with problems.checking("nodeProvider.name"):
        known_gpus = tuple(g for g in np.gpu_types if g in catalog.gpus)
        known_cpus = tuple(m for m in np.cpu_machine_types if m in catalog.machines)
        reserved_names = [reserved_type_name(r.name, s.tenant) for r in np.reservations for s in r.slices]
        longest = longest_qualified_name(np.name, catalog, known_gpus, known_cpus, zones, reserved_names)
        if len(longest) > MAX_QUALIFIED_NAME:
            problems.add(
                "nodeProvider.name",
                f"{np.name!r} is too long: the platform labels nodes with <provider>.<node type>, at most {MAX_QUALIFIED_NAME} "
                f"characters, and {longest!r} has {len(longest)}",
            )
    with problems.checking("nodeProvider.cpuMachineTypes"):
        for i, machine in enumerate(np.cpu_machine_types):
            if machine not in catalog.cpu_machines():
                problems.add(f"nodeProvider.cpuMachineTypes[{i}]", unknown_cpu_machine(machine, catalog))
    with problems.checking("nodeProvider.prices"):
        for machine, price in np.prices.items():
            if machine not in catalog.machines:
                problems.add(f"nodeProvider.prices.{machine}", f"{machine!r} is not in the catalog; known: {', '.join(catalog.machines)}")
            elif not 0 < price <= MAX_USD_PER_HOUR:
                problems.add(f"nodeProvider.prices.{machine}", f"{price} must be a positive USD/h price of at most {MAX_USD_PER_HOUR}")
    all_disk_types = disk_types(catalog)
    for key in ("gpuDisk", "cpuDisk"):
        with problems.checking(f"nodeProvider.{key}.type"):
            disk = np.gpu_disk if key == "gpuDisk" else np.cpu_disk
            if disk.type not in all_disk_types:
                problems.add(f"nodeProvider.{key}.type", f"{disk.type!r} is not allowed; allowed: {', '.join(all_disk_types)}")
    with problems.checking("nodeProvider.gpuImageFamily"):
        if np.gpu_image_family is not None and not DNS_LABEL.match(np.gpu_image_family):
            problems.add("nodeProvider.gpuImageFamily", f"{np.gpu_image_family!r} is not an image family name")


def unknown_cpu_machine(machine: str, catalog: Catalog) -> str:
    return (
        f"{machine!r} is not a CPU machine type of the catalog; known: {', '.join(catalog.cpu_machines())} "
        "(another one needs its entry under `machines` and its prices in config/catalog.yaml)"
    )


def disk_types(catalog: Catalog) -> list[str]:
    """The boot disk types a node may have: those of the catalog's machine series."""
    return sorted({t for s in catalog.series.values() for t in s["diskTypes"]} | {"hyperdisk-balanced"})


def image_family_warnings(node_provider: NodeProviderConfig, catalog: Catalog) -> list[str]:
    """A GPU image family the catalog does not know may lack the NVIDIA driver the nodes rely on:
    allowed (Google publishes new families), but said, with how to make it known."""
    image, family = catalog.gpu_image, node_provider.gpu_image_family
    if family is None or family in image.families or not DNS_LABEL.match(family):
        return []
    return [
        f"nodeProvider.gpuImageFamily: {family!r} is not an image family config/catalog.yaml knows "
        f"(images.gpu.families: {', '.join(image.families)}). GPU nodes boot the newest image of it in project {image.project} "
        "and the GPU Operator installs no driver (driver.enabled=false), so it must ship the NVIDIA driver. Check that it exists "
        f"(gcloud compute images describe-from-family {family} --project {image.project}), then add it to images.gpu.families "
        "in config/catalog.yaml."
    ]


def offered_capacity(np: NodeProviderConfig) -> tuple[str, ...]:
    """The pooled capacity types the environment offers: on-demand, and Spot and Flex-start where on."""
    return (props.ON_DEMAND, *((props.SPOT,) if np.spot else ()), *((props.FLEX_START,) if np.flex_start is not None else ()))
