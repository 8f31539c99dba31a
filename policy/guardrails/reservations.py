"""Reservation slices: a tenant's auto-nodes pools select only its own slices of the environment's
reservations.

An environment's reservations are sliced per tenant: each slice is one node type of the NodeProvider
(`rsv-<reservation>-<tenant>`, capped at the slice by maxCapacity), and Compute Engine would let any
project a reservation is shared with consume any of it. So the pools of a tenant's vcluster.yaml may
name, among the node types' capacity options (the property program_data.json
`tenantInstance.capacityOptionProperty`), only that tenant's own reserved types, and every GPU pool must
select on that property at all: a GPU pool without it would match every reserved node type of the
environment. The node template refuses another tenant's slice too (templates/node/main.tf,
gpu-platform/reservation-tenant); this stops it before deploy. The reserved types of each stack's
environment are program_data.json `stacks.<stack>.reservedNodeTypes` (reserved type → tenant).
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import DATA, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, Values, show, stack_data

_PROPERTIES = DATA["tenantInstance"]
CAPACITY_OPTION: str = _PROPERTIES["capacityOptionProperty"]
TENANT: str = _PROPERTIES["tenantProperty"]
RESERVED_PREFIX: str = _PROPERTIES["reservedPrefix"]


def validate_reservation_slices(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    parsed = Values(args.props)
    if parsed.values is None:
        return  # vcluster-private-nodes-isolation reports an unreadable document
    stack = stack_data(args.urn)
    reserved: dict[str, str] = dict((stack or {}).get("reservedNodeTypes") or {})
    field = Values.FIELD
    try:
        for pool in parsed.values.pools():
            where = f"{field} privateNodes.autoNodes[provider={pool.provider!r}].{pool.kind}[name={pool.name!r}]"
            tenant = pool.properties.get(TENANT)
            options = [r for r in pool.selector if r.get("property") == CAPACITY_OPTION]
            if pool.is_gpu and not options:
                report_violation(
                    f"{where}.nodeTypeSelector: no requirement on {CAPACITY_OPTION}; allowed: {CAPACITY_OPTION} In [the pool's "
                    "capacity options], so the pool cannot match another tenant's slice of a reservation",
                    None,
                )
            for requirement in options:
                if requirement.get("operator", "In") not in ("In", ""):
                    report_violation(
                        f"{where}.nodeTypeSelector: {CAPACITY_OPTION} {show(requirement.get('operator'))} is not allowed; allowed: In "
                        "(any other operator can match another tenant's slice of a reservation)",
                        None,
                    )
            for value in pool.selected(CAPACITY_OPTION):
                owner = reserved.get(value)
                if owner is not None and owner != tenant:
                    report_violation(
                        f"{where}.nodeTypeSelector: {CAPACITY_OPTION} {value} is tenant {owner}'s slice of a reservation, not tenant "
                        f"{show(tenant)}'s; allowed: this tenant's own slices ({', '.join(sorted(n for n, t in reserved.items() if t == tenant)) or 'none'})",
                        None,
                    )
                elif owner is None and value.startswith(RESERVED_PREFIX):
                    report_violation(
                        f"{where}.nodeTypeSelector: {CAPACITY_OPTION} {value} is no reserved node type of this environment; allowed: "
                        f"{', '.join(sorted(n for n, t in reserved.items() if t == tenant)) or 'none'}",
                        None,
                    )
    except (AttributeError, TypeError) as e:  # a key holding the wrong kind of value
        report_violation(f"{field}: not shaped like vcluster.yaml ({e})", None)


reservation_slices = ResourcePolicy(
    name="tenant-reservation-slices",
    description=(
        "A tenant's GPU pools select on gpu-platform/capacity-option with In, and name only that tenant's own slices of the "
        "environment's reservations (never another team's reserved node types)."
    ),
    validate=validate_reservation_slices,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = (reservation_slices,)
