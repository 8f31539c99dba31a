"""The vCluster Platform objects of a tenant (management.loft.sh/v1, platform 4.11.2) as the program
builds them (components/platform_project.py, components/loft_api.py): a team's `Project` gives its
members the viewer role only and its node claims the environment's NodeProvider only; the team's
VirtualClusterInstance lets them see and connect to it, nothing more, and takes its whole
configuration inline (no `templateRef` or `parameters` that would bring values the pack never sees).
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

from .common import DATA, NODE_PROVIDER, PLATFORM_PROJECT, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, Values, as_list, described, get, is_list, show

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

POLICIES = [platform_objects_by_design, one_node_provider]
