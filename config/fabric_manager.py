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
switch port (SW_MNG); on NVLink5 it follows NVIDIA's sequence (the InfiniBand modules, then Fabric
Manager with NVLSM through its start script), every wait bounded, and it writes what it saw to the
serial console. `make acceptance` runs PROBE on the GPU node it creates, reads the gate's line from
the VM's serial console, and records what the guest saw (docs/acceptance.md), which settles it for
that shape.
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

# Run in a GPU container on the node (the smoke Job, unprivileged): how many NVSwitch devices the
# guest sees (/proc/driver is readable by any user), the NVLink5 switch ports where the container can
# read the InfiniBand VPD, else "unreadable" (the files are readable by root alone: an unprivileged pod
# never can, and the node's gate, which runs as root, says it on the serial console instead:
# GATE_LINE), and each GPU's fabric state (nvidia-smi -q "Fabric" section, which says whether the
# fabric the GPUs hang off was set up, by whom ever; "N/A" on GPUs before Hopper, whose driver does
# not report it: nvmlDeviceGetGpuFabricInfo is for Hopper and newer, NVIDIA NVML API reference).
PROBE = (
    "echo nvswitch-devices=$(ls -A /proc/driver/nvidia-nvswitch/devices 2>/dev/null | wc -l); "
    "vpd=$(ls /sys/class/infiniband/*/device/vpd 2>/dev/null); "
    "if [ -z \"$vpd\" ]; then echo nvlink5-switch-ports=0; "
    "elif cat $vpd >/dev/null 2>&1; then echo nvlink5-switch-ports=$(cat $vpd | grep -c SW_MNG); "
    "else echo nvlink5-switch-ports=unreadable; fi; "
    "nvidia-smi -q | sed -n '/Fabric/,/Status/p' | sed 's/^ */fabric: /'"
)
# What the node template's gate writes to the serial console (templates/node/main.tf
# `fabric_manager_script`): what it saw, as root, then `active` once Fabric Manager runs.
GATE_PREFIX = "gpu-platform fabric-manager: "
NOT_REPORTED = "N/A"


@dataclass(frozen=True)
class ProbeResult:
    """What the guest saw of its switches and fabric: PROBE's output, and the gate's serial-console
    lines where the run read them (the gate's figures win: it reads the VPD as root)."""

    nvswitch_devices: int
    nvlink5_ports: int | None  # None: not readable where it was looked for, and no gate line
    fabric_states: tuple[str, ...]  # one per GPU: Completed, In Progress, N/A, …
    gate_active: bool = False  # the gate said Fabric Manager is active

    @property
    def switches_known(self) -> bool:
        return self.nvswitch_devices > 0 or self.nvlink5_ports is not None

    @property
    def guest_sees_switches(self) -> bool:
        return self.nvswitch_devices > 0 or bool(self.nvlink5_ports)

    @property
    def fabric_reported(self) -> tuple[str, ...]:
        """The GPUs' fabric states, "N/A" left out: a GPU before Hopper (A100) reports none."""
        return tuple(s for s in self.fabric_states if s != NOT_REPORTED)

    @property
    def fabric_ready(self) -> bool | None:
        """Where the guest manages the fabric: every reported state Completed, or where no GPU reports
        one (A100), the gate's word that Fabric Manager is active; None when nothing says."""
        if not self.guest_sees_switches:
            return True if self.switches_known else None
        if self.fabric_reported:
            return all(s == "Completed" for s in self.fabric_reported)
        return True if self.gate_active else None

    @property
    def verdict(self) -> str:
        if not self.switches_known:
            return "not settled: the NVLink5 switch ports were not readable to the Job and the node's serial console was not read"
        if self.guest_sees_switches:
            ready = self.fabric_ready
            how = "" if ready else ("; the fabric is NOT set up" if ready is False else "; whether the fabric is set up was not reported")
            return "the guest manages the fabric: Fabric Manager must run in it" + how
        return "no switch visible: the host manages the fabric, the guest needs no Fabric Manager"


def read_probe(output: str, serial: str = "") -> ProbeResult:
    """PROBE's output (and the node's serial-console output, where read) as a ProbeResult. A figure
    neither printed reads as 0 for the NVSwitch devices and as unknown for the NVLink5 ports."""
    figures: dict[str, int | None] = {}
    states = []
    for line in output.splitlines():
        key, _, value = line.partition("=")
        if key in ("nvswitch-devices", "nvlink5-switch-ports"):
            figures[key] = int(value) if value.strip().isdigit() else None
        elif line.startswith("fabric: State") and ":" in line[len("fabric: ") :]:
            states.append(line.split(":", 2)[2].strip())
    active = False
    for line in serial.splitlines():
        said = line[line.index(GATE_PREFIX) + len(GATE_PREFIX) :].strip() if GATE_PREFIX in line else ""
        if said.startswith("seen "):
            for pair in said.split()[1:]:
                key, _, value = pair.partition("=")
                if key in ("nvswitch-devices", "nvlink5-switch-ports") and value.isdigit():
                    figures[key] = int(value)
        active = active or said == "active"
    return ProbeResult(figures.get("nvswitch-devices") or 0, figures.get("nvlink5-switch-ports"), tuple(states), active)
