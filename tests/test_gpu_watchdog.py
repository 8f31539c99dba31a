"""The GPU watchdog (components/gpu_watchdog.py): its decision as plain code (nodes, times and
allocatable in, the nodes to remove out), what it does with the tenant's API, and its objects in
the tenant (components/watchdog_documents.py) with exactly the RBAC its calls need."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from components import gpu_watchdog as wd
from components.watchdog_documents import CLUSTER_RULES, EVENT_RULES, NAMESPACE
from config import versions

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
K8S_VERSION = "1.33.0"
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)


def node(name: str, *, pool: str = "l4-1x", gpu: bool = True, created: dt.datetime = T0, capacity: int | None = None,
         allocatable: int | None = None, deleting: bool = False) -> dict:
    """A Node as the tenant's API lists it, with what the decision reads."""
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
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}


def claim(name: str, node_name: str | None, *, deleting: bool = False) -> dict:
    meta = {"name": name, **({"deletionTimestamp": T0.isoformat()} if deleting else {})}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "status": {"nodeName": node_name} if node_name else {}}


def minutes(n: float) -> dt.timedelta:
    return dt.timedelta(minutes=n)


def decide(nodes, claims=(), *, now, lost_since=None, limits=None):
    return wd.decide(wd.gpu_nodes(list(nodes)), wd.claims_by_node(list(claims)), limits or {"l4-1x": 600}, 600, now, lost_since or {})


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
        assert (r.claim, r.reason, r.uid) == ("l4-1x-abc", wd.NEVER_OFFERED, "uid-n1")
        assert r.message == (
            "GPU node n1 of pool l4-1x has offered no nvidia.com/gpu since it joined at 2026-03-02T09:00:00+00:00, "
            "longer than 600 s: deleting its NodeClaim l4-1x-abc, which deletes the VM"
        )


def test_a_node_that_lost_its_gpus_goes_the_limit_after_it_was_first_seen_so():
    lost = node("n1", capacity=1, allocatable=0, created=T0 - minutes(600))
    first_seen = T0 + minutes(1)
    removals, state = decide([lost], [claim("c1", "n1")], now=first_seen)
    assert removals == [] and state == {"n1": first_seen}  # old node, but the clock starts when the loss is seen
    removals, state = decide([lost], [claim("c1", "n1")], now=first_seen + minutes(9), lost_since=state)
    assert removals == [] and state == {"n1": first_seen}
    removals, state = decide([lost], [claim("c1", "n1")], now=first_seen + minutes(10), lost_since=state)
    assert [(r.node, r.reason) for r in removals] == [("n1", wd.LOST)]
    assert "since 2026-03-02T09:01:00+00:00 (its 1 GPUs are unhealthy)" in removals[0].message
    # The GPU comes back before the limit: the clock is forgotten.
    healthy = node("n1", capacity=1, allocatable=1, created=T0 - minutes(600))
    assert decide([healthy], now=first_seen + minutes(5), lost_since={"n1": first_seen}) == ([], {})


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
    assert decide(nodes, claims, now=T0 + minutes(60)) == ([], {})


def test_a_node_without_a_node_claim_is_reported_not_removed():
    claims = [claim("other", "n2"), claim("unlaunched", None)]
    [removal] = decide([node("n1")], claims, now=T0 + minutes(11))[0]
    assert removal.claim is None
    assert removal.message.endswith("it has no NodeClaim, so it is left for an operator")


# --- against the tenant's API ---------------------------------------------------------------------


class FakeApi:
    def __init__(self, nodes: list[dict], claims: list[dict]):
        self.nodes, self.claims, self.calls = nodes, claims, []

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        self.calls.append((method, path, body))
        if (method, path) == ("GET", "/api/v1/nodes"):
            return {"kind": "NodeList", "items": self.nodes}
        if (method, path) == ("GET", wd.NODECLAIMS):
            return {"kind": "NodeClaimList", "items": self.claims}
        return {}


CONFIG = {"poolLimitSeconds": {"l4-1x": 600}, "defaultLimitSeconds": 600, "intervalSeconds": 30}


def test_a_removal_deletes_the_node_claim_and_records_one_event(monkeypatch):
    api = FakeApi([node("n1", created=T0 - minutes(20)), node("n2", created=T0 - minutes(20), capacity=1, allocatable=1)], [claim("c1", "n1"), claim("c2", "n2")])
    reported: set[str] = set()
    wd.run_once(api, CONFIG, {}, reported)
    api.claims[0]["metadata"]["deletionTimestamp"] = T0.isoformat()  # Karpenter drains the node now
    wd.run_once(api, CONFIG, {}, reported)  # nothing more to do: no second delete, no second event
    methods = [(m, p) for m, p, _ in api.calls]
    assert methods.count(("DELETE", f"{wd.NODECLAIMS}/c1")) == 1
    events = [b for m, p, b in api.calls if m == "POST"]
    assert [p for m, p, _ in api.calls if m == "POST"] == ["/api/v1/namespaces/default/events"]
    [event] = events
    kubernetes_validate.validate(event, K8S_VERSION, strict=True)
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"}
    assert (event["type"], event["reason"], event["source"]) == ("Warning", "GPUNeverOffered", {"component": "gpu-platform-watchdog"})
    assert event["message"].startswith("GPU node n1 of pool l4-1x has offered no nvidia.com/gpu since it joined")


def test_its_rbac_is_exactly_what_its_calls_need(dev_run):
    """Every call the program makes, as RBAC verb and resource, equals the rules it is granted."""
    api = FakeApi([node("n1", created=T0 - minutes(20))], [claim("c1", "n1")])
    wd.run_once(api, CONFIG, {}, set())
    verbs = {"GET": "list", "DELETE": "delete", "POST": "create"}  # GETs are of collections only

    def resource(path: str) -> tuple[str, str, str | None]:
        parts = path.strip("/").split("/")
        if parts[0] == "api":  # /api/v1[/namespaces/<ns>]/<resource>
            namespace = parts[3] if parts[2] == "namespaces" else None
            return "", parts[-1] if namespace is None else parts[4], namespace
        return parts[1], parts[3], None  # /apis/<group>/<version>/<resource>[/<name>]

    needed = {(resource(p), verbs[m]) for m, p, _ in api.calls}
    objects = list(yaml.safe_load_all(dev_run.one(VCI, "nlp").input("spec", "template", "objects")))
    cluster_role = next(o for o in objects if o["kind"] == "ClusterRole")
    role = next(o for o in objects if o["kind"] == "Role")
    granted = {((r["apiGroups"][0], res, None), v) for r in cluster_role["rules"] for res in r["resources"] for v in r["verbs"]}
    granted |= {((r["apiGroups"][0], res, role["metadata"]["namespace"]), v) for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
    assert granted == needed
    assert cluster_role["rules"] == [dict(r) for r in CLUSTER_RULES] and role["rules"] == [dict(r) for r in EVENT_RULES]


# --- its objects in the tenant ------------------------------------------------------------------


@pytest.fixture(scope="module")
def objects(dev_run) -> dict:
    found = {}
    for tenant in ("nlp", "speech"):
        for o in yaml.safe_load_all(dev_run.one(VCI, tenant).input("spec", "template", "objects")):
            found[tenant, o["kind"], o["metadata"]["name"]] = o
    return found


def test_it_runs_the_shipped_program_with_each_pools_limit(objects):
    config_map = objects["nlp", "ConfigMap", "gpu-watchdog"]
    assert config_map["data"]["gpu_watchdog.py"] == Path(wd.__file__).read_text()
    assert json.loads(config_map["data"]["config.json"]) == {"poolLimitSeconds": {"l4-1x": 600}, "defaultLimitSeconds": 600, "intervalSeconds": 30}
    speech = json.loads(objects["speech", "ConfigMap", "gpu-watchdog"]["data"]["config.json"])
    assert speech["poolLimitSeconds"] == {"t4-1x-spot": 600}


def test_it_runs_unprivileged_on_the_cpu_pool_from_a_pinned_image(objects):
    namespace = objects["nlp", "Namespace", NAMESPACE]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = objects["nlp", "Deployment", "gpu-watchdog"]
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
