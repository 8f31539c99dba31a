"""Time-to-GPU as a table and as JSON, and the report around it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.acceptance import kube, timings
from tests.acceptance.kube import Finding
from tests.acceptance.leftovers import Leftover
from tests.acceptance.recorded import load
from tests.acceptance.report import Report

T0 = datetime.fromisoformat("2026-11-30T13:12:20+00:00")


def recorded_milestones() -> dict[str, datetime | None]:
    """The milestones a run reads from the recorded outputs, plus the polled ones."""
    (pod,) = load("kubectl/smoke-pods-succeeded.json")["items"]
    node = next(n for n in load("kubectl/tenant-nodes-gpu-ready.json")["items"] if "gpu" in n["metadata"]["name"])
    vm = next(v for v in load("gcloud/instances-list-tenant.json") if "gpu" in v["name"])
    pod_times, node_times = kube.pod_times(pod), kube.node_times(node)
    return {
        "pod_created": pod_times["pod_created"],
        "vm_created": kube.parse_time(vm["creationTimestamp"]),  # Compute Engine writes local offsets
        "node_registered": node_times["node_registered"],
        "node_ready": node_times["node_ready"],
        "node_initialized": T0 + timedelta(seconds=280),
        "gpu_allocatable": T0 + timedelta(seconds=500),
        "pod_started": pod_times["pod_started"],
        "job_done": kube.parse_time(load("kubectl/job-complete.json")["status"]["completionTime"]),
        "last_pod_gone": pod_times["pod_finished"],
        "node_removed": pod_times["pod_finished"] + timedelta(seconds=95),
        "vm_deleted": pod_times["pod_finished"] + timedelta(seconds=170),
    }


def test_spans_of_a_recorded_run():
    seconds = {s.name: s.seconds for s in timings.spans(recorded_milestones())}
    assert seconds == {
        "pod pending → node Ready": 258.0,  # 13:12:20 → 13:16:38
        "node Ready → GPU allocatable": 242.0,
        "GPU allocatable → Job done": 80.0,
        "last pod gone → VM deleted": 170.0,
        "time to GPU: pod pending → GPU allocatable": 500.0,
        "pod pending → VM created": 191.204,  # 05:15:31.204-08:00 is 13:15:31.204Z
        "VM created → node registered": 33.796,
        "node registered → node Ready": 33.0,
        "node registered → node initialized": 55.0,  # 13:16:05 → 13:17:00
        "last pod gone → node removed": 95.0,
        "GPU VM lifetime: VM created → VM deleted": 554.796,  # 13:15:31.204 → 13:24:46
    }


def test_the_table_says_who_recorded_each_end_and_what_was_not_reached():
    milestones = recorded_milestones()
    milestones["vm_deleted"] = None
    table = timings.render_table(milestones, poll_seconds=15)
    assert table[:2] == ["| span | seconds | end time recorded by |", "|---|---:|---|"]
    assert "| pod pending → node Ready | 258 | tenant API server |" in table
    assert "| node Ready → GPU allocatable | 242 | polled (±15 s) |" in table
    assert "| pod pending → VM created | 191 | Compute Engine |" in table
    assert "| last pod gone → VM deleted | not reached | polled (±15 s) |" in table


def test_timings_as_json():
    data = timings.to_json(recorded_milestones(), poll_seconds=10)
    assert data["milestones"]["pod_created"] == {"what": "GPU pod created (pending)", "recordedBy": "tenant API server", "at": "2026-11-30T13:12:20+00:00"}
    assert data["spans"][0] == {"span": "pod pending → node Ready", "from": "pod_created", "to": "node_ready", "seconds": 258.0}
    assert len(data["spans"]) == len(timings.SPANS)


def test_unknown_milestones_are_refused():
    with pytest.raises(ValueError):
        timings.spans({"gpu_ready": T0})
    with pytest.raises(ValueError):
        Report("k3x9q2", 10).mark("gpu_ready", T0)


def test_a_milestone_keeps_its_first_time():
    report = Report("k3x9q2", 10)
    report.mark("pod_created", None)
    report.mark("pod_created", T0)
    report.mark("pod_created", T0 + timedelta(seconds=5))
    assert report.milestones == {"pod_created": T0}


def test_report_verdicts_and_rendering():
    report = Report("k3x9q2", 10)
    assert report.verdict == "FAILED"  # nothing checked is not a pass
    report.add(Finding("platform API Available", True, "Available"))
    assert report.verdict == "PASSED"
    report.add(Finding("providerID set", False, "empty | none"))
    report.leftovers = [Leftover("network", "dev-acc-k3x9q2-nodes", "", "gcloud compute networks delete dev-acc-k3x9q2-nodes --project p --quiet")]
    report.cleanup = "destroyed, stack removed"
    lines = report.render()
    assert lines[0] == "## Acceptance run k3x9q2: FAILED"
    assert "| providerID set | FAIL | empty \\| none |" in lines
    assert "    gcloud compute networks delete dev-acc-k3x9q2-nodes --project p --quiet" in lines
    report.interrupted = "SIGINT"
    assert report.verdict == "INTERRUPTED (SIGINT)"
    data = report.to_json()
    assert data["checks"][1] == {"check": "providerID set", "ok": False, "seen": "empty | none"}
    assert data["cleanup"]["leftovers"][0]["kind"] == "network"


def test_a_report_without_a_scan_says_so():
    report = Report("k3x9q2", 10)
    assert report.to_json()["cleanup"]["leftovers"] is None
    report.leftovers = []
    assert "Nothing of the run is left in the project." in report.render()
