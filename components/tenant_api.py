"""The tenant's API server as the programs that run inside each tenant call it (the GPU watchdog,
components/gpu_watchdog.py; the capacity fallback, components/capacity_fallback.py): requests with
the pod's service account, the server's refusals as ApiError, and the Event each of them records per
outcome. Standard library only: it is shipped byte for byte beside each program (their ConfigMaps)
and imported from the same directory.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import urllib.error
import urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects go, as the kubelet's about nodes


class ApiError(Exception):
    """The API server answered a request with an error status."""

    def __init__(self, method: str, path: str, status: int, message: str):
        super().__init__(f"{method} {path} answered {status} {message}".rstrip())
        self.status = status


class Api:
    def __init__(self, server: str, token_path: str, ca_path: str | None):
        self.server, self.token_path = server, token_path
        self.context = ssl.create_default_context(cafile=ca_path)

    @classmethod
    def in_cluster(cls) -> Api:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        return cls(f"https://{host}:{port}", f"{ACCOUNT}/token", f"{ACCOUNT}/ca.crt")

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        with open(self.token_path) as f:  # re-read: projected tokens are rotated
            token = f.read().strip()
        request = urllib.request.Request(
            self.server + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:  # noqa: S310 - the in-cluster API
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise ApiError(method, path, e.code, _status_message(e)) from None


def _status_message(error: urllib.error.HTTPError) -> str:
    """The reason and message of the API server's Status object, else the HTTP reason."""
    try:
        status = json.loads(error.read() or b"{}")
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason, message = status.get("reason") or error.reason or "", status.get("message") or ""
    return f"{reason}: {message}" if message else str(reason)


def event(involved: dict, reason: str, message: str, now: dt.datetime, source: str) -> dict:
    """A Warning Event about a cluster-scoped object (`involved`: its apiVersion, kind, name, uid)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{int(now.timestamp() * 1000):x}", "namespace": EVENT_NAMESPACE},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": source},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
