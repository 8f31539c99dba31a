"""NVIDIA Fabric Manager on the largest shapes (config/fabric_manager.py): settled per machine series,
never a reason to refuse a pool or to power a node off on a guess; the node decides by the switches
it sees (templates/node/main.tf, tested in test_node_template_kubelet_gates.py), and the acceptance
run's probe reads what a node saw."""

from __future__ import annotations

from config import fabric_manager
from config.catalog import load_catalog
from config.stack import NS, load_stack
from shipped_stacks import SHIPPED_DIR, shipped_values

CATALOG = load_catalog()


def test_every_series_with_an_hgx_board_is_settled():
    """Each machine series with an `nvswitch` machine has its record, naming those machines."""
    boards = {m.series: set() for m in CATALOG.machines.values() if m.nvswitch}
    for machine in CATALOG.machines.values():
        if machine.nvswitch:
            boards[machine.series].add(machine.name)
    assert set(fabric_manager.SERIES) == set(boards) == {"a2", "a3", "a4"}
    for series, (machines, verdict, evidence) in fabric_manager.SERIES.items():
        assert set(machines.split(", ")) == boards[series], series
        assert verdict == "not expected in the guest" and "install no Fabric Manager" in evidence


def test_prod_takes_an_8_gpu_pool_without_a_verification_flag():
    """prod refused these shapes until fabricManagerVerified was set; now it plans them, warning-free."""
    values = shipped_values("prod")
    pools = values[f"{NS}:tenants"][0]["gpuPools"]
    assert any(p.get("gpusPerNode") == 8 and "fabricManagerVerified" not in p for p in pools)
    env = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    h100 = next(p for p in env.tenants[0].gpu_pools if p.gpu == "nvidia-h100-80gb")
    assert {CATALOG.machines[nt.machine_type].nvswitch for nt in h100.node_types} == {True}
    assert not [w for w in env.warnings if "Fabric Manager" in w]


def test_the_old_flag_is_accepted_and_changes_nothing():
    values = shipped_values("prod")
    plain = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    for pool in values[f"{NS}:tenants"][0]["gpuPools"]:
        pool["fabricManagerVerified"] = True
    flagged = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    assert [p.node_types for p in flagged.tenants[0].gpu_pools] == [p.node_types for p in plain.tenants[0].gpu_pools]
    assert flagged.warnings == plain.warnings


# What PROBE prints on a node, as nvidia-smi -q words it ("Fabric" section, driver 570).
HOST_MANAGED = "nvswitch-devices=0\nnvlink5-switch-ports=0\n" + "fabric: State : N/A\nfabric: Status : N/A\n" * 8
GUEST_MANAGED = "nvswitch-devices=6\nnvlink5-switch-ports=0\n" + "fabric: State : Completed\nfabric: Status : Success\n" * 8
GUEST_BROKEN = "nvswitch-devices=6\nnvlink5-switch-ports=0\n" + "fabric: State : In Progress\nfabric: Status : N/A\n" * 8


def test_the_probe_reads_what_the_guest_saw():
    host = fabric_manager.read_probe(HOST_MANAGED)
    assert (host.guest_sees_switches, host.fabric_states) == (False, ("N/A",) * 8)
    assert host.verdict.startswith("no switch visible: the host manages the fabric")
    guest = fabric_manager.read_probe(GUEST_MANAGED)
    assert guest.guest_sees_switches and guest.verdict == "the guest manages the fabric: Fabric Manager must run in it"
    broken = fabric_manager.read_probe(GUEST_BROKEN)
    assert broken.verdict.endswith("the fabric is NOT set up")
    assert fabric_manager.read_probe("nvlink5-switch-ports=1\n").guest_sees_switches


def test_the_probe_looks_where_nvidias_driver_container_looks():
    """The same two places as NVIDIA/gpu-driver-container's _assert_nvswitch_system and
    _assert_nvlink5_system, and as the node template's gate."""
    from node_template_support import NODE_TF

    template = NODE_TF.read_text()
    for where in ("/proc/driver/nvidia-nvswitch/devices", "/sys/class/infiniband", "SW_MNG"):
        assert where in fabric_manager.PROBE and where in template


def test_an_a100_reports_no_fabric_state_and_the_gate_settles_it():
    """nvidia-smi's fabric state is N/A on A100 (the fabric info is Hopper's and newer): not "not
    set up". Where such a guest sees switches, the gate's serial-console line `active` says whether
    Fabric Manager runs."""
    a100 = "nvswitch-devices=6\nnvlink5-switch-ports=0\n" + "fabric: State : N/A\nfabric: Status : N/A\n" * 8
    seen = fabric_manager.read_probe(a100)
    assert seen.guest_sees_switches and seen.fabric_reported == () and seen.fabric_ready is None
    assert seen.verdict.endswith("whether the fabric is set up was not reported")
    serial = "[   12.3] cloud-init[812]: gpu-platform fabric-manager: seen nvswitch-devices=6 nvlink5-switch-ports=0\ngpu-platform fabric-manager: active\n"
    assert fabric_manager.read_probe(a100, serial).fabric_ready is True
    # Hopper and newer report it: a state other than Completed is a fabric not set up, whatever the gate said.
    assert fabric_manager.read_probe(GUEST_BROKEN, serial).fabric_ready is False


def test_nvlink5_ports_the_job_cannot_read_are_unknown_until_the_gate_says(tmp_path):
    """The VPD files are root's alone: the unprivileged Job prints `unreadable`, never 0, and the
    node gate's serial-console line (read as root) gives the figure."""
    import subprocess

    bin_dir, devices, infiniband = tmp_path / "bin", tmp_path / "nvswitch", tmp_path / "infiniband"
    for d in (bin_dir, devices, infiniband / "mlx5_0" / "device"):
        d.mkdir(parents=True)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'Fabric'\necho '    State : Completed'\necho '    Status : Success'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    # A link to nothing stands in for a file the Job may not read (the tests run as root, who reads any file).
    (infiniband / "mlx5_0" / "device" / "vpd").symlink_to(tmp_path / "root-only")
    probe = fabric_manager.PROBE.replace("/proc/driver/nvidia-nvswitch/devices", str(devices)).replace("/sys/class/infiniband", str(infiniband))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, env=env, timeout=30).stdout
    assert out.splitlines()[:2] == ["nvswitch-devices=0", "nvlink5-switch-ports=unreadable"]
    seen = fabric_manager.read_probe(out)
    assert seen.nvlink5_ports is None and not seen.switches_known and seen.verdict.startswith("not settled")
    gate = "gpu-platform fabric-manager: seen nvswitch-devices=0 nvlink5-switch-ports=18\ngpu-platform fabric-manager: active\n"
    settled = fabric_manager.read_probe(out, gate)
    assert (settled.nvlink5_ports, settled.guest_sees_switches, settled.fabric_ready) == (18, True, True)
    # Readable (a privileged look), the ports are counted.
    (tmp_path / "root-only").write_text("PN MCX75310AAS SW_MNG\n")
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, env=env, timeout=30).stdout
    assert out.splitlines()[1] == "nvlink5-switch-ports=1"
