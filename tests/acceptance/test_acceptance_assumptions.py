"""docs/acceptance.md "What only a real project can settle" and the report's lines are one list
(tests/acceptance/assumptions.py): each assumption a line of every report, settled by the run's own
checks, steps and images, or said not to be, with what would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from config.stack_files import PROJECT_DIR
from tests.acceptance.assumptions import ASSUMPTIONS, FAILS, HOLDS, UNSETTLED, results
from tests.acceptance.kube import Finding
from tests.acceptance.phases import ImagePull
from tests.acceptance.report import Report, Step

SCHEMA = json.loads((Path(__file__).with_name("report.schema.json")).read_text())


def docs_list() -> list[tuple[str, str]]:
    text = (PROJECT_DIR / "docs" / "acceptance.md").read_text()
    section = text.split("## What only a real project can settle", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- \*\*([a-z0-9-]+)\*\*: (.*?)(?=^- \*\*|\Z)", section, flags=re.MULTILINE | re.DOTALL)
    return [(key, " ".join(statement.split())) for key, statement in items]


def test_the_docs_list_every_assumption_of_the_report_in_its_order():
    assert docs_list() == [(a.key, a.statement) for a in ASSUMPTIONS]
    assert len({a.key for a in ASSUMPTIONS}) == len(ASSUMPTIONS)


def test_every_report_has_one_line_per_assumption_settled_or_not():
    """Before anything ran: every assumption a line, none settled, each saying what would settle it."""
    report = Report("k3x9q2", 10)
    document = report.to_json()
    jsonschema.validate(document, SCHEMA)
    assert [line["assumption"] for line in document["assumptions"]] == [a.key for a in ASSUMPTIONS]
    assert {line["result"] for line in document["assumptions"]} == {UNSETTLED} and all(line["evidence"] for line in document["assumptions"])
    rendered = report.render()
    table = rendered[rendered.index("### What only a real project can settle") + 2 :]
    assert table[0] == "| assumption | result | evidence |"
    assert [row.split(":", 1)[0].removeprefix("| ") for row in table[2 : 2 + len(ASSUMPTIONS)]] == [a.key for a in ASSUMPTIONS]


def a_run() -> Report:
    """A run whose GPU node joined and initialized, one zone label wrong, the Job done on a T4, the
    images of the GPU Operator found present, the monitoring checks passed, no drill."""
    report = Report("k3x9q2", 10)
    for check, ok, seen in [
        ("GPU node initialized by the cloud controller manager", True, "providerID gce://p/us-central1-b/vm, taints []"),
        ("providerID set", True, "gce://p/us-central1-b/vm"),
        ("uninitialized taint gone", True, "taints: []"),
        ("topology.kubernetes.io/zone is a real zone", True, "'us-central1-b'"),
        ("topology.gke.io/zone is a real zone", False, "None; configured zones ['us-central1-a', 'us-central1-b'], VM in us-central1-b"),
        ("node zone label = VM zone", True, "label 'us-central1-b', VM in us-central1-b"),
        ("GPU offered to pods", True, "allocatable nvidia.com/gpu 1"),
        ("Job logs show nvidia-smi", True, "nvidia-smi output naming the Tesla T4"),
        ("GPU VM deleted within idleAfter 60s + 600 s", True, "VM gpu-x deleted"),
    ]:
        report.add(Finding(check, ok, seen))
    report.images = [ImagePull("nvcr.io/nvidia/k8s-device-plugin:v0.17", "nvidia-device-plugin-x", "gpu-operator", None, None, None, True)]
    report.warm_node = False
    report.gpu_machine_type, report.gpu_machine_nvswitch = "n1-standard-4", False
    report.monitoring = [Step("DCGM exporter Ready", True, "Ready", None, "tenant API server")]
    return report


def test_each_assumption_is_settled_by_the_run_s_own_checks():
    found = {a.key: v for a, v in results(a_run())}
    assert found["provider-id"].result == HOLDS and "gce://p/us-central1-b/vm" in found["provider-id"].evidence
    assert found["zone-labels"].result == FAILS and found["zone-labels"].evidence.startswith("topology.gke.io/zone is a real zone: None")
    assert found["images-before-join"].result == HOLDS
    assert found["gpu-offered"].result == HOLDS and found["idle-deletion"].result == HOLDS and found["metrics-in-monitoring"].result == HOLDS
    # A T4's machine has no NVSwitch: Fabric Manager is not what this run shows, and it says how to.
    assert found["fabric-manager"].result == UNSETTLED and "GPUS_PER_NODE=8" in found["fabric-manager"].evidence
    assert found["watchdog-removes-lost-gpu"].result == UNSETTLED and found["watchdog-removes-lost-gpu"].evidence == "run with WATCHDOG_DRILL=1"
    assert found["metadata-concealment"].result == UNSETTLED  # no probe ran
    assert found["labels-in-billing-export"].result == UNSETTLED and "billing export" in found["labels-in-billing-export"].evidence


# What the smoke Job's probe prints on an 8-GPU machine (config/fabric_manager.py PROBE), as nvidia-smi -q words the
# "Fabric" section: a guest that sees no switch (the host manages the fabric), one that sees them with the fabric
# set up, and one whose fabric is not.
HOST_MANAGED = "nvswitch-devices=0\nnvlink5-switch-ports=0\n" + "fabric: State : N/A\nfabric: Status : N/A\n" * 8
GUEST_READY = "nvswitch-devices=6\nnvlink5-switch-ports=0\n" + "fabric: State : Completed\nfabric: Status : Success\n" * 8
GUEST_NOT_READY = "nvswitch-devices=6\nnvlink5-switch-ports=0\n" + "fabric: State : In Progress\nfabric: Status : N/A\n" * 8


def test_fabric_manager_is_settled_by_the_job_and_its_probe_on_an_nvswitch_machine():
    from tests.acceptance.kube import fabric_manager_findings

    for logs, expected in ((HOST_MANAGED, HOLDS), (GUEST_READY, HOLDS), (GUEST_NOT_READY, FAILS)):
        report = a_run()
        report.gpu_machine_type, report.gpu_machine_nvswitch = "a3-highgpu-8g", True
        # Without the probe's lines (an older Job), what the guest saw is not settled.
        assert dict((a.key, v.result) for a, v in results(report))["fabric-manager"] == UNSETTLED
        for finding in fabric_manager_findings(logs):
            report.add(finding)
        verdict = dict((a.key, v) for a, v in results(report))["fabric-manager"]
        assert verdict.result == expected, logs
    assert "no switch visible: the host manages the fabric" in dict((a.key, v) for a, v in results(a_run_with(HOST_MANAGED)))["fabric-manager"].evidence
    report = a_run_with(GUEST_READY)
    report.findings = [f for f in report.findings if f.check != "Job logs show nvidia-smi"] + [Finding("Job logs show nvidia-smi", False, "no H100 in the logs")]
    assert dict((a.key, v.result) for a, v in results(report))["fabric-manager"] == FAILS


def a_run_with(logs: str) -> Report:
    from tests.acceptance.kube import fabric_manager_findings

    report = a_run()
    report.gpu_machine_type, report.gpu_machine_nvswitch = "a3-highgpu-8g", True
    for finding in fabric_manager_findings(logs):
        report.add(finding)
    return report


def test_an_image_pulled_after_the_join_refutes_the_prefetch_and_a_warm_node_settles_nothing():
    report = a_run()
    report.images.append(ImagePull("nvcr.io/nvidia/cloud-native/dcgm:4.4", "nvidia-dcgm-exporter-y", "gpu-operator", None, None, 12.0, False))
    verdict = dict((a.key, v) for a, v in results(report))["images-before-join"]
    assert verdict.result == FAILS and verdict.evidence == "pulled after the join, not found present: nvcr.io/nvidia/cloud-native/dcgm:4.4"
    report.warm_node = True
    assert dict((a.key, v.result) for a, v in results(report))["images-before-join"] == UNSETTLED


def test_on_an_a100_board_the_gates_serial_line_settles_the_fabric():
    """A100s report no fabric state (N/A); the node gate's serial-console line says what it saw as
    root and that Fabric Manager is active. Without that line nothing says the fabric is set up."""
    from tests.acceptance.kube import fabric_manager_findings

    logs = "nvswitch-devices=6\nnvlink5-switch-ports=unreadable\n" + "fabric: State : N/A\nfabric: Status : N/A\n" * 8
    serial = "gpu-platform fabric-manager: seen nvswitch-devices=6 nvlink5-switch-ports=0\ngpu-platform fabric-manager: active\n"
    saw, ready = fabric_manager_findings(logs, serial)
    assert saw.ok and ready.ok and saw.detail.startswith("6 NVSwitch device(s), 0 NVLink5 switch port(s)")
    saw, ready = fabric_manager_findings(logs)
    assert saw.ok and not ready.ok and "unknown NVLink5 switch port(s)" in saw.detail
