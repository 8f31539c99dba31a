"""Polling with deadlines, and the interrupt policy that keeps `destroy` running.

Both take their clock and output as arguments, so the unit tests run them instantly.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, TypeVar

T = TypeVar("T")


class CheckFailed(Exception):
    """A live check failed in a way that stops the checks depending on it."""


class Interrupted(BaseException):
    """Ctrl-C, SIGTERM or SIGHUP. A BaseException, like KeyboardInterrupt, so that no `except
    Exception` in between swallows it."""


@dataclass
class Clock:
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float, interval: float, clock: Clock | None = None) -> T:
    """Call `probe` every `interval` seconds until it returns something other than None. Raises
    CheckFailed naming `what` and the last probe error when `timeout` passes first. A probe raises
    CheckFailed itself for a state that will not get better (e.g. phase Failed)."""
    clock = clock or Clock()
    deadline = clock.monotonic() + timeout
    last_error = ""
    while True:
        try:
            result = probe()
        except CheckFailed:
            raise
        except Exception as e:  # noqa: BLE001 - a failed kubectl/gcloud call is retried until the deadline
            result, last_error = None, f"{type(e).__name__}: {e}"
        if result is not None:
            return result
        if clock.monotonic() >= deadline:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s" + (f" (last error: {last_error})" if last_error else ""))
        clock.sleep(interval)


ABORT_CLEANUP_AFTER = 3  # interrupts during the cleanup before it gives up


class InterruptGuard:
    """The first Ctrl-C (or SIGTERM, SIGHUP) stops the checks and starts the cleanup. During the
    cleanup an interrupt only says that the cleanup goes on: stopping it would leave a GKE cluster
    and VMs billing. Only the third one during the cleanup aborts it, and the run then prints what
    to delete by hand."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, say: Callable[[str], None] = print):
        self.say = say
        self.cleaning = False
        self.during_cleanup = 0
        self.received: str | None = None

    def install(self) -> None:
        for sig in self.SIGNALS:
            signal.signal(sig, self.handle)

    def handle(self, signum: int, _frame=None) -> None:
        name = signal.Signals(signum).name
        self.received = self.received or name
        if not self.cleaning:
            raise Interrupted(name)
        self.during_cleanup += 1
        left = ABORT_CLEANUP_AFTER - self.during_cleanup
        if left <= 0:
            raise Interrupted(name)
        self.say(
            f"{name}: the cleanup continues (it stops the run's resources from billing); "
            f"{left} more to abort it and delete them by hand"
        )
