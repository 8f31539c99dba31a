"""Who a grant names and what it is bound on, beyond (member kind, role, scope): the checks of
`iam-grants-by-design` that look at the identities themselves (program_data.json `stacks`,
`conditions`, `bootstrap`).

Each check takes one allow-list entry and the grant's props, and says why the grant is not that
entry (None when it is), with how far it matched (0: not the entry's identity at all; 1: the right
identity, wrongly bound), so the most telling reason is reported. Program entries
(config/iam_grants.yaml) are matched by account, per stack, against what the program's own runs
of that stack name (`make policy-data`): the platform's account, the host nodes' account, the
Workload Identity member, each tenant's node account, project, subnet and VM names, the custom
role id prefixes. An account of another project or stack, however it is named, matches nothing;
so does every grant of a stack the data does not know. A tenant's node account holds exactly the
grants the run gives it (`nodeGrants`): an entry with `when` only while the tenant has that option
(and in prod, for a security setting, the environment approves it), and a disk or load-balancer
role never on the environment's project, which holds the host cluster's volumes and network.
Bootstrap entries (bootstrap/ci_roles.yaml,
bootstrap/Pulumi.ci.yaml): the member is one of the identities of that kind, bound on its
environment's project, folder or billing account, and a federation binding names exactly the
token subject the bootstrap configuration derives for the account.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stack_records import existing_team_projects

from .common import DATA, NON_PROD_ENVIRONMENTS, STACKS, account_of, get, show, stack_data, stack_of, unknown_stack

CONDITIONS: dict[str, str] = DATA["conditions"]["expressions"]
PREFIX_PLACEHOLDER: str = DATA["conditions"]["prefixPlaceholder"]
BOOTSTRAP: dict[str, Any] = DATA["bootstrap"]
ACCOUNTS: dict[str, dict[str, Any]] = BOOTSTRAP["accounts"]

_ENVIRONMENTS = DATA["environments"]
_NAME_PREFIX = rf"(?P<prefix>(?:{'|'.join(_ENVIRONMENTS)})-[a-z]([-a-z0-9]*[a-z0-9])?-)"
# principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/subject/<sub>
_FEDERATED = re.compile(r"^principal://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/(?P<pool>[^/]+)/subject/(?P<subject>.+)$")
_CUSTOM_ROLE = re.compile(r"^projects/(?P<project>[^/]+)/roles/(?P<id>[A-Za-z0-9_.]+)$")
# The tenant settings an environment approves in prod (config/tenant_security.py SETTINGS).
_SAFE_SETTINGS: dict[str, Any] = DATA["tenantSecurity"]["safe"]

# The forms a subnet grant's `subnetwork` may take, as the GCP provider reads them (pulumi-gcp
# 10.2.0 bridges hashicorp/terraform-provider-google: google/services/compute/iam_compute_subnetwork.go
# ComputeSubnetworkIamUpdaterProducer, read at commit 0937ec5ba25b4ce01df2705fbacee88aa96972c9; the
# SDK's compute/subnetwork_iam_member.py lists the same forms under "Import"): the full path, or its
# URL (the provider's patterns are unanchored, so a self link reads as the path in it),
# project/region/name, region/name, name. A project or region the value leaves out comes from the
# grant's `project` and `region` inputs; the path's, where it names them, wins over those inputs.
# Anchored here: any other spelling is rejected rather than guessed at.
_SUBNETWORK_FORMS = (
    re.compile(
        r"^(?:https://(?:www|compute)\.googleapis\.com/compute/(?:v1|beta)/)?"
        r"projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/subnetworks/(?P<name>[^/]+)$"
    ),
    re.compile(r"^(?P<project>[^/]+)/(?P<region>[^/]+)/(?P<name>[^/]+)$"),
    re.compile(r"^(?P<region>[^/]+)/(?P<name>[^/]+)$"),
    re.compile(r"^(?P<name>[^/]+)$"),
)
_SUBNETWORK_SPELLINGS = (
    "projects/<project>/regions/<region>/subnetworks/<name>, its https://www.googleapis.com/compute/v1/… URL, "
    "<project>/<region>/<name>, or <region>/<name> or <name> with the project and region inputs"
)


def _condition_pattern(name: str) -> re.Pattern[str]:
    """The program's condition `name` with the VM name prefix left open (every occurrence the same)."""
    parts = re.escape(CONDITIONS[name]).split(re.escape(PREFIX_PLACEHOLDER))
    return re.compile("^" + parts[0] + _NAME_PREFIX + "(?P=prefix)".join(parts[1:]) + "$")


_CONDITION_PATTERNS = {name: _condition_pattern(name) for name in CONDITIONS}


def email_of(member: Any) -> str | None:
    return member.split(":", 1)[1] if isinstance(member, str) and member.startswith("serviceAccount:") else None


Problem = tuple[int, str]


def subnetwork_of(props: Mapping[str, Any]) -> tuple[tuple[str, str, str] | None, str | None]:
    """(project, region, name) of the subnet a subnet grant binds on, as the provider reads it, or
    (None, why it cannot be told): a form the provider does not read, a path whose project or region
    differs from the grant's own input, or a project or region named nowhere (the provider's default
    would decide)."""
    value = props.get("subnetwork")
    found = next((m for form in _SUBNETWORK_FORMS if isinstance(value, str) for m in [form.match(value)] if m), None)
    if found is None:
        return None, f"subnetwork {show(value)} is not a subnet the pack can read; allowed: {_SUBNETWORK_SPELLINGS}"
    named = found.groupdict()
    where: dict[str, str] = {}
    for key in ("project", "region"):
        path, given = named.get(key), props.get(key)
        if path is not None and given not in (None, "") and path != given:
            return None, f"subnetwork {value!r} names {key} {path!r}, and its {key} input is {given!r} (the provider binds on the path's)"
        where[key] = path or given
        if not isinstance(where[key], str) or not where[key]:
            return None, f"{key}: not set, and subnetwork {value!r} names none (the provider's default would decide); allowed: the tenant's {key}, set"
    return (where["project"], where["region"], named["name"]), None


def accounts_of(stack: Mapping[str, Any], principal: str) -> dict[str, Mapping[str, Any] | None]:
    """A principal's exact accounts in a stack: e-mail → the tenant it belongs to (None for the
    platform's and the host nodes' own)."""
    if principal == "platform":
        return {stack["platformServiceAccount"]: None} if stack.get("platformServiceAccount") else {}
    if principal == "gkeNodes":
        return {stack["hostNodesServiceAccount"]: None} if stack.get("hostNodesServiceAccount") else {}
    return {t["nodeServiceAccount"]: t for t in stack["tenants"].values() if t.get("nodeServiceAccount")}


def _listed(accounts: Mapping[str, Any]) -> str:
    return ", ".join(sorted(accounts)) or "none"


def program_problem(entry: Mapping[str, Any], urn: str, props: Mapping[str, Any], role: Any, member: Any) -> Problem | None:
    """Why a grant of the program is not `entry`, or None."""
    stack = stack_data(urn)
    if stack is None:
        return 0, unknown_stack(urn)
    tenant: Mapping[str, Any] | None = None
    if entry["member"] == "serviceAccount":
        accounts = accounts_of(stack, entry["principal"])
        email = email_of(member)
        if email not in accounts:
            return 0, f"is not the {entry['principal']} account of stack {stack_of(urn)} (allowed: {_listed(accounts)})"
        tenant = accounts[email]
    elif member != stack.get("workloadIdentityMember"):
        return 0, f"is not the Workload Identity member of stack {stack_of(urn)} (allowed: {show(stack.get('workloadIdentityMember'))})"
    custom = _CUSTOM_ROLE.match(role) if isinstance(role, str) else None
    if custom and "project" in props and custom.group("project") != props.get("project"):
        return 1, f"names a custom role of project {custom.group('project')!r}, not of the project {props.get('project')!r} it is bound on"
    if custom and custom.group("id").rsplit("_", 1)[0] not in stack["roleIdPrefixes"]:
        return 1, f"names custom role {custom.group('id')!r}, whose prefix is not the environment's ({', '.join(stack['roleIdPrefixes'])})"
    if entry.get("ownProject"):
        own = tenant["project"] if tenant is not None else stack["project"]
        if props.get("project") != own:
            return 1, f"is bound on project {props.get('project')!r}, not on the account's own project {own!r}"
    if entry["scope"] == "project" and entry["principal"] == "platform":
        projects = sorted({t["project"] for t in stack["tenants"].values()})
        if props.get("project") not in projects:
            return 1, f"is bound on project {props.get('project')!r}, which holds no tenant of stack {stack_of(urn)}; allowed: {', '.join(projects) or 'none'}"
    if entry["scope"] == "subnetwork":
        subnets = {(t["project"], t["region"], t["subnetwork"]) for t in stack["tenants"].values() if t.get("subnetwork")}
        shown = ", ".join(f"projects/{p}/regions/{r}/subnetworks/{s}" for p, r, s in sorted(subnets)) or "none"
        where, unreadable = subnetwork_of(props)
        if where is None:
            return 1, f"is bound on no subnet the pack can tell: {unreadable}; the tenants' subnets of stack {stack_of(urn)}: {shown}"
        if where not in subnets:
            return 1, f"is bound on subnet projects/{where[0]}/regions/{where[1]}/subnetworks/{where[2]}, not on a tenant's subnet of stack {stack_of(urn)}; allowed: {shown}"
    if entry.get("target"):
        problem = _target_problem(entry, stack, urn, props, member)
        if problem:
            return 1, problem
    if tenant is not None:
        problem = _node_grant_problem(entry, stack, urn, props, role, tenant)
        if problem:
            return 1, problem
    return None


def _node_grant_problem(entry: Mapping[str, Any], stack: Mapping[str, Any], urn: str, props: Mapping[str, Any], role: Any, tenant: Mapping[str, Any]) -> str | None:
    """Why a grant to a tenant's node account is not one the program gives it, or None."""
    name = next(n for n, t in stack["tenants"].items() if t is tenant)
    project = props.get("project")
    if entry.get("notOnEnvironmentProject") and project == stack["project"]:
        return (
            f"is bound on the environment's project {project!r}, which holds the host cluster's volumes and network (every tenant's control "
            "plane): a project-wide disk or load-balancer role there reaches them all; allowed: only on a project of the team's own (isolation: project)"
        )
    option = entry.get("when")
    if option is not None and tenant.get(option) is not True:
        return f"is granted only with {option}: true, and tenant {name} of stack {stack_of(urn)} has {option}: {show(tenant.get(option))}"
    if option in _SAFE_SETTINGS and stack["environment"] not in NON_PROD_ENVIRONMENTS:
        approved = get(stack.get("approvedTenantSecurity"), name, option)
        if approved != tenant.get(option):
            return (
                f"is granted with {option}: {show(tenant.get(option))}, which {stack['environment']} has not approved for tenant {name}; allowed: only "
                f"with platform.approvedTenantSecurity.{name}.{option}: {show(tenant.get(option))} in the environment stack"
            )
    on = account_of(props.get("serviceAccountId")) if entry["scope"] == "serviceAccount" else project
    granted = tenant.get("nodeGrants") or []
    if not any(g["scope"] == entry["scope"] and g["role"] == role and g["on"] == on for g in granted):
        listed = "; ".join(f"{g['role']} on {g['on']}" for g in granted if g["scope"] == entry["scope"]) or "none"
        return (
            f"is not a grant the program gives tenant {name}'s node account in stack {stack_of(urn)} (on {show(on)}); allowed on a "
            f"{entry['scope']}: {listed}"
        )
    return None


def condition_problem(entry: Mapping[str, Any], urn: str, props: Mapping[str, Any], member: Any) -> str | None:
    """Why a grant the program makes conditioned lacks its condition (or conditions on other VMs
    than its tenant's own), or None. The tenant's own: for a node account its own tenant's; for the
    platform's VM role, one of the tenants of the project it is bound on."""
    expression = get(props, "condition", "expression")
    template = CONDITIONS[entry["condition"]]
    allowed = f"the condition the program writes, {template!r} with {PREFIX_PLACEHOLDER} = <environment>-<tenant>-"
    if not isinstance(expression, str) or not expression.strip():
        return f"carries no IAM condition, so it reaches every VM of the project; allowed: {allowed}"
    matched = _CONDITION_PATTERNS[entry["condition"]].match(expression)
    if not matched:
        return f"carries condition {expression!r}; allowed: {allowed}"
    stack = stack_data(urn)
    if stack is None:
        return None  # iam-grants-by-design reports the unknown stack
    if entry["principal"] == "tenantNodes":
        tenant = accounts_of(stack, "tenantNodes").get(email_of(member) or "")
        own = [tenant["vmNamePrefix"]] if tenant else []
    else:
        own = sorted(t["vmNamePrefix"] for t in stack["tenants"].values() if t["project"] == props.get("project"))
    if matched.group("prefix") not in own:
        return f"is conditioned on VMs named {matched.group('prefix')}…, not on its tenant's own ({', '.join(p + '…' for p in own) or 'none'})"
    return None


def _target_problem(entry: Mapping[str, Any], stack: Mapping[str, Any], urn: str, props: Mapping[str, Any], member: Any) -> str | None:
    target = account_of(props.get("serviceAccountId"))
    shown = repr(props.get("serviceAccountId"))
    if target is None:
        return f"is bound on {shown}; allowed: projects/<project>/serviceAccounts/<e-mail> of a {entry['target']} account"
    if entry["target"] == "self":
        if target != email_of(member):
            return f"is bound on {target!r}; allowed: only the member's own account"
        return None
    accounts = accounts_of(stack, entry["target"])
    if target not in accounts:
        return f"is bound on {target!r}, not on a {entry['target']} account of stack {stack_of(urn)}; allowed: {_listed(accounts)}"
    return None


def bootstrap_problem(entry: Mapping[str, Any], scope: str, props: Mapping[str, Any], member: Any) -> Problem | None:
    """Why a grant of the bootstrap is not `entry`, or None."""
    if entry["member"] == "principal":
        target = account_of(props.get("serviceAccountId"))
        account = ACCOUNTS.get(target or "")
        if account is None or account["kind"] != entry["principal"]:
            return 0, f"is bound on {props.get('serviceAccountId')!r}; allowed: a {entry['principal']} identity ({_accounts(entry['principal'])})"
        federated = _FEDERATED.match(member) if isinstance(member, str) else None
        if not federated or federated.group("pool") != BOOTSTRAP["poolId"] or federated.group("subject") != account["subject"]:
            return 1, (
                f"lets {member!r} act as {target}; allowed: exactly principal://…/workloadIdentityPools/{BOOTSTRAP['poolId']}/subject/"
                f"{account['subject']} (the subject bootstrap/Pulumi.ci.yaml gives {account['environment']}'s {account['kind']} jobs)"
            )
        return None
    account = ACCOUNTS.get(email_of(member) or "")
    if account is None or account["kind"] != entry["principal"]:
        return 0, f"is not a {entry['principal']} identity; allowed: {_accounts(entry['principal'])}"
    where = {
        "project": ("project", [account["project"]]),
        # The existing team projects of its environment's stacks, from their records (the bootstrap
        # grants its identities roles in exactly these: policy/stack_records.py).
        "teamProject": ("project", existing_team_projects(STACKS, account["environment"])),
        "folder": ("folder", [account["folder"]]),
        "billingAccount": ("billingAccountId", [account["billingAccount"]]),
    }[entry.get("on", scope)]
    if props.get(where[0]) not in where[1]:
        return 1, f"is bound on {where[0]} {props.get(where[0])!r}; allowed: its environment's {entry.get('on', scope)} {[w for w in where[1] if w]}"
    return None


def _accounts(kind: str) -> str:
    return ", ".join(sorted(email for email, a in ACCOUNTS.items() if a["kind"] == kind)) or "none"
