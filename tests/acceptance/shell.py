"""The run's only contact with kubectl, gcloud and Google's APIs: commands in their own session (so a
Ctrl-C in the terminal reaches the runner, which decides what stops), JSON in, errors with the
command's stderr; and Cloud Monitoring's query API over HTTPS with gcloud's credentials."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from .kube import VCLUSTER_SERVICE_PORT, kubeconfig_secret_name, tenant_kubeconfig


class CommandError(RuntimeError):
    pass


def run(args: list[str], *, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 180) -> str:
    """stdout of the command; CommandError with its stderr when it fails."""
    result = subprocess.run(
        args,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    if result.returncode != 0:
        raise CommandError(f"{' '.join(args[:4])} …: exit {result.returncode}: {result.stderr.strip()[-600:]}")
    return result.stdout


def succeeds(args: list[str], timeout: float = 60) -> bool:
    try:
        run(args, timeout=timeout)
        return True
    except (CommandError, OSError, subprocess.TimeoutExpired):
        return False


class Gcloud:
    def __init__(self, project: str):
        self.project = project

    def json(self, *args: str, timeout: float = 180) -> Any:
        return json.loads(run(["gcloud", *args, f"--project={self.project}", "--format=json", "--quiet"], timeout=timeout) or "null")


def gcloud_access_token() -> str:
    """An OAuth access token of gcloud's account (the one the prerequisites check), kept in memory:
    nothing of it is written anywhere."""
    return run(["gcloud", "auth", "print-access-token", "--quiet"], timeout=60).strip()


class GoogleApi:
    """GET on a Google API as gcloud's account, a fresh token each call (a run outlives one).
    Returns the HTTP status and the JSON body, errors included: their bodies say why."""

    def __init__(self, token: Callable[[], str] = gcloud_access_token, timeout: float = 60):
        self.token, self.timeout = token, timeout

    def get(self, url: str) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token()}", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - an https URL of ours
                return response.status, _json_body(response.read())
        except urllib.error.HTTPError as e:
            return e.code, _json_body(e.read())


def _json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {"error": raw.decode(errors="replace")[:600]}
    return body if isinstance(body, dict) else {"error": str(body)[:600]}


class Kubectl:
    def __init__(self, kubeconfig: Path):
        self.kubeconfig = kubeconfig

    def command(self, *args: str) -> list[str]:
        return ["kubectl", f"--kubeconfig={self.kubeconfig}", "--request-timeout=30s", *args]

    def json(self, *args: str) -> dict[str, Any]:
        return json.loads(run(self.command(*args, "-o", "json")))

    def text(self, *args: str) -> str:
        return run(self.command(*args))

    def apply(self, documents: list[dict[str, Any]]) -> None:
        run(self.command("apply", "-f", "-"), stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))


def write_private(path: Path, text: str) -> Path:
    """A file only this user can read (kubeconfigs, the passphrase)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class TenantAccess:
    """kubectl for the tenant's virtual cluster: its admin kubeconfig (a host Secret) through a
    `kubectl port-forward` to its Service, restarted whenever it has died."""

    def __init__(self, host: Kubectl, namespace: str, release: str, workdir: Path):
        self.host, self.namespace, self.release, self.workdir = host, namespace, release, workdir
        self.process: subprocess.Popen | None = None
        self.kubectl: Kubectl | None = None

    def __enter__(self) -> TenantAccess:
        self.ensure()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def ensure(self) -> Kubectl:
        if self.process is not None and self.process.poll() is None and self.kubectl is not None:
            return self.kubectl
        self.stop()
        port = _free_port()
        self.process = subprocess.Popen(
            self.host.command("port-forward", "-n", self.namespace, f"svc/{self.release}", f"{port}:{VCLUSTER_SERVICE_PORT}"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _await_port(port, self.process)
        secret = self.host.json("get", "secret", "-n", self.namespace, kubeconfig_secret_name(self.release))
        self.kubectl = Kubectl(write_private(self.workdir / "tenant.kubeconfig", tenant_kubeconfig(secret, port)))
        return self.kubectl

    def json(self, *args: str) -> dict[str, Any]:
        return self._retried(lambda kubectl: kubectl.json(*args))

    def text(self, *args: str) -> str:
        return self._retried(lambda kubectl: kubectl.text(*args))

    def apply(self, documents: list[dict[str, Any]]) -> None:
        self._retried(lambda kubectl: kubectl.apply(documents))

    def _retried(self, call):
        """A port-forward can hang up without exiting (idle timeouts over a long wait): on a failed
        call, start a fresh one and try once more."""
        try:
            return call(self.ensure())
        except CommandError:
            self.stop()
            return call(self.ensure())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _await_port(port: int, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise CommandError(f"kubectl port-forward exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise CommandError(f"kubectl port-forward did not listen on port {port} within {timeout:.0f} s")
