"""The offline plan's view of what keeps a tenant's work and data (hooks in tools/plan_text.py and
tools/plan_json.py): per tenant its nodes' graceful shutdown, each pool's upgrade policy and GPU
watchdog limit, and its backup, all read from what the program registered (the vcluster.yaml, the
in-tenant objects, the Backup for GKE plans), so the plan shows what would be deployed."""

from __future__ import annotations

import json
from typing import Any

import yaml

from components.vcluster_values import POOL_LABEL, SKIP_AUTO_UPGRADE_LABEL, VClusterValues
from policy.kubernetes_reader import LOADER
from policy.vcluster_reader import STATIC, Pool

BACKUP_PLAN = "gcp:gkebackup/backupPlan:BackupPlan"
# How each pool's nodes get a new Kubernetes version (components/vcluster_values.py
# SKIP_AUTO_UPGRADE_LABEL): a dynamic GPU pool's node is replaced once empty, a static (warm) pool's
# once someone deletes it (docs/reliability.md "Upgrades").
REPLACED = "replaced, never upgraded in place"
REPLACED_WHEN_DELETED = "replaced when deleted, never upgraded in place"
IN_PLACE = "upgraded in place by vCluster"


def tenant_fields(plan: Any, report: Any) -> dict[str, Any]:
    values = VClusterValues.parse(report.vcluster_yaml) if report.vcluster_yaml else VClusterValues({})
    kubelet = values.kubelet_config
    concurrency = values.auto_upgrade.get("concurrency", 1)
    limits = _watchdog_limits(report.objects)
    pools = [
        {
            "pool": pool.name,
            "upgrade": _upgrade(pool, concurrency),
            # The watchdog knows a node's pool by its label, which a pool's warm nodes share.
            "gpuTimeoutSeconds": limits.get(pool.node_labels.get(POOL_LABEL, pool.name)) if pool.is_gpu else None,
        }
        for pool in values.pools()
    ]
    backup = next((r for r in plan.run.of_type(BACKUP_PLAN) if r.input("name") == f"{plan.loaded.facts.environment}-{report.name}"), None)
    return {
        "shutdownGracePeriod": kubelet.get("shutdownGracePeriod"),
        "shutdownGracePeriodCriticalPods": kubelet.get("shutdownGracePeriodCriticalPods"),
        "pools": pools,
        "backup": None
        if backup is None
        else {
            "plan": backup.input("name"),
            "namespaces": backup.input("backupConfig", "selectedNamespaces", "namespaces"),
            "schedule": backup.input("backupSchedule", "cronSchedule"),
            "retainDays": int(backup.input("retentionPolicy", "backupRetainDays")),  # numbers arrive as floats
            "deleteLockDays": int(backup.input("retentionPolicy", "backupDeleteLockDays")),
            "protected": backup.protect,
        },
    }


def tenant_lines(plan: Any, report: Any) -> list[str]:
    f = tenant_fields(plan, report)
    pools = "; ".join(
        p["pool"] + ": " + p["upgrade"] + ("" if p["gpuTimeoutSeconds"] is None else f", removed after {p['gpuTimeoutSeconds']} s without its GPUs")
        for p in f["pools"]
    )
    b = f["backup"]
    backup = (
        "backup: none (backup.enabled is false)"
        if b is None
        else f"backup: {', '.join(b['namespaces'])} at \"{b['schedule']}\" UTC, kept {b['retainDays']} days, "
        f"undeletable for {b['deleteLockDays']} days{', protected' if b['protected'] else ''} (plan {b['plan']})"
    )
    return [
        f"shutdown: pods get SIGTERM and {f['shutdownGracePeriod']} ({f['shutdownGracePeriodCriticalPods']} of it for critical pods) "
        f"before a VM powers off; upgrades: {pools}",
        backup,
    ]


def _upgrade(pool: Pool, concurrency: int) -> str:
    if pool.node_labels.get(SKIP_AUTO_UPGRADE_LABEL) != "true":
        return f"{IN_PLACE}, {concurrency} node at a time"
    return REPLACED_WHEN_DELETED if pool.kind == STATIC else REPLACED


def _watchdog_limits(objects: str | None) -> dict[str, int]:
    for document in yaml.load_all(objects or "", Loader=LOADER):  # noqa: S506 - a safe loader
        if document and document.get("kind") == "ConfigMap" and "config.json" in (document.get("data") or {}):
            return dict(json.loads(document["data"]["config.json"]).get("poolLimitSeconds") or {})
    return {}
