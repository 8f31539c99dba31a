"""Cloud Monitoring dashboards as the Dashboard API's JSON (`gcp.monitoring.Dashboard.dashboard_json`,
monitoring.googleapis.com v1 `Dashboard`), generated from the plans the program deploys: one per
environment (every team, through the metrics scope), one per team that keeps `monitoring.dashboard`.
Pure; tests parse the documents with Google's own Dashboard types (google-cloud-monitoring-dashboards).
"""

from __future__ import annotations

import json
from typing import Any

from config.tenant_plan import BUSY, TenantPlan

from . import monitoring_queries as q

COLUMNS = 48  # the mosaic layout's width


def team_dashboard_name(environment: str, tenant: str) -> str:
    return f"GPUs of team {tenant} ({environment})"


def environment_dashboard_name(environment: str) -> str:
    return f"GPUs of every team ({environment})"


def _query(promql: str, unit: str | None = None) -> dict[str, Any]:
    query: dict[str, Any] = {"prometheusQuery": promql}
    if unit:
        query["unitOverride"] = unit
    return query


# Legends name series by their labels, as `${label_name}` (the Dashboard API's `legendTemplate`,
# google-cloud-monitoring-dashboards 2.22 types/xychart.py `XyChart.DataSet.legend_template`).


def _chart(title: str, promql: str, *, legend: str, unit: str | None = None, stacked: bool = False, thresholds: list[dict] | None = None) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "dataSets": [
            {
                "timeSeriesQuery": _query(promql, unit),
                "plotType": "STACKED_AREA" if stacked else "LINE",
                "legendTemplate": legend,
                "targetAxis": "Y1",
            }
        ],
        "yAxis": {"label": unit or "", "scale": "LINEAR"},
    }
    if thresholds:
        chart["thresholds"] = thresholds
    return {"title": title, "xyChart": chart}


def _scorecard(title: str, promql: str) -> dict[str, Any]:
    return {"title": title, "scorecard": {"timeSeriesQuery": _query(promql), "sparkChartView": {"sparkChartType": "SPARK_LINE"}}}


def _text(title: str, markdown: str) -> dict[str, Any]:
    return {"title": title, "text": {"content": markdown, "format": "MARKDOWN"}}


def _layout(rows: list[list[tuple[dict[str, Any], int]]], heights: list[int]) -> dict[str, Any]:
    """Rows of (widget, width) laid out left to right, top to bottom."""
    tiles, y = [], 0
    for row, height in zip(rows, heights):
        x = 0
        for widget, width in row:
            tiles.append({"xPos": x, "yPos": y, "width": width, "height": height, "widget": widget})
            x += width
        assert x <= COLUMNS, "a row wider than the layout"
        y += height
    return {"columns": COLUMNS, "tiles": tiles}


def _gpu_rows(tenant: str | None) -> list[list[tuple[dict[str, Any], int]]]:
    legend = "${node} GPU ${gpu} ${modelName} ${namespace}/${pod}"
    return [
        [
            (_chart("GPU utilization (DCGM_FI_DEV_GPU_UTIL)", q.gpu_utilization(tenant), legend=legend, unit="%"), 24),
            (_chart("GPU memory used", q.gpu_memory_used_percent(tenant), legend=legend, unit="%"), 24),
        ],
        [
            (_chart("SM activity (DCGM_FI_PROF_SM_ACTIVE)", q.sm_activity_percent(tenant), legend=legend, unit="%"), 24),
            (_chart("Power draw", q.gpu_power(tenant), legend=legend, unit="W"), 24),
        ],
    ]


def team_dashboard(plan: TenantPlan, *, environment: str, project: str, cost_view: str | None) -> dict[str, Any]:
    """One team's GPUs: allocated, pending, VMs per pool, use per GPU and pod, and the GPU nodes'
    cost now against the plan's busy and ceiling (reference lines)."""
    name = plan.tenant.name
    pools = ", ".join(f"{p.name} (≤ {p.max_gpus} × {p.gpu}, {p.capacity_label})" for p in plan.gpu_pools)
    where = f"Metrics: project `{project}`, every series labelled `tenant=\"{name}\"` (Metrics Explorer, PromQL)."
    cost = f" Cost per day: BigQuery view `{cost_view}`, `WHERE team = '{name}'`." if cost_view else ""
    rows: list[list[tuple[dict[str, Any], int]]] = [
        [(_text("About", f"Team **{name}** in environment **{environment}**. GPU pools: {pools}. {where}{cost}"), 48)],
        [
            (_scorecard("GPUs allocated", q.gpus_allocated(name)), 12),
            (_scorecard("GPU pods waiting for a node", f"sum({q.pending_gpu_pods(name)}) or vector(0)"), 12),
            (_scorecard("GPU VMs", f"count({q.gpu_nodes(name)}) or vector(0)"), 12),
            (_scorecard("Average GPU utilization", q.team_utilization(name)), 12),
        ],
    ]
    pool_chart = _chart("GPU VMs by pool", q.gpu_vms_by_pool(plan), legend="${pool}", stacked=True)
    cost_query = q.gpu_node_cost(plan)
    busy, ceiling = plan.gpu_busy_usd_per_hour, plan.gpu_usd_per_hour_ceiling
    if cost_query is not None and busy is not None and ceiling is not None:
        thresholds = [
            {"label": f"busy {busy:.2f} USD/h (plan: {BUSY.split(';')[0]})", "value": round(busy, 4), "color": "YELLOW", "direction": "ABOVE", "targetAxis": "Y1"},
            {"label": f"ceiling {ceiling:.2f} USD/h (every pool at its limits)", "value": round(ceiling, 4), "color": "RED", "direction": "ABOVE", "targetAxis": "Y1"},
        ]
        cost_widget = _chart("GPU nodes now, USD/h at list prices", cost_query, legend="GPU nodes", unit="USD/h", thresholds=thresholds)
    else:
        cost_widget = _text("GPU nodes, USD/h", "No recorded list prices in this region: no cost estimate (see the plan's Costs).")
    rows.append([(pool_chart, 24), (cost_widget, 24)])
    rows.append(_capacity_row(name))
    rows += _gpu_rows(name)
    return {"displayName": team_dashboard_name(environment, name), "mosaicLayout": _layout(rows, [6, 8, 16, 16, 16, 16]), "labels": {"gpu-platform": ""}}


def _capacity_row(tenant: str) -> list[tuple[dict[str, Any], int]]:
    """A team's GPU options that cannot be had (stockouts, quota), per option, from the capacity
    fallback's metrics (components/capacity_fallback.py)."""
    option = "${pool} ${option} ${zone}"
    return [
        (_chart("GPU options out of capacity: minutes since each failed first", f"(time() - {q.options_out(tenant)}) / 60", legend=f"{option} ${{node_type}}", unit="min"), 24),
        (_chart("GPU node claims failed in the last hour, per option and why", q.claim_failures(tenant), legend=f"{option} ${{reason}}", stacked=True), 24),
    ]


def environment_dashboard(*, environment: str, project: str, teams: tuple[str, ...], cost_view: str | None) -> dict[str, Any]:
    """Every team of the environment, side by side (series by `tenant`)."""
    cost = f" Cost per team and day: BigQuery view `{cost_view}`." if cost_view else " Cost per team: billing export is not set up yet (see the plan)."
    by_team = "${tenant}"
    rows: list[list[tuple[dict[str, Any], int]]] = [
        [(_text("About", f"Environment **{environment}**: metrics of project `{project}` and every team project in its metrics scope. Teams: {', '.join(teams) or 'none yet'}.{cost}"), 48)],
        [
            (_chart("GPUs allocated per team", q.gpus_allocated(), legend=by_team, stacked=True), 16),
            (_chart("GPU pods waiting for a node, per team", q.pending_gpu_pods(), legend=by_team, stacked=True), 16),
            (_chart("Average GPU utilization per team", q.team_utilization(), legend=by_team, unit="%"), 16),
        ],
        [
            (_chart("GPU VMs per team and capacity type", q.gpu_vms_by_capacity(), legend=f"{by_team} ${{{q.ACCELERATOR}}} ${{{q.CAPACITY_TYPE}}}", stacked=True), 24),
            (_chart("GPU options out of capacity, per team and option", q.options_out_count(), legend=f"{by_team} ${{pool}} ${{option}}", stacked=True), 24),
        ],
        *_gpu_rows(None),
    ]
    return {"displayName": environment_dashboard_name(environment), "mosaicLayout": _layout(rows, [6, 16, 16, 16, 16]), "labels": {"gpu-platform": ""}}


def dashboard_json(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True)
