"""A backup of every team's cluster (components/tenant_backup.py): Backup for GKE plans per tenant,
checked on the inputs each resource receives (namespace, schedule, retention, protection), the
agent and API on the host cluster, and a restore plan for the same namespace."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import shlex

import croniter
import pytest

from components.gke_cluster import BACKUP_API
from components.vcluster_values import VClusterValues
from config import cron
from config.reliability import Backup, delete_lock_days
from docs_support import section
from shipped_stacks import run_shipped

NS = "gpu-platform"
BACKUP_PLAN = "gcp:gkebackup/backupPlan:BackupPlan"
RESTORE_PLAN = "gcp:gkebackup/restorePlan:RestorePlan"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
DAY = 24 * 60


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
    # Its own team's backup plan, by the id Backup for GKE gives it (known in a preview, for the pack), created first.
    assert restore.input("backupPlan") == f"projects/{project}/locations/{restore.input('location')}/backupPlans/{environment}-{tenant}"
    assert backup.input("name") == f"{environment}-{tenant}" and backup.input("location") == restore.input("location")
    assert backup.urn in restore.dependencies
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
    values[f"{NS}:tenants"][0]["backup"] = {"schedule": "30 4 * * mon", "retainDays": 120}
    run = run_shipped(values, stack="prod")
    backup, _ = plans(run, "research")
    assert backup.input("backupSchedule") == {"cronSchedule": "30 4 * * mon", "paused": False}
    assert backup.input("retentionPolicy") == {"backupRetainDays": 120, "backupDeleteLockDays": 90}  # Backup for GKE's most


# Schedules and the shortest gap between their firings, in minutes (None: never fires).
GAPS = [
    ("0 3 * * *", DAY),
    ("30 */6 * * *", 6 * 60),
    ("0 * * * *", 60),
    ("*/10 * * * *", 10),
    ("0,50 0,23 * * *", 10),  # 23:50 to the next day's 00:00
    ("15 2 * * 1-5", DAY),  # weekdays: held to the shortest gap, not Friday to Monday
    ("30 4 * * mon", 7 * DAY),
    ("0 3 * * 7", 7 * DAY),  # 7 is Sunday, as 0
    ("0 0 1 * *", 28 * DAY),  # 1 February to 1 March
    ("0 0 1,15 */2 *", 14 * DAY),
    ("0 0 29 2 *", (3 * 365 + 366) * DAY),  # leap days only
    ("0 3 1 * fri", DAY),  # day of month and day of week both restricted: either matches (a Friday the 31st, then the 1st)
    # `*/2`: cronie reads it unrestricted (both must match: 7 days, a Friday the 31st, then the 7th),
    # croniter restricted (either: a day); the shorter counts.
    ("0 3 */2 * fri", DAY),
    ("0 3 30 2 *", None),  # never
]


@pytest.mark.parametrize("schedule, minutes", GAPS)
def test_the_shortest_gap_of_a_schedule(schedule, minutes):
    assert cron.shortest_gap_minutes(schedule) == minutes


@pytest.mark.parametrize("schedule, minutes", [g for g in GAPS if g[1] is not None])
def test_the_cron_reader_fires_as_croniter_does(schedule, minutes):
    """The same lines read by croniter, a widely used cron implementation, from 2001 on: the same
    shortest gap, and croniter's firing days are those of one of config/cron.py's readings."""
    start, last = dt.datetime(2001, 1, 1), dt.datetime(2030, 1, 1)
    firings = croniter.croniter(schedule, start - dt.timedelta(minutes=1)).all_next(dt.datetime)
    times = list(itertools.takewhile(lambda t: t < last, itertools.islice(firings, 1500)))
    assert min(int((b - a).total_seconds()) // 60 for a, b in zip(times, times[1:])) == minutes
    days = {t.date() for t in times}
    span = [start.date() + dt.timedelta(days=n) for n in range((times[-1].date() - start.date()).days + 1)]
    assert days in [{d for d in span if reading.fires_on(d)} for reading in cron.readings(schedule)]


@pytest.mark.parametrize(
    "schedule, message",
    [
        ("daily", "it has 1 fields, not 5"),
        ("61 3 * * *", "the minute field has 61, outside 0-59"),
        ("0 3 * * 1-8", "the day of week field has 8, outside 0-7"),
        ("0 3 * foo *", "the month field has 'foo', which is not a number or a name"),
        ("0 3 L * *", "the day of month field has 'L', which is not a number"),
        ("*/0 * * * *", "the minute field has the step '0', which is not a whole number from 1"),
        ("0 5-2 * * *", "the hour field has the range '5-2', which runs backwards"),
    ],
)
def test_what_is_not_standard_cron(schedule, message):
    with pytest.raises(cron.CronError) as caught:
        cron.shortest_gap_minutes(schedule)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "backup, environment, lock",
    [({"retainDays": 30, "deleteLockDays": 3}, "prod", 3), ({"retainDays": 30}, "prod", 30), ({"retainDays": 30}, "dev", 0), ({"retainDays": 200}, "prod", 90)],
)
def test_the_deletion_lock(backup, environment, lock):
    assert delete_lock_days(Backup.model_validate(backup), environment) == lock


# --- the restore runbook (docs/reliability.md "Restore a team's cluster") ------------------------


def runbook_commands() -> list[list[str]]:
    """The runbook's gcloud commands, each as its words (continued lines joined)."""
    blocks = re.findall(r"```sh\n(.*?)```", section("Restore a team's cluster"), flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line) for line in lines if line.strip()]


def flag(words: list[str], name: str) -> str | bool:
    """A flag's value (the next word), or True for a flag that takes none."""
    i = words.index(name)
    return words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True


def gcloud_value(enum: str) -> str:
    return enum.lower().replace("_", "-")  # gcloud's spelling of the API's enums


def test_the_runbooks_restore_plan_restores_as_the_stacks_does(dev_run):
    """A restore plan for a new host cluster, made by hand from the runbook, restores exactly what
    and how the plan the program creates does."""
    _, restore = plans(dev_run, "nlp")
    config = restore.input("restoreConfig")
    [create] = [w for w in runbook_commands() if w[:6] == ["gcloud", "beta", "container", "backup-restore", "restore-plans", "create"]]
    assert flag(create, "--selected-namespaces") == "vcluster-<team>" and config["selectedNamespaces"] == {"namespaces": ["vcluster-nlp"]}
    assert flag(create, "--namespaced-resource-restore-mode") == gcloud_value(config["namespacedResourceRestoreMode"])
    assert flag(create, "--volume-data-restore-policy") == gcloud_value(config["volumeDataRestorePolicy"])
    assert flag(create, "--cluster-resource-scope-no-group-kinds") is True and config["clusterResourceRestoreScope"] == {"noGroupKinds": True}
    assert flag(create, "--backup-plan") == "projects/<project>/locations/<region>/backupPlans/<environment>-<team>"
    # The restores name the plans by the stack's outputs: <environment>-<team>, and -restore or the new one.
    restores = [w for w in runbook_commands() if w[:6] == ["gcloud", "beta", "container", "backup-restore", "restores", "create"]]
    assert [flag(w, "--restore-plan") for w in restores] == ["<environment>-<team>-restore"]
    assert "`--restore-plan\n<environment>-<team>-restore-new`" in section("Restore a team's cluster") and create[6] == "<environment>-<team>-restore-new"
    assert (dev_run.outputs["tenants"]["nlp"]["backupPlan"], dev_run.outputs["tenants"]["nlp"]["restorePlan"]) == ("dev-nlp", "dev-nlp-restore")


def test_every_control_plane_keeps_vclusters_default_store(dev_run, prod_run, tenant_run):
    """The runbook's consistency bullet holds for the store the instances run: none sets
    `controlPlane.backingStore`, so vCluster's default, embedded SQLite, is what a backup holds."""
    for run in (dev_run, prod_run, tenant_run):
        for vci in run.of_type(VCI):
            values = VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values"))
            assert "backingStore" not in (values.document.get("controlPlane") or {}), vci.name
    assert "the instances set no\n  `controlPlane.backingStore`" in section("Restore a team's cluster")


def test_the_runbook_says_what_backup_for_gke_allows_with_its_sources():
    """Each of Backup for GKE's restore constraints is a bullet that cites Google's page for it."""
    bullets = [" ".join(b.split()) for b in section("Restore a team's cluster").split("\n- ")[1:]]
    for promise, source in (
        ("between the backed-up cluster's version and three minor versions above it, inclusive", "how-to/restore-plan"),
        ("A restore plan restores into a zonal or regional cluster of its own region", "concepts/about-locations"),
        ("Restoring into another project takes a restore channel", "how-to/cross-project-restores"),
        ("`roles/gkebackup.restoreAdmin`", "how-to/restore"),
        ("a volume backup is crash-consistent", "how-to/protected-application"),
    ):
        [bullet] = [b for b in bullets if promise in b]
        assert f"(https://cloud.google.com/kubernetes-engine/docs/add-on/backup-for-gke/{source})" in bullet
