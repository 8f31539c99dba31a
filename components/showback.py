"""Showback: cost per team and day from Cloud Billing export to BigQuery, as one view per
environment. Pure; tests parse the SQL with a BigQuery-dialect parser and resolve every column
against the export's documented schema (tests/data/billing-export-standard-schema.yaml).

A team is its project in project mode: every cost of the project is the team's. A shared team is
the VM label `tenant` in the environment's project (templates/node/main.tf labels its VMs and
their boot disks; Compute Engine labels reach the export's `labels` column); the rest of the
environment's project is `(environment)`: the host cluster, and shared teams' networks and NAT.
Net cost is `cost` plus its `credits` (negative amounts: sustained use, Spot, promotions), as
Google's example queries add them. GPU-hours are Compute Engine usage of SKUs whose description
names a GPU, in their pricing unit (hours).

`cost` is in the billing account's currency and covers all of a team's costs (in project mode,
everything in its project); the plan's GPU ceiling covers the team's GPU nodes only, in US dollars
at list prices. So the view also has the GPU nodes' own net cost in US dollars, the figure to hold
against the ceiling: line items labelled `gpu=true`, which templates/node/main.tf puts on every
GPU node's VM and boot disk (CPU nodes get `gpu=false`); a VM's GPUs are usage of the VM. In the
standard export, `labels` holds the labels of the resource whose usage the line item is, and
`currency_conversion_rate` is the rate from US dollars to the billing account's currency, so the
cost in US dollars is `cost` divided by it ("Structure of Standard data export",
https://cloud.google.com/billing/docs/how-to/export-data-bigquery-tables/standard-usage).

Billing export itself is switched on in the console only (no API): README/docs say how; until
`monitoring.showback.billingExportTable` names the table it writes, only the dataset exists and the
plan says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENVIRONMENT_TEAM = "(environment)"
# The labels templates/node/main.tf gives a node's VM and boot disk: its tenant, and whether it is a
# GPU node (tests/test_node_template_evaluated.py checks them against the template's output).
TENANT_LABEL = "tenant"
GPU_NODE_LABEL = ("gpu", "true")
# Columns of the view, in order (what docs/observability.md's queries select).
VIEW_COLUMNS = ("usage_date", "team", "cost", "currency", "gpu_hours", "gpu_node_cost_usd", "gpu_ceiling_usd_per_day")
_SAFE = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class TeamCost:
    team: str
    project: str | None  # its own project (project mode); None: shared, by VM label
    gpu_ceiling_usd_per_hour: float | None  # the plan's GPU ceiling; None: no recorded prices


def _literal(text: str) -> str:
    """A string literal of a name we generated or validated (DNS labels, project ids)."""
    assert _SAFE.match(text), text
    return f"'{text}'"


def cost_view_sql(*, billing_table: str, environment_project: str, teams: tuple[TeamCost, ...]) -> str:
    own = [t for t in teams if t.project]
    projects = ", ".join(_literal(p) for p in dict.fromkeys([environment_project, *(t.project for t in own)]))
    by_project = ""
    if own:
        whens = " ".join(f"WHEN {_literal(t.project)} THEN {_literal(t.team)}" for t in own)  # type: ignore[arg-type]
        by_project = f"\n      CASE project.id {whens} END,"
    ceilings = ", ".join(
        f"STRUCT({_literal(t.team)} AS team, {round(t.gpu_ceiling_usd_per_hour * 24, 2)} AS gpu_ceiling_usd_per_day)"
        for t in teams
        if t.gpu_ceiling_usd_per_hour is not None
    )
    env = _literal(environment_project)
    gpu_key, gpu_value = GPU_NODE_LABEL
    return f"""-- GPU platform: cost per team and day (generated; see docs/observability.md).
WITH line_items AS (
  SELECT
    DATE(usage_start_time) AS usage_date,
    COALESCE({by_project}
      IF(project.id = {env}, (SELECT l.value FROM UNNEST(labels) AS l WHERE l.key = {_literal(TENANT_LABEL)}), NULL),
      IF(project.id = {env}, '{ENVIRONMENT_TEAM}', NULL)
    ) AS team,
    cost + IFNULL((SELECT SUM(c.amount) FROM UNNEST(credits) AS c), 0) AS net_cost,
    currency,
    currency_conversion_rate,
    EXISTS(SELECT 1 FROM UNNEST(labels) AS l WHERE l.key = {_literal(gpu_key)} AND l.value = {_literal(gpu_value)}) AS on_gpu_node,
    IF(
      service.description = 'Compute Engine' AND STRPOS(sku.description, 'GPU') > 0 AND usage.pricing_unit = 'hour',
      usage.amount_in_pricing_units,
      0
    ) AS gpu_hours
  FROM `{billing_table}`
  WHERE project.id IN ({projects})
),
ceilings AS (
  SELECT team, gpu_ceiling_usd_per_day
  FROM UNNEST(ARRAY<STRUCT<team STRING, gpu_ceiling_usd_per_day FLOAT64>>[{ceilings}])
)
SELECT
  line_items.usage_date AS usage_date,
  line_items.team AS team,
  SUM(line_items.net_cost) AS cost,
  line_items.currency AS currency,
  SUM(line_items.gpu_hours) AS gpu_hours,
  SUM(IF(line_items.on_gpu_node, line_items.net_cost / line_items.currency_conversion_rate, 0)) AS gpu_node_cost_usd,
  ANY_VALUE(ceilings.gpu_ceiling_usd_per_day) AS gpu_ceiling_usd_per_day
FROM line_items
LEFT JOIN ceilings ON ceilings.team = line_items.team
WHERE line_items.team IS NOT NULL
GROUP BY usage_date, team, currency
"""


def cost_per_team_query(view: str, days: int = 7) -> str:
    """What the platform team pastes: each team's cost of the last `days` days."""
    return f"""SELECT team, ROUND(SUM(cost), 2) AS cost, ANY_VALUE(currency) AS currency, ROUND(SUM(gpu_hours), 1) AS gpu_hours,
  ROUND(SUM(gpu_node_cost_usd), 2) AS gpu_node_cost_usd, ROUND(SUM(gpu_ceiling_usd_per_day), 2) AS gpu_ceiling_usd
FROM `{view}`
WHERE usage_date >= DATE_SUB(CURRENT_DATE(), INTERVAL {days} DAY)
GROUP BY team
ORDER BY cost DESC"""
