"""What the monitoring tests share (test_monitoring_collector.py, test_monitoring_queries.py,
test_monitoring.py; test_observability_docs.py and test_setup.py use some of it too): resource
types, the exporters' documented metric lists (tests/data), dev run with every monitoring option set
(`configured_run`) and dev loaded as shipped (`dev_stack`), an instance's GPU operator values, the
PromQL readers of a query's selectors and of the labels it names on DCGM series, and promtool, the
tool the collector's configuration test needs (fail in CI, skip elsewhere).

The fixtures are imported by each test module that uses them (pytest finds a fixture in the test's
own module). Each computes once a session, whichever module asks first (`_configured_run` runs the
program): the modules that use it share the one result.

pytest puts this directory on sys.path (no tests/__init__.py), so the test files import it as
`monitoring_support`.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import promql_parser
import pytest
import yaml

from components import dcgm_metrics as dcgm
from components import monitoring_documents as docs
from config.stack import load_stack
from hcl_support import require
from shipped_stacks import SHIPPED_DIR, run_shipped, shipped_values
from tenant_objects import instance_objects, named

NS = "gpu-platform"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
DATA = Path(__file__).parent / "data"
DCGM_RECORD = yaml.safe_load((DATA / "dcgm-exporter-4.4.2-4.7.0-metrics.yaml").read_text())
KSM_RECORD = yaml.safe_load((DATA / "kube-state-metrics-v2.20.0-metrics.yaml").read_text())
BILLING_TABLE = "acme-ml-dev.gpu_platform_dev_billing.gcp_billing_export_v1_012345_6789AB_CDEF01"
CHANNEL = "projects/acme-ml-dev/notificationChannels/1234567890"
# The cost view's column types, in the order of VIEW_COLUMNS.
VIEW_TYPES = ["DATE", "STRING", "FLOAT64", "STRING", "FLOAT64", "FLOAT64", "FLOAT64"]


def gpu_operator_values(vci) -> dict:
    [chart] = vci.input("spec", "template", "charts")
    return yaml.safe_load(chart["values"])


@functools.cache
def _configured_run():
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


@pytest.fixture(scope="module")
def configured_run():
    """dev with every monitoring option set, run once a session (`_configured_run`)."""
    return _configured_run()


@functools.cache
def _dev_stack():
    return load_stack(shipped_values("dev"), stack="dev", project_dir=SHIPPED_DIR)


@pytest.fixture(scope="module")
def dev_stack():
    return _dev_stack()


MISSING_PROMTOOL = (
    "promtool is not on PATH, so the collector's Prometheus configuration cannot be checked by Prometheus itself: "
    "install the Debian or Ubuntu package prometheus, which ships it"
)


def require_promtool() -> str:
    """Prometheus' own checker: the test fails without it in CI, and skips elsewhere."""
    return require(shutil.which("promtool"), MISSING_PROMTOOL)


def selectors(query: str) -> list[promql_parser.VectorSelector]:
    found: list = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(query), visit)
    return found


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
