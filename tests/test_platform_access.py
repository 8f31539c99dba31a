"""The platform's admin login is no Pulumi secret (no preview decrypts it), single sign-on turns
password login off, and the UI's Ingress can be limited to source ranges (issue 18, item 8)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from components.vcluster_platform import ENSURE_ADMIN_PASSWORD, REQUIRE_OIDC_SECRET, SOURCE_RANGE_ANNOTATION
from config.platform_access import ADMIN_PASSWORD_KEY, ADMIN_PASSWORD_SECRET, OIDC_SECRET, OIDC_SECRET_KEY
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
    found = problems(_platform(stack_values, sso={"issuerUrl": "ftp://x", "clientId": "gpu"}, ingressSourceRanges=["10.0.0.1/8"]))
    assert found == [
        "platform.sso: needs platform.publicHost: the provider sends users back to https://<publicHost>/auth/oidc/callback, and the hosted "
        "loft.host domain is no redirect URI you can register",
        "platform.sso.issuerUrl: 'ftp://x' is not an https URL like https://accounts.google.com",
        "platform.ingressSourceRanges: applies only with platform.ingressClass (the chart's Ingress carries the ranges); set ingressClass and publicHost",
        "platform.ingressSourceRanges[0]: '10.0.0.1/8' is malformed: host bits are set; did you mean 10.0.0.0/8?",
    ]


# --- The UI's Ingress -----------------------------------------------------------------------------------


def test_the_ui_ingress_admits_its_source_ranges_only(stack_values):
    values = _platform(
        stack_values, publicHost=HOST, ingressClass="nginx", ingressTls={"clusterIssuer": "letsencrypt"}, ingressSourceRanges=["203.0.113.0/24", "198.51.100.7/32"]
    )
    release = run_shipped(values, stack="dev").one(RELEASE).input("values")
    assert release["ingress"]["annotations"] == {SOURCE_RANGE_ANNOTATION: "203.0.113.0/24,198.51.100.7/32", "cert-manager.io/cluster-issuer": "letsencrypt"}
    # The hosted loft.host route would bypass the Ingress and its ranges.
    assert release["env"] == {"DISABLE_LOFT_ROUTER": "true"}
    assert problems({**values, f"{NS}:platform": {**values[f"{NS}:platform"], "ingressSourceRanges": []}}) == [
        "platform.ingressSourceRanges: lists no range, so nobody could reach the UI; leave it out to admit every address"
    ]


def test_source_ranges_need_an_ingress_nginx_class(stack_values):
    """The ranges are ingress-nginx's annotation: under GCE ingress (or any other controller) they
    would be ignored and the UI left open to every address, so the pair is refused."""
    tls = {"clusterIssuer": "letsencrypt"}
    for ingress_class in ("gce", "gce-internal", "traefik"):
        assert problems(_platform(stack_values, publicHost=HOST, ingressClass=ingress_class, ingressTls=tls, ingressSourceRanges=["203.0.113.0/24"])) == [
            f"platform.ingressSourceRanges: takes effect only under ingress-nginx (the ranges are its annotation {SOURCE_RANGE_ANNOTATION}), "
            f"but platform.ingressClass is {ingress_class!r}, whose controller ignores it and would admit every address; allowed: an "
            "ingressClass of ingress-nginx (its name contains 'nginx', like the chart's default nginx), or leave ingressSourceRanges out "
            "(GCE ingress has no source-range annotation: limit it with a Cloud Armor policy of your own)"
        ]
    # Another ingress-nginx controller's class, and any class without ranges, pass.
    for platform in ({"ingressClass": "nginx-internal", "ingressSourceRanges": ["203.0.113.0/24"]}, {"ingressClass": "gce"}):
        load_stack(_platform(stack_values, publicHost=HOST, ingressTls=tls, **platform), stack="dev", project_dir=SHIPPED_DIR)
