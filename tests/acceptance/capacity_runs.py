"""What the acceptance run declares for the optional capacity runs (docs/acceptance.md): the stockout
drill's decoy reservation (STOCKOUT_DRILL=1, tests/acceptance/capacity_drill.py), Flex-start
(FLEX_START=1) and an existing reservation (RESERVATION=<name>): the pool's capacity list, the
reservation as gcloud lists it, and what the Job's VM must say of how it was bought. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config import node_properties as props

# What the run declares (nodeProvider.flexStart, nodeProvider.reservations, gpuPools[j].capacity: docs/configuration.md).
FLEX_START_MAX_RUN = "2h"  # the run's GPU VM lives well under an hour
NEXT_OPTION = "on-demand"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# The node-type property of reserved node types: the reservation's name (docs/gpu-nodes.md, Node types).
RESERVATION_PROPERTY = props.RESERVATION


def decoy_name(run_id: str) -> str:
    """A reservation name nobody has: the run's id makes it the run's own."""
    return f"gpu-acc-{run_id}-missing"


def decoy_node_type(run_id: str, tenant: str) -> str:
    """The reserved node type of the decoy: `rsv-<reservation>-<tenant>` (docs/gpu-nodes.md, Node types)."""
    return f"rsv-{decoy_name(run_id)}-{tenant}"


def capacity(stockout_drill: bool, flex_start: bool, reservation: str, run_id: str) -> list[Any] | None:
    """The run's pool's capacity list; None: the program's default (on-demand)."""
    options: list[Any] = [{"reservation": decoy_name(run_id)}] if stockout_drill else []
    options += [{"reservation": reservation}] if reservation else []
    options += ["flex-start"] if flex_start else []
    if stockout_drill and len(options) == 1:
        options.append(NEXT_OPTION)
    return options or None


def next_option(flex_start: bool, reservation: str) -> str:
    """The capacity type the drill's Job must land on: the first option after the decoy."""
    return "reservation" if reservation else "flex-start" if flex_start else NEXT_OPTION


@dataclass(frozen=True)
class Reservation:
    """A reservation as the run declares it (nodeProvider.reservations[k])."""

    name: str
    zone: str
    machine_type: str
    count: int
    project: str
    gpu: str | None = None  # an N1 host's guest GPU type; None where the machine type has GPUs built in

    def declared(self, tenant: str, slice_count: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "zone": self.zone,
            "machineType": self.machine_type,
            **({"gpu": self.gpu} if self.gpu else {}),
            "count": self.count,
            "project": self.project,
            "create": False,
            "slices": [{"tenant": tenant, "count": slice_count}],
        }


def found_reservation(listing: list[dict[str, Any]] | None, name: str, project: str, zones: tuple[str, ...]) -> Reservation | str:
    """The reservation RESERVATION names, from `gcloud compute reservations list --filter=name=<name>`
    in the tenant's project (its fields: https://cloud.google.com/compute/docs/reference/rest/v1/reservations),
    or what is wrong with it."""
    matching = [r for r in listing or [] if r.get("name") == name]
    if len(matching) != 1:
        return f"RESERVATION={name}: {len(matching)} reservations of that name in project {project}; expected one"
    reservation = matching[0]
    zone = (reservation.get("zone") or "").rsplit("/", 1)[-1]
    specific = reservation.get("specificReservation") or {}
    machine = ((specific.get("instanceProperties") or {}).get("machineType") or "").rsplit("/", 1)[-1]
    guest = ((specific.get("instanceProperties") or {}).get("guestAccelerators") or [{}])[0].get("acceleratorType") or ""
    free = int(specific.get("count") or 0) - int(specific.get("inUseCount") or 0)
    if zone not in zones:
        return f"RESERVATION={name} is in zone {zone or '(none)'}; ZONES must include it (now {','.join(zones)})"
    if not machine:
        return f"RESERVATION={name} reserves no machine type (not a specific reservation of VMs)"
    if free < 1:
        return f"RESERVATION={name} has no VM free ({specific.get('inUseCount')} of {specific.get('count')} in use)"
    return Reservation(name, zone, machine, int(specific["count"]), project, guest.rsplit("/", 1)[-1] or None)


# --- The Flex-start and reservation runs --------------------------------------------------------------


def vm_capacity_findings(vm: dict[str, Any] | None, *, flex_start: bool, reservation: str, max_run_seconds: int) -> list[tuple[str, bool, str]]:
    """What the Job's VM says of how it was bought (Compute Engine's instance: `scheduling`,
    `reservationAffinity`: https://cloud.google.com/compute/docs/reference/rest/v1/instances), as
    (check, ok, seen)."""
    if vm is None:
        return [("the GPU VM's capacity type", False, "no VM found for the node")]
    scheduling, affinity = vm.get("scheduling") or {}, vm.get("reservationAffinity") or {}
    found = []
    if flex_start:
        run = int((scheduling.get("maxRunDuration") or {}).get("seconds") or 0)
        ok = scheduling.get("provisioningModel") == "FLEX_START" and run == max_run_seconds and scheduling.get("instanceTerminationAction") == "DELETE"
        found.append(
            (
                "the GPU VM is Flex-start",
                ok,
                f"provisioningModel {scheduling.get('provisioningModel')}, maxRunDuration {run} s (configured {max_run_seconds}), "
                f"instanceTerminationAction {scheduling.get('instanceTerminationAction')}",
            )
        )
    if reservation:
        values = affinity.get("values") or []
        ok = affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION" and affinity.get("key") == RESERVATION_KEY and any(
            v == reservation or v.endswith(f"/reservations/{reservation}") for v in values
        )
        found.append((f"the GPU VM consumes reservation {reservation}", ok, f"reservationAffinity {affinity or '(none)'}"))
    return found


UNTRACKED_CHECK = "no Flex-start VM left behind its ended claim"


def untracked_flex_start_vms(instances: list[dict[str, Any]], nodes: list[dict[str, Any]], *, project: str) -> tuple[str, bool, str]:
    """The tenant's Flex-start VMs (gcloud compute instances list) that back none of its nodes (each
    node's providerID gce://<project>/<zone>/<vm>), as (check, ok, seen): such a VM is in no node
    claim's state, nothing deletes it, and it runs until its max run duration."""
    backed = {str((n.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1] for n in nodes}
    flex = [v for v in instances if (v.get("scheduling") or {}).get("provisioningModel") == "FLEX_START"]
    untracked = sorted(v["name"] for v in flex if v.get("name") not in backed)
    if not untracked:
        return UNTRACKED_CHECK, True, f"{len(flex)} Flex-start VM(s) of the tenant, each a node's"
    zones = {v["name"]: str(v.get("zone", "")).rsplit("/", 1)[-1] for v in flex}
    delete = "; ".join(f"gcloud compute instances delete {name} --project {project} --zone {zones[name]}" for name in untracked)
    return UNTRACKED_CHECK, False, f"Flex-start VM(s) backing no node: {', '.join(untracked)} (in no state; delete: {delete})"
