"""The run's Pulumi stack through the Automation API (`pulumi.automation`, part of the pinned SDK):
a copy of the program with its own stack file, its own state (a local file backend unless the user
gives one) and a passphrase made for the run.

The program is copied so that the run's `Pulumi.acceptance-<id>.yaml` never lands next to the
committed stack files, where `make test` and `make plan-all` would pick it up.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pulumi import automation as auto
from pulumi.automation.errors import create_command_error

from config.stack_files import PROJECT_DIR

from .shell import write_private
from .waiting import Interrupted

# Not part of the program: development files, other stacks, local state of tools.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "tests", "bench", "plan-out", "acceptance-out", "Pulumi.*.yaml", "__pycache__", ".pytest_cache", ".hypothesis"
)


@dataclass(frozen=True)
class RunDir:
    """Where one run keeps its program copy, its state and its secrets (never in the repo)."""

    root: Path

    @property
    def program(self) -> Path:
        return self.root / "program"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def passphrase(self) -> Path:
        return self.root / "passphrase"

    @property
    def host_kubeconfig(self) -> Path:
        return self.root / "host.kubeconfig"


@dataclass(frozen=True)
class Backend:
    url: str
    secrets_provider: str | None  # None: the backend's own (Pulumi Cloud)

    @classmethod
    def choose(cls, given: str, run_dir: RunDir) -> Backend:
        if not given:
            return cls(f"file://{run_dir.state}", "passphrase")
        # Pulumi Cloud encrypts secrets itself; every other backend gets the run's passphrase.
        cloud = given.startswith("https://")
        return cls(given, None if cloud else "passphrase")

    def env(self, run_dir: RunDir) -> dict[str, str]:
        env = {"PULUMI_BACKEND_URL": self.url, "PULUMI_SKIP_UPDATE_CHECK": "true"}
        if self.secrets_provider == "passphrase":
            env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(run_dir.passphrase)
        return env

    def by_hand(self, run_dir: RunDir, stack: str) -> str:
        """The command that destroys the stack without this runner."""
        env = " ".join(f"{k}={v}" for k, v in self.env(run_dir).items() if k != "PULUMI_SKIP_UPDATE_CHECK")
        return f"{env} pulumi destroy --yes --stack {stack} --cwd {run_dir.program} && {env} pulumi stack rm --yes --stack {stack} --cwd {run_dir.program}"


class IsolatedPulumiCommand(auto.PulumiCommand):
    """The Pulumi CLI in its own session: a Ctrl-C in the terminal reaches only the runner, which
    passes it on (the CLI then cancels gracefully: operations under way finish and are saved in the
    state) only when its interrupt policy (waiting.InterruptGuard) lets it through."""

    def run(self, args, cwd, additional_env, on_output=None, on_error=None) -> auto.CommandResult:
        if "--non-interactive" not in args:
            args = ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        process = subprocess.Popen(
            [self.command, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        stdout: list[str] = []
        stderr: list[str] = []
        pumps = [
            threading.Thread(target=_pump, args=(process.stdout, on_output, stdout), daemon=True),
            threading.Thread(target=_pump, args=(process.stderr, on_error, stderr), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        interrupted: Interrupted | None = None
        while True:
            try:
                code = process.wait()
                break
            except Interrupted as e:
                # Once: the CLI cancels and saves its state. Twice: it stops at once.
                interrupted = interrupted or e
                process.send_signal(signal.SIGINT)
        for pump in pumps:
            pump.join()
        if interrupted is not None:
            raise interrupted
        result = auto.CommandResult(stdout="\n".join(stdout), stderr="\n".join(stderr), code=code)
        if code != 0:
            raise create_command_error(result)
        return result


def _pump(stream, callback: Callable[[str], Any] | None, lines: list[str]) -> None:
    for line in iter(stream.readline, ""):
        line = line.rstrip()
        if callback:
            callback(line)
        lines.append(line)
    stream.close()


def prepare_program(run_dir: RunDir) -> None:
    shutil.copytree(PROJECT_DIR, run_dir.program, ignore=NOT_COPIED)
    # The program's runtime (Pulumi.yaml: virtualenv .venv) is the repo's pinned venv.
    (run_dir.program / ".venv").symlink_to(PROJECT_DIR / ".venv", target_is_directory=True)
    run_dir.state.mkdir(parents=True, exist_ok=True)
    if not run_dir.passphrase.exists():
        write_private(run_dir.passphrase, secrets.token_urlsafe(32))


def workspace_options(run_dir: RunDir, backend: Backend) -> auto.LocalWorkspaceOptions:
    return auto.LocalWorkspaceOptions(
        work_dir=str(run_dir.program),
        env_vars=backend.env(run_dir),
        secrets_provider=backend.secrets_provider,
        pulumi_command=IsolatedPulumiCommand(),
    )


def create(run_dir: RunDir, backend: Backend, stack: str, values: dict[str, Any]) -> auto.Stack:
    """Create the stack and write its configuration into its stack file, structured as in a
    committed stack file (object values stay objects)."""
    created = auto.create_stack(stack, work_dir=str(run_dir.program), opts=workspace_options(run_dir, backend))
    settings = created.workspace.stack_settings(stack)  # keeps the passphrase's encryption salt
    settings.config = values
    created.workspace.save_stack_settings(stack, settings)
    return created


def select(run_dir: RunDir, backend: Backend, stack: str) -> auto.Stack:
    return auto.select_stack(stack, work_dir=str(run_dir.program), opts=workspace_options(run_dir, backend))


def outputs(stack: auto.Stack) -> dict[str, Any]:
    return {key: output.value for key, output in stack.outputs().items()}


def resource_count(stack: auto.Stack) -> int:
    """Resources left in the stack's state (the stack itself counts as one)."""
    deployment = stack.export_stack().deployment or {}
    return len(deployment.get("resources") or [])


def record(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
