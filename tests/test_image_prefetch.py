"""The images a GPU node pulls ahead are the ones its GPU Operator will start there: the program's
derivation (config/gpu_operator.py, through the tenant's rendered chart values) equals the set
tests/gpu_operator_chart.py derives from our record of the pinned chart release
(config/charts/gpu-operator-<version>.yaml), for each tenant's GPU Operator settings. What the node
template makes of the list is tested in test_node_template_prefetch.py; the record against upstream
in test_verify_chart_record.py."""

from __future__ import annotations

import json

import pytest
import yaml
from gpu_operator_chart import NFD_VALUES, RECORD, VALUES, gpu_node_images, image

from components.tenant_documents import gpu_operator_images, gpu_operator_images_annotation, gpu_operator_values, operator_values
from components.tenant_vcluster import GPU_OPERATOR_IMAGES_ANNOTATION
from config.catalog import load_catalog
from config.gpu_operator import CHARTS_DIR, RecordError, load_record, node_images, record_path, recorded_versions
from config.stack import load_stack
from config.tenant import GpuOperator
from config.versions import GPU_OPERATOR_VERSION
from shipped_stacks import SHIPPED_DIR, problems, shipped_values

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
DCGM_EXPORTER = image(VALUES, "dcgmExporter")
MIG_MANAGER = image(VALUES, "migManager")

SETTINGS = {
    "defaults": GpuOperator(),
    "DCGM off": GpuOperator(dcgm_exporter=False),
    "MIG manager off": GpuOperator(mig_manager=False),
    "ServiceMonitor on": GpuOperator(service_monitor=True),
}
RECORD_FILE = record_path(GPU_OPERATOR_VERSION)


def test_the_record_is_of_the_pinned_chart_and_the_only_file_under_charts():
    assert recorded_versions() == {GPU_OPERATOR_VERSION}
    assert sorted(p.name for p in CHARTS_DIR.rglob("*")) == [RECORD_FILE.name]
    assert RECORD.version == RECORD.app_version == GPU_OPERATOR_VERSION and RECORD.nfd_condition == ("nfd", "enabled")


def test_each_group_names_its_upstream_file():
    """Repository, tag or branch with its commit, path, a URL to read it at, its sha256."""
    groups = load_record(RECORD_FILE)["groups"]
    for name, group in groups.items():
        source = group["source"]
        assert source["repo"] == "NVIDIA/gpu-operator", name
        if name == "chart":  # the published archive: the tag's own Chart.yaml has a development version
            assert source["ref"] == "branch gh-pages" and source["path"] == f"stable/gpu-operator-{GPU_OPERATOR_VERSION}.tgz"
            assert source["member"] == "gpu-operator/Chart.yaml"
            assert source["url"] == f"https://github.com/NVIDIA/gpu-operator/blob/{source['commit']}/{source['path']}"
        else:
            assert source["ref"] == f"tag {GPU_OPERATOR_VERSION}" and source["path"].startswith("deployments/gpu-operator/"), name
            assert source["url"] == f"https://github.com/NVIDIA/gpu-operator/blob/{GPU_OPERATOR_VERSION}/{source['path']}", name


def _broken(tmp_path, change) -> str:
    """The error loading the shipped record after `change` edits it."""
    record = yaml.safe_load(RECORD_FILE.read_text())
    change(record)
    path = tmp_path / RECORD_FILE.name
    path.write_text(yaml.safe_dump(record))
    with pytest.raises(RecordError) as raised:
        load_record(path)
    return str(raised.value)


def test_a_record_of_the_wrong_shape_is_refused_with_every_problem_and_its_key(tmp_path):
    def change(record):
        groups = record["groups"]
        groups["values"]["facts"]["toolkit"]["version"] = 1181
        del groups["values"]["facts"]["devicePlugin"]["image"]
        groups["values"]["facts"]["driver"]["image"] = "driver"
        groups["nfd-values"]["source"]["sha256"] = "f" * 63
        del groups["nfd-chart"]

    message = _broken(tmp_path, change)
    assert message.splitlines() == [
        f"{tmp_path / RECORD_FILE.name} is not a GPU Operator chart record:",
        "  groups.nfd-chart: missing",
        "  groups.values.facts.devicePlugin.image: missing (a string)",
        "  groups.values.facts.driver.image: not a fact config/gpu_operator.py reads",
        "  groups.values.facts.toolkit.version: 1181 is not a string or null",
        f"  groups.nfd-values.source.sha256: {'f' * 63!r} does not match [0-9a-f]{{64}}",
    ]


def test_a_record_of_another_release_or_of_a_subchart_the_chart_does_not_depend_on_is_refused(tmp_path):
    def change(record):
        record["groups"]["nfd-chart"]["facts"]["version"] = "0.18.3"
        record["groups"]["chart"]["facts"]["version"] = "v25.10.0"

    message = _broken(tmp_path, change)
    assert "groups.chart.facts.version: 'v25.10.0', but the file is named for v25.10.1" in message
    assert "groups.nfd-chart.facts.version: '0.18.3', but the chart depends on 'v0.18.2'" in message


def test_the_subchart_switch_is_where_the_dependency_condition_says(tmp_path):
    def change(record):
        record["groups"]["chart"]["facts"]["dependencies"]["node-feature-discovery"]["condition"] = "nfd.install"

    message = _broken(tmp_path, change)
    assert "groups.values.facts.nfd.install: missing (true or false)" in message
    assert "groups.values.facts.nfd.enabled: not a fact config/gpu_operator.py reads" in message


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


DIGEST = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    "overrides",
    [
        {"dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True}},
        {"nfd": {"enabled": False}, "gfd": {"enabled": False}, "toolkit": {"enabled": False}},
        {"devicePlugin": {"version": DIGEST}, "validator": {"version": "v25.10.0"}, "toolkit": {"repository": "mirror.example.com/nvidia"}},
        {"node-feature-discovery": {"image": {"tag": "v0.18.3"}}},
        {"node-feature-discovery": {"worker": {"enable": False}}},
    ],
    ids=["standalone DCGM and node status exporter on", "NFD, GFD and toolkit off", "a digest, a version, a mirror", "NFD tag", "NFD worker off"],
)
def test_every_switch_and_image_field_derives_as_the_chart_does(overrides):
    """Values our settings never give, given: the program's derivation still agrees with the one
    from the chart's files, key by key."""
    overrides = {"driver": {"enabled": False}, **overrides}
    for mig_capable in (False, True):
        derived = node_images(GPU_OPERATOR_VERSION, overrides, mig_capable=mig_capable)
        assert len(derived) == len(set(derived))
        assert set(derived) == gpu_node_images(overrides, mig_capable=mig_capable)


def test_the_image_fields_are_joined_as_the_operator_joins_them():
    derived = node_images(GPU_OPERATOR_VERSION, {"driver": {"enabled": False}, "devicePlugin": {"version": DIGEST}}, mig_capable=False)
    plugin = VALUES["devicePlugin"]
    assert f"{plugin['repository']}/{plugin['image']}@{DIGEST}" in derived
    # The validator's version is left unset in values.yaml: the chart's appVersion; NFD's tag likewise.
    assert VALUES["validator"]["version"] is None and NFD_VALUES["image"]["tag"] is None
    assert f"{VALUES['validator']['repository']}/{VALUES['validator']['image']}:{RECORD.app_version}" in derived
    assert f"{NFD_VALUES['image']['repository']}:{RECORD.nfd_app_version}" in derived


def test_an_operand_without_a_version_names_the_key():
    with pytest.raises(ValueError, match=f"GPU Operator {GPU_OPERATOR_VERSION}: toolkit has no repository, image and version to name its image by"):
        node_images(GPU_OPERATOR_VERSION, {"driver": {"enabled": False}, "toolkit": {"version": ""}}, mig_capable=False)


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
            assert annotations[GPU_OPERATOR_IMAGES_ANNOTATION] == gpu_operator_images_annotation(tenant.gpu_operator, [p.gpu for p in tenant.gpu_pools])
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
        "image prefetch: none (the images of GPU Operator v25.3.4 are not recorded in config/charts/; the kubelet pulls them one by one)"
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
    """docs/configuration.md `migManager`: A100, H100, H200, B200 (both A100 types), none of the others."""
    assert {name for name, gpu in load_catalog().gpus.items() if gpu.mig} == {
        "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h200-141gb", "nvidia-b200",
    }
