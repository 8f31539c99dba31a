"""Turn a stack's configuration into a typed EnvironmentStack or TenantStack, or one ConfigError
listing every problem. Pure: registers nothing, so a bad config creates nothing.

Which kind of stack it is follows from the config: `gpu-platform:environmentStack` set means a
team's tenant stack, otherwise an environment stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .catalog import Catalog, load_catalog
from .environment import (
    ENVIRONMENTS,
    ClusterConfig,
    NodeProviderConfig,
    PlatformConfig,
    check_cluster,
    check_node_provider,
    check_platform,
    check_region,
    environment_warnings,
    resolve_cluster_defaults,
    resolve_platform_defaults,
)
from .errors import ConfigError, Problem, Problems, problems_from_validation
from .facts import EnvironmentFacts, TenantClaim
from .node_types import NodeTypeOffer, generate_node_types
from .permissions import TENANT_DISKS, TENANT_LOAD_BALANCERS, TENANT_SUBNET_USE, role_id
from .quota import QuotaLine, TenantEntry, quota_lines, team_stack_tenants
from .stack_files import StackFileError, list_stacks, read_stack_values, structured
from .tenant import Tenant, TenantPlan, check_tenant, plan_tenant

NS = "gpu-platform"
ENVIRONMENT_KEYS = ("cluster", "platform", "nodeProvider", "tenants")
TENANT_KEYS = ("environmentStack", "tenant")
# Keys the program reads itself (secrets are read by __main__, never parsed here).
KNOWN_KEYS = {f"{NS}:{k}" for k in ("environment", "platformAdminPassword", *ENVIRONMENT_KEYS, *TENANT_KEYS)}


@dataclass(frozen=True)
class EnvironmentStack:
    stack: str
    environment: str
    project: str
    region: str
    cluster: ClusterConfig
    platform: PlatformConfig
    node_provider: NodeProviderConfig
    offer: NodeTypeOffer
    facts: EnvironmentFacts
    tenants: tuple[TenantPlan, ...]
    warnings: tuple[str, ...] = ()
    quota: tuple[QuotaLine, ...] = ()  # every tenant of the environment, team stacks included


@dataclass(frozen=True)
class TenantStack:
    stack: str
    environment: str
    environment_stack: str  # <org>/<project>/<stack>
    facts: EnvironmentFacts  # from the environment's stack file
    tenant: TenantPlan
    warnings: tuple[str, ...] = ()
    quota: tuple[QuotaLine, ...] = ()  # every tenant of the environment, this one included


def load_stack(values: dict[str, Any], *, stack: str, project_dir: Path, catalog: Catalog | None = None) -> EnvironmentStack | TenantStack:
    catalog = catalog or load_catalog()
    values = {k: structured(v) for k, v in values.items()}
    problems = Problems()
    environment = values.get(f"{NS}:environment")
    if environment not in ENVIRONMENTS:
        problems.add("environment", f"{environment!r} is not allowed; allowed: {', '.join(ENVIRONMENTS)}")
    if values.get(f"{NS}:environmentStack"):
        result = _load_tenant_stack(values, stack, project_dir, catalog, problems)
    else:
        result = _load_environment_stack(values, stack, project_dir, catalog, problems)
    problems.extend(unknown_keys(set(values), values))
    problems.raise_if_any(stack)
    assert result is not None
    return result


def unknown_keys(keys: set[str], values: dict[str, Any]) -> list[Problem]:
    """Keys in our namespace that the program does not read: typos, reported rather than ignored.
    The key named by platform.licenseTokenKey is known."""
    platform = values.get(f"{NS}:platform")
    license_key = platform.get("licenseTokenKey") if isinstance(platform, dict) else None
    known = KNOWN_KEYS | ({f"{NS}:{license_key}"} if license_key else set())
    names = ", ".join(sorted(k.split(":", 1)[1] for k in known))
    return [Problem(k.split(":", 1)[1], f"unknown key; known: {names}") for k in sorted(keys) if k.startswith(f"{NS}:") and k not in known]


def _load_environment_stack(values, stack, project_dir, catalog, problems) -> EnvironmentStack | None:
    environment = values.get(f"{NS}:environment")
    project = values.get("gcp:project")
    region = values.get("gcp:region")
    if not project:
        problems.add("gcp:project", "required for an environment stack (pulumi config set gcp:project <project-id>)")
    if not region:
        problems.add("gcp:region", "required for an environment stack (pulumi config set gcp:region <region>)")
    else:
        check_region(region, problems)
    for key in TENANT_KEYS:
        if values.get(f"{NS}:{key}"):
            problems.add(key, "belongs to a tenant stack; set environmentStack too, or move the tenant into `tenants`")

    cluster = _parse("cluster", ClusterConfig, values.get(f"{NS}:cluster") or {}, problems)
    platform = _parse("platform", PlatformConfig, values.get(f"{NS}:platform") or {}, problems)
    node_provider = _parse("nodeProvider", NodeProviderConfig, values.get(f"{NS}:nodeProvider"), problems)
    raw_tenants = values.get(f"{NS}:tenants") or []
    if not isinstance(raw_tenants, list):
        problems.add("tenants", f"expected a list of tenants, got {type(raw_tenants).__name__}")
        raw_tenants = []
    tenants = [_parse(f"tenants[{i}]", Tenant, t, problems) for i, t in enumerate(raw_tenants)]

    # Each section is checked on its own, so one broken section does not hide another's problems.
    before = len(problems.items)
    known_env = environment in ENVIRONMENTS
    if cluster is not None and region and known_env:
        cluster = resolve_cluster_defaults(environment, region, cluster, node_provider.zones if node_provider else ())
        check_cluster(environment, region, cluster, catalog, problems)
    if platform is not None and known_env:
        platform = resolve_platform_defaults(environment, platform)
        check_platform(platform, problems)
        if platform.license_token_key and f"{NS}:{platform.license_token_key}" not in values:
            problems.add(
                "platform.licenseTokenKey",
                f"names {platform.license_token_key!r}, which is not set; "
                f"pulumi config set --secret {platform.license_token_key} <token>",
            )
    if node_provider is not None and region:
        check_node_provider(region, node_provider, catalog, problems)
        if node_provider.quota_policy is None:
            node_provider = node_provider.model_copy(update={"quota_policy": "fail" if environment == "prod" else "warn"})
    environment_sound = len(problems.items) == before and None not in (cluster, platform, node_provider) and project and region and known_env

    quota: tuple[QuotaLine, ...] = ()
    quota_warnings: tuple[str, ...] = ()
    if environment_sound:
        offer = _offer(region, node_provider, catalog)
        facts = _facts(environment, project, region, cluster, platform, node_provider, offer, tenants, catalog)
        for i, tenant in enumerate(tenants):
            if tenant is not None:
                # Earlier entries only: a collision is reported once, at the entry that causes it.
                others = [TenantClaim(t.name, t.network.cidr, f"tenants[{j}]") for j, t in enumerate(tenants[:i]) if t is not None]
                check_tenant(f"tenants[{i}]", tenant, facts, others, problems)
        if not problems:
            entries = [TenantEntry(t, f"tenants[{i}]") for i, t in enumerate(tenants) if t is not None]
            entries += team_stack_tenants(project_dir, environment_stack_name=stack)
            quota = quota_lines(entries, facts)
            quota_warnings = _quota_verdict(quota, node_provider.quota_policy, lambda line: f"nodeProvider.gpuQuota.{line.gpu}", problems)
    elif any(t is not None for t in tenants):
        problems.note("tenants were checked for structure only; they are checked against the environment once its own problems are fixed")
    if problems:
        return None
    return EnvironmentStack(
        stack=stack,
        environment=environment,
        project=project,
        region=region,
        cluster=cluster,
        platform=platform,
        node_provider=node_provider,
        offer=offer,
        facts=facts,
        tenants=tuple(plan_tenant(t, facts) for t in tenants if t is not None),
        warnings=tuple(environment_warnings(environment, cluster, node_provider)) + quota_warnings,
        quota=quota,
    )


def _load_tenant_stack(values, stack, project_dir, catalog, problems) -> TenantStack | None:
    environment = values.get(f"{NS}:environment")
    reference = values.get(f"{NS}:environmentStack")
    for key in ENVIRONMENT_KEYS:
        if values.get(f"{NS}:{key}"):
            problems.add(key, "belongs to an environment stack; a tenant stack (environmentStack is set) configures only `tenant`")
    tenant = _parse("tenant", Tenant, values.get(f"{NS}:tenant"), problems)

    parts = str(reference).split("/")
    if len(parts) != 3 or not all(parts):
        problems.add("environmentStack", f"{reference!r} must be a fully qualified stack name <org>/<project>/<stack>")
        return None
    env_stack = parts[2]
    if env_stack == stack:
        problems.add("environmentStack", "a tenant stack cannot reference itself")
        return None
    try:
        env_values = read_stack_values(project_dir, env_stack)
    except StackFileError as e:
        problems.add("environmentStack", f"{reference}: tenant stacks are checked against the environment's stack file ({e})")
        return None
    try:
        env = load_stack(env_values, stack=env_stack, project_dir=project_dir, catalog=catalog)
    except ConfigError as e:
        problems.add("environmentStack", f"{reference}: its stack file has problems of its own:\n      " + "\n      ".join(map(str, e.problems)))
        return None
    if not isinstance(env, EnvironmentStack):
        problems.add("environmentStack", f"{reference} is itself a tenant stack")
        return None
    if environment != env.environment:
        problems.add("environment", f"{environment!r} differs from the environment stack's {env.environment!r}")
    if tenant is None:
        return None
    others = list(env.facts.tenants) + _tenant_stack_claims(project_dir, environment_stack_name=env_stack, exclude=stack)
    check_tenant("tenant", tenant, env.facts, others, problems)
    if problems:
        return None
    entries = [TenantEntry(t.tenant, f"tenants[{i}] of {env_stack}") for i, t in enumerate(env.tenants)]
    entries += team_stack_tenants(project_dir, environment_stack_name=env_stack, exclude=stack)
    quota = quota_lines([*entries, TenantEntry(tenant, f"stack {stack}")], env.facts)
    warnings = _quota_verdict(quota, env.node_provider.quota_policy, lambda line: "tenant.gpuPools", problems)
    if problems:
        return None
    return TenantStack(stack, env.environment, reference, env.facts, plan_tenant(tenant, env.facts), warnings, quota)


def _quota_verdict(quota: tuple[QuotaLine, ...], policy: str | None, key, problems: Problems) -> tuple[str, ...]:
    """Warnings for quota lines the tenants exceed together, or problems under quotaPolicy fail."""
    exceeded = [line for line in quota if line.exceeded]
    if policy == "fail":
        for line in exceeded:
            problems.add(key(line), f"{line.message()}; nodeProvider.quotaPolicy is fail (raise the quota or lower the tenants' maxGpus)")
        return ()
    return tuple(line.message() for line in exceeded)


def _tenant_stack_claims(project_dir: Path, *, environment_stack_name: str, exclude: str) -> list[TenantClaim]:
    """Tenants of other team stacks in this repo that use the same environment."""
    claims = []
    for other in list_stacks(project_dir):
        if other == exclude:
            continue
        try:
            values = {k: structured(v) for k, v in read_stack_values(project_dir, other).items()}
        except StackFileError:
            continue
        reference = str(values.get(f"{NS}:environmentStack") or "")
        tenant = values.get(f"{NS}:tenant")
        if reference.split("/")[-1] == environment_stack_name and isinstance(tenant, dict):
            cidr = (tenant.get("network") or {}).get("cidr")
            if tenant.get("name") and cidr:
                claims.append(TenantClaim(tenant["name"], cidr, f"stack {other} (Pulumi.{other}.yaml)"))
    return claims


def _facts(environment, project, region, cluster, platform, node_provider, offer, tenants, catalog) -> EnvironmentFacts:
    return EnvironmentFacts(
        environment=environment,
        project=project,
        region=region,
        zones=node_provider.zones,
        node_provider_name=node_provider.name,
        gpu_types=node_provider.gpu_types,
        spot=node_provider.spot,
        gpu_quota=dict(node_provider.gpu_quota),
        node_types=offer.node_types,
        reserved_cidrs=_cluster_ranges(cluster),
        tenants=tuple(TenantClaim(t.name, t.network.cidr, "the environment's tenants") for t in tenants if t is not None),
        vcluster_version=platform.vcluster_version,
        platform_service_account=f"{platform.service_account_id}@{project}.iam.gserviceaccount.com",
        tenant_subnet_role=f"projects/{project}/roles/{role_id(platform.role_id_prefix, TENANT_SUBNET_USE)}",
        tenant_disk_role=f"projects/{project}/roles/{role_id(platform.role_id_prefix, TENANT_DISKS)}",
        tenant_load_balancer_role=f"projects/{project}/roles/{role_id(platform.role_id_prefix, TENANT_LOAD_BALANCERS)}",
        legacy_infrastructure=node_provider.legacy_infrastructure,
        prices_read=catalog.prices[region].read if region in catalog.prices else None,
    )


def _offer(region: str, np: NodeProviderConfig, catalog: Catalog) -> NodeTypeOffer:
    return generate_node_types(
        catalog=catalog,
        region=region,
        zones=np.zones,
        gpu_types=np.gpu_types,
        spot=np.spot,
        gpu_quota=np.gpu_quota,
        cpu_machine_types=np.cpu_machine_types,
        gpu_disk=(np.gpu_disk.size_gb, np.gpu_disk.type),
        cpu_disk=(np.cpu_disk.size_gb, np.cpu_disk.type),
        gpu_image_family=np.gpu_image_family,
        prices=np.prices,
    )


def _cluster_ranges(cluster: ClusterConfig) -> tuple[tuple[str, str], ...]:
    ranges = [
        ("the GKE node subnet (cluster.network.nodesCidr)", cluster.network.nodes_cidr),
        ("the GKE pod range (cluster.network.podsCidr)", cluster.network.pods_cidr),
        ("the GKE service range (cluster.network.servicesCidr)", cluster.network.services_cidr),
    ]
    if cluster.private_nodes.enabled:
        ranges.append(("the GKE control plane range (cluster.privateNodes.masterCidr)", cluster.private_nodes.master_cidr))
    return tuple(ranges)


def _parse(path: str, model: type[BaseModel], raw: Any, problems: Problems):
    if raw is None:
        problems.add(path, "required")
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        problems.extend(problems_from_validation(path, model, e))
        return None


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
