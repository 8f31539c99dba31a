"""No public address range by any split: whatever admits clients from outside (the GKE control
plane's authorized networks, firewall rules, network firewall policy rules, Services'
`loadBalancerSourceRanges` (the platform's LoadBalancer), a tenant's control plane) is judged by the
address space it admits, all its ranges together: 0.0.0.0/1 + 128.0.0.0/1 is 0.0.0.0/0, and 256
adjacent /24s are a /16. Public space in one block wider than the configured prefix (default /24;
IPv6 /64) is rejected in prod and reported as advisory elsewhere.

Public: globally reachable in the IANA special-purpose registries
(https://www.iana.org/assignments/iana-ipv4-special-registry/, .../iana-ipv6-special-registry/,
RFC 6890), so private and documentation ranges are not public. Firewall rules also admit Google's
load-balancer health-check and IAP ranges, as the program opens them.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Callable, Iterable

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, Severity

from .common import (
    DATA,
    FIREWALL,
    GKE_CLUSTER,
    INSTANCE_LABEL_FIELD,
    NON_PROD_ENVIRONMENTS,
    SERVICE,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    Values,
    as_list,
    environment_by_stack,
    environment_of_instance,
    get,
    show,
)

PREFIX_CONFIG, PREFIX_V6_CONFIG = "minPublicPrefixLength", "minPublicPrefixLengthV6"
DEFAULT_PREFIX, DEFAULT_PREFIX_V6 = 24, 64
FIREWALL_POLICY_RULES = (
    "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
    "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule",
    "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
)
FIREWALL_POLICIES_WITH_RULES = (
    "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules",
    "gcp:compute/regionNetworkFirewallPolicyWithRules:RegionNetworkFirewallPolicyWithRules",
)

_NOT_GLOBAL = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
        "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
        "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "fc00::/7", "fe80::/10",
    )
]  # fmt: skip
GOOGLE_RANGES = [ipaddress.ip_network(r) for r in DATA["network"]["googleSourceRanges"]]


def _parse(ranges: Iterable[Any]) -> tuple[list[Any], list[str]]:
    networks, unreadable = [], []
    for r in ranges:
        try:
            networks.append(ipaddress.ip_network(str(r).strip(), strict=False))
        except ValueError:
            unreadable.append(str(r))
    return networks, unreadable


def too_wide(ranges: Iterable[Any], prefix: int, prefix_v6: int, exempt: list[Any] = ()) -> list[Any]:
    """The public blocks wider than the prefix that `ranges` admit together (their union, minus
    what is not globally reachable and `exempt`)."""
    networks, _ = _parse(ranges)
    found = []
    for version, limit in ((4, prefix), (6, prefix_v6)):
        own = list(ipaddress.collapse_addresses(n for n in networks if n.version == version))
        skip = [n for n in [*_NOT_GLOBAL, *exempt] if n.version == version]
        todo = list(own)
        while todo:
            net = todo.pop()
            if any(net.subnet_of(s) for s in skip):
                continue
            if net.prefixlen >= limit:
                continue
            if not any(net.overlaps(s) for s in skip):
                found.append(net)
                continue
            todo.extend(net.subnets())
    return sorted(ipaddress.collapse_addresses(n for n in found if n.version == 4), key=str) + sorted(
        ipaddress.collapse_addresses(n for n in found if n.version == 6), key=str
    )


def _admitted(args: ResourceValidationArgs) -> list[tuple[str, list[Any], list[Any]]]:
    """(where, the ranges it admits, exempt ranges) of a resource that admits clients from outside."""
    props, typ = args.props, args.resource_type
    if typ == GKE_CLUSTER:
        blocks = as_list(get(props, "masterAuthorizedNetworksConfig", "cidrBlocks"))
        return [("masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock", [get(b, "cidrBlock") for b in blocks], [])] if blocks else []
    if typ == FIREWALL:
        if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or not as_list(props.get("allows")):
            return []
        return [("sourceRanges", as_list(props.get("sourceRanges")), GOOGLE_RANGES)]
    if typ in FIREWALL_POLICY_RULES:
        return _policy_rule("", props)
    if typ in FIREWALL_POLICIES_WITH_RULES:
        return [found for i, rule in enumerate(as_list(props.get("rules"))) for found in _policy_rule(f"rules[{i}].", rule)]
    if typ == SERVICE and get(props, "spec", "type") == "LoadBalancer":
        return [("spec.loadBalancerSourceRanges", as_list(get(props, "spec", "loadBalancerSourceRanges")) or ["0.0.0.0/0", "::/0"], [])]
    if typ == VIRTUAL_CLUSTER_INSTANCE:
        values = Values(props).values
        if values is None or values.control_plane_service_type != "LoadBalancer":
            return []
        return [(f"{Values.FIELD} controlPlane.service.spec.loadBalancerSourceRanges", values.load_balancer_source_ranges or ["0.0.0.0/0", "::/0"], [])]
    return []


def _policy_rule(path: str, rule: Any) -> list[tuple[str, list[Any], list[Any]]]:
    if str(get(rule, "direction") or "INGRESS").upper() != "INGRESS" or str(get(rule, "action") or "").lower() != "allow":
        return []
    ranges = as_list(get(rule, "match", "srcIpRanges"))
    return [(f"{path}match.srcIpRanges", ranges or ["0.0.0.0/0", "::/0"], GOOGLE_RANGES)]


def _is_prod(args: ResourceValidationArgs) -> bool:
    """The stack's environment decides (an instance's label only for a stack the pack's record does
    not know; tenant-gpu-ceiling-prod reports a label that disagrees with its stack): dev and
    staging are non-prod; prod, an unknown stack without a label and anything else count as prod."""
    label = environment_of_instance(args.props) if args.resource_type == VIRTUAL_CLUSTER_INSTANCE else None
    environment, _ = environment_by_stack(args.urn, label, INSTANCE_LABEL_FIELD, None)
    return environment not in NON_PROD_ENVIRONMENTS


def _validator(policy_name: str, prod: bool) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        admitted = _admitted(args)
        if not admitted or _is_prod(args) != prod:
            return
        config = args.get_config() or {}
        prefix, prefix_v6 = int(config.get(PREFIX_CONFIG, DEFAULT_PREFIX)), int(config.get(PREFIX_V6_CONFIG, DEFAULT_PREFIX_V6))
        for where, ranges, exempt in admitted:
            wide = too_wide(ranges, prefix, prefix_v6, exempt)
            if wide:
                widest = sorted(wide, key=lambda n: (n.prefixlen, n.version, int(n.network_address)))
                shown = ", ".join(map(str, widest[:3])) + (f" and {len(widest) - 3} more" if len(widest) > 3 else "")
                report_violation(
                    f"{where}: {show([str(r) for r in ranges])} together admit public address space in blocks wider than /{prefix} "
                    f"(IPv6 /{prefix_v6}): {shown}; allowed: public ranges of at most a /{prefix} each, however they are split "
                    f"(policy config {policy_name}.{PREFIX_CONFIG})",
                    None,
                )

    validate.__name__ = f"validate_{policy_name.replace('-', '_')}"
    return validate


def _schema() -> PolicyConfigSchema:
    return PolicyConfigSchema(
        properties={
            PREFIX_CONFIG: {"type": "integer", "minimum": 0, "maximum": 32, "default": DEFAULT_PREFIX, "description": "Widest public IPv4 block allowed, as a prefix length."},
            PREFIX_V6_CONFIG: {"type": "integer", "minimum": 0, "maximum": 128, "default": DEFAULT_PREFIX_V6, "description": "Widest public IPv6 block allowed."},
        }
    )


# Two policies for one rule, as the GPU ceilings (guardrails/cost.py): CrossGuard attaches the
# enforcement level to a policy, not to a violation.
public_ranges_prod = ResourcePolicy(
    name="public-ranges-prod",
    description=(
        "In prod, nothing admits a public address block wider than /24 (configurable), counting all its ranges together: authorized "
        "networks, firewall and firewall policy rules, loadBalancerSourceRanges (the platform's LoadBalancer, control planes)."
    ),
    validate=_validator("public-ranges-prod", prod=True),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=_schema(),
)
public_ranges_nonprod = ResourcePolicy(
    name="public-ranges-nonprod",
    description="The same as public-ranges-prod, advisory, in dev and staging.",
    validate=_validator("public-ranges-nonprod", prod=False),
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config_schema=_schema(),
)

POLICIES = [public_ranges_prod, public_ranges_nonprod]
