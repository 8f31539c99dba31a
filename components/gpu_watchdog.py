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

How a node goes, the normal way first: the watchdog deletes the node's Karpenter NodeClaim
(karpenter.sh/v1). Karpenter's finalizer on the claim deletes the Node (whose own finalizer drains
it) and then the instance through the cloud provider (kubernetes-sigs/karpenter v1.14.1
pkg/controllers/nodeclaim/lifecycle/controller.go `finalize`), here the vCluster Platform's node
claim, whose `tofu destroy` deletes the VM (vcluster-docs
vcluster_versioned_docs/version-0.36.0/_fragments/deploy/auto-nodes-scheduling.mdx: the Karpenter
NodeClaim lives in the virtual cluster, the platform's NodeClaim in the platform). How the virtual
cluster serves Karpenter's objects is not in the open source: loft-sh/vcluster v0.36.1 ships
private and auto nodes as stubs of the pro build (pkg/pro/privatenodes.go), and the same docs call
the NodePools "read-only to the end-users inside the vCluster". So the NodeClaim API may answer
403 (refused) or 404 (not served, or the claim already gone), to the list or to the delete.

Then the watchdog deletes the Node instead, but only a node that carries Karpenter's termination
finalizer `karpenter.sh/termination` (set on every node Karpenter registers: v1.14.1
pkg/controllers/nodeclaim/lifecycle/registration.go). Deleting such a node is Karpenter's other
normal way: its node termination controller deletes the node's NodeClaim, drains the node, has
the cloud provider delete the instance and only then lets the Node go (v1.14.1
pkg/controllers/node/termination/controller.go `finalize`, `awaitInstanceTermination`), as
`vcluster node delete` deletes a private node (loft-sh/vcluster v0.36.1
cmd/vclusterctl/cmd/node/delete.go). The same holds where the claims list fine but none names
the node as its own (`status.nodeName`): the finalizer says Karpenter registered it, and its
termination controller finds the claim by the node's provider ID (v1.14.1 pkg/utils/node/node.go
`NodeClaimForNode`), not by that name, which registration writes only after it has put the
finalizer on the node (registration.go `Reconcile`: `syncNode`, then `Status.NodeName` once the
registration hooks are done). Only if Karpenter finds no claim at all does it drain and release
the Node without deleting an instance (`awaitInstanceTermination` has nothing to delete); the
event then still names the node. A node without that finalizer is not Karpenter's (joined by
hand): deleting it would drop the object and leave its VM running, so the watchdog leaves it and
records why.

Every outcome is one Event on the node and one log line saying what was done and why. When the
deletes it tried were all refused, it also exits non-zero after that round, so the pod restarts
visibly (`kubectl get pods -n gpu-platform-system`: restarts, last exit code 1) and tries again.

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
# Event reasons: the cause of a removal, or that the watchdog could not make the node go.
NEVER_OFFERED, LOST, NOT_REMOVED = "GPUNeverOffered", "GPULost", "GPUNodeNotRemoved"
EVENT_SOURCE = "gpu-platform-watchdog"
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects (nodes) go, as the kubelet's
NODES = "/api/v1/nodes"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
# Karpenter's finalizer on the nodes it registered (kubernetes-sigs/karpenter v1.14.1
# pkg/apis/v1/labels.go `TerminationFinalizer`): a deleted node with it takes its claim and VM along.
TERMINATION_FINALIZER = "karpenter.sh/termination"
# What the NodeClaim API may answer inside a virtual cluster instead of doing it (module docstring).
CLAIMS_REFUSED = (403, 404)


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
    karpenter: bool  # carries Karpenter's termination finalizer


@dataclass(frozen=True)
class Removal:
    node: str
    uid: str
    claim: str | None  # None: no NodeClaim known (none, or the claims could not be listed)
    karpenter: bool  # deleting the Node deletes its claim and VM (Karpenter's finalizer)
    reason: str  # NEVER_OFFERED | LOST
    message: str  # why: what the node did not offer, for how long


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
                karpenter=TERMINATION_FINALIZER in (meta.get("finalizers") or []),
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
    (the state to pass next time). `limits`: seconds per pool name. `claims`: claims_by_node, empty
    when the claims could not be listed."""
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
        removals.append(
            Removal(
                node.name, node.uid, claims.get(node.name), node.karpenter, reason,
                f"GPU node {node.name} of pool {node.pool or '(none)'} {what}, longer than {limit} s",
            )
        )
    return removals, still_lost


# --- talking to the tenant's API server (in-cluster service account) -------------------------------

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


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


def event(node: str, uid: str, reason: str, message: str, now: dt.datetime) -> dict:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.{int(now.timestamp() * 1000):x}", "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": EVENT_SOURCE},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


@dataclass(frozen=True)
class Outcome:
    """What the watchdog did about one removal, and why (the event's reason and message)."""

    reason: str  # the removal's cause when the node goes, NOT_REMOVED when it stays
    message: str
    failed: bool  # a delete was refused and nothing the watchdog may do makes the node go


def remove(api: Api, removal: Removal, claims_error: ApiError | None) -> Outcome:
    """Make the node go: its NodeClaim deleted, else the Node, when Karpenter's finalizer on it
    makes that delete its claim and VM: where the NodeClaim API refuses (`claims_error` for the
    list, 403/404 for the delete), or where the claims listed name none for the node. A node without
    that finalizer and without a claim is left: neither delete would stop its VM."""
    refused = [str(claims_error)] if claims_error else []
    if removal.claim:
        try:
            api.call("DELETE", f"{NODECLAIMS}/{removal.claim}")
            return Outcome(removal.reason, f"{removal.message}: deleted its NodeClaim {removal.claim}; Karpenter drains the node, then the platform deletes its VM", False)
        except ApiError as e:
            if e.status not in CLAIMS_REFUSED:
                raise
            refused.append(str(e))
    elif claims_error is None:
        if not removal.karpenter:
            return Outcome(
                NOT_REMOVED,
                f"{removal.message}: not removed: no NodeClaim launched it and it has no {TERMINATION_FINALIZER} finalizer (joined by hand?), "
                "so deleting the Node would leave its VM running; it is left for an operator",
                False,
            )
        # Karpenter's node all the same: its claim may not name it yet (module docstring), and
        # Karpenter finds the claim by the node's provider ID, not by name.
        refused.append("no NodeClaim listed names it as its node")
    why = "; ".join(refused)
    if not removal.karpenter:
        return Outcome(
            NOT_REMOVED,
            f"{removal.message}: not removed ({why}): the node has no {TERMINATION_FINALIZER} finalizer, so deleting the Node would leave "
            "its VM running; an operator deletes its node claim in the platform",
            bool(removal.claim),
        )
    try:
        api.call("DELETE", f"{NODES}/{removal.node}")
    except ApiError as e:
        return Outcome(NOT_REMOVED, f"{removal.message}: not removed ({why}; {e}); its VM bills until an operator deletes its node claim in the platform", True)
    return Outcome(removal.reason, f"{removal.message}: deleted the Node instead ({why}); Karpenter's {TERMINATION_FINALIZER} finalizer deletes its NodeClaim, then the platform deletes its VM", False)


@dataclass
class Round:
    """One round's result: the state for the next round, and the nodes whose removal failed."""

    lost_since: dict[str, dt.datetime]
    failed: list[str]


def run_once(api: Api, config: dict, lost_since: dict[str, dt.datetime], reported: set[str], now: dt.datetime | None = None) -> Round:
    now = now or dt.datetime.now(dt.timezone.utc)
    nodes = gpu_nodes(api.call("GET", NODES).get("items") or [])
    claims_error = None
    try:
        claims = claims_by_node(api.call("GET", NODECLAIMS).get("items") or [])
    except ApiError as e:
        if e.status not in CLAIMS_REFUSED:
            raise
        claims, claims_error = {}, e
    removals, lost_since = decide(nodes, claims, config["poolLimitSeconds"], config["defaultLimitSeconds"], now, lost_since)
    failed = []
    for removal in removals:
        try:
            outcome = remove(api, removal, claims_error)
        except ApiError as e:  # neither refused nor done (a server error): the next round tries again
            print(f"gpu-watchdog: {removal.message}: {e}; trying again next round", file=sys.stderr, flush=True)
            continue
        print(f"gpu-watchdog: {outcome.reason}: {outcome.message}", file=sys.stderr if outcome.reason == NOT_REMOVED else sys.stdout, flush=True)
        if outcome.failed:
            failed.append(removal.node)
        if removal.node not in reported:  # one event per node, not one per round
            try:
                api.call("POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", event(removal.node, removal.uid, outcome.reason, outcome.message, now))
                reported.add(removal.node)
            except ApiError as e:  # the log line above still says it
                print(f"gpu-watchdog: could not record the event: {e}", file=sys.stderr, flush=True)
    reported &= {n.name for n in nodes}
    return Round(lost_since, failed)


def main(argv: list[str], api: Api | None = None) -> int:
    """Rounds until one fails to remove a node it must (then 1: the pod restarts, visibly, and the
    next start tries again)."""
    with open(argv[1]) as f:
        config = json.load(f)
    api, lost_since, reported = api or Api.in_cluster(), {}, set()
    while True:
        try:
            result = run_once(api, config, lost_since, reported)
        except (OSError, urllib.error.URLError, ApiError, ValueError, KeyError) as e:  # the API is briefly away: try again
            print(f"gpu-watchdog: {e!r}", file=sys.stderr, flush=True)
        else:
            if result.failed:
                print(f"gpu-watchdog: could not remove {', '.join(result.failed)}: exiting 1", file=sys.stderr, flush=True)
                return 1
            lost_since = result.lost_since
        time.sleep(config["intervalSeconds"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
