"""GkeCluster: the GKE Standard host cluster the vCluster Platform and the tenants' control planes
run on. GPU VMs never join it: tenants' nodes are private VMs of their own virtual clusters."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from config.environment import ClusterConfig
from config.iam_grants import predefined_roles

from .kubeconfig import gke_kubeconfig

# Backup for GKE: every tenant's control plane is backed up (components/tenant_backup.py).
BACKUP_API = "gkebackup.googleapis.com"
# The APIs the platform uses; never disabled on destroy (other workloads may share the project).
REQUIRED_APIS = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "serviceusage.googleapis.com",
    BACKUP_API,
)
NODE_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# Logging, monitoring and image pulls: the least a GKE node needs (config/iam_grants.yaml).
[SYSTEM_NODE_ROLE] = predefined_roles("gkeNodes", "project")


@dataclass(frozen=True)
class GkeClusterArgs:
    project: str
    region: str
    environment: str
    cluster: ClusterConfig  # with environment defaults resolved


class GkeCluster(pulumi.ComponentResource):
    """Project APIs, a VPC-native Standard cluster with Workload Identity, a separate system node
    pool with a least-privilege service account, a credential-free kubeconfig and an explicit
    Kubernetes provider."""

    cluster: gcp.container.Cluster
    system_pool: gcp.container.NodePool
    node_service_account: gcp.serviceaccount.Account
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    apis: list[gcp.projects.Service]
    tenant_apis: tuple[gcp.projects.Service, ...]  # what tenants' networks and identities use
    backup_prerequisites: tuple[pulumi.Resource, ...]  # what tenants' backup plans wait for
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    workload_pool: str

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:gke:Cluster", name, None, opts)
        cfg = args.cluster
        child = pulumi.ResourceOptions(parent=self)
        labels = {"gpu-platform-environment": args.environment, **cfg.labels}
        self.workload_pool = f"{args.project}.svc.id.goog"

        self.apis = apis = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=args.project,
                service=api,
                disable_on_destroy=False,
                opts=child,
            )
            for api in REQUIRED_APIS
        ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=apis)
        self.tenant_apis = tuple(s for s, api in zip(apis, REQUIRED_APIS) if api in ("compute.googleapis.com", "iam.googleapis.com"))

        self.network = gcp.compute.Network(
            f"{name}-network",
            name=cfg.name,
            project=args.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=after_apis,
        )
        self.subnetwork = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=f"{cfg.name}-nodes",
            project=args.project,
            region=args.region,
            network=self.network.id,
            ip_cidr_range=cfg.network.nodes_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name="pods", ip_cidr_range=cfg.network.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name="services", ip_cidr_range=cfg.network.services_cidr),
            ],
            opts=child,
        )
        egress: list[pulumi.Resource] = []
        if cfg.private_nodes.enabled:
            # Private nodes have no public IPs; they pull images and reach charts.loft.sh and
            # admin.loft.sh (licensing) through Cloud NAT.
            router = gcp.compute.Router(
                f"{name}-router", name=f"{cfg.name}-router", project=args.project, region=args.region, network=self.network.id, opts=child
            )
            egress.append(
                gcp.compute.RouterNat(
                    f"{name}-nat",
                    name=f"{cfg.name}-nat",
                    project=args.project,
                    region=args.region,
                    router=router.name,
                    nat_ip_allocate_option="AUTO_ONLY",
                    source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                    log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
                    opts=child,
                )
            )

        self.node_service_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=f"{cfg.name}-nodes",
            project=args.project,
            display_name=f"GKE system nodes of {cfg.name}",
            opts=after_apis,
        )
        node_role = gcp.projects.IAMMember(
            f"{name}-nodes-default-role",
            project=args.project,
            role=SYSTEM_NODE_ROLE,
            member=self.node_service_account.email.apply(lambda e: f"serviceAccount:{e}"),
            opts=child,
        )

        node_security = dict(
            service_account=self.node_service_account.email,
            oauth_scopes=NODE_SCOPES,
            metadata={"disable-legacy-endpoints": "true"},
        )
        window = cfg.maintenance_window
        start_hour, start_minute = (int(x) for x in window.start_time.split(":"))
        end_hour = (start_hour + window.duration_hours) % 24
        end_day = 1 + (start_hour + window.duration_hours) // 24

        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=cfg.name,
            project=args.project,
            location=cfg.location,
            description=f"GPU platform host cluster ({args.environment})",
            network=self.network.id,
            subnetwork=self.subnetwork.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name="pods", services_secondary_range_name="services"
            ),
            datapath_provider="ADVANCED_DATAPATH",
            # The default pool is replaced by the system pool below; it still exists for a moment
            # at creation, so it gets the same hardening.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                **node_security,
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cfg.release_channel),
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(workload_pool=self.workload_pool),
            enable_shielded_nodes=True,
            enable_legacy_abac=False,
            master_auth=gcp.container.ClusterMasterAuthArgs(
                client_certificate_config=gcp.container.ClusterMasterAuthClientCertificateConfigArgs(issue_client_certificate=False)
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=cfg.private_nodes.master_cidr,
            )
            if cfg.private_nodes.enabled
            else None,
            # The DNS endpoint takes IAM-authenticated kubectl/Pulumi traffic from anywhere (CI
            # included); the IP endpoint stays behind the authorized networks.
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(allow_external_traffic=True)
            ),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=n.cidr, display_name=n.name)
                    for n in cfg.master_authorized_networks
                ]
            ),
            # The Backup for GKE agent, which tenants' backup plans need (components/tenant_backup.py).
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gke_backup_agent_config=gcp.container.ClusterAddonsConfigGkeBackupAgentConfigArgs(enabled=True)
            ),
            maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
                recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                    start_time=f"2026-01-01T{start_hour:02d}:{start_minute:02d}:00Z",
                    end_time=f"2026-01-{end_day:02d}T{end_hour:02d}:{start_minute:02d}:00Z",
                    recurrence=f"FREQ=WEEKLY;BYDAY={','.join(window.days)}",
                )
            ),
            resource_labels=labels,
            deletion_protection=cfg.deletion_protection,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*apis, node_role, *egress],
                protect=cfg.deletion_protection,
                # node_config describes the default pool, which is removed right after creation:
                # once it is gone, a refresh reads no node_config and would plan a replacement.
                ignore_changes=["nodeConfig"],
            ),
        )

        self.backup_prerequisites = (*(s for s, api in zip(apis, REQUIRED_APIS) if api == BACKUP_API), self.cluster)

        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name="system",
            project=args.project,
            location=cfg.location,
            cluster=self.cluster.name,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                min_node_count=cfg.system_pool.min_nodes, max_node_count=cfg.system_pool.max_nodes
            ),
            initial_node_count=max(1, cfg.system_pool.min_nodes),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(max_surge=1, max_unavailable=0),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                **node_security,
                machine_type=cfg.system_pool.machine_type,
                disk_size_gb=cfg.system_pool.disk_size_gb,
                disk_type="pd-balanced",
                image_type="COS_CONTAINERD",
                labels={"gpu-platform/pool": "system"},
                resource_labels=labels,
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            opts=child,
        )

        dns_endpoint = self.cluster.control_plane_endpoints_config.apply(
            lambda c: c.dns_endpoint_config.endpoint if c and c.dns_endpoint_config else None
        )
        context = f"gke_{args.project}_{cfg.location}_{cfg.name}"
        self.kubeconfig = pulumi.Output.secret(dns_endpoint.apply(lambda endpoint: gke_kubeconfig(context, endpoint)))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Constant: a changed kubeconfig never plans a replacement of everything in-cluster;
            # change it on purpose if the cluster itself is ever re-created.
            cluster_identifier=f"{args.project}/{cfg.location}/{cfg.name}",
            opts=child,
        )
        self.register_outputs(
            {
                "clusterName": self.cluster.name,
                "kubeconfig": self.kubeconfig,
                "workloadPool": self.workload_pool,
                "nodeServiceAccount": self.node_service_account.email,
            }
        )
