"""Monitoring's collector on every GPU node: its DaemonSet and configuration, checked by
Prometheus' own promtool; the DCGM exporter's metric file, read as the exporter reads it;
kube-state-metrics, readable by the collector only; and every image the program renders, pinned.
Metric names are checked against the exporters' documented lists (tests/data)."""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components import dcgm_metrics as dcgm
from components import monitoring_documents as docs
from components.templates import KUBERNETES_IMAGES
from components.vcluster_values import VClusterValues
from config import versions
from docs_support import page, section
from monitoring_support import DCGM_RECORD, VCI, gpu_operator_values, require_promtool
from monitoring_support import configured_run  # noqa: F401 - module-scoped fixture
from tenant_objects import instance_objects, named


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
