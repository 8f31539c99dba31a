"""The offline plan as text: what `make plan` prints. Sections are separated by blank lines, each
starting with its title, so they can be read (and tested) one at a time."""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from components.tenant_documents import GPU_OPERATOR_NAMESPACE
from config.stack import NS, EnvironmentStack, TenantStack
from config.stack_files import StackFileError, list_stacks, read_stack_values
from config.tenant_plan import BUSY
from tools import isolation_plan, monitoring_plan, reliability_plan
from tools.mock_engine import MOCK_ADDRESS_RANGE, PLACEHOLDER, ProgramRun, Registration
from tools.plan_capacity_text import bounded as _bounded
from tools.plan_capacity_text import node_types_section, options_section, quota_section
from tools.plan_costs import HOURS_PER_MONTH, NOT_INCLUDED
from tools.plan_format import money as _money
from tools.plan_format import price as _price
from tools.plan_format import table as _table
from tools.plan_model import SECRET, StackPlan, has_placeholder

LEGEND = (
    f"Legend: values containing '{PLACEHOLDER}' are computed by the cloud at deploy time (IDs, endpoints) "
    f"and unknown offline, and so are addresses in {MOCK_ADDRESS_RANGE} (static NAT addresses "
    f"Google assigns; a documentation-only range, RFC 5737, stands in for them); {SECRET} marks a secret value, never shown."
)
# The first line of every document `--out` writes: the same stand-ins appear in them.
DOCUMENT_HEADER = (
    f"# Rendered by the offline plan (tools/plan.py): values containing '{PLACEHOLDER}' and addresses in "
    f"{MOCK_ADDRESS_RANGE} stand in for what the cloud computes at deploy time.\n"
)


def render_text(plan: StackPlan, *, all_node_types: bool = False) -> str:
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

    add("")
    add("Pinned versions (what this stack installs)")
    out.extend(f"  {what}: {version}" for what, version in plan.versions)

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
        out.extend(node_types_section(plan, loaded, all_node_types))
    out.extend(quota_section(plan))
    out.extend(_tenants(plan))
    out.extend(monitoring_plan.section(plan))
    out.extend(["", render_violations(plan)])
    out.extend(_costs(plan))

    add("")
    add("Stack outputs")
    for name, value in sorted(run.outputs.items()):
        secret = name in run.secret_outputs
        shown = SECRET if secret else _output_value(name, value)
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


def _tenants(plan: StackPlan) -> list[str]:
    lines = ["", f"Tenants ({len(plan.tenants)}): a pool's busy and ceiling USD/h as the costs below define them"]
    if not plan.tenants:
        lines.append("  none inline; teams' own stacks add them")
    pool_costs = {(c.tenant, c.pool): c for c in plan.costs.pools}
    for tenant in plan.tenants:
        t = tenant.plan.tenant
        access = ", ".join([*(f"user {u}" for u in t.access.users), *(f"team {g}" for g in t.access.teams)]) or "none"
        lines.append(
            f"  {tenant.name}: network {t.network.cidr}, host namespace {tenant.host_namespace or '?'}, "
            f"GPU Operator {tenant.gpu_operator_version or '?'} (namespace {GPU_OPERATOR_NAMESPACE}), access: {access}"
        )
        lines.append(f"    {isolation_plan.tenant_line(plan, tenant.plan)}")
        lines.extend(f"    {line}" for line in reliability_plan.tenant_lines(plan, tenant))
        lines.append(f"    {monitoring_plan.tenant_line(plan, tenant.plan)}")
        lines.append(f"    {_prefetch_line(tenant)}")
        rows = []
        for p in tenant.pools:
            cost = pool_costs.get((tenant.name, p.name))
            rows.append(
                [
                    p.name,
                    p.gpu or "(CPU)",
                    "—" if p.gpus_per_node is None else str(p.gpus_per_node),
                    "—" if p.max_gpus is None else str(p.max_gpus),
                    p.idle_after or "?",
                    ", ".join(p.options) or "any",
                    ", ".join(p.machine_types) or ", ".join(cost.machine_types if cost else ()),
                    ", ".join(p.zones) or "all",
                    ", ".join(f"{k} {v}" for k, v in p.limits.items()) or "—",
                    _warm_cell(p, cost),
                    p.first_gpu or "—",
                    _bounded(cost.busy if cost else None, cost),
                    _bounded(cost.ceiling if cost else None, cost) + (f" ({cost.ceiling_shape})" if cost and cost.ceiling_shape else ""),
                ]
            )
        lines.extend(
            _table(
                ["pool", "GPU class", "GPUs/node", "max GPUs", "idle after", "capacity options (in order)", "machine types", "zones", "limits",
                 "warm nodes (always on)", "first GPU", "busy USD/h", "ceiling USD/h"],
                rows,
                indent="    ",
                right=[2, 3, 11],
            )
        )
        for pool in tenant.plan.gpu_pools:
            lines.extend(options_section(pool))
    return lines


def _warm_cell(pool, cost) -> str:
    """A pool's warm nodes with what they cost per hour and per month, running or idle."""
    if not pool.warm_nodes:
        return "none" if pool.gpu else "—"
    machine = ", ".join(pool.warm_machine_types) or "?"
    warm = cost.warm if cost else None
    month = cost.warm_per_month if cost else None
    return f"{pool.warm_nodes} × {machine}: {_money(warm)} USD/h, {_money(month)} USD/month"


def _prefetch_line(tenant) -> str:
    images = tenant.prefetch_images
    if not images:
        return (
            f"image prefetch: none (the images of GPU Operator {tenant.gpu_operator_version or '?'} are not recorded in "
            "config/charts/; the kubelet pulls them one by one)"
        )
    counts = ", ".join(f"{gpu} {len(found)}" for gpu, found in images.items())
    return f"image prefetch: each GPU node pulls its GPU Operator images at once as containerd starts (images per GPU type: {counts})"


def _costs(plan: StackPlan) -> list[str]:
    costs = plan.costs
    regional = costs.prices
    lines = [""]
    if regional is None:
        lines.append(f"Costs: unknown. The catalog records no prices for {costs.region}; nothing here is priced with another region's figures")
    else:
        estimates = sorted(s.name for s in regional.sources.values() if s.estimate)
        lines.append(
            f"Costs in USD: list prices of {costs.region}, not quotes ({HOURS_PER_MONTH} h per month; "
            f"≈ marks figures from estimates: {', '.join(estimates) or 'none'}; sources in config/catalog.yaml)"
        )
        lines.extend(_price_sources(regional))
    lines.append(f"  always on: with no workload, reservations included (billed used or not); busy: {BUSY};")
    lines.append("  ceiling: every pool's limits fully used by the most expensive shape they admit. A node: its VM with its GPUs and its boot disk.")
    lines.append(f"  not included (usage-based): {NOT_INCLUDED}")
    rows = [
        [
            line.part,
            _price(line.always_on, line.estimate),
            _price(line.always_on_per_month, line.estimate),
            _price(line.busy, line.estimate),
            _price(line.ceiling, line.estimate),
        ]
        for line in costs.lines
    ]
    total_label = "environment total" if plan.kind == "environment" else "tenant stack total"
    estimate = any(line.estimate for line in costs.lines)
    rows.append([total_label, *(_total(costs, a, estimate) for a in ("always_on", "always_on_per_month", "busy", "ceiling"))])
    lines.extend(_table(["part", "always on USD/h", "always on USD/month", "busy USD/h", "ceiling USD/h"], rows, right=[1, 2, 3, 4]))
    if any(p.bounded for p in costs.pools):
        lines.append("  a pool with discounted Flex-start is counted at the on-demand price, an upper bound: its figures are at most these")
    if _rounding_shows(costs):
        lines.append("  every figure is rounded to the cent on its own: a total adds the unrounded figures, so its column's rows may differ from it by cents")
    for why in costs.unknown:
        lines.append(f"  unknown: {why}")
    share = costs.load_balancer_share
    if share is not None:
        n = len(costs.control_planes)
        lines.append(
            f"  load balancers: {n} tenant control plane{'s' if n > 1 else ''} in the environment ({', '.join(costs.control_planes)}), "
            f"one forwarding rule each in the host project: {_money(costs.forwarding_rules, 4)} USD/h together (one charge for the "
            f"first five, each further rule on top), {_money(share, 4)} USD/h counted per tenant"
        )
    if plan.kind == "environment":
        team_stacks = _team_stacks(plan)
        if team_stacks:
            lines.append(f"  tenants in their own stacks ({', '.join(team_stacks)}) are priced in their own plans")
    else:
        lines.append("  the environment's own parts (GKE fee, system pool, host NAT) are in its plan")
    return lines


# How each source kind's figures came to be, for the lines under the costs' title.
_HOW = {"google": "read {read} on Google's page", "catalog": "read {read}", "derived": "derived, not read", "recorded": "recorded earlier, not re-read"}


def _price_sources(regional) -> list[str]:
    """One line per way the region's figures came to be: which were read on its `read` date, which
    were derived or recorded earlier (never "read" on that date), each with its sources' names."""
    by_how: dict[str, list[str]] = {}
    for name, figures in regional.figures_by_source().items():
        kind = regional.sources[name].kind
        by_how.setdefault(_HOW.get(kind, kind).format(read=regional.read), []).append(f"{', '.join(figures)} ({name})")
    return [f"  {how}: {'; '.join(parts)}" for how, parts in by_how.items()]


def _rounding_shows(costs) -> bool:
    """Whether some column's rounded rows add up to other than its rounded total."""
    for attribute in ("always_on", "always_on_per_month", "busy", "ceiling"):
        values = [getattr(line, attribute) for line in costs.lines]
        if None not in values and round(sum(round(v, 2) for v in values), 2) != round(sum(values), 2):
            return True
    return False


def render_violations(plan: StackPlan) -> str:
    """The policy pack's verdict: every mandatory violation in full (never shortened), each naming
    its policy and resource, as `pulumi preview --policy-pack policy` reports them."""
    mandatory = plan.mandatory_violations
    if not mandatory:
        return f"Policy pack (policy/, as `pulumi preview --policy-pack policy`): no mandatory violation in {len(plan.run.registrations)} resources"
    lines = [f"Policy pack (policy/, as `pulumi preview --policy-pack policy`): {len(mandatory)} mandatory violation(s); `pulumi up` would stop before any change"]
    for v in mandatory:
        lines.append(f"  MANDATORY {v.policy} on {v.resource}:")
        lines.extend(f"    {line}" for line in v.message.splitlines())
    return "\n".join(lines)


def render_quiet(plan: StackPlan) -> str:
    costs = plan.costs
    if plan.mandatory_violations:
        return f"FAIL  {plan.stack}: {len(plan.mandatory_violations)} mandatory policy violation(s) (policy/); they follow on stderr"
    return (
        f"ok    {plan.stack}: {plan.kind} stack, {len(plan.run.registrations)} resources, {len(plan.tenants)} tenant(s), "
        f"always on {_money(costs.total('always_on_per_month'))} USD/month, busy {_money(costs.total('busy'))} USD/h, "
        f"ceiling {_money(costs.total('ceiling'))} USD/h, {len(plan.warnings)} warning(s)"
    )


def _total(costs, attribute: str, estimate: bool) -> str:
    """A total, or "unknown" with what the known parts add up to (a lower bound)."""
    total = costs.total(attribute)
    if total is not None:
        return _price(total, estimate)
    known = sum(v for v in (getattr(line, attribute) for line in costs.lines) if v is not None)
    return f"unknown (≥ {known:,.2f})"


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


def _is_custom(run: ProgramRun, typ: str) -> bool:
    return any(r.custom for r in run.registrations if r.type == typ)


def _output_value(name: str, value: Any) -> str:
    """An output in one line: the structured ones summarized (`--json` carries them whole)."""
    if name == "environmentFacts" and isinstance(value, dict):
        tenants = [t.get("name") for t in value.get("tenants") or []]
        prices = value.get("pricesRead")
        return (
            f"environment {value.get('environment')}, project {value.get('project')}, region {value.get('region')} "
            f"({', '.join(value.get('zones') or [])}), {len(value.get('nodeTypes') or [])} node types of "
            f"{', '.join(value.get('gpuTypes') or [])}, quota {json.dumps(value.get('gpuQuota'))}, "
            f"inline tenants: {', '.join(tenants) or 'none'}, prices read {prices or 'never (none recorded)'}"
        )
    if name == "tenants" and isinstance(value, dict):
        return f"{len(value)} tenant(s): " + "; ".join(
            f"{n} (namespace {t.get('hostNamespace')}, GPU budget {_money(t.get('gpuBudgetUsdPerHour'))} USD/h)" for n, t in value.items()
        ) if value else "none"
    if name == "nodeTypes" and isinstance(value, list):
        return f"{len(value)} node types (names and properties; see the NodeProvider section)"
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


