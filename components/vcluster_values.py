"""The tenant's vcluster.yaml: rendered here, read back by the policy pack, the plan and the tests
through the same accessors (policy/vcluster_reader.py, which lives in the pack so the pack can be
published alone), so the three can never disagree on its shape.

Only keys of the vcluster chart's schema (pinned version, config/versions.py) are written; the
schema rejects unknown keys (`additionalProperties: false`) and wants pool limits as strings.
tests/test_tenants.py checks the rendered document against our record of that schema
(tests/data/vcluster-0.36.1-values.schema.yaml).
"""

from __future__ import annotations

from typing import Any

from config import node_properties as props
from config.catalog import EVICTION_HARD
from config import yaml_io
from policy.vcluster_reader import Pool, VClusterValues  # noqa: F401  (re-exported: the one reader)

GPU_RESOURCE = "nvidia.com/gpu"
# Keeps CPU-only pods (and whatever they would keep alive) off the GPU VMs. The GPU Operator's
# daemonsets and GPU workloads tolerate it.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
POOL_LABEL = props.PREFIX + "pool"
GPU_LABEL = props.PREFIX + "gpu"
# vCluster upgrades private nodes in place when the control plane's Kubernetes version moves
# (`privateNodes.autoUpgrade`, on by default: cordon, replace kubeadm, containerd and the kubelet,
# restart them, uncordon) and skips a node labelled SKIP_AUTO_UPGRADE_LABEL (vcluster-docs
# vcluster_versioned_docs/version-0.36.0/deploy/worker-nodes/private-nodes/manage.mdx, "Use
# automatic upgrades"; loft-sh/vcluster at tag v0.36.1 only stubs the upgrade, pkg/pro/privatenodes.go).
# Every GPU node carries it, warm ones too: restarting its runtime kills the training job it runs.
# GPU nodes are replaced instead, the new node joining at the control plane's version: a dynamic
# pool's once empty, a static pool's once an operator deletes it, since the pool is then one short
# of `quantity` and gets a new NodeClaim (loft-sh/vcluster config/config.go at tag v0.36.1,
# `StaticNodePool.Quantity`, "the number of desired nodes"; vcluster-docs version-0.36.0
# _fragments/deploy/auto-nodes-scheduling.mdx), and a deleted node takes its NodeClaim with it
# (kubernetes-sigs/karpenter tag v1.14.1, pkg/controllers/node/termination/controller.go). The
# system pool, which runs no training jobs, is upgraded in place, one node at a time.
SKIP_AUTO_UPGRADE_LABEL = "vcluster.loft.sh/skip-auto-upgrade"
AUTO_UPGRADE = {"enabled": True, "concurrency": 1}
# On a pool's warm nodes (its static pool), beside the pool's own labels.
WARM_LABEL = props.PREFIX + "warm"


def render_values(
    pools: list,
    provider: str,
    properties: dict[str, str],
    *,
    source_ranges: list[str] | tuple[str, ...] = (),
    resources: dict[str, dict[str, str]] | None = None,
    kubelet: dict[str, Any] | None = None,
) -> str:
    """vcluster.yaml for a tenant: private nodes joining through a LoadBalancer, one auto-nodes
    entry on the environment's NodeProvider, one dynamic pool per `PoolPlan` (none for a pool whose
    warm nodes take all its GPUs) and one static pool per pool with warm nodes.

    `source_ranges`: the only clients the control plane's LoadBalancer accepts (the tenant's NAT
    addresses; controlPlane.service.spec is a free Service spec in the chart's schema). Operators
    and CI reach the tenant through the platform, which talks to the control plane inside the host
    cluster. `resources`: requests and limits of the control-plane pod
    (controlPlane.statefulSet.resources); the chart's defaults fill what is not given. `kubelet`:
    merged into every node's kubelet config (`kubelet_config`)."""
    service_spec: dict[str, Any] = {"type": "LoadBalancer"}
    if source_ranges:
        service_spec["loadBalancerSourceRanges"] = list(source_ranges)
    control_plane: dict[str, Any] = {
        "service": {"spec": service_spec},
        # vCluster's embedded cloud controller manager "can be disabled if you want to use an
        # external cloud controller manager such as AWS or GCP" (loft-sh/vcluster config/config.go
        # at v0.36.1, `CloudControllerManager`): ours, the GCP CCM of templates/kubernetes/main.tf,
        # runs in every tenant (property vcluster.com/ccm-enabled is always "true"). Two node
        # controllers would race to set the providerID, which can be set only once; the GCP one must
        # win, or the PD CSI driver and the CCM's own lookups never find the VM.
        "advanced": {"cloudControllerManager": {"enabled": False}},
    }
    if resources:
        control_plane["statefulSet"] = {"resources": resources}
    entry: dict[str, Any] = {
        "provider": provider,
        "properties": dict(properties),
        "dynamic": [_pool(p) for p in pools if p.dynamic_nodes],
    }
    warm = [_warm_pool(p) for p in pools if p.warm_nodes]
    if warm:
        entry["static"] = warm
    document = {
        "controlPlane": control_plane,
        # The chart's own NetworkPolicies in the tenant's host namespace (loft-sh/vcluster
        # chart/templates/networkpolicy.yaml at v0.36.1; with private nodes only `vc-cp-<name>`):
        # the control plane accepts TCP 8443 from any source, every port from `app: loft` pods of
        # any namespace, its own peers and `app: vcluster-snapshot` pods; it sends to host DNS,
        # TCP 443/8443/6443 of any address, its peers and the platform (docs/security.md "Joins and the host cluster").
        "policies": {"networkPolicy": {"enabled": True}},
        "privateNodes": {
            "enabled": True,
            **({"kubelet": {"config": dict(kubelet)}} if kubelet else {}),
            "autoUpgrade": dict(AUTO_UPGRADE),
            "autoNodes": [entry],
        },
    }
    return yaml_io.dump(document)


def kubelet_config(shutdown_grace_period: str, critical_pods_grace_period: str) -> dict[str, Any]:
    """Graceful node shutdown (the kubelet delays the VM's shutdown, sends pods SIGTERM and gives
    them the grace period, critical pods last: config/reliability.py sizes it to Compute Engine's
    soft-off window) and the hard eviction thresholds, which the kubelet keeps apart from the
    reserve of the node type's kubeReserved (config/catalog.py `reserve`)."""
    return {
        "shutdownGracePeriod": shutdown_grace_period,
        "shutdownGracePeriodCriticalPods": critical_pods_grace_period,
        "evictionHard": dict(EVICTION_HARD),
    }


def _pool(plan) -> dict[str, Any]:
    labels = {POOL_LABEL: plan.name, **({GPU_LABEL: plan.gpu, SKIP_AUTO_UPGRADE_LABEL: "true"} if plan.gpu else {})}
    pool: dict[str, Any] = {
        "name": plan.name,
        "nodeTypeSelector": plan.selector,
        "nodeLabels": labels,
        "limits": {k: str(v) for k, v in plan.limits.items()},
        "disruption": {"consolidationPolicy": plan.consolidation_policy, "consolidateAfter": plan.idle_after},
        "terminationGracePeriod": plan.termination_grace_period,
    }
    if plan.expire_after:
        # A pool with Flex-start: Karpenter expires every node of the NodePool after expireAfter and
        # drains it (within terminationGracePeriod) before Compute Engine stops the VM at its max run
        # duration (config/reservations.py expire_after_seconds; kubernetes-sigs/karpenter v1.14.1
        # NodePool `template.spec.expireAfter`; vcluster chart schema DynamicNodePool.expireAfter).
        pool["expireAfter"] = plan.expire_after
    if plan.gpu:
        pool["taints"] = [dict(GPU_TAINT)]
    return pool


def _warm_pool(plan) -> dict[str, Any]:
    """A pool's warm nodes: a static pool of `quantity` nodes of its cheapest shape, which the
    platform keeps running whether or not anything runs on them (loft-sh/vcluster
    config/config.go at tag v0.36.1, `StaticNodePool`: "Quantity is the number of desired nodes
    in this pool"; chart/values.schema.json requires `name` and `quantity`). No disruption block:
    a static pool is never consolidated."""
    return {
        "name": f"{plan.name}-warm",
        "nodeTypeSelector": plan.warm_selector,
        "nodeLabels": {POOL_LABEL: plan.name, GPU_LABEL: plan.gpu, SKIP_AUTO_UPGRADE_LABEL: "true", WARM_LABEL: "true"},
        "taints": [dict(GPU_TAINT)],
        "terminationGracePeriod": plan.termination_grace_period,
        "quantity": plan.warm_nodes,
    }
