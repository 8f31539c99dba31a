"""The platform's admin login is no Pulumi secret (no preview decrypts it), single sign-on turns
password login off (issue 18, item 8), and the platform is closed by default (issue 27, item 1):
the hosted router off unless a stack turns it on, and never in prod without single sign-on;
publicHost behind a LoadBalancer that admits its source ranges only, TLS served by the pod."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from components.vcluster_platform import ENSURE_ADMIN_PASSWORD, REQUIRE_OIDC_SECRET, REQUIRE_TLS_SECRET
from config.platform_access import ADMIN_PASSWORD_KEY, ADMIN_PASSWORD_SECRET, OIDC_SECRET, OIDC_SECRET_KEY, RETIRED
from fake_commands import install_fake
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, problems, run_shipped

NS = "gpu-platform"
RELEASE = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"
HOST = "gpu.example.com"
SSO = {"issuerUrl": "https://accounts.example.com", "clientId": "gpu-platform", "groups": ["ml-admins"], "groupsClaim": "groups"}


def _platform(stack_values, **platform) -> dict:
    values = stack_values("dev")
    values[f"{NS}:platform"].update(platform)
    return values


# --- The admin password ---------------------------------------------------------------------------------


def test_no_admin_password_passes_through_pulumi(dev_run, tenant_run):
    """No config key, no generated value, no Kubernetes Secret in the state: the chart reads the
    Secret the deployer's command creates in the cluster."""
    assert not any(r.type.startswith("random:") for r in dev_run.registrations)
    assert not [r for r in dev_run.of_type("kubernetes:core/v1:Secret") if "admin" in r.name]
    values = dev_run.one(RELEASE).input("values")
    assert values["admin"] == {"create": True, "username": "admin", "passwordSecretRef": {"name": ADMIN_PASSWORD_SECRET, "key": ADMIN_PASSWORD_KEY}}
    command = dev_run.one(COMMAND, "admin-password")
    assert command.input("create") == ENSURE_ADMIN_PASSWORD
    assert set(command.input("environment")) == {"KUBECONFIG_DATA"} and command.is_secret("environment")
    # The Deployment cannot start without the Secret: the release waits for the command.
    assert command.urn in dev_run.depends_on(dev_run.one(RELEASE).urn)
    assert "platformAdminPassword" not in dev_run.outputs and "platformAdminPassword" not in tenant_run.outputs


KUBECTL = """#!/bin/sh
# A stand-in for kubectl: records its arguments; `get secret` finds what $FAKE_SECRETS lists;
# `create secret generic --from-file=key=path` records the file's content and mode.
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *" get secret "*)
    for name in $FAKE_SECRETS; do case "$*" in *" get secret $name "*) echo "secret/$name"; exit 0;; esac; done
    case "$*" in *--ignore-not-found*) exit 0;; esac
    echo "Error from server (NotFound)" >&2; exit 1;;
  *" create secret generic "*)
    file=$(echo "$*" | sed -n 's/.*--from-file=[^=]*=\\([^ ]*\\).*/\\1/p')
    stat -c '%a' "$file" >> "$FAKE_LOG"; cat "$file" > "$FAKE_CONTENT";;
esac
"""


def _run(script: str, tmp_path, secrets: str = ""):
    bin_dir, log = install_fake(tmp_path, "kubectl", KUBECTL)
    content = tmp_path / "content"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KUBECONFIG_DATA": "apiVersion: v1\nkind: Config\n"}
    env.update(FAKE_LOG=str(log), FAKE_SECRETS=secrets, FAKE_CONTENT=str(content))
    result = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    return result, log.read_text(), content.read_text() if content.exists() else None


def test_the_password_is_made_in_the_cluster_once_and_never_shown(tmp_path):
    result, log, password = _run(ENSURE_ADMIN_PASSWORD, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    assert re.fullmatch(r"[A-Za-z0-9]{32}", password)
    assert password not in log  # never an argument
    create = next(line for line in log.splitlines() if " create secret generic " in line)
    assert f"-n vcluster-platform create secret generic {ADMIN_PASSWORD_SECRET} --from-file={ADMIN_PASSWORD_KEY}=" in create
    assert "600" in log.splitlines()  # the file only its owner reads, removed on exit
    # An existing Secret (a password the admins reset) is kept.
    (tmp_path / "again").mkdir()
    result, log, password = _run(ENSURE_ADMIN_PASSWORD, tmp_path / "again", secrets=ADMIN_PASSWORD_SECRET)
    assert result.returncode == 0 and password is None and " create " not in log


def test_pulumi_up_stops_before_the_platform_without_the_oidc_secret(tmp_path):
    result, _, _ = _run(REQUIRE_OIDC_SECRET, tmp_path)
    assert result.returncode == 1
    assert f"platform.sso: Secret {OIDC_SECRET} with key {OIDC_SECRET_KEY} is missing in namespace vcluster-platform" in result.stderr
    assert f"kubectl -n vcluster-platform create secret generic {OIDC_SECRET} --from-file={OIDC_SECRET_KEY}=" in result.stderr


# --- Single sign-on -------------------------------------------------------------------------------------


def test_sso_configures_the_oidc_connector_and_turns_password_login_off(stack_values):
    run = run_shipped(_platform(stack_values, publicHost=HOST, sso=SSO), stack="dev")
    values = run.one(RELEASE).input("values")
    assert values["config"]["auth"] == {
        "oidc": {
            "issuerUrl": "https://accounts.example.com",
            "clientId": "gpu-platform",
            "clientSecret": "$OIDC_CLIENT_SECRET",
            "redirectURI": f"https://{HOST}/auth/oidc/callback",
            "groupsClaim": "groups",
            "groups": ["ml-admins"],
        },
        "password": {"disabled": True},
    }
    assert values["envValueFrom"] == {"OIDC_CLIENT_SECRET": {"secretKeyRef": {"name": OIDC_SECRET, "key": OIDC_SECRET_KEY}}}
    check = run.one(COMMAND, "oidc-secret")
    assert check.input("create") == REQUIRE_OIDC_SECRET and check.urn in run.depends_on(run.one(RELEASE).urn)


@pytest.mark.parametrize(
    "sso, expected",
    [
        ({"clientId": "gpu"}, ["platform.sso.issuerUrl: required: the OIDC provider's issuer URL (the `iss` of its ID tokens), an https URL like https://accounts.google.com"]),
        ({"issuerUrl": "http://accounts.example.com", "clientId": "gpu"}, ["platform.sso.issuerUrl: 'http://accounts.example.com' is not an https URL like https://accounts.google.com"]),
        ({"issuerUrl": "https://a.example.com", "clientId": " "}, ["platform.sso.clientId: ' ' is not an OAuth client id"]),
        (
            {"issuerUrl": "https://a.example.com", "clientId": "gpu", "groups": ["a", "a"]},
            ["platform.sso.groups: needs groupsClaim: the platform finds a user's groups in that claim of the ID token", "platform.sso.groups[1]: a is listed twice (first at [0])"],
        ),
        ({"issuerUrl": "https://a.example.com", "clientId": "gpu", "password": "x"}, ["platform.sso.password: unknown key; allowed: clientId, groups, groupsClaim, issuerUrl, usernameClaim"]),
    ],
)
def test_a_bad_sso_block_names_the_key(stack_values, sso, expected):
    assert problems(_platform(stack_values, publicHost=HOST, sso=sso)) == expected


def test_sso_needs_the_public_host_and_every_problem_comes_at_once(stack_values):
    values = _platform(stack_values, sso={"issuerUrl": "ftp://x", "clientId": "gpu"}, publicSourceRanges=["10.0.0.1/8"])
    values[f"{NS}:platform"].pop("publicHost")
    assert problems(values) == [
        "platform.sso: needs platform.publicHost: the provider sends users back to https://<publicHost>/auth/oidc/callback, and the hosted "
        "loft.host domain is no redirect URI you can register",
        "platform.sso.issuerUrl: 'ftp://x' is not an https URL like https://accounts.google.com",
        "platform.publicSourceRanges: needs platform.publicHost: the name team members reach the platform by (its certificate and the single "
        "sign-on redirect are issued for it)",
        "platform.publicSourceRanges[0]: '10.0.0.1/8' is malformed: host bits are set; did you mean 10.0.0.0/8?",
    ]


# --- Who reaches the platform ------------------------------------------------------------------------


def test_the_shipped_stacks_render_the_platform_with_the_hosted_router_off(dev_run, prod_run):
    """dev and prod as shipped: DISABLE_LOFT_ROUTER set, publicHost served by the platform's own
    LoadBalancer that admits the example ranges only, TLS ending in the pod (prod with its certificate)."""
    for run, host in ((dev_run, "gpu-platform.dev.acme.example"), (prod_run, "gpu-platform.acme.example")):
        values = run.one(RELEASE).input("values")
        assert values["env"] == {"DISABLE_LOFT_ROUTER": "true"}
        assert values["config"]["loftHost"] == host
        [service] = run.of_type("kubernetes:core/v1:Service")
        assert service.plain_inputs == {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "vcluster-platform-public", "namespace": "vcluster-platform", "labels": {"app.kubernetes.io/part-of": "gpu-platform"}},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "loft", "release": "vcluster-platform"},
                "ports": [{"name": "https", "port": 443, "targetPort": 10443, "protocol": "TCP"}],
                "loadBalancerSourceRanges": ["203.0.113.0/24"],
            },
        }
        assert run.one(RELEASE).urn in run.depends_on(service.urn)  # the pods it selects come with the release
        assert not run.of_type("kubernetes:networking.k8s.io/v1:Ingress") and "ingress" not in values
    assert "tls" not in dev_run.one(RELEASE).input("values")  # dev: the platform's self-signed certificate
    assert prod_run.one(RELEASE).input("values")["tls"] == {"enabled": True, "secret": "vcluster-platform-tls"}
    check = prod_run.one(COMMAND, "tls-secret")
    assert check.input("create") == REQUIRE_TLS_SECRET and set(check.input("environment")) == {"KUBECONFIG_DATA"}
    assert check.urn in prod_run.depends_on(prod_run.one(RELEASE).urn)


def test_the_hosted_router_is_on_only_when_a_stack_says_so(stack_values):
    values = _platform(stack_values, hostedRouter=True)
    assert "env" not in run_shipped(values, stack="dev").one(RELEASE).input("values")
    values = _platform(stack_values)
    values[f"{NS}:platform"] = {"allowSharedWithProjectTenants": True}  # no publicHost: admins port-forward
    release = run_shipped(values, stack="dev")
    assert release.one(RELEASE).input("values")["env"] == {"DISABLE_LOFT_ROUTER": "true"}
    assert not release.of_type("kubernetes:core/v1:Service")


def test_prod_refuses_the_hosted_router_without_single_sign_on(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"]["hostedRouter"] = True
    assert problems(values) == [
        "platform.hostedRouter: true is not allowed in prod without platform.sso: the hosted *.loft.host domain serves the platform's UI "
        "and API to anyone on the internet, with password login, and the platform is cluster-admin on the host cluster; allowed: false "
        "(team members reach publicHost, admins port-forward), or true with single sign-on (platform.sso)"
    ]
    values[f"{NS}:platform"]["sso"] = SSO
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)  # with single sign-on admitting named groups: allowed


def test_prod_refuses_the_hosted_router_with_single_sign_on_that_admits_every_account(stack_values):
    """Empty sso.groups: the platform's OIDC connector admits every account its provider
    authenticates, which with the hosted router is anyone on the internet who has one."""
    values = stack_values("prod")
    values[f"{NS}:platform"].update(hostedRouter=True, sso={k: v for k, v in SSO.items() if k != "groups"})
    assert problems(values) == [
        "platform.sso.groups: empty is not allowed in prod with platform.hostedRouter: true: the platform's single sign-on would admit "
        "every account of 'https://accounts.example.com' to the UI and API the hosted *.loft.host domain serves to the internet, and the "
        "platform is cluster-admin on the host cluster; allowed: the groups whose members may log in (with groupsClaim), or "
        "hostedRouter: false"
    ]
    values[f"{NS}:platform"]["sso"]["groups"] = []
    assert [p.split(":", 1)[0] for p in problems(values)] == ["platform.sso.groups"]
    # Without the hosted router, or in dev, every account of the provider may reach publicHost's ranges only: allowed.
    values[f"{NS}:platform"]["hostedRouter"] = False
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)


def test_public_access_problems_name_their_keys_all_at_once(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"].update(publicHost="https://Gpu.example.com", publicSourceRanges=[], tls="maybe")
    assert problems(values) == [
        "platform.tls: 'maybe' is not true or false",
        "platform.publicHost: 'https://Gpu.example.com' is not a host name like gpu-platform.example.com (lowercase, no scheme, no port)",
        "platform.publicSourceRanges: lists no range, so nobody could reach publicHost; leave it out to make no Service",
    ]
    values = stack_values("prod")
    values[f"{NS}:platform"].pop("tls")
    [message] = problems(values)
    assert message.startswith("platform.tls: required in prod with publicSourceRanges: without it the platform serves its own self-signed certificate")


@pytest.mark.parametrize("key", sorted(RETIRED))
def test_the_retired_ingress_keys_say_what_replaces_them(stack_values, key):
    """ingress-nginx is retired: a stack that still sets a key of the chart's Ingress gets an error
    naming the key and what to write instead, beside every other problem."""
    values = _platform(stack_values, **{key: "nginx" if key == "ingressClass" else ({"clusterIssuer": "x"} if key == "ingressTls" else ["203.0.113.0/24"])})
    [message] = problems(values)
    assert message.startswith(f"platform.{key}: is retired: it configured the chart's Ingress under ingress-nginx, which the Kubernetes project retired in March 2026")
    assert "allowed: " in message and ("publicSourceRanges" in message or "tls: true" in message)


def test_pulumi_up_stops_before_the_platform_without_the_tls_secret(tmp_path):
    bin_dir, log = install_fake(tmp_path, "kubectl", KUBECTL)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KUBECONFIG_DATA": "k", "FAKE_LOG": str(log), "FAKE_SECRETS": ""}
    missing = subprocess.run(["/bin/sh", "-c", REQUIRE_TLS_SECRET], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert "platform.tls: Secret vcluster-platform-tls with key tls.crt is missing in namespace vcluster-platform" in missing.stderr
    assert "kubectl -n vcluster-platform create secret tls vcluster-platform-tls --cert=" in missing.stderr
    present = subprocess.run(["/bin/sh", "-c", REQUIRE_TLS_SECRET], env={**env, "FAKE_SECRETS": "vcluster-platform-tls"}, capture_output=True, text=True, timeout=60)
    assert present.returncode == 0, present.stderr


def test_the_drift_identity_reads_the_platforms_secrets_through_rbac_there_only(dev_run, prod_run):
    """Issue 27 item 3: the environment stack binds a Role that gets and lists Secrets in
    vcluster-platform to the bootstrap's drift identity of that environment, and nothing
    cluster-wide; the bootstrap grants no CI identity container.secrets.* (tests/test_bootstrap.py)."""
    import policies as P

    for run, environment in ((dev_run, "dev"), (prod_run, "prod")):
        drift = [email for email, a in P.DATA["bootstrap"]["accounts"].items() if a["environment"] == environment and a["kind"] == "drift"]
        assert len(drift) == 1
        role = run.one("kubernetes:rbac.authorization.k8s.io/v1:Role")
        binding = run.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
        assert role.input("metadata") == {"name": "gpu-platform-ci-secrets-reader", "namespace": "vcluster-platform"}
        assert role.input("rules") == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]
        assert binding.input("metadata") == {"name": "gpu-platform-ci-secrets-reader", "namespace": "vcluster-platform"}
        assert binding.input("roleRef") == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpu-platform-ci-secrets-reader"}
        assert binding.input("subjects") == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": email} for email in drift]
        assert not [r for r in run.registrations if r.type.endswith((":ClusterRole", ":ClusterRoleBinding"))]
