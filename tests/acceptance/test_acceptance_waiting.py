"""Polling deadlines, the interrupt policy that keeps the cleanup going, and the Pulumi CLI wrapper
that passes a Ctrl-C on only when that policy says so (run against a stand-in `pulumi` script)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

from tests.acceptance.pulumi_stack import IsolatedPulumiCommand
from tests.acceptance.waiting import ABORT_CLEANUP_AFTER, CheckFailed, Clock, InterruptGuard, Interrupted, wait_for


class FakeClock(Clock):
    def __init__(self):
        self.t = 0.0
        super().__init__(monotonic=lambda: self.t, sleep=self.advance, now=lambda: datetime(2026, 11, 30, tzinfo=timezone.utc))

    def advance(self, seconds: float) -> None:
        self.t += seconds


def test_wait_for_returns_the_first_answer():
    answers = iter([None, None, "ready"])
    clock = FakeClock()
    assert wait_for("x", lambda: next(answers), timeout=60, interval=10, clock=clock) == "ready"
    assert clock.t == 20


def test_wait_for_gives_up_at_the_deadline_with_the_last_error():
    clock = FakeClock()

    def probe():
        raise RuntimeError("connection refused")

    with pytest.raises(CheckFailed, match=r"platform API: not within 30 s \(last error: RuntimeError: connection refused\)"):
        wait_for("platform API", probe, timeout=30, interval=10, clock=clock)
    assert clock.t == 30


def test_a_hopeless_state_stops_the_wait_at_once():
    clock = FakeClock()

    def probe():
        raise CheckFailed("phase Failed")

    with pytest.raises(CheckFailed, match="phase Failed"):
        wait_for("x", probe, timeout=600, interval=10, clock=clock)
    assert clock.t == 0


def test_the_first_interrupt_stops_the_checks():
    guard = InterruptGuard(say=lambda line: None)
    with pytest.raises(Interrupted, match="SIGINT"):
        guard.handle(signal.SIGINT)


def test_interrupts_during_the_cleanup_do_not_stop_it_until_the_third():
    said: list[str] = []
    guard = InterruptGuard(say=said.append)
    guard.cleaning = True
    for _ in range(ABORT_CLEANUP_AFTER - 1):
        guard.handle(signal.SIGTERM)
    assert len(said) == ABORT_CLEANUP_AFTER - 1 and "the cleanup continues" in said[0] and "2 more" in said[0]
    with pytest.raises(Interrupted, match="SIGTERM"):
        guard.handle(signal.SIGTERM)


# Stand-in for the Pulumi CLI: `version`, a command that fails, and a long one that cancels on SIGINT.
# In Python, not sh: the real CLI (Go) handles SIGINT even when started with it ignored, as a
# runner started in the background (no job control) passes it on (Go os/signal docs, "Notify": a
# signal ignored at start is handled again once notified), while a POSIX shell cannot trap a signal
# ignored on entry. `started` is printed once the handler is in place: the test's readiness signal.
FAKE_PULUMI = """#!{python}
import signal, sys, time

args = sys.argv[1:]
if "version" in args:
    print("v3.272.0"); sys.exit(0)
if "fail" in args:
    print("error: boom", file=sys.stderr); sys.exit(1)
if "up" in args:
    def cancel(signum, frame):
        print("cancelled by SIGINT", flush=True); sys.exit(255)
    signal.signal(signal.SIGINT, cancel)
    print("started", flush=True)
    time.sleep(10)
    print("finished", flush=True); sys.exit(0)
print("args: " + " ".join(args))
"""


@pytest.fixture
def fake_pulumi(tmp_path, monkeypatch):
    script = tmp_path / "pulumi"
    script.write_text(FAKE_PULUMI.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return IsolatedPulumiCommand()


def test_the_cli_runs_non_interactive_with_the_workspace_environment(fake_pulumi, tmp_path):
    lines: list[str] = []
    result = fake_pulumi.run(["stack", "ls"], str(tmp_path), {"PULUMI_BACKEND_URL": "file:///x"}, on_output=lines.append)
    assert result.code == 0 and lines == ["args: --non-interactive stack ls"]


def test_a_failing_cli_command_raises_the_sdks_error(fake_pulumi, tmp_path):
    from pulumi.automation import CommandError

    with pytest.raises(CommandError, match="boom"):
        fake_pulumi.run(["fail"], str(tmp_path), {})


def main_thread_waits_for(process_wait_deadline: float) -> bool:
    """True once the main thread is blocked in subprocess.Popen.wait (the wrapper waiting for the CLI)."""
    while time.monotonic() < process_wait_deadline:
        frame = sys._current_frames().get(threading.main_thread().ident)
        while frame is not None:
            if frame.f_code.co_filename == subprocess.__file__ and frame.f_code.co_name == "wait":
                return True
            frame = frame.f_back
        time.sleep(0.01)
    return False


def test_an_interrupt_is_passed_on_and_the_cli_finishes_cancelling_first(fake_pulumi, tmp_path):
    """The runner's signal handler raises Interrupted while the CLI runs; the wrapper sends the CLI
    one SIGINT (a graceful cancel), waits for it to exit, then lets Interrupted through.

    The "Ctrl-C" (SIGUSR1 here, with the runner's kind of handler) is sent when the CLI says it is
    ready to cancel (`started`, printed after its handler is installed) and the wrapper is waiting
    for it: no sleep, no timing assumption, whatever the machine's load."""
    lines: list[str] = []
    problems: list[str] = []

    def on_output(line: str) -> None:
        lines.append(line)
        if line == "started":
            if main_thread_waits_for(time.monotonic() + 60):
                os.kill(os.getpid(), signal.SIGUSR1)
            else:
                problems.append("the wrapper never waited for the CLI")

    previous = signal.signal(signal.SIGUSR1, lambda *_: (_ for _ in ()).throw(Interrupted("SIGINT")))
    try:
        with pytest.raises(Interrupted):
            fake_pulumi.run(["up"], str(tmp_path), {}, on_output=on_output)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert problems == []
    assert lines == ["started", "cancelled by SIGINT"]
