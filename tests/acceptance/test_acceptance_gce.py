"""The acceptance test's readers of gcloud JSON: the quota check before anything is created, the
VM behind a node, and the leftover scan after `destroy` (recorded outputs in tests/acceptance/data)."""

from __future__ import annotations

import copy

import pytest

from tests.acceptance import gce, leftovers
from tests.acceptance.recorded import load
from tests.acceptance.settings import Settings, load_run_stack, run_names

REGION = "gcloud/regions-describe-us-central1.json"
PROJECT_INFO = "gcloud/project-info-describe.json"


@pytest.fixture(scope="module")
def names():
    return run_names(load_run_stack(Settings(project="acme-acceptance"), "k3x9q2"), "k3x9q2")


@pytest.mark.parametrize(
    "gpu, metric",
    [("nvidia-tesla-t4", "NVIDIA_T4_GPUS"), ("nvidia-l4", "NVIDIA_L4_GPUS"), ("nvidia-a100-80gb", "NVIDIA_A100_80GB_GPUS"), ("nvidia-tesla-a100", "NVIDIA_A100_GPUS")],
)
def test_quota_metric_names(gpu, metric):
    assert gce.gpu_quota_metric(gpu) == metric


def test_quota_enough_for_one_t4():
    assert gce.quota_problem(load(REGION), load(PROJECT_INFO), "nvidia-tesla-t4", 1) is None


def test_quota_problems_name_the_metric_and_the_numbers():
    l4 = gce.quota_problem(load(REGION), load(PROJECT_INFO), "nvidia-l4", 1)
    assert l4.startswith("1 free NVIDIA_L4_GPUS quota in us-central1 (limit 0, in use 0")
    assert "NVIDIA_T4_GPUS quota in us-central1 (limit 1" in gce.quota_problem(load(REGION), load(PROJECT_INFO), "nvidia-tesla-t4", 2)
    busy = copy.deepcopy(load(PROJECT_INFO))
    busy["quotas"][0]["usage"] = 1.0
    assert "GPUS_ALL_REGIONS quota across regions (limit 1, in use 1" in gce.quota_problem(load(REGION), busy, "nvidia-tesla-t4", 1)


def test_a_quota_metric_the_region_does_not_list_is_not_guessed():
    roomy = copy.deepcopy(load(PROJECT_INFO))
    roomy["quotas"][0]["limit"] = 16.0
    assert gce.quota_problem(load(REGION), roomy, "nvidia-h200-141gb", 8) is None
    assert "GPUS_ALL_REGIONS" in gce.quota_problem(load(REGION), load(PROJECT_INFO), "nvidia-h200-141gb", 8)


def gpu_node() -> dict:
    return next(n for n in load("kubectl/tenant-nodes-gpu-ready.json")["items"] if "gpu" in n["metadata"]["name"])


T4_MACHINES = {"n1-standard-4": True, "n1-standard-8": True}


def test_the_vm_behind_the_node():
    vm = gce.vm_for_node(load("gcloud/instances-list-tenant.json"), gpu_node())
    assert vm["name"] == "acc-k3x9q2-gpu-8w2mf-3f9a1c"
    checks = gce.vm_findings(vm, gpu_node(), tenant="acc-k3x9q2", gpu="nvidia-tesla-t4", gpu_machines=T4_MACHINES)
    assert [(f.check, f.ok) for f in checks] == [
        ("the node's VM exists in Compute Engine", True),
        ("VM labelled with its tenant", True),
        ("VM carries the GPU", True),
        ("node zone label = VM zone", True),
    ]
    assert gce.vm_for_node(load("gcloud/instances-list-tenant-after-idle.json"), gpu_node()) is None


def test_a_vm_without_its_guest_accelerator_fails():
    vm = copy.deepcopy(gce.vm_for_node(load("gcloud/instances-list-tenant.json"), gpu_node()))
    del vm["guestAccelerators"]
    checks = {f.check: f for f in gce.vm_findings(vm, gpu_node(), tenant="acc-k3x9q2", gpu="nvidia-tesla-t4", gpu_machines=T4_MACHINES)}
    assert not checks["VM carries the GPU"].ok
    # An accelerator-optimized machine comes with its GPU: no guest accelerator needed.
    vm["machineType"] = vm["machineType"].replace("n1-standard-4", "g2-standard-4")
    checks = {f.check: f for f in gce.vm_findings(vm, gpu_node(), tenant="acc-k3x9q2", gpu="nvidia-l4", gpu_machines={"g2-standard-4": False})}
    assert checks["VM carries the GPU"].ok


def test_a_node_without_a_vm():
    (finding,) = gce.vm_findings(None, gpu_node(), tenant="acc-k3x9q2", gpu="nvidia-tesla-t4", gpu_machines=T4_MACHINES)
    assert not finding.ok and "acc-k3x9q2-gpu-8w2mf-3f9a1c" in finding.detail


def test_leftover_scan_finds_the_runs_objects_in_deletion_order(names):
    found = leftovers.scan(load("gcloud/leftovers-after-failed-destroy.json"), names)
    lb = "a8f3c2b1d4e5f60718293a4b5c6d7e8f"
    assert [(item.kind, item.name) for item in found] == [
        ("restore plan", "dev-acc-k3x9q2-restore"),  # the tenant's Backup for GKE plans, not dev-nlp's
        ("backup plan", "dev-acc-k3x9q2"),
        ("cluster", "gpu-acc-k3x9q2"),
        ("instance", "acc-k3x9q2-gpu-8w2mf-3f9a1c"),  # labelled vcluster=<tenant> by the node template
        ("instance", "gke-gpu-acc-k3x9q2-system-5d1c2b7e-x1q9"),
        ("disk", "pvc-5b0c7d0e-2f4a-4b7e-9d31-6c1f0a8e2b11"),  # the vCluster's volume, by its PVC namespace
        ("forwarding rule", lb),  # the vCluster Service's load balancer, by its service name
        ("target pool", lb),
        ("firewall rule", f"k8s-fw-{lb}"),
        ("firewall rule", "gke-gpu-acc-k3x9q2-5d1c2b7e-all"),
        ("firewall rule", "dev-acc-k3x9q2-allow-internal"),
        ("router", "dev-acc-k3x9q2-router"),
        ("subnetwork", "dev-acc-k3x9q2-nodes"),
        ("network", "dev-acc-k3x9q2-nodes"),
        ("network", "gpu-acc-k3x9q2"),
        ("service account", "vcp-acc-k3x9q2@acme-acceptance.iam.gserviceaccount.com"),
        ("service account", "dev-acc-k3x9q2-nodes@acme-acceptance.iam.gserviceaccount.com"),
        ("custom role", "gpuPlatformAcc_k3x9q2_autoNodes"),  # the deleted one is not reported
    ]


def test_leftover_delete_commands(names):
    commands = {(item.kind, item.name): item.command for item in leftovers.scan(load("gcloud/leftovers-after-failed-destroy.json"), names)}
    project = "--project acme-acceptance --quiet"
    assert commands["backup plan", "dev-acc-k3x9q2"] == f"gcloud beta container backup-restore backup-plans delete dev-acc-k3x9q2 --location us-central1 {project}"
    assert commands["restore plan", "dev-acc-k3x9q2-restore"] == (
        f"gcloud beta container backup-restore restore-plans delete dev-acc-k3x9q2-restore --location us-central1 {project}"
    )
    assert commands["cluster", "gpu-acc-k3x9q2"] == f"gcloud container clusters delete gpu-acc-k3x9q2 --location us-central1-a {project}"
    assert commands["instance", "acc-k3x9q2-gpu-8w2mf-3f9a1c"] == f"gcloud compute instances delete acc-k3x9q2-gpu-8w2mf-3f9a1c --zone us-central1-b {project}"
    assert commands["router", "dev-acc-k3x9q2-router"] == f"gcloud compute routers delete dev-acc-k3x9q2-router --region us-central1 {project}"
    assert commands["subnetwork", "dev-acc-k3x9q2-nodes"] == f"gcloud compute networks subnets delete dev-acc-k3x9q2-nodes --region us-central1 {project}"
    assert commands["network", "gpu-acc-k3x9q2"] == f"gcloud compute networks delete gpu-acc-k3x9q2 {project}"
    assert commands["forwarding rule", "a8f3c2b1d4e5f60718293a4b5c6d7e8f"] == (
        f"gcloud compute forwarding-rules delete a8f3c2b1d4e5f60718293a4b5c6d7e8f --region us-central1 {project}"
    )
    assert commands["custom role", "gpuPlatformAcc_k3x9q2_autoNodes"] == f"gcloud iam roles delete gpuPlatformAcc_k3x9q2_autoNodes {project}"
    assert commands["service account", "vcp-acc-k3x9q2@acme-acceptance.iam.gserviceaccount.com"] == (
        f"gcloud iam service-accounts delete vcp-acc-k3x9q2@acme-acceptance.iam.gserviceaccount.com {project}"
    )


def test_a_clean_project_has_no_leftovers_and_other_environments_are_left_alone(names):
    assert leftovers.scan(load("gcloud/leftovers-after-clean-destroy.json"), names) == []


def test_another_runs_objects_are_not_this_runs(names):
    other = run_names(load_run_stack(Settings(project="acme-acceptance"), "p7m2w5"), "p7m2w5")
    assert leftovers.scan(load("gcloud/leftovers-after-failed-destroy.json"), other) == []


def test_the_scan_covers_every_listing_and_every_kind_can_be_deleted():
    assert set(leftovers.LISTINGS) == set(leftovers.DELETE)
    assert set(load("gcloud/leftovers-after-failed-destroy.json")) == set(leftovers.LISTINGS)


def test_find_by_hand_names_the_run(names):
    commands = leftovers.find_by_hand(names)
    assert all(c.startswith("gcloud ") and "--project acme-acceptance" in c for c in commands)
    text = "\n".join(commands)
    for name in ("gpu-acc-k3x9q2", "labels.vcluster=acc-k3x9q2", "vcluster-acc-k3x9q2", "vcp-acc-k3x9q2", "gpuPlatformAcc_k3x9q2_", "dev-acc-k3x9q2-"):
        assert name in text


def test_in_project_mode_both_projects_are_scanned_and_listed_by_hand(monkeypatch):
    """The tenant's VMs, disks, network, node identity and roles are in the team's project: the
    scan after the destroy lists it as well as the environment's, and says where each thing is."""
    from tests.acceptance import run as runner

    names = run_names(load_run_stack(Settings(project="acme-acceptance", team_project="acme-acceptance-team"), "k3x9q2"), "k3x9q2")
    failed = load("gcloud/leftovers-after-failed-destroy.json")
    in_team_project = {"instance", "disk", "router", "subnetwork", "address"}
    per_project = {
        "acme-acceptance": {kind: objs for kind, objs in failed.items() if kind not in in_team_project},
        "acme-acceptance-team": {kind: objs for kind, objs in failed.items() if kind in in_team_project},
    }
    listed = []

    class Gcloud:
        def __init__(self, project):
            self.project = project

        def json(self, *args):
            listed.append(self.project)
            kind = next(k for k, v in leftovers.LISTINGS.items() if tuple(w.format(region=names.region) for w in v) == args)
            return per_project[self.project].get(kind, [])

    monkeypatch.setattr(runner, "Gcloud", Gcloud)
    found = runner.scan_project(names)
    assert sorted(set(listed)) == ["acme-acceptance", "acme-acceptance-team"]
    where = {(item.kind, item.name): item.command.split("--project ")[1] for item in found}
    assert where["instance", "acc-k3x9q2-gpu-8w2mf-3f9a1c"] == "acme-acceptance-team --quiet"
    assert where["cluster", "gpu-acc-k3x9q2"] == "acme-acceptance --quiet"
    # The same things a one-project scan of everything would find, each in its own project.
    assert sorted((i.kind, i.name) for i in found) == sorted((i.kind, i.name) for i in leftovers.scan(failed, names))
    by_hand = leftovers.find_by_hand(names)
    assert len(by_hand) == 2 * len(leftovers.find_by_hand(run_names(load_run_stack(Settings(project="acme-acceptance"), "k3x9q2"), "k3x9q2")))
    assert [c for c in by_hand if "--project acme-acceptance-team" in c] == [
        c.replace("--project acme-acceptance", "--project acme-acceptance-team") for c in by_hand if "--project acme-acceptance " in c
    ]
