"""The optional watchdog drill (tests/acceptance/watchdog_drill.py): its readers on hand-written
fixtures (data/README.md), what the watchdog's own decision makes of the node the drill leaves,
the drill's steps against a stand-in tenant, the switch from make to the runner, and its cost."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest

from components import gpu_watchdog
from config import versions
from config.reliability import WATCHDOG_POLL_SECONDS
from tests.make_support import run_make
from tests.acceptance import monitoring
from tests.acceptance import watchdog_drill as drill
from tests.acceptance.recorded import load
from tests.acceptance.report import Report
from tests.acceptance.run import parse_args, settings_from
from tests.acceptance.scenario import Live, check_watchdog_drill
from tests.acceptance.settings import (
    ENVIRONMENT_HOURS,
    GPU_VM_MINUTES,
    WATCHDOG_DRILL_GPU_VM_MINUTES,
    WATCHDOG_DRILL_HOURS,
    Settings,
    cost_estimate,
    cost_total,
    load_run_stack,
    run_names,
)
from tests.acceptance.waiting import CheckFailed, Clock

RUN_ID = "k3x9q2"
NODE = "acc-k3x9q2-gpu-h6p2w-7d41e0"
CPU_NODE = "acc-k3x9q2-cpu-r2n7d-9be14a"
K8S_VERSION = "1.33.0"  # as tests/test_tenants.py
SCHEMA = json.loads((Path(drill.__file__).with_name("report.schema.json")).read_text())
START = datetime.fromisoformat("2026-11-30T13:26:00+00:00")  # t = 0: the drill's pod applied
WATCHDOG_EVENT_AT = datetime.fromisoformat("2026-11-30T13:43:40+00:00")  # the fixture's event: gpuTimeout after the loss was first seen
EVENT_T = (WATCHDOG_EVENT_AT - START).total_seconds()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- the readers ---------------------------------------------------------------------------------


def test_the_drills_pod_asks_for_one_gpu_and_runs_anywhere_the_gpu_pools_allow():
    namespace, pod = drill.documents(RUN_ID)
    for document in (namespace, pod):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    spec = pod["spec"]
    [container] = spec["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}} and container["image"] == versions.SMOKE_TEST_IMAGE
    assert "nodeName" not in spec and "nodeSelector" not in spec  # Karpenter picks the node: a new one, or a warm one
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["restartPolicy"] == "Never" and spec["terminationGracePeriodSeconds"] == 1  # evicted once, never back
    assert spec["securityContext"]["runAsNonRoot"] is True and container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_drills_pod_pending_then_running_on_its_gpu_node():
    step, node = drill.running(load("kubectl/fixture-drill-pods-pending.json"))
    assert not step.ok and node is None and "Insufficient nvidia.com/gpu" in step.seen
    step, node = drill.running(load("kubectl/fixture-drill-pods-running.json"))
    assert (step.ok, node, step.at, step.recorded_by) == (True, NODE, at("2026-11-30T13:33:05+00:00"), "tenant API server")


def test_the_node_has_lost_its_gpu_when_no_plugin_runs_there_and_nothing_is_allocatable():
    pods = load("kubectl/fixture-drill-operator-pods.json")
    assert drill.device_plugin_pods(pods, NODE) == ["nvidia-device-plugin-daemonset-z8c5j"]
    now = at("2026-11-30T13:33:40+00:00")
    assert not drill.withdrawn(load("kubectl/fixture-drill-node.json"), pods, now).ok
    without_plugin = {**pods, "items": [p for p in pods["items"] if p["metadata"]["name"] != "nvidia-device-plugin-daemonset-z8c5j"]}
    assert not drill.withdrawn(load("kubectl/fixture-drill-node.json"), without_plugin, now).ok  # the kubelet has not said so yet
    step = drill.withdrawn(load("kubectl/fixture-drill-node-gpu-lost.json"), without_plugin, now)
    assert (step.ok, step.at, step.recorded_by) == (True, now, "polled")
    assert step.seen == "device plugin pods on the node: none; nvidia.com/gpu allocatable 0, capacity 1"


def test_the_watchdogs_event_on_the_node_and_nothing_else():
    step = drill.watchdog_event(load("kubectl/fixture-watchdog-events.json"), NODE)
    assert (step.ok, step.at, step.recorded_by) == (True, WATCHDOG_EVENT_AT, "tenant API server")
    assert step.seen.startswith(f"Warning GPULost: GPU node {NODE} of pool t4-1x has offered no nvidia.com/gpu since 2026-11-30T13:33:40+00:00")
    # The kubelet's, Karpenter's and the node controller's events, and none on another node.
    assert not drill.watchdog_event(load("kubectl/fixture-watchdog-events.json"), "acc-k3x9q2-gpu-8w2mf-3f9a1c").ok
    with pytest.raises(CheckFailed, match=f"the watchdog could not remove node {NODE}: .*answered 403 Forbidden"):
        drill.watchdog_event(load("kubectl/fixture-watchdog-events-not-removed.json"), NODE)


def test_a_removal_as_never_offered_fails_the_drill_at_once():
    """The watchdog judged the node from its creation, not from the loss it saw: it had restarted."""
    events = load("kubectl/fixture-watchdog-events.json")
    [mine] = [e for e in events["items"] if e["source"]["component"] == gpu_watchdog.EVENT_SOURCE]
    mine.update(reason=gpu_watchdog.NEVER_OFFERED, message=f"GPU node {NODE} of pool t4-1x has offered no nvidia.com/gpu since it joined at 2026-11-30T13:29:10+00:00")
    with pytest.raises(CheckFailed, match=f"the watchdog removed node {NODE} as never offered since it joined, .*kubectl get pods -n gpu-platform-system"):
        drill.watchdog_event(events, NODE)


def capacity_dropped(node: dict) -> dict:
    """The drill's node five minutes after its device plugin went: the kubelet has dropped the
    plugin's resource, a capacity of 0 (watchdog_drill.py)."""
    node = copy.deepcopy(node)
    node["status"]["capacity"][gpu_watchdog.GPU_RESOURCE] = "0"
    return node


@pytest.mark.parametrize("offering_seen", [True, False], ids=["seen offering", "first seen unhealthy"])
def test_the_watchdog_itself_removes_the_node_the_drill_leaves(offering_seen):
    """The fixture's event is what components/gpu_watchdog.py decides for the drill's node, round
    after round: lost (capacity, nothing allocatable) from the round that first sees it so, and
    still lost, on that clock, once the kubelet drops the resource (capacity 0), also where no
    round saw it offering before; removed as GPULost gpuTimeout after that, within the drill's
    bound from the label."""
    limits, claims = {"t4-1x": 600}, {NODE: "t4-1x-h6p2w"}
    offering = load("kubectl/fixture-drill-node.json")
    lost = load("kubectl/fixture-drill-node-gpu-lost.json")
    labelled, first_seen = at("2026-11-30T13:33:00+00:00"), at("2026-11-30T13:33:40+00:00")
    seen = gpu_watchdog.Seen()
    if offering_seen:
        _, seen = gpu_watchdog.decide(gpu_watchdog.gpu_nodes([offering]), claims, limits, 600, labelled - timedelta(seconds=10), seen)
    removals = []
    for round_at in range(0, 600, WATCHDOG_POLL_SECONDS):  # every round before the deadline
        now = first_seen + timedelta(seconds=round_at)
        node = lost if now < labelled + timedelta(seconds=20 + 300) else capacity_dropped(lost)  # the plugin gone 20 s after the label, its resource 5 min later
        removals, seen = gpu_watchdog.decide(gpu_watchdog.gpu_nodes([node]), claims, limits, 600, now, seen)
        assert removals == [], round_at
    assert seen.lost_since == {lost["metadata"]["uid"]: first_seen}
    [removal], _ = gpu_watchdog.decide(gpu_watchdog.gpu_nodes([capacity_dropped(lost)]), claims, limits, 600, first_seen + timedelta(seconds=600), seen)
    assert removal.reason == gpu_watchdog.LOST
    [event] = [e for e in load("kubectl/fixture-watchdog-events.json")["items"] if e["source"]["component"] == gpu_watchdog.EVENT_SOURCE]
    assert event["reason"] == removal.reason and event["message"] == f"{removal.message}: deleted its NodeClaim t4-1x-h6p2w; Karpenter drains the node, then the platform deletes its VM"
    assert event["metadata"]["name"] == gpu_watchdog.event(NODE, removal.uid, removal.reason, "", WATCHDOG_EVENT_AT)["metadata"]["name"]
    assert WATCHDOG_EVENT_AT == first_seen + timedelta(seconds=600) and WATCHDOG_EVENT_AT - labelled <= timedelta(seconds=drill.removal_bound_seconds("10m"))


def test_the_node_removed_at_its_deletion_timestamp():
    nodes = {"items": [load("kubectl/fixture-drill-node-gpu-lost.json")]}
    now = at("2026-11-30T13:39:30+00:00")
    step, since = drill.removed(nodes, NODE, None, now)
    assert not step.ok and since is None and step.seen == f"node {NODE} still there"
    nodes["items"][0]["metadata"]["deletionTimestamp"] = "2026-11-30T13:39:23Z"
    step, since = drill.removed(nodes, NODE, None, now)
    assert not step.ok and since == at("2026-11-30T13:39:23+00:00")
    step, _ = drill.removed({"items": []}, NODE, since, now)
    assert (step.ok, step.at, step.recorded_by) == (True, since, "tenant API server")
    step, _ = drill.removed({"items": []}, NODE, None, now)  # gone between two polls
    assert (step.ok, step.at, step.recorded_by) == (True, now, "polled")


def test_the_bound_is_gpu_timeout_two_watchdog_polls_and_the_margin():
    assert drill.removal_bound_seconds("10m") == 600 + 2 * 30 + drill.REMOVAL_MARGIN_SECONDS


# --- the drill against a stand-in tenant ---------------------------------------------------------


class Tenant:
    """What kubectl and gcloud answer as the drill goes: the drill's pod runs at t = 420, the node
    loses its GPU 20 s after the label and its capacity five minutes later, the watchdog's event
    comes at WATCHDOG_EVENT_AT (t = 1060), the node goes 40 s later and its VM a minute after that."""

    def __init__(self, outcome: str = "removed"):
        self.outcome = outcome  # removed | not removed | stays
        self.t = 0.0
        self.commands: list[str] = []
        self.applied: list[dict] = []
        self.labelled_at: float | None = None
        self.plugin_deleted = False

    def now(self) -> datetime:
        return START + timedelta(seconds=self.t)

    def apply(self, documents):
        self.applied += documents

    def text(self, *args: str) -> str:
        self.commands.append(" ".join(args))
        if args[0] == "label":
            self.labelled_at = self.t
        if args[:2] == ("delete", "pod"):
            self.plugin_deleted = True
        return ""

    def node(self) -> dict | None:
        if self.outcome == "removed" and self.t >= EVENT_T + 40:
            return None
        since_label = -1.0 if self.labelled_at is None else self.t - self.labelled_at
        node = load("kubectl/fixture-drill-node-gpu-lost.json" if since_label >= 20 else "kubectl/fixture-drill-node.json")
        if since_label >= 20 + 300:
            node = capacity_dropped(node)
        if self.outcome == "removed" and self.t >= EVENT_T + 1:
            node["metadata"]["deletionTimestamp"] = "2026-11-30T13:43:41Z"
        return node

    def json(self, *args: str):
        if args == ("get", "pods", "-n", drill.NAMESPACE):
            return load("kubectl/fixture-drill-pods-running.json" if self.t >= 420 else "kubectl/fixture-drill-pods-pending.json")
        if args == ("get", "node", NODE):
            return self.node()
        if args == ("get", "nodes"):
            return {"kind": "List", "items": [n for n in [self.node()] if n is not None]}
        if args == ("get", "pods", "-n", "gpu-operator"):
            pods = load("kubectl/fixture-drill-operator-pods.json")
            if self.plugin_deleted:
                pods["items"] = [p for p in pods["items"] if p["metadata"]["labels"]["app"] != "nvidia-device-plugin-daemonset"]
            return pods
        if args == ("get", "events", "-n", "default"):
            if self.outcome == "stays" or self.t < EVENT_T:
                return {"kind": "List", "items": []}
            return load("kubectl/fixture-watchdog-events-not-removed.json" if self.outcome == "not removed" else "kubectl/fixture-watchdog-events.json")
        raise AssertionError(f"unexpected kubectl {args}")

    def gcloud(self, *args: str):
        assert args == ("compute", "instances", "list", "--filter=labels.vcluster=acc-k3x9q2"), args
        gone = self.outcome == "removed" and self.t >= EVENT_T + 100
        return load("gcloud/instances-list-tenant-after-idle.json" if gone else "gcloud/fixture-instances-list-drill.json")


class Gcloud:
    def __init__(self, tenant: Tenant):
        self.json = tenant.gcloud


def drill_live(tenant: Tenant, tmp_path) -> Live:
    settings = Settings(project="acme-acceptance", watchdog_drill=True)

    def sleep(seconds: float) -> None:
        tenant.t += seconds

    return Live(
        names=run_names(load_run_stack(settings, RUN_ID), RUN_ID),
        settings=settings,
        host=None,  # type: ignore[arg-type]
        gcloud=Gcloud(tenant),  # type: ignore[arg-type]
        report=Report(RUN_ID, 10),
        workdir=tmp_path,
        gpu_machines={},
        say=lambda _: None,
        clock=Clock(monotonic=lambda: tenant.t, sleep=sleep, now=tenant.now),
    )


def test_the_drill_withdraws_the_gpu_and_sees_the_watchdog_remove_the_node_and_its_vm(tmp_path):
    tenant = Tenant()
    live = drill_live(tenant, tmp_path)
    check_watchdog_drill(live, tenant)  # type: ignore[arg-type]
    within = f"within gpuTimeout 10m + {2 * 30 + drill.REMOVAL_MARGIN_SECONDS} s"
    steps = live.report.watchdog_drill
    assert [(s.name, s.ok, s.recorded_by) for s in steps] == [
        ("watchdog drill: a GPU node runs the drill's pod", True, "tenant API server"),
        (f"watchdog drill: node {NODE} stops offering nvidia.com/gpu", True, "polled"),
        (f"watchdog drill: the watchdog's event on the node {within}", True, "tenant API server"),
        (f"watchdog drill: the node removed {within}", True, "tenant API server"),
        (f"watchdog drill: its VM {NODE} deleted within 600 s", True, "polled"),
    ]
    # The servers' times as recorded; the polled ones within a poll of the change.
    assert [s.at for s in steps[::2]] == [at("2026-11-30T13:33:05+00:00"), WATCHDOG_EVENT_AT, steps[4].at]
    assert steps[3].at == at("2026-11-30T13:43:41+00:00")
    assert timedelta(seconds=440) <= steps[1].at - START < timedelta(seconds=450)
    assert timedelta(seconds=EVENT_T + 100) <= steps[4].at - START < timedelta(seconds=EVENT_T + 115)
    assert live.report.findings[3].detail.endswith(f"{(at('2026-11-30T13:43:41+00:00') - START).total_seconds() - 420:.0f} s after its device plugin was withdrawn")
    # The operator's label, then the plugin's pod; the drill's namespace goes at the end.
    assert tenant.commands == [
        f"label node {NODE} nvidia.com/gpu.deploy.device-plugin=false --overwrite",
        "delete pod nvidia-device-plugin-daemonset-z8c5j -n gpu-operator --wait=false",
        f"delete namespace {drill.NAMESPACE} --wait=false",
    ]
    assert tenant.applied == drill.documents(RUN_ID)
    assert live.report.checks_passed
    document = live.report.to_json()
    jsonschema.validate(document, SCHEMA)
    assert document["watchdogDrill"][2] == {
        "step": f"watchdog drill: the watchdog's event on the node {within}",
        "ok": True,
        "seen": live.report.watchdog_drill[2].seen,
        "at": "2026-11-30T13:43:40+00:00",
        "recordedBy": "tenant API server",
    }


def test_a_watchdog_that_cannot_remove_the_node_fails_the_drill_at_once(tmp_path):
    tenant = Tenant("not removed")
    live = drill_live(tenant, tmp_path)
    check_watchdog_drill(live, tenant)  # type: ignore[arg-type]
    steps = live.report.watchdog_drill
    assert [s.ok for s in steps] == [True, True, False] and "could not remove node" in steps[-1].seen
    assert tenant.t == pytest.approx(EVENT_T, abs=10)  # not waited out
    assert tenant.commands[-1] == f"delete namespace {drill.NAMESPACE} --wait=false"
    assert not live.report.checks_passed


def test_a_node_nobody_removes_fails_within_the_bound(tmp_path):
    tenant = Tenant("stays")
    live = drill_live(tenant, tmp_path)
    check_watchdog_drill(live, tenant)  # type: ignore[arg-type]
    [*_, last] = live.report.watchdog_drill
    assert not last.ok and last.name.startswith("watchdog drill: the watchdog's event on the node within gpuTimeout 10m")
    assert tenant.t == pytest.approx(tenant.labelled_at + drill.removal_bound_seconds("10m"), abs=15)


# --- the switch and the cost ---------------------------------------------------------------------


def test_the_switch_reaches_the_runner_and_the_drill_is_off_by_default(tmp_path):
    assert Settings(project="acme-acceptance").watchdog_drill is False and Report(RUN_ID, 10).to_json()["watchdogDrill"] is None
    assert settings_from(parse_args(["--project", "acme-acceptance", "--watchdog-drill"])).watchdog_drill is True

    def make(*variables: str) -> list[str]:
        directory = tmp_path / str(len(list(tmp_path.iterdir())))
        directory.mkdir()
        return run_make(directory, "acceptance", "PROJECT=acme-acceptance", *variables).arguments

    assert "--watchdog-drill" in make("WATCHDOG_DRILL=1") and "--watchdog-drill" not in make()
    assert "--restore-drill" in make("RESTORE_DRILL=1") and "--restore-drill" not in make("WATCHDOG_DRILL=1")


def test_the_drill_is_costed():
    env = load_run_stack(Settings(project="acme-acceptance"), RUN_ID)
    plain, drilled = cost_estimate(env), cost_estimate(env, watchdog_drill=True)
    [longer, vm] = [item for item in drilled if item not in plain]
    [gpu_vm] = [item for item in plain if item.what.startswith("GPU VM")]
    always_on = sum(i.usd for i in plain if i is not gpu_vm) / ENVIRONMENT_HOURS
    assert longer.what == f"watchdog drill: the environment {WATCHDOG_DRILL_HOURS:g} h longer" and longer.usd == pytest.approx(always_on * WATCHDOG_DRILL_HOURS)
    assert vm.what == f"watchdog drill: its GPU VM (n1-standard-4 with 1 × nvidia-tesla-t4), {WATCHDOG_DRILL_GPU_VM_MINUTES} min"
    assert vm.usd == pytest.approx(gpu_vm.usd * WATCHDOG_DRILL_GPU_VM_MINUTES / GPU_VM_MINUTES)
    # On a warm node the drill's pod takes the warm node: no GPU VM beyond the always-on ones.
    warm = load_run_stack(Settings(project="acme-acceptance", warm_nodes=1), RUN_ID)
    assert [i.what for i in cost_estimate(warm, watchdog_drill=True) if i not in cost_estimate(warm)] == [longer.what]


def test_the_docs_quote_the_drills_extra_cost():
    from docs_support import page

    env = load_run_stack(Settings(project="acme-acceptance"), RUN_ID)
    extra = cost_total(cost_estimate(env, watchdog_drill=True)) - cost_total(cost_estimate(env))
    text = " ".join(page("docs/acceptance.md").split())
    assert text.count(f"(≈ {extra:.2f} at these prices with its GPU VM; the run prints it with the drill)") == 1
    # And the drill's bounds as the code has them.
    assert text.count(
        f"within the pool's `gpuTimeout` (10m) plus two of the watchdog's {WATCHDOG_POLL_SECONDS}-second polls plus {drill.REMOVAL_MARGIN_SECONDS} s"
    ) == 1
    assert text.count(f"within two scrape intervals plus {monitoring.INGESTION_MARGIN_SECONDS // 60} minutes") == 1
