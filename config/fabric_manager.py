"""NVIDIA Fabric Manager on the largest shapes: settled per machine series, checked by the node.

The machines config/catalog.yaml marks `nvswitch` carry a full HGX board (8 or 16 A100, H100, H200
or B200 GPUs joined by NVSwitches). Such a board needs Fabric Manager, but *where* it runs depends on
how the hypervisor hands the board to the VM (NVIDIA Fabric Manager User Guide, "Virtualization
models"): passed through whole, switches included, the guest runs it; in the shared-NVSwitch model
the host manages the fabric, the guest sees no switch, and Fabric Manager started in it fails with
NV_WARN_NOTHING_TO_DO (NVIDIA/gpu-operator issue 610).

What Google's own material says, per series (A2 8g/16g, A3 High 8g, A3 Ultra, A4): no Compute
Engine or GKE page names a Fabric Manager step for any of them, and Google's own driver installers
install and start none on any machine type: the Compute Engine installer
(GoogleCloudPlatform/compute-gpu-installation, tag cuda-installer-v1.9.1, commit e4d32d9) and the
GKE one (GoogleCloudPlatform/container-engine-accelerators at 992db81), while GKE offers node pools of
a2-megagpu-16g, a3-highgpu-8g, a3-ultragpu-8g and a4-highgpu-8g. So Google does not expect the guest
to manage the fabric on any of these series: SERIES records that, with its evidence, and no series
is recorded as needing it. No Google page states it outright either, so nothing is refused or
powered off on the strength of this record (it was: prod refused these shapes until
`fabricManagerVerified`, and every node of them powered off when its image lacked the unit).

The node decides instead, by what it sees (templates/node/main.tf `fabric_manager_script`), with
NVIDIA's own rule (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver at 06a208c, since tag
22.06.17, `_assert_nvswitch_system` / `_assert_nvlink5_system`): Fabric Manager runs when, and only
when, /proc/driver/nvidia-nvswitch/devices is not empty or an InfiniBand device's VPD names an NVLink5
switch port (SW_MNG). `make acceptance` runs PROBE on the GPU node it creates and records what the
guest saw (docs/acceptance.md), which settles it for that shape.
"""

from __future__ import annotations

from dataclasses import dataclass

KEY = "fabricManagerVerified"  # a pool key kept for stacks that set it; it changes nothing now
UNIT = "nvidia-fabricmanager.service"

# What Google's own material shows per machine series with NVSwitch shapes (module docstring).
GOOGLE_INSTALLERS = (
    "GoogleCloudPlatform/compute-gpu-installation tag cuda-installer-v1.9.1 (e4d32d9) and "
    "GoogleCloudPlatform/container-engine-accelerators at 992db81 install no Fabric Manager"
)
SERIES = {
    "a2": ("a2-highgpu-8g, a2-megagpu-16g, a2-ultragpu-8g", "not expected in the guest", GOOGLE_INSTALLERS),
    "a3": ("a3-highgpu-8g, a3-ultragpu-8g", "not expected in the guest", GOOGLE_INSTALLERS),
    "a4": ("a4-highgpu-8g", "not expected in the guest", GOOGLE_INSTALLERS),
}

# Run in a GPU container on the node (the acceptance run's GPU Job): how many NVSwitch devices the
# guest sees, NVLink5 switch ports, the GPUs' fabric state (nvidia-smi -q "Fabric" section, which
# says whether the fabric the GPUs hang off was set up, by whom ever) and whether CUDA's view is sane.
PROBE = (
    "echo nvswitch-devices=$(ls -A /proc/driver/nvidia-nvswitch/devices 2>/dev/null | wc -l); "
    "echo nvlink5-switch-ports=$(cat /sys/class/infiniband/*/device/vpd 2>/dev/null | grep -c SW_MNG); "
    "nvidia-smi -q | sed -n '/Fabric/,/Status/p' | sed 's/^ */fabric: /'"
)


@dataclass(frozen=True)
class ProbeResult:
    """What PROBE printed, read back."""

    nvswitch_devices: int
    nvlink5_ports: int
    fabric_states: tuple[str, ...]  # one per GPU: Completed, In Progress, N/A, …

    @property
    def guest_sees_switches(self) -> bool:
        return self.nvswitch_devices > 0 or self.nvlink5_ports > 0

    @property
    def verdict(self) -> str:
        if self.guest_sees_switches:
            ready = bool(self.fabric_states) and all(s == "Completed" for s in self.fabric_states)
            return "the guest manages the fabric: Fabric Manager must run in it" + ("" if ready else "; the fabric is NOT set up")
        return "no switch visible: the host manages the fabric, the guest needs no Fabric Manager"


def read_probe(output: str) -> ProbeResult:
    """PROBE's output as a ProbeResult (missing figures read as 0)."""
    figures: dict[str, int] = {}
    states = []
    for line in output.splitlines():
        key, _, value = line.partition("=")
        if key in ("nvswitch-devices", "nvlink5-switch-ports") and value.strip().isdigit():
            figures[key] = int(value)
        elif line.startswith("fabric: State") and ":" in line[len("fabric: ") :]:
            states.append(line.split(":", 2)[2].strip())
    return ProbeResult(figures.get("nvswitch-devices", 0), figures.get("nvlink5-switch-ports", 0), tuple(states))
