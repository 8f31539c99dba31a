"""Where tenants live and what they may do, against the program's data of every committed stack
(program_data.json `stacks`): each tenant in the project its stack gives it, one tenant per team
project across all stacks, no shared tenant beside tenants with projects of their own unless the
environment accepts it, in prod no setting beyond the safe ones that the environment stack does
not approve for that team, and every control plane with requests and limits within the
environment's maximum (config/tenant_security.py says why for each).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from vcluster_reader import TenantInstance, quantity

from .common import (
    DATA,
    STACKS,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    Values,
    described,
    get,
    plain,
    show,
    stack_data,
    stack_of,
    tenant_record,
    unknown_stack,
)

PROD = "prod"
LOCAL_CLUSTER: str = DATA["platformObjects"]["localCluster"]
_PROPERTIES = DATA["tenantInstance"]
# The auto-nodes properties that name the tenant's own GCP objects (config/node_properties.py; the
# environment template builds the tenant's VMs from them), each with the tenant record's field and
# what another tenant's value would do: (property, field of the record, what it is, why).
NODE_OBJECTS: tuple[tuple[str, str, str, str], ...] = (
    (
        _PROPERTIES["nodeServiceAccountProperty"],
        "nodeServiceAccountId",
        "node account",
        "its VMs would run as that account: the platform may act as every tenant's node account",
    ),
    (_PROPERTIES["networkProperty"], "network", "network", "its VMs would start in that network"),
    (_PROPERTIES["subnetworkProperty"], "subnetwork", "subnet", "its VMs would start in that subnet"),
)
# The safe value of each security setting, and values stricter still (config/tenant_security.py).
SAFE: dict[str, Any] = DATA["tenantSecurity"]["safe"]
STRICTER: dict[str, list[Any]] = DATA["tenantSecurity"]["stricter"]
GCP_PROJECT_ANNOTATION = "gpu-platform/gcp-project"


def _instance(props: Mapping[str, Any]) -> TenantInstance | None:
    try:
        return TenantInstance.parse(plain(get(props, "spec") or {}), get(props, "metadata", "name"))
    except (yaml.YAMLError, ValueError, TypeError, AttributeError):
        return None  # vcluster-private-nodes-isolation and tenant-objects-by-design report unreadable documents


def _yaml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _environment_tenants(stack: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(stack, tenant, data) of every tenant of the environment `stack` belongs to."""
    return [
        (name, tenant, data)
        for name, entry in STACKS.items()
        if entry["environmentStack"] == stack["environmentStack"]
        for tenant, data in entry["tenants"].items()
    ]


def validate_tenant_placement(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    found = tenant_record(args.urn, get(args.props, "metadata", "name"), report_violation)
    instance = _instance(args.props)
    if found is None or instance is None:
        return
    (stack, expected), name, here = found, instance.name, stack_of(args.urn)
    settings = instance.security_settings(stack["project"])
    if instance.project != expected["project"]:
        report_violation(
            f"{Values.FIELD} privateNodes.autoNodes[0].properties.project: {show(instance.project)} is not the project of tenant {name} "
            f"of stack {here}; allowed: {expected['project']!r}",
            None,
        )
    _report_where_it_runs(args.props, instance, expected, f"tenant {name} of stack {here}", report_violation)
    if settings["isolation"] == "project":
        for other_stack, tenant, data in ((s, t, d) for s, e in STACKS.items() for t, d in e["tenants"].items()):
            if data["project"] == instance.project and (other_stack, tenant) != (here, name):
                report_violation(
                    f"{Values.FIELD} project {instance.project!r} is also the project of tenant {tenant} (stack {other_stack}); allowed: "
                    "one tenant per team project (their node identities would reach each other's VMs and disks)",
                    None,
                )
    if not stack.get("allowSharedWithProjectTenants"):
        opposite = [
            f"{t} (stack {s})"
            for s, t, d in _environment_tenants(stack)
            if (s, t) != (here, name) and d["isolation"] != settings["isolation"]
        ]
        if opposite:
            report_violation(
                f"isolation {settings['isolation']} beside tenants of the other kind in environment {stack['environment']} "
                f"({', '.join(opposite)}) is not allowed; allowed: one kind only, unless the environment stack sets "
                "platform.allowSharedWithProjectTenants: true (a shared tenant's node identity reads every VM of the environment's project)",
                None,
            )
    if stack["environment"] == PROD:
        approved = stack.get("approvedTenantSecurity", {}).get(name, {})
        for key, value in settings.items():
            if value == SAFE[key] or value in STRICTER.get(key, ()) or approved.get(key) == value:
                continue
            report_violation(
                f"tenant {name}: {key} {_yaml(value)} is not approved for it in prod; allowed: {_yaml(SAFE[key])}, or what the environment "
                f"stack approves (platform.approvedTenantSecurity.{name}.{key}: {_yaml(value)})",
                None,
            )


def _report_where_it_runs(
    props: Mapping[str, Any], instance: TenantInstance, expected: Mapping[str, Any], whose: str, report_violation: ReportViolation
) -> None:
    """The instance's own platform project namespace, host namespace and GCP objects, exactly as
    the tenant's record has them (components/tenant_vcluster.py)."""
    namespace = get(props, "metadata", "namespace")
    if namespace != expected["projectNamespace"]:
        report_violation(
            f"metadata.namespace: {show(namespace)} is not the platform project namespace of {whose}; allowed: "
            f"{expected['projectNamespace']!r} (another team's project would give that team its instance)",
            None,
        )
    cluster_ref = plain(get(props, "spec", "clusterRef"))
    wanted = {"cluster": LOCAL_CLUSTER, "namespace": expected["hostNamespace"]}
    why = {
        "cluster": ("cluster", "the platform's own cluster"),
        "namespace": ("host namespace", "the tenant's backup plan selects that one, and no two control planes share one"),
    }
    if not isinstance(cluster_ref, Mapping):
        report_violation(f"spec.clusterRef: {show(cluster_ref)}; allowed: {wanted}", None)
    else:
        for key in sorted(set(cluster_ref) | set(wanted)):
            if cluster_ref.get(key) == wanted.get(key):
                continue
            if key in wanted:
                what, reason = why[key]
                report_violation(f"spec.clusterRef.{key}: {show(cluster_ref.get(key))} is not the {what} of {whose}; allowed: {wanted[key]!r} ({reason})", None)
            else:
                report_violation(f"spec.clusterRef.{key}: is not a field gpu-platform sets; allowed: cluster, namespace", None)
    properties = instance.properties
    for key, field, what, consequence in NODE_OBJECTS:
        value, recorded = properties.get(key), expected.get(field)
        if value != recorded:
            report_violation(
                f'{Values.FIELD} privateNodes.autoNodes[0].properties["{key}"]: {show(value)} is not the {what} of {whose}; '
                f"allowed: {show(recorded) if recorded is not None else 'not set (the legacy template builds the network)'} ({consequence})",
                None,
            )


tenant_placement_by_design = ResourcePolicy(
    name="tenant-placement-by-design",
    description=(
        "Each VirtualClusterInstance is a tenant of its stack in the project the data gives it, in its own platform project "
        "namespace and host namespace, its VMs in its own network and subnet as its own node account; one tenant per team project across "
        "all stacks; no shared tenant beside tenants with projects of their own unless the environment allows it; in prod, "
        "isolation, loadBalancerServices, nodeMetadata and podSecurityStandard beyond the safe values only as the environment approves."
    ),
    validate=validate_tenant_placement,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_one_tenant_per_project(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Within one stack, whatever the data knows: two instances in one project of their own."""
    seen: dict[str, Any] = {}
    for r in args.resources:
        if r.resource_type != VIRTUAL_CLUSTER_INSTANCE:
            continue
        stack = stack_data(r.urn)
        project = get(r.props, "metadata", "annotations", GCP_PROJECT_ANNOTATION)
        if not isinstance(project, str) or (stack is not None and project == stack["project"]):
            continue
        if project in seen:
            report_violation(
                f"{described(r)}: project {project!r} already holds tenant {get(seen[project].props, 'metadata', 'name')!r} of this stack; "
                "allowed: one tenant per team project",
                r.urn,
            )
        seen.setdefault(project, r)


one_tenant_per_project = StackValidationPolicy(
    name="one-tenant-per-project",
    description="No two VirtualClusterInstances of a stack name the same GCP project of their own (gpu-platform/gcp-project).",
    validate=validate_one_tenant_per_project,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_control_plane_resources(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The control plane's requests and limits of cpu and memory are set, and none above the
    environment's maximum (platform.controlPlaneMaximum)."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    values = Values(args.props).values
    if values is None:
        return  # reported by vcluster-private-nodes-isolation
    stack = stack_data(args.urn)
    maximum = stack["controlPlaneMaximum"] if stack else None
    resources = values.control_plane_resources
    base = f"{Values.FIELD} controlPlane.statefulSet.resources"
    for kind in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            value = get(resources, kind, resource)
            amount = quantity(value)
            if amount is None:
                report_violation(
                    f"{base}.{kind}.{resource}: {show(value)}{'' if value is None else ' is not a quantity'}; allowed: a quantity "
                    f"within the environment's maximum{f' {maximum[resource]}' if maximum else ''} (tenant.controlPlane)",
                    None,
                )
            elif maximum is None:
                report_violation(f"{base}.{kind}.{resource}: {unknown_stack(args.urn)}", None)
            elif amount > (quantity(maximum[resource]) or 0):
                report_violation(
                    f"{base}.{kind}.{resource}: {show(value)} is above the environment's maximum; allowed: at most {maximum[resource]} "
                    f"(platform.controlPlaneMaximum.{resource}: every tenant's control plane shares the host cluster's system nodes)",
                    None,
                )


control_plane_resources = ResourcePolicy(
    name="vcluster-control-plane-resources",
    description=(
        "Every VirtualClusterInstance's control plane has cpu and memory requests and limits, none above the environment's "
        "maximum (platform.controlPlaneMaximum), so no tenant's control plane starves the others on the host's system nodes."
    ),
    validate=validate_control_plane_resources,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [tenant_placement_by_design, one_tenant_per_project, control_plane_resources]
