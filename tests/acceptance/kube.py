"""Pure readers of `kubectl … -o json` output: what the live checks decide, without a cluster.

Each function takes the parsed JSON of one kubectl call and answers one question. The upstream
facts they depend on are cited next to them.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from components.tenant_documents import SMOKE_TEST_NAMESPACE, tenant_objects
from config import fabric_manager
from config import node_properties as props
from config.node_types import GPU_RESOURCE

PLATFORM_API_SERVICE = "v1.management.loft.sh"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
ZONE_LABEL = "topology.kubernetes.io/zone"
GKE_ZONE_LABEL = "topology.gke.io/zone"  # the PD CSI driver's topology key


@dataclass(frozen=True)
class Finding:
    """One thing a user would check, with what was seen."""

    check: str
    ok: bool
    detail: str


def parse_time(text: str | None) -> datetime | None:
    """Kubernetes (RFC 3339, `Z`) and Compute Engine (offset) timestamps."""
    return datetime.fromisoformat(text) if text else None


def items(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc.get("items") or [])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


# --- The platform --------------------------------------------------------------------------------


def apiservice_available(doc: dict[str, Any]) -> Finding:
    available = condition(doc, "Available") or {}
    ok = available.get("status") == "True"
    detail = "Available" if ok else f"not Available: {available.get('reason', 'no condition yet')} {available.get('message', '')}".strip()
    return Finding(f"APIService {PLATFORM_API_SERVICE}", ok, detail)


# NodeProvider status.phase is Pending | Available | Failed: loft-sh/vcluster v0.36.1,
# vendor/github.com/loft-sh/api/v4/pkg/apis/storage/v1/nodeprovider_types.go (NodeProviderPhase*).
NODE_PROVIDER_READY = "Available"
NODE_PROVIDER_FAILED = "Failed"


def node_provider_phase(doc: dict[str, Any]) -> tuple[str, str]:
    status = doc.get("status") or {}
    return status.get("phase", ""), " ".join(filter(None, (status.get("reason"), status.get("message"))))


# VirtualClusterInstance status.phase Ready | Sleeping | Failed | Pending (InstancePhase, same
# vendored api, spaceinstance_types.go); spec.clusterRef.{namespace, virtualCluster}
# (VirtualClusterClusterRef: "the name of the tenant cluster inside the namespace").
INSTANCE_READY = "Ready"


def tenant_instance(doc: dict[str, Any], tenant: str) -> dict[str, Any] | None:
    """The tenant's VirtualClusterInstance in a list of all namespaces (its project namespace
    depends on the isolation model, its name does not)."""
    return next((i for i in items(doc) if i["metadata"]["name"] == tenant), None)


def instance_phase(instance: dict[str, Any]) -> tuple[str, str]:
    status = instance.get("status") or {}
    return status.get("phase", ""), " ".join(filter(None, (status.get("reason"), status.get("message"))))


def virtual_cluster_ref(instance: dict[str, Any]) -> tuple[str, str]:
    """(host namespace, vCluster release name) of the instance."""
    ref = instance["spec"]["clusterRef"]
    return ref["namespace"], ref.get("virtualCluster") or instance["metadata"]["name"]


def kubeconfig_secret_name(release: str) -> str:
    # vCluster writes its admin kubeconfig to Secret vc-<release> in its namespace, key `config`,
    # server https://localhost:8443: loft-sh/vcluster v0.36.1 pkg/util/kubeconfig/kubeconfig.go
    # (GetDefaultSecretName) and e2e/test_core/export_kubeconfig/test_export_kubeconfig.go.
    return f"vc-{release}"


# The chart's Service <release> serves the API on port 443 (→ 8443): loft-sh/vcluster v0.36.1
# chart/templates/service.yaml.
VCLUSTER_SERVICE_PORT = 443


def tenant_kubeconfig(secret: dict[str, Any], local_port: int) -> str:
    """The vCluster's kubeconfig, pointed at a local port-forward to its Service. The host stays
    `localhost`, which the vCluster's serving certificate names."""
    config = yaml.safe_load(base64.b64decode(secret["data"]["config"]))
    for entry in config.get("clusters") or []:
        entry["cluster"]["server"] = f"https://localhost:{local_port}"
    return yaml.safe_dump(config)


# --- Where to put the GPU node -------------------------------------------------------------------


def pick_gpu_zone(zones: tuple[str, ...], nodes: dict[str, Any], pods: dict[str, Any]) -> tuple[str | None, str]:
    """A configured zone other than the one the tenant's cloud controller manager runs in, so the
    run proves that the CCM initializes nodes outside its own zone (our CCM runs with
    `multizone = true`; without it a CCM manages only its own zone). None: no choice to make.

    Our kubernetes template (templates/kubernetes/main.tf) runs the CCM as Deployment
    `gpu-platform-<hash>-cloud-controller-manager` in kube-system, its pods labelled
    app.kubernetes.io/name with that name, on the provider's nodes. The name ends like the official
    template's `<provider>-cloud-controller-manager` (loft-sh/vcluster-auto-nodes-gcp
    environment/kubernetes/manifests/ccm.yaml.tftpl, read at commit 0c203e5c), so tenants created
    with either are found; tests/test_kubernetes_template.py checks the ending.
    """
    if len(zones) < 2:
        return None, "one zone configured: the GPU node shares the CCM's zone"
    node_zones = {n["metadata"]["name"]: node_zone(n) for n in items(nodes)}
    ccm = [
        p
        for p in items(pods)
        if p["metadata"].get("namespace") == "kube-system"
        and str((p["metadata"].get("labels") or {}).get("app.kubernetes.io/name", "")).endswith("cloud-controller-manager")
        and (p.get("spec") or {}).get("nodeName")
    ]
    ccm_zones = {node_zones.get(p["spec"]["nodeName"]) for p in ccm} - {None}
    if not ccm_zones:
        return zones[-1], "no running cloud controller manager found: the last configured zone"
    others = [z for z in zones if z not in ccm_zones]
    if not others:
        return zones[0], f"the CCM runs in every configured zone ({', '.join(sorted(ccm_zones))})"
    return others[0], f"the tenant's cloud controller manager runs in {', '.join(sorted(ccm_zones))}"


def node_zone(node: dict[str, Any]) -> str | None:
    """The zone the node really is in: from its providerID (gce://<project>/<zone>/<instance>),
    else from the zone label when it names a real zone."""
    provider_id = (node.get("spec") or {}).get("providerID") or ""
    if provider_id.startswith("gce://") and provider_id.count("/") == 4:
        return provider_id.split("/")[3]
    label = (node["metadata"].get("labels") or {}).get(ZONE_LABEL)
    return label if label and label != "global" else None


# --- The smoke Job -------------------------------------------------------------------------------


def smoke_job_documents(zone: str | None, run_id: str, deadline_seconds: int = 0) -> list[dict[str, Any]]:
    """The program's own smoke test (`smokeTest: true`: its namespace and Job), applied by the run
    at a time it controls, pinned to `zone` when there is one to prove. Its deadline is raised to
    `deadline_seconds` when that is longer, so a slow node fails the run's own timed step (which
    says which step) rather than the Job (DeadlineExceeded, which does not)."""
    documents = [
        copy.deepcopy(d)
        for d in tenant_objects(True)
        if (d["kind"] == "Namespace" and d["metadata"]["name"] == SMOKE_TEST_NAMESPACE)
        or d["metadata"].get("namespace") == SMOKE_TEST_NAMESPACE
    ]
    job = smoke_job(documents)
    job["metadata"].setdefault("labels", {})["gpu-platform/acceptance-run"] = run_id
    if zone:
        job["spec"]["template"]["spec"]["nodeSelector"] = {ZONE_LABEL: zone}
    job["spec"]["activeDeadlineSeconds"] = max(job["spec"].get("activeDeadlineSeconds", 0), deadline_seconds)
    return documents


def smoke_job(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in documents if d["kind"] == "Job")


def job_state(job: dict[str, Any]) -> tuple[str, str]:
    """("running" | "complete" | "failed", detail)."""
    for kind, state in (("Complete", "complete"), ("Failed", "failed")):
        found = condition(job, kind)
        if found and found.get("status") == "True":
            return state, " ".join(filter(None, (found.get("reason"), found.get("message"))))
    status = job.get("status") or {}
    return "running", f"active {status.get('active', 0)}, failed {status.get('failed', 0)}"


def job_pods(pods: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return sorted(
        (p for p in items(pods) if (p["metadata"].get("labels") or {}).get("job-name") == job),
        key=lambda p: p["metadata"]["creationTimestamp"],
    )


def pod_times(pod: dict[str, Any]) -> dict[str, datetime | None]:
    """Server timestamps of one pod: created (pending), started, finished."""
    state = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}
    ran = state.get("terminated") or state.get("running") or {}
    return {
        "pod_created": parse_time(pod["metadata"]["creationTimestamp"]),
        "pod_started": parse_time(ran.get("startedAt")),
        "pod_finished": parse_time((state.get("terminated") or {}).get("finishedAt")),
    }


def expected_gpu_name(gpu: str) -> str:
    """What nvidia-smi calls the GPU, enough to recognise it: nvidia-tesla-t4 → T4 ("Tesla T4"),
    nvidia-l4 → L4 ("NVIDIA L4"), nvidia-a100-80gb → A100 ("NVIDIA A100-SXM4-80GB")."""
    return gpu.removeprefix("nvidia-").removeprefix("tesla-").split("-")[0].upper()


def nvidia_smi_finding(logs: str, gpu: str) -> Finding:
    name = expected_gpu_name(gpu)
    banner = "NVIDIA-SMI" in logs and "Driver Version" in logs
    named = any(name in line for line in logs.splitlines() if "NVIDIA-SMI" not in line)
    if banner and named:
        return Finding("Job logs show nvidia-smi", True, f"nvidia-smi output naming the {name}")
    seen = logs.strip().splitlines()[:3]
    missing = "the nvidia-smi banner" if not banner else f"a GPU named {name}"
    return Finding("Job logs show nvidia-smi", False, f"no {missing} in the logs; first lines: {seen}")


# --- The GPU node --------------------------------------------------------------------------------


def node_names(nodes: dict[str, Any]) -> set[str]:
    return {n["metadata"]["name"] for n in items(nodes)}


def gpu_node(nodes: dict[str, Any], before: set[str], gpu: str, bound_to: str | None) -> dict[str, Any] | None:
    """The node the Job's pod is bound to, or else a node that appeared since the Job was applied
    and carries the GPU node type's accelerator property (node-type properties become node labels)."""
    for node in items(nodes):
        name = node["metadata"]["name"]
        if name == bound_to:
            return node
        if name not in before and (node["metadata"].get("labels") or {}).get(props.ACCELERATOR) == gpu:
            return node
    return None


def is_initialized(node: dict[str, Any]) -> bool:
    """The cloud controller manager has run on the node: providerID set, uninitialized taint gone."""
    spec = node.get("spec") or {}
    return bool(spec.get("providerID")) and not any(t.get("key") == UNINITIALIZED_TAINT for t in spec.get("taints") or [])


def allocatable_gpus(node: dict[str, Any]) -> int:
    return int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0"))


def node_times(node: dict[str, Any]) -> dict[str, datetime | None]:
    ready = condition(node, "Ready") or {}
    return {
        "node_registered": parse_time(node["metadata"]["creationTimestamp"]),
        "node_ready": parse_time(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None,
    }


def node_findings(node: dict[str, Any], *, project: str, zones: tuple[str, ...], gpus: int, zone_wanted: str | None) -> list[Finding]:
    """What a user checks on a GPU node once it is Ready (docs/acceptance.md "Acceptance test")."""
    spec = node.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    provider_id = spec.get("providerID") or ""
    real_zone = provider_id.split("/")[3] if provider_id.startswith(f"gce://{project}/") and provider_id.count("/") == 4 else None
    findings = [
        Finding(
            "providerID set",
            real_zone is not None,
            provider_id or f"empty: the cloud controller manager never matched node {name} to its VM",
        ),
        Finding(
            "uninitialized taint gone",
            not any(t.get("key") == UNINITIALIZED_TAINT for t in spec.get("taints") or []),
            f"taints: {[t.get('key') for t in spec.get('taints') or []]}",
        ),
    ]
    for label in (ZONE_LABEL, GKE_ZONE_LABEL):
        value = labels.get(label)
        ok = value in zones and (real_zone is None or value == real_zone)
        findings.append(Finding(f"{label} is a real zone", ok, f"{value!r}; configured zones {list(zones)}, VM in {real_zone}"))
    if zone_wanted:
        findings.append(Finding("node in the zone the Job asked for", real_zone == zone_wanted, f"asked {zone_wanted}, VM in {real_zone}"))
    offered = allocatable_gpus(node)
    findings.append(Finding(f"allocatable {GPU_RESOURCE}", offered >= gpus, f"{offered} (expected {gpus})"))
    return findings


def fabric_manager_findings(logs: str, serial: str = "") -> list[Finding]:
    """On an NVSwitch machine: what the guest saw (config/fabric_manager.py PROBE, printed by the smoke
    Job after nvidia-smi, and the node gate's serial-console line, which reads the NVLink5 ports as
    root where the Job cannot) and whether the fabric is set up where the guest manages it. Two
    checks: the first records the verdict, the second fails when the guest sees switches and a GPU's
    fabric is not `Completed`, or where no GPU reports a state (A100), the gate never said `active`;
    it fails too when nothing settled what the guest saw."""
    seen = fabric_manager.read_probe(logs, serial)
    ports = "unknown" if seen.nvlink5_ports is None else seen.nvlink5_ports
    saw = (
        f"{seen.nvswitch_devices} NVSwitch device(s), {ports} NVLink5 switch port(s); fabric states: {', '.join(seen.fabric_states) or 'none read'}"
        f"{'; the gate said active' if seen.gate_active else ''}"
    )
    return [
        Finding("Fabric Manager: what the guest saw", "nvswitch-devices=" in logs and seen.switches_known, f"{saw}: {seen.verdict}"),
        Finding("Fabric Manager: fabric ready", seen.fabric_ready is True, saw),
    ]