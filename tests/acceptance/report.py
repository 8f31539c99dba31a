"""What one run found: every check with what was seen, the timings, what the cleanup left. Printed
as Markdown tables and written as JSON (report.json) next to the run's logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from . import assumptions, timings
from .kube import Finding
from .leftovers import Leftover
from .phases import ImagePull

# The report.json format (report.schema.json beside this file): 2 added the GPU node's phases,
# its images and whether it was a warm node; 3 the monitoring checks and the watchdog drill; 4 the
# stockout drill and one line per assumption only a real project can settle (assumptions.py).
REPORT_VERSION = 4


@dataclass(frozen=True)
class Step:
    """One step of the monitoring checks or of the watchdog drill: passed or not, what was seen, and
    when it happened by whose clock (timings.SERVER, COMPUTE, MONITORING, POLLED); `at` is None
    when it did not happen."""

    name: str
    ok: bool
    seen: str
    at: datetime | None
    recorded_by: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.name, "ok": self.ok, "seen": self.seen, "at": None if self.at is None else self.at.isoformat(), "recordedBy": self.recorded_by}


@dataclass
class Report:
    run_id: str
    poll_seconds: float
    findings: list[Finding] = field(default_factory=list)
    milestones: dict[str, datetime | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    leftovers: list[Leftover] | None = None  # None: the scan did not run
    cleanup: str = "not started"
    cleaned: bool = False
    interrupted: str | None = None
    images: list[ImagePull] = field(default_factory=list)  # what the Job's GPU node needed, in order
    warm_node: bool | None = None  # the Job ran on a warm node; None: no GPU node was found
    monitoring: list[Step] = field(default_factory=list)  # the collector, the DCGM exporter, the metrics
    watchdog_drill: list[Step] | None = None  # None: not run (WATCHDOG_DRILL off)
    stockout_drill: list[Step] | None = None  # None: not run (STOCKOUT_DRILL off)
    gpu_machine_type: str | None = None  # the Job's GPU VM's machine type; None: no VM found
    gpu_machine_nvswitch: bool = False  # that machine type is a full HGX board (config/catalog.yaml `nvswitch`)

    def add(self, finding: Finding, say: Callable[[str], None] | None = None) -> Finding:
        self.findings.append(finding)
        if say:
            say(f"{'PASS' if finding.ok else 'FAIL'}  {finding.check}: {finding.detail}")
        return finding

    def mark(self, milestone: str, at: datetime | None) -> None:
        if milestone not in timings.MILESTONES:
            raise ValueError(f"unknown milestone {milestone!r}")
        if at is not None and self.milestones.get(milestone) is None:
            self.milestones[milestone] = at

    @property
    def checks_passed(self) -> bool:
        return bool(self.findings) and all(f.ok for f in self.findings) and self.interrupted is None

    @property
    def verdict(self) -> str:
        if self.interrupted:
            return f"INTERRUPTED ({self.interrupted})"
        return "PASSED" if self.checks_passed else "FAILED"

    def render(self) -> list[str]:
        lines = [f"## Acceptance run {self.run_id}: {self.verdict}", "", "| check | result | seen |", "|---|---|---|"]
        lines += [f"| {f.check} | {'pass' if f.ok else 'FAIL'} | {_cell(f.detail)} |" for f in self.findings]
        lines += ["", "### Timings", ""] + timings.render_table(self.milestones, self.poll_seconds)
        node = "a warm node" if self.warm_node else "a node created for it" if self.warm_node is False else "no GPU node"
        lines += ["", f"### Phases of the GPU node ({node})", ""] + timings.render_phases(self.milestones, self.poll_seconds, warm=bool(self.warm_node))
        lines += ["", "### Images on the GPU node", ""] + render_images(self.images)
        lines += ["", "### Monitoring", ""] + render_steps(self.monitoring, "No monitoring check ran.")
        lines += ["", "### Watchdog drill", ""] + (
            ["Not run (WATCHDOG_DRILL off)."] if self.watchdog_drill is None else render_steps(self.watchdog_drill, "No step of the drill ran.")
        )
        lines += ["", "### Stockout drill", ""] + (
            ["Not run (STOCKOUT_DRILL off)."] if self.stockout_drill is None else render_steps(self.stockout_drill, "No step of the drill ran.")
        )
        lines += ["", "### What only a real project can settle", ""] + render_assumptions(self)
        lines += ["", "### Cleanup", "", self.cleanup]
        if self.leftovers:
            lines += ["", "Left in the project (delete in this order):"] + [f"    {item.command}" for item in self.leftovers]
        elif self.leftovers is not None:
            lines.append("Nothing of the run is left in the project.")
        if self.notes:
            lines += ["", "### Notes", ""] + [f"- {n}" for n in self.notes]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "reportVersion": REPORT_VERSION,
            "runId": self.run_id,
            "verdict": self.verdict,
            "checks": [{"check": f.check, "ok": f.ok, "seen": f.detail} for f in self.findings],
            "timings": timings.to_json(self.milestones, self.poll_seconds),
            "gpuNode": {
                "warm": self.warm_node,
                "phases": timings.phases_json(self.milestones, warm=bool(self.warm_node)),
                "images": [image.to_json() for image in self.images],
            },
            "monitoring": [step.to_json() for step in self.monitoring],
            "watchdogDrill": None if self.watchdog_drill is None else [step.to_json() for step in self.watchdog_drill],
            "stockoutDrill": None if self.stockout_drill is None else [step.to_json() for step in self.stockout_drill],
            "assumptions": [
                {"assumption": a.key, "statement": a.statement, "result": v.result, "evidence": v.evidence} for a, v in assumptions.results(self)
            ],
            "cleanup": {
                "result": self.cleanup,
                "complete": self.cleaned,
                "leftovers": None if self.leftovers is None else [item.to_dict() for item in self.leftovers],
            },
            "notes": self.notes,
        }


def render_assumptions(report: Report) -> list[str]:
    """One line per assumption of assumptions.py, settled by this run or not."""
    lines = ["| assumption | result | evidence |", "|---|---|---|"]
    for assumption, verdict in assumptions.results(report):
        lines.append(f"| {assumption.key}: {_cell(assumption.statement)} | {verdict.result} | {_cell(verdict.evidence)} |")
    return lines


def render_images(images: list[ImagePull]) -> list[str]:
    if not images:
        return ["No image events of the GPU node's pods were read."]
    lines = ["| image | first needed by | pulling at | on the node at | kubelet's pull seconds | already present |", "|---|---|---|---|---:|---|"]
    for image in images:
        pulling = "—" if image.pulling_at is None else image.pulling_at.strftime("%H:%M:%S")
        ready = "—" if image.ready_at is None else image.ready_at.strftime("%H:%M:%S")
        seconds = "—" if image.seconds is None else f"{image.seconds:.1f}"
        lines.append(f"| {image.image} | {image.namespace}/{image.pod} | {pulling} | {ready} | {seconds} | {'yes' if image.already_present else 'no'} |")
    return lines


def render_steps(steps: list[Step], none: str) -> list[str]:
    if not steps:
        return [none]
    lines = ["| step | result | at | recorded by | seen |", "|---|---|---|---|---|"]
    for step in steps:
        at = "—" if step.at is None else step.at.strftime("%H:%M:%S")
        lines.append(f"| {step.name} | {'pass' if step.ok else 'FAIL'} | {at} | {step.recorded_by} | {_cell(step.seen)} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
