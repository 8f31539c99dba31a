"""NVIDIA Fabric Manager on NVSwitch machine types, said before deploy.

The machines config/catalog.yaml marks `nvswitch` (full HGX A100, H100 and H200 boards) need
Fabric Manager before CUDA can use their GPUs. The GPU Operator runs it only in its driver
container, which `driver.enabled=false` leaves out, so the node image must ship it; the node
template fails closed where it does not: the VM powers off before it joins (templates/node/main.tf
`fabric_manager_script`). That is safe but silent, and not free: Karpenter launches another VM for
the pods still waiting, and each boots, bills and powers off in turn.

So the plan says it first. A pool that may get an NVSwitch machine type on a GPU image family the
catalog does not record as shipping Fabric Manager (`images.gpu.families.<family>.fabricManager:
shipped`) is warned about, and refused in prod unless the pool sets `fabricManagerVerified: true`.
The setting is the pool's, like `spotWarmNodes`, because the pool is where the NVSwitch shape is
chosen (gpusPerNode, machineTypes) and a team stack can set it; the image is the environment's, so
once a family is checked its catalog entry says so for every pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import node_properties as props
from .catalog import FABRIC_MANAGER_SHIPPED, FABRIC_MANAGER_UNKNOWN, load_catalog
from .node_types import NodeType

if TYPE_CHECKING:
    from .tenant import TenantPlan

KEY = "fabricManagerVerified"
UNIT = "nvidia-fabricmanager.service"


@dataclass(frozen=True)
class Unverified:
    """A pool's NVSwitch machine types on image families not recorded as shipping Fabric Manager."""

    machine_types: tuple[str, ...]
    families: tuple[str, ...]
    usd_per_hour: tuple[float, ...]  # the list prices of those node types the region records

    def what(self) -> str:
        families = ", ".join(f"{f!r} (fabricManager: {_state(f)})" for f in self.families)
        return (
            f"NVSwitch machine types ({', '.join(self.machine_types)}) on GPU image family {families}, which config/catalog.yaml "
            f"does not record as shipping NVIDIA Fabric Manager: a node whose image has no {UNIT} powers off before it joins, "
            f"and Karpenter launches another, each VM billing {self._price()} until it powers off, while the pool's pods wait"
        )

    def _price(self) -> str:
        if not self.usd_per_hour:
            return "(at a price the region does not record)"
        low, high = min(self.usd_per_hour), max(self.usd_per_hour)
        return f"{low:.2f} USD/h" if low == high else f"{low:.2f}–{high:.2f} USD/h"

    def allowed(self) -> str:
        family = self.families[0]
        return (
            f"set {KEY}: true once an image of the family has been checked to ship it (on a VM of it: systemctl cat {UNIT}), "
            f"or record it in config/catalog.yaml (images.gpu.families.{family}.fabricManager: {FABRIC_MANAGER_SHIPPED}), "
            "or choose a shape without NVSwitch (fewer GPUs per node)"
        )


def _state(family: str) -> str:
    return load_catalog().gpu_image.fabric_manager.get(family, f"{FABRIC_MANAGER_UNKNOWN}, not in the catalog")


def unverified(node_types: tuple[NodeType, ...]) -> Unverified | None:
    """The NVSwitch machine types among a pool's node types whose image family the catalog does not
    record as shipping Fabric Manager; None when there are none."""
    catalog = load_catalog()
    found = [
        nt
        for nt in node_types
        if catalog.machines[nt.machine_type].nvswitch
        and catalog.gpu_image.fabric_manager.get(nt.properties[props.IMAGE_FAMILY]) != FABRIC_MANAGER_SHIPPED
    ]
    if not found:
        return None
    return Unverified(
        tuple(dict.fromkeys(nt.machine_type for nt in found)),
        tuple(dict.fromkeys(nt.properties[props.IMAGE_FAMILY] for nt in found)),
        tuple(nt.usd_per_hour for nt in found if nt.usd_per_hour is not None),
    )


def prod_problem(node_types: tuple[NodeType, ...], verified: bool) -> str | None:
    """In prod: the problem of a pool at `<pool>.fabricManagerVerified`, or None."""
    found = None if verified else unverified(node_types)
    return None if found is None else f"required in prod for this pool's {found.what()}; allowed: {found.allowed()}"


def warnings(path: str, plan: TenantPlan) -> list[str]:
    """The plan's warnings for a tenant's pools (`path`: tenants[i] or tenant) that have not set
    fabricManagerVerified (in prod they are refused before this)."""
    found = []
    for i, (pool, pool_plan) in enumerate(zip(plan.tenant.gpu_pools, plan.gpu_pools, strict=True)):
        what = None if pool.fabric_manager_verified else unverified(pool_plan.node_types)
        if what is not None:
            found.append(f"{path}.gpuPools[{i}]: offers {what.what()}. In prod this is an error; to accept or avoid it: {what.allowed()}.")
    return found
