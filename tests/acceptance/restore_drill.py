"""The optional restore drill of `make acceptance RESTORE_DRILL=1` (docs/acceptance.md): back the
tenant up, delete its host namespace (its whole control plane and data volume), restore it with
the tenant's restore plan, and check that the tenant's API answers with the object written before
the backup. The same steps as the runbook in docs/reliability.md, with the run's names.

Backup for GKE through gcloud (`gcloud beta container backup-restore backups create … --backup-plan
--location --wait-for-completion`, `restores create … --restore-plan --backup`: the gcloud
reference, cloud.google.com/sdk/gcloud/reference/beta/container/backup-restore). The drill deletes
its backup and restore afterwards, so that `pulumi destroy` can delete the plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .kube import Finding, items

MARKER_NAMESPACE = "default"
DRILL_TIMEOUT = 1800  # a backup, a namespace deleted, a restore and the control plane back
BACKUP_TIMEOUT_SECONDS = 1200


def marker(run_id: str) -> dict[str, Any]:
    """The object the drill expects back: a ConfigMap inside the tenant, written before the backup."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"restore-drill-{run_id}", "namespace": MARKER_NAMESPACE, "labels": {"gpu-platform/acceptance-run": run_id}},
        "data": {"runId": run_id},
    }


def marker_found(config_maps: dict[str, Any], run_id: str) -> Finding:
    found = [c for c in items(config_maps) if c["metadata"]["name"] == f"restore-drill-{run_id}" and (c.get("data") or {}).get("runId") == run_id]
    if found:
        return Finding("", True, f"ConfigMap {MARKER_NAMESPACE}/restore-drill-{run_id} is back, as written before the backup")
    return Finding("", False, f"no ConfigMap {MARKER_NAMESPACE}/restore-drill-{run_id} in the restored tenant")


@dataclass(frozen=True)
class DrillNames:
    project: str  # the host cluster's project, where the plans are
    region: str
    backup_plan: str
    restore_plan: str
    run_id: str

    @property
    def backup(self) -> str:
        return f"drill-{self.run_id}"

    @property
    def backup_path(self) -> str:
        return f"projects/{self.project}/locations/{self.region}/backupPlans/{self.backup_plan}/backups/{self.backup}"

    def backup_create(self) -> list[str]:
        return ["beta", "container", "backup-restore", "backups", "create", self.backup, f"--backup-plan={self.backup_plan}",
                f"--location={self.region}", "--wait-for-completion"]

    def restore_create(self) -> list[str]:
        return ["beta", "container", "backup-restore", "restores", "create", self.backup, f"--restore-plan={self.restore_plan}",
                f"--location={self.region}", f"--backup={self.backup_path}", "--wait-for-completion"]

    def cleanup(self) -> list[list[str]]:
        """The drill's own restore and backup, so that destroying the plans finds them empty."""
        return [
            ["beta", "container", "backup-restore", "restores", "delete", self.backup, f"--restore-plan={self.restore_plan}", f"--location={self.region}"],
            ["beta", "container", "backup-restore", "backups", "delete", self.backup, f"--backup-plan={self.backup_plan}", f"--location={self.region}"],
        ]


def run_drill(live: Any, names: DrillNames, gcloud: Callable[..., Any], namespace: str, release: str) -> None:
    """`gcloud(*args)`: gcloud in the host's project. Every step is recorded in the report."""
    with live.tenant_access(live.host, namespace, release, live.workdir) as tenant:
        tenant.apply([marker(names.run_id)])
    live.report.add(Finding("restore drill: marker written in the tenant", True, f"ConfigMap {MARKER_NAMESPACE}/restore-drill-{names.run_id}"), live.say)
    try:
        gcloud(*names.backup_create())
        live.report.add(Finding("restore drill: backup taken", True, names.backup_path), live.say)
        live.host.text("delete", "namespace", namespace, "--wait=true", "--timeout=600s")
        live.report.add(Finding("restore drill: host namespace deleted", True, f"namespace {namespace} and its volume gone"), live.say)
        gcloud(*names.restore_create())
        live.report.add(Finding("restore drill: restore completed", True, f"restore {names.backup} of {names.restore_plan}"), live.say)
        with live.tenant_access(live.host, namespace, release, live.workdir) as tenant:
            live.settle(
                "restore drill: the tenant API answers with its objects",
                lambda: marker_found(tenant.json("get", "configmaps", "-n", MARKER_NAMESPACE), names.run_id),
                timeout=DRILL_TIMEOUT,
            )
    finally:
        for command in names.cleanup():
            try:
                gcloud(*command)
            except Exception as e:  # noqa: BLE001 - recorded; the plans' destroy then names what is left
                live.report.notes.append(f"restore drill: could not delete ({' '.join(command[3:6])}): {e}")
