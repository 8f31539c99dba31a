"""The optional restore drill (tests/acceptance/restore_drill.py) against a stand-in world: the
order of its steps, what it asks gcloud and kubectl, that it checks the tenant's own object came
back, that it cleans up its backup and restore whatever happens, and what it adds to the cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance import restore_drill
from tests.acceptance.report import Report
from tests.acceptance.scenario import Live, check_restore
from tests.acceptance.settings import ENVIRONMENT_HOURS, RESTORE_DRILL_HOURS, Settings, cost_estimate, cost_total, load_run_stack, run_names
from tests.acceptance.waiting import CheckFailed, Clock

RUN_ID = "k3x9q2"


class World:
    """The host cluster, the tenant and Backup for GKE: what each command does to them."""

    def __init__(self, restores: bool = True):
        self.restores = restores
        self.steps: list[str] = []
        self.tenant_objects: list[dict] = []
        self.backed_up: list[dict] | None = None
        self.t = 0.0

    # gcloud in the host's project
    def gcloud(self, *args: str):
        self.steps.append("gcloud " + " ".join(args[3:6]))
        if args[3:5] == ("backups", "create"):
            self.backed_up = list(self.tenant_objects)
        elif args[3:5] == ("restores", "create") and self.restores:
            self.tenant_objects = list(self.backed_up or [])
        return {}

    # kubectl on the host
    def text(self, *args: str) -> str:
        self.steps.append("host " + " ".join(args[:3]))
        if args[:2] == ("delete", "namespace"):
            self.tenant_objects = []  # the control plane, its volume and so every object inside
        return ""

    def access(self, host, namespace, release, workdir):
        world = self

        class Tenant:
            def __enter__(self):
                world.steps.append(f"tenant {namespace}/{release}")
                return self

            def __exit__(self, *_):
                pass

            def apply(self, documents):
                world.tenant_objects += documents

            def json(self, *args):
                assert args == ("get", "configmaps", "-n", "default")
                return {"kind": "List", "items": [o for o in world.tenant_objects if o["kind"] == "ConfigMap"]}

        return Tenant()


def live(world: World, tmp_path: Path) -> Live:
    names = run_names(load_run_stack(Settings(project="acme-acceptance"), RUN_ID), RUN_ID)

    def sleep(seconds: float) -> None:
        world.t += seconds

    return Live(
        names=names,
        settings=Settings(project="acme-acceptance", restore_drill=True),
        host=world,  # type: ignore[arg-type]
        gcloud=None,  # type: ignore[arg-type]
        report=Report(RUN_ID, 10),
        workdir=tmp_path,
        gpu_machines={},
        say=lambda _: None,
        clock=Clock(monotonic=lambda: world.t, sleep=sleep),
        tenant_access=world.access,
        host_gcloud=world.gcloud,
    )


OUTPUTS = {"backupPlan": "dev-acc-k3x9q2", "restorePlan": "dev-acc-k3x9q2-restore"}


def test_the_drill_backs_up_deletes_restores_and_finds_the_tenants_object(tmp_path):
    world = World()
    run = live(world, tmp_path)
    check_restore(run, OUTPUTS, "vcluster-acc-k3x9q2", "acc-k3x9q2")
    assert world.steps == [
        "tenant vcluster-acc-k3x9q2/acc-k3x9q2",  # the marker written
        "gcloud backups create drill-k3x9q2",
        "host delete namespace vcluster-acc-k3x9q2",
        "gcloud restores create drill-k3x9q2",
        "tenant vcluster-acc-k3x9q2/acc-k3x9q2",  # reconnected to the restored control plane
        "gcloud restores delete drill-k3x9q2",
        "gcloud backups delete drill-k3x9q2",
    ]
    assert [(f.check, f.ok) for f in run.report.findings] == [
        ("restore drill: marker written in the tenant", True),
        ("restore drill: backup taken", True),
        ("restore drill: host namespace deleted", True),
        ("restore drill: restore completed", True),
        ("restore drill: the tenant API answers with its objects", True),
    ]


def test_a_restore_that_loses_the_tenants_objects_fails_and_still_cleans_up(tmp_path):
    world = World(restores=False)
    run = live(world, tmp_path)
    with pytest.raises(CheckFailed, match="no ConfigMap default/restore-drill-k3x9q2 in the restored tenant"):
        check_restore(run, OUTPUTS, "vcluster-acc-k3x9q2", "acc-k3x9q2")
    assert world.steps[-2:] == ["gcloud restores delete drill-k3x9q2", "gcloud backups delete drill-k3x9q2"]
    assert run.report.findings[-1].ok is False


def test_the_commands_name_the_tenants_plans():
    names = restore_drill.DrillNames("acme-acceptance", "us-central1", "dev-acc-k3x9q2", "dev-acc-k3x9q2-restore", RUN_ID)
    assert names.backup_create() == [
        "beta", "container", "backup-restore", "backups", "create", "drill-k3x9q2",
        "--backup-plan=dev-acc-k3x9q2", "--location=us-central1", "--wait-for-completion",
    ]
    assert names.restore_create() == [
        "beta", "container", "backup-restore", "restores", "create", "drill-k3x9q2", "--restore-plan=dev-acc-k3x9q2-restore",
        "--location=us-central1", "--backup=projects/acme-acceptance/locations/us-central1/backupPlans/dev-acc-k3x9q2/backups/drill-k3x9q2",
        "--wait-for-completion",
    ]


def test_the_drill_is_off_by_default_and_costed_when_on():
    env = load_run_stack(Settings(project="acme-acceptance"), RUN_ID)
    assert Settings(project="acme-acceptance").restore_drill is False
    plain, drill = cost_estimate(env), cost_estimate(env, restore_drill=True)
    [extra] = [item for item in drill if item not in plain]
    always_on = sum(i.usd for i in plain if "GPU VM" not in i.what) / ENVIRONMENT_HOURS  # USD per hour
    assert extra.what.startswith(f"restore drill: the environment {RESTORE_DRILL_HOURS:g} h longer")
    assert cost_total(drill) - cost_total(plain) == pytest.approx(always_on * RESTORE_DRILL_HOURS)


def test_the_docs_quote_the_drills_extra_cost():
    from docs_support import page

    env = load_run_stack(Settings(project="acme-acceptance"), RUN_ID)
    extra = cost_total(cost_estimate(env, restore_drill=True)) - cost_total(cost_estimate(env))
    assert f"for {RESTORE_DRILL_HOURS:g} h more (≈ {extra:.2f} at these prices" in page("docs/acceptance.md")
