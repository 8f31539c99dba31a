"""Documents installed inside a tenant's virtual cluster: the GPU Operator's chart values and the
in-tenant objects (namespaces, the optional GPU smoke Job). Pure data, also written by the plan."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Iterable

from config import fabric_manager, versions, yaml_io
from config.catalog import load_catalog
from config.gpu_operator import node_images
from config.tenant import GpuOperator

from .dcgm_metrics import dcgm_exporter_values
from .fallback_documents import fallback_objects
from .tenant_pod_security import ENFORCE_LABEL, GPU_OPERATOR_NAMESPACE, PRIVILEGED, pod_security_objects
from .vcluster_values import GPU_RESOURCE
from .watchdog_documents import watchdog_objects

# The smoke Job's shell: nvidia-smi decides the Job; the probe's lines follow in its log.
SMOKE_TEST_SCRIPT = f"nvidia-smi || exit $?; {fabric_manager.PROBE}; exit 0"

SMOKE_TEST_NAMESPACE = "gpu-smoke-test"


@dataclass(frozen=True)
class Watchdog:
    """The GPU watchdog's settings for one tenant (hashable: the documents are cached)."""

    pool_limits: tuple[tuple[str, int], ...]  # (GPU pool name, seconds without GPUs)
    default_limit: int
    system_pool: str


@dataclass(frozen=True)
class Fallback:
    """The capacity fallback's settings for one tenant (hashable: the documents are cached)."""

    config_json: str  # components/fallback_documents.py fallback_config, as JSON
    system_pool: str


_TOLERATE_GPU = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}

# The chart's own tolerations for the NFD worker (NVIDIA/gpu-operator tag v25.10.1,
# deployments/gpu-operator/values.yaml `node-feature-discovery.worker.tolerations`). Helm replaces a
# list given in values instead of merging it, so ours repeat these and add what we need.
NFD_WORKER_DEFAULT_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
)
# NFD's worker must reach the tainted GPU nodes to label them, or the operator never finds a GPU
# and Karpenter never sees the node initialised.
NFD_WORKER_TOLERATIONS = (_TOLERATE_GPU,)


def nfd_worker_tolerations() -> list[dict[str, str]]:
    """The chart's defaults, then ours that they do not already contain."""
    tolerations = [dict(t) for t in NFD_WORKER_DEFAULT_TOLERATIONS]
    tolerations += [dict(t) for t in NFD_WORKER_TOLERATIONS if t not in tolerations]
    return tolerations


def gpu_operator_values(
    service_monitor: bool, dcgm_metrics: bool = False, *, dcgm_exporter_enabled: bool = True, mig_manager: bool = True
) -> dict[str, Any]:
    """`dcgm_metrics`: the DCGM exporter collects monitoring's metric list and XID count (tenant monitoring on).
    `dcgm_exporter_enabled`, `mig_manager`: the tenant's gpuOperator.dcgmExporter and .migManager."""
    dcgm_exporter: dict[str, Any] = {"enabled": dcgm_exporter_enabled, "serviceMonitor": {"enabled": service_monitor}}
    if dcgm_metrics:
        dcgm_exporter.update(dcgm_exporter_values())
    return {
        # The node image (Deep Learning VM) already has the NVIDIA driver.
        "driver": {"enabled": False},
        "toolkit": {"enabled": True},
        "devicePlugin": {"enabled": True},
        # ServiceMonitor needs the Prometheus Operator's CRDs; without them the operator stays NotReady.
        "dcgmExporter": dcgm_exporter,
        "migManager": {"enabled": mig_manager},
        "node-feature-discovery": {"worker": {"tolerations": nfd_worker_tolerations()}},
    }


def operator_values(operator: GpuOperator) -> dict[str, Any]:
    """The chart values a tenant's `gpuOperator` settings render, as far as they decide which
    images run (monitoring's metric list changes none)."""
    return gpu_operator_values(operator.service_monitor, dcgm_exporter_enabled=operator.dcgm_exporter, mig_manager=operator.mig_manager)


def gpu_operator_images(operator: GpuOperator, gpus: Iterable[str]) -> dict[str, list[str]]:
    """GPU type → the images the tenant's GPU Operator starts on a node of it (what the node pulls
    ahead, config/gpu_operator.py), for each GPU type given; none for a chart release not recorded
    under config/charts/."""
    gpu_types = load_catalog().gpus
    images: dict[str, list[str]] = {}
    for gpu in dict.fromkeys(gpus):
        found = node_images(operator.version, operator_values(operator), mig_capable=gpu_types[gpu].mig)
        if found:
            images[gpu] = list(found)
    return images


def gpu_operator_images_annotation(operator: GpuOperator, gpus: Iterable[str]) -> str:
    """`gpu_operator_images` as the instance annotation the node template reads (JSON, compact,
    keys sorted: the same text for the same settings)."""
    return json.dumps(gpu_operator_images(operator, gpus), separators=(",", ":"), sort_keys=True)


def tenant_objects(
    smoke_test: bool,
    pod_security_standard: str = "baseline",
    features: frozenset[str] = frozenset(),
    watchdog: Watchdog | None = None,
    fallback: Fallback | None = None,
) -> list[dict[str, Any]]:
    """`features`: the tenant's features that bring privileged namespaces of their own
    (components/tenant_pod_security.py FEATURE_NAMESPACES). `watchdog`: the GPU watchdog's limits
    per pool (components/watchdog_documents.py). `fallback`: the capacity fallback's configuration
    (components/fallback_documents.py)."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": GPU_OPERATOR_NAMESPACE,
                # The operator's daemonsets are privileged (components/tenant_pod_security.py).
                "labels": {ENFORCE_LABEL: PRIVILEGED},
            },
        },
        *pod_security_objects(pod_security_standard, features),
    ]
    if watchdog is not None:
        objects += watchdog_objects(dict(watchdog.pool_limits), watchdog.default_limit, watchdog.system_pool)
    if fallback is not None:
        objects += fallback_objects(json.loads(fallback.config_json), fallback.system_pool)
    if smoke_test:
        # The smoke Job's pod meets even the restricted standard (no root, no privilege escalation,
        # no capabilities, the runtime's seccomp profile), so its namespace enforces the tenant's.
        labels = {} if pod_security_standard == PRIVILEGED else {"labels": {ENFORCE_LABEL: pod_security_standard}}
        objects += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SMOKE_TEST_NAMESPACE, **labels}},
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "nvidia-smi", "namespace": SMOKE_TEST_NAMESPACE},
                "spec": {
                    "backoffLimit": 2,
                    # A first GPU node takes minutes to appear; give up after 30.
                    "activeDeadlineSeconds": 1800,
                    "ttlSecondsAfterFinished": 3600,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "tolerations": [dict(_TOLERATE_GPU)],
                            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                            "containers": [
                                {
                                    "name": "nvidia-smi",
                                    "image": versions.SMOKE_TEST_IMAGE,
                                    # nvidia-smi, then what the guest sees of NVSwitches and the
                                    # GPUs' fabric state (config/fabric_manager.py PROBE; as uid
                                    # 65534 it cannot read the root-only InfiniBand VPD and says
                                    # so: the node's gate reports the NVLink5 ports on the serial
                                    # console), which with that line settles Fabric Manager on an
                                    # 8- or 16-GPU shape; the Job's result is nvidia-smi's.
                                    "command": ["sh", "-c", SMOKE_TEST_SCRIPT],
                                    "resources": {"limits": {GPU_RESOURCE: "1"}},
                                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                                }
                            ],
                        }
                    },
                },
            },
        ]
    return objects


# The same few documents for every tenant: rendered once per process, not once per tenant.
@functools.lru_cache(maxsize=None)
def gpu_operator_values_yaml(service_monitor: bool, dcgm_metrics: bool = False, *, dcgm_exporter_enabled: bool = True, mig_manager: bool = True) -> str:
    return yaml_io.dump(gpu_operator_values(service_monitor, dcgm_metrics, dcgm_exporter_enabled=dcgm_exporter_enabled, mig_manager=mig_manager))


@functools.lru_cache(maxsize=None)
def tenant_objects_yaml(
    smoke_test: bool,
    pod_security_standard: str = "baseline",
    features: frozenset[str] = frozenset(),
    watchdog: Watchdog | None = None,
    fallback: Fallback | None = None,
) -> str:
    return yaml_io.dump_all(tenant_objects(smoke_test, pod_security_standard, features, watchdog, fallback))

