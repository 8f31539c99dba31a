"""IAM guardrails: no keys, no basic roles, Workload Identity only for exactly the identities meant
to use it, no grant the program (or its bootstrap) does not make by design, and custom roles that
cannot escalate, open firewalls or build networks for the platform.

The allow-list is data: program_data.json `grants`, generated from config/iam_grants.yaml (the
program) and bootstrap/ci_roles.yaml with bootstrap/Pulumi.ci.yaml (the bootstrap), keyed by Pulumi
project (taken from each resource's URN). A grant is matched on (member kind, role, scope), and then
on who exactly it names and where (identities.py): the member's account, the account it is bound
on, the project, the subnet, the condition, the federation subject, each the exact one the
program's run of that stack names (program_data.json `stacks`).
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

from . import identities
from .common import (
    BOOTSTRAP_PROJECT,
    CUSTOM_ROLES,
    DATA,
    GKE_CLUSTER,
    SERVICE_ACCOUNT_KEY,
    WORKLOAD_IDENTITY_PROVIDER,
    WORKLOAD_IDENTITY_USER,
    ResourcePolicy,
    as_list,
    described,
    grant_scope,
    iam_bindings,
    is_iam_grant,
    not_allowed,
    project_of,
    show,
    unreadable_policy_data,
)

BASIC_ROLES = ("roles/owner", "roles/editor", "roles/viewer")
ROLES = DATA["customRoles"]

# serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>]: a project id (optionally domain-scoped),
# a namespace (DNS label) and a Kubernetes service account name (DNS subdomain); no wildcard fits.
_GKE_WORKLOAD_IDENTITY_MEMBER = re.compile(
    r"^serviceAccount:(?:[a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]\.svc\.id\.goog"
    r"\[(?P<ksa>[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)\]$"
)
# Workload Identity Federation (CI): one subject, or one attribute value, of one pool. Google's
# principal identifiers: https://cloud.google.com/iam/docs/principal-identifiers
_POOL = r"^{kind}://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/[^/]+/"
_WIF_SUBJECT = re.compile(_POOL.format(kind="principal") + r"subject/(?P<subject>[^*]+)$")
_WIF_ATTRIBUTE = re.compile(_POOL.format(kind="principalSet") + r"attribute\.(?P<attribute>[A-Za-z0-9_]+)/(?P<value>[^*]+)$")
_CUSTOM_ROLE = re.compile(r"^(projects|organizations)/[^/]+/roles/(?P<id>[A-Za-z0-9_.]+)$")


def validate_no_service_account_keys(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == SERVICE_ACCOUNT_KEY:
        report_violation(
            "a service account key is not allowed; allowed: Workload Identity "
            "(pods) and Workload Identity Federation (CI), which need no long-lived key",
            None,
        )


no_service_account_keys = ResourcePolicy(
    name="no-service-account-keys",
    description="No Google service account keys: identities are reached only through Workload Identity (Federation).",
    validate=validate_no_service_account_keys,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_no_basic_roles(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not is_iam_grant(args.resource_type):
        return
    for path, role, _ in iam_bindings(args.props):
        if role in BASIC_ROLES:
            report_violation(
                f"{path}: {role!r} is a basic role and not allowed; allowed: a predefined or custom role with "
                f"only the permissions needed (never {', '.join(BASIC_ROLES)})",
                None,
            )


no_basic_roles = ResourcePolicy(
    name="no-basic-iam-roles",
    description="No IAM member, binding or policy grants a basic role (roles/owner, roles/editor, roles/viewer).",
    validate=validate_no_basic_roles,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def member_kind(member: Any) -> str:
    """How a grant names its principal: workloadIdentity:<ns>/<ksa> (GKE), serviceAccount,
    principal / principalSet (Workload Identity Federation), user, group, domain, allUsers, …"""
    if not isinstance(member, str):
        return show(member)
    gke = _GKE_WORKLOAD_IDENTITY_MEMBER.match(member)
    if gke:
        return f"workloadIdentity:{gke.group('ksa')}"
    if member.startswith("principalSet://"):
        return "principalSet"
    if member.startswith("principal://"):
        return "principal"
    return member.split(":", 1)[0]


def role_key(role: Any) -> str:
    """A predefined role as is; one of our custom roles as custom:<key> (role id <prefix>_<key>)."""
    found = _CUSTOM_ROLE.match(role) if isinstance(role, str) else None
    return f"custom:{found.group('id').rsplit('_', 1)[-1]}" if found else str(role)


def validate_workload_identity_members(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Two kinds of member may act as a service account through roles/iam.workloadIdentityUser:
    one Kubernetes service account of GKE Workload Identity (the program's platform pod), or one
    GitHub workflow identity of Workload Identity Federation (the bootstrap's CI identities): one
    subject, or one repository. Never a pool, a namespace, a repository owner or a wildcard."""
    if not is_iam_grant(args.resource_type):
        return
    attributes = DATA["workloadIdentityFederation"]["principalSetAttributes"]
    for _, role, members in iam_bindings(args.props):
        if role != WORKLOAD_IDENTITY_USER:
            continue
        for path, member in members:
            if not isinstance(member, str):
                allowed_kind = False
            elif member.startswith("serviceAccount:") and ".svc.id.goog" in member:
                allowed_kind = bool(_GKE_WORKLOAD_IDENTITY_MEMBER.match(member))
            elif member.startswith(("principal://", "principalSet://")):
                by_attribute = _WIF_ATTRIBUTE.match(member)
                allowed_kind = bool(_WIF_SUBJECT.match(member)) or bool(by_attribute and by_attribute.group("attribute") in attributes)
            else:
                allowed_kind = False
            if allowed_kind:
                continue
            allowed = (
                f"for {WORKLOAD_IDENTITY_USER}, exactly one Kubernetes service account, "
                "serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>] (no wildcard), or one GitHub workflow identity: "
                "principal://…/workloadIdentityPools/<pool>/subject/<sub> or principalSet://…/workloadIdentityPools/<pool>/"
                f"attribute.{{{'|'.join(attributes)}}}/<value> (never a whole pool, a namespace or repository_owner)"
            )
            report_violation(not_allowed(path, member, allowed), None)


workload_identity_members = ResourcePolicy(
    name="workload-identity-exact-member",
    description=(
        "roles/iam.workloadIdentityUser is granted only to one named Kubernetes service account "
        "(serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>], GKE Workload Identity) or to one GitHub "
        "workflow subject or repository (principal://…/subject/<sub>, principalSet://…/attribute.repository/<repo>, "
        "Workload Identity Federation)."
    ),
    validate=validate_workload_identity_members,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _allowed_grants(project: str, scope: str) -> str:
    entries = [g for g in DATA["grants"].get(project, []) if g["scope"] == scope]
    if not entries:
        return f"no grant on a {scope} (config/iam_grants.yaml, bootstrap/ci_roles.yaml)"
    listed = sorted({f"{g['member']} → {g['role']}" for g in entries})
    return f"on a {scope}, only {'; '.join(listed)}"


def validate_grant_allow_list(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every IAM grant is one the program (or the bootstrap) makes by design: its (member kind, role,
    scope), and then its member, target, project and condition (identities.py). An IAM policy whose
    policyData cannot be read grants what nobody can check: rejected."""
    if not is_iam_grant(args.resource_type):
        return
    unreadable = unreadable_policy_data(args.props)
    if unreadable:
        report_violation(unreadable, None)
        return
    project = project_of(args.urn)
    scope = grant_scope(args.resource_type)
    grants = DATA["grants"].get(project, [])
    for path, role, members in iam_bindings(args.props):
        key = role_key(role)
        for member_path, member in members:
            kind = member_kind(member)
            candidates = [g for g in grants if g["member"] == kind and g["role"] == key and g["scope"] == scope]
            if not candidates:
                report_violation(
                    f"{member_path}: {show(member)} ({kind}) holding {show(role)} on a {scope} is not a grant "
                    f"{project or 'this project'} makes by design; allowed: {_allowed_grants(project, scope)}",
                    None,
                )
                continue
            problems = [(_identity_problem(project, g, scope, args.urn, args.props, role, member), g) for g in candidates]
            if all(problem for problem, _ in problems):
                # The entry it came closest to (the right identity, wrongly bound) tells most.
                (_, reason), entry = max(problems, key=lambda found: found[0][0])  # type: ignore[index]
                source = "bootstrap/ci_roles.yaml" if project == BOOTSTRAP_PROJECT else "config/iam_grants.yaml"
                report_violation(
                    f"{member_path}: {show(member)} holding {show(role)} on a {scope} {reason} ({source}: {entry['principal']} → {entry['role']})",
                    None,
                )


def _identity_problem(project: str, entry: dict, scope: str, urn: str, props, role, member) -> identities.Problem | None:
    if project == BOOTSTRAP_PROJECT:
        return identities.bootstrap_problem(entry, scope, props, member)
    return identities.program_problem(entry, urn, props, role, member)


grant_allow_list = ResourcePolicy(
    name="iam-grants-by-design",
    description=(
        "Every IAM member, binding and policy grants one of the (member kind, role, scope) combinations the program "
        "makes by design (config/iam_grants.yaml) or, in the bootstrap project, the CI identities' roles "
        "(bootstrap/ci_roles.yaml): e.g. no project-level serviceAccountUser, serviceAccountTokenCreator, "
        "projectIamAdmin or compute.admin, no workloadIdentityUser but for the platform's own pod, no networkUser."
    ),
    validate=validate_grant_allow_list,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _held(props: Mapping[str, Any], permissions: list[str] | tuple[str, ...]) -> list[str]:
    return [p for p in as_list(props.get("permissions")) if p in permissions]


def _are(held: list[str]) -> str:
    return f"{', '.join(held)} {'is' if len(held) == 1 else 'are'}"


def validate_custom_role_permissions(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in CUSTOM_ROLES:
        return
    forbidden = ROLES["forbiddenInAnyRole"]
    held = _held(args.props, forbidden)
    if held:
        report_violation(
            f"permissions: {_are(held)} not allowed in any custom role (each lets the role's holder grant itself more, "
            "mint another identity's credentials, give a VM an external IP or rewrite every VM's metadata); "
            f"allowed: anything but config/permissions.yaml forbiddenInAnyRole ({', '.join(forbidden)})",
            None,
        )


custom_role_permissions = ResourcePolicy(
    name="custom-role-no-privilege-escalation",
    description=(
        "No IAM custom role holds a permission from config/permissions.yaml forbiddenInAnyRole "
        "(setIamPolicy, iam.roles.create/update, service-account creation, actAs, tokens, signJwt/signBlob, keys, "
        "subnetworks.useExternalIp/setIamPolicy, projects.setCommonInstanceMetadata). "
        "The opt-in legacy mode (nodeProvider.legacyInfrastructure: true, the official 59-permission role) "
        "violates this on purpose: a stack that opts in must lower this policy's enforcement level "
        "through policy config, e.g. {\"custom-role-no-privilege-escalation\": {\"enforcementLevel\": \"advisory\"}}, "
        "with custom-role-least-privilege, iam-conditioned-grants and vcluster-control-plane-isolation."
    ),
    validate=validate_custom_role_permissions,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_custom_role_least_privilege(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A permission of `onlyInRoles` only in its roles (firewall rules only in the opt-in tenant
    load-balancer role); the platform's roles hold nothing of `forbiddenForPlatform`."""
    if args.resource_type not in CUSTOM_ROLES:
        return
    role_id = args.props.get("roleId")
    key = str(role_id).rsplit("_", 1)[-1] if isinstance(role_id, str) else None
    holds = _held(args.props, list(ROLES["onlyInRoles"]))
    misplaced = [p for p in holds if key not in ROLES["onlyInRoles"][p]]
    for permission in misplaced:
        owners = ", ".join(f"<prefix>_{k}" for k in ROLES["onlyInRoles"][permission])
        report_violation(
            f"permissions: {permission} is not allowed in this role; allowed: only in {owners} "
            "(config/permissions.yaml onlyInRoles: the opt-in role of a tenant's load balancers)",
            None,
        )
    _exact_permissions(project_of(args.urn), role_id, key, args.props, report_violation)
    if key in ROLES["platformRoleKeys"]:
        held = _held(args.props, ROLES["forbiddenForPlatform"])
        if held:
            report_violation(
                f"permissions: {_are(held)} not allowed in a role the platform holds (Pulumi builds tenants' networks, "
                f"the platform only starts VMs in them); allowed: anything but config/permissions.yaml forbiddenForPlatform "
                f"({', '.join(ROLES['forbiddenForPlatform'])})",
                None,
            )


def _exact_permissions(project: str, role_id, key: str | None, props, report_violation: ReportViolation) -> None:
    """Each of our custom roles holds exactly the permissions its data lists: nothing added, nothing
    the reviewers did not see (config/permissions.yaml; the bootstrap's bootstrap/ci_roles.yaml)."""
    side = "bootstrap" if project == BOOTSTRAP_PROJECT else "program"
    source = "bootstrap/ci_roles.yaml customRoles" if side == "bootstrap" else "config/permissions.yaml"
    table = ROLES["permissions"][side]
    if key not in table:
        report_violation(
            f"roleId: {show(role_id)} is not a custom role {project or 'this project'} defines; allowed: <prefix>_<key> for a key of "
            f"{source} ({', '.join(sorted(table))})",
            None,
        )
        return
    held = [str(p) for p in as_list(props.get("permissions"))]
    extra = sorted(set(held) - set(table[key]))
    missing = sorted(set(table[key]) - set(held))
    if extra or missing:
        report_violation(
            f"permissions: must be exactly {source} {key}; "
            f"{'not listed there: ' + ', '.join(extra) if extra else ''}{'; ' if extra and missing else ''}"
            f"{'missing: ' + ', '.join(missing) if missing else ''}; allowed: {', '.join(table[key])}",
            None,
        )


custom_role_least_privilege = ResourcePolicy(
    name="custom-role-least-privilege",
    description=(
        "Each custom role holds exactly the permissions listed for its key (config/permissions.yaml; in the bootstrap "
        "project bootstrap/ci_roles.yaml), firewall permissions only in the opt-in tenant load-balancer role "
        "(config/permissions.yaml onlyInRoles), and no role the platform holds (config/iam_grants.yaml) has a permission "
        "of forbiddenForPlatform. "
        "Legacy mode violates this on purpose, like custom-role-no-privilege-escalation."
    ),
    validate=validate_custom_role_least_privilege,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _last_segment(value: Any) -> str | None:
    return value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) and value else None


def validate_no_grants_on_host_network(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """No IAM grant on the host cluster's subnet: VMs attached to it would sit beside the host's
    nodes. Tenants' subnets are the only ones the platform may use."""
    host_subnets = {
        name
        for r in args.resources
        if r.resource_type == GKE_CLUSTER
        for name in [_last_segment(r.props.get("subnetwork"))]
        if name
    }
    for r in args.resources:
        if not is_iam_grant(r.resource_type) or grant_scope(r.resource_type) != "subnetwork":
            continue
        subnet = _last_segment(r.props.get("subnetwork"))
        if subnet in host_subnets:
            roles = sorted({show(role) for _, role, _ in iam_bindings(r.props)})
            report_violation(
                f"{described(r)}: subnetwork: the host cluster's subnet takes no grant ({', '.join(roles)}); allowed: grants on tenants' subnets only",
                r.urn,
            )


no_grants_on_host_network = StackValidationPolicy(
    name="no-grants-on-host-subnet",
    description="No IAM grant on the GKE host cluster's subnet (e.g. compute.networkUser or tenantSubnetUse): tenants' VMs never join the host's network.",
    validate=validate_no_grants_on_host_network,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

def validate_conditioned_grants(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The grants the program always makes with an IAM condition carry it (config/iam_grants.yaml
    `condition`): the platform's VM role and the tenant nodes' disk role reach only VMs named
    <environment>-<tenant>-…, the nodes' own tenant's."""
    if not is_iam_grant(args.resource_type):
        return
    project = project_of(args.urn)
    scope = grant_scope(args.resource_type)
    conditioned = [g for g in DATA["grants"].get(project, []) if g.get("condition") and g["scope"] == scope]
    for path, role, members in iam_bindings(args.props):
        key = role_key(role)
        for member_path, member in members:
            for entry in (g for g in conditioned if g["member"] == member_kind(member) and g["role"] == key):
                problem = identities.condition_problem(entry, args.urn, args.props, member)
                if problem:
                    report_violation(f"{member_path}: {show(member)} holding {show(role)} {problem}", None)
                    break


conditioned_grants = ResourcePolicy(
    name="iam-conditioned-grants",
    description=(
        "Every grant the program makes with an IAM condition carries exactly that condition (config/iam_grants.yaml "
        "`condition`): the platform's VM role and a tenant's disk-attach role only on VMs named <environment>-<tenant>-…, "
        "the disk role on its own tenant's. Legacy mode (an unconditioned broad role) violates this on purpose."
    ),
    validate=validate_conditioned_grants,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_federation_trust(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The Workload Identity provider CI's identities trust admits tokens of the repository only,
    with exactly the condition the bootstrap configuration derives (bootstrap/ci_config.py:
    repository, the protected branch for deployment and drift environments, no Dependabot
    pull-request tokens)."""
    if args.resource_type != WORKLOAD_IDENTITY_PROVIDER:
        return
    bootstrap = DATA["bootstrap"]
    condition = args.props.get("attributeCondition")
    repository_clause = f"assertion.repository == '{bootstrap['repository']}'"
    if not isinstance(condition, str) or repository_clause not in condition:
        report_violation(
            f"attributeCondition: {show(condition)} does not admit tokens of {bootstrap['repository']} only; allowed: a condition "
            f"containing {repository_clause} (any repository's workflow could otherwise obtain CI's identities)",
            None,
        )
    elif condition != bootstrap["attributeCondition"]:
        report_violation(
            f"attributeCondition: {condition!r} is not the condition bootstrap/Pulumi.ci.yaml derives; allowed: "
            f"{bootstrap['attributeCondition']!r}",
            None,
        )


federation_trust = ResourcePolicy(
    name="ci-federation-trust",
    description=(
        "The Workload Identity provider of CI's identities has an attribute condition naming the repository, exactly the one "
        "the bootstrap's configuration derives (repository, protected branch for deployments and drift, no Dependabot "
        "pull-request tokens)."
    ),
    validate=validate_federation_trust,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [
    no_service_account_keys,
    no_basic_roles,
    workload_identity_members,
    grant_allow_list,
    conditioned_grants,
    custom_role_permissions,
    custom_role_least_privilege,
    no_grants_on_host_network,
    federation_trust,
]
