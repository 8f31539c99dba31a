"""The vCluster Platform objects of a tenant (management.loft.sh/v1, platform 4.11.2) as the program
builds them (components/platform_project.py, components/loft_api.py): a team's `Project` gives its
members the viewer role only and its node claims the environment's NodeProvider only; the team's
VirtualClusterInstance lets them see and connect to it, nothing more, and takes its whole
configuration inline (no `templateRef` or `parameters` that would bring values the pack never sees).
Who those members and users are is each tenant's record: the pack allows exactly the members,
clusters, node types and access rules the program writes for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import (
    DATA,
    NODE_PROVIDER,
    PLATFORM_PROJECT,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    Values,
    as_list,
    described,
    get,
    is_list,
    plain,
    show,
    stack_of,
    tenant_record,
)

OBJECTS = DATA["platformObjects"]
MEMBER_ROLE: str = OBJECTS["memberRole"]
MEMBER_KINDS: list[str] = OBJECTS["memberKinds"]
INSTANCE_VERBS: list[str] = OBJECTS["instanceVerbs"]
PROJECT_NAMESPACE_PREFIX: str = OBJECTS["projectNamespacePrefix"]
_ALL_NODE_TYPES = re.compile(r"^(?P<provider>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.\*$")


def _unknown_keys(value: Any, allowed: list[str]) -> list[str]:
    return sorted(k for k in value if k not in allowed) if isinstance(value, Mapping) else []


def _report_keys(where: str, value: Any, allowed: list[str], report_violation: ReportViolation) -> None:
    for key in _unknown_keys(value, allowed):
        report_violation(f"{where}.{key}: is not a field gpu-platform sets; allowed: {', '.join(allowed)}", None)


def _project(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    spec = get(props, "spec")
    _report_keys("spec", spec, OBJECTS["projectSpecFields"], report_violation)
    for i, member in enumerate(as_list(get(spec, "members"))):
        role, kind = get(member, "clusterRole"), get(member, "kind")
        if role != MEMBER_ROLE:
            report_violation(
                f"spec.members[{i}].clusterRole: {show(role)} is not allowed; allowed: {MEMBER_ROLE} (members see the project; "
                "Pulumi alone creates and changes its virtual cluster)",
                None,
            )
        if kind not in MEMBER_KINDS:
            report_violation(f"spec.members[{i}].kind: {show(kind)} is not allowed; allowed: {', '.join(MEMBER_KINDS)}", None)
    node_types = get(spec, "allowedNodeTypes")
    names = [get(t, "name") for t in as_list(node_types)]
    if not (is_list(node_types) and len(names) == 1 and isinstance(names[0], str) and _ALL_NODE_TYPES.match(names[0])):
        report_violation(
            f"spec.allowedNodeTypes: {show(names) if node_types is not None else 'not set (every node type of every provider)'} "
            "is not allowed; allowed: exactly [{name: <the environment's NodeProvider>.*}]",
            None,
        )


def _instance(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    spec = get(props, "spec")
    _report_keys("spec", spec, OBJECTS["instanceSpecFields"], report_violation)
    _report_keys("spec.template", get(spec, "template"), OBJECTS["instanceTemplateFields"], report_violation)
    for i, rule in enumerate(as_list(get(spec, "access"))):
        extra = [v for v in as_list(get(rule, "verbs")) if v not in INSTANCE_VERBS]
        if extra or not as_list(get(rule, "verbs")):
            report_violation(
                f"spec.access[{i}].verbs: {show(as_list(get(rule, 'verbs')))} is not allowed; allowed: a subset of "
                f"{INSTANCE_VERBS} (see and connect; the instance's values are Pulumi's)",
                None,
            )
        if as_list(get(rule, "subresources")):
            report_violation(f"spec.access[{i}].subresources: {show(as_list(get(rule, 'subresources')))} is not allowed; allowed: none", None)


def validate_platform_objects(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == PLATFORM_PROJECT:
        _project(args.props, report_violation)
    elif args.resource_type == VIRTUAL_CLUSTER_INSTANCE:
        _instance(args.props, report_violation)


platform_objects_by_design = ResourcePolicy(
    name="platform-objects-by-design",
    description=(
        "A management.loft.sh/v1 Project gives its members only the project viewer role and allows exactly the node types "
        "<provider>.* of one NodeProvider; a VirtualClusterInstance grants only the verbs get and use on itself and sets "
        "only the fields the program sets (no templateRef or parameters)."
    ),
    validate=validate_platform_objects,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


# Why each recorded field is exactly the program's (components/platform_project.py): the tenant's
# access config (`access.users`, `access.teams`) decides who reaches it, nothing else does.
_ACCESS_WHY = {
    "members": "the tenant's access.users and access.teams, as project viewers",
    "allowedClusters": "the platform's own cluster only",
    "allowedNodeTypes": "the environment's NodeProvider only",
    "access": "get and use of the instance for the tenant's access.users and access.teams",
    "extraAccessRules": "gpu-platform grants no access beyond spec.access and spec.template.access",
    "template.access": "cluster-admin inside the virtual cluster for the tenant's access.users and access.teams only",
}
_ACCESS_OF = {PLATFORM_PROJECT: "project", VIRTUAL_CLUSTER_INSTANCE: "instance"}


def validate_platform_access(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Who reaches a tenant: its Project's members, clusters and node types, its instance's access
    rules (on the object and inside the virtual cluster), exactly as the program writes them for
    that tenant (program_data.json `stacks.<stack>.tenants.<tenant>.platformAccess`)."""
    kind = _ACCESS_OF.get(args.resource_type)
    if kind is None:
        return
    name = get(args.props, "metadata", "name")
    found = tenant_record(args.urn, name, report_violation)
    if found is None:
        return
    spec = get(args.props, "spec")
    for field, recorded in found[1]["platformAccess"][kind].items():
        value = plain(get(spec, *field.split(".")))
        if value == recorded:
            continue
        allowed = "not set" if recorded is None else f"exactly {show(recorded)}"
        report_violation(
            f"spec.{field}: {show(value)} is not what gpu-platform writes for tenant {name} of stack {stack_of(args.urn)}; "
            f"allowed: {allowed} ({_ACCESS_WHY.get(field, 'the tenant record of make policy-data')})",
            None,
        )


platform_access_by_design = ResourcePolicy(
    name="platform-access-by-design",
    description=(
        "A tenant's management.loft.sh/v1 Project (members, allowedClusters, allowedNodeTypes) and VirtualClusterInstance "
        "(access, extraAccessRules, template.access) say exactly what the program writes for that tenant: no other user or "
        "team, no '*', no other cluster, no extra access rule."
    ),
    validate=validate_platform_access,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_one_node_provider(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Within a stack, each team's Project, its VirtualClusterInstance and (environment stacks) the
    environment's NodeProvider name the same provider."""
    environment_providers = {get(r.props, "metadata", "name") for r in args.resources if r.resource_type == NODE_PROVIDER}
    projects = [r for r in args.resources if r.resource_type == PLATFORM_PROJECT]
    instances = [r for r in args.resources if r.resource_type == VIRTUAL_CLUSTER_INSTANCE]
    for project in projects:
        name = get(project.props, "metadata", "name")
        found = [_ALL_NODE_TYPES.match(str(get(t, "name"))) for t in as_list(get(project.props, "spec", "allowedNodeTypes"))]
        allowed = {m.group("provider") for m in found if m}
        if not allowed:
            continue  # reported by platform-objects-by-design
        if environment_providers and not allowed <= environment_providers:
            report_violation(
                f"{described(project)}: spec.allowedNodeTypes: {sorted(allowed)} is not allowed; allowed: the environment's NodeProvider "
                f"{sorted(environment_providers)}",
                project.urn,
            )
        for instance in instances:
            if get(instance.props, "metadata", "namespace") != f"{PROJECT_NAMESPACE_PREFIX}{name}":
                continue
            values = Values(instance.props).values
            providers = {str(entry.get("provider")) for entry in values.auto_nodes} if values else set()
            if providers - allowed:
                report_violation(
                    f"{described(instance)}: {Values.FIELD} privateNodes.autoNodes[].provider: {sorted(providers - allowed)} is not allowed; "
                    f"allowed: the provider its project {name!r} allows ({sorted(allowed)})",
                    instance.urn,
                )


one_node_provider = StackValidationPolicy(
    name="platform-objects-one-node-provider",
    description=(
        "In a stack, each team's Project allows the node types of the provider its VirtualClusterInstance's auto nodes use, "
        "and in an environment stack that is the environment's NodeProvider."
    ),
    validate=validate_one_node_provider,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [platform_objects_by_design, platform_access_by_design, one_node_provider]
