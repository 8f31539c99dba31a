"""GpuReservations: the Compute Engine reservations an environment creates (`nodeProvider.reservations`
with `create: true`), each sliced per tenant by the NodeProvider's node types (config/reservations.py).

Each is a specific reservation (`specificReservationRequired`): only VMs that name it consume it, so
no on-demand VM of the owner or of a consumer project takes it by accident (every VM of the node
template states its reservation affinity too). It is shared with the team projects of its slices
(`SPECIFIC_PROJECTS`), which needs the owner project on the allowlist of the organization policy
`compute.sharedReservationsOwnerProjects` (docs/gpu-nodes.md, "Reservations"). A reservation is
billed from its creation, used or not: the plan shows it as an always-on, committed cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from config.catalog import GUEST, load_catalog
from config.reservations import Reservation, reservation_shape


@dataclass(frozen=True)
class ReservationToCreate:
    reservation: Reservation
    project: str  # the owner project
    shared_with: tuple[str, ...]  # the team projects of its slices, the owner's excluded


class GpuReservations(pulumi.ComponentResource):
    reservations: dict[str, gcp.compute.Reservation]

    def __init__(self, name: str, to_create: tuple[ReservationToCreate, ...], opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:capacity:GpuReservations", name, None, opts)
        self.reservations = {}
        catalog = load_catalog()
        for item in to_create:
            r = item.reservation
            shape = reservation_shape(catalog, r.machine_type, r.gpu)
            # An N1 host reserves its attached GPUs as guest accelerators; accelerator-optimized
            # machine types come with theirs (Compute Engine API, reservations.insert:
            # specificReservation.instanceProperties.guestAccelerators).
            accelerators = None
            if shape is not None and shape.attach == GUEST:
                accelerators = [
                    gcp.compute.ReservationSpecificReservationInstancePropertiesGuestAcceleratorArgs(
                        accelerator_type=shape.gpu, accelerator_count=shape.gpu_count
                    )
                ]
            share = None
            if item.shared_with:
                share = gcp.compute.ReservationShareSettingsArgs(
                    share_type="SPECIFIC_PROJECTS",
                    project_maps=[gcp.compute.ReservationShareSettingsProjectMapArgs(id=p, project_id=p) for p in item.shared_with],
                )
            self.reservations[r.name] = gcp.compute.Reservation(
                f"{name}-{r.name}",
                name=r.name,
                project=item.project,
                zone=r.zone,
                description="GPU capacity of gpu-platform, sliced per team: " + ", ".join(f"{s.tenant} {s.count}" for s in r.slices),
                specific_reservation_required=True,
                specific_reservation=gcp.compute.ReservationSpecificReservationArgs(
                    count=r.count,
                    instance_properties=gcp.compute.ReservationSpecificReservationInstancePropertiesArgs(
                        machine_type=r.machine_type, guest_accelerators=accelerators
                    ),
                ),
                share_settings=share,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"reservations": list(self.reservations)})
