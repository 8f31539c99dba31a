"""What keeps a team's work and data when things go wrong: how its nodes shut down, how long a GPU
node may go without its GPUs, and the backup of its virtual cluster. The config models, their
checks, and the values derived from them (docs/reliability.md says what each failure does).

Compute Engine's clocks, which bound the kubelet's graceful shutdown:
- A Spot VM gets 30 s between the ACPI G2 soft-off signal of its preemption and the hard power-off;
  a Standard VM 120 s (Compute Engine API, `Scheduling.skipGuestOsShutdown`: "there will be 120
  seconds between GCE ACPI G2 Soft Off and ACPI G3 Mechanical Off for Standard VMs and 30 seconds
  for Spot VMs"; https://cloud.google.com/compute/docs/instances/spot "Preemption process").
- Host maintenance of a GPU VM (which cannot live-migrate) is announced an hour ahead, but only
  through the metadata server's `instance/maintenance-event` (TERMINATE_ON_HOST_MAINTENANCE), not
  to the guest OS (https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance: "Compute Engine
  gives GPU VMs a 1-hour stopping notice"); the stop itself is the Standard VM's soft-off with its
  120 s. So the hour is for a job that reads that key; the kubelet's share is the 120 s.

The kubelet setting is one per virtual cluster (vcluster `privateNodes.kubelet.config`, "the
config for the kubelet that will be merged into the default kubelet config", loft-sh/vcluster
config/config.go at v0.36.1): a tenant with a Spot pool gets the Spot bound on all its nodes.
"""

from __future__ import annotations

from pydantic import Field

from . import cron
from .base import DURATION, ConfigModel, Duration, duration_seconds
from .errors import Problems

SPOT_SHUTDOWN_SECONDS = 30
STANDARD_SHUTDOWN_SECONDS = 120
# Defaults: the whole Spot window, as cloudpilot-ai/karpenter-provider-gcp sets for Spot nodes
# (pkg/providers/instance/metadata_bootstrap.go `applySpotShutdownKubeletConfig`, commit
# 417f047b); on Standard VMs 10 s of the 120 are left for the OS to stop after the kubelet.
SPOT_GRACE_PERIOD = "30s"
STANDARD_GRACE_PERIOD = "110s"
CRITICAL_PODS_GRACE_PERIOD = "10s"

# The GPU watchdog (components/gpu_watchdog.py): a GPU node that offers no GPU this long is removed.
GPU_TIMEOUT = "10m"
MIN_GPU_TIMEOUT_SECONDS = 120  # a healthy node needs minutes for the driver, toolkit and device plugin
# How often the watchdog looks at the tenant's nodes (components/watchdog_documents.py); the
# GPU-not-offered alert waits for it (config/monitoring.py).
WATCHDOG_POLL_SECONDS = 30
# The capacity fallback (components/capacity_fallback.py): how often it looks at the tenant's node
# claims (often enough to see a claim Karpenter deletes at once after an insufficient-capacity error,
# which lives as long as the platform's `tofu apply` takes to fail); how long a node type that failed
# counts as unavailable for its request pods after its last failure (Karpenter's own claims always try
# the preferred option again; a failure within as long again continues the same shortage); how long a
# request pod may wait (Karpenter's 5-minute launch timeout, twice).
FALLBACK_POLL_SECONDS = 10
FALLBACK_UNAVAILABLE_SECONDS = 600
FALLBACK_REQUEST_SECONDS = 600

# Backup for GKE's limits on a backup plan, from its API (BackupPlan.RetentionPolicy and
# BackupPlan.Schedule: https://cloud.google.com/kubernetes-engine/docs/add-on/backup-for-gke/reference/rest/v1/projects.locations.backupPlans,
# as pulumi-gcp 10.2.0 gkebackup.BackupPlanRetentionPolicyArgs repeats them):
# - backupRetainDays 0..365, and "if cron_schedule is defined, then this must be <= 360 * the
#   creation interval" (the interval in days: daily 360, every 6 hours 90, hourly 15); with a
#   cronSchedule it "must also be defined" (0 is none);
# - backupDeleteLockDays 0..90 and <= backupRetainDays;
# - cronSchedule "a standard cron string", in UTC, whose backups are at least 10 minutes apart
#   ("The minimum interval between scheduled backups is 10 minutes":
#   https://cloud.google.com/kubernetes-engine/docs/add-on/backup-for-gke/how-to/backup-schedule).
# A schedule whose backups come at uneven intervals (weekdays only) is held to its shortest one,
# so that no plan is refused whichever interval the API takes.
MAX_RETAIN_DAYS = 365
MAX_DELETE_LOCK_DAYS = 90
RETAIN_DAYS_PER_INTERVAL_DAY = 360
MIN_BACKUP_INTERVAL_MINUTES = 10


class NodeShutdown(ConfigModel):
    """`tenants[i].nodeShutdown`: the kubelet's graceful shutdown on the tenant's nodes."""

    grace_period: Duration | None = None
    """How long the kubelet holds a node's shutdown so that its pods get SIGTERM and stop (default 30s with a Spot pool, else 110s; at most what Compute Engine waits before the power goes: 30s Spot, 120s Standard)."""
    critical_pods_grace_period: Duration = CRITICAL_PODS_GRACE_PERIOD
    """The last part of gracePeriod, kept for critical pods (system-node-critical, system-cluster-critical), which stop after the others."""


class Backup(ConfigModel):
    """`tenants[i].backup`: the scheduled Backup for GKE of the tenant's control plane."""

    enabled: bool = True
    """Back up the tenant's control plane (its host namespace: the API objects, secrets and data volume) with Backup for GKE; off in prod only with platform.allowTenantsWithoutBackup."""
    schedule: str = "0 3 * * *"
    """When backups are taken, a standard five-field cron line in UTC (default daily at 03:00); Backup for GKE takes them at least 10 minutes apart."""
    retain_days: int = Field(
        14,
        ge=1,
        le=MAX_RETAIN_DAYS,
        # What the schedule allows too (the check below), for the reference's bounds: the default's.
        json_schema_extra={
            "bounds": f"1–{min(MAX_RETAIN_DAYS, RETAIN_DAYS_PER_INTERVAL_DAY)} with the default daily schedule; at most "
            f"{RETAIN_DAYS_PER_INTERVAL_DAY} × the days between two backups, up to {MAX_RETAIN_DAYS}"
        },
    )
    """How many days each backup is kept before Backup for GKE deletes it: 1 to 365, and at most 360 times the days between two backups of `schedule` (the shortest gap where they are uneven): daily 360, every 6 hours 90, hourly 15."""
    delete_lock_days: int | None = Field(None, ge=0, le=MAX_DELETE_LOCK_DAYS)
    """For how many days after it is taken nobody can delete a backup: 0 to 90 and at most retainDays (default: retainDays in prod, at most 90; 0 elsewhere)."""


def spot_pool_paths(path: str, tenant) -> list[str]:
    return [f"{path}.gpuPools[{i}]" for i, pool in enumerate(tenant.gpu_pools) if pool.uses_spot]


def shutdown_grace(tenant) -> tuple[str, str]:
    """(shutdownGracePeriod, shutdownGracePeriodCriticalPods) of every node of the tenant."""
    shutdown = tenant.node_shutdown
    spot = any(pool.uses_spot for pool in tenant.gpu_pools)
    grace = shutdown.grace_period or (SPOT_GRACE_PERIOD if spot else STANDARD_GRACE_PERIOD)
    return grace, shutdown.critical_pods_grace_period


def delete_lock_days(backup: Backup, environment: str) -> int:
    if backup.delete_lock_days is not None:
        return backup.delete_lock_days
    return min(backup.retain_days, MAX_DELETE_LOCK_DAYS) if environment == "prod" else 0


def check_reliability(path: str, tenant, facts, problems: Problems) -> None:
    """The tenant's shutdown, watchdog and backup settings; each `checking` block is one check."""
    _check_shutdown(path, tenant, problems)
    for i, pool in enumerate(tenant.gpu_pools):
        key = f"{path}.gpuPools[{i}].gpuTimeout"
        with problems.checking(key):
            if not DURATION.match(pool.gpu_timeout):
                problems.add(key, f"{pool.gpu_timeout!r} is not a duration like 10m or 15m")
            elif duration_seconds(pool.gpu_timeout) < MIN_GPU_TIMEOUT_SECONDS:
                problems.add(
                    key,
                    f"{pool.gpu_timeout} is under 2m: a healthy GPU node needs minutes for the driver, the container toolkit "
                    "and the device plugin before it offers nvidia.com/gpu, and would be removed first",
                )
    _check_backup(f"{path}.backup", tenant.backup, facts, problems)


def _check_shutdown(path: str, tenant, problems: Problems) -> None:
    base = f"{path}.nodeShutdown"
    seconds: dict[str, int] = {}
    for field, key in (("grace_period", "gracePeriod"), ("critical_pods_grace_period", "criticalPodsGracePeriod")):
        with problems.checking(f"{base}.{key}"):
            value = getattr(tenant.node_shutdown, field)
            if value is None:
                continue
            if not DURATION.match(value):
                problems.add(f"{base}.{key}", f"{value!r} is not a duration like 30s or 1m50s")
            else:
                seconds[key] = duration_seconds(value)
    with problems.checking(f"{base}.gracePeriod"):
        grace = seconds.get("gracePeriod")
        spot = spot_pool_paths(path, tenant)
        if grace is not None and spot and grace > SPOT_SHUTDOWN_SECONDS:
            problems.add(
                f"{base}.gracePeriod",
                f"{tenant.node_shutdown.grace_period} is longer than the {SPOT_SHUTDOWN_SECONDS} s Compute Engine gives a preempted "
                f"Spot VM before it powers off, and {', '.join(spot)} {'is' if len(spot) == 1 else 'are'} Spot (the setting "
                f"applies to every node of the tenant); at most {SPOT_SHUTDOWN_SECONDS}s",
            )
        elif grace is not None and grace > STANDARD_SHUTDOWN_SECONDS:
            problems.add(
                f"{base}.gracePeriod",
                f"{tenant.node_shutdown.grace_period} is longer than the {STANDARD_SHUTDOWN_SECONDS} s Compute Engine waits between "
                f"a VM's soft-off signal and its power-off; at most {STANDARD_SHUTDOWN_SECONDS}s",
            )
    with problems.checking(f"{base}.criticalPodsGracePeriod"):
        if "criticalPodsGracePeriod" in seconds and not problems.has_problems(f"{base}.gracePeriod"):
            grace_text, _ = shutdown_grace(tenant)
            if DURATION.match(grace_text) and seconds["criticalPodsGracePeriod"] >= duration_seconds(grace_text):
                problems.add(
                    f"{base}.criticalPodsGracePeriod",
                    f"{tenant.node_shutdown.critical_pods_grace_period} leaves nothing of the grace period ({grace_text}) to the "
                    "other pods; it must be shorter",
                )


def _check_backup(path: str, backup: Backup, facts, problems: Problems) -> None:
    """Backup for GKE's rules on a plan's schedule and retention (MAX_RETAIN_DAYS and below)."""
    gap = None
    with problems.checking(f"{path}.schedule"):
        try:
            gap = cron.shortest_gap_minutes(backup.schedule)
        except cron.CronError as e:
            problems.add(f"{path}.schedule", f"{backup.schedule!r} is not a five-field cron line like \"0 3 * * *\" (UTC): {e}")
        else:
            if gap is None:
                problems.add(f"{path}.schedule", f"{backup.schedule!r} never fires: no date has that day in those months")
            elif gap < MIN_BACKUP_INTERVAL_MINUTES:
                problems.add(
                    f"{path}.schedule",
                    f"{backup.schedule!r} takes backups {gap} minutes apart; Backup for GKE takes them at least "
                    f"{MIN_BACKUP_INTERVAL_MINUTES} minutes apart",
                )
    with problems.checking(f"{path}.retainDays"):
        if gap is not None and not problems.has_problems(f"{path}.schedule"):
            most = min(MAX_RETAIN_DAYS, RETAIN_DAYS_PER_INTERVAL_DAY * gap // cron.MINUTES_A_DAY)
            if backup.retain_days > most:
                problems.add(
                    f"{path}.retainDays",
                    f"{backup.retain_days} days is longer than Backup for GKE keeps backups taken every {_interval(gap)} "
                    f"(schedule {backup.schedule!r}, its shortest gap): at most {RETAIN_DAYS_PER_INTERVAL_DAY} times the days between "
                    f"two backups, so 1 to {most}; keep fewer days or back up less often",
                )
    with problems.checking(f"{path}.deleteLockDays"):
        if backup.delete_lock_days is not None and backup.delete_lock_days > backup.retain_days:
            problems.add(
                f"{path}.deleteLockDays",
                f"{backup.delete_lock_days} is longer than retainDays {backup.retain_days}: a backup cannot be locked past its deletion",
            )
    with problems.checking(f"{path}.enabled"):
        if not backup.enabled and not facts.allow_tenants_without_backup:
            problems.add(
                f"{path}.enabled",
                f"backups are off, which environment {facts.environment} does not allow: a deleted namespace or a lost disk would "
                "lose the team's whole cluster; set platform.allowTenantsWithoutBackup: true in the environment stack to allow it",
            )


def _interval(minutes: int) -> str:
    for unit, size in (("day", cron.MINUTES_A_DAY), ("hour", 60)):
        if minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}s" if count != 1 else unit
    return f"{minutes} minutes"

