"""Who reaches the vCluster Platform's UI and API, and how they log in (`platform.sso`,
`platform.ingressSourceRanges`), and how the admin password comes to be.

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

# ingress-nginx reads an Ingress's allowed client ranges from this annotation (kubernetes/ingress-nginx
# internal/ingress/annotations/ipallowlist/main.go: `whitelist-source-range`, the alias every release
# reads; newer ones also `allowlist-source-range`; read at commit 38b133a1e8d446aa75ba6bb9288a4fc53d987d3c).
# Other controllers ignore it: it takes effect only with an ingress-nginx class (`is_nginx_class`).
SOURCE_RANGE_ANNOTATION = "nginx.ingress.kubernetes.io/whitelist-source-range"

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


def check_platform_access(platform: Any, problems: Problems) -> None:
    """Checks of `platform.sso` and `platform.ingressSourceRanges` (a resolved PlatformConfig)."""
    with problems.checking("platform.sso"):
        sso = platform.sso
        if sso is not None:
            _check_sso(sso, platform, problems)
    with problems.checking("platform.ingressSourceRanges"):
        ranges = platform.ingress_source_ranges
        if ranges is not None:
            if not platform.ingress_class:
                problems.add(
                    "platform.ingressSourceRanges",
                    "applies only with platform.ingressClass (the chart's Ingress carries the ranges); set ingressClass and publicHost",
                )
            elif not is_nginx_class(platform.ingress_class):
                problems.add(
                    "platform.ingressSourceRanges",
                    f"takes effect only under ingress-nginx (the ranges are its annotation {SOURCE_RANGE_ANNOTATION}), but "
                    f"platform.ingressClass is {shown(platform.ingress_class)}, whose controller ignores it and would admit every address; "
                    "allowed: an ingressClass of ingress-nginx (its name contains 'nginx', like the chart's default nginx), "
                    "or leave ingressSourceRanges out (GCE ingress has no source-range annotation: limit it with a Cloud Armor "
                    "policy of your own)",
                )
            if not ranges:
                problems.add("platform.ingressSourceRanges", "lists no range, so nobody could reach the UI; leave it out to admit every address")
            for i, cidr in enumerate(ranges):
                with problems.checking(f"platform.ingressSourceRanges[{i}]"):
                    _, problem = read_cidr(cidr, "203.0.113.0/24")
                    if problem:
                        problems.add(f"platform.ingressSourceRanges[{i}]", problem)


    for resource in ("cpu", "memory"):
        with problems.checking(f"platform.controlPlaneMaximum.{resource}"):
            text = getattr(platform.control_plane_maximum, resource)
            if quantity(text) is None:
                example = "4 or 4000m" if resource == "cpu" else "8Gi"
                problems.add(f"platform.controlPlaneMaximum.{resource}", f"{shown(text)} is not a Kubernetes quantity like {example}")


def is_nginx_class(ingress_class: str) -> bool:
    """Whether an IngressClass name is taken for one of ingress-nginx. The program cannot see which
    controller serves a class (that is the cluster's IngressClass object), so it goes by the name:
    ingress-nginx's chart names its class `nginx` (kubernetes/ingress-nginx tag
    controller-v1.15.1, charts/ingress-nginx/values.yaml `controller.ingressClassResource.name`),
    and a second controller's class is named after it by convention (docs/faq.md there:
    `nginx-two`); `gce`, `gce-internal` and other controllers' classes are refused."""
    return "nginx" in ingress_class


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
