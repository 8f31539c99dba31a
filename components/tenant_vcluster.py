"""TenantVCluster: one ML team's virtual cluster, whose GPU nodes are private VMs created when a pod
asks for `nvidia.com/gpu` and deleted when idle. Used the same way by an environment stack (inline
tenants) and by a team's own stack.

Children: the tenant's footprint in its GCP project (TenantProject), its network and node identity
there (TenantNetwork), its vCluster Platform project, and the VirtualClusterInstance in that
project's namespace."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from config import node_properties as props
from config import versions, yaml_io
from config.facts import EnvironmentFacts, project_namespace
from config.isolation import Placement, placement, tenant_roles
from config.base import duration_seconds
from config.reliability import GPU_TIMEOUT, shutdown_grace
from config.tenant_plan import TenantPlan

from .fallback_documents import fallback_config, fallback_pools
from .loft_api import (
    API_VERSION,
    ChartRef,
    ClusterRef,
    HelmRelease,
    ProSettings,
    TemplateChart,
    VirtualClusterInstanceSpec,
    VirtualClusterTemplate,
)
from .monitoring_documents import monitoring_objects
from .options import depends_on_of
from .platform_project import LOCAL_CLUSTER, in_cluster_access, instance_access, platform_project, platform_project_spec
from .tenant_backup import TenantBackup, TenantBackupArgs
from .tenant_documents import (
    GPU_OPERATOR_NAMESPACE,
    Fallback,
    Watchdog,
    gpu_operator_images_annotation,
    gpu_operator_values_yaml,
    tenant_objects,
    tenant_objects_yaml,
)
from .tenant_monitoring import MONITORING_API, TenantMonitoring, TenantMonitoringArgs
from .tenant_network import TenantNetwork, TenantNetworkArgs
from .tenant_project import TenantProject, TenantProjectArgs
from .vcluster_values import kubelet_config, render_values

READY_TIMEOUT_SECONDS = 1800  # control plane, LoadBalancer and first CPU node
# On the instance: the GCP project its nodes live in. A change replaces the instance (below).
GCP_PROJECT_ANNOTATION = "gpu-platform/gcp-project"
# On the instance: JSON, GPU type → the images the tenant's GPU Operator starts on a node of it
# (components/tenant_documents.py `gpu_operator_images`), which templates/node/main.tf pulls as the
# node's containerd starts. The node template gets the whole instance object (`var.vcluster.instance`,
# "Full tenant cluster instance object": vcluster-docs platform/administer/node-providers/terraform.mdx
# at commit 0f45a068f, "Available terraform vCluster variables"). An annotation rather than an
# auto-nodes property: those become Karpenter NodePool requirements, whose values must be label
# values (vcluster-docs vcluster/_fragments/deploy/auto-nodes-scheduling.mdx), which image
# references are not.
GPU_OPERATOR_IMAGES_ANNOTATION = "gpu-platform/gpu-operator-images"


@dataclass(frozen=True)
class TenantVClusterArgs:
    plan: TenantPlan
    facts: EnvironmentFacts
    # What the tenant's GCP objects must wait for when the environment is created in the same stack
    # (inline tenants): the environment's APIs, and for IAM bindings the platform's identity and roles.
    apis: tuple[pulumi.Resource, ...] = ()
    identity: tuple[pulumi.Resource, ...] = ()
    # What the platform project waits for in the same stack: the management API. Not the
    # NodeProvider (it only names it), so projects and the NodeProvider are created side by side.
    platform_api: tuple[pulumi.Resource, ...] = ()
    # What the team's metrics scope link waits for in the same stack: the environment's Monitoring
    # API (components/environment_monitoring.py).
    monitoring_scope: tuple[pulumi.Resource, ...] = ()
    # What the backup plans wait for in the same stack: the Backup for GKE API and the host cluster.
    backup_prerequisites: tuple[pulumi.Resource, ...] = ()


def gpu_watchdog(plan: TenantPlan) -> Watchdog:
    return Watchdog(
        pool_limits=tuple((p.name, duration_seconds(p.gpu_timeout)) for p in plan.gpu_pools),
        default_limit=duration_seconds(GPU_TIMEOUT),
        system_pool=plan.cpu_pool.name,
    )


def capacity_fallback(plan: TenantPlan, provider: str) -> Fallback | None:
    """The capacity fallback of a tenant with GPU pools (components/fallback_documents.py)."""
    if not plan.gpu_pools:
        return None
    config = fallback_config(provider, fallback_pools(plan.gpu_pools))
    return Fallback(config_json=json.dumps(config, sort_keys=True), system_pool=plan.cpu_pool.name)


def host_namespace(tenant: str) -> str:
    return f"vcluster-{tenant}"


def connect_command(tenant: str) -> str:
    return f"vcluster platform connect vcluster {tenant} --project {tenant}"


class TenantVCluster(pulumi.ComponentResource):
    placement: Placement
    gcp_project: TenantProject | None
    network: TenantNetwork | None
    platform_project: k8s.apiextensions.CustomResource
    instance: k8s.apiextensions.CustomResource
    values: pulumi.Output[str]
    nat_addresses: pulumi.Output[list[str]]
    tenant_name: str
    host_namespace: str
    project_namespace: str
    connect_command: str
    gpu_budget_usd_per_hour: float | None  # None: no recorded prices in the region
    backup: TenantBackup | None  # None: tenant.backup.enabled is false
    monitoring: TenantMonitoring | None  # None: monitoring off
    monitoring_outputs: dict

    def __init__(self, name: str, args: TenantVClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:tenants:VirtualCluster", name, None, opts)
        tenant = args.plan.tenant
        facts = args.facts
        where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        assert where is not None, "config.isolation.check_placement refuses a tenant without a project"
        self.placement = where
        self.tenant_name = tenant.name
        self.host_namespace = host_namespace(tenant.name)
        self.project_namespace = project_namespace(platform_project(tenant))
        self.connect_command = connect_command(tenant.name)
        ceiling = args.plan.gpu_usd_per_hour_ceiling
        self.gpu_budget_usd_per_hour = None if ceiling is None else round(ceiling, 2)

        common = {
            props.PROJECT: where.project,
            props.REGION: facts.region,
            props.TENANT: tenant.name,
            props.NODE_METADATA: tenant.node_metadata,
            # Switches of the kubernetes environment template (templates/kubernetes/main.tf): the GCP
            # CCM, its load-balancer controller, the PD CSI driver.
            props.CCM_ENABLED: "true",
            props.CCM_LB_ENABLED: str(tenant.load_balancer_services).lower(),
            props.CSI_ENABLED: str(tenant.persistent_disks).lower(),
        }
        if facts.legacy_infrastructure:
            # Opt-in legacy mode (shared tenants only): the official infrastructure template builds
            # the network, with NAT addresses Google picks, and the environment binds the broad role.
            self.gcp_project = None
            self.network = None
            properties: pulumi.Input[dict] = {**common, "vcluster.com/vpc-cidr": tenant.network.cidr}
            self.nat_addresses = pulumi.Output.from_input([])
            teardown_after: list[pulumi.Resource] = []
        else:
            self.gcp_project = TenantProject(
                f"{name}-project",
                TenantProjectArgs(
                    tenant=tenant.name,
                    environment=facts.environment,
                    placement=where,
                    role_id_prefix=facts.role_id_prefix,
                    platform_service_account=facts.platform_service_account,
                    host_roles=tenant_roles(facts.project, facts.role_id_prefix),
                    tenant_projects=facts.tenant_projects,
                    protect=facts.environment == "prod",
                    apis=args.apis,
                    identity=args.identity,
                    extra_apis=(MONITORING_API,) if args.plan.monitoring.enabled else (),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.network = TenantNetwork(
                f"{name}-gcp",
                TenantNetworkArgs(
                    tenant=tenant.name,
                    environment=facts.environment,
                    project=where.project,
                    region=facts.region,
                    cidr=tenant.network.cidr,
                    platform_service_account=facts.platform_service_account,
                    roles=self.gcp_project.roles,
                    nat_addresses=tenant.network.nat_addresses,
                    iap_ssh=tenant.network.iap_ssh,
                    persistent_disks=tenant.persistent_disks,
                    load_balancer_services=tenant.load_balancer_services,
                    apis=self.gcp_project.apis,
                    identity=self.gcp_project.prerequisites,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.nat_addresses = self.network.nat_addresses
            # The names Pulumi created, handed to the platform's environment template.
            properties = pulumi.Output.all(
                self.network.network.name, self.network.subnetwork.name, self.network.node_service_account.account_id
            ).apply(
                lambda names: {
                    **common,
                    props.NETWORK: names[0],
                    props.SUBNETWORK: names[1],
                    props.NODE_SERVICE_ACCOUNT: names[2],
                }
            )
            # The instance's finalizers delete the tenant's VMs; only then can the VPC, NAT,
            # firewalls, node identity and the platform's grant go. Depending on them orders
            # `pulumi destroy` that way.
            teardown_after = [self.gcp_project, self.network]

        self.monitoring = None
        watchdog = gpu_watchdog(args.plan)
        fallback = capacity_fallback(args.plan, facts.node_provider_name)
        objects = tenant_objects_yaml(tenant.smoke_test, tenant.pod_security_standard, watchdog=watchdog, fallback=fallback)
        if args.plan.monitoring.enabled:
            # config.monitoring refuses monitoring in the legacy mode, which has no network of ours.
            assert self.gcp_project is not None and self.network is not None
            self.monitoring = TenantMonitoring(
                f"{name}-monitoring",
                TenantMonitoringArgs(
                    plan=args.plan,
                    environment=facts.environment,
                    environment_project=facts.project,
                    placement=where,
                    node_service_account=self.network.node_service_account,
                    cost_view=facts.cost_view,
                    apis=self.gcp_project.apis,
                    scope=args.monitoring_scope,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            # The collector stops (with the instance) before its grant goes.
            teardown_after.append(self.monitoring)
            collector = monitoring_objects(
                tenant=tenant.name,
                environment=facts.environment,
                project=where.project,
                region=facts.region,
                scrape_interval=args.plan.monitoring.scrape_interval,
                fallback=fallback is not None,
            )
            # With the instance's objects, which the platform applies inside the tenant. It records
            # what it applied (status.virtualClusterObjects.lastAppliedObjects, loft-sh/loft tag
            # v4.11.2 api/openapi-spec/swagger.json `storage.v1.ObjectsStatus`), which is how objects
            # no longer listed can be removed when monitoring is turned off; the controller's
            # source is not public, so only a live run (make acceptance) shows that it does.
            features = frozenset({"monitoring"})
            objects = yaml_io.dump_all([*tenant_objects(tenant.smoke_test, tenant.pod_security_standard, features, watchdog, fallback), *collector])
        self.monitoring_outputs = self._monitoring_outputs(facts.cost_view)

        pools = [*args.plan.gpu_pools, args.plan.cpu_pool]
        resources = tenant.control_plane.model_dump()
        kubelet = kubelet_config(*shutdown_grace(tenant))
        # Beside the team's NAT addresses, the host cluster's own pod and node ranges: kube-proxy
        # and GKE Dataplane V2 apply loadBalancerSourceRanges to in-cluster traffic to the
        # LoadBalancer's address too, and whether every in-cluster client (the platform, and the
        # kubeconfig it hands the kubernetes template as var.vcluster.kubeConfig) uses the
        # Service's cluster address instead is not public. Internal ranges only: they admit no
        # client from outside the host VPC, and host pods reach the API port through the cluster
        # address anyway (docs/security.md "Joins and the host cluster"). Not in legacy mode, whose NAT addresses are Google's
        # pick and unknown here: its LoadBalancer stays open (the policy pack flags it), and host
        # ranges alone would shut its own nodes out.
        host_ranges = list(facts.host_client_cidrs)
        self.values = pulumi.Output.all(properties, self.nat_addresses).apply(
            lambda v: render_values(
                pools,
                facts.node_provider_name,
                v[0],
                source_ranges=[f"{address}/32" for address in v[1]] + (host_ranges if v[1] else []),
                resources=resources,
                kubelet=kubelet,
            )
        )

        labels = {"gpu-platform/tenant": tenant.name, "gpu-platform/environment": facts.environment}
        self.platform_project = k8s.apiextensions.CustomResource(
            f"{name}-platform-project",
            api_version=API_VERSION,
            kind="Project",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=platform_project(tenant), labels=labels),
            spec=platform_project_spec(tenant, facts.environment, facts.node_provider_name).to_dict(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.platform_api)),
        )

        spec = VirtualClusterInstanceSpec(
            display_name=f"{tenant.name} ({facts.environment})",
            description=f"GPU tenant {tenant.name}: private GPU nodes from NodeProvider {facts.node_provider_name} in GCP project {where.project}",
            cluster_ref=ClusterRef(cluster=LOCAL_CLUSTER, namespace=self.host_namespace),
            access=instance_access(tenant),
            template=VirtualClusterTemplate(
                helm_release=HelmRelease(
                    chart=ChartRef(name=versions.VCLUSTER_CHART, repo=versions.VCLUSTER_CHART_REPO, version=facts.vcluster_version),
                    values=self.values,  # type: ignore[arg-type]  # an Output[str]
                ),
                charts=[
                    TemplateChart(
                        name=versions.GPU_OPERATOR_CHART,
                        repo_url=versions.GPU_OPERATOR_CHART_REPO,
                        version=tenant.gpu_operator.version,
                        release_name="gpu-operator",
                        release_namespace=GPU_OPERATOR_NAMESPACE,
                        values=gpu_operator_values_yaml(
                            tenant.gpu_operator.service_monitor,
                            args.plan.monitoring.enabled,
                            dcgm_exporter_enabled=tenant.gpu_operator.dcgm_exporter,
                            mig_manager=tenant.gpu_operator.mig_manager,
                        ),
                    )
                ],
                objects=objects,
                access=in_cluster_access(tenant),
                # As `vcluster create --driver platform` sends them: private and auto nodes are
                # platform features, and the tenant talks to the platform with a forwarded token.
                pro=ProSettings(enabled=True),
                forward_token=True,
            ),
        )
        self.instance = k8s.apiextensions.CustomResource(
            f"{name}-instance",
            api_version=API_VERSION,
            kind="VirtualClusterInstance",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=tenant.name,
                # The platform creates the project's namespace; pulumi-kubernetes retries a create
                # whose namespace does not exist yet (pulumi/pulumi-kubernetes#262).
                namespace=self.project_namespace,
                labels=labels,
                annotations={
                    "pulumi.com/waitFor": "jsonpath={.status.phase}=Ready",
                    "pulumi.com/timeoutSeconds": str(READY_TIMEOUT_SECONDS),
                    GCP_PROJECT_ANNOTATION: where.project,
                    GPU_OPERATOR_IMAGES_ANNOTATION: gpu_operator_images_annotation(tenant.gpu_operator, [p.gpu for p in tenant.gpu_pools]),
                },
            ),
            spec=spec.to_dict(),
            opts=pulumi.ResourceOptions(
                parent=self,
                # The caller's depends_on (NodeProvider, platform release), the platform project
                # (destroy removes the instance first) and the tenant's GCP objects.
                depends_on=[*depends_on_of(opts), self.platform_project, *teardown_after],
                # Nodes cannot move between projects or networks: a tenant that moves to another
                # GCP project gets a new virtual cluster, whose old one (and its VMs) is deleted
                # first, so the old network is free to go. The same name and host namespace cannot
                # exist twice.
                replace_on_changes=[f'metadata.annotations["{GCP_PROJECT_ANNOTATION}"]'],
                delete_before_replace=True,
            ),
        )
        # The plans name the host namespace: they may exist before it does, and keep their backups after.
        self.backup = (
            TenantBackup(
                f"{name}-backup",
                TenantBackupArgs(
                    tenant=tenant.name,
                    environment=facts.environment,
                    project=facts.project,
                    region=facts.region,
                    cluster=facts.host_cluster,
                    namespace=self.host_namespace,
                    backup=tenant.backup,
                    prerequisites=(*args.apis, *args.backup_prerequisites),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            if tenant.backup.enabled
            else None
        )
        self.register_outputs(
            {
                "tenant": self.tenant_name,
                "gcpProject": where.project,
                "isolation": where.isolation,
                "platformProject": platform_project(tenant),
                "hostNamespace": self.host_namespace,
                "connectCommand": self.connect_command,
                "natAddresses": self.nat_addresses,
                "gpuBudgetUsdPerHour": self.gpu_budget_usd_per_hour,
                "backupPlan": self.backup.backup_plan_name if self.backup else None,
                "monitoring": self.monitoring_outputs,
            }
        )

    def _monitoring_outputs(self, cost_view: str | None) -> dict:
        """Where the team's dashboard, metrics and cost view are (the plan prints the same)."""
        if self.monitoring is None:
            return {"enabled": False}
        return {
            "enabled": True,
            "metricsProject": self.monitoring.metrics_project,
            "dashboard": self.monitoring.dashboard_name,
            "dashboardUrl": self.monitoring.dashboard_url,
            "costView": cost_view,
        }
