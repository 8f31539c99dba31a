"""EnvironmentMonitoring: the environment's view of every team's GPUs, in the environment's project,
whose metrics scope every team project joins (components/tenant_monitoring.py).

Children: the Monitoring and BigQuery APIs; e-mail notification channels from config; the
environment's dashboard; the alert policies (idle GPUs, GPU nodes without nvidia.com/gpu, XID and
ECC errors for every team, and one per team whose GPU pool is at its limit while its pods wait,
for the inline tenants and this repo's team stacks alike); the showback dataset and, once billing
export writes to it, the cost view (components/showback.py).

The alert policies live here, not in the teams' projects: a policy may notify only channels of its
own project, and these are the platform team's. They query PromQL
(`condition_prometheus_query_language`) with metric validation off, since no GPU series exist
before a team's first GPU node has run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.facts import EnvironmentFacts
from config.isolation import Placement, placement
from config.monitoring import SHOWBACK_VIEW, MonitoringConfig, showback_dataset, view_name
from config.tenant_plan import TenantPlan

from . import monitoring_queries as q
from .dashboards import dashboard_json, environment_dashboard, environment_dashboard_name
from .showback import TeamCost, cost_view_sql
from .tenant_monitoring import dashboard_url

ENVIRONMENT_APIS = ("monitoring.googleapis.com", "bigquery.googleapis.com")
# Cloud Monitoring evaluates PromQL conditions every 30 s or a multiple (AlertPolicy
# PrometheusQueryLanguageCondition `evaluation_interval`, pulumi-gcp 10.2.0 monitoring/_inputs.py).
EVALUATION_INTERVAL = "60s"


@dataclass(frozen=True)
class MonitoredTenant:
    plan: TenantPlan
    placement: Placement


def monitored_tenants(plans: tuple[TenantPlan, ...], facts: EnvironmentFacts) -> tuple[MonitoredTenant, ...]:
    """The tenants (inline and team stacks) whose monitoring is on, with where they live."""
    found = []
    for plan in plans:
        where = placement(plan.tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
        if plan.monitoring.enabled and where is not None:
            found.append(MonitoredTenant(plan, where))
    return tuple(found)


@dataclass(frozen=True)
class EnvironmentMonitoringArgs:
    stack: str
    environment: str
    project: str
    config: MonitoringConfig
    tenants: tuple[MonitoredTenant, ...]  # inline and team-stack tenants with monitoring on
    apis: tuple[pulumi.Resource, ...] = ()  # the environment's own APIs (Service Usage first)


class EnvironmentMonitoring(pulumi.ComponentResource):
    services: list[gcp.projects.Service]
    channels: list[gcp.monitoring.NotificationChannel]
    dashboard: gcp.monitoring.Dashboard
    dashboard_url: pulumi.Output[str]
    alert_policies: list[gcp.monitoring.AlertPolicy]
    dataset: gcp.bigquery.Dataset
    cost_view: gcp.bigquery.Table | None
    cost_view_name: str | None
    outputs: dict

    def __init__(self, name: str, args: EnvironmentMonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:monitoring:Environment", name, None, opts)
        config, project = args.config, args.project
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=project,
                service=api,
                # GKE writes its own metrics there too: turning our monitoring off leaves the API on.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.apis)),
            )
            for api in ENVIRONMENT_APIS
        ]
        monitoring_api, bigquery_api = self.services
        on_monitoring = pulumi.ResourceOptions(parent=self, depends_on=[monitoring_api])

        self.channels = [
            gcp.monitoring.NotificationChannel(
                f"{name}-channel-{i}",
                project=project,
                type="email",
                display_name=f"GPU platform {args.environment}: {channel.email}",
                labels={"email_address": channel.email},
                opts=on_monitoring,
            )
            for i, channel in enumerate(c for c in config.notification_channels if c.email is not None)
        ]
        existing = [c.channel for c in config.notification_channels if c.channel is not None]
        channel_names = pulumi.Output.all(*existing, *(c.name for c in self.channels))

        plans = tuple(t.plan for t in args.tenants)
        self.cost_view_name = None
        if config.showback.billing_export_table is not None:
            self.cost_view_name = view_name(project, args.stack)
        document = environment_dashboard(
            environment=args.environment, project=project, teams=tuple(p.tenant.name for p in plans), cost_view=self.cost_view_name
        )
        self.dashboard = gcp.monitoring.Dashboard(f"{name}-dashboard", project=project, dashboard_json=dashboard_json(document), opts=on_monitoring)
        self.dashboard_url = self.dashboard.id.apply(lambda i: dashboard_url(i, project))

        conditions = [*q.environment_conditions(config.alerts), *(q.pool_at_limit(p, config.alerts) for p in plans if p.gpu_pools)]
        self.alert_policies = [
            gcp.monitoring.AlertPolicy(
                f"{name}-{condition.key}",
                project=project,
                display_name=f"GPU platform {args.environment}: {condition.title}",
                combiner="OR",
                conditions=[
                    gcp.monitoring.AlertPolicyConditionArgs(
                        display_name=condition.title,
                        condition_prometheus_query_language=gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                            query=condition.query,
                            duration=f"{condition.duration_seconds}s",
                            evaluation_interval=EVALUATION_INTERVAL,
                            disable_metric_validation=True,
                        ),
                    )
                ],
                documentation=gcp.monitoring.AlertPolicyDocumentationArgs(content=condition.documentation, mime_type="text/markdown"),
                notification_channels=channel_names,
                user_labels={"gpu-platform-environment": args.environment},
                opts=on_monitoring,
            )
            for condition in conditions
        ]

        # Showback: the dataset billing export is pointed at in the console, and the view once the
        # export's table exists (a view over a missing table cannot be created).
        self.dataset = gcp.bigquery.Dataset(
            f"{name}-billing",
            project=project,
            dataset_id=showback_dataset(args.stack),
            location=config.showback.dataset_location,
            friendly_name=f"GPU platform {args.environment}: billing export and cost per team",
            description="Point Cloud Billing export (standard usage cost) here; the view gpu_cost_by_team breaks it down by team.",
            # Billing history is not ours to delete: once export writes here, `pulumi destroy` (or
            # monitoring off) leaves the dataset and its tables in place, out of Pulumi's state.
            delete_contents_on_destroy=False,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[bigquery_api], retain_on_delete=config.showback.billing_export_table is not None
            ),
        )
        self.cost_view = None
        if config.showback.billing_export_table is not None:
            teams = tuple(
                TeamCost(t.plan.tenant.name, None if t.placement.shared else t.placement.project, t.plan.gpu_usd_per_hour_ceiling)
                for t in args.tenants
            )
            self.cost_view = gcp.bigquery.Table(
                f"{name}-cost-by-team",
                project=project,
                dataset_id=self.dataset.dataset_id,
                table_id=SHOWBACK_VIEW,
                description="Cost, GPU-hours, the GPU nodes' cost in US dollars and the plan's GPU ceiling per team and day, from Cloud Billing export.",
                view=gcp.bigquery.TableViewArgs(
                    query=cost_view_sql(billing_table=config.showback.billing_export_table, environment_project=project, teams=teams),
                    use_legacy_sql=False,
                ),
                # A view holds no data; the provider's default protection would only block `pulumi destroy`.
                deletion_protection=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.outputs = {
            "enabled": True,
            "dashboard": environment_dashboard_name(args.environment),
            "dashboardUrl": self.dashboard_url,
            "showbackDataset": self.dataset.dataset_id.apply(lambda d: f"{project}.{d}"),
            "costView": self.cost_view_name,
        }
        self.register_outputs(self.outputs)
