"""Who a grant names and what it is bound on, beyond (member kind, role, scope): the checks of
`iam-grants-by-design` that look at the identities themselves (program_data.json `identities`,
`conditions`, `bootstrap`).

Each check takes one allow-list entry and the grant's props, and says why the grant is not that
entry (None when it is), with how far it matched (0: not the entry's identity at all; 1: the right
identity, wrongly bound), so the most telling reason is reported. Program entries (config/iam_grants.yaml): the member's account matches its
principal's naming pattern; `ownProject` grants are on the member's own project; `target` grants are
bound on the right account; `condition` grants carry the condition the program writes, naming the
tenant's VMs (checked by a policy of its own, which the opt-in legacy mode fails on purpose). Bootstrap entries (bootstrap/ci_roles.yaml, bootstrap/Pulumi.ci.yaml): the member is
one of the identities of that kind, bound on its environment's project, folder or billing account,
and a federation binding names exactly the token subject the bootstrap configuration derives for
the account.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .common import DATA, account_of, get

PATTERNS = {principal: re.compile(pattern) for principal, pattern in DATA["identities"].items()}
CONDITIONS: dict[str, str] = DATA["conditions"]["expressions"]
PREFIX_PLACEHOLDER: str = DATA["conditions"]["prefixPlaceholder"]
BOOTSTRAP: dict[str, Any] = DATA["bootstrap"]
ACCOUNTS: dict[str, dict[str, Any]] = BOOTSTRAP["accounts"]

_ENVIRONMENTS = DATA["environments"]
_NAME_PREFIX = rf"(?P<prefix>(?:{'|'.join(_ENVIRONMENTS)})-[a-z]([-a-z0-9]*[a-z0-9])?-)"
# principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/subject/<sub>
_FEDERATED = re.compile(r"^principal://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/(?P<pool>[^/]+)/subject/(?P<subject>.+)$")
_GKE_POOL = re.compile(r"^serviceAccount:(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])\.svc\.id\.goog\[")
_CUSTOM_ROLE_PROJECT = re.compile(r"^projects/(?P<project>[^/]+)/roles/")


def _condition_pattern(name: str) -> re.Pattern[str]:
    """The program's condition `name` with the VM name prefix left open (every occurrence the same)."""
    parts = re.escape(CONDITIONS[name]).split(re.escape(PREFIX_PLACEHOLDER))
    return re.compile("^" + parts[0] + _NAME_PREFIX + "(?P=prefix)".join(parts[1:]) + "$")


_CONDITION_PATTERNS = {name: _condition_pattern(name) for name in CONDITIONS}


def email_of(member: Any) -> str | None:
    return member.split(":", 1)[1] if isinstance(member, str) and member.startswith("serviceAccount:") else None


def principal_match(principal: str, member: Any) -> re.Match[str] | None:
    pattern = PATTERNS.get(principal)
    return pattern.match(member) if pattern and isinstance(member, str) else None


Problem = tuple[int, str]


def program_problem(entry: Mapping[str, Any], props: Mapping[str, Any], role: Any, member: Any) -> Problem | None:
    """Why a grant of the program is not `entry`, or None."""
    found = None
    if entry["member"] == "serviceAccount":
        found = principal_match(entry["principal"], member)
        if not found:
            return 0, f"is not a {entry['principal']} account (allowed: {PATTERNS[entry['principal']].pattern})"
    role_project = _CUSTOM_ROLE_PROJECT.match(role) if isinstance(role, str) else None
    if role_project and "project" in props and role_project.group("project") != props.get("project"):
        return 1, f"names a custom role of project {role_project.group('project')!r}, not of the project {props.get('project')!r} it is bound on"
    if entry.get("ownProject") and found and props.get("project") != found.group("project"):
        return 1, f"is bound on project {props.get('project')!r}, not on the account's own project {found.group('project')!r}"
    if entry.get("target"):
        problem = _target_problem(entry, props, member, found)
        return (1, problem) if problem else None
    return None


def condition_problem(entry: Mapping[str, Any], props: Mapping[str, Any], member: Any) -> str | None:
    """Why a grant the program makes conditioned lacks its condition (or conditions on another
    tenant's VMs than the member's own), or None."""
    found = principal_match(entry["principal"], member) if entry["member"] == "serviceAccount" else None
    expression = get(props, "condition", "expression")
    template = CONDITIONS[entry["condition"]]
    allowed = f"the condition the program writes, {template!r} with {PREFIX_PLACEHOLDER} = <environment>-<tenant>-"
    if not isinstance(expression, str) or not expression.strip():
        return f"carries no IAM condition, so it reaches every VM of the project; allowed: {allowed}"
    matched = _CONDITION_PATTERNS[entry["condition"]].match(expression)
    if not matched:
        return f"carries condition {expression!r}; allowed: {allowed}"
    if found and "environment" in found.groupdict():
        own = f"{found.group('environment')}-{found.group('tenant')}-"
        if matched.group("prefix") != own:
            return f"is conditioned on VMs named {matched.group('prefix')}…, not on the tenant's own {own}…"
    return None


def _target_problem(entry: Mapping[str, Any], props: Mapping[str, Any], member: Any, found: re.Match[str] | None) -> str | None:
    target = account_of(props.get("serviceAccountId"))
    shown = repr(props.get("serviceAccountId"))
    if target is None:
        return f"is bound on {shown}; allowed: projects/<project>/serviceAccounts/<e-mail> of a {entry['target']} account"
    if entry["target"] == "self":
        if found is None or target != found.group(0).split(":", 1)[1]:
            return f"is bound on {target!r}; allowed: only the member's own account"
        return None
    if not principal_match(entry["target"], f"serviceAccount:{target}"):
        return f"is bound on {target!r}; allowed: a {entry['target']} account ({PATTERNS[entry['target']].pattern})"
    pool = _GKE_POOL.match(member) if isinstance(member, str) else None
    if pool and not target.endswith(f"@{pool.group('project')}.iam.gserviceaccount.com"):
        return f"lets a pod of {pool.group('project')}'s cluster act as {target!r} of another project"
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
