"""Monitoring: the collector on every GPU node, its one grant, the metrics scope, dashboards and
alert policies, showback, and turning it all off; every document checked with its upstream's own
types or parser (Google's Dashboard types, a PromQL parser, a BigQuery-dialect SQL parser) and every
metric name against the exporters' documented lists (tests/data)."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import promql_parser
import pulumi
import pytest
import sqlglot
import yaml
from google.cloud.monitoring_dashboard_v1.types import Dashboard
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from components import capacity_fallback as fallback
from components import dcgm_metrics as dcgm
from components import monitoring_documents as docs
from components import monitoring_queries as q
from components import watchdog_documents as watchdog
from components.showback import GPU_NODE_LABEL, VIEW_COLUMNS, TeamCost, cost_per_team_query, cost_view_sql
from components.templates import KUBERNETES_IMAGES
from components.vcluster_values import VClusterValues
from config import versions
from config.base import duration_seconds
from config.errors import ConfigError
from config.monitoring import MAX_SCRAPE_SECONDS, Alerts
from config.stack import load_stack
from docs_support import page, section
from hcl_support import require
from shipped_stacks import SHIPPED_DIR, refused, run_shipped, shipped_values
from tenant_objects import instance_objects, named
from tools.mock_engine import run_program

NS = "gpu-platform"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
MONITORED_PROJECT = "gcp:monitoring/monitoredProject:MonitoredProject"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
DATA = Path(__file__).parent / "data"
DCGM_RECORD = yaml.safe_load((DATA / "dcgm-exporter-4.4.2-4.7.0-metrics.yaml").read_text())
KSM_RECORD = yaml.safe_load((DATA / "kube-state-metrics-v2.20.0-metrics.yaml").read_text())
BILLING_SCHEMA = yaml.safe_load((DATA / "billing-export-standard-schema.yaml").read_text())["columns"]
BILLING_TABLE = "acme-ml-dev.gpu_platform_dev_billing.gcp_billing_export_v1_012345_6789AB_CDEF01"
CHANNEL = "projects/acme-ml-dev/notificationChannels/1234567890"
OWN_CHANNELS = "allowed: projects/acme-ml-dev/notificationChannels/<id>, a channel of the environment's project, where its alert policies live"
# The cost view's column types, in the order of VIEW_COLUMNS.
VIEW_TYPES = ["DATE", "STRING", "FLOAT64", "STRING", "FLOAT64", "FLOAT64", "FLOAT64"]


def gpu_operator_values(vci) -> dict:
    [chart] = vci.input("spec", "template", "charts")
    return yaml.safe_load(chart["values"])


@pytest.fixture(scope="module")
def configured_run():
    """dev with every monitoring option set: channels of both forms, thresholds, billing export."""
    values = shipped_values("dev")
    values[f"{NS}:monitoring"] = {
        "scrapeInterval": "30s",
        "notificationChannels": [{"channel": CHANNEL}, {"email": "gpu-oncall@example.com"}],
        "alerts": {"idleGpuAfter": "2h", "idleUtilizationPercent": 5, "gpuNotOfferedAfter": "25m", "poolAtLimitAfter": "20m", "capacityShortageAfter": "15m"},
        "showback": {"billingExportTable": BILLING_TABLE, "datasetLocation": "EU"},
    }
    values[f"{NS}:tenants"][1]["monitoring"] = {"scrapeInterval": "15s", "dashboard": False}
    return run_shipped(values, stack="dev")


# --- the collector ---------------------------------------------------------------------------------


@pytest.mark.parametrize("run_name, tenant, project", [("dev_run", "nlp", "acme-ml-dev"), ("tenant_run", "vision", "acme-ml-dev-vision")])
def test_every_gpu_node_runs_the_collector(request, run_name, tenant, project):
    vci = request.getfixturevalue(run_name).one(VCI, tenant)
    objects = instance_objects(vci)  # valid Kubernetes objects: tests/test_tenants.py validates them
    collector = named(objects, "DaemonSet", docs.COLLECTOR, docs.MONITORING_NAMESPACE)
    assert collector["metadata"]["namespace"] == docs.MONITORING_NAMESPACE
    pod = collector["spec"]["template"]["spec"]
    # Every node, GPU nodes included: it tolerates each GPU pool's taint and selects no node type.
    for pool in VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values")).gpu_pools():
        for taint in pool.taints:
            assert any(t.get("operator") == "Exists" and t.get("key") in (None, taint["key"]) for t in pod["tolerations"]), taint
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    # The node's network (the metadata server's token), and nothing else of the node's.
    assert pod["hostNetwork"] is True
    assert [v for v in pod["volumes"] if "hostPath" in v] == []
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False and not container["securityContext"].get("privileged")
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    [prometheus] = pod["containers"]
    assert prometheus["image"] == versions.GMP_PROMETHEUS_IMAGE
    assert f"--web.listen-address=127.0.0.1:{docs.COLLECTOR_PORT}" in prometheus["args"]
    # Its configuration: the team's labels on every series, this node's targets only.
    config = yaml.safe_load(named(objects, "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"])
    assert config["global"]["external_labels"] == {"project_id": project, "location": "europe-west4", "cluster": tenant, "tenant": tenant, "environment": "dev"}
    assert config["global"]["scrape_interval"] == "60s"
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    [dcgm_sd] = jobs["dcgm-exporter"]["kubernetes_sd_configs"]
    assert dcgm_sd["namespaces"]["names"] == ["gpu-operator"]
    assert dcgm_sd["selectors"] == [{"role": "pod", "label": "app=nvidia-dcgm-exporter", "field": f"spec.nodeName={docs.NODE_NAME_PLACEHOLDER}"}]
    assert docs.NODE_NAME_PLACEHOLDER in pod["initContainers"][0]["command"][-1]
    assert jobs[docs.KUBE_STATE_METRICS]["honor_labels"] is True
    # The capacity fallback's metrics, from its pod on this node, its port named metrics.
    [fallback_sd] = jobs[docs.FALLBACK]["kubernetes_sd_configs"]
    assert fallback_sd["namespaces"]["names"] == [docs.FALLBACK_NAMESPACE]
    assert fallback_sd["selectors"] == [{"role": "pod", "label": f"app.kubernetes.io/name={docs.FALLBACK}", "field": f"spec.nodeName={docs.NODE_NAME_PLACEHOLDER}"}]
    deployment = named(objects, "Deployment", docs.FALLBACK, docs.FALLBACK_NAMESPACE)["spec"]["template"]
    assert deployment["metadata"]["labels"]["app.kubernetes.io/name"] == docs.FALLBACK
    assert deployment["spec"]["containers"][0]["ports"] == [{"name": "metrics", "containerPort": 9464}]
    assert {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "metrics", "action": "keep"} in jobs[docs.FALLBACK]["relabel_configs"]
    # Its service discovery reads pods in those three namespaces, and nothing else.
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole") and o["metadata"]["name"].startswith(docs.COLLECTOR)]
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(["gpu-operator", docs.MONITORING_NAMESPACE, docs.FALLBACK_NAMESPACE])
    assert all(r["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}] for r in roles)
    ksm = named(objects, "Deployment", docs.KUBE_STATE_METRICS, docs.MONITORING_NAMESPACE)["spec"]["template"]["spec"]
    assert "hostNetwork" not in ksm and ksm["containers"][0]["image"] == versions.KUBE_STATE_METRICS_IMAGE


def test_the_collector_namespace_is_privileged_for_host_network_only(dev_run):
    objects = instance_objects(dev_run.one(VCI, "nlp"))
    namespace = named(objects, "Namespace", docs.MONITORING_NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("DaemonSet", "Deployment") and o["metadata"].get("namespace") == docs.MONITORING_NAMESPACE]
    assert [bool(p.get("hostNetwork")) for p in pods] == [True, False]


def test_the_scrape_interval_follows_the_tenant_then_the_environment(configured_run):
    def interval(tenant: str) -> str:
        config = named(instance_objects(configured_run.one(VCI, tenant)), "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"]
        return yaml.safe_load(config)["global"]["scrape_interval"]

    assert interval("nlp") == "30s" and interval("speech") == "15s"


MISSING_PROMTOOL = (
    "promtool is not on PATH, so the collector's Prometheus configuration cannot be checked by Prometheus itself: "
    "install the Debian or Ubuntu package prometheus, which ships it"
)


def require_promtool() -> str:
    """Prometheus' own checker: the test fails without it in CI, and skips elsewhere."""
    return require(shutil.which("promtool"), MISSING_PROMTOOL)


def promtool_check(promtool: str, configs: dict[str, str], directory: Path) -> subprocess.CompletedProcess:
    """`promtool check config` on each configuration. --syntax-only: the files a configuration names
    (the service account token) exist only inside the collector's pod."""
    paths = []
    for name, text in configs.items():
        paths.append(directory / f"{name}.yaml")
        paths[-1].write_text(text)
    return subprocess.run([promtool, "check", "config", "--syntax-only", *map(str, paths)], capture_output=True, text=True, timeout=60)


# Debian's Prometheus is built without Kubernetes service discovery ("Kubernetes support has been
# completely removed", its /usr/share/doc/prometheus/NEWS.Debian.gz, 1.5.0+ds-1), and so is its
# promtool: the one error it gives for our configuration is that field, unknown to it.
WITHOUT_KUBERNETES_SD = re.compile(r"line \d+: field kubernetes_sd_configs not found in type config\.ScrapeConfig")


def without_kubernetes_sd(text: str) -> str:
    """The configuration with each job's Kubernetes discovery replaced by one static target, for a
    promtool built without it: everything else (global settings, external labels, authorization,
    relabelling) is then checked as written."""
    config = yaml.safe_load(text)
    for job in config["scrape_configs"]:
        del job["kubernetes_sd_configs"]
        job["static_configs"] = [{"targets": ["127.0.0.1:9400"]}]
    return yaml.safe_dump(config)


def test_prometheus_accepts_the_collectors_configuration(dev_run, tenant_run, tmp_path):
    promtool = require_promtool()
    configs = {}
    for run, tenant in ((dev_run, "nlp"), (tenant_run, "vision")):
        text = named(instance_objects(run.one(VCI, tenant)), "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"]
        # As the ConfigMap holds it, and as the init container writes it on a node.
        configs[f"{tenant}-template"] = text
        configs[f"{tenant}-on-a-node"] = text.replace(docs.NODE_NAME_PLACEHOLDER, f"{tenant}-gpu-l4-abcde")
    checked = promtool_check(promtool, configs, tmp_path)
    errors = [line.strip() for line in checked.stderr.splitlines() if line.strip().startswith("line ")]
    if checked.returncode != 0 and errors and all(WITHOUT_KUBERNETES_SD.fullmatch(e) for e in errors):
        # A promtool without Kubernetes discovery (Debian's): the rest, as written.
        checked = promtool_check(promtool, {name: without_kubernetes_sd(text) for name, text in configs.items()}, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The check fails on what Prometheus refuses, such as a key it does not know.
    broken = configs["nlp-template"].replace("honor_labels:", "honour_labels:")
    refused = promtool_check(promtool, {"broken": without_kubernetes_sd(broken)}, tmp_path)
    assert refused.returncode != 0 and "field honour_labels not found" in refused.stderr


def exporter_metric_rows(text: str) -> list[list[str]]:
    """The metrics file as the DCGM exporter reads it (NVIDIA/dcgm-exporter tag 4.4.2-4.7.0,
    internal/pkg/counters/counter_config.go `ReadCSVFile`, `ExtractCounters`): Go's encoding/csv
    with Comment '#' and its defaults, FieldsPerRecord 0 (every record has the first one's field
    count), LazyQuotes and TrimLeadingSpace off (a quote opens a field only right after a comma);
    then each field trimmed of spaces and exactly three fields a record, or the exporter exits.
    Without quotes Python's csv module splits lines as Go's does; our file has none, and a quote
    fails here rather than be read differently."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    quoted = [line for line in lines if '"' in line]
    assert quoted == [], f"quotes, which Go's reader takes apart from Python's: {quoted}"
    records = list(csv.reader(lines))
    assert records, "no record: the exporter would collect nothing"
    uneven = [r for r in records if len(r) != len(records[0])]
    assert uneven == [], f"Go's reader wants the first record's {len(records[0])} fields in every record: {uneven}"
    rows = [[field.strip(" ") for field in record] for record in records]
    malformed = [r for r in rows if len(r) != 3]
    assert malformed == [], f"the exporter wants 3 fields a record (field, type, help): {malformed}"
    return rows


def test_the_dcgm_exporter_reads_our_metric_file(dev_run):
    values = gpu_operator_values(dev_run.one(VCI, "nlp"))["dcgmExporter"]
    assert values["config"]["name"] == dcgm.DCGM_METRICS_CONFIG_MAP and values["config"]["create"] is True
    rows = exporter_metric_rows(values["config"]["data"])
    for field, kind, _ in rows:
        assert field in DCGM_RECORD["fields"], f"{field} is not a field of the DCGM exporter"
        assert DCGM_RECORD["fields"][field]["type"] == kind, field
    # Our file replaces the exporter's list: every field of it first, then what we add.
    defaults = {f: v["type"] for f, v in DCGM_RECORD["fields"].items() if v["default"]}
    assert {f: kind for f, kind, _ in rows[: len(defaults)]} == defaults
    added = {f for f, _, _ in rows[len(defaults) :]}
    assert added == {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dcgm.XID_COUNT}
    assert not any(DCGM_RECORD["fields"][f]["default"] for f in added)
    assert len(rows) == len({f for f, _, _ in rows})


def test_the_metric_file_check_catches_what_stops_the_exporter():
    with pytest.raises(AssertionError, match="3 fields a record"):
        exporter_metric_rows("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization, percent.\n")
    with pytest.raises(AssertionError, match="first record's 3 fields"):
        exporter_metric_rows("DCGM_FI_DEV_FB_USED, gauge, Memory used.\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization, percent.\n")
    with pytest.raises(AssertionError, match="quotes"):
        exporter_metric_rows('DCGM_FI_DEV_GPU_UTIL, gauge, "GPU utilization, percent."\n')
    # And the program refuses to write such a line.
    row = ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization, percent.")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dcgm, "DCGM_METRICS", (row,))
        with pytest.raises(ValueError, match="DCGM metric DCGM_FI_DEV_GPU_UTIL: a comma, quote or newline"):
            dcgm.dcgm_metrics_csv()


def test_only_the_collector_may_read_kube_state_metrics(dev_run):
    """The tenant's default network enforces no NetworkPolicy (docs/security.md), so what keeps the
    team's pods out is kube-state-metrics' auth filter, which only the collector's token passes."""
    objects = instance_objects(dev_run.one(VCI, "nlp"))
    ksm = named(objects, "Deployment", docs.KUBE_STATE_METRICS, docs.MONITORING_NAMESPACE)["spec"]["template"]
    [container] = ksm["spec"]["containers"]
    assert "--auth-filter" in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {f"--port={ports['http-metrics']}", f"--telemetry-port={ports['telemetry']}"} <= set(container["args"])
    # What the filter asks the API server with, and nothing else beside the objects it lists.
    ksm_role = named(objects, "ClusterRole", f"gpu-platform-{docs.KUBE_STATE_METRICS}")
    assert ksm_role["rules"][1:] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    # Who passes it: the one subject bound to `get` on /metrics is the collector's account.
    readers = [r["metadata"]["name"] for r in objects if r["kind"] == "ClusterRole" and any("nonResourceURLs" in rule for rule in r["rules"])]
    assert readers == ["gpu-platform-gpu-metrics-collector-metrics"]
    assert named(objects, "ClusterRole", readers[0])["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = named(objects, "ClusterRoleBinding", readers[0])
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": docs.COLLECTOR, "namespace": docs.MONITORING_NAMESPACE}]
    # The collector sends that account's token, which the kubelet mounts into its pod.
    collector = named(objects, "DaemonSet", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["spec"]["template"]["spec"]
    assert collector["serviceAccountName"] == docs.COLLECTOR and collector.get("automountServiceAccountToken", True) is True
    config = yaml.safe_load(named(objects, "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"])
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == docs.KUBE_STATE_METRICS]
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    assert [j["job_name"] for j in config["scrape_configs"] if "authorization" in j] == [docs.KUBE_STATE_METRICS]


def test_the_network_policy_admits_only_the_collector(dev_run):
    """Where a network plugin enforces it: the kube-state-metrics pods accept only the collector's
    pods, on the metrics port. No address range: the one collector that scrapes it is on its node
    (its scrape job selects targets by spec.nodeName), which an isolated pod always admits."""
    objects = instance_objects(dev_run.one(VCI, "nlp"))
    [policy] = [o for o in objects if o["kind"] == "NetworkPolicy"]
    ksm = named(objects, "Deployment", docs.KUBE_STATE_METRICS, docs.MONITORING_NAMESPACE)["spec"]["template"]
    collector = named(objects, "DaemonSet", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["spec"]["template"]
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == docs.MONITORING_NAMESPACE
    assert spec["podSelector"]["matchLabels"].items() <= ksm["metadata"]["labels"].items()
    assert not spec["podSelector"]["matchLabels"].items() <= collector["metadata"]["labels"].items()
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    [source] = rule["from"]
    assert list(source) == ["podSelector"]  # same namespace, no ipBlock, no namespaceSelector
    assert source["podSelector"]["matchLabels"].items() <= collector["metadata"]["labels"].items()
    [port] = ksm["spec"]["containers"][0]["ports"][:1]
    assert rule["ports"] == [{"protocol": "TCP", "port": port["containerPort"]}] and port["name"] == "http-metrics"
    config = yaml.safe_load(named(objects, "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"])
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == docs.KUBE_STATE_METRICS]
    assert job["kubernetes_sd_configs"][0]["selectors"][0]["field"] == f"spec.nodeName={docs.NODE_NAME_PLACEHOLDER}"


def test_kube_state_metrics_labels_are_named_as_it_names_them():
    assert docs.ksm_label("gpu-platform/accelerator-count") == "label_gpu_platform_accelerator_count"
    assert docs.ksm_resource("nvidia.com/gpu") == "nvidia_com_gpu"


# --- PromQL ----------------------------------------------------------------------------------------


def selectors(query: str) -> list[promql_parser.VectorSelector]:
    found: list = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(query), visit)
    return found


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


def dcgm_job(run, tenant: str) -> tuple[dict, dict]:
    """The collector's configuration in `tenant`, and its DCGM exporter job."""
    config = yaml.safe_load(named(instance_objects(run.one(VCI, tenant)), "ConfigMap", docs.COLLECTOR, docs.MONITORING_NAMESPACE)["data"]["config.yaml"])
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "dcgm-exporter"]
    return config, job


def dcgm_series_labels(config: dict, job: dict, metric: str) -> set[str]:
    """Every label a series of `metric` has once the collector wrote it: the exporter's (the record:
    every GPU's, the pod's, the field's own, and one per `label` field), what the job's relabelling
    adds to its targets, Prometheus' job and instance, and the collector's external labels."""
    exporter = {*DCGM_RECORD["labels"], *DCGM_RECORD["podLabels"], *DCGM_RECORD["fields"][metric].get("labels", [])}
    exporter |= {field for field, kind, _ in dcgm.DCGM_METRICS if kind == "label"}
    return exporter | {r["target_label"] for r in job["relabel_configs"] if "target_label" in r} | {"job", "instance"} | set(config["global"]["external_labels"])


def dcgm_labels_used(query: str) -> list[tuple[str, str]]:
    """(label, metric) for every label a query names on a DCGM series: in its selectors' matchers,
    and in the `by`/`without` of each aggregation over DCGM series only, as the parser reads it."""
    used: list[tuple[str, str]] = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name.startswith("DCGM_"):
            used.extend((m.name, node.name) for m in node.matchers.matchers)
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            inner: list[str] = []
            promql_parser.walk(node.expr, lambda n: inner.append(n.name) if isinstance(n, promql_parser.VectorSelector) else None)
            dcgm = [name for name in inner if name.startswith("DCGM_")]
            assert not dcgm or dcgm == inner, f"an aggregation over DCGM and other series: {query}"
            used.extend((label, name) for label in node.modifier.labels for name in dcgm)

    promql_parser.walk(promql_parser.parse(query), visit)
    return used


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


@pytest.fixture(scope="module")
def dev_stack():
    return load_stack(shipped_values("dev"), stack="dev", project_dir=SHIPPED_DIR)


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


# --- images ----------------------------------------------------------------------------------------

# registry/repository:tag, optionally @sha256:<digest>; the registry named, the tag a release's.
IMAGE = re.compile(r"^(?P<name>[a-z0-9.-]+\.[a-z]+(?::\d+)?/[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})(?:@sha256:(?P<digest>[0-9a-f]{64}))?$")


def rendered_images(*runs) -> set[str]:
    """Every image of the objects the program puts into tenants, and of the kubernetes template's."""

    def containers(node):
        if isinstance(node, dict):
            for key in ("containers", "initContainers"):
                yield from node.get(key) or []
            for value in node.values():
                yield from containers(value)
        elif isinstance(node, list):
            for value in node:
                yield from containers(value)

    found = {c["image"] for run in runs for vci in run.of_type(VCI) for c in containers(instance_objects(vci))}
    return found | set(KUBERNETES_IMAGES.values())


def test_every_image_the_program_renders_is_pinned(dev_run, tenant_run, prod_run):
    images = rendered_images(dev_run, tenant_run, prod_run)
    assert {versions.GMP_PROMETHEUS_IMAGE, versions.GMP_INIT_IMAGE, versions.KUBE_STATE_METRICS_IMAGE, versions.WATCHDOG_IMAGE} <= images
    for image in images:
        match = IMAGE.match(image)
        assert match, f"{image} is not registry/repository:tag[@sha256:<digest>]"
        assert match["tag"] != "latest" and re.search(r"\d", match["tag"]), image
        if match["digest"] is None:
            assert versions.IMAGES_WITHOUT_DIGEST.get(image), f"{image}: pin its digest, or say in IMAGES_WITHOUT_DIGEST why not"
    # Every image said to have no digest is one the program runs, pinned by tag exactly so.
    assert set(versions.IMAGES_WITHOUT_DIGEST) <= images
    assert all(IMAGE.match(image)["digest"] is None for image in versions.IMAGES_WITHOUT_DIGEST)


def test_the_pattern_refuses_an_unpinned_image():
    for loose in ("python:3.12", "docker.io/library/python", "docker.io/library/python:latest", "quay.io/x/y:v1@sha256:abc"):
        match = IMAGE.match(loose)
        assert not match or match["tag"] == "latest", loose
    pinned = IMAGE.match("registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0@sha256:" + "0" * 64)
    assert pinned and pinned["digest"] == "0" * 64


def test_sources_list_every_image_pinned_by_tag_only_and_why():
    rows = re.findall(r"^\| `([^`]+)` \| (.+) \|$", section("Image digests (`config/versions.py` `IMAGES_WITHOUT_DIGEST`)", "docs/sources.md"), flags=re.M)
    assert dict(rows) == versions.IMAGES_WITHOUT_DIGEST


def test_the_collectors_source_is_cited_at_the_deployed_release():
    """The image GoogleCloudPlatform/prometheus-engine ships is <fork tag>-gke.<build>; every
    citation of the fork names that tag."""
    tag = versions.GMP_PROMETHEUS_IMAGE.rsplit(":", 1)[1]
    release = re.sub(r"-gke\.\d+$", "", tag)
    assert release == "v2.53.5-gmp.1"
    texts = {
        "components/monitoring_documents.py": Path(docs.__file__).read_text(),
        "config/versions.py": Path(versions.__file__).read_text(),
        "docs/sources.md": page("docs/sources.md"),
    }
    for where, text in texts.items():
        cited = re.findall(r"GoogleCloudPlatform/prometheus tag `?(v[0-9][^`\s,:)]*)", " ".join(text.split()))
        assert cited and set(cited) == {release}, (where, cited)
