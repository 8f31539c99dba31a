"""Time-to-GPU, measured: the milestones of one smoke Job and the spans between them, as a table
and as JSON.

Most milestones are timestamps the servers recorded (the tenant's API server, Compute Engine);
three exist only as "first seen" by the run's polling, accurate to the poll interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

SERVER = "tenant API server"
COMPUTE = "Compute Engine"
POLLED = "polled"

# key → (what happened, who recorded the time)
MILESTONES: dict[str, tuple[str, str]] = {
    "pod_created": ("GPU pod created (pending)", SERVER),
    "vm_created": ("VM created", COMPUTE),
    "node_registered": ("node registered", SERVER),
    "node_ready": ("node Ready", SERVER),
    "node_initialized": ("node initialized by the CCM", POLLED),
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


@dataclass(frozen=True)
class Span:
    name: str
    start: str
    end: str
    seconds: float | None  # None: a milestone was not reached

    @property
    def measured_by(self) -> str:
        return MILESTONES[self.end][1]


def spans(milestones: dict[str, datetime | None]) -> list[Span]:
    unknown = set(milestones) - set(MILESTONES)
    if unknown:
        raise ValueError(f"unknown milestones: {sorted(unknown)}")
    result = []
    for name, start, end in SPANS:
        a, b = milestones.get(start), milestones.get(end)
        result.append(Span(name, start, end, None if a is None or b is None else (b - a).total_seconds()))
    return result


def render_table(milestones: dict[str, datetime | None], poll_seconds: float) -> list[str]:
    lines = ["| span | seconds | end time recorded by |", "|---|---:|---|"]
    for span in spans(milestones):
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
