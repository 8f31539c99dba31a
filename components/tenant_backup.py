"""TenantBackup: a scheduled backup of one team's virtual cluster, and the plan to restore it.

A tenant's control plane (its API objects, secrets, workloads: the whole cluster) lives in its host
namespace `vcluster-<tenant>` on the host cluster: a StatefulSet and its one persistent volume.
Backup for GKE backs that namespace up, its Secrets and the volume's data included, on the
tenant's schedule, and keeps each backup `retainDays`; the RestorePlan puts the namespace back
into the host cluster (docs/reliability.md, "Restore a team's cluster").

Why Backup for GKE rather than vCluster's own snapshots (`snapshots.auto`, loft-sh/vcluster
chart/values.schema.json at v0.36.1, `SnapshotStorage`): its storage is S3 ("it should contain
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY"; for Cloud Storage that means HMAC keys), an OCI
registry with a username and password (for Artifact Registry a service-account key or a token
someone refreshes), Azure, or "local files inside a vCluster container", which is the very volume
a backup must survive. Each of them needs a long-lived key in the tenant's host namespace, or
protects nothing. Backup for GKE needs no key at all: its agent runs in the host cluster as a GKE
add-on (the cluster's `gke_backup_agent_config`, components/gke_cluster.py) and Google's service
agent writes the backups; the volume data comes from PD snapshots. Its reach is in
docs/security.md.

In prod both plans are protected (Pulumi `protect`), and each backup cannot be deleted for
`deleteLockDays` (default: as long as it is kept, at most 90 days), so neither a mistaken
`pulumi destroy` nor a stolen deployer credential can take the backups with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.reliability import Backup, delete_lock_days

# Restore what the namespace held, replacing what is there (the platform may have reinstalled an
# empty control plane into it meanwhile); volumes from the backup's data. Cluster-scoped objects
# are not restored: the vcluster chart's (a ClusterRole, where it renders one) come back with its
# Helm release, which the platform reinstalls from the VirtualClusterInstance.
NAMESPACED_RESTORE_MODE = "DELETE_AND_RESTORE"
VOLUME_RESTORE_POLICY = "RESTORE_VOLUME_DATA_FROM_BACKUP"


def backup_plan_id(project: str, location: str, name: str) -> str:
    return f"projects/{project}/locations/{location}/backupPlans/{name}"


@dataclass(frozen=True)
class TenantBackupArgs:
    tenant: str
    environment: str
    project: str  # the host cluster's project, where the plans live
    region: str
    cluster: str  # projects/<p>/locations/<l>/clusters/<name>
    namespace: str  # the tenant's host namespace
    backup: Backup
    # What the plans wait for in the same stack (inline tenants): the API and the cluster with its agent.
    prerequisites: tuple[pulumi.Resource, ...] = ()


class TenantBackup(pulumi.ComponentResource):
    backup_plan: gcp.gkebackup.BackupPlan
    restore_plan: gcp.gkebackup.RestorePlan
    backup_plan_name: str
    restore_plan_name: str

    def __init__(self, name: str, args: TenantBackupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:tenants:Backup", name, None, opts)
        protect = args.environment == "prod"
        labels = {"gpu-platform-tenant": args.tenant, "gpu-platform-environment": args.environment}
        self.backup_plan_name = f"{args.environment}-{args.tenant}"
        self.restore_plan_name = f"{args.environment}-{args.tenant}-restore"
        backup = args.backup
        self.backup_plan = gcp.gkebackup.BackupPlan(
            f"{name}-plan",
            name=self.backup_plan_name,
            project=args.project,
            location=args.region,
            cluster=args.cluster,
            description=f"The virtual cluster of team {args.tenant} ({args.environment}): host namespace {args.namespace}",
            backup_config=gcp.gkebackup.BackupPlanBackupConfigArgs(
                selected_namespaces=gcp.gkebackup.BackupPlanBackupConfigSelectedNamespacesArgs(namespaces=[args.namespace]),
                include_volume_data=True,
                include_secrets=True,  # the tenant's certificates, tokens and its own Secrets
            ),
            backup_schedule=gcp.gkebackup.BackupPlanBackupScheduleArgs(cron_schedule=backup.schedule, paused=False),
            retention_policy=gcp.gkebackup.BackupPlanRetentionPolicyArgs(
                backup_retain_days=backup.retain_days,
                backup_delete_lock_days=delete_lock_days(backup, args.environment),
            ),
            labels=labels,
            opts=pulumi.ResourceOptions(parent=self, protect=protect, depends_on=list(args.prerequisites)),
        )
        self.restore_plan = gcp.gkebackup.RestorePlan(
            f"{name}-restore-plan",
            name=self.restore_plan_name,
            project=args.project,
            location=args.region,
            # The backup plan's id as Backup for GKE names it (hashicorp/terraform-provider-google tag
            # v7.9.0 google/services/gkebackup/resource_gke_backup_backup_plan.go: the id is
            # projects/{{project}}/locations/{{location}}/backupPlans/{{name}}), written out so that a
            # preview and the policy pack see which team's backups it restores (data-targets-by-design).
            backup_plan=backup_plan_id(args.project, args.region, self.backup_plan_name),
            cluster=args.cluster,
            description=f"Restores team {args.tenant}'s host namespace {args.namespace} into its host cluster (docs/reliability.md)",
            restore_config=gcp.gkebackup.RestorePlanRestoreConfigArgs(
                selected_namespaces=gcp.gkebackup.RestorePlanRestoreConfigSelectedNamespacesArgs(namespaces=[args.namespace]),
                namespaced_resource_restore_mode=NAMESPACED_RESTORE_MODE,
                volume_data_restore_policy=VOLUME_RESTORE_POLICY,
                cluster_resource_restore_scope=gcp.gkebackup.RestorePlanRestoreConfigClusterResourceRestoreScopeArgs(no_group_kinds=True),
            ),
            labels=labels,
            opts=pulumi.ResourceOptions(parent=self, protect=protect, depends_on=[self.backup_plan]),
        )
        self.register_outputs({"backupPlan": self.backup_plan_name, "restorePlan": self.restore_plan_name})
