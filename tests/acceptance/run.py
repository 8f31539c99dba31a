"""`make acceptance PROJECT=<id>`: deploy an ephemeral environment with one tenant into a real GCP
project, check the live system, destroy it, always (docs/acceptance.md "Acceptance test").

    python -m tests.acceptance.run --project <id> [--region …] [--zones a,b] [--gpu …]
    python -m tests.acceptance.run --cleanup     # destroy runs that did not clean up after themselves

Exit status: 0 passed (or skipped without --require), 1 a check failed, 2 bad settings,
3 the cleanup is incomplete (the report lists what to delete), 4 skipped with --require,
130 interrupted (cleaned up).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from pulumi import automation as auto

from config.catalog import GUEST
from config.errors import ConfigError
from config.stack import EnvironmentStack

from . import capacity_runs, prerequisites, restore_drill
from .kube import Finding
from .leftovers import LISTINGS, find_by_hand, scan
from .pulumi_stack import Backend, RunDir, create, outputs, prepare_program, record, resource_count, select
from .compare import ReportError, load_report, side_by_side
from .report import Report
from .scenario import POLL_SECONDS, Live, run_checks
from .settings import (
    RunNames,
    Settings,
    cost_estimate,
    load_run_stack,
    new_run_id,
    render_cost,
    run_names,
    stack_values,
)
from .shell import CommandError, Gcloud, GoogleApi, Kubectl, write_private
from .waiting import CheckFailed, InterruptGuard, Interrupted

PASSED, CHECK_FAILED, BAD_SETTINGS, NOT_CLEANED, SKIPPED_REQUIRED, INTERRUPTED = 0, 1, 2, 3, 4, 130
DESTROY_ATTEMPTS = 3
_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        print(f"acceptance: {line}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    defaults = Settings(project="")
    parser = argparse.ArgumentParser(prog="python -m tests.acceptance.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default="", help="GCP project id of the environment (billing; GPU quota in shared mode)")
    parser.add_argument("--team-project", default="", help="an existing GCP project for the tenant (project mode; its GPU quota)")
    parser.add_argument("--isolation", default="", help="project or shared (default: project with --team-project, else shared)")
    parser.add_argument("--region", default=defaults.region)
    parser.add_argument("--zones", default="", help="comma-separated zones of the region (default <region>-a,<region>-b)")
    parser.add_argument("--gpu", default=defaults.gpu)
    parser.add_argument("--gpu-quota", type=int, default=defaults.gpu_quota)
    parser.add_argument("--gpus-per-node", type=int, default=defaults.gpus_per_node)
    parser.add_argument("--backend", default="", help="Pulumi backend URL (default: a file backend in the run's temporary directory)")
    parser.add_argument("--idle-margin", type=int, default=defaults.idle_margin_seconds, help="seconds allowed beyond idleAfter")
    parser.add_argument("--node-timeout", type=int, default=defaults.node_timeout_seconds, help="seconds for the GPU node to appear")
    parser.add_argument("--warm-nodes", type=int, default=defaults.warm_nodes, help="warm nodes in the GPU pool: 0 or 1")
    parser.add_argument("--compare", default="", help="an earlier run's report.json: print both runs' timings side by side")
    parser.add_argument("--out", default="acceptance-out", help="where reports and run records go")
    parser.add_argument("--require", action="store_true", help="missing prerequisites fail instead of skipping (CI)")
    parser.add_argument("--cleanup", action="store_true", help="destroy every run under --out that is not cleaned up")
    parser.add_argument("--restore-drill", action="store_true", help="also back the tenant up, delete its host namespace, restore it and check it")
    parser.add_argument("--watchdog-drill", action="store_true", help="also make a GPU node lose its GPU and check that the watchdog removes it")
    parser.add_argument("--stockout-drill", action="store_true", help="make the pool's first option fail and check that the Job gets the next")
    parser.add_argument("--flex-start", action="store_true", help="the pool's node from Flex-start (a GPU Google sells so, e.g. nvidia-l4)")
    parser.add_argument("--reservation", default="", help="the pool's node from this existing reservation of the tenant's project")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    zones = [z.strip() for z in args.zones.split(",") if z.strip()] or [f"{args.region}-a", f"{args.region}-b"]
    return Settings(
        project=args.project.strip(),
        team_project=args.team_project.strip(),
        isolation=args.isolation.strip(),
        region=args.region.strip(),
        zones=tuple(zones),
        gpu=args.gpu.strip(),
        gpu_quota=args.gpu_quota,
        gpus_per_node=args.gpus_per_node,
        backend=args.backend.strip(),
        idle_margin_seconds=args.idle_margin,
        node_timeout_seconds=args.node_timeout,
        restore_drill=args.restore_drill,
        watchdog_drill=args.watchdog_drill,
        warm_nodes=args.warm_nodes,
        stockout_drill=args.stockout_drill,
        flex_start=args.flex_start,
        reservation=args.reservation.strip(),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if args.cleanup:
        return cleanup_recorded_runs(out)
    settings = settings_from(args)
    run_id = new_run_id()
    earlier = None
    if args.compare:
        try:
            earlier = load_report(Path(args.compare))  # before anything is deployed
        except ReportError as e:
            say(f"COMPARE={args.compare}: {e}")
            return BAD_SETTINGS
    env = None
    if settings.project:
        problems = settings.problems()
        if problems:
            say("; ".join(problems))
            return BAD_SETTINGS
        if settings.reservation:
            # Its zone, shape and count are what the run declares: read them first (gcloud, read only).
            needs = prerequisites.missing(settings)
            if needs:
                print(prerequisites.skip_line(needs), flush=True)
                return SKIPPED_REQUIRED if args.require else PASSED
            try:
                listing = Gcloud(settings.vm_project).json("compute", "reservations", "list", f"--filter=name={settings.reservation}")
            except CommandError as e:
                say(f"RESERVATION={settings.reservation}: could not list the reservations of project {settings.vm_project}: {e}")
                return BAD_SETTINGS
            found = capacity_runs.found_reservation(listing, settings.reservation, settings.vm_project, settings.zones)
            if isinstance(found, str):
                say(found)
                return BAD_SETTINGS
            settings = replace(settings, reservation_found=found)
        try:
            env = load_run_stack(settings, run_id)  # offline: a bad GPU or zone fails here, before anything
        except ConfigError as e:
            say(f"the run's configuration is invalid:\n{e}")
            return BAD_SETTINGS
    needs = prerequisites.missing(settings)
    if needs:
        print(prerequisites.skip_line(needs), flush=True)
        return SKIPPED_REQUIRED if args.require else PASSED
    assert env is not None
    try:
        return AcceptanceRun(settings, env, run_id, out, earlier=earlier).execute()
    except Interrupted:  # a fourth interrupt, after the cleanup was aborted
        return NOT_CLEANED


@dataclass
class AcceptanceRun:
    settings: Settings
    env: EnvironmentStack
    run_id: str
    out: Path
    temp_root: Path | None = None  # where the run directory goes (default: the system's)
    earlier: dict[str, Any] | None = None  # COMPARE: an earlier run's report.json, shown beside this one

    def __post_init__(self) -> None:
        self.names = run_names(self.env, self.run_id)
        self.out_dir = self.out / self.run_id
        self.run_dir = RunDir(Path(tempfile.mkdtemp(prefix=f"gpu-platform-acceptance-{self.run_id}-", dir=self.temp_root)))
        self.backend = Backend.choose(self.settings.backend, self.run_dir)
        self.report = Report(self.run_id, POLL_SECONDS)
        self.guard = InterruptGuard(say)

    def execute(self) -> int:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.save_record(cleaned=False)
        where = f"its own project {self.names.vm_project}" if self.names.isolation == "project" else "the same project, shared"
        say(f"run {self.run_id}: stack {self.names.stack} in project {self.names.project}, cluster {self.names.cluster}, tenant {self.names.tenant} in {where}")
        for line in render_cost(cost_estimate(self.env, restore_drill=self.settings.restore_drill, watchdog_drill=self.settings.watchdog_drill), self.env.facts.prices_read):
            say(line)
        say(f"state and program copy in {self.run_dir.root}; logs and report in {self.out_dir}")
        stack = None
        self.guard.install()
        try:
            prepare_program(self.run_dir)
            stack = create(self.run_dir, self.backend, self.names.stack, stack_values(self.settings, self.run_id))
            say("pulumi up (a fresh environment takes about 20 minutes)")
            stack.up(on_output=self.log("pulumi-up.log"), color="never", suppress_progress=True)
            self.report.add(Finding("pulumi up", True, "environment and tenant deployed"), say)
            self.check(outputs(stack))
        except CheckFailed as e:
            # The checks that depend on this one did not run: the run cannot pass.
            self.report.add(Finding("every check ran", False, f"stopped at: {e}"), say)
        except auto.CommandError as e:
            self.report.add(Finding("pulumi up", False, _tail(str(e))), say)
        except Interrupted as e:
            self.report.interrupted = str(e)
            say(f"{e}: stopping the checks, destroying the run's resources")
        except Exception as e:  # noqa: BLE001 - whatever broke, the cleanup below must run
            self.report.add(Finding("the run itself", False, f"{type(e).__name__}: {e}"), say)
            self.log("error.log")(traceback.format_exc())
        finally:
            self.guard.cleaning = True
            self.cleanup(stack)
            self.finish()
        return self.exit_code()

    def check(self, stack_outputs: dict[str, Any]) -> None:
        kubeconfig = write_private(self.run_dir.host_kubeconfig, stack_outputs["kubeconfig"])
        gpu_machines = {nt.machine_type: nt.attach == GUEST for nt in self.env.offer.node_types if nt.gpu == self.names.gpu}
        live = Live(
            names=self.names,
            settings=self.settings,
            host=Kubectl(kubeconfig),
            gcloud=Gcloud(self.names.vm_project),
            # Backup for GKE's long operations (--wait-for-completion), in the host cluster's project.
            host_gcloud=functools.partial(Gcloud(self.names.project).json, timeout=restore_drill.BACKUP_TIMEOUT_SECONDS),
            report=self.report,
            workdir=self.run_dir.root,
            google_get=GoogleApi().get,  # the monitoring checks: Cloud Monitoring's query API
            gpu_machines=gpu_machines,
            say=say,
        )
        run_checks(live, stack_outputs)

    def cleanup(self, stack: auto.Stack | None) -> None:
        try:
            # No stack: it could not even be created, so nothing was deployed.
            destroyed = stack is None or destroy(stack, self.log("pulumi-destroy.log"))
            self.report.leftovers = scan_project(self.names)
            removed = stack is None or (destroyed and remove(stack))
            self.report.cleaned = removed and self.report.leftovers == []
            self.report.cleanup = (
                "destroyed, stack removed" if removed else "DESTROY INCOMPLETE: the stack still holds resources"
            ) + ("" if self.report.leftovers is not None else "; the leftover scan could not run")
        except Interrupted:
            self.report.cleanup = "CLEANUP ABORTED by repeated interrupts"
        if not self.report.cleaned:
            self.report.notes += manual_cleanup(self.names, self.backend, self.run_dir, self.report.leftovers)
        self.save_record(cleaned=self.report.cleaned)
        if self.report.cleaned:
            shutil.rmtree(self.run_dir.root, ignore_errors=True)

    def finish(self) -> None:
        lines = self.report.render()
        document = {**self.report.to_json(), "settings": self.settings.to_dict(), "names": self.names.to_dict()}
        if self.earlier is not None:
            lines += ["", *side_by_side(self.earlier, document)]
        (self.out_dir / "report.md").write_text("\n".join(lines) + "\n")
        record(self.out_dir / "report.json", document)
        print("\n".join(lines), flush=True)
        say(f"report: {self.out_dir / 'report.md'} and report.json")

    def exit_code(self) -> int:
        if not self.report.cleaned:
            return NOT_CLEANED
        if self.report.interrupted:
            return INTERRUPTED
        return PASSED if self.report.checks_passed else CHECK_FAILED

    def log(self, name: str) -> Callable[[str], None]:
        path = self.out_dir / name

        def write(line: str) -> None:
            with _print_lock:
                with path.open("a") as f:
                    f.write(line + "\n")
                print(f"  | {line}", flush=True)

        return write

    def save_record(self, *, cleaned: bool) -> None:
        record(
            self.out_dir / "run.json",
            {
                "runId": self.run_id,
                "stack": self.names.stack,
                "runDir": str(self.run_dir.root),
                "backend": self.backend.url,
                "secretsProvider": self.backend.secrets_provider,
                "names": self.names.to_dict(),
                "cleaned": cleaned,
            },
        )


def destroy(stack: auto.Stack, log: Callable[[str], None]) -> bool:
    """`pulumi destroy` until the state is empty: a failed attempt is retried after a refresh (which
    also clears creates an interrupted `up` left pending; the leftover scan catches what they made)."""
    for attempt in range(1, DESTROY_ATTEMPTS + 1):
        try:
            if attempt > 1:
                stack.refresh(clear_pending_creates=True, on_output=log, color="never", suppress_progress=True)
            stack.destroy(on_output=log, color="never", suppress_progress=True, continue_on_error=True)
            return True
        except auto.CommandError as e:
            say(f"destroy attempt {attempt} of {DESTROY_ATTEMPTS} failed: {_tail(str(e))}")
    return False


def remove(stack: auto.Stack) -> bool:
    """`pulumi stack rm`, only once the state holds nothing but the stack itself."""
    try:
        if resource_count(stack) > 1:  # more than the stack resource itself
            return False
        stack.workspace.remove_stack(stack.name)
        return True
    except auto.CommandError as e:
        say(f"could not remove the stack: {_tail(str(e))}")
        return False


def scan_project(names: RunNames):
    """The leftover scan of every project the run used (None: one could not be listed)."""
    found = []
    for project in names.projects:
        gcloud = Gcloud(project)
        try:
            listings = {kind: gcloud.json(*(a.format(region=names.region) for a in args)) or [] for kind, args in LISTINGS.items()}
        except CommandError as e:
            say(f"the leftover scan could not list project {project}: {e}")
            return None
        found += scan(listings, names, project)
    return found


def manual_cleanup(names: RunNames, backend: Backend, run_dir: RunDir, leftovers) -> list[str]:
    notes = [f"to retry the destroy: make acceptance-cleanup (or by hand: {backend.by_hand(run_dir, names.stack)})"]
    if leftovers:
        notes += ["delete what is left, in this order:"] + [f"`{item.command}`" for item in leftovers]
    else:
        notes += ["find what is left by hand:"] + [f"`{command}`" for command in find_by_hand(names)]
    return notes


def cleanup_recorded_runs(out: Path) -> int:
    """Destroy every recorded run under `out` that did not clean up (CI runs this after a cancelled
    job; users after a failed run)."""
    guard = InterruptGuard(say)
    guard.install()
    guard.cleaning = True
    status = PASSED
    records = sorted(out.glob("*/run.json"))
    for path in records:
        data = json.loads(path.read_text())
        if data.get("cleaned"):
            continue
        names = RunNames.from_dict(data["names"])
        run_dir = RunDir(Path(data["runDir"]))
        backend = Backend(data["backend"], data.get("secretsProvider"))
        say(f"run {names.run_id}: destroying stack {names.stack}")
        try:
            stack = select(run_dir, backend, names.stack) if run_dir.program.exists() else None
        except Exception as e:  # noqa: BLE001 - no CLI, no state: say so, scan, and list what to delete
            say(f"run {names.run_id}: cannot open its stack ({_tail(str(e))})")
            stack = None
        destroyed = stack is not None and destroy(stack, lambda line: print(f"  | {line}", flush=True))
        leftovers = scan_project(names)
        cleaned = destroyed and remove(stack) and leftovers == []
        data["cleaned"] = cleaned
        record(path, data)
        if cleaned:
            shutil.rmtree(run_dir.root, ignore_errors=True)
            say(f"run {names.run_id}: cleaned up")
        else:
            status = NOT_CLEANED
            for note in manual_cleanup(names, backend, run_dir, leftovers):
                say(note)
    if not records:
        say(f"no recorded runs under {out}")
    return status


def _tail(text: str, lines: int = 8) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


if __name__ == "__main__":
    sys.exit(main())
