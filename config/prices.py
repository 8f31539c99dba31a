"""Recorded list prices (config/catalog.yaml `prices:` and `services:`), per region, each with where
it came from.

A price is a `Price`: USD per hour and the sources it was computed from, so whoever shows it can say
whether it is an estimate. What has no recorded price is None, never another region's figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .catalog import GpuType, Machine

# A month of list prices: Google's pricing pages and calculator use 730 hours.
PRICES_HOURS_PER_MONTH = 730
# Source kinds whose figures are not estimates (see the comment above `prices:` in catalog.yaml).
CONFIRMED_KINDS = ("google",)
SOURCE_KINDS = ("google", "catalog", "derived", "recorded")


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    text: str

    @property
    def estimate(self) -> bool:
        return self.kind not in CONFIRMED_KINDS


@dataclass(frozen=True)
class Price:
    """USD per hour, and the names of the sources it was computed from."""

    usd_per_hour: float
    sources: tuple[str, ...] = ()

    def __add__(self, other: Price) -> Price:
        return Price(self.usd_per_hour + other.usd_per_hour, _merge(self.sources, other.sources))

    def __mul__(self, factor: float) -> Price:
        return Price(self.usd_per_hour * factor, self.sources)


def _merge(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return a + tuple(x for x in b if x not in a)


@dataclass(frozen=True)
class FamilyPrice:
    vcpu: float
    memory_gb: float
    source: str
    spot_vcpu: float | None = None
    spot_memory_gb: float | None = None
    spot_source: str | None = None


@dataclass(frozen=True)
class UnitPrice:
    on_demand: float
    spot: float | None
    source: str


@dataclass(frozen=True)
class RegionPrices:
    region: str
    read: str
    sources: dict[str, Source]
    families: dict[str, FamilyPrice]
    gpus: dict[str, UnitPrice]  # per GPU-hour on top of the VM
    machines: dict[str, UnitPrice]  # whole VM
    disks: dict[str, tuple[float, str]]  # disk type → (USD per GB-month, source)
    forwarding_rule: tuple[float, float, str]  # (first five, each further, source), USD/h

    def machine(self, machine: Machine, spot: bool) -> Price | None:
        """One VM of `machine`: its whole-VM price, or its family's vCPU and memory price plus its
        built-in GPUs."""
        whole = self.machines.get(machine.name)
        if whole is not None:
            value = whole.spot if spot else whole.on_demand
            return None if value is None else Price(value, (whole.source,))
        family = self.families.get(machine.series)
        if family is None:
            return None
        vcpu, memory, source = (
            (family.spot_vcpu, family.spot_memory_gb, family.spot_source) if spot else (family.vcpu, family.memory_gb, family.source)
        )
        if vcpu is None or memory is None or source is None:
            return None
        price = Price(machine.vcpus * vcpu + machine.memory_gb * memory, (source,))
        if machine.gpu:
            gpu = self.gpu(machine.gpu, spot)
            return None if gpu is None else price + gpu * machine.gpu_count
        return price

    def gpu(self, gpu: str, spot: bool) -> Price | None:
        unit = self.gpus.get(gpu)
        if unit is None:
            return None
        value = unit.spot if spot else unit.on_demand
        return None if value is None else Price(value, (unit.source,))

    def disk(self, disk_type: str, size_gb: float) -> Price | None:
        """A persistent disk, per hour."""
        if disk_type not in self.disks:
            return None
        per_gb_month, source = self.disks[disk_type]
        return Price(size_gb * per_gb_month / PRICES_HOURS_PER_MONTH, (source,))

    def forwarding_rules(self, count: int) -> Price:
        """`count` forwarding rules of one project in this region."""
        first, further, source = self.forwarding_rule
        return Price(min(count, 5) * first + max(0, count - 5) * further, (source,))

    def is_estimate(self, price: Price) -> bool:
        return any(self.sources[s].estimate for s in price.sources if s in self.sources) or not price.sources


@dataclass(frozen=True)
class ServicePrices:
    read: str
    gke_cluster_fee: float
    gke_source: str
    nat_per_vm: float
    nat_max: float
    nat_per_address: float
    nat_per_gib: float
    nat_source: str

    def nat_gateway(self, vms: int, addresses: int) -> Price:
        """One Cloud NAT gateway serving `vms` VMs through `addresses` external addresses, per hour."""
        gateway = self.nat_max if vms > 32 else vms * self.nat_per_vm
        return Price(gateway + addresses * self.nat_per_address, ("cloud-nat",))


def load_region_prices(region: str, raw: dict[str, Any], machines: dict[str, Machine], gpus: dict[str, GpuType], problems: list[str]) -> RegionPrices:
    where = f"prices.{region}"
    sources: dict[str, Source] = {}
    for name, s in (raw.get("sources") or {}).items():
        if s.get("kind") not in SOURCE_KINDS or not s.get("text"):
            problems.append(f"{where}.sources.{name}: needs kind ({', '.join(SOURCE_KINDS)}) and text")
        sources[name] = Source(name, s.get("kind", ""), s.get("text", ""))

    def source(path: str, name: Any) -> str:
        if name not in sources:
            problems.append(f"{where}.{path}: from {name!r} is not one of its sources ({', '.join(sources)})")
        return str(name)

    def positive(path: str, value: Any) -> float:
        if not isinstance(value, (int, float)) or value <= 0:
            problems.append(f"{where}.{path}: {value!r} is not a positive price")
            return 0.0
        return float(value)

    families = {}
    for series, f in (raw.get("families") or {}).items():
        spot = f.get("spotVcpu") is not None
        families[series] = FamilyPrice(
            vcpu=positive(f"families.{series}.vcpu", f.get("vcpu")),
            memory_gb=positive(f"families.{series}.memoryGb", f.get("memoryGb")),
            source=source(f"families.{series}", f.get("from")),
            spot_vcpu=positive(f"families.{series}.spotVcpu", f["spotVcpu"]) if spot else None,
            spot_memory_gb=positive(f"families.{series}.spotMemoryGb", f.get("spotMemoryGb")) if spot else None,
            spot_source=source(f"families.{series}.spotFrom", f.get("spotFrom")) if spot else None,
        )
        if spot and families[series].spot_vcpu > families[series].vcpu:  # type: ignore[operator]
            problems.append(f"{where}.families.{series}: Spot vCPU price above the on-demand price")

    def units(kind: str, known: dict) -> dict[str, UnitPrice]:
        out = {}
        for name, u in (raw.get(kind) or {}).items():
            if name not in known:
                problems.append(f"{where}.{kind}.{name}: not in the catalog's {kind}")
            on_demand = positive(f"{kind}.{name}.onDemand", u.get("onDemand"))
            spot = None if u.get("spot") is None else positive(f"{kind}.{name}.spot", u["spot"])
            if spot is not None and spot > on_demand:
                problems.append(f"{where}.{kind}.{name}: Spot price above the on-demand price")
            out[name] = UnitPrice(on_demand, spot, source(f"{kind}.{name}", u.get("from")))
        return out

    disks = {
        disk: (positive(f"disks.{disk}.usdPerGbMonth", d.get("usdPerGbMonth")), source(f"disks.{disk}", d.get("from")))
        for disk, d in (raw.get("disks") or {}).items()
    }
    rule = raw.get("forwardingRule") or {}
    return RegionPrices(
        region=region,
        read=str(raw.get("read", "")),
        sources=sources,
        families=families,
        gpus=units("gpus", gpus),
        machines=units("machines", machines),
        disks=disks,
        forwarding_rule=(
            positive("forwardingRule.first5", rule.get("first5")),
            positive("forwardingRule.additional", rule.get("additional")),
            source("forwardingRule", rule.get("from")),
        ),
    )


def load_service_prices(raw: dict[str, Any], problems: list[str]) -> ServicePrices | None:
    try:
        gke, nat = raw["gkeClusterFee"], raw["cloudNat"]
        return ServicePrices(
            read=str(raw["read"]),
            gke_cluster_fee=float(gke["usdPerHour"]),
            gke_source=gke["source"],
            nat_per_vm=float(nat["usdPerVmHour"]),
            nat_max=float(nat["maxUsdPerHour"]),
            nat_per_address=float(nat["usdPerAddressHour"]),
            nat_per_gib=float(nat["usdPerGib"]),
            nat_source=nat["source"],
        )
    except (KeyError, TypeError, ValueError) as e:
        problems.append(f"services: incomplete ({e!r}); needs read, gkeClusterFee and cloudNat with their sources")
        return None
