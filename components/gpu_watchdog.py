"""The GPU watchdog: removes a tenant's GPU node that does not offer its GPUs, so that no GPU VM is
billed without them. It runs inside each tenant's virtual cluster; this file is shipped to it byte
for byte (a ConfigMap, components/watchdog_documents.py) and run by the pinned Python image, so it
uses the standard library only and imports nothing of the program.

Why a GPU node can stay without GPUs: the driver, the container toolkit or the device plugin fails
and the node is Ready but never offers `nvidia.com/gpu`, or a GPU falls off the bus later. Karpenter
has a registration timeout for node claims but no initialization timeout, so such a node stays, and
its VM bills, until someone notices (kubernetes-sigs/karpenter issue 341,
Azure/karpenter-provider-azure issue 1790).

Why inside the tenant rather than on the platform side: Nodes and Karpenter's NodeClaims exist only
in the tenant's own API server. A platform-side watchdog would need a credential to every tenant's
API with the right to delete node claims there; inside, each watchdog holds that right in its own
tenant only (its RBAC: components/watchdog_documents.py), and a compromised one can remove its own
team's nodes and nothing else. It needs no privilege on the node and no cloud identity.

How a node goes: the watchdog deletes the node's Karpenter NodeClaim (karpenter.sh/v1), the normal
way a node leaves. Karpenter's finalizer deletes the Node (whose own finalizer drains it) and then
the instance through the cloud provider (kubernetes-sigs/karpenter v1.14.1
pkg/controllers/nodeclaim/lifecycle/controller.go `finalize`), here the vCluster Platform's node
claim, whose `tofu destroy` deletes the VM (vcluster-docs
vcluster/_fragments/deploy/auto-nodes-scheduling.mdx, version-0.36.0). A node without a NodeClaim
(joined by hand) is not the watchdog's to remove: it records a warning event and leaves it.

The decision is `decide`: nodes, their node claims, the time and the per-pool limits in; the nodes
to remove out. Two clocks:
- never offered (the kubelet reports no `nvidia.com/gpu` capacity: the device plugin never
  registered): from the node's creation, so a restarted watchdog keeps the same deadline;
- lost (capacity, but nothing allocatable: the device plugin marked the GPUs unhealthy): from when
  this watchdog first saw it so; a restart starts that clock again, which only waits longer.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
# Node labels every GPU pool sets (components/vcluster_values.py POOL_LABEL, GPU_LABEL).
POOL_LABEL = "gpu-platform/pool"
GPU_LABEL = "gpu-platform/gpu"
NEVER_OFFERED, LOST = "GPUNeverOffered", "GPULost"
EVENT_SOURCE = "gpu-platform-watchdog"
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects (nodes) go, as the kubelet's
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


@dataclass(frozen=True)
class GpuNode:
    """What the decision needs of a Node."""

    name: str
    uid: str
    pool: str
    created: dt.datetime
    capacity: int  # nvidia.com/gpu the kubelet reports
    allocatable: int
    deleting: bool


@dataclass(frozen=True)
class Removal:
    node: str
    uid: str
    claim: str | None  # None: no NodeClaim, the node is left and only reported
    reason: str  # NEVER_OFFERED | LOST
    message: str


def _quantity(value) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def gpu_nodes(nodes: list[dict]) -> list[GpuNode]:
    """The nodes of GPU pools (labelled gpu-platform/gpu), from a node list's items."""
    found = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if GPU_LABEL not in labels:
            continue
        status = node.get("status") or {}
        found.append(
            GpuNode(
                name=meta["name"],
                uid=meta.get("uid", ""),
                pool=labels.get(POOL_LABEL, ""),
                created=parse_time(meta["creationTimestamp"]),
                capacity=_quantity((status.get("capacity") or {}).get(GPU_RESOURCE)),
                allocatable=_quantity((status.get("allocatable") or {}).get(GPU_RESOURCE)),
                deleting=bool(meta.get("deletionTimestamp")),
            )
        )
    return found


GOING = ""  # claims_by_node: the node's claim is being deleted already


def claims_by_node(claims: list[dict]) -> dict[str, str]:
    """Node name → the NodeClaim that launched it (status.nodeName), or GOING when that claim is
    being deleted already (Karpenter is draining the node)."""
    return {
        c["status"]["nodeName"]: GOING if c["metadata"].get("deletionTimestamp") else c["metadata"]["name"]
        for c in claims
        if (c.get("status") or {}).get("nodeName")
    }


def decide(
    nodes: list[GpuNode],
    claims: dict[str, str],
    limits: dict[str, int],
    default_limit: int,
    now: dt.datetime,
    lost_since: dict[str, dt.datetime],
) -> tuple[list[Removal], dict[str, dt.datetime]]:
    """The GPU nodes to remove now, and when each node still without its GPUs was first seen so
    (the state to pass next time). `limits`: seconds per pool name."""
    removals: list[Removal] = []
    still_lost: dict[str, dt.datetime] = {}
    for node in nodes:
        if node.deleting or node.allocatable > 0 or claims.get(node.name) == GOING:
            continue
        limit = limits.get(node.pool, default_limit)
        if node.capacity > 0:
            since = lost_since.get(node.name, now)
            still_lost[node.name] = since
            reason, what = LOST, f"has offered no {GPU_RESOURCE} since {since.isoformat()} (its {node.capacity} GPUs are unhealthy)"
        else:
            since = node.created
            reason, what = NEVER_OFFERED, f"has offered no {GPU_RESOURCE} since it joined at {since.isoformat()}"
        if (now - since).total_seconds() < limit:
            continue
        claim = claims.get(node.name)
        action = f"deleting its NodeClaim {claim}, which deletes the VM" if claim else "it has no NodeClaim, so it is left for an operator"
        removals.append(
            Removal(node.name, node.uid, claim, reason, f"GPU node {node.name} of pool {node.pool or '(none)'} {what}, longer than {limit} s: {action}")
        )
    return removals, still_lost


# --- talking to the tenant's API server (in-cluster service account) -------------------------------

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Api:
    def __init__(self, server: str, token_path: str, ca_path: str):
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
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:  # noqa: S310 - the in-cluster API
            return json.loads(response.read() or b"{}")


def event(removal: Removal, now: dt.datetime) -> dict:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{removal.node}.{int(now.timestamp() * 1000):x}", "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": removal.node, "uid": removal.uid},
        "reason": removal.reason,
        "message": removal.message,
        "type": "Warning",
        "source": {"component": EVENT_SOURCE},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def run_once(api: Api, config: dict, lost_since: dict[str, dt.datetime], reported: set[str]) -> dict[str, dt.datetime]:
    now = dt.datetime.now(dt.timezone.utc)
    nodes = gpu_nodes(api.call("GET", "/api/v1/nodes").get("items") or [])
    claims = claims_by_node(api.call("GET", NODECLAIMS).get("items") or [])
    removals, lost_since = decide(nodes, claims, config["poolLimitSeconds"], config["defaultLimitSeconds"], now, lost_since)
    for removal in removals:
        if removal.claim:
            api.call("DELETE", f"{NODECLAIMS}/{removal.claim}")
        if removal.node not in reported:  # one event per node, not one per loop
            api.call("POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", event(removal, now))
            reported.add(removal.node)
        print(removal.message, flush=True)
    reported &= {n.name for n in nodes}
    return lost_since


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        config = json.load(f)
    api, lost_since, reported = Api.in_cluster(), {}, set()
    while True:
        try:
            lost_since = run_once(api, config, lost_since, reported)
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:  # the API is briefly away: try again
            print(f"gpu-watchdog: {e!r}", file=sys.stderr, flush=True)
        time.sleep(config["intervalSeconds"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
