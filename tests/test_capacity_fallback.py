"""The capacity fallback (components/capacity_fallback.py): the proof that a stockout of a pool's
first option moves the next claim to the second (the recorded sequence of Karpenter NodeClaims in
tests/data/capacity/stockout-sequence.yaml, replayed through the program, and the platform's
documented choice over what it asks for), its decision in the other cases, what it writes (request
pods and events as Kubernetes reads them, metrics as Prometheus reads them), and its objects in the
tenant (components/fallback_documents.py) with exactly the RBAC its calls need."""

from __future__ import annotations

import copy
import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from components import capacity_fallback as cf
from components import fallback_documents as fd
from components.tenant_api import ApiError
from config import versions
from config.reliability import FALLBACK_REQUEST_SECONDS, FALLBACK_UNAVAILABLE_SECONDS
from hcl_support import require
from tenant_objects import named, rbac_needed, tenant_objects

K8S_VERSION = "1.33.0"
SEQUENCE = yaml.safe_load((Path(__file__).parent / "data/capacity/stockout-sequence.yaml").read_text())
PROVIDER, POOL = SEQUENCE["provider"], SEQUENCE["pool"]
A_SPOT, B_SPOT, A_OD, B_OD = SEQUENCE["nodeTypes"]  # in the NodeProvider's order
CONFIG = {
    **fd.fallback_config(PROVIDER, {POOL: {"gpu": "nvidia-h100-80gb", "maxNodes": 2, "nodeTypes": SEQUENCE["nodeTypes"]}}),
}


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def platform_takes(node_types, costs: dict[str, int]) -> str:
    """The platform's documented choice among the node types a claim lists: the cheapest available
    one (platform_versioned_docs/version-4.11.0/administer/node-providers/overview.mdx, "Node
    claims"; "Cost": the higher the cost, the less likely). Every type here is available."""
    return min(node_types, key=lambda t: costs[t])


COSTS = {t: spec["cost"] for t, spec in SEQUENCE["nodeTypes"].items()}


def nodeclaim(entry: dict, template: dict | None = None) -> dict:
    """A NodeClaim of the sequence, whole: the template's fields, its own name, list and condition."""
    claim = copy.deepcopy(template or SEQUENCE["claimTemplate"])
    claim["metadata"].update(name=entry["name"], uid=entry["uid"], creationTimestamp=entry["created"])
    claim["spec"]["requirements"].append({"key": cf.INSTANCE_TYPE, "operator": "In", "values": [f"{PROVIDER}.{t}" for t in entry["nodeTypes"]]})
    claim["status"] = {"conditions": [{"type": cf.LAUNCHED, "lastTransitionTime": entry["created"], **entry["launched"]}]}
    if "launchedAs" in entry:
        claim["metadata"]["labels"][cf.INSTANCE_TYPE] = f"{PROVIDER}.{entry['launchedAs']}"
    return claim


class FakeApi:
    """The tenant's API server as the fallback calls it: lists the round's claims and the pods it
    created (a created pod gets the round's time as creationTimestamp), deletes pods, records the
    rest; `refused` requests ((method, path) → status) answer that status."""

    def __init__(self, claims: list[dict], refused: dict[tuple[str, str], int] | None = None):
        self.claims, self.refused, self.calls, self.pods, self.now = claims, dict(refused or {}), [], {}, None

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        self.calls.append((method, path, body))
        if (method, path) in self.refused:
            raise ApiError(method, path, self.refused[method, path], "Forbidden: not allowed")
        if (method, path) == ("GET", cf.NODECLAIMS):
            return {"kind": "NodeClaimList", "items": self.claims}
        if (method, path) == ("GET", cf.PODS):
            return {"kind": "PodList", "items": list(self.pods.values())}
        if (method, path) == ("POST", cf.PODS):
            pod = copy.deepcopy(body)
            pod["metadata"]["creationTimestamp"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
            self.pods[pod["metadata"]["name"]] = pod
        if method == "DELETE" and path.startswith(f"{cf.PODS}/"):
            self.pods.pop(path.rsplit("/", 1)[1], None)
        return {}

    def sent(self, method: str, path: str | None = None) -> list:
        return [b if method == "POST" else p for m, p, b in self.calls if m == method and (path is None or p == path)]

    def events(self) -> list[dict]:
        return self.sent("POST", f"/api/v1/namespaces/{cf.EVENT_NAMESPACE}/events")


def replay(rounds: list[dict], api: FakeApi | None = None, memory: cf.Memory | None = None, metrics=None):
    """Each round of the sequence through the program, the API's state carried over: per round,
    what it created and deleted and the events it recorded; and the API, memory and metrics after."""
    api, memory, metrics = api or FakeApi([]), memory or cf.Memory(), metrics or cf.Registry(cf.METRICS)
    seen = []
    for r in rounds:
        api.claims, api.now = [nodeclaim(c) for c in r["claims"]], at(r["at"])
        before = len(api.calls)
        memory = cf.run_once(api, CONFIG, memory, metrics, now=api.now)
        calls = api.calls[before:]
        seen.append(
            {
                "created": [b for m, p, b in calls if (m, p) == ("POST", cf.PODS)],
                "deleted": [p.rsplit("/", 1)[1] for m, p, _ in calls if m == "DELETE"],
                "events": [b for m, p, b in calls if m == "POST" and p.endswith("/events")],
            }
        )
    return seen, api, memory, metrics


def requested(pod: dict) -> list[str]:
    """The node types a request pod lets Karpenter list, without the provider's prefix."""
    [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    [types] = [e["values"] for e in term["matchExpressions"] if e["key"] == cf.INSTANCE_TYPE]
    assert all(t.startswith(f"{PROVIDER}.") for t in types)
    return [t.removeprefix(f"{PROVIDER}.") for t in types]


# --- the proof: a stockout of the first option moves the next claim to the second -------------------


def test_a_stockout_of_the_first_option_moves_the_next_claim_to_the_second():
    seen, api, memory, metrics = replay(SEQUENCE["rounds"])
    first = SEQUENCE["rounds"][0]["claims"][0]["nodeTypes"]
    # Round 1: the platform takes the pool's first option for the team's claim; nothing to do yet.
    assert platform_takes(first, COSTS) == A_SPOT and seen[0] == {"created": [], "deleted": [], "events": []}
    # Round 2: that claim failed for capacity; one request pod asks for every type but a-spot.
    [pod] = seen[1]["created"]
    assert requested(pod) == [B_SPOT, A_OD, B_OD]
    # The platform's choice over what the request lets Karpenter list: the second option.
    assert platform_takes(requested(pod), COSTS) == B_SPOT
    [event] = seen[1]["events"]
    assert event["reason"] == cf.OPTION_FAILED
    assert event["involvedObject"] == {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "h100-8x-x7k2p", "uid": "c1"}
    assert event["message"].startswith(
        f"NodeClaim h100-8x-x7k2p of pool h100-8x (nvidia-h100-80gb) failed on {A_SPOT} (spot in us-central1-a): capacity: creating nodeclaim"
    )
    assert event["message"].endswith(
        f"asked for the next option with pod gpu-platform-capacity/gpu-fallback-h100-8x-x7k2p: {B_SPOT}, {A_OD}, {B_OD} "
        f"(the platform takes the cheapest: {B_SPOT} (spot in us-central1-b))"
    )
    # Round 3: Karpenter launched a claim on b-spot for it: the request pod goes, the team's pod takes that node.
    assert seen[2] == {"created": [], "deleted": ["gpu-fallback-h100-8x-x7k2p"], "events": []}
    # Round 4: Karpenter deleted the failed claim; nothing more to do, and nothing is acted on twice.
    assert seen[3] == {"created": [], "deleted": [], "events": []} and api.pods == {}
    # Round 5: back to the preferred option for a new node: Karpenter's own claim, untouched.
    assert seen[4] == {"created": [], "deleted": [], "events": []}
    # By then a-spot no longer counts as unavailable (its time is up), so no metric says it is out; it
    # is still remembered, so that a failure soon after goes on the same run of failures.
    at_last = at(SEQUENCE["rounds"][-1]["at"])
    assert list(memory.unavailable) == [A_SPOT] and not memory.unavailable[A_SPOT].counts(at_last) and memory.exhausted == {}
    cf.record(metrics, cf.Decision([], [], [], [], memory), [], CONFIG, at_last)
    assert f"{cf.UNAVAILABLE_SINCE}{{" not in metrics.render()


def test_the_next_failure_moves_on_to_the_third_option_and_then_says_every_option_is_out():
    """b-spot fails too (the request's own claim), then on-demand in both zones: each time the next
    request asks for what is left, cheapest first; with nothing left it asks for nothing."""
    rounds = copy.deepcopy(SEQUENCE["rounds"][:2])

    def failing(name: str, uid: str, created: str, types: list[str]) -> dict:
        message = "creating nodeclaim: The zone does not have enough resources available to fulfill the request."
        return {"name": name, "uid": uid, "created": created, "nodeTypes": types, "launched": {"status": "Unknown", "reason": "LaunchFailed", "message": message}}

    rounds.append({"at": "2026-03-02T09:01:30Z", "claims": [failing("h100-8x-r9m4q", "c2", "2026-03-02T09:00:52Z", [A_OD, B_OD, B_SPOT])]})
    rounds.append({"at": "2026-03-02T09:02:30Z", "claims": [failing("h100-8x-k2v7s", "c3", "2026-03-02T09:01:45Z", [A_OD, B_OD])]})
    rounds.append({"at": "2026-03-02T09:03:30Z", "claims": [failing("h100-8x-m5n1c", "c4", "2026-03-02T09:02:45Z", [B_OD])]})
    seen, api, memory, metrics = replay(rounds)
    [second] = seen[2]["created"]
    assert requested(second) == [A_OD, B_OD] and platform_takes(requested(second), COSTS) == A_OD
    assert seen[2]["deleted"] == ["gpu-fallback-h100-8x-x7k2p"]  # superseded: its own claim failed
    [third] = seen[3]["created"]
    assert requested(third) == [B_OD] and seen[3]["deleted"] == ["gpu-fallback-h100-8x-r9m4q"]
    # The last option failed too: no request is left asking for anything.
    assert seen[4]["created"] == [] and seen[4]["deleted"] == ["gpu-fallback-h100-8x-k2v7s"] and api.pods == {}
    [event] = seen[4]["events"]
    assert event["reason"] == cf.EXHAUSTED
    assert "every node type it listed has failed within the last 600 s (all since 2026-03-02T09:03:30+00:00)" in event["message"]
    # Every option out since the last of them failed.
    assert memory.exhausted[POOL][0] == at("2026-03-02T09:03:30Z")
    text = metrics.render()
    assert f'{cf.EXHAUSTED_SINCE}{{pool="h100-8x",gpu="nvidia-h100-80gb"}} {at("2026-03-02T09:03:30Z").timestamp():.3f}' in text
    assert f'{cf.FAILURES_TOTAL}{{pool="h100-8x",gpu="nvidia-h100-80gb",node_type="{B_OD}",option="on-demand",zone="us-central1-b",reason="capacity"}} 1' in text
    # Four options unavailable, each since its first failure.
    assert text.count(f"{cf.UNAVAILABLE_SINCE}{{") == 4


# --- the decision in the other cases -------------------------------------------------------------------


def claim(name: str, types: list[str], *, created: str = "2026-03-02T09:00:00Z", launched: dict | None = None, **extra) -> dict:
    return nodeclaim({"name": name, "uid": f"uid-{name}", "created": created, "nodeTypes": types, "launched": launched or {"status": "Unknown"}, **extra})


T0 = at("2026-03-02T09:01:00Z")
# A Launched condition as Karpenter sets it after a stockout (its message: Compute Engine's, through the provider).
STOCKOUT = {"status": "Unknown", "reason": "LaunchFailed", "message": "creating nodeclaim: ... does not have enough resources available to fulfill the request"}


def decide(claims: list[dict], memory: cf.Memory | None = None, requests: list[dict] = (), now: dt.datetime = T0, config: dict = CONFIG) -> cf.Decision:
    return cf.decide(cf.parse_claims(claims, PROVIDER), cf.parse_requests(list(requests)), config, now, memory or cf.Memory())


ALL = [A_SPOT, B_SPOT, A_OD, B_OD]


def test_a_claim_that_is_only_launching_or_launched_is_left_alone():
    # Karpenter initialises Launched as Unknown without a reason (awslabs/operatorpkg condition_set.go `For`);
    # older releases wrote AwaitingReconciliation.
    for launched in ({"status": "Unknown"}, {"status": "Unknown", "reason": "AwaitingReconciliation"}, {"status": "True"}):
        decision = decide([claim("c", ALL, launched=launched)])
        assert (decision.failures, decision.requests) == ([], [])


@pytest.mark.parametrize(
    "message, reason",
    [
        ("googleapi: Error 403: Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 8.0 in region us-central1.", cf.QUOTA),
        ("operation failed: metric name = compute.googleapis.com/preemptible_nvidia_h100_gpus, limit name = ...", cf.QUOTA),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone ... does not have enough resources available to fulfill the request", cf.CAPACITY),
    ],
)
def test_why_a_claim_failed_is_read_from_its_message(message, reason):
    [failure] = decide([claim("c", ALL, launched={"status": "Unknown", "reason": "LaunchFailed", "message": message})]).failures
    assert failure.reason == reason and failure.node_types == (A_SPOT,)


@pytest.mark.parametrize("status", ["Unknown", "False"])
def test_any_other_reason_is_acted_on_only_once_the_claim_went_without_launching(status):
    """Karpenter sets LaunchFailed with whatever the provider returned while it retries, which may
    still end in a launch: only a stockout or quota text is acted on at once; anything else once the
    claim is gone (or going) without having launched, with what it said last."""
    message = "Error creating instance: googleapi: Error 400: Invalid value for field 'resource.machineType'"
    said = {"status": status, "reason": "LaunchFailed", "message": message}
    first = decide([claim("c", ALL, launched=said)])
    assert (first.failures, first.requests) == ([], []) and set(first.memory.unlaunched) == {"uid-c"}
    # It launched after all: never a failure.
    assert decide([claim("c", ALL, launched={"status": "True"}, launchedAs=A_SPOT)], memory=first.memory).failures == []
    [failure] = decide([], memory=first.memory).failures
    assert (failure.reason, failure.message, failure.node_types) == (cf.LAUNCH_FAILED, message, (A_SPOT,))
    going = claim("c", ALL, launched=said)
    going["metadata"]["deletionTimestamp"] = "2026-03-02T09:05:00Z"
    [failure] = decide([going], memory=first.memory).failures
    assert failure.reason == cf.LAUNCH_FAILED


def test_a_claim_gone_before_it_launched_failed_too():
    """Karpenter deletes a claim at once on an insufficient-capacity error and after its launch
    timeout otherwise; the fallback saw it launching the round before."""
    first = decide([claim("c", ALL)])
    assert first.failures == [] and set(first.memory.unlaunched) == {"uid-c"}
    gone = decide([], memory=first.memory)
    [failure] = gone.failures
    assert (failure.reason, failure.node_types) == (cf.NOT_LAUNCHED, (A_SPOT,))
    [request] = gone.requests
    assert request.node_types == (B_SPOT, A_OD, B_OD)
    # Being deleted counts the same, once.
    deleting = decide([claim("c", ALL, launched={"status": "Unknown"})], memory=first.memory)
    assert deleting.failures == []
    marked = claim("c", ALL)
    marked["metadata"]["deletionTimestamp"] = "2026-03-02T09:00:55Z"
    once = decide([marked], memory=first.memory)
    assert len(once.failures) == 1 and decide([], memory=once.memory).failures == []


def test_the_type_the_message_names_is_the_one_that_failed():
    message = f"node claim failed: node type {B_SPOT} ... does not have enough resources available"
    [failure] = decide([claim("c", ALL, launched={"status": "Unknown", "reason": "LaunchFailed", "message": message})]).failures
    assert failure.node_types == (B_SPOT,)
    # A name that only begins like a listed type names none of them: the cheapest is taken.
    longer = message.replace(B_SPOT, f"{B_SPOT}-drill")
    [failure] = decide([claim("c", ALL, launched={"status": "Unknown", "reason": "LaunchFailed", "message": longer})]).failures
    assert failure.node_types == (A_SPOT,)


def test_a_reserved_slice_already_full_is_not_what_failed():
    """The platform skips a type at its maxCapacity: with the team's slice of a reservation filled by a
    launched claim, a failed claim listing it failed on the next type."""
    reserved = copy.deepcopy(CONFIG)
    reserved["pools"][POOL]["nodeTypes"] = {"rsv-research-h100-research": {"cost": 1, "option": "reservation", "zone": "us-central1-a", "maxCapacity": 1},
                                            **reserved["pools"][POOL]["nodeTypes"]}
    listed = ["rsv-research-h100-research", *ALL]
    holding = claim("r", listed, launched={"status": "True"}, launchedAs="rsv-research-h100-research")
    [failure] = decide([holding, claim("c", listed, launched=STOCKOUT)], config=reserved).failures
    assert failure.node_types == (A_SPOT,)
    # Not full (the claim on it went): the reserved slice is the one that failed.
    [failure] = decide([claim("c", listed, launched=STOCKOUT)], config=reserved).failures
    assert failure.node_types == ("rsv-research-h100-research",)


def test_types_tied_at_the_lowest_cost_all_count_as_failed():
    """The platform's pick among equal costs is not documented: every tied type is left out."""
    tied = copy.deepcopy(CONFIG)
    tied["pools"][POOL]["nodeTypes"][B_SPOT]["cost"] = tied["pools"][POOL]["nodeTypes"][A_SPOT]["cost"]
    launched = STOCKOUT
    decision = decide([claim("c", ALL, launched=launched)], config=tied)
    assert decision.failures[0].node_types == (A_SPOT, B_SPOT) and decision.requests[0].node_types == (A_OD, B_OD)


def test_one_stockout_asks_for_one_fallback_node_however_often_karpenter_retries():
    """Karpenter's retries of the stocked-out type are claims of their own, each failing the same way:
    while a request for the same next types waits, they ask for nothing more (one fallback VM)."""
    decision = decide([claim(f"c{i}", ALL, launched=STOCKOUT) for i in range(3)])
    assert len(decision.failures) == 3 and [r.name for r in decision.requests] == ["gpu-fallback-c0"]
    api = FakeApi([claim("c0", ALL, launched=STOCKOUT)])
    api.now = T0
    memory = cf.run_once(api, CONFIG, cf.Memory(), cf.Registry(cf.METRICS), now=T0)
    # A minute later Karpenter's next claim fails on a-spot too: the request still waits, nothing is added.
    retry = claim("c1", ALL, created="2026-03-02T09:01:30Z", launched=STOCKOUT)
    later = decide([claim("c0", ALL, launched=STOCKOUT), retry], memory=memory, requests=list(api.pods.values()), now=T0 + dt.timedelta(seconds=60))
    assert [f.claim.name for f in later.failures] == ["c1"] and later.requests == [] and later.delete == []


def test_it_never_asks_for_more_nodes_than_the_pool_may_have_at_once():
    """Requests for different lists (the requests' own claims failing in turn) wait side by side, up
    to maxNodes: with two waiting (maxNodes 2), a third list asks for nothing."""

    def waiting(name: str, types: list[str]) -> dict:
        labels = {"app.kubernetes.io/name": cf.REQUEST_APP, cf.REQUEST_POOL: POOL}
        notes = {cf.REQUEST_CLAIM: name, cf.REQUEST_TYPES: ",".join(types)}
        return {"metadata": {"name": f"gpu-fallback-{name}", "labels": labels, "annotations": notes, "creationTimestamp": "2026-03-02T09:00:30Z"}, "spec": {}}

    requests = [waiting("r1", [B_SPOT, A_OD, B_OD]), waiting("r2", [A_OD, B_OD])]
    found = decide([claim("c", [A_SPOT, B_OD], created="2026-03-02T09:00:40Z", launched=STOCKOUT)], requests=requests)
    assert len(found.failures) == 1 and found.requests == [] and found.delete == []
    assert decide([claim("c", [A_SPOT, B_OD], created="2026-03-02T09:00:40Z", launched=STOCKOUT)], requests=requests[:1]).requests


def test_claims_of_other_pools_and_providers_are_not_its_business():
    other = claim("c", ALL, launched=STOCKOUT)
    other["metadata"]["labels"]["karpenter.sh/nodepool"] = "system"
    elsewhere = claim("d", ALL, launched=STOCKOUT)
    elsewhere["spec"]["requirements"][-1]["values"] = ["other-provider.large"]
    assert decide([other, elsewhere]).failures == []


def test_a_request_pod_goes_when_served_bound_or_old():
    failed = STOCKOUT
    api = FakeApi([claim("c1", ALL, launched=failed)])
    api.now = T0
    memory = cf.run_once(api, CONFIG, cf.Memory(), cf.Registry(cf.METRICS), now=T0)
    [pod] = api.pods.values()
    # Bound to a node: it holds a GPU only a team's pod should, so it goes.
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "gpu-node-1"}}
    assert decide([], memory=memory, requests=[bound]).delete == [pod["metadata"]["name"]]
    # Its source claim launched after all.
    late = claim("c1", ALL, launched={"status": "True"}, launchedAs=A_SPOT)
    assert decide([late], memory=memory, requests=[pod]).delete == [pod["metadata"]["name"]]
    # Older than its limit: Karpenter's launch timeout, twice.
    old = T0 + dt.timedelta(seconds=FALLBACK_REQUEST_SECONDS)
    assert decide([], memory=memory, requests=[pod], now=old).delete == [pod["metadata"]["name"]]
    # Otherwise it waits.
    assert decide([], memory=memory, requests=[pod], now=T0 + dt.timedelta(seconds=60)).delete == []


def test_a_failed_type_counts_as_unavailable_for_a_while_only():
    failed = STOCKOUT
    decision = decide([claim("c1", ALL, launched=failed)])
    hold = dt.timedelta(seconds=FALLBACK_UNAVAILABLE_SECONDS)
    # Its time is up: nothing counts as unavailable, though a-spot is remembered.
    idle = decide([], memory=decision.memory, now=T0 + hold + dt.timedelta(seconds=1))
    assert not idle.memory.unavailable[A_SPOT].counts(T0 + hold + dt.timedelta(seconds=1))
    # It fails again soon after (Karpenter's next claim tries it first): the same run of failures,
    # since its first failure, and the request leaves out only it.
    later = T0 + hold + dt.timedelta(seconds=30)
    again = decide([claim("c2", ALL, created="2026-03-02T09:11:20Z", launched=failed)], memory=idle.memory, now=later)
    assert again.memory.unavailable[A_SPOT] == cf.Unavailable(T0, later + hold) and again.requests[0].node_types == (B_SPOT, A_OD, B_OD)
    # Not failed for twice its time: forgotten, and a failure after that starts a fresh run, since then.
    much_later = later + 2 * hold + dt.timedelta(seconds=1)
    fresh = decide([claim("c3", ALL, created="2026-03-02T09:51:00Z", launched=failed)], memory=again.memory, now=much_later)
    assert fresh.memory.unavailable[A_SPOT].since == much_later and fresh.requests[0].node_types == (B_SPOT, A_OD, B_OD)


# --- what it writes ------------------------------------------------------------------------------------


def test_request_pods_and_events_are_what_kubernetes_accepts(capsys):
    seen, _, _, _ = replay(SEQUENCE["rounds"][:2])
    [pod], [event] = seen[1]["created"], seen[1]["events"]
    for document in (pod, event):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    spec = pod["spec"]
    # Lowest priority, never preempting (its PriorityClass), no token, nothing of the node's.
    assert spec["priorityClassName"] == fd.PRIORITY_CLASS and spec["automountServiceAccountToken"] is False
    assert not any(k.startswith("host") for k in spec) and "volumes" not in spec
    [container] = spec["containers"]
    assert container["image"] == versions.WATCHDOG_IMAGE and container["resources"]["limits"]["nvidia.com/gpu"] == "8"  # the claim's
    # The Pod Security Standard "restricted", which its namespace enforces.
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    # The failed claim's own requirements and taints, its node types cut.
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    template = SEQUENCE["claimTemplate"]["spec"]
    assert term["matchExpressions"][:-1] == template["requirements"]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    out, err = capsys.readouterr()
    assert out == f"gpu-capacity-fallback: {cf.OPTION_FAILED}: {event['message']}\n" and err == ""


def test_a_refused_request_is_reported_as_such(capsys):
    api = FakeApi([], refused={("POST", cf.PODS): 403})
    seen, _, _, metrics = replay(SEQUENCE["rounds"][:2], api=api)
    [event] = seen[1]["events"]
    assert event["reason"] == cf.REFUSED and event["message"].endswith(f"could not ask for the next option: POST {cf.PODS} answered 403 Forbidden: not allowed")
    assert cf.REQUESTS_TOTAL + "{" not in metrics.render()
    assert capsys.readouterr().err.startswith(f"gpu-capacity-fallback: {cf.REFUSED}: ")


def test_its_metrics_are_what_prometheus_reads(tmp_path):
    """Prometheus' own linter on what the collector scrapes (promtool check metrics)."""
    promtool = require(shutil.which("promtool"), "promtool is not on PATH: install the Debian or Ubuntu package prometheus, which ships it")
    _, _, _, metrics = replay(SEQUENCE["rounds"][:2])
    text = metrics.render()
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f'{cf.REQUESTS_TOTAL}{{pool="h100-8x",gpu="nvidia-h100-80gb",node_type="{B_SPOT}",option="spot",zone="us-central1-b"}} 1' in text
    # The check fails on what Prometheus refuses.
    refused = subprocess.run([promtool, "check", "metrics"], input=text.replace("# TYPE", "# TYPE broken"), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0


# --- its objects in the tenant --------------------------------------------------------------------------


def test_its_rbac_is_exactly_what_its_calls_need(dev_run):
    """Every call the program makes in the sequences above, as RBAC verb and resource, equals the rules it is granted."""
    _, api, _, _ = replay(SEQUENCE["rounds"])
    needed = rbac_needed(api.calls)
    objects = tenant_objects(dev_run, "nlp")
    name = f"gpu-platform:{fd.NAME}"
    granted = set()
    for kind, role, namespace in (("ClusterRole", name, None), ("Role", f"{name}-requests", fd.NAMESPACE), ("Role", f"{name}-events", "default")):
        rules = named(objects, kind, role, namespace)["rules"]
        granted |= {((r["apiGroups"][0], res, namespace), v) for r in rules for res in r["resources"] for v in r["verbs"]}
        binding = named(objects, "ClusterRoleBinding" if kind == "ClusterRole" else "RoleBinding", role, namespace)
        assert binding["roleRef"]["name"] == role and binding["subjects"] == [{"kind": "ServiceAccount", "name": fd.NAME, "namespace": fd.NAMESPACE}]
    assert granted == needed


@pytest.fixture(scope="module")
def objects(dev_run) -> list[dict]:
    return tenant_objects(dev_run, "nlp")


def test_it_runs_the_shipped_program_with_each_pools_node_types_and_their_order(objects, dev_run):
    config_map = named(objects, "ConfigMap", fd.NAME, fd.NAMESPACE)
    assert config_map["data"]["capacity_fallback.py"] == Path(cf.__file__).read_text()
    assert config_map["data"]["tenant_api.py"] == fd.TENANT_API and config_map["data"]["tenant_metrics.py"] == fd.TENANT_METRICS
    assert config_map["data"]["capacity_claims.py"] == fd.CLAIMS
    config = json.loads(config_map["data"]["config.json"])
    [provider] = dev_run.of_type("kubernetes:management.loft.sh/v1:NodeProvider")
    assert config["provider"] == provider.input("metadata", "name")
    # Per node type the pool selects, the cost the NodeProvider gives it: the order the platform follows.
    costs = {nt["name"]: nt.get("cost") for nt in provider.input("spec", "terraform", "nodeTypes")}
    [pool] = config["pools"].values()
    assert pool["nodeTypes"] and all(spec["cost"] == costs[name] for name, spec in pool["nodeTypes"].items())
    assert (config["unavailableSeconds"], config["requestSeconds"], config["priorityClass"]) == (600, 600, fd.PRIORITY_CLASS)


def test_it_runs_unprivileged_on_the_cpu_pool_and_its_requests_come_last(objects):
    namespace = named(objects, "Namespace", fd.NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = named(objects, "Deployment", fd.NAME, fd.NAMESPACE)["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["python", "/opt/gpu-capacity-fallback/capacity_fallback.py", "/etc/gpu-capacity-fallback/config.json"]
    assert pod["nodeSelector"] == {"gpu-platform/pool": "system"} and "tolerations" not in pod
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert [v["configMap"]["items"] for v in pod["volumes"]][0] == [{"key": f, "path": f} for f in ("capacity_fallback.py", "capacity_claims.py", "tenant_api.py", "tenant_metrics.py")]
    priority = named(objects, "PriorityClass", fd.PRIORITY_CLASS)
    assert priority["value"] < 0 and priority["preemptionPolicy"] == "Never" and priority["globalDefault"] is False


def test_the_programs_need_only_the_standard_library():
    for module in (cf, fd.capacity_claims, fd.tenant_api, fd.tenant_metrics):
        imported = {
            line.split()[1].lstrip(".").split(".")[0]
            for line in Path(module.__file__).read_text().splitlines()
            if line.lstrip().startswith(("import ", "from ")) and "__future__" not in line
        }
        assert imported <= {"datetime", "json", "os", "re", "ssl", "sys", "threading", "time", "urllib", "dataclasses", "http", "capacity_claims", "tenant_api", "tenant_metrics"}, imported


@pytest.mark.parametrize("configmap, program", [(fd.NAME, "capacity_fallback.py"), ("gpu-watchdog", "gpu_watchdog.py")])
def test_each_program_imports_what_is_shipped_beside_it_and_nothing_else(objects, tmp_path, configmap, program):
    """Run as the tenant runs it: its ConfigMap's files in one directory, a bare interpreter with
    nothing of the repository on its path (-I)."""
    namespace = fd.NAMESPACE if configmap == fd.NAME else "gpu-platform-system"
    for name, text in named(objects, "ConfigMap", configmap, namespace)["data"].items():
        (tmp_path / name).write_text(text)
    check = f"import runpy, sys; sys.path.insert(0, {str(tmp_path)!r}); module = runpy.run_path({str(tmp_path / program)!r}, run_name='shipped'); print(module['Api'].__module__)"
    ran = subprocess.run([sys.executable, "-I", "-c", check], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "tenant_api"


def test_the_gpu_nodes_page_says_what_it_does():
    """docs/gpu-nodes.md "Stockouts and fallback": its figures and names are the program's."""
    from config.reliability import FALLBACK_POLL_SECONDS
    from docs_support import section

    text = " ".join(section("Stockouts and fallback", "docs/gpu-nodes.md").split())
    assert f"Every {FALLBACK_POLL_SECONDS} seconds it lists Karpenter's NodeClaims" in text
    assert f"It counts as out for {FALLBACK_UNAVAILABLE_SECONDS // 60} minutes" in text
    assert f"A request pod lives at most {FALLBACK_REQUEST_SECONDS // 60} minutes" in text
    assert f"(PriorityClass `{fd.PRIORITY_CLASS}`, `{fd.REQUEST_PRIORITY}`, never preempting)" in text
    assert f"(`{fd.NAME}`, namespace `{fd.NAMESPACE}`" in text and f"kubectl get pods -n {fd.NAMESPACE}" in text
    assert all(f"`{reason}`" in text for reason in (cf.OPTION_FAILED, cf.EXHAUSTED, cf.REFUSED))
    assert f"kubectl get events -n {cf.EVENT_NAMESPACE} --field-selector reason={cf.OPTION_FAILED}" in text
    assert f"metric `{cf.EXHAUSTED_SINCE}`" in text and "`monitoring.alerts.capacityShortageAfter`" in text


def test_request_pods_count_neither_as_waiting_nor_as_holding_gpus():
    """They ask for a node on the team's pods' behalf: the pending count, the allocated GPUs and the
    alerts built on them leave their namespace out."""
    from components import monitoring_queries as q

    for query in (q.pending_gpu_pods("vision"), q.gpus_allocated("vision"), q.capacity_shortage(__import__("config.monitoring").monitoring.Alerts()).query):
        assert f'namespace!="{fd.NAMESPACE}"' in query, query


def test_a_request_asks_for_the_gpus_the_failed_claims_pods_asked_for():
    """An 8-GPU pool: the request pod asks for the claim's 8 GPUs, so Karpenter offers it only types
    with 8 (and every type it may list fitted the team's pods already)."""
    eight = copy.deepcopy(SEQUENCE["claimTemplate"])
    entry = {"name": "c8", "uid": "u8", "created": "2026-03-02T09:00:00Z", "nodeTypes": ALL, "launched": STOCKOUT}
    [request] = decide([nodeclaim(entry, eight)]).requests
    pod = cf.request_pod(request, CONFIG)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # Its CPU and memory are the least: the claim's hold Karpenter's daemon overhead, which it would add again.
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1m", "memory": "8Mi"}


def test_the_shortage_alert_and_its_tiles_parse_with_the_real_parser_and_googles_dashboard_types(dev_run, tenant_run):
    """The capacity-shortage alert per team, pool and GPU, by the PromQL parser Prometheus' own
    grammar generates (promql-parser); the tiles per team and option by Google's Dashboard type."""
    import promql_parser
    from google.cloud.monitoring_dashboard_v1.types import Dashboard

    [policy] = [p for p in dev_run.of_type("gcp:monitoring/alertPolicy:AlertPolicy") if p.name.endswith("-capacity-shortage")]
    [condition] = policy.input("conditions")
    query = condition["conditionPrometheusQueryLanguage"]["query"]
    names: list[str] = []
    promql_parser.walk(promql_parser.parse(query), lambda n: names.append(n.name) if isinstance(n, promql_parser.VectorSelector) else None)
    assert set(names) == {cf.EXHAUSTED_SINCE, "kube_pod_status_unschedulable", "kube_pod_container_resource_requests"}
    # By team, pool and GPU: what the alert's notification names; its value, seconds since every option was out.
    assert query.startswith(f"(time() - max by (tenant, pool, gpu) ({cf.EXHAUSTED_SINCE}))")
    assert condition["conditionPrometheusQueryLanguage"]["duration"] == "600s"
    titles = {}
    for run in (dev_run, tenant_run):
        for dashboard in run.of_type("gcp:monitoring/dashboard:Dashboard"):
            parsed = Dashboard.from_json(dashboard.input("dashboardJson"))  # unknown fields are errors
            for tile in parsed.mosaic_layout.tiles:
                titles[tile.widget.title] = tile.widget
    team_tile = titles["GPU options out of capacity: minutes since each failed first"]
    assert cf.UNAVAILABLE_SINCE in team_tile.xy_chart.data_sets[0].time_series_query.prometheus_query
    environment_tile = titles["GPU options out of capacity, per team and option"]
    promql_parser.parse(environment_tile.xy_chart.data_sets[0].time_series_query.prometheus_query)
    assert "GPU node claims failed in the last hour, per option and why" in titles
