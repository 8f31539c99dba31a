"""The monitoring checks (tests/acceptance/monitoring.py): their readers on hand-written fixtures
(data/README.md), the pods and labels they look for held against what the program installs, the
query against the collector's own configuration, the HTTP call's credentials, and the checks
replayed in the stand-in world of test_acceptance_scenario.py."""

from __future__ import annotations

import copy
import http.server
import json
import threading
from datetime import datetime
from urllib.parse import parse_qs, urlparse

import kubernetes_validate
import promql_parser
import pytest

from components.dcgm_metrics import DCGM_METRICS
from components.monitoring_documents import collector_config, monitoring_objects
from tests.acceptance import monitoring, shell
from tests.acceptance.recorded import load
from tests.acceptance.scenario import check_monitoring, run_checks
from tests.acceptance.settings import Settings, load_run_stack, run_names
from tests.acceptance.test_acceptance_scenario import GPU_NODE, OUTPUTS, FakeClock, FakeTenant, World, live_run
from tests.acceptance.waiting import CheckFailed

TENANT = "acc-k3x9q2"
CPU_NODE = "acc-k3x9q2-cpu-r2n7d-9be14a"
K8S_VERSION = "1.33.0"  # the newest schema kubernetes_validate holds, as tests/test_tenants.py uses


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def collector(tenant: str = TENANT) -> dict:
    return collector_config(tenant=tenant, environment="dev", project="acme-acceptance", region="us-central1", scrape_interval="60s")


# --- what the checks look for is what the program runs ------------------------------------------


def test_the_checks_look_for_the_pods_the_collector_and_the_operator_run():
    objects = monitoring_objects(tenant=TENANT, environment="dev", project="acme-acceptance", region="us-central1", scrape_interval="60s")
    [daemonset] = [o for o in objects if o["kind"] == "DaemonSet"]
    collector_pods = monitoring.METRICS_COLLECTOR
    assert daemonset["metadata"]["namespace"] == collector_pods.namespace
    assert daemonset["spec"]["template"]["metadata"]["labels"][collector_pods.label] == collector_pods.value
    # The exporter's pods are the ones the collector scrapes.
    [job] = [j for j in collector()["scrape_configs"] if j["job_name"] == "dcgm-exporter"]
    [sd] = job["kubernetes_sd_configs"]
    exporter = monitoring.DCGM_EXPORTER
    assert sd["namespaces"]["names"] == [exporter.namespace]
    assert sd["selectors"][0]["label"] == f"{exporter.label}={exporter.value}"


def test_the_query_selects_the_tenant_by_the_labels_the_collector_attaches():
    query = monitoring.gpu_utilization_query(TENANT)
    selector = promql_parser.parse(query)
    assert isinstance(selector, promql_parser.VectorSelector)
    assert selector.name in {field for field, kind, _ in DCGM_METRICS if kind != "label"}
    assert [(m.name, m.value) for m in selector.matchers.matchers if m.name != "__name__"] == [("tenant", TENANT)]
    config = collector()
    assert config["global"]["external_labels"]["tenant"] == TENANT  # on every series it writes
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "dcgm-exporter"]
    assert {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"} in job["relabel_configs"]
    url = urlparse(monitoring.query_url("acme-acceptance-team", query))
    assert (url.scheme, url.netloc, url.path) == ("https", "monitoring.googleapis.com", "/v1/projects/acme-acceptance-team/location/global/prometheus/api/v1/query")
    assert parse_qs(url.query) == {"query": [query]}


def test_the_tenants_project_and_in_project_mode_the_environments_scope_are_queried():
    shared = run_names(load_run_stack(Settings(project="acme-acceptance"), "k3x9q2"), "k3x9q2")
    team = run_names(load_run_stack(Settings(project="acme-acceptance", team_project="acme-acceptance-team"), "k3x9q2"), "k3x9q2")
    assert monitoring.query_projects(shared) == [("acme-acceptance", "the tenant's project")]
    assert monitoring.query_projects(team) == [("acme-acceptance-team", "the tenant's project"), ("acme-acceptance", "the environment's metrics scope")]
    # The collector labels its series with the tenant's project: that is where they are written.
    assert collector()["global"]["external_labels"]["project_id"] == "acme-acceptance"


# --- the readers ---------------------------------------------------------------------------------


def test_the_exporter_and_the_collector_are_ready_on_the_gpu_node_since_their_ready_condition():
    exporter = monitoring.ready(load("kubectl/fixture-gpu-operator-pods.json"), GPU_NODE, monitoring.DCGM_EXPORTER)
    assert (exporter.ok, exporter.at, exporter.recorded_by) == (True, at("2026-11-30T13:20:26+00:00"), "tenant API server")
    assert exporter.seen == "gpu-operator/nvidia-dcgm-exporter-2hd9c Ready"
    collector_pod = monitoring.ready(load("kubectl/fixture-monitoring-pods.json"), GPU_NODE, monitoring.METRICS_COLLECTOR)
    assert (collector_pod.ok, collector_pod.at) == (True, at("2026-11-30T13:17:26+00:00"))
    assert collector_pod.seen == "gpu-platform-monitoring/gpu-metrics-collector-w4n9r Ready"  # not the CPU node's


def test_a_pod_not_ready_or_not_on_the_node_is_named():
    pods = copy.deepcopy(load("kubectl/fixture-gpu-operator-pods.json"))
    exporter = next(p for p in pods["items"] if p["metadata"]["name"] == "nvidia-dcgm-exporter-2hd9c")
    exporter["status"]["conditions"][-1].update(status="False", reason="ContainersNotReady")
    exporter["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    step = monitoring.ready(pods, GPU_NODE, monitoring.DCGM_EXPORTER)
    assert not step.ok and step.at is None
    assert step.seen == "gpu-operator/nvidia-dcgm-exporter-2hd9c not Ready: Running ContainersNotReady CrashLoopBackOff"
    elsewhere = monitoring.ready(load("kubectl/fixture-gpu-operator-pods.json"), CPU_NODE, monitoring.DCGM_EXPORTER)
    assert not elsewhere.ok and elsewhere.seen == f"no DCGM exporter pod (app=nvidia-dcgm-exporter) on node {CPU_NODE} in gpu-operator"


def test_a_series_from_the_gpu_node_passes_at_cloud_monitorings_time():
    step = monitoring.series(200, load("monitoring/fixture-query-gpu-util.json"), tenant=TENANT, node=GPU_NODE, project="acme-acceptance")
    assert (step.ok, step.at, step.recorded_by) == (True, at("2026-11-30T13:22:31+00:00"), "Cloud Monitoring")
    assert step.seen == f"1 series from node {GPU_NODE} (gpu=0, modelName=Tesla T4, environment=dev, project_id=acme-acceptance), value 0"
    # Another node's series, or another tenant's, is not this node's.
    other = monitoring.series(200, load("monitoring/fixture-query-gpu-util.json"), tenant=TENANT, node="acc-k3x9q2-gpu-zzzzz-000000", project="acme-acceptance")
    assert not other.ok and other.seen == f"no series from node acc-k3x9q2-gpu-zzzzz-000000 yet; series from {GPU_NODE}"
    assert not monitoring.series(200, load("monitoring/fixture-query-gpu-util.json"), tenant="nlp", node=GPU_NODE, project="acme-acceptance").ok


def test_no_series_yet_and_passing_errors_are_tried_again():
    empty = monitoring.series(200, load("monitoring/fixture-query-empty.json"), tenant=TENANT, node=GPU_NODE, project="acme-acceptance")
    assert not empty.ok and empty.seen == f"no series from node {GPU_NODE} yet"
    unavailable = monitoring.series(503, {"error": {"code": 503, "message": "The service is currently unavailable.", "status": "UNAVAILABLE"}}, tenant=TENANT, node=GPU_NODE, project="p")
    assert not unavailable.ok and unavailable.seen == "no answer yet (HTTP 503): The service is currently unavailable."


def test_a_refusal_stops_the_check_at_once_naming_what_is_missing():
    with pytest.raises(CheckFailed, match=r"refused to read project acme-acceptance-team \(HTTP 403\): Permission monitoring.timeSeries.list denied .*needs roles/monitoring.viewer there"):
        monitoring.series(403, load("monitoring/fixture-query-403-permission-denied.json"), tenant=TENANT, node=GPU_NODE, project="acme-acceptance-team")
    with pytest.raises(CheckFailed, match=r"rejected the query \(HTTP 400\): invalid parameter"):
        monitoring.series(400, load("monitoring/fixture-query-400-bad-data.json"), tenant=TENANT, node=GPU_NODE, project="acme-acceptance")


def test_the_hold_is_a_valid_pod_bound_to_the_node_that_asks_for_no_gpu():
    namespace, pod = monitoring.hold_documents(GPU_NODE, "k3x9q2")
    for document in (namespace, pod):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    spec = pod["spec"]
    assert spec["nodeName"] == GPU_NODE and spec["tolerations"] == [{"operator": "Exists"}] and spec["terminationGracePeriodSeconds"] == 1
    [container] = spec["containers"]
    assert "nvidia.com/gpu" not in str(container["resources"]) and container["command"] == ["sleep", str(monitoring.HOLD_SECONDS)]
    # The restricted Pod Security level's fields (kubernetes.io/docs/concepts/security/pod-security-standards).
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert monitoring.hold_released({"metadata": {"deletionTimestamp": "2026-11-30T13:22:32Z"}}) == at("2026-11-30T13:22:32+00:00")


# --- the HTTP call -----------------------------------------------------------------------------


@pytest.fixture
def server():
    """A local stand-in for monitoring.googleapis.com: answers the recorded bodies, keeps the requests."""
    seen: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            refused = "refused" in self.path
            body = load("monitoring/fixture-query-403-permission-denied.json" if refused else "monitoring/fixture-query-gpu-util.json")
            raw = b"<html>not json</html>" if "html" in self.path else json.dumps(body).encode()
            self.send_response(200 if "query" in self.path else 403)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def test_the_query_carries_a_fresh_token_in_its_header_and_errors_come_back_with_their_body(server):
    base, seen = server
    tokens = iter(["ya29.first", "ya29.second", "ya29.third"])
    api = shell.GoogleApi(token=lambda: next(tokens), timeout=5)
    status, body = api.get(f"{base}/v1/projects/acme-acceptance/location/global/prometheus/api/v1/query?query=up")
    assert status == 200 and body["status"] == "success"
    assert api.get(f"{base}/refused") == (403, load("monitoring/fixture-query-403-permission-denied.json"))
    assert api.get(f"{base}/html") == (403, {"error": "<html>not json</html>"})
    assert seen == [
        ("/v1/projects/acme-acceptance/location/global/prometheus/api/v1/query?query=up", "Bearer ya29.first"),
        ("/refused", "Bearer ya29.second"),
        ("/html", "Bearer ya29.third"),
    ]


# --- the checks in the stand-in world ------------------------------------------------------------


def test_metrics_that_never_arrive_fail_their_step_and_the_gpu_checks_go_on(tmp_path):
    world = World(FakeClock(), metrics_after=10_000)
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    failed = {f.check: f.detail for f in live.report.findings if not f.ok}
    query = 'DCGM_FI_DEV_GPU_UTIL{tenant="acc-k3x9q2"} answered by Cloud Monitoring (the tenant\'s project, acme-acceptance)'
    assert failed == {query: f"no series from node {GPU_NODE} yet (waited up to {monitoring.query_timeout(60)} s)"}
    assert [(s.name, s.ok, s.at) for s in live.report.monitoring][-1] == (query, False, None)
    assert len(world.queries) > 10  # polled every 30 s for its 420 s
    # The hold was released, and the idle deletion checked from its end.
    assert "delete pod gpu-node-hold -n gpu-platform-acceptance-hold --wait=false" in world.deleted
    assert live.report.findings[-1].check == "GPU VM deleted within idleAfter 60s + 600 s" and live.report.findings[-1].ok


def test_a_refused_query_fails_at_once(tmp_path):
    world = World(FakeClock(), metrics_refused=True)
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    [failed] = [f for f in live.report.findings if not f.ok]
    assert "needs roles/monitoring.viewer there" in failed.detail and len(world.queries) == 1


def test_a_collector_that_is_not_ready_ends_the_monitoring_checks(tmp_path, monkeypatch):
    world = World(FakeClock())
    tenant = world.tenant
    pods = copy.deepcopy(load("kubectl/fixture-monitoring-pods.json"))
    pods["items"] = [p for p in pods["items"] if p["spec"]["nodeName"] != GPU_NODE]  # the DaemonSet skipped the GPU node
    monkeypatch.setattr(world, "tenant", lambda *args: pods if args == ("get", "pods", "-n", "gpu-platform-monitoring") else tenant(*args))
    live = live_run(world, tmp_path)
    run_checks(live, OUTPUTS)
    assert [(s.name, s.ok) for s in live.report.monitoring] == [("DCGM exporter Ready on the GPU node", True), ("GPU metrics collector Ready on the GPU node", False)]
    assert world.queries is None  # the metrics depend on it: not queried


def test_in_project_mode_the_environments_metrics_scope_shows_the_series_too(tmp_path):
    world = World(FakeClock(), metrics_after=0)
    world.clock.t = 0
    world.applied = []  # the Job's time: its node is up
    live = live_run(world, tmp_path)
    live.names = run_names(load_run_stack(Settings(project="acme-acceptance", team_project="acme-acceptance-team"), "k3x9q2"), "k3x9q2")
    check_monitoring(live, FakeTenant(world), GPU_NODE)
    assert [s.name for s in live.report.monitoring][2:] == [
        'DCGM_FI_DEV_GPU_UTIL{tenant="acc-k3x9q2"} answered by Cloud Monitoring (the tenant\'s project, acme-acceptance-team)',
        'DCGM_FI_DEV_GPU_UTIL{tenant="acc-k3x9q2"} answered by Cloud Monitoring (the environment\'s metrics scope, acme-acceptance)',
    ]
    assert [urlparse(q).path.split("/")[3] for q in world.queries] == ["acme-acceptance-team", "acme-acceptance"]
