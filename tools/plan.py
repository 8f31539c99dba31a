"""Offline plan: what a stack would deploy, without the Pulumi CLI, a cloud or credentials.

    python -m tools.plan                      # the dev stack
    python -m tools.plan --stack prod --out plan-out
    python -m tools.plan --all --quiet        # every Pulumi.*.yaml, one line each (CI)

For each stack it reads Pulumi.yaml and Pulumi.<stack>.yaml the way the CLI does (project defaults,
`secure:` values kept opaque and shown as [secret]), runs the real __main__.py under Pulumi's mock
engine (tools/mock_engine.py) and prints the resource tree, the documents that matter (NodeProvider
node types, GPU quota, tenants' pools), list-price cost ceilings and every warning. Values only the
cloud can compute come back as placeholders and are labelled as such.

A tenant stack needs its environment's outputs: from --environment-outputs FILE (the output of
`pulumi stack output --json --show-secrets` of the environment stack), or else from an offline
evaluation of the environment's stack file in this project, which the plan says.

Exit status: 0 when every stack planned, 1 when one did not (its configuration problems are printed,
all at once, without a traceback), 2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pulumi
import yaml

from components.tenant_documents import GPU_OPERATOR_NAMESPACE
from components.vcluster_values import GPU_RESOURCE, VClusterValues
from config import node_properties as props
from config import versions
from config.catalog import Catalog, load_catalog
from config.errors import ConfigError
from config.permissions import AUTO_NODES, LEGACY_AUTO_NODES, load_roles
from config.stack import NS, EnvironmentStack, TenantStack, load_stack
from config.stack_files import PROJECT_DIR, SecureValue, StackFileError, list_stacks, read_stack_values, stack_file
from config.tenant import TenantPlan
from tools import isolation_plan
from tools.mock_engine import PLACEHOLDER, ProgramRun, Registration, config_strings, run_program

HOURS_PER_MONTH = 730
# A regional GKE Standard cluster without explicit node locations puts its node pools in three
# zones of the region; a zonal cluster in one.
REGIONAL_CLUSTER_ZONES = 3
NODE_PROVIDER_TYPE = "kubernetes:management.loft.sh/v1:NodeProvider"
INSTANCE_TYPE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
SECRET = "[secret]"
LEGEND = (
    f"Legend: values containing '{PLACEHOLDER}' are computed by the cloud at deploy time (IDs, endpoints, "
    f"generated passwords) and unknown offline; {SECRET} marks a secret value, never shown."
)
NOT_INCLUDED = "GKE cluster fee, load balancers (one per tenant control plane), Cloud NAT, disks, network egress"


class PlanError(Exception):
    """A stack that cannot be planned, with the message a user needs (no traceback)."""


# --- what a plan holds ---------------------------------------------------------------------------


@dataclass
class Pool:
    name: str
    gpu: str | None  # None: the tenant's CPU pool
    gpus_per_node: int | None
    max_gpus: int | None
    idle_after: str | None
    spot: bool
    limits: dict[str, str]


@dataclass
class TenantReport:
    name: str
    plan: TenantPlan
    pools: list[Pool]
    gpu_operator_version: str | None
    vcluster_yaml: str | None  # the documents as the program registered them
    gpu_operator_values: str | None
    objects: str | None
    host_namespace: str | None


@dataclass
class CostLine:
    part: str
    gpu_usd_per_hour: float | None  # every GPU pool at its limit
    cpu_usd_per_hour: float  # CPU pool / system pool at its limit
    always_on_usd_per_hour: float | None  # None: price unknown

    @property
    def ceiling_usd_per_hour(self) -> float:
        return (self.gpu_usd_per_hour or 0.0) + self.cpu_usd_per_hour

    @property
    def always_on_usd_per_month(self) -> float | None:
        return None if self.always_on_usd_per_hour is None else self.always_on_usd_per_hour * HOURS_PER_MONTH


@dataclass
class StackPlan:
    stack: str
    kind: str  # "environment" | "tenant"
    stack_path: Path
    config: dict[str, Any]  # as the program sees it, secure values masked
    config_from_defaults: set[str]
    loaded: EnvironmentStack | TenantStack
    run: ProgramRun
    catalog: Catalog
    environment_outputs: str | None = None  # tenant stacks: where the environment's outputs came from
    node_provider: dict[str, Any] | None = None  # the NodeProvider object (environment stacks)
    tenants: list[TenantReport] = field(default_factory=list)
    costs: list[CostLine] = field(default_factory=list)
    system_pool_note: str = ""
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (source, message)
    written: list[Path] = field(default_factory=list)

    @property
    def region(self) -> str:
        return self.loaded.region if isinstance(self.loaded, EnvironmentStack) else self.loaded.facts.region

    @property
    def total_usd_per_hour(self) -> float:
        return sum(c.ceiling_usd_per_hour for c in self.costs)

    @property
    def total_always_on_usd_per_month(self) -> float | None:
        parts = [c.always_on_usd_per_month for c in self.costs]
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]


# --- planning --------------------------------------------------------------------------------------


@dataclass
class EnvironmentOutputs:
    outputs: dict[str, Any]
    source: str


def plan_stack(
    stack: str,
    project_dir: Path = PROJECT_DIR,
    *,
    environment_outputs_file: Path | None = None,
    environment_cache: dict[str, EnvironmentOutputs] | None = None,
) -> StackPlan:
    """Plan one stack. Raises PlanError for anything wrong with the stack file or its environment."""
    environment_cache = environment_cache if environment_cache is not None else {}
    try:
        values = read_stack_values(project_dir, stack)
    except StackFileError as e:
        if stack_file(project_dir, stack).exists():
            raise PlanError(str(e)) from None
        known = ", ".join(list_stacks(project_dir)) or "none"
        raise PlanError(f"{e}\n  stacks in {project_dir}: {known}") from None
    catalog = load_catalog()
    try:
        # What the program itself does first, with the values as the engine hands them over.
        loaded = load_stack(config_strings(values)[0], stack=stack, project_dir=project_dir, catalog=catalog)
    except ConfigError as e:
        raise PlanError(str(e)) from None

    kind = "environment" if isinstance(loaded, EnvironmentStack) else "tenant"
    stack_outputs, source = None, None
    if isinstance(loaded, TenantStack):
        env = _environment_outputs(loaded, project_dir, environment_outputs_file, environment_cache)
        stack_outputs, source = {loaded.environment_stack: env.outputs}, env.source
    elif environment_outputs_file is not None:
        raise PlanError(f"--environment-outputs is for tenant stacks; {stack} is an environment stack")

    run = _run(values, stack, project_dir, stack_outputs)
    explicit = _explicit_keys(project_dir, stack)
    plan = StackPlan(
        stack=stack,
        kind=kind,
        stack_path=stack_file(project_dir, stack),
        config={k: _mask(v) for k, v in sorted(values.items())},
        config_from_defaults={k for k in values if k not in explicit},
        loaded=loaded,
        run=run,
        catalog=catalog,
        environment_outputs=source,
    )
    plan.warnings += [("program", w) for w in run.warnings]
    if isinstance(loaded, EnvironmentStack):
        environment_cache[stack] = EnvironmentOutputs(run.outputs, f"placeholders from an offline evaluation of {plan.stack_path.name}")
        _plan_environment(plan, loaded)
        tenant_plans: tuple[TenantPlan, ...] = loaded.tenants
    else:
        _plan_tenant_stack(plan, loaded)
        tenant_plans = (loaded.tenant,)
    plan.tenants = [_tenant_report(run, t) for t in tenant_plans]
    for tenant in plan.tenants:
        plan.costs.append(
            CostLine(
                f"tenant {tenant.name}",
                tenant.plan.gpu_usd_per_hour_ceiling,
                tenant.plan.cpu_pool.usd_per_hour_ceiling,
                tenant.plan.always_on_usd_per_hour,
            )
        )
        if tenant.vcluster_yaml is None:
            plan.warnings.append(("plan", f"tenant {tenant.name}: no VirtualClusterInstance with rendered values was registered"))
    return plan


def _run(values: dict[str, Any], stack: str, project_dir: Path, stack_outputs: dict[str, dict] | None) -> ProgramRun:
    try:
        return run_program(values, stack=stack, stack_outputs=stack_outputs, project_dir=project_dir)
    except (pulumi.RunError, ConfigError) as e:
        raise PlanError(str(e)) from None


def _environment_outputs(
    tenant: TenantStack, project_dir: Path, outputs_file: Path | None, cache: dict[str, EnvironmentOutputs]
) -> EnvironmentOutputs:
    if outputs_file is not None:
        return EnvironmentOutputs(_read_outputs_file(outputs_file, tenant.environment_stack), f"from {outputs_file}")
    env_stack = tenant.environment_stack.split("/")[-1]
    if env_stack not in cache:
        # load_stack already checked this stack file, so a failure here is the program's.
        values = read_stack_values(project_dir, env_stack)
        try:
            run = run_program(values, stack=env_stack, project_dir=project_dir)
        except (pulumi.RunError, ConfigError) as e:
            raise PlanError(
                f"stack {tenant.stack}: its environment {tenant.environment_stack} could not be evaluated offline "
                f"from {stack_file(project_dir, env_stack).name}; pass --environment-outputs FILE.\n{e}"
            ) from None
        cache[env_stack] = EnvironmentOutputs(run.outputs, f"placeholders from an offline evaluation of {stack_file(project_dir, env_stack).name}")
    return cache[env_stack]


def _read_outputs_file(path: Path, reference: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise PlanError(f"--environment-outputs {path}: cannot read it ({e.strerror})") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise PlanError(f"--environment-outputs {path}: neither JSON nor YAML ({e})") from None
    needed = ("environmentFacts", "kubeconfig")
    if not isinstance(document, dict):
        raise PlanError(f"--environment-outputs {path}: expected a mapping of output names to values")
    missing = [k for k in needed if k not in document]
    if missing:
        raise PlanError(
            f"--environment-outputs {path}: missing output(s) {', '.join(missing)}; expected the output of "
            f"`pulumi stack output --json --show-secrets --stack {reference}`"
        )
    return document


def _plan_environment(plan: StackPlan, env: EnvironmentStack) -> None:
    run = plan.run
    registered = run.of_type(NODE_PROVIDER_TYPE)
    if len(registered) != 1:
        plan.warnings.append(("plan", f"expected one NodeProvider to be registered, found {len(registered)}"))
    else:
        # Exactly what the program registered.
        inputs = registered[0].plain_inputs
        plan.node_provider = {
            "apiVersion": inputs.get("apiVersion"),
            "kind": inputs.get("kind"),
            "metadata": _ordered_metadata(inputs.get("metadata") or {}),
            "spec": _normalise(inputs.get("spec")),
        }

    if env.node_provider.legacy_infrastructure and not any("legacyInfrastructure" in m for _, m in plan.warnings):
        plan.warnings.append(("plan", _legacy_warning("nodeProvider.legacyInfrastructure: true")))
    # What the node types could claim together is in the quota table; it always exceeds the quota
    # (maxCapacity counts per node type), so only the tenants' own limits are worth a warning.
    asked: dict[str, int] = {}
    for tenant in env.tenants:
        for pool in tenant.gpu_pools:
            asked[pool.gpu] = asked.get(pool.gpu, 0) + pool.max_gpus  # type: ignore[index]
    for gpu, total in sorted(asked.items()):
        quota = env.node_provider.gpu_quota.get(gpu, 0)
        if total > quota:
            plan.warnings.append(
                ("plan", f"GPU quota: the tenants' pools may ask for {total} {gpu} GPUs together; the quota in {env.region} is {quota}")
            )

    pool = env.cluster.system_pool
    regional = env.cluster.location == env.region
    zones = REGIONAL_CLUSTER_ZONES if regional else 1
    price = env.node_provider.prices.get(pool.machine_type)
    if price is None and pool.machine_type in plan.catalog.machines:
        price = plan.catalog.machines[pool.machine_type].usd_per_hour
    where = f"regional {env.cluster.location}: {zones} zones" if regional else f"zonal {env.cluster.location}: 1 zone"
    plan.system_pool_note = (
        f"GKE system pool: {pool.machine_type}, {pool.min_nodes}–{pool.max_nodes} nodes per zone × {zones} zone{'s' if zones > 1 else ''} ({where})"
    )
    if price is None:
        plan.warnings.append(("plan", f"cluster.systemPool.machineType {pool.machine_type} has no price in the catalog; its cost is left out"))
        plan.costs.append(CostLine(f"GKE system pool ({pool.machine_type})", None, 0.0, None))
    else:
        plan.costs.append(
            CostLine(f"GKE system pool ({pool.machine_type} × {pool.min_nodes * zones}–{pool.max_nodes * zones})", None, pool.max_nodes * zones * price, pool.min_nodes * zones * price)
        )
    if pool.min_nodes == 0:
        plan.warnings.append(("plan", "cluster.systemPool.minNodes is 0, but the platform keeps at least one system node running: the always-on estimate is low"))


def _plan_tenant_stack(plan: StackPlan, stack: TenantStack) -> None:
    if stack.facts.legacy_infrastructure and not any("legacyInfrastructure" in m for _, m in plan.warnings):
        plan.warnings.append(("plan", _legacy_warning(f"environment {stack.environment_stack} sets nodeProvider.legacyInfrastructure: true, which")))


def _legacy_warning(what: str) -> str:
    roles = load_roles()
    legacy, minimal = roles.roles[LEGACY_AUTO_NODES], roles.roles[AUTO_NODES]
    return (
        f"{what} gives the vCluster Platform's identity the broad legacy role ({len(legacy.permissions)} project-wide "
        f"permissions instead of {len(minimal.permissions)}: it creates networks, firewalls and service accounts itself) "
        "and lets the official infrastructure template build every tenant's network. Use it only to migrate; the default (false) "
        "keeps tenant networks and identities in Pulumi."
    )


def _tenant_report(run: ProgramRun, tenant: TenantPlan) -> TenantReport:
    name = tenant.tenant.name
    instance = next((r for r in run.of_type(INSTANCE_TYPE) if (r.input("metadata", "name") == name)), None)
    report = TenantReport(name, tenant, [], None, None, None, None, None)
    if instance is None:
        return report
    report.host_namespace = instance.input("spec", "clusterRef", "namespace")
    template = instance.input("spec", "template") or {}
    values = (template.get("helmRelease") or {}).get("values")
    if isinstance(values, str):
        report.vcluster_yaml = values
        report.pools = _pools(values)
    for chart in template.get("charts") or []:
        if chart.get("name") == versions.GPU_OPERATOR_CHART:
            report.gpu_operator_version = chart.get("version")
            report.gpu_operator_values = chart.get("values")
    objects = template.get("objects")
    report.objects = objects if isinstance(objects, str) else None
    return report


def _pools(values: str) -> list[Pool]:
    pools = []
    for pool in VClusterValues.parse(values).dynamic_pools():
        accelerator = next(iter(pool.selected(props.ACCELERATOR)), None)
        gpu = accelerator if accelerator and accelerator != props.NO_ACCELERATOR else None
        count = next(iter(pool.selected(props.ACCELERATOR_COUNT)), None)
        pools.append(
            Pool(
                name=pool.name,
                gpu=gpu,
                gpus_per_node=int(count) if gpu and count and count.isdigit() else None,
                max_gpus=pool.gpu_limit if gpu else None,
                idle_after=pool.consolidate_after,
                spot=pool.selected(props.CAPACITY_TYPE) == [props.SPOT],
                limits={k: str(v) for k, v in pool.limits.items() if k != GPU_RESOURCE},
            )
        )
    return pools


def _explicit_keys(project_dir: Path, stack: str) -> set[str]:
    document = yaml.safe_load(stack_file(project_dir, stack).read_text()) or {}
    name = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]
    return {k if ":" in k else f"{name}:{k}" for k in (document.get("config") or {})}


def _mask(value: Any) -> Any:
    if isinstance(value, SecureValue):
        return SECRET
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def _normalise(value: Any) -> Any:
    """Registered inputs travel as protobuf Structs: every number comes back a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _ordered_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    ordered = {k: metadata[k] for k in ("name", "namespace") if k in metadata}
    ordered.update({k: dict(sorted(v.items())) if isinstance(v, dict) else v for k, v in sorted(metadata.items()) if k not in ordered})
    return ordered


def has_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return PLACEHOLDER in value
    if isinstance(value, dict):
        return any(has_placeholder(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_placeholder(v) for v in value)
    return False


def order_stacks(project_dir: Path) -> list[str]:
    """Every stack of the project, environment stacks first (tenant stacks use their outputs)."""
    environments, tenants = [], []
    for stack in list_stacks(project_dir):
        try:
            is_tenant = bool(read_stack_values(project_dir, stack).get(f"{NS}:environmentStack"))
        except StackFileError:
            is_tenant = False  # planned (and reported) with the environment stacks
        (tenants if is_tenant else environments).append(stack)
    return environments + tenants


# --- documents (--out) ---------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (inline templates, embedded YAML) as literal blocks, readable in a diff."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _represent_str)

TENANT_FILES = ("vcluster.yaml", "gpu-operator-values.yaml", "objects.yaml")


def write_documents(plan: StackPlan, out_dir: Path) -> list[Path]:
    """One YAML file per rendered document under <out>/<stack>/; files of an earlier plan of the
    same stack that no longer exist (a removed tenant) are deleted."""
    base = out_dir / plan.stack
    _remove_previous(base)
    written = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text.endswith("\n") else text + "\n")
        written.append(path)

    if plan.node_provider is not None:
        write(base / "nodeprovider.yaml", yaml.dump(plan.node_provider, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))
    for tenant in plan.tenants:
        directory = base / "tenants" / tenant.name
        for filename, text in zip(TENANT_FILES, (tenant.vcluster_yaml, tenant.gpu_operator_values, tenant.objects)):
            if text is not None:
                write(directory / filename, text)
    plan.written = written
    return written


def _remove_previous(base: Path) -> None:
    (base / "nodeprovider.yaml").unlink(missing_ok=True)
    tenants = base / "tenants"
    if not tenants.is_dir():
        return
    for directory in tenants.iterdir():
        if directory.is_dir():
            for filename in TENANT_FILES:
                (directory / filename).unlink(missing_ok=True)
            if not any(directory.iterdir()):
                directory.rmdir()


# --- text output -----------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ", right: Iterable[int] = ()) -> list[str]:
    right = set(right)
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)] if rows else [len(h) for h in headers]

    def line(cells: list[str]) -> str:
        parts = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value if value else '""'
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False).strip().removesuffix("...").strip()


def _resource_tree(run: ProgramRun) -> list[str]:
    index = {r.urn: r for r in run.registrations}
    children: dict[str, list[Registration]] = {}
    for r in run.registrations:
        children.setdefault(r.parent if r.parent in index else "", []).append(r)

    def order(r: Registration) -> tuple:
        return (0 if r.type.startswith("pulumi:providers:") else 1 if r.custom else 2, r.type, r.name)

    def size(urn: str) -> int:
        return sum(1 + size(c.urn) for c in children.get(urn, ()))

    lines: list[str] = []

    def walk(parent: str, prefix: str) -> None:
        kids = sorted(children.get(parent, ()), key=order)
        for i, r in enumerate(kids):
            last = i == len(kids) - 1
            n = size(r.urn)
            extra = "" if r.custom else f"  ({n} resource{'s' if n != 1 else ''})"
            flags = "  [protected]" if r.protect else ""
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{r.type}  {r.name}{extra}{flags}")
            walk(r.urn, prefix + ("   " if last else "│  "))

    walk("", "  ")
    return lines


def _type_counts(run: ProgramRun) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in run.registrations:
        counts[r.type] = counts.get(r.type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _node_type_rows(plan: StackPlan) -> list[list[str]]:
    assert plan.node_provider is not None and isinstance(plan.loaded, EnvironmentStack)
    prices = {nt.name: nt.usd_per_hour for nt in plan.loaded.offer.node_types}
    rows = []
    for nt in plan.node_provider["spec"]["terraform"]["nodeTypes"]:
        p, res = nt["properties"], nt["resources"]
        gpu = p.get(props.ACCELERATOR)
        rows.append(
            [
                nt["name"],
                p.get(props.INSTANCE_TYPE, "?"),
                f"{gpu} × {p.get(props.ACCELERATOR_COUNT)}" if gpu and gpu != props.NO_ACCELERATOR else "—",
                "spot" if p.get(props.CAPACITY_TYPE) == props.SPOT else "on-demand",
                _cpu(res.get("cpu", "")),
                _memory(res.get("memory", "")),
                f"{prices[nt['name']]:.4f}" if nt["name"] in prices else "?",
                str(nt.get("cost", "—")),
                "—" if nt.get("maxCapacity") is None else str(nt["maxCapacity"]),
            ]
        )
    return rows


def _cpu(quantity: str) -> str:
    return f"{int(quantity[:-1]) / 1000:g}" if quantity.endswith("m") else quantity


def _memory(quantity: str) -> str:
    return f"{int(quantity[:-2]) / 1024:.1f}" if quantity.endswith("Mi") else quantity


def render_text(plan: StackPlan) -> str:
    out: list[str] = []
    add = out.append
    loaded = plan.loaded
    add(f"Offline plan of stack {plan.stack} ({plan.kind} stack): {plan.stack_path.name} + Pulumi.yaml")
    add("  The real __main__.py under Pulumi's mock engine: no cloud, no credentials, nothing created.")
    if isinstance(loaded, TenantStack):
        add(f"  environment: {loaded.environment_stack}")
        add(f"  environment outputs: {plan.environment_outputs}")
    add(LEGEND)

    add("")
    add(f"Configuration ({len(plan.config)} keys; (default) = from Pulumi.yaml)")
    for key, value in plan.config.items():
        add(f"  {key} = {_compact(value)}{'  (default)' if key in plan.config_from_defaults else ''}")

    run = plan.run
    components = sum(1 for r in run.registrations if not r.custom)
    add("")
    add(f"Resources ({len(run.registrations)} registered: {components} components, {len(run.registrations) - components} resources)")
    out.extend(_resource_tree(run))
    add("")
    add("Resources by type")
    counts = _type_counts(run)
    out.extend(_table(["count", "type"], [[str(n), t + ("  (component)" if not _is_custom(run, t) else "")] for t, n in counts.items()], right=[0]))

    if plan.node_provider is not None and isinstance(loaded, EnvironmentStack):
        rows = _node_type_rows(plan)
        add("")
        add(f"NodeProvider {plan.node_provider['metadata'].get('name')}: {len(rows)} node types (vCPU and memory offered to pods after the node reserve)")
        out.extend(
            _table(
                ["name", "machine type", "GPU × count", "capacity", "vCPU", "mem GiB", "USD/h", "cost", "max capacity"],
                rows,
                right=[4, 5, 6, 7, 8],
            )
        )
        add("")
        add(f"GPU quota in {loaded.region} (what all node types could claim together; shapes larger than the quota are not offered)")
        out.extend(
            _table(
                ["GPU type", "quota", "claimable", "excluded shapes"],
                [[q.gpu, str(q.quota), str(q.claimable), ", ".join(q.excluded) or "—"] for q in loaded.offer.quota],
                right=[1, 2],
            )
        )

    add("")
    add(f"Tenants ({len(plan.tenants)})")
    if not plan.tenants:
        add("  none inline; teams' own stacks add them")
    for tenant in plan.tenants:
        t = tenant.plan.tenant
        access = ", ".join([*(f"user {u}" for u in t.access.users), *(f"team {g}" for g in t.access.teams)]) or "none"
        add(
            f"  {tenant.name}: network {t.network.cidr}, host namespace {tenant.host_namespace or '?'}, "
            f"GPU Operator {tenant.gpu_operator_version or '?'} (namespace {GPU_OPERATOR_NAMESPACE}), access: {access}"
        )
        add(f"    {isolation_plan.tenant_line(plan, tenant.plan)}")
        rows = [
            [
                p.name,
                p.gpu or "(CPU)",
                "—" if p.gpus_per_node is None else str(p.gpus_per_node),
                "—" if p.max_gpus is None else str(p.max_gpus),
                p.idle_after or "?",
                "spot" if p.spot else "on-demand",
                ", ".join(f"{k} {v}" for k, v in p.limits.items()),
            ]
            for p in tenant.pools
        ]
        out.extend(_table(["pool", "GPU class", "GPUs/node", "max GPUs", "idle after", "capacity", "limits"], rows, indent="    ", right=[2, 3]))

    add("")
    catalog = plan.catalog
    add(
        f"Cost ceiling: list-price estimates, not quotes (catalog prices of {catalog.price_date} for {catalog.price_region}"
        + (f"; this stack runs in {plan.region}, where prices differ" if plan.region != catalog.price_region else "")
        + f"; {HOURS_PER_MONTH} h per month)"
    )
    if plan.kind == "environment":
        add("  ceiling: every pool at its limit; always on: the GKE system pool at its minimum and each tenant's cheapest CPU node")
    else:
        add("  ceiling: every pool at its limit; always on: the tenant's cheapest CPU node (the environment's own costs are in its plan)")
    if plan.system_pool_note:
        add(f"  {plan.system_pool_note}")
    add(f"  not included: {NOT_INCLUDED}")
    rows = [
        [
            c.part,
            "—" if c.gpu_usd_per_hour is None else _money(c.gpu_usd_per_hour),
            _money(c.cpu_usd_per_hour),
            _money(c.ceiling_usd_per_hour),
            _money(c.always_on_usd_per_hour),
            _money(c.always_on_usd_per_month),
        ]
        for c in plan.costs
    ]
    total_label = "environment total" if plan.kind == "environment" else "tenant stack total"
    always_on_total = plan.total_always_on_usd_per_month
    rows.append(
        [
            total_label,
            _money(sum(c.gpu_usd_per_hour or 0.0 for c in plan.costs)),
            _money(sum(c.cpu_usd_per_hour for c in plan.costs)),
            _money(plan.total_usd_per_hour),
            _money(None if always_on_total is None else always_on_total / HOURS_PER_MONTH),
            _money(always_on_total),
        ]
    )
    out.extend(
        _table(["part", "GPU USD/h", "CPU USD/h", "ceiling USD/h", "always-on USD/h", "always-on USD/month"], rows, right=[1, 2, 3, 4, 5])
    )
    if plan.kind == "environment":
        team_stacks = _team_stacks(plan)
        if team_stacks:
            add(f"  tenants in their own stacks ({', '.join(team_stacks)}) are priced in their own plans")

    add("")
    add("Stack outputs")
    for name, value in sorted(run.outputs.items()):
        secret = name in run.secret_outputs
        shown = SECRET if secret else _output_value(value)
        note = "  (computed by the cloud at deploy time)" if has_placeholder(value) else ""
        add(f"  {name} = {shown}{note}")

    if plan.written:
        add("")
        add(f"Documents written ({len(plan.written)})")
        out.extend(f"  {p}" for p in plan.written)

    add("")
    if plan.warnings:
        add(f"Warnings ({len(plan.warnings)})")
        for source, message in plan.warnings:
            add(f"  WARNING ({source}): {message}")
    else:
        add("Warnings: none")
    return "\n".join(out) + "\n"


def _is_custom(run: ProgramRun, typ: str) -> bool:
    return any(r.custom for r in run.registrations if r.type == typ)


def _output_value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
        if len(text) <= 100:
            return text
        return f"{{{len(value)} keys}}" if isinstance(value, dict) else f"[{len(value)} items]"
    text = str(value)
    return text if "\n" not in text else f"({text.count(chr(10)) + 1} lines)"


def _team_stacks(plan: StackPlan) -> list[str]:
    project_dir = plan.stack_path.parent
    stacks = []
    for other in list_stacks(project_dir):
        try:
            reference = str(read_stack_values(project_dir, other).get(f"{NS}:environmentStack") or "")
        except StackFileError:
            continue
        if reference.split("/")[-1] == plan.stack:
            stacks.append(other)
    return stacks


def render_quiet(plan: StackPlan) -> str:
    return (
        f"ok    {plan.stack}: {plan.kind} stack, {len(plan.run.registrations)} resources, {len(plan.tenants)} tenant(s), "
        f"ceiling {plan.total_usd_per_hour:,.2f} USD/h, always on {_money(plan.total_always_on_usd_per_month)} USD/month, "
        f"{len(plan.warnings)} warning(s)"
    )


# --- JSON output -----------------------------------------------------------------------------------


def summary(plan: StackPlan) -> dict[str, Any]:
    run = plan.run
    loaded = plan.loaded
    result: dict[str, Any] = {
        "stack": plan.stack,
        "ok": True,
        "kind": plan.kind,
        "stackFile": plan.stack_path.name,
        "region": plan.region,
        "config": plan.config,
        "resources": {
            "total": len(run.registrations),
            "components": sum(1 for r in run.registrations if not r.custom),
            "byType": _type_counts(run),
        },
        "nodeTypes": [],
        "quota": [],
        "tenants": [],
        "costs": {
            "basis": "list-price estimates",
            "priceDate": plan.catalog.price_date,
            "priceRegion": plan.catalog.price_region,
            "hoursPerMonth": HOURS_PER_MONTH,
            "notIncluded": NOT_INCLUDED,
            "parts": [
                {
                    "part": c.part,
                    "gpuUsdPerHour": _round(c.gpu_usd_per_hour),
                    "cpuUsdPerHour": _round(c.cpu_usd_per_hour),
                    "usdPerHourCeiling": _round(c.ceiling_usd_per_hour),
                    "alwaysOnUsdPerHour": _round(c.always_on_usd_per_hour),
                    "alwaysOnUsdPerMonth": _round(c.always_on_usd_per_month),
                }
                for c in plan.costs
            ],
            "usdPerHourCeiling": _round(plan.total_usd_per_hour),
            "alwaysOnUsdPerMonth": _round(plan.total_always_on_usd_per_month),
        },
        "outputs": {k: (SECRET if k in run.secret_outputs else v) for k, v in sorted(run.outputs.items())},
        "placeholderOutputs": sorted(k for k, v in run.outputs.items() if has_placeholder(v)),
        "warnings": [{"source": s, "message": m} for s, m in plan.warnings],
        "documents": [str(p) for p in plan.written],
    }
    if isinstance(loaded, TenantStack):
        result["environmentStack"] = loaded.environment_stack
        result["environmentOutputs"] = plan.environment_outputs
    if isinstance(loaded, EnvironmentStack) and plan.node_provider is not None:
        prices = {nt.name: nt for nt in loaded.offer.node_types}
        result["nodeProvider"] = plan.node_provider["metadata"].get("name")
        result["nodeTypes"] = [
            {
                "name": nt["name"],
                "machineType": prices[nt["name"]].machine_type,
                "gpu": prices[nt["name"]].gpu,
                "gpuCount": prices[nt["name"]].gpu_count,
                "spot": prices[nt["name"]].spot,
                "zone": prices[nt["name"]].zone,
                "cpuMillis": prices[nt["name"]].cpu_millis,
                "memoryMi": prices[nt["name"]].memory_mi,
                "usdPerHour": prices[nt["name"]].usd_per_hour,
                "cost": nt.get("cost"),
                "maxCapacity": nt.get("maxCapacity"),
            }
            for nt in plan.node_provider["spec"]["terraform"]["nodeTypes"]
        ]
        result["quota"] = [{"gpu": q.gpu, "quota": q.quota, "claimable": q.claimable, "excluded": list(q.excluded)} for q in loaded.offer.quota]
    for tenant in plan.tenants:
        cost = next(c for c in plan.costs if c.part == f"tenant {tenant.name}")
        result["tenants"].append(
            {
                "name": tenant.name,
                **isolation_plan.tenant_fields(plan, tenant.plan),
                "cidr": tenant.plan.tenant.network.cidr,
                "hostNamespace": tenant.host_namespace,
                "gpuOperatorVersion": tenant.gpu_operator_version,
                "pools": [
                    {
                        "name": p.name,
                        "gpu": p.gpu,
                        "gpusPerNode": p.gpus_per_node,
                        "maxGpus": p.max_gpus,
                        "idleAfter": p.idle_after,
                        "spot": p.spot,
                        "limits": p.limits,
                    }
                    for p in tenant.pools
                ],
                "gpuUsdPerHourCeiling": _round(cost.gpu_usd_per_hour),
                "cpuUsdPerHourCeiling": _round(cost.cpu_usd_per_hour),
                "usdPerHourCeiling": _round(cost.ceiling_usd_per_hour),
                "alwaysOnUsdPerMonth": _round(cost.always_on_usd_per_month),
            }
        )
    return result


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# --- command line ----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.plan",
        description="Offline plan of a stack: the real program under Pulumi's mock engine, no cloud and no credentials.",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--stack", default="dev", help="stack to plan, from Pulumi.<stack>.yaml (default: dev)")
    which.add_argument("--all", action="store_true", help="every Pulumi.*.yaml of the project, environment stacks first")
    p.add_argument("--out", type=Path, metavar="DIR", help="write each rendered document as YAML under DIR/<stack>/")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a machine-readable summary (one object; with --all {\"stacks\": [...]})")
    output.add_argument("--quiet", action="store_true", help="one line per stack (CI); problems still go to stderr")
    p.add_argument(
        "--environment-outputs",
        type=Path,
        metavar="FILE",
        help="tenant stacks: the environment stack's outputs, JSON or YAML (`pulumi stack output --json --show-secrets`); "
        "default: an offline evaluation of the environment's stack file",
    )
    p.add_argument("--project-dir", type=Path, default=PROJECT_DIR, metavar="DIR", help="directory with Pulumi.yaml and the stack files (default: this repository)")
    p.add_argument(
        "--compare-to",
        metavar="GIT_REF",
        help="also plan the stack as committed at GIT_REF and print what changes: created, deleted, replaced (e.g. a tenant moving to its own project), updated",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    project_dir = args.project_dir.resolve()
    if not (project_dir / "Pulumi.yaml").is_file():
        print(f"error: {project_dir} has no Pulumi.yaml", file=sys.stderr)
        return 2
    if args.all and args.environment_outputs is not None:
        print("error: --environment-outputs applies to one tenant stack (--stack), not to --all", file=sys.stderr)
        return 2
    stacks = order_stacks(project_dir) if args.all else [args.stack]
    if not stacks:
        print(f"error: no Pulumi.<stack>.yaml in {project_dir}", file=sys.stderr)
        return 1

    cache: dict[str, EnvironmentOutputs] = {}
    summaries: list[dict[str, Any]] = []
    failed = 0
    for i, stack in enumerate(stacks):
        try:
            plan = plan_stack(stack, project_dir, environment_outputs_file=args.environment_outputs, environment_cache=cache)
            if args.out is not None:
                write_documents(plan, args.out)
            changes = isolation_plan.compare_plan(plan, args.compare_to) if args.compare_to else None
        except (PlanError, isolation_plan.CompareError) as e:
            failed += 1
            _report_failure(stack, str(e), args, summaries)
            continue
        except Exception:  # a bug in the program or the plan, not in the stack file: keep the traceback
            failed += 1
            _report_failure(stack, "internal error (a bug, not a problem of the stack file):\n" + traceback.format_exc(), args, summaries)
            continue
        if args.json:
            summaries.append({**summary(plan), **({"changes": changes.to_dict()} if changes else {})})
        elif args.quiet:
            print(render_quiet(plan), flush=True)
        else:
            if i:
                print("\n" + "=" * 100 + "\n")
            print(render_text(plan), end="", flush=True)
        if changes and not args.json:
            host = plan.loaded.facts.project
            print(("\n" if not args.quiet else "") + isolation_plan.render_changes(changes, host), end="", flush=True)
    if args.json:
        print(json.dumps(summaries[0] if not args.all else {"stacks": summaries}, indent=2, default=str))
    return 1 if failed else 0


def _report_failure(stack: str, message: str, args: argparse.Namespace, summaries: list[dict[str, Any]]) -> None:
    if args.json:
        summaries.append({"stack": stack, "ok": False, "error": message})
    elif args.quiet:
        print(f"FAIL  {stack}: {message.splitlines()[0]}", flush=True)
    print(f"plan of stack {stack} failed:\n{message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
