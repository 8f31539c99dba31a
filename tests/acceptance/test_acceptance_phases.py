"""The GPU node's phases from fixture events and objects (pure parsing), the report's JSON schema
checked on the fixture reports and on what the report code writes, and two runs side by side
(COMPARE). Every fixture is hand-written (data/README.md), named `fixture-…`."""

from __future__ import annotations

import copy
import re
import json
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from tests.acceptance import compare, gce, phases, run, timings
from tests.acceptance.assumptions import ASSUMPTIONS
from tests.acceptance.kube import parse_time
from tests.acceptance.recorded import DATA, load
from tests.acceptance.report import Report

GPU_NODE = "acc-k3x9q2-gpu-8w2mf-3f9a1c"
SCHEMA = json.loads((Path(compare.__file__).with_name("report.schema.json")).read_text())
REPORTS = sorted((DATA / "reports").glob("*.json"))
V2_REPORTS = [p for p in REPORTS if "v1" not in p.name]
VALIDATOR = "nvcr.io/nvidia/gpu-operator:v25.10.1"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(
    "text, seconds",
    [("18.4s", 18.4), ("850ms", 0.85), ("1m2.5s", 62.5), ("1h0m0s", 3600.0), ("0s", 0.0), ("12µs", 12e-6), ("soon", None), ("1.5", None), ("1m2.5sx", None)],
)
def test_go_durations(text, seconds):
    assert phases.go_duration_seconds(text) == (None if seconds is None else pytest.approx(seconds))


def test_the_operators_pods_on_the_gpu_node():
    pods = load("kubectl/fixture-gpu-operator-pods.json")
    assert len(phases.pods_on(pods, GPU_NODE)) == 6  # not the operator's own pod on the CPU node
    # The first operand scheduled, NFD's worker (on every node) left out.
    assert phases.operands_scheduled(pods, GPU_NODE) == at("2026-11-30T13:17:01+00:00")
    assert phases.device_plugin_started(pods, GPU_NODE) == at("2026-11-30T13:20:31+00:00")
    assert phases.operands_scheduled(pods, "no-such-node") is None and phases.device_plugin_started(pods, "no-such-node") is None


def test_each_image_once_when_it_was_first_on_the_node():
    pods = load("kubectl/fixture-gpu-operator-pods.json")
    on_node = {p["metadata"]["name"] for p in phases.pods_on(pods, GPU_NODE)}
    pulls = phases.image_pulls(load("kubectl/fixture-gpu-operator-events.json"), on_node)
    assert [(p.image, p.pod, p.seconds, p.already_present) for p in pulls] == [
        ("registry.k8s.io/nfd/node-feature-discovery:v0.18.2", "gpu-operator-node-feature-discovery-worker-5jz8k", 17.2, False),
        # The toolkit's pod pulled the validator; the others found it present and do not count again.
        (VALIDATOR, "nvidia-container-toolkit-daemonset-x7k2p", 18.4, False),
        ("nvcr.io/nvidia/k8s/container-toolkit:v1.18.1", "nvidia-container-toolkit-daemonset-x7k2p", 11.9, False),
        ("nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "nvidia-device-plugin-daemonset-m4q8z", 24.6, False),
        ("nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless", "nvidia-dcgm-exporter-2hd9c", 58.7, False),
    ]
    validator = next(p for p in pulls if p.image == VALIDATOR)
    assert (validator.pulling_at, validator.ready_at) == (at("2026-11-30T13:17:02+00:00"), at("2026-11-30T13:17:21+00:00"))
    assert phases.images_ready(pulls) == at("2026-11-30T13:19:40+00:00")
    # The operator's pod on the CPU node pulled the same image: not the GPU node's.
    assert all(p.pod != "gpu-operator-7c9d8b6f5-xm2kq" for p in pulls)


def test_a_prefetched_image_is_one_the_kubelet_found_present():
    events = copy.deepcopy(load("kubectl/fixture-gpu-operator-events.json"))
    for event in events["items"]:
        if event["involvedObject"]["name"] == "nvidia-dcgm-exporter-2hd9c" and event["reason"] in ("Pulling", "Pulled"):
            event["reason"], event["message"] = "Pulled", 'Container image "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless" already present on machine'
    [dcgm] = [p for p in phases.image_pulls(events, {"nvidia-dcgm-exporter-2hd9c"}) if "dcgm" in p.image]
    assert dcgm.already_present and dcgm.pulling_at is None and dcgm.seconds is None


def test_the_vms_insert_and_start_from_compute_engine():
    operations = load("gcloud/fixture-operations-list-insert.json")
    assert gce.insert_operation_filter(GPU_NODE) == f"operationType=insert AND targetLink~/instances/{GPU_NODE}$"
    assert parse_time(gce.vm_insert_time(operations, GPU_NODE)) == at("2026-11-30T13:15:29.655+00:00")
    assert gce.vm_insert_time(operations, "another-vm") is None
    vm = next(v for v in load("gcloud/instances-list-tenant.json") if v["name"] == GPU_NODE)
    assert parse_time(gce.vm_running_time(vm)) == at("2026-11-30T13:15:44.318+00:00")


def fixture_milestones() -> dict[str, datetime | None]:
    """The GPU node's milestones read from the fixtures, as a run reads them."""
    pods = load("kubectl/fixture-gpu-operator-pods.json")
    node = next(n for n in load("kubectl/tenant-nodes-gpu-ready.json")["items"] if n["metadata"]["name"] == GPU_NODE)
    (smoke,) = load("kubectl/smoke-pods-succeeded.json")["items"]
    pulls = phases.image_pulls(load("kubectl/fixture-gpu-operator-events.json"), {p["metadata"]["name"] for p in phases.pods_on(pods, GPU_NODE)})
    vm = next(v for v in load("gcloud/instances-list-tenant.json") if v["name"] == GPU_NODE)
    return {
        "pod_created": parse_time(smoke["metadata"]["creationTimestamp"]),
        "vm_insert": parse_time(gce.vm_insert_time(load("gcloud/fixture-operations-list-insert.json"), GPU_NODE)),
        "vm_running": parse_time(gce.vm_running_time(vm)),
        "node_registered": parse_time(node["metadata"]["creationTimestamp"]),
        "node_ready": parse_time(next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"]),
        "operands_scheduled": phases.operands_scheduled(pods, GPU_NODE),
        "images_ready": phases.images_ready(pulls),
        "device_plugin_started": phases.device_plugin_started(pods, GPU_NODE),
        "gpu_allocatable": at("2026-11-30T13:20:40+00:00"),  # polled
        "pod_started": parse_time(smoke["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]),
    }


def test_the_phase_table_of_fixture_events():
    table = timings.render_phases(fixture_milestones(), poll_seconds=10)
    assert table == [
        "| phase | seconds | end time recorded by |",
        "|---|---:|---|",
        "| pod pending → VM insert | 190 | Compute Engine |",
        "| VM insert → VM running | 15 | Compute Engine |",
        "| VM running → node registered | 21 | tenant API server |",
        "| node registered → node Ready | 33 | tenant API server |",
        "| node Ready → operands scheduled | 23 | tenant API server |",
        "| operands scheduled → images pulled | 159 | tenant API server |",
        "| images pulled → device plugin started | 51 | tenant API server |",
        "| device plugin started → GPU allocatable | 9 | polled (±10 s) |",
        "| GPU allocatable → pod running | 75 | tenant API server |",
        "| pod pending → pod running | 575 | tenant API server |",
    ]


def test_a_warm_nodes_chain_is_its_boot_and_the_pods_wait():
    milestones = {**fixture_milestones(), "pod_created": at("2026-11-30T13:25:00+00:00"), "pod_started": at("2026-11-30T13:25:07+00:00")}
    names = [s.name for s in timings.phases(milestones, warm=True)]
    assert names[0] == "VM insert → VM running" and names[-1] == "pod pending → running on a warm node"
    assert "pod pending → VM insert" not in names and "device plugin started → GPU allocatable" not in names
    assert timings.phases(milestones, warm=True)[-1].seconds == 7


def test_an_unreached_phase_says_so():
    milestones = {**fixture_milestones(), "device_plugin_started": None}
    rows = {s.name: s.seconds for s in timings.phases(milestones)}
    assert rows["images pulled → device plugin started"] is None and rows["device plugin started → GPU allocatable"] is None
    assert "| images pulled → device plugin started | not reached | tenant API server |" in timings.render_phases(milestones, 10)


# --- the report's JSON schema ------------------------------------------------------------------


@pytest.mark.parametrize("path", V2_REPORTS, ids=lambda p: p.name)
def test_fixture_reports_follow_the_schema(path):
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)
    assert path.name.startswith("fixture-")


def test_what_the_report_writes_follows_the_schema():
    report = Report("k3x9q2", 10)
    for key, value in fixture_milestones().items():
        report.mark(key, value)
    pods = load("kubectl/fixture-gpu-operator-pods.json")
    report.images = phases.image_pulls(load("kubectl/fixture-gpu-operator-events.json"), {p["metadata"]["name"] for p in phases.pods_on(pods, GPU_NODE)})
    report.warm_node = False
    document = report.to_json()
    jsonschema.validate(document, SCHEMA)
    assert document["reportVersion"] == 4 and document["stockoutDrill"] is None
    assert [a["assumption"] for a in document["assumptions"]] == [a.key for a in ASSUMPTIONS]
    assert [p["phase"] for p in document["gpuNode"]["phases"]] == [name for name, _, _ in timings.PHASES]
    assert document["gpuNode"]["images"][1] == {
        "image": VALIDATOR,
        "pod": "gpu-operator/nvidia-container-toolkit-daemonset-x7k2p",
        "pullingAt": "2026-11-30T13:17:02+00:00",
        "readyAt": "2026-11-30T13:17:21+00:00",
        "pullSeconds": 18.4,
        "alreadyPresent": False,
    }
    # Before any GPU node: empty, and still valid.
    jsonschema.validate(Report("k3x9q2", 10).to_json(), SCHEMA)


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda d: d.pop("gpuNode"), "(top)"),
        (lambda d: d["gpuNode"]["images"][0].update(alreadyPresent="yes"), "gpuNode/images/0/alreadyPresent"),
        (lambda d: d["timings"]["milestones"]["vm_insert"].update(recordedBy="a stopwatch"), "timings/milestones/vm_insert/recordedBy"),
    ],
    ids=["no gpuNode", "alreadyPresent not a boolean", "an unknown recorder"],
)
def test_the_schema_refuses_what_is_not_a_report(tmp_path, edit, where):
    document = json.loads((DATA / "reports" / "fixture-report-t4-on-demand.json").read_text())
    edit(document)
    refused(tmp_path, document, where)


def refused(tmp_path, document, where):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document))
    with pytest.raises(compare.ReportError, match=re.escape(f"not an acceptance report: {where}: ")):
        compare.load_report(path)


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda d: d.pop("monitoring"), "(top)"),
        (lambda d: d["monitoring"][0].update(recordedBy="a stopwatch"), "monitoring/0/recordedBy"),
        (lambda d: d["watchdogDrill"][2].pop("at"), "watchdogDrill/2"),
    ],
    ids=["version 3 without its monitoring steps", "an unknown recorder", "a step without its time"],
)
def test_the_schema_refuses_a_version_3_report_without_its_steps(tmp_path, edit, where):
    document = json.loads((DATA / "reports" / "fixture-report-t4-watchdog-drill.json").read_text())
    assert document["reportVersion"] == 3 and document["watchdogDrill"] and document["monitoring"]
    edit(document)
    refused(tmp_path, document, where)


# --- two runs side by side (COMPARE) -------------------------------------------------------------


def test_two_runs_side_by_side():
    earlier = compare.load_report(DATA / "reports" / "fixture-report-t4-on-demand.json")
    later = compare.load_report(DATA / "reports" / "fixture-report-t4-warm.json")
    lines = compare.side_by_side(earlier, later)
    assert lines[0] == "## Run k3x9q2 next to run k3x9q2"
    assert lines[2] == "GPU node: node created for it (earlier), warm node (this run)"
    assert "| pod pending → running on a warm node | — | 6 |  |" in lines
    assert "| pod pending → pod running | 575 | — |  |" in lines
    assert "| node Ready → operands scheduled | 23 | 23 | +0 |" in lines
    assert f"| {VALIDATOR} | pulled in 18 s | pulled in 18 s |" in lines


def test_a_version_2_report_beside_a_version_3_one():
    earlier = compare.load_report(DATA / "reports" / "fixture-report-t4-on-demand.json")
    later = compare.load_report(DATA / "reports" / "fixture-report-t4-watchdog-drill.json")
    assert "monitoring" not in earlier and later["reportVersion"] == 3
    lines = compare.side_by_side(earlier, later)
    assert "| pod pending → pod running | 575 | 575 | +0 |" in lines


def test_an_earlier_version_1_report_has_timings_only():
    earlier = compare.load_report(DATA / "reports" / "fixture-report-v1-t4.json")
    assert "gpuNode" not in earlier and "reportVersion" not in earlier
    later = compare.load_report(DATA / "reports" / "fixture-report-t4-on-demand.json")
    lines = compare.side_by_side(earlier, later)
    assert lines[2] == "GPU node: not measured (earlier), node created for it (this run)"
    assert "| VM insert → VM running | not measured | 15 |  |" in lines
    assert "| pod pending → node Ready | 258 | 258 | +0 |" in lines


def test_the_command_line(capsys):
    first, second = (str(DATA / "reports" / name) for name in ("fixture-report-v1-t4.json", "fixture-report-t4-warm.json"))
    assert compare.main([first, second]) == 0
    assert "### Phases of the GPU node" in capsys.readouterr().out
    assert compare.main([second, first]) == 2
    assert "version-1 report" in capsys.readouterr().err


def test_a_bad_compare_file_stops_the_run_before_anything(tmp_path, capsys):
    path = tmp_path / "report.json"
    path.write_text("{not json")
    code = run.main(["--project", "acme-acceptance", "--compare", str(path)])
    assert code == run.BAD_SETTINGS
    assert f"COMPARE={path}: {path}: cannot be read as JSON" in capsys.readouterr().out


def test_the_run_prints_the_comparison_after_its_report(tmp_path, capsys):
    """What `make acceptance COMPARE=…` ends with: this run's report, then both runs side by side
    (AcceptanceRun.finish, offline: nothing is deployed to write a report)."""
    settings = run.Settings(project="acme-acceptance")
    earlier = compare.load_report(DATA / "reports" / "fixture-report-t4-on-demand.json")
    acceptance = run.AcceptanceRun(settings, run.load_run_stack(settings, "k3x9q2"), "k3x9q2", tmp_path / "out", temp_root=tmp_path, earlier=earlier)
    acceptance.out_dir.mkdir(parents=True)
    acceptance.finish()
    written = (acceptance.out_dir / "report.md").read_text()
    assert "### Phases of the GPU node (no GPU node)" in written
    assert "## Run k3x9q2 next to run k3x9q2" in written
    assert "| pod pending → pod running | 575 | not reached |  |" in written
    jsonschema.validate(json.loads((acceptance.out_dir / "report.json").read_text()), SCHEMA)


def test_the_acceptance_page_lists_the_phases_the_report_has():
    """docs/acceptance.md "The GPU node's phases": one row per phase of the report, in its order,
    and who records each end as the report says."""
    from docs_support import section

    rows = re.findall(r"^\| ([^|]+?) \| [^|]+ \| ([^|]+?) \|$", section("The GPU node's phases"), flags=re.M)
    documented = [(name, by) for name, by in rows if "→" in name]
    assert documented == [(name, timings.MILESTONES[end][1]) for name, _, end in timings.PHASES]
