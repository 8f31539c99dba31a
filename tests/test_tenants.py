"""TenantVCluster: the VirtualClusterInstance, its vcluster.yaml, the GPU Operator and in-tenant
objects, in both ways to use it (inline in dev, and the team stack with a mocked StackReference)."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import kubernetes_validate
import pulumi
import pytest
import yaml

from components.vcluster_values import VClusterValues
from config import node_properties as props
from config.stack import load_stack
from config.stack_files import read_stack_values
from shipped_stacks import SHIPPED_DIR, run_shipped

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "vcluster-0.36.1-values.schema.yaml").read_text())
K8S_VERSION = "1.33.0"


def values_of(vci) -> VClusterValues:
    return VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values"))


def test_instance_metadata_and_placement(dev_run):
    vci = dev_run.one(VCI, "nlp")
    assert vci.input("apiVersion") == "management.loft.sh/v1"
    assert vci.input("metadata", "name") == "nlp" and vci.input("metadata", "namespace") == "p-nlp"
    assert vci.input("metadata", "annotations")["pulumi.com/waitFor"] == "jsonpath={.status.phase}=Ready"
    assert vci.input("spec", "clusterRef") == {"cluster": "loft-cluster", "namespace": "vcluster-nlp"}
    chart = vci.input("spec", "template", "helmRelease", "chart")
    assert chart == {"name": "vcluster", "repo": "https://charts.loft.sh", "version": "0.36.1"}
    assert vci.input("spec", "template", "access") == {"rules": [{"clusterRole": "cluster-admin", "teams": ["nlp"]}]}


def test_values_give_private_nodes_joining_through_a_load_balancer(dev_run):
    values = values_of(dev_run.one(VCI, "nlp"))
    assert values.private_nodes_enabled
    assert values.control_plane_service_type == "LoadBalancer"
    [entry] = values.auto_nodes
    assert entry["provider"] == "gcp-gpu"
    assert entry["properties"]["project"] == "acme-ml-dev" and entry["properties"]["region"] == "europe-west4"


def test_gpu_pool_selects_our_node_types_and_is_tainted(dev_run):
    pools = {p.name: p for p in values_of(dev_run.one(VCI, "speech")).dynamic_pools()}
    assert set(pools) == {"t4-1x-spot", "system"}
    gpu = pools["t4-1x-spot"]
    assert gpu.selector == [
        {"property": props.ACCELERATOR, "operator": "In", "values": ["nvidia-tesla-t4"]},
        {"property": props.ACCELERATOR_COUNT, "operator": "In", "values": ["1"]},
        # No machineTypes and no maxVcpusPerGpu: only the smallest 1×T4 shape.
        {"property": props.INSTANCE_TYPE, "operator": "In", "values": ["n1-standard-4"]},
        # spot: true is capacity [spot]: Spot at rank 1 (config/capacity.py).
        {"property": props.CAPACITY_OPTION, "operator": "In", "values": ["r1-spot"]},
    ]
    assert gpu.taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert gpu.spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "120s"}
    assert gpu.spec["terminationGracePeriod"] == "30m"
    system = pools["system"]
    assert system.selected(props.ACCELERATOR) == ["none"] and system.selected(props.CAPACITY_OPTION) == ["r1-on-demand"]
    assert not system.taints
    # Underutilization consolidation cannot work once the CCM relabels the node (config/node_types.py).
    assert system.spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"}
    # 8 vCPU: 4 × e2-standard-2 at most, so memory for 4 of the largest CPU type (e2-standard-4, 16 GB).
    assert system.limits == {"cpu": "8", "memory": "64Gi"}


def test_limits_are_strings_that_never_block_a_node_the_gpu_limit_allows(dev_run, stack_values):
    env = load_stack(stack_values("dev"), stack="dev", project_dir=SHIPPED_DIR)
    for vci in dev_run.of_type(VCI):
        tenant = vci.input("metadata", "name")
        plan = next(t for t in env.tenants if t.tenant.name == tenant)
        rendered = {p.name: p for p in values_of(vci).dynamic_pools()}
        for pool in plan.gpu_pools:
            limits = rendered[pool.name].limits
            assert all(isinstance(v, str) for v in limits.values())
            assert int(limits["nvidia.com/gpu"]) == pool.max_gpus
            for node_type in pool.node_types:
                # Counted on the full shape (as Karpenter counts limits), which covers what pods use.
                nodes = pool.max_gpus // node_type.gpu_count
                assert nodes * node_type.vcpus <= int(limits["cpu"])
                assert nodes * node_type.capacity_memory_mi <= int(limits["memory"].removesuffix("Gi")) * 1024
    nlp = {p.name: p for p in values_of(dev_run.one(VCI, "nlp")).dynamic_pools()}["l4-1x"]
    # 4 nodes of the pool's one shape (g2-standard-4: 4 vCPU, 16 GB), not of the family's largest.
    assert nlp.limits == {"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi"}


def test_values_match_the_vcluster_chart_schema(dev_run, tenant_run):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for vci in dev_run.of_type(VCI) + tenant_run.of_type(VCI):
        document = values_of(vci).document
        assert [e.message for e in validator.iter_errors(document)] == []


def test_the_schema_record_rejects_what_upstream_rejects():
    validator = jsonschema.Draft202012Validator(SCHEMA)
    bad_limit = {"privateNodes": {"autoNodes": [{"provider": "p", "dynamic": [{"name": "x", "limits": {"nvidia.com/gpu": 4}}]}]}}
    unknown_key = {"privateNodes": {"autoNodes": [{"provider": "p", "nodeClass": "gpu"}]}}
    assert list(validator.iter_errors(bad_limit)) and list(validator.iter_errors(unknown_key))


def test_gpu_operator_chart(dev_run):
    [chart] = dev_run.one(VCI, "nlp").input("spec", "template", "charts")
    assert chart["name"] == "gpu-operator" and chart["repoURL"] == "https://helm.ngc.nvidia.com/nvidia"
    assert chart["version"] == "v25.10.1"
    assert chart["releaseNamespace"] == "gpu-operator"
    values = yaml.safe_load(chart["values"])
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"]["enabled"] and values["devicePlugin"]["enabled"] and values["dcgmExporter"]["enabled"]
    assert values["dcgmExporter"]["serviceMonitor"] == {"enabled": False}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["node-feature-discovery"]["worker"]["tolerations"]


# The chart's NFD worker tolerations, as NVIDIA/gpu-operator tag v25.10.1 deployments/gpu-operator/
# values.yaml sets them (`node-feature-discovery.worker.tolerations`).
CHART_NFD_WORKER_TOLERATIONS = [
    {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def _tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") not in (None, "", taint["effect"]) or toleration.get("key") not in (None, "", taint["key"]):
        return False
    return toleration.get("operator") == "Exists" or toleration.get("value", "") == taint.get("value", "")


def test_nfd_worker_keeps_the_chart_tolerations_and_reaches_gpu_nodes(dev_run):
    """Helm replaces a list given in values: ours must repeat every default of the chart, in its
    order, and add what GPU nodes need (their pool taint), each once."""
    for tenant in ("nlp", "speech"):
        [chart] = dev_run.one(VCI, tenant).input("spec", "template", "charts")
        tolerations = yaml.safe_load(chart["values"])["node-feature-discovery"]["worker"]["tolerations"]
        assert tolerations[: len(CHART_NFD_WORKER_TOLERATIONS)] == CHART_NFD_WORKER_TOLERATIONS
        assert len(tolerations) == len({yaml.safe_dump(t) for t in tolerations})
        taint = values_of(dev_run.one(VCI, tenant)).gpu_pools()[0].taints[0]
        assert any(_tolerates(t, taint) for t in tolerations)


def test_in_tenant_objects_are_valid_kubernetes(dev_run):
    speech = list(yaml.safe_load_all(dev_run.one(VCI, "speech").input("spec", "template", "objects")))
    nlp = list(yaml.safe_load_all(dev_run.one(VCI, "nlp").input("spec", "template", "objects")))
    for obj in speech + nlp:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    # No smoke test asked for: the GPU Operator's namespace, the Pod Security objects, the GPU
    # watchdog, then monitoring's objects (tested in tests/test_monitoring_collector.py).
    assert [(o["kind"], o["metadata"].get("namespace")) for o in nlp][:11] == [
        ("Namespace", None),
        ("Namespace", None),
        ("ValidatingAdmissionPolicy", None),
        ("ValidatingAdmissionPolicyBinding", None),
        ("Namespace", None),
        ("ServiceAccount", "gpu-platform-system"),
        ("ClusterRole", None),
        ("ClusterRoleBinding", None),
        ("Role", "default"),
        ("RoleBinding", "default"),
        ("ConfigMap", "gpu-platform-system"),
    ]
    assert [o for o in nlp if o["kind"] == "Job"] == []
    job = next(o for o in speech if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    # nvidia-smi decides the Job; Fabric Manager's probe (config/fabric_manager.py) prints after it.
    from components.tenant_documents import SMOKE_TEST_SCRIPT
    from config.fabric_manager import PROBE

    assert pod["containers"][0]["command"] == ["sh", "-c", SMOKE_TEST_SCRIPT]
    assert SMOKE_TEST_SCRIPT.startswith("nvidia-smi || exit $?; ") and PROBE in SMOKE_TEST_SCRIPT
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # It tolerates exactly the taint GPU pools carry, and cleans up after itself.
    taint = values_of(dev_run.one(VCI, "speech")).gpu_pools()[0].taints[0]
    assert {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]} in pod["tolerations"]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0


def test_the_validator_catches_a_broken_object():
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {"template": {"spec": {"containerz": []}}}},
            K8S_VERSION,
            strict=True,
        )


def test_two_tenants_share_no_pool_namespace_or_network(dev_run):
    nlp, speech = dev_run.one(VCI, "nlp"), dev_run.one(VCI, "speech")
    assert nlp.input("spec", "clusterRef", "namespace") != speech.input("spec", "clusterRef", "namespace")
    entries = [values_of(v).auto_nodes[0]["properties"] for v in (nlp, speech)]
    assert entries[0][props.TENANT] == "nlp" and entries[1][props.TENANT] == "speech"
    for key in (props.NETWORK, props.SUBNETWORK, props.NODE_SERVICE_ACCOUNT):
        assert entries[0][key] != entries[1][key]


def test_tenants_deploy_in_parallel(stack_values):
    """Adding tenants must not lengthen the chain of resources a deployment waits on."""
    values = stack_values("dev")
    one = copy.deepcopy(values)
    one["gpu-platform:tenants"] = values["gpu-platform:tenants"][:1]
    many = copy.deepcopy(values)
    many["gpu-platform:tenants"] = [
        {**copy.deepcopy(values["gpu-platform:tenants"][i % 2]), "name": f"team-{i}", "network": {"cidr": f"10.170.{4 * i}.0/22"}}
        for i in range(6)
    ]
    chains = [run_shipped(v, stack="dev").longest_chain() for v in (one, many)]
    assert len(chains[0]) == len(chains[1])
    assert [r.type for r in chains[0]] == [r.type for r in chains[1]]
    assert chains[1][-1].type == VCI


# --- a team's own stack ------------------------------------------------------------------------


def test_tenant_stack_creates_only_the_teams_objects(tenant_run):
    types = {r.type for r in tenant_run.registrations}
    assert "gcp:container/cluster:Cluster" not in types and "kubernetes:helm.sh/v3:Release" not in types
    assert "kubernetes:management.loft.sh/v1:NodeProvider" not in types
    [vci] = tenant_run.of_type(VCI)
    assert vci.input("metadata", "name") == "vision"
    pools = {p.name for p in values_of(vci).dynamic_pools()}
    assert pools == {"l4-2x", "t4-1x-spot", "system"}
    assert tenant_run.outputs["connectCommand"] == "vcluster platform connect vcluster vision --project vision"
    # The pools' ceilings at europe-west4 prices: 2 × g2-standard-24 (host + 2 L4) and 2 Spot
    # n1-standard-4 hosts with a Spot T4 each, every node with its 200 GB pd-balanced boot disk
    # (0.1101 USD per GB-month): the "GPU pools" ceiling of the plan, boot disks included.
    disk = 200 * 0.1101 / 730
    assert tenant_run.outputs["gpuBudgetUsdPerHour"] == round(2 * (0.92571 + 2 * 0.58804 + disk) + 2 * (0.08367 + 0.175 + disk), 2)


def test_tenant_stack_reaches_the_host_through_the_environments_kubeconfig(tenant_run, dev_run, env_stack_ref):
    provider = tenant_run.one("pulumi:providers:kubernetes")
    assert provider.is_secret("kubeconfig")
    assert provider.input("kubeconfig") == dev_run.outputs["kubeconfig"]
    assert provider.input("clusterIdentifier") == env_stack_ref
    vci = tenant_run.one(VCI)
    assert vci.provider.rsplit("::", 1)[0] == provider.urn


def test_tenant_stack_fails_before_creating_anything_when_the_environment_cannot_serve_it(dev_run, env_stack_ref):
    deployed = copy.deepcopy(dev_run.outputs)
    facts = deployed["environmentFacts"]
    facts["gpuTypes"] = ["nvidia-tesla-t4"]
    facts["nodeTypes"] = [nt for nt in facts["nodeTypes"] if nt["gpu"] != "nvidia-l4"]
    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(read_stack_values(SHIPPED_DIR, "team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: deployed})
    assert str(caught.value).endswith(
        "- tenant.gpuPools[0].gpu: 'nvidia-l4' is not offered by environment dev; offered: nvidia-tesla-t4"
    )
    assert [r for r in caught.value.registrations if r.custom] == []


def test_tenant_stack_warns_when_the_environment_drifted_from_its_stack_file(dev_run, env_stack_ref):
    deployed = copy.deepcopy(dev_run.outputs)
    deployed["environmentFacts"]["gpuQuota"]["nvidia-l4"] = 16
    run = run_shipped(read_stack_values(SHIPPED_DIR, "team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: deployed})
    [warning] = [w for w in run.warnings if "is deployed with a different configuration" in w]
    assert "gpuQuota" in warning


def test_tenant_stack_refuses_an_environment_deployed_elsewhere_than_its_stack_file_says(dev_run, env_stack_ref):
    deployed = copy.deepcopy(dev_run.outputs)
    deployed["environmentFacts"]["project"] = "acme-ml-other"
    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(read_stack_values(SHIPPED_DIR, "team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: deployed})
    assert (
        f"environmentStack: {env_stack_ref} is deployed with project 'acme-ml-other', but its stack file in this repo says 'acme-ml-dev'"
        in str(caught.value)
    )
    assert [r for r in caught.value.registrations if r.custom] == []


def test_tenant_stack_refuses_an_environment_deployed_before_teams_had_projects(dev_run, env_stack_ref):
    """An environment deployed by an older version exports no role prefix or project settings:
    the tenant would bind roles that may not exist. It must be deployed first."""
    deployed = copy.deepcopy(dev_run.outputs)
    for key in ("roleIdPrefix", "platformRole", "tenantProjects", "allowSharedIsolation"):
        del deployed["environmentFacts"][key]
    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(read_stack_values(SHIPPED_DIR, "team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: deployed})
    message = str(caught.value)
    assert f"environmentStack: {env_stack_ref} is deployed with roleIdPrefix '', but its stack file in this repo says 'gpuPlatform_dev'" in message
    assert [r for r in caught.value.registrations if r.custom] == []


def test_tenant_stack_checks_its_project_against_the_deployed_environments_tenants(dev_run, env_stack_ref):
    deployed = copy.deepcopy(dev_run.outputs)
    deployed["environmentFacts"]["tenants"].append({"name": "old-vision", "cidr": "10.170.0.0/22", "source": "the environment's tenants", "project": "acme-ml-dev-vision"})
    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(read_stack_values(SHIPPED_DIR, "team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: deployed})
    assert "tenant.gcpProject: 'acme-ml-dev-vision' is already the project of tenant old-vision (the environment's tenants)" in str(caught.value)


def test_the_schema_record_knows_the_isolation_keys():
    """controlPlane.statefulSet.resources and policies.networkPolicy as upstream's schema has them
    (chart/values.schema.json at v0.36.1: ControlPlaneStatefulSet, Resources, Policies, NetworkPolicy)."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    good = {
        "controlPlane": {"statefulSet": {"resources": {"requests": {"cpu": "200m"}, "limits": {"memory": "4Gi"}}}},
        "policies": {"networkPolicy": {"enabled": True}},
    }
    assert list(validator.iter_errors(good)) == []
    for bad in (
        {"controlPlane": {"statefulSet": {"resource": {}}}},
        {"controlPlane": {"statefulSet": {"resources": {"request": {}}}}},
        {"policies": {"networkPolicies": {"enabled": True}}},
        {"policies": {"networkPolicy": {"enable": True}}},
    ):
        assert list(validator.iter_errors(bad)), bad
