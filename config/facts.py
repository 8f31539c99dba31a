"""What a tenant needs to know about its environment, in one serialisable object.

An environment stack builds it from its own config and exports it (`environmentFacts`); a tenant
stack builds it statically from the environment's stack file in this repo, validates against it
before registering anything, and checks it again against the deployed environment's export.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .isolation import TenantProjects
from .node_types import NodeType

# The tenant cluster's own networks (vcluster chart defaults): node subnets must stay clear of them.
TENANT_CLUSTER_CIDRS = (("vCluster pod network", "10.244.0.0/16"), ("vCluster service network", "10.96.0.0/12"))
PLATFORM_NAMESPACE = "vcluster-platform"


# The prefix of vCluster Platform project namespaces. The platform's config key
# `projectNamespacePrefix` ("Omitted defaults to \"p-\"": vcluster-docs
# platform/api/_partials/resources/config/reference.mdx; loft-sh/loft v4.11.2
# api/openapi-spec/swagger.json `ConfigStatus`) is set to it explicitly in the platform's Helm values
# (components/vcluster_platform.py), and the environment template's namespace check is rendered
# with it (components/templates.py): all three agree by construction, whatever the default becomes.
PROJECT_NAMESPACE_PREFIX = "p-"


def project_namespace(platform_project: str) -> str:
    """The namespace of a vCluster Platform project."""
    return f"{PROJECT_NAMESPACE_PREFIX}{platform_project}"


def ci_drift_account(environment: str, project: str) -> str:
    """The e-mail of the CI bootstrap's drift identity of an environment: the account
    bootstrap/ci_config.py `account_id` names gpu-ci-<environment>-drift in the environment's
    project (tests/test_bootstrap.py checks that both agree for every committed environment). The
    environment stack lets it read the Secrets of the platform's namespace, and only those
    (components/vcluster_platform.py `ci_secrets_reader`)."""
    return f"gpu-ci-{environment}-drift@{project}.iam.gserviceaccount.com"


@dataclass(frozen=True)
class TenantClaim:
    """A tenant already known to the environment (inline, or another team's stack file)."""

    name: str
    cidr: str
    source: str  # where it is declared, for error messages
    project: str | None = None  # its own GCP project; None when shared (or not named)
    shared: bool = False  # isolation: shared


@dataclass(frozen=True)
class EnvironmentFacts:
    environment: str
    project: str
    region: str
    zones: tuple[str, ...]
    node_provider_name: str
    gpu_types: tuple[str, ...]
    spot: bool
    gpu_quota: dict[str, int]
    node_types: tuple[NodeType, ...]
    reserved_cidrs: tuple[tuple[str, str], ...]  # (what, CIDR) tenant subnets must not overlap
    tenants: tuple[TenantClaim, ...]
    vcluster_version: str
    platform_service_account: str  # e-mail; deterministic from project and account id
    tenant_subnet_role: str  # projects/<project>/roles/<id>, created by the environment
    tenant_disk_role: str
    tenant_load_balancer_role: str
    legacy_infrastructure: bool
    prices_read: str | None  # when the region's prices were read; None: no recorded prices there
    # Custom role ids <prefix>_<role>: defined in the environment's project, and in each team's
    # project for the bindings made there.
    role_id_prefix: str = ""
    platform_role: str = ""  # projects/<project>/roles/<prefix>_autoNodes, for shared tenants
    tenant_projects: TenantProjects | None = None  # where Pulumi creates teams' projects
    allow_shared_isolation: bool = False
    allow_shared_with_project_tenants: bool = False
    approved_tenant_security: dict[str, dict[str, Any]] = field(default_factory=dict)  # team → config key → value
    control_plane_maximum: dict[str, str] = field(default_factory=lambda: {"cpu": "4", "memory": "8Gi"})
    allow_tenants_without_backup: bool = False
    # The host cluster as Backup for GKE names it (projects/<p>/locations/<l>/clusters/<name>), and
    # its own pod and node ranges: clients inside it that reach a tenant's control plane through
    # its LoadBalancer address come from there (components/vcluster_values.py).
    host_cluster: str = ""
    host_client_cidrs: tuple[str, ...] = ()
    # gpu-platform:monitoring of the environment: its tenants' default, and whether its project has
    # the Monitoring API and the metrics scope team projects join (config/monitoring.py).
    monitoring_enabled: bool = False
    scrape_interval: str = "60s"
    cost_view: str | None = None  # <project>.<dataset>.<view> of the showback view; None: not set up yet
    # monitoring.alerts.gpuNotOfferedAfter, which every GPU pool's watchdog limit stays under
    # (config/monitoring.py check_alert_after_watchdog); None: the environment has no such alert.
    gpu_not_offered_after: str | None = None

    def node_types_for(
        self, gpu: str | None, spot: bool, gpu_count: int | None = None, zones: tuple[str, ...] | None = None
    ) -> tuple[NodeType, ...]:
        return tuple(
            nt
            for nt in self.node_types
            if nt.gpu == gpu
            and nt.spot == spot
            and (gpu_count is None or nt.gpu_count == gpu_count)
            and (zones is None or nt.zone in zones)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "project": self.project,
            "region": self.region,
            "zones": list(self.zones),
            "nodeProviderName": self.node_provider_name,
            "gpuTypes": list(self.gpu_types),
            "spot": self.spot,
            "gpuQuota": dict(self.gpu_quota),
            "nodeTypes": [nt.to_dict() for nt in self.node_types],
            "reservedCidrs": [{"what": w, "cidr": c} for w, c in self.reserved_cidrs],
            "tenants": [{"name": t.name, "cidr": t.cidr, "source": t.source, "project": t.project, "shared": t.shared} for t in self.tenants],
            "vclusterVersion": self.vcluster_version,
            "platformServiceAccount": self.platform_service_account,
            "tenantSubnetRole": self.tenant_subnet_role,
            "tenantDiskRole": self.tenant_disk_role,
            "tenantLoadBalancerRole": self.tenant_load_balancer_role,
            "legacyInfrastructure": self.legacy_infrastructure,
            "pricesRead": self.prices_read,
            "roleIdPrefix": self.role_id_prefix,
            "platformRole": self.platform_role,
            "tenantProjects": self.tenant_projects.model_dump(by_alias=True) if self.tenant_projects else None,
            "allowSharedIsolation": self.allow_shared_isolation,
            "allowSharedWithProjectTenants": self.allow_shared_with_project_tenants,
            "approvedTenantSecurity": {team: dict(settings) for team, settings in self.approved_tenant_security.items()},
            "controlPlaneMaximum": dict(self.control_plane_maximum),
            "allowTenantsWithoutBackup": self.allow_tenants_without_backup,
            "hostCluster": self.host_cluster,
            "hostClientCidrs": list(self.host_client_cidrs),
            "monitoringEnabled": self.monitoring_enabled,
            "scrapeInterval": self.scrape_interval,
            "costView": self.cost_view,
            "gpuNotOfferedAfter": self.gpu_not_offered_after,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvironmentFacts:
        return cls(
            environment=data["environment"],
            project=data["project"],
            region=data["region"],
            zones=tuple(data["zones"]),
            node_provider_name=data["nodeProviderName"],
            gpu_types=tuple(data["gpuTypes"]),
            spot=bool(data["spot"]),
            gpu_quota={k: int(v) for k, v in data["gpuQuota"].items()},
            node_types=tuple(NodeType.from_dict(nt) for nt in data["nodeTypes"]),
            reserved_cidrs=tuple((r["what"], r["cidr"]) for r in data["reservedCidrs"]),
            tenants=tuple(
                TenantClaim(t["name"], t["cidr"], t.get("source", "environment"), t.get("project"), bool(t.get("shared", t.get("project") is None)))
                for t in data["tenants"]
            ),
            vcluster_version=data["vclusterVersion"],
            platform_service_account=data["platformServiceAccount"],
            tenant_subnet_role=data["tenantSubnetRole"],
            tenant_disk_role=data["tenantDiskRole"],
            tenant_load_balancer_role=data["tenantLoadBalancerRole"],
            legacy_infrastructure=bool(data.get("legacyInfrastructure", False)),
            prices_read=data.get("pricesRead"),
            # Absent in exports of environments deployed before teams had projects of their own;
            # the identity check then asks for the environment to be deployed first.
            role_id_prefix=data.get("roleIdPrefix", ""),
            platform_role=data.get("platformRole", ""),
            tenant_projects=TenantProjects.model_validate(data["tenantProjects"]) if data.get("tenantProjects") else None,
            allow_shared_isolation=bool(data.get("allowSharedIsolation", False)),
            # Absent in exports of environments deployed before these settings existed: their defaults.
            allow_shared_with_project_tenants=bool(data.get("allowSharedWithProjectTenants", False)),
            approved_tenant_security={k: dict(v) for k, v in (data.get("approvedTenantSecurity") or {}).items()},
            control_plane_maximum=dict(data.get("controlPlaneMaximum") or {"cpu": "4", "memory": "8Gi"}),
            # Absent in exports of environments deployed before backups; deploy it first.
            allow_tenants_without_backup=bool(data.get("allowTenantsWithoutBackup", False)),
            host_cluster=data.get("hostCluster", ""),
            host_client_cidrs=tuple(data.get("hostClientCidrs", ())),
            # Absent in exports of environments deployed before monitoring: off, so a team stack
            # that wants it asks for the environment to be deployed first.
            monitoring_enabled=bool(data.get("monitoringEnabled", False)),
            scrape_interval=data.get("scrapeInterval", "60s"),
            cost_view=data.get("costView"),
            # Absent in exports of environments deployed before: not checked until it is deployed.
            gpu_not_offered_after=data.get("gpuNotOfferedAfter"),
        )
