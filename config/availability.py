"""Where each GPU machine family can be created and how it can be bought: the `availability:`
section of config/catalog.yaml, loaded once and checked against the rest of the catalog.

A *family* is what Google offers per zone: N1 hosts with one attachable GPU type (`n1+<gpu>`), or
one accelerator-optimized machine line (`g2`, `a2-highgpu`, `a3-ultragpu`, …; a machine type belongs
to the longest family name it starts with). Node types are generated only in zones where their
family is recorded, and only as the capacity types the family is sold as (on-demand = STANDARD
provisioning, Spot, Flex-start; reserved types in their reservation's own zone). A region without a
record is unknown, never assumed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from . import yaml_io
from .catalog import CATALOG_PATH, CatalogError, GUEST, Shape

ON_DEMAND = "on-demand"
SPOT = "spot"
FLEX_START = "flex-start"
RESERVATION = "reservation"
PURCHASE_OPTIONS = (ON_DEMAND, SPOT, FLEX_START, RESERVATION)
# What templates/node/main.tf creates from a node type alone, without a reservation: provisioning
# model STANDARD, SPOT or FLEX_START (google provider 7.45.0, `scheduling.provisioning_model`).
POOLED = (ON_DEMAND, SPOT, FLEX_START)
# `flexStart` of a family: Google discounts Flex-start VMs of it, or sells them at the list price.
FLEX_DISCOUNTED = "discounted"
FLEX_LIST_PRICE = "list-price"
# `reservations` of a family: created on demand (consumed by STANDARD VMs), or only future
# reservations, auto-created and consumed with the reservation-bound provisioning model.
RESERVATION_ON_DEMAND = "on-demand"
RESERVATION_FUTURE = "future"


@dataclass(frozen=True)
class Source:
    url: str
    read: str | None  # date the page was read; None: not checked against it
    note: str = ""


@dataclass(frozen=True, eq=False)  # one object per family: compared and hashed by identity
class Family:
    name: str
    gpu: str
    purchase: tuple[str, ...]  # how Google sells it
    zones: dict[str, tuple[str, ...]]  # region → full zone names
    sources: tuple[str, ...]  # ids in Availability.sources
    unverified: str = ""  # what the sources did not settle
    flex_start: str | None = None  # FLEX_DISCOUNTED | FLEX_LIST_PRICE, where sold as flex-start
    reservations: tuple[str, ...] = ()  # RESERVATION_ON_DEMAND / RESERVATION_FUTURE, where sold as reservation

    def zones_in(self, region: str) -> tuple[str, ...] | None:
        """The region's zones offering the family; None when the catalog has no record for it."""
        return self.zones.get(region)

    @property
    def capacity_types(self) -> tuple[str, ...]:
        """The capacity types of the pooled node types we can create for it (POOLED it is sold as)."""
        return tuple(option for option in POOLED if option in self.purchase)

    def sold_as(self) -> str:
        return ", ".join(self.purchase)


@dataclass(frozen=True)
class Availability:
    sources: dict[str, Source]
    families: dict[str, Family]

    def family_of(self, shape: Shape) -> Family:
        if shape.attach == GUEST:
            return self.families[f"{shape.machine.series}+{shape.gpu}"]
        matches = [name for name in self.families if "+" not in name and (shape.machine.name + "-").startswith(name + "-")]
        return self.families[max(matches, key=len)]

    def regions_for(self, gpu: str) -> tuple[str, ...]:
        return tuple(sorted({r for f in self.families.values() if f.gpu == gpu for r, zones in f.zones.items() if zones}))

    def citation(self, family: Family) -> str:
        return "; ".join(
            f"{self.sources[s].url} (read {self.sources[s].read})" if self.sources[s].read else f"{self.sources[s].url} (not checked against it)"
            for s in family.sources
        )


def _family_key_ok(name: str, raw_machines: dict, raw_gpus: dict) -> str | None:
    if "+" in name:
        series, gpu = name.split("+", 1)
        if gpu not in raw_gpus or "guestLimits" not in raw_gpus[gpu] or series != "n1":
            return f"{name}: `n1+<gpu>` needs an attachable GPU of `gpus`"
        return None
    if not any((m + "-").startswith(name + "-") for m in raw_machines):
        return f"{name}: no machine type of `machines` starts with it"
    return None


@functools.lru_cache(maxsize=None)
def load_availability(path: Path = CATALOG_PATH) -> Availability:
    raw = yaml_io.load(path.read_text())
    section = raw.get("availability") or {}
    problems: list[str] = []
    sources = {
        key: Source(url=s["url"], read=None if s.get("read") is None else str(s["read"]), note=s.get("note", ""))
        for key, s in (section.get("sources") or {}).items()
    }
    families: dict[str, Family] = {}
    for name, f in (section.get("families") or {}).items():
        where = f"availability.families.{name}"
        problem = _family_key_ok(name, raw["machines"], raw["gpus"])
        if problem:
            problems.append(f"availability.families.{problem}")
            continue
        purchase = tuple(f.get("purchase") or ())
        unknown = [p for p in purchase if p not in PURCHASE_OPTIONS]
        if unknown or not purchase:
            problems.append(f"{where}.purchase: {purchase} must be some of {', '.join(PURCHASE_OPTIONS)}")
        cited = tuple(f.get("sources") or ())
        if not cited or any(s not in sources for s in cited):
            problems.append(f"{where}.sources: {cited} must name entries of availability.sources")
        gpu = f.get("gpu")
        builtin = {m.get("gpu") for n, m in raw["machines"].items() if (n + "-").startswith(name + "-")}
        if "+" in name and gpu != name.split("+", 1)[1] or "+" not in name and builtin != {gpu}:
            problems.append(f"{where}.gpu: {gpu!r} is not the GPU of its machines")
        zones = {region: tuple(f"{region}-{suffix}" for suffix in suffixes) for region, suffixes in (f.get("zones") or {}).items()}
        flex = f.get("flexStart")
        if (flex is None) != (FLEX_START not in purchase) or flex not in (None, FLEX_DISCOUNTED, FLEX_LIST_PRICE):
            problems.append(f"{where}.flexStart: {flex!r}; set it ({FLEX_DISCOUNTED} or {FLEX_LIST_PRICE}) exactly when purchase lists {FLEX_START}")
        kinds = tuple(f.get("reservations") or ())
        if bool(kinds) != (RESERVATION in purchase) or any(k not in (RESERVATION_ON_DEMAND, RESERVATION_FUTURE) for k in kinds):
            problems.append(
                f"{where}.reservations: {list(kinds)}; set it (some of {RESERVATION_ON_DEMAND}, {RESERVATION_FUTURE}) exactly when purchase lists {RESERVATION}"
            )
        families[name] = Family(name, gpu, purchase, zones, cited, f.get("unverified", ""), flex, kinds)

    # Every GPU shape of the catalog must belong to exactly one family, or it could never be offered.
    for machine_name, m in raw["machines"].items():
        if m.get("gpu") and not [n for n in families if "+" not in n and (machine_name + "-").startswith(n + "-")]:
            problems.append(f"availability.families: no family for {machine_name}")
    for gpu_name, g in raw["gpus"].items():
        if "guestLimits" in g and f"n1+{gpu_name}" not in families:
            problems.append(f"availability.families: no family n1+{gpu_name}")
    if problems:
        raise CatalogError("catalog.yaml availability is inconsistent:\n  " + "\n  ".join(problems))
    return Availability(sources, families)


def check_gpu_availability(
    region: str, zones: tuple[str, ...], gpu_types: tuple[str, ...], offered: tuple[str, ...], reserved: tuple[str, ...], catalog, problems
) -> None:
    """Each GPU type of `nodeProvider.gpuTypes` must be creatable in one of the configured zones as
    one of the capacity types the environment offers (`offered`: on-demand, and spot / flex-start
    where nodeProvider turns them on), or be reserved (`reserved`: the GPU types of
    nodeProvider.reservations, whose node types live in the reservation's zone). Appends to
    `problems` (config.errors.Problems)."""
    availability = load_availability()
    for i, gpu in enumerate(gpu_types):
        if gpu not in catalog.gpus or gpu in reserved:
            continue  # unknown: reported as such; reserved: checked with its reservation
        key = f"nodeProvider.gpuTypes[{i}]"
        families = list(dict.fromkeys(availability.family_of(shape) for shape in catalog.shapes_for(gpu)))
        names = ", ".join(f.name for f in families)
        regions = ", ".join(availability.regions_for(gpu)) or "none recorded"
        recorded = [f for f in families if f.zones_in(region) is not None]
        if not recorded:
            problems.add(
                key,
                f"{gpu}: config/catalog.yaml records no availability of {names} in {region}; recorded regions offering it: "
                f"{regions}. Check {availability.sources['gpu-regions-zones'].url} and add {region} to `availability` with its source",
            )
            continue
        in_region = sorted({z for f in recorded for z in f.zones_in(region) or ()})
        if not in_region:
            problems.add(key, f"{gpu} is not offered in any zone of {region} ({names}); regions offering it: {regions}")
            continue
        usable = [f for f in recorded if set(f.zones_in(region) or ()) & set(zones)]
        if not usable:
            problems.add(
                key,
                f"{gpu} is offered in {region} only in {', '.join(in_region)}, none of nodeProvider.zones ({', '.join(zones)}); add one of them",
            )
            continue
        creatable = {c for f in usable for c in f.capacity_types}
        if creatable & set(offered):
            continue
        sold = "; ".join(f"{f.name}: {f.sold_as()}" for f in usable)
        turn_on = [how for kind, how in ((SPOT, "nodeProvider.spot: true (Spot)"), (FLEX_START, "nodeProvider.flexStart (Flex-start)")) if kind in creatable]
        reserve = "nodeProvider.reservations (a reservation of it)" if any(RESERVATION in f.purchase for f in usable) else None
        allowed = " or ".join([*turn_on, *([reserve] if reserve else [])]) or "another GPU type"
        problems.add(key, f"{gpu} is not sold on-demand ({sold}; {availability.citation(usable[0])}); allowed: {allowed}")
