"""AutoNodesIdentity: the Google identity the vCluster Platform creates tenants' VMs with, reached
from its pod through Workload Identity, and the custom roles defined in the environment's project
(the VM role and the tenant roles, which shared tenants bind there).

The identity holds nothing on the environment's project by itself: each tenant grants it the VM
role on the project its VMs live in, conditioned on the tenant's VM names
(components/tenant_project.py). Only the opt-in legacy mode binds the broad official role here."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.facts import PLATFORM_NAMESPACE
from config.permissions import AUTO_NODES, LEGACY_AUTO_NODES, TENANT_DISKS, TENANT_LOAD_BALANCERS, TENANT_SUBNET_USE, load_roles, role_id

from .options import depends_on_of

# The platform pod's Kubernetes service account (chart defaults: namespace PLATFORM_NAMESPACE, SA loft).
PLATFORM_KSA = "loft"


@dataclass(frozen=True)
class AutoNodesIdentityArgs:
    project: str
    environment: str
    service_account_id: str
    role_id_prefix: str
    workload_pool: str  # <project>.svc.id.goog; exists once the cluster does
    legacy: bool = False  # the official broad role, for the official infrastructure template
    # The workload pool appears with the cluster: binding before it exists fails with
    # "Identity Pool does not exist".
    cluster: pulumi.Resource | None = None


class AutoNodesIdentity(pulumi.ComponentResource):
    service_account: gcp.serviceaccount.Account
    role: gcp.projects.IAMCustomRole
    tenant_subnet_role: gcp.projects.IAMCustomRole
    tenant_disk_role: gcp.projects.IAMCustomRole
    tenant_load_balancer_role: gcp.projects.IAMCustomRole
    role_binding: gcp.projects.IAMMember | None
    tenant_prerequisites: tuple[pulumi.Resource, ...]
    email: pulumi.Output[str]
    workload_identity_member: str

    def __init__(self, name: str, args: AutoNodesIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:iam:AutoNodesIdentity", name, None, opts)
        # The caller's depends_on (the project's APIs) holds for every child.
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_on_of(opts))
        roles = load_roles()

        def custom_role(suffix: str, key: str) -> gcp.projects.IAMCustomRole:
            spec = roles.roles[key]
            return gcp.projects.IAMCustomRole(
                f"{name}-{suffix}",
                project=args.project,
                # Stable and overridable: a deleted role id stays reserved for up to 37 days.
                role_id=role_id(args.role_id_prefix, key if key != LEGACY_AUTO_NODES else AUTO_NODES),
                title=f"{spec.title} ({args.environment})",
                description=spec.description,
                permissions=list(spec.permissions),
                stage="GA",
                opts=child,
            )

        self.role = custom_role("role", LEGACY_AUTO_NODES if args.legacy else AUTO_NODES)
        self.tenant_subnet_role = custom_role("tenant-subnet-use", TENANT_SUBNET_USE)
        self.tenant_disk_role = custom_role("tenant-disks", TENANT_DISKS)
        self.tenant_load_balancer_role = custom_role("tenant-load-balancers", TENANT_LOAD_BALANCERS)

        self.service_account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=args.service_account_id,
            project=args.project,
            display_name=f"vCluster Platform auto nodes ({args.environment})",
            description="Creates and deletes tenants' node VMs. No keys: reached only through Workload Identity.",
            opts=child,
        )
        self.email = self.service_account.email
        member = self.email.apply(lambda e: f"serviceAccount:{e}")

        # Exactly one Kubernetes service account may act as this identity.
        self.workload_identity_member = f"serviceAccount:{args.workload_pool}[{PLATFORM_NAMESPACE}/{PLATFORM_KSA}]"
        self.workload_identity = gcp.serviceaccount.IAMMember(
            f"{name}-workload-identity",
            service_account_id=self.service_account.name,
            role="roles/iam.workloadIdentityUser",
            member=self.workload_identity_member,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on_of(opts), *([args.cluster] if args.cluster else [])]),
        )
        # Legacy mode only: the official template builds networks and IAM in this project, from
        # the platform's identity. The role's full name is known before it exists, so previews
        # (and the policy pack) see it.
        self.role_binding = None
        if args.legacy:
            self.role_binding = gcp.projects.IAMMember(
                f"{name}-role-binding",
                project=args.project,
                role=f"projects/{args.project}/roles/{role_id(args.role_id_prefix, AUTO_NODES)}",
                member=member,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on_of(opts), self.role]),
            )
        # What a tenant's IAM bindings name: this account and the roles made for tenants.
        self.tenant_prerequisites = (self.service_account, self.role, self.tenant_subnet_role, self.tenant_disk_role, self.tenant_load_balancer_role)
        self.register_outputs(
            {
                "email": self.email,
                "role": self.role.name,
                "workloadIdentityMember": self.workload_identity_member,
            }
        )
