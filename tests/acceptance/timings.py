"""Time-to-GPU, measured: the milestones of one smoke Job and the spans between them, as a table
and as JSON; and the phase chain of its GPU node, from the VM insert to the pod running, each step
with who recorded its end (tests/acceptance/phases.py reads the GPU Operator's part).

Most milestones are timestamps the servers recorded (the tenant's API server, Compute Engine);
three exist only as "first seen" by the run's polling, accurate to the poll interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

SERVER = "tenant API server"
COMPUTE = "Compute Engine"
MONITORING = "Cloud Monitoring"  # the monitoring checks: when a query first answered with a series
POLLED = "polled"

# key → (what happened, who recorded the time)
MILESTONES: dict[str, tuple[str, str]] = {
    "pod_created": ("GPU pod created (pending)", SERVER),
    "vm_insert": ("VM insert requested (its insert operation)", COMPUTE),
    "vm_created": ("VM created", COMPUTE),
    "vm_running": ("VM running (its last start)", COMPUTE),
    "node_registered": ("node registered", SERVER),
    "node_ready": ("node Ready", SERVER),
    "node_initialized": ("node initialized by the CCM", POLLED),
    "operands_scheduled": ("first GPU Operator pod scheduled on the node", SERVER),
    "images_ready": ("last GPU Operator image on the node (pulled or already present)", SERVER),
    "device_plugin_started": ("device plugin container started", SERVER),
    "gpu_allocatable": ("nvidia.com/gpu allocatable", POLLED),
    "pod_started": ("container started", SERVER),
    "job_done": ("Job complete", SERVER),
    "last_pod_gone": ("last pod on the node finished", SERVER),
    "node_removed": ("node removed from the tenant", POLLED),
    "vm_deleted": ("VM deleted", POLLED),
}

# (span, from, to). The first four are the time-to-GPU chain of the issue; the rest break it down.
SPANS: tuple[tuple[str, str, str], ...] = (
    ("pod pending → node Ready", "pod_created", "node_ready"),
    ("node Ready → GPU allocatable", "node_ready", "gpu_allocatable"),
    ("GPU allocatable → Job done", "gpu_allocatable", "job_done"),
    ("last pod gone → VM deleted", "last_pod_gone", "vm_deleted"),
    ("time to GPU: pod pending → GPU allocatable", "pod_created", "gpu_allocatable"),
    ("pod pending → VM created", "pod_created", "vm_created"),
    ("VM created → node registered", "vm_created", "node_registered"),
    ("node registered → node Ready", "node_registered", "node_ready"),
    ("node registered → node initialized", "node_registered", "node_initialized"),
    ("last pod gone → node removed", "last_pod_gone", "node_removed"),
    ("GPU VM lifetime: VM created → VM deleted", "vm_created", "vm_deleted"),
)


# The chain from a pending GPU pod to its running container, step by step. A negative
# step began before the one before it ended: they overlap.
PHASES: tuple[tuple[str, str, str], ...] = (
    ("pod pending → VM insert", "pod_created", "vm_insert"),
    ("VM insert → VM running", "vm_insert", "vm_running"),
    ("VM running → node registered", "vm_running", "node_registered"),
    ("node registered → node Ready", "node_registered", "node_ready"),
    ("node Ready → operands scheduled", "node_ready", "operands_scheduled"),
    ("operands scheduled → images pulled", "operands_scheduled", "images_ready"),
    ("images pulled → device plugin started", "images_ready", "device_plugin_started"),
    ("device plugin started → GPU allocatable", "device_plugin_started", "gpu_allocatable"),
    ("GPU allocatable → pod running", "gpu_allocatable", "pod_started"),
    ("pod pending → pod running", "pod_created", "pod_started"),
)
# On a warm node the VM and its GPU were there before the pod: its chain is the node's own boot
# (without the polled "GPU allocatable", first seen long after the fact), and what the pod waited
# is this one span.
WARM_SPAN = ("pod pending → running on a warm node", "pod_created", "pod_started")
_NOT_FOR_A_WARM_NODE = {
    "pod pending → VM insert",
    "device plugin started → GPU allocatable",
    "GPU allocatable → pod running",
    "pod pending → pod running",
}


@dataclass(frozen=True)
class Span:
    name: str
    start: str
    end: str
    seconds: float | None  # None: a milestone was not reached

    @property
    def measured_by(self) -> str:
        return MILESTONES[self.end][1]


def spans(milestones: dict[str, datetime | None], chain: tuple[tuple[str, str, str], ...] = SPANS) -> list[Span]:
    unknown = set(milestones) - set(MILESTONES)
    if unknown:
        raise ValueError(f"unknown milestones: {sorted(unknown)}")
    result = []
    for name, start, end in chain:
        a, b = milestones.get(start), milestones.get(end)
        result.append(Span(name, start, end, None if a is None or b is None else (b - a).total_seconds()))
    return result


def phase_chain(warm: bool) -> tuple[tuple[str, str, str], ...]:
    if not warm:
        return PHASES
    return (*(p for p in PHASES if p[0] not in _NOT_FOR_A_WARM_NODE), WARM_SPAN)


def phases(milestones: dict[str, datetime | None], *, warm: bool = False) -> list[Span]:
    """The phase chain of the Job's GPU node; on a warm node, its boot and the pod's wait."""
    return spans(milestones, phase_chain(warm))


def render_phases(milestones: dict[str, datetime | None], poll_seconds: float, *, warm: bool = False) -> list[str]:
    return render_table(milestones, poll_seconds, phases(milestones, warm=warm), "phase")


def render_table(milestones: dict[str, datetime | None], poll_seconds: float, rows: list[Span] | None = None, kind: str = "span") -> list[str]:
    lines = [f"| {kind} | seconds | end time recorded by |", "|---|---:|---|"]
    for span in spans(milestones) if rows is None else rows:
        seconds = "not reached" if span.seconds is None else f"{span.seconds:.0f}"
        by = span.measured_by + (f" (±{poll_seconds:g} s)" if span.measured_by == POLLED else "")
        lines.append(f"| {span.name} | {seconds} | {by} |")
    return lines


def to_json(milestones: dict[str, datetime | None], poll_seconds: float) -> dict[str, Any]:
    return {
        "pollSeconds": poll_seconds,
        "milestones": {
            key: {"what": what, "recordedBy": by, "at": None if milestones.get(key) is None else milestones[key].isoformat()}
            for key, (what, by) in MILESTONES.items()
        },
        "spans": [{"span": s.name, "from": s.start, "to": s.end, "seconds": s.seconds} for s in spans(milestones)],
    }


def phases_json(milestones: dict[str, datetime | None], *, warm: bool) -> list[dict[str, Any]]:
    return [{"phase": s.name, "from": s.start, "to": s.end, "seconds": s.seconds} for s in phases(milestones, warm=warm)]
