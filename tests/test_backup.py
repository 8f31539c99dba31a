"""A backup of every team's cluster (components/tenant_backup.py): Backup for GKE plans per tenant,
checked on the inputs each resource receives (namespace, schedule, retention, protection), the
agent and API on the host cluster, and a restore plan for the same namespace."""

from __future__ import annotations

import pytest

from components.gke_cluster import BACKUP_API
from config.reliability import Backup, delete_lock_days
from shipped_stacks import run_shipped

NS = "gpu-platform"
BACKUP_PLAN = "gcp:gkebackup/backupPlan:BackupPlan"
RESTORE_PLAN = "gcp:gkebackup/restorePlan:RestorePlan"


def plans(run, tenant: str):
    [backup] = [r for r in run.of_type(BACKUP_PLAN) if r.name == f"tenant-{tenant}-backup-plan"]
    [restore] = [r for r in run.of_type(RESTORE_PLAN) if r.name == f"tenant-{tenant}-backup-restore-plan"]
    return backup, restore


@pytest.mark.parametrize(
    "run_name, tenant, environment, project, cluster, lock",
    [
        ("dev_run", "nlp", "dev", "acme-ml-dev", "projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev", 0),
        ("dev_run", "speech", "dev", "acme-ml-dev", "projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev", 0),
        # A team stack: its plans are on the environment's host cluster, in the host's project.
        ("tenant_run", "vision", "dev", "acme-ml-dev", "projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev", 0),
        ("prod_run", "research", "prod", "acme-ml-prod", "projects/acme-ml-prod/locations/us-central1/clusters/gpu-prod", 14),
    ],
)
def test_each_tenants_host_namespace_is_backed_up_daily_and_kept_14_days(request, run_name, tenant, environment, project, cluster, lock):
    run = request.getfixturevalue(run_name)
    backup, restore = plans(run, tenant)
    assert (backup.input("name"), backup.input("project"), backup.input("cluster")) == (f"{environment}-{tenant}", project, cluster)
    assert backup.input("backupConfig") == {
        "selectedNamespaces": {"namespaces": [f"vcluster-{tenant}"]},  # the team's control plane, nothing else
        "includeVolumeData": True,
        "includeSecrets": True,
    }
    assert backup.input("backupSchedule") == {"cronSchedule": "0 3 * * *", "paused": False}
    assert backup.input("retentionPolicy") == {"backupRetainDays": 14, "backupDeleteLockDays": lock}
    assert restore.input("restoreConfig") == {
        "selectedNamespaces": {"namespaces": [f"vcluster-{tenant}"]},
        "namespacedResourceRestoreMode": "DELETE_AND_RESTORE",
        "volumeDataRestorePolicy": "RESTORE_VOLUME_DATA_FROM_BACKUP",
        "clusterResourceRestoreScope": {"noGroupKinds": True},
    }
    assert (restore.input("cluster"), restore.input("project"), restore.input("name")) == (cluster, project, f"{environment}-{tenant}-restore")
    assert restore.property_dependencies["backupPlan"] == [backup.urn]  # the plan's id, once it exists
    # Protected in prod: neither `pulumi destroy` nor a deleted stack takes the backups along.
    assert backup.protect is restore.protect is (environment == "prod")
    outputs = run.outputs if "tenants" not in run.outputs else run.outputs["tenants"][tenant]
    assert (outputs["backupPlan"], outputs["restorePlan"]) == (f"{environment}-{tenant}", f"{environment}-{tenant}-restore")


def test_the_host_cluster_runs_the_backup_agent(dev_run, prod_run):
    for run in (dev_run, prod_run):
        cluster = run.one("gcp:container/cluster:Cluster")
        assert cluster.input("addonsConfig") == {"gkeBackupAgentConfig": {"enabled": True}}
        [api] = [s for s in run.of_type("gcp:projects/service:Service") if s.input("service") == BACKUP_API]
        for plan in run.of_type(BACKUP_PLAN):
            assert {api.urn, cluster.urn} <= run.depends_on(plan.urn)


def test_retention_and_schedule_come_from_config(stack_values):
    values = stack_values("prod")
    values[f"{NS}:tenants"][0]["backup"] = {"schedule": "30 */6 * * *", "retainDays": 120}
    run = run_shipped(values, stack="prod")
    backup, _ = plans(run, "research")
    assert backup.input("backupSchedule") == {"cronSchedule": "30 */6 * * *", "paused": False}
    assert backup.input("retentionPolicy") == {"backupRetainDays": 120, "backupDeleteLockDays": 90}  # Backup for GKE's most


@pytest.mark.parametrize(
    "backup, environment, lock",
    [({"retainDays": 30, "deleteLockDays": 3}, "prod", 3), ({"retainDays": 30}, "prod", 30), ({"retainDays": 30}, "dev", 0), ({"retainDays": 200}, "prod", 90)],
)
def test_the_deletion_lock(backup, environment, lock):
    assert delete_lock_days(Backup.model_validate(backup), environment) == lock
