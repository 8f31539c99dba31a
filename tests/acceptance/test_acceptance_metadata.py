"""The live metadata-concealment check's documents and readers, on recorded outputs
(tests/acceptance/data/kubectl/metadata-probe-*)."""

from __future__ import annotations

import subprocess

import pytest

from tests.acceptance import metadata
from tests.acceptance.recorded import load

NODE = "acc-k3x9q2-cpu-r2n7d-9be14a"


def _logs(from_pod: str, from_host: str = "metadata-probe-from-host.log") -> dict[str, str]:
    return {metadata.FROM_POD: load(f"kubectl/{from_pod}"), metadata.FROM_HOST: load(f"kubectl/{from_host}")}


def test_both_probes_run_on_one_ready_node_one_of_them_on_the_host_network():
    node = metadata.probe_node(load("kubectl/tenant-nodes-cpu-only.json"))
    assert node == NODE
    namespace, *pods = metadata.documents(node, "k3x9q2")
    assert namespace["metadata"] == {"name": metadata.NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}
    assert {p["metadata"]["name"]: p["spec"]["hostNetwork"] for p in pods} == {"metadata-from-pod": False, "metadata-from-host": True}
    for pod in pods:
        spec = pod["spec"]
        assert (spec["nodeName"], spec["restartPolicy"], spec["tolerations"]) == (NODE, "Never", [{"operator": "Exists"}])
        [container] = spec["containers"]
        assert container["image"] == metadata.IMAGE and container["command"][:2] == ["sh", "-c"]
    # Port 80 with the header only the metadata server's API answers to; DNS as the control.
    assert "--header 'Metadata-Flavor: Google' http://169.254.169.254/computeMetadata/v1/" in metadata.SCRIPT
    assert "nslookup metadata.google.internal 169.254.169.254" in metadata.SCRIPT
    assert metadata.probe_node({"items": []}) is None


def test_the_probe_script_prints_what_the_readers_read(tmp_path):
    """The script itself, with stand-ins for wget and nslookup: what it prints is what `answers`
    parses, for each outcome."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("wget", "nslookup"):
        (bin_dir / tool).write_text(f'#!/bin/sh\nexit "${{{tool.upper()}_STATUS}}"\n')
        (bin_dir / tool).chmod(0o755)
    for wget, nslookup, expected in [(1, 0, {"http": "unreachable", "dns": "reachable"}), (0, 0, {"http": "reachable", "dns": "reachable"}), (4, 1, {"http": "unreachable", "dns": "unreachable"})]:
        env = {"PATH": str(bin_dir), "WGET_STATUS": str(wget), "NSLOOKUP_STATUS": str(nslookup)}
        printed = subprocess.run(["/bin/sh", "-c", metadata.SCRIPT], env=env, capture_output=True, text=True, check=True).stdout
        assert metadata.answers(printed) == expected


def test_a_concealed_node_passes():
    found = metadata.findings(load("kubectl/metadata-probe-pods-succeeded.json"), _logs("metadata-probe-from-pod-concealed.log"))
    assert [(f.check, f.ok) for f in found] == [
        ("an ordinary pod cannot reach the metadata server", True),
        ("a hostNetwork pod reaches the metadata server", True),
    ]
    assert metadata.done(load("kubectl/metadata-probe-pods-succeeded.json")).ok


@pytest.mark.parametrize(
    "from_pod, from_host, failed, detail",
    [
        ("metadata-probe-from-pod-exposed.log", "metadata-probe-from-host.log", "an ordinary pod cannot reach the metadata server", "take the node identity's token"),
        ("metadata-probe-from-pod-no-network.log", "metadata-probe-from-host.log", "an ordinary pod cannot reach the metadata server", "no working network"),
        ("metadata-probe-from-pod-concealed.log", "metadata-probe-from-host-blocked.log", "a hostNetwork pod reaches the metadata server", "would lose their credentials"),
    ],
)
def test_what_fails_and_why(from_pod, from_host, failed, detail):
    found = {f.check: f for f in metadata.findings(load("kubectl/metadata-probe-pods-succeeded.json"), _logs(from_pod, from_host))}
    assert [c for c, f in found.items() if not f.ok] == [failed]
    assert detail in found[failed].detail


def test_a_probe_that_never_ran_proves_nothing():
    pods = load("kubectl/metadata-probe-pods-image-pull.json")
    waiting = metadata.done(pods)
    assert not waiting.ok and "metadata-from-pod Pending ErrImagePull" in waiting.detail
    found = {f.check: f for f in metadata.findings(pods, {metadata.FROM_POD: "", metadata.FROM_HOST: load("kubectl/metadata-probe-from-host.log")})}
    pod_check = found["an ordinary pod cannot reach the metadata server"]
    assert not pod_check.ok and "no answer from the probe: pod Pending ErrImagePull" in pod_check.detail
    assert found["a hostNetwork pod reaches the metadata server"].ok
