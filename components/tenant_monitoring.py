"""TenantMonitoring: what one team's GPU metrics need in GCP. The collector itself runs inside the
team's virtual cluster (components/monitoring_documents.py, installed with the instance's objects);
here are its identity's one grant, the API it writes to, the link that lets the environment see the
team's metrics, and the team's dashboard.

- `roles/monitoring.metricWriter` for the team's node service account, on the team's project (the
  environment's for a shared team): the collector writes with the node identity, from the metadata
  server, no key (config/iam_grants.yaml, `when: monitoring`). Nothing else: it reads nothing in GCP.
- Project mode: the team's project (whose Monitoring API TenantProject enables) as a monitored
  project of the environment project's metrics scope (`gcp.monitoring.MonitoredProject`), so the
  environment's dashboard and alert policies see it. The scope is one-way: the team's project sees
  its own metrics only, never the environment's or another team's.
- The team's dashboard (components/dashboards.py), in the team's project.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.iam_grants import predefined_roles
from config.isolation import Placement
from config.tenant_plan import TenantPlan

from .dashboards import dashboard_json, team_dashboard, team_dashboard_name

MONITORING_API = "monitoring.googleapis.com"
# role → why (config/iam_grants.yaml): the collector's only grant.
COLLECTOR_ROLES = predefined_roles("tenantNodes", "project", when="monitoring")


def dashboard_url(dashboard_id: str, project: str) -> str:
    """The Cloud console's page of a dashboard (its id is the last part of projects/<n>/dashboards/<id>)."""
    return f"https://console.cloud.google.com/monitoring/dashboards/builder/{dashboard_id.rsplit('/', 1)[-1]}?project={project}"


@dataclass(frozen=True)
class TenantMonitoringArgs:
    plan: TenantPlan
    environment: str
    environment_project: str  # the metrics scope's project
    placement: Placement
    node_service_account: gcp.serviceaccount.Account
    cost_view: str | None = None  # the environment's cost view, where billing export is set up
    # What must exist first: the team project's APIs (its Monitoring API among them), and in the
    # same stack the environment's Monitoring API (the metrics scope).
    apis: tuple[pulumi.Resource, ...] = ()
    scope: tuple[pulumi.Resource, ...] = ()


class TenantMonitoring(pulumi.ComponentResource):
    metric_writer: list[gcp.projects.IAMMember]
    monitored_project: gcp.monitoring.MonitoredProject | None
    dashboard: gcp.monitoring.Dashboard | None
    dashboard_name: str | None
    dashboard_url: pulumi.Output[str] | None
    metrics_project: str

    def __init__(self, name: str, args: TenantMonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:monitoring:Tenant", name, None, opts)
        where = args.placement
        tenant = args.plan.tenant.name
        self.metrics_project = where.project
        self.monitored_project = None
        depends: list[pulumi.Resource] = list(args.apis)
        if not where.shared:
            self.monitored_project = gcp.monitoring.MonitoredProject(
                f"{name}-in-scope",
                # Short forms as the provider's own example writes them (pulumi-gcp 10.2.0,
                # monitoring/monitored_project.py): scoping project id, monitored project id.
                metrics_scope=args.environment_project,
                name=where.project,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends, *args.scope]),
            )
        node_member = args.node_service_account.email.apply(lambda e: f"serviceAccount:{e}")
        self.metric_writer = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1].replace('.', '-').lower()}",
                project=where.project,
                role=role,
                member=node_member,
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
            )
            for role in COLLECTOR_ROLES
        ]
        self.dashboard = None
        self.dashboard_name = None
        self.dashboard_url = None
        if args.plan.monitoring.dashboard:
            document = team_dashboard(args.plan, environment=args.environment, project=where.project, cost_view=args.cost_view)
            self.dashboard_name = team_dashboard_name(args.environment, tenant)
            self.dashboard = gcp.monitoring.Dashboard(
                f"{name}-dashboard",
                project=where.project,
                dashboard_json=dashboard_json(document),
                # A shared team's dashboard is in the environment's project: its Monitoring API first.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends, *args.scope]),
            )
            self.dashboard_url = self.dashboard.id.apply(lambda i: dashboard_url(i, where.project))
        self.register_outputs({"metricsProject": self.metrics_project, "dashboard": self.dashboard_name, "dashboardUrl": self.dashboard_url})
