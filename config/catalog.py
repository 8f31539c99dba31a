"""The machine and GPU catalog (config/catalog.yaml), loaded once and checked for consistency.

Everything that decides which VM shapes exist lives in the YAML; this module only reads it, refuses
data that contradicts itself (an E2 with a GPU, 8 × T4, a host larger than its GPU count allows) and
answers questions about it. Loading is cached: one parse per process, however many tenants.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from . import yaml_io

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
    usd_per_hour: float
    spot_usd_per_hour: float
    price_basis: str  # "reference" | "estimate"
    disk_types: tuple[str, ...]
    gpu: str | None = None  # built-in GPUs only
    gpu_count: int = 0


@dataclass(frozen=True)
class GpuType:
    name: str
    short: str
    attach: str  # GUEST | BUILTIN
    series: tuple[str, ...]
    usd_per_gpu_hour: float | None = None  # guest GPUs are billed on top of the host
    spot_usd_per_gpu_hour: float | None = None
    guest_limits: tuple[tuple[int, int, int], ...] = ()  # (count, max vCPU, max GB)

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

    def usd_per_hour(self, catalog: Catalog, spot: bool, price_overrides: dict[str, float] | None = None) -> float:
        host = (price_overrides or {}).get(self.machine.name)
        if host is None:
            host = self.machine.spot_usd_per_hour if spot else self.machine.usd_per_hour
        elif spot:
            # An override is an on-demand price; keep the catalog's spot discount for it.
            host *= self.machine.spot_usd_per_hour / self.machine.usd_per_hour
        if self.attach != GUEST:
            return host
        gpu = catalog.gpus[self.gpu]
        per_gpu = gpu.spot_usd_per_gpu_hour if spot else gpu.usd_per_gpu_hour
        return host + self.gpu_count * (per_gpu or 0.0)


@dataclass(frozen=True)
class Image:
    project: str
    family: str


@dataclass(frozen=True)
class Catalog:
    price_date: str
    price_region: str
    series: dict[str, dict]
    gpus: dict[str, GpuType]
    machines: dict[str, Machine]
    shapes: dict[str, tuple[Shape, ...]]  # GPU type → shapes, smallest GPU count first
    gpu_image: Image
    cpu_image: Image

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


def allocatable(vcpus: int, memory_gb: float) -> tuple[int, int]:
    """What a node offers to pods: (CPU in millicores, memory in MiB).

    The real shape minus a kubelet/system reserve computed with GKE's published node-allocatable
    formula (CPU: 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4, 0.25 % above;
    memory: 25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112,
    2 % above 128 GiB, plus a 100 MiB eviction threshold). Our VMs are not GKE nodes, but the same
    daemons (kubelet, containerd, the OS) run there, so it is a sound, documented reserve.
    """
    reserved_cores = _tiered(vcpus, _CPU_RESERVE_TIERS)
    reserved_gib = _tiered(memory_gb, _MEMORY_RESERVE_TIERS)
    cpu_millis = vcpus * 1000 - math.ceil(reserved_cores * 1000)
    memory_mi = int(memory_gb * 1024) - math.ceil(reserved_gib * 1024) - _EVICTION_THRESHOLD_MI
    return cpu_millis, memory_mi


# (upper bound of the tier, share reserved within it)
_CPU_RESERVE_TIERS = ((1, 0.06), (2, 0.01), (4, 0.005), (math.inf, 0.0025))
_MEMORY_RESERVE_TIERS = ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (math.inf, 0.02))
_EVICTION_THRESHOLD_MI = 100


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
        if m["spotUsdPerHour"] > m["usdPerHour"]:
            problems.append(f"machines.{name}: spot price above on-demand price")
        machines[name] = Machine(
            name=name,
            series=s,
            vcpus=int(m["vcpus"]),
            memory_gb=float(m["memoryGb"]),
            usd_per_hour=float(m["usdPerHour"]),
            spot_usd_per_hour=float(m["spotUsdPerHour"]),
            price_basis=m["price"],
            disk_types=tuple(m.get("diskTypes", series[s]["diskTypes"])),
            gpu=m.get("gpu"),
            gpu_count=int(m.get("gpuCount", 0)),
        )

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
            usd_per_gpu_hour=g.get("usdPerGpuHour"),
            spot_usd_per_gpu_hour=g.get("spotUsdPerGpuHour"),
            guest_limits=limits,
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

    if problems:
        raise CatalogError("catalog.yaml is inconsistent:\n  " + "\n  ".join(problems))

    images = raw["images"]
    return Catalog(
        price_date=str(raw["priceDate"]),
        price_region=raw["priceRegion"],
        series=series,
        gpus=gpus,
        machines=machines,
        shapes={g: tuple(sorted(s, key=lambda sh: (sh.gpu_count, sh.machine.vcpus))) for g, s in shapes.items()},
        gpu_image=Image(**images["gpu"]),
        cpu_image=Image(**images["cpu"]),
    )
