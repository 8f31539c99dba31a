"""What monitoring installs inside a tenant's virtual cluster: the GPU metrics collector, the
Kubernetes object metrics (kube-state-metrics) it also scrapes, and the DCGM exporter's metric list
handed to the GPU Operator. Pure data, rendered into the VirtualClusterInstance's `objects` and the
GPU Operator's values (components/tenant_vcluster.py), also written by the plan.

Which collector, and why (the options upstream offers for plain Compute Engine VMs, which is what
private nodes are: GKE's managed DCGM collection never reaches them):
- The Ops Agent on the VM (its `nvml` and `dcgm` receivers) sees GPUs and processes, not pods: it
  runs beside the kubelet, knows no namespace or pod, and could not join GPU metrics with the
  Kubernetes objects that tell allocated, pending and never-offered GPUs apart. Rejected.
- Managed Service for Prometheus' managed collection (its operator and PodMonitoring) runs
  collectors as ordinary pods, which cannot reach the metadata server on our nodes
  (templates/node/main.tf conceals it): outside GKE it then needs a service account key in a
  Secret (GoogleCloudPlatform/prometheus-engine tag v0.17.2, pkg/operator/apis/monitoring/v1/
  operator_types.go `CollectionSpec.Credentials`).
  Keys are what we never create. Rejected.
- The OpenTelemetry Collector's googlemanagedprometheus exporter would do, through its Prometheus
  receiver; it is a second implementation of Prometheus scraping and relabelling in a far larger
  binary, for the same result.
- Chosen: Managed Service for Prometheus' self-deployed collection, the drop-in Prometheus binary
  (config/versions.py GMP_PROMETHEUS_IMAGE) that writes to Cloud Monitoring with Application
  Default Credentials: on Compute Engine the node identity's token from the metadata server
  (GoogleCloudPlatform/prometheus tag v2.53.5-gmp.1, the source of that image:
  google/export/export.go `defaultNewMetricClient`, `google.FindDefaultCredentials`;
  google/export/setup/setup.go `tryPopulateUnspecifiedFromMetadata` reads project, location and
  cluster from the metadata server only where unset, and we set them). Like the cloud controller manager
  (templates/kubernetes/main.tf), it runs with `hostNetwork`, so it reaches the metadata server
  while ordinary pods stay cut off from it, and it needs no key. One per node (a DaemonSet, as
  Google's managed collector is, manifests/operator.yaml there), scraping only that node's targets:
  the node's field selector `spec.nodeName=<node>` (pkg/operator/apis/monitoring/v1/pod_config.go
  does the same), written in by an init container from the downward API.

It scrapes two things on its node, and only there (the selectors below), so its scrapes never
leave the node. The GPU Operator's DCGM exporter (NVIDIA/gpu-operator tag
v25.10.1, assets/state-dcgm-exporter/0800_daemonset.yaml: pods labelled app=nvidia-dcgm-exporter,
port `metrics` 9400, the kubelet's pod-resources socket mounted, DCGM_EXPORTER_KUBERNETES=true)
labels every GPU's series with the pod holding it, `namespace`, `pod` and `container`
(NVIDIA/dcgm-exporter tag 4.4.2-4.7.0, internal/pkg/transformation/kubernetes.go, const.go), and
with `modelName` and `Hostname` (= NODE_NAME, internal/pkg/hostname/hostname.go). And
kube-state-metrics, for what only the Kubernetes API knows: pods pending for a GPU, GPUs requested,
nodes that never offered `nvidia.com/gpu`, and the node-type properties our NodeProvider writes,
which the platform turns into node labels (config/node_properties.py). The collector's external
labels add `tenant`, `environment` and the monitored resource's project_id, location and cluster
to every series.

Who may read kube-state-metrics: it listens on its pod's address, and the tenant's default network
plugin, Flannel, enforces no NetworkPolicy (docs/security.md "The collector and kube-state-metrics"),
so the NetworkPolicy below does not hold there. What holds is kube-state-metrics' own
`--auth-filter`: every /metrics request carries a token the tenant's API server authenticates
(TokenReview) and authorizes for `get` on /metrics (SubjectAccessReview), which the collector's
service account is granted, and beside it only the team's cluster-admins have. Binding kube-state-metrics to localhost instead cannot
work: it is one pod, scraped by the collector of whichever node it runs on, which shares the node's
network namespace but not the pod's (unless it shared the node's network too, which would hand it
the metadata server and the node identity). kube-rbac-proxy in front of it would do the same check in a
second container and a second image to pin; the filter is upstream's own (since v2.16.0).

Needs, for the lead's Pod Security list: namespace MONITORING_NAMESPACE, `hostNetwork: true` for the
collector (no hostPath, no privileged container, no added capability); kube-state-metrics needs
neither.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any

from config import node_properties as props
from config import versions
from config import yaml_io

from .fallback_documents import NAME as FALLBACK, NAMESPACE as FALLBACK_NAMESPACE
from .vcluster_values import GPU_RESOURCE

MONITORING_NAMESPACE = "gpu-platform-monitoring"
COLLECTOR = "gpu-metrics-collector"
KUBE_STATE_METRICS = "kube-state-metrics"
# Where the GPU Operator's DCGM exporter runs (components/tenant_documents.py GPU_OPERATOR_NAMESPACE).
DCGM_NAMESPACE = "gpu-operator"
DCGM_APP_LABEL = "nvidia-dcgm-exporter"
# The collector's own ports, on the node's loopback only (it shares the node's network).
COLLECTOR_PORT = 19390
# The placeholder the init container replaces with the node's name.
NODE_NAME_PLACEHOLDER = "__NODE_NAME__"
# Where the kubelet mounts a pod's service account token (Kubernetes docs, "Configure Service
# Accounts for Pods": /var/run/secrets/kubernetes.io/serviceaccount/token).
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# kube-state-metrics' ports: the object metrics the collector scrapes, and its own health and
# self metrics (its --port and --telemetry-port, docs/developer/cli-arguments.md at v2.20.0).
KSM_METRICS_PORT = 8080
KSM_TELEMETRY_PORT = 8081
# kube-state-metrics: only these objects and metrics (its --resources and --metric-allowlist,
# kube-state-metrics tag v2.20.0 docs/developer/cli-arguments.md), and of the nodes' labels only
# the node-type properties the platform turns into node labels.
KSM_RESOURCES = ("nodes", "pods")
KSM_METRICS = (
    "kube_node_deletion_timestamp",
    "kube_node_labels",
    "kube_node_status_allocatable",
    "kube_node_status_capacity",
    "kube_pod_status_phase",
    "kube_pod_status_unschedulable",
    "kube_pod_container_resource_requests",
)
KSM_NODE_LABELS = (props.INSTANCE_TYPE, props.ACCELERATOR, props.ACCELERATOR_COUNT, props.CAPACITY_TYPE, props.ZONE)
# How kube-state-metrics names a resource such as nvidia.com/gpu in its `resource` label.
KSM_GPU_RESOURCE = "nvidia_com_gpu"
# What its --auth-filter needs of the API server: who a token is, and what it may do.
AUTH_FILTER_RULES = (
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
)


def ksm_label(key: str) -> str:
    """The label kube-state-metrics gives a Kubernetes label in kube_node_labels: `label_`, then the
    key with every character outside [a-zA-Z0-9_] replaced by `_`, in snake case (kube-state-metrics
    tag v2.20.0, internal/store/utils.go `labelName`, `SanitizeLabelName`, `toSnakeCase`; our keys
    are lowercase already)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key).lower()


def ksm_resource(resource: str) -> str:
    """The `resource` label value of a resource name (same file, `SanitizeLabelName`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


assert ksm_resource(GPU_RESOURCE) == KSM_GPU_RESOURCE


def collector_config(*, tenant: str, environment: str, project: str, region: str, scrape_interval: str, fallback: bool = False) -> dict[str, Any]:
    """The collector's Prometheus configuration, NODE_NAME_PLACEHOLDER where the node's name goes.
    `fallback`: the tenant runs the capacity fallback (components/fallback_documents.py), whose
    metrics it scrapes too."""

    def on_this_node(namespace: str, label: str) -> dict[str, Any]:
        return {
            "role": "pod",
            "namespaces": {"names": [namespace]},
            "selectors": [{"role": "pod", "label": label, "field": f"spec.nodeName={NODE_NAME_PLACEHOLDER}"}],
        }

    def keep_port(name: str) -> dict[str, Any]:
        return {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": name, "action": "keep"}

    return {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": "10s",
            # The monitored resource (prometheus_target) and the labels every query selects by.
            # project_id, location and cluster are the exporter's resource labels, external labels
            # taking precedence (GoogleCloudPlatform/prometheus tag v2.53.5-gmp.1,
            # google/export/export.go KeyProjectID, KeyLocation, KeyCluster, `createLabelSet`), set
            # here rather than looked up in the metadata server.
            "external_labels": {
                "project_id": project,
                "location": region,
                "cluster": tenant,
                "tenant": tenant,
                "environment": environment,
            },
        },
        "scrape_configs": [
            {
                "job_name": "dcgm-exporter",
                "kubernetes_sd_configs": [on_this_node(DCGM_NAMESPACE, f"app={DCGM_APP_LABEL}")],
                "relabel_configs": [
                    keep_port("metrics"),
                    {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
                    {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "instance"},
                ],
            },
            {
                "job_name": KUBE_STATE_METRICS,
                # Its series name the objects they describe (node, namespace, pod): keep them.
                "honor_labels": True,
                # kube-state-metrics answers only requests the tenant's API server authenticates and
                # authorizes (its --auth-filter): the collector's own service account token, read on
                # every request, so the kubelet's rotation of it is followed (prometheus/common
                # config/http_config.go `FileSecret.Fetch`, v0.48.0 to v0.55.0).
                "authorization": {"type": "Bearer", "credentials_file": SERVICE_ACCOUNT_TOKEN},
                "kubernetes_sd_configs": [on_this_node(MONITORING_NAMESPACE, f"app.kubernetes.io/name={KUBE_STATE_METRICS}")],
                "relabel_configs": [
                    keep_port("http-metrics"),
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "instance"},
                ],
            },
            *(
                [
                    {
                        "job_name": FALLBACK,
                        "kubernetes_sd_configs": [on_this_node(FALLBACK_NAMESPACE, f"app.kubernetes.io/name={FALLBACK}")],
                        "relabel_configs": [
                            keep_port("metrics"),
                            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "instance"},
                        ],
                    }
                ]
                if fallback
                else []
            ),
        ],
    }


_LABELS = {"app.kubernetes.io/part-of": "gpu-platform"}
_RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _metadata(name: str, namespace: str | None = MONITORING_NAMESPACE, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {**_LABELS, **labels}}
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def _pod_reader(name: str, namespace: str, account: str) -> list[dict[str, Any]]:
    """Read pods in one namespace, for service discovery there (and nowhere else)."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(name, namespace),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": MONITORING_NAMESPACE}],
        },
    ]


def monitoring_objects(*, tenant: str, environment: str, project: str, region: str, scrape_interval: str, fallback: bool = False) -> list[dict[str, Any]]:
    """Every object monitoring puts into a tenant's virtual cluster; `fallback`: collector_config's."""
    config_text = yaml_io.dump(
        collector_config(tenant=tenant, environment=environment, project=project, region=region, scrape_interval=scrape_interval, fallback=fallback)
    )
    config_hash = hashlib.sha256(config_text.encode()).hexdigest()
    collector_labels = {"app.kubernetes.io/name": COLLECTOR}
    ksm_labels = {"app.kubernetes.io/name": KUBE_STATE_METRICS}
    # Write the node's name into the configuration (bash, no other tool in the image): the
    # collector's service discovery then lists only this node's pods.
    render = (
        f'config="$(</etc/{COLLECTOR}/template/config.yaml)" && '
        f'printf "%s\\n" "${{config//{NODE_NAME_PLACEHOLDER}/$NODE_NAME}}" > /prometheus/config/config.yaml'
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": MONITORING_NAMESPACE,
                "labels": {
                    **_LABELS,
                    # The collector shares its node's network (hostNetwork), which Pod Security's
                    # baseline level forbids.
                    "pod-security.kubernetes.io/enforce": "privileged",
                },
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(COLLECTOR)},
        *_pod_reader(f"{COLLECTOR}-discovery", DCGM_NAMESPACE, COLLECTOR),
        *_pod_reader(f"{COLLECTOR}-discovery", MONITORING_NAMESPACE, COLLECTOR),
        *(_pod_reader(f"{COLLECTOR}-discovery", FALLBACK_NAMESPACE, COLLECTOR) if fallback else []),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(COLLECTOR), "data": {"config.yaml": config_text}},
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": _metadata(COLLECTOR, **collector_labels),
            "spec": {
                "selector": {"matchLabels": collector_labels},
                "template": {
                    "metadata": {
                        "labels": {**_LABELS, **collector_labels},
                        # A new configuration replaces the pods, which read it once at start.
                        "annotations": {"gpu-platform/config-sha256": config_hash},
                    },
                    "spec": {
                        "serviceAccountName": COLLECTOR,
                        # The node's network: the metadata server hands it the node identity's
                        # token, which ordinary pods on tenant nodes cannot get
                        # (templates/node/main.tf); Google's APIs through the node's DNS.
                        "hostNetwork": True,
                        "dnsPolicy": "Default",
                        # On every node, GPU nodes (tainted nvidia.com/gpu) included; its request is
                        # small, and a full GPU node must not leave it out.
                        "priorityClassName": "system-node-critical",
                        "tolerations": [{"operator": "Exists"}],
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "securityContext": {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                        "initContainers": [
                            {
                                "name": "node-config",
                                "image": versions.GMP_INIT_IMAGE,
                                "command": ["/bin/bash", "-c", render],
                                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                                "securityContext": _RESTRICTED_CONTAINER,
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
                                "volumeMounts": [
                                    {"name": "config-template", "mountPath": f"/etc/{COLLECTOR}/template", "readOnly": True},
                                    {"name": "config", "mountPath": "/prometheus/config"},
                                ],
                            }
                        ],
                        "containers": [
                            {
                                "name": "prometheus",
                                "image": versions.GMP_PROMETHEUS_IMAGE,
                                "args": [
                                    "--config.file=/prometheus/config/config.yaml",
                                    "--storage.tsdb.path=/prometheus/data",
                                    # Samples go to Cloud Monitoring as they are scraped; the local
                                    # store only buffers them.
                                    "--storage.tsdb.retention.time=30m",
                                    "--storage.tsdb.no-lockfile",
                                    # The node's loopback only: no pod and no other machine reaches it.
                                    f"--web.listen-address=127.0.0.1:{COLLECTOR_PORT}",
                                ],
                                "securityContext": _RESTRICTED_CONTAINER,
                                "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                                "livenessProbe": {"httpGet": {"host": "127.0.0.1", "port": COLLECTOR_PORT, "path": "/-/healthy"}, "periodSeconds": 30},
                                "readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": COLLECTOR_PORT, "path": "/-/ready"}, "periodSeconds": 10},
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/prometheus/config", "readOnly": True},
                                    {"name": "data", "mountPath": "/prometheus/data"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "config-template", "configMap": {"name": COLLECTOR}},
                            {"name": "config", "emptyDir": {}},
                            {"name": "data", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        *_metrics_reader(f"gpu-platform-{COLLECTOR}-metrics", COLLECTOR),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(KUBE_STATE_METRICS)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(f"gpu-platform-{KUBE_STATE_METRICS}", None),
            "rules": [
                {"apiGroups": [""], "resources": list(KSM_RESOURCES), "verbs": ["list", "watch"]},
                # Its --auth-filter asks the API server who a request's token is and whether it may
                # `get` /metrics: controller-runtime v0.24.1 (its dependency at v2.20.0, go.mod),
                # pkg/metrics/filters/filters.go `WithAuthenticationAndAuthorization` names these two.
                *(dict(r) for r in AUTH_FILTER_RULES),
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(f"gpu-platform-{KUBE_STATE_METRICS}", None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"gpu-platform-{KUBE_STATE_METRICS}"},
            "subjects": [{"kind": "ServiceAccount", "name": KUBE_STATE_METRICS, "namespace": MONITORING_NAMESPACE}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(KUBE_STATE_METRICS, **ksm_labels),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": ksm_labels},
                "template": {
                    "metadata": {"labels": {**_LABELS, **ksm_labels}},
                    "spec": {
                        "serviceAccountName": KUBE_STATE_METRICS,
                        # No GPU toleration: it runs on the tenant's CPU nodes.
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "securityContext": {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": KUBE_STATE_METRICS,
                                "image": versions.KUBE_STATE_METRICS_IMAGE,
                                "args": [
                                    f"--resources={','.join(KSM_RESOURCES)}",
                                    f"--metric-allowlist={','.join(KSM_METRICS)}",
                                    f"--metric-labels-allowlist=nodes=[{','.join(KSM_NODE_LABELS)}]",
                                    f"--port={KSM_METRICS_PORT}",
                                    f"--telemetry-port={KSM_TELEMETRY_PORT}",
                                    # Both ports' /metrics only for a token the API server authenticates
                                    # and allows `get` on /metrics (pkg/app/server.go at v2.20.0:
                                    # buildMetricsServer, buildTelemetryServer); /livez, /healthz and
                                    # /readyz, the probes, stay open. The tenant's network does not
                                    # enforce the NetworkPolicy below (docs/security.md), so this is
                                    # what keeps the team's pods from reading it.
                                    "--auth-filter",
                                ],
                                "ports": [
                                    {"name": "http-metrics", "containerPort": KSM_METRICS_PORT},
                                    {"name": "telemetry", "containerPort": KSM_TELEMETRY_PORT},
                                ],
                                "securityContext": _RESTRICTED_CONTAINER,
                                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                                "livenessProbe": {"httpGet": {"path": "/livez", "port": "http-metrics"}, "initialDelaySeconds": 5},
                                "readinessProbe": {"httpGet": {"path": "/readyz", "port": "telemetry"}, "initialDelaySeconds": 5},
                            }
                        ],
                    },
                },
            },
        },
        _kube_state_metrics_ingress(ksm_labels, collector_labels),
    ]


def _metrics_reader(name: str, account: str) -> list[dict[str, Any]]:
    """`get` on the non-resource path /metrics, which kube-state-metrics' auth filter asks the API
    server about. Non-resource rules exist only in cluster roles (Kubernetes docs, "Using RBAC
    Authorization", Referring to resources: nonResourceURLs)."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(name, None),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(name, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": MONITORING_NAMESPACE}],
        },
    ]


def _kube_state_metrics_ingress(ksm_labels: dict[str, str], collector_labels: dict[str, str]) -> dict[str, Any]:
    """Only the collector reaches kube-state-metrics, where the tenant's network enforces
    NetworkPolicy (its default, Flannel, does not: docs/security.md).

    The one collector that scrapes it runs on its node (the scrape job selects targets by
    `spec.nodeName`), and a pod isolated for ingress always admits connections from its own node
    (Kubernetes docs, "Network Policies", The two sorts of pod isolation). The collector shares its
    node's network, and most network plugins cannot tell a hostNetwork pod's traffic from the
    node's: to them it is the node's, and admitted as such; the others apply policies to hostNetwork
    pods like to any pod ("NetworkPolicy and hostNetwork pods"), for which the rule below admits
    the collector's pods. No address range is admitted: another node's address would admit every
    hostNetwork pod and process there, and no collector elsewhere needs it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(KUBE_STATE_METRICS),
        "spec": {
            "podSelector": {"matchLabels": dict(ksm_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": dict(collector_labels)}}],
                    "ports": [{"protocol": "TCP", "port": KSM_METRICS_PORT}],
                }
            ],
        },
    }


@functools.lru_cache(maxsize=None)
def monitoring_objects_yaml(*, tenant: str, environment: str, project: str, region: str, scrape_interval: str, fallback: bool = False) -> str:
    return yaml_io.dump_all(
        monitoring_objects(tenant=tenant, environment=environment, project=project, region=region, scrape_interval=scrape_interval, fallback=fallback)
    )
