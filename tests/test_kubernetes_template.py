"""templates/kubernetes/main.tf: the kubernetes environment template, run once per vCluster. It
applies the GCP cloud controller manager (CCM) and the PD CSI driver to the tenant cluster.

Structural tests parse the template with python-hcl2; semantic ones render it as GcpNodeProvider
does (components/templates.py) and evaluate its locals and preconditions with OpenTofu (or
Terraform) for concrete `var.vcluster` values: the objects it would apply, exactly. They need no
provider.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.templates import KUBERNETES_IMAGES, KUBERNETES_TEMPLATE, ZONES_PLACEHOLDER, kubernetes_template
from config import node_properties as props
from config import versions
from config.stack import load_stack
from config.stack_files import read_stack_values
from docs_support import yaml_example
from hcl_support import blocks, evaluate, expr, failures, parse, require_tofu, required_providers, run
from shipped_stacks import SHIPPED_DIR

ROOT = Path(__file__).resolve().parents[1]


def _zones(stack: str) -> tuple[str, ...]:
    env = load_stack(read_stack_values(SHIPPED_DIR, stack), stack=stack, project_dir=SHIPPED_DIR)
    return tuple(sorted({nt.zone for nt in env.offer.node_types}))


@pytest.fixture(scope="module")
def doc() -> dict:
    return parse(KUBERNETES_TEMPLATE)


@pytest.fixture(scope="module")
def preconditions(doc) -> list[dict]:
    inputs = blocks(doc, "resource")["terraform_data.inputs"]
    return [p for block in inputs["lifecycle"] for p in block["precondition"]]


# --- structure -----------------------------------------------------------------------------------


def test_template_does_not_declare_the_platform_variable(doc):
    assert "vcluster" not in blocks(doc, "variable")
    assert not re.search(r'^\s*variable\s+"vcluster"', KUBERNETES_TEMPLATE.read_text(), flags=re.M)


def test_provider_is_pinned_exactly_and_talks_to_the_tenant(doc):
    assert required_providers(doc) == (">= 1.6", {"kubernetes": ("hashicorp/kubernetes", "2.38.0")})
    assert expr(blocks(doc, "provider")["kubernetes"]["config_path"]) == "var.vcluster.kubeConfig"


def test_one_file_no_modules_no_data_sources(doc):
    assert not doc.get("module") and not doc.get("data")
    resources = blocks(doc, "resource")
    assert set(resources) == {"terraform_data.inputs", "kubernetes_manifest.tenant"}
    manifest = resources["kubernetes_manifest.tenant"]
    assert expr(manifest["for_each"]) == "local.manifests"
    assert expr(manifest["depends_on"]) == "[terraform_data.inputs]"


def test_every_placeholder_is_rendered_with_a_pinned_image():
    raw = KUBERNETES_TEMPLATE.read_text()
    assert set(re.findall(r"__GPU_PLATFORM_[A-Z_]+__", raw)) == set(KUBERNETES_IMAGES) | {ZONES_PLACEHOLDER}
    rendered = kubernetes_template(("europe-west4-a",))
    assert "__GPU_PLATFORM_" not in rendered
    for image in KUBERNETES_IMAGES.values():
        assert re.fullmatch(r"registry\.k8s\.io/[a-z0-9./-]+:v\d+\.\d+\.\d+", image), image
        assert f'"{image}"' in rendered


def test_every_read_of_the_variable_is_unwrapped():
    """Names and switches are unwrapped (the variable is sensitive); only the kubeconfig path is not."""
    text = KUBERNETES_TEMPLATE.read_text()
    reads = re.findall(r"(\w+\()?var\.vcluster\.([A-Za-z.]+)", text)
    assert reads
    for wrapper, path in reads:
        assert wrapper == "nonsensitive(" or path == "kubeConfig", path


def test_fmt_check():
    binary = require_tofu()
    result = run(binary, ["fmt", "-check", "-diff", str(KUBERNETES_TEMPLATE)], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


# --- semantics, evaluated by OpenTofu -----------------------------------------------------------

REGION = "europe-west4"
INFRASTRUCTURE = {"network_name": "dev-nlp-nodes", "subnet_name": "dev-nlp-nodes", "service_account_email": "x", "availability_zones": []}
# What TenantVCluster writes on a tenant's auto-nodes entry (components/tenant_vcluster.py).
TENANT_SWITCHES = {props.CCM_ENABLED: "true", props.CCM_LB_ENABLED: "false", props.CSI_ENABLED: "true"}


def _vcluster(properties: dict[str, str], infrastructure: dict | None = None, name: str = "nlp") -> dict:
    return {
        "kubeConfig": "/tmp/kubeconfig",
        "properties": {props.PROJECT: "acme-ml-dev", props.REGION: REGION, **properties},
        "instance": {"metadata": {"name": name, "namespace": "p-default"}},
        "nodeProvider": {"metadata": {"name": "gcp-gpu"}},
        "nodeEnvironment": {"outputs": {"infrastructure": INFRASTRUCTURE if infrastructure is None else infrastructure}},
    }


@pytest.fixture(scope="module")
def evaluated(preconditions, tmp_path_factory):
    binary = require_tofu()
    workdir = tmp_path_factory.mktemp("kubernetes-template")
    template = workdir / "main.tf"
    template.write_text(kubernetes_template(_zones("dev")))
    scenarios = {
        "tenant": _vcluster(TENANT_SWITCHES),
        "defaults": _vcluster({}),
        "load-balancers": _vcluster({**TENANT_SWITCHES, props.CCM_LB_ENABLED: "true"}),
        "no-csi": _vcluster({**TENANT_SWITCHES, props.CSI_ENABLED: "false"}),
        "no-ccm": _vcluster({**TENANT_SWITCHES, props.CCM_ENABLED: "false"}, infrastructure={}),
        "other-provider": {**_vcluster(TENANT_SWITCHES), "nodeProvider": {"metadata": {"name": "gcp-cpu"}}},
        "bad-region": _vcluster({**TENANT_SWITCHES, props.REGION: "us-central1"}),
        "bad-region-wildcard": _vcluster({**TENANT_SWITCHES, props.REGION: "*"}),
        "bad-no-network": _vcluster(TENANT_SWITCHES, infrastructure={}),
        "bad-no-names": {**_vcluster(TENANT_SWITCHES), "instance": {}},
    }
    probe = {
        "manifests": "local.manifests",
        "cloud_config": "local.cloud_config",
        "node_type_zones": "local.node_type_zones",
        "preconditions": "[" + ", ".join(f"{{ok = {expr(p['condition'])}, message = {expr(p['error_message'])}}}" for p in preconditions) + "]",
    }
    return evaluate(binary, workdir / "run", template, probe, scenarios)


def _of(result: dict, kind: str) -> list[dict]:
    return [m for m in result["manifests"].values() if m["kind"] == kind]


def _deployment(result: dict, part: str) -> dict:
    (deployment,) = [d for d in _of(result, "Deployment") if part in d["metadata"]["name"]]
    return deployment


def test_node_type_zones_are_those_of_the_node_types(evaluated):
    assert evaluated["tenant"]["node_type_zones"] == ["europe-west4-a", "europe-west4-b"]
    assert f'"{",".join(_zones("prod"))}"' in kubernetes_template(_zones("prod"))


def test_the_ccm_manages_every_zone_of_its_region(evaluated):
    """multizone: the CCM looks nodes up in every zone of its region (cloud-provider-gcp
    ccm/v33.1.1 providers/gce/gce.go), which holds every zone of the node types (checked below)."""
    config = evaluated["tenant"]["cloud_config"]
    assert config.splitlines() == [
        "[Global]",
        "node-tags = nlp",
        "network-name = dev-nlp-nodes",
        "subnetwork-name = dev-nlp-nodes",
        "multizone = true",
    ]
    (config_map,) = _of(evaluated["tenant"], "ConfigMap")
    assert config_map["data"]["cloud-config"] == config
    ccm = _deployment(evaluated["tenant"], "cloud-controller-manager")
    assert ccm["spec"]["template"]["metadata"]["annotations"]["gpu-platform/cloud-config-sha256"]
    (volume,) = ccm["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]


def test_node_type_zones_outside_the_region_are_refused(evaluated):
    assert failures(evaluated["tenant"]) == []
    assert failures(evaluated["bad-region"]) == [
        "Node types use zones europe-west4-a, europe-west4-b outside region us-central1: the cloud controller manager "
        "manages the zones of its own region only, so nodes there would never be initialized."
    ]
    [message] = failures(evaluated["bad-region-wildcard"])
    assert message.startswith("Property region must be a concrete GCP region")
    assert message.endswith("Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster).")  # not on the NodeProvider
    [message] = failures(evaluated["bad-no-network"])
    assert "network_name or subnet_name" in message
    [message] = failures(evaluated["bad-no-names"])
    assert "no vCluster or NodeProvider name" in message
    assert failures(evaluated["no-ccm"]) == []  # without the CCM no network is needed


def test_ccm_runs_the_node_controller_on_the_host_network(evaluated):
    ccm = _deployment(evaluated["tenant"], "cloud-controller-manager")
    pod = ccm["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    # `make acceptance` finds the CCM's pods by this label's ending (tests/acceptance/kube.py).
    assert ccm["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].endswith("cloud-controller-manager")
    (container,) = pod["containers"]
    assert container["image"] == versions.CCM_IMAGE
    args = container["args"]
    # Every controller (cloud-node and cloud-node-lifecycle included) but node IPAM and, as the
    # tenant wants no Google load balancers, the service controller.
    assert "--controllers=*,-service,-node-ipam-controller" in args
    assert {"--cloud-provider=gce", "--cluster-name=nlp", "--cloud-config=/etc/kubernetes/cloud-config", "--configure-cloud-routes=false"} <= set(args)
    # It must run on the nodes it has yet to initialize.
    assert {"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["nodeSelector"]["vcluster.loft.sh/node-provider"] == "gcp-gpu"


def test_switches_are_honoured(evaluated):
    def kinds(result):
        return sorted({m["kind"] for m in result["manifests"].values()})

    everything = ["CSIDriver", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment", "Role", "RoleBinding", "ServiceAccount", "StorageClass"]
    assert kinds(evaluated["tenant"]) == kinds(evaluated["defaults"]) == everything
    lb_args = _deployment(evaluated["load-balancers"], "cloud-controller-manager")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--controllers=*,-node-ipam-controller" in lb_args
    default_args = _deployment(evaluated["defaults"], "cloud-controller-manager")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--controllers=*,-node-ipam-controller" in default_args  # upstream's default: load balancers on
    no_csi = evaluated["no-csi"]["manifests"]
    assert not [k for k, m in no_csi.items() if "pd-csi" in m["metadata"]["name"] or m["kind"] in ("CSIDriver", "StorageClass")]
    assert _deployment(evaluated["no-csi"], "cloud-controller-manager")
    no_ccm = evaluated["no-ccm"]["manifests"]
    assert not [m for m in no_ccm.values() if "cloud-controller-manager" in m["metadata"]["name"]]
    assert _deployment(evaluated["no-ccm"], "pd-csi")


def test_pd_csi_driver_with_topology_on_the_host_network(evaluated):
    result = evaluated["tenant"]
    controller = _deployment(result, "pd-csi")["spec"]["template"]["spec"]
    assert controller["hostNetwork"] is True
    images = {c["name"]: c["image"] for c in controller["containers"]}
    assert images == {
        "csi-provisioner": versions.CSI_PROVISIONER_IMAGE,
        "csi-attacher": versions.CSI_ATTACHER_IMAGE,
        "csi-resizer": versions.CSI_RESIZER_IMAGE,
        "csi-snapshotter": versions.CSI_SNAPSHOTTER_IMAGE,
        "gce-pd-driver": versions.PD_CSI_DRIVER_IMAGE,
    }
    provisioner = next(c for c in controller["containers"] if c["name"] == "csi-provisioner")
    assert "--feature-gates=Topology=true" in provisioner["args"]
    (node,) = _of(result, "DaemonSet")
    pod = node["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["tolerations"] == [{"operator": "Exists"}]
    driver = next(c for c in pod["containers"] if c["name"] == "gce-pd-driver")
    assert driver["image"] == versions.PD_CSI_DRIVER_IMAGE and driver["securityContext"] == {"privileged": True}
    assert "--run-controller-service=false" in driver["args"]
    (csi_driver,) = _of(result, "CSIDriver")
    assert csi_driver["metadata"]["name"] == "pd.csi.storage.gke.io" and csi_driver["spec"]["attachRequired"] is True


def test_default_storage_class_binds_where_the_pod_lands(evaluated):
    classes = {c["metadata"]["name"]: c for c in _of(evaluated["tenant"], "StorageClass")}
    assert set(classes) == {"gcp-gpu-disk-default", "gcp-gpu-hyperdisk-balanced"}
    storage_class = classes["gcp-gpu-disk-default"]  # upstream's name (docs/gpu-nodes.md "GPU nodes")
    assert storage_class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert storage_class["provisioner"] == "pd.csi.storage.gke.io"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["parameters"]["type"] == "pd-balanced"


def test_the_checkpoint_examples_class_is_the_tenants_pd_class(evaluated):
    """docs/reliability.md's checkpoint volume names the class this template creates (with the
    default NodeProvider name), and only where the tenant has persistent disks."""
    claimed = yaml_example("checkpoint-volume.yaml")["spec"]["storageClassName"]
    classes = {c["metadata"]["name"]: c for c in _of(evaluated["tenant"], "StorageClass")}
    assert classes[claimed]["provisioner"] == "pd.csi.storage.gke.io" and classes[claimed]["parameters"]["type"] == "pd-balanced"
    assert claimed not in {c["metadata"]["name"] for c in _of(evaluated["no-csi"], "StorageClass")}


def test_a_second_class_for_hyperdisk_only_machines_is_never_the_default(evaluated):
    """A3 Ultra takes Hyperdisk only: its pods name this class; everything else keeps pd-balanced."""
    hyperdisk = next(c for c in _of(evaluated["tenant"], "StorageClass") if c["metadata"]["name"] == "gcp-gpu-hyperdisk-balanced")
    assert "storageclass.kubernetes.io/is-default-class" not in hyperdisk["metadata"]["annotations"]
    assert hyperdisk["provisioner"] == "pd.csi.storage.gke.io"
    assert hyperdisk["parameters"] == {"type": "hyperdisk-balanced", "csi.storage.k8s.io/fstype": "ext4"}
    assert (hyperdisk["volumeBindingMode"], hyperdisk["allowVolumeExpansion"], hyperdisk["reclaimPolicy"]) == ("WaitForFirstConsumer", True, "Delete")
    # The PD CSI driver this template pins creates hyperdisk-balanced disks from v1.13 on.
    assert versions.PD_CSI_DRIVER_IMAGE.endswith(":v1.13.9")


def test_single_hostnetwork_controllers_are_replaced_not_surged(evaluated):
    """Both controllers run one hostNetwork pod; a RollingUpdate's surge pod could not bind the
    same node's ports (or, with declared ports, would stay Pending), and the rollout would stall."""
    for part in ("cloud-controller-manager", "pd-csi"):
        spec = _deployment(evaluated["tenant"], part)["spec"]
        assert spec["replicas"] == 1 and spec["template"]["spec"]["hostNetwork"] is True
        assert spec["strategy"] == {"type": "Recreate"}, part


def test_the_ccm_writes_only_its_uid_configmap_in_kube_system(evaluated):
    result = evaluated["tenant"]
    ccm = _deployment(result, "cloud-controller-manager")["spec"]["template"]["spec"]["serviceAccountName"]

    def rules(kind: str, binding_kind: str) -> list[tuple[str, dict]]:
        bound = {b["roleRef"]["name"]: b for b in _of(result, binding_kind) if any(s["name"] == ccm for s in b["subjects"])}
        return [(r["metadata"].get("namespace", ""), rule) for r in _of(result, kind) if r["metadata"]["name"] in bound for rule in r["rules"]]

    cluster_wide = rules("ClusterRole", "ClusterRoleBinding")
    assert cluster_wide and not [rule for _, rule in cluster_wide if "configmaps" in rule["resources"]]
    configmaps = [(ns, rule) for ns, rule in rules("Role", "RoleBinding") if "configmaps" in rule["resources"]]
    assert configmaps == [
        ("kube-system", {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["ingress-uid"], "verbs": ["get", "list", "watch"]}),
        ("kube-system", {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}),
    ]


def test_the_provisioner_publishes_read_only_volumes_read_only(evaluated):
    controller = _deployment(evaluated["tenant"], "pd-csi")["spec"]["template"]["spec"]
    provisioner = next(c for c in controller["containers"] if c["name"] == "csi-provisioner")
    assert "--controller-publish-readonly=true" in provisioner["args"]


def test_every_service_account_is_bound_and_every_binding_names_a_role_it_defines(evaluated):
    result = evaluated["tenant"]
    accounts = {m["metadata"]["name"] for m in _of(result, "ServiceAccount")}
    roles = {m["metadata"]["name"] for m in _of(result, "ClusterRole") + _of(result, "Role")}
    bound = set()
    for binding in _of(result, "ClusterRoleBinding") + _of(result, "RoleBinding"):
        assert binding["roleRef"]["name"] in roles | {"extension-apiserver-authentication-reader"}
        bound |= {s["name"] for s in binding["subjects"]}
    assert bound == accounts
    for workload in _of(result, "Deployment") + _of(result, "DaemonSet"):
        assert workload["spec"]["template"]["spec"]["serviceAccountName"] in accounts


def test_objects_of_two_node_providers_do_not_collide(evaluated):
    ours, other = (set(evaluated[s]["manifests"]) for s in ("tenant", "other-provider"))
    assert ours & other == {"CSIDriver//pd.csi.storage.gke.io"}  # one driver per cluster, by its name


def test_roles_grant_no_wildcards_and_no_token_minting(evaluated):
    """A compromised CCM or CSI pod must not become every identity of the tenant cluster."""
    rules = [rule for role in _of(evaluated["defaults"], "ClusterRole") + _of(evaluated["defaults"], "Role") for rule in role["rules"]]
    assert rules
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], rule
        assert not {"serviceaccounts/token", "secrets", "clusterroles", "clusterrolebindings", "roles", "rolebindings"} & set(rule["resources"]), rule
