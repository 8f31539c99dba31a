"""Where a GPU node's time goes after it registers, read from what the cluster recorded: the GPU
Operator's pods on the node (their PodScheduled conditions and container start times) and the
kubelet's image events. Pure functions of `kubectl … -o json` output.

Upstream facts they rely on:
- the GPU Operator's pods run in its namespace (components/tenant_documents.py
  GPU_OPERATOR_NAMESPACE); the device plugin's pods are labelled `app: nvidia-device-plugin-daemonset`
  and run the container `nvidia-device-plugin` (NVIDIA/gpu-operator tag v25.10.1,
  assets/state-device-plugin/0500_daemonset.yaml); it registers `nvidia.com/gpu` with the kubelet
  once that container runs, which no object records: "device plugin started" is the container's
  start, GPU allocatable (polled) follows;
- the kubelet reports every image it needs as a Pod event (core/v1 Event, `involvedObject` the pod):
  reason `Pulling` ("Pulling image "<image>""), then reason `Pulled`, either
  "Successfully pulled image "<image>" in <duration> (<duration> including waiting)…" or
  "Container image "<image>" already present on machine" (kubernetes/kubernetes
  pkg/kubelet/images/image_manager.go, `EnsureImageExists`); a prefetched image is one the kubelet
  found already present. The duration is Go's `time.Duration` text (1m2.5s, 850ms).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.tenant_documents import GPU_OPERATOR_NAMESPACE

from .kube import condition, items, parse_time

EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
DEVICE_PLUGIN_CONTAINER = "nvidia-device-plugin"
_PULLING = re.compile(r'^Pulling image "([^"]+)"')
_PULLED = re.compile(r'^Successfully pulled image "([^"]+)" in ([0-9.a-zµ]+)')
_PRESENT = re.compile(r'^Container image "([^"]+)" already present on machine')
_DURATION_PART = re.compile(r"([0-9.]+)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def go_duration_seconds(text: str) -> float | None:
    """Go's Duration.String() (`1m2.5s`, `850ms`, `0s`) in seconds; None for anything else."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def pods_on(pods: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return [p for p in items(pods) if (p.get("spec") or {}).get("nodeName") == node]


def is_nfd(pod: dict[str, Any]) -> bool:
    """A pod of the chart's Node Feature Discovery subchart (its pods carry
    `app.kubernetes.io/name: node-feature-discovery`: the subchart's templates/_helpers.tpl)."""
    return (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "node-feature-discovery"


def operands_scheduled(pods: dict[str, Any], node: str) -> datetime | None:
    """When the first of the operator's operand pods (not NFD's worker, which runs on every node
    whether or not the operator deploys anything) was bound to the node (PodScheduled True)."""
    times = []
    for pod in (p for p in pods_on(pods, node) if not is_nfd(p)):
        scheduled = condition(pod, "PodScheduled") or {}
        if scheduled.get("status") == "True" and scheduled.get("lastTransitionTime"):
            times.append(parse_time(scheduled["lastTransitionTime"]))
    return min(times, default=None)


def device_plugin_started(pods: dict[str, Any], node: str) -> datetime | None:
    """When the device plugin's container first ran on the node."""
    for pod in pods_on(pods, node):
        if (pod["metadata"].get("labels") or {}).get("app") != DEVICE_PLUGIN_APP:
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != DEVICE_PLUGIN_CONTAINER:
                continue
            state = status.get("state") or {}
            ran = state.get("running") or state.get("terminated") or {}
            last = (status.get("lastState") or {}).get("terminated") or {}
            started = [parse_time(t) for t in (ran.get("startedAt"), last.get("startedAt")) if t]
            return min(started, default=None)
    return None


@dataclass(frozen=True)
class ImagePull:
    """One image the kubelet needed on the node: when it started and finished getting it."""

    image: str
    pod: str
    namespace: str
    pulling_at: datetime | None  # None: already present, no pull
    ready_at: datetime | None  # Pulled event: pulled, or found present
    seconds: float | None  # the kubelet's own figure for the pull; None when present or unknown
    already_present: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "pod": f"{self.namespace}/{self.pod}",
            "pullingAt": None if self.pulling_at is None else self.pulling_at.isoformat(),
            "readyAt": None if self.ready_at is None else self.ready_at.isoformat(),
            "pullSeconds": self.seconds,
            "alreadyPresent": self.already_present,
        }


def _event_time(event: dict[str, Any]) -> datetime | None:
    return parse_time(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp"))


def image_pulls(events: dict[str, Any], pods: set[str]) -> list[ImagePull]:
    """The first time each image became ready for one of `pods` (names in the events' namespace),
    in the order they became ready. An image several pods use appears once: whichever pod got it
    first (the others find it present)."""
    pulling: dict[tuple[str, str], datetime | None] = {}
    found: dict[str, ImagePull] = {}
    timed = [(e, _event_time(e)) for e in items(events)]
    for event, at in sorted(timed, key=lambda pair: (pair[1] is None, pair[1] or EPOCH)):
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "Pod" or involved.get("name") not in pods:
            continue
        message, pod = str(event.get("message") or ""), involved["name"]
        namespace = involved.get("namespace") or (event.get("metadata") or {}).get("namespace", "")
        if event.get("reason") == "Pulling" and (m := _PULLING.match(message)):
            pulling.setdefault((pod, m.group(1)), at)
            continue
        if event.get("reason") != "Pulled":
            continue
        if m := _PULLED.match(message):
            image, seconds, present = m.group(1), go_duration_seconds(m.group(2)), False
        elif m := _PRESENT.match(message):
            image, seconds, present = m.group(1), None, True
        else:
            continue
        if image not in found:
            found[image] = ImagePull(image, pod, namespace, None if present else pulling.get((pod, image)), at, seconds, present)
    return list(found.values())


def images_ready(pulls: list[ImagePull]) -> datetime | None:
    """When the last of the operator's images was on the node."""
    return max((p.ready_at for p in pulls if p.ready_at), default=None)


def is_warm(node: dict[str, Any], warm_label: str) -> bool:
    return (node["metadata"].get("labels") or {}).get(warm_label) == "true"


__all__ = [
    "GPU_OPERATOR_NAMESPACE",
    "ImagePull",
    "device_plugin_started",
    "go_duration_seconds",
    "image_pulls",
    "images_ready",
    "is_warm",
    "operands_scheduled",
    "pods_on",
]
