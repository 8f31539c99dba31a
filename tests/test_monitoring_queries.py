"""Monitoring's PromQL, dashboards and alert policies: every query parsed with a PromQL parser
and every metric and label it names checked against what the collector exports (the exporters'
documented lists, tests/data); the dashboards parsed with Google's Dashboard types; and GCP's side:
the collector's one grant, the metrics scope, the alert policies with their thresholds."""

from __future__ import annotations

import json
import re

import promql_parser
import pytest
import yaml
from google.cloud.monitoring_dashboard_v1.types import Dashboard

from components import capacity_fallback as fallback
from components import dcgm_metrics as dcgm
from components import monitoring_documents as docs
from components import monitoring_queries as q
from components import watchdog_documents as watchdog
from config.base import duration_seconds
from config.monitoring import MAX_SCRAPE_SECONDS, Alerts
from config.stack import load_stack
from monitoring_support import (
    CHANNEL,
    DCGM_RECORD,
    KSM_RECORD,
    PROJECT_MEMBER,
    VCI,
    dcgm_job,
    dcgm_labels_used,
    dcgm_series_labels,
    gpu_operator_values,
    selectors,
)
from monitoring_support import configured_run, dev_stack  # noqa: F401 - module-scoped fixtures
from shipped_stacks import SHIPPED_DIR
from tenant_objects import instance_objects, named

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
MONITORED_PROJECT = "gcp:monitoring/monitoredProject:MonitoredProject"


# --- PromQL ----------------------------------------------------------------------------------------


def all_queries(run) -> dict[str, str]:
    queries = {}
    for policy in run.of_type(ALERT_POLICY):
        for condition in policy.input("conditions"):
            queries[f"{policy.name}: {condition['displayName']}"] = condition["conditionPrometheusQueryLanguage"]["query"]
    for dashboard in run.of_type(DASHBOARD):
        for tile in json.loads(dashboard.input("dashboardJson"))["mosaicLayout"]["tiles"]:
            widget = tile["widget"]
            for data_set in widget.get("xyChart", {}).get("dataSets", []):
                queries[f"{dashboard.name}: {widget['title']}"] = data_set["timeSeriesQuery"]["prometheusQuery"]
            if "scorecard" in widget:
                queries[f"{dashboard.name}: {widget['title']}"] = widget["scorecard"]["timeSeriesQuery"]["prometheusQuery"]
    return queries


def test_every_query_parses_and_uses_only_metrics_the_collector_exports(dev_run, tenant_run, prod_run):
    exported = {field for field, kind, _ in dcgm.DCGM_METRICS if kind != "label"}
    node_labels = {docs.ksm_label(key) for key in docs.KSM_NODE_LABELS}
    queries = {**all_queries(dev_run), **all_queries(tenant_run), **all_queries(prod_run)}
    assert len(queries) > 30
    for where, query in queries.items():
        for selector in selectors(query):
            name = selector.name
            if name.startswith("DCGM_"):
                assert name in exported and name in DCGM_RECORD["fields"], f"{where}: {name}"
            elif name.startswith("gpu_platform_"):
                # The capacity fallback's own (components/capacity_fallback.py), with only the labels it writes
                # and the collector's external ones.
                labels = {*fallback.METRICS[name][2], "tenant", "environment", "project_id", "location", "cluster", "job", "instance"}
                assert all(m.name in labels for m in selector.matchers.matchers), f"{where}: {name}"
            else:
                assert name in KSM_RECORD["metrics"] and name in docs.KSM_METRICS, f"{where}: {name}"
            for matcher in selector.matchers.matchers:
                if matcher.name.startswith("label_"):
                    assert name == "kube_node_labels" and matcher.name in node_labels, f"{where}: {matcher.name}"


def test_every_dcgm_series_gets_its_node_label(dev_run, tenant_run):
    for run, tenant in ((dev_run, "nlp"), (tenant_run, "vision")):
        config, job = dcgm_job(run, tenant)
        # The node its pod runs on (Prometheus' relabel defaults: action replace, regex (.*), $1).
        node_rules = [r for r in job["relabel_configs"] if r.get("target_label") == "node"]
        assert node_rules == [{"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}]
        # It keeps only targets of that node, and the exporter emits no label the job sets, which it
        # would otherwise rename to exported_<label>.
        assert job["kubernetes_sd_configs"][0]["selectors"][0]["field"] == f"spec.nodeName={docs.NODE_NAME_PLACEHOLDER}"
        targets = {r["target_label"] for r in job["relabel_configs"] if "target_label" in r}
        assert targets & {*DCGM_RECORD["labels"], *DCGM_RECORD["podLabels"]} == set() and "honor_labels" not in job


def test_every_label_a_dcgm_query_names_is_one_its_series_carry(dev_run, tenant_run, prod_run):
    config, job = dcgm_job(dev_run, "nlp")
    queries = {**all_queries(dev_run), **all_queries(tenant_run), **all_queries(prod_run)}
    checked = 0
    for where, query in queries.items():
        for label, metric in dcgm_labels_used(query):
            assert label in dcgm_series_labels(config, job, metric), f"{where}: {metric} has no label {label}"
            checked += 1
    assert checked > 40
    # The check fails on a label the exporter does not emit, such as the pod's name under its old name.
    [(label, metric)] = [u for u in dcgm_labels_used(f"max by (pod_name) ({q.GPU_UTIL})")]
    assert label not in dcgm_series_labels(config, job, metric)


def inside(query: str, function: str) -> list[str]:
    """The names of the series `function` is applied to in `query`, as the parser reads it."""
    found: list[str] = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.Call) and node.func.name == function:
            for argument in node.args:
                if isinstance(argument, promql_parser.MatrixSelector):
                    found.append(f"{argument.vector_selector.name}[{int(argument.range.total_seconds())}s]")

    promql_parser.walk(promql_parser.parse(query), visit)
    return found


def alert_query(run, key: str) -> str:
    [condition] = run.one(ALERT_POLICY, f"monitoring-{key}").input("conditions")
    return condition["conditionPrometheusQueryLanguage"]["query"]


def test_the_xid_alert_counts_every_xid_and_no_restart(dev_run):
    """The exporter's windowed XID count, a gauge with one series per code: a repeat of the same
    code counts, and an exporter restart starts it at 0 instead of looking like a change. ECC
    double-bit errors are a counter: their increase."""
    query = alert_query(dev_run, "gpu-errors")
    assert {s.name for s in selectors(query)} == {dcgm.XID_COUNT, q.ECC_DBE}
    assert DCGM_RECORD["fields"][dcgm.XID_COUNT]["type"] == "gauge" and DCGM_RECORD["fields"][q.ECC_DBE]["type"] == "counter"
    # The count is compared as it is, never through changes() or a rate; the ECC counter's increase.
    assert inside(query, "changes") == [] and inside(query, "increase") == [f"{q.ECC_DBE}[600s]"]
    xid_branch = promql_parser.parse(query).lhs
    assert str(xid_branch.op) == ">" and xid_branch.rhs.val == 0
    assert "xid" in xid_branch.lhs.modifier.labels and "xid" in DCGM_RECORD["fields"][dcgm.XID_COUNT]["labels"]
    # The exporter counts over the window the alert speaks of, long enough for the slowest scrape.
    env = gpu_operator_values(dev_run.one(VCI, "nlp"))["dcgmExporter"]["env"]
    assert env == [{"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": str(duration_seconds(q.ERROR_WINDOW) * 1000)}]
    assert duration_seconds(q.ERROR_WINDOW) >= 2 * MAX_SCRAPE_SECONDS


def test_the_xid_alert_says_which_codes_are_the_applications(dev_run):
    [policy] = [p for p in dev_run.of_type(ALERT_POLICY) if p.name == "monitoring-gpu-errors"]
    text = policy.input("documentation")["content"]
    sentences = [s.strip() for s in re.split(r"(?<=\.) ", text)]
    [application] = [s for s in sentences if all(str(code) in s for code in q.APPLICATION_XIDS)]
    assert application.startswith("XID 13, 31, 43, 45 alone are most often the application's") and "drain" not in application.lower()
    [drain] = [s for s in sentences if "drain" in s.lower()]
    assert drain.startswith("Any other code, or ECC errors")


def test_the_gpu_not_offered_alerts_default_outlasts_the_default_watchdog_at_any_scrape_interval():
    from config.monitoring import DEFAULT_GPU_NOT_OFFERED_AFTER, MAX_SCRAPE_SECONDS, watchdog_removal_seconds
    from config.reliability import GPU_TIMEOUT

    assert duration_seconds(DEFAULT_GPU_NOT_OFFERED_AFTER) > watchdog_removal_seconds(GPU_TIMEOUT, f"{MAX_SCRAPE_SECONDS}s")


def test_the_gpu_not_offered_alert_waits_for_the_watchdog(dev_run, tenant_run):
    """Its default duration is longer than any node the watchdog removes can match it: the pool's
    limit, two watchdog polls and one scrape, all read from what the tenants run. A node being
    deleted leaves the query (kube_node_deletion_timestamp)."""
    [condition] = dev_run.one(ALERT_POLICY, "monitoring-gpu-not-offered").input("conditions")
    waits = int(condition["conditionPrometheusQueryLanguage"]["duration"].removesuffix("s"))
    assert waits == duration_seconds(Alerts().gpu_not_offered_after)
    checked = 0
    for run in (dev_run, tenant_run):
        for vci in run.of_type(VCI):
            objects = instance_objects(vci)
            watchdog_config = json.loads(named(objects, "ConfigMap", watchdog.NAME, watchdog.NAMESPACE)["data"]["config.json"])
            scrape = yaml.safe_load(named(objects, "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"])["global"]["scrape_interval"]
            for limit in watchdog_config["poolLimitSeconds"].values():
                assert waits > limit + 2 * watchdog_config["intervalSeconds"] + duration_seconds(scrape), (vci.name, limit)
                checked += 1
    assert checked >= 3
    tree = promql_parser.parse(condition["conditionPrometheusQueryLanguage"]["query"])
    assert str(tree.op) == "unless" and tree.rhs.name == q.NODE_DELETION == "kube_node_deletion_timestamp"
    assert q.NODE_DELETION in docs.KSM_METRICS and q.NODE_DELETION in KSM_RECORD["metrics"]


def test_the_parser_refuses_broken_promql():
    for broken in ("sum by (tenant (DCGM_FI_DEV_GPU_UTIL)", "rate(DCGM_FI_DEV_GPU_UTIL)", 'kube_node_labels{tenant="x"'):
        with pytest.raises(ValueError):
            promql_parser.parse(broken)


def test_pool_alerts_know_each_pools_limit(dev_stack):
    plan = next(t for t in dev_stack.tenants if t.tenant.name == "nlp")
    [pool] = plan.gpu_pools
    condition = q.pool_at_limit(plan, dev_stack.monitoring.alerts)
    assert f">= {pool.max_nodes}" in condition.query and f'"{pool.name}"' in condition.query
    assert {s.name for s in selectors(condition.query)} == {"kube_node_labels", q.UNSCHEDULED, "kube_pod_container_resource_requests"}


def joins(query: str, op: str) -> list[promql_parser.BinaryExpr]:
    found: list = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.BinaryExpr) and str(node.op) == op:
            found.append(node)

    promql_parser.walk(promql_parser.parse(query), visit)
    return found


def test_waiting_for_a_gpu_means_not_scheduled_yet(tenant_run, dev_run):
    """A pod bound to a GPU node and still pulling its images is phase Pending but holds its GPU:
    what counts as waiting is a GPU pod no node has been found for (PodScheduled False), on the
    team's dashboard and in its queueing alert alike."""
    queries = {**all_queries(tenant_run), **all_queries(dev_run)}
    waiting = {
        where: query
        for where, query in queries.items()
        if where.endswith(("GPU pods waiting for a node", "GPU pods waiting for a node, per team", "at its limit while pods wait"))
    }
    assert len(waiting) >= 6  # vision's tile and alert; nlp's and speech's tiles; the per-team chart; dev's alerts
    for where, query in waiting.items():
        # The innermost `and` over the GPU requests (the pool alert joins the count to its pools too).
        [join] = [j for j in joins(query, "and") if "kube_pod_container_resource_requests" in str(j.rhs) and not joins(str(j.rhs), "and")]
        # The unscheduled pods of the team, kept where the same pod asks for a GPU.
        assert isinstance(join.lhs, promql_parser.VectorSelector) and join.lhs.name == q.UNSCHEDULED, where
        assert join.modifier.matching.labels == ["tenant", "namespace", "pod"], where
        [requests] = selectors(str(join.rhs))
        assert requests.name == "kube_pod_container_resource_requests", where
        assert any(m.name == "resource" and m.value == docs.KSM_GPU_RESOURCE for m in requests.matchers.matchers), where
        # No pod is counted by its phase.
        assert all(s.name != "kube_pod_status_phase" for s in selectors(query)), where
    tile = queries["tenant-vision-monitoring-dashboard: GPU pods waiting for a node"]
    alert = queries["monitoring-pool-at-limit-vision: GPU pool of vision at its limit while pods wait"]
    assert q.pending_gpu_pods("vision") in tile and q.pending_gpu_pods("vision") in alert
    # Each pod's series carries the labels the join matches on (tenant: the collector's), and
    # kube-state-metrics exports the metric: it is in the allowlist it runs with.
    assert {"namespace", "pod"} <= set(KSM_RECORD["metrics"][q.UNSCHEDULED]["labels"])
    ksm = named(instance_objects(tenant_run.one(VCI, "vision")), "Deployment", docs.KUBE_STATE_METRICS, docs.MONITORING_NAMESPACE)
    [allowlist] = [a for a in ksm["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--metric-allowlist=")]
    assert q.UNSCHEDULED in allowlist.removeprefix("--metric-allowlist=").split(",")


# --- dashboards ------------------------------------------------------------------------------------


def test_dashboards_parse_with_googles_dashboard_types(dev_run, tenant_run, prod_run):
    dashboards = [*dev_run.of_type(DASHBOARD), *tenant_run.of_type(DASHBOARD), *prod_run.of_type(DASHBOARD)]
    # dev: the environment's and nlp's and speech's; vision's in its stack; prod: the environment's and research's.
    assert len(dashboards) == 6
    for dashboard in dashboards:
        parsed = Dashboard.from_json(dashboard.input("dashboardJson"))  # unknown fields are errors
        assert parsed.display_name and len(parsed.mosaic_layout.tiles) >= 9
        assert all(tile.x_pos + tile.width <= parsed.mosaic_layout.columns for tile in parsed.mosaic_layout.tiles)


def test_googles_types_refuse_a_broken_dashboard(dev_run):
    document = json.loads(dev_run.one(DASHBOARD, "tenant-nlp").input("dashboardJson"))
    document["mosaicLayout"]["tiles"][1]["widget"]["scoreCard"] = document["mosaicLayout"]["tiles"][1]["widget"].pop("scorecard")
    with pytest.raises(Exception, match="scoreCard"):
        Dashboard.from_json(json.dumps(document))


def test_a_teams_dashboard_draws_the_plans_expected_and_ceiling(tenant_run, stack_values, env_stack_ref):
    stack = load_stack(stack_values("team-vision-dev"), stack="team-vision-dev", project_dir=SHIPPED_DIR)
    dashboard = tenant_run.one(DASHBOARD)
    assert dashboard.input("project") == "acme-ml-dev-vision"
    tiles = json.loads(dashboard.input("dashboardJson"))["mosaicLayout"]["tiles"]
    [cost] = [t["widget"] for t in tiles if t["widget"]["title"].startswith("GPU nodes now")]
    thresholds = {t["label"].split()[0]: t["value"] for t in cost["xyChart"]["thresholds"]}
    assert thresholds == {
        "busy": round(stack.tenant.gpu_busy_usd_per_hour, 4),
        "ceiling": round(stack.tenant.gpu_usd_per_hour_ceiling, 4),
    }
    titles = {t["widget"]["title"] for t in tiles}
    assert {"GPUs allocated", "GPU pods waiting for a node", "GPU VMs by pool", "GPU utilization (DCGM_FI_DEV_GPU_UTIL)", "GPU memory used"} <= titles
    # One series per pool of the team, named after it.
    [pools] = [t["widget"] for t in tiles if t["widget"]["title"] == "GPU VMs by pool"]
    query = pools["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"]
    assert [p.name for p in stack.tenant.gpu_pools] == ["l4-2x", "t4-1x-spot"] and all(f'"pool", "{p}"' in query for p in ("l4-2x", "t4-1x-spot"))


def test_a_team_may_go_without_its_own_dashboard(configured_run):
    assert [d.name for d in configured_run.of_type(DASHBOARD)] == ["monitoring-dashboard", "tenant-nlp-monitoring-dashboard"]


# --- GCP: the grant, the scope, the alert policies -------------------------------------------------


def test_the_collectors_grant_is_on_the_teams_project_only(prod_run, dev_run):
    [writer] = [m for m in prod_run.of_type(PROJECT_MEMBER) if m.input("role") == "roles/monitoring.metricWriter"]
    assert writer.input("project") == "acme-prod-research" != "acme-ml-prod"
    assert writer.input("member") == "serviceAccount:prod-research-nodes@acme-prod-research.iam.gserviceaccount.com"
    assert writer.input("condition") is None
    # Shared teams' project is the environment's.
    shared = [m for m in dev_run.of_type(PROJECT_MEMBER) if m.input("role") == "roles/monitoring.metricWriter"]
    assert sorted(m.input("member").split("@")[0] for m in shared) == ["serviceAccount:dev-nlp-nodes", "serviceAccount:dev-speech-nodes"]


def test_one_monitored_project_per_team_project(prod_run, tenant_run, dev_run):
    [research] = prod_run.of_type(MONITORED_PROJECT)
    assert (research.input("metricsScope"), research.input("name")) == ("acme-ml-prod", "acme-prod-research")
    [vision] = tenant_run.of_type(MONITORED_PROJECT)
    assert (vision.input("metricsScope"), vision.input("name")) == ("acme-ml-dev", "acme-ml-dev-vision")
    assert dev_run.of_type(MONITORED_PROJECT) == []  # shared teams write into the scoping project itself
    # The link waits for the environment's Monitoring API (same stack) and the team's.
    apis = {s.input("service"): s.urn for s in prod_run.of_type("gcp:projects/service:Service") if s.input("service") == "monitoring.googleapis.com"}
    assert apis and set(apis.values()) <= prod_run.depends_on(research.urn)


def test_alert_policies_per_environment_with_the_thresholds_from_config(configured_run, dev_run):
    policies = {p.name.removeprefix("monitoring-"): p for p in configured_run.of_type(ALERT_POLICY)}
    # Every team's (inline and the team stack's) pool alert, the three for every GPU, and the capacity shortage of every team.
    assert set(policies) == {
        "idle-gpu", "gpu-not-offered", "gpu-errors", "capacity-shortage", "pool-at-limit-nlp", "pool-at-limit-speech", "pool-at-limit-vision"
    }
    assert all(p.input("project") == "acme-ml-dev" for p in policies.values())

    def condition(key: str) -> dict:
        [c] = policies[key].input("conditions")
        return c["conditionPrometheusQueryLanguage"]

    assert condition("idle-gpu")["duration"] == "7200s" and condition("idle-gpu")["query"].endswith("< 5")
    assert condition("gpu-not-offered")["duration"] == "1500s"
    assert condition("pool-at-limit-vision")["duration"] == "1200s"
    assert condition("capacity-shortage")["duration"] == "900s"
    assert all(condition(k)["disableMetricValidation"] is True for k in policies)
    [email] = configured_run.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
    assert email.input("type") == "email" and email.input("labels") == {"email_address": "gpu-oncall@example.com"}
    assert policies["idle-gpu"].input("notificationChannels")[0] == CHANNEL and len(policies["idle-gpu"].input("notificationChannels")) == 2
    # None by default.
    assert all(not p.input("notificationChannels") for p in dev_run.of_type(ALERT_POLICY))
    assert dev_run.of_type("gcp:monitoring/notificationChannel:NotificationChannel") == []
