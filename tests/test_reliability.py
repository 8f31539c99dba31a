"""Work that survives (config/reliability.py, components/vcluster_values.py): graceful shutdown on
every node sized to Compute Engine's notice, upgrades that never restart a GPU node under a job,
the embedded cloud controller manager off beside ours, kubeReserved apart from the eviction
threshold, and the bad inputs of those settings."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from components import watchdog_documents as watchdog
from components.vcluster_values import SKIP_AUTO_UPGRADE_LABEL, VClusterValues, kubelet_config
from config import node_properties as props
from config.catalog import EVICTION_HARD, EVICTION_THRESHOLD_MI, allocatable, reserve
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, problems, refused, run_shipped
from tenant_objects import named, tenant_objects

NS = "gpu-platform"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
DATA = Path(__file__).parent / "data"
VCLUSTER_SCHEMA = yaml.safe_load((DATA / "vcluster-0.36.1-values.schema.yaml").read_text())
KUBELET_SCHEMA = yaml.safe_load((DATA / "kubelet-config-v1beta1.schema.yaml").read_text())


def values_of(vci) -> VClusterValues:
    return VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values"))


# --- graceful shutdown ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "run_name, tenant, grace",
    [
        ("dev_run", "nlp", "110s"),  # on-demand only: the Standard VM's 120 s, 10 s left to the OS
        ("dev_run", "speech", "30s"),  # a Spot pool: the 30 s of a preemption
        ("tenant_run", "vision", "30s"),  # an on-demand and a Spot pool: the Spot bound for all
        ("prod_run", "research", "30s"),
    ],
)
def test_every_node_shuts_down_gracefully_within_compute_engines_notice(request, run_name, tenant, grace):
    values = values_of(request.getfixturevalue(run_name).one(VCI, tenant))
    kubelet = values.kubelet_config
    assert kubelet == {
        "shutdownGracePeriod": grace,
        "shutdownGracePeriodCriticalPods": "10s",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
    }
    # Checked with the kubelet's own field types (our record of KubeletConfiguration v1beta1) and
    # the chart's schema (privateNodes.kubelet.config).
    assert [e.message for e in jsonschema.Draft202012Validator(KUBELET_SCHEMA).iter_errors(kubelet)] == []
    assert [e.message for e in jsonschema.Draft202012Validator(VCLUSTER_SCHEMA).iter_errors(values.document)] == []
    # One setting for all the tenant's nodes: every GPU pool and the system pool get it.
    assert values.document["privateNodes"]["kubelet"] == {"config": kubelet}


def test_the_kubelet_record_rejects_what_the_kubelet_rejects():
    validator = jsonschema.Draft202012Validator(KUBELET_SCHEMA)
    for bad in ({"shutdownGracePeriod": 30}, {"shutdownGracePeriod": "30 seconds"}, {"evictionHard": {"memory.available": 100}}, {"shutdownGracePeriodSecs": "30s"}):
        assert list(validator.iter_errors(bad)), bad


def test_the_eviction_thresholds_are_every_one_of_the_kubelets_defaults():
    """An explicit evictionHard replaces the kubelet's defaults (mergeDefaultEvictionSettings is
    false by default), so ours must hold every default signal, each at its default: a signal left
    out would have no threshold at all. The recorded set is Kubernetes v1.36.0's on Linux."""
    defaults = KUBELET_SCHEMA["x-evictionHardDefault"]
    assert EVICTION_HARD == defaults
    assert "imagefs.inodesFree" in defaults and len(defaults) == 5
    assert "mergeDefaultEvictionSettings" not in kubelet_config("30s", "10s")
    assert [e.message for e in jsonschema.Draft202012Validator(KUBELET_SCHEMA).iter_errors({"evictionHard": EVICTION_HARD})] == []
    assert EVICTION_THRESHOLD_MI == 100 and EVICTION_HARD["memory.available"] == "100Mi"


@pytest.fixture(scope="module")
def variant(stack_values):
    """dev with nlp's shutdown and watchdog limit chosen, and speech's backups off (one run for the
    tests that need a changed stack; tests/test_backup.py uses it too)."""
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["nodeShutdown"] = {"gracePeriod": "2m", "criticalPodsGracePeriod": "20s"}
    values[f"{NS}:tenants"][0]["gpuPools"][0]["gpuTimeout"] = "15m"
    values[f"{NS}:tenants"][1]["backup"] = {"enabled": False}
    return run_shipped(values, stack="dev")


@pytest.fixture(scope="module")
def stack_values():
    from shipped_stacks import shipped_values

    return shipped_values


def test_a_chosen_grace_period_reaches_the_kubelet(variant):
    assert values_of(variant.one(VCI, "nlp")).kubelet_config["shutdownGracePeriod"] == "2m"
    assert values_of(variant.one(VCI, "nlp")).kubelet_config["shutdownGracePeriodCriticalPods"] == "20s"


# --- upgrades -------------------------------------------------------------------------------------


def test_gpu_nodes_are_never_upgraded_in_place_and_the_system_pool_is(dev_run, tenant_run):
    for vci in dev_run.of_type(VCI) + tenant_run.of_type(VCI):
        values = values_of(vci)
        assert values.auto_upgrade == {"enabled": True, "concurrency": 1}
        pools = {p.name: p for p in values.dynamic_pools()}
        for name, pool in pools.items():
            if pool.is_gpu:
                assert pool.node_labels[SKIP_AUTO_UPGRADE_LABEL] == "true", name
                # Nor disrupted to repack: a GPU node goes only when empty.
                assert pool.spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
            else:
                assert SKIP_AUTO_UPGRADE_LABEL not in pool.node_labels, name
        assert not pools["system"].is_gpu


# --- the embedded cloud controller manager --------------------------------------------------------


def test_the_embedded_ccm_is_off_where_ours_runs(dev_run, tenant_run, legacy_dev_run):
    for vci in dev_run.of_type(VCI) + tenant_run.of_type(VCI) + legacy_dev_run.of_type(VCI):
        values = values_of(vci)
        [entry] = values.auto_nodes
        assert entry["properties"][props.CCM_ENABLED] == "true"  # our GCP CCM (or the official template's) runs in every tenant
        assert values.embedded_ccm_enabled is False
    assert VClusterValues({}).embedded_ccm_enabled is True  # the chart's default, which the reader must not hide


# --- kubeReserved and the eviction threshold ------------------------------------------------------


def test_kube_reserved_holds_no_eviction_threshold(dev_run):
    node_types = dev_run.one("kubernetes:management.loft.sh/v1:NodeProvider").input("spec", "terraform", "nodeTypes")
    g2 = next(nt for nt in node_types if nt["properties"]["gpu-platform/instance-type"] == "g2-standard-8")
    assert g2["overhead"]["kubeReserved"]["memory"] == f"{reserve(8, 32)[1]}Mi" == "3646Mi"  # GKE's formula, nothing added
    # What pods get is what the kubelet computes: capacity − kubeReserved − the hard eviction threshold.
    assert allocatable(8, 32) == (8000 - 90, 32768 - 3646 - 100)


# --- bad input: a clear error naming the key, nothing registered ----------------------------------


def test_a_grace_period_longer_than_spots_notice_on_a_spot_pool(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][1]["nodeShutdown"] = {"gracePeriod": "45s"}
    assert problems(values) == [
        "tenants[1].nodeShutdown.gracePeriod: 45s is longer than the 30 s Compute Engine gives a preempted Spot VM before it "
        "powers off, and tenants[1].gpuPools[0] is Spot (the setting applies to every node of the tenant); at most 30s"
    ]


def test_a_grace_period_longer_than_a_standard_vms_soft_off(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["nodeShutdown"] = {"gracePeriod": "3m", "criticalPodsGracePeriod": "soon"}
    assert problems(values) == [
        "tenants[0].nodeShutdown.criticalPodsGracePeriod: 'soon' is not a duration like 30s or 1m50s",
        "tenants[0].nodeShutdown.gracePeriod: 3m is longer than the 120 s Compute Engine waits between a VM's soft-off signal "
        "and its power-off; at most 120s",
    ]


def test_critical_pods_cannot_take_the_whole_grace_period(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][1]["nodeShutdown"] = {"criticalPodsGracePeriod": "30s"}
    assert problems(values) == [
        "tenants[1].nodeShutdown.criticalPodsGracePeriod: 30s leaves nothing of the grace period (30s) to the other pods; it must be shorter"
    ]


def test_a_watchdog_timeout_under_two_minutes(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0]["gpuTimeout"] = "90s"
    values[f"{NS}:tenants"][1]["gpuPools"][0]["gpuTimeout"] = "ten minutes"
    assert problems(values) == [
        "tenants[0].gpuPools[0].gpuTimeout: 90s is under 2m: a healthy GPU node needs minutes for the driver, the container "
        "toolkit and the device plugin before it offers nvidia.com/gpu, and would be removed first",
        "tenants[1].gpuPools[0].gpuTimeout: 'ten minutes' is not a duration like 10m or 15m",
    ]


def test_a_watchdog_timeout_reaches_the_watchdog(variant):
    config_map = named(tenant_objects(variant, "nlp"), "ConfigMap", watchdog.NAME, watchdog.NAMESPACE)
    assert '"poolLimitSeconds": {"l4-1x": 900}' in config_map["data"]["config.json"]


def test_a_retention_of_zero_days_and_a_lock_past_it(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["backup"] = {"retainDays": 0}
    values[f"{NS}:tenants"][1]["backup"] = {"retainDays": 7, "deleteLockDays": 10, "schedule": "daily"}
    assert problems(values) == [
        "tenants[0].backup.retainDays: 0 is out of range; must be at least 1",
        "tenants[1].backup.schedule: 'daily' is not a five-field cron line like \"0 3 * * *\" (UTC): it has 1 fields, not 5",
        "tenants[1].backup.deleteLockDays: 10 is longer than retainDays 7: a backup cannot be locked past its deletion",
    ]


def test_a_retention_longer_than_backup_for_gke_keeps_for_the_schedule(stack_values):
    """Backup for GKE keeps a plan's backups at most 360 times the interval between two of them,
    and takes them at least 10 minutes apart: every tenant's problem at once, naming the key."""
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["backup"] = {"schedule": "0 * * * *", "retainDays": 16}
    values[f"{NS}:tenants"][1]["backup"] = {"schedule": "*/5 * * * *", "retainDays": 1}
    assert problems(values) == [
        "tenants[0].backup.retainDays: 16 days is longer than Backup for GKE keeps backups taken every hour (schedule '0 * * * *', its "
        "shortest gap): at most 360 times the days between two backups, so 1 to 15; keep fewer days or back up less often",
        "tenants[1].backup.schedule: '*/5 * * * *' takes backups 5 minutes apart; Backup for GKE takes them at least 10 minutes apart",
    ]
    values[f"{NS}:tenants"][0]["backup"] = {"schedule": "0 3 * * 1-5", "retainDays": 361}  # held to a weekday's one day
    values[f"{NS}:tenants"][1]["backup"] = {"schedule": "0 3 31 2 *", "retainDays": 14}
    assert problems(values) == [
        "tenants[0].backup.retainDays: 361 days is longer than Backup for GKE keeps backups taken every day (schedule '0 3 * * 1-5', its "
        "shortest gap): at most 360 times the days between two backups, so 1 to 360; keep fewer days or back up less often",
        "tenants[1].backup.schedule: '0 3 31 2 *' never fires: no date has that day in those months",
    ]


@pytest.mark.parametrize("schedule, most", [("0 * * * *", 15), ("30 */6 * * *", 90), ("0 3 * * *", 360), ("0 3 * * sun", 365)])
def test_the_longest_retention_each_schedule_allows_is_accepted(stack_values, schedule, most):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["backup"] = {"schedule": schedule, "retainDays": most}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    values[f"{NS}:tenants"][0]["backup"]["retainDays"] = most + 1
    assert len(problems(values)) == 1


def test_backups_off_in_prod_need_an_explicit_override(stack_values):
    values = stack_values("prod")
    values[f"{NS}:tenants"][0]["backup"] = {"enabled": False}
    message = refused(values, stack="prod")
    assert (
        "tenants[0].backup.enabled: backups are off, which environment prod does not allow: a deleted namespace or a lost disk "
        "would lose the team's whole cluster; set platform.allowTenantsWithoutBackup: true in the environment stack to allow it"
    ) in message
    values[f"{NS}:platform"]["allowTenantsWithoutBackup"] = True
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)  # the override, on purpose


def test_backups_off_are_allowed_in_dev_and_leave_no_plans(variant):
    assert sorted(r.name for r in variant.of_type("gcp:gkebackup/backupPlan:BackupPlan")) == ["tenant-nlp-backup-plan"]
    assert variant.outputs["tenants"]["speech"]["backupPlan"] is None


def test_a_tenant_named_platform_would_share_the_platforms_namespace(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["name"] = "platform"
    assert problems(values) == [
        "tenants[0].name: 'platform' would put the team's control plane into the platform's namespace vcluster-platform"
    ]
