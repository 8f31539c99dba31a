"""Monitoring of the tenants' GPUs: the config models of `gpu-platform:monitoring` (environment
stacks) and `tenants[i].monitoring` / `tenant.monitoring`, their checks, and what a tenant's
monitoring resolves to. Pure: the components build the collector, the dashboards, the alert
policies and the cost view from what this module decides (components/tenant_monitoring.py,
components/environment_monitoring.py).

The environment's `enabled` is the default of every tenant's, and switches the environment's own
pieces (its dashboard, alert policies, showback dataset and view, the Monitoring API in its
project, which is the metrics scope every team project joins). A tenant cannot turn monitoring on
in an environment that has it off: its metrics would have no API and no scope to go to.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import DURATION, ConfigModel, Duration, Syntax, duration_seconds, duration_text
from .errors import Broken, Problems, shown
from .facts import EnvironmentFacts
from .reliability import GPU_TIMEOUT, WATCHDOG_POLL_SECONDS

# Prometheus looks back 5 minutes for an instant query's latest sample: a series not sampled within
# them is absent ("Staleness", https://prometheus.io/docs/prometheus/latest/querying/basics/#staleness),
# so alert conditions would flap between scrapes. Below 10 s the collector's samples cost more than they tell.
MIN_SCRAPE_SECONDS = 10
MAX_SCRAPE_SECONDS = 300
DEFAULT_SCRAPE_INTERVAL = "60s"
# An existing channel, as Cloud Monitoring names it: projects/[PROJECT_ID_OR_NUMBER]/notificationChannels/[CHANNEL_ID]
# (NotificationChannel `name`, https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels;
# the form AlertPolicy `notification_channels` takes, googleapis/googleapis commit 4a5dad74731697afdc82fc82ea0ef382218896c0
# google/monitoring/v3/alert.proto). Cloud Monitoring accepts the project's number there too, but
# which project a number is only the cloud knows: the program, which checks that a channel is one
# of the environment's project (where the alert policies live), asks for the project id.
CHANNEL_NAME = Syntax(r"^projects/(?P<project>[^/]+)/notificationChannels/(?P<id>[0-9]+)$")
PROJECT_NUMBER = Syntax(r"^[0-9]+$")
EMAIL = Syntax(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")
# The table Cloud Billing export creates: gcp_billing_export_v1_<BILLING_ACCOUNT_ID>, in a dataset
# of the project chosen in the console ("Structure of Standard data export",
# https://cloud.google.com/billing/docs/how-to/export-data-bigquery-tables/standard-usage).
BILLING_EXPORT_TABLE = Syntax(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\.[A-Za-z0-9_]{1,1024}\.gcp_billing_export_v1_[0-9A-Za-z_]+$")
# BigQuery dataset locations: a multi-region (US, EU: the only ones whose export is back-filled from
# the previous month) or a region.
DATASET_LOCATION = Syntax(r"^(US|EU|[a-z]+-[a-z]+[0-9]+)$")
# Where showback lives in the environment's project: the dataset Pulumi creates (for the export and
# the view) and the view (components/showback.py).
SHOWBACK_VIEW = "gpu_cost_by_team"
GPU_NOT_OFFERED_KEY = "monitoring.alerts.gpuNotOfferedAfter"


def watchdog_removal_seconds(gpu_timeout: str, scrape_interval: str) -> int:
    """How long a GPU node that the GPU watchdog removes can match the GPU-not-offered alert's query:
    its pool's gpuTimeout; two watchdog polls (the clock of a lost GPU starts at the poll that first
    sees it, and the watchdog acts at the first poll past the deadline); one scrape, since deleting
    the NodeClaim makes Karpenter delete the Node at once (kubernetes-sigs/karpenter tag v1.14.1,
    pkg/controllers/nodeclaim/lifecycle/controller.go `finalize`), and the query leaves out a node
    with a deletion timestamp from the collector's next scrape on (components/monitoring_queries.py
    gpu_not_offered). The alert is for the nodes the watchdog does not remove (a node with no
    NodeClaim, a watchdog that is down), so its duration must be longer."""
    return duration_seconds(gpu_timeout) + 2 * WATCHDOG_POLL_SECONDS + duration_seconds(scrape_interval)


# The alert's default: the watchdog's default gpuTimeout and 10 minutes, which covers its polls and
# the slowest scrape interval allowed, with minutes to spare for Karpenter and the API server.
GPU_NOT_OFFERED_MARGIN_SECONDS = 600
DEFAULT_GPU_NOT_OFFERED_AFTER = duration_text(duration_seconds(GPU_TIMEOUT) + GPU_NOT_OFFERED_MARGIN_SECONDS)


class NotificationChannel(ConfigModel):
    """One place the alert policies notify: exactly one of the two keys."""

    email: str | None = None
    """An address Cloud Monitoring e-mails the environment's alerts to; Pulumi creates the channel in the environment's project."""
    channel: str | None = None
    """An existing channel of the environment's project, projects/<the environment's project id>/notificationChannels/<id> (Slack, PagerDuty, …)."""


class Alerts(ConfigModel):
    """Thresholds of the alert policies of the environment (components/monitoring_queries.py)."""

    idle_gpu_after: Duration = "1h"
    """How long a GPU a pod holds may stay idle (utilization below idleUtilizationPercent) before the idle-GPU alert fires."""
    idle_utilization_percent: float = 1.0
    """The GPU utilization (DCGM_FI_DEV_GPU_UTIL, percent) below which a held GPU counts as idle; above 0, at most 100."""
    gpu_not_offered_after: Duration = DEFAULT_GPU_NOT_OFFERED_AFTER
    """How long a GPU node may run without offering nvidia.com/gpu (never, or no longer) before its alert fires: longer than every GPU pool's gpuTimeout plus 60s and a scrape interval, so that it fires only for nodes the GPU watchdog does not remove (default: the default gpuTimeout and 10m)."""
    pool_at_limit_after: Duration = "15m"
    """How long a team's GPU pool may sit at its maxGpus while the team's GPU pods wait before the queueing alert fires."""
    capacity_shortage_after: Duration = "10m"
    """How long a team's GPU pods may wait while every option of one of its pools (zones, shapes, capacity types) fails to get a VM before the capacity-shortage alert fires."""


class Showback(ConfigModel):
    """Cost per team from Cloud Billing export to BigQuery (components/showback.py)."""

    billing_export_table: str | None = None
    """The standard usage cost table Cloud Billing export writes, <project>.<dataset>.gcp_billing_export_v1_<account>; unset until export is on, and no cost view is created before."""
    dataset_location: str = "US"
    """Where Pulumi creates the showback dataset (US or EU back-fills the previous month; a region starts the day export is switched on)."""


class MonitoringConfig(ConfigModel):
    """`gpu-platform:monitoring`: the environment's monitoring and its tenants' default."""

    enabled: bool = True
    """Collect every tenant's GPU metrics by default, and create the environment's dashboard, alert policies and showback dataset."""
    scrape_interval: Duration = DEFAULT_SCRAPE_INTERVAL
    """How often each tenant's collector scrapes its GPUs and Kubernetes objects by default, 10s to 5m."""
    notification_channels: tuple[NotificationChannel, ...] = ()
    """Where the alert policies notify, each {email: <address>} or {channel: <existing channel's name>}; none by default."""
    alerts: Alerts = Alerts()
    """Thresholds of the idle-GPU, GPU-not-offered and pool-at-limit alerts."""
    showback: Showback = Showback()
    """The showback dataset and the cost view over Cloud Billing export."""


class TenantMonitoring(ConfigModel):
    """`tenants[i].monitoring` / `tenant.monitoring`: one team's collector and dashboard."""

    enabled: bool | None = None
    """Collect this team's GPU metrics (collector, Kubernetes object metrics, metrics writer role, metrics scope); default: the environment's monitoring.enabled."""
    scrape_interval: Duration | None = None
    """How often this team's collector scrapes, 10s to 5m; default: the environment's monitoring.scrapeInterval."""
    dashboard: bool = True
    """A dashboard of the team's own in the team's project, with the plan's busy and ceiling cost as reference lines."""


@dataclass(frozen=True)
class MonitoringPlan:
    """A tenant's monitoring as resolved against its environment."""

    enabled: bool
    scrape_interval: str
    dashboard: bool

    @property
    def scrape_seconds(self) -> int:
        return duration_seconds(self.scrape_interval)


OFF = MonitoringPlan(enabled=False, scrape_interval=DEFAULT_SCRAPE_INTERVAL, dashboard=False)


def resolve_tenant_monitoring(monitoring: TenantMonitoring, facts: EnvironmentFacts) -> MonitoringPlan:
    """The tenant's own values, else its environment's. In the opt-in legacy mode the default is off:
    the node identity is then the official template's, which Pulumi cannot grant the writer role."""
    default = facts.monitoring_enabled and not facts.legacy_infrastructure
    enabled = default if monitoring.enabled is None else monitoring.enabled
    if not enabled:
        return OFF
    return MonitoringPlan(True, monitoring.scrape_interval or facts.scrape_interval, monitoring.dashboard)


def check_scrape_interval(path: str, value: str, problems: Problems) -> None:
    with problems.checking(path):
        if not DURATION.match(value):
            problems.add(path, f"{shown(value)} is not a duration like 30s or 1m")
        elif not MIN_SCRAPE_SECONDS <= duration_seconds(value) <= MAX_SCRAPE_SECONDS:
            problems.add(path, f"{value} is out of range; allowed: 10s to 5m (at least 10s; Prometheus forgets a series not sampled within 5m)")


def _channel_form(project: str | Broken) -> str:
    """The channel name allowed in the environment whose gcp:project is `project`."""
    return f"projects/{'<gcp:project>' if isinstance(project, Broken) else project}/notificationChannels/<id>"


def check_channel_name(path: str, name: str, project: str | Broken, problems: Problems) -> None:
    """An existing channel the environment's alert policies may notify: one of the environment's
    project (`project`, the stack's gcp:project), where they live, named by that project's id."""
    allowed = f"allowed: {_channel_form(project)}, a channel of the environment's project, where its alert policies live"
    match = CHANNEL_NAME.fullmatch(name)
    if not match:
        problems.add(path, f"{shown(name)} is not a channel's name; {allowed}")
    elif PROJECT_NUMBER.fullmatch(match["project"]):
        problems.add(path, f"{shown(name)} names its project by number, which cannot be told apart from another project's before deploying; {allowed}")
    elif match["project"] != project:
        problems.add(path, f"{shown(name)} is a channel of project {match['project']}; {allowed}")


def check_monitoring(config: MonitoringConfig, project: str | Broken, problems: Problems) -> None:
    """Checks of `gpu-platform:monitoring` of an environment stack whose gcp:project is `project`;
    each `checking` block is one independent check."""
    check_scrape_interval("monitoring.scrapeInterval", config.scrape_interval, problems)
    with problems.checking("monitoring.notificationChannels"):
        for i, channel in enumerate(config.notification_channels):
            path = f"monitoring.notificationChannels[{i}]"
            with problems.checking(path):
                if (channel.email is None) == (channel.channel is None):
                    forms = f"{{email: <address>}} or {{channel: {_channel_form(project)}}}"
                    problems.add(path, f"names {'both' if channel.email else 'neither'} of email and channel; allowed: {forms}")
                elif channel.email is not None and not EMAIL.fullmatch(channel.email):
                    problems.add(f"{path}.email", f"{shown(channel.email)} is not an e-mail address")
                elif channel.channel is not None:
                    check_channel_name(f"{path}.channel", channel.channel, project, problems)
    durations = (
        ("idleGpuAfter", "idle_gpu_after"),
        ("gpuNotOfferedAfter", "gpu_not_offered_after"),
        ("poolAtLimitAfter", "pool_at_limit_after"),
        ("capacityShortageAfter", "capacity_shortage_after"),
    )
    for key, attribute in durations:
        path = f"monitoring.alerts.{key}"
        with problems.checking(path):
            value = getattr(config.alerts, attribute)
            if not DURATION.match(value):
                problems.add(path, f"{shown(value)} is not a duration like 10m or 1h")
            elif duration_seconds(value) == 0:
                problems.add(path, f"{value} would alert at once; allowed: a duration above 0, like 10m or 1h")
    with problems.checking("monitoring.alerts.idleUtilizationPercent"):
        percent = config.alerts.idle_utilization_percent
        if not 0 < percent <= 100:
            problems.add(
                "monitoring.alerts.idleUtilizationPercent",
                f"{percent:g} is out of range; allowed: above 0 (no GPU reports less than 0%, so nothing would count as idle) and at most 100",
            )
    with problems.checking("monitoring.showback.billingExportTable"):
        table = config.showback.billing_export_table
        if table is not None and not BILLING_EXPORT_TABLE.fullmatch(table):
            problems.add(
                "monitoring.showback.billingExportTable",
                f"{shown(table)} is not a Cloud Billing export table; allowed: <project>.<dataset>.gcp_billing_export_v1_<billing account>, as BigQuery lists it",
            )
    with problems.checking("monitoring.showback.datasetLocation"):
        location = config.showback.dataset_location
        if not DATASET_LOCATION.fullmatch(location):
            problems.add("monitoring.showback.datasetLocation", f"{shown(location)} is not a BigQuery location; allowed: US, EU or a region like europe-west4")


def check_tenant_monitoring(path: str, monitoring: TenantMonitoring, facts: EnvironmentFacts, problems: Problems) -> None:
    """A tenant's monitoring against its environment (`path`: tenants[i].monitoring or tenant.monitoring)."""
    if monitoring.scrape_interval is not None:
        check_scrape_interval(f"{path}.scrapeInterval", monitoring.scrape_interval, problems)
    with problems.checking(f"{path}.enabled"):
        if monitoring.enabled is not True:
            return
        if facts.legacy_infrastructure:
            problems.add(
                f"{path}.enabled",
                "true is not allowed with nodeProvider.legacyInfrastructure: the official template creates the node identity, "
                "which Pulumi cannot grant roles/monitoring.metricWriter; leave monitoring off",
            )
        elif not facts.monitoring_enabled:
            problems.add(
                f"{path}.enabled",
                f"true, but environment {facts.environment} has monitoring off (gpu-platform:monitoring.enabled: false): the Monitoring API "
                f"is not enabled in its project {facts.project}, whose metrics scope this team's metrics join; turn monitoring on there first",
            )


def check_alert_after_watchdog(path: str, tenant, facts: EnvironmentFacts, problems: Problems) -> None:
    """Each GPU pool's watchdog limit against the environment's GPU-not-offered alert: the alert
    fires only once the watchdog would have removed the node (`watchdog_removal_seconds`). Not
    checked where the environment has no alert (monitoring off, or deployed before the fact was
    exported) or the tenant sends no metrics."""
    for i, pool in enumerate(tenant.gpu_pools):
        key = f"{path}.gpuPools[{i}].gpuTimeout"
        with problems.checking(f"{path}.gpuPools[{i}]"):
            alert = facts.gpu_not_offered_after
            if alert is None or not resolve_tenant_monitoring(tenant.monitoring, facts).enabled:
                return
            scrape = tenant.monitoring.scrape_interval or facts.scrape_interval
            if not (DURATION.match(alert) and DURATION.match(scrape) and DURATION.match(pool.gpu_timeout)):
                continue  # each reported at its own key (here, config/reliability.py)
            removed_within = watchdog_removal_seconds(pool.gpu_timeout, scrape)
            if duration_seconds(alert) <= removed_within:
                longest = duration_seconds(alert) - (removed_within - duration_seconds(pool.gpu_timeout))
                problems.add(
                    key,
                    f"{pool.gpu_timeout} leaves the GPU watchdog no time before {GPU_NOT_OFFERED_KEY} of environment {facts.environment} "
                    f"({alert}) fires: a node the watchdog removes matches that alert for up to gpuTimeout + {2 * WATCHDOG_POLL_SECONDS}s "
                    f"(two watchdog polls) + {scrape} (one scrape); allowed: a gpuTimeout under {duration_text(max(longest, 0))}, "
                    f"or {GPU_NOT_OFFERED_KEY} above {duration_text(removed_within)}",
                )


def showback_dataset(stack: str) -> str:
    """Named after the environment stack (dataset ids take letters, digits and underscores): two
    environment stacks in one project, a test run's among them, never share one."""
    return f"gpu_platform_{stack.replace('-', '_')}_billing"


def view_name(project: str, stack: str) -> str:
    return f"{project}.{showback_dataset(stack)}.{SHOWBACK_VIEW}"
