"""The stockout drill of `make acceptance STOCKOUT_DRILL=1`, and the optional Flex-start and
reservation runs (`FLEX_START=1`, `RESERVATION=<name>`) (docs/acceptance.md). Pure: the run's
capacity list, the reservation's lookup, readers of what the tenant and the platform show while the
smoke Job waits for its node, and the drill's steps; scenario.py runs them.

The drill makes the pool's first option fail, deterministically and through the same path a
stockout takes: the run's pool is `capacity: [{reservation: <decoy>}, <next option>]`, where the
decoy is a reservation the run declares as existing (`create: false`) that nobody created. A pool's
reservations come first in its order (the reserved node type's cost is the lowest: docs/gpu-nodes.md),
the node template creates its VM with a specific reservation affinity naming the decoy, and Compute
Engine refuses that insert: no VM and no disk is made, and the provider leaves nothing in the
claim's state (terraform-provider-google `resourceComputeInstanceCreate` forgets an instance whose
create failed). No check of the template is relaxed for it. The smoke Job, pinned to the decoy's
zone, then has to get its node from the next option: what the drill records is whether and after
how long it does, what the tenant's and the platform's claims said, whether the capacity fallback
asked for the next option (components/capacity_fallback.py), and that nothing of the failed claims
is left. What the platform does with a failed claim is not public: this is where it is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from components import capacity_claims as claims
from components import capacity_fallback as fallback
from config import node_properties as props
from config.facts import project_namespace

from .capacity_runs import RESERVATION_PROPERTY
from .kube import items, parse_time
from .report import Step
from .timings import POLLED, SERVER

# How long after the Job's node registered the failed claims may take to go (Karpenter's launch
# timeout, 5 minutes, and the platform's `tofu destroy` of an empty state).
LEFTOVER_TIMEOUT = 900


# --- What the drill sees while the Job waits ------------------------------------------------------------


@dataclass
class ClaimSeen:
    """A claim of the pool as last seen: the tenant's Karpenter NodeClaim or the platform's."""

    name: str
    created: datetime | None
    node_types: tuple[str, ...] = ()  # the tenant's claim: what it lists; the platform's: its typeRef
    failed_at: datetime | None = None
    reason: str = ""
    message: str = ""
    phase: str = ""  # the platform's claim
    gone_at: datetime | None = None  # first poll that no longer saw it


@dataclass
class Watch:
    """Every poll while the Job waits for its node: the tenant's NodeClaims, the platform's NodeClaims
    of the tenant's project, and the capacity fallback's events."""

    provider: str
    tenant: str
    since: datetime  # the Job was applied
    tenant_claims: dict[str, ClaimSeen] = field(default_factory=dict)
    platform_claims: dict[str, ClaimSeen] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)

    def observe(self, tenant_claims: dict[str, Any], platform_claims: dict[str, Any], events: dict[str, Any], now: datetime) -> None:
        listed = set()
        for item in items(tenant_claims):
            meta, status = item["metadata"], item.get("status") or {}
            created = parse_time(meta.get("creationTimestamp"))
            if created and created < self.since:
                continue
            listed.add(meta["name"])
            requirement = next((r for r in (item.get("spec") or {}).get("requirements") or [] if r.get("key") == claims.INSTANCE_TYPE), {})
            types = tuple(v.removeprefix(f"{self.provider}.") for v in requirement.get("values") or [])
            seen = self.tenant_claims.setdefault(meta["name"], ClaimSeen(meta["name"], created, types))
            launched = next((c for c in status.get("conditions") or [] if c.get("type") == claims.LAUNCHED), {})
            if launched.get("status") != "True" and launched.get("reason", "") not in claims.NOT_YET and seen.failed_at is None:
                seen.failed_at = parse_time(launched.get("lastTransitionTime")) or now
                seen.reason, seen.message = launched.get("reason", ""), launched.get("message", "")
        for name, seen in self.tenant_claims.items():
            if name not in listed and seen.gone_at is None:
                seen.gone_at = now
        listed = set()
        for item in items(platform_claims):
            meta, spec, status = item["metadata"], item.get("spec") or {}, item.get("status") or {}
            created = parse_time(meta.get("creationTimestamp"))
            if spec.get("vClusterRef") not in (None, self.tenant) or (created and created < self.since):
                continue
            listed.add(meta["name"])
            seen = self.platform_claims.setdefault(meta["name"], ClaimSeen(meta["name"], created))
            seen.node_types = (spec.get("typeRef", "").removeprefix(f"{self.provider}."),) if spec.get("typeRef") else ()
            seen.phase = status.get("phase", "") or seen.phase
            if status.get("phase") == "Failed" and seen.failed_at is None:
                seen.failed_at, seen.reason, seen.message = now, status.get("reason", ""), status.get("message", "")
        for name, seen in self.platform_claims.items():
            if name not in listed and seen.gone_at is None:
                seen.gone_at = now
        for event in items(events):
            if (event.get("source") or {}).get("component") == fallback.EVENT_SOURCE:
                self.events[event["metadata"]["name"]] = event


def platform_claims_namespace(tenant: str) -> str:
    """The tenant's platform project's namespace, where its platform NodeClaims are."""
    return project_namespace(tenant)


def claim_failed(watch: Watch, decoy: str) -> Step:
    """The first claim for the Job took the decoy and failed: the tenant's NodeClaim (its Launched
    condition, or that it went without launching) and the platform's (phase, reason, message)."""
    platform = [c for c in watch.platform_claims.values() if decoy in c.node_types]
    tenant = [c for c in watch.tenant_claims.values() if decoy in c.node_types]
    failed_platform = [c for c in platform if c.phase == "Failed" or (c.gone_at and c.phase != "Available")]
    failed_tenant = [c for c in tenant if c.failed_at or c.gone_at]
    parts = []
    for c in tenant:
        said = f"Launched {c.reason}: {c.message}" if c.failed_at else "went before it launched, with no reason on it" if c.gone_at else "still launching"
        parts.append(f"tenant NodeClaim {c.name} (lists {len(c.node_types)} node types): {said}")
    for c in platform:
        parts.append(f"platform NodeClaim {c.name} ({c.node_types[0] if c.node_types else 'no type yet'}): phase {c.phase or '(none)'} {c.reason} {c.message}".rstrip())
    if not tenant and not platform:
        return Step("", False, f"no claim for the Job named the decoy node type {decoy}", None, POLLED)
    ok = bool(failed_platform or failed_tenant)
    first = min((c.failed_at for c in failed_tenant if c.failed_at), default=None)
    return Step("", ok, "; ".join(parts), first or min((c.failed_at or c.gone_at for c in failed_platform), default=None), SERVER if first else POLLED)


def fallback_asked(watch: Watch, decoy: str) -> Step:
    """The capacity fallback's event: it saw the decoy fail and asked for the next option."""
    mine = sorted(watch.events.values(), key=lambda e: e["metadata"].get("creationTimestamp", ""))
    asked = [e for e in mine if e.get("reason") == fallback.OPTION_FAILED and decoy in e.get("message", "")]
    if asked:
        event = asked[0]
        return Step("", True, f"{event['reason']}: {event.get('message', '')}", parse_time(event["metadata"].get("creationTimestamp")), SERVER)
    others = "; ".join(f"{e.get('reason')}: {e.get('message', '')}" for e in mine) or "none"
    return Step("", False, f"no {fallback.OPTION_FAILED} event naming {decoy}; its events: {others}", None, POLLED)


def landed(node: dict[str, Any], decoy: str, option: str, pod_created: datetime | None, pod_started: datetime | None) -> Step:
    """The Job's pod runs on a node of the next option, not of the decoy; how long after it was made."""
    labels = node["metadata"].get("labels") or {}
    capacity_type = labels.get(props.CAPACITY_TYPE, "")
    node_type = labels.get("vcluster.com/node-type", "")
    waited = f", {(pod_started - pod_created).total_seconds():.0f} s after the pod was created" if pod_started and pod_created else ""
    seen = f"node {node['metadata']['name']}: node type {node_type or '(no vcluster.com/node-type label)'}, {props.CAPACITY_TYPE} {capacity_type or '(none)'}{waited}"
    ok = capacity_type == option and node_type != decoy and not labels.get(RESERVATION_PROPERTY, "").endswith("-missing")
    return Step("", ok, seen, pod_started if ok else None, SERVER)


def leftovers(watch: Watch, decoy: str, instances: list[dict[str, Any]], disks: list[dict[str, Any]], now: datetime) -> Step:
    """Nothing of the failed claims: no VM or disk whose name carries a failed platform claim's name
    (the node template names them so: templates/node/main.tf `instance_name`), and the platform's
    claims gone (their `tofu destroy` done)."""
    failed = [c for c in watch.platform_claims.values() if decoy in c.node_types]
    names = [c.name for c in failed]
    vms = [i["name"] for i in instances if any(n in i.get("name", "") for n in names)]
    left_disks = [d["name"] for d in disks if any(n in d.get("name", "") for n in names)]
    staying = [f"{c.name} (phase {c.phase})" for c in failed if c.gone_at is None]
    ok = not vms and not left_disks and not staying
    seen = (
        f"failed platform claims {names or 'none seen'}: VMs {vms or 'none'}, disks {left_disks or 'none'}, "
        f"claims still in the platform {staying or 'none'}"
    )
    return Step("", ok, seen, now if ok else None, POLLED)


def claims_visible(listing: dict[str, Any], node: dict[str, Any] | None, can_list: str, account: str) -> tuple[str, bool, str]:
    """What the capacity fallback and the GPU watchdog rest on: Karpenter's NodeClaims are objects of
    the tenant's API server (one names the Job's node as its own), and the fallback's service
    account may list them (`kubectl auth can-i`). As (check, ok, seen)."""
    claims = items(listing)
    name = (node or {}).get("metadata", {}).get("name")
    own = [c["metadata"]["name"] for c in claims if name and (c.get("status") or {}).get("nodeName") == name]
    allowed = can_list.strip().lower() == "yes"
    seen = f"{len(claims)} listed, {own[0] if own else 'none'} for node {name or '(none)'}; {account} may list them: {can_list.strip() or '(no answer)'}"
    return "Karpenter NodeClaims visible inside the tenant", bool(own) and allowed, seen
