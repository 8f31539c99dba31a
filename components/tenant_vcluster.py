"""TenantVCluster: one ML team's virtual cluster, whose GPU nodes are private VMs created when a pod
asks for `nvidia.com/gpu` and deleted when idle. Used the same way by an environment stack (inline
tenants) and by a team's own stack."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from config import node_properties as props
from config import versions
from config.facts import PROJECT_NAMESPACE, EnvironmentFacts
from config.tenant import TenantPlan

from .options import depends_on_of
from .loft_api import (
    API_VERSION,
    AccessRule,
    ChartRef,
    ClusterRef,
    HelmRelease,
    InstanceAccess,
    ProSettings,
    TemplateChart,
    VirtualClusterInstanceSpec,
    VirtualClusterTemplate,
)
from .tenant_documents import GPU_OPERATOR_NAMESPACE, gpu_operator_values_yaml, tenant_objects_yaml
from .tenant_network import TenantNetwork, TenantNetworkArgs
from .vcluster_values import render_values

LOCAL_CLUSTER = "loft-cluster"
READY_TIMEOUT_SECONDS = 1800  # control plane, LoadBalancer and first CPU node


@dataclass(frozen=True)
class TenantVClusterArgs:
    plan: TenantPlan
    facts: EnvironmentFacts
    project_namespace: str = PROJECT_NAMESPACE
    # What the tenant's GCP objects must wait for when the environment is created in the same stack
    # (inline tenants): the project's APIs, and for IAM bindings the platform's identity and roles.
    apis: tuple[pulumi.Resource, ...] = ()
    identity: tuple[pulumi.Resource, ...] = ()


def host_namespace(tenant: str) -> str:
    return f"vcluster-{tenant}"


def connect_command(tenant: str, project_namespace: str = PROJECT_NAMESPACE) -> str:
    project = project_namespace.removeprefix("p-")
    return f"vcluster platform connect vcluster {tenant} --project {project}"


class TenantVCluster(pulumi.ComponentResource):
    network: TenantNetwork | None
    instance: k8s.apiextensions.CustomResource
    values: pulumi.Output[str]
    tenant_name: str
    host_namespace: str
    connect_command: str
    gpu_budget_usd_per_hour: float | None  # None: no recorded prices in the region

    def __init__(self, name: str, args: TenantVClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:tenants:VirtualCluster", name, None, opts)
        tenant = args.plan.tenant
        facts = args.facts
        self.tenant_name = tenant.name
        self.host_namespace = host_namespace(tenant.name)
        self.connect_command = connect_command(tenant.name, args.project_namespace)
        ceiling = args.plan.gpu_usd_per_hour_ceiling
        self.gpu_budget_usd_per_hour = None if ceiling is None else round(ceiling, 2)

        common = {
            props.PROJECT: facts.project,
            props.REGION: facts.region,
            props.TENANT: tenant.name,
            # Switches of the kubernetes environment template (templates/kubernetes/main.tf): the GCP
            # CCM, its load-balancer controller, the PD CSI driver.
            props.CCM_ENABLED: "true",
            props.CCM_LB_ENABLED: str(tenant.load_balancer_services).lower(),
            props.CSI_ENABLED: str(tenant.persistent_disks).lower(),
        }
        if facts.legacy_infrastructure:
            # Opt-in legacy mode: the official infrastructure template builds the network itself.
            self.network = None
            properties: pulumi.Input[dict] = {**common, "vcluster.com/vpc-cidr": tenant.network.cidr}
            teardown_after: list[pulumi.Resource] = []
        else:
            self.network = TenantNetwork(
                f"{name}-gcp",
                TenantNetworkArgs(
                    tenant=tenant.name,
                    environment=facts.environment,
                    project=facts.project,
                    region=facts.region,
                    cidr=tenant.network.cidr,
                    platform_service_account=facts.platform_service_account,
                    tenant_subnet_role=facts.tenant_subnet_role,
                    tenant_disk_role=facts.tenant_disk_role,
                    tenant_load_balancer_role=facts.tenant_load_balancer_role,
                    iap_ssh=tenant.network.iap_ssh,
                    persistent_disks=tenant.persistent_disks,
                    load_balancer_services=tenant.load_balancer_services,
                    apis=args.apis,
                    identity=args.identity,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
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
            # firewalls and node identity go. Depending on them orders `pulumi destroy` that way.
            teardown_after = [self.network]

        pools = [*args.plan.gpu_pools, args.plan.cpu_pool]
        self.values = pulumi.Output.from_input(properties).apply(
            lambda p: render_values(pools, facts.node_provider_name, p)
        )

        access = None
        if tenant.access.users or tenant.access.teams:
            access = InstanceAccess(
                rules=[
                    AccessRule(
                        cluster_role="cluster-admin",
                        users=list(tenant.access.users) or None,
                        teams=list(tenant.access.teams) or None,
                    )
                ]
            )
        spec = VirtualClusterInstanceSpec(
            display_name=f"{tenant.name} ({facts.environment})",
            description=f"GPU tenant {tenant.name}: private GPU nodes from NodeProvider {facts.node_provider_name}",
            cluster_ref=ClusterRef(cluster=LOCAL_CLUSTER, namespace=self.host_namespace),
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
                        values=gpu_operator_values_yaml(tenant.gpu_operator.service_monitor),
                    )
                ],
                objects=tenant_objects_yaml(tenant.smoke_test),
                access=access,
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
                namespace=args.project_namespace,
                labels={"gpu-platform/tenant": tenant.name, "gpu-platform/environment": facts.environment},
                annotations={
                    "pulumi.com/waitFor": "jsonpath={.status.phase}=Ready",
                    "pulumi.com/timeoutSeconds": str(READY_TIMEOUT_SECONDS),
                },
            ),
            spec=spec.to_dict(),
            # The caller's depends_on (NodeProvider, platform release) plus the tenant's own network.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on_of(opts), *teardown_after]),
        )
        self.register_outputs(
            {
                "tenant": self.tenant_name,
                "hostNamespace": self.host_namespace,
                "connectCommand": self.connect_command,
                "gpuBudgetUsdPerHour": self.gpu_budget_usd_per_hour,
            }
        )
