"""The environment's capacity as its stack file states it: the NodeProvider's node types (the offer,
ranks included), the reservations' facts and shares, and which nodeProvider problems the offer cannot
do without. Split from config/stack.py, which loads the stack with these."""

from __future__ import annotations

import dataclasses

from . import capacity as cap
from .base import DURATION, duration_seconds
from .catalog import Catalog
from .errors import Broken, Problems, derived, within
from .facts import EnvironmentFacts
from .isolation import placement
from .node_provider import NodeProviderConfig
from .node_types import NodeTypeOffer, Offering, ReservedSlice, generate_node_types
from .reservations import ReservationFacts, facts_of, reservation_shape


def reservation_shares(np: NodeProviderConfig, facts: EnvironmentFacts, tenants: list) -> dict[str, tuple[str, ...]]:
    """The team projects each reservation is shared with: its slices' tenants' projects (a shared
    tenant's VMs run in the host project), the owner's excluded."""
    projects: dict[str, str] = {}
    for tenant in tenants:
        where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        if where is not None:
            projects[tenant.name] = where.project
    shares = {}
    for r in facts.reservations:
        found = (projects[t] for t in r.slices if t in projects)
        shares[r.name] = tuple(dict.fromkeys(p for p in found if p != r.project))
    return shares


def offer_keys(problems: Problems) -> tuple[str, ...]:
    """The nodeProvider keys with problems that the node types (and the facts tenants are judged
    by) cannot do without. A reservation or Flex-start with problems is not one of them: the offer
    leaves out a reservation whose shape is unknown and keeps Flex-start as stated, so the tenants'
    own problems are reported beside theirs, all at once; nothing is registered while any remains."""
    capacity = ("nodeProvider.reservations", "nodeProvider.flexStart")
    others = any(within(p.path, "nodeProvider") and not any(within(p.path, c) for c in capacity) for p in problems.items)
    return ("nodeProvider",) if others else ()


def reservation_facts(np: NodeProviderConfig, project: str, catalog: Catalog, problems: Problems) -> tuple[ReservationFacts, ...]:
    """facts_of, with each fact of a reservation whose key has problems Broken: a pool that names
    it is judged by its sound facts only, and a note says what waits for the rest."""
    facts = []
    for k, (r, fact) in enumerate(zip(np.reservations, facts_of(np.reservations, project, catalog), strict=True)):
        path = f"nodeProvider.reservations[{k}]"
        broken = {
            field: Broken(f"{path}.{key}")
            for field, keys in (("zone", ("zone",)), ("gpu", ("machineType", "gpu")), ("gpu_count", ("machineType", "gpu")), ("count", ("count", "slices")))
            for key in keys
            if problems.has_problems(f"{path}.{key}")
        }
        facts.append(dataclasses.replace(fact, **broken) if broken else fact)
    return tuple(facts)


def node_type_offer(region: str, project: str, np: NodeProviderConfig, catalog: Catalog, extra_ranks) -> NodeTypeOffer:
    offering = Offering(
        spot=np.spot,
        flex_start_seconds=flex_seconds(np),
        extra_ranks=extra_ranks,
        reserved=tuple(
            ReservedSlice(r.name, r.project or project, r.zone, r.machine_type, r.gpu, s.tenant, s.count, r.reservation_bound, r.usd_per_hour)
            for r in np.reservations
            if reservation_shape(catalog, r.machine_type, r.gpu) is not None  # else reported at its machineType
            for s in r.slices
        ),
        preemptible_quota=dict(np.preemptible_gpu_quota),
    )
    return generate_node_types(
        catalog=catalog,
        region=region,
        zones=np.zones,
        gpu_types=np.gpu_types,
        offering=offering,
        gpu_quota=np.gpu_quota,
        cpu_machine_types=np.cpu_machine_types,
        gpu_disk=(np.gpu_disk.size_gb, np.gpu_disk.type),
        cpu_disk=(np.cpu_disk.size_gb, np.cpu_disk.type),
        gpu_image_family=np.gpu_image_family,
        prices=np.prices,
    )


def flex_seconds(np: NodeProviderConfig) -> int | None:
    """nodeProvider.flexStart's run duration in seconds, as stated (its range is checked at its key);
    None without Flex-start, or when it is no duration at all."""
    if np.flex_start is None or not DURATION.match(np.flex_start.max_run_duration):
        return None
    return duration_seconds(np.flex_start.max_run_duration)


def extra_ranks(tenants: list) -> dict[tuple[str, str], frozenset[int]]:
    """(GPU type, capacity type) → the ranks above 1 the tenants' pools list it at (as far as they
    parsed: a broken tenant or pool adds nothing, its problem is reported where it is)."""
    found: dict[tuple[str, str], set[int]] = {}
    for tenant in tenants:
        pools = derived(lambda t=tenant: tuple(t.gpu_pools))
        for pool in () if isinstance(pools, Broken) else pools:
            entries = derived(lambda p=pool: (p.gpu, cap.pooled_ranks(p.options)))
            if isinstance(entries, Broken):
                continue
            gpu, pairs = entries
            for capacity, rank in pairs:
                if rank > 1:
                    found.setdefault((gpu, capacity), set()).add(rank)
    return {key: frozenset(ranks) for key, ranks in found.items()}
