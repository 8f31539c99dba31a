"""TenantNetwork: everything durable a tenant's VMs need in GCP, owned by Pulumi so the platform's
identity never creates networks, service accounts or IAM bindings (docs/security.md "Security"). All of it
lives in the tenant's project (components/tenant_project.py): the team's own, or the environment's
for a shared tenant.

Each role below is granted to the tenant's node service account only, for the software that runs on
the tenant's nodes with that identity: the GCP cloud controller manager (CCM) and the PD CSI driver
that our kubernetes environment template (templates/kubernetes/main.tf) installs into the tenant.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.iam_grants import predefined_roles
from config.isolation import TenantRoles, instance_name_condition, node_name_prefix

# Google's load-balancer health checkers and Identity-Aware Proxy's TCP forwarding range.
HEALTH_CHECK_RANGES = ["130.211.0.0/22", "35.191.0.0/16"]
IAP_RANGE = "35.235.240.0/20"

# role → why the tenant's nodes need it (config/iam_grants.yaml; docs/security.md
# "Node service account" renders the same table, and the policy pack allows exactly these grants).
NODE_ROLES = predefined_roles("tenantNodes", "project")
DISK_ROLES = predefined_roles("tenantNodes", "project", when="persistentDisks")
LOAD_BALANCER_ROLES = predefined_roles("tenantNodes", "project", when="loadBalancerServices")


@dataclass(frozen=True)
class TenantNetworkArgs:
    tenant: str
    environment: str
    project: str
    region: str
    cidr: str
    platform_service_account: str  # e-mail of the AutoNodesIdentity
    # Custom roles defined in `project`: subnet_use (subnetworks.use, granted on this subnet),
    # disks (instances.attachDisk/detachDisk), load_balancers (firewall rules of Service LBs).
    roles: TenantRoles
    nat_addresses: int = 1
    iap_ssh: bool = False
    persistent_disks: bool = True
    load_balancer_services: bool = False
    # What must exist first: the project's APIs before anything, the platform's identity and the
    # roles before the bindings that name them.
    apis: tuple[pulumi.Resource, ...] = ()
    identity: tuple[pulumi.Resource, ...] = ()


def tenant_resource_name(environment: str, tenant: str, what: str) -> str:
    return f"{environment}-{tenant}-{what}"


class TenantNetwork(pulumi.ComponentResource):
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    router: gcp.compute.Router
    nat_ips: list[gcp.compute.Address]
    nat: gcp.compute.RouterNat
    nat_addresses: pulumi.Output[list[str]]
    firewalls: list[gcp.compute.Firewall]
    node_service_account: gcp.serviceaccount.Account
    platform_uses_subnet: gcp.compute.SubnetworkIAMMember
    platform_acts_as_nodes: gcp.serviceaccount.IAMMember
    role_bindings: list[pulumi.CustomResource]

    def __init__(self, name: str, args: TenantNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:tenants:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.apis))
        binding = pulumi.ResourceOptions(parent=self, depends_on=[*args.apis, *args.identity])

        def gcp_name(what: str) -> str:
            return tenant_resource_name(args.environment, args.tenant, what)

        labels_note = f"GPU platform tenant {args.tenant} ({args.environment})"
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            name=gcp_name("nodes"),
            project=args.project,
            description=f"Node network of {labels_note}",
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=child,
        )
        self.subnetwork = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=gcp_name("nodes"),
            project=args.project,
            region=args.region,
            network=self.network.id,
            ip_cidr_range=args.cidr,
            private_ip_google_access=True,
            opts=child,
        )
        self.router = gcp.compute.Router(
            f"{name}-router", name=gcp_name("router"), project=args.project, region=args.region, network=self.network.id, opts=child
        )
        # Nodes have no public IPs; they reach their control plane's LoadBalancer, the platform
        # and image registries through NAT, from these addresses only: the control plane accepts
        # joins from them and from nowhere else (loadBalancerSourceRanges).
        self.nat_ips = [
            gcp.compute.Address(
                f"{name}-nat-{i}",
                name=gcp_name(f"nat-{i}"),
                project=args.project,
                region=args.region,
                address_type="EXTERNAL",
                network_tier="PREMIUM",
                description=f"Cloud NAT egress address of {labels_note}",
                opts=child,
            )
            for i in range(args.nat_addresses)
        ]
        self.nat_addresses = pulumi.Output.all(*[a.address for a in self.nat_ips])
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=gcp_name("nat"),
            project=args.project,
            region=args.region,
            router=self.router.name,
            nat_ip_allocate_option="MANUAL_ONLY",
            nat_ips=[a.self_link for a in self.nat_ips],
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )

        def firewall(what: str, ranges: list[str], allow: list[gcp.compute.FirewallAllowArgs], why: str) -> gcp.compute.Firewall:
            return gcp.compute.Firewall(
                f"{name}-{what}",
                name=gcp_name(what),
                project=args.project,
                network=self.network.id,
                description=why,
                direction="INGRESS",
                source_ranges=ranges,
                allows=allow,
                opts=child,
            )

        self.firewalls = [
            firewall(
                "allow-internal",
                [args.cidr],
                [
                    gcp.compute.FirewallAllowArgs(protocol="tcp"),
                    gcp.compute.FirewallAllowArgs(protocol="udp"),
                    gcp.compute.FirewallAllowArgs(protocol="icmp"),
                ],
                "Node-to-node traffic: pod network overlay, kubelet, DNS.",
            ),
            firewall(
                "allow-health-checks",
                HEALTH_CHECK_RANGES,
                [gcp.compute.FirewallAllowArgs(protocol="tcp")],
                "Google load-balancer health checks.",
            ),
        ]
        if args.iap_ssh:
            self.firewalls.append(
                firewall(
                    "allow-iap-ssh",
                    [IAP_RANGE],
                    [gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                    "SSH through Identity-Aware Proxy only.",
                )
            )

        self.node_service_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=gcp_name("nodes"),
            project=args.project,
            display_name=f"Nodes of {labels_note}",
            description="Identity of the tenant's node VMs (cloud controller manager, PD CSI driver). No keys.",
            opts=child,
        )
        node_member = self.node_service_account.email.apply(lambda e: f"serviceAccount:{e}")

        # The platform may start VMs in this subnet (and in no other network): a binding on the
        # subnet, not on the project.
        self.platform_uses_subnet = gcp.compute.SubnetworkIAMMember(
            f"{name}-platform-uses-subnet",
            project=args.project,
            region=args.region,
            subnetwork=self.subnetwork.name,
            role=args.roles.subnet_use,
            member=f"serviceAccount:{args.platform_service_account}",
            opts=binding,
        )
        # ... running as this account (and as no other tenant's: a binding on the account itself,
        # not on the project).
        self.platform_acts_as_nodes = gcp.serviceaccount.IAMMember(
            f"{name}-platform-acts-as-nodes",
            service_account_id=self.node_service_account.name,
            role="roles/iam.serviceAccountUser",
            member=f"serviceAccount:{args.platform_service_account}",
            opts=binding,
        )

        # Bound on the tenant's project: in project mode they reach the team's objects and nothing
        # else. Attaching volumes is narrowed to the tenant's own node VMs in either mode.
        own_vms = gcp.projects.IAMMemberConditionArgs(**instance_name_condition(node_name_prefix(args.environment, args.tenant)))
        roles: list[tuple[str, gcp.projects.IAMMemberConditionArgs | None]] = [(r, None) for r in NODE_ROLES]
        if args.persistent_disks:
            roles += [*((r, None) for r in DISK_ROLES), (args.roles.disks, own_vms)]
        if args.load_balancer_services:
            roles += [*((r, None) for r in LOAD_BALANCER_ROLES), (args.roles.load_balancers, None)]
        self.role_bindings = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1].replace('.', '-').replace('_', '-').lower()}",
                project=args.project,
                role=role,
                member=node_member,
                condition=condition,
                opts=binding,
            )
            for role, condition in roles
        ]
        if args.persistent_disks:
            # The CSI driver attaches disks to VMs that run as this account.
            self.role_bindings.append(
                gcp.serviceaccount.IAMMember(
                    f"{name}-nodes-act-as-self",
                    service_account_id=self.node_service_account.name,
                    role="roles/iam.serviceAccountUser",
                    member=node_member,
                    opts=binding,
                )
            )

        self.register_outputs(
            {
                "network": self.network.name,
                "subnetwork": self.subnetwork.name,
                "nodeServiceAccount": self.node_service_account.email,
                "natAddresses": self.nat_addresses,
            }
        )
