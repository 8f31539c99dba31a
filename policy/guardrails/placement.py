"""Where a GCP resource is: its own `project`, `location`, `region` and `zone`, which override its
provider's (a bridged Terraform resource takes the provider's project and region only where it names
none). The GCP provider of a stack is held to the stack's project and region (stack-resources-by-
record), but any resource could name another project, and then Pulumi creates it there with the
deployer's credentials: a firewall rule, a service account, a network, an API enabled, an alert
policy or a dashboard of someone else's project (or one of the attacker's, billed to nobody who
looks). So every GCP resource of a program stack names, in each of these fields, only a value the
stack's configuration gives some resource of it: the record's `gcpPlacement` (policy/stacks/<stack>.json,
written by `make policy-data` from the program's run of the stack, tools/policy_records.py).

A value unknown during preview (a project the same update creates) is judged at `pulumi up`, on the
resource's inputs, before it is created.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import PROGRAM_PROJECT, ResourcePolicy, project_of, show, stack_data, stack_of, unknown_stack

FIELDS = ("project", "location", "region", "zone")
SOURCE = "policy/stacks/<stack>.json gcpPlacement (make policy-data)"


def is_gcp(resource_type: str) -> bool:
    """A resource of the GCP provider (its own provider resource is held by stack-resources-by-record)."""
    return resource_type.startswith("gcp:")


def validate_placement(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not is_gcp(args.resource_type) or project_of(args.urn) != PROGRAM_PROJECT:
        return
    present = [field for field in FIELDS if field in args.props]
    if not present:
        return
    stack = stack_data(args.urn)
    if stack is None:
        report_violation(unknown_stack(args.urn), None)
        return
    allowed: dict[str, Any] = stack.get("gcpPlacement") or {}
    for field in present:
        value = args.props[field]  # unknown during preview: judged at `pulumi up`
        if value is None:
            continue
        values = allowed.get(field) or []
        if value not in values:
            kind = {"project": "a project", "location": "a location", "region": "a region", "zone": "a zone"}[field]
            report_violation(
                f"{field}: {show(value)} is not {kind} stack {stack_of(args.urn)}'s configuration places its resources in; allowed: "
                f"{', '.join(repr(v) for v in values) or 'none'} ({SOURCE})",
                None,
            )


gcp_placement_by_record = ResourcePolicy(
    name="gcp-placement-by-record",
    description=(
        "Every GCP resource of a stack names in project, location, region and zone only what the stack's configuration places its "
        "resources in (policy/stacks/<stack>.json gcpPlacement): no firewall, service account, network, API, alert policy or "
        "dashboard in another project or region."
    ),
    validate=validate_placement,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [gcp_placement_by_record]
