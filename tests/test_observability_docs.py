"""docs/observability.md: what a team member and the platform team paste works. Its PromQL parses
and uses only metrics the collector exports, its SQL runs on the cost view's columns, its names are
the program's, and what it says the plan prints, the plan prints."""

from __future__ import annotations

import re
import shlex
from types import SimpleNamespace

import pytest
import sqlglot
from sqlglot.optimizer.qualify import qualify

from components import capacity_fallback as fallback
from components import dcgm_metrics as dcgm
from components import monitoring_documents as docs
from components import monitoring_queries as q
from components.dashboards import team_dashboard_name
from components.showback import VIEW_COLUMNS, cost_per_team_query
from config.base import duration_seconds, duration_text
from config.errors import ConfigError
from config.monitoring import MAX_SCRAPE_SECONDS, Alerts, MonitoringConfig, showback_dataset, view_name, watchdog_removal_seconds
from config.reliability import GPU_TIMEOUT, WATCHDOG_POLL_SECONDS
from config.stack import load_stack
from docs_support import code_blocks, page, section
from monitoring_support import DCGM_RECORD, KSM_RECORD, VIEW_TYPES, dcgm_job, dcgm_labels_used, dcgm_series_labels, selectors
from shipped_stacks import SHIPPED_DIR, shipped_values
from tools import monitoring_plan

PAGE = "docs/observability.md"


def blocks(language: str) -> list[str]:
    return [text for name, _, text in code_blocks(language) if name == PAGE]


def test_every_promql_example_parses_and_uses_exported_metrics(dev_run):
    queries = blocks("promql")
    assert len(queries) == 5
    exported = {field for field, kind, _ in dcgm.DCGM_METRICS if kind != "label"}
    config, job = dcgm_job(dev_run, "nlp")
    for query in queries:
        for selector in selectors(query.strip()):
            if selector.name in fallback.METRICS:  # the capacity fallback's own, by the labels it writes
                assert {m.name for m in selector.matchers.matchers} <= {"tenant", *fallback.METRICS[selector.name][2]}
                continue
            assert selector.name in exported | set(docs.KSM_METRICS), selector.name
            assert selector.name in DCGM_RECORD["fields"] or selector.name in KSM_RECORD["metrics"]
            assert any(m.name == "tenant" for m in selector.matchers.matchers), f"{selector.name}: a team's query selects its tenant"
        for label, metric in dcgm_labels_used(query.strip()):
            assert label in dcgm_series_labels(config, job, metric), f"{metric} has no label {label}"
    # Waiting pods are counted as the dashboard and the queueing alert count them: not scheduled yet.
    [waiting] = [query.strip() for query in queries if q.UNSCHEDULED in query]
    assert waiting == q.pending_gpu_pods("vision")


def test_every_sql_example_runs_on_the_cost_view():
    dev = load_stack(shipped_values("dev"), stack="dev", project_dir=SHIPPED_DIR)
    view = view_name(dev.project, dev.stack)
    project, dataset, table = view.split(".")
    schema = {project: {dataset: {table: dict(zip(VIEW_COLUMNS, VIEW_TYPES))}}}
    queries = blocks("sql")
    assert len(queries) == 2
    for sql in queries:
        assert f"`{view}`" in sql
        qualify(sqlglot.parse_one(sql, read="bigquery"), schema=schema, dialect="bigquery", validate_qualify_columns=True)
    # The week's query is the one the program knows; the ceiling is held against the GPU nodes' USD
    # cost, never the team's whole cost in the account's currency.
    assert queries[0].strip() == cost_per_team_query(view)
    [above] = [a.unalias() for a in sqlglot.parse_one(queries[1], read="bigquery").selects if a.alias_or_name == "above_ceiling"]
    assert isinstance(above, sqlglot.exp.GT) and (above.this.name, above.expression.name) == ("gpu_node_cost_usd", "gpu_ceiling_usd_per_day")
    # The columns the page names are the view's.
    text = section("For the platform team: cost per team")
    assert all(f"`{column}`" in text for column in VIEW_COLUMNS)


def test_the_billing_export_command_names_a_table_the_program_accepts():
    [line] = [line for text in blocks("sh") for line in text.splitlines() if "billingExportTable" in line]
    words = shlex.split(line)
    assert words[:4] == ["pulumi", "config", "set", "--path"] and words[4] == "gpu-platform:monitoring.showback.billingExportTable"
    values = shipped_values("dev")
    values["gpu-platform:monitoring"] = {"showback": {"billingExportTable": words[5]}}
    env = load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert words[5].split(".")[:2] == [env.project, showback_dataset("dev")]
    assert env.facts.cost_view == "acme-ml-dev.gpu_platform_dev_billing.gpu_cost_by_team"
    assert f"`{env.facts.cost_view}`" in page(PAGE)


def test_the_names_on_the_page_are_the_programs():
    text = page(PAGE)
    assert all(f"`{name}`" in text for name in fallback.METRICS) and f"namespace `{fallback.NAMESPACE}`" in text
    assert all(f"`{reason}`" in text for reason in (fallback.CAPACITY, fallback.QUOTA, fallback.LAUNCH_FAILED, fallback.NOT_LAUNCHED))
    assert team_dashboard_name("<environment>", "<team>").replace("<team>", "`<team>`").replace("<environment>", "`<environment>`") in text
    assert f"`{docs.MONITORING_NAMESPACE}`" in text and "`hostNetwork`" in text
    assert f"`{showback_dataset('<stack>')}`" in text and f"`acme-ml-dev.{showback_dataset('dev')}`" in text


def test_the_alert_table_gives_the_defaults():
    rows = section("For the platform team: alerts")
    defaults = Alerts()
    for key, value in (
        ("idleGpuAfter", defaults.idle_gpu_after),
        ("idleUtilizationPercent", f"{defaults.idle_utilization_percent:g}"),
        ("gpuNotOfferedAfter", defaults.gpu_not_offered_after),
        ("poolAtLimitAfter", defaults.pool_at_limit_after),
        ("capacityShortageAfter", defaults.capacity_shortage_after),
    ):
        assert f"`alerts.{key}` ({value})" in rows
    assert MonitoringConfig().notification_channels == () and "none by default" in rows


def test_what_the_page_says_of_the_alert_and_the_watchdog():
    text = " ".join(section("For the platform team: alerts").split())
    assert f"`gpuTimeout` ({GPU_TIMEOUT} by default" in text and f"two of the watchdog's {WATCHDOG_POLL_SECONDS}-second polls" in text
    # The error the page shows is the one the program gives for it.
    [example] = [b for b in blocks("") if "gpuNotOfferedAfter" in b]
    values = shipped_values("dev")
    values["gpu-platform:tenants"][0]["gpuPools"][0]["gpuTimeout"] = "25m"
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [example.strip()]
    # The longest gpuTimeout the default admits, at the default and the slowest scrape interval.
    default = duration_seconds(Alerts().gpu_not_offered_after)
    for scrape, longest in (("60s", "18m"), (f"{MAX_SCRAPE_SECONDS}s", "14m")):
        assert watchdog_removal_seconds(longest, scrape) >= default > watchdog_removal_seconds(duration_text(duration_seconds(longest) - 1), scrape)
    assert "of 18m or more (14m or more with a 5m scrape interval)" in text


@pytest.mark.parametrize("stack", ["dev", "team-vision-dev"])
def test_what_the_page_says_the_plan_prints_it_prints(stack, runs):
    loaded = load_stack(shipped_values(stack), stack=stack, project_dir=SHIPPED_DIR)
    plan = SimpleNamespace(loaded=loaded, run=runs[stack])  # what the plan's monitoring section reads
    tenants = loaded.tenants if stack == "dev" else (loaded.tenant,)
    for tenant in tenants:
        line = monitoring_plan.tenant_line(plan, tenant)
        assert f'dashboard "{team_dashboard_name(loaded.environment, tenant.tenant.name)}"' in line
        assert "cost view: billing export is not set up yet" in line
    if stack == "dev":
        text = "\n".join(monitoring_plan.section(plan))
        assert "showback: billing export is not set up yet" in text and "showback: billing export is not set up yet" in page(PAGE)
        # The console steps the plan prints are the page's.
        steps = re.search(r"Billing → Billing export → BigQuery export, Standard usage cost: Edit settings, choose that project\s+and dataset, Save", page(PAGE))
        assert steps and "Billing → Billing export → BigQuery export, Standard usage cost: Edit settings, choose that project and dataset, Save" in text


def test_the_outputs_the_page_names_exist(dev_run, tenant_run):
    assert "dashboardUrl" in tenant_run.outputs["monitoring"] and "dashboardUrl" in dev_run.outputs["tenants"]["nlp"]["monitoring"]
    assert "`pulumi stack output monitoring`" in page(PAGE) and "`pulumi stack output tenants`" in page(PAGE)


def test_what_the_page_says_each_series_carries(dev_run):
    text = " ".join(section("Where the metrics come from").split())
    config, job = dcgm_job(dev_run, "nlp")
    assert "Every series carries `tenant` and `environment`." in text and {"tenant", "environment"} <= set(config["global"]["external_labels"])
    [gpu] = re.findall(r"A GPU's series \(the DCGM exporter's\) also carry (.+?)\. ", text)
    assert set(re.findall(r"`(\w+)`", gpu)) == {"node", "Hostname", "gpu", "modelName", "namespace", "pod", "container"}
    assert set(re.findall(r"`(\w+)`", gpu)) <= dcgm_series_labels(config, job, "DCGM_FI_DEV_GPU_UTIL")
    # kube-state-metrics' series: node only where the record has it.
    ksm = KSM_RECORD["metrics"]
    assert "(`kube_pod_container_resource_requests` also `node`, `kube_pod_status_phase` not)" in text
    assert "node" in ksm["kube_pod_container_resource_requests"]["labels"] and "node" not in ksm["kube_pod_status_phase"]["labels"]
    assert all("node" in ksm[m]["labels"] for m in docs.KSM_METRICS if m.startswith("kube_node_"))
    assert f"the XID count (`{dcgm.XID_COUNT}`)" in text and dcgm.XID_COUNT in {f for f, _, _ in dcgm.DCGM_EXTRA_METRICS}


def test_the_xid_row_says_what_the_alert_says():
    [row] = [line for line in section("For the platform team: alerts").splitlines() if line.startswith("| XID or ECC errors on a GPU |")]
    codes = ", ".join(str(c) for c in q.APPLICATION_XIDS[:-1]) + f" and {q.APPLICATION_XIDS[-1]}"
    assert f"in the last {q.ERROR_WINDOW}." in row and f"`{dcgm.XID_COUNT}`" in row
    assert f"XID {codes} alone are most often the application's: tell the team of the pod; any other code, or ECC errors: drain the node" in row
    assert q.gpu_errors().title == "XID or ECC errors on a GPU"
