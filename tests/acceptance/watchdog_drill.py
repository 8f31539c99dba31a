"""The optional watchdog drill of `make acceptance WATCHDOG_DRILL=1` (docs/acceptance.md): a GPU
node made to stop offering `nvidia.com/gpu`, and the GPU watchdog (components/gpu_watchdog.py) must
record why and make the node and its VM go within the pool's gpuTimeout plus a margin. The
documents and the readers of `kubectl … -o json` are pure; scenario.py runs them.

The node: a pod asking for one GPU (a new GPU node, the Job's is gone by then; or a warm node),
which runs until its node is drained. Karpenter evicts it then, and a bare pod is not recreated,
so nothing asks for a GPU node afterwards.

How the node loses its GPU without touching the VM: the GPU Operator runs its device plugin only on
nodes labelled `nvidia.com/gpu.deploy.device-plugin=true` (NVIDIA/gpu-operator tag v25.10.1,
assets/state-device-plugin/0500_daemonset.yaml `nodeSelector`), a label it sets on GPU nodes only
where it is missing: "If a required state label already exists on the node, honor the current
value" (controllers/state_manager.go `addGPUStateLabels`, `gpuStateLabels`). Labelled `false`, the
node is no longer one of the DaemonSet's, whose controller deletes its pod there ("delete Pods from
newly not-matching nodes", https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/);
the drill deletes it too. Cordoning would not do: it stops new pods, not the plugin.

What the kubelet then reports (kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go
`PluginDisconnected`, `GetCapacity`, read at commit 7510f32987feb7efbaced9aec1ca15303dea252b;
pkg/kubelet/nodestatus/setters.go `MachineInfo`): the plugin's GPUs turn unhealthy, so
`nvidia.com/gpu` stays in capacity with none allocatable; five minutes later
(`endpointStopGracePeriod`) the resource is dropped and its capacity reads 0. The watchdog has seen
the node offering its GPU (the drill's pod got it), and in any case sees the unhealthy capacity
first, so it judges the node lost throughout, from the round that first saw it without its GPU,
and removes it as GPULost gpuTimeout after that: the bound below. A GPUNeverOffered instead says
the watchdog judged it from its creation, which it does only when it has not seen the loss: it
restarted meanwhile (components/gpu_watchdog.py module docstring), and the drill fails.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from components import gpu_watchdog
from components.watchdog_documents import NAMESPACE as WATCHDOG_NAMESPACE
from config import versions
from config.base import duration_seconds
from config.reliability import WATCHDOG_POLL_SECONDS

from .kube import allocatable_gpus, items, parse_time
from .phases import DEVICE_PLUGIN_APP, GPU_OPERATOR_NAMESPACE, pods_on
from .report import Step
from .timings import POLLED, SERVER
from .waiting import CheckFailed

NAMESPACE = "gpu-platform-acceptance-drill"
POD = "watchdog-drill"
EVENT_NAMESPACE = gpu_watchdog.EVENT_NAMESPACE  # where the watchdog's events about nodes go
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
# Beyond gpuTimeout and the watchdog's two polls (the first to see the loss, the first past the
# deadline): the device plugin's pod ending, the kubelet's node status update, and for the node,
# the deletion Karpenter starts once its claim is deleted.
REMOVAL_MARGIN_SECONDS = 300
WITHDRAW_TIMEOUT = 300  # the plugin's pod gone and the kubelet's node status updated
HOLD_SECONDS = 7200  # a backstop: the drill's pod ends by itself should the run die without its cleanup


def removal_bound_seconds(gpu_timeout: str) -> int:
    """From the device plugin's withdrawal to the node's removal, at most."""
    return duration_seconds(gpu_timeout) + 2 * WATCHDOG_POLL_SECONDS + REMOVAL_MARGIN_SECONDS


def documents(run_id: str) -> list[dict[str, Any]]:
    """Its namespace and a pod asking for one GPU, in the smoke test's image (whose userspace the
    node's driver serves) and under the restricted Pod Security level's rules."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE, "labels": {"gpu-platform/acceptance-run": run_id}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": gpu_watchdog.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "hold",
                    "image": versions.SMOKE_TEST_IMAGE,
                    "command": ["sleep", str(HOLD_SECONDS)],
                    "resources": {"limits": {gpu_watchdog.GPU_RESOURCE: "1"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, pod]


def running(pods: dict[str, Any]) -> tuple[Step, str | None]:
    """The drill's pod running on a GPU node, since its container started; and that node."""
    pod = next((p for p in items(pods) if p["metadata"]["name"] == POD), None)
    if pod is None:
        return Step("", False, f"no pod {NAMESPACE}/{POD}", None, SERVER), None
    node = (pod.get("spec") or {}).get("nodeName")
    status = pod.get("status") or {}
    started = [((c.get("state") or {}).get("running") or {}).get("startedAt") for c in status.get("containerStatuses") or []]
    if status.get("phase") == "Running" and node and started[0]:
        return Step("", True, f"pod {POD} running on node {node}, its GPU allocated", parse_time(started[0]), SERVER), node
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    return Step("", False, f"pod {POD} {status.get('phase', 'Pending')}" + (f" on {node}" if node else f": {scheduled.get('message', 'not scheduled yet')}"), None, SERVER), None


def device_plugin_pods(pods: dict[str, Any], node: str) -> list[str]:
    return [p["metadata"]["name"] for p in pods_on(pods, node) if (p["metadata"].get("labels") or {}).get("app") == DEVICE_PLUGIN_APP]


def withdrawn(node: dict[str, Any], operator_pods: dict[str, Any], now: datetime) -> Step:
    """No device plugin on the node any more, and nothing allocatable: first seen `now`."""
    name = node["metadata"]["name"]
    left = device_plugin_pods(operator_pods, name)
    offered = allocatable_gpus(node)
    capacity = ((node.get("status") or {}).get("capacity") or {}).get(gpu_watchdog.GPU_RESOURCE, "none")
    seen = f"device plugin pods on the node: {left or 'none'}; {gpu_watchdog.GPU_RESOURCE} allocatable {offered}, capacity {capacity}"
    return Step("", not left and offered == 0, seen, now if not left and offered == 0 else None, POLLED)


def watchdog_event(events: dict[str, Any], node: str) -> Step:
    """The watchdog's event on the node (one per node: components/gpu_watchdog.py `run_once`), at
    the API server's creation time. A could-not-remove, or a removal as never offered, will not get
    better: CheckFailed."""
    mine = [
        e
        for e in items(events)
        if (e.get("source") or {}).get("component") == gpu_watchdog.EVENT_SOURCE
        and (e.get("involvedObject") or {}).get("kind") == "Node"
        and (e.get("involvedObject") or {}).get("name") == node
    ]
    if not mine:
        return Step("", False, f"no event of {gpu_watchdog.EVENT_SOURCE} on node {node} yet", None, SERVER)
    event = min(mine, key=lambda e: e["metadata"]["creationTimestamp"])
    reason, message = event.get("reason", ""), event.get("message", "")
    if reason == gpu_watchdog.NOT_REMOVED:
        raise CheckFailed(f"the watchdog could not remove node {node}: {message}")
    if reason == gpu_watchdog.NEVER_OFFERED:
        raise CheckFailed(
            f"the watchdog removed node {node} as never offered since it joined, not as lost since it saw the loss "
            f"(it had restarted? kubectl get pods -n {WATCHDOG_NAMESPACE}): {message}"
        )
    if reason != gpu_watchdog.LOST:
        return Step("", False, f"an event {reason!r} of {gpu_watchdog.EVENT_SOURCE}, not {gpu_watchdog.LOST}: {message}", None, SERVER)
    return Step("", True, f"{event.get('type', '')} {reason}: {message}".strip(), parse_time(event["metadata"]["creationTimestamp"]), SERVER)


def removed(nodes: dict[str, Any], node: str, deleting_since: datetime | None, now: datetime) -> tuple[Step, datetime | None]:
    """The node gone from the tenant, at its deletionTimestamp (set by the API server when it was
    deleted) if a poll saw one, else when first seen gone; and that deletionTimestamp, for the next
    poll."""
    listed = next((n for n in items(nodes) if n["metadata"]["name"] == node), None)
    if listed is not None:
        since = parse_time(listed["metadata"].get("deletionTimestamp")) or deleting_since
        return Step("", False, f"node {node} " + (f"being deleted since {since.isoformat()}" if since else "still there"), None, SERVER), since
    if deleting_since is not None:
        return Step("", True, f"node {node} gone (deleted at {deleting_since.isoformat()})", deleting_since, SERVER), deleting_since
    return Step("", True, f"node {node} gone", now, POLLED), None
