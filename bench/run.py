"""Benchmarks of the offline plan and of the program's evaluation, on this machine.

    python -m bench.run --quick        # or: make bench QUICK=1 — under a minute: best of 1, dev and 10 tenants
    python -m bench.run                # or: make bench — about 11 minutes: best of 5, 1 to 100 tenants
    python -m bench.run --repeat 5 --profile

Measures, and prints next to its target:
1. wall time and peak memory (max RSS) of `python -m tools.plan` in a fresh process, for the dev
   stack and for synthetic environment stacks with 1, 10, 50 and 100 inline tenants generated from
   the dev stack;
2. the program's evaluation time against the SDK floor (target: ratio <= 1.3): in fresh processes,
   `python -m bench.evaluate program` (the real program under the mock engine) against
   `python -m bench.evaluate floor` (a bare program registering as many resources of the same SDK
   classes, which loads the same lazily imported SDK modules); and, as a diagnosis, the same two in
   one warm process plus a replay of the program's exact resource graph (bench/floor.py);
3. the longest chain of resources a deployment waits on, for 1 and 100 tenants (target: equal, since
   tenants deploy in parallel);
4. that per-environment work (catalog, templates, role lists) is done once, not once per tenant.

A missed target is printed as MISSED, with a profile of where the time goes; the exit status is
non-zero only when something fails to run. Results also go to bench/results/latest.json, and the
table of docs/development.md "Performance" for this run to bench/results/table.md. The quick run
checks that everything runs and gives rough figures; the full one is what the docs report.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import ipaddress
import json
import math
import os
import pstats
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from bench.floor import floor_program, replay_program, sdk_class
from config.stack_files import PROJECT_DIR, SecureValue, list_stacks, read_stack_values

BASE_STACK = "dev"
SIZES = (1, 10, 50, 100)
QUICK_SIZES = (10,)
# How long each mode takes on the 2-core machine docs/development.md reports from, printed first.
DURATION = {"full": "about 11 minutes", "quick": "under a minute"}
RATIO_TARGET = 1.3
NS = "gpu-platform"
TENANT_POOL = ipaddress.IPv4Network("10.160.0.0/12")
RESULTS = PROJECT_DIR / "bench" / "results" / "latest.json"


# --- synthetic stacks ------------------------------------------------------------------------------


def synthetic_values(tenants: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dev stack's configuration with `tenants` inline tenants, cloned round-robin from dev's
    own: unique names of at most 16 characters, non-overlapping /22 networks from 10.160.0.0/12
    (clear of every tenant stack of this repo), GPU pools as dev's (within the quota)."""
    values = dict(base if base is not None else read_stack_values(PROJECT_DIR, BASE_STACK))
    templates = values.get(f"{NS}:tenants") or []
    if not templates:
        raise RuntimeError(f"Pulumi.{BASE_STACK}.yaml has no inline tenants to clone")
    taken = [ipaddress.IPv4Network(c) for c in _tenant_stack_cidrs()]
    free = (net for net in TENANT_POOL.subnets(new_prefix=22) if not any(net.overlaps(t) for t in taken))
    clones = []
    for i in range(tenants):
        template = templates[i % len(templates)]
        name = f"{template['name'][:11]}-{i:04d}"
        assert len(name) <= 16
        clones.append({**template, "name": name, "network": {**template.get("network", {}), "cidr": str(next(free))}})
    values[f"{NS}:tenants"] = clones
    return values


def _tenant_stack_cidrs() -> list[str]:
    cidrs = []
    for stack in list_stacks(PROJECT_DIR):
        tenant = read_stack_values(PROJECT_DIR, stack).get(f"{NS}:tenant")
        if isinstance(tenant, dict) and (tenant.get("network") or {}).get("cidr"):
            cidrs.append(tenant["network"]["cidr"])
    return cidrs


def write_project(directory: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """A project directory with this repo's Pulumi.yaml and the given stack files."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    for stack, values in stacks.items():
        config = {k: _encode(v) for k, v in values.items()}
        (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return directory


def _encode(value: Any) -> Any:
    if isinstance(value, SecureValue):
        return {"secure": value.ciphertext}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


# --- 1. the plan in a fresh process ----------------------------------------------------------------


@dataclass
class ProcessResult:
    label: str
    tenants: int
    wall_s: float
    max_rss_mib: float


def measure_process(label: str, tenants: int, argv: list[str], repeat: int) -> ProcessResult:
    """Best wall time and highest max RSS of `python <argv>` over `repeat` fresh processes."""
    walls, rss = [], []
    for _ in range(repeat):
        with tempfile.TemporaryFile() as err:
            start = time.perf_counter()
            process = subprocess.Popen([sys.executable, *argv], cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage
            walls.append(time.perf_counter() - start)
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"python {' '.join(argv)} exited {process.returncode}:\n{err.read().decode(errors='replace')}")
        rss.append(usage.ru_maxrss / 1024)  # KiB on Linux
    return ProcessResult(label, tenants, min(walls), max(rss))


def sdk_modules(types: list[str]) -> list[str]:
    """The Python modules that hold the SDK classes of `types` (what the program imports lazily)."""
    modules = set()
    for typ in types:
        cls, _ = sdk_class(typ)
        if isinstance(cls, type):
            modules.add(cls.__module__)
    return sorted(modules)


# --- 2. program vs SDK floor, in one process -------------------------------------------------------


def clear_program_caches() -> None:
    """Per-process caches of the program, so every timed evaluation pays for them as a deployment does."""
    from components.templates import read_template
    from config.catalog import load_catalog
    from config.permissions import load_roles

    for cached in (load_catalog, read_template, load_roles):
        cached.cache_clear()


class GcTimer:
    """Total time spent in garbage collection while active (gc.callbacks)."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start

    def __enter__(self) -> GcTimer:
        self.total = 0.0
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@dataclass
class EvalResult:
    label: str
    tenants: int
    resources: int
    program_s: float  # warm, in this process
    floor_s: float
    replay_s: float
    program_gc_s: float
    floor_gc_s: float
    fresh_program_s: float  # fresh process each, start-up included
    fresh_floor_s: float
    chain: list[str]
    cache: dict[str, tuple[int, int]]  # name → (hits, misses) after one evaluation

    @property
    def ratio(self) -> float:
        """The target ratio: fresh processes, as a user's `pulumi preview` starts the program."""
        return self.fresh_program_s / self.fresh_floor_s

    @property
    def warm_ratio(self) -> float:
        return self.program_s / self.floor_s

    @property
    def replay_ratio(self) -> float:
        return self.program_s / self.replay_s


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best wall time of `repeat` calls, and the GC time of that call."""
    times, gcs = [], []
    for _ in range(repeat):
        clear_program_caches()
        gc.collect()  # no GC pause carried over from the previous call
        with GcTimer() as timer:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        gcs.append(timer.total)
    best = times.index(min(times))
    return times[best], gcs[best]


def measure_eval(label: str, tenants: int, values: dict[str, Any], stack: str, project_dir: Path, repeat: int, fresh: bool = True) -> EvalResult:
    """`fresh`: also program and floor in fresh processes (the ratio target); without, their
    figures are NaN (the quick run's dev, measured warm only)."""
    from components.templates import read_template
    from config.catalog import load_catalog
    from config.permissions import load_roles
    from tools.mock_engine import run_program

    clear_program_caches()
    run = run_program(values, stack=stack, project_dir=project_dir)  # warm-up: every lazy SDK module imported
    cache = {
        "config.catalog.load_catalog": _info(load_catalog),
        "components.templates.read_template": _info(read_template),
        "config.permissions.load_roles": _info(load_roles),
    }
    types = [r.type for r in run.registrations]
    floor, replay = floor_program(types), replay_program(run.registrations)
    for bare in (floor, replay):
        check = run_program({}, stack=stack, program=bare)
        if sorted(r.type for r in check.registrations) != sorted(types):
            raise RuntimeError("a floor program does not register the same resources as the program")

    # Alternate the subjects, so drift (other load on the machine) hits all alike.
    program, floor_result, replay_result = [], [], []
    for _ in range(repeat):
        program.append(_best(lambda: run_program(values, stack=stack, project_dir=project_dir), 1))
        floor_result.append(_best(lambda: run_program({}, stack=stack, program=floor), 1))
        replay_result.append(_best(lambda: run_program({}, stack=stack, program=replay), 1))
    (program_s, program_gc), (floor_s, floor_gc), (replay_s, _) = min(program), min(floor_result), min(replay_result)

    fresh_program_s = fresh_floor_s = math.nan
    with tempfile.TemporaryDirectory(prefix="gpu-platform-bench-types-") as tmp:
        types_file = Path(tmp) / "types.json"
        types_file.write_text(json.dumps(types))
        # Alternate program and floor processes, so a busy moment of the machine hits both alike.
        program_argv = ["-m", "bench.evaluate", "program", "--project-dir", str(project_dir), "--stack", stack]
        floor_argv = ["-m", "bench.evaluate", "floor", "--types", str(types_file), "--stack", stack]
        if fresh:
            runs = [(measure_process(label, tenants, program_argv, 1), measure_process(label, tenants, floor_argv, 1)) for _ in range(repeat)]
            fresh_program_s = min(p.wall_s for p, _ in runs)
            fresh_floor_s = min(f.wall_s for _, f in runs)
    chain = [f"{r.type} {r.name}" for r in run.longest_chain()]
    return EvalResult(
        label, tenants, len(types), program_s, floor_s, replay_s, program_gc, floor_gc, fresh_program_s, fresh_floor_s, chain, cache
    )


def _info(cached: Any) -> tuple[int, int]:
    info = cached.cache_info()
    return info.hits, info.misses


AREAS = (
    ("PyYAML (pure-Python load/dump)", ("/yaml/",)),
    ("program code (config/, components/, __main__.py)", ("/config/", "/components/", "__main__.py")),
    ("mock engine (tools/)", ("/tools/",)),
    ("Pulumi SDK (pulumi, pulumi_*)", ("/pulumi/", "/pulumi_")),
    ("asyncio event loop", ("/asyncio/",)),
    ("pydantic", ("/pydantic",)),
)


def _area(filename: str) -> str:
    path = filename.replace("\\", "/")
    if path.startswith("~") or path.startswith("<"):
        return "built-ins (isinstance, dict, ...)"
    for name, needles in AREAS:
        if any(n in path for n in needles):
            return name
    return "other stdlib (traceback, pathlib, inspect, ...)"


def profile_areas(fn: Callable[[], Any]) -> tuple[dict[str, float], pstats.Stats]:
    """Own time per area of one call, under cProfile with GC off (GC is measured separately; the
    profiler sees only the main thread, not the mock monitor's executor threads)."""
    gc.collect()
    gc.disable()
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        fn()
        profiler.disable()
    finally:
        gc.enable()
    stats = pstats.Stats(profiler)
    areas: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        areas[_area(filename)] = areas.get(_area(filename), 0.0) + own
    return areas, stats


def where_time_goes(subject: EvalResult, values: dict[str, Any], stack: str, project_dir: Path) -> str:
    """Program vs floor, per area; then the program's own entry points into the expensive areas."""
    from tools.mock_engine import run_program

    run = run_program(values, stack=stack, project_dir=project_dir)
    floor = floor_program([r.type for r in run.registrations])
    program_areas, stats = profile_areas(lambda: (clear_program_caches(), run_program(values, stack=stack, project_dir=project_dir)))
    floor_areas, _ = profile_areas(lambda: run_program({}, stack=stack, program=floor))
    lines = [
        f"  garbage collection (measured, not profiled): program {subject.program_gc_s:.3f} s of {subject.program_s:.3f} s, "
        f"floor {subject.floor_gc_s:.3f} s of {subject.floor_s:.3f} s",
        "  own time per area, cProfile with GC off (profiler overhead inflates pure-Python code; compare the columns):",
    ]
    names = sorted(set(program_areas) | set(floor_areas), key=lambda a: -(program_areas.get(a, 0) - floor_areas.get(a, 0)))
    rows = [[a, f"{program_areas.get(a, 0):.3f}", f"{floor_areas.get(a, 0):.3f}", f"{program_areas.get(a, 0) - floor_areas.get(a, 0):+.3f}"] for a in names]
    rows.append(["total", f"{sum(program_areas.values()):.3f}", f"{sum(floor_areas.values()):.3f}", f"{sum(program_areas.values()) - sum(floor_areas.values()):+.3f}"])
    lines.append(_table(["area", "program s", "floor s", "difference"], rows, indent="    "))
    lines.append("  the program's calls into PyYAML and its own code, inclusive time (cProfile, GC off):")
    entries = []
    for (filename, line, name), (_, calls, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        path = filename.replace("\\", "/")
        if ("/yaml/__init__.py" in path and name in ("safe_load", "safe_dump", "safe_dump_all")) or (
            _area(filename).startswith("program code") and name not in ("<module>", "<listcomp>", "<lambda>", "<genexpr>")
        ):
            entries.append((cumulative, calls, f"{Path(path).parent.name}/{Path(path).name}:{line} {name}"))
    rows = [[f"{c:.3f}", str(n), where] for c, n, where in sorted(entries, reverse=True)[:14]]
    lines.append(_table(["incl. s", "calls", "function"], rows, indent="    "))
    return "\n".join(lines)


# --- report ----------------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]
    lines = [indent + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [headers, *rows]]
    return "\n".join(lines)


def _figure(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="measurements per number; the best is printed (default 5)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="numbers of synthetic tenants (default 1 10 50 100)")
    parser.add_argument("--profile", action="store_true", help="print where the time goes (GC, profile per area) even when the targets are met")
    parser.add_argument("--quick", action="store_true", help=f"best of 1, dev and {' and '.join(map(str, QUICK_SIZES))} tenants, no profile: {DURATION['quick']}")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.sizes = 1, list(QUICK_SIZES)
    sizes = sorted(set(args.sizes))
    largest, smallest = sizes[-1], sizes[0]
    started = time.perf_counter()

    mode = "quick" if args.quick else "full" if (args.repeat, sizes) == (5, list(SIZES)) else None
    took = f"; this takes {DURATION[mode]} ({'make bench QUICK=1' if mode == 'quick' else 'make bench'})" if mode else ""
    print(f"Benchmarks on this machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; times are the best of {args.repeat}{took}")
    print(f"Command: {' '.join(['python -m bench.run', *(argv if argv is not None else sys.argv[1:])])}")
    import tools.plan  # noqa: F401  (the program's modules, the SDK and the mock engine, as the plan imports them)
    from tools.mock_engine import run_program

    dev_values = read_stack_values(PROJECT_DIR, BASE_STACK)
    dev_tenants = len(dev_values.get(f"{NS}:tenants") or [])
    modules = sdk_modules([r.type for r in run_program(dev_values, stack=BASE_STACK).registrations])
    with tempfile.TemporaryDirectory(prefix="gpu-platform-bench-") as tmp:
        synthetic = {f"bench-{n}": synthetic_values(n) for n in sizes}
        # One project per stack: an environment stack reads every other stack file of its project.
        projects = {stack: write_project(Path(tmp) / stack, {stack: values}) for stack, values in synthetic.items()}

        # 1. The plan as a user runs it: a fresh interpreter, imports included.
        imports = "import tools.plan, " + ", ".join(modules)
        # Quick: no separate measurement of the imports alone.
        plans = [] if args.quick else [measure_process("(imports only)", 0, ["-c", imports], args.repeat)]
        plans.append(measure_process(BASE_STACK, dev_tenants, ["-m", "tools.plan", "--stack", BASE_STACK], args.repeat))
        for n in sizes:
            plans.append(measure_process(f"bench-{n}", n, ["-m", "tools.plan", "--project-dir", str(projects[f"bench-{n}"]), "--stack", f"bench-{n}"], args.repeat))
        print()
        print("1. Offline plan, fresh process each (python -m tools.plan --stack S, full text output)")
        print(_table(["stack", "tenants", "wall s", "max RSS MiB"], [[p.label, str(p.tenants), f"{p.wall_s:.2f}", f"{p.max_rss_mib:.0f}"] for p in plans]))
        if not args.quick:
            print(f"  (imports only) = python -c 'import tools.plan, <the {len(modules)} SDK modules whose classes the program instantiates>'")
        # One size alone (quick): from dev's tenants to it.
        base = next(p for p in plans if p.label == (f"bench-{smallest}" if largest > smallest else BASE_STACK))
        top = next(p for p in plans if p.label == f"bench-{largest}")
        if largest > base.tenants:
            per_tenant = (top.wall_s - base.wall_s) / (largest - base.tenants)
            per_tenant_mib = (top.max_rss_mib - base.max_rss_mib) / (largest - base.tenants)
            print(f"  per extra tenant: {per_tenant * 1000:.0f} ms, {per_tenant_mib:.2f} MiB (from {base.tenants} to {largest} tenants)")

        # 2–4. In this process, everything imported: time evaluations only.
        # Quick: dev warm only (its chain and cache figures); the fresh-process ratio at the largest size.
        evals = [measure_eval(BASE_STACK, dev_tenants, dev_values, BASE_STACK, PROJECT_DIR, args.repeat, fresh=not args.quick)]
        for n in sorted({smallest, largest}):
            evals.append(measure_eval(f"bench-{n}", n, synthetic[f"bench-{n}"], f"bench-{n}", projects[f"bench-{n}"], args.repeat))

    ratio_targets = [e for e in evals if e.label in (BASE_STACK, f"bench-{largest}") and not math.isnan(e.ratio)]
    print()
    print("2. Program evaluation vs SDK floor")
    print("  a) fresh process each, start-up included (python -m bench.evaluate program|floor): the target")
    print(
        _table(
            ["stack", "tenants", "resources", "program s", "floor s", "ratio", "target", ""],
            [
                [
                    e.label, str(e.tenants), str(e.resources), _figure(e.fresh_program_s), _figure(e.fresh_floor_s), _figure(e.ratio),
                    f"<= {RATIO_TARGET}", verdict(e.ratio <= RATIO_TARGET) if e in ratio_targets else "(info)" if not math.isnan(e.ratio) else "(not measured)",
                ]
                for e in evals
            ],
            indent="    ",
        )
    )
    print("     floor = as many resources of the same SDK classes, fewest inputs, flat: it loads the same SDK modules, none of the program's")
    print("  b) one warm process, imports done (diagnosis): program vs the flat floor, and vs a replay of the program's exact")
    print("     resource graph (same inputs, parents, providers, dependencies; generic resource classes, no program logic)")
    print(
        _table(
            ["stack", "program s", "(GC s)", "flat floor s", "(GC s)", "ratio", "replay s", "ratio"],
            [
                [
                    e.label, f"{e.program_s:.3f}", f"{e.program_gc_s:.3f}", f"{e.floor_s:.3f}", f"{e.floor_gc_s:.3f}", f"{e.warm_ratio:.2f}",
                    f"{e.replay_s:.3f}", f"{e.replay_ratio:.2f}",
                ]
                for e in evals
            ],
            indent="    ",
        )
    )
    small = evals[0] if smallest == largest else next(e for e in evals if e.label == f"bench-{smallest}")  # one size: against dev
    big = next(e for e in evals if e.label == f"bench-{largest}")
    print()
    print("3. Longest dependency chain a deployment waits on (resources created one after another)")
    print(
        _table(
            ["stack", "tenants", "chain", "target", ""],
            [
                [small.label, str(small.tenants), str(len(small.chain)), "", ""],
                [big.label, str(big.tenants), str(len(big.chain)), f"= {len(small.chain)} (tenants in parallel)", verdict(len(big.chain) == len(small.chain))],
            ],
        )
    )
    print("  chain: " + " -> ".join(link.split()[1] for link in big.chain))
    print()
    print(f"4. Per-environment work done once: cache hits/misses after one evaluation with {largest} tenants")
    targets = {"config.catalog.load_catalog": 1, "components.templates.read_template": 2, "config.permissions.load_roles": 1}
    print(
        _table(
            ["cache", "hits", "misses", "target misses", ""],
            [[name, str(big.cache[name][0]), str(big.cache[name][1]), str(t), verdict(big.cache[name][1] == t)] for name, t in targets.items()],
        )
    )

    missed = [e for e in ratio_targets if e.ratio > RATIO_TARGET]
    if (missed and not args.quick) or args.profile:
        print()
        print(f"Where the time goes ({'ratio target MISSED for ' + ', '.join(e.label for e in missed) if missed else 'requested with --profile'})")
        with tempfile.TemporaryDirectory(prefix="gpu-platform-bench-") as tmp:
            for subject in missed or ratio_targets:
                values = dev_values if subject.label == BASE_STACK else synthetic_values(subject.tenants)
                project_dir = PROJECT_DIR if subject.label == BASE_STACK else write_project(Path(tmp), {subject.label: values})
                print(f" {subject.label} ({subject.resources} resources):")
                print(where_time_goes(subject, values, subject.label, project_dir))

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "cores": os.cpu_count(),
                "repeat": args.repeat,
                "plans": [vars(p) for p in plans],
                "evaluations": [
                    {**{k: v for k, v in vars(e).items() if k != "chain"}, "ratio": e.ratio, "warm_ratio": e.warm_ratio, "replay_ratio": e.replay_ratio, "chain": len(e.chain)}
                    for e in evals
                ],
            },
            indent=2,
        )
    )
    table = docs_table(plans, evals, args.repeat)
    (RESULTS.parent / "table.md").write_text(table + "\n")
    print()
    print(f"The table of docs/development.md \"Performance\" for this run (also in {RESULTS.parent / 'table.md'}):")
    print(table)
    elapsed = time.perf_counter() - started
    print(f"\nTook {int(elapsed // 60)} min {elapsed % 60:.0f} s.")
    return 0


def docs_table(plans: list[ProcessResult], evals: list[EvalResult], repeat: int) -> str:
    """docs/development.md's table, with this run's figures (the sizes it measured)."""
    by_label = {p.label: p for p in plans}
    measured = [p for p in plans if p.tenants and p.label != BASE_STACK]
    columns = [(BASE_STACK, f"{BASE_STACK} ({by_label[BASE_STACK].tenants} tenants)")] + [(p.label, f"{p.tenants} tenant{'s' if p.tenants > 1 else ''}") for p in measured]
    evaluated = {e.label: e for e in evals}

    def row(what: str, cell: Callable[[str], str], target: str = "") -> str:
        return "| " + " | ".join([what, *(cell(label) for label, _ in columns), target]) + " |"

    lines = [
        f"| measurement (best of {repeat}) | " + " | ".join(title for _, title in columns) + " | target |",
        "|---|" + "---|" * len(columns) + "---|",
        row("`make plan`, fresh process: wall time", lambda label: f"{by_label[label].wall_s:.2f} s"),
        row("`make plan`, fresh process: peak memory", lambda label: f"{by_label[label].max_rss_mib:.0f} MiB", "≤ 400 MiB at 100"),
        row(
            "program vs SDK floor, fresh processes",
            lambda label: f"{evaluated[label].fresh_program_s:.2f} / {evaluated[label].fresh_floor_s:.2f} s = **{evaluated[label].ratio:.2f}**" if label in evaluated and not math.isnan(evaluated[label].ratio) else "not measured",
            f"≤ {RATIO_TARGET}",
        ),
        row("program vs floor, one warm process (diagnosis)", lambda label: f"{evaluated[label].warm_ratio:.2f}" if label in evaluated else ""),
        row("longest dependency chain (resources)", lambda label: str(len(evaluated[label].chain)) if label in evaluated else "", "equal"),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
