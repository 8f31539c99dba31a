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
from config import yaml_io
from policy.vcluster_reader import Pool, VClusterValues  # noqa: F401  (re-exported: the one reader)

GPU_RESOURCE = "nvidia.com/gpu"
# Keeps CPU-only pods (and whatever they would keep alive) off the GPU VMs. The GPU Operator's
# daemonsets and GPU workloads tolerate it.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
POOL_LABEL = props.PREFIX + "pool"
GPU_LABEL = props.PREFIX + "gpu"


def render_values(
    pools: list,
    provider: str,
    properties: dict[str, str],
    *,
    source_ranges: list[str] | tuple[str, ...] = (),
    resources: dict[str, dict[str, str]] | None = None,
) -> str:
    """vcluster.yaml for a tenant: private nodes joining through a LoadBalancer, one auto-nodes
    entry on the environment's NodeProvider, one dynamic pool per `PoolPlan`.

    `source_ranges`: the only clients the control plane's LoadBalancer accepts (the tenant's NAT
    addresses; controlPlane.service.spec is a free Service spec in the chart's schema). Operators
    and CI reach the tenant through the platform, which talks to the control plane inside the host
    cluster. `resources`: requests and limits of the control-plane pod
    (controlPlane.statefulSet.resources); the chart's defaults fill what is not given."""
    service_spec: dict[str, Any] = {"type": "LoadBalancer"}
    if source_ranges:
        service_spec["loadBalancerSourceRanges"] = list(source_ranges)
    control_plane: dict[str, Any] = {"service": {"spec": service_spec}}
    if resources:
        control_plane["statefulSet"] = {"resources": resources}
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
            "autoNodes": [
                {
                    "provider": provider,
                    "properties": dict(properties),
                    "dynamic": [_pool(p) for p in pools],
                }
            ],
        },
    }
    return yaml_io.dump(document)


def _pool(plan) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": plan.name,
        "nodeTypeSelector": plan.selector,
        "nodeLabels": {POOL_LABEL: plan.name, **({GPU_LABEL: plan.gpu} if plan.gpu else {})},
        "limits": {k: str(v) for k, v in plan.limits.items()},
        "disruption": {"consolidationPolicy": plan.consolidation_policy, "consolidateAfter": plan.idle_after},
        "terminationGracePeriod": plan.termination_grace_period,
    }
    if plan.gpu:
        pool["taints"] = [dict(GPU_TAINT)]
    return pool
