"""The images a GPU node pulls ahead are the ones its GPU Operator will start there: the program's
derivation (config/gpu_operator.py, through the tenant's rendered chart values) equals the set
derived from our record of the pinned chart (tests/data/gpu-operator-v25.10.1-values.yaml,
tests/gpu_operator_chart.py), for each tenant's GPU Operator settings. What the node template
makes of the list is tested in test_node_template.py."""

from __future__ import annotations

import json

import pytest
from gpu_operator_chart import RECORD, gpu_node_images

from components.tenant_documents import gpu_operator_images, gpu_operator_images_annotation, gpu_operator_values, operator_values
from components.tenant_vcluster import GPU_OPERATOR_IMAGES_ANNOTATION
from config.catalog import load_catalog
from config.gpu_operator import CHARTS, node_images
from config.stack import load_stack
from config.tenant import GpuOperator
from config.versions import GPU_OPERATOR_VERSION
from shipped_stacks import SHIPPED_DIR, problems, shipped_values

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
DCGM_EXPORTER = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless"
MIG_MANAGER = "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.13.1"

SETTINGS = {
    "defaults": GpuOperator(),
    "DCGM off": GpuOperator(dcgm_exporter=False),
    "MIG manager off": GpuOperator(mig_manager=False),
    "ServiceMonitor on": GpuOperator(service_monitor=True),
}


def test_the_record_is_of_the_pinned_chart():
    assert RECORD["chart"]["version"] == RECORD["chart"]["appVersion"] == GPU_OPERATOR_VERSION
    assert set(CHARTS) == {GPU_OPERATOR_VERSION}


@pytest.mark.parametrize("gpu", ["nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-h100-80gb"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_prefetch_list_is_the_image_set_of_the_pinned_chart(name, gpu):
    settings = SETTINGS[name]
    mig_capable = load_catalog().gpus[gpu].mig
    pulled = gpu_operator_images(settings, [gpu])[gpu]
    assert len(pulled) == len(set(pulled))
    assert set(pulled) == gpu_node_images(operator_values(settings), mig_capable=mig_capable)


def test_dcgm_off_leaves_out_the_exporter_and_mig_on_adds_the_mig_manager():
    default, no_dcgm = GpuOperator(), GpuOperator(dcgm_exporter=False)
    l4, a100 = gpu_operator_images(default, ["nvidia-l4", "nvidia-tesla-a100"]).values()
    assert DCGM_EXPORTER in l4 and DCGM_EXPORTER not in gpu_operator_images(no_dcgm, ["nvidia-l4"])["nvidia-l4"]
    # MIG: the manager only on MIG-capable GPUs (A100, not L4), and not when the tenant turns it off.
    assert MIG_MANAGER in a100 and MIG_MANAGER not in l4
    assert MIG_MANAGER not in gpu_operator_images(GpuOperator(mig_manager=False), ["nvidia-tesla-a100"])["nvidia-tesla-a100"]
    assert set(a100) - set(l4) == {MIG_MANAGER}


@pytest.mark.parametrize(
    "overrides",
    [
        {"driver": {"enabled": False}, "dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True}},
        {"driver": {"enabled": False}, "nfd": {"enabled": False}, "gfd": {"enabled": False}, "toolkit": {"enabled": False}},
    ],
    ids=["standalone DCGM and node status exporter on", "NFD, GFD and toolkit off"],
)
def test_every_recorded_switch_derives_as_the_chart_does(overrides):
    """Switches our settings never flip, flipped: the program's record and derivation still agree
    with the chart's, key by key."""
    for mig_capable in (False, True):
        assert set(node_images(GPU_OPERATOR_VERSION, overrides, mig_capable=mig_capable)) == gpu_node_images(overrides, mig_capable=mig_capable)


def test_an_enabled_driver_cannot_be_pulled_ahead():
    with pytest.raises(ValueError, match="the driver is enabled"):
        node_images(GPU_OPERATOR_VERSION, {}, mig_capable=False)
    assert gpu_operator_values(False)["driver"] == {"enabled": False}


def test_an_unrecorded_chart_release_pulls_nothing_ahead():
    settings = GpuOperator(version="v25.3.4")
    assert gpu_operator_images(settings, ["nvidia-l4"]) == {}
    assert gpu_operator_images_annotation(settings, ["nvidia-l4"]) == "{}"


def test_each_tenant_hands_its_nodes_the_list_of_its_settings(runs):
    """The instance annotation of every shipped inline tenant: each of its pools' GPU types with
    the chart's image set for its settings."""
    checked = 0
    for stack in ("dev", "prod"):
        loaded = load_stack(shipped_values(stack), stack=stack, project_dir=SHIPPED_DIR)
        for plan in loaded.tenants:
            tenant = plan.tenant
            annotations = runs[stack].one(VCI, tenant.name).input("metadata", "annotations")
            handed = json.loads(annotations[GPU_OPERATOR_IMAGES_ANNOTATION])
            assert set(handed) == {p.gpu for p in tenant.gpu_pools}
            for gpu, images in handed.items():
                assert set(images) == gpu_node_images(operator_values(tenant.gpu_operator), mig_capable=load_catalog().gpus[gpu].mig)
            checked += 1
    assert checked == 3


def test_the_plan_says_what_each_tenants_gpu_nodes_pull_ahead(warm_plan):
    """`make plan`, per tenant: how many images its GPU nodes pull ahead, from the annotation the
    program registered; none, and why, for a GPU Operator release whose images are not recorded."""
    import dataclasses

    from tools.plan_text import _prefetch_line, render_text

    text = render_text(warm_plan)
    nlp = next(t for t in warm_plan.tenants if t.name == "nlp")
    count = len(gpu_operator_images(nlp.plan.tenant.gpu_operator, ["nvidia-l4"])["nvidia-l4"])
    assert f"    image prefetch: each GPU node pulls its GPU Operator images at once as containerd starts (images per GPU type: nvidia-l4 {count})" in text
    unrecorded = dataclasses.replace(nlp, prefetch_images={}, gpu_operator_version="v25.3.4")
    assert _prefetch_line(unrecorded) == (
        "image prefetch: none (the images of GPU Operator v25.3.4 are not recorded in config/gpu_operator.py; the kubelet pulls them one by one)"
    )


def test_service_monitor_and_monitoring_need_the_dcgm_exporter(stack_values):
    values = stack_values("dev")
    values["gpu-platform:tenants"][0]["gpuOperator"] = {"serviceMonitor": True, "dcgmExporter": False}
    found = problems(values)
    assert "tenants[0].gpuOperator.serviceMonitor: true needs dcgmExporter: true (the ServiceMonitor scrapes the DCGM exporter)" in found
    assert any(p.startswith("tenants[0].gpuOperator.dcgmExporter: false, but monitoring is on for this tenant") for p in found)
    values["gpu-platform:tenants"][0]["gpuOperator"] = {"dcgmExporter": False}
    values["gpu-platform:tenants"][0]["monitoring"] = {"enabled": False}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


def test_the_mig_capable_gpus_are_the_ones_the_docs_name():
    """docs/configuration.md `migManager`: A100, H100, H200 (both A100 types), none of the others."""
    assert {name for name, gpu in load_catalog().gpus.items() if gpu.mig} == {"nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h200-141gb"}
