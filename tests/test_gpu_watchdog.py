"""The GPU watchdog (components/gpu_watchdog.py): its decision as plain code (nodes, times and
allocatable in, the nodes to remove out), what it does with the tenant's API, and its objects in
the tenant (components/watchdog_documents.py) with exactly the RBAC its calls need."""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import kubernetes_validate
import pytest

from components import gpu_watchdog as wd
from components.watchdog_documents import CLUSTER_RULES, EVENT_RULES, NAME, NAMESPACE
from config import versions
from docs_support import section
from tenant_objects import named, rbac_needed, tenant_objects

K8S_VERSION = "1.33.0"
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)


def node(name: str, *, pool: str = "l4-1x", gpu: bool = True, created: dt.datetime = T0, capacity: int | None = None,
         allocatable: int | None = None, deleting: bool = False, karpenter: bool = True) -> dict:
    """A Node as the tenant's API lists it, with what the decision reads; `karpenter`: registered by
    Karpenter, which puts its termination finalizer on it."""
    labels = {"gpu-platform/pool": pool, "kubernetes.io/hostname": name}
    if gpu:
        labels["gpu-platform/gpu"] = "nvidia-l4"
    status: dict = {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "7910m", "memory": "28Gi"}}
    if capacity is not None:
        status["capacity"][wd.GPU_RESOURCE] = str(capacity)
    if allocatable is not None:
        status["allocatable"][wd.GPU_RESOURCE] = str(allocatable)
    meta = {"name": name, "uid": f"uid-{name}", "labels": labels, "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if deleting:
        meta["deletionTimestamp"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    if karpenter:
        meta["finalizers"] = [wd.TERMINATION_FINALIZER]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}


def claim(name: str, node_name: str | None, *, deleting: bool = False) -> dict:
    meta = {"name": name, **({"deletionTimestamp": T0.isoformat()} if deleting else {})}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "status": {"nodeName": node_name} if node_name else {}}


def minutes(n: float) -> dt.timedelta:
    return dt.timedelta(minutes=n)


def decide(nodes, claims=(), *, now, seen=None, limits=None):
    return wd.decide(wd.gpu_nodes(list(nodes)), wd.claims_by_node(list(claims)), limits or {"l4-1x": 600}, 600, now, seen or wd.Seen())


# --- the decision ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capacity, allocatable, age, removed",
    [
        (1, 1, 60, False),  # offers its GPU
        (None, None, 9.9, False),  # still initializing, within the limit
        (None, None, 10, True),  # never offered, limit reached
        (0, 0, 30, True),  # capacity reported as 0: never offered either
        (None, None, 240, True),
        (2, 1, 240, False),  # one of two GPUs unhealthy: still does work
    ],
)
def test_a_gpu_node_that_never_offered_its_gpu_goes_after_the_limit(capacity, allocatable, age, removed):
    removals, _ = decide([node("n1", capacity=capacity, allocatable=allocatable)], [claim("l4-1x-abc", "n1")], now=T0 + minutes(age))
    assert [r.node for r in removals] == (["n1"] if removed else [])
    if removed:
        [r] = removals
        assert (r.claim, r.karpenter, r.reason, r.uid) == ("l4-1x-abc", True, wd.NEVER_OFFERED, "uid-n1")
        assert r.message == "GPU node n1 of pool l4-1x has offered no nvidia.com/gpu since it joined at 2026-03-02T09:00:00+00:00, longer than 600 s"


OLD = T0 - minutes(600)  # a node that joined long before its GPUs went: its age must not count


def rounds(states: list[tuple[float, dict]], seen=None) -> tuple[list[list[wd.Removal]], wd.Seen]:
    """n1 (of OLD), round after round: (minutes after T0, its capacity and allocatable); the
    removals of each round and what the last one saw."""
    removals = []
    for at_minute, gpus in states:
        removed, seen = decide([node("n1", created=OLD, **gpus)], [claim("c1", "n1")], now=T0 + minutes(at_minute), seen=seen)
        removals.append(removed)
    return removals, seen


OFFERING, UNHEALTHY, DROPPED = {"capacity": 1, "allocatable": 1}, {"capacity": 1, "allocatable": 0}, {"capacity": 0, "allocatable": 0}


def test_a_node_that_lost_its_gpus_goes_the_limit_after_it_was_first_seen_so_whatever_its_capacity_then():
    """The kubelet keeps a withdrawn device plugin's GPUs as unhealthy capacity, then five minutes
    later drops them to a capacity of 0: the node stays lost, on the clock of the first round that
    saw it without them, and is not taken for never offered since it joined."""
    removals, seen = rounds([(0, OFFERING), (1, UNHEALTHY), (5.5, UNHEALTHY), (6.5, DROPPED), (10.9, DROPPED)])
    assert removals == [[]] * 5 and seen == wd.Seen(frozenset(), {"uid-n1": T0 + minutes(1)})
    [removal], seen = decide([node("n1", created=OLD, **DROPPED)], [claim("c1", "n1")], now=T0 + minutes(11), seen=seen)
    assert (removal.reason, removal.claim) == (wd.LOST, "c1")
    assert removal.message == (
        "GPU node n1 of pool l4-1x has offered no nvidia.com/gpu since 2026-03-02T09:01:00+00:00 (its GPUs are gone from its capacity too), longer than 600 s"
    )
    # While the capacity is still there, the message says the GPUs are unhealthy.
    [[], [removal]], _ = rounds([(0, UNHEALTHY), (10, UNHEALTHY)])
    assert removal.reason == wd.LOST and "since 2026-03-02T09:00:00+00:00 (its 1 GPUs are unhealthy)" in removal.message


def test_a_node_seen_offering_that_goes_straight_to_capacity_0_is_lost_from_when_that_was_seen():
    removals, seen = rounds([(0, OFFERING), (1, DROPPED), (10.9, DROPPED)])
    assert removals == [[]] * 3 and seen.lost_since == {"uid-n1": T0 + minutes(1)}
    [[removal]], _ = rounds([(11, DROPPED)], seen)
    assert removal.reason == wd.LOST and "since 2026-03-02T09:01:00+00:00 (its GPUs are gone from its capacity too)" in removal.message


def test_a_node_never_seen_offering_is_timed_from_when_it_joined():
    """Also what a restarted watchdog, which has seen nothing, makes of a lost node whose capacity
    is 0 already (module docstring): removed at its first round, as never offered."""
    [[removal]], seen = rounds([(0, DROPPED)])
    assert removal.reason == wd.NEVER_OFFERED and "since it joined at 2026-03-01T23:00:00+00:00" in removal.message
    assert seen == wd.Seen()  # nothing to remember: its clock is its creation


def test_a_node_whose_gpus_come_back_has_its_loss_forgotten():
    removals, seen = rounds([(0, OFFERING), (1, UNHEALTHY), (5, OFFERING)])
    assert removals == [[]] * 3 and seen == wd.Seen(frozenset({"uid-n1"}), {})
    # Lost again later: a new clock, from the round that sees it so.
    removals, seen = rounds([(8, DROPPED), (17.9, DROPPED), (18, DROPPED)], seen)
    assert removals[:2] == [[], []] and [r.reason for r in removals[2]] == [wd.LOST] and seen.lost_since == {"uid-n1": T0 + minutes(8)}


def test_a_node_gone_is_dropped_from_what_it_remembers():
    seen = wd.Seen(frozenset({"uid-gone", "uid-n1"}), {"uid-lost-gone": T0, "uid-n2": T0})
    _, seen = decide([node("n1", **OFFERING), node("n2", **DROPPED)], now=T0 + minutes(1), seen=seen)
    assert seen == wd.Seen(frozenset({"uid-n1"}), {"uid-n2": T0})
    # A Node of the same name but another uid is another node: it has offered nothing yet.
    reborn = node("n1", created=OLD, **DROPPED)
    reborn["metadata"]["uid"] = "uid-n1-again"
    [removal], seen = decide([reborn], now=T0 + minutes(2), seen=seen)
    assert removal.reason == wd.NEVER_OFFERED and seen == wd.Seen()


def test_each_pool_has_its_own_limit():
    nodes = [node("fast", pool="t4-1x-spot"), node("slow", pool="a100-8x")]
    limits = {"t4-1x-spot": 300, "a100-8x": 1800}
    removals, _ = decide(nodes, [claim("c-fast", "fast"), claim("c-slow", "slow")], now=T0 + minutes(6), limits=limits)
    assert [r.node for r in removals] == ["fast"]
    removals, _ = decide(nodes, [claim("c-fast", "fast"), claim("c-slow", "slow")], now=T0 + minutes(30), limits=limits)
    assert [r.node for r in removals] == ["fast", "slow"]


def test_cpu_nodes_and_nodes_already_going_are_left_alone():
    nodes = [node("cpu", gpu=False, pool="system"), node("going", deleting=True), node("draining")]
    claims = [claim("c1", "cpu"), claim("c2", "going"), claim("c3", "draining", deleting=True)]  # c3: deleted, Karpenter drains
    assert decide(nodes, claims, now=T0 + minutes(60)) == ([], wd.Seen())


def test_a_node_no_claim_launched_has_no_claim_to_delete():
    claims = [claim("other", "n2"), claim("unlaunched", None)]
    [removal] = decide([node("n1", karpenter=False)], claims, now=T0 + minutes(11))[0]
    assert (removal.node, removal.claim, removal.karpenter) == ("n1", None, False)


# --- against the tenant's API: what it does, and what it does when refused -----------------------


class FakeApi:
    """The tenant's API server as the watchdog calls it: lists what it holds, deletes, and answers
    `refused` requests ((method, path) → status) with that status, as Api.call raises it."""

    def __init__(self, nodes: list[dict], claims: list[dict], refused: dict[tuple[str, str], int] | None = None):
        self.nodes, self.claims, self.refused, self.calls = nodes, claims, dict(refused or {}), []

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        self.calls.append((method, path, body))
        if (method, path) in self.refused:
            status = self.refused[method, path]
            raise wd.ApiError(method, path, status, {403: "Forbidden: not allowed", 404: "NotFound: not found"}.get(status, "InternalError: try again"))
        if (method, path) == ("GET", wd.NODES):
            return {"kind": "NodeList", "items": self.nodes}
        if (method, path) == ("GET", wd.NODECLAIMS):
            return {"kind": "NodeClaimList", "items": self.claims}
        return {}

    def requests(self, method: str) -> list[str]:
        return [p for m, p, _ in self.calls if m == method]

    def events(self) -> list[dict]:
        return [b for m, _, b in self.calls if m == "POST"]


CONFIG = {"poolLimitSeconds": {"l4-1x": 600}, "defaultLimitSeconds": 600, "intervalSeconds": 30}
CLAIM_C1, NODE_N1 = f"{wd.NODECLAIMS}/c1", f"{wd.NODES}/n1"
CAUSE = "GPU node n1 of pool l4-1x has offered no nvidia.com/gpu since it joined at 2026-03-02T08:40:00+00:00, longer than 600 s"


def stale(**kwargs) -> dict:
    """n1, a GPU node that never offered its GPU, joined 20 minutes before T0."""
    return node("n1", created=T0 - minutes(20), **kwargs)


def one_round(api: FakeApi, capsys) -> tuple[wd.Round, dict, str, str]:
    """One round: its result, the one event it recorded (checked as Kubernetes reads it), stdout, stderr."""
    result = wd.run_once(api, CONFIG, wd.Seen(), set(), now=T0)
    [event] = api.events()
    kubernetes_validate.validate(event, K8S_VERSION, strict=True)
    assert api.requests("POST") == ["/api/v1/namespaces/default/events"]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"}
    assert (event["type"], event["source"]) == ("Warning", {"component": "gpu-platform-watchdog"})
    out, err = capsys.readouterr()
    return result, event, out, err


def test_a_removal_deletes_the_node_claim_and_records_one_event(capsys):
    api = FakeApi([stale(), node("n2", created=T0 - minutes(20), capacity=1, allocatable=1)], [claim("c1", "n1"), claim("c2", "n2")])
    result, event, out, err = one_round(api, capsys)
    assert api.requests("DELETE") == [CLAIM_C1] and result.failed == []
    assert event["reason"] == "GPUNeverOffered"
    assert event["message"] == f"{CAUSE}: deleted its NodeClaim c1; Karpenter drains the node, then the platform deletes its VM"
    assert out == f"gpu-watchdog: GPUNeverOffered: {event['message']}\n" and err == ""
    # Karpenter drains the node now: the next round deletes nothing more and records no second event.
    reported = {"n1"}
    api.claims[0]["metadata"]["deletionTimestamp"] = T0.isoformat()
    assert wd.run_once(api, CONFIG, wd.Seen(), reported, now=T0).failed == [] and api.requests("DELETE") == [CLAIM_C1] and len(api.events()) == 1


@pytest.mark.parametrize("status", [403, 404])
def test_a_refused_node_claim_delete_deletes_the_node_instead(capsys, status):
    api = FakeApi([stale()], [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): status})
    result, event, out, err = one_round(api, capsys)
    assert api.requests("DELETE") == [CLAIM_C1, NODE_N1] and result.failed == []
    assert event["reason"] == "GPUNeverOffered"
    assert event["message"] == (
        f"{CAUSE}: deleted the Node instead (DELETE {CLAIM_C1} answered {status} {'Forbidden: not allowed' if status == 403 else 'NotFound: not found'}); "
        "Karpenter's karpenter.sh/termination finalizer deletes its NodeClaim, then the platform deletes its VM"
    )
    assert out == f"gpu-watchdog: GPUNeverOffered: {event['message']}\n" and err == ""


@pytest.mark.parametrize("status", [403, 404])
def test_node_claims_it_cannot_list_leave_the_node_to_delete(capsys, status):
    api = FakeApi([stale()], [claim("c1", "n1")], refused={("GET", wd.NODECLAIMS): status})
    result, event, _, _ = one_round(api, capsys)
    assert api.requests("DELETE") == [NODE_N1] and result.failed == []
    assert event["reason"] == "GPUNeverOffered"
    assert event["message"].startswith(f"{CAUSE}: deleted the Node instead (GET {wd.NODECLAIMS} answered {status} ")


def test_when_both_deletes_are_refused_it_says_so_and_exits_non_zero(capsys, tmp_path):
    refused = {("DELETE", CLAIM_C1): 403, ("DELETE", NODE_N1): 403}
    api = FakeApi([stale()], [claim("c1", "n1")], refused=refused)
    result, event, out, err = one_round(api, capsys)
    assert api.requests("DELETE") == [CLAIM_C1, NODE_N1] and result.failed == ["n1"]
    assert event["reason"] == "GPUNodeNotRemoved"
    assert event["message"] == (
        f"{CAUSE}: not removed (DELETE {CLAIM_C1} answered 403 Forbidden: not allowed; DELETE {NODE_N1} answered 403 Forbidden: not allowed); "
        "its VM bills until an operator deletes its node claim in the platform"
    )
    assert out == "" and err == f"gpu-watchdog: GPUNodeNotRemoved: {event['message']}\n"
    # The program's own loop (on the real clock) ends with 1 after that round, so the container exits with it and restarts.
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    joined = node("n1", created=dt.datetime.now(dt.timezone.utc) - minutes(20))
    assert wd.main(["gpu_watchdog.py", str(config)], api=FakeApi([joined], [claim("c1", "n1")], refused=refused)) == 1
    assert capsys.readouterr().err.endswith("gpu-watchdog: could not remove n1: exiting 1\n")


class ChangingApi(FakeApi):
    """A FakeApi whose node list is the next of `lists` at each round (the last one stays)."""

    def __init__(self, lists: list[list[dict]], *args, **kwargs):
        super().__init__(lists[0], *args, **kwargs)
        self.lists = lists

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        if (method, path) == ("GET", wd.NODES):
            self.nodes = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        return super().call(method, path, body)


def test_each_round_goes_on_from_what_the_last_one_saw(capsys, tmp_path):
    """The program's loop hands each round what the last one saw: n1 offers its GPU, then, old
    and with a capacity of 0, is lost since that round (a limit of 0 removes it at once), not
    never offered since it joined. Its deletes are refused, so the loop ends after that round."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**CONFIG, "poolLimitSeconds": {"l4-1x": 0}, "intervalSeconds": 0}))
    lists = [[node("n1", created=OLD, **OFFERING)], [node("n1", created=OLD, **DROPPED)]]
    api = ChangingApi(lists, [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): 403, ("DELETE", NODE_N1): 403})
    assert wd.main(["gpu_watchdog.py", str(config)], api=api) == 1
    assert api.requests("GET") == [wd.NODES, wd.NODECLAIMS] * 2
    [event] = api.events()
    assert event["reason"] == wd.NOT_REMOVED and "(its GPUs are gone from its capacity too), longer than 0 s: not removed" in event["message"]
    capsys.readouterr()


def test_a_node_without_karpenters_finalizer_is_never_deleted_as_a_node(capsys):
    """Deleting it would drop the Node and leave its VM running."""
    api = FakeApi([stale(karpenter=False)], [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): 403})
    result, event, _, err = one_round(api, capsys)
    assert api.requests("DELETE") == [CLAIM_C1] and result.failed == ["n1"]
    assert event["reason"] == "GPUNodeNotRemoved"
    assert "the node has no karpenter.sh/termination finalizer, so deleting the Node would leave its VM running" in event["message"]
    assert err.startswith("gpu-watchdog: GPUNodeNotRemoved: ")


def test_karpenters_node_that_no_listed_claim_names_is_deleted_as_a_node(capsys):
    """The claims list fine, but none names n1 as its node (registration puts the finalizer on the
    node before it writes status.nodeName): the finalizer says Karpenter registered it, and
    deleting the Node has Karpenter find its claim by provider ID and delete the VM."""
    api = FakeApi([stale()], [claim("other", "n2"), claim("unregistered", None)])
    result, event, out, err = one_round(api, capsys)
    assert api.requests("DELETE") == [NODE_N1] and result.failed == []
    assert event["reason"] == "GPUNeverOffered"
    assert event["message"] == (
        f"{CAUSE}: deleted the Node instead (no NodeClaim listed names it as its node); "
        "Karpenter's karpenter.sh/termination finalizer deletes its NodeClaim, then the platform deletes its VM"
    )
    assert out == f"gpu-watchdog: GPUNeverOffered: {event['message']}\n" and err == ""


def test_karpenters_node_without_a_listed_claim_whose_delete_is_refused_fails_the_round(capsys):
    api = FakeApi([stale()], [claim("other", "n2")], refused={("DELETE", NODE_N1): 403})
    result, event, out, err = one_round(api, capsys)
    assert api.requests("DELETE") == [NODE_N1] and result.failed == ["n1"]
    assert event["reason"] == "GPUNodeNotRemoved"
    assert event["message"] == (
        f"{CAUSE}: not removed (no NodeClaim listed names it as its node; DELETE {NODE_N1} answered 403 Forbidden: not allowed); "
        "its VM bills until an operator deletes its node claim in the platform"
    )
    assert out == "" and err == f"gpu-watchdog: GPUNodeNotRemoved: {event['message']}\n"


def test_a_node_neither_a_claim_nor_karpenters_finalizer_claims_is_reported_and_left(capsys):
    """Joined by hand: deleting the Node would drop it and leave its VM running."""
    api = FakeApi([stale(karpenter=False)], [claim("other", "n2")])
    result, event, _, err = one_round(api, capsys)
    assert api.requests("DELETE") == [] and result.failed == []  # an operator's node, not the watchdog's failure
    assert event["reason"] == "GPUNodeNotRemoved"
    assert event["message"] == (
        f"{CAUSE}: not removed: no NodeClaim launched it and it has no karpenter.sh/termination finalizer (joined by hand?), "
        "so deleting the Node would leave its VM running; it is left for an operator"
    )
    assert err == f"gpu-watchdog: GPUNodeNotRemoved: {event['message']}\n"


def test_a_server_error_on_the_claim_is_tried_again_next_round(capsys):
    api = FakeApi([stale()], [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): 500})
    result = wd.run_once(api, CONFIG, wd.Seen(), reported := set(), now=T0)
    assert api.requests("DELETE") == [CLAIM_C1] and result.failed == [] and api.events() == [] and reported == set()
    assert capsys.readouterr().err == f"gpu-watchdog: {CAUSE}: DELETE {CLAIM_C1} answered 500 InternalError: try again; trying again next round\n"


class _Refusing(BaseHTTPRequestHandler):
    """A tenant API that lists n1 and its claim c1 and refuses to delete the claim, as an API
    server does (a Status object)."""

    deleted: list[str]

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        items = {wd.NODES: [stale()], wd.NODECLAIMS: [claim("c1", "n1")]}[self.path]
        self._json(200, {"items": items})

    def do_DELETE(self):  # noqa: N802
        type(self).deleted.append(self.path)
        if self.path == CLAIM_C1:
            self._json(403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "message": 'nodeclaims.karpenter.sh "c1" is forbidden', "code": 403})
        else:
            self._json(200, {"kind": "Status", "status": "Success"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self._json(201, {})

    def log_message(self, *args):  # quiet
        pass


def test_the_api_client_turns_a_refusal_into_its_status(capsys, tmp_path):
    """The real client, over HTTP on loopback: a 403 with the API server's Status object is an
    ApiError with its code and message, and the round deletes the node instead."""
    _Refusing.deleted = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        token = tmp_path / "token"
        token.write_text("a-test-token\n")
        api = wd.Api(f"http://127.0.0.1:{server.server_port}", str(token), None)
        result = wd.run_once(api, CONFIG, wd.Seen(), set(), now=T0)
    finally:
        server.shutdown()
        server.server_close()
    assert _Refusing.deleted == [CLAIM_C1, NODE_N1] and result.failed == []
    assert f'(DELETE {CLAIM_C1} answered 403 Forbidden: nodeclaims.karpenter.sh "c1" is forbidden)' in capsys.readouterr().out


BRANCHES = [  # what each branch of a round calls: its RBAC is the union
    FakeApi([stale()], [claim("c1", "n1")]),
    FakeApi([stale()], [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): 403}),
    FakeApi([stale()], [claim("c1", "n1")], refused={("DELETE", CLAIM_C1): 403, ("DELETE", NODE_N1): 403}),
    FakeApi([stale()], [], refused={("GET", wd.NODECLAIMS): 403}),
    FakeApi([stale()], [claim("other", "n2")]),
    FakeApi([stale(karpenter=False)], [claim("other", "n2")]),
]


def test_its_rbac_is_exactly_what_its_calls_need(dev_run):
    """Every call the program makes in any branch, as RBAC verb and resource, equals the rules it is granted."""
    needed = set()
    for api in BRANCHES:
        api.calls.clear()
        wd.run_once(api, CONFIG, wd.Seen(), set(), now=T0)
        needed |= rbac_needed(api.calls)
    objects = tenant_objects(dev_run, "nlp")
    cluster_role = named(objects, "ClusterRole", f"gpu-platform:{NAME}")
    role = named(objects, "Role", f"gpu-platform:{NAME}-events", wd.EVENT_NAMESPACE)
    granted = {((r["apiGroups"][0], res, None), v) for r in cluster_role["rules"] for res in r["resources"] for v in r["verbs"]}
    granted |= {((r["apiGroups"][0], res, role["metadata"]["namespace"]), v) for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
    assert granted == needed
    assert cluster_role["rules"] == [dict(r) for r in CLUSTER_RULES] and role["rules"] == [dict(r) for r in EVENT_RULES]
    # Bound to the watchdog's own account, by name.
    for kind, name, namespace in (("ClusterRoleBinding", f"gpu-platform:{NAME}", None), ("RoleBinding", f"gpu-platform:{NAME}-events", wd.EVENT_NAMESPACE)):
        binding = named(objects, kind, name, namespace)
        assert binding["roleRef"]["name"] == name and binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


# --- its objects in the tenant ------------------------------------------------------------------


@pytest.fixture(scope="module")
def objects(dev_run) -> dict:
    """Each tenant's in-tenant objects, by tenant."""
    return {tenant: tenant_objects(dev_run, tenant) for tenant in ("nlp", "speech")}


def test_it_runs_the_shipped_program_with_each_pools_limit(objects):
    config_map = named(objects["nlp"], "ConfigMap", NAME, NAMESPACE)
    assert config_map["data"]["gpu_watchdog.py"] == Path(wd.__file__).read_text()
    # Beside it, what it imports from its own directory (components/tenant_api.py), mounted with it.
    assert config_map["data"]["tenant_api.py"] == Path(wd.tenant_event.__code__.co_filename).read_text()
    [program] = [v for v in named(objects["nlp"], "Deployment", NAME, NAMESPACE)["spec"]["template"]["spec"]["volumes"] if v["name"] == "program"]
    assert program["configMap"]["items"] == [{"key": f, "path": f} for f in ("gpu_watchdog.py", "tenant_api.py")]
    assert json.loads(config_map["data"]["config.json"]) == {"poolLimitSeconds": {"l4-1x": 600}, "defaultLimitSeconds": 600, "intervalSeconds": 30}
    speech = json.loads(named(objects["speech"], "ConfigMap", NAME, NAMESPACE)["data"]["config.json"])
    assert speech["poolLimitSeconds"] == {"t4-1x-spot": 600}


def test_it_runs_unprivileged_on_the_cpu_pool_from_a_pinned_image(objects):
    namespace = named(objects["nlp"], "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = named(objects["nlp"], "Deployment", NAME, NAMESPACE)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == versions.WATCHDOG_IMAGE
    assert container["image"].rsplit(":", 1)[1].split("-")[0].count(".") == 2  # a patch release, not a floating tag
    assert container["command"] == ["python", "/opt/gpu-watchdog/gpu_watchdog.py", "/etc/gpu-watchdog/config.json"]
    assert pod["nodeSelector"] == {"gpu-platform/pool": "system"} and "tolerations" not in pod
    # The Pod Security Standard "restricted", field by field (kubernetes.io/docs/concepts/security/pod-security-standards).
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert all("hostPath" not in v for v in pod["volumes"]) and not any(k.startswith("host") for k in pod)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_the_program_needs_only_the_standard_library():
    imported = {
        line.split()[1].split(".")[0]
        for line in Path(wd.__file__).read_text().splitlines()
        if line.startswith(("import ", "from ")) and not line.startswith("from __future__")
    }
    assert imported <= {"datetime", "json", "os", "ssl", "sys", "time", "urllib", "dataclasses"}


def test_the_reliability_page_says_what_the_watchdog_does():
    """docs/reliability.md's row of the watchdog: the reasons it records, the fallback's finalizer,
    where its events and its pod are."""
    [row] = [line for line in section("Reliability").splitlines() if line.startswith("| **A GPU node whose GPU never appears")]
    assert all(f"`{reason}`" in row for reason in (wd.NEVER_OFFERED, wd.LOST, wd.NOT_REMOVED))
    assert f"`reason={wd.NOT_REMOVED}`" in row
    assert f"`{wd.TERMINATION_FINALIZER}` finalizer" in row and "(403, or 404), or lists no claim that names the node" in row and "it exits 1" in row
    assert f"kubectl get events -n {wd.EVENT_NAMESPACE} --field-selector reason={wd.NEVER_OFFERED}" in row
    assert f"`kubectl get pods -n {NAMESPACE}`" in row
    # The loss clock, and what a restart does to it (test_a_node_never_seen_offering_is_timed_from_when_it_joined).
    assert "counts from the first poll that saw it without them, also once the kubelet drops them from its capacity" in row
    assert f"after it restarts, a node whose lost GPUs are gone from its capacity already counts from when it joined, so if that was more than `gpuTimeout` ago it is removed at the first poll, as `{wd.NEVER_OFFERED}`" in row

