"""Pure readers of `gcloud … --format=json` output about the run's VMs and the project's GPU quota."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .kube import Finding


def last_segment(url: str | None) -> str:
    """`https://…/zones/us-central1-a` → `us-central1-a` (gcloud JSON holds full resource URLs)."""
    return (url or "").rstrip("/").rsplit("/", 1)[-1]


def gpu_quota_metric(gpu: str) -> str:
    """Compute Engine's regional quota metric of a GPU type: NVIDIA_T4_GPUS, NVIDIA_L4_GPUS,
    NVIDIA_A100_80GB_GPUS (https://cloud.google.com/compute/resource-usage#gpu_quota)."""
    name = gpu.removeprefix("nvidia-").removeprefix("tesla-").upper().replace("-", "_")
    return f"NVIDIA_{name}_GPUS"


def quota_problem(region: dict[str, Any], project_info: dict[str, Any], gpu: str, needed: int) -> str | None:
    """Why the project cannot start one GPU VM, or None. `region` is `gcloud compute regions
    describe`, `project_info` is `gcloud compute project-info describe`. A metric the region does
    not list is not guessed at: the run then finds out from Compute Engine."""
    for scope, doc, metric in (
        (f"in {region.get('name', 'the region')}", region, gpu_quota_metric(gpu)),
        ("across regions", project_info, "GPUS_ALL_REGIONS"),
    ):
        quota = next((q for q in doc.get("quotas") or [] if q.get("metric") == metric), None)
        if quota is None:
            continue
        free = float(quota.get("limit", 0)) - float(quota.get("usage", 0))
        if free < needed:
            return (
                f"{needed} free {metric} quota {scope} (limit {quota.get('limit', 0):g}, in use {quota.get('usage', 0):g}; "
                "IAM & Admin → Quotas)"
            )
    return None


def vm_for_node(instances: list[dict[str, Any]], node: dict[str, Any]) -> dict[str, Any] | None:
    """The VM behind a tenant node: the one its providerID names, else the one named like the node
    (the node template leaves the hostname at the VM name)."""
    provider_id = (node.get("spec") or {}).get("providerID") or ""
    name = provider_id.rsplit("/", 1)[-1] if provider_id.startswith("gce://") else node["metadata"]["name"]
    return next((vm for vm in instances if vm.get("name") == name), None)


def vm_findings(vm: dict[str, Any] | None, node: dict[str, Any], *, tenant: str, gpu: str, gpu_machines: dict[str, bool]) -> list[Finding]:
    """`gpu_machines`: machine type → whether its GPUs are guest accelerators (N1), for every node
    type that offers `gpu`."""
    name = node["metadata"]["name"]
    if vm is None:
        return [Finding("the node's VM exists in Compute Engine", False, f"no VM of tenant {tenant} matches node {name}")]
    labels = vm.get("labels") or {}
    zone = last_segment(vm.get("zone"))
    machine = last_segment(vm.get("machineType"))
    accelerators = [last_segment(a.get("acceleratorType")) for a in vm.get("guestAccelerators") or []]
    node_zone_label = (node["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone")
    return [
        Finding("the node's VM exists in Compute Engine", True, f"{vm['name']} ({machine}, {zone}, {vm.get('status')})"),
        Finding("VM labelled with its tenant", labels.get("vcluster") == tenant, f"labels {labels}"),
        # N1 VMs list the guest accelerators the node template attached; for accelerator-optimized
        # types (G2, A2, A3) the machine type itself fixes the GPU.
        Finding(
            "VM carries the GPU",
            machine in gpu_machines and (gpu in accelerators or not (gpu_machines[machine] or accelerators)),
            f"{machine}, guestAccelerators {accelerators}; node types of {gpu}: {sorted(gpu_machines)}",
        ),
        Finding("node zone label = VM zone", node_zone_label == zone, f"label {node_zone_label!r}, VM in {zone}"),
    ]


def insert_operation_filter(vm_name: str) -> str:
    """`gcloud compute operations list --filter=…` for the insert of one VM (the operation's
    `targetLink` ends in `/instances/<name>`; https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations)."""
    return f"operationType=insert AND targetLink~/instances/{vm_name}$"


def vm_insert_time(operations: list[dict[str, Any]] | None, vm_name: str) -> str | None:
    """When Compute Engine accepted the VM's insert (`insertTime` of its insert operation, RFC 3339
    with offset), the earliest if the list holds several."""
    times = [
        op["insertTime"]
        for op in operations or []
        if op.get("operationType") == "insert" and last_segment(op.get("targetLink")) == vm_name and op.get("insertTime")
    ]
    return min(times, key=datetime.fromisoformat, default=None)


def vm_running_time(vm: dict[str, Any]) -> str | None:
    """When the VM last started running (`lastStartTimestamp`; Compute Engine instances resource)."""
    return vm.get("lastStartTimestamp")
