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
so does every grant of a stack the data does not know. Bootstrap entries (bootstrap/ci_roles.yaml,
bootstrap/Pulumi.ci.yaml): the member is one of the identities of that kind, bound on its
environment's project, folder or billing account, and a federation binding names exactly the
token subject the bootstrap configuration derives for the account.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .common import DATA, account_of, get, show, stack_data, stack_of, unknown_stack

CONDITIONS: dict[str, str] = DATA["conditions"]["expressions"]
PREFIX_PLACEHOLDER: str = DATA["conditions"]["prefixPlaceholder"]
BOOTSTRAP: dict[str, Any] = DATA["bootstrap"]
ACCOUNTS: dict[str, dict[str, Any]] = BOOTSTRAP["accounts"]

_ENVIRONMENTS = DATA["environments"]
_NAME_PREFIX = rf"(?P<prefix>(?:{'|'.join(_ENVIRONMENTS)})-[a-z]([-a-z0-9]*[a-z0-9])?-)"
# principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/subject/<sub>
_FEDERATED = re.compile(r"^principal://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/(?P<pool>[^/]+)/subject/(?P<subject>.+)$")
_CUSTOM_ROLE = re.compile(r"^projects/(?P<project>[^/]+)/roles/(?P<id>[A-Za-z0-9_.]+)$")


def _condition_pattern(name: str) -> re.Pattern[str]:
    """The program's condition `name` with the VM name prefix left open (every occurrence the same)."""
    parts = re.escape(CONDITIONS[name]).split(re.escape(PREFIX_PLACEHOLDER))
    return re.compile("^" + parts[0] + _NAME_PREFIX + "(?P=prefix)".join(parts[1:]) + "$")


_CONDITION_PATTERNS = {name: _condition_pattern(name) for name in CONDITIONS}


def email_of(member: Any) -> str | None:
    return member.split(":", 1)[1] if isinstance(member, str) and member.startswith("serviceAccount:") else None


Problem = tuple[int, str]


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
        where = (props.get("project"), props.get("region"), _last_segment(props.get("subnetwork")))
        if where not in subnets:
            shown = ", ".join(f"{p}/{r}/{s}" for p, r, s in sorted(subnets)) or "none"
            return 1, f"is bound on subnet {'/'.join(map(str, where))}, not on a tenant's subnet of stack {stack_of(urn)}; allowed: {shown}"
    if entry.get("target"):
        problem = _target_problem(entry, stack, urn, props, member)
        return (1, problem) if problem else None
    return None


def _last_segment(value: Any) -> Any:
    return value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) and value else value


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
        "teamProject": ("project", account["teamProjects"]),
        "folder": ("folder", [account["folder"]]),
        "billingAccount": ("billingAccountId", [account["billingAccount"]]),
    }[entry.get("on", scope)]
    if props.get(where[0]) not in where[1]:
        return 1, f"is bound on {where[0]} {props.get(where[0])!r}; allowed: its environment's {entry.get('on', scope)} {[w for w in where[1] if w]}"
    return None


def _accounts(kind: str) -> str:
    return ", ".join(sorted(email for email, a in ACCOUNTS.items() if a["kind"] == kind)) or "none"
