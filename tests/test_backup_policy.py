"""The pack's backup guardrail (policy/guardrails/backups.py) on the plans the program registers,
and on plans broken the ways it must catch."""

from __future__ import annotations

import copy

import policies as P
import pytest

from policy_support import args_of, one, urn_of, violations

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
    assert found == f"{PLAN}: resource option protect: false is not allowed; allowed: true in prod (stack prod is environment 'prod')"
    dev_run, dev_plan = one(runs, "dev", P.BACKUP_PLAN, "nlp")
    assert not dev_plan.protect and violations(P.backups_by_design, args_of(dev_run, dev_plan)) == []


def test_a_prod_plan_is_prod_by_its_stack_whatever_its_label_says(runs):
    """Without its label, or labelled dev, a plan of stack prod is still judged as prod; and the
    label that disagrees with the stack is rejected itself."""
    run, reg, props = _prod_plan(runs)
    del props["labels"]["gpu-platform-environment"]
    del props["retentionPolicy"]["backupDeleteLockDays"]
    assert violations(P.backups_by_design, args_of(run, reg, props=props, protect=False)) == [
        f"{PLAN}: retentionPolicy.backupDeleteLockDays: not set; allowed: at least 1 in prod (stack prod is environment 'prod'; a stolen "
        "deployer credential cannot delete the backups)",
        f"{PLAN}: resource option protect: false is not allowed; allowed: true in prod (stack prod is environment 'prod')",
    ]
    props["labels"]["gpu-platform-environment"] = "dev"
    assert violations(P.backups_by_design, args_of(run, reg, props=props))[0] == (
        f"{PLAN}: labels['gpu-platform-environment']: 'dev' is not allowed; allowed: 'prod', the environment of stack prod (or unset)"
    )


def test_a_plan_of_a_stack_the_data_does_not_know_is_prod_unless_labelled_otherwise(runs):
    run, reg = one(runs, "dev", P.BACKUP_PLAN, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    unknown = urn_of(reg.type, reg.name, stack="mallory")
    assert violations(P.backups_by_design, args_of(run, reg, props=props, urn=unknown)) == []  # labelled dev
    del props["labels"]["gpu-platform-environment"]
    why = "stack 'mallory' is not in the pack's data and labels['gpu-platform-environment'] is not set"
    assert violations(P.backups_by_design, args_of(run, reg, props=props, urn=unknown)) == [
        f"tenant-nlp-backup-plan (backup plan 'dev-nlp'): retentionPolicy.backupDeleteLockDays: 0.0 is not allowed; allowed: at least 1 in prod ({why}; "
        "a stolen deployer credential cannot delete the backups)",
        f"tenant-nlp-backup-plan (backup plan 'dev-nlp'): resource option protect: false is not allowed; allowed: true in prod ({why})",
    ]
