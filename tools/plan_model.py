"""What an offline plan holds (tools/plan.py builds it; plan_text.py and plan_json.py show it)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.catalog import Catalog
from config.stack import EnvironmentStack, TenantStack
from config.tenant_plan import TenantPlan
from tools.mock_engine import MOCK_ADDRESS_RANGE, PLACEHOLDER, ProgramRun
from tools.plan_costs import StackCosts
from tools.policy_check import Violation

NODE_PROVIDER_TYPE = "kubernetes:management.loft.sh/v1:NodeProvider"
INSTANCE_TYPE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
SECRET = "[secret]"


class PlanError(Exception):
    """A stack that cannot be planned, with the message a user needs (no traceback)."""


@dataclass
class Pool:
    """A pool as the registered vcluster.yaml renders it."""

    name: str
    gpu: str | None  # None: the tenant's CPU pool
    gpus_per_node: int | None
    max_gpus: int | None
    idle_after: str | None
    options: list[str]  # the capacity-option selector, in the pool's order (config/capacity.py)
    machine_types: list[str]  # the instance-type selector; empty: every type of the class
    limits: dict[str, str]
    zones: list[str] = field(default_factory=list)  # the zone selector; empty: every zone of its node types
    warm_nodes: int = 0  # its static pool's quantity (gpuPools[i].warmNodes)
    warm_machine_types: list[str] = field(default_factory=list)  # the static pool's instance-type selector
    expire_after: str | None = None  # Karpenter expireAfter (pools with Flex-start)

    @property
    def first_gpu(self) -> str | None:
        """Where a pod's first GPU comes from: a node already running, or a VM created for it."""
        return None if self.gpu is None else "warm" if self.warm_nodes else "on demand"


@dataclass
class TenantReport:
    name: str
    plan: TenantPlan
    pools: list[Pool]
    gpu_operator_version: str | None
    vcluster_yaml: str | None  # the documents as the program registered them
    gpu_operator_values: str | None
    objects: str | None
    host_namespace: str | None
    # GPU type → the images its nodes pull ahead (the instance annotation the program registered).
    prefetch_images: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class StackPlan:
    stack: str
    kind: str  # "environment" | "tenant"
    stack_path: Path
    config: dict[str, Any]  # as the program sees it, secure values masked
    config_from_defaults: set[str]
    loaded: EnvironmentStack | TenantStack
    run: ProgramRun
    catalog: Catalog
    costs: StackCosts
    environment_outputs: str | None = None  # tenant stacks: where the environment's outputs came from
    node_provider: dict[str, Any] | None = None  # the NodeProvider object (environment stacks)
    tenants: list[TenantReport] = field(default_factory=list)
    versions: list[tuple[str, str]] = field(default_factory=list)  # (what, pinned version)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (source, message)
    written: list[Path] = field(default_factory=list)
    policy: list[Violation] = field(default_factory=list)  # the policy pack's findings (tools/policy_check.py)
    pack_entry: dict[str, Any] | None = None  # the stack's entry of the pack's per-stack data, from this run

    @property
    def mandatory_violations(self) -> list[Violation]:
        return [v for v in self.policy if v.mandatory]

    @property
    def region(self) -> str:
        return self.loaded.region if isinstance(self.loaded, EnvironmentStack) else self.loaded.facts.region


def has_placeholder(value: Any) -> bool:
    """A value the cloud computes: it contains "placeholder", or it is an address (or a /32) the
    mock handed out of MOCK_ADDRESS_RANGE."""
    if isinstance(value, str):
        return PLACEHOLDER in value or is_mock_address(value)
    if isinstance(value, dict):
        return any(has_placeholder(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_placeholder(v) for v in value)
    return False


def is_mock_address(text: str) -> bool:
    try:
        return ipaddress.ip_network(text, strict=False).subnet_of(ipaddress.IPv4Network(MOCK_ADDRESS_RANGE))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False
