"""The PromQL of the dashboards and alert policies, built from the same plans the program deploys.

Every series carries `tenant` (the collector's external label, components/monitoring_documents.py);
a team's queries select it. Metric names are the DCGM exporter's and kube-state-metrics' as the
collector exports them (tests check each against the exporters' documented lists). Cloud
Monitoring evaluates PromQL over the Managed Service for Prometheus data of the project and, from
the environment's project, of every team project in its metrics scope.
"""

from __future__ import annotations

from dataclasses import dataclass

from config import capacity as cap
from config import node_properties as props
from config.base import duration_seconds
from config.monitoring import Alerts
from config.tenant_plan import PoolPlan, TenantPlan

from .capacity_fallback import EXHAUSTED_SINCE, FAILURES_TOTAL, UNAVAILABLE_SINCE
from .capacity_fallback import NAMESPACE as FALLBACK_NAMESPACE
from .dcgm_metrics import XID_COUNT, XID_COUNT_WINDOW
from .monitoring_documents import KSM_GPU_RESOURCE, ksm_label

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
NODE_DELETION = "kube_node_deletion_timestamp"
# One series (value 1) per pod whose PodScheduled condition is False, none for any other pod, with
# labels namespace, pod, uid (kube-state-metrics tag v2.20.0, internal/store/pod.go
# `createPodStatusUnschedulableFamilyGenerator`): a pod no node has been found for yet.
UNSCHEDULED = "kube_pod_status_unschedulable"
# How far back the error alert looks for XID and ECC errors: the exporter's XID count covers as much.
ERROR_WINDOW = XID_COUNT_WINDOW
# XID codes whose causes NVIDIA's XID documentation lists a user application error among (its "Xid
# Error Listing", https://docs.nvidia.com/deploy/xid-errors/): 13 Graphics Engine Exception, 31 GPU
# memory page fault, 43 GPU stopped processing, 45 Preemptive cleanup, due to previous errors. Seen
# alone they are most often the program's fault; the other codes point at the GPU, driver or host.
APPLICATION_XIDS = (13, 31, 43, 45)

ACCELERATOR = ksm_label(props.ACCELERATOR)
ACCELERATOR_COUNT = ksm_label(props.ACCELERATOR_COUNT)
CAPACITY_TYPE = ksm_label(props.CAPACITY_TYPE)
INSTANCE_TYPE = ksm_label(props.INSTANCE_TYPE)
# A GPU's series, by who holds it.
GPU_LABELS = "tenant, node, gpu, modelName, namespace, pod"


def _matchers(tenant: str | None, *more: str) -> str:
    parts = ([f'tenant="{tenant}"'] if tenant else []) + list(more)
    return "{" + ", ".join(parts) + "}" if parts else ""


def gpu_nodes(tenant: str | None = None) -> str:
    """One series per GPU node (kube_node_labels of nodes whose node type has a GPU)."""
    has_gpu = f'{ACCELERATOR}!~"none|"'
    return f"kube_node_labels{_matchers(tenant, has_gpu)}"


def pod_gpu_requests(tenant: str | None = None) -> str:
    """The GPUs each pod asks for; not the capacity fallback's request pods, which ask Karpenter for a
    node on behalf of the team's pods and are deleted once it is launched: they are neither waiting
    work nor work holding a GPU (components/capacity_fallback.py)."""
    gpu, not_requests = f'resource="{KSM_GPU_RESOURCE}"', f'namespace!="{FALLBACK_NAMESPACE}"'
    return f"kube_pod_container_resource_requests{_matchers(tenant, gpu, not_requests)}"


def _in_phase(tenant: str | None, phase: str) -> str:
    matcher = f'phase="{phase}"'
    return f"(kube_pod_status_phase{_matchers(tenant, matcher)} == 1)"


def gpus_allocated(tenant: str | None = None) -> str:
    """GPUs requested by running pods, per team."""
    running = _in_phase(tenant, "Running")
    return f"sum by (tenant) ({pod_gpu_requests(tenant)} * on (tenant, namespace, pod) group_left () {running})"


def pending_gpu_pods(tenant: str | None = None) -> str:
    """Pods that ask for a GPU and wait for one, per team: those the scheduler has not placed on a
    node. Not phase Pending, which also holds pods already bound to a GPU node and still pulling
    their images: they hold their GPU and wait for nothing."""
    return f"count by (tenant) ({UNSCHEDULED}{_matchers(tenant)} and on (tenant, namespace, pod) ({pod_gpu_requests(tenant)} > 0))"


def gpu_vms_by_capacity(tenant: str | None = None) -> str:
    """GPU VMs per team, GPU class and capacity type (on-demand, spot, flex-start, reservation)."""
    return f"count by (tenant, {ACCELERATOR}, {CAPACITY_TYPE}) ({gpu_nodes(tenant)})"


def pool_nodes(tenant: str, pool: PoolPlan) -> str:
    """The nodes of one GPU pool: its GPU class, GPUs per node and the capacity types of its list,
    which tell a tenant's pools apart (config/tenant_pools.py refuses two pools with the same GPU class,
    GPUs per node and capacity list; two lists sharing a capacity type share nodes here)."""
    types = sorted({cap.kind_of(e) for e in pool.options})
    matcher = f'{CAPACITY_TYPE}="{types[0]}"' if len(types) == 1 else f'{CAPACITY_TYPE}=~"{"|".join(types)}"'
    return f'kube_node_labels{{tenant="{tenant}", {ACCELERATOR}="{pool.gpu}", {ACCELERATOR_COUNT}="{pool.gpus_per_node}", {matcher}}}'



def gpu_vms_by_pool(plan: TenantPlan) -> str:
    """One series per GPU pool of the team, named after the pool: how many VMs it runs."""
    name = plan.tenant.name
    return " or ".join(
        f'label_replace(count({pool_nodes(name, pool)}) or vector(0), "pool", "{pool.name}", "", "")' for pool in plan.gpu_pools
    )


def options_out(tenant: str | None = None) -> str:
    """The options of each team's GPU pools that failed lately, one series per option (node type) with
    the time of its first failure: what the capacity fallback counts as unavailable
    (components/capacity_fallback.py)."""
    return f"max by (tenant, pool, gpu, option, zone, node_type) ({UNAVAILABLE_SINCE}{_matchers(tenant)})"


def options_out_count(tenant: str | None = None) -> str:
    """How many options of each team's GPU pools are out now."""
    return f"count by (tenant, pool, option) ({UNAVAILABLE_SINCE}{_matchers(tenant)})"


def claim_failures(tenant: str | None = None) -> str:
    """Node claims that failed in the last hour, per team, pool, option, zone and why (capacity,
    quota, launch-failed, not-launched)."""
    return f"sum by (tenant, pool, option, zone, reason) (increase({FAILURES_TOTAL}{_matchers(tenant)}[1h]))"


def gpu_utilization(tenant: str | None = None) -> str:
    return f"avg by ({GPU_LABELS}) ({GPU_UTIL}{_matchers(tenant)})"


def gpu_memory_used_percent(tenant: str | None = None) -> str:
    used, free = f"{FB_USED}{_matchers(tenant)}", f"{FB_FREE}{_matchers(tenant)}"
    return f"max by ({GPU_LABELS}) (100 * {used} / ({used} + {free}))"


def sm_activity_percent(tenant: str | None = None) -> str:
    return f"avg by ({GPU_LABELS}) (100 * {SM_ACTIVE}{_matchers(tenant)})"


def gpu_power(tenant: str | None = None) -> str:
    return f"sum by ({GPU_LABELS}) ({POWER}{_matchers(tenant)})"


def team_utilization(tenant: str | None = None) -> str:
    """The average utilization of a team's GPUs, one series per team."""
    return f"avg by (tenant) ({GPU_UTIL}{_matchers(tenant)})"


@dataclass(frozen=True)
class PricedShape:
    machine_type: str
    capacity: str  # the node's gpu-platform/capacity-type label
    usd_per_hour: float


def priced_shapes(plan: TenantPlan) -> tuple[PricedShape, ...]:
    """Each machine type and capacity type a team's GPU pools may start, with what one node adds to
    the bill (its VM with its GPUs and boot disk; a reserved VM is paid by its reservation: its disk;
    config/tenant_plan.py node_usd_per_hour); the same in every zone of the region. Empty when a price
    is unknown or only bounded (discounted Flex-start): no estimate then."""
    shapes: dict[tuple[str, str], float] = {}
    for pool in plan.gpu_pools:
        if not pool.priced or pool.bounded:
            return ()
        for nt in pool.node_types:
            price = pool.node_price(nt)
            assert price is not None
            key = (nt.machine_type, nt.capacity)
            shapes[key] = max(shapes.get(key, 0.0), price)
    return tuple(PricedShape(m, capacity, usd) for (m, capacity), usd in sorted(shapes.items()))


def gpu_node_cost(plan: TenantPlan) -> str | None:
    """The team's GPU nodes now, priced: USD per hour at the region's list prices, the figure the
    plan's busy and ceiling are in. None without recorded prices."""
    shapes = priced_shapes(plan)
    if not shapes:
        return None
    name = plan.tenant.name
    terms = [
        f'(count(kube_node_labels{{tenant="{name}", {INSTANCE_TYPE}="{s.machine_type}", '
        f'{CAPACITY_TYPE}="{s.capacity}"}}) or vector(0)) * {s.usd_per_hour:.4f}'
        for s in shapes
    ]
    return " + ".join(terms)


# --- alert conditions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertCondition:
    key: str  # short name, for Pulumi names
    title: str
    query: str
    duration_seconds: int
    documentation: str


def idle_gpus(alerts: Alerts) -> AlertCondition:
    return AlertCondition(
        key="idle-gpu",
        title="GPU held by a pod but idle",
        query=f'max by ({GPU_LABELS}) ({GPU_UTIL}{{pod!=""}}) < {alerts.idle_utilization_percent:g}',
        duration_seconds=duration_seconds(alerts.idle_gpu_after),
        documentation=(
            f"A pod has held this GPU for {alerts.idle_gpu_after} at under {alerts.idle_utilization_percent:g}% utilization "
            "while its node is billed. Ask the team (labels tenant, namespace, pod) to release it; the node goes once its pool is idle."
        ),
    )


def gpu_not_offered(alerts: Alerts) -> AlertCondition:
    """A GPU node that offers no nvidia.com/gpu and that nothing is deleting. The GPU watchdog removes
    such a node after its pool's gpuTimeout; the alert waits longer (config/monitoring.py
    watchdog_removal_seconds), so it fires for the nodes the watchdog does not remove. A node being
    deleted (by the watchdog through its NodeClaim, or by the autoscaler) carries a deletion
    timestamp until it is gone, which kube_node_deletion_timestamp exports (kube-state-metrics tag
    v2.20.0, internal/store/node.go)."""
    allocatable = f'kube_node_status_allocatable{{resource="{KSM_GPU_RESOURCE}"}}'
    return AlertCondition(
        key="gpu-not-offered",
        title="GPU node without nvidia.com/gpu",
        query=(
            f"max by (tenant, node) ({gpu_nodes()}) unless on (tenant, node) ({allocatable} > 0) "
            f"unless on (tenant, node) {NODE_DELETION}"
        ),
        duration_seconds=duration_seconds(alerts.gpu_not_offered_after),
        documentation=(
            f"This GPU VM has been a node for {alerts.gpu_not_offered_after} without offering nvidia.com/gpu (never, or no longer), "
            "longer than the GPU watchdog waits before it removes such a node, and nothing is deleting it: no GPU pod can run there, "
            "and the autoscaler never counts it as initialized, so it is billed until deleted. The watchdog's events say why it left "
            "the node (kubectl get events -n default --field-selector involvedObject.name=<node>; a node without a NodeClaim is left "
            "to you), or whether the watchdog runs at all (namespace gpu-platform-system). Look at the GPU Operator's pods on it "
            "(namespace gpu-operator); delete the node if they cannot recover."
        ),
    )


def gpu_errors() -> AlertCondition:
    """XID errors: DCGM_EXP_XID_ERRORS_COUNT counts each in the exporter's window, one series per
    code (label `xid`), a repeat of the same code included; an exporter restart starts it at 0 and
    never makes one up (components/dcgm_metrics.py XID_COUNT). DCGM_FI_DEV_XID_ERRORS, the
    last code only, would see neither a repeat nor tell a restart's reset from a new error. The
    double-bit ECC count is a counter, whose increase is. XID 0 is "No Error"
    (NVIDIA/dcgm-exporter tag 4.4.2-4.7.0, internal/pkg/collector/xid_errors.go): not one to count."""
    by = "tenant, node, gpu, modelName"
    application = ", ".join(str(code) for code in APPLICATION_XIDS)
    return AlertCondition(
        key="gpu-errors",
        title="XID or ECC errors on a GPU",
        query=(
            f'max by ({by}, xid, namespace, pod) ({XID_COUNT}{{xid!="0"}}) > 0 '
            f"or max by ({by}) (increase({ECC_DBE}[{ERROR_WINDOW}])) > 0"
        ),
        duration_seconds=0,
        documentation=(
            f"The GPU reported XID errors (label xid is the code; {XID_COUNT} counts them) or uncorrectable (double-bit) "
            f"ECC errors in the last {ERROR_WINDOW}. XID {application} alone are most often the application's: a fault in the "
            "program running on the GPU (labels namespace and pod, where a pod holds it), not in the GPU. Tell its team; the "
            "node is fine. Any other code, or ECC errors, can be the GPU, its driver or its host: drain the node, and a "
            "replacement VM gets another GPU."
        ),
    )


def pool_at_limit_key(team: str) -> str:
    """The key of team `team`'s pool-at-limit condition, which ends its alert policy's Pulumi name."""
    return f"pool-at-limit-{team}"


def pool_at_limit(plan: TenantPlan, alerts: Alerts) -> AlertCondition:
    """A team's GPU pool runs as many nodes as its maxGpus allow while its GPU pods wait."""
    name = plan.tenant.name
    at_limit = " or ".join(
        f'label_replace(count({pool_nodes(name, pool)}) >= {pool.max_nodes}, "pool", "{pool.name}", "", "")' for pool in plan.gpu_pools
    )
    waiting = f"count({pending_gpu_pods(name)}) > 0"
    return AlertCondition(
        key=pool_at_limit_key(name),
        title=f"GPU pool of {name} at its limit while pods wait",
        query=f"({at_limit}) and on () ({waiting})",
        duration_seconds=duration_seconds(alerts.pool_at_limit_after),
        documentation=(
            f"Team {name}'s GPU pool (label pool) has been at its maxGpus for {alerts.pool_at_limit_after} while the team's GPU pods wait: "
            "they queue until a GPU frees up. Raise the pool's maxGpus (within the GPU quota) or ask the team to queue less."
        ),
    )


def capacity_shortage(alerts: Alerts) -> AlertCondition:
    """A team's GPU pods wait while every option of one of its pools has failed lately (the capacity
    fallback's EXHAUSTED_SINCE): its value is how long every option has been out, its labels the
    team, the pool and its GPU."""
    after = alerts.capacity_shortage_after
    return AlertCondition(
        key="capacity-shortage",
        title="Every GPU option of a team's pool out of capacity while its pods wait",
        query=f"(time() - max by (tenant, pool, gpu) ({EXHAUSTED_SINCE})) and on (tenant) ({pending_gpu_pods()} > 0)",
        duration_seconds=duration_seconds(after),
        documentation=(
            f"Team (label tenant) has had GPU pods waiting for a node for {after} while every option of its pool (label pool, "
            "GPU label gpu: each zone, shape and capacity type it may use) failed to get a VM: Compute Engine is out of that GPU "
            "there, or the team's quota is spent. The value is how long, in seconds, every option has been out. Karpenter keeps "
            "trying, the preferred option first, and the pods start as soon as one option has capacity. Which option failed, "
            f"when and why: the team's dashboard (GPU options out of capacity), the metric {FAILURES_TOTAL} by option and reason, "
            "and inside the team's cluster `kubectl get events -n default --field-selector reason=GPUOptionsExhausted`. To get "
            "GPUs sooner: add an option to the pool's capacity list (another zone, Spot, Flex-start, a reservation), or raise "
            "the quota (docs/gpu-nodes.md, Stockouts and fallback)."
        ),
    )


def environment_conditions(alerts: Alerts) -> tuple[AlertCondition, ...]:
    return (idle_gpus(alerts), gpu_not_offered(alerts), gpu_errors(), capacity_shortage(alerts))


def every_query(plans: tuple[TenantPlan, ...], alerts: Alerts) -> dict[str, str]:
    """Every PromQL expression the program writes, by where it goes (for the checks)."""
    queries = {f"alert {c.key}": c.query for c in environment_conditions(alerts)}
    queries.update(
        {
            "gpus allocated": gpus_allocated(),
            "pending gpu pods": pending_gpu_pods(),
            "gpu vms": gpu_vms_by_capacity(),
            "utilization": gpu_utilization(),
            "memory": gpu_memory_used_percent(),
            "sm activity": sm_activity_percent(),
            "power": gpu_power(),
            "team utilization": team_utilization(),
            "options out": options_out(),
            "options out count": options_out_count(),
            "claim failures": claim_failures(),
        }
    )
    for plan in plans:
        name = plan.tenant.name
        queries[f"alert pool-at-limit {name}"] = pool_at_limit(plan, alerts).query
        queries[f"{name} pools"] = gpu_vms_by_pool(plan)
        cost = gpu_node_cost(plan)
        if cost:
            queries[f"{name} cost"] = cost
    return queries
