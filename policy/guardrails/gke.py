"""GKE and network guardrails: a hardened, private host cluster; no firewall rule open to the
internet; no VPC peering (a tenant's network reaches the host only through its control plane's
LoadBalancer)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import (
    CLUSTER_ENVIRONMENT_LABEL,
    DATA,
    FIREWALL,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    NETWORK_PEERINGS,
    NON_PROD_ENVIRONMENTS,
    PROJECT,
    ResourcePolicy,
    as_list,
    environment_by_stack,
    get,
    is_list,
    is_open_range,
    not_allowed,
    show,
)

GKE_METADATA = "GKE_METADATA"


def _node_config_problem(node_config: Any, path: str) -> str | None:
    mode = get(node_config, "workloadMetadataConfig", "mode")
    if mode == GKE_METADATA:
        return None
    return not_allowed(
        f"{path}.workloadMetadataConfig.mode",
        mode,
        f"{GKE_METADATA!r} (pods reach Google APIs through Workload Identity, never as the node's service account)",
    )


def validate_gke_hardening(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Workload Identity, shielded nodes, no legacy ABAC, no client certificates, GKE_METADATA on
    the cluster's node_config, its inline node pools and every NodePool."""
    props = args.props
    if args.resource_type == GKE_NODE_POOL:
        problem = _node_config_problem(props.get("nodeConfig"), "nodeConfig")
        if problem:
            report_violation(problem, None)
        return
    if args.resource_type != GKE_CLUSTER:
        return

    pool = get(props, "workloadIdentityConfig", "workloadPool")
    project = props.get("project")
    expected = f"{project}.svc.id.goog" if isinstance(project, str) and project else "<project>.svc.id.goog"
    if not isinstance(pool, str) or not pool.endswith(".svc.id.goog") or (project and pool != expected):
        report_violation(not_allowed("workloadIdentityConfig.workloadPool", pool, f"{expected!r} (Workload Identity on)"), None)
    if props.get("enableShieldedNodes") is not True:
        report_violation(not_allowed("enableShieldedNodes", props.get("enableShieldedNodes"), "true, set explicitly"), None)
    if props.get("enableLegacyAbac") is True:
        report_violation("enableLegacyAbac: true is not allowed; allowed: false or unset (Kubernetes RBAC only)", None)
    if get(props, "masterAuth", "clientCertificateConfig", "issueClientCertificate") is True:
        report_violation(
            "masterAuth.clientCertificateConfig.issueClientCertificate: true is not allowed; "
            "allowed: false or unset (no static client certificates; IAM through gke-gcloud-auth-plugin)",
            None,
        )
    if props.get("enableAutopilot") is not True:  # Autopilot enforces GKE_METADATA itself
        problem = _node_config_problem(props.get("nodeConfig"), "nodeConfig")
        if problem:
            report_violation(problem, None)
    node_pools = props.get("nodePools")
    for i, inline_pool in enumerate(node_pools if is_list(node_pools) else []):
        problem = _node_config_problem(get(inline_pool, "nodeConfig"), f"nodePools[{i}].nodeConfig")
        if problem:
            report_violation(problem, None)


gke_hardening = ResourcePolicy(
    name="gke-cluster-hardening",
    description=(
        "GKE clusters have Workload Identity, shielded nodes, no legacy ABAC and no client certificates; "
        "the cluster's node_config and every node pool use the GKE_METADATA metadata server."
    ),
    validate=validate_gke_hardening,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def _cluster_label(args: ResourceValidationArgs) -> tuple[Any, str]:
    """The cluster's environment label and where it is set: its resourceLabels, else the GCP
    provider's defaultLabels, which the provider merges into the labels of every resource, a
    resource's own label of the same key winning (Terraform provider for Google Cloud 5.0 labels
    model: https://googlecloudplatform.github.io/magic-modules/best-practices/labels-and-annotations/;
    pulumi-gcp bridges it)."""
    where = f"resourceLabels[{CLUSTER_ENVIRONMENT_LABEL!r}]"
    label = get(args.props, "resourceLabels", CLUSTER_ENVIRONMENT_LABEL)
    if label is not None:
        return label, where
    labels = args.provider.props.get("defaultLabels") if args.provider is not None else None
    if isinstance(labels, str):  # provider config objects travel JSON-encoded
        try:
            labels = json.loads(labels)
        except ValueError:
            labels = None
    default = f"the GCP provider's defaultLabels[{CLUSTER_ENVIRONMENT_LABEL!r}]"
    label = get(labels, CLUSTER_ENVIRONMENT_LABEL)
    return (label, default) if label is not None else (None, f"{where} (nor {default})")


def validate_prod_deletion_protection(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A prod cluster has deletionProtection true and is protected in Pulumi state. Prod is the
    stack's environment (the pack's record, from the URN), whatever the cluster's label says: a
    label other than that is reported; for a stack the record does not know the label decides,
    and a cluster without one counts as prod."""
    if args.resource_type != GKE_CLUSTER:
        return
    label, where = _cluster_label(args)
    environment, why = environment_by_stack(args.urn, label, where, report_violation)
    if environment in NON_PROD_ENVIRONMENTS:
        return
    protection = args.props.get("deletionProtection")
    if protection is not True:
        report_violation(not_allowed("deletionProtection", protection, f"true for a prod cluster ({why})"), None)
    if args.opts is not None and not args.opts.protect:
        report_violation(not_allowed("resource option protect", False, f"true for a prod cluster ({why})"), None)


gke_prod_deletion_protection = ResourcePolicy(
    name="gke-prod-deletion-protection",
    description=(
        "A prod GKE cluster (its stack's environment; its gpu-platform-environment label must agree) has deletionProtection on and is "
        "protected in Pulumi state."
    ),
    validate=validate_prod_deletion_protection,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


_PRIVATE_NODES_ALLOWED = "true (nodes get no public IP; they reach the internet through Cloud NAT)"


def _public_pool(network_config: Any, path: str) -> str | None:
    """A node pool (a NodePool, or one of a cluster's inline nodePools) that asks for public nodes."""
    if get(network_config, "enablePrivateNodes") is not False:
        return None
    return f"{path}.enablePrivateNodes: false is not allowed; allowed: true or unset (the pool follows the cluster's private nodes)"


def _open_ip_endpoint(props: Any) -> str | None:
    """Why the cluster's IP endpoint is public with no authorized network limiting it, or None.

    How the GCP provider hands these fields to the GKE API (hashicorp/terraform-provider-google,
    google/services/container/resource_container_cluster.go, expandControlPlaneEndpointsConfig and
    expandMasterAuthorizedNetworksConfig; pulumi-gcp 10.x bridges it): the public endpoint is on
    unless privateClusterConfig.enablePrivateEndpoint is true (absent reads as false), or
    controlPlaneEndpointsConfig.ipEndpointsConfig.enabled is false (no IP endpoint at all);
    authorized networks are enabled exactly when masterAuthorizedNetworksConfig is present (the
    schema has no `enabled`; an empty cidrBlocks then admits no outside address). An `enabled:
    false` (the GKE API's own field) is read as off too, failing closed."""
    if get(props, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enabled") is False:
        return None
    if get(props, "privateClusterConfig", "enablePrivateEndpoint") is True:
        return None
    authorized = props.get("masterAuthorizedNetworksConfig")
    if isinstance(authorized, Mapping) and get(authorized, "enabled") is not False:
        return None
    endpoint = show(get(props, "privateClusterConfig", "enablePrivateEndpoint"))
    return (
        f"masterAuthorizedNetworksConfig: {'not set' if authorized is None else 'not enabled'} while the IP endpoint is public "
        f"(privateClusterConfig.enablePrivateEndpoint: {endpoint}), so the control plane is open to 0.0.0.0/0; allowed: "
        "masterAuthorizedNetworksConfig set (cidrBlocks: the networks that need the IP endpoint, or none), or a private endpoint"
    )


def validate_private_cluster(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes without public IPs (cluster, its inline node pools and every NodePool), and a control
    plane IP endpoint that is private or limited by authorized networks none of which is the whole
    internet."""
    props = args.props
    if args.resource_type == GKE_NODE_POOL:
        problem = _public_pool(props.get("networkConfig"), "networkConfig")
        if problem:
            report_violation(problem, None)
        return
    if args.resource_type != GKE_CLUSTER:
        return
    private = get(props, "privateClusterConfig", "enablePrivateNodes")
    if private is not True and get(props, "networkConfig", "defaultEnablePrivateNodes") is not True:
        report_violation(not_allowed("privateClusterConfig.enablePrivateNodes", private, _PRIVATE_NODES_ALLOWED), None)
    node_pools = props.get("nodePools")
    for i, inline_pool in enumerate(node_pools if is_list(node_pools) else []):
        problem = _public_pool(get(inline_pool, "networkConfig"), f"nodePools[{i}].networkConfig")
        if problem:
            report_violation(problem, None)
    problem = _open_ip_endpoint(props)
    if problem:
        report_violation(problem, None)
    blocks = get(props, "masterAuthorizedNetworksConfig", "cidrBlocks")
    for i, block in enumerate(as_list(blocks)):
        cidr = get(block, "cidrBlock")
        if is_open_range(cidr):
            report_violation(
                f"masterAuthorizedNetworksConfig.cidrBlocks[{i}].cidrBlock: {show(cidr)} "
                f"({show(get(block, 'displayName'))}) opens the control plane to the internet; allowed: the "
                "networks that need the IP endpoint, e.g. an office range (kubectl and Pulumi use the IAM-authenticated DNS endpoint)",
                None,
            )
    if get(props, "masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled") is True:
        report_violation(
            "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled: true is not allowed; allowed: false or unset "
            "(every Google Cloud VM, anyone's, could reach the IP endpoint)",
            None,
        )


private_cluster = ResourcePolicy(
    name="gke-private-nodes-and-endpoint",
    description=(
        "GKE nodes have no public IPs (cluster, its inline node pools, every node pool); a public IP endpoint has master "
        "authorized networks, none of them 0.0.0.0/0 (or any /0) or all of Google Cloud's public ranges."
    ),
    validate=validate_private_cluster,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# Google's load-balancer health checkers and Identity-Aware Proxy's TCP forwarding range, as the
# program opens them (components/tenant_network.py, via program_data.json).
GOOGLE_SOURCE_RANGES = [ipaddress.ip_network(r) for r in DATA["network"]["googleSourceRanges"]]


def _public_source(cidr: Any) -> str | None:
    """Why a source range reaches beyond private addresses and Google's own ranges, or None.
    Private: Python's `is_private` (the IANA special-purpose registry), the test the program's
    config applies to tenant CIDRs (config/tenant.py), so every CIDR a tenant may have passes."""
    try:
        network = ipaddress.ip_network(str(cidr).strip(), strict=False)
    except ValueError:
        return "is not a CIDR"
    if network.prefixlen == 0 or not network.is_private and not any(
        network.version == g.version and network.subnet_of(g) for g in GOOGLE_SOURCE_RANGES  # type: ignore[arg-type]
    ):
        return "is a public range"
    return None


def validate_firewall_not_open(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """An ingress rule that allows traffic names its sources, each a private range (the tenant's
    own subnet) or one of Google's health-check and IAP ranges. GCP reads an ingress rule without
    any source as 0.0.0.0/0; 0.0.0.0/1 plus 128.0.0.0/1 is the internet too."""
    if args.resource_type != FIREWALL:
        return
    props = args.props
    if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or not as_list(props.get("allows")):
        return  # egress rules and deny rules open nothing to the internet
    allowed = f"private ranges such as the tenant's own subnet, and Google's health-check and IAP ranges ({', '.join(map(str, GOOGLE_SOURCE_RANGES))})"
    ranges = as_list(props.get("sourceRanges"))
    for i, cidr in enumerate(ranges):
        problem = "opens" if is_open_range(cidr) else _public_source(cidr)
        if problem:
            why = "" if problem == "opens" else f"{problem} and "
            report_violation(f"sourceRanges[{i}]: {show(cidr)} {why}opens the rule to the internet; allowed: {allowed}", None)
    if not ranges and not as_list(props.get("sourceTags")) and not as_list(props.get("sourceServiceAccounts")):
        report_violation(
            f"sourceRanges: not set, so the rule admits 0.0.0.0/0; allowed: {allowed}",
            None,
        )


firewall_not_open = ResourcePolicy(
    name="firewall-no-internet-ingress",
    description=(
        "Every firewall rule that allows ingress names its sources, each a private range (the tenant's subnet) or one of "
        "Google's health-check and IAP ranges: never 0.0.0.0/0, 0.0.0.0/1 + 128.0.0.0/1 or any other public range, nor "
        "no source at all (which GCP reads as 0.0.0.0/0)."
    ),
    validate=validate_firewall_not_open,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_no_network_peering(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The program peers nothing: each tenant's VPC is separate from the host's and from every other
    tenant's; its nodes reach their control plane through its LoadBalancer, over NAT."""
    if args.resource_type not in NETWORK_PEERINGS:
        return
    network, peer = args.props.get("network"), args.props.get("peerNetwork")
    report_violation(
        f"network: a peering of {show(network)} with {show(peer)} is not allowed; allowed: none (a tenant's VPC reaches "
        "the host cluster only through its control plane's LoadBalancer, so a peering would join a tenant to the host or to another tenant)",
        None,
    )


no_network_peering = ResourcePolicy(
    name="no-vpc-peering",
    description="No VPC network peering: tenants' networks are joined neither to the host cluster's network nor to each other.",
    validate=validate_no_network_peering,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)



def validate_project_without_default_network(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A project Pulumi creates (a team's, in project isolation) gets no `default` network: GCP
    would create it with rules that admit SSH and RDP from 0.0.0.0/0, outside Pulumi's state and
    outside every other check here."""
    if args.resource_type != PROJECT:
        return
    auto = args.props.get("autoCreateNetwork")
    if auto is not False:
        report_violation(
            not_allowed(
                "autoCreateNetwork",
                auto,
                "false (else GCP creates the `default` network, whose default-allow-ssh and default-allow-rdp rules admit 0.0.0.0/0)",
            ),
            None,
        )


project_without_default_network = ResourcePolicy(
    name="project-without-default-network",
    description="A GCP project created by Pulumi sets autoCreateNetwork: false (no `default` network with its internet-open rules).",
    validate=validate_project_without_default_network,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [gke_hardening, gke_prod_deletion_protection, private_cluster, firewall_not_open, no_network_peering, project_without_default_network]
