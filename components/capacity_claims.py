"""What the capacity fallback (components/capacity_fallback.py) reads of the tenant's API: Karpenter's
NodeClaims and its own request pods, and which claim failures it acts on. Shipped beside it byte for
byte (components/fallback_documents.py) and run by the same image: standard library only.

A claim's `Launched` condition is acted on only when its message names a failure the fallback knows:
Compute Engine's stockout or quota text as terraform-provider-google v7.45.0 passes it on
(google/services/compute/compute_operation.go `writeOperationError` writes each error's message, and
for QUOTA_EXCEEDED `metric name = …`; the stockout is ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]).
Any other reason (Karpenter sets `LaunchFailed` with whatever its provider returned, or the provider's
own, while it retries: kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/launch.go)
may still end in a launch, so it is only remembered; the claim counts as failed once it went without
having launched (Karpenter deletes it after its launch timeout, liveness.go). That a claim which
launches never showed a stockout or quota text first is an assumption the acceptance run lists
(`failure-text-means-failed`, docs/acceptance.md).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
# Karpenter's keys (kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go, k8s.io/api well-known labels).
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
LAUNCHED = "Launched"
# A condition Karpenter has only initialised carries no reason (awslabs/operatorpkg status/condition_set.go
# `For`); older operatorpkg releases wrote this one.
NOT_YET = ("", "AwaitingReconciliation")
# Labels and annotations of its request pods.
REQUEST_APP = "gpu-capacity-request"
REQUEST_POOL = "gpu-platform/capacity-request-pool"
REQUEST_CLAIM = "gpu-platform/failed-claim"
REQUEST_TYPES = "gpu-platform/requested-node-types"
# Why a claim failed: the known failures, read from its message (module docstring), and the others.
CAPACITY, QUOTA, LAUNCH_FAILED, NOT_LAUNCHED = "capacity", "quota", "launch-failed", "not-launched"
REASON_PATTERNS = (
    (CAPACITY, re.compile(r"does not have enough resources available|RESOURCE_POOL_EXHAUSTED|insufficient capacity", re.I)),
    (QUOTA, re.compile(r"Quota '[^']*' exceeded|QUOTA_EXCEEDED|metric name = compute\.googleapis\.com/", re.I)),
)
KNOWN_FAILURES = (CAPACITY, QUOTA)


def classify(reason: str, message: str) -> str:
    for kind, pattern in REASON_PATTERNS:
        if pattern.search(message):
            return kind
    return LAUNCH_FAILED if reason else NOT_LAUNCHED


def parse_time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


@dataclass(frozen=True)
class Claim:
    """What the decision needs of a Karpenter NodeClaim."""

    name: str
    uid: str
    pool: str
    created: dt.datetime
    node_types: tuple[str, ...]  # the provider's node types it lists, without the `<provider>.` prefix
    launched: bool
    launched_as: str | None  # the node type it launched as (its instance-type label), if it did
    failure: tuple[str, str] | None  # (reason, message) of a Launched condition that is not True and has a reason
    deleting: bool
    requirements: tuple = ()  # spec.requirements, as listed
    taints: tuple = ()  # spec.taints, as listed
    gpus: int = 1  # the GPUs its pods asked for (spec.resources.requests)

    @property
    def known_failure(self) -> bool:
        """Its Launched condition names a failure the fallback acts on at once (module docstring)."""
        return self.failure is not None and classify(*self.failure) in KNOWN_FAILURES


def _strip(value: str, provider: str) -> str | None:
    prefix = f"{provider}."
    return value[len(prefix):] if value.startswith(prefix) else None


def _count(quantity) -> int:
    """A whole-number quantity (GPUs are never fractional), at least 1."""
    try:
        return max(int(str(quantity)), 1)
    except (TypeError, ValueError):
        return 1


def parse_claims(items: list[dict], provider: str) -> list[Claim]:
    """Karpenter's NodeClaims of the provider's node types, from a list's items."""
    claims = []
    for item in items:
        meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
        requirements = spec.get("requirements") or []
        listed = next((r.get("values") or [] for r in requirements if r.get("key") == INSTANCE_TYPE and r.get("operator") == "In"), [])
        node_types = tuple(t for t in (_strip(v, provider) for v in listed) if t)
        if not node_types:
            continue  # another provider's, or not a claim for our node types
        launched = next((c for c in status.get("conditions") or [] if c.get("type") == LAUNCHED), {})
        is_launched = launched.get("status") == "True"
        failed = not is_launched and launched.get("reason", "") not in NOT_YET
        claims.append(
            Claim(
                name=meta["name"],
                uid=meta.get("uid", meta["name"]),
                pool=(meta.get("labels") or {}).get(NODEPOOL, ""),
                created=parse_time(meta.get("creationTimestamp")) or dt.datetime.min.replace(tzinfo=dt.timezone.utc),
                node_types=node_types,
                launched=is_launched,
                launched_as=_strip((meta.get("labels") or {}).get(INSTANCE_TYPE, ""), provider) if is_launched else None,
                failure=(launched.get("reason", ""), launched.get("message", "")) if failed else None,
                deleting=bool(meta.get("deletionTimestamp")),
                requirements=tuple(requirements),
                taints=tuple(spec.get("taints") or []),
                gpus=_count(((spec.get("resources") or {}).get("requests") or {}).get(GPU_RESOURCE)),
            )
        )
    return claims


@dataclass(frozen=True)
class RequestPod:
    """One of its request pods, as listed."""

    name: str
    pool: str
    claim: str  # the failed claim it answers
    node_types: frozenset[str]
    created: dt.datetime
    bound: bool  # scheduled to a node: it holds that node until deleted


def parse_requests(items: list[dict]) -> list[RequestPod]:
    found = []
    for item in items:
        meta = item.get("metadata") or {}
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        if labels.get("app.kubernetes.io/name") != REQUEST_APP or meta.get("deletionTimestamp"):
            continue
        found.append(
            RequestPod(
                name=meta["name"],
                pool=labels.get(REQUEST_POOL, ""),
                claim=notes.get(REQUEST_CLAIM, ""),
                node_types=frozenset(t for t in notes.get(REQUEST_TYPES, "").split(",") if t),
                created=parse_time(meta.get("creationTimestamp")) or dt.datetime.min.replace(tzinfo=dt.timezone.utc),
                bound=bool((item.get("spec") or {}).get("nodeName")),
            )
        )
    return found
