"""The tenant's vcluster.yaml: rendered by the program, read back by the policy pack, the plan and
the tests through the same accessors, so the three can never disagree on its shape.

Only keys of the vcluster chart's schema (pinned version, config/versions.py) are written; the
schema rejects unknown keys (`additionalProperties: false`) and wants pool limits as strings.
tests/test_tenants.py checks the rendered document against our record of that schema
(tests/data/vcluster-0.36.1-values.schema.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from config import node_properties as props
from config import yaml_io

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
        # The chart's own NetworkPolicies in the tenant's host namespace (chart/templates/
        # networkpolicy.yaml at v0.36.1): the control plane accepts connections from its own pods,
        # the platform and on its API port only, and talks to host DNS, API servers and the platform.
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


@dataclass(frozen=True)
class Pool:
    provider: str
    properties: dict[str, str]
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def selector(self) -> list[dict[str, Any]]:
        return list(self.spec.get("nodeTypeSelector") or [])

    def selected(self, prop: str) -> list[str]:
        values: list[str] = []
        for requirement in self.selector:
            if requirement.get("property") == prop and requirement.get("operator", "In") == "In":
                values += requirement.get("values") or ([requirement["value"]] if "value" in requirement else [])
        return values

    @property
    def is_gpu(self) -> bool:
        """Selects GPU node types, or leaves the accelerator open (which admits them)."""
        accelerators = self.selected(props.ACCELERATOR)
        return GPU_RESOURCE in (self.spec.get("limits") or {}) or any(a != props.NO_ACCELERATOR for a in accelerators) or not accelerators

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self.spec.get("limits") or {})

    @property
    def gpu_limit(self) -> int | None:
        value = self.limits.get(GPU_RESOURCE)
        try:
            return int(str(value))
        except (TypeError, ValueError):
            return None

    @property
    def taints(self) -> list[dict[str, Any]]:
        return list(self.spec.get("taints") or [])

    @property
    def has_gpu_taint(self) -> bool:
        return any(t.get("key") == GPU_RESOURCE and t.get("effect") == "NoSchedule" for t in self.taints)

    @property
    def consolidate_after(self) -> str | None:
        return (self.spec.get("disruption") or {}).get("consolidateAfter")


class VClusterValues:
    """Read access to a vcluster.yaml document."""

    def __init__(self, document: dict[str, Any]):
        self.document = document

    @classmethod
    def parse(cls, text: str) -> VClusterValues:
        document = yaml_io.load(text) if text else {}
        if not isinstance(document, dict):
            raise ValueError("vcluster.yaml must be a mapping")
        return cls(document)

    @property
    def private_nodes_enabled(self) -> bool:
        return (self.document.get("privateNodes") or {}).get("enabled") is True

    @property
    def control_plane_service_spec(self) -> dict[str, Any]:
        return dict(((self.document.get("controlPlane") or {}).get("service") or {}).get("spec") or {})

    @property
    def control_plane_service_type(self) -> str | None:
        return self.control_plane_service_spec.get("type")

    @property
    def load_balancer_source_ranges(self) -> list[str]:
        return list(self.control_plane_service_spec.get("loadBalancerSourceRanges") or [])

    @property
    def control_plane_resources(self) -> dict[str, Any]:
        return dict(((self.document.get("controlPlane") or {}).get("statefulSet") or {}).get("resources") or {})

    @property
    def network_policy_enabled(self) -> bool:
        return ((self.document.get("policies") or {}).get("networkPolicy") or {}).get("enabled") is True

    @property
    def auto_nodes(self) -> list[dict[str, Any]]:
        return list((self.document.get("privateNodes") or {}).get("autoNodes") or [])

    def dynamic_pools(self) -> Iterator[Pool]:
        for entry in self.auto_nodes:
            for spec in entry.get("dynamic") or []:
                yield Pool(entry.get("provider", ""), dict(entry.get("properties") or {}), spec)

    def gpu_pools(self) -> list[Pool]:
        return [p for p in self.dynamic_pools() if p.is_gpu]
