"""Turn a stack's configuration into a typed EnvironmentStack or TenantStack, or one ConfigError
listing every problem. Pure: registers nothing, so a bad config creates nothing.

Which kind of stack it is follows from the config: `gpu-platform:environmentStack` set means a
team's tenant stack, otherwise an environment stack.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import fabric_manager
from .catalog import Catalog, load_catalog
from .environment import (
    ENVIRONMENTS,
    ClusterConfig,
    NodeProviderConfig,
    PlatformConfig,
    check_cluster,
    check_node_provider,
    check_region,
    environment_warnings,
    image_family_warnings,
    resolve_cluster_defaults,
    resolve_platform_defaults,
)
from .base import parse, parse_cidr
from .errors import Broken, ConfigError, Problem, Problems, derived, shown
from .facts import EnvironmentFacts, TenantClaim
from .isolation import SHARED, Placement, check_tenant_projects, placement, project_id_problem, shared_warning, tenant_roles
from .monitoring import MonitoringConfig, check_monitoring, view_name
from .namespaces import namespace_problems
from .node_types import NodeTypeOffer, generate_node_types
from .platform_access import KEY as ADMIN_PASSWORD_KEY
from .platform_access import check_no_admin_password
from .platform import check_platform
from .quota import QuotaLine, TenantEntry, quota_lines, team_stack_tenants
from .stack_files import StackFileError, list_stacks, read_stack_values, structured
from .stack_keys import unknown_gcp_keys
from .tenant import MAX_TENANT_NAME, Tenant, TenantPlan, check_tenant, plan_tenant
from .tenant_security import check_approvals

NS = "gpu-platform"
ENVIRONMENT_KEYS = ("cluster", "platform", "nodeProvider", "tenants", "monitoring")
TENANT_KEYS = ("environmentStack", "tenant")
# Object-typed keys and the model of their value (of each item, for `tenants`); Pulumi.yaml's
# descriptions list exactly these models' keys.
CONFIG_MODELS = {
    "cluster": ClusterConfig,
    "platform": PlatformConfig,
    "nodeProvider": NodeProviderConfig,
    "tenants": Tenant,
    "tenant": Tenant,
    "monitoring": MonitoringConfig,
}
# Keys the program reads itself (secrets are read by __main__, never parsed here).
# platformAdminPassword is known, and refused with a message of its own (config/platform_access.py).
KNOWN_KEYS = {f"{NS}:{k}" for k in ("environment", ADMIN_PASSWORD_KEY, *ENVIRONMENT_KEYS, *TENANT_KEYS)}


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
    monitoring: MonitoringConfig = MonitoringConfig()
    # The tenants of this repo's team stacks that use this environment, planned against it (those
    # that pass its checks): the environment's alert policies and cost view cover them too.
    team_stack_tenants: tuple[TenantPlan, ...] = ()


@dataclass(frozen=True)
class TenantStack:
    stack: str
    environment: str
    environment_stack: str  # <org>/<project>/<stack>
    facts: EnvironmentFacts  # from the environment's stack file
    tenant: TenantPlan
    warnings: tuple[str, ...] = ()
    quota: tuple[QuotaLine, ...] = ()  # every tenant of the environment, this one included

    @property
    def placement(self) -> Placement:
        t = self.tenant.tenant
        where = placement(t, environment=self.facts.environment, host_project=self.facts.project, tenant_projects=self.facts.tenant_projects)
        assert where is not None, "check_placement refuses a tenant without a project"
        return where


def load_stack(
    values: dict[str, Any],
    *,
    stack: str,
    project_dir: Path,
    catalog: Catalog | None = None,
    team_stacks: bool = True,
) -> EnvironmentStack | TenantStack:
    """`team_stacks`: an environment stack checks its inline tenants against the team stacks of
    `project_dir` that use it (names, CIDRs, GCP projects). A team stack loading its environment
    passes False: it checks itself against the environment's tenants and the other team stacks,
    each problem at its own key, and another team's mistake does not hide its environment."""
    catalog = catalog or load_catalog()
    password = values.get(f"{NS}:{ADMIN_PASSWORD_KEY}")  # as given: never parsed, never quoted
    values = {k: structured(v) for k, v in values.items()}
    problems = Problems()
    # First and outside every other check, so it is reported whatever else is wrong.
    check_no_admin_password(password, problems)
    environment = values.get(f"{NS}:environment")
    if not isinstance(environment, str) or environment not in ENVIRONMENTS:
        problems.add("environment", f"{shown(environment)} is not allowed; allowed: {', '.join(ENVIRONMENTS)}")
        environment = Broken("environment")
    # A last guard: the checks guard themselves key by key, so this only catches a check that
    # forgot to; the problem that made the value broken is reported either way.
    with problems.checking("(the remaining checks)"):
        if values.get(f"{NS}:environmentStack"):
            result = _load_tenant_stack(values, environment, stack, project_dir, catalog, problems)
        else:
            result = _load_environment_stack(values, environment, stack, project_dir, catalog, problems, team_stacks)
    problems.extend(unknown_keys(set(values), values))
    misspelt, foreign = namespace_problems(set(values))
    problems.extend(misspelt)
    problems.raise_if_any(stack)
    assert result is not None
    return dataclasses.replace(result, warnings=(*foreign, *result.warnings)) if foreign else result


def secret_keys(values: dict[str, Any]) -> set[str]:
    """The keys whose values are secrets however the stack file gives them: the license token's
    (the key platform.licenseTokenKey names, which __main__ reads with require_secret) and the
    refused admin password."""
    platform = structured(values.get(f"{NS}:platform"))
    license_key = platform.get("licenseTokenKey") if isinstance(platform, dict) else None
    return {f"{NS}:{ADMIN_PASSWORD_KEY}"} | ({f"{NS}:{license_key}"} if isinstance(license_key, str) and license_key else set())


def unknown_keys(keys: set[str], values: dict[str, Any]) -> list[Problem]:
    """Keys in our namespace that the program does not read: typos, reported rather than ignored.
    The key named by platform.licenseTokenKey is known."""
    known = KNOWN_KEYS | secret_keys(values)
    names = ", ".join(sorted(k.split(":", 1)[1] for k in known))
    found = [Problem(k.split(":", 1)[1], f"unknown key; known: {names}") for k in sorted(keys) if k.startswith(f"{NS}:") and k not in known]
    return found + unknown_gcp_keys(keys)


def _load_environment_stack(values, environment, stack, project_dir, catalog, problems, team_stacks) -> EnvironmentStack | None:
    project = _gcp_value(values, "gcp:project", "<project-id>", problems)
    if not isinstance(project, Broken) and (wrong := project_id_problem(project)):
        # Google's rules for project ids (https://cloud.google.com/resource-manager/docs/creating-managing-projects,
        # "Before you begin": 6 to 30 lowercase letters, digits or hyphens, starting with a letter, no trailing
        # hyphen, no restricted strings): checked here, before any name or role is derived from it.
        problems.add("gcp:project", f"{project!r} {wrong}")
        project = Broken("gcp:project")
    region = _gcp_value(values, "gcp:region", "<region>", problems)
    if not isinstance(region, Broken) and not check_region(region, problems):
        region = Broken("gcp:region")
    for key in TENANT_KEYS:
        if values.get(f"{NS}:{key}"):
            problems.add(key, "belongs to a tenant stack; set environmentStack too, or move the tenant into `tenants`")

    cluster = parse("cluster", ClusterConfig, values.get(f"{NS}:cluster") or {}, problems)
    platform = parse("platform", PlatformConfig, values.get(f"{NS}:platform") or {}, problems)
    node_provider = parse("nodeProvider", NodeProviderConfig, values.get(f"{NS}:nodeProvider"), problems)
    monitoring = parse("monitoring", MonitoringConfig, values.get(f"{NS}:monitoring") or {}, problems)
    raw_tenants = values.get(f"{NS}:tenants") or []
    if not isinstance(raw_tenants, list):
        problems.add("tenants", f"expected a list of tenants, got {shown(raw_tenants)}")
        raw_tenants = []
    tenants = [parse(f"tenants[{i}]", Tenant, t, problems, when_missing="expected a tenant (a mapping), got nothing") for i, t in enumerate(raw_tenants)]

    # Each section is checked with what parsed; checks that need a broken key say so in a note.
    cluster = resolve_cluster_defaults(environment, region, cluster, derived(lambda: node_provider.zones))
    with problems.checking("cluster"):  # each section's checks guard themselves; this is a safety net
        check_cluster(environment, region, cluster, catalog, problems)
    platform = resolve_platform_defaults(environment, platform)
    with problems.checking("platform"):
        check_platform(environment, platform, problems)
    with problems.checking("platform.tenantProjects"):
        if platform.tenant_projects is not None:
            check_tenant_projects(environment, platform.tenant_projects, MAX_TENANT_NAME, problems)
    with problems.checking("platform.licenseTokenKey"):
        if platform.license_token_key and f"{NS}:{platform.license_token_key}" not in values:
            problems.add(
                "platform.licenseTokenKey",
                f"names {platform.license_token_key!r}, which is not set; "
                f"pulumi config set --secret {platform.license_token_key} <token>",
            )
    with problems.checking("nodeProvider"):
        check_node_provider(region, node_provider, catalog, problems)
    with problems.checking("monitoring"):
        check_monitoring(monitoring, project, problems)
    if not isinstance(node_provider, Broken):
        policy = derived(lambda: node_provider.quota_policy or ("fail" if environment == "prod" else "warn"))
        node_provider = node_provider.model_copy(update={"quota_policy": policy})

    # Tenants are judged only by facts whose keys are sound; the rest waits (see the notes).
    offer = problems.derive(lambda: _offer(region, node_provider, catalog), "gcp:region", "nodeProvider")
    facts = _facts(stack, environment, project, region, cluster, platform, node_provider, offer, tenants, catalog, problems, monitoring)
    # The team stacks in this repo that use this environment: an inline tenant that takes one's
    # name, CIDR or project fails here too, not only in the team stack's own plan.
    team_claims = _tenant_stack_claims(project_dir, facts, environment_stack_name=stack, exclude=None) if team_stacks else []
    claims = [_claim(t, f"tenants[{j}]", f"tenants[{j}]", facts) for j, t in enumerate(tenants)]
    with problems.checking("platform.approvedTenantSecurity"):
        names = [c.name for c in [*claims, *team_claims] if not isinstance(c.name, Broken)] if team_stacks else None
        check_approvals(platform.approved_tenant_security, names, problems)
    for i, tenant in enumerate(tenants):
        # Earlier entries only: a collision between inline tenants is reported once, at the entry
        # that causes it. A suggested CIDR keeps clear of every range claimed anywhere.
        with problems.checking(f"tenants[{i}]"):
            check_tenant(
                f"tenants[{i}]", tenant, facts, [*claims[:i], *team_claims], problems, claimed=[*claims[:i], *claims[i + 1 :], *team_claims]
            )
    quota: tuple[QuotaLine, ...] = ()
    quota_warnings: tuple[str, ...] = ()
    team_plans: tuple[TenantPlan, ...] = ()
    if not problems:
        entries = [TenantEntry(t, f"tenants[{i}]") for i, t in enumerate(tenants)]
        team_entries = team_stack_tenants(project_dir, environment_stack_name=stack)
        entries += team_entries
        quota = quota_lines(entries, facts)
        if team_stacks:
            team_plans = _team_stack_plans(team_entries, facts)
        quota_warnings = _quota_verdict(quota, node_provider.quota_policy, lambda line: f"nodeProvider.gpuQuota.{line.gpu}", problems)
    elif not isinstance(policy := derived(lambda: node_provider.quota_policy), Broken) and policy == "fail":
        problems.note("the GPU quota of all tenants together (quotaPolicy fail) is checked once the problems above are fixed")
    if problems:
        return None
    plans = tuple(plan_tenant(t, facts) for t in tenants)
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
        tenants=plans,
        warnings=(
            *environment_warnings(environment, cluster, node_provider),
            *image_family_warnings(node_provider, catalog),
            *(shared_warning(f"tenants[{i}]", t.name, project) for i, t in enumerate(tenants) if t.isolation == SHARED),
            *(w for i, plan in enumerate(plans) for w in fabric_manager.warnings(f"tenants[{i}]", plan)),
            *quota_warnings,
        ),
        quota=quota,
        monitoring=monitoring,
        team_stack_tenants=team_plans,
    )


def _gcp_value(values: dict[str, Any], key: str, placeholder: str, problems: Problems) -> Any:
    value = values.get(key)
    if not value:
        problems.add(key, f"required for an environment stack (pulumi config set {key} {placeholder})")
    elif not isinstance(value, str):
        problems.add(key, f"expected a string, got {shown(value)}")
    else:
        return value
    return Broken(key)


def _load_tenant_stack(values, environment, stack, project_dir, catalog, problems) -> TenantStack | None:
    for key in ENVIRONMENT_KEYS:
        if values.get(f"{NS}:{key}"):
            problems.add(key, "belongs to an environment stack; a tenant stack (environmentStack is set) configures only `tenant`")
    tenant = parse("tenant", Tenant, values.get(f"{NS}:tenant"), problems)
    reference = values.get(f"{NS}:environmentStack")
    env = _environment_of(reference, stack, project_dir, catalog, problems)

    if isinstance(env, EnvironmentStack):
        with problems.checking("environment"):
            if environment != env.environment:
                problems.add("environment", f"{environment!r} differs from the environment stack's {env.environment!r}")
        facts, inline = env.facts, list(env.facts.tenants)
    else:
        # Without its environment the tenant is still checked on its own and against the other
        # team stacks; whatever needs the environment waits for environmentStack (see the notes).
        facts = unknown_facts(env.broken_path)
        inline = [TenantClaim(env, env, "the environment's tenants", env, env)]
    others = inline
    if isinstance(reference, str) and len(reference.split("/")) == 3:
        others = inline + _tenant_stack_claims(project_dir, facts, environment_stack_name=reference.split("/")[2], exclude=stack)
    with problems.checking("tenant"):
        check_tenant("tenant", tenant, facts, others, problems)
    if problems:
        return None
    env_stack = reference.split("/")[2]
    entries = [TenantEntry(t.tenant, f"tenants[{i}] of {env_stack}") for i, t in enumerate(env.tenants)]
    entries += team_stack_tenants(project_dir, environment_stack_name=env_stack, exclude=stack)
    quota = quota_lines([*entries, TenantEntry(tenant, f"stack {stack}")], env.facts)
    warnings = _quota_verdict(quota, env.node_provider.quota_policy, lambda line: "tenant.gpuPools", problems)
    if problems:
        return None
    plan = plan_tenant(tenant, env.facts)
    warnings = (*fabric_manager.warnings("tenant", plan), *warnings)
    if tenant.isolation == SHARED:
        warnings = (shared_warning("tenant", tenant.name, env.project), *warnings)
    return TenantStack(stack, env.environment, reference, env.facts, plan, warnings, quota)


def _environment_of(reference: Any, stack: str, project_dir: Path, catalog: Catalog, problems: Problems) -> EnvironmentStack | Broken:
    """The environment stack a tenant stack names, loaded from its stack file in this repo."""
    parts = reference.split("/") if isinstance(reference, str) else []
    if len(parts) != 3 or not all(parts):
        problems.add("environmentStack", f"{shown(reference)} must be a fully qualified stack name <org>/<project>/<stack>")
        return Broken("environmentStack")
    env_stack = parts[2]
    if env_stack == stack:
        problems.add("environmentStack", "a tenant stack cannot reference itself")
        return Broken("environmentStack")
    try:
        env_values = read_stack_values(project_dir, env_stack)
    except StackFileError as e:
        problems.add("environmentStack", f"{reference}: tenant stacks are checked against the environment's stack file ({e})")
        return Broken("environmentStack")
    try:
        env = load_stack(env_values, stack=env_stack, project_dir=project_dir, catalog=catalog, team_stacks=False)
    except ConfigError as e:
        problems.add("environmentStack", f"{reference}: its stack file has problems of its own:\n      " + "\n      ".join(map(str, e.problems)))
        return Broken("environmentStack")
    if not isinstance(env, EnvironmentStack):
        problems.add("environmentStack", f"{reference} is itself a tenant stack")
        return Broken("environmentStack")
    return env


def _claim(tenant: Any, path: str, source: str, facts: EnvironmentFacts) -> TenantClaim:
    """What a tenant (as far as it parsed) claims in its environment: its name, its network and
    its own GCP project (None when shared). A CIDR that is not a valid network is broken: others
    are not compared with it."""
    cidr = derived(lambda: tenant.network.cidr)
    if not isinstance(cidr, Broken) and parse_cidr(cidr) is None:
        cidr = Broken(f"{path}.network.cidr")

    def project() -> str | None:
        where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        return None if where is None or where.shared else where.project

    return TenantClaim(derived(lambda: tenant.name), cidr, source, derived(project), derived(lambda: tenant.isolation == SHARED))


def _quota_verdict(quota: tuple[QuotaLine, ...], policy: str | None, key, problems: Problems) -> tuple[str, ...]:
    """Warnings for quota lines the tenants exceed together, or problems under quotaPolicy fail."""
    exceeded = [line for line in quota if line.exceeded]
    if policy == "fail":
        for line in exceeded:
            problems.add(key(line), f"{line.message()}; nodeProvider.quotaPolicy is fail (raise the quota or lower the tenants' maxGpus)")
        return ()
    return tuple(line.message() for line in exceeded)


def _tenant_stack_claims(project_dir: Path, facts: EnvironmentFacts, *, environment_stack_name: str, exclude: str | None) -> list[TenantClaim]:
    """Tenants of other team stacks in this repo that use the same environment."""
    claims = []
    for other in list_stacks(project_dir):
        if other == exclude:
            continue
        try:
            values = {k: structured(v) for k, v in read_stack_values(project_dir, other).items()}
        except StackFileError:
            continue
        reference = values.get(f"{NS}:environmentStack")
        tenant = values.get(f"{NS}:tenant")
        if isinstance(reference, str) and reference.split("/")[-1] == environment_stack_name and isinstance(tenant, dict):
            source = f"stack {other} (Pulumi.{other}.yaml)"
            parsed = parse(f"Pulumi.{other}.yaml: tenant", Tenant, tenant, Problems())  # its problems are its own stack's
            claims.append(_claim(parsed, f"Pulumi.{other}.yaml: tenant", source, facts))
    return claims


def environment_claims(env: EnvironmentStack, project_dir: Path) -> list[TenantClaim]:
    """What every tenant of an environment claims (name, CIDR, project): its inline tenants and the
    tenants of the team stacks in `project_dir` that use it (for a new team's free CIDR)."""
    return [*env.facts.tenants, *_tenant_stack_claims(project_dir, env.facts, environment_stack_name=env.stack, exclude=None)]


def _team_stack_plans(entries: list[TenantEntry], facts: EnvironmentFacts) -> tuple[TenantPlan, ...]:
    """The team stacks' tenants that pass the environment's checks, planned against it (the others
    are their own stacks' problems, reported by their own plans)."""
    plans = []
    for entry in entries:
        own = Problems()
        check_tenant("tenant", entry.tenant, facts, [], own)
        if not own:
            plans.append(plan_tenant(entry.tenant, facts))
    return tuple(plans)


def _facts(stack, environment, project, region, cluster, platform, node_provider, offer, tenants, catalog, problems, monitoring) -> EnvironmentFacts:
    """The environment as tenants see it. Facts from keys with problems are Broken, so no tenant
    is judged by them; the stack is only deployed (and its facts exported) without problems."""
    provider = ("gcp:region", "nodeProvider")
    roles = ("gcp:project", "platform.roleIdPrefix")
    names = problems.derive(lambda: tenant_roles(project, platform.role_id_prefix), *roles)
    facts = EnvironmentFacts(
        environment=environment,
        project=project,
        region=region,
        zones=problems.derive(lambda: node_provider.zones, *provider),
        node_provider_name=derived(lambda: node_provider.name),
        gpu_types=problems.derive(lambda: node_provider.gpu_types, *provider),
        spot=problems.derive(lambda: node_provider.spot, *provider),
        gpu_quota=problems.derive(lambda: dict(node_provider.gpu_quota), *provider),
        node_types=derived(lambda: offer.node_types),
        reserved_cidrs=_cluster_ranges(cluster, problems),
        tenants=(),
        vcluster_version=derived(lambda: platform.vcluster_version),
        platform_service_account=derived(lambda: f"{platform.service_account_id}@{project}.iam.gserviceaccount.com"),
        tenant_subnet_role=derived(lambda: names.subnet_use),
        tenant_disk_role=derived(lambda: names.disks),
        tenant_load_balancer_role=derived(lambda: names.load_balancers),
        legacy_infrastructure=derived(lambda: node_provider.legacy_infrastructure),
        prices_read=derived(lambda: catalog.prices[region].read if region in catalog.prices else None),
        role_id_prefix=problems.derive(lambda: platform.role_id_prefix, "platform.roleIdPrefix"),
        platform_role=derived(lambda: names.vm),
        tenant_projects=problems.derive(lambda: platform.tenant_projects, "platform.tenantProjects"),
        allow_shared_isolation=derived(lambda: platform.allow_shared_isolation),
        allow_shared_with_project_tenants=derived(lambda: platform.allow_shared_with_project_tenants),
        approved_tenant_security=problems.derive(
            lambda: {t: s.model_dump(by_alias=True, exclude_none=True) for t, s in platform.approved_tenant_security.items()},
            "platform.approvedTenantSecurity",
        ),
        control_plane_maximum=problems.derive(lambda: platform.control_plane_maximum.model_dump(), "platform.controlPlaneMaximum"),
        allow_tenants_without_backup=derived(lambda: platform.allow_tenants_without_backup),
        host_cluster=derived(lambda: host_cluster_id(project, cluster.location, cluster.name)),
        host_client_cidrs=problems.derive(
            lambda: (cluster.network.pods_cidr, cluster.network.nodes_cidr), "cluster.network.podsCidr", "cluster.network.nodesCidr"
        ),
        monitoring_enabled=derived(lambda: monitoring.enabled),
        scrape_interval=problems.derive(lambda: monitoring.scrape_interval, "monitoring.scrapeInterval"),
        cost_view=derived(lambda: _cost_view(project, stack, monitoring)),
        gpu_not_offered_after=problems.derive(
            lambda: monitoring.alerts.gpu_not_offered_after if monitoring.enabled else None, "monitoring.alerts.gpuNotOfferedAfter", "monitoring.enabled"
        ),
    )
    # Claims name each tenant's project, which follows from the facts above, and where the tenant
    # is declared, for the messages of team stacks that collide with it.
    claims = tuple(_claim(t, f"tenants[{i}]", f"tenants[{i}] of stack {stack} (Pulumi.{stack}.yaml)", facts) for i, t in enumerate(tenants))
    return dataclasses.replace(facts, tenants=claims)


def host_cluster_id(project: str, location: str, name: str) -> str:
    """The GKE cluster as Backup for GKE's `cluster` field names it."""
    return f"projects/{project}/locations/{location}/clusters/{name}"
def _cost_view(project: str, stack: str, monitoring: MonitoringConfig) -> str | None:
    """Where the environment's showback view is, once billing export is set up."""
    if not monitoring.enabled or monitoring.showback.billing_export_table is None:
        return None
    return view_name(project, stack)


def unknown_facts(because: str) -> EnvironmentFacts:
    """Facts of an environment that could not be loaded: every one waits for the key `because`."""
    return EnvironmentFacts(**{f.name: Broken(because) for f in dataclasses.fields(EnvironmentFacts)})


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


def _cluster_ranges(cluster: ClusterConfig, problems: Problems) -> tuple[tuple[str, str], ...]:
    """The host cluster's ranges tenants must stay clear of; a range with problems is Broken."""
    ranges = [
        ("the GKE node subnet", "cluster.network.nodesCidr", lambda: cluster.network.nodes_cidr),
        ("the GKE pod range", "cluster.network.podsCidr", lambda: cluster.network.pods_cidr),
        ("the GKE service range", "cluster.network.servicesCidr", lambda: cluster.network.services_cidr),
    ]
    if derived(lambda: cluster.private_nodes.enabled) is not False:
        ranges.append(("the GKE control plane range", "cluster.privateNodes.masterCidr", lambda: cluster.private_nodes.master_cidr))
    return tuple((f"{what} ({path})", problems.derive(cidr, path, "cluster.privateNodes.enabled")) for what, path, cidr in ranges)
