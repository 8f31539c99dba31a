"""What the offline plan reads back from a program run per tenant: its host namespace, rendered
vcluster.yaml and pools, GPU Operator chart and values, prefetched images and in-tenant objects.
Split from tools/plan.py."""

from __future__ import annotations

import json

from components.tenant_vcluster import GPU_OPERATOR_IMAGES_ANNOTATION
from components.vcluster_values import POOL_LABEL, VClusterValues
from config import node_properties as props
from config import versions
from config.tenant import TenantPlan
from tools.mock_engine import ProgramRun
from tools.plan_model import INSTANCE_TYPE, Pool, TenantReport


def tenant_report(run: ProgramRun, tenant: TenantPlan) -> TenantReport:
    name = tenant.tenant.name
    instance = next((r for r in run.of_type(INSTANCE_TYPE) if (r.input("metadata", "name") == name)), None)
    report = TenantReport(name, tenant, [], None, None, None, None, None)
    if instance is None:
        return report
    report.host_namespace = instance.input("spec", "clusterRef", "namespace")
    template = instance.input("spec", "template") or {}
    values = (template.get("helmRelease") or {}).get("values")
    if isinstance(values, str):
        report.vcluster_yaml = values
        report.pools = _pools(values)
    annotation = (instance.input("metadata", "annotations") or {}).get(GPU_OPERATOR_IMAGES_ANNOTATION)
    report.prefetch_images = json.loads(annotation) if isinstance(annotation, str) else {}
    for chart in template.get("charts") or []:
        if chart.get("name") == versions.GPU_OPERATOR_CHART:
            report.gpu_operator_version = chart.get("version")
            report.gpu_operator_values = chart.get("values")
    objects = template.get("objects")
    report.objects = objects if isinstance(objects, str) else None
    return report


def _pools(values: str) -> list[Pool]:
    """One row per pool of the tenant's config: its dynamic pool, with its warm nodes (the static
    pool labelled with the same pool name) added; a pool whose warm nodes take all its GPUs has
    its static pool only."""
    document = VClusterValues.parse(values)
    pools: dict[str, Pool] = {}
    for pool in document.dynamic_pools():
        pools[pool.name] = _pool_row(pool)
    for static in document.static_pools():
        name = str((static.spec.get("nodeLabels") or {}).get(POOL_LABEL) or static.name)
        row = pools.get(name)
        if row is None:
            row = pools[name] = _pool_row(static, name=name)
            row.max_gpus, row.limits = 0 if row.gpu else None, {}
        row.warm_nodes += static.quantity or 0
        row.warm_machine_types = list(static.selected(props.INSTANCE_TYPE))
        if row.gpu and row.max_gpus is not None:
            limit = static.gpu_limit
            row.max_gpus = None if limit is None else row.max_gpus + limit
    return list(pools.values())


def _pool_row(pool, *, name: str | None = None) -> Pool:
    accelerator = next(iter(pool.selected(props.ACCELERATOR)), None)
    gpu = accelerator if accelerator and accelerator != props.NO_ACCELERATOR else None
    count = next(iter(pool.selected(props.ACCELERATOR_COUNT)), None)
    return Pool(
        name=name or pool.name,
        gpu=gpu,
        gpus_per_node=int(count) if gpu and count and count.isdigit() else None,
        max_gpus=pool.gpu_limit if gpu else None,
        idle_after=pool.consolidate_after,
        spot=pool.selected(props.CAPACITY_TYPE) == [props.SPOT],
        machine_types=list(pool.selected(props.INSTANCE_TYPE)),
        zones=list(pool.selected(props.ZONE)),
        limits={k: str(v) for k, v in pool.limits.items()},
    )
