"""The capacity fallback: when a GPU node claim of a tenant fails (a stockout, a quota error, any
failure to create the VM), it asks Karpenter for the pool's next option, so that a team's pod never
waits on the one option that cannot be had. It runs inside each tenant's virtual cluster; this file
is shipped byte for byte (a ConfigMap, components/fallback_documents.py) with capacity_claims.py (what it reads
of the API and which failures it acts on), tenant_api.py and tenant_metrics.py, and
run by the pinned Python image: standard library only. docs/gpu-nodes.md "Stockouts and fallback" has the
design, the options it was chosen over, and the sources.

Why: a pool's options are node types ordered by their NodeProvider `cost`, and the platform takes the
cheapest available type of those Karpenter's claim lists (vcluster-docs version-0.36.0
_fragments/deploy/auto-nodes-scheduling.mdx; platform version-4.11.0 administer/node-providers/
overview.mdx). Karpenter deletes a claim that failed to launch and simulates again over the same types
(kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/launch.go, liveness.go):
avoiding the type that failed is left to vCluster's Karpenter provider and the platform, neither of
which is open source. So this program does it, writing nothing the platform or Pulumi owns:
1. It lists Karpenter's NodeClaims (read only). A claim failed when its `Launched` condition is not
   True and its message is a stockout or quota error (capacity_claims.py: any other reason may still
   end in a launch), or when it went without having launched (Karpenter deletes those).
2. The type that failed is the one the platform took: named in the claim's message, else the cheapest
   the claim listed (by the costs it is given) that was available, i.e. not a reserved slice whose
   launched claims already fill it (the platform skips a type at its maxCapacity). It counts as
   unavailable for a while (memory only), and a failure soon after continues the same run of failures.
3. Per failed claim whose next option nobody asks for yet (at most one waiting request per pool and
   list of node types, so that Karpenter's retries of the stocked-out type, each a failed claim of its
   own, yield one fallback VM, not one each), one request pod in its own namespace: lowest priority, never preempting, the GPUs
   the claim's pods asked for, tolerating the claim's taints, requiring the claim's requirements with
   the instance-type list cut to the types not failed lately. Karpenter provisions for it like for any pending pod; the platform
   takes the cheapest type left: the pool's next option. Each of them fitted the failed claim's pods
   (Karpenter lists only fitting types). Once a claim of the pool launched on one of them, the request
   pod goes: Karpenter counts a launched claim as room for pending pods before its node exists
   (pkg/controllers/state/statenode.go `Allocatable`), so the team's pod takes that node.
4. It never asks for an empty list: when every type listed failed lately it reports that every option
   is out and leaves Karpenter to try again, preferred option first. Karpenter's own claims always
   start at the preferred option, so new nodes go back to it as soon as it has capacity.

One Event on the NodeClaim and one log line per failure it acts on; metrics on METRICS_PORT
(tenant_metrics.py, shipped beside it too).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
import urllib.error
from dataclasses import dataclass, field

if __package__:  # in the repository: components.capacity_claims, components.tenant_api, components.tenant_metrics
    from .capacity_claims import (
        CAPACITY, GPU_RESOURCE, INSTANCE_TYPE, LAUNCH_FAILED, LAUNCHED, NODEPOOL, NOT_LAUNCHED, QUOTA, REQUEST_APP, REQUEST_CLAIM,
        REQUEST_POOL, REQUEST_TYPES, Claim, RequestPod, classify, parse_claims, parse_requests,
    )
    from .tenant_api import EVENT_NAMESPACE, Api, ApiError, event as tenant_event
    from .tenant_metrics import Registry, serve
else:  # run in the tenant, all beside it (components/fallback_documents.py)
    from capacity_claims import (
        CAPACITY, GPU_RESOURCE, INSTANCE_TYPE, LAUNCH_FAILED, LAUNCHED, NODEPOOL, NOT_LAUNCHED, QUOTA, REQUEST_APP, REQUEST_CLAIM,
        REQUEST_POOL, REQUEST_TYPES, Claim, RequestPod, classify, parse_claims, parse_requests,
    )
    from tenant_api import EVENT_NAMESPACE, Api, ApiError, event as tenant_event
    from tenant_metrics import Registry, serve

NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
# Its own namespace, where it runs and where its request pods wait (components/fallback_documents.py).
NAMESPACE = "gpu-platform-capacity"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
EVENT_SOURCE = "gpu-platform-capacity-fallback"
# Event reasons: an option failed and the next was asked for; every option failed; the request was refused.
OPTION_FAILED, EXHAUSTED, REFUSED = "GPUOptionFailed", "GPUOptionsExhausted", "GPUFallbackRefused"
METRICS_PORT = 9464
# The metrics it serves (docs/observability.md; components/monitoring_queries.py reads them).
FAILURES_TOTAL = "gpu_platform_claim_failures_total"
UNAVAILABLE_SINCE = "gpu_platform_option_unavailable_since_seconds"
EXHAUSTED_SINCE = "gpu_platform_pool_options_exhausted_since_seconds"
REQUESTS_TOTAL = "gpu_platform_fallback_requests_total"
METRICS = {
    FAILURES_TOTAL: ("counter", "NodeClaims of a GPU pool that failed, by the option that failed and why.", ("pool", "gpu", "node_type", "option", "zone", "reason")),
    UNAVAILABLE_SINCE: ("gauge", "Unix time since when an option has been failing, while it counts as unavailable.", ("pool", "gpu", "node_type", "option", "zone")),
    EXHAUSTED_SINCE: ("gauge", "Unix time since when every option a pool's last failed claim listed has been failing.", ("pool", "gpu")),
    REQUESTS_TOTAL: ("counter", "Request pods created to ask for a pool's next option, by the option the platform takes.", ("pool", "gpu", "node_type", "option", "zone")),
}


# --- the decision -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unavailable:
    """A node type that failed lately. It counts as unavailable until `until`, and is remembered for
    as long again, so that a failure soon after (Karpenter tries the preferred option again for every
    new claim) goes on the same run of failures, since the same time."""

    since: dt.datetime  # the first failure of this run of failures
    until: dt.datetime  # counts as unavailable until then

    def counts(self, now: dt.datetime) -> bool:
        return self.until > now


@dataclass(frozen=True)
class Memory:
    """What earlier rounds saw (in memory: a restart forgets it, which only means that the next
    failure is acted on again from scratch)."""

    unlaunched: dict[str, Claim] = field(default_factory=dict)  # by uid: claims not launched when last seen
    handled: frozenset[str] = frozenset()  # uids of claims whose failure was acted on
    unavailable: dict[str, Unavailable] = field(default_factory=dict)  # by node type
    exhausted: dict[str, tuple[dt.datetime, frozenset[str]]] = field(default_factory=dict)  # pool → (since, its types)


@dataclass(frozen=True)
class Failure:
    claim: Claim
    node_types: tuple[str, ...]  # the type(s) the platform took for it
    reason: str  # CAPACITY | QUOTA | LAUNCH_FAILED | NOT_LAUNCHED
    message: str  # what the claim said, if anything


@dataclass(frozen=True)
class Request:
    """A request pod to create: the failed claim's requirements with `node_types` left."""

    name: str
    failure: Failure
    node_types: tuple[str, ...]  # cheapest first; the platform takes the first


@dataclass(frozen=True)
class Decision:
    failures: list[Failure]
    requests: list[Request]  # to create
    exhausted: list[Failure]  # failures that left no option: reported, no request
    delete: list[str]  # request pods to delete
    memory: Memory


def request_name(claim: str) -> str:
    """A pod name per failed claim (at most 63 characters, so it is also a valid label value)."""
    return f"gpu-fallback-{claim}"[:63].rstrip("-.")


def by_cost(node_types, costs: dict[str, int | None]) -> list[str]:
    """Cheapest first, as the platform takes them; a type without a known cost last."""
    return sorted(node_types, key=lambda t: (costs.get(t) is None, costs.get(t) or 0, t))


def taken(claim: Claim, message: str, costs: dict[str, int | None], full: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The node type(s) the platform took for a claim: the one its message names, else the cheapest
    it listed that was available (every type tied at the lowest cost, when several are). `full`: the
    types at their maxCapacity, which the platform skips ("marks the node type as unavailable once the
    limit is reached", vcluster-docs platform/administer/node-providers/overview.mdx, "Max capacity")."""
    named = [t for t in claim.node_types if re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", message)]
    if len(named) == 1:
        return tuple(named)
    ordered = by_cost([t for t in claim.node_types if t not in full] or claim.node_types, costs)
    first = costs.get(ordered[0])
    return tuple(t for t in ordered if costs.get(t) == first) if first is not None else (ordered[0],)


def full_types(claims: list[Claim], pools: dict) -> frozenset[str]:
    """Node types whose launched claims reach their maxCapacity (a reserved slice's VMs). A slice's type
    is one tenant's (rsv-<reservation>-<tenant>), so this tenant's claims are all its nodes."""
    launched: dict[str, int] = {}
    for c in claims:
        if c.launched and c.launched_as:
            launched[c.launched_as] = launched.get(c.launched_as, 0) + 1
    caps = {t: spec.get("maxCapacity") for pool in pools.values() for t, spec in pool["nodeTypes"].items()}
    return frozenset(t for t, cap in caps.items() if cap and launched.get(t, 0) >= cap)


def decide(claims: list[Claim], requests: list[RequestPod], config: dict, now: dt.datetime, memory: Memory) -> Decision:
    """The failures to act on, the request pods to create and to delete, and what to remember.
    `config`: the program's configuration (pools, their node types' costs, the time limits)."""
    pools = config["pools"]
    hold = dt.timedelta(seconds=config["unavailableSeconds"])
    request_age = dt.timedelta(seconds=config["requestSeconds"])
    mine = [c for c in claims if c.pool in pools]
    present = {c.uid for c in mine}
    full = full_types(claims, pools)
    # Failed: its Launched condition names a stockout or quota error, or it went (or is going) without
    # having launched, whatever its condition said last (capacity_claims.py).
    candidates = [(c, *c.failure) for c in mine if c.known_failure and c.uid not in memory.handled]
    candidates += [(c, *(c.failure or ("", ""))) for uid, c in memory.unlaunched.items() if uid not in present and uid not in memory.handled]
    candidates += [
        (c, *(c.failure or ("", "")))
        for c in mine
        if c.deleting and not c.launched and not c.known_failure and c.uid in memory.unlaunched and c.uid not in memory.handled
    ]
    remembered = {t: u for t, u in memory.unavailable.items() if u.until + hold > now}
    failures = []
    for claim, reason, message in candidates:
        costs = {t: spec.get("cost") for t, spec in pools[claim.pool]["nodeTypes"].items()}
        failure = Failure(claim, taken(claim, message, costs, full), classify(reason, message), message)
        failures.append(failure)
        for t in failure.node_types:
            earlier = remembered.get(t)
            remembered[t] = Unavailable(earlier.since if earlier else now, now + hold)
    unavailable = {t for t, u in remembered.items() if u.counts(now)}

    open_requests = [r for r in requests if not r.bound and now - r.created < request_age]
    delete = {r.name for r in requests if r.bound or now - r.created >= request_age}
    launched = [c for c in mine if c.launched]
    for r in open_requests:
        # Served: a claim of its pool launched on one of its types since it was made, or the claim it
        # answers launched after all.
        if any((c.pool == r.pool and c.launched_as in r.node_types and c.created >= r.created) or c.name == r.claim for c in launched):
            delete.add(r.name)
    existing = {r.name for r in requests}
    creating: list[Request] = []
    exhausted: list[Failure] = []
    exhausted_now = dict(memory.exhausted)
    for failure in failures:
        claim = failure.claim
        costs = {t: spec.get("cost") for t, spec in pools[claim.pool]["nodeTypes"].items()}
        left = tuple(by_cost([t for t in claim.node_types if t not in unavailable and t not in full], costs))
        # A request whose claim failed is superseded: the failure's own request takes its place.
        delete |= {r.name for r in open_requests if r.pool == claim.pool and frozenset(claim.node_types) <= r.node_types and r.created <= claim.created}
        if not left:
            exhausted.append(failure)
            since = max(remembered[t].since for t in claim.node_types)
            exhausted_now[claim.pool] = (exhausted_now.get(claim.pool, (since, None))[0], frozenset(claim.node_types))
            continue
        name = request_name(claim.name)
        waiting = [r for r in open_requests if r.pool == claim.pool and r.name not in delete] + [c for c in creating if c.failure.claim.pool == claim.pool]
        # One waiting request per pool and list: a retry of the same stocked-out type asks for nothing more.
        same = any(frozenset(w.node_types) == frozenset(left) for w in waiting)
        if name in existing or same or len(waiting) >= pools[claim.pool]["maxNodes"]:
            continue
        creating.append(Request(name, failure, left))
    # A pool has an option again once one of its claims launched since it ran out, or once one of the
    # types it ran out of has not failed for twice the time a failure counts (Karpenter tries the
    # preferred option again for every new claim: a type still out fails again well before).
    for pool, (since, types) in list(exhausted_now.items()):
        if any(t not in remembered for t in types) or any(c.pool == pool and c.created >= since for c in launched):
            del exhausted_now[pool]
    memory = Memory(
        unlaunched={c.uid: c for c in mine if not c.launched and not c.known_failure},
        handled=frozenset(u for u in memory.handled | {f.claim.uid for f in failures} if u in present),
        unavailable=remembered,
        exhausted=exhausted_now,
    )
    return Decision(failures, creating, exhausted, sorted(delete), memory)


# --- what it writes -----------------------------------------------------------------------------------


def request_pod(request: Request, config: dict) -> dict:
    """The pod that asks Karpenter for the failed claim's next option."""
    claim = request.failure.claim
    terms = [
        {"key": r["key"], "operator": r["operator"], **({"values": list(r["values"])} if r.get("values") else {})}
        for r in claim.requirements
        if r.get("key") != INSTANCE_TYPE
    ]
    terms.append({"key": INSTANCE_TYPE, "operator": "In", "values": [f"{config['provider']}.{t}" for t in request.node_types]})
    tolerations = [
        {"key": t["key"], "operator": "Equal" if t.get("value") else "Exists", **({"value": t["value"]} if t.get("value") else {}), "effect": t["effect"]}
        for t in claim.taints
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": request.name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": REQUEST_APP, "app.kubernetes.io/part-of": "gpu-platform", REQUEST_POOL: claim.pool},
            "annotations": {REQUEST_CLAIM: claim.name, REQUEST_TYPES: ",".join(request.node_types)},
        },
        "spec": {
            "priorityClassName": config["priorityClass"],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": terms}]}}},
            "tolerations": tolerations,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "request",
                    "image": config["requestImage"],
                    "command": ["sleep", str(config["requestSeconds"])],
                    # The failed claim's GPUs; its CPU and memory are left out: they hold Karpenter's
                    # daemon overhead, which it would add a second time, and every type left fits them.
                    "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {GPU_RESOURCE: str(claim.gpus), "memory": "16Mi"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def option(config: dict, pool: str, node_type: str) -> dict:  # its option, zone, cost
    return config["pools"][pool]["nodeTypes"].get(node_type, {})


def describe(config: dict, pool: str, node_type: str) -> str:
    spec = option(config, pool, node_type)
    return f"{node_type} ({spec.get('option', '?')} in {spec.get('zone', '?')})"


def failure_text(failure: Failure, config: dict) -> str:
    claim = failure.claim
    what = " or ".join(describe(config, claim.pool, t) for t in failure.node_types)
    said = f": {failure.message[:600]}" if failure.message else (" (it went before launching)" if failure.reason == NOT_LAUNCHED else "")
    return f"NodeClaim {claim.name} of pool {claim.pool} ({config['pools'][claim.pool]['gpu']}) failed on {what}: {failure.reason}{said}"


def event(claim: Claim, reason: str, message: str, now: dt.datetime) -> dict:
    involved = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": claim.name, "uid": claim.uid}
    return tenant_event(involved, reason, message[:1000], now, EVENT_SOURCE)


# --- metrics ------------------------------------------------------------------------------------------


def record(registry: Registry, decision: Decision, requested: list[Request], config: dict, now: dt.datetime) -> None:
    """Counters of the failures acted on and the requests the API accepted; gauges from what it remembers."""

    def labels(pool: str, node_type: str) -> tuple[str, ...]:
        spec = option(config, pool, node_type)
        return (pool, config["pools"][pool]["gpu"], node_type, spec.get("option", ""), spec.get("zone", ""))

    for f in decision.failures:
        for t in f.node_types:
            registry.add(FAILURES_TOTAL, labels(f.claim.pool, t) + (f.reason,))
    for r in requested:
        registry.add(REQUESTS_TOTAL, labels(r.failure.claim.pool, r.node_types[0]))
    out = {t: u for t, u in decision.memory.unavailable.items() if u.counts(now)}
    registry.set(UNAVAILABLE_SINCE, {labels(p, t): u.since.timestamp() for p, spec in config["pools"].items() for t, u in out.items() if t in spec["nodeTypes"]})
    registry.set(EXHAUSTED_SINCE, {(p, config["pools"][p]["gpu"]): since.timestamp() for p, (since, _) in decision.memory.exhausted.items()})


# --- the loop ----------------------------------------------------------------------------------------


def say(line: str, error: bool = False) -> None:
    print(f"gpu-capacity-fallback: {line}", file=sys.stderr if error else sys.stdout, flush=True)


def run_once(api: Api, config: dict, memory: Memory, metrics: Registry, now: dt.datetime | None = None) -> Memory:
    """One round: list, decide, act, report."""
    now = now or dt.datetime.now(dt.timezone.utc)
    claims = parse_claims(api.call("GET", NODECLAIMS).get("items") or [], config["provider"])
    requests = parse_requests(api.call("GET", PODS).get("items") or [])
    decision = decide(claims, requests, config, now, memory)
    for name in decision.delete:
        try:
            api.call("DELETE", f"{PODS}/{name}")
        except ApiError as e:
            if e.status != 404:
                say(f"could not delete request pod {name}: {e}", error=True)
    messages = {}
    for failure in decision.exhausted:
        unavailable = decision.memory.unavailable
        since = max(unavailable[t].since for t in failure.claim.node_types).isoformat()
        messages[failure.claim.uid] = (
            EXHAUSTED,
            f"{failure_text(failure, config)}; every node type it listed has failed within the last {config['unavailableSeconds']} s (all since {since}): "
            f"no option left to ask for; Karpenter tries again, the preferred option first",
        )
    for request in decision.requests:
        claim = request.failure.claim
        try:
            api.call("POST", PODS, request_pod(request, config))
        except ApiError as e:
            messages[claim.uid] = (REFUSED, f"{failure_text(request.failure, config)}; could not ask for the next option: {e}")
            continue
        messages[claim.uid] = (
            OPTION_FAILED,
            f"{failure_text(request.failure, config)}; asked for the next option with pod {NAMESPACE}/{request.name}: "
            f"{', '.join(request.node_types)} (the platform takes the cheapest: {describe(config, claim.pool, request.node_types[0])})",
        )
    for failure in decision.failures:
        waiting = f"{failure_text(failure, config)}; a request for the pool's next option is already waiting (one per pool and list of node types)"
        reason, message = messages.get(failure.claim.uid, (OPTION_FAILED, waiting))
        say(f"{reason}: {message}", error=reason != OPTION_FAILED)
        try:
            api.call("POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", event(failure.claim, reason, message, now))
        except ApiError as e:  # the log line above still says it
            say(f"could not record the event: {e}", error=True)
    record(metrics, decision, [r for r in decision.requests if messages.get(r.failure.claim.uid, ("",))[0] == OPTION_FAILED], config, now)
    return decision.memory


def main(argv: list[str], api: Api | None = None) -> int:
    with open(argv[1]) as f:
        config = json.load(f)
    api, memory, metrics = api or Api.in_cluster(), Memory(), Registry(METRICS)
    serve(metrics, config["metricsPort"])
    while True:
        try:
            memory = run_once(api, config, memory, metrics)
        except (OSError, urllib.error.URLError, ApiError, ValueError, KeyError) as e:  # the API is briefly away, or refuses: say so, try again
            say(repr(e), error=True)
        time.sleep(config["intervalSeconds"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
