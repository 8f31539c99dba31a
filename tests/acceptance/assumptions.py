"""What only a real project can settle: every assumption the product rests on that no offline test
can check (the upstream code is not public, or only a live system shows it), each settled by the
report's own checks, steps and images, and reported as one line of every run's report, whether
this run settled it or not (docs/acceptance.md "What only a real project can settle" lists the same,
a test keeps the two equal).

A result is `holds`, `does not hold` (a check behind it failed) or `not settled` (this run did not
exercise it: the line says what would).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import Report

HOLDS, FAILS, UNSETTLED = "holds", "does not hold", "not settled"


@dataclass(frozen=True)
class Verdict:
    result: str  # HOLDS, FAILS or UNSETTLED
    evidence: str


@dataclass(frozen=True)
class Assumption:
    key: str  # stable: the report's and the docs' name for it
    statement: str  # what must hold, as docs/acceptance.md says it
    settle: Callable[["Report"], Verdict]


def by_checks(*prefixes: str, otherwise: str) -> Callable[["Report"], Verdict]:
    """Settled by the report's checks whose names start with one of `prefixes`: holds when each
    prefix has a check and all passed; `otherwise` says what would settle it when none ran."""

    def settle(report: "Report") -> Verdict:
        found = [f for f in report.findings if f.check.startswith(prefixes)]
        if not found:
            return Verdict(UNSETTLED, otherwise)
        failed = [f for f in found if not f.ok]
        if failed:
            return Verdict(FAILS, "; ".join(f"{f.check}: {f.detail}" for f in failed))
        missing = [p for p in prefixes if not any(f.check.startswith(p) for f in found)]
        if missing:
            return Verdict(UNSETTLED, f"{', '.join(missing)}: not checked in this run ({otherwise})")
        return Verdict(HOLDS, "; ".join(f"{f.check}: {f.detail}" for f in found))

    return settle


def by_steps(steps: Callable[["Report"], Iterable[Any] | None], otherwise: str) -> Callable[["Report"], Verdict]:
    """Settled by a list of the report's steps (monitoring, the watchdog drill): all passed."""

    def settle(report: "Report") -> Verdict:
        found = list(steps(report) or [])
        if not found:
            return Verdict(UNSETTLED, otherwise)
        failed = [s for s in found if not s.ok]
        if failed:
            return Verdict(FAILS, "; ".join(f"{s.name}: {s.seen}" for s in failed))
        return Verdict(HOLDS, f"{len(found)} step(s) passed, the last: {found[-1].name}: {found[-1].seen}")

    return settle


def images_present(report: "Report") -> Verdict:
    """The GPU Operator's images were on the node when its pods needed them (the prefetch ran while
    the node joined, and the join's restart of containerd did not lose them)."""
    operator = [i for i in report.images if i.namespace == "gpu-operator"]
    if not operator:
        return Verdict(UNSETTLED, "no image events of the GPU Operator's pods on the GPU node were read")
    pulled = [i.image for i in operator if not i.already_present]
    if report.warm_node:
        return Verdict(UNSETTLED, "the Job ran on a warm node, whose images were pulled long before; run with WARM_NODES=0")
    if pulled:
        return Verdict(FAILS, f"pulled after the join, not found present: {', '.join(pulled)}")
    return Verdict(HOLDS, f"all {len(operator)} images of the GPU Operator's pods already present when needed")


def fabric_manager(report: "Report") -> Verdict:
    """On an NVSwitch machine (config/catalog.yaml `nvswitch`): the GPU offered, the Job's nvidia-smi,
    and what the guest saw of the switches with the fabric ready where it manages it (the smoke Job's
    probe, config/fabric_manager.py PROBE) settle it for that shape."""
    machine = report.gpu_machine_type
    if machine is None:
        return Verdict(UNSETTLED, "no GPU VM was found")
    if not report.gpu_machine_nvswitch:
        return Verdict(UNSETTLED, f"{machine} has no NVSwitch; run with a GPU and GPUS_PER_NODE of a full HGX board (e.g. GPU=nvidia-h100-80gb GPUS_PER_NODE=8)")
    return by_checks("GPU offered to pods", "Job logs show nvidia-smi", "Fabric Manager:", otherwise="the Job did not run")(report)


def not_by_this_run(why: str) -> Callable[["Report"], Verdict]:
    return lambda report: Verdict(UNSETTLED, why)


ASSUMPTIONS: tuple[Assumption, ...] = (
    Assumption(
        "provider-id",
        "With the platform's embedded cloud controller off, the tenant's GCP cloud controller manager initializes each GPU node "
        "and sets its providerID to gce://<project>/<zone>/<vm>, the form the platform's Karpenter matches its NodeClaims by.",
        by_checks("providerID set", "uninitialized taint gone", "GPU node initialized by the cloud controller manager", otherwise="no GPU node joined"),
    ),
    Assumption(
        "zone-labels",
        "After that initialization a GPU node's topology.kubernetes.io/zone and topology.gke.io/zone name its VM's real zone, "
        "and a pod that asks for a zone gets a node there.",
        by_checks("topology.kubernetes.io/zone is a real zone", "topology.gke.io/zone is a real zone", "node zone label = VM zone", otherwise="no GPU node joined"),
    ),
    Assumption(
        "images-before-join",
        "The images a GPU node's GPU Operator pods need are pulled while the node joins and survive the join's restart of containerd: "
        "they are present when the pods start.",
        images_present,
    ),
    Assumption(
        "gpu-offered",
        "The GPU Operator, its driver container off, offers nvidia.com/gpu with the GPU image's own driver, and a pod's nvidia-smi names the GPU.",
        by_checks("GPU offered to pods", "Job logs show nvidia-smi", otherwise="the Job did not run"),
    ),
    Assumption(
        "fabric-manager",
        "On NVSwitch machine types (8 or 16 A100, H100, H200 or B200) the GPUs initialize: where the guest sees the NVSwitches, "
        "NVIDIA Fabric Manager runs in it and the fabric is set up; where it sees none, the host manages the fabric.",
        fabric_manager,
    ),
    Assumption(
        "idle-deletion",
        "The platform's embedded Karpenter, whose version is not public, deletes an empty GPU node's VM within idleAfter.",
        by_checks("GPU VM deleted within idleAfter", otherwise="the idle check did not run (it does not with WARM_NODES=1)"),
    ),
    Assumption(
        "metadata-concealment",
        "On a tenant node an ordinary pod cannot reach the metadata server, while hostNetwork pods (the cloud controller manager, "
        "the PD CSI driver, the metrics collector) can.",
        by_checks("an ordinary pod cannot reach the metadata server", "a hostNetwork pod reaches the metadata server", otherwise="no Ready node to probe"),
    ),
    Assumption(
        "metrics-in-monitoring",
        "The DCGM exporter's GPU metrics reach Cloud Monitoring in the team's project and, through the environment's metrics scope, "
        "in the environment's.",
        by_steps(lambda report: report.monitoring, "no monitoring check ran"),
    ),
    Assumption(
        "watchdog-removes-lost-gpu",
        "A GPU node that stops offering nvidia.com/gpu is removed with its VM by the GPU watchdog after gpuTimeout.",
        by_steps(lambda report: report.watchdog_drill, "run with WATCHDOG_DRILL=1"),
    ),
    Assumption(
        "restore-from-backup",
        "A tenant's Backup for GKE backup restores its control plane and data into a deleted host namespace.",
        by_checks("restore drill:", otherwise="run with RESTORE_DRILL=1"),
    ),
    Assumption(
        "labels-in-billing-export",
        "The labels on a tenant's VMs and disks reach Cloud Billing export, which the showback view groups costs by.",
        not_by_this_run(
            "billing export writes hours after use and needs an account's export switched on: a day after a run, "
            "query the export for labels.key = 'vcluster' (the VM label this run checks: 'VM labelled with its tenant')"
        ),
    ),
    Assumption(
        "objects-removed-with-the-instance",
        "The platform removes from a tenant the objects its VirtualClusterInstance no longer lists (monitoring turned off).",
        not_by_this_run("the run never turns monitoring off; deploy, set monitoring.enabled: false for the tenant, pulumi up, and look for namespace gpu-platform-monitoring"),
    ),
    Assumption(
        "platform-source-ranges",
        "The platform's LoadBalancer answers publicHost from platform.publicSourceRanges and from nowhere else (GKE's firewall rules for it).",
        not_by_this_run("the run sets no publicHost; deploy with one and platform.publicSourceRanges, and connect from inside and outside those ranges"),
    ),
    Assumption(
        "drift-reads-platform-secrets-only",
        "The drift identity, with its Role in vcluster-platform, refreshes the stack and reads no Secret of another namespace.",
        not_by_this_run(
            "the run uses no CI identity; in a bootstrapped environment: kubectl auth can-i get secrets -n vcluster-<team> "
            "--as=gpu-ci-<env>-drift@<project>.iam.gserviceaccount.com says no, and the daily drift check passes"
        ),
    ),
    Assumption(
        "nodeclaims-in-tenant",
        "The tenant's Karpenter NodeClaims are listable inside the vCluster by the capacity fallback's service account, "
        "and a claim names the node the Job ran on.",
        by_checks("Karpenter NodeClaims visible inside the tenant", otherwise="no GPU node claim was read"),
    ),
    Assumption(
        "platform-after-failed-claim",
        "After a node claim's tofu apply fails, the platform and the tenant's NodeClaim show the failure, and the pod lands on the "
        "pool's next option.",
        by_steps(lambda report: report.stockout_drill, "run with STOCKOUT_DRILL=1"),
    ),
    Assumption(
        "failure-text-means-failed",
        "A tenant NodeClaim whose Launched condition carries a Compute Engine stockout or quota message (does not have enough "
        "resources available, Quota '…' exceeded) never launches afterwards: the capacity fallback acts on that text at once.",
        not_by_this_run(
            "needs a real stockout or quota error: during one, watch kubectl get nodeclaims -o yaml in the tenant and check that no "
            "claim whose Launched message matched (components/capacity_claims.py REASON_PATTERNS) later turned Launched=True"
        ),
    ),
    Assumption(
        "cost-change-not-drift",
        "A change of a node type's cost in the NodeProvider (a price edit in config/catalog.yaml or nodeProvider.prices, then pulumi up) "
        "does not make vCluster's Karpenter treat running nodes as drifted: they are not cordoned and replaced.",
        not_by_this_run(
            "the run never changes a price; on a deployed environment with a running GPU node, change the node type's price, pulumi up, "
            "and for an hour watch the tenant's NodeClaims for a Drifted condition and the node for a cordon (docs/gpu-nodes.md \"The order\")"
        ),
    ),
    Assumption(
        "pack-on-the-engine-inputs",
        "The policy pack, handed the engine's real inputs (a provider's version, the defaults a bridged provider's Check fills in), "
        "passes every resource of the run.",
        not_by_this_run("the run deploys without the pack; run pulumi preview --policy-pack policy on the run's stack (docs/guardrails.md)"),
    ),
)


def results(report: "Report") -> list[tuple[Assumption, Verdict]]:
    return [(assumption, assumption.settle(report)) for assumption in ASSUMPTIONS]
