"""The two boothooks of templates/node/main.tf that install a gate the kubelet runs first, taken
from the user data OpenTofu evaluates (node_template_support.py `evaluated`) and run on a scratch
node (node_boot_support.py: fake iptables, systemctl and poweroff, scratch directories): the
metadata concealment (pod traffic to the metadata server dropped, a node that cannot conceal
powers off; what needs the node's identity runs with hostNetwork) and NVIDIA Fabric Manager on
NVSwitch machine types.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from node_boot_support import FABRIC_MANAGER_DROPIN, RECORDER, Node
from hcl_support import failures
from node_template_support import TEMPLATES, USER_DATA, _parts
from node_template_support import doc, evaluated, instance, local_values, offer, preconditions, samples  # noqa: F401 (fixtures)


# --- the boothook on a node (tests/node_boot_support.py: fake iptables, scratch drop-in dir) -----

RAW_JUMP = "-d 169.254.169.254/32 -j GPU-PLATFORM-METADATA"
METADATA_CHAIN = ["-p udp --dport 53 -j RETURN", "-p tcp --dport 53 -j RETURN", "-j DROP"]


@pytest.fixture
def boothook(evaluated) -> str:
    [boothook, _] = _parts(evaluated["t4-n1"]["arg.metadata"]["user-data"])
    assert boothook.get_payload() == evaluated["t4-n1"]["local.conceal_script"].rstrip("\n")
    return boothook.get_payload()


def test_the_boothook_drops_pod_traffic_to_the_metadata_server_before_and_after_nat(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    raw, mangle = boot.tables["raw"], boot.tables["mangle"]
    # First in raw PREROUTING (before NAT) and in mangle FORWARD (after DNAT, before filter).
    assert raw["PREROUTING"] == [RAW_JUMP] and mangle["FORWARD"] == [RAW_JUMP]
    assert raw["GPU-PLATFORM-METADATA"] == mangle["GPU-PLATFORM-METADATA"] == METADATA_CHAIN
    assert raw["OUTPUT"] == mangle["OUTPUT"] == []  # the host's own traffic (hostNetwork pods) passes
    # Run again in the same boot: no second jump.
    again = node.boot(boothook)
    assert again.status == 0 and again.tables == boot.tables


def test_the_kubelets_gate_runs_the_same_installer(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    installer = node.installer_dir / "conceal-metadata"
    assert installer.read_text() == (tmp_path / "boothook").read_text()  # the boothook itself, byte for byte
    assert node.dropin().splitlines() == [
        "[Unit]",
        "After=cloud-init.service cloud-init-network.service",
        "[Service]",
        f"ExecStartPre=/bin/sh {installer} gate",
    ]
    assert node.kubelet_may_start(node.dropin())


def test_the_gate_puts_back_a_lost_rule_before_the_kubelet_starts(boothook, tmp_path):
    """A node reset or an in-place upgrade that flushed a rule: the next kubelet start repairs it."""
    node = Node(tmp_path)
    boot = node.boot(boothook)
    lost = [
        ("raw", "PREROUTING", RAW_JUMP),
        ("mangle", "FORWARD", RAW_JUMP),
        ("mangle", "GPU-PLATFORM-METADATA", "-j DROP"),
        ("raw", "GPU-PLATFORM-METADATA", "-p udp --dport 53 -j RETURN"),
    ]
    for table, chain, rule in lost:
        tables = json.loads(json.dumps(boot.tables))
        tables[table][chain].remove(rule)
        node.state.write_text(json.dumps(tables))
        assert node.kubelet_may_start(node.dropin()), (table, chain, rule)
        assert json.loads(node.state.read_text()) == boot.tables, (table, chain, rule)  # every rule back, none twice
        assert not any("poweroff" in c for c in node.calls.read_text().splitlines())


def test_the_gate_leaves_intact_rules_alone_and_repairs_a_flushed_node(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert node.kubelet_may_start(node.dropin())
    changes = [c for c in node.calls.read_text().splitlines() if " -C " not in c]
    assert changes == []  # intact: only checks, no chain flushed while pods run
    node.reboot()  # all rules gone (as after a flush)
    assert node.kubelet_may_start(node.dropin())
    assert json.loads(node.state.read_text()) == boot.tables


@pytest.mark.parametrize("fail, why", [("-t raw -N", "chain in raw"), ("-t mangle -I FORWARD", "mangle FORWARD")])
def test_the_gate_refuses_the_kubelet_only_when_installing_fails(boothook, tmp_path, fail, why):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    node.reboot()
    assert not node.kubelet_may_start(node.dropin(), fail=fail)
    assert not any("poweroff" in c for c in node.calls.read_text().splitlines())  # the gate never powers off a running node
    result = subprocess.run(
        ["/bin/sh", str(node.installer_dir / "conceal-metadata"), "gate"], env=node.env(fail=fail), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and f"metadata concealment failed ({why}); the kubelet does not start" in result.stderr
    (node.installer_dir / "conceal-metadata").unlink()  # a reset that removed the installer: fail closed
    assert not node.kubelet_may_start(node.dropin())


@pytest.mark.parametrize(
    "iptables, fail, why",
    [
        (False, "", "chain in raw"),  # no iptables at all
        (True, "-t raw -N", "chain in raw"),
        (True, "-t mangle -A GPU-PLATFORM-METADATA -j DROP", "drop rule in mangle"),
        (True, "-t raw -I PREROUTING", "raw PREROUTING"),
        (True, "-t mangle -I FORWARD", "mangle FORWARD"),
    ],
)
def test_a_node_that_cannot_conceal_powers_off_and_its_kubelet_cannot_start(boothook, tmp_path, iptables, fail, why):
    node = Node(tmp_path, iptables=iptables)
    boot = node.boot(boothook, fail=fail)
    assert boot.status != 0 and boot.powered_off, boot.calls
    assert f"metadata concealment failed ({why})" in boot.stderr
    # The drop-in was written first, so even a kubelet that is started anyway does not run while
    # installing still fails.
    assert node.dropin() is not None and not node.kubelet_may_start(node.dropin(), fail=fail)


def test_what_needs_the_node_identity_runs_with_host_network():
    """Concealment drops forwarded (pod) traffic only: the CCM and both PD CSI components of the
    kubernetes environment template must run with hostNetwork to keep their credentials."""
    kubernetes_tf = (TEMPLATES / "kubernetes" / "main.tf").read_text()
    workloads = re.findall(r'kind\s*=\s*"(Deployment|DaemonSet)".*?(?=kind\s*=\s*"|\Z)', kubernetes_tf, flags=re.S)
    assert sorted(workloads) == ["DaemonSet", "Deployment", "Deployment"]
    assert len(re.findall(r"^\s*hostNetwork\s*=\s*true$", kubernetes_tf, flags=re.M)) == 3


# --- NVIDIA Fabric Manager on NVSwitch machine types ---------------------------------------------


def _fabric_manager_part(evaluated, scenario: str) -> str:
    parts = _parts(evaluated[scenario]["arg.metadata"]["user-data"])
    [hook] = [p for p in parts if p.get_filename() == "gpu-platform-fabric-manager"]
    assert hook.get_content_type() == "text/cloud-boothook"
    return hook.get_payload()


def test_only_nvswitch_shapes_get_the_fabric_manager_gate(evaluated):
    h100 = _parts(evaluated["h100-a3"]["arg.metadata"]["user-data"])
    assert [p.get_filename() for p in h100] == ["gpu-platform-conceal-metadata", "gpu-platform-fabric-manager", "vcluster-platform"]
    assert h100[2].get_payload() == USER_DATA
    exposed = _parts(evaluated["exposed-h100"]["arg.metadata"]["user-data"])
    assert [p.get_filename() for p in exposed] == ["gpu-platform-fabric-manager", "vcluster-platform"]
    for scenario in ("t4-n1", "l4-g2", "a100-a2", "cpu-e2"):  # a100-a2: the smallest A2 shape, no NVSwitch
        assert "gpu-platform-fabric-manager" not in evaluated[scenario]["arg.metadata"]["user-data"], scenario
    assert failures(evaluated["exposed-h100"]) == []


def _switches(root, *, nvswitch: int = 0, nvlink5: bool = False, modules: tuple[str, ...] = ("mlx5_core", "ib_umad"),
              start_script: bool = True, **waits: str) -> dict[str, str]:
    """The gate's places to look, moved to a scratch directory: NVSwitch devices the driver lists,
    InfiniBand devices whose VPD does or does not name an NVLink5 switch port, the loaded kernel
    modules, Fabric Manager's start script (a recorder, like the fake systemctl), the console it
    writes to; and its waits (`module_wait_seconds`, `start_seconds`) where given."""
    devices = root / "nvswitch"
    devices.mkdir()
    for i in range(nvswitch):
        (devices / f"000{i}:00:00.0").write_text("")
    vpd = root / "infiniband" / "mlx5_0" / "device"
    vpd.mkdir(parents=True)
    (vpd / "vpd").write_text("PN MCX75310AAS SW_MNG" if nvlink5 else "PN MCX75310AAS")
    (root / "modules").write_text("".join(f"{m} 65536 0 - Live 0x0000000000000000\n" for m in ("nvidia", *modules)))
    script = root / "nvidia-fabricmanager-start.sh"
    if start_script:
        script.write_text(RECORDER)
        script.chmod(0o755)
    return {
        "nvswitch_dir": str(devices), "infiniband_dir": str(root / "infiniband"), "modules_file": str(root / "modules"),
        "fm_start_script": str(script), "console": str(root / "console"), **waits,
    }


def _console(root) -> list[str]:
    path = root / "console"
    return path.read_text().splitlines() if path.exists() else []


def test_the_boothook_installs_a_gate_the_kubelet_runs_first(evaluated, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path))
    assert (boot.status, boot.powered_off, boot.calls) == (0, False, []), boot.stderr
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    # The kubelet's start waits for the gate's bounded waits: the modules, then two starts, and a minute.
    assert dropin.splitlines() == ["[Service]", "TimeoutStartSec=420", f"ExecStartPre=/bin/sh {node.installer_dir}/fabric-manager gate"]


def test_a_vm_that_sees_no_switch_starts_its_kubelet_without_fabric_manager(evaluated, tmp_path):
    """Google's hosts manage the fabric (config/fabric_manager.py): the guest sees no switch, and
    the image need not ship Fabric Manager. Never powered off on that guess; what it saw is on the
    serial console."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin, command_fail="nvidia-fabricmanager")
    assert not any("poweroff" in c or "nvidia-fabricmanager" in c for c in node.calls.read_text().splitlines())
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=0 nvlink5-switch-ports=0"


def test_a_vm_that_sees_nvswitches_starts_its_kubelet_only_once_fabric_manager_runs(evaluated, tmp_path):
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, nvswitch=6, start_seconds="1"))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin)
    calls = node.calls.read_text().splitlines()
    assert "systemctl start nvidia-fabricmanager.service" in calls and "systemctl is-active --quiet nvidia-fabricmanager.service" in calls
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=6 nvlink5-switch-ports=0"
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: active"
    assert not node.kubelet_may_start(dropin, command_fail="is-active")  # Fabric Manager failed: no kubelet
    assert not any("poweroff" in c for c in node.calls.read_text().splitlines())
    # A start that hangs is given up after start_seconds: the kubelet does not start, nothing waits forever.
    assert not node.kubelet_may_start(dropin, command_hang="systemctl start")


def test_a_vm_that_sees_nvlink5_ports_follows_nvidias_sequence(evaluated, tmp_path):
    """NVLink5 (A4): the InfiniBand modules, then Fabric Manager with NVLSM through its start script
    (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver `_start_daemons`), not the unit alone."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, nvlink5=True, start_seconds="1"))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin)
    [call] = node.calls.read_text().splitlines()
    assert call == (
        "nvidia-fabricmanager-start.sh --mode start --fm-config-file /usr/share/nvidia/nvswitch/fabricmanager.cfg "
        "--fm-pid-file /var/run/nvidia-fabricmanager/nv-fabricmanager.pid --nvlsm-config-file /usr/share/nvidia/nvlsm/nvlsm.conf "
        "--nvlsm-pid-file /var/run/nvidia-fabricmanager/nvlsm.pid"
    )
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=0 nvlink5-switch-ports=1"
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: active"
    # Every wait is bounded: a start script that hangs, or modules that never load, keep the kubelet
    # from starting and return.
    assert not node.kubelet_may_start(dropin, command_hang="nvidia-fabricmanager-start.sh")


def test_an_nvlink5_vm_whose_modules_never_load_gives_up_in_time(evaluated, tmp_path):
    node = Node(tmp_path)
    settings = _switches(tmp_path, nvlink5=True, modules=("mlx5_core",), module_wait_seconds="0")
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=settings)
    assert not node.kubelet_may_start(node.dropin(FABRIC_MANAGER_DROPIN))
    assert node.calls.read_text() == ""  # Fabric Manager not started, the VM not powered off
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: mlx5_core and ib_umad not loaded after 0 s; the kubelet does not start"


@pytest.mark.parametrize("seen", [{"nvswitch": 6}, {"nvlink5": True, "start_script": False}])
def test_a_vm_that_sees_switches_but_has_no_fabric_manager_powers_off(evaluated, tmp_path, seen):
    """No guess: with a switch visible and no Fabric Manager (its unit, or for NVLink5 its start
    script), CUDA cannot initialize (NVIDIA's rule), so the node powers off and its claim fails
    rather than join broken."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, **seen))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert not node.kubelet_may_start(dropin, command_fail="cat nvidia-fabricmanager")
    assert any("poweroff" in c for c in node.calls.read_text().splitlines())
    assert "powering off so that this node never joins" in _console(tmp_path)[-1]
