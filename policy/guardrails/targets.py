"""What the program's non-IAM resources that share data are bound to, against the program's data of
each committed stack (program_data.json `stacks`), as iam-grants-by-design does for grants: a
resource of an allowed type that names another project, cluster or namespace shares data with it.

- BigQuery (showback): the dataset and its cost view live in the stack's own project, and the
  dataset carries no `accesses` of its own, so who reads billing data is the project's IAM (the
  program sets none; an entry would grant a dataset role to anyone it names, allAuthenticatedUsers
  included: pulumi-gcp 10.2.0 bigquery/dataset.py `accesses`, `special_group`).
- Metrics scopes: a MonitoredProject lets the scoping project's readers read the monitored
  project's metrics (Cloud Monitoring "metrics scopes"), so it joins one of the stack's own team
  projects to the environment's project and nothing else.
- Backup for GKE: a backup plan holds a namespace's Secrets and volume data, a restore plan
  writes a backup into a cluster; both name the stack's host cluster, in its project, and one
  host namespace of one of the stack's own tenants (vcluster-<tenant>), and a restore plan
  restores no cluster-scoped object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import (
    BACKUP_PLAN,
    DATASET,
    MONITORED_PROJECT,
    RESTORE_PLAN,
    TABLE,
    ResourcePolicy,
    as_list,
    get,
    show,
    stack_data,
    stack_of,
    unknown_stack,
)

TYPES = (DATASET, TABLE, MONITORED_PROJECT, BACKUP_PLAN, RESTORE_PLAN)


def _last(value: Any) -> Any:
    """`locations/global/metricsScopes/<p>` or `projects/<p>` → <p>; a bare id as is."""
    return value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) else value


def _check_project(args: ResourceValidationArgs, stack: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if args.props.get("project") != stack["project"]:
        report_violation(f"project: {show(args.props.get('project'))} is not allowed; allowed: the stack's environment project {stack['project']!r}", None)


def _check_bigquery(args: ResourceValidationArgs, stack: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_project(args, stack, report_violation)
    if args.resource_type == DATASET and as_list(args.props.get("accesses")):
        members = [
            show(next((entry[k] for k in ("userByEmail", "groupByEmail", "specialGroup", "iamMember", "domain") if get(entry, k)), None))
            for entry in as_list(args.props.get("accesses"))
        ]
        report_violation(
            f"accesses: grants the dataset to {', '.join(members)}; allowed: none (the project's IAM decides who reads billing data)", None
        )


def _check_monitored_project(args: ResourceValidationArgs, stack: Mapping[str, Any], report_violation: ReportViolation) -> None:
    scope, monitored = _last(args.props.get("metricsScope")), _last(args.props.get("name"))
    if scope != stack["project"]:
        report_violation(
            f"metricsScope: {show(args.props.get('metricsScope'))} is not allowed; allowed: the environment's project {stack['project']!r} "
            "(whoever reads a scoping project's metrics reads every project it monitors)",
            None,
        )
    own = sorted({t["project"] for t in stack["tenants"].values() if t["isolation"] == "project"})
    if monitored not in own:
        report_violation(
            f"name: {show(args.props.get('name'))} is not a team project of stack {stack_of(args.urn)}; allowed: {', '.join(own) or 'none'}", None
        )


def _check_backup(args: ResourceValidationArgs, stack: Mapping[str, Any], report_violation: ReportViolation) -> None:
    _check_project(args, stack, report_violation)
    if args.props.get("cluster") != stack["hostCluster"]:
        report_violation(f"cluster: {show(args.props.get('cluster'))} is not allowed; allowed: the stack's host cluster {stack['hostCluster']!r}", None)
    config = "backupConfig" if args.resource_type == BACKUP_PLAN else "restoreConfig"
    namespaces = as_list(get(args.props, config, "selectedNamespaces", "namespaces"))
    own = sorted(t["hostNamespace"] for t in stack["tenants"].values())
    if len(namespaces) != 1 or namespaces[0] not in own:
        report_violation(
            f"{config}.selectedNamespaces.namespaces: {show([str(n) for n in namespaces] or None)} is not allowed; allowed: the host "
            f"namespace of one tenant of stack {stack_of(args.urn)} ({', '.join(own) or 'none'})",
            None,
        )
    if args.resource_type == RESTORE_PLAN:
        for key in ("allNamespaces", "selectedApplications", "excludedNamespaces"):
            if get(args.props, config, key) not in (None, False):
                report_violation(f"{config}.{key}: {show(get(args.props, config, key))} is not allowed; allowed: unset (one tenant's namespace by name)", None)
        if get(args.props, config, "clusterResourceRestoreScope", "noGroupKinds") is not True:
            report_violation(
                f"{config}.clusterResourceRestoreScope: restores cluster-scoped objects; allowed: noGroupKinds: true (a tenant's backup holds "
                "no host-wide object to put back)",
                None,
            )


_CHECKS = {DATASET: _check_bigquery, TABLE: _check_bigquery, MONITORED_PROJECT: _check_monitored_project, BACKUP_PLAN: _check_backup, RESTORE_PLAN: _check_backup}


def validate_targets(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    check = _CHECKS.get(args.resource_type)
    if check is None:
        return
    stack = stack_data(args.urn)
    if stack is None:
        report_violation(unknown_stack(args.urn), None)
        return
    check(args, stack, report_violation)


data_targets_by_design = ResourcePolicy(
    name="data-targets-by-design",
    description=(
        "The showback dataset and view, metrics scopes and Backup for GKE plans name only their stack's own project, host cluster, "
        "team projects and tenants' host namespaces (program_data.json stacks): no dataset access of its own, no foreign metrics "
        "scope, no backup or restore of another cluster or namespace, no restore of cluster-scoped objects."
    ),
    validate=validate_targets,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [data_targets_by_design]
