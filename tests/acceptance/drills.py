"""The optional drills' runners, after the GPU checks or around them (docs/acceptance.md): the
watchdog drill (WATCHDOG_DRILL=1, tests/acceptance/watchdog_drill.py), the stockout drill
(STOCKOUT_DRILL=1, tests/acceptance/capacity_drill.py) and the Flex-start and reservation runs
(FLEX_START=1, RESERVATION=<name>, tests/acceptance/capacity_runs.py). What they decide is in those
pure modules; these call kubectl and gcloud and record each step in the report.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from components import fallback_documents
from config.base import duration_seconds

from . import capacity_drill, capacity_runs, gce, kube, scenario, timings, watchdog_drill
from .kube import Finding
from .report import Step
from .shell import CommandError, TenantAccess
from .waiting import CheckFailed


# --- The watchdog drill ---------------------------------------------------------------------------


def check_watchdog_drill(live: scenario.Live, tenant: TenantAccess) -> None:
    """WATCHDOG_DRILL=1 (tests/acceptance/watchdog_drill.py): a GPU node for the drill's pod, its
    device plugin withdrawn, then the watchdog's event, the node gone within the pool's gpuTimeout
    plus a margin, and its VM deleted. Each a step of the report; the run goes on after a failure."""
    names, drill = live.names, watchdog_drill
    steps = live.report.watchdog_drill = []
    tenant.apply(drill.documents(names.run_id))
    try:
        found: dict[str, Any] = {}

        def running() -> Step:
            step, found["node"] = drill.running(tenant.json("get", "pods", "-n", drill.NAMESPACE))
            return step

        timeout = live.settings.node_timeout_seconds + scenario.READY_TIMEOUT + scenario.GPU_TIMEOUT + scenario.JOB_RUN_TIMEOUT
        live.settle_step(steps, "watchdog drill: a GPU node runs the drill's pod", running, timeout=timeout)
        node = found["node"]
        try:
            vm = gce.vm_for_node(scenario.tenant_vms(live), tenant.json("get", "node", node))
        except CommandError as e:
            vm = None
            live.report.notes.append(f"watchdog drill: the node's VM was not found, its deletion is not checked: {e}")
        # The operator's label: the device plugin's DaemonSet leaves the node; its pod goes at once.
        tenant.text("label", "node", node, f"{drill.DEVICE_PLUGIN_DEPLOY_LABEL}=false", "--overwrite")
        withdrawn_at = live.clock.now()
        for pod in drill.device_plugin_pods(tenant.json("get", "pods", "-n", drill.GPU_OPERATOR_NAMESPACE), node):
            tenant.text("delete", "pod", pod, "-n", drill.GPU_OPERATOR_NAMESPACE, "--wait=false")
        bound = drill.removal_bound_seconds(names.gpu_timeout)

        def left() -> float:
            return max(bound - (live.clock.now() - withdrawn_at).total_seconds(), 0)

        live.settle_step(
            steps,
            f"watchdog drill: node {node} stops offering {kube.GPU_RESOURCE}",
            lambda: drill.withdrawn(tenant.json("get", "node", node), tenant.json("get", "pods", "-n", drill.GPU_OPERATOR_NAMESPACE), live.clock.now()),
            timeout=drill.WITHDRAW_TIMEOUT,
        )
        within = f"within gpuTimeout {names.gpu_timeout} + {bound - duration_seconds(names.gpu_timeout)} s"
        events = ("get", "events", "-n", drill.EVENT_NAMESPACE)
        live.settle_step(steps, f"watchdog drill: the watchdog's event on the node {within}", lambda: drill.watchdog_event(tenant.json(*events), node), timeout=left())
        deleting: dict[str, datetime | None] = {"since": None}

        def removed() -> Step:
            step, deleting["since"] = drill.removed(tenant.json("get", "nodes"), node, deleting["since"], live.clock.now())
            if step.ok and step.at is not None:
                step = replace(step, seen=f"{step.seen}, {(step.at - withdrawn_at).total_seconds():.0f} s after its device plugin was withdrawn")
            return step

        live.settle_step(steps, f"watchdog drill: the node removed {within}", removed, timeout=left())
        if vm is not None:
            check = f"watchdog drill: its VM {vm['name']} deleted within {live.settings.idle_margin_seconds} s"

            def deleted() -> Step:
                present = any(v.get("name") == vm["name"] for v in scenario.tenant_vms(live))
                return Step("", not present, f"VM {vm['name']} {'still exists' if present else 'deleted'}", None if present else live.clock.now(), timings.POLLED)

            live.settle_step(steps, check, deleted, timeout=live.settings.idle_margin_seconds, interval=scenario.GCLOUD_POLL_SECONDS)
    except CheckFailed:
        pass  # recorded
    finally:
        try:
            tenant.text("delete", "namespace", drill.NAMESPACE, "--wait=false")
        except CommandError as e:
            live.say(f"could not delete namespace {drill.NAMESPACE} (the destroy removes it with the tenant): {e}")


# --- The stockout drill, the Flex-start and reservation runs ----------------------------------------


class StockoutDrill:
    """STOCKOUT_DRILL=1: the smoke Job's first claim takes the decoy reservation's node type and
    fails; what the tenant and the platform show of it is read at every poll while the Job waits
    (the failed claims go within minutes), then the drill's steps are recorded."""

    def __init__(self, live: scenario.Live, tenant: TenantAccess):
        self.live, self.tenant = live, tenant
        names = live.names
        self.decoy = capacity_runs.decoy_node_type(names.run_id, names.tenant)
        self.watch = capacity_drill.Watch(names.node_provider, names.tenant, live.clock.now())
        live.report.stockout_drill = []

    def observe(self) -> None:
        """One poll; a failed read is skipped (the next poll reads again)."""
        try:
            self.watch.observe(
                self.tenant.json("get", "nodeclaims.karpenter.sh"),
                self.platform_claims(),
                self.tenant.json("get", "events", "-n", "default"),
                self.live.clock.now(),
            )
        except CommandError as e:
            self.live.say(f"stockout drill: a poll failed: {e}")

    def platform_claims(self) -> dict[str, Any]:
        return self.live.host.json("get", "nodeclaims.management.loft.sh", "-n", capacity_drill.platform_claims_namespace(self.live.names.tenant))

    def finish(self, node: dict[str, Any] | None) -> None:
        """After the Job: the steps, each recorded; a failed one does not stop the next."""
        live, steps, decoy = self.live, self.live.report.stockout_drill, self.decoy
        settings = live.settings
        option = capacity_runs.next_option(settings.flex_start, settings.reservation)
        checks = [
            (f"stockout drill: the Job's first claim took the decoy {decoy} and failed", lambda: capacity_drill.claim_failed(self.watch, decoy)),
            ("stockout drill: the capacity fallback asked for the next option", lambda: capacity_drill.fallback_asked(self.watch, decoy)),
        ]
        if node is not None:
            milestones = live.report.milestones
            checks.append(
                (
                    f"stockout drill: the Job's pod runs on the next option ({option})",
                    lambda: capacity_drill.landed(node, decoy, option, milestones.get("pod_created"), milestones.get("pod_started")),
                )
            )
        for check, observe in checks:  # seen already: recorded as they are
            step = replace(observe(), name=check)
            steps.append(step)
            live.report.add(Finding(check, step.ok, step.seen), live.say)

        def nothing_left() -> Step:
            self.watch.observe({"items": []}, self.platform_claims(), {"items": []}, live.clock.now())
            tenant = f"--filter=labels.vcluster={live.names.tenant}"
            disks = live.gcloud.json("compute", "disks", "list", tenant) or []
            return capacity_drill.leftovers(self.watch, decoy, scenario.tenant_vms(live), disks, live.clock.now())

        try:
            live.settle_step(
                steps,
                f"stockout drill: nothing of the failed claims left within {capacity_drill.LEFTOVER_TIMEOUT} s",
                nothing_left,
                timeout=capacity_drill.LEFTOVER_TIMEOUT,
                interval=scenario.GCLOUD_POLL_SECONDS,
            )
        except CheckFailed:
            pass  # recorded


def check_claims_visible(live: scenario.Live, tenant: TenantAccess, node: dict[str, Any] | None) -> None:
    """Every run: the tenant's API server serves Karpenter's NodeClaims, which the capacity fallback
    reads (as the GPU watchdog does), to its service account too."""
    account = f"system:serviceaccount:{fallback_documents.NAMESPACE}:{fallback_documents.NAME}"
    try:
        listing = tenant.json("get", "nodeclaims.karpenter.sh")
    except CommandError as e:
        live.report.add(Finding("Karpenter NodeClaims visible inside the tenant", False, f"not listed: {e}"), live.say)
        return
    try:
        answer = tenant.text("auth", "can-i", "list", "nodeclaims.karpenter.sh", f"--as={account}")
    except CommandError as e:  # `kubectl auth can-i` exits 1 for "no"
        answer = f"no ({e})"
    check, ok, seen = capacity_drill.claims_visible(listing, node, answer, account)
    live.report.add(Finding(check, ok, seen), live.say)


def check_capacity_vm(live: scenario.Live, vm: dict[str, Any] | None) -> None:
    """FLEX_START=1, RESERVATION=<name>: the Job's VM was bought that way."""
    settings = live.settings
    seconds = duration_seconds(capacity_runs.FLEX_START_MAX_RUN)
    for check, ok, seen in capacity_runs.vm_capacity_findings(vm, flex_start=settings.flex_start, reservation=settings.reservation, max_run_seconds=seconds):
        live.report.add(Finding(check, ok, seen), live.say)


# --- After the Job's claim ended --------------------------------------------------------------------


def check_idle_deletion(live: scenario.Live, tenant: TenantAccess, node_name: str, vm: dict[str, Any]) -> None:
    """After its last pod, the GPU VM must be gone within idleAfter plus the margin."""
    report = live.report
    allowed = duration_seconds(live.names.idle_after) + live.settings.idle_margin_seconds
    gone_since = report.milestones.get("last_pod_gone") or live.clock.now()
    check = f"GPU VM deleted within idleAfter {live.names.idle_after} + {live.settings.idle_margin_seconds} s"

    def deleted() -> Finding:
        if report.milestones.get("node_removed") is None and node_name not in kube.node_names(tenant.json("get", "nodes")):
            report.mark("node_removed", live.clock.now())
        present = any(v.get("name") == vm["name"] for v in scenario.tenant_vms(live))
        if not present:
            report.mark("vm_deleted", live.clock.now())
        return Finding("", not present, f"VM {vm['name']} {'still exists' if present else 'deleted'}")

    remaining = (gone_since + timedelta(seconds=allowed) - live.clock.now()).total_seconds()
    live.settle(check, deleted, timeout=max(remaining, 0), interval=scenario.GCLOUD_POLL_SECONDS)


def check_flex_start_leftovers(live: scenario.Live, tenant: TenantAccess) -> None:
    """FLEX_START=1, once the Job's node is gone: no Flex-start VM of the tenant that backs no node, i.e.
    one whose create the provider stopped waiting for while Compute Engine went on (templates/node/main.tf
    `timeouts`; docs/gpu-nodes.md "Flex-start"). Seen once, at this moment: a VM arriving later still
    shows in the run's leftovers scan."""
    try:
        instances = scenario.tenant_vms(live)
        nodes = kube.items(tenant.json("get", "nodes"))
    except CommandError as e:
        live.report.add(Finding(capacity_runs.UNTRACKED_CHECK, False, f"not listed: {e}"), live.say)
        return
    check, ok, seen = capacity_runs.untracked_flex_start_vms(instances, nodes, project=live.names.vm_project)
    live.report.add(Finding(check, ok, seen), live.say)
