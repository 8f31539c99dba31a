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
from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity, StackValidationArgs, StackValidationPolicy
from pulumi_policy.proxy import UnknownValueError

from . import value_paths
from .common import (
    ADDRESS,
    DATA,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    Values,
    as_list,
    described,
    get,
    instance_values,
    show,
    show_short,
    stack_data,
    stack_of,
)

ALLOWED_PATHS: list[str] = DATA["vclusterValues"]["allowedPaths"]
_PATTERNS = [value_paths.parse(p) for p in ALLOWED_PATHS]
PATHS_FILE = "components/vcluster_value_paths.yaml"


def validate_values_by_design(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    values = instance_values(args)
    if values is None:
        return
    for path, value in value_paths.leaves(values.document):
        if value_paths.allowed(path, value, _PATTERNS):
            continue
        report_violation(
            f"{Values.FIELD} {value_paths.show(path)}: {show_short(value)} is not a key gpu-platform writes (it may act on the host cluster); "
            f"allowed: the paths of {PATHS_FILE}, here {value_paths.near(path, ALLOWED_PATHS)}",
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


def _external_address(cidr: Any) -> bool:
    """One IPv4 address (<address>/32) that can be a static external address, as a tenant's NAT
    addresses are: not private (RFC 1918), loopback, link-local (the metadata server's),
    multicast, reserved or unspecified."""
    try:
        network = ipaddress.IPv4Network(str(cidr), strict=True)
    except ValueError:
        return False
    address = network.network_address
    special = address.is_loopback or address.is_link_local or address.is_multicast or address.is_reserved or address.is_unspecified
    return network.prefixlen == 32 and not special and not _internal_range(cidr)


def _internal_range(cidr: Any) -> bool:
    """A private range (RFC 1918): the host cluster's own pods and nodes, which reach the
    LoadBalancer's address from inside its VPC. No client elsewhere has such a source address at an
    external load balancer (tenants' nodes arrive from their NAT addresses)."""
    try:
        network = ipaddress.ip_network(str(cidr), strict=True)
    except ValueError:
        return False
    return network.version == 4 and any(network.subnet_of(ipaddress.ip_network(r)) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def _tenant_record(urn: str, props: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """(the stack's record, the instance's tenant's record); None where the data knows neither
    (tenant-placement-by-design rejects such an instance)."""
    stack = stack_data(urn)
    tenant = stack["tenants"].get(get(props, "metadata", "name")) if stack else None
    return stack, tenant


def validate_control_plane_isolation(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The control plane's LoadBalancer admits the host cluster's own pod and node ranges (the
    stack's record) and one single external address per NAT address of the tenant, nothing else,
    and the chart's NetworkPolicies are on: they limit the control plane to its API port, its
    peers and the platform (loft-sh/vcluster chart/templates/networkpolicy.yaml, v0.36.1; the API
    port stays open to every host pod, see docs/security.md "Joins and the host cluster").

    Which addresses those are is Google's pick, known once the Address resources exist: during
    preview the whole vcluster.yaml is unknown (this check waits for `pulumi up`), at `pulumi up`
    this runs before the instance is written, when only its own props are at hand, and
    vcluster-control-plane-nat-addresses compares the single addresses with the tenant's Address
    resources when the stack's resources exist."""
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
    stack, tenant = _tenant_record(args.urn, args.props)
    host = list(stack["hostClientRanges"]) if stack else None
    hosts = f"the host cluster's pod and node ranges ({', '.join(host) or 'none'})" if host is not None else "a private range (the host cluster's pods and nodes)"
    singles = 0
    for i, cidr in enumerate(as_list(ranges)):
        if (cidr in host) if host is not None else _internal_range(cidr):
            continue
        if _external_address(cidr):
            singles += 1
            continue
        report_violation(
            f"{Values.FIELD} {spec}.loadBalancerSourceRanges[{i}]: {show(cidr)} is not allowed; allowed: {hosts} and the tenant's "
            "NAT addresses, each one external address <address>/32",
            None,
        )
    if as_list(ranges) and tenant is not None and singles != len(tenant["natAddresses"]):
        names = tenant["natAddresses"]
        report_violation(
            f"{Values.FIELD} {spec}.loadBalancerSourceRanges: {singles} single address(es) for the {len(names)} NAT address(es) of tenant "
            f"{get(args.props, 'metadata', 'name')} of stack {stack_of(args.urn)} ({', '.join(names) or 'none'}); allowed: one "
            "<address>/32 per NAT address (vcluster-control-plane-nat-addresses compares them with the addresses once they exist)",
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
        "host cluster's own pod and node ranges (the stack's record) and one single external /32 address per NAT address "
        "of the tenant, nothing else, and policies.networkPolicy.enabled is true."
    ),
    validate=validate_control_plane_isolation,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_nat_addresses(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """The single addresses each control plane admits are exactly the addresses of its tenant's NAT
    Address resources in the stack (by project, region and the names the tenant's record gives).

    The engine calls stack policies with each resource's final outputs (pulumi/pulumi tag v3.187.0
    pkg/resource/deploy/step_generator.go, AnalyzeResources: "AnalyzeStack is called on the final
    outputs of each resource"), so an Address's `address` is there at `pulumi up` and unknown in the
    preview that creates it: then this waits for the update (tenant by tenant, the others checked)."""
    addresses: dict[tuple[Any, Any, Any], Any] = {}
    for r in args.resources:
        if r.resource_type == ADDRESS:
            addresses.setdefault((get(r.props, "project"), get(r.props, "region"), get(r.props, "name")), r)
    deferred: UnknownValueError | None = None
    for r in args.resources:
        if r.resource_type != VIRTUAL_CLUSTER_INSTANCE:
            continue
        stack, tenant = _tenant_record(r.urn, r.props)
        if stack is None or tenant is None:
            continue  # tenant-placement-by-design rejects it
        try:
            _compare_nat_addresses(r, stack, tenant, addresses, report_violation)
        except UnknownValueError as e:
            deferred = deferred or e
    if deferred is not None:
        raise deferred


def _compare_nat_addresses(instance: Any, stack: Mapping[str, Any], tenant: Mapping[str, Any], addresses: Mapping, report_violation: ReportViolation) -> None:
    values = Values(instance.props).values
    if values is None:
        return  # vcluster-private-nodes-isolation reports it
    field = f"{Values.FIELD} controlPlane.service.spec.loadBalancerSourceRanges"
    ranges = [str(c) for c in as_list(get(values.document, "controlPlane", "service", "spec", "loadBalancerSourceRanges"))]
    name, subject = get(instance.props, "metadata", "name"), described(instance)
    nat: dict[str, str] = {}
    for address_name in tenant["natAddresses"]:
        resource = addresses.get((tenant["project"], tenant["region"], address_name))
        if resource is None:
            report_violation(
                f"{subject}: {field}: NAT address {address_name!r} of tenant {name} (project {tenant['project']}, region {tenant['region']}) "
                "is not in this stack, so the addresses it admits cannot be its NAT addresses; allowed: the tenant's NAT Address resources "
                "as the program creates them",
                instance.urn,
            )
            continue
        address = get(resource.props, "address")
        if not _external_address(f"{address}/32"):
            report_violation(
                f"{subject}: {field}: the address of {described(resource)} is {show(address)}, not an external IPv4 address; allowed: "
                "the address Google reserved for it",
                instance.urn,
            )
            continue
        nat[f"{address}/32"] = address_name
    host = set(stack["hostClientRanges"])
    listing = ", ".join(f"{n} {c}" for c, n in nat.items()) or "none"
    for i, cidr in enumerate(ranges):
        if cidr not in host and cidr not in nat:
            report_violation(
                f"{subject}: {field}[{i}]: {show(cidr)} is not a NAT address of tenant {name} of stack {stack_of(instance.urn)} ({listing}); "
                "allowed: exactly those, each <address>/32, and the host cluster's pod and node ranges",
                instance.urn,
            )
    for cidr, address_name in nat.items():
        if cidr not in ranges:
            report_violation(
                f"{subject}: {field}: NAT address {address_name} ({cidr}) of tenant {name} is not admitted; allowed: exactly the "
                "tenant's NAT addresses, each <address>/32",
                instance.urn,
            )


nat_addresses = StackValidationPolicy(
    name="vcluster-control-plane-nat-addresses",
    description=(
        "In a stack, the single addresses each VirtualClusterInstance's control plane admits (loadBalancerSourceRanges) are exactly "
        "the addresses of its tenant's NAT Address resources, once they exist (at pulumi up; their addresses are unknown in the "
        "preview that creates them)."
    ),
    validate=validate_nat_addresses,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [values_by_design, control_plane_isolation, nat_addresses]
