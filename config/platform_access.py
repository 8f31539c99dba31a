"""Who reaches the vCluster Platform's UI and API, how they log in, and how the admin password comes
to be: `platform.hostedRouter`, `platform.publicHost` with `platform.publicSourceRanges` and
`platform.tls`, `platform.sso`.

Closed by default. The vendor's hosted router (`*.loft.host`) would serve the UI and API to anyone
on the internet, and the platform is cluster-admin on the host cluster: it is off
(`DISABLE_LOFT_ROUTER`, loft-sh/vcluster-docs platform_versioned_docs/version-4.11.0/install/helm.mdx
"Loft Router", commit 0f45a068f4c65baa8df49daef2868bb1644fbf53) unless a stack turns it on by name,
and prod takes it only with single sign-on. Without it, admins reach the platform by port-forward
through the host cluster's IAM-authenticated API; team members reach `publicHost`, served by a
LoadBalancer Service that admits `publicSourceRanges` only (GKE turns loadBalancerSourceRanges into
the load balancer's firewall rules). Upstream recommends exactly that Service for external access
(port 443 to the pod's 10443, selector app: loft; same commit,
platform_versioned_docs/version-4.11.0/configure/installation-options/domain.mdx "External access
through LoadBalancer", install/environments/gcp.mdx), and keeps its ingress-nginx examples only
"for reference" since that project's retirement. The platform pod serves HTTPS itself (the chart's
`tls`, loft-sh/loft tag v4.11.2 chart/templates/deployment.yaml PROXY_TLS_CERT/KEY; its own
self-signed certificate without), so TLS ends in the pod: no proxy in between sees a password or
token.

The admin password is never a Pulumi secret: a Pulumi secret is decrypted by whoever may preview
the stack, and dev's previews run for every pull request (docs/ci.md "Continuous delivery"). The
environment's deployer creates it inside the cluster instead (components/vcluster_platform.py),
where only those who may read Secrets in the platform's namespace see it.

Single sign-on uses the platform's own OIDC connector, `config.auth.oidc` (loft-sh/loft tag
v4.11.2, api/openapi-spec/swagger.json `storage.v1.AuthenticationOIDC`: issuerUrl, clientId,
clientSecret, redirectURI, groupsClaim, groups, usernameClaim), and with it password login is
switched off, `config.auth.password.disabled: true` (`storage.v1.AuthenticationPassword`: "If true
login via password is disabled"). The client secret is read from the platform pod's environment
("Can be string literal or pulled from the environment": loft-sh/vcluster-docs
platform_versioned_docs/version-4.11.0/_partials/auth/sso/oidc.mdx, commit
0f45a068f4c65baa8df49daef2868bb1644fbf53), which the chart fills from a Secret (`envValueFrom`,
chart/templates/deployment.yaml at v4.11.2): a Secret the environment's admins create with kubectl,
so it is no Pulumi secret either.
"""

from __future__ import annotations

from typing import Any

from .base import ConfigModel, Syntax, quantity, read_cidr
from .errors import Problems, shown

KEY = "platformAdminPassword"
# Secrets in the platform's namespace that never pass through Pulumi.
ADMIN_PASSWORD_SECRET = "vcluster-platform-admin-password"
ADMIN_PASSWORD_KEY = "password"
OIDC_SECRET = "vcluster-platform-oidc"
OIDC_SECRET_KEY = "clientSecret"
OIDC_CLIENT_SECRET_ENV = "OIDC_CLIENT_SECRET"
OIDC_CALLBACK_PATH = "/auth/oidc/callback"

# The Service the program puts in front of the platform for publicHost, and the Secret of
# publicHost's certificate the admins create with platform.tls (components/vcluster_platform.py).
PUBLIC_SERVICE = "vcluster-platform-public"
TLS_SECRET = "vcluster-platform-tls"
DNS_NAME = Syntax(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$")
# What replaces each retired key (the chart's Ingress under ingress-nginx).
RETIRED = {
    "ingressClass": "ingress_class",
    "ingressTls": "ingress_tls",
    "ingressSourceRanges": "ingress_source_ranges",
}
RETIRED_WHY = (
    "is retired: it configured the chart's Ingress under ingress-nginx, which the Kubernetes project retired in March 2026 "
    "(no releases or security fixes since); the platform is now reached at publicHost through a LoadBalancer Service that admits "
    "only publicSourceRanges, and serves TLS itself (tls: true; docs/migration.md \"From the chart's Ingress\"); "
)
RETIRED_INSTEAD = {
    "ingressClass": "remove it, and set publicSourceRanges: [<the CIDRs that may reach publicHost>]",
    "ingressTls": f"remove it, and set tls: true with publicHost's certificate in Secret {TLS_SECRET} (type kubernetes.io/tls) of namespace vcluster-platform (cert-manager's Certificate can write it)",
    "ingressSourceRanges": "rename it publicSourceRanges, same ranges",
}

HTTPS_URL = Syntax(r"^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?$")
CLAIM = Syntax(r"^[A-Za-z0-9_.:/-]{1,100}$")


class Sso(ConfigModel):
    """`platform.sso`: log in to the platform through an OpenID Connect provider, and never with a
    password."""

    issuer_url: str
    """The OIDC provider's issuer URL (the `iss` of its ID tokens), an https URL like https://accounts.google.com."""
    client_id: str
    """The OAuth client id the platform's ID tokens are issued for; its client secret is Secret vcluster-platform-oidc (key clientSecret) in namespace vcluster-platform, which you create with kubectl."""
    groups: tuple[str, ...] = ()
    """Only members of one of these groups may log in (needs groupsClaim); empty: anyone the provider authenticates."""
    groups_claim: str | None = None
    """The ID token's claim that lists a user's groups, like groups."""
    username_claim: str | None = None
    """The ID token's claim that names the user, like email; unset: the platform's default."""


def check_platform_access(environment: str, platform: Any, problems: Problems) -> None:
    """Checks of who reaches the platform and how they log in (a resolved PlatformConfig)."""
    with problems.checking("platform.sso"):
        sso = platform.sso
        if sso is not None:
            _check_sso(sso, platform, problems)
    with problems.checking("platform.hostedRouter"):
        if platform.hosted_router is True and environment == "prod" and platform.sso is None:
            problems.add(
                "platform.hostedRouter",
                "true is not allowed in prod without platform.sso: the hosted *.loft.host domain serves the platform's UI and API to "
                "anyone on the internet, with password login, and the platform is cluster-admin on the host cluster; allowed: false "
                "(team members reach publicHost, admins port-forward), or true with single sign-on (platform.sso)",
            )
    with problems.checking("platform.sso.groups"):
        # With groups empty the connector admits every account its provider authenticates (loft-sh/loft
        # tag v4.11.2 api/openapi-spec/swagger.json storage.v1.AuthenticationOIDC `groups`: "If required
        # groups is non empty, access is denied if the user is not part of at least one"): on the hosted
        # router that is anyone on the internet with an account there (a Google account, for Google's).
        if platform.hosted_router is True and environment == "prod" and platform.sso is not None and not platform.sso.groups:
            problems.add(
                "platform.sso.groups",
                "empty is not allowed in prod with platform.hostedRouter: true: the platform's single sign-on would admit every account "
                f"of {shown(platform.sso.issuer_url)} to the UI and API the hosted *.loft.host domain serves to the internet, and the "
                "platform is cluster-admin on the host cluster; allowed: the groups whose members may log in (with groupsClaim), or "
                "hostedRouter: false",
            )
    with problems.checking("platform.publicHost"):
        host = platform.public_host
        if host is not None and not DNS_NAME.match(host):
            problems.add("platform.publicHost", f"{shown(host)} is not a host name like gpu-platform.example.com (lowercase, no scheme, no port)")
    _check_public_access(environment, platform, problems)
    for key, attribute in RETIRED.items():
        with problems.checking(f"platform.{key}"):
            if getattr(platform, attribute) is not None:
                problems.add(f"platform.{key}", RETIRED_WHY + f"allowed: {RETIRED_INSTEAD[key]}")
    for resource in ("cpu", "memory"):
        with problems.checking(f"platform.controlPlaneMaximum.{resource}"):
            text = getattr(platform.control_plane_maximum, resource)
            if quantity(text) is None:
                example = "4 or 4000m" if resource == "cpu" else "8Gi"
                problems.add(f"platform.controlPlaneMaximum.{resource}", f"{shown(text)} is not a Kubernetes quantity like {example}")


def _check_public_access(environment: str, platform: Any, problems: Problems) -> None:
    with problems.checking("platform.publicSourceRanges"):
        ranges = platform.public_source_ranges
        if ranges is not None:
            if not platform.public_host:
                problems.add(
                    "platform.publicSourceRanges",
                    "needs platform.publicHost: the name team members reach the platform by (its certificate and the single sign-on "
                    "redirect are issued for it)",
                )
            if not ranges:
                problems.add("platform.publicSourceRanges", "lists no range, so nobody could reach publicHost; leave it out to make no Service")
            for i, cidr in enumerate(ranges):
                with problems.checking(f"platform.publicSourceRanges[{i}]"):
                    _, problem = read_cidr(cidr, "203.0.113.0/24")
                    if problem:
                        problems.add(f"platform.publicSourceRanges[{i}]", problem)
    with problems.checking("platform.tls"):
        if platform.tls is True and not platform.public_host:
            problems.add("platform.tls", "needs platform.publicHost: the certificate is publicHost's")
        if platform.tls is not True and environment == "prod" and platform.public_source_ranges:
            problems.add(
                "platform.tls",
                "required in prod with publicSourceRanges: without it the platform serves its own self-signed certificate, which no "
                f"client can tell from an impostor's; allowed: true, with publicHost's certificate in Secret {TLS_SECRET} (type "
                "kubernetes.io/tls) that you create in namespace vcluster-platform (pulumi up stops before the platform until it exists)",
            )


def _check_sso(sso: Sso, platform: Any, problems: Problems) -> None:
    with problems.checking("platform.sso.issuerUrl"):
        if not HTTPS_URL.match(sso.issuer_url):
            problems.add("platform.sso.issuerUrl", f"{shown(sso.issuer_url)} is not an https URL like https://accounts.google.com")
    with problems.checking("platform.sso.clientId"):
        if not sso.client_id or sso.client_id != sso.client_id.strip():
            problems.add("platform.sso.clientId", f"{shown(sso.client_id)} is not an OAuth client id")
    with problems.checking("platform.sso"):
        if not platform.public_host:
            problems.add(
                "platform.sso",
                f"needs platform.publicHost: the provider sends users back to https://<publicHost>{OIDC_CALLBACK_PATH}, "
                "and the hosted loft.host domain is no redirect URI you can register",
            )
    for key, attribute in (("groupsClaim", "groups_claim"), ("usernameClaim", "username_claim")):
        with problems.checking(f"platform.sso.{key}"):
            value = getattr(sso, attribute)
            if value is not None and not CLAIM.match(value):
                problems.add(f"platform.sso.{key}", f"{shown(value)} is not a claim name like groups or email")
    with problems.checking("platform.sso.groups"):
        if sso.groups and not sso.groups_claim:
            problems.add("platform.sso.groups", "needs groupsClaim: the platform finds a user's groups in that claim of the ID token")
        for i, group in enumerate(sso.groups):
            if not group or group != group.strip():
                problems.add(f"platform.sso.groups[{i}]", f"{shown(group)} is not a group name")


def check_no_admin_password(value: Any, problems: Problems) -> None:
    """`gpu-platform:platformAdminPassword` is read no more: any value set is a problem, reported
    beside every other (the value is never quoted)."""
    if value is None or value == "":
        return
    problems.add(
        KEY,
        "is no longer read: a Pulumi secret is decrypted by every preview of the stack (dev's run for every pull request), so it "
        f"would give every branch the platform's admin login; the program creates the password inside the cluster instead, in "
        f"Secret {ADMIN_PASSWORD_SECRET} of namespace vcluster-platform (docs/deploy.md \"The platform's admin login\" says how to read it); "
        f"remove the key: pulumi config rm {KEY}",
    )


def oidc_config(sso: Sso, public_host: str) -> dict[str, Any]:
    """The platform config's `auth` section for `sso`: the OIDC connector, and no password login."""
    oidc: dict[str, Any] = {
        "issuerUrl": sso.issuer_url,
        "clientId": sso.client_id,
        "clientSecret": f"${OIDC_CLIENT_SECRET_ENV}",
        "redirectURI": f"https://{public_host}{OIDC_CALLBACK_PATH}",
    }
    if sso.groups_claim:
        oidc["groupsClaim"] = sso.groups_claim
    if sso.groups:
        oidc["groups"] = list(sso.groups)
    if sso.username_claim:
        oidc["usernameClaim"] = sso.username_claim
    return {"oidc": oidc, "password": {"disabled": True}}
