"""The monitoring checks, on the Job's GPU node: the GPU Operator's DCGM exporter and our GPU
metrics collector run Ready there, and Cloud Monitoring answers a PromQL query for the tenant's GPU
utilization with a series from that node. The documents and the readers of `kubectl … -o json` and
of the query API's answers are pure; scenario.py runs them.

The node is held while they run: a pod on it (no GPU asked, so it runs beside the Job), because an
idle GPU node goes after `idleAfter` (60 s), sooner than an exporter started late and two scrapes.
The idle deletion is then measured from the hold's end, the node's last pod.

The query goes to Managed Service for Prometheus' query API, `GET
https://monitoring.googleapis.com/v1/projects/<project>/location/global/prometheus/api/v1/query?query=…`
(location "global" only; scopes cloud-platform or monitoring.read:
https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.location.prometheus.api.v1/query),
which answers as Prometheus' HTTP API does (https://prometheus.io/docs/prometheus/latest/querying/api/:
`{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {…}, "value":
[<unix seconds>, "<value>"]}]}}`, or `"status": "error"` with `errorType` and `error`), from the
data of the project's metrics scope (https://cloud.google.com/stackdriver/docs/managed-prometheus/query-api-ui).
Google's own refusals (401, 403) come in Google's error form, `{"error": {"code", "message",
"status"}}` (https://cloud.google.com/apis/design/errors). An instant
query's sample carries the evaluation time, Cloud Monitoring's clock: when it first answered with
the series. Reading time series takes `monitoring.timeSeries.list`, in roles/monitoring.viewer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from components.monitoring_documents import COLLECTOR, DCGM_APP_LABEL, DCGM_NAMESPACE, MONITORING_NAMESPACE

from .kube import condition, items, parse_time
from .metadata import IMAGE
from .report import Step
from .settings import PROJECT_MODE, RunNames
from .timings import MONITORING, SERVER
from .waiting import CheckFailed

HOLD_NAMESPACE = "gpu-platform-acceptance-hold"
HOLD_POD = "gpu-node-hold"
# A backstop: the hold ends by itself after an hour should the run die without its cleanup.
HOLD_SECONDS = 3600
READY_TIMEOUT = 300  # each of the two: they start when the node registers, long before the Job ends
# The first scrape of the exporter, a second one, and Cloud Monitoring's ingestion.
INGESTION_MARGIN_SECONDS = 300
QUERY_POLL_SECONDS = 30
QUERY_API = "https://monitoring.googleapis.com/v1/projects/{project}/location/global/prometheus/api/v1/query"
GPU_UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
VIEWER_ROLE = "roles/monitoring.viewer"


@dataclass(frozen=True)
class Workload:
    """Pods of one DaemonSet, found by a label of its pod template."""

    what: str
    namespace: str
    label: str
    value: str


# The GPU Operator's exporter (NVIDIA/gpu-operator tag v25.10.1,
# assets/state-dcgm-exporter/0800_daemonset.yaml: app=nvidia-dcgm-exporter, as the collector selects
# it) and our collector's DaemonSet (components/monitoring_documents.py, its pod template's
# app.kubernetes.io/name: tests/acceptance/test_acceptance_monitoring.py holds the two together).
DCGM_EXPORTER = Workload("DCGM exporter", DCGM_NAMESPACE, "app", DCGM_APP_LABEL)
METRICS_COLLECTOR = Workload("GPU metrics collector", MONITORING_NAMESPACE, "app.kubernetes.io/name", COLLECTOR)


def hold_documents(node: str, run_id: str) -> list[dict[str, Any]]:
    """Its namespace and the pod that keeps `node` from being idle: bound to it by name (no
    scheduling, whatever its taints), no GPU asked, ending at once when deleted (its shell ignores
    SIGTERM; one second's grace). The restricted Pod Security level's fields, so any tenant admits it."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": HOLD_POD, "namespace": HOLD_NAMESPACE, "labels": {"gpu-platform/acceptance-run": run_id}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "hold",
                    "image": IMAGE,
                    "command": ["sleep", str(HOLD_SECONDS)],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOLD_NAMESPACE}}, pod]


def hold_released(pod: dict[str, Any]) -> datetime | None:
    """When the deleted hold pod goes: its deletionTimestamp, which the API server sets to the
    delete's time plus the pod's grace period (one second)."""
    return parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))


def ready(pods: dict[str, Any], node: str, workload: Workload) -> Step:
    """The workload's pod on `node` is Ready, since its Ready condition's last transition."""
    on_node = [p for p in items(pods) if (p.get("spec") or {}).get("nodeName") == node and (p["metadata"].get("labels") or {}).get(workload.label) == workload.value]
    if not on_node:
        return Step("", False, f"no {workload.what} pod ({workload.label}={workload.value}) on node {node} in {workload.namespace}", None, SERVER)
    pod = on_node[0]
    name = f"{workload.namespace}/{pod['metadata']['name']}"
    state = condition(pod, "Ready") or {}
    if state.get("status") == "True":
        return Step("", True, f"{name} Ready", parse_time(state.get("lastTransitionTime")), SERVER)
    waiting = [((c.get("state") or {}).get("waiting") or {}).get("reason") for c in (pod.get("status") or {}).get("containerStatuses") or []]
    why = " ".join(filter(None, [(pod.get("status") or {}).get("phase", "Pending"), state.get("reason"), *waiting]))
    return Step("", False, f"{name} not Ready: {why}", None, SERVER)


def gpu_utilization_query(tenant: str) -> str:
    """The tenant's GPU utilization: `tenant` is one of the collector's external labels
    (components/monitoring_documents.py collector_config), on every series it writes."""
    return f'{GPU_UTILIZATION}{{tenant="{tenant}"}}'


def query_url(project: str, promql: str) -> str:
    return QUERY_API.format(project=project) + "?" + urlencode({"query": promql})


def query_projects(names: RunNames) -> list[tuple[str, str]]:
    """(project, why) to query: where the collector writes (the project_id it labels series with:
    the tenant's project), and in project mode also the environment's, whose metrics scope holds
    every team's project (components/tenant_monitoring.py)."""
    projects = [(names.vm_project, "the tenant's project")]
    if names.isolation == PROJECT_MODE:
        projects.append((names.project, "the environment's metrics scope"))
    return projects


def series(status: int, body: dict[str, Any], *, tenant: str, node: str, project: str) -> Step:
    """A series of the tenant's from `node` in the query's answer, at Cloud Monitoring's evaluation
    time. A refusal (the identity may not read, or the query is malformed) will not get better:
    CheckFailed; other errors (quota, unavailable) are tried again."""
    error = body.get("error")
    if status in (401, 403) or (isinstance(error, dict) and error.get("code") in (401, 403)):
        message = error.get("message", "") if isinstance(error, dict) else str(error or body)
        raise CheckFailed(f"Cloud Monitoring refused to read project {project} (HTTP {status}): {message}; the run's identity needs {VIEWER_ROLE} there")
    if body.get("status") == "error" and body.get("errorType") == "bad_data":
        raise CheckFailed(f"Cloud Monitoring rejected the query (HTTP {status}): {body.get('error', '')}")
    if status != 200 or body.get("status") != "success":
        message = error.get("message") if isinstance(error, dict) else body.get("error") or body
        return Step("", False, f"no answer yet (HTTP {status}): {message}", None, MONITORING)
    result = (body.get("data") or {}).get("result") or []
    mine = [r for r in result if (r.get("metric") or {}).get("tenant") == tenant and (r.get("metric") or {}).get("node") == node]
    if not mine:
        others = sorted({(r.get("metric") or {}).get("node", "(no node)") for r in result})
        return Step("", False, f"no series from node {node} yet" + (f"; series from {', '.join(others)}" if others else ""), None, MONITORING)
    metric = mine[0]["metric"]
    at, value = mine[0]["value"]
    labels = ", ".join(f"{key}={metric[key]}" for key in ("gpu", "modelName", "environment", "project_id") if key in metric)
    return Step("", True, f"{len(mine)} series from node {node} ({labels}), value {value}", datetime.fromtimestamp(float(at), timezone.utc), MONITORING)


def query_timeout(scrape_seconds: int) -> int:
    return 2 * scrape_seconds + INGESTION_MARGIN_SECONDS
