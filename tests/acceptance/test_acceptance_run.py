"""The run's promise: whatever happens between `pulumi up` and the end of the checks (a failed up, a
failed check, a crash, Ctrl-C), the stack is destroyed, the project scanned, and the exit status and
report say what is left. Driven with a stand-in stack; the real Pulumi CLI is not needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pulumi import automation as auto
from pulumi.automation import CommandResult

from tests.acceptance import run as runner
from tests.acceptance.kube import Finding
from tests.acceptance.leftovers import Leftover
from tests.acceptance.settings import Settings, load_run_stack
from tests.acceptance.waiting import CheckFailed, Interrupted


class FakeWorkspace:
    def __init__(self, stack: "FakeStack"):
        self.stack = stack

    def remove_stack(self, name: str) -> None:
        self.stack.calls.append(f"stack rm {name}")


class FakeStack:
    def __init__(self, *, up_fails: bool = False, destroy_failures: int = 0):
        self.name = "acceptance-k3x9q2"
        self.calls: list[str] = []
        self.up_fails = up_fails
        self.destroy_failures = destroy_failures
        self.resources = 0
        self.workspace = FakeWorkspace(self)

    def up(self, **_):
        self.calls.append("up")
        self.resources = 40
        if self.up_fails:
            raise auto.CommandError(CommandResult(stdout="", stderr="error: googleapi: Error 403: quota exceeded", code=255))

    def refresh(self, **kwargs):
        self.calls.append(f"refresh clear_pending_creates={kwargs.get('clear_pending_creates')}")

    def destroy(self, **_):
        self.calls.append("destroy")
        if self.destroy_failures:
            self.destroy_failures -= 1
            raise auto.CommandError(CommandResult(stdout="", stderr="error: resource still in use", code=255))
        self.resources = 0

    def export_stack(self):
        return auto.Deployment(version=3, deployment={"resources": [{}] * self.resources})

    def outputs(self):
        return {"kubeconfig": auto.OutputValue("apiVersion: v1", True), "tenants": auto.OutputValue({"acc-k3x9q2": {}}, False)}


@pytest.fixture
def acceptance(tmp_path, monkeypatch):
    """An AcceptanceRun whose stack, checks and scan are stand-ins; returns (run, stack)."""

    def make(stack: FakeStack, check=None, leftovers=()):
        monkeypatch.setattr(runner.InterruptGuard, "install", lambda self: None)  # keep pytest's handlers
        monkeypatch.setattr(runner, "prepare_program", lambda run_dir: None)
        monkeypatch.setattr(runner, "create", lambda *args: stack)
        monkeypatch.setattr(runner, "scan_project", lambda names: list(leftovers))
        monkeypatch.setattr(runner.AcceptanceRun, "check", check or (lambda self, outputs: self.report.add(Finding("all good", True, ""))))
        env = load_run_stack(Settings(project="acme-acceptance"), "k3x9q2")
        return runner.AcceptanceRun(Settings(project="acme-acceptance"), env, "k3x9q2", tmp_path / "out", temp_root=tmp_path)

    return make


def record(run) -> dict:
    return json.loads((run.out_dir / "run.json").read_text())


def test_a_passing_run_destroys_removes_the_stack_and_its_directory(acceptance):
    stack = FakeStack()
    run = acceptance(stack)
    assert run.execute() == runner.PASSED
    assert stack.calls == ["up", "destroy", "stack rm acceptance-k3x9q2"]
    assert record(run)["cleaned"] is True and not run.run_dir.root.exists()
    report = json.loads((run.out_dir / "report.json").read_text())
    assert report["verdict"] == "PASSED" and report["cleanup"] == {"result": "destroyed, stack removed", "complete": True, "leftovers": []}
    assert (run.out_dir / "report.md").read_text().startswith("## Acceptance run k3x9q2: PASSED")


def test_a_failed_up_is_still_destroyed(acceptance):
    stack = FakeStack(up_fails=True)
    run = acceptance(stack)
    assert run.execute() == runner.CHECK_FAILED
    assert stack.calls == ["up", "destroy", "stack rm acceptance-k3x9q2"]
    (finding,) = run.report.findings
    assert finding.check == "pulumi up" and not finding.ok and "quota exceeded" in finding.detail


@pytest.mark.parametrize(
    "failure, status",
    [(CheckFailed("GPU node Ready: not within 600 s"), runner.CHECK_FAILED), (RuntimeError("kubectl vanished"), runner.CHECK_FAILED), (Interrupted("SIGINT"), runner.INTERRUPTED)],
)
def test_whatever_stops_the_checks_the_stack_is_destroyed(acceptance, failure, status):
    stack = FakeStack()

    def check(self, outputs):
        self.report.add(Finding("platform API Available", True, ""))
        raise failure

    run = acceptance(stack, check=check)
    assert run.execute() == status
    assert stack.calls == ["up", "destroy", "stack rm acceptance-k3x9q2"]
    assert record(run)["cleaned"] is True


def test_a_destroy_that_fails_is_retried_after_a_refresh(acceptance):
    stack = FakeStack(destroy_failures=1)
    run = acceptance(stack)
    assert run.execute() == runner.PASSED
    assert stack.calls == ["up", "destroy", "refresh clear_pending_creates=True", "destroy", "stack rm acceptance-k3x9q2"]


def test_a_destroy_that_keeps_failing_leaves_the_state_and_says_what_to_delete(acceptance):
    stack = FakeStack(destroy_failures=runner.DESTROY_ATTEMPTS)
    vm = Leftover("instance", "acc-k3x9q2-gpu-8w2mf-3f9a1c", "us-central1-b", "gcloud compute instances delete acc-k3x9q2-gpu-8w2mf-3f9a1c --zone us-central1-b --project acme-acceptance --quiet")
    run = acceptance(stack, leftovers=[vm])
    assert run.execute() == runner.NOT_CLEANED
    assert stack.calls.count("destroy") == runner.DESTROY_ATTEMPTS and "stack rm acceptance-k3x9q2" not in stack.calls
    assert record(run)["cleaned"] is False and run.run_dir.root.exists()  # the state, for make acceptance-cleanup
    notes = "\n".join(run.report.notes)
    assert "make acceptance-cleanup" in notes and "PULUMI_CONFIG_PASSPHRASE_FILE=" in notes and f"--cwd {run.run_dir.program}" in notes
    assert f"`{vm.command}`" in notes
    assert run.report.cleanup.startswith("DESTROY INCOMPLETE")


def test_leftovers_after_a_successful_destroy_fail_the_cleanup(acceptance):
    disk = Leftover("disk", "pvc-5b0c7d0e", "us-central1-a", "gcloud compute disks delete pvc-5b0c7d0e --zone us-central1-a --project acme-acceptance --quiet")
    run = acceptance(FakeStack(), leftovers=[disk])
    assert run.execute() == runner.NOT_CLEANED
    assert "Left in the project (delete in this order):" in (run.out_dir / "report.md").read_text()


def test_a_scan_that_cannot_run_is_not_a_clean_project(acceptance, monkeypatch):
    run = acceptance(FakeStack())
    monkeypatch.setattr(runner, "scan_project", lambda names: None)
    assert run.execute() == runner.NOT_CLEANED
    assert "the leftover scan could not run" in run.report.cleanup
    assert any("gcloud compute instances list" in note for note in run.report.notes)


def test_cleanup_mode_destroys_recorded_runs_that_did_not_clean_up(acceptance, monkeypatch, tmp_path):
    run = acceptance(FakeStack(destroy_failures=runner.DESTROY_ATTEMPTS))
    assert run.execute() == runner.NOT_CLEANED
    Path(run.run_dir.program).mkdir(parents=True)
    later = FakeStack()
    monkeypatch.setattr(runner, "select", lambda run_dir, backend, name: later)
    assert runner.cleanup_recorded_runs(tmp_path / "out") == runner.PASSED
    assert later.calls == ["destroy", "stack rm acceptance-k3x9q2"]
    assert record(run)["cleaned"] is True and not run.run_dir.root.exists()
    assert runner.cleanup_recorded_runs(tmp_path / "out") == runner.PASSED  # nothing left to do
