"""Reservations owned by an environment, sliced per team (`nodeProvider.reservations`), and Flex-start
(`nodeProvider.flexStart`).

A reservation is Compute Engine capacity held for one machine shape in one zone, billed whether used
or not. The environment declares it once, with the teams that may use it and how many of its VMs
each may take (a *slice*). Each slice becomes one node type of the NodeProvider
(`rsv-<reservation>-<tenant>`, config/node_types.py) capped at the slice (`maxCapacity`), which only
that tenant's pools select and which the node template refuses to any other tenant
(templates/node/main.tf, property gpu-platform/reservation-tenant), so a team never takes another
team's share even though Compute Engine would let any project the reservation is shared with consume
any of it.

`create: true` (the default) has Pulumi create it in the owner project as a specific reservation
(`specificReservationRequired`, so only VMs that name it consume it) shared with the team projects of
its slices (components/reservations.py). Sharing across projects needs the owner project on the
allowlist of the organization policy `compute.sharedReservationsOwnerProjects`
(https://cloud.google.com/compute/docs/instances/reservations-shared). `create: false` names a
reservation that exists (bought through Google, a future reservation in calendar mode, which Compute
Engine auto-creates and VMs consume with the reservation-bound provisioning model:
`reservationBound: true`); its sharing is then its owner's business.

A VM targets a reservation by name, or, in another project than the reservation's,
`projects/<owner>/reservations/<name>` (Compute Engine API `ReservationAffinity.values`: "either a
name to a reservation in the same project or projects/different-project/reservations/
some-reservation-name to target a shared reservation in the same zone but in a different project").
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from .availability import RESERVATION, RESERVATION_FUTURE, RESERVATION_ON_DEMAND, load_availability
from .base import DURATION, ConfigModel, Duration, Syntax, duration_seconds
from .catalog import GUEST, Catalog, Shape
from .errors import Problems

# Compute Engine resource names (RFC 1035 labels, at most 63 characters).
RESOURCE_NAME = Syntax(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Flex-start VMs "can run for up to seven days" (https://cloud.google.com/compute/docs/instances/about-flex-start-vms).
FLEX_START_MAX_SECONDS = 7 * 24 * 3600
# Compute Engine's smallest max run duration for a VM is ten minutes
# (https://cloud.google.com/compute/docs/instances/limit-vm-runtime); a node needs more to be of use.
FLEX_START_MIN_SECONDS = 10 * 60
# The node must be drained and gone before Compute Engine stops a Flex-start VM: Karpenter's
# expireAfter is the run duration minus the pool's terminationGracePeriod minus this margin (node age
# counts from the node claim, which precedes the VM).
EXPIRY_MARGIN_SECONDS = 10 * 60


class FlexStart(ConfigModel):
    """Flex-start node types (Dynamic Workload Scheduler): discounted on A2, A3 and A4, at the list price on G2, never on N1; they draw on the preemptible GPU quota."""

    max_run_duration: Duration = "168h"
    """How long Compute Engine lets a Flex-start VM run before it deletes it, a duration of at least 10m and at most 168h (7 days); each pool's nodes expire and drain before it (Karpenter expireAfter)."""


class ReservationSlice(ConfigModel):
    """The VMs of a reservation one tenant may use."""

    tenant: str
    """The tenant's name (an inline tenant or a team stack of this environment)."""
    count: int = Field(ge=1)
    """How many of the reservation's VMs the tenant's nodes may take at once."""


class Reservation(ConfigModel):
    """A Compute Engine reservation of the environment, sliced per tenant."""

    name: str
    """The reservation's name in its project, a lowercase RFC 1035 name of at most 40 characters (node types are named after it)."""
    zone: str
    """Its zone, one of nodeProvider.zones."""
    machine_type: str
    """The machine type it reserves: one with built-in GPUs (A2, A3, A4, G2), or an N1 host with gpu set; its GPU type must be in gpuTypes."""
    gpu: str | None = None
    """For an N1 machine type only: the GPU type attached to each reserved VM (guest accelerators), as many as config/catalog.yaml pairs with that host (guestShapes); machine types with built-in GPUs take none."""
    count: int = Field(ge=1)
    """How many VMs it reserves."""
    project: str | None = None
    """The project that owns it; unset: gcp:project (the environment's)."""
    create: bool = True
    """Pulumi creates it (specificReservationRequired, shared with the slices' team projects; billed from creation); false: it exists already, and is shared with those projects by its owner."""
    reservation_bound: bool = False
    """VMs consume it with the reservation-bound provisioning model, as reservations made through future reservations (calendar mode, AI Hypercomputer) require; needs create: false."""
    usd_per_hour: float | None = Field(None, gt=0, le=1000)
    """What one reserved VM costs per hour, used or not (a calendar-mode price, a committed-use discount); unset: the catalog's on-demand price."""
    slices: tuple[ReservationSlice, ...] = Field(min_length=1)
    """The tenants that may use it and how many of its VMs each, together at most count."""


@dataclass(frozen=True)
class ReservationFacts:
    """What a tenant needs to know of a reservation (EnvironmentFacts.reservations)."""

    name: str
    project: str
    zone: str
    machine_type: str
    gpu: str
    gpu_count: int
    count: int
    slices: dict[str, int]  # tenant → VMs
    bound: bool

    def to_dict(self) -> dict:
        return {
            "name": self.name, "project": self.project, "zone": self.zone, "machineType": self.machine_type, "gpu": self.gpu,
            "gpuCount": self.gpu_count, "count": self.count, "slices": dict(self.slices), "bound": self.bound,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ReservationFacts:
        return cls(
            data["name"], data["project"], data["zone"], data["machineType"], data["gpu"], int(data["gpuCount"]), int(data["count"]),
            {k: int(v) for k, v in data["slices"].items()}, bool(data["bound"]),
        )


def reservation_shape(catalog: Catalog, machine_type: str, gpu: str | None) -> Shape | None:
    """The shape a reservation holds: a machine type with built-in GPUs (no `gpu`), or an N1 host
    with the GPUs the catalog pairs it with (`gpu`); None when the catalog has no such shape."""
    machine = catalog.machines.get(machine_type)
    if machine is None or (gpu is None) != bool(machine.gpu):
        return None
    return next((s for s in catalog.shapes_for(gpu or machine.gpu) if s.machine.name == machine_type), None)


def reservable_shapes(catalog: Catalog, gpu_types: tuple[str, ...]) -> str:
    """What a reservation of this environment may hold, for messages."""
    shapes = [s for g in gpu_types if g in catalog.gpus for s in catalog.shapes_for(g)]
    return ", ".join(
        s.machine.name if s.attach != GUEST else f"{s.machine.name} with gpu: {s.gpu} ({s.gpu_count})" for s in shapes
    ) or "none (no GPU type in gpuTypes)"


def facts_of(reservations: tuple[Reservation, ...], host_project: str, catalog: Catalog) -> tuple[ReservationFacts, ...]:
    out = []
    for r in reservations:
        shape = reservation_shape(catalog, r.machine_type, r.gpu)  # None: reported by check_reservations
        gpu, gpu_count = (shape.gpu, shape.gpu_count) if shape is not None else (None, 0)
        out.append(
            ReservationFacts(
                r.name, r.project or host_project, r.zone, r.machine_type, gpu, gpu_count, r.count,
                {s.tenant: s.count for s in r.slices}, r.reservation_bound,
            )
        )
    return tuple(out)


def expire_after_seconds(max_run_seconds: int, termination_grace_seconds: int) -> int:
    """Karpenter expireAfter of a pool with Flex-start: its nodes drain and go before Compute Engine
    stops the VM (EXPIRY_MARGIN_SECONDS)."""
    return max_run_seconds - termination_grace_seconds - EXPIRY_MARGIN_SECONDS


def check_flex_start(flex: FlexStart | None, problems: Problems) -> None:
    with problems.checking("nodeProvider.flexStart.maxRunDuration"):
        if flex is None:
            return
        value = flex.max_run_duration
        if not DURATION.match(value):
            problems.add("nodeProvider.flexStart.maxRunDuration", f"{value!r} is not a duration like 72h or 168h")
        elif not FLEX_START_MIN_SECONDS <= duration_seconds(value) <= FLEX_START_MAX_SECONDS:
            problems.add(
                "nodeProvider.flexStart.maxRunDuration",
                f"{value} is outside what Compute Engine allows a Flex-start VM; allowed: 10m to 168h (7 days)",
            )


def check_reservations(
    region: str, zones: tuple[str, ...], gpu_types: tuple[str, ...], reservations: tuple[Reservation, ...], catalog: Catalog, problems: Problems
) -> None:
    """Each reservation on its own: name, zone, shape, how it is sold, its slices. Whether its
    tenants exist and whether their pools match it is checked with the tenants."""
    availability = load_availability()
    seen: dict[str, int] = {}
    for k, r in enumerate(reservations):
        path = f"nodeProvider.reservations[{k}]"
        with problems.checking(f"{path}.name"):
            if not RESOURCE_NAME.match(r.name) or len(r.name) > 40:
                problems.add(f"{path}.name", f"{r.name!r} must be a lowercase RFC 1035 name of at most 40 characters (letters, digits, hyphens)")
            elif r.name in seen:
                problems.add(f"{path}.name", f"{r.name} is also nodeProvider.reservations[{seen[r.name]}]; each reservation once")
            else:
                seen[r.name] = k
        with problems.checking(f"{path}.zone"):
            if r.zone not in zones:
                problems.add(f"{path}.zone", f"{r.zone!r} is not in nodeProvider.zones ({', '.join(zones)}); a reservation's VMs run in its own zone")
        with problems.checking(f"{path}.machineType"):
            machine = catalog.machines.get(r.machine_type)
            shape = reservation_shape(catalog, r.machine_type, r.gpu)
            if machine is not None and machine.gpu and r.gpu is not None:
                problems.add(f"{path}.gpu", f"{r.machine_type} comes with its GPUs ({machine.gpu_count} × {machine.gpu}); leave gpu out")
                continue
            if shape is None:
                if machine is not None and catalog.series.get(machine.series, {}).get("gpuAttach") == GUEST and r.gpu is None:
                    why = f"{r.machine_type} takes attached GPUs: set gpu to one it carries"
                elif r.gpu is not None and r.gpu not in catalog.gpus:
                    why = f"gpu {r.gpu!r} is not a GPU type of config/catalog.yaml"
                elif r.gpu is not None:
                    why = f"config/catalog.yaml pairs no {r.gpu} with {r.machine_type} (guestShapes)"
                else:
                    why = f"{r.machine_type!r} is not a GPU machine type of config/catalog.yaml"
                problems.add(f"{path}.machineType", f"{why}; allowed: {reservable_shapes(catalog, gpu_types)}")
                continue
            if shape.gpu not in gpu_types:
                problems.add(f"{path}.machineType", f"{r.machine_type} carries {shape.gpu}, which is not in nodeProvider.gpuTypes ({', '.join(gpu_types)})")
            family = availability.family_of(shape)
            if RESERVATION not in family.purchase:
                problems.add(f"{path}.machineType", f"{family.name} is not sold as reservation ({family.sold_as()})")
                continue
            on_region = family.zones_in(region)
            if on_region is not None and r.zone in zones and r.zone not in on_region:
                problems.add(
                    f"{path}.zone",
                    f"{r.zone} does not offer {r.machine_type} (config/catalog.yaml availability of {family.name} in {region}: "
                    f"{', '.join(on_region) or 'none'})",
                )
            if r.create and RESERVATION_ON_DEMAND not in family.reservations:
                problems.add(
                    f"{path}.create",
                    f"true, but {family.name} is reserved only through future reservations (calendar mode or AI Hypercomputer), "
                    "which Pulumi cannot create; reserve it with Google, then set create: false and reservationBound: true",
                )
            if r.reservation_bound and RESERVATION_FUTURE not in family.reservations:
                problems.add(f"{path}.reservationBound", f"true, but {family.name} has no future reservations; allowed: false")
            elif not r.reservation_bound and family.reservations == (RESERVATION_FUTURE,):
                problems.add(
                    f"{path}.reservationBound",
                    f"false, but {family.name} is reserved only through future reservations, whose VMs use the reservation-bound "
                    "provisioning model; allowed: true",
                )
        with problems.checking(f"{path}.reservationBound"):
            if r.reservation_bound and r.create:
                problems.add(f"{path}.reservationBound", "true needs create: false (a future reservation is made with Google, not by Pulumi)")
        with problems.checking(f"{path}.slices"):
            tenants: dict[str, int] = {}
            for j, s in enumerate(r.slices):
                if s.tenant in tenants:
                    problems.add(f"{path}.slices[{j}].tenant", f"{s.tenant} already has slices[{tenants[s.tenant]}] of {r.name}; one slice per tenant")
                tenants.setdefault(s.tenant, j)
                if s.count > r.count:
                    problems.add(f"{path}.slices[{j}].count", f"{s.count} is more than the reservation's {r.count} VMs (count)")
            total = sum(s.count for s in r.slices)
            if total > r.count and all(s.count <= r.count for s in r.slices):
                problems.add(
                    f"{path}.slices",
                    f"together {total} VMs ({', '.join(f'{s.tenant}: {s.count}' for s in r.slices)}), more than the reservation's {r.count} (count)",
                )


def check_slice_tenants(reservations: tuple[Reservation, ...], tenant_names: list[str], problems: Problems) -> None:
    """Every slice names a tenant of the environment (inline or a team stack beside it)."""
    for k, r in enumerate(reservations):
        for j, s in enumerate(r.slices):
            with problems.checking(f"nodeProvider.reservations[{k}].slices[{j}].tenant"):
                if s.tenant not in tenant_names:
                    problems.add(
                        f"nodeProvider.reservations[{k}].slices[{j}].tenant",
                        f"{s.tenant!r} is not a tenant of this environment; tenants: {', '.join(tenant_names) or 'none'}",
                    )
