"""The capacity fallback's objects inside a tenant's virtual cluster (the program is
components/capacity_fallback.py, shipped in a ConfigMap with components/capacity_claims.py,
components/tenant_api.py and components/tenant_metrics.py): its namespace, identity, least RBAC, the PriorityClass of its
request pods, and its Deployment. Pure data, installed with the tenant's other objects
(components/tenant_documents.py) for every tenant with a GPU pool.

What it may do, and nothing more: list Karpenter's NodeClaims (read only: it never changes a claim),
list, create and delete pods in its own namespace (its request pods, which ask Karpenter for a node of
the pool's next option), create Events in `default` (where events about cluster-scoped objects go).
It reads no pod, secret or object of the team's. A compromised one can ask for GPU nodes of its
tenant's own pools, within Karpenter's pool limits: less than the team's own cluster-admins can do.
Its namespace enforces the Pod Security Standard `restricted`, which it and its request pods meet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config import node_properties as props
from config import versions
from config.reliability import FALLBACK_POLL_SECONDS, FALLBACK_REQUEST_SECONDS, FALLBACK_UNAVAILABLE_SECONDS

from . import capacity_claims, capacity_fallback, tenant_api, tenant_metrics
from .tenant_programs import Program, program_objects, rbac

NAMESPACE = capacity_fallback.NAMESPACE
NAME = "gpu-capacity-fallback"
PROGRAM = Path(capacity_fallback.__file__).read_text()
CLAIMS = Path(capacity_claims.__file__).read_text()
TENANT_API = Path(tenant_api.__file__).read_text()
TENANT_METRICS = Path(tenant_metrics.__file__).read_text()
PROGRAM_DIR, CONFIG_DIR = "/opt/gpu-capacity-fallback", "/etc/gpu-capacity-fallback"
# The request pods' priority: below every pod of the team (the default is 0), and they never
# preempt one ("Pod Priority and Preemption", PriorityClass `preemptionPolicy: Never`:
# https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/): should one be
# scheduled to a node a team's pod needs, the team's pod preempts it.
PRIORITY_CLASS = "gpu-platform-capacity-request"
REQUEST_PRIORITY = -1000
# Exactly what it needs (tests/test_capacity_fallback.py holds this against what the program calls).
CLUSTER_RULES = ({"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list"]},)
POD_RULES = ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "create", "delete"]},)
EVENT_RULES = ({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},)
FILES = (("capacity_fallback.py", PROGRAM), ("capacity_claims.py", CLAIMS), ("tenant_api.py", TENANT_API), ("tenant_metrics.py", TENANT_METRICS))
PORTS = ({"name": "metrics", "containerPort": capacity_fallback.METRICS_PORT},)
PROGRAM_OBJECTS = Program(NAME, NAMESPACE, FILES, PROGRAM_DIR, CONFIG_DIR, PORTS)


def fallback_pools(gpu_pools) -> dict[str, dict[str, Any]]:
    """What the program needs of each GPU pool (config.tenant.PoolPlan): its GPU, its node limit, and
    per node type it selects the NodeProvider's `cost` (the platform takes the cheapest: the order of
    the pool's options), the option (capacity type) and the zone, for its messages and metrics, and a
    reserved slice's maxCapacity (a full slice is skipped by the platform, so it cannot be what failed)."""
    return {
        pool.name: {
            "gpu": pool.gpu,
            "maxNodes": pool.max_nodes,
            "nodeTypes": {
                nt.name: {
                    "cost": nt.cost,
                    "option": nt.properties.get(props.CAPACITY_TYPE, ""),
                    "zone": nt.zone,
                    **({"maxCapacity": nt.max_capacity} if nt.max_capacity else {}),
                }
                for nt in pool.node_types
            },
        }
        for pool in gpu_pools
    }


def fallback_config(provider: str, pools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`pools`: per GPU pool, its GPU, its node limit and its node types with their NodeProvider cost,
    option and zone (components/tenant_vcluster.py builds it from the plan)."""
    return {
        "provider": provider,
        "pools": pools,
        "intervalSeconds": FALLBACK_POLL_SECONDS,
        "unavailableSeconds": FALLBACK_UNAVAILABLE_SECONDS,
        "requestSeconds": FALLBACK_REQUEST_SECONDS,
        # Request pods only sleep, should one ever run: the pinned image the program itself runs in.
        "requestImage": versions.WATCHDOG_IMAGE,
        "priorityClass": PRIORITY_CLASS,
        "metricsPort": capacity_fallback.METRICS_PORT,
    }


def fallback_objects(config: dict[str, Any], system_pool: str) -> list[dict[str, Any]]:
    """It runs on the tenant's CPU pool (`system_pool`), never on a GPU node it asks for."""
    role = f"gpu-platform:{NAME}"
    roles = [
        *rbac(PROGRAM_OBJECTS, "ClusterRole", role, None, CLUSTER_RULES),
        *rbac(PROGRAM_OBJECTS, "Role", f"{role}-requests", NAMESPACE, POD_RULES),
        *rbac(PROGRAM_OBJECTS, "Role", f"{role}-events", tenant_api.EVENT_NAMESPACE, EVENT_RULES),
    ]
    priority = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": PROGRAM_OBJECTS.meta(PRIORITY_CLASS),
        "value": REQUEST_PRIORITY,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "gpu-platform's capacity fallback: pods that ask for a GPU pool's next option; any other pod comes first.",
    }
    return [*program_objects(PROGRAM_OBJECTS, config, system_pool, roles), priority]
