"""The offline plan as JSON (`--json`): the same figures as the text, machine-readable. Money is in
USD; every key says its unit (`UsdPerHour`, `UsdPerMonth`); null means unknown."""

from __future__ import annotations

from typing import Any

from config.stack import EnvironmentStack, TenantStack
from tools import isolation_plan, monitoring_plan, reliability_plan
from tools.plan_costs import HOURS_PER_MONTH, NOT_INCLUDED
from tools.plan_model import SECRET, StackPlan, has_placeholder
from tools.plan_text import _type_counts


def summary(plan: StackPlan) -> dict[str, Any]:
    run = plan.run
    loaded = plan.loaded
    costs = plan.costs
    regional = costs.prices
    result: dict[str, Any] = {
        "stack": plan.stack,
        "ok": not plan.mandatory_violations,
        "policy": [
            {"policy": v.policy, "level": v.level.value, "resource": v.resource, "message": v.message} for v in plan.policy
        ],
        "kind": plan.kind,
        "stackFile": plan.stack_path.name,
        "region": plan.region,
        "config": plan.config,
        "versions": [{"what": what, "version": version} for what, version in plan.versions],
        "resources": {
            "total": len(run.registrations),
            "components": sum(1 for r in run.registrations if not r.custom),
            "byType": _type_counts(run),
        },
        "nodeTypes": [],
        "quota": [
            {
                "scope": q.scope, "gpu": q.gpu, "region": q.region, "kind": q.kind, "quota": q.quota, "sharedWith": q.shared, "asked": q.asked, "exceeded": q.exceeded, "state": q.state,
                "newProject": q.new_project is not None, "ownProject": q.own_project is not None, "requestQuotaAt": q.request_url, "tenants": list(q.tenants),
            }
            for q in loaded.quota
        ],
        "tenants": [],
        "costs": {
            "currency": "USD",
            "region": costs.region,
            "pricesRead": regional.read if regional else None,
            "estimateSources": sorted(s.name for s in regional.sources.values() if s.estimate) if regional else [],
            "priceSources": [
                {"name": name, "kind": regional.sources[name].kind, "read": regional.read if regional.sources[name].read_on_date else None, "figures": figures}
                for name, figures in regional.figures_by_source().items()
            ]
            if regional
            else [],
            "loadBalancers": {
                "controlPlanes": list(costs.control_planes),
                "forwardingRulesUsdPerHour": _round(costs.forwarding_rules),
                "perTenantUsdPerHour": _round(costs.load_balancer_share),
            },
            "hoursPerMonth": HOURS_PER_MONTH,
            "notIncluded": NOT_INCLUDED,
            "unknown": list(costs.unknown),
            "parts": [
                {
                    "part": line.part,
                    "tenant": line.tenant,
                    "estimate": line.estimate,
                    "alwaysOnUsdPerHour": _round(line.always_on),
                    "alwaysOnUsdPerMonth": _round(line.always_on_per_month),
                    "busyUsdPerHour": _round(line.busy),
                    "ceilingUsdPerHour": _round(line.ceiling),
                }
                for line in costs.lines
            ],
            "alwaysOnUsdPerHour": _round(costs.total("always_on")),
            "alwaysOnUsdPerMonth": _round(costs.total("always_on_per_month")),
            "busyUsdPerHour": _round(costs.total("busy")),
            "ceilingUsdPerHour": _round(costs.total("ceiling")),
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
        by_name = {nt.name: nt for nt in loaded.offer.node_types}
        result["nodeProvider"] = plan.node_provider["metadata"].get("name")
        result["nodeTypes"] = [
            {
                "name": registered["name"],
                "machineType": by_name[registered["name"]].machine_type,
                "gpu": by_name[registered["name"]].gpu,
                "gpuCount": by_name[registered["name"]].gpu_count,
                "capacity": by_name[registered["name"]].capacity,
                "rank": by_name[registered["name"]].rank,
                "option": by_name[registered["name"]].option,
                "zone": by_name[registered["name"]].zone,
                "resources": registered["resources"],
                "kubeReserved": (registered.get("overhead") or {}).get("kubeReserved"),
                "podCpuMillis": by_name[registered["name"]].cpu_millis,
                "podMemoryMi": by_name[registered["name"]].memory_mi,
                "usdPerHour": by_name[registered["name"]].usd_per_hour,
                "priceBoundUsdPerHour": by_name[registered["name"]].price_bound,
                "priceEstimate": by_name[registered["name"]].price_estimate,
                "cost": registered.get("cost"),
                "maxCapacity": registered.get("maxCapacity"),
            }
            for registered in plan.node_provider["spec"]["terraform"]["nodeTypes"]
        ]
    pool_costs = {(c.tenant, c.pool): c for c in costs.pools}
    for tenant in plan.tenants:
        parts = [line for line in costs.lines if line.tenant == tenant.name]
        result["tenants"].append(
            {
                "name": tenant.name,
                **isolation_plan.tenant_fields(plan, tenant.plan),
                "reliability": reliability_plan.tenant_fields(plan, tenant),
                "monitoring": monitoring_plan.tenant_fields(plan, tenant.plan),
                "cidr": tenant.plan.tenant.network.cidr,
                "hostNamespace": tenant.host_namespace,
                "gpuOperatorVersion": tenant.gpu_operator_version,
                "prefetchImages": tenant.prefetch_images,
                "pools": [
                    {
                        "name": p.name,
                        "gpu": p.gpu,
                        "gpusPerNode": p.gpus_per_node,
                        "maxGpus": p.max_gpus,
                        "idleAfter": p.idle_after,
                        "capacityOptions": p.options,
                        "expireAfter": p.expire_after,
                        "machineTypes": p.machine_types or list(pool_costs[(tenant.name, p.name)].machine_types),
                        "zones": p.zones,
                        "limits": p.limits,
                        "warmNodes": p.warm_nodes,
                        "warmMachineTypes": p.warm_machine_types,
                        "warmUsdPerHour": _round(pool_costs[(tenant.name, p.name)].warm) if (tenant.name, p.name) in pool_costs else None,
                        "warmUsdPerMonth": _round(pool_costs[(tenant.name, p.name)].warm_per_month) if (tenant.name, p.name) in pool_costs else None,
                        "firstGpu": p.first_gpu,
                        "busyUsdPerHour": _round(pool_costs[(tenant.name, p.name)].busy) if (tenant.name, p.name) in pool_costs else None,
                        "ceilingUsdPerHour": _round(pool_costs[(tenant.name, p.name)].ceiling) if (tenant.name, p.name) in pool_costs else None,
                    }
                    for p in tenant.pools
                ],
                "alwaysOnUsdPerHour": _round(_sum(line.always_on for line in parts)),
                "alwaysOnUsdPerMonth": _round(_sum(line.always_on_per_month for line in parts)),
                "busyUsdPerHour": _round(_sum(line.busy for line in parts)),
                "ceilingUsdPerHour": _round(_sum(line.ceiling for line in parts)),
            }
        )
    result["monitoring"] = monitoring_plan.environment_fields(plan)  # environment stacks; None for a team stack
    return result


def _sum(values) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
