"""The GPU watchdog's objects inside a tenant's virtual cluster (the program is
components/gpu_watchdog.py, shipped in a ConfigMap): its namespace, identity, least RBAC and
Deployment. Pure data, installed with the tenant's other objects (components/tenant_documents.py).

What it may do, and nothing more: list and delete Nodes (their labels, finalizers, creation time and
GPU capacity; a node is deleted only where the NodeClaim API refuses or lists no claim for it, and
only when Karpenter's finalizer on the node takes its claim and VM along), list and delete Karpenter NodeClaims (a deleted claim takes
its node and VM with it), create Events in `default` (where events about nodes go). It cannot read pods, secrets or anything namespaced, and
runs as a non-root user with no capabilities and a read-only root filesystem: the Pod Security
Standard `restricted`, which its namespace enforces, so it needs no exemption from the tenant's
default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.reliability import WATCHDOG_POLL_SECONDS

from . import gpu_watchdog, tenant_api
from .tenant_programs import Program, program_objects, rbac

NAMESPACE = "gpu-platform-system"
NAME = "gpu-watchdog"
PROGRAM = Path(gpu_watchdog.__file__).read_text()
# Shipped beside it: the program imports it from its own directory.
TENANT_API = Path(tenant_api.__file__).read_text()
PROGRAM_DIR, CONFIG_DIR = "/opt/gpu-watchdog", "/etc/gpu-watchdog"
# Exactly what it needs (tests/test_gpu_watchdog.py holds this against what the program calls).
CLUSTER_RULES = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "delete"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "delete"]},
)
EVENT_RULES = ({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},)
PROGRAM_OBJECTS = Program(NAME, NAMESPACE, (("gpu_watchdog.py", PROGRAM), ("tenant_api.py", TENANT_API)), PROGRAM_DIR, CONFIG_DIR)


def watchdog_config(pool_limits: dict[str, int], default_limit: int) -> dict[str, Any]:
    return {"poolLimitSeconds": dict(pool_limits), "defaultLimitSeconds": default_limit, "intervalSeconds": WATCHDOG_POLL_SECONDS}


def watchdog_objects(pool_limits: dict[str, int], default_limit: int, system_pool: str) -> list[dict[str, Any]]:
    """`pool_limits`: seconds a node of each GPU pool may go without GPUs. The watchdog runs on the
    tenant's CPU pool (`system_pool`), never on the GPU nodes it judges."""
    role = f"gpu-platform:{NAME}"
    roles = [*rbac(PROGRAM_OBJECTS, "ClusterRole", role, None, CLUSTER_RULES), *rbac(PROGRAM_OBJECTS, "Role", f"{role}-events", gpu_watchdog.EVENT_NAMESPACE, EVENT_RULES)]
    return program_objects(PROGRAM_OBJECTS, watchdog_config(pool_limits, default_limit), system_pool, roles)
