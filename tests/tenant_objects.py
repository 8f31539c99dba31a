"""The objects the program puts inside a tenant's virtual cluster (its VirtualClusterInstance's
`spec.template.objects`), picked by what they are, never by where they stand in a list."""

from __future__ import annotations

import yaml
from policy.kubernetes_reader import LOADER

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


def tenant_instance(run, tenant: str):
    """The tenant's VirtualClusterInstance: of that type and named the tenant (metadata.name)."""
    [found] = [r for r in run.of_type(VCI) if r.input("metadata", "name") == tenant]
    return found


def instance_objects(vci) -> list[dict]:
    """The objects of a VirtualClusterInstance, as the platform applies them."""
    return [o for o in yaml.load_all(vci.input("spec", "template", "objects"), Loader=LOADER) if o]  # noqa: S506 - a safe loader


def tenant_objects(run, tenant: str) -> list[dict]:
    return instance_objects(tenant_instance(run, tenant))


def named(objects: list[dict], kind: str, name: str, namespace: str | None = None) -> dict:
    """The one object of that kind, name and namespace (None: cluster-scoped)."""
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace]
    return found


def rbac_needed(calls) -> set[tuple[tuple[str, str, str | None], str]]:
    """The RBAC ((API group, resource, namespace or None), verb) of each (method, path, body) a program
    inside a tenant sent to its API server: a GET is of a collection (list), a DELETE of one object,
    a POST a create."""
    verbs = {"GET": "list", "DELETE": "delete", "POST": "create"}

    def resource(path: str) -> tuple[str, str, str | None]:
        parts = path.strip("/").split("/")
        if parts[0] == "api":  # /api/v1[/namespaces/<ns>]/<resource>[/<name>]
            namespace = parts[3] if parts[2] == "namespaces" else None
            return "", parts[2] if namespace is None else parts[4], namespace
        return parts[1], parts[3], None  # /apis/<group>/<version>/<resource>[/<name>]

    return {(resource(path), verbs[method]) for method, path, _ in calls}
