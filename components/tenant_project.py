"""TenantProject: a tenant's footprint in the GCP project its VMs live in, and the one project-wide
grant the platform's identity holds there.

Project mode (the default): the team's own project, created under `platform.tenantProjects` or
an existing one; the APIs the tenant's objects need (never disabled on destroy); the custom roles
its bindings use, defined in that project (a project-level custom role can be bound only in the
project that defines it); the platform's VM role bound there. Shared mode: the environment's project,
whose APIs and roles the environment created; only the platform's VM role binding.

Either way the binding carries an IAM condition: the platform may create, change and delete only
VMs and disks named after this tenant (<environment>-<tenant>-…, the names templates/node/main.tf
gives), and so none of the project's other VMs and disks (the host cluster's nodes and volumes in
shared mode; whatever else a team runs in an existing project of its own).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.isolation import Placement, TenantProjects, TenantRoles, node_name_prefix, tenant_roles, vm_name_condition
from config.permissions import AUTO_NODES, TENANT_DISKS, TENANT_LOAD_BALANCERS, TENANT_SUBNET_USE, load_roles, role_id

# What a tenant's objects call in its own project: Compute Engine (network, NAT, VMs), IAM (node
# service account) and Resource Manager (project IAM bindings).
TENANT_PROJECT_APIS = ("compute.googleapis.com", "iam.googleapis.com", "cloudresourcemanager.googleapis.com")


@dataclass(frozen=True)
class TenantProjectArgs:
    tenant: str
    environment: str
    placement: Placement
    role_id_prefix: str
    platform_service_account: str  # e-mail of the AutoNodesIdentity
    host_roles: TenantRoles  # the environment's roles, for a shared tenant
    tenant_projects: TenantProjects | None = None  # folder and billing account, when Pulumi creates the project
    protect: bool = False  # prod: the project survives `pulumi destroy` (deletion_policy PREVENT)
    # Inline tenants: the environment's APIs (shared mode) and the platform's identity and roles,
    # which must exist before anything names them.
    apis: tuple[pulumi.Resource, ...] = ()
    identity: tuple[pulumi.Resource, ...] = ()
    # APIs the tenant's options need beyond TENANT_PROJECT_APIS (monitoring: monitoring.googleapis.com).
    extra_apis: tuple[str, ...] = ()


class TenantProject(pulumi.ComponentResource):
    project_id: str
    project: gcp.organizations.Project | None
    services: list[gcp.projects.Service]
    custom_roles: list[gcp.projects.IAMCustomRole]
    roles: TenantRoles
    platform_vm_role: gcp.projects.IAMMember
    apis: tuple[pulumi.Resource, ...]  # what the tenant's GCP objects wait for
    prerequisites: tuple[pulumi.Resource, ...]  # what the tenant's IAM bindings wait for

    def __init__(self, name: str, args: TenantProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:tenants:Project", name, None, opts)
        where = args.placement
        self.project_id = where.project
        self.project = None
        self.services = []
        self.custom_roles = []
        if where.shared:
            self.roles = args.host_roles
            self.apis = args.apis
            self.prerequisites = args.identity
        else:
            self.roles = tenant_roles(where.project, args.role_id_prefix)
            self._own_project(name, args)
            self.apis = tuple(self.services)
            self.prerequisites = (*args.identity, *self.custom_roles)

        self.platform_vm_role = gcp.projects.IAMMember(
            f"{name}-platform-vm-role",
            project=where.project,
            role=self.roles.vm,
            member=f"serviceAccount:{args.platform_service_account}",
            condition=gcp.projects.IAMMemberConditionArgs(**vm_name_condition(node_name_prefix(args.environment, args.tenant))),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.apis, *self.prerequisites]),
        )
        self.register_outputs({"project": where.project, "isolation": where.isolation, "vmRole": self.roles.vm})

    def _own_project(self, name: str, args: TenantProjectArgs) -> None:
        where = args.placement
        depends: list[pulumi.Resource] = []
        if where.create:
            settings = args.tenant_projects
            assert settings is not None, "config.isolation.check_placement refuses create without platform.tenantProjects"
            self.project = gcp.organizations.Project(
                f"{name}-project",
                project_id=where.project,
                # Display names allow letters, digits, spaces, hyphens, quotes and "!" (4–30).
                name=f"gpu {args.tenant} {args.environment}"[:30],
                folder_id=settings.folder_id,
                billing_account=settings.billing_account,
                # The default network (with its allow-all-internal and SSH rules) is never created.
                auto_create_network=False,
                labels={"gpu-platform-tenant": args.tenant},
                # prod: `pulumi destroy` fails instead of deleting the team's project (and everything
                # in it). Elsewhere the project goes with the tenant; its id stays reserved 30 days.
                deletion_policy="PREVENT" if args.protect else "DELETE",
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
            )
            depends = [self.project]
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=where.project,
                service=api,
                # The team's project may run other things that need them.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
            )
            for api in (*TENANT_PROJECT_APIS, *args.extra_apis)
        ]
        specs = load_roles().roles
        for suffix, key in (("vm", AUTO_NODES), ("subnet-use", TENANT_SUBNET_USE), ("disks", TENANT_DISKS), ("load-balancers", TENANT_LOAD_BALANCERS)):
            spec = specs[key]
            self.custom_roles.append(
                gcp.projects.IAMCustomRole(
                    f"{name}-role-{suffix}",
                    project=where.project,
                    # Stable and overridable (platform.roleIdPrefix): a deleted role id stays
                    # reserved for up to 37 days.
                    role_id=role_id(args.role_id_prefix, key),
                    title=f"{spec.title} ({args.environment})",
                    description=spec.description,
                    permissions=list(spec.permissions),
                    stage="GA",
                    opts=pulumi.ResourceOptions(parent=self, depends_on=self.services),
                )
            )
