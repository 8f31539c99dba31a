"""A tenant's security settings, and what the environment must agree to.

The settings that decide what a team's pods and node identity can reach beyond the team itself:
`isolation`, `loadBalancerServices`, `nodeMetadata` and `podSecurityStandard` (SETTINGS). Each
has a safe value, its default. In prod a tenant may leave a safe value only where the
environment stack says so for that team (`platform.approvedTenantSecurity`), so the change needs
whoever may change the environment's stack file, not only whoever may change the team's; the
plan marks every change of these settings as a security change (tools/isolation_plan.py).

Shared tenants live in the environment's project, where the host cluster's volumes hold every
tenant's control-plane data. Their node identity therefore gets no disk or load-balancer role
there: `compute.storageAdmin` and `compute.loadBalancerAdmin` are project-wide (a PD CSI volume is
named `pvc-<uuid>` whichever cluster owns it, so no IAM condition tells a team's disks from the
host's), and a shared tenant with `persistentDisks` or `loadBalancerServices` is refused. Shared
tenants beside tenants in projects of their own are refused too unless the environment accepts
it explicitly (`platform.allowSharedWithProjectTenants`): a shared tenant's node identity reads
every VM of the environment's project, whose control planes serve every tenant.
"""

from __future__ import annotations

from typing import Any, Literal

from .base import ConfigModel
from .errors import Problems

PROD = "prod"
SHARED = "shared"
BASELINE = "baseline"
POD_SECURITY_STANDARDS = ("baseline", "restricted", "privileged")
# The settings of SETTINGS: config key → (attribute of config.tenant.Tenant, its safe value).
SETTINGS: dict[str, tuple[str, Any]] = {
    "isolation": ("isolation", "project"),
    "loadBalancerServices": ("load_balancer_services", False),
    "nodeMetadata": ("node_metadata", "concealed"),
    "podSecurityStandard": ("pod_security_standard", BASELINE),
}
# Stricter than the safe value, so never in need of approval.
STRICTER: dict[str, tuple[Any, ...]] = {"podSecurityStandard": ("restricted",)}


class TenantSecurity(ConfigModel):
    """One team's entry of `platform.approvedTenantSecurity`: the values it may have instead of the
    safe ones (unset: the safe value only)."""

    isolation: Literal["project", "shared"] | None = None
    """The team's tenant may have this isolation (shared: in the environment's project); unset: project only."""
    load_balancer_services: bool | None = None
    """true: the team's tenant may create Google load balancers for its Services; unset: false only."""
    node_metadata: Literal["concealed", "exposed"] | None = None
    """exposed: pods on the team's nodes may reach the metadata server (the node identity's token); unset: concealed only."""
    pod_security_standard: Literal["baseline", "restricted", "privileged"] | None = None
    """privileged: the team's tenant may enforce no Pod Security Standard; unset: baseline or restricted only."""


class ControlPlaneMaximum(ConfigModel):
    """`platform.controlPlaneMaximum`: the most one tenant's control-plane pod may request or be
    limited to, so that no tenant's control plane can take the host cluster's system nodes (which
    run every tenant's) from the others."""

    cpu: str = "4"
    """The most CPU, a Kubernetes quantity like 4 or 4000m."""
    memory: str = "8Gi"
    """The most memory, a Kubernetes quantity like 8Gi."""


def security_settings(tenant: Any) -> dict[str, Any]:
    """A tenant's security settings by config key (a config.tenant.Tenant)."""
    return {key: getattr(tenant, attribute) for key, (attribute, _) in SETTINGS.items()}


def unsafe_settings(tenant: Any) -> dict[str, Any]:
    """The settings of a tenant that leave their safe value."""
    return {
        key: value
        for key, value in security_settings(tenant).items()
        if value != SETTINGS[key][1] and value not in STRICTER.get(key, ())
    }


def check_tenant_security(path: str, tenant: Any, facts: Any, others: list, problems: Problems) -> None:
    """The checks of this module for one tenant against its environment (`facts`, a
    config.facts.EnvironmentFacts) and the other tenants of the environment (`others`, TenantClaims)."""
    with problems.checking(f"{path}.isolation"):
        if tenant.isolation == SHARED:
            for key, attribute, what in (
                ("persistentDisks", "persistent_disks", "compute.storageAdmin, which reaches every disk of the project, the host cluster's volumes included"),
                ("loadBalancerServices", "load_balancer_services", "compute.loadBalancerAdmin and firewall rights on every network of the project, the host cluster's included"),
            ):
                # A value the stack sets: persistentDisks defaults to false with isolation: shared.
                if getattr(tenant, attribute) is True and attribute in tenant.model_fields_set:
                    problems.add(
                        f"{path}.{key}",
                        f"true is not allowed with isolation: shared: the tenant's node identity would hold {what} (the environment's "
                        "project holds every tenant's control-plane volumes); allowed: false, or isolation: project for a project of the team's own",
                    )
    with problems.checking(f"{path}.isolation"):
        if not facts.allow_shared_with_project_tenants:
            _check_shared_beside_project(path, tenant, others, facts, problems)
    _check_approved(path, tenant, facts, problems)


def _check_shared_beside_project(path: str, tenant: Any, others: list, facts: Any, problems: Problems) -> None:
    shared = tenant.isolation == SHARED
    opposite = []
    for other in others:
        with problems.checking(f"{path}.isolation"):
            if bool(other.shared) != shared:
                opposite.append(f"{other.name} ({other.source})")
    if not opposite:
        return
    if shared:
        why = f"{', '.join(opposite)} {'has a project of its own' if len(opposite) == 1 else 'have projects of their own'}"
    else:
        why = f"{', '.join(opposite)} share{'s' if len(opposite) == 1 else ''} the environment's project"
    problems.add(
        f"{path}.isolation",
        f"{tenant.isolation} is not allowed beside tenants of the other kind in environment {facts.environment}: {why}, and a shared "
        f"tenant's node identity reads every VM of project {facts.project} (other shared teams' join data, the host cluster's nodes, "
        "which run every tenant's control plane); give every tenant a project of its own, or accept it with "
        "platform.allowSharedWithProjectTenants: true in the environment stack (docs/security.md \"Shared and project tenants\" says what shared tenants reach)",
    )


def _check_approved(path: str, tenant: Any, facts: Any, problems: Problems) -> None:
    """In prod, each setting beyond its safe value is one the environment approves for the team."""
    for key, (attribute, safe) in SETTINGS.items():
        with problems.checking(f"{path}.{key}"):
            value = getattr(tenant, attribute)
            if facts.environment != PROD or value == safe or value in STRICTER.get(key, ()):
                continue
            if facts.approved_tenant_security.get(tenant.name, {}).get(key) == value:
                continue
            problems.add(
                f"{path}.{key}",
                f"{as_yaml(value)} needs the environment's approval in {facts.environment}: set "
                f"platform.approvedTenantSecurity.{tenant.name}.{key}: {as_yaml(value)} in the environment stack (a change its "
                f"reviewers approve), or keep {as_yaml(safe)}",
            )


def as_yaml(value: Any) -> str:
    """A setting as a stack file spells it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_approvals(approvals: dict[str, TenantSecurity], tenant_names: list[str] | None, problems: Problems) -> None:
    """`platform.approvedTenantSecurity`: keys are team names; `tenant_names`, when known, the
    tenants of the environment (an approval for no tenant is a typo or a leftover)."""
    for team in approvals:
        if tenant_names is not None and team not in tenant_names:
            problems.add(
                f"platform.approvedTenantSecurity.{team}",
                f"names no tenant of this environment; tenants: {', '.join(sorted(tenant_names)) or 'none'}",
            )
