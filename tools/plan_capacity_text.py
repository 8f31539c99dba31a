"""The plan's capacity sections: the NodeProvider's node types (with the order their cost encodes),
the GPU quota of the environment per project, region, GPU class and kind, and each GPU pool's
capacity options in its order with what a node of each costs. Split from tools/plan_text.py."""

from __future__ import annotations

import math

from config import capacity as cap
from config import node_properties as props
from config.availability import FLEX_LIST_PRICE, load_availability
from config.catalog import load_catalog
from config.quota import KIND_QUOTA, QUOTA_PAGE, QUOTA_RULES
from config.stack import EnvironmentStack
from tools.plan_costs import HOURS_PER_MONTH
from tools.plan_format import money as _money
from tools.plan_format import price as _price
from tools.plan_format import table as _table
from tools.plan_model import StackPlan


def node_types_section(plan: StackPlan, env: EnvironmentStack, all_node_types: bool) -> list[str]:
    """Node types grouped by what tells them apart for a tenant (machine, GPUs, capacity type and
    rank), with their zones in one column; `--node-types` lists each one by name."""
    assert plan.node_provider is not None
    registered = plan.node_provider["spec"]["terraform"]["nodeTypes"]
    by_name = {nt.name: nt for nt in env.offer.node_types}
    lines = [
        "",
        f"NodeProvider {plan.node_provider['metadata'].get('name')}: {len(registered)} node types"
        + ("" if all_node_types else " in groups of the same shape (--node-types lists each)"),
        "  vCPU / memory: what pods can use per node (resources minus overhead.kubeReserved); USD/h: list price of the VM "
        "with its GPUs as its capacity type is sold (reserved: the reservation's rate, paid used or not; < : a discounted "
        "Flex-start price the catalog does not record, at most the on-demand one); order: the `cost` the platform compares, "
        f"not a price (rank × {cap.RANK_BAND:,} + thousandths of a USD per hour × {cap.PRICE_STEP:,} + a tie-break: config/capacity.py); max nodes: maxCapacity, a reserved slice's VMs (— : none; "
        "the platform counts a type's nodes across every tenant, so pooled types are bounded by each pool's limits and its project's quota)",
    ]
    headers = ["machine type", "GPU × count", "capacity", "rank", "vCPU", "memory GiB", "USD/h", "order (cost)" if all_node_types else "order (cost, less tie-break)", "max nodes"]
    groups: dict[tuple, list[str]] = {}
    rows_by_key: dict[tuple, list[str]] = {}
    for registered_type in registered:
        nt = by_name[registered_type["name"]]
        capacity = f"reservation {nt.properties[props.RESERVATION]} ({nt.properties[props.RESERVATION_TENANT]})" if nt.reserved else nt.capacity
        row = [
            nt.machine_type,
            f"{nt.gpu} × {nt.gpu_count}" if nt.gpu else "—",
            capacity,
            str(nt.rank),
            f"{nt.cpu_millis / 1000:g}",
            f"{nt.memory_mi / 1024:.1f}",
            _node_price(nt),
            _cost_cell(registered_type.get("cost"), nt.gpu is not None and not all_node_types),
            "—" if registered_type.get("maxCapacity") is None else str(registered_type["maxCapacity"]),
        ]
        if all_node_types:
            groups[(nt.name,)] = [nt.zone]
            rows_by_key[(nt.name,)] = [nt.name, *row]
        else:
            key = tuple(row)
            groups.setdefault(key, []).append(nt.zone)
            rows_by_key[key] = row
    if all_node_types:
        table = _table(["name", *headers, "zone"], [[*rows_by_key[k], ", ".join(z)] for k, z in groups.items()], right=[4, 5, 6, 7, 8, 9])
    else:
        table = _table([*headers, "zones"], [[*rows_by_key[k], ", ".join(z)] for k, z in groups.items()], right=[3, 4, 5, 6, 7, 8])
    lines.extend(table)
    excluded = [f"{q.gpu}: {', '.join(q.excluded)}" for q in env.offer.quota if q.excluded]
    if excluded:
        lines.append(f"  not offered, larger than the GPU quota: {'; '.join(excluded)}")
    if any(nt.usd_per_hour is None and nt.price_bound is None for nt in env.offer.node_types):
        lines.append("  'unknown' USD/h: no recorded price in this region; such a GPU type comes last in its rank, a CPU type's cost is left to the platform")
    return lines


def _cost_cell(cost: int | None, group: bool) -> str:
    """A node type's cost; in a group of zones, without the zone's tie-break (config/capacity.py)."""
    if cost is None:
        return "—"
    return f"{cost - cost % cap.PRICE_STEP}+" if group else str(cost)


def _node_price(nt) -> str:
    if nt.usd_per_hour is None and nt.price_bound is not None:
        return f"< {nt.price_bound:,.4f}"
    return _price(nt.usd_per_hour, nt.price_estimate, digits=4)


def quota_section(plan: StackPlan) -> list[str]:
    quota = plan.loaded.quota
    lines = [
        "",
        f"GPU quota of the environment ({len(quota)} line{'s' if len(quota) != 1 else ''}: every tenant's maxGpus, inline and team "
        "stacks in this repo, and every reservation, added up per project, GPU class, region and quota kind)",
    ]
    if not quota:
        lines.append("  no tenant asks for GPUs yet")
        return lines
    rows = [
        [q.scope, q.gpu, q.region, q.kind, "0 until granted" if q.new_project else str(q.quota), str(q.asked) + (f" (+{q.shared})" if q.shared else ""),
         q.state, "; ".join(q.tenants)]
        for q in quota
    ]
    lines.extend(_table(["quota of", "GPU class", "region", "kind", "quota", "asked", "state", "tenants (GPUs)"], rows, right=[4]))
    lines.append(
        "  kinds: " + "; ".join(f"{kind}: {name}" for kind, name in KIND_QUOTA.items())
        + " (config/quota.py: Spot and Flex-start draw on the preemptible quota where nodeProvider.preemptibleGpuQuota grants one, "
        "else on the on-demand one; VMs consuming a reservation and the reservation itself draw on the on-demand one; a future "
        "reservation (reservationBound) and the VMs consuming it on none, as Google charges none for it; (+n): "
        "GPUs of the other line of the same quota)"
    )
    lines.append(f"  {QUOTA_RULES}")
    for project in dict.fromkeys(q.new_project for q in quota if q.new_project):
        lines.append(f"  {project} is created by Pulumi, and a new project has no GPU quota: request it at {QUOTA_PAGE.format(project=project)}")
    for project in dict.fromkeys(q.own_project for q in quota if q.own_project):
        lines.append(
            f"  {project} is a team's own project: its quotas are its own, not the environment's numbers; check them at "
            f"{QUOTA_PAGE.format(project=project)}"
        )
    return lines


def bounded(value: float | None, cost) -> str:
    return ("≤ " if cost is not None and cost.bounded and value is not None else "") + _money(value)


def _flex_start_sale(nt) -> str:
    """How Google sells the node type's family as Flex-start (config/catalog.yaml `flexStart`): at the
    list price (G2), or discounted, a figure the catalog does not record (A2, A3, A4), whether or not
    an on-demand price bounds it."""
    shape = next(s for s in load_catalog().shapes_for(nt.gpu) if s.machine.name == nt.machine_type and s.gpu_count == nt.gpu_count)
    if load_availability().family_of(shape).flex_start == FLEX_LIST_PRICE:
        return "Flex-start at the list price"
    return "Flex-start, discounted (figure not recorded)"


def options_section(pool) -> list[str]:
    """A GPU pool's capacity options in its order, each with what one node costs: the platform takes
    the first with room (its node types' order, config/capacity.py), so this is also the order of the bill."""
    rows = []
    for order, value in enumerate(pool.option_values, 1):
        types = pool.option_types(value)
        if not types:
            continue
        nt = min(types, key=lambda t: (t.usd_per_hour if t.usd_per_hour is not None else t.price_bound or math.inf, t.vcpus))
        disk = pool.node_price(nt) if nt.reserved else None
        if nt.reserved:
            name = nt.properties[props.RESERVATION]
            vm = f"committed {_money(nt.usd_per_hour)}/h, paid by reservation {name} used or not; adds its disk"
            hourly, monthly = _money(disk), _money(None if disk is None else disk * HOURS_PER_MONTH)
            what = f"slice of {nt.max_capacity} VM{'s' if nt.max_capacity != 1 else ''} in {nt.zone}"
        else:
            price = pool.node_price(nt)
            bound = pool.node_usd_bound.get(nt.name)
            hourly = _money(price) if price is not None else (f"< {_money(bound)}" if bound is not None else "unknown")
            per_month = price if price is not None else bound
            monthly = ("< " if price is None and bound is not None else "") + _money(None if per_month is None else per_month * HOURS_PER_MONTH)
            vm = {cap.ON_DEMAND: "on-demand list price", cap.SPOT: "Spot price as read (Google may change it once a day)",
                  cap.FLEX_START: _flex_start_sale(nt)}[nt.capacity]
            zones = sorted({t.zone for t in types})
            what = f"{len(zones)} zone{'s' if len(zones) > 1 else ''} ({', '.join(zones)})"
        rows.append([str(order), value, nt.machine_type, what, hourly, monthly, vm])
    lines = [f"    options of pool {pool.name}, in order (the platform takes the first with room; per node: the cheapest shape, VM and boot disk):"]
    lines.extend(_table(["#", "option", "cheapest shape", "where", "USD/h per node", "USD/month per node", "price"], rows, indent="      ", right=[4, 5]))
    if pool.expire_after:
        lines.append(f"      Flex-start: every node of the pool expires after {pool.expire_after} (Karpenter expireAfter) and drains before Compute Engine stops the VM")
    return lines
