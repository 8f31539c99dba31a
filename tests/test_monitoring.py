"""Monitoring as configured: showback (the cost view, checked with a BigQuery-dialect SQL parser
against the billing export's documented schema, tests/data), turning it all off, and the config it
refuses, each key named."""

from __future__ import annotations

import json

import pulumi
import pytest
import sqlglot
import yaml
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from components import monitoring_documents as docs
from components.showback import GPU_NODE_LABEL, VIEW_COLUMNS, TeamCost, cost_per_team_query, cost_view_sql
from config.errors import ConfigError
from config.monitoring import Alerts
from config.stack import load_stack
from monitoring_support import BILLING_TABLE, CHANNEL, DATA, NS, PROJECT_MEMBER, VCI, VIEW_TYPES, gpu_operator_values
from monitoring_support import configured_run, dev_stack  # noqa: F401 - module-scoped fixtures
from shipped_stacks import SHIPPED_DIR, refused, run_shipped
from tools.mock_engine import run_program

BILLING_SCHEMA = yaml.safe_load((DATA / "billing-export-standard-schema.yaml").read_text())["columns"]
OWN_CHANNELS = "allowed: projects/acme-ml-dev/notificationChannels/<id>, a channel of the environment's project, where its alert policies live"


# --- showback --------------------------------------------------------------------------------------


def schema_for(table: str) -> dict:
    project, dataset, name = table.split(".")
    return {project: {dataset: {name: BILLING_SCHEMA}}}


def checked_sql(sql: str, table: str) -> exp.Expression:
    """The SQL as BigQuery's dialect parses it, every column resolved against the export's schema
    (a column or struct field the schema lacks fails)."""
    tree = qualify(sqlglot.parse_one(sql, read="bigquery"), schema=schema_for(table), dialect="bigquery", validate_qualify_columns=True)
    typed = annotate_types(tree, schema=schema_for(table), dialect="bigquery")
    unknown = [d.sql("bigquery") for d in typed.find_all(exp.Dot) if d.type is None or d.type.is_type(exp.DataType.Type.UNKNOWN)]
    assert unknown == [], f"fields the export does not have: {unknown}"
    return typed


def test_the_cost_view_reads_only_the_exports_documented_columns(configured_run, dev_stack):
    [view] = configured_run.of_type("gcp:bigquery/table:Table")
    assert view.input("view")["useLegacySql"] is False and view.input("deletionProtection") is False
    assert view.input("tableId") == "gpu_cost_by_team"
    typed = checked_sql(view.input("view")["query"], BILLING_TABLE)
    columns = [(s.alias_or_name, s.type.sql("bigquery")) for s in typed.selects]
    assert columns == list(zip(VIEW_COLUMNS, VIEW_TYPES))
    sql = view.input("view")["query"]
    # A team is its project in project mode (the team stack's vision), the VM label `tenant` in shared mode.
    assert "WHEN 'acme-ml-dev-vision' THEN 'vision'" in sql and "l.key = 'tenant'" in sql
    ceilings = {t.tenant.name: round(t.gpu_usd_per_hour_ceiling * 24, 2) for t in (*dev_stack.tenants, *dev_stack.team_stack_tenants)}
    assert all(f"STRUCT('{team}' AS team, {ceiling} AS gpu_ceiling_usd_per_day)" in sql for team, ceiling in ceilings.items())
    [dataset] = configured_run.of_type("gcp:bigquery/dataset:Dataset")
    assert dataset.input("location") == "EU" and dataset.input("deleteContentsOnDestroy") is False
    assert dataset.retain_on_delete  # billing history outlives the stack once export writes there


def projection(select: exp.Select, alias: str) -> exp.Expression:
    [found] = [e for e in select.selects if e.alias_or_name == alias]
    return found.unalias()


def test_the_gpu_node_cost_is_the_gpu_nodes_net_cost_in_us_dollars(configured_run):
    """What to hold against the plan's ceiling (GPU nodes only, USD): the net cost of line items
    labelled as a GPU node's, each divided by its own currency_conversion_rate (cost ÷ rate = USD)."""
    [view] = configured_run.of_type("gcp:bigquery/table:Table")
    typed = checked_sql(view.input("view")["query"], BILLING_TABLE)
    [line_items] = [c.this for c in typed.find_all(exp.CTE) if c.alias == "line_items"]
    total = projection(typed, "gpu_node_cost_usd")
    assert isinstance(total, exp.Sum) and isinstance(total.this, exp.If)
    usd = total.this.args["true"]
    assert isinstance(usd, exp.Div) and (usd.this.name, usd.expression.name) == ("net_cost", "currency_conversion_rate")
    assert total.this.args["false"].name == "0"
    # Net cost is the line item's cost with its credits, and the rate the export's own column.
    net = projection(line_items, "net_cost")
    assert isinstance(net, exp.Add) and net.this.name == "cost" and "credits" in net.expression.sql("bigquery")
    rate = projection(line_items, "currency_conversion_rate")
    assert isinstance(rate, exp.Column) and rate.type.sql("bigquery") == BILLING_SCHEMA["currency_conversion_rate"] == "FLOAT64"
    # Only line items whose resource carries the node template's GPU label.
    on_gpu_node = projection(line_items, total.this.this.name)
    assert isinstance(on_gpu_node, exp.Exists)
    [unnest] = on_gpu_node.find_all(exp.Unnest)
    assert [c.name for c in unnest.expressions] == ["labels"]
    label = {eq.this.name: eq.expression.name for eq in on_gpu_node.find_all(exp.EQ)}
    assert label == {"key": GPU_NODE_LABEL[0], "value": GPU_NODE_LABEL[1]} == {"key": "gpu", "value": "true"}


def test_the_sql_check_fails_on_a_column_the_export_lacks():
    sql = cost_view_sql(billing_table=BILLING_TABLE, environment_project="acme-ml-dev", teams=(TeamCost("nlp", None, 1.0),))
    with pytest.raises(Exception, match="currency"):
        checked_sql(sql.replace("currency", "currency_code", 1), BILLING_TABLE)
    with pytest.raises(AssertionError, match="pricing_units"):
        checked_sql(sql.replace("usage.pricing_unit", "usage.pricing_units"), BILLING_TABLE)


def test_without_billing_export_there_is_a_dataset_and_no_view(dev_run):
    [dataset] = dev_run.of_type("gcp:bigquery/dataset:Dataset")
    assert dataset.input("datasetId") == "gpu_platform_dev_billing" and dataset.input("location") == "US"
    assert dev_run.of_type("gcp:bigquery/table:Table") == [] and not dataset.retain_on_delete
    assert dev_run.outputs["monitoring"]["costView"] is None


def test_the_platform_teams_cost_query_runs_on_the_view():
    view = "acme-ml-dev.gpu_platform_dev_billing.gpu_cost_by_team"
    schema = {"acme-ml-dev": {"gpu_platform_dev_billing": {"gpu_cost_by_team": dict(zip(VIEW_COLUMNS, VIEW_TYPES))}}}
    qualify(sqlglot.parse_one(cost_per_team_query(view), read="bigquery"), schema=schema, dialect="bigquery", validate_qualify_columns=True)


# --- off -------------------------------------------------------------------------------------------


def test_turning_monitoring_off_removes_all_of_it(stack_values, dev_run):
    values = stack_values("dev")
    values[f"{NS}:monitoring"] = {"enabled": False}
    run = run_shipped(values, stack="dev")
    assert [r.type for r in run.registrations if r.type.startswith(("gcp:monitoring/", "gcp:bigquery/", "gpu-platform:monitoring:"))] == []
    assert [m for m in run.of_type(PROJECT_MEMBER) if "monitoring" in m.input("role")] == []
    assert {s.input("service") for s in run.of_type("gcp:projects/service:Service")} & {"monitoring.googleapis.com", "bigquery.googleapis.com"} == set()
    for tenant in ("nlp", "speech"):
        vci = run.one(VCI, tenant)
        assert docs.MONITORING_NAMESPACE not in vci.input("spec", "template", "objects")
        assert {"config", "env"}.isdisjoint(gpu_operator_values(vci)["dcgmExporter"])
        assert run.outputs["tenants"][tenant]["monitoring"] == {"enabled": False}
    assert run.outputs["monitoring"] == {"enabled": False}
    # The rest of the stack is untouched.
    others = lambda r: [x.type for x in r.registrations if not x.type.startswith(("gcp:monitoring/", "gcp:bigquery/", "gpu-platform:monitoring:"))]  # noqa: E731
    assert len(others(run)) == len(others(dev_run)) - 2 - 2  # the two metricWriter bindings, the two APIs


# --- bad input -------------------------------------------------------------------------------------


def test_bad_monitoring_config_names_each_key_and_registers_nothing(stack_values):
    values = stack_values("dev")
    values[f"{NS}:monitoring"] = {
        "scrapeInterval": "5s",
        "notificationChannels": [
            "gpu-oncall@example.com",
            {"slack": "#gpu"},
            {"channel": "oncall"},
            {},
            {"channel": CHANNEL},  # the environment's own: fine
            {"channel": "projects/acme-ml-prod/notificationChannels/42"},
            {"channel": "projects/123456789012/notificationChannels/42"},
        ],
        "alerts": {"idleGpuAfter": "0s", "idleUtilizationPercent": 0, "capacityShortageAfter": "soon"},
    }
    values[f"{NS}:tenants"][0]["monitoring"] = {"scrapeInterval": "10m"}
    message = refused(values, stack="dev")
    assert "notificationChannels[4]" not in message
    for expected in (
        "monitoring.scrapeInterval: 5s is out of range; allowed: 10s to 5m",
        "monitoring.notificationChannels[0]: expected a mapping, got a string; allowed keys: channel, email\n",
        "monitoring.notificationChannels[1].slack: unknown key; allowed: channel, email",
        f"monitoring.notificationChannels[2].channel: 'oncall' is not a channel's name; {OWN_CHANNELS}",
        "monitoring.notificationChannels[3]: names neither of email and channel; allowed: {email: <address>} or "
        "{channel: projects/acme-ml-dev/notificationChannels/<id>}",
        "monitoring.notificationChannels[5].channel: 'projects/acme-ml-prod/notificationChannels/42' is a channel of project "
        f"acme-ml-prod; {OWN_CHANNELS}",
        "monitoring.notificationChannels[6].channel: 'projects/123456789012/notificationChannels/42' names its project by number, "
        f"which cannot be told apart from another project's before deploying; {OWN_CHANNELS}",
        "monitoring.alerts.idleGpuAfter: 0s would alert at once; allowed: a duration above 0",
        "monitoring.alerts.capacityShortageAfter: 'soon' is not a duration like 10m or 1h",
        "monitoring.alerts.idleUtilizationPercent: 0 is out of range; allowed: above 0",
        "tenants[0].monitoring.scrapeInterval: 10m is out of range; allowed: 10s to 5m",
    ):
        assert expected in message


def test_an_alert_that_would_fire_before_the_watchdog_names_both_keys_and_registers_nothing(stack_values):
    values = stack_values("dev")
    # 12m is exactly the 10m default gpuTimeout, two 30 s polls and one 60 s scrape: not longer.
    values[f"{NS}:monitoring"] = {"alerts": {"gpuNotOfferedAfter": "12m"}}
    values[f"{NS}:tenants"][1]["gpuPools"][0]["gpuTimeout"] = "11m"
    values[f"{NS}:tenants"][1]["monitoring"] = {"scrapeInterval": "15s"}
    with pytest.raises(pulumi.RunError) as caught:
        run_shipped(values, stack="dev")
    assert caught.value.registrations == []
    message = str(caught.value)
    for tenant, timeout, scrape, under, above in ((0, "10m", "60s", "10m", "12m"), (1, "11m", "15s", "10m45s", "12m15s")):
        assert (
            f"tenants[{tenant}].gpuPools[0].gpuTimeout: {timeout} leaves the GPU watchdog no time before monitoring.alerts.gpuNotOfferedAfter "
            f"of environment dev (12m) fires: a node the watchdog removes matches that alert for up to gpuTimeout + 60s (two watchdog "
            f"polls) + {scrape} (one scrape); allowed: a gpuTimeout under {under}, or monitoring.alerts.gpuNotOfferedAfter above {above}"
        ) in message


def test_the_alert_and_the_watchdog_limit_are_checked_both_ways(stack_values):
    # One second past the watchdog's worst case is enough.
    values = stack_values("dev")
    values[f"{NS}:monitoring"] = {"alerts": {"gpuNotOfferedAfter": "12m1s"}}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    # The default alert holds at every scrape interval allowed, the slowest included.
    values = stack_values("dev")
    values[f"{NS}:monitoring"] = {"scrapeInterval": "5m"}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    # A team stack's longer limit is refused against its environment's alert, which it names.
    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"]["gpuPools"][1]["gpuTimeout"] = "20m"
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="team-vision-dev", project_dir=SHIPPED_DIR)
    [problem] = caught.value.problems
    assert problem.path == "tenant.gpuPools[1].gpuTimeout"
    assert f"monitoring.alerts.gpuNotOfferedAfter of environment dev ({Alerts().gpu_not_offered_after})" in str(problem)
    # Not checked where nothing is collected: the tenant's monitoring off.
    values[f"{NS}:tenant"]["monitoring"] = {"enabled": False}
    load_stack(values, stack="team-vision-dev", project_dir=SHIPPED_DIR)


def test_monitoring_needs_the_monitoring_api_of_its_environment(stack_values):
    values = stack_values("dev")
    values[f"{NS}:monitoring"] = {"enabled": False}
    values[f"{NS}:tenants"][0]["monitoring"] = {"enabled": True}
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [
        "tenants[0].monitoring.enabled: true, but environment dev has monitoring off (gpu-platform:monitoring.enabled: false): the "
        "Monitoring API is not enabled in its project acme-ml-dev, whose metrics scope this team's metrics join; turn monitoring on there first"
    ]


def test_a_team_stack_waits_for_its_environment_to_have_monitoring(dev_run, stack_values, env_stack_ref):
    outputs = json.loads(json.dumps(dev_run.outputs))
    outputs["environmentFacts"]["monitoringEnabled"] = False  # deployed before monitoring existed
    with pytest.raises(pulumi.RunError, match="deployed with monitoringEnabled False, but its stack file in this repo says True"):
        run_program(stack_values("team-vision-dev"), stack="team-vision-dev", stack_outputs={env_stack_ref: outputs}, project_dir=SHIPPED_DIR)
