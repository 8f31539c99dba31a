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

import json
from pathlib import Path
from typing import Any

from config import versions
from config.reliability import WATCHDOG_POLL_SECONDS

from . import gpu_watchdog, tenant_api

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
NONROOT = 65534  # nobody


def watchdog_config(pool_limits: dict[str, int], default_limit: int) -> dict[str, Any]:
    return {"poolLimitSeconds": dict(pool_limits), "defaultLimitSeconds": default_limit, "intervalSeconds": WATCHDOG_POLL_SECONDS}


def watchdog_objects(pool_limits: dict[str, int], default_limit: int, system_pool: str) -> list[dict[str, Any]]:
    """`pool_limits`: seconds a node of each GPU pool may go without GPUs. The watchdog runs on the
    tenant's CPU pool (`system_pool`), never on the GPU nodes it judges."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpu-platform"}
    meta = lambda name, namespace=None: {"name": name, **({"namespace": namespace} if namespace else {}), "labels": dict(labels)}  # noqa: E731
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    cluster_role = f"gpu-platform:{NAME}"
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {**meta(NAMESPACE), "labels": {**labels, "pod-security.kubernetes.io/enforce": "restricted"}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME, NAMESPACE)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(cluster_role), "rules": [dict(r) for r in CLUSTER_RULES]},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(cluster_role),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(f"{cluster_role}-events", gpu_watchdog.EVENT_NAMESPACE),
            "rules": [dict(r) for r in EVENT_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(f"{cluster_role}-events", gpu_watchdog.EVENT_NAMESPACE),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{cluster_role}-events"},
            "subjects": subject,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(NAME, NAMESPACE),
            "data": {
                "gpu_watchdog.py": PROGRAM,
                "tenant_api.py": TENANT_API,
                "config.json": json.dumps(watchdog_config(pool_limits, default_limit), sort_keys=True),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(NAME, NAMESPACE),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # never two deciding at once
                "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "serviceAccountName": NAME,
                        "nodeSelector": {"gpu-platform/pool": system_pool},
                        "securityContext": {"runAsNonRoot": True, "runAsUser": NONROOT, "runAsGroup": NONROOT, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": NAME,
                                "image": versions.WATCHDOG_IMAGE,
                                "command": ["python", f"{PROGRAM_DIR}/gpu_watchdog.py", f"{CONFIG_DIR}/config.json"],
                                "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                                "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"cpu": "100m", "memory": "96Mi"}},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "program", "mountPath": PROGRAM_DIR, "readOnly": True},
                                    {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "program", "configMap": {"name": NAME, "items": [{"key": f, "path": f} for f in ("gpu_watchdog.py", "tenant_api.py")]}},
                            {"name": "config", "configMap": {"name": NAME, "items": [{"key": "config.json", "path": "config.json"}]}},
                        ],
                    },
                },
            },
        },
    ]
