"""A tenant's vcluster.yaml holds only what the program writes, and what isolates the tenant on the
host is there: an allow-list of key paths (program_data.json `vclusterValues.allowedPaths`, from
components/vcluster_value_paths.yaml), the control plane reachable only from the tenant's NAT
addresses, and the chart's NetworkPolicies on.

Why an allow-list (loft-sh/vcluster, tag v0.36.1): many keys of the chart act on the HOST cluster,
beside every other tenant. `sync.fromHost.secrets.enabled` adds list/watch on Secrets of the mapped
host namespaces, or of all of them for a `*` mapping, to the tenant's host ClusterRole
(chart/templates/clusterrole.yaml, `vcluster.rbac.rulesForFromHostSyncerForGivenCoreResource` in
_rbac.tpl); `sync.fromHost.customResources` reads CRDs and their objects there;
`experimental.deploy.host.manifests` is applied to the host as is (chart/templates/manifests.yaml);
`controlPlane.statefulSet.persistence.addVolumes` can mount a hostPath. A deny list would miss the
next such key.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from . import value_paths
from .common import DATA, ResourcePolicy, Values, as_list, get, instance_values, show

ALLOWED_PATHS: list[str] = DATA["vclusterValues"]["allowedPaths"]
_PATTERNS = [value_paths.parse(p) for p in ALLOWED_PATHS]
PATHS_FILE = "components/vcluster_value_paths.yaml"


def _allowed_near(path: tuple) -> str:
    """The allowed paths under the same top-level key as `path`, or the allowed top-level keys."""
    top = path[0] if path else None
    near = [p for p, tokens in zip(ALLOWED_PATHS, _PATTERNS) if tokens[:1] == (top,)]
    if near:
        return ", ".join(near)
    return "keys under " + ", ".join(sorted({str(t[0][1]) for t in _PATTERNS}))


def validate_values_by_design(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    values = instance_values(args)
    if values is None:
        return
    for path, value in value_paths.leaves(values.document):
        if value_paths.allowed(path, value, _PATTERNS):
            continue
        shown = show(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:57] + "...")
        report_violation(
            f"{Values.FIELD} {value_paths.show(path)}: {shown} is not a key gpu-platform writes (it may act on the host cluster); "
            f"allowed: the paths of {PATHS_FILE}, here {_allowed_near(path)}",
            None,
        )


values_by_design = ResourcePolicy(
    name="vcluster-values-by-design",
    description=(
        "A VirtualClusterInstance's vcluster.yaml uses only the key paths the program renders "
        f"({PATHS_FILE}): no sync.fromHost.*, experimental.deploy.host.*, rbac.*, controlPlane.statefulSet.security or "
        "persistence, static pools, or any other key that acts on the host cluster."
    ),
    validate=validate_values_by_design,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _single_address(cidr: Any) -> bool:
    try:
        network = ipaddress.ip_network(str(cidr), strict=True)
    except ValueError:
        return False
    return network.num_addresses == 1 and not network.is_unspecified


def _internal_range(cidr: Any) -> bool:
    """A private range (RFC 1918): the host cluster's own pods and nodes, which reach the
    LoadBalancer's address from inside its VPC. No client elsewhere has such a source address at an
    external load balancer (tenants' nodes arrive from their NAT addresses)."""
    try:
        network = ipaddress.ip_network(str(cidr), strict=True)
    except ValueError:
        return False
    return network.version == 4 and any(network.subnet_of(ipaddress.ip_network(r)) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def validate_control_plane_isolation(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The control plane's LoadBalancer admits single addresses only (the tenant's NAT addresses),
    and the chart's NetworkPolicies are on: they limit the control plane to its API port, its
    peers and the platform (loft-sh/vcluster chart/templates/networkpolicy.yaml, v0.36.1; the API
    port stays open to every host pod, see docs/security.md "Joins and the host cluster")."""
    values = instance_values(args)
    if values is None:
        return
    document = values.document
    spec = "controlPlane.service.spec"
    service_type = get(document, "controlPlane", "service", "spec", "type")
    if service_type != "LoadBalancer":
        report_violation(
            f"{Values.FIELD} {spec}.type: {show(service_type)} is not allowed; allowed: LoadBalancer (only it honours "
            "loadBalancerSourceRanges; a NodePort would be open on every host node)",
            None,
        )
    ranges = get(document, "controlPlane", "service", "spec", "loadBalancerSourceRanges")
    if not as_list(ranges):
        report_violation(
            f"{Values.FIELD} {spec}.loadBalancerSourceRanges: {show(ranges) if ranges is not None else 'not set'}, so the control "
            "plane accepts joins from anywhere; allowed: the tenant's NAT addresses, each as <address>/32",
            None,
        )
    for i, cidr in enumerate(as_list(ranges)):
        if not (_single_address(cidr) or _internal_range(cidr)):
            report_violation(
                f"{Values.FIELD} {spec}.loadBalancerSourceRanges[{i}]: {show(cidr)} is not allowed; allowed: one address "
                "(<address>/32), one of the tenant's NAT addresses, or a private range (the host cluster's pods and nodes)",
                None,
            )
    if get(document, "policies", "networkPolicy", "enabled") is not True:
        enabled = get(document, "policies", "networkPolicy", "enabled")
        report_violation(
            f"{Values.FIELD} policies.networkPolicy.enabled: {show(enabled)}{'' if enabled is None else ' is not allowed'}; "
            "allowed: true (the chart's NetworkPolicies admit only the API port, the tenant's own pods and the platform)",
            None,
        )


control_plane_isolation = ResourcePolicy(
    name="vcluster-control-plane-isolation",
    description=(
        "A VirtualClusterInstance's control plane is a LoadBalancer Service whose loadBalancerSourceRanges are the "
        "tenant's NAT addresses (non-empty, single /32 addresses) and the host cluster's own private ranges, and "
        "policies.networkPolicy.enabled is true."
    ),
    validate=validate_control_plane_isolation,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [values_by_design, control_plane_isolation]
