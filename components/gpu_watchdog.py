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

The decision is `decide`: nodes, their node claims, the time, the per-pool limits and what the
earlier rounds saw in; the nodes to remove and what this round saw out. Two clocks:
- lost: a node the watchdog has seen offering its GPUs (allocatable), or that reports GPU capacity
  with none allocatable (its device plugin registered them, then they turned unhealthy), from the
  round that first saw it without them. It stays lost, on that clock, when its capacity drops to 0
  too: the kubelet keeps a withdrawn device plugin's GPUs as unhealthy capacity for five minutes
  (`endpointStopGracePeriod`), then drops the resource and reports a capacity of 0
  (kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go `PluginDisconnected`,
  `GetCapacity`, read at commit 7510f32987feb7efbaced9aec1ca15303dea252b). Its GPUs back, the clock
  is forgotten.
- never offered: any other node without GPUs (no capacity, never seen offering: the device plugin
  never registered): from the node's creation.

What the earlier rounds saw is kept in memory only (the watchdog is one replica). A durable record
would need a right the watchdog is not given: patching the Node or a ConfigMap, or listing events,
which besides expire (kube-apiserver `--event-ttl`, 1h by default:
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/), sooner than a
long gpuTimeout. So a restarted watchdog (its exit after refused deletes, its pod moved or
upgraded) has seen nothing:
- a lost node that still reports capacity starts its clock again, which only waits longer;
- a lost node whose capacity is already 0 (its device plugin gone for more than those five
  minutes) is judged never offered, from its creation: if it joined more than gpuTimeout ago, the
  first round removes it, as GPUNeverOffered "since it joined", up to gpuTimeout sooner after the
  loss than otherwise. No VM bills longer for it; what is cut short is the grace a running pod on
  it (whose GPUs, allocated before, may still work) had left.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import urllib.error
from dataclasses import dataclass, field

if __package__:  # in the repository: components.tenant_api
    from .tenant_api import EVENT_NAMESPACE, Api, ApiError, event as tenant_event
else:  # run in the tenant, tenant_api.py beside it (components/watchdog_documents.py)
    from tenant_api import EVENT_NAMESPACE, Api, ApiError, event as tenant_event

GPU_RESOURCE = "nvidia.com/gpu"
# Node labels every GPU pool sets (components/vcluster_values.py POOL_LABEL, GPU_LABEL).
POOL_LABEL = "gpu-platform/pool"
GPU_LABEL = "gpu-platform/gpu"
# Event reasons: the cause of a removal, or that the watchdog could not make the node go.
NEVER_OFFERED, LOST, NOT_REMOVED = "GPUNeverOffered", "GPULost", "GPUNodeNotRemoved"
EVENT_SOURCE = "gpu-platform-watchdog"
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


@dataclass(frozen=True)
class Seen:
    """What earlier rounds saw of the GPU nodes (in memory: module docstring), by Node uid: a name
    can come back as another Node, which has offered nothing yet."""

    offering: frozenset[str] = frozenset()  # nodes last seen offering their GPUs (allocatable)
    lost_since: dict[str, dt.datetime] = field(default_factory=dict)  # nodes lost: since when seen so


def decide(
    nodes: list[GpuNode],
    claims: dict[str, str],
    limits: dict[str, int],
    default_limit: int,
    now: dt.datetime,
    seen: Seen,
) -> tuple[list[Removal], Seen]:
    """The GPU nodes to remove now, and what this round saw (the `seen` to pass next time, of the
    nodes listed now only: a node gone is forgotten). `limits`: seconds per pool name. `claims`:
    claims_by_node, empty when the claims could not be listed.

    A node offering any of its GPUs is remembered as offering, and a clock of its loss forgotten.
    A node offering none is lost (LOST, timed from the round that first saw it so, whatever its
    capacity now) if it was seen offering, is timed as lost already, or reports GPU capacity
    (unhealthy GPUs); else never offered (NEVER_OFFERED, timed from its creation)."""
    removals: list[Removal] = []
    offering: set[str] = set()
    lost_since: dict[str, dt.datetime] = {}
    for node in nodes:
        if node.allocatable > 0:
            offering.add(node.uid)
            continue
        if node.uid in seen.offering or node.uid in seen.lost_since or node.capacity > 0:
            since = lost_since[node.uid] = seen.lost_since.get(node.uid, now)
            left = f"its {node.capacity} GPUs are unhealthy" if node.capacity > 0 else "its GPUs are gone from its capacity too"
            reason, what = LOST, f"has offered no {GPU_RESOURCE} since {since.isoformat()} ({left})"
        else:
            since = node.created
            reason, what = NEVER_OFFERED, f"has offered no {GPU_RESOURCE} since it joined at {since.isoformat()}"
        limit = limits.get(node.pool, default_limit)
        if node.deleting or claims.get(node.name) == GOING or (now - since).total_seconds() < limit:
            continue
        removals.append(
            Removal(
                node.name, node.uid, claims.get(node.name), node.karpenter, reason,
                f"GPU node {node.name} of pool {node.pool or '(none)'} {what}, longer than {limit} s",
            )
        )
    return removals, Seen(frozenset(offering), lost_since)


def event(node: str, uid: str, reason: str, message: str, now: dt.datetime) -> dict:
    return tenant_event({"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}, reason, message, now, EVENT_SOURCE)


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
    """One round's result: what it saw, for the next round, and the nodes whose removal failed."""

    seen: Seen
    failed: list[str]


def run_once(api: Api, config: dict, seen: Seen, reported: set[str], now: dt.datetime | None = None) -> Round:
    now = now or dt.datetime.now(dt.timezone.utc)
    nodes = gpu_nodes(api.call("GET", NODES).get("items") or [])
    claims_error = None
    try:
        claims = claims_by_node(api.call("GET", NODECLAIMS).get("items") or [])
    except ApiError as e:
        if e.status not in CLAIMS_REFUSED:
            raise
        claims, claims_error = {}, e
    removals, seen = decide(nodes, claims, config["poolLimitSeconds"], config["defaultLimitSeconds"], now, seen)
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
    return Round(seen, failed)


def main(argv: list[str], api: Api | None = None) -> int:
    """Rounds until one fails to remove a node it must (then 1: the pod restarts, visibly, and the
    next start tries again)."""
    with open(argv[1]) as f:
        config = json.load(f)
    api, seen, reported = api or Api.in_cluster(), Seen(), set()
    while True:
        try:
            result = run_once(api, config, seen, reported)
        except (OSError, urllib.error.URLError, ApiError, ValueError, KeyError) as e:  # the API is briefly away: try again
            print(f"gpu-watchdog: {e!r}", file=sys.stderr, flush=True)
        else:
            if result.failed:
                print(f"gpu-watchdog: could not remove {', '.join(result.failed)}: exiting 1", file=sys.stderr, flush=True)
                return 1
            seen = result.seen
        time.sleep(config["intervalSeconds"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
