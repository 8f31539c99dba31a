"""Inside tenants by design: only the objects the program puts there, host access only in the
namespaces the product needs it in, only the program's images, RBAC and Pod Security objects
exactly the program's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from kubernetes_reader import LOADER
from kubernetes_reader import plain as _plain
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity
from vcluster_reader import host_access

from .common import DATA, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, as_list, get, is_list, show
from .inventory import SOURCE, inventory_of as _inventory

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TENANT = DATA["tenantInstance"]
PRIVILEGED_NAMESPACES: list[str] = TENANT["privilegedNamespaces"]
ENFORCE_LABEL: str = TENANT["enforceLabel"]
POD_SECURITY_POLICY: str = TENANT["podSecurityPolicy"]
# Each set of Pod Security objects a tenant can have (a label on `default`, the admission policy,
# its binding), whole; none at all is `privileged`, which prod approves per team (tenant-placement-by-design).
POD_SECURITY_SETS: list[list[dict[str, Any]]] = TENANT["podSecurityObjects"]

def _objects(props: Mapping[str, Any]) -> list[Any]:
    text = get(props, "spec", "template", "objects")
    if not isinstance(text, str) or not text.strip():
        return []
    return [d for d in yaml.load_all(text, Loader=LOADER) if d is not None]  # noqa: S506 - a safe loader


def _containers(document: Any):
    if isinstance(document, Mapping):
        for key in ("containers", "initContainers", "ephemeralContainers"):
            for container in as_list(document.get(key)):
                yield container
        for value in document.values():
            yield from _containers(value)
    elif is_list(document):
        for value in document:
            yield from _containers(value)


def _is_pod_security_object(document: Any) -> bool:
    key = (get(document, "kind"), get(document, "metadata", "name"))
    return key in {("ValidatingAdmissionPolicy", POD_SECURITY_POLICY), ("ValidatingAdmissionPolicyBinding", POD_SECURITY_POLICY), ("Namespace", "default")}


def _canonical(documents: list[Any]) -> list[str]:
    return sorted(json.dumps(_plain(d), sort_keys=True) for d in documents)


def _check_pod_security(documents: list[Any], field: str, report_violation: ReportViolation) -> None:
    """The Pod Security objects together are one of the sets the program writes, or absent."""
    found = [d for d in documents if _is_pod_security_object(d)]
    if found and _canonical(found) not in [_canonical(s) for s in POD_SECURITY_SETS]:
        names = ", ".join(f"{get(d, 'kind')} {get(d, 'metadata', 'name')}" for d in found)
        report_violation(
            f"{field}: the Pod Security objects ({names}) are not a set gpu-platform writes; allowed: exactly those of "
            "components/tenant_pod_security.py for baseline or restricted (the admission policy failing closed, bound with "
            "Deny, exempting only the product's namespaces), or none (podSecurityStandard: privileged)",
            None,
        )


def _check_rbac_and_access(where: str, document: Any, inventory: Mapping[str, Any], key: tuple, report_violation: ReportViolation) -> None:
    """An in-tenant RBAC object is exactly the one the program makes under its name; a workload's
    pods get exactly the host access and service account the program gives them."""
    if get(document, "kind") in RBAC_KINDS:
        recorded = [r for r in inventory.get("tenantRbac", []) if _object_key(r) == key]
        if _canonical([document]) not in [_canonical([r]) for r in recorded]:
            if not recorded:
                report_violation(f"{where}: is not RBAC gpu-platform grants; allowed: exactly those of {SOURCE}", None)
                return
            # The program's object of that name it is closest to (the inventory may hold one per configuration).
            found = min((_rbac_differences("", _plain(document), r) for r in recorded), key=len)
            for path, value, wanted in found:
                got = "not set" if value is _MISSING else f"{_show_rbac(value)} is not what gpu-platform grants"
                allowed = "not there" if wanted is _MISSING else _show_rbac(wanted)
                report_violation(f"{where}: {path}: {got}; allowed: {allowed} ({SOURCE})", None)
    access = host_access(_plain(document)) if isinstance(document, Mapping) else None
    allowed = [a for w in inventory.get("tenantWorkloads", []) if tuple(w["object"]) == key for a in w["hostAccess"]]
    if access is not None and access not in allowed:
        report_violation(
            f"{where}: its pods' host access ({_access_summary(access)}) is not what gpu-platform gives them; allowed: "
            f"{' or '.join(_access_summary(a) for a in allowed) or 'none'} ({SOURCE})",
            None,
        )


_MISSING = object()


def _rbac_differences(path: str, found: Any, wanted: Any) -> list[tuple[str, Any, Any]]:
    """(path, value, the program's value) where an RBAC object differs from the program's: a rule or
    subject by its index (`rules[2]`, `subjects[0]`) and the field within it (`rules[0].verbs`,
    `subjects[0].name`, `roleRef.name`); a list of names (verbs, resources, apiGroups) whole."""
    if isinstance(found, Mapping) and isinstance(wanted, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for k in [*found, *(k for k in wanted if k not in found)]:
            out += _rbac_differences(f"{path}.{k}" if path else str(k), found.get(k, _MISSING), wanted.get(k, _MISSING))
        return out
    if is_list(found) and is_list(wanted) and any(isinstance(v, Mapping) for v in [*found, *wanted]):
        out = []
        for i in range(max(len(found), len(wanted))):
            out += _rbac_differences(f"{path}[{i}]", found[i] if i < len(found) else _MISSING, wanted[i] if i < len(wanted) else _MISSING)
        return out
    return [] if json.dumps(found, sort_keys=True, default=str) == json.dumps(wanted, sort_keys=True, default=str) else [(path, found, wanted)]


def _show_rbac(value: Any) -> str:
    text = show(value) if not isinstance(value, (Mapping, list)) else repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _object_key(document: Any) -> tuple:
    meta = get(document, "metadata") or {}
    return (get(document, "apiVersion"), get(document, "kind"), get(meta, "namespace") or "", get(meta, "name"))


def _access_summary(access: Mapping[str, Any]) -> str:
    """The parts of a workload's host access a reviewer looks for first."""
    parts = [k for k in ("hostNetwork", "hostPID", "hostIPC") if access.get(k)]
    privileged = [str(c["name"]) for c in access["containers"] if get(c, "securityContext", "privileged")]
    added = sorted({str(cap) for c in access["containers"] for cap in as_list(get(c, "securityContext", "capabilities", "add"))})
    if privileged:
        parts.append(f"privileged {', '.join(privileged)}")
    if added:
        parts.append(f"adds {', '.join(added)}")
    if access["hostPaths"]:
        parts.append(f"host paths {', '.join(access['hostPaths'])}")
    parts.append(f"service account {access['serviceAccountName']}")
    return ", ".join(parts)


def validate_tenant_objects(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The objects an instance puts inside its tenant are the program's: known (apiVersion, kind,
    namespace, name), namespaces labelled privileged only among the product's, images the
    program's own, RBAC exactly the program's, workloads' pods with exactly the host access the
    program gives them, and the Pod Security objects one of the program's sets (or none)."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    inventory = _inventory(args) or {}
    known = {tuple(o) for o in inventory.get("tenantObjects", [])}
    images = set(inventory.get("tenantImages", []))
    field = "spec.template.objects"
    try:
        documents = _objects(args.props)
    except (yaml.YAMLError, ValueError) as e:  # ValueError: libyaml on a lone surrogate
        report_violation(f"{field}: is not YAML ({str(e).splitlines()[0]}); allowed: the program's in-tenant objects", None)
        return
    for i, d in enumerate(documents):
        meta = get(d, "metadata") or {}
        key = (get(d, "apiVersion"), get(d, "kind"), get(meta, "namespace") or "", get(meta, "name"))
        where = f"{field}[{i}] ({key[1]} {'/'.join(str(p) for p in key[2:] if p)})"
        if key not in known:
            report_violation(f"{where}: is not an object gpu-platform puts inside a tenant; allowed: those of {SOURCE}", None)
        if key[1] == "Namespace" and get(meta, "labels", ENFORCE_LABEL) == "privileged" and key[3] not in PRIVILEGED_NAMESPACES:
            report_violation(
                f"{where}: metadata.labels[{ENFORCE_LABEL!r}]: 'privileged' is not allowed; allowed: only in the namespaces the product "
                f"needs host access in ({', '.join(PRIVILEGED_NAMESPACES)}: components/tenant_pod_security.py)",
                None,
            )
        if key[1] == "ValidatingAdmissionPolicy":
            for expression in as_list(get(d, "spec", "matchConstraints", "namespaceSelector", "matchExpressions")):
                extra = [v for v in as_list(get(expression, "values")) if v not in PRIVILEGED_NAMESPACES]
                if get(expression, "operator") == "NotIn" and extra:
                    report_violation(f"{where}: exempts {extra} from Pod Security; allowed: only {', '.join(PRIVILEGED_NAMESPACES)}", None)
        for container in _containers(d):
            image = get(container, "image")
            if image not in images:
                report_violation(f"{where}: image {show(image)} is not an image gpu-platform runs; allowed: {', '.join(sorted(images)) or 'none'}", None)
        if key in known:
            _check_rbac_and_access(where, d, inventory, key, report_violation)
    _check_pod_security(documents, field, report_violation)


tenant_objects_by_design = ResourcePolicy(
    name="tenant-objects-by-design",
    description=(
        "A VirtualClusterInstance puts only the program's objects inside its tenant: no other object, no namespace labelled "
        "privileged but the product's (GPU Operator, CCM/CSI, …), no Pod Security exemption beyond them, no other image, RBAC "
        "exactly the program's (the GPU watchdog's, the capacity fallback's, the metrics collector's), no workload with more host "
        "access than the program gives it (hostNetwork only for the metrics collector), and Pod Security objects exactly as the "
        "program writes them."
    ),
    validate=validate_tenant_objects,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [tenant_objects_by_design]
