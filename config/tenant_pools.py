"""The checks of a tenant's GPU pools against its environment (shapes, zones, durations, warm nodes),
and the node types a pool may use. Split from config/tenant.py, which calls them from
`check_tenant` and re-exports the public names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import fabric_manager
from .availability import load_availability
from .base import DURATION, duration_seconds
from .catalog import load_catalog
from .errors import Problems
from .facts import EnvironmentFacts
from .node_types import NodeType

if TYPE_CHECKING:
    from .tenant import GpuPool


def _check_pool(pool_path: str, i: int, pool: GpuPool, facts: EnvironmentFacts, seen: dict[tuple, int], problems: Problems) -> None:
    """The pool against what its environment offers."""
    if pool.gpu not in facts.gpu_types:
        problems.add(f"{pool_path}.gpu", f"{pool.gpu!r} is not offered by environment {facts.environment}; offered: {', '.join(facts.gpu_types)}")
        return
    if pool.spot and not facts.spot:
        problems.add(f"{pool_path}.spot", f"environment {facts.environment} offers no Spot node types (nodeProvider.spot is false)")
        return
    if not facts.node_types_for(pool.gpu, pool.spot):
        wanted, other = ("Spot", "on-demand") if pool.spot else ("on-demand", "Spot")
        fix = f"set spot: {str(not pool.spot).lower()}" if facts.node_types_for(pool.gpu, not pool.spot) else "choose another GPU type"
        problems.add(
            f"{pool_path}.spot",
            f"environment {facts.environment} offers no {wanted} {pool.gpu} node types ({purchase_options(pool.gpu)}); {fix}"
            + (f" for {other}" if fix.startswith("set") else ""),
        )
        return
    if problems.has_problems(f"{pool_path}.zones"):
        return  # reported by _check_pool_zones; shapes are counted in the pool's zones
    counts = sorted({nt.gpu_count for nt in facts.node_types_for(pool.gpu, pool.spot, zones=pool.zones)})
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
        _check_shapes(pool_path, pool, per_node, facts, problems)
    if facts.environment == "prod" and not problems.has_problems(f"{pool_path}.machineTypes", f"{pool_path}.maxVcpusPerGpu"):
        problem = fabric_manager.prod_problem(pool_node_types(pool, per_node, facts), pool.fabric_manager_verified)
        if problem:
            problems.add(f"{pool_path}.{fabric_manager.KEY}", problem)
    quota = facts.gpu_quota.get(pool.gpu, 0)
    if pool.max_gpus > quota:
        problems.add(
            f"{pool_path}.maxGpus",
            f"{pool.max_gpus} exceeds the environment's quota of {quota} {pool.gpu} GPUs in {facts.region} "
            f"(nodeProvider.gpuQuota; one pool above it is an error whatever quotaPolicy says)",
        )
    key = (pool.gpu, per_node, pool.spot)
    if key in seen:
        problems.add(pool_path, f"duplicates gpuPools[{seen[key]}] ({pool.gpu}, {per_node} per node, spot={pool.spot})")
    seen[key] = i


def _check_warm_spot(pool_path: str, pool: GpuPool, problems: Problems) -> None:
    """Needs nothing from the environment: checked even when the rest of the pool is not."""
    with problems.checking(f"{pool_path}.warmNodes"):
        if pool.spot and pool.warm_nodes and not pool.spot_warm_nodes:
            problems.add(
                f"{pool_path}.warmNodes",
                f"{pool.warm_nodes} warm node{'s' if pool.warm_nodes > 1 else ''} in a Spot pool: Compute Engine may preempt them "
                "at any moment, and the next pod waits for a new VM after all; keep warm nodes in an on-demand pool, "
                "or set spotWarmNodes: true to keep them anyway",
            )


# Neither Karpenter nor Compute Engine bounds these; the product does: an idle GPU node kept for
# days is the cost the platform exists to remove, and a node draining for days holds its GPUs.
MAX_POOL_DURATION_SECONDS = 24 * 3600
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
            elif field == "terminationGracePeriod" and duration_seconds(value) < 60:
                problems.add(f"{pool_path}.{field}", f"{value} is too short for a GPU job to checkpoint; at least 1m")
            elif duration_seconds(value) > MAX_POOL_DURATION_SECONDS:
                problems.add(f"{pool_path}.{field}", f"{value} is longer than a day; at most 24h ({POOL_DURATION_LIMIT[field]})")


def _check_pool_zones(pool_path: str, pool: GpuPool, facts: EnvironmentFacts, problems: Problems) -> None:
    """A pool's zones: a non-empty list without repeats (checked on its own), each in
    nodeProvider.zones and offering the pool's GPU as the pool's capacity type (checked with the
    pool against its environment; only where the GPU and capacity type are offered at all, as
    otherwise that is the pool's problem, reported by _check_pool)."""
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
                elif pool.gpu in facts.gpu_types and (facts.spot or not pool.spot):
                    offering = sorted({nt.zone for nt in facts.node_types_for(pool.gpu, pool.spot)})
                    if offering and zone not in offering:
                        capacity = "Spot" if pool.spot else "on-demand"
                        problems.add(
                            f"{pool_path}.zones[{j}]",
                            f"{zone} does not offer {pool.gpu} as {capacity} (config/catalog.yaml availability); zones that do: {', '.join(offering)}",
                        )


def purchase_options(gpu: str) -> str:
    """How the machine families carrying `gpu` are sold, for error messages."""
    catalog, availability = load_catalog(), load_availability()
    families = dict.fromkeys(availability.family_of(shape) for shape in catalog.shapes_for(gpu))
    return "; ".join(f"{f.name} is sold as {f.sold_as()}" for f in families)


def _check_shapes(path: str, pool: GpuPool, per_node: int, facts: EnvironmentFacts, problems: Problems) -> None:
    shapes = sorted({nt.machine_type: nt.vcpus for nt in facts.node_types_for(pool.gpu, pool.spot, per_node, pool.zones)}.items(), key=lambda kv: kv[1])
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
                    f"{machine!r} is not a shape of {per_node} × {pool.gpu}{' (Spot)' if pool.spot else ''} in environment {facts.environment}; shapes: {names}",
                )
    elif pool.max_vcpus_per_gpu is not None and not any(v <= pool.max_vcpus_per_gpu * per_node for _, v in shapes):
        smallest = shapes[0][1] // per_node if shapes else 0
        problems.add(
            f"{path}.maxVcpusPerGpu",
            f"{pool.max_vcpus_per_gpu} admits no shape of {per_node} × {pool.gpu}; the smallest has {smallest} vCPUs per GPU ({names})",
        )


def pool_node_types(pool: GpuPool, per_node: int, facts: EnvironmentFacts) -> tuple[NodeType, ...]:
    """The node types a pool may get: its machineTypes, or those within maxVcpusPerGpu, or else
    the smallest machine type of its shape."""
    eligible = facts.node_types_for(pool.gpu, pool.spot, per_node, pool.zones)
    if pool.machine_types:
        wanted = set(pool.machine_types)
    elif pool.max_vcpus_per_gpu is not None:
        wanted = {nt.machine_type for nt in eligible if nt.vcpus <= pool.max_vcpus_per_gpu * per_node}
    else:
        wanted = {min(eligible, key=lambda nt: (nt.vcpus, nt.capacity_memory_mi, nt.machine_type)).machine_type}
    return tuple(nt for nt in eligible if nt.machine_type in wanted)
