"""Where a tenant's GCP objects live: its own project (`isolation: project`, the default) or the
environment's project beside every other shared tenant (`isolation: shared`).

The config models of the keys involved (`tenants[i].gcpProject`, `platform.tenantProjects`), the
resolution of a tenant's project, the checks with their messages, and the names derived from it
(custom roles in the tenant's project, the IAM condition on the platform's VM role). Pure: the
components build GCP objects from what this module decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import ConfigModel, Syntax
from .errors import Problems, shown
from .permissions import AUTO_NODES, TENANT_DISKS, TENANT_LOAD_BALANCERS, TENANT_SUBNET_USE, role_id

PROJECT = "project"
SHARED = "shared"
CONCEALED = "concealed"
EXPOSED = "exposed"

# Project ids: 6–30 characters, lowercase letters, digits and hyphens, starting with a letter, not
# ending with a hyphen, and without restricted strings (Resource Manager, "Creating and managing
# projects": https://cloud.google.com/resource-manager/docs/creating-managing-projects).
PROJECT_ID = Syntax(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
RESTRICTED_IN_PROJECT_ID = ("google", "ssl")
MAX_PROJECT_ID = 30
# A folder as the Resource Manager names it, or its number alone.
FOLDER = Syntax(r"^(folders/)?[0-9]{1,20}$")
BILLING_ACCOUNT = Syntax(r"^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$")
PREFIX = Syntax(r"^[a-z][a-z0-9-]*[a-z0-9]$|^[a-z]$")
RESERVED_IDS = (
    "project ids are global across Google Cloud and a deleted project's id stays reserved for 30 days, "
    "so pick one nobody else holds"
)


class GcpProject(ConfigModel):
    """`tenants[i].gcpProject` as a mapping. A plain string means {id: <string>, create: false}."""

    id: str
    """The project id: 6–30 lowercase letters, digits and hyphens, starting with a letter."""
    create: bool = False
    """Whether Pulumi creates the project (under platform.tenantProjects); false: it exists."""


class TenantProjects(ConfigModel):
    """`platform.tenantProjects`: where Pulumi creates the projects of tenants that name none."""

    # These docstrings also complete a missing key's "required" (config/errors.py).
    folder: str
    """The folder Pulumi creates the teams' projects in, folders/<number> or the number (`gcloud resource-manager folders list`); whoever runs pulumi up needs roles/resourcemanager.projectCreator on it."""
    billing_account: str
    """The Cloud Billing account Pulumi links each team project it creates to, XXXXXX-XXXXXX-XXXXXX (`gcloud billing accounts list`); whoever runs pulumi up needs roles/billing.user on it."""
    prefix: str
    """The start of the ids of the projects Pulumi creates, <prefix>-<environment>-<team> (lowercase letters, digits and hyphens, starting with a letter)."""

    @property
    def folder_id(self) -> str:
        return self.folder.removeprefix("folders/")


@dataclass(frozen=True)
class Placement:
    """The GCP project a tenant's VMs, disks, network and node identity live in."""

    project: str
    shared: bool  # the environment's project, beside every other shared tenant
    create: bool = False  # Pulumi creates the project (under platform.tenantProjects)

    @property
    def isolation(self) -> str:
        return SHARED if self.shared else PROJECT


@dataclass(frozen=True)
class TenantRoles:
    """Full names of the custom roles a tenant's bindings use, in the project they are bound in
    (a project-level custom role can be bound only in the project that defines it)."""

    vm: str  # <prefix>_autoNodes: the platform creates and deletes the tenant's VMs
    subnet_use: str  # <prefix>_tenantSubnetUse, on the tenant's subnet
    disks: str  # <prefix>_tenantDisks, for the tenant's node identity
    load_balancers: str  # <prefix>_tenantLoadBalancers, for the tenant's node identity


def tenant_roles(project: str, role_id_prefix: str) -> TenantRoles:
    def name(key: str) -> str:
        return f"projects/{project}/roles/{role_id(role_id_prefix, key)}"

    return TenantRoles(name(AUTO_NODES), name(TENANT_SUBNET_USE), name(TENANT_DISKS), name(TENANT_LOAD_BALANCERS))


def generated_project_id(prefix: str, environment: str, tenant: str) -> str:
    return f"{prefix}-{environment}-{tenant}"


def max_prefix_length(environment: str, max_tenant_name: int) -> int:
    """The longest prefix for which <prefix>-<environment>-<longest team name> is a project id."""
    return MAX_PROJECT_ID - len(environment) - max_tenant_name - 2


def node_name_prefix(environment: str, tenant: str) -> str:
    """Every VM (and so its boot disk) the node template creates for a tenant is named
    <environment>-<tenant>-…; the platform's VM role is conditioned on it."""
    return f"{environment}-{tenant}-"


def vm_name_condition(prefix: str) -> dict[str, str]:
    """An IAM condition that narrows instance and disk permissions to VMs and disks whose names
    start with `prefix`, and leaves every other permission of the role (zones, zone operations)
    as it is: Compute Engine checks instance permissions on resources of type
    compute.googleapis.com/Instance named projects/P/zones/Z/instances/N, disks likewise
    (https://cloud.google.com/iam/docs/conditions-resource-attributes,
    https://cloud.google.com/iam/docs/configuring-resource-based-access)."""
    clauses = [
        f'(resource.type != "compute.googleapis.com/{kind}" || resource.name.extract("/{collection}/{{name}}").startsWith("{prefix}"))'
        for kind, collection in (("Instance", "instances"), ("Disk", "disks"))
    ]
    return {
        "title": f"only VMs and disks named {prefix}*"[:100],
        "description": f"Instance and disk permissions only on the node VMs (and their boot disks) named {prefix}…",
        "expression": " && ".join(clauses),
    }


def instance_name_condition(prefix: str) -> dict[str, str]:
    """Like `vm_name_condition`, for roles that act on instances only (attaching volumes)."""
    return {
        "title": f"only VMs named {prefix}*"[:100],
        "description": f"Instance permissions only on the node VMs named {prefix}…",
        "expression": f'resource.type != "compute.googleapis.com/Instance" || resource.name.extract("/instances/{{name}}").startsWith("{prefix}")',
    }


def coerce_gcp_project(value: Any) -> Any:
    """`gcpProject: my-project` is short for {id: my-project, create: false}."""
    return {"id": value} if isinstance(value, str) else value


def project_id_alone_too(schema: dict) -> None:
    """The JSON schema of `gcpProject` (the configuration reference's source): the id alone, a
    string, is accepted as well as the mapping (coerce_gcp_project)."""
    schema["anyOf"].insert(0, {"type": "string"})


def placement(tenant: Any, *, environment: str, host_project: str, tenant_projects: TenantProjects | None) -> Placement | None:
    """The tenant's project, or None when it has none (a configuration problem `check_placement`
    reports). `tenant` is a config.tenant.Tenant."""
    if tenant.isolation == SHARED:
        return Placement(host_project, shared=True)
    if tenant.gcp_project is not None:
        return Placement(tenant.gcp_project.id, shared=False, create=tenant.gcp_project.create)
    if tenant_projects is not None:
        return Placement(generated_project_id(tenant_projects.prefix, environment, tenant.name), shared=False, create=True)
    return None


def check_tenant_projects(environment: str, settings: TenantProjects, max_tenant_name: int, problems: Problems) -> None:
    path = "platform.tenantProjects"
    with problems.checking(f"{path}.folder"):
        if not FOLDER.match(settings.folder):
            problems.add(f"{path}.folder", f"{shown(settings.folder)} is not a folder; allowed: folders/<number> or the number, e.g. folders/123456789012")
    with problems.checking(f"{path}.billingAccount"):
        if not BILLING_ACCOUNT.match(settings.billing_account):
            problems.add(
                f"{path}.billingAccount",
                f"{shown(settings.billing_account)} is not a billing account id; allowed: XXXXXX-XXXXXX-XXXXXX "
                "(digits and A–F, as `gcloud billing accounts list` shows it)",
            )
    with problems.checking(f"{path}.prefix"):
        longest = max_prefix_length(environment, max_tenant_name)
        if not PREFIX.match(settings.prefix):
            problems.add(f"{path}.prefix", f"{shown(settings.prefix)} must start with a letter, hold only lowercase letters, digits and hyphens, and not end with a hyphen")
        elif len(settings.prefix) > longest:
            problems.add(
                f"{path}.prefix",
                f"{settings.prefix!r} is too long: project ids <prefix>-{environment}-<team> have at most {MAX_PROJECT_ID} characters and team "
                f"names up to {max_tenant_name}, so the prefix may have at most {longest} in environment {environment}",
            )


def check_placement(path: str, tenant: Any, facts: Any, others: list, problems: Problems) -> None:
    """Checks of `isolation` and `gcpProject` of one tenant against its environment (`facts`, a
    config.facts.EnvironmentFacts) and the tenants already claimed there (`others`). Values may be
    broken (config/errors.py): each comparison with another tenant is a check of its own."""
    if tenant.isolation == SHARED:
        _check_shared(path, tenant, facts, others, problems)
        return
    if facts.legacy_infrastructure:
        problems.add(
            f"{path}.isolation",
            "project needs nodeProvider.legacyInfrastructure: false: the official infrastructure template builds networks in the "
            "environment's project only; set isolation: shared for this tenant, or leave legacy mode",
        )
        return
    settings = facts.tenant_projects
    if tenant.gcp_project is None and settings is None:
        problems.add(
            f"{path}.gcpProject",
            "required with isolation: project: name the team's existing project (gcpProject: <project-id>), let Pulumi create one "
            "by setting platform.tenantProjects {folder, billingAccount, prefix} in the environment stack, "
            "or use isolation: shared (dev and staging only)",
        )
        return
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=settings)
    assert where is not None
    generated = tenant.gcp_project is None
    if where.create and settings is None:
        problems.add(
            f"{path}.gcpProject.create",
            "Pulumi creates projects only under platform.tenantProjects {folder, billingAccount, prefix}, which the environment stack "
            "does not set; set it there, or name an existing project (create: false)",
        )
    problem = project_id_problem(where.project)
    if problem:
        if generated:
            problems.add(
                f"{path}.gcpProject",
                f"the generated project id {where.project!r} (platform.tenantProjects.prefix-{facts.environment}-{tenant.name}) {problem}; "
                f"{RESERVED_IDS}: set gcpProject: {{id: <project-id>, create: true}} to choose it",
            )
        else:
            problems.add(f"{path}.gcpProject" + (".id" if where.create else ""), f"{where.project!r} {problem}" + (f"; {RESERVED_IDS}" if where.create else ""))
        return
    with problems.checking(f"{path}.gcpProject"):
        if where.project == facts.project:
            problems.add(
                f"{path}.gcpProject",
                f"{where.project!r} is the environment's own project (gcp:project), where the host cluster runs; a tenant in project mode "
                "needs a project of its own (or set isolation: shared)",
            )
    for other in others:
        with problems.checking(f"{path}.gcpProject"):
            if other.project == where.project:
                problems.add(f"{path}.gcpProject", f"{where.project!r} is already the project of tenant {other.name} ({other.source}); each team needs a project of its own")


def _check_shared(path: str, tenant: Any, facts: Any, others: list, problems: Problems) -> None:
    with problems.checking(f"{path}.gcpProject"):
        if tenant.gcp_project is not None:
            problems.add(
                f"{path}.gcpProject",
                f"must not be set with isolation: shared (a shared tenant lives in the environment's project {facts.project}); "
                "remove it, or use isolation: project",
            )
    for other in others:
        # Shared tenants tell their VMs apart by name prefix <environment>-<tenant>- (the IAM
        # conditions): "nlp-" must not be the start of another shared tenant's name.
        with problems.checking(f"{path}.name"):
            if other.project is None and (other.name.startswith(f"{tenant.name}-") or tenant.name.startswith(f"{other.name}-")):
                problems.add(
                    f"{path}.name",
                    f"{tenant.name!r} and {other.name!r} ({other.source}) both share the environment's project, and VM names "
                    f"{facts.environment}-{tenant.name}-… and {facts.environment}-{other.name}-… would not tell them apart; "
                    "rename one, or give one a project of its own",
                )
    with problems.checking(f"{path}.isolation"):
        if not facts.allow_shared_isolation:
            problems.add(
                f"{path}.isolation",
                f"shared is not allowed in environment {facts.environment}: give the team its own project (isolation: project, the default), "
                "or allow it in the environment stack with platform.allowSharedIsolation: true (docs/security.md \"Shared mode\" says what remains shared)",
            )


def project_id_problem(project: str) -> str | None:
    if not PROJECT_ID.match(project):
        return (
            f"is not a GCP project id: {6}–{MAX_PROJECT_ID} characters of lowercase letters, digits and hyphens, "
            "starting with a letter and not ending with a hyphen"
        )
    restricted = [s for s in RESTRICTED_IN_PROJECT_ID if s in project]
    if restricted:
        return f"contains {restricted[0]!r}, which project ids may not contain"
    return None


def shared_warning(path: str, tenant: str, host_project: str) -> str:
    return (
        f"{path} ({tenant}) uses isolation: shared: its VMs, network and node identity live in the environment's project "
        f"{host_project}, beside every other shared tenant and the host cluster. A workload on its nodes that obtains the "
        "node identity (nodeMetadata: exposed, a hostNetwork or privileged pod) can read every VM's metadata there: other "
        "shared teams' join data and the host cluster's nodes, which run every tenant's control plane, those of teams with "
        "projects of their own included. It gets no disk or load-balancer role there (persistentDisks and "
        "loadBalancerServices are refused with isolation: shared). Use isolation: project for teams that must not trust "
        "each other (docs/security.md \"Security\", docs/migration.md \"Migration\")."
    )
