"""The machine and GPU catalog (config/catalog.yaml), loaded once and checked for consistency.

Everything that decides which VM shapes exist and what they cost lives in the YAML; this module only
reads it, refuses data that contradicts itself (an E2 with a GPU, 8 × T4, a host larger than its GPU
count allows, a price without a source) and answers questions about it. Prices are per region
(`prices.py`). Loading is cached: one parse per process, however many tenants.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from . import yaml_io
from .prices import Price, RegionPrices, ServicePrices, load_region_prices, load_service_prices

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")

GUEST = "guest"
BUILTIN = "builtin"
NONE = "none"


class CatalogError(ValueError):
    """The catalog data contradicts itself. A bug in catalog.yaml, not in a stack file."""


@dataclass(frozen=True)
class Machine:
    name: str
    series: str
    vcpus: int
    memory_gb: float
    disk_types: tuple[str, ...]
    gpu: str | None = None  # built-in GPUs only
    gpu_count: int = 0
    nvswitch: bool = False  # a full HGX board: NVIDIA Fabric Manager somewhere (config/fabric_manager.py)


@dataclass(frozen=True)
class GpuType:
    name: str
    short: str
    attach: str  # GUEST | BUILTIN
    series: tuple[str, ...]
    guest_limits: tuple[tuple[int, int, int], ...] = ()  # (count, max vCPU, max GB)
    mig: bool = False  # Multi-Instance GPU capable: the GPU Operator starts its MIG manager

    @property
    def guest_counts(self) -> tuple[int, ...]:
        return tuple(count for count, _, _ in self.guest_limits)


@dataclass(frozen=True)
class Shape:
    """One way to get GPUs: a machine type and how many GPUs of which type it carries."""

    machine: Machine
    gpu: str
    gpu_count: int
    attach: str  # GUEST: the node template adds a guest_accelerator block; BUILTIN: it must not

    def price(self, catalog: Catalog, region: str, spot: bool, overrides: dict[str, float] | None = None) -> Price | None:
        """USD/h of one VM of this shape in `region`, GPUs included; None where a part of it has no
        recorded price there. An override (`nodeProvider.prices`) is the on-demand price of the
        machine type as the catalog prices it (the host for N1, the whole VM otherwise); its Spot
        price keeps the catalog's Spot discount, or is unknown without one."""
        regional = catalog.prices.get(region)
        override = (overrides or {}).get(self.machine.name)
        machine = regional.machine(self.machine, spot) if regional else None
        if override is not None:
            if spot:
                on_demand = regional.machine(self.machine, False) if regional else None
                if machine is None or on_demand is None:
                    return None
                machine = Price(override * machine.usd_per_hour / on_demand.usd_per_hour, ("nodeProvider.prices",) + machine.sources)
            else:
                machine = Price(override, ("nodeProvider.prices",))
        if machine is None or self.attach != GUEST:
            return machine
        gpu = regional.gpu(self.gpu, spot) if regional else None
        return None if gpu is None else machine + gpu * self.gpu_count


@dataclass(frozen=True)
class Image:
    project: str
    family: str  # the default
    # The families of `project` known to work as node images here, `family` among them; another
    # one (nodeProvider.gpuImageFamily) is warned about.
    families: tuple[str, ...] = ()


@dataclass(frozen=True)
class Catalog:
    series: dict[str, dict]
    gpus: dict[str, GpuType]
    machines: dict[str, Machine]
    shapes: dict[str, tuple[Shape, ...]]  # GPU type → shapes, smallest GPU count first
    gpu_image: Image
    cpu_image: Image
    prices: dict[str, RegionPrices]  # region → its recorded prices
    services: ServicePrices

    def machine_price(self, machine: str, region: str, spot: bool = False, overrides: dict[str, float] | None = None) -> Price | None:
        """USD/h of a machine without GPUs (CPU nodes, the GKE system pool); None if unknown."""
        if not spot and machine in (overrides or {}):
            return Price((overrides or {})[machine], ("nodeProvider.prices",))
        regional = self.prices.get(region)
        return regional.machine(self.machines[machine], spot) if regional and machine in self.machines else None

    def shapes_for(self, gpu: str) -> tuple[Shape, ...]:
        return self.shapes.get(gpu, ())

    def gpu_counts(self, gpu: str) -> tuple[int, ...]:
        return tuple(sorted({shape.gpu_count for shape in self.shapes_for(gpu)}))

    def cpu_machines(self) -> tuple[str, ...]:
        return tuple(name for name, m in self.machines.items() if m.gpu is None and self.series[m.series]["gpuAttach"] == NONE)

    def series_for_gpu(self, gpu: str) -> tuple[str, ...]:
        return self.gpus[gpu].series


def series_of(machine_type: str) -> str:
    return machine_type.split("-", 1)[0]


def reserve(vcpus: int, memory_gb: float) -> tuple[int, int]:
    """What the node keeps for the kubelet, the container runtime and the OS: (CPU in millicores,
    memory in MiB). Sent as the node type's `overhead.kubeReserved`; its `resources` are the full
    shape.

    GKE's published node-allocatable formula (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes
    "Resource reservations"): CPU 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4,
    0.25 % above; memory 25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the
    next 112, 2 % above 128 GiB. Our VMs are not GKE nodes, but the same daemons (kubelet,
    containerd, the OS) run there, so it is a sound, documented reserve.

    The eviction threshold is not part of it. The kubelet keeps the two apart: allocatable =
    capacity − kubeReserved − systemReserved − the hard eviction threshold
    (https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/ "Node
    Allocatable"), and the platform's field is "the resource overhead for kubelet and other
    Kubernetes system daemons" (loft-sh/loft api/openapi-spec/swagger.json at v4.11.2,
    `NodeTypeOverhead.kubeReserved`), as Karpenter's `InstanceTypeOverhead` keeps KubeReserved and
    EvictionThreshold in fields of their own (kubernetes-sigs/karpenter v1.14.1
    pkg/cloudprovider/types.go). Whether the platform passes kubeReserved on to the kubelet is not
    public; either way the node now reserves what the node type says: the threshold once, as the
    kubelet's own `evictionHard` (EVICTION_HARD, written into every tenant's kubelet config by
    components/vcluster_values.py), never a second time inside kubeReserved.
    """
    return math.ceil(_tiered(vcpus, _CPU_RESERVE_TIERS) * 1000), math.ceil(_tiered(memory_gb, _MEMORY_RESERVE_TIERS) * 1024)


def allocatable(vcpus: int, memory_gb: float) -> tuple[int, int]:
    """What a node offers to pods, as the kubelet computes it: the full shape minus `reserve` and
    minus the hard eviction threshold for memory (CPU millicores, memory MiB)."""
    cpu, memory = reserve(vcpus, memory_gb)
    return vcpus * 1000 - cpu, int(memory_gb * 1024) - memory - EVICTION_THRESHOLD_MI


# (upper bound of the tier, share reserved within it)
_CPU_RESERVE_TIERS = ((1, 0.06), (2, 0.01), (4, 0.005), (math.inf, 0.0025))
_MEMORY_RESERVE_TIERS = ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (math.inf, 0.02))
# The kubelet's default hard eviction thresholds, all of them, for Kubernetes 1.36 (the kubelet of
# vcluster 0.36.1's default distro, v1.36.0): kubernetes/kubernetes tag v1.36.0,
# pkg/kubelet/eviction/defaults_linux.go `DefaultEvictionHard` (imagefs.inodesFree since v1.30,
# kubernetes/kubernetes pull 121834; the field's doc comment, kubernetes/kubelet tag v0.36.0
# config/v1beta1/types.go, still lists the other four). Written out in full because an explicit
# map replaces the defaults: the kubelet fills `evictionHard` with them only when it is absent, or
# signal by signal when `mergeDefaultEvictionSettings` is true, false by default
# (kubernetes/kubernetes tag v1.36.0 cmd/kubelet/app/server.go `loadConfigFile`; types.go: "other
# signals that are not specified in this configuration will be set to 0").
EVICTION_HARD = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
EVICTION_THRESHOLD_MI = 100  # EVICTION_HARD["memory.available"]


def _tiered(amount: float, tiers: tuple[tuple[float, float], ...]) -> float:
    reserved, lower = 0.0, 0.0
    for upper, rate in tiers:
        reserved += max(0.0, min(amount, upper) - lower) * rate
        lower = upper
    return reserved


@functools.lru_cache(maxsize=None)
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    raw = yaml_io.load(path.read_text())
    problems: list[str] = []
    series = raw["series"]

    machines: dict[str, Machine] = {}
    for name, m in raw["machines"].items():
        s = series_of(name)
        if s not in series:
            problems.append(f"machines.{name}: series {s!r} is not in `series`")
            continue
        attach = series[s]["gpuAttach"]
        if m.get("gpu") and attach != BUILTIN:
            problems.append(f"machines.{name}: series {s} cannot carry built-in GPUs")
        if attach == BUILTIN and not m.get("gpu"):
            problems.append(f"machines.{name}: accelerator-optimized series {s} needs gpu and gpuCount")
        machines[name] = Machine(
            name=name,
            series=s,
            vcpus=int(m["vcpus"]),
            memory_gb=float(m["memoryGb"]),
            disk_types=tuple(m.get("diskTypes", series[s]["diskTypes"])),
            gpu=m.get("gpu"),
            gpu_count=int(m.get("gpuCount", 0)),
            nvswitch=bool(m.get("nvswitch", False)),
        )
        if m.get("nvswitch") and not m.get("gpu"):
            problems.append(f"machines.{name}: nvswitch without built-in GPUs")

    gpus: dict[str, GpuType] = {}
    for name, g in raw["gpus"].items():
        builtin_series = tuple(sorted({m.series for m in machines.values() if m.gpu == name}))
        limits = tuple((int(c), int(v), int(gb)) for c, (v, gb) in sorted(g.get("guestLimits", {}).items()))
        if limits and builtin_series:
            problems.append(f"gpus.{name}: both guest limits and built-in machines")
        if not limits and not builtin_series:
            problems.append(f"gpus.{name}: no machine can carry it")
        gpus[name] = GpuType(
            name=name,
            short=g["short"],
            attach=GUEST if limits else BUILTIN,
            series=("n1",) if limits else builtin_series,
            guest_limits=limits,
            mig=bool(g.get("mig", False)),
        )

    shapes: dict[str, list[Shape]] = {name: [] for name in gpus}
    for gpu_name, pairs in raw["guestShapes"].items():
        gpu = gpus.get(gpu_name)
        if gpu is None or gpu.attach != GUEST:
            problems.append(f"guestShapes.{gpu_name}: not an attachable GPU type")
            continue
        limits = {count: (v, gb) for count, v, gb in gpu.guest_limits}
        for machine_name, count in pairs:
            machine = machines.get(machine_name)
            if machine is None or series[machine.series]["gpuAttach"] != GUEST:
                problems.append(f"guestShapes.{gpu_name}: {machine_name} cannot take guest GPUs")
                continue
            if count not in limits:
                problems.append(f"guestShapes.{gpu_name}: {count} GPUs is not an allowed count {sorted(limits)}")
                continue
            max_vcpus, max_gb = limits[count]
            if machine.vcpus > max_vcpus or machine.memory_gb > max_gb:
                problems.append(
                    f"guestShapes.{gpu_name}: {machine_name} ({machine.vcpus} vCPU / {machine.memory_gb:g} GB) "
                    f"exceeds {max_vcpus} vCPU / {max_gb} GB allowed with {count} GPUs"
                )
                continue
            shapes[gpu_name].append(Shape(machine, gpu_name, count, GUEST))
    for machine in machines.values():
        if machine.gpu:
            if machine.gpu not in gpus:
                problems.append(f"machines.{machine.name}: unknown GPU {machine.gpu}")
                continue
            shapes[machine.gpu].append(Shape(machine, machine.gpu, machine.gpu_count, BUILTIN))

    prices = {region: load_region_prices(region, block, machines, gpus, problems) for region, block in (raw.get("prices") or {}).items()}
    services = load_service_prices(raw.get("services") or {}, problems)
    if problems:
        raise CatalogError("catalog.yaml is inconsistent:\n  " + "\n  ".join(problems))

    images = {kind: _image(kind, spec, problems) for kind, spec in raw["images"].items()}
    if problems:
        raise CatalogError("catalog.yaml is inconsistent:\n  " + "\n  ".join(problems))
    return Catalog(
        series=series,
        gpus=gpus,
        machines=machines,
        shapes={g: tuple(sorted(s, key=lambda sh: (sh.gpu_count, sh.machine.vcpus))) for g, s in shapes.items()},
        gpu_image=images["gpu"],
        cpu_image=images["cpu"],
        prices=prices,
        services=services,  # type: ignore[arg-type]  # None only with problems, raised above
    )


def _image(kind: str, spec: dict, problems: list[str]) -> Image:
    families = tuple(spec.get("families") or [spec["family"]])
    if spec["family"] not in families:
        problems.append(f"images.{kind}: family {spec['family']} is not among its families")
    return Image(spec["project"], spec["family"], families)
