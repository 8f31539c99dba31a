"""The guardrails of issue 18, probe by probe: each breaks one resource the real program registers
(or adds one it never does) and shows the pack's MANDATORY rejection, whose message names the
resource. Here default deny (types, services, commands, Helm values and tenant objects the program
never makes), no public range by any split and the control-plane bounds; and the data the pack
judges by is the program's own, from its runs, the pack served alone passing every committed stack.
Grants, placement and shared data: tests/test_guardrails_identities.py; pinned sources:
tests/test_guardrails_pinned.py."""

from __future__ import annotations

import copy
import json
import shutil

import policies as P
import pytest
import yaml
from policy_support import (
    analyze_remote,
    args_of,
    edit_values,
    make_args,
    names,
    one,
    only,
    rejected,
    remote_provider,
    reports,
    served_pack,
    urn_of,
)
from tenant_objects import named

from config.stack_files import PROJECT_DIR
from tools import program_inventory as inventory

VCI = P.VIRTUAL_CLUSTER_INSTANCE
RELEASE = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"


# --- 2. Default deny ------------------------------------------------------------------------------------


CLUSTER_ADMIN = {
    "metadata": {"name": "everyone-is-admin"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    "subjects": [{"kind": "Group", "name": "system:authenticated"}],
}
PLATFORM_LB = {
    "metadata": {"name": "vcluster-platform-loadbalancer", "namespace": "vcluster-platform"},
    "spec": {"type": "LoadBalancer", "selector": {"app": "loft"}, "ports": [{"port": 443, "targetPort": 10443}]},
}


@pytest.mark.parametrize(
    "typ, props, policy, message",
    [
        (
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            CLUSTER_ADMIN,
            P.kubernetes_rbac_by_design,
            "metadata.name: 'everyone-is-admin' is not a ClusterRoleBinding stack dev's configuration makes; allowed: none",
        ),
        (
            "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
            {"direction": "INGRESS", "action": "allow", "priority": 1000, "match": {"srcIpRanges": ["0.0.0.0/0"]}},
            P.public_ranges_nonprod,
            "match.srcIpRanges: ['0.0.0.0/0'] together admit public address space in blocks wider than /24",
        ),
    ],
)
def test_a_type_the_program_never_creates_is_rejected_and_checked_too(typ, props, policy, message):
    args = make_args(typ, props, name="intruder")
    found = rejected(args)
    assert only(found, P.resource_types_by_design) == (
        f"intruder: type {typ!r} is not a resource type gpu-platform creates; allowed: the "
        f"{len(P.INVENTORY[P.PROGRAM_PROJECT]['resourceTypes'])} types its runs register (policy/program_data.json inventory (make policy-data): "
        "a type the program adds flows in when the data is regenerated)"
    )
    assert any(m.startswith("intruder") and message in m for m in (m for _, m in reports(policy, args))), reports(policy, args)


def test_a_service_other_than_the_platforms_own_is_rejected(runs):
    """The program makes one host Service, the platform's LoadBalancer for publicHost: another one,
    or the same with other ranges, is refused field by field."""
    run, reg = one(runs, "dev", "kubernetes:core/v1:Service")
    assert P.load_balancer_services.name not in names(rejected(args_of(run, reg)))
    found = rejected(make_args("kubernetes:core/v1:Service", PLATFORM_LB, name="intruder"))
    assert only(found, P.load_balancer_services).startswith(
        "intruder: metadata.name: 'vcluster-platform-loadbalancer' is not a Service stack dev's configuration makes; allowed: 'vcluster-platform-public'"
    )
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["loadBalancerSourceRanges"] = ["0.0.0.0/0"]
    assert only(rejected(args_of(run, reg, props=props)), P.load_balancer_services).startswith(
        "platform-public: spec.loadBalancerSourceRanges[0]: '0.0.0.0/0' is not what stack dev's configuration sets; allowed: '203.0.113.0/24'"
    )


def test_a_command_with_another_script_is_rejected(runs):
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    props = {**reg.plain_inputs, "create": "gcloud projects add-iam-policy-binding acme-ml-dev --member=user:eve@example.com --role=roles/owner"}
    assert only(rejected(args_of(run, reg, props=props)), P.commands_by_design) == (
        "platform-api-ready: create: 'gcloud projects add-iam-policy-binding acme-ml-dev --member=user:eve@example.com --role=roles/owner' "
        "is not a script gpu-platform runs (a command runs on the deployer's machine, with its credentials); allowed: the program's "
        f"{len(P.INVENTORY[P.PROGRAM_PROJECT]['commands'])} commands (policy/program_data.json inventory (make policy-data))"
    )
    props = {**reg.plain_inputs, "interpreter": ["/bin/bash", "-c"], "environment": {**reg.plain_inputs["environment"], "LD_PRELOAD": "/tmp/x.so"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.commands_by_design.name]
    assert found == [
        "platform-api-ready: interpreter: is not an input gpu-platform sets on a command; allowed: create, update, delete, environment, triggers, logging",
        "platform-api-ready: environment: ['KUBECONFIG_DATA', 'LD_PRELOAD'] is not what gpu-platform gives this command; allowed: ['KUBECONFIG_DATA']",
    ]


def test_every_command_of_the_program_passes(runs):
    for run in runs.values():
        for reg in run.of_type(COMMAND):
            assert reports(P.commands_by_design, args_of(run, reg)) == []


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("service", "type"), "LoadBalancer", "values.service.type: 'LoadBalancer' (a LoadBalancer or NodePort in front of the platform) is not a value"),
        (("admin", "password"), "hunter2hunter2", "values.admin.password: 'hunter2hunter2' is not a value gpu-platform sets for chart vcluster-platform"),
        (("serviceAccount", "clusterRole"), "cluster-admin", "values.serviceAccount.clusterRole: 'cluster-admin' is not a value"),
    ],
)
def test_helm_values_the_program_never_writes_are_rejected(runs, path, value, expected):
    run, reg = one(runs, "dev", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"].setdefault(path[0], {})[path[1]] = value
    message = only(rejected(args_of(run, reg, props=props)), P.release_by_design)
    assert message.startswith("platform-release (chart 'vcluster-platform'): ") and expected in message, message


def test_sso_without_password_login_off_is_rejected(runs):
    run, reg = one(runs, "dev", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"]["config"]["auth"] = {"oidc": {"issuerUrl": "https://accounts.example.com", "clientId": "x"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.release_by_design.name]
    assert found[-1].startswith("platform-release (chart 'vcluster-platform'): values.config.auth.password.disabled: not true while single sign-on")


@pytest.mark.parametrize("account", [None, "default", "gpu-prod-nodes@acme-ml-prod.iam.gserviceaccount.com"])
def test_a_node_pool_without_its_dedicated_account_is_rejected(runs, account):
    run, reg = one(runs, "dev", "gcp:container/nodePool:NodePool")
    props = copy.deepcopy(reg.plain_inputs)
    props["nodeConfig"]["serviceAccount"] = account
    if account is None:
        props["nodeConfig"].pop("serviceAccount")
    message = only(rejected(args_of(run, reg, props=props)), P.node_pool_service_account)
    assert message.startswith("gke-system (node pool 'system' of cluster ")
    assert message.endswith("is not allowed; allowed: the host nodes' own account 'gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com'")


def test_tenant_objects_beyond_the_programs_are_rejected(runs):
    run, reg = one(runs, "dev", VCI, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-tools", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "team-tools"}, "spec": {"containers": [{"name": "x", "image": "alpine"}]}})
    [policy] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"].append("team-tools")
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects)
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.tenant_objects_by_design.name]
    prefix = "tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects"
    privileged = ", ".join(P.DATA["tenantInstance"]["privilegedNamespaces"])
    images = ", ".join(P.INVENTORY[P.PROGRAM_PROJECT]["tenantImages"])
    added = len(objects) - 2
    assert found == [
        f"{prefix}[2] (ValidatingAdmissionPolicy gpu-platform-pod-security): exempts ['team-tools'] from Pod Security; allowed: only {privileged}",
        f"{prefix}[{added}] (Namespace team-tools): is not an object gpu-platform puts inside a tenant; allowed: those of policy/program_data.json inventory (make policy-data)",
        f"{prefix}[{added}] (Namespace team-tools): metadata.labels['pod-security.kubernetes.io/enforce']: 'privileged' is not allowed; allowed: only in the "
        f"namespaces the product needs host access in ({privileged}: components/tenant_pod_security.py)",
        f"{prefix}[{added + 1}] (Pod team-tools/x): is not an object gpu-platform puts inside a tenant; allowed: those of policy/program_data.json inventory (make policy-data)",
        f"{prefix}[{added + 1}] (Pod team-tools/x): image 'alpine' is not an image gpu-platform runs; allowed: {images}",
        POD_SECURITY_SET_REJECTED,
    ]
    assert "gpu-operator" in privileged and "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04" in images


POD_SECURITY_SET_REJECTED = (
    "tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects: the Pod Security objects (Namespace default, "
    "ValidatingAdmissionPolicy gpu-platform-pod-security, ValidatingAdmissionPolicyBinding gpu-platform-pod-security) are not a set "
    "gpu-platform writes; allowed: exactly those of components/tenant_pod_security.py for baseline or restricted (the admission "
    "policy failing closed, bound with Deny, exempting only the product's namespaces), or none (podSecurityStandard: privileged)"
)


def _edit_objects(reg, edit) -> dict:
    """The instance's props with `edit` applied to its in-tenant objects (a list of documents)."""
    props = copy.deepcopy(reg.plain_inputs)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    edit(objects)
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects)
    return props


def _privileged_collector(objects: list[dict]) -> None:
    pod = named(objects, "DaemonSet", "gpu-metrics-collector", "gpu-platform-monitoring")["spec"]["template"]["spec"]
    [prometheus] = [c for c in pod["containers"] if c["name"] == "prometheus"]
    prometheus["securityContext"] = {**prometheus["securityContext"], "privileged": True}
    pod.setdefault("volumes", []).append({"name": "root", "hostPath": {"path": "/"}})


@pytest.mark.parametrize(
    "edit, expected",
    [
        # The watchdog's ClusterRole widened under its own name.
        (
            lambda objects: named(objects, "ClusterRole", "gpu-platform:gpu-watchdog")["rules"].append(
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}
            ),
            "(ClusterRole gpu-platform:gpu-watchdog): rules[2]: {'apiGroups': [''], 'resources': ['secrets'], 'verbs': ['get', 'list']} "
            "is not what gpu-platform grants; allowed: not there (policy/program_data.json inventory (make policy-data))",
        ),
        # A verb more in one of its rules: the rule's index and field, both lists whole.
        (
            lambda objects: named(objects, "ClusterRole", "gpu-platform:gpu-watchdog")["rules"][0]["verbs"].append("escalate"),
            "(ClusterRole gpu-platform:gpu-watchdog): rules[0].verbs: ",
        ),
        # The binding's subject swapped for the namespace's default account (any pod's), its role for cluster-admin.
        (
            lambda objects: named(objects, "ClusterRoleBinding", "gpu-platform:gpu-watchdog")["subjects"][0].update(name="default"),
            "(ClusterRoleBinding gpu-platform:gpu-watchdog): subjects[0].name: 'default' is not what gpu-platform grants; allowed: 'gpu-watchdog'",
        ),
        (
            lambda objects: named(objects, "ClusterRoleBinding", "gpu-platform:gpu-watchdog")["roleRef"].update(name="cluster-admin"),
            "(ClusterRoleBinding gpu-platform:gpu-watchdog): roleRef.name: 'cluster-admin' is not what gpu-platform grants; allowed: "
            "'gpu-platform:gpu-watchdog' (policy/program_data.json inventory (make policy-data))",
        ),
        # The collector's discovery binding given to every service account of the tenant.
        (
            lambda objects: named(objects, "RoleBinding", "gpu-metrics-collector-discovery", "gpu-operator")["subjects"].append(
                {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"}
            ),
            "(RoleBinding gpu-operator/gpu-metrics-collector-discovery): subjects[1]: {'apiGroup': 'rbac.authorization.k8s.io', 'kind': "
            "'Group', 'name': 'system:serviceaccounts'} is not what gpu-platform grants; allowed: not there",
        ),
        # The host-networked collector, privileged with the node's root filesystem.
        (
            _privileged_collector,
            "(DaemonSet gpu-platform-monitoring/gpu-metrics-collector): its pods' host access (hostNetwork, privileged prometheus, "
            "host paths /, service account gpu-metrics-collector) is not what gpu-platform gives them; allowed: hostNetwork, service "
            "account gpu-metrics-collector (policy/program_data.json inventory (make policy-data))",
        ),
        # The watchdog on the host network (the metadata server, the node identity's token).
        (
            lambda objects: named(objects, "Deployment", "gpu-watchdog", "gpu-platform-system")["spec"]["template"]["spec"].update(hostNetwork=True),
            "(Deployment gpu-platform-system/gpu-watchdog): its pods' host access (hostNetwork, service account gpu-watchdog) is not what "
            "gpu-platform gives them; allowed: service account gpu-watchdog",
        ),
        # Pod Security that fails open, or only audits.
        (
            lambda objects: named(objects, "ValidatingAdmissionPolicy", "gpu-platform-pod-security")["spec"].update(failurePolicy="Ignore"),
            POD_SECURITY_SET_REJECTED.split(": ", 1)[1],
        ),
        (
            lambda objects: named(objects, "ValidatingAdmissionPolicyBinding", "gpu-platform-pod-security")["spec"].update(validationActions=["Audit"]),
            POD_SECURITY_SET_REJECTED.split(": ", 1)[1],
        ),
    ],
)
def test_in_tenant_rbac_host_access_and_pod_security_are_exactly_the_programs(runs, edit, expected):
    run, reg = one(runs, "dev", VCI, "nlp")
    message = only(rejected(args_of(run, reg, props=_edit_objects(reg, edit))), P.tenant_objects_by_design)
    assert message.startswith("tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects") and expected in message


# --- 4. No public range by any split --------------------------------------------------------------------


def test_the_split_internet_is_rejected_in_prod_and_advisory_in_dev(runs):
    run, reg = one(runs, "prod", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(reg.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "0.0.0.0/1", "displayName": "a"}, {"cidrBlock": "128.0.0.0/1", "displayName": "b"}]
    message = only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)
    assert message.startswith(
        "gke-cluster (cluster 'gpu-prod'): masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock: ['0.0.0.0/1', '128.0.0.0/1'] together admit "
        "public address space in blocks wider than /24 (IPv6 /64): 32.0.0.0/3, 64.0.0.0/3, 128.0.0.0/3 and "
    )
    dev, cluster = one(runs, "dev", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(cluster.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "8.8.0.0/23", "displayName": "wide"}]
    assert P.public_ranges_prod.name not in names(rejected(args_of(dev, cluster, props=props)))
    [advisory] = [m for _, m in reports(P.public_ranges_nonprod, args_of(dev, cluster, props=props))]
    assert "['8.8.0.0/23'] together admit public address space in blocks wider than /24 (IPv6 /64): 8.8.0.0/23;" in advisory


def test_adjacent_narrow_ranges_count_as_their_union_and_the_prefix_is_configurable(runs):
    run, reg = one(runs, "prod", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(reg.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": f"8.8.{i}.0/24", "displayName": f"n{i}"} for i in range(4)]
    assert "8.8.0.0/22" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props, config={P.public_ranges.PREFIX_CONFIG: 22})) == []
    assert reports(P.public_ranges_prod, args_of(run, reg)) == []  # the office /24 as shipped


def test_a_firewall_split_open_is_rejected_but_googles_ranges_are_not(runs):
    run, reg = one(runs, "prod", P.FIREWALL, "allow-health-checks")
    assert reports(P.public_ranges_prod, args_of(run, reg)) == []  # 35.191.0.0/16 and 130.211.0.0/22, as the program opens them
    props = {**copy.deepcopy(reg.plain_inputs), "sourceRanges": ["35.191.0.0/16", "0.0.0.0/1", "128.0.0.0/1"]}
    assert "together admit public address space" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)


def test_a_platform_ingress_and_a_control_plane_are_judged_too(runs):
    """The program writes no Ingress (ingress-nginx is retired): a release that adds one, with the
    ranges of an annotation a GCE ingress ignores, is refused by path; a control plane open to
    public space by its ranges."""
    run, reg = one(runs, "prod", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"]["ingress"] = {"enabled": True, "ingressClass": "gce", "annotations": {"nginx.ingress.kubernetes.io/whitelist-source-range": "203.0.113.0/24"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.release_by_design.name]
    assert any(m.startswith("platform-release (chart 'vcluster-platform'): values.ingress.enabled: true is not a value gpu-platform sets for chart vcluster-platform") for m in found), found
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=["0.0.0.0/1", "128.0.0.0/1"]))
    assert "together admit public address space" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)


def test_a_control_plane_is_judged_by_its_stacks_environment_whatever_its_label_says(runs):
    """A prod tenant labelled dev is still prod (public-ranges-prod rejects it, tenant-gpu-ceiling-prod
    the label); a dev tenant labelled prod is still dev (advisory). Only for a stack the pack's
    record does not know does the label decide, a missing one counting as prod."""
    wide = ["0.0.0.0/1", "128.0.0.0/1"]
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=wide))
    props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL] = "dev"
    found = rejected(args_of(run, reg, props=props))
    assert "together admit public address space" in only(found, P.public_ranges_prod)
    assert only(found, P.gpu_ceiling_prod) == (
        "tenant-research-instance (instance 'p-research/research'): metadata.labels['gpu-platform/environment']: 'dev' is not allowed; "
        "allowed: 'prod', the environment of stack prod (or unset)"
    )
    assert reports(P.public_ranges_nonprod, args_of(run, reg, props=props)) == []
    unknown = urn_of(VCI, reg.name, stack="mallory")
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props, urn=unknown)) == []  # labelled dev
    del props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL]
    assert len(reports(P.public_ranges_prod, args_of(run, reg, props=props, urn=unknown))) == 1

    run, reg = one(runs, "dev", VCI, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=wide))
    props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL] = "prod"
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props)) == []
    [(_, advisory)] = reports(P.public_ranges_nonprod, args_of(run, reg, props=props))
    assert advisory.startswith("tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.helmRelease.values controlPlane.service.spec.loadBalancerSourceRanges: ")


def test_a_control_plane_open_to_the_host_clusters_private_ranges_is_no_public_range(runs):
    """vcluster-control-plane-isolation admits the host cluster's pod and node ranges beside the NAT
    addresses (clients inside the host reach the control plane through its address): private space,
    however wide, admits nobody from outside; the same width of public space is rejected."""
    run, reg = one(runs, "prod", VCI)
    ranges = yaml.safe_load(reg.input("spec", "template", "helmRelease", "values"))["controlPlane"]["service"]["spec"]["loadBalancerSourceRanges"]
    assert {"10.4.0.0/14", "10.0.0.0/20"} <= set(ranges)  # the host's pods and nodes, as shipped
    assert P.public_ranges_prod.name not in names(rejected(args_of(run, reg)))
    wide = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=[*ranges, "10.0.0.0/8", "172.16.0.0/12"]))
    assert P.public_ranges_prod.name not in names(rejected(args_of(run, reg, props=wide)))
    public = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=[*ranges, "11.0.0.0/14"]))
    message = only(rejected(args_of(run, reg, props=public)), P.public_ranges_prod)
    assert message.endswith("in blocks wider than /24 (IPv6 /64): 11.0.0.0/14; allowed: public ranges of at most a /24 each, however they are split (policy config public-ranges-prod.minPublicPrefixLength)")


# --- 7. Control-plane bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["controlPlane"].pop("statefulSet"), "requests.cpu: not set; allowed: a quantity within the environment's maximum 4"),
        (lambda d: d["controlPlane"]["statefulSet"]["resources"]["limits"].update(memory="64Gi"), "limits.memory: '64Gi' is above the environment's maximum; allowed: at most 8Gi"),
    ],
)
def test_a_tenant_without_capped_control_plane_resources_is_rejected(runs, edit, message):
    run, reg = one(runs, "team-vision-dev", VCI)
    props = edit_values(reg.plain_inputs, edit)
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.control_plane_resources.name]
    prefix = "tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.values controlPlane.statefulSet.resources."
    assert any(m.startswith(prefix + message) for m in found), found


# --- The data, generated, and the pack served alone ------------------------------------------------------


def test_the_inventory_is_what_the_runs_register(runs):
    types = set(P.INVENTORY[P.PROGRAM_PROJECT]["resourceTypes"])
    for run in runs.values():
        assert {r.type for r in run.registrations} <= types
    assert {"pulumi:providers:command", "pulumi:pulumi:Stack", "gcp:organizations/project:Project"} <= types
    assert not any(t.startswith("random:") or t.endswith((":ClusterRole", ":ClusterRoleBinding")) for t in types)
    assert inventory.value_paths({"a": {"b/c": [1, {"d": 2}]}, "e": []}) == {'a["b/c"][]', 'a["b/c"][].d', "e"}
    # A switch is fixed when every document that has it writes it one way; list items count each.
    assert inventory.fixed_switches(
        [{"on": True, "op": {"enabled": False}, "items": [{"x": True}, {"x": False}], "name": "n"}, {"on": True, "op": {"enabled": True}}, {}]
    ) == {"on": True}
    document = {"op": {"enabled": True, "repository": "r", "imagePullSecrets": [{"name": "s"}]}, "nfd": {"image": {"tag": "v1"}}}
    assert inventory.chart_values([document, {"op": {"repository": "r2"}}]) == {
        "valuePaths": ["nfd.image.tag", "op.enabled", "op.imagePullSecrets[].name", "op.repository"],
        "imageValues": {"nfd.image.tag": ["v1"], "op.imagePullSecrets[].name": ["s"], "op.repository": ["r", "r2"]},
    }


def test_the_committed_stacks_pass_the_pack_served_from_a_copy_of_policy_alone(tmp_path, committed_runs):
    """What `pulumi policy publish` uploads, served as the CLI serves it, judging every resource of
    every committed stack, components and providers included (the engine analyses them all), and
    the stacks as a whole."""
    from pulumi.runtime.proto import analyzer_pb2
    from google.protobuf import struct_pb2

    copied = tmp_path / "published" / "policy"
    shutil.copytree(PROJECT_DIR / "policy", copied, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    with served_pack(copied, cwd=tmp_path) as analyzer:
        for stack, run in committed_runs.items():
            resources = []
            for reg in [*run.registrations, *run.reads]:
                diagnostics = analyze_remote(analyzer, reg.type, reg.plain_inputs, reg.urn, reg.name, protect=reg.protect, provider=remote_provider(run, reg))
                assert [d.message for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY] == [], (stack, reg.name)
                if reg.custom:
                    properties = struct_pb2.Struct()
                    properties.update(json.loads(json.dumps(reg.final_state, default=str)))  # its final outputs, as after `pulumi up`
                    options = analyzer_pb2.AnalyzerResourceOptions(protect=reg.protect)
                    resources.append(analyzer_pb2.AnalyzerResource(type=reg.type, properties=properties, urn=reg.urn, name=reg.name, options=options))
            stack_diagnostics = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=60).diagnostics
            assert [d.message for d in stack_diagnostics] == [], stack
        # ... and rejects a type the program never creates.
        [diagnostic] = analyze_remote(analyzer, "kubernetes:networking.k8s.io/v1:Ingress", {"spec": {}}, urn_of("kubernetes:networking.k8s.io/v1:Ingress", "x"), "x")
        assert diagnostic.policyName == P.resource_types_by_design.name
