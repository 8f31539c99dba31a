"""The pack's backup guardrail (policy/guardrails/backups.py) on the plans the program registers,
and on plans broken the ways it must catch."""

from __future__ import annotations

import copy

import policies as P
import pytest

from policy_support import args_of, one, violations

PLAN = "tenant-research-backup-plan (backup plan 'prod-research')"


def test_every_shipped_plan_passes(runs):
    plans = [(run, reg) for run in runs.values() for reg in run.of_type(P.BACKUP_PLAN)]
    assert len(plans) == 4  # nlp, speech, vision, research
    for run, reg in plans:
        assert violations(P.backups_by_design, args_of(run, reg)) == [], reg.name


def _prod_plan(runs):
    run, reg = one(runs, "prod", P.BACKUP_PLAN, "research")
    return run, reg, copy.deepcopy(reg.plain_inputs)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda p: p["backupConfig"].update(allNamespaces=True), "backupConfig.allNamespaces: true is not allowed"),
        (lambda p: p["backupConfig"]["selectedNamespaces"].update(namespaces=["vcluster-platform"]), "backupConfig.selectedNamespaces.namespaces: ['vcluster-platform'] is not allowed"),
        (lambda p: p["backupConfig"]["selectedNamespaces"]["namespaces"].append("vcluster-other"), "backupConfig.selectedNamespaces.namespaces:"),
        (lambda p: p["backupConfig"].update(includeVolumeData=False), "backupConfig.includeVolumeData: false is not allowed"),
        (lambda p: p["backupConfig"].pop("includeSecrets"), "backupConfig.includeSecrets: not set"),
        (lambda p: p["retentionPolicy"].update(backupRetainDays=0), "retentionPolicy.backupRetainDays: 0 is not allowed; allowed: at least 1"),
        (lambda p: p["retentionPolicy"].update(backupDeleteLockDays=0), "retentionPolicy.backupDeleteLockDays: 0 is not allowed; allowed: at least 1 in prod"),
    ],
)
def test_a_plan_that_backs_up_too_much_or_keeps_too_little_is_rejected(runs, edit, message):
    run, reg, props = _prod_plan(runs)
    edit(props)
    [found] = violations(P.backups_by_design, args_of(run, reg, props=props))
    assert found.startswith(f"{PLAN}: {message}")


def test_a_prod_plan_must_be_protected_and_a_dev_plan_need_not_be(runs):
    run, reg, _ = _prod_plan(runs)
    [found] = violations(P.backups_by_design, args_of(run, reg, protect=False))
    assert found == f"{PLAN}: resource option protect: false is not allowed; allowed: true in prod (labels['gpu-platform-environment'] is 'prod')"
    dev_run, dev_plan = one(runs, "dev", P.BACKUP_PLAN, "nlp")
    assert not dev_plan.protect and violations(P.backups_by_design, args_of(dev_run, dev_plan)) == []
