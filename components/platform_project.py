"""Each team's vCluster Platform `Project` (management.loft.sh/v1, cluster-scoped, named after the
team; the platform keeps its objects in namespace p-<team>) and who may reach the team's virtual
cluster. Pure data: TenantVCluster registers it.

The platform draws its access boundary at the project: members of one team's project see nothing
of another's. The environment template (templates/environment/main.tf) hands a network and an
identity only to the instance named <team> in p-<team>, so an instance anyone creates elsewhere
gets neither.
"""

from __future__ import annotations

from config.facts import project_namespace

from .loft_api import AccessRule, AllowedCluster, AllowedNodeType, InstanceAccess, ObjectAccess, ProjectMember, ProjectSpec

# The platform's own cluster, where the host cluster is connected (the platform's default name).
LOCAL_CLUSTER = "loft-cluster"
# Built-in project role "Project Viewer" (a ClusterRoleTemplate labelled loft.sh/project-role):
# members create nothing in the project and reach only instances that grant them access
# explicitly (vCluster Platform docs, "Project membership": https://www.vcluster.com/docs/platform/
# administer/users-permissions/permissions/project). Pulumi creates the team's one instance.
MEMBER_ROLE = "loft-management-project-viewer"
# What the team's users and teams may do with the instance object: see it and connect to it
# (`vcluster platform connect` needs "use" on virtualclusterinstances). Not update or delete: its
# values name the team's project, network and identity, which Pulumi owns.
INSTANCE_VERBS = ["get", "use"]


def platform_project(tenant) -> str:
    """The name of a team's platform project: the team's name (config.tenant checks that it is a
    DNS label and not the platform's own `default`)."""
    return tenant.name


def platform_project_spec(tenant, environment: str, node_provider: str) -> ProjectSpec:
    """`tenant` is a config.tenant.Tenant."""
    members = [ProjectMember(kind="User", name=u, cluster_role=MEMBER_ROLE) for u in tenant.access.users]
    members += [ProjectMember(kind="Team", name=t, cluster_role=MEMBER_ROLE) for t in tenant.access.teams]
    return ProjectSpec(
        display_name=f"{tenant.name} ({environment})",
        description=f"GPU tenant {tenant.name}: its virtual cluster in namespace {project_namespace(platform_project(tenant))}",
        members=members or None,
        allowed_clusters=[AllowedCluster(name=LOCAL_CLUSTER)],
        # Node claims of this project may use the environment's NodeProvider only: "<provider>.*"
        # (management.v1.ProjectSpec.allowedNodeTypes, storage.v1.AllowedNodeType, platform 4.11.2).
        allowed_node_types=[AllowedNodeType(name=f"{node_provider}.*")],
    )


def instance_access(tenant) -> list[ObjectAccess] | None:
    if not (tenant.access.users or tenant.access.teams):
        return None
    return [
        ObjectAccess(
            name="team",
            verbs=list(INSTANCE_VERBS),
            users=list(tenant.access.users) or None,
            teams=list(tenant.access.teams) or None,
        )
    ]


def in_cluster_access(tenant) -> InstanceAccess | None:
    """cluster-admin inside the virtual cluster for the team's users and teams."""
    if not (tenant.access.users or tenant.access.teams):
        return None
    return InstanceAccess(
        rules=[AccessRule(cluster_role="cluster-admin", users=list(tenant.access.users) or None, teams=list(tenant.access.teams) or None)]
    )
