"""The checks of an environment's `platform` key: chart versions from the supported set, the
Ingress and its TLS, access (single sign-on), identities' names. Split from config/environment.py,
where the model (PlatformConfig) lives."""

from __future__ import annotations

from . import versions
from .base import DNS_LABEL
from .environment import INGRESS_TLS_SECRET, ROLE_ID_PREFIX, SERVICE_ACCOUNT_ID, PlatformConfig
from .errors import Problems
from .platform_access import check_platform_access


def _unsupported(version: str, supported: tuple[str, ...]) -> str:
    return f"{version!r} is not a version this release supports; supported: {', '.join(supported)} (config/versions.py)"


def check_platform(platform: PlatformConfig, problems: Problems) -> None:
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
    with problems.checking("platform.ingressClass"):
        if platform.ingress_class and not platform.public_host:
            problems.add("platform.ingressClass", "needs platform.publicHost (the host the Ingress serves)")
    _check_ingress_tls(platform, problems)
    check_platform_access(platform, problems)
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


def _check_ingress_tls(platform: PlatformConfig, problems: Problems) -> None:
    """The chart's Ingress would otherwise reference TLS Secret `loft-tls` (vcluster-platform chart
    values.yaml `ingress.tls: {enabled: true, secret: loft-tls}`, loft-sh/loft tag v4.11.2), which
    nothing creates: the ingress controller would serve its own default certificate."""
    with problems.checking("platform.ingressTls"):
        tls = platform.ingress_tls
        if tls is None:
            if platform.ingress_class:
                problems.add(
                    "platform.ingressTls",
                    "required with ingressClass; allowed: {clusterIssuer: <a cert-manager ClusterIssuer>} (cert-manager issues the "
                    f"certificate into Secret {INGRESS_TLS_SECRET}), {{secretName: <a kubernetes.io/tls Secret you create in namespace "
                    "vcluster-platform>}, or {enabled: false} (TLS ends in front of the ingress controller)",
                )
        elif not platform.ingress_class:
            problems.add("platform.ingressTls", "applies only with platform.ingressClass (the chart's Ingress)")
    with problems.checking("platform.ingressTls"):
        tls = platform.ingress_tls
        if tls is not None:
            named = bool(tls.secret_name or tls.cluster_issuer)
            if not tls.enabled and named:
                problems.add("platform.ingressTls", "enabled: false takes no secretName or clusterIssuer")
            if tls.enabled and not named:
                problems.add("platform.ingressTls", "name a clusterIssuer (cert-manager creates the Secret) or the secretName of a Secret you create")
    for key, attribute in (("secretName", "secret_name"), ("clusterIssuer", "cluster_issuer")):
        with problems.checking(f"platform.ingressTls.{key}"):
            value = None if platform.ingress_tls is None else getattr(platform.ingress_tls, attribute)
            if value is not None and not (len(value) <= 253 and all(DNS_LABEL.match(part) for part in value.split("."))):
                problems.add(f"platform.ingressTls.{key}", f"{value!r} is not a Kubernetes object name (lowercase DNS subdomain)")
