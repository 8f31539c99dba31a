"""Metadata concealment, checked live: on one of the tenant's nodes, an ordinary pod asks the
metadata server for something only it answers (with `Metadata-Flavor: Google`, port 80) and must
get no answer, while a `hostNetwork` pod on the same node must get one (the GCP cloud controller
manager and the PD CSI driver depend on that). The ordinary pod also asks the metadata server's
DNS (port 53, left open): an answer there shows that the pod has a working network, so its HTTP
failure is the node's rule and not a broken pod.

The documents and the readers of `kubectl … -o json` / `kubectl logs` are pure; scenario.py runs them.
"""

from __future__ import annotations

from typing import Any

from .kube import Finding, condition, items

NAMESPACE = "gpu-platform-acceptance"
# sh, wget and nslookup from registry.k8s.io (no Docker Hub rate limit), the image Kubernetes' own
# e2e tests pin as BusyBox (kubernetes/kubernetes test/utils/image/manifest.go).
IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
FROM_POD, FROM_HOST = "metadata-from-pod", "metadata-from-host"
HOST_NETWORK = {FROM_POD: False, FROM_HOST: True}
# /computeMetadata/v1/ needs the header (https://cloud.google.com/compute/docs/metadata/querying-metadata);
# the instance id is harmless to print, and the script prints only what was reachable anyway.
URL = "http://169.254.169.254/computeMetadata/v1/instance/id"
SCRIPT = f"""if wget -q -T 5 -O /dev/null --header 'Metadata-Flavor: Google' {URL}; then echo metadata-http=reachable; else echo metadata-http=unreachable; fi
if nslookup metadata.google.internal 169.254.169.254 >/dev/null 2>&1; then echo metadata-dns=reachable; else echo metadata-dns=unreachable; fi
"""
TERMINAL = ("Succeeded", "Failed")


def probe_node(nodes: dict[str, Any]) -> str | None:
    """A Ready node of the tenant (by name, so a rerun picks the same one)."""
    ready = sorted(n["metadata"]["name"] for n in items(nodes) if (condition(n, "Ready") or {}).get("status") == "True")
    return ready[0] if ready else None


def documents(node: str, run_id: str) -> list[dict[str, Any]]:
    """The namespace (hostNetwork needs the privileged Pod Security level) and one pod of each
    kind, both on `node` whatever its taints."""
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"gpu-platform/acceptance-run": run_id}},
            "spec": {
                "nodeName": node,
                "hostNetwork": host_network,
                "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "probe", "image": IMAGE, "command": ["sh", "-c", SCRIPT]}],
            },
        }
        for name, host_network in HOST_NETWORK.items()
    ]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    return [namespace, *pods]


def _pod(pods: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in items(pods) if p["metadata"]["name"] == name), None)


def _state(pod: dict[str, Any] | None) -> str:
    """The pod's phase, and why it waits if it does (ErrImagePull, …)."""
    if pod is None:
        return "not created"
    status = pod.get("status") or {}
    waiting = [((c.get("state") or {}).get("waiting") or {}).get("reason") for c in status.get("containerStatuses") or []]
    return " ".join(filter(None, [status.get("phase", "Pending"), *waiting]))


def done(pods: dict[str, Any]) -> Finding:
    """Both probe pods have ended (a poll's answer)."""
    states = {name: _state(_pod(pods, name)) for name in HOST_NETWORK}
    ended = all((_pod(pods, name) or {}).get("status", {}).get("phase") in TERMINAL for name in HOST_NETWORK)
    return Finding("", ended, ", ".join(f"{name} {state}" for name, state in states.items()))


def answers(logs: str) -> dict[str, str]:
    """`metadata-http=reachable` … lines → {"http": "reachable", "dns": …}."""
    found = {}
    for line in logs.splitlines():
        key, _, value = line.strip().partition("=")
        if key.startswith("metadata-") and value in ("reachable", "unreachable"):
            found[key.removeprefix("metadata-")] = value
    return found


def findings(pods: dict[str, Any], logs: dict[str, str]) -> list[Finding]:
    """What a user checks: pods are cut off from the node identity, host-network pods are not."""
    result = []
    for name, check in ((FROM_POD, "an ordinary pod cannot reach the metadata server"), (FROM_HOST, "a hostNetwork pod reaches the metadata server")):
        pod = _pod(pods, name)
        seen = answers(logs.get(name, ""))
        if (pod or {}).get("status", {}).get("phase") != "Succeeded" or "http" not in seen:
            first = logs.get(name, "").strip().splitlines()[:3]
            result.append(Finding(check, False, f"no answer from the probe: pod {_state(pod)}, logs {first}"))
        elif name == FROM_POD:
            result.append(_from_pod(check, seen))
        else:
            ok = seen["http"] == "reachable"
            detail = "HTTP answered" if ok else "HTTP got no answer: the cloud controller manager and the PD CSI driver would lose their credentials"
            result.append(Finding(check, ok, detail))
    return result


def _from_pod(check: str, seen: dict[str, str]) -> Finding:
    if seen["http"] == "reachable":
        return Finding(check, False, "HTTP answered: any pod on the node can take the node identity's token")
    if seen.get("dns") != "reachable":
        return Finding(check, False, "neither HTTP nor DNS answered: the pod has no working network, so this proves nothing")
    return Finding(check, True, "HTTP dropped, DNS (port 53) answered")
