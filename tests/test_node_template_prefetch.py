"""The image prefetch of templates/node/main.tf (instance annotation gpu-platform/gpu-operator-images):
the images a GPU node's boothook pulls ahead, evaluated by OpenTofu (node_template_support.py
`evaluated`), equal the image set of the pinned GPU Operator chart for the tenant's settings; the
boothook and its pull script, run on a scratch node (node_boot_support.py), install units that
nothing waits for, stay bounded and never fail the node.
"""

from __future__ import annotations

import re

import pytest

from config.catalog import load_catalog
from node_boot_support import PATH_UNIT, PULL_SCRIPT, SERVICE_UNIT, Node, images_of
from components.tenant_documents import operator_values
from gpu_operator_chart import gpu_node_images
from hcl_support import failures
from node_template_support import PREFETCH_SETTINGS, SAMPLE_OF_GPU, USER_DATA, _parts, _shipped_prefetch
from node_template_support import doc, evaluated, instance, local_values, offer, preconditions, samples  # noqa: F401 (fixtures)


# --- image prefetch (instance annotation gpu-platform/gpu-operator-images; tests/node_boot_support.py)


def _named_parts(user_data: str) -> dict[str, str]:
    """filename → payload of each part of the wrapped user data, in order."""
    return {part.get_filename(): part.get_payload() for part in _parts(user_data)}


@pytest.mark.parametrize(
    "scenario, settings, gpu",
    [("prefetch-l4", "defaults", "nvidia-l4"), ("prefetch-a100", "defaults", "nvidia-tesla-a100"), ("prefetch-a100-dcgm-off", "DCGM off", "nvidia-tesla-a100")],
)
def test_a_gpu_node_pulls_the_image_set_of_the_pinned_chart(evaluated, scenario, settings, gpu):
    """What the node pulls (the boothook's list) equals the images our record of the chart starts
    on a node of that GPU for the tenant's settings: DCGM off leaves the exporter out, MIG-capable
    A100s add the MIG manager."""
    result = evaluated[scenario]
    assert failures(result) == []
    parts = _named_parts(result["arg.metadata"]["user-data"])
    assert list(parts) == ["gpu-platform-conceal-metadata", "gpu-platform-image-prefetch", "vcluster-platform"]
    assert parts["vcluster-platform"] == USER_DATA
    pulled = images_of(parts["gpu-platform-image-prefetch"])
    assert len(pulled) == len(set(pulled))
    mig = load_catalog().gpus[gpu].mig
    assert set(pulled) == gpu_node_images(operator_values(PREFETCH_SETTINGS[settings]), mig_capable=mig)
    assert any("k8s-mig-manager" in i for i in pulled) == (gpu == "nvidia-tesla-a100")
    assert any("dcgm-exporter" in i for i in pulled) == (settings == "defaults")


def test_each_shipped_tenants_gpu_nodes_pull_the_image_set_of_the_pinned_chart(evaluated):
    """Every GPU pool of the shipped stacks' tenants: what its node's boothook pulls is the set
    derived from the pinned chart's files for the tenant's settings."""
    shipped = _shipped_prefetch()
    assert {gpu for _, gpu, _ in shipped.values()} == set(SAMPLE_OF_GPU)
    for scenario, (settings, gpu, _) in shipped.items():
        result = evaluated[scenario]
        assert failures(result) == [], scenario
        pulled = images_of(_named_parts(result["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"])
        assert len(pulled) == len(set(pulled)), scenario
        assert set(pulled) == gpu_node_images(operator_values(settings), mig_capable=load_catalog().gpus[gpu].mig), scenario


def test_an_exposed_gpu_node_prefetches_too(evaluated):
    parts = _named_parts(evaluated["prefetch-exposed"]["arg.metadata"]["user-data"])
    assert list(parts) == ["gpu-platform-image-prefetch", "vcluster-platform"]
    assert parts["vcluster-platform"] == USER_DATA
    assert list(_named_parts(evaluated["prefetch-exposed-no-user-data"]["arg.metadata"]["user-data"])) == ["gpu-platform-image-prefetch"]


@pytest.mark.parametrize("scenario", ["prefetch-cpu", "prefetch-other-gpu", "prefetch-not-json"])
def test_nothing_to_prefetch_leaves_the_user_data_as_it_was(evaluated, scenario):
    """A CPU node, a GPU the property does not list, a property that is not JSON: no prefetch, and
    an exposed node gets the platform's data as it is (the unlisted GPU, an H100 on an NVSwitch
    machine type, keeps only its Fabric Manager boothook)."""
    result = evaluated[scenario]
    assert result["local.prefetch"] is False and result["local.prefetch_images"] == []
    user_data = result["arg.metadata"]["user-data"]
    if scenario == "prefetch-other-gpu":
        assert list(_named_parts(user_data)) == ["gpu-platform-fabric-manager", "vcluster-platform"]
    else:
        assert user_data == USER_DATA
    assert failures(result) == []


def test_only_image_references_reach_the_script(evaluated):
    result = evaluated["prefetch-unsafe"]
    assert result["local.prefetch_images"] == ["nvcr.io/nvidia/k8s-device-plugin:v0.18.1"]
    assert images_of(_named_parts(result["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"]) == ["nvcr.io/nvidia/k8s-device-plugin:v0.18.1"]


@pytest.fixture
def prefetch_boothook(evaluated) -> str:
    script = _named_parts(evaluated["prefetch-l4"]["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"]
    assert script == evaluated["prefetch-l4"]["local.prefetch_script"].rstrip("\n")
    return script


def test_the_boothook_only_installs_units_and_returns(prefetch_boothook, tmp_path):
    """It pulls nothing itself: it writes the pull script and two units, reloads systemd and starts
    the path unit without waiting for it, so the join that follows is not held up."""
    node = Node(tmp_path)
    run = node.boot(prefetch_boothook)
    assert (run.status, run.stderr) == (0, "")
    assert run.calls == ["systemctl daemon-reload", f"systemctl --no-block start {PATH_UNIT}"]
    assert not node.pulls.exists()  # nothing pulled yet
    assert node.unit(PATH_UNIT) == [
        "[Unit]", "Description=gpu-platform: pull the GPU Operator images once containerd runs",
        "[Path]", "PathExists=/run/containerd/containerd.sock", f"Unit={SERVICE_UNIT}",
    ]
    service = node.unit(SERVICE_UNIT)
    # A oneshot that stays active once done, so the path unit does not start it again; bounded.
    assert {"Type=oneshot", "RemainAfterExit=yes", "After=containerd.service", "TimeoutStartSec=660"} <= set(service)
    assert f"ExecStart={node.lib_dir / PULL_SCRIPT}" in service
    assert (node.lib_dir / PULL_SCRIPT).stat().st_mode & 0o111
    assert images_of((node.lib_dir / PULL_SCRIPT).read_text()) == images_of(prefetch_boothook)


def test_a_boothook_that_cannot_install_still_exits_0(prefetch_boothook, tmp_path):
    node = Node(tmp_path)
    run = node.boot(prefetch_boothook, command_fail="daemon-reload")
    assert run.status == 0
    assert "image prefetch not installed (systemctl daemon-reload); the kubelet pulls the images itself" in run.stderr


def test_nothing_waits_for_the_prefetch(evaluated, prefetch_boothook, tmp_path):
    """The join never waits for a pull: no unit is ordered after the prefetch units or pulls them in
    (no [Install] section, no Before=), the service orders itself after containerd alone, and no
    other part of the node's user data (the kubelet's drop-ins, the platform's join) names them."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    for unit in (PATH_UNIT, SERVICE_UNIT):
        lines = node.unit(unit)
        assert lines and "[Install]" not in lines
        assert [line for line in lines if line.startswith(("Before=", "WantedBy=", "RequiredBy=", "UpheldBy="))] == [], unit
    assert [line for line in node.unit(SERVICE_UNIT) if line.startswith(("After=", "Requires=", "Wants=", "BindsTo="))] == ["After=containerd.service"]
    parts = _named_parts(evaluated["prefetch-l4"]["arg.metadata"]["user-data"])
    others = [name for name in parts if name != "gpu-platform-image-prefetch"]
    assert others == ["gpu-platform-conceal-metadata", "vcluster-platform"]
    assert [name for name in others if "image-prefetch" in parts[name]] == []


def test_the_boothook_is_bounded_even_when_systemd_hangs(prefetch_boothook, tmp_path):
    """cloud-init, and the join after it, waits for the boothook: each of its systemctl calls is
    stopped after `systemctl_seconds` (30 s as rendered, 1 s here), and it still exits 0."""
    calls = [line for line in prefetch_boothook.splitlines() if " systemctl " in f" {line} " and not line.startswith("#")]
    assert len(calls) == 2 and all(line.startswith('timeout "$systemctl_seconds" systemctl ') for line in calls), calls
    assert "systemctl_seconds=30" in prefetch_boothook.splitlines()
    run = Node(tmp_path).boot(prefetch_boothook, settings={"systemctl_seconds": "1"}, command_hang="daemon-reload")
    assert run.status == 0 and run.seconds < 10
    assert "image prefetch not installed (systemctl daemon-reload); the kubelet pulls the images itself" in run.stderr


def test_the_gpu_nodes_page_states_the_prefetchs_bounds(prefetch_boothook, tmp_path):
    """docs/gpu-nodes.md "How long": the bounds it names are the rendered ones."""
    from docs_support import section

    text = " ".join(section("How long").split())
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    pull_script = (node.lib_dir / PULL_SCRIPT).read_text().splitlines()
    assert "systemctl_seconds=30" in prefetch_boothook.splitlines() and "each `systemctl` call stopped after 30 s" in text
    assert "limit=600" in pull_script and "each is stopped after 600 s" in text
    assert {"attempts=3", "retry_seconds=10"} <= set(pull_script) and "tried up to 3 times, 10 s apart, within those 600 s" in text
    assert "TimeoutStartSec=660" in node.unit(SERVICE_UNIT) and "the service is stopped after 660 s" in text
    assert "no unit is ordered after the prefetch or needs it" in text


def test_the_pulls_run_at_once_each_logged(prefetch_boothook, tmp_path):
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    run = node.pull(pull_seconds="1")
    assert run.status == 0
    times = node.pull_times()
    assert set(times) == set(images)
    # Every pull started before the first one ended.
    assert max(t["start"] for t in times.values()) < min(t["end"] for t in times.values())
    assert run.seconds < len(images) * 1.0
    for image in images:
        assert f"gpu-platform prefetch: pulled {image} in " in run.stdout
        assert f"crictl --runtime-endpoint unix:///run/containerd/containerd.sock pull {image}" in run.calls
    assert run.stdout.splitlines()[-1] == "gpu-platform prefetch: done"


def _image(images: list[str], name: str) -> str:
    [image] = [i for i in images if f"/{name}:" in i]
    return image


def test_a_failed_or_hanging_pull_is_logged_bounded_and_never_fails(prefetch_boothook, tmp_path):
    """A limit of 1 s leaves no room for another attempt 10 s later: one attempt each."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    run = node.pull(settings={"limit": "1"}, pull_fail="dcgm-exporter", pull_hang="k8s-device-plugin")
    assert run.status == 0
    assert run.seconds < 10  # the hanging pull is stopped at the limit, not after its 30 s
    assert f"gpu-platform prefetch: {_image(images, 'k8s-device-plugin')} not pulled (status 124 " in run.stdout
    assert f"gpu-platform prefetch: {_image(images, 'dcgm-exporter')} not pulled (status 1 " in run.stdout
    assert ", 1 of 3 attempts, limit 1 s)" in run.stdout and "again in" not in run.stdout
    assert f"gpu-platform prefetch: pulled {_image(images, 'gpu-operator')} in " in run.stdout
    assert set(node.pull_attempts().values()) == {1}


def test_a_pull_that_fails_is_tried_again_up_to_three_times(prefetch_boothook, tmp_path):
    """Pulls in flight fail when the join restarts containerd: the next attempt, `retry_seconds`
    later (10 s as rendered, none here), gets the image; one that keeps failing stops after three."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    script = (node.lib_dir / PULL_SCRIPT).read_text().splitlines()
    assert {"attempts=3", "retry_seconds=10", "limit=600"} <= set(script)
    flaky, failing = _image(images, "k8s-device-plugin"), _image(images, "dcgm-exporter")
    run = node.pull(settings={"retry_seconds": "0"}, pull_flaky="k8s-device-plugin", flaky_failures="2", pull_fail="dcgm-exporter")
    assert run.status == 0
    attempts = node.pull_attempts()
    assert attempts == {image: 3 if image in (flaky, failing) else 1 for image in images}
    assert f"gpu-platform prefetch: {flaky} attempt 2 failed (status 1), again in 0 s" in run.stdout
    assert re.search(rf"^gpu-platform prefetch: pulled {re.escape(flaky)} in \d+ s \(attempt 3\)$", run.stdout, re.M)
    assert re.search(rf"^gpu-platform prefetch: {re.escape(failing)} not pulled \(status 1 after \d+ s, 3 of 3 attempts, limit 600 s\)$", run.stdout, re.M)
    assert run.stdout.splitlines()[-1] == "gpu-platform prefetch: done"


def test_without_crictl_ctr_pulls_into_the_kubelets_namespace_and_without_either_nothing_fails(prefetch_boothook, tmp_path):
    node = Node(tmp_path / "ctr", pull_tool="ctr")
    node.boot(prefetch_boothook)
    run = node.pull()
    assert run.status == 0
    assert "ctr --address /run/containerd/containerd.sock --namespace k8s.io images pull nvcr.io/nvidia/gpu-operator:v25.10.1" in run.calls
    bare = Node(tmp_path / "none", pull_tool=None)
    bare.boot(prefetch_boothook)
    run = bare.pull()
    assert (run.status, run.stdout.strip()) == (0, "gpu-platform prefetch: neither crictl nor ctr found; the kubelet pulls the images itself")
