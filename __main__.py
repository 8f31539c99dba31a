"""gpu-platform: one Pulumi program for two kinds of stack.

Environment stack (dev, prod, …): GKE host, auto-nodes identity, vCluster Platform, the GPU
NodeProvider and any inline tenants. Tenant stack (gpu-platform:environmentStack set): one team's
virtual cluster, reading its environment through a StackReference. Configuration is validated as a
whole before anything is registered.
"""

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.auto_nodes_identity import AutoNodesIdentity, AutoNodesIdentityArgs
from components.environment_monitoring import EnvironmentMonitoring, EnvironmentMonitoringArgs, monitored_tenants
from components.gke_cluster import GkeCluster, GkeClusterArgs
from components.node_provider import GcpNodeProvider, GcpNodeProviderArgs
from components.tenant_vcluster import TenantVCluster, TenantVClusterArgs
from components.vcluster_platform import VClusterPlatform, VClusterPlatformArgs
from config.deployed import check_against_deployed
from config.errors import ConfigError
from config.facts import PLATFORM_NAMESPACE, ci_drift_account
from config.runtime import runtime_values
from config.stack import NS, EnvironmentStack, TenantStack, load_stack
from config.stack_files import PROJECT_DIR


def deploy_environment(env: EnvironmentStack) -> None:
    for warning in env.warnings:
        pulumi.log.warn(warning)
    gcp_provider = gcp.Provider(
        "gcp",
        project=env.project,
        region=env.region,
        default_labels={"gpu-platform-environment": env.environment, "managed-by": "pulumi"},
    )
    on_gcp = pulumi.ResourceOptions(providers=[gcp_provider])

    gke = GkeCluster("gke", GkeClusterArgs(env.project, env.region, env.environment, env.cluster), opts=on_gcp)
    identity = AutoNodesIdentity(
        "auto-nodes",
        AutoNodesIdentityArgs(
            project=env.project,
            environment=env.environment,
            service_account_id=env.platform.service_account_id,
            role_id_prefix=env.platform.role_id_prefix,
            workload_pool=gke.workload_pool,
            legacy=env.node_provider.legacy_infrastructure,
            cluster=gke.cluster,
        ),
        opts=pulumi.ResourceOptions(providers=[gcp_provider], depends_on=gke.apis),
    )

    config = pulumi.Config(NS)
    # The admin password is no Pulumi secret (a preview would decrypt it): the platform component
    # creates it inside the cluster (config/platform_access.py).
    license_key = env.platform.license_token_key

    platform = VClusterPlatform(
        "platform",
        VClusterPlatformArgs(
            chart_version=env.platform.chart_version,
            service_account_email=identity.email,
            kubeconfig=gke.kubeconfig,
            public_host=env.platform.public_host,
            public_source_ranges=env.platform.public_source_ranges,
            tls=env.platform.tls,
            hosted_router=env.platform.hosted_router,
            license_token=config.require_secret(license_key) if license_key else None,
            sso=env.platform.sso,
            ci_secret_readers=(ci_drift_account(env.environment, env.project),),
        ),
        opts=pulumi.ResourceOptions(providers=[gke.provider], depends_on=[gke.system_pool, identity]),
    )
    node_provider = GcpNodeProvider(
        "gpu-nodes",
        GcpNodeProviderArgs(
            name=env.node_provider.name,
            environment=env.environment,
            region=env.region,
            node_types=env.offer.node_types,
            legacy_infrastructure=env.node_provider.legacy_infrastructure,
        ),
        opts=pulumi.ResourceOptions(providers=[gke.provider], depends_on=[platform.api_ready]),
    )
    monitoring = None
    if env.monitoring.enabled:
        monitoring = EnvironmentMonitoring(
            "monitoring",
            EnvironmentMonitoringArgs(
                stack=env.stack,
                environment=env.environment,
                project=env.project,
                config=env.monitoring,
                tenants=monitored_tenants((*env.tenants, *env.team_stack_tenants), env.facts),
                apis=tuple(gke.apis),
            ),
            opts=on_gcp,
        )
    # Tenants depend on the NodeProvider and the platform, never on each other: they deploy in
    # parallel, and `pulumi destroy` removes them (and so their VMs) before the platform goes.
    tenants = [
        TenantVCluster(
            f"tenant-{plan.tenant.name}",
            TenantVClusterArgs(
                plan,
                env.facts,
                apis=gke.tenant_apis,
                identity=identity.tenant_prerequisites,
                platform_api=(platform.api_ready,),
                backup_prerequisites=gke.backup_prerequisites,
                monitoring_scope=tuple(monitoring.services) if monitoring else (),
            ),
            opts=pulumi.ResourceOptions(providers=[gke.provider, gcp_provider], depends_on=[node_provider, platform]),
        )
        for plan in env.tenants
    ]

    pulumi.export("environment", env.environment)
    pulumi.export("gcpProject", env.project)
    pulumi.export("region", env.region)
    pulumi.export("zones", list(env.facts.zones))
    pulumi.export("clusterName", gke.cluster.name)
    pulumi.export("kubeconfig", gke.kubeconfig)
    pulumi.export("platformNamespace", PLATFORM_NAMESPACE)
    pulumi.export("platformServiceAccount", identity.email)
    pulumi.export("nodeProviderName", node_provider.name)
    pulumi.export("nodeTypes", [{"name": nt.name, "properties": nt.properties} for nt in env.offer.node_types])
    pulumi.export("environmentFacts", env.facts.to_dict())
    pulumi.export("tenants", {t.tenant_name: tenant_outputs(t) for t in tenants})
    pulumi.export("monitoring", monitoring.outputs if monitoring else {"enabled": False})


def deploy_tenant(stack: TenantStack) -> None:
    for warning in stack.warnings:
        pulumi.log.warn(warning)
    environment = pulumi.StackReference(stack.environment_stack)

    def check(deployed: dict) -> bool:
        try:
            warnings = check_against_deployed(stack, deployed)
        except ConfigError as e:
            raise pulumi.RunError(str(e)) from None
        for warning in warnings:
            pulumi.log.warn(warning)
        return True

    # Both providers wait for the check, and every resource waits for its provider: if the deployed
    # environment cannot serve this tenant, the stack fails before anything is created.
    checked = environment.require_output("environmentFacts").apply(check)
    facts = stack.facts
    gcp_provider = gcp.Provider(
        "gcp",
        # The project the tenant's objects live in: its own, or the environment's when shared.
        project=checked.apply(lambda _: stack.placement.project),
        region=facts.region,
        default_labels={"gpu-platform-environment": facts.environment, "managed-by": "pulumi"},
    )
    host = k8s.Provider(
        "host",
        kubeconfig=pulumi.Output.all(checked, environment.require_output("kubeconfig")).apply(lambda v: v[1]),
        cluster_identifier=stack.environment_stack,
    )
    tenant = TenantVCluster(
        f"tenant-{stack.tenant.tenant.name}",
        TenantVClusterArgs(stack.tenant, facts),
        opts=pulumi.ResourceOptions(providers=[host, gcp_provider]),
    )
    for key, value in tenant_outputs(tenant).items():
        pulumi.export(key, value)


def tenant_outputs(tenant: TenantVCluster) -> dict:
    return {
        "tenant": tenant.tenant_name,
        "gcpProject": tenant.placement.project,
        "isolation": tenant.placement.isolation,
        "projectNamespace": tenant.project_namespace,
        "hostNamespace": tenant.host_namespace,
        "connectCommand": tenant.connect_command,
        "natAddresses": tenant.nat_addresses,
        "gpuBudgetUsdPerHour": tenant.gpu_budget_usd_per_hour,
        # Backup for GKE plans of the tenant's control plane (docs/reliability.md); None: backups off.
        "backupPlan": tenant.backup.backup_plan_name if tenant.backup else None,
        "restorePlan": tenant.backup.restore_plan_name if tenant.backup else None,
        "monitoring": tenant.monitoring_outputs,
    }


try:
    loaded = load_stack(runtime_values(), stack=pulumi.get_stack(), project_dir=PROJECT_DIR)
except ConfigError as e:
    raise pulumi.RunError(str(e)) from None

if isinstance(loaded, EnvironmentStack):
    deploy_environment(loaded)
else:
    deploy_tenant(loaded)
