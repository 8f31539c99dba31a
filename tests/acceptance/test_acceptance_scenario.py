"""The live checks replayed against a stand-in world that answers kubectl and gcloud with the
recorded outputs as (fake) time passes: a GPU node appears, is initialized, offers its GPU, runs
the Job and goes idle; or, in the broken world of issue 12 point 1, is never initialized."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance import monitoring, timings
from tests.acceptance.recorded import load
from tests.acceptance.report import Report
from tests.acceptance.scenario import Live, run_checks
from tests.acceptance.settings import Settings, load_run_stack, run_names
from tests.acceptance.waiting import CheckFailed, Clock

# t = 0 is when the run applies the Job: the recorded pod was created then.
APPLIED_AT = datetime.fromisoformat("2026-11-30T13:12:20+00:00")
GPU_NODE = "acc-k3x9q2-gpu-8w2mf-3f9a1c"


class FakeClock(Clock):
    def __init__(self):
        self.t = -120.0  # the checks before the Job take a while too
        super().__init__(monotonic=lambda: self.t, sleep=self.advance, now=lambda: APPLIED_AT + timedelta(seconds=self.t))

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class World:
    """What kubectl and gcloud would answer at each moment after the Job is applied."""

    clock: FakeClock
    initializes: bool = True  # False: the CCM never initializes the GPU node (wrong zone)
    vm_deleted_after: float = 760
    job_fails: bool = False  # the container cannot reach the GPU
    metadata_exposed: bool = False  # the node's concealment does not hold
    warm: bool = False  # the GPU node is a warm one: Ready with its GPU before the Job exists
    metrics_after: float = 600  # Cloud Monitoring answers with the GPU node's series from then on
    metrics_refused: bool = False  # the run's identity may not read the tenant's project
    applied: list[dict[str, Any]] | None = None
    probes: list[dict[str, Any]] | None = None  # the metadata probe's documents
    hold: list[dict[str, Any]] | None = None  # the monitoring checks' hold on the GPU node
    held_at: float | None = None
    released_at: float | None = None
    deleted: list[str] | None = None
    queries: list[str] | None = None

    @property
    def since(self) -> float | None:
        return None if self.applied is None else self.clock.t

    def nodes(self) -> dict[str, Any]:
        since = self.since
        if self.warm:
            ready = load("kubectl/tenant-nodes-gpu-ready.json")
            next(n for n in ready["items"] if n["metadata"]["name"] == GPU_NODE)["metadata"]["labels"]["gpu-platform/warm"] = "true"
            return ready
        if since is None or since < 200 or (since >= 700 and self.initializes):
            return load("kubectl/tenant-nodes-cpu-only.json")
        if since < 260 or not self.initializes:
            return load("kubectl/tenant-nodes-gpu-uninitialized.json")
        ready = load("kubectl/tenant-nodes-gpu-ready.json")
        if since < 500:  # the device plugin has not registered the GPU yet
            gpu = next(n for n in ready["items"] if n["metadata"]["name"] == GPU_NODE)
            del gpu["status"]["allocatable"]["nvidia.com/gpu"]
        return ready

    def host(self, *args: str) -> dict[str, Any]:
        return {
            "apiservice": lambda: load("kubectl/apiservice-available.json"),
            "nodeproviders.management.loft.sh": lambda: load("kubectl/nodeprovider-available.json"),
            "virtualclusterinstances.management.loft.sh": lambda: load("kubectl/virtualclusterinstances.json"),
        }[args[1]]()

    def tenant(self, *args: str) -> dict[str, Any]:
        since = self.since or 0
        running = self.initializes and since < (10 if self.warm else 580)
        if args == ("get", "nodes"):
            return self.nodes()
        if args == ("get", "pods", "--all-namespaces"):
            return load("kubectl/tenant-pods-all.json")
        if args == ("get", "pods", "-n", "gpu-platform-acceptance"):
            assert self.probes is not None, "probe pods listed before they were applied"
            return load("kubectl/metadata-probe-pods-succeeded.json")
        if args == ("get", "pods", "-n", "gpu-smoke-test"):
            done = "kubectl/fixture-smoke-pods-succeeded-warm.json" if self.warm else "kubectl/smoke-pods-succeeded.json"
            return load("kubectl/smoke-pods-pending.json" if running else done)
        if args == ("get", "node", GPU_NODE):
            return copy.deepcopy(next(n for n in self.nodes()["items"] if n["metadata"]["name"] == GPU_NODE))
        if args == ("get", "pods", "-n", "gpu-operator"):
            return load("kubectl/fixture-gpu-operator-pods.json")
        if args == ("get", "pods", "-n", "gpu-platform-monitoring"):
            return load("kubectl/fixture-monitoring-pods.json")
        if args == ("get", "pod", "gpu-node-hold", "-n", "gpu-platform-acceptance-hold"):
            assert self.released_at is not None, "the hold read before it was deleted"
            # Terminating: the API server's deletionTimestamp, the delete's time plus one second's grace.
            deleted = APPLIED_AT + timedelta(seconds=self.released_at + 1)
            return {"kind": "Pod", "metadata": {"name": "gpu-node-hold", "deletionTimestamp": deleted.isoformat().replace("+00:00", "Z")}}
        if args == ("get", "events", "-n", "gpu-operator"):
            return load("kubectl/fixture-gpu-operator-events.json")
        if args == ("get", "nodeclaims.karpenter.sh"):
            return load("kubectl/fixture-nodeclaims-job.json")
        if args == ("get", "job", "-n", "gpu-smoke-test", "nvidia-smi"):
            return load("kubectl/job-running.json" if running else "kubectl/job-failed.json" if self.job_fails else "kubectl/job-complete.json")
        raise AssertionError(f"unexpected kubectl {args}")

    def google(self, url: str) -> tuple[int, dict[str, Any]]:
        """Cloud Monitoring's query API."""
        self.queries = [*(self.queries or []), url]
        if self.metrics_refused:
            return 403, load("monitoring/fixture-query-403-permission-denied.json")
        arrived = self.since is not None and self.since >= self.metrics_after
        return 200, load("monitoring/fixture-query-gpu-util.json" if arrived else "monitoring/fixture-query-empty.json")

    def gcloud(self, *args: str) -> Any:
        if args[:3] == ("compute", "operations", "list"):
            assert args == ("compute", "operations", "list", f"--filter=operationType=insert AND targetLink~/instances/{GPU_NODE}$"), args
            return load("gcloud/fixture-operations-list-insert.json")
        assert args == ("compute", "instances", "list", "--filter=labels.vcluster=acc-k3x9q2"), args
        gone = self.initializes and self.since is not None and self.since >= self.vm_deleted_after
        return load("gcloud/instances-list-tenant-after-idle.json" if gone else "gcloud/instances-list-tenant.json")


class Fake:
    def __init__(self, answer):
        self.json = answer


class FakeTenant(Fake):
    def __init__(self, world: World):
        super().__init__(world.tenant)
        self.world = world

    def text(self, *args: str) -> str:
        if args[:1] == ("delete",):
            self.world.deleted = [*(self.world.deleted or []), " ".join(args)]
            if args[:3] == ("delete", "pod", "gpu-node-hold"):
                self.world.released_at = self.world.clock.t
            return ""
        if args in (("logs", "metadata-from-pod", "-n", "gpu-platform-acceptance"), ("logs", "metadata-from-host", "-n", "gpu-platform-acceptance")):
            pod_log = "exposed" if self.world.metadata_exposed else "concealed"
            return load(f"kubectl/metadata-probe-from-pod-{pod_log}.log" if args[1] == "metadata-from-pod" else "kubectl/metadata-probe-from-host.log")
        if args[:2] == ("auth", "can-i"):
            assert args == ("auth", "can-i", "list", "nodeclaims.karpenter.sh", "--as=system:serviceaccount:gpu-platform-capacity:gpu-capacity-fallback"), args
            return "yes\n"
        assert args == ("logs", "job/nvidia-smi", "-n", "gpu-smoke-test"), args
        return load("kubectl/nvidia-smi-no-driver.log" if self.world.job_fails else "kubectl/nvidia-smi-t4.log")

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return None

    def apply(self, documents):
        if documents[0]["metadata"]["name"] == monitoring.HOLD_NAMESPACE:
            self.world.hold, self.world.held_at = documents, self.world.clock.t
            return
        if not any(d["kind"] == "Job" for d in documents):
            self.world.probes = documents
            return
        self.world.applied = documents
        self.world.clock.t = 0


def live_run(world: World, tmp_path: Path) -> Live:
    settings = Settings(project="acme-acceptance", warm_nodes=int(world.warm))
    names = run_names(load_run_stack(settings, "k3x9q2"), "k3x9q2")
    return Live(
        names=names,
        settings=settings,
        host=Fake(world.host),
        gcloud=Fake(world.gcloud),
        report=Report("k3x9q2", 10),
        workdir=tmp_path,
        gpu_machines={"n1-standard-4": True, "n1-standard-8": True},
        say=lambda line: None,
        clock=world.clock,
        tenant_access=lambda host, namespace, release, workdir: FakeTenant(world),
        google_get=world.google,
    )


OUTPUTS = {"tenants": {"acc-k3x9q2": {"tenant": "acc-k3x9q2"}}}


def test_a_healthy_run_passes_every_check_and_measures_every_span(tmp_path):
    world = World(FakeClock())
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    failed = [f for f in live.report.findings if not f.ok]
    assert failed == []
    assert [f.check for f in live.report.findings][:8] == [
        "the stack deployed exactly one tenant",
        "platform API Available",
        "NodeProvider acc-k3x9q2 ready",
        "tenant acc-k3x9q2 Ready",
        "tenant API reachable",
        "metadata probes ran on node acc-k3x9q2-cpu-r2n7d-9be14a",
        "an ordinary pod cannot reach the metadata server",
        "a hostNetwork pod reaches the metadata server",
    ]
    # Both probes on the tenant's CPU node, before the GPU Job; their namespace removed after.
    assert {p["spec"]["nodeName"] for p in world.probes if p["kind"] == "Pod"} == {"acc-k3x9q2-cpu-r2n7d-9be14a"}
    assert world.deleted[0] == "delete namespace gpu-platform-acceptance --wait=false"
    assert {"GPU node initialized by the cloud controller manager", "Job logs show nvidia-smi", "node in the zone the Job asked for"} <= {
        f.check for f in live.report.findings
    }
    assert live.report.findings[-1].check == "GPU VM deleted within idleAfter 60s + 600 s"
    # What the capacity fallback and the watchdog rest on: the tenant serves Karpenter's NodeClaims, to the fallback's account too.
    [claims] = [f for f in live.report.findings if f.check == "Karpenter NodeClaims visible inside the tenant"]
    assert claims.detail == (
        "1 listed, t4-1x-8w2mf for node acc-k3x9q2-gpu-8w2mf-3f9a1c; "
        "system:serviceaccount:gpu-platform-capacity:gpu-capacity-fallback may list them: yes"
    )
    # The Job went to the zone the CCM does not run in.
    job = next(d for d in world.applied if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"topology.kubernetes.io/zone": "us-central1-b"}
    assert "GPU Job pinned to zone us-central1-b" in live.report.notes[0]
    # The Job outlives every timed wait of the run, so a slow node fails a named step, not the Job.
    assert job["spec"]["activeDeadlineSeconds"] == live.settings.node_timeout_seconds + 600 + 600 + 900 + 600
    spans = {s.name: s.seconds for s in timings.spans(live.report.milestones)}
    assert all(v is not None for v in spans.values()), spans
    assert spans["pod pending → node Ready"] == 258
    assert 500 <= spans["time to GPU: pod pending → GPU allocatable"] <= 510  # polled every 10 s
    # The GPU node's phases, every one measured: from Compute Engine's insert operation and the
    # node's start to the GPU Operator's pods and the kubelet's image events.
    phases = {s.name: s.seconds for s in timings.phases(live.report.milestones)}
    assert all(v is not None for v in phases.values()), phases
    assert phases["pod pending → VM insert"] == pytest.approx(189.655)  # 05:15:29.655-08:00
    assert phases["VM insert → VM running"] == pytest.approx(14.663)
    assert phases["node Ready → operands scheduled"] == 23  # 13:16:38 → 13:17:01
    assert phases["operands scheduled → images pulled"] == 159  # → 13:19:40, the DCGM exporter's
    assert live.report.warm_node is False
    assert [i.image for i in live.report.images][-1] == "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless"
    assert any(n.startswith("GPU Operator images on node acc-k3x9q2-gpu-8w2mf-3f9a1c: 5, pulled by the kubelet: ") for n in live.report.notes)
    # Monitoring, on the Job's GPU node: each step with its time by whose clock.
    assert [(s.name, s.ok, s.at, s.recorded_by) for s in live.report.monitoring] == [
        ("DCGM exporter Ready on the GPU node", True, datetime.fromisoformat("2026-11-30T13:20:26+00:00"), "tenant API server"),
        ("GPU metrics collector Ready on the GPU node", True, datetime.fromisoformat("2026-11-30T13:17:26+00:00"), "tenant API server"),
        (
            'DCGM_FI_DEV_GPU_UTIL{tenant="acc-k3x9q2"} answered by Cloud Monitoring (the tenant\'s project, acme-acceptance)',
            True,
            datetime.fromisoformat("2026-11-30T13:22:31+00:00"),
            "Cloud Monitoring",
        ),
    ]
    assert world.queries[-1] == (
        "https://monitoring.googleapis.com/v1/projects/acme-acceptance/location/global/prometheus/api/v1/query"
        "?query=DCGM_FI_DEV_GPU_UTIL%7Btenant%3D%22acc-k3x9q2%22%7D"
    )
    # The node was held from its GPU's arrival (t = 500) through the Job's end (576) until the
    # metrics came (600 on); its idle deletion counts from the hold's end, the node's last pod.
    [hold] = [d for d in world.hold if d["kind"] == "Pod"]
    assert hold["spec"]["nodeName"] == GPU_NODE and "nvidia.com/gpu" not in str(hold["spec"]["containers"][0]["resources"])
    assert 500 <= world.held_at < 576 < 600 <= world.released_at < 600 + monitoring.QUERY_POLL_SECONDS
    assert world.deleted[1:] == ["delete pod gpu-node-hold -n gpu-platform-acceptance-hold --wait=false", "delete namespace gpu-platform-acceptance-hold --wait=false"]
    assert live.report.milestones["last_pod_gone"] == APPLIED_AT + timedelta(seconds=world.released_at + 1)
    assert live.report.watchdog_drill is None  # off by default


def test_on_a_warm_node_the_job_runs_at_once_and_the_run_says_why_idle_deletion_is_not_checked(tmp_path):
    world = World(FakeClock(), warm=True, metrics_after=60)  # the warm node has run its collector for a while
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    assert [f for f in live.report.findings if not f.ok] == []
    checks = [f.check for f in live.report.findings]
    assert checks.index("a warm GPU node is Ready and offers its GPUs") < checks.index("a GPU node appears for the Job")
    assert not any(c.startswith("GPU VM deleted within idleAfter") for c in checks)
    assert "idle deletion is not checked" in live.report.notes[-1]
    # Pinned to the warm node's zone, wherever the CCM runs.
    job = next(d for d in world.applied if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"topology.kubernetes.io/zone": "us-central1-b"}
    assert live.report.warm_node is True
    phases = {s.name: s.seconds for s in timings.phases(live.report.milestones, warm=True)}
    assert phases["pod pending → running on a warm node"] == 6
    assert "pod pending → VM insert" not in phases


def test_pods_that_reach_the_metadata_server_fail_the_run_and_the_gpu_checks_still_run(tmp_path):
    world = World(FakeClock(), metadata_exposed=True)
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    failed = {f.check: f.detail for f in live.report.findings if not f.ok}
    assert set(failed) == {"an ordinary pod cannot reach the metadata server"}
    assert "node identity's token" in failed["an ordinary pod cannot reach the metadata server"]
    assert not live.report.checks_passed
    assert "Job logs show nvidia-smi" in {f.check for f in live.report.findings}


def test_a_vm_that_outlives_idle_after_plus_the_margin_fails(tmp_path):
    world = World(FakeClock(), vm_deleted_after=10_000)
    live = live_run(world, tmp_path)
    with pytest.raises(CheckFailed, match="GPU VM deleted within idleAfter"):
        run_checks(live, OUTPUTS)
    last = live.report.findings[-1]
    assert not last.ok and "still exists" in last.detail
    # Allowed: from the node's last pod's end (the monitoring checks' hold, t = 611) plus 60 s + 600 s.
    assert world.clock.t == pytest.approx(world.released_at + 1 + 660, abs=15)


def test_a_gpu_node_the_ccm_never_initializes_stops_the_run_with_what_is_missing(tmp_path):
    world = World(FakeClock(), initializes=False)
    live = live_run(world, tmp_path)
    with pytest.raises(CheckFailed, match="GPU node initialized by the cloud controller manager"):
        run_checks(live, OUTPUTS)
    failed = {f.check: f.detail for f in live.report.findings if not f.ok}
    assert set(failed) == {
        "GPU node initialized by the cloud controller manager",
        "providerID set",
        "uninitialized taint gone",
        "topology.kubernetes.io/zone is a real zone",
        "topology.gke.io/zone is a real zone",
        "node in the zone the Job asked for",
        "allocatable nvidia.com/gpu",
        "node zone label = VM zone",
    }
    assert "node.cloudprovider.kubernetes.io/uninitialized" in failed["GPU node initialized by the cloud controller manager"]
    assert "Job complete" not in {f.check for f in live.report.findings}
    assert live.report.milestones.get("vm_created") is not None  # the VM was found by its name


def test_a_failed_job_is_reported_with_its_logs(tmp_path):
    world = World(FakeClock(), job_fails=True)
    live = live_run(world, tmp_path)
    with pytest.raises(CheckFailed, match="DeadlineExceeded"):
        run_checks(live, OUTPUTS)
    failed = {f.check: f.detail for f in live.report.findings if not f.ok}
    assert set(failed) == {"Job complete", "Job logs show nvidia-smi"}
    assert "Failed to initialize NVML" in failed["Job logs show nvidia-smi"]


def test_a_check_that_never_got_an_answer_reports_the_commands_error(tmp_path):
    live = live_run(World(FakeClock()), tmp_path)

    def observe():
        raise RuntimeError("Unable to connect to the server: dial tcp 34.118.9.20:443: i/o timeout")

    with pytest.raises(CheckFailed):
        live.settle("platform API Available", observe, timeout=30)
    (finding,) = live.report.findings
    assert not finding.ok and "i/o timeout" in finding.detail
