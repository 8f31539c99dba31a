"""A Python program the product runs inside each tenant's virtual cluster (the GPU watchdog,
components/watchdog_documents.py; the capacity fallback, components/fallback_documents.py): its
namespace, which enforces the Pod Security Standard `restricted`; its service account and the RBAC
bound to it; the ConfigMap that ships its files, byte for byte, and its configuration; and a
one-replica Deployment on the tenant's CPU pool that runs it from the pinned Python image as a
non-root user, with no capability, a read-only root filesystem and no host access. Pure data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from config import versions

NONROOT = 65534  # nobody


@dataclass(frozen=True)
class Program:
    name: str  # its Deployment, service account, ConfigMap and roles (gpu-platform:<name>)
    namespace: str
    files: tuple[tuple[str, str], ...]  # (file name, text): the first is run, the others it imports
    program_dir: str  # where the files are mounted
    config_dir: str  # where config.json is mounted
    ports: tuple[dict[str, Any], ...] = ()

    @property
    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": self.name, "app.kubernetes.io/part-of": "gpu-platform"}

    def meta(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return {"name": name, **({"namespace": namespace} if namespace else {}), "labels": dict(self.labels)}


def rbac(program: Program, kind: str, name: str, namespace: str | None, rules) -> list[dict[str, Any]]:
    """A ClusterRole or Role with `rules`, bound to the program's service account alone."""
    binding = "ClusterRoleBinding" if kind == "ClusterRole" else "RoleBinding"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": program.meta(name, namespace), "rules": [dict(r) for r in rules]},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": binding,
            "metadata": program.meta(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": program.name, "namespace": program.namespace}],
        },
    ]


def program_objects(program: Program, config: dict[str, Any], system_pool: str, roles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Its namespace and service account, `roles` (from rbac()), its ConfigMap and Deployment. It runs
    on the tenant's CPU pool (`system_pool`), never on a GPU node it acts on."""
    name, namespace = program.name, program.namespace
    script = program.files[0][0]
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {**program.meta(namespace), "labels": {**program.labels, "pod-security.kubernetes.io/enforce": "restricted"}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": program.meta(name, namespace)},
        *roles,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": program.meta(name, namespace),
            "data": {**dict(program.files), "config.json": json.dumps(config, sort_keys=True)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": program.meta(name, namespace),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # never two deciding at once
                "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                "template": {
                    "metadata": {"labels": dict(program.labels)},
                    "spec": {
                        "serviceAccountName": name,
                        "nodeSelector": {"gpu-platform/pool": system_pool},
                        "securityContext": {"runAsNonRoot": True, "runAsUser": NONROOT, "runAsGroup": NONROOT, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": name,
                                "image": versions.WATCHDOG_IMAGE,
                                "command": ["python", f"{program.program_dir}/{script}", f"{program.config_dir}/config.json"],
                                "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                                **({"ports": [dict(p) for p in program.ports]} if program.ports else {}),
                                "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"cpu": "100m", "memory": "96Mi"}},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "program", "mountPath": program.program_dir, "readOnly": True},
                                    {"name": "config", "mountPath": program.config_dir, "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "program", "configMap": {"name": name, "items": [{"key": f, "path": f} for f, _ in program.files]}},
                            {"name": "config", "configMap": {"name": name, "items": [{"key": "config.json", "path": "config.json"}]}},
                        ],
                    },
                },
            },
        },
    ]
