"""The offline plan's view of monitoring (hooks in tools/plan_text.py and tools/plan_json.py): per
team where its dashboard, metrics and cost view will be, and for an environment its dashboard, its
alert policies and whether billing export is set up yet. Derived from the loaded stack, the same
facts the program builds them from; the dashboards' URLs exist only once Google has made them (the
stack outputs `dashboardUrl`)."""

from __future__ import annotations

from typing import Any

from components.dashboards import environment_dashboard_name, team_dashboard_name
from components.environment_monitoring import monitored_tenants
from config.isolation import placement
from config.monitoring import showback_dataset
from config.stack import EnvironmentStack
from config.tenant_plan import TenantPlan

CONSOLE = "https://console.cloud.google.com"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"


def tenant_fields(plan: Any, tenant_plan: TenantPlan) -> dict[str, Any]:
    facts = plan.loaded.facts
    monitoring = tenant_plan.monitoring
    if not monitoring.enabled:
        return {"enabled": False}
    tenant = tenant_plan.tenant
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
    project = where.project if where else facts.project
    return {
        "enabled": True,
        "scrapeInterval": monitoring.scrape_interval,
        "metricsProject": project,
        "metricsSelector": f'{{tenant="{tenant.name}"}}',
        "dashboard": team_dashboard_name(facts.environment, tenant.name) if monitoring.dashboard else None,
        "dashboardsPage": f"{CONSOLE}/monitoring/dashboards?project={project}",
        "costView": facts.cost_view,
    }


def tenant_line(plan: Any, tenant_plan: TenantPlan) -> str:
    f = tenant_fields(plan, tenant_plan)
    if not f["enabled"]:
        return "monitoring off: no collector, dashboard or alerts for this team"
    dashboard = f"dashboard \"{f['dashboard']}\" in project {f['metricsProject']}" if f["dashboard"] else "no dashboard of its own"
    cost = f"cost view {f['costView']} (WHERE team = '{tenant_plan.tenant.name}')" if f["costView"] else "cost view: billing export is not set up yet"
    return (
        f"monitoring: {dashboard} ({f['dashboardsPage']}); metrics in project {f['metricsProject']}, "
        f"PromQL {f['metricsSelector']}, scraped every {f['scrapeInterval']}; {cost}"
    )


def environment_fields(plan: Any) -> dict[str, Any] | None:
    env = plan.loaded
    if not isinstance(env, EnvironmentStack):
        return None
    config = env.monitoring
    if not config.enabled:
        return {"enabled": False}
    tenants = monitored_tenants((*env.tenants, *env.team_stack_tenants), env.facts)
    table = config.showback.billing_export_table
    # The policies the program registered, each by its title (its display name without the
    # environment's prefix, components/environment_monitoring.py).
    prefix = f"GPU platform {env.environment}: "
    alerts = [str(r.input("displayName")).removeprefix(prefix) for r in plan.run.of_type(ALERT_POLICY)]
    return {
        "enabled": True,
        "dashboard": environment_dashboard_name(env.environment),
        "dashboardsPage": f"{CONSOLE}/monitoring/dashboards?project={env.project}",
        "metricsScope": env.project,
        "monitoredProjects": sorted({t.placement.project for t in tenants if not t.placement.shared}),
        "alertPolicies": len(alerts),
        "alertPolicyTitles": alerts,
        "notificationChannels": len(config.notification_channels),
        "showbackDataset": f"{env.project}.{showback_dataset(env.stack)}",
        "billingExportTable": table,
        "costView": env.facts.cost_view,
    }


def section(plan: Any) -> list[str]:
    f = environment_fields(plan)
    if f is None:
        return []
    lines = ["", "Monitoring (gpu-platform:monitoring)"]
    if not f["enabled"]:
        lines.append("  off: no dashboards, alert policies, metrics scope links, collectors or showback in this environment")
        return lines
    scope = ", ".join(f["monitoredProjects"]) or "none yet (shared teams write to it directly)"
    lines.append(f"  dashboard \"{f['dashboard']}\" ({f['dashboardsPage']}); metrics scope {f['metricsScope']}, monitoring team projects: {scope}")
    channels = f"{f['notificationChannels']} notification channel(s)" if f["notificationChannels"] else "no channel yet (monitoring.notificationChannels)"
    lines.append(f"  {f['alertPolicies']} alert policies in {f['metricsScope']}, notifying {channels}:")
    lines += [f"    {title}" for title in f["alertPolicyTitles"]]
    if f["costView"]:
        lines.append(f"  showback: view {f['costView']} over {f['billingExportTable']}")
    else:
        lines.append(
            # https://cloud.google.com/billing/docs/how-to/export-data-bigquery-setup (no API switches it on).
            f"  showback: billing export is not set up yet. Dataset {f['showbackDataset']} will exist; in the console, Billing → "
            "Billing export → BigQuery export, Standard usage cost: Edit settings, choose that project and dataset, Save; once the table "
            "gcp_billing_export_v1_<account> appears there, set monitoring.showback.billingExportTable to <project>.<dataset>.<table>"
        )
    return lines
