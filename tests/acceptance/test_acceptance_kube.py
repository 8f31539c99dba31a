"""The acceptance test's readers of kubectl JSON, on recorded outputs (tests/acceptance/data)."""

from __future__ import annotations

import base64
import copy

import pytest
import yaml

from components.tenant_documents import tenant_objects
from tests.acceptance import kube
from tests.acceptance.recorded import load

ZONES = ("us-central1-a", "us-central1-b")
GPU_NODE = "acc-k3x9q2-gpu-8w2mf-3f9a1c"


def test_platform_api_available_or_why_not():
    assert kube.apiservice_available(load("kubectl/apiservice-available.json")).ok
    down = kube.apiservice_available(load("kubectl/apiservice-unavailable.json"))
    assert not down.ok and "FailedDiscoveryCheck" in down.detail and "connection refused" in down.detail


def test_node_provider_phase():
    assert kube.node_provider_phase(load("kubectl/nodeprovider-available.json")) == ("Available", "")
    phase, message = kube.node_provider_phase(load("kubectl/nodeprovider-failed.json"))
    assert phase == kube.NODE_PROVIDER_FAILED and "TemplateError" in message and "invalid property value" in message


def test_the_tenant_instance_is_found_by_name_in_any_project_namespace():
    listed = load("kubectl/virtualclusterinstances.json")
    instance = kube.tenant_instance(listed, "acc-k3x9q2")
    assert kube.instance_phase(instance) == ("Ready", "")
    assert kube.virtual_cluster_ref(instance) == ("vcluster-acc-k3x9q2", "acc-k3x9q2")
    assert kube.tenant_instance(listed, "acc-zzzzzz") is None
    # Without spec.clusterRef.virtualCluster the release is named after the instance.
    bare = kube.tenant_instance(listed, "scratch")
    assert kube.virtual_cluster_ref(bare) == ("vcluster-scratch", "scratch")


def test_tenant_kubeconfig_points_at_the_port_forward_and_keeps_the_credentials():
    secret = load("kubectl/vcluster-kubeconfig-secret.json")
    assert secret["metadata"]["name"] == kube.kubeconfig_secret_name("acc-k3x9q2")
    config = yaml.safe_load(kube.tenant_kubeconfig(secret, 40123))
    original = yaml.safe_load(base64.b64decode(secret["data"]["config"]))
    assert [c["cluster"]["server"] for c in config["clusters"]] == ["https://localhost:40123"]
    assert config["users"] == original["users"]
    assert config["clusters"][0]["cluster"]["certificate-authority-data"] == original["clusters"][0]["cluster"]["certificate-authority-data"]


def test_the_gpu_zone_is_one_the_cloud_controller_manager_does_not_run_in():
    nodes, pods = load("kubectl/tenant-nodes-cpu-only.json"), load("kubectl/tenant-pods-all.json")
    zone, why = kube.pick_gpu_zone(ZONES, nodes, pods)
    assert zone == "us-central1-b" and "us-central1-a" in why
    assert kube.pick_gpu_zone(("us-central1-b", "us-central1-a"), nodes, pods)[0] == "us-central1-b"
    assert kube.pick_gpu_zone(("us-central1-a",), nodes, pods)[0] is None
    without_ccm = copy.deepcopy(pods)
    without_ccm["items"] = [p for p in pods["items"] if "cloud-controller-manager" not in p["metadata"]["name"]]
    assert kube.pick_gpu_zone(ZONES, nodes, without_ccm)[0] == "us-central1-b"


def test_the_smoke_job_is_the_programs_own_pinned_to_the_zone():
    documents = kube.smoke_job_documents("us-central1-b", "k3x9q2")
    program = {(d["kind"], d["metadata"]["name"]): d for d in tenant_objects(True)}
    job = kube.smoke_job(documents)
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [("Namespace", "gpu-smoke-test"), ("Job", "nvidia-smi")]
    assert job["spec"]["template"]["spec"].pop("nodeSelector") == {kube.ZONE_LABEL: "us-central1-b"}
    assert job["metadata"].pop("labels") == {"gpu-platform/acceptance-run": "k3x9q2"}
    assert job == program[("Job", "nvidia-smi")]
    assert "nodeSelector" not in kube.smoke_job(kube.smoke_job_documents(None, "k3x9q2"))["spec"]["template"]["spec"]


def test_the_smoke_jobs_deadline_outlives_the_runs_waits():
    program = kube.smoke_job(tenant_objects(True))["spec"]["activeDeadlineSeconds"]
    longer = kube.smoke_job(kube.smoke_job_documents(None, "k3x9q2", program + 900))
    assert longer["spec"]["activeDeadlineSeconds"] == program + 900
    # Never shortened below the program's own.
    assert kube.smoke_job(kube.smoke_job_documents(None, "k3x9q2", 60))["spec"]["activeDeadlineSeconds"] == program


def test_job_states():
    assert kube.job_state(load("kubectl/job-running.json"))[0] == "running"
    assert kube.job_state(load("kubectl/job-complete.json"))[0] == "complete"
    state, detail = kube.job_state(load("kubectl/job-failed.json"))
    assert state == "failed" and "DeadlineExceeded" in detail


def test_pod_times_and_binding():
    (pending,) = kube.job_pods(load("kubectl/smoke-pods-pending.json"), "nvidia-smi")
    assert kube.pod_times(pending)["pod_started"] is None
    (done,) = kube.job_pods(load("kubectl/smoke-pods-succeeded.json"), "nvidia-smi")
    times = kube.pod_times(done)
    assert times["pod_created"].isoformat() == "2026-11-30T13:12:20+00:00"
    assert (times["pod_finished"] - times["pod_started"]).total_seconds() == 1
    assert kube.job_pods(load("kubectl/tenant-pods-all.json"), "nvidia-smi") == []


def test_the_gpu_node_is_the_bound_one_or_a_new_one_with_the_gpu_property():
    before = kube.node_names(load("kubectl/tenant-nodes-cpu-only.json"))
    nodes = load("kubectl/tenant-nodes-gpu-uninitialized.json")
    assert kube.gpu_node(nodes, before, "nvidia-tesla-t4", None)["metadata"]["name"] == GPU_NODE
    assert kube.gpu_node(nodes, before, "nvidia-l4", None) is None
    assert kube.gpu_node(nodes, before, "nvidia-l4", GPU_NODE)["metadata"]["name"] == GPU_NODE
    assert kube.gpu_node(load("kubectl/tenant-nodes-cpu-only.json"), before, "nvidia-tesla-t4", None) is None


def gpu_node(fixture: str) -> dict:
    return next(n for n in load(fixture)["items"] if n["metadata"]["name"] == GPU_NODE)


def findings(node: dict, zone_wanted: str | None = "us-central1-b") -> dict[str, kube.Finding]:
    found = kube.node_findings(node, project="acme-acceptance", zones=ZONES, gpus=1, zone_wanted=zone_wanted)
    return {f.check: f for f in found}


def test_a_node_the_ccm_never_initialized_fails_every_node_check():
    node = gpu_node("kubectl/tenant-nodes-gpu-uninitialized.json")
    assert not kube.is_initialized(node)
    found = findings(node)
    assert [c for c, f in found.items() if f.ok] == []
    assert "never matched" in found["providerID set"].detail
    assert "'global'" in found["topology.kubernetes.io/zone is a real zone"].detail
    assert "None" in found["topology.gke.io/zone is a real zone"].detail


def test_an_initialized_gpu_node_passes():
    node = gpu_node("kubectl/tenant-nodes-gpu-ready.json")
    assert kube.is_initialized(node) and kube.allocatable_gpus(node) == 1
    assert {c: f.ok for c, f in findings(node).items()} == {
        "providerID set": True,
        "uninitialized taint gone": True,
        "topology.kubernetes.io/zone is a real zone": True,
        "topology.gke.io/zone is a real zone": True,
        "node in the zone the Job asked for": True,
        "allocatable nvidia.com/gpu": True,
    }
    times = kube.node_times(node)
    assert (times["node_ready"] - times["node_registered"]).total_seconds() == 33


@pytest.mark.parametrize(
    "change, failing",
    [
        (lambda n: n["metadata"]["labels"].update({"topology.gke.io/zone": "us-central1-a"}), "topology.gke.io/zone is a real zone"),
        (lambda n: n["metadata"]["labels"].pop("topology.gke.io/zone"), "topology.gke.io/zone is a real zone"),
        (lambda n: n["spec"].update({"providerID": "gce://other-project/us-central1-b/x"}), "providerID set"),
        (lambda n: n["status"]["allocatable"].pop("nvidia.com/gpu"), "allocatable nvidia.com/gpu"),
    ],
)
def test_each_node_check_can_fail_on_its_own(change, failing):
    node = gpu_node("kubectl/tenant-nodes-gpu-ready.json")
    change(node)
    assert [c for c, f in findings(node).items() if not f.ok][0] == failing


def test_a_node_in_the_ccms_zone_does_not_prove_multizone():
    node = gpu_node("kubectl/tenant-nodes-gpu-ready.json")
    assert not findings(node, zone_wanted="us-central1-a")["node in the zone the Job asked for"].ok
    assert "node in the zone the Job asked for" not in findings(node, zone_wanted=None)


@pytest.mark.parametrize(
    "gpu, name",
    [("nvidia-tesla-t4", "T4"), ("nvidia-l4", "L4"), ("nvidia-a100-80gb", "A100"), ("nvidia-h100-80gb", "H100"), ("nvidia-tesla-p100", "P100")],
)
def test_expected_gpu_names(gpu, name):
    assert kube.expected_gpu_name(gpu) == name


def test_nvidia_smi_output():
    assert kube.nvidia_smi_finding(load("kubectl/nvidia-smi-t4.log"), "nvidia-tesla-t4").ok
    wrong_gpu = kube.nvidia_smi_finding(load("kubectl/nvidia-smi-t4.log"), "nvidia-l4")
    assert not wrong_gpu.ok and "L4" in wrong_gpu.detail
    broken = kube.nvidia_smi_finding(load("kubectl/nvidia-smi-no-driver.log"), "nvidia-tesla-t4")
    assert not broken.ok and "Failed to initialize NVML" in broken.detail
