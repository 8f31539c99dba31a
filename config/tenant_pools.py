"""A tenant's GPU pools: the config model and its checks against the environment.

A pool is nodes of one GPU type and GPU count, from the capacity options it lists in order
(config/capacity.py); each option is a set of the environment's node types (config/node_types.py):
its pooled types at the option's rank, or the tenant's slice of a reservation. The same model and
messages serve `tenants[i].gpuPools[j]` and a team stack's `tenant.gpuPools[j]`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from . import capacity as cap
from .availability import load_availability
from .base import DURATION, ConfigModel, Duration, duration_seconds, duration_text
from .capacity import CapacityEntry, Reserve
from .catalog import load_catalog
from .errors import Problems
from .facts import EnvironmentFacts
from .node_types import NodeType
from .reliability import GPU_TIMEOUT
from .reservations import EXPIRY_MARGIN_SECONDS, FLEX_START_MIN_SECONDS, expire_after_seconds

# Neither Karpenter nor Compute Engine bounds these; the product does: an idle GPU node kept for
# days is the cost the platform exists to remove, and a node draining for days holds its GPUs.
MAX_POOL_DURATION_SECONDS = 24 * 3600
MIN_TERMINATION_GRACE_SECONDS = 60
FLEX_DRAIN = "the pool's nodes must drain and go before Compute Engine stops the VM"


class GpuPool(ConfigModel):
    """One GPU pool of a tenant: nodes of one GPU type and GPU count per node, from the capacity options it lists in order."""

    gpu: str
    """The GPU type, one of the environment's nodeProvider.gpuTypes."""
    max_gpus: int = Field(ge=1)
    """The pool's GPU limit across all its capacity options, a multiple of gpusPerNode within the environment's quota."""
    gpus_per_node: int | None = Field(None, ge=1)
    """GPUs per node, a shape of the GPU type; unset: the smallest shape offered."""
    machine_types: tuple[str, ...] | None = None
    """Exactly these machine types of the shape (the platform picks the cheapest that fits each pod); unset: see maxVcpusPerGpu."""
    max_vcpus_per_gpu: int | None = Field(None, ge=1)
    """Every machine type of the shape with at most this many vCPUs per GPU; with neither this nor machineTypes, the smallest machine type of gpusPerNode."""
    capacity: tuple[CapacityEntry, ...] | None = None
    """Where the pool's GPUs come from, in the order it wants them: on-demand, spot, flex-start and {reservation: <name>} (the tenant's slice of a nodeProvider.reservations entry; reservations first), each once; unset: [on-demand] (docs/gpu-nodes.md, "Capacity options")."""
    spot: bool = False
    """The same as capacity: [spot] (kept from before capacity lists); not together with capacity."""
    zones: tuple[str, ...] | None = None
    """Only these of nodeProvider.zones (e.g. where the team's volumes are), each offering the GPU; unset: all."""
    idle_after: Duration = Field("60s", json_schema_extra={"bounds": f"at most {duration_text(MAX_POOL_DURATION_SECONDS)}"})
    """How long a node stays empty before it is deleted, a duration like 60s, 10m or 1h30m."""
    termination_grace_period: Duration = Field(
        "30m", json_schema_extra={"bounds": f"{duration_text(MIN_TERMINATION_GRACE_SECONDS)}–{duration_text(MAX_POOL_DURATION_SECONDS)}"}
    )
    """How long a GPU job gets to stop when its node goes, a duration of at least 1m."""
    gpu_timeout: Duration = GPU_TIMEOUT
    """How long a node of this pool may go without offering nvidia.com/gpu after it joins, or after it lost its GPUs, before the GPU watchdog removes it and its VM (at least 2m)."""
    warm_nodes: int = Field(0, ge=0)
    """Nodes of the pool's first capacity option, cheapest shape, kept running at all times, so a pod gets a GPU without waiting for a VM (they count against maxGpus and cost money while idle)."""
    spot_warm_nodes: bool = False
    """Allow warmNodes in a pool whose first capacity option is Spot, whose warm nodes Compute Engine may preempt at any moment."""
    fabric_manager_verified: bool = False
    """Accepted for stacks written before NVIDIA Fabric Manager was settled per machine series; it changes nothing (docs/gpu-nodes.md, "Fabric Manager")."""

    @property
    def options(self) -> tuple[Any, ...]:
        """The capacity list in effect (config/capacity.py `effective`)."""
        return cap.effective(self.capacity, self.spot)

    @property
    def uses_spot(self) -> bool:
        """Some of its nodes may be Spot VMs, which Compute Engine may preempt."""
        return cap.SPOT in self.options


def pool_name(gpu: str, per_node: int, options: tuple[Any, ...]) -> str:
    short = gpu.removeprefix("nvidia-").removeprefix("tesla-")
    return f"{short}-{per_node}x{cap.short(options)}"


def option_node_types(pool: GpuPool, facts: EnvironmentFacts, tenant: str, per_node: int | None = None, zones=None) -> tuple[NodeType, ...]:
    """The environment's node types behind each of the pool's options, in the pool's order: the
    pooled types at the option's rank, the tenant's slice of each reservation."""
    found: list[NodeType] = []
    for entry, rank in zip(pool.options, cap.ranks(pool.options), strict=True):
        if isinstance(entry, Reserve):
            found += facts.node_types_for(pool.gpu, cap.RESERVATION, per_node, zones, option=cap.reserved_type_name(entry.name, tenant))
        else:
            found += facts.node_types_for(pool.gpu, entry, per_node, zones, rank=rank)
    return tuple(found)


def pool_node_types(pool: GpuPool, per_node: int, facts: EnvironmentFacts, tenant: str) -> tuple[NodeType, ...]:
    """The node types a pool may get: those of its options with its machineTypes, or within
    maxVcpusPerGpu, or else the smallest machine type of its shape (across its options)."""
    eligible = option_node_types(pool, facts, tenant, per_node, pool.zones)
    if pool.machine_types:
        wanted = set(pool.machine_types)
    elif pool.max_vcpus_per_gpu is not None:
        wanted = {nt.machine_type for nt in eligible if nt.vcpus <= pool.max_vcpus_per_gpu * per_node}
    else:
        pooled = [nt for nt in eligible if not nt.reserved] or list(eligible)
        wanted = {min(pooled, key=lambda nt: (nt.vcpus, nt.capacity_memory_mi, nt.machine_type)).machine_type}
    return tuple(nt for nt in eligible if nt.machine_type in wanted)


def per_node_of(pool: GpuPool, facts: EnvironmentFacts, tenant: str) -> int:
    counts = sorted({nt.gpu_count for nt in option_node_types(pool, facts, tenant, zones=pool.zones)})
    return pool.gpus_per_node or counts[0]


def purchase_options(gpu: str) -> str:
    """How the machine families carrying `gpu` are sold, for error messages."""
    catalog, availability = load_catalog(), load_availability()
    families = dict.fromkeys(availability.family_of(shape) for shape in catalog.shapes_for(gpu))
    return "; ".join(f"{f.name} is sold as {f.sold_as()}" for f in families)


def check_gpu_pools(path: str, tenant, facts: EnvironmentFacts, problems: Problems) -> None:
    """Every GPU pool of a tenant (`path`: tenants[i] or tenant) against its environment."""
    seen: dict[tuple, int] = {}
    slices: dict[str, int] = {}
    for i, pool in enumerate(tenant.gpu_pools):
        pool_path = f"{path}.gpuPools[{i}]"
        _check_pool_zones(pool_path, pool, tenant.name, facts, problems)
        with problems.checking(pool_path):
            if _check_capacity(pool_path, i, pool, tenant.name, facts, slices, problems):
                _check_pool(pool_path, i, pool, tenant.name, facts, seen, problems)
        _check_pool_timing(pool_path, pool, problems)
        _check_warm_spot(pool_path, pool, problems)
        with problems.checking(f"{pool_path}.terminationGracePeriod"):
            _check_flex_expiry(pool_path, pool, facts, problems)


def _check_capacity(pool_path: str, i: int, pool: GpuPool, tenant: str, facts: EnvironmentFacts, slices: dict[str, int], problems: Problems) -> bool:
    """The pool's capacity list against what the environment offers; True when every option is
    offered (the rest of the pool is then checked on their node types)."""
    key = f"{pool_path}.capacity"
    if pool.gpu not in facts.gpu_types:
        problems.add(f"{pool_path}.gpu", f"{pool.gpu!r} is not offered by environment {facts.environment}; offered: {', '.join(facts.gpu_types)}")
        return False
    ok = True
    if pool.capacity is not None and pool.spot:
        problems.add(f"{pool_path}.spot", "set capacity only: spot: true is capacity: [spot], and capacity already says where the GPUs come from")
        ok = False
    if pool.capacity is not None and not pool.capacity:
        problems.add(key, f"is empty; list at least one option, in the order you want them; allowed: {cap.ALLOWED}")
        return False
    # Without a capacity list the pool's one option comes from `spot` (set: [spot], else [on-demand]).
    where = f"{pool_path}.spot" if pool.spot and pool.capacity is None else key
    pooled_seen = False
    for k, (entry, rank) in enumerate(zip(pool.options, cap.ranks(pool.options), strict=True)):
        at = f"{key}[{k}]" if pool.capacity is not None else where
        if isinstance(entry, Reserve):
            if pooled_seen:
                problems.add(at, f"{entry} comes after a pooled option; reservations come first (they are paid whether used or not)")
                ok = False
            ok = _check_reservation_entry(at, i, pool, entry, tenant, facts, slices, problems) and ok
            continue
        pooled_seen = True
        ok = _check_pooled_entry(at, pool, entry, rank, facts, problems) and ok
    return ok


def _check_pooled_entry(at: str, pool: GpuPool, capacity: str, rank: int, facts: EnvironmentFacts, problems: Problems) -> bool:
    env = f"environment {facts.environment}"
    if capacity == cap.SPOT and not facts.spot:
        problems.add(at, f"{env} offers no Spot node types (nodeProvider.spot is false)")
        return False
    if capacity == cap.FLEX_START and not facts.flex_start_seconds:
        problems.add(at, f"{env} offers no Flex-start node types (nodeProvider.flexStart is not set)")
        return False
    if not facts.node_types_for(pool.gpu, capacity):
        sold = [c for c in cap.POOLED if facts.node_types_for(pool.gpu, c)]
        reserved = [r.name for r in facts.reservations if r.gpu == pool.gpu]
        allowed = [*sold, *(f"{{reservation: {r}}}" for r in reserved)]
        unset = " (capacity is unset: [on-demand])" if pool.capacity is None and not pool.spot else ""
        problems.add(
            at,
            f"{capacity} is not sold for {pool.gpu} in {env}{unset} ({purchase_options(pool.gpu)}); allowed here: {', '.join(allowed) or 'none'}",
        )
        return False
    if not facts.node_types_for(pool.gpu, capacity, rank=rank):
        offered = sorted({nt.rank for nt in facts.node_types_for(pool.gpu, capacity)})
        problems.add(
            at,
            f"{env} has no {capacity} {pool.gpu} node types at rank {rank} (place {rank} among the pool's pooled options; offered at "
            f"{', '.join(map(str, offered))}): an environment makes its node types for the pools its stack file and the team stacks "
            "beside it list; deploy the environment with this stack committed first",
        )
        return False
    return True


def _check_reservation_entry(at, i, pool: GpuPool, entry: Reserve, tenant: str, facts: EnvironmentFacts, slices, problems) -> bool:
    reservation = facts.reservation(entry.name)
    if reservation is None:
        names = ", ".join(r.name for r in facts.reservations) or "none"
        problems.add(at, f"{entry.name!r} is not a reservation of environment {facts.environment} (nodeProvider.reservations: {names})")
        return False
    if tenant not in reservation.slices:
        owners = ", ".join(f"{t}: {n}" for t, n in reservation.slices.items())
        problems.add(at, f"reservation {entry.name} has no slice for tenant {tenant} (its slices: {owners}); a team uses only its own slice")
        return False
    ok = True
    if reservation.gpu != pool.gpu:
        problems.add(at, f"reservation {entry.name} reserves {reservation.machine_type} ({reservation.gpu}), not the pool's {pool.gpu}")
        ok = False
    elif pool.gpus_per_node is not None and reservation.gpu_count != pool.gpus_per_node:
        problems.add(
            at,
            f"reservation {entry.name} reserves {reservation.machine_type} with {reservation.gpu_count} GPUs, not the pool's gpusPerNode "
            f"{pool.gpus_per_node}; set gpusPerNode: {reservation.gpu_count}",
        )
        ok = False
    if pool.zones is not None and reservation.zone not in pool.zones:
        problems.add(at, f"reservation {entry.name} is in {reservation.zone}, outside the pool's zones ({', '.join(pool.zones)})")
        ok = False
    if entry.name in slices and slices[entry.name] != i:
        problems.add(at, f"tenant {tenant}'s slice of {entry.name} is already used by gpuPools[{slices[entry.name]}]; one pool per slice")
        ok = False
    slices.setdefault(entry.name, i)
    return ok


def _check_pool(pool_path: str, i: int, pool: GpuPool, tenant: str, facts: EnvironmentFacts, seen: dict[tuple, int], problems: Problems) -> None:
    """The pool's shape, limits and quota against the node types of its options."""
    if problems.has_problems(f"{pool_path}.zones"):
        return  # reported by _check_pool_zones; shapes are counted in the pool's zones
    counts = sorted({nt.gpu_count for nt in option_node_types(pool, facts, tenant, zones=pool.zones)})
    per_node = pool.gpus_per_node or (counts[0] if counts else None)
    if per_node not in counts:
        problems.add(
            f"{pool_path}.gpusPerNode",
            f"{pool.gpus_per_node} is not a shape of {pool.gpu} in environment {facts.environment}; shapes: {', '.join(map(str, counts))}",
        )
        return
    if pool.max_gpus % per_node:
        problems.add(f"{pool_path}.maxGpus", f"{pool.max_gpus} is not a multiple of gpusPerNode {per_node}")
    if pool.warm_nodes > pool.max_gpus // per_node:
        problems.add(
            f"{pool_path}.warmNodes",
            f"{pool.warm_nodes} warm nodes of {per_node} GPU{'s' if per_node > 1 else ''} hold more than maxGpus {pool.max_gpus} admits; "
            f"at most {pool.max_gpus // per_node} (warm nodes count against maxGpus)",
        )
    with problems.checking(f"{pool_path}.machineTypes"):
        _check_shapes(pool_path, pool, per_node, tenant, facts, problems)
    if not problems.has_problems(f"{pool_path}.machineTypes", f"{pool_path}.maxVcpusPerGpu"):
        chosen = {nt.machine_type for nt in pool_node_types(pool, per_node, facts, tenant)}
        for k, entry in enumerate(pool.options):
            reservation = facts.reservation(entry.name) if isinstance(entry, Reserve) else None
            if reservation is not None and reservation.gpu_count == per_node and reservation.machine_type not in chosen:
                problems.add(
                    f"{pool_path}.capacity[{k}]",
                    f"reservation {entry.name} reserves {reservation.machine_type}, not a machine type of this pool ({', '.join(sorted(chosen))}); "
                    f"add it to machineTypes",
                )
            elif reservation is not None and reservation.gpu_count != per_node and pool.gpus_per_node is None:
                problems.add(
                    f"{pool_path}.capacity[{k}]",
                    f"reservation {entry.name} reserves {reservation.gpu_count} GPUs per VM, the pool gets {per_node}; set gpusPerNode: {reservation.gpu_count}",
                )
    limit = _quota_limit(pool, facts, tenant)
    if pool.max_gpus > limit:
        kinds = {cap.kind_of(e) for e in pool.options}
        preemptible = bool({cap.SPOT, cap.FLEX_START} & kinds)
        keys = " and ".join(
            [*(["nodeProvider.gpuQuota"] if kinds - {cap.SPOT, cap.FLEX_START} or not facts.preemptible_gpu_quota.get(pool.gpu) else []),
             *(["nodeProvider.preemptibleGpuQuota, which Spot and Flex-start draw on"] if preemptible else [])]
        )
        problems.add(
            f"{pool_path}.maxGpus",
            f"{pool.max_gpus} exceeds the environment's quota of {limit} {pool.gpu} GPUs in {facts.region} "
            f"({keys}; one pool above it is an error whatever quotaPolicy says)",
        )
    key = (pool.gpu, per_node, pool.options)
    if key in seen:
        what = ", ".join(cap.describe(e) for e in pool.options)
        problems.add(pool_path, f"duplicates gpuPools[{seen[key]}] ({pool.gpu}, {per_node} per node, capacity {what})")
    seen[key] = i


def _quota_limit(pool: GpuPool, facts: EnvironmentFacts, tenant: str = "") -> int:
    """The GPUs the pool's options may draw on together: the on-demand quota (on-demand, and VMs
    consuming a reservation, which count against the consuming project's quota too:
    https://cloud.google.com/compute/docs/instances/reservations-shared), plus the preemptible quota
    for Spot and Flex-start where one is set (both use the on-demand quota without one), plus the
    GPUs of its slices of future reservations (reservationBound), which draw on no quota of the
    team's (config/quota.py)."""
    kinds = set()
    bound = 0
    for entry in pool.options:
        reservation = facts.reservation(entry.name) if isinstance(entry, Reserve) else None
        if reservation is not None and reservation.bound is True:
            slice_vms = reservation.slices.get(tenant, 0) if isinstance(reservation.slices, dict) else 0
            bound += slice_vms * reservation.gpu_count if isinstance(reservation.gpu_count, int) else 0
            continue
        kinds.add(cap.kind_of(entry))
    on_demand = facts.gpu_quota.get(pool.gpu, 0)
    preemptible = facts.preemptible_gpu_quota.get(pool.gpu, 0)
    limit = on_demand if kinds & {cap.ON_DEMAND, cap.RESERVATION} else 0
    if kinds & {cap.SPOT, cap.FLEX_START}:
        limit = limit + preemptible if preemptible else max(limit, on_demand)
    return limit + bound


def _check_warm_spot(pool_path: str, pool: GpuPool, problems: Problems) -> None:
    """Needs nothing from the environment: checked even when the rest of the pool is not."""
    with problems.checking(f"{pool_path}.warmNodes"):
        if pool.options and pool.options[0] == cap.FLEX_START and pool.warm_nodes:
            # Warm nodes are a static pool of the first option's cheapest shape: a static pool has no
            # expireAfter (loft-sh/vcluster v0.36.1 chart/values.schema.json StaticNodePool; only
            # DynamicNodePool has it), so nothing would drain them before Compute Engine stops the
            # Flex-start VMs at their max run duration. Refused rather than moved to a later option,
            # which would change what the team asked to keep warm and what it pays for.
            problems.add(
                f"{pool_path}.warmNodes",
                f"{pool.warm_nodes} warm node{'s' if pool.warm_nodes > 1 else ''} in a pool whose first option is flex-start: warm nodes "
                "are of the first option, and Compute Engine stops a Flex-start VM at nodeProvider.flexStart.maxRunDuration without a "
                "drain (a warm, static pool has no expireAfter); allowed: warmNodes: 0, or another option first in capacity "
                "(e.g. [on-demand, flex-start])",
            )
        if pool.options and pool.options[0] == cap.SPOT and pool.warm_nodes and not pool.spot_warm_nodes:
            problems.add(
                f"{pool_path}.warmNodes",
                f"{pool.warm_nodes} warm node{'s' if pool.warm_nodes > 1 else ''} in a Spot pool: Compute Engine may "
                "preempt them at any moment, and the next pod waits for a new VM after all; keep warm nodes in an on-demand pool, "
                "or set spotWarmNodes: true to keep them anyway",
            )


def _check_flex_expiry(pool_path: str, pool: GpuPool, facts: EnvironmentFacts, problems: Problems) -> None:
    """A pool with Flex-start drains its nodes (Karpenter expireAfter) before Compute Engine stops them."""
    if cap.FLEX_START not in pool.options or not facts.flex_start_seconds or not DURATION.match(pool.termination_grace_period):
        return
    expiry = expire_after_seconds(facts.flex_start_seconds, duration_seconds(pool.termination_grace_period))
    if expiry < FLEX_START_MIN_SECONDS:
        longest = max(facts.flex_start_seconds - EXPIRY_MARGIN_SECONDS - FLEX_START_MIN_SECONDS, 0)
        problems.add(
            f"{pool_path}.terminationGracePeriod",
            f"{pool.termination_grace_period} leaves a Flex-start node of this pool less than {duration_text(FLEX_START_MIN_SECONDS)} to run: "
            f"{FLEX_DRAIN}, so Karpenter expires it at nodeProvider.flexStart.maxRunDuration "
            f"({duration_text(facts.flex_start_seconds)}) minus terminationGracePeriod minus {duration_text(EXPIRY_MARGIN_SECONDS)}; "
            f"allowed: at most {duration_text(longest)}, or a longer maxRunDuration",
        )


POOL_DURATION_LIMIT = {
    "idleAfter": "an idle GPU node is billed by the second; keep warmNodes for nodes that must stay",
    "terminationGracePeriod": "a node being removed keeps its GPUs, and its bill, until the period ends",
}


def _check_pool_timing(pool_path: str, pool: GpuPool, problems: Problems) -> None:
    """Durations need nothing from the environment: checked even when the rest of the pool is not."""
    for field, attribute in (("idleAfter", "idle_after"), ("terminationGracePeriod", "termination_grace_period")):
        with problems.checking(f"{pool_path}.{field}"):
            value = getattr(pool, attribute)
            if not DURATION.match(value):
                problems.add(f"{pool_path}.{field}", f"{value!r} is not a duration like 60s, 10m or 1h30m")
            elif field == "terminationGracePeriod" and duration_seconds(value) < MIN_TERMINATION_GRACE_SECONDS:
                problems.add(f"{pool_path}.{field}", f"{value} is too short for a GPU job to checkpoint; at least 1m")
            elif duration_seconds(value) > MAX_POOL_DURATION_SECONDS:
                problems.add(f"{pool_path}.{field}", f"{value} is longer than a day; at most 24h ({POOL_DURATION_LIMIT[field]})")


def _check_pool_zones(pool_path: str, pool: GpuPool, tenant: str, facts: EnvironmentFacts, problems: Problems) -> None:
    """A pool's zones: a non-empty list without repeats (checked on its own), each in
    nodeProvider.zones and offering the pool's GPU through one of its options (checked with the
    pool against its environment; only where the GPU is offered at all, as otherwise that is the
    pool's problem, reported by _check_capacity)."""
    with problems.checking(f"{pool_path}.zones"):
        zones = pool.zones
        if zones is not None and not zones:
            problems.add(f"{pool_path}.zones", "is empty; leave it out to use every zone")
        for j, zone in enumerate(zones or ()):
            if zone in zones[:j]:
                continue  # reported with every list's repeats (config/base.py parse)
            with problems.checking(pool_path):  # against the environment, as the rest of the pool
                if zone not in facts.zones:
                    problems.add(
                        f"{pool_path}.zones[{j}]",
                        f"{zone} is not in nodeProvider.zones of environment {facts.environment} ({', '.join(facts.zones)})",
                    )
                elif pool.gpu in facts.gpu_types:
                    offering = sorted({nt.zone for nt in option_node_types(pool, facts, tenant)})
                    if offering and zone not in offering:
                        what = ", ".join(cap.describe(e) for e in pool.options)
                        problems.add(
                            f"{pool_path}.zones[{j}]",
                            f"{zone} does not offer {pool.gpu} as any of the pool's options ({what}; config/catalog.yaml availability); "
                            f"zones that do: {', '.join(offering)}",
                        )


def _check_shapes(path: str, pool: GpuPool, per_node: int, tenant: str, facts: EnvironmentFacts, problems: Problems) -> None:
    shapes = sorted({nt.machine_type: nt.vcpus for nt in option_node_types(pool, facts, tenant, per_node, pool.zones)}.items(), key=lambda kv: kv[1])
    names = ", ".join(m for m, _ in shapes)
    if pool.machine_types is not None and pool.max_vcpus_per_gpu is not None:
        problems.add(f"{path}.maxVcpusPerGpu", "set either machineTypes or maxVcpusPerGpu, not both")
    elif pool.machine_types is not None:
        if not pool.machine_types:
            problems.add(f"{path}.machineTypes", f"lists no machine type; shapes of {per_node} × {pool.gpu}: {names}")
        for i, machine in enumerate(pool.machine_types):
            if machine not in dict(shapes):
                problems.add(
                    f"{path}.machineTypes[{i}]",
                    f"{machine!r} is not a shape of {per_node} × {pool.gpu} of the pool's capacity options in environment {facts.environment}; shapes: {names}",
                )
    elif pool.max_vcpus_per_gpu is not None and not any(v <= pool.max_vcpus_per_gpu * per_node for _, v in shapes):
        smallest = shapes[0][1] // per_node if shapes else 0
        problems.add(
            f"{path}.maxVcpusPerGpu",
            f"{pool.max_vcpus_per_gpu} admits no shape of {per_node} × {pool.gpu}; the smallest has {smallest} vCPUs per GPU ({names})",
        )


__all__ = ["GpuPool", "check_gpu_pools", "option_node_types", "per_node_of", "pool_name", "pool_node_types", "purchase_options"]
