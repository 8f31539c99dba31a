"""Backup guardrails: every Backup for GKE plan the program makes backs up one tenant's host
namespace with its volume data and Secrets, keeps its backups at least a day, and in prod is
protected in Pulumi state with each backup undeletable for at least a day (components/tenant_backup.py,
docs/reliability.md). A plan of all namespaces, or of the platform's, would put every team's
Secrets into one backup readable by whoever may restore it.

A plan's environment is its stack's (program_data.json `stacks`, from the URN), as for the other
guardrails, never only what the plan says of itself: a prod plan without its label is still prod.
The label the program sets (`gpu-platform-environment`) must agree with it; only for a stack the
data does not know is the label read, and a plan that names none counts as prod."""

from __future__ import annotations

import re

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import BACKUP_PLAN, CLUSTER_ENVIRONMENT_LABEL, NON_PROD_ENVIRONMENTS, ResourcePolicy, as_list, environment_by_stack, get, not_allowed

# A tenant's host namespace (components/tenant_vcluster.py host_namespace): vcluster-<tenant>.
TENANT_NAMESPACE = re.compile(r"^vcluster-[a-z]([-a-z0-9]*[a-z0-9])?$")
PLATFORM_NAMESPACE = "vcluster-platform"  # the platform's own (its admin password, its identity), never a tenant's


def validate_backup_plan(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != BACKUP_PLAN:
        return
    props = args.props
    config = props.get("backupConfig")
    for key in ("allNamespaces", "selectedApplications", "selectedNamespaceLabels"):
        if get(config, key) not in (None, False):
            report_violation(not_allowed(f"backupConfig.{key}", get(config, key), "unset: a plan selects one tenant's host namespace by name"), None)
    namespaces = as_list(get(config, "selectedNamespaces", "namespaces"))
    if len(namespaces) != 1 or not all(isinstance(n, str) and TENANT_NAMESPACE.match(n) and n != PLATFORM_NAMESPACE for n in namespaces):
        report_violation(
            not_allowed("backupConfig.selectedNamespaces.namespaces", [str(n) for n in namespaces] or None, "one tenant's host namespace, vcluster-<tenant>"),
            None,
        )
    for key in ("includeVolumeData", "includeSecrets"):
        if get(config, key) is not True:
            report_violation(not_allowed(f"backupConfig.{key}", get(config, key), "true (without it the tenant's cluster cannot be restored)"), None)
    retain = get(props, "retentionPolicy", "backupRetainDays")
    if not isinstance(retain, (int, float)) or retain < 1:
        report_violation(not_allowed("retentionPolicy.backupRetainDays", retain, "at least 1"), None)
    label = get(props, "labels", CLUSTER_ENVIRONMENT_LABEL)
    environment, why = environment_by_stack(args.urn, label, f"labels[{CLUSTER_ENVIRONMENT_LABEL!r}]", report_violation)
    if environment in NON_PROD_ENVIRONMENTS:
        return
    lock = get(props, "retentionPolicy", "backupDeleteLockDays")
    if not isinstance(lock, (int, float)) or lock < 1:
        report_violation(not_allowed("retentionPolicy.backupDeleteLockDays", lock, f"at least 1 in prod ({why}; a stolen deployer credential cannot delete the backups)"), None)
    if args.opts is not None and not args.opts.protect:
        report_violation(not_allowed("resource option protect", False, f"true in prod ({why})"), None)


backups_by_design = ResourcePolicy(
    name="tenant-backups-by-design",
    description=(
        "A Backup for GKE plan backs up exactly one tenant's host namespace (vcluster-<tenant>) with its volume data and "
        "Secrets, keeps backups at least a day, and in prod (the stack's environment; its label must agree) locks each backup for at "
        "least a day and is protected."
    ),
    validate=validate_backup_plan,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [backups_by_design]
