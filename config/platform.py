"""Config model of an environment's vCluster Platform, gpu-platform:platform, and its checks.

Who reaches the platform and how they log in are config/platform_access.py's; defaults that depend
on the environment are filled in by `resolve_platform_defaults`. Every field is documented by the
docstring below it (docs/configuration.md is generated from them, `make docs`).
"""

from __future__ import annotations

from typing import Any

from . import versions
from .base import ConfigModel, Syntax
from .errors import Broken, Problems, derived
from .isolation import TenantProjects
from .platform_access import Sso, check_platform_access
from .tenant_security import ControlPlaneMaximum, TenantSecurity

ROLE_ID_PREFIX = Syntax(r"^[a-zA-Z0-9_.]{3,40}$")
SERVICE_ACCOUNT_ID = Syntax(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


class PlatformConfig(ConfigModel):
    """The vCluster Platform of an environment, who reaches it, and where teams' GCP projects are created."""

    chart_version: str = versions.PLATFORM_CHART_VERSION
    """The vcluster-platform chart version, at least 4.9.1 (admin.passwordSecretRef)."""
    vcluster_version: str = versions.VCLUSTER_CHART_VERSION
    """The tenants' vcluster chart version, checked against the platform version."""
    hosted_router: bool = False
    """Also serve the platform's UI and API on the vendor's hosted *.loft.host domain, to anyone on the internet who finds it; false: off (env DISABLE_LOFT_ROUTER); in prod only with sso that names its groups (sso.groups)."""
    public_host: str | None = None
    """The host name team members reach the platform at (config.loftHost), served by publicSourceRanges' LoadBalancer; unset: admins reach it only by port-forward (docs/security.md, "Who reaches the platform")."""
    public_source_ranges: tuple[str, ...] | None = None
    """With publicHost: the sources (IPv4 CIDRs) the platform's LoadBalancer Service admits on port 443, the only ones GKE's firewall lets through; unset: no Service, so publicHost is yours to route."""
    tls: bool = False
    """Serve HTTPS with publicHost's certificate from Secret vcluster-platform-tls (type kubernetes.io/tls) that you create in namespace vcluster-platform; false: the platform's own self-signed certificate (required in prod with publicSourceRanges)."""
    license_token_key: str | None = None
    """Name of a secret config key of this stack that holds the platform license token."""
    role_id_prefix: str | None = None
    """Prefix of the custom role ids (<prefix>_autoNodes, _tenantSubnetUse, _tenantDisks, _tenantLoadBalancers); unset: gpuPlatform_<environment>."""
    service_account_id: str | None = None
    """The platform's Google service account id; unset: vcluster-platform-<environment>."""
    tenant_projects: TenantProjects | None = None
    """Where Pulumi creates the GCP projects of tenants that name none, as <prefix>-<environment>-<team> (at most 30 characters, so the prefix may have 12 − len(environment) characters)."""
    allow_shared_isolation: bool | None = None
    """Whether tenants may use isolation: shared (always warned about); unset: allowed in dev and staging, refused in prod."""
    allow_tenants_without_backup: bool | None = None
    """Tenants may turn their backup off (backup.enabled: false); default true in dev and staging, false in prod."""
    allow_shared_with_project_tenants: bool = False
    """Accept shared tenants beside tenants in projects of their own (refused by default: a shared tenant's node identity reads every VM of the environment's project, whose host cluster runs every tenant's control plane; docs/security.md, "Shared and project tenants")."""
    approved_tenant_security: dict[str, TenantSecurity] = {}
    """In prod: per team name, the security settings (isolation, loadBalancerServices, nodeMetadata, podSecurityStandard) its tenant may have instead of the safe defaults; a team stack's unapproved change is refused."""
    control_plane_maximum: ControlPlaneMaximum = ControlPlaneMaximum()
    """The most one tenant's control-plane pod may request or be limited to (tenants[i].controlPlane), so that no tenant starves the others on the system nodes."""
    sso: Sso | None = None
    """Log in to the platform through an OpenID Connect provider, and password login off; needs publicHost."""
    ingress_class: Any = None
    """Retired (the chart's Ingress under ingress-nginx, which gets no security fixes since March 2026): any value is an error saying what replaces it; use publicSourceRanges."""
    ingress_tls: Any = None
    """Retired with ingressClass: any value is an error; the platform serves TLS itself (tls)."""
    ingress_source_ranges: Any = None
    """Retired with ingressClass: any value is an error; the same ranges go into publicSourceRanges."""


def resolve_platform_defaults(environment: str, platform: PlatformConfig) -> PlatformConfig:
    if isinstance(platform, Broken):
        return platform
    return platform.model_copy(
        update={
            "role_id_prefix": derived(lambda: platform.role_id_prefix or f"gpuPlatform_{environment}"),
            "service_account_id": derived(lambda: platform.service_account_id or f"vcluster-platform-{environment}"),
            "allow_shared_isolation": derived(
                lambda: environment != "prod" if platform.allow_shared_isolation is None else platform.allow_shared_isolation
            ),
            "allow_tenants_without_backup": derived(
                lambda: environment != "prod" if platform.allow_tenants_without_backup is None else platform.allow_tenants_without_backup
            ),
        }
    )


def _unsupported(version: str, supported: tuple[str, ...]) -> str:
    return f"{version!r} is not a version this release supports; supported: {', '.join(supported)} (config/versions.py)"


def check_platform(environment: str, platform: PlatformConfig, problems: Problems) -> None:
    with problems.checking("platform.chartVersion"):
        try:
            chart = versions.parse_version(platform.chart_version)
        except ValueError as e:
            problems.add("platform.chartVersion", str(e))
        else:
            if chart < versions.parse_version(versions.MIN_PLATFORM_FOR_PASSWORD_SECRET_REF):
                problems.add(
                    "platform.chartVersion",
                    f"{platform.chart_version} predates admin.passwordSecretRef; "
                    f"at least {versions.MIN_PLATFORM_FOR_PASSWORD_SECRET_REF} is needed to keep the admin password out of Helm values",
                )
            elif not versions.platform_supports_vcluster(platform.chart_version, platform.vcluster_version):
                known = ", ".join(f"{k}.x→{v}" for k, v in versions.VCLUSTER_MIN_PLATFORM.items())
                problems.add(
                    "platform.vclusterVersion",
                    f"{platform.vcluster_version} is not managed by platform {platform.chart_version}; minimum platform per vCluster: {known}",
                )
            elif platform.chart_version not in versions.SUPPORTED_PLATFORM_CHART_VERSIONS:
                problems.add("platform.chartVersion", _unsupported(platform.chart_version, versions.SUPPORTED_PLATFORM_CHART_VERSIONS))
    with problems.checking("platform.vclusterVersion"):
        if platform.vcluster_version not in versions.SUPPORTED_VCLUSTER_CHART_VERSIONS:
            problems.add("platform.vclusterVersion", _unsupported(platform.vcluster_version, versions.SUPPORTED_VCLUSTER_CHART_VERSIONS))
    check_platform_access(environment, platform, problems)
    with problems.checking("platform.licenseTokenKey"):
        if platform.license_token_key is not None and not platform.license_token_key.isidentifier():
            problems.add("platform.licenseTokenKey", f"{platform.license_token_key!r} must be a config key name like vclusterLicenseToken")
    with problems.checking("platform.roleIdPrefix"):
        if not ROLE_ID_PREFIX.match(platform.role_id_prefix):
            problems.add("platform.roleIdPrefix", f"{platform.role_id_prefix!r} must be 3–40 characters of [a-zA-Z0-9_.]")
    with problems.checking("platform.serviceAccountId"):
        if not SERVICE_ACCOUNT_ID.match(platform.service_account_id):
            problems.add("platform.serviceAccountId", f"{platform.service_account_id!r} must be 6–30 characters of [a-z0-9-]")
        elif platform.service_account_id.endswith("-nodes") or platform.service_account_id.startswith("gpu-ci-"):
            # The names of node accounts (<cluster>-nodes, <env>-<tenant>-nodes) and CI's: one account
            # must never be two identities.
            problems.add(
                "platform.serviceAccountId",
                f"{platform.service_account_id!r} is not allowed; allowed: an id that neither ends in -nodes (node accounts) nor starts with gpu-ci- (CI's)",
            )
