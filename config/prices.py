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
# Source kinds whose figures were read for the region on its `read` date (the others were not).
READ_KINDS = ("google", "catalog")
SOURCE_KINDS = ("google", "catalog", "derived", "recorded")
REGION_KEYS = {"read", "sources", "gpus", "hosts", "machines", "disks", "forwardingRule"}


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    text: str

    @property
    def estimate(self) -> bool:
        return self.kind not in CONFIRMED_KINDS

    @property
    def read_on_date(self) -> bool:
        return self.kind in READ_KINDS


@dataclass(frozen=True)
class Price:
    """USD per hour, and the names of the sources it was computed from."""

    usd_per_hour: float
    sources: tuple[str, ...] = ()

    def __add__(self, other: Price) -> Price:
        return Price(self.usd_per_hour + other.usd_per_hour, _merge(self.sources, other.sources))

    def __mul__(self, factor: float) -> Price:
        return Price(self.usd_per_hour * factor, self.sources)


def _note(used: dict[str, list[str]], source: str, label: str) -> None:
    if label not in used.setdefault(source, []):
        used[source].append(label)


def _merge(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return a + tuple(x for x in b if x not in a)


@dataclass(frozen=True)
class UnitPrice:
    on_demand: float
    spot: float | None
    source: str
    spot_source: str | None = None  # `spotFrom`: where the Spot figure came from, when not `from`

    def price(self, spot: bool) -> Price | None:
        value = self.spot if spot else self.on_demand
        return None if value is None else Price(value, ((self.spot_source or self.source) if spot else self.source,))


@dataclass(frozen=True)
class RegionPrices:
    region: str
    read: str
    sources: dict[str, Source]
    gpus: dict[str, UnitPrice]  # per GPU-hour on top of the VM
    hosts: dict[str, UnitPrice]  # the VM without GPUs
    machines: dict[str, UnitPrice]  # the whole VM, its built-in GPUs included
    disks: dict[str, tuple[float, str]]  # disk type → (USD per GB-month, source)
    forwarding_rule: tuple[float, float, str]  # (first one to five together, each further, source), USD/h

    def machine(self, machine: Machine, spot: bool) -> Price | None:
        """One VM of `machine` with its built-in GPUs (not N1's attached ones, which the shape
        adds): its whole-VM price, or its host price plus its built-in GPUs."""
        whole = self.machines.get(machine.name)
        if whole is not None:
            return whole.price(spot)
        host = self.hosts[machine.name].price(spot) if machine.name in self.hosts else None
        if host is None or not machine.gpu:
            return host
        gpu = self.gpu(machine.gpu, spot)
        return None if gpu is None else host + gpu * machine.gpu_count

    def gpu(self, gpu: str, spot: bool) -> Price | None:
        return self.gpus[gpu].price(spot) if gpu in self.gpus else None

    def disk(self, disk_type: str, size_gb: float) -> Price | None:
        """A persistent disk, per hour."""
        if disk_type not in self.disks:
            return None
        per_gb_month, source = self.disks[disk_type]
        return Price(size_gb * per_gb_month / PRICES_HOURS_PER_MONTH, (source,))

    def forwarding_rules(self, count: int) -> Price:
        """`count` forwarding rules of one project in this region: one flat charge for the first one
        to five, and each further rule on top (https://cloud.google.com/load-balancing/pricing)."""
        first_five, further, source = self.forwarding_rule
        return Price(0.0 if count <= 0 else first_five + max(0, count - 5) * further, (source,))

    def figures_by_source(self) -> dict[str, list[str]]:
        """Which kinds of figures each source gave this region, in catalog order."""
        sections = (("GPUs", self.gpus), ("hosts", self.hosts), ("whole VMs", self.machines))
        used: dict[str, list[str]] = {name: [] for name in self.sources}
        for label, units in sections:
            for unit in units.values():
                _note(used, unit.source, label)
                if unit.spot_source:
                    _note(used, unit.spot_source, f"Spot {label}")
        for disk_type, (_, source) in self.disks.items():
            _note(used, source, "Hyperdisk Balanced disks" if disk_type == "hyperdisk-balanced" else "disks")
        _note(used, self.forwarding_rule[2], "forwarding rules")
        return {name: labels for name, labels in used.items() if labels}

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
    for key in sorted(raw.keys() - REGION_KEYS):
        problems.append(f"{where}.{key}: not a price section; allowed: {', '.join(sorted(REGION_KEYS))}")
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

    def units(kind: str, known: dict, known_as: str) -> dict[str, UnitPrice]:
        out = {}
        for name, u in (raw.get(kind) or {}).items():
            if name not in known:
                problems.append(f"{where}.{kind}.{name}: not in the catalog's {known_as}")
            on_demand = positive(f"{kind}.{name}.onDemand", u.get("onDemand"))
            spot = None if u.get("spot") is None else positive(f"{kind}.{name}.spot", u["spot"])
            if spot is not None and spot > on_demand:
                problems.append(f"{where}.{kind}.{name}: Spot price above the on-demand price")
            spot_from = None if u.get("spotFrom") is None else source(f"{kind}.{name}.spotFrom", u["spotFrom"])
            out[name] = UnitPrice(on_demand, spot, source(f"{kind}.{name}", u.get("from")), spot_from)
        return out

    gpu_prices = units("gpus", gpus, "gpus")
    hosts, whole_vms = units("hosts", machines, "machines"), units("machines", machines, "machines")
    # One price per VM, so nothing is counted twice: its host (GPUs added from `gpus`) or its whole
    # VM, never both; and a whole-VM price only where it includes built-in GPUs (else it is a host).
    for name in sorted(hosts.keys() & whole_vms.keys()):
        problems.append(f"{where}.machines.{name}: also in hosts; a VM has a host price or a whole-VM price, not both")
    for name in sorted(whole_vms.keys() - hosts.keys()):
        if name in machines and not machines[name].gpu:
            problems.append(f"{where}.machines.{name}: has no built-in GPUs, so its price is a host price; move it to hosts")

    disks = {
        disk: (positive(f"disks.{disk}.usdPerGbMonth", d.get("usdPerGbMonth")), source(f"disks.{disk}", d.get("from")))
        for disk, d in (raw.get("disks") or {}).items()
    }
    rule = raw.get("forwardingRule") or {}
    return RegionPrices(
        region=region,
        read=str(raw.get("read", "")),
        sources=sources,
        gpus=gpu_prices,
        hosts=hosts,
        machines=whole_vms,
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
