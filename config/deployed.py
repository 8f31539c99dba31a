"""A tenant stack against the environment as deployed: `pulumi up` of a team stack reads its
environment's exported facts (a StackReference) and checks itself against them before anything
is created (__main__.py). Split from config/stack.py, which checks the stack files."""

from __future__ import annotations

from typing import Any

from .errors import ConfigError, Problem, Problems
from .facts import EnvironmentFacts
from .stack import TenantStack
from .tenant import check_tenant


# Facts a tenant stack takes from the environment's stack file and builds GCP objects and IAM
# bindings with: they must match the deployed environment exactly.
IDENTITY_FACTS = (
    "environment",
    "project",
    "region",
    "nodeProviderName",
    "platformServiceAccount",
    "tenantSubnetRole",
    "tenantDiskRole",
    "tenantLoadBalancerRole",
    "vclusterVersion",
    "legacyInfrastructure",
    "roleIdPrefix",
    "platformRole",
    "tenantProjects",
    "hostCluster",
    "monitoringEnabled",
)


def check_against_deployed(tenant_stack: TenantStack, deployed: dict[str, Any]) -> list[str]:
    """Check a tenant stack against what its environment stack actually exported.

    Raises ConfigError with the same messages as the static checks when the deployed environment
    cannot serve the tenant (e.g. it does not offer the GPU type yet). Returns warnings for
    differences that do not block the tenant (the environment's stack file is ahead of or behind
    its deployment).
    """
    try:
        facts = EnvironmentFacts.from_dict(deployed)
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(
            [Problem("environmentStack", f"{tenant_stack.environment_stack} exports no usable environmentFacts ({e!r}); run `pulumi up` on it first")],
            tenant_stack.stack,
        ) from None
    problems = Problems()
    tenant = tenant_stack.tenant.tenant
    deployed_values, file_values = facts.to_dict(), tenant_stack.facts.to_dict()
    # The tenant is built from the stack file: where it names the project, the platform's identity
    # or the roles, it must be what is deployed, or the tenant would be built for another place.
    for key in IDENTITY_FACTS:
        if deployed_values[key] != file_values[key]:
            problems.add(
                "environmentStack",
                f"{tenant_stack.environment_stack} is deployed with {key} {deployed_values[key]!r}, but its stack file in this "
                f"repo says {file_values[key]!r}; deploy the environment stack (or update this checkout) first",
            )
    # The deployed environment lists its inline tenants; other teams' stacks were checked statically.
    check_tenant("tenant", tenant, facts, list(facts.tenants), problems)
    problems.raise_if_any(tenant_stack.stack)
    warnings = []
    if deployed_values != file_values:
        differing = sorted(k for k, v in deployed_values.items() if file_values.get(k) != v)
        warnings.append(
            f"environment {tenant_stack.environment_stack} is deployed with a different configuration than its stack file "
            f"in this repo ({', '.join(differing)} differ); the tenant was checked against both. "
            "Deploy the environment stack to bring them in line."
        )
    return warnings
