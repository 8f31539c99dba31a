"""Tenancy guardrails, read from each VirtualClusterInstance's vcluster.yaml: private nodes on the
environment's one NodeProvider, bounded and tainted pools, a control plane without host privileges,
and node scopes that name one concrete project and region.

vcluster 0.36.1 values (loft-sh/vcluster chart/values.yaml at tag v0.36.1): `rbac.clusterRole`
({enabled: auto, extraRules, overwriteRules}) grants the virtual cluster's syncer rights on the HOST
cluster; `controlPlane.statefulSet.security.{podSecurityContext,containerSecurityContext}` and
`controlPlane.hostPathMapper` decide how privileged its control-plane pod runs on the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity
from vcluster_reader import DYNAMIC, GPU_RESOURCE, STATIC

from .common import NODE_PROVIDER, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, Values, as_list, get, instance_values, is_list, show, wildcard_problem


def validate_tenant_isolation(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Private nodes on; every dynamic auto-nodes pool bounded by limits; every GPU pool of either
    kind (one that selects GPU node types or leaves the accelerator open) tainted
    nvidia.com/gpu:NoSchedule, and every dynamic one consolidated when idle; every static pool a
    GPU pool's warm nodes, its GPUs per node fixed by its selector, so that the GPU ceiling
    (guardrails/cost.py) bounds what it keeps running: a static pool of CPU nodes would run at all
    times, bounded by nothing."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    parsed = Values(args.props)
    field = Values.FIELD
    if parsed.values is None:
        report_violation(f"{field}: {parsed.problem}", None)
        return
    values = parsed.values
    try:
        if not values.private_nodes_enabled:
            enabled = get(values.document, "privateNodes", "enabled")
            report_violation(
                f"{field} privateNodes.enabled: {show(enabled)} is not allowed; allowed: true "
                "(a tenant's pods run only on its own VMs, never on shared host nodes)",
                None,
            )
        for pool in values.pools():
            where = f"{field} privateNodes.autoNodes[provider={pool.provider!r}].{pool.kind}[name={pool.name!r}]"
            if pool.kind == DYNAMIC and not pool.limits:
                report_violation(
                    f"{where}.limits: not set; allowed: limits such as {{{GPU_RESOURCE}: '4', cpu: '32', memory: 106Gi}} "
                    "so the pool cannot grow without bound",
                    None,
                )
            if pool.is_gpu and not pool.has_gpu_taint:
                report_violation(
                    f"{where}.taints: {pool.taints or 'none'} lacks the GPU taint; allowed: a taint "
                    f"{{key: {GPU_RESOURCE}, effect: NoSchedule}} so CPU pods cannot land on (and keep alive) GPU VMs",
                    None,
                )
            if pool.kind == STATIC and not pool.gpus_per_node:
                report_violation(
                    f"{where}.nodeTypeSelector: {'selects no GPU node type' if pool.gpus_per_node == 0 else 'leaves the GPUs per node open'}; "
                    "allowed: a static pool only as a GPU pool's warm nodes (gpuPools[].warmNodes), its GPU type and count fixed "
                    "by its selector, so the tenant's GPU ceiling bounds it",
                    None,
                )
            if pool.kind == DYNAMIC and pool.is_gpu and not pool.consolidate_after:
                report_violation(
                    f"{where}.disruption.consolidateAfter: not set; allowed: a duration such as 60s or 5m, "
                    "so idle GPU VMs are deleted",
                    None,
                )
    except (AttributeError, TypeError) as e:  # a key holding the wrong kind of value
        report_violation(f"{field}: not shaped like vcluster.yaml ({e})", None)


tenant_isolation = ResourcePolicy(
    name="vcluster-private-nodes-isolation",
    description=(
        "Every VirtualClusterInstance runs on private nodes; every dynamic auto-nodes pool has limits; every GPU pool "
        "(dynamic or static) carries the nvidia.com/gpu NoSchedule taint, and every dynamic one a disruption.consolidateAfter; "
        "a static pool holds GPU nodes only (warm nodes), its GPUs per node fixed by its selector."
    ),
    validate=validate_tenant_isolation,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


SCOPE_KEYS = ("project", "region")


def validate_concrete_scope(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """`project` and `region` are set in one place, each tenant's auto-nodes entry, as one concrete
    name each. The NodeProvider and its node types set neither: in project mode a tenant's project
    is the team's, and a second value on the NodeProvider (the host's) would meet it in the
    platform's merge or as a Karpenter requirement (vcluster-docs
    vcluster/_fragments/deploy/auto-nodes-scheduling.mdx), with the VMs in the wrong project or none."""
    if args.resource_type == NODE_PROVIDER:
        scopes: list[tuple[str, Any]] = [("spec.properties", get(args.props, "spec", "properties"))]
        node_types = get(args.props, "spec", "terraform", "nodeTypes")
        for i, node_type in enumerate(node_types if is_list(node_types) else []):
            scopes.append((f"spec.terraform.nodeTypes[{i}].properties", get(node_type, "properties")))
        for path, properties in scopes:
            for key in SCOPE_KEYS:
                if isinstance(properties, Mapping) and key in properties:
                    report_violation(
                        f"{path}.{key}: {show(properties[key])} is not allowed; allowed: no {key} on the NodeProvider "
                        f"(each tenant's auto-nodes entry sets its own {key}; two values would conflict)",
                        None,
                    )
        return
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    parsed = Values(args.props)
    if parsed.values is None:
        return  # reported by vcluster-private-nodes-isolation
    allowed = "allowed: one concrete name (not empty, no '*', no comma-separated list)"
    for i, entry in enumerate(parsed.values.auto_nodes):
        path = f"{Values.FIELD} privateNodes.autoNodes[{i}].properties"
        properties = get(entry, "properties")
        properties = properties if isinstance(properties, Mapping) else {}
        for key in SCOPE_KEYS:
            problem = wildcard_problem(properties[key]) if key in properties else "is not set"
            if problem:
                report_violation(f"{path}.{key}: {problem}; {allowed}", None)


concrete_scope = ResourcePolicy(
    name="concrete-project-and-region",
    description=(
        "Every auto-nodes entry names one concrete GCP project and region; the NodeProvider and its node types name "
        "neither (a second value would conflict with the tenant's)."
    ),
    validate=validate_concrete_scope,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def validate_single_node_provider(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Exactly one auto-nodes entry: the environment's NodeProvider, whose environment template
    builds VMs only in the tenant's own network. A second entry could name another provider (say,
    one whose templates put VMs anywhere) and its pools would escape every check of the first."""
    values = instance_values(args)
    if values is None:
        return
    entries = values.auto_nodes
    first = show(get(entries[0], "provider")) if entries else "not set"
    for i, entry in enumerate(entries[1:], start=1):
        report_violation(
            f"{Values.FIELD} privateNodes.autoNodes[{i}] (provider {show(get(entry, 'provider'))}): a second auto-nodes entry "
            f"is not allowed; allowed: exactly one entry, on the environment's NodeProvider (here {first})",
            None,
        )


single_node_provider = ResourcePolicy(
    name="vcluster-single-node-provider",
    description="Every VirtualClusterInstance has exactly one privateNodes.autoNodes entry: the environment's NodeProvider.",
    validate=validate_single_node_provider,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

_PRIVILEGED_CONTAINER = ("privileged", "allowPrivilegeEscalation")


def validate_unprivileged_control_plane(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The tenant's control plane runs on the HOST cluster: it must not be privileged there, add
    Linux capabilities or mount host paths."""
    values = instance_values(args)
    if values is None:
        return
    document = values.document
    security = get(document, "controlPlane", "statefulSet", "security")
    base = f"{Values.FIELD} controlPlane.statefulSet.security"
    allowed = "false or unset (the control plane runs on the host cluster, beside every other tenant's)"
    container = get(security, "containerSecurityContext")
    for key in _PRIVILEGED_CONTAINER:
        if get(container, key) is True:
            report_violation(f"{base}.containerSecurityContext.{key}: true is not allowed; allowed: {allowed}", None)
    added = as_list(get(container, "capabilities", "add"))
    if added:
        report_violation(
            f"{base}.containerSecurityContext.capabilities.add: {added} is not allowed; allowed: none (no extra Linux capability on the host)",
            None,
        )
    if get(document, "controlPlane", "hostPathMapper", "enabled") is True:
        report_violation(
            f"{Values.FIELD} controlPlane.hostPathMapper.enabled: true is not allowed; allowed: {allowed.replace('false or unset', 'false or unset, no host paths')}",
            None,
        )


unprivileged_control_plane = ResourcePolicy(
    name="vcluster-unprivileged-control-plane",
    description=(
        "A tenant's control plane pod on the host cluster is not privileged, allows no privilege escalation, adds no "
        "capabilities and mounts no host paths (controlPlane.statefulSet.security, controlPlane.hostPathMapper)."
    ),
    validate=validate_unprivileged_control_plane,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_no_host_cluster_role(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No tenant asks for rights on the host cluster: `rbac.clusterRole` stays `auto` (or off) and
    adds or replaces no rules."""
    values = instance_values(args)
    if values is None:
        return
    cluster_role = get(values.document, "rbac", "clusterRole")
    base = f"{Values.FIELD} rbac.clusterRole"
    allowed = "none; rights on the host cluster are the platform's, never a tenant's"
    for key in ("extraRules", "overwriteRules"):
        rules = as_list(get(cluster_role, key))
        if rules:
            report_violation(f"{base}.{key}: {len(rules)} host rule(s) {rules} are not allowed; allowed: {allowed}", None)
    if get(cluster_role, "enabled") is True:
        report_violation(f"{base}.enabled: true is not allowed; allowed: auto (the chart's default) or false", None)


no_host_cluster_role = ResourcePolicy(
    name="vcluster-no-host-cluster-role",
    description="No VirtualClusterInstance adds or overwrites rules of its host ClusterRole (rbac.clusterRole) or forces it on.",
    validate=validate_no_host_cluster_role,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [tenant_isolation, single_node_provider, unprivileged_control_plane, no_host_cluster_role, concrete_scope]
