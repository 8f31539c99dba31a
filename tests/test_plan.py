"""The offline plan (tools/plan.py) as a user runs it: `python -m tools.plan ...`.

Called in-process through `main(argv)` for speed, and once as a subprocess to prove the command-line
entry point. Expected numbers come from the config layer (load_stack, TenantPlan, the catalog), not
from the plan's own code, so a plan that prints the wrong thing fails here. Figures are checked on
the stacks as shipped (tests/data/shipped/); every stack of this checkout only has to plan.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.node_provider import GcpNodeProviderArgs, node_provider_spec
from components.vcluster_values import VClusterValues
from config import yaml_io
from config.catalog import CATALOG_PATH, load_catalog
from config.stack import EnvironmentStack, TenantStack, load_stack
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values
from config.versions import (
    CCM_IMAGE,
    GPU_OPERATOR_VERSION,
    PD_CSI_DRIVER_IMAGE,
    PLATFORM_CHART_VERSION,
    VCLUSTER_CHART_VERSION,
)
from tools.mock_engine import config_strings
from tools.plan import main
from docs_support import section as docs_section
from shipped_stacks import SHIPPED_DIR, run_shipped, shipped_project

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


def plan(*argv: str, project_dir: Path = SHIPPED_DIR) -> tuple[int, str, str]:
    """`python -m tools.plan ARGV`, on the shipped stacks unless ARGV or `project_dir` says otherwise."""
    if "--project-dir" not in argv:
        argv = (*argv, "--project-dir", str(project_dir))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def loaded(stack: str, project_dir: Path = SHIPPED_DIR):
    values = read_stack_values(project_dir, stack)
    return load_stack(config_strings(values)[0], stack=stack, project_dir=project_dir)


def section(text: str, title: str) -> str:
    """The lines of one section of the text plan: from its title to the next blank line."""
    start = next(i for i, line in enumerate(text.splitlines()) if line.startswith(title))
    lines = []
    for line in text.splitlines()[start:]:
        if not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def money(value: float) -> str:
    return f"{value:,.2f}"


@pytest.fixture(scope="module")
def dev_plan(tmp_path_factory) -> tuple[int, str, str, Path]:
    out_dir = tmp_path_factory.mktemp("plan-out")
    return (*plan("--stack", "dev", "--out", str(out_dir)), out_dir)


@pytest.fixture(scope="module")
def dev_json() -> dict:
    code, out, _ = plan("--stack", "dev", "--json")
    assert code == 0
    return json.loads(out)


@pytest.fixture(scope="module")
def vision(tmp_path_factory) -> tuple[str, dict, Path]:
    """team-vision-dev planned once, as `--out DIR` and `--json` show it: text, JSON, DIR."""
    from tools.plan import plan_stack, write_documents
    from tools.plan_json import summary
    from tools.plan_text import render_text

    out_dir = tmp_path_factory.mktemp("vision-out")
    planned = plan_stack("team-vision-dev", SHIPPED_DIR)
    write_documents(planned, out_dir)
    return render_text(planned), json.loads(json.dumps(summary(planned), default=str)), out_dir


@pytest.fixture(scope="module")
def dev_stack() -> EnvironmentStack:
    env = loaded("dev")
    assert isinstance(env, EnvironmentStack)
    return env


# --- every committed stack ---------------------------------------------------------------------------


def test_every_committed_stack_plans_environment_stacks_first():
    """Whatever stacks this checkout has (a user's added teams included), as `make test` runs it
    (`--all --quiet`, whose lines test_command_line_entry_point reads), here with --json."""
    code, out, err = plan("--all", "--json", project_dir=PROJECT_DIR)
    assert code == 0, err
    summaries = json.loads(out)["stacks"]
    assert all(s["ok"] for s in summaries), [s for s in summaries if not s["ok"]]
    planned = [s["stack"] for s in summaries]
    assert sorted(planned) == list_stacks(PROJECT_DIR)
    assert [s["kind"] for s in summaries] == ["tenant" if isinstance(loaded(s, PROJECT_DIR), TenantStack) else "environment" for s in planned]
    kinds = [s["kind"] for s in summaries]
    assert kinds == sorted(kinds), f"environment stacks must come first: {planned}"


def test_default_stack_is_dev(dev_stack):
    code, out, _ = plan("--quiet")
    assert code == 0
    assert out.startswith("ok    dev: environment stack")
    assert f"{len(dev_stack.tenants)} tenant(s)" in out


# --- the dev plan: tree, documents, costs --------------------------------------------------------------


def test_dev_plan_shows_the_resource_tree_and_counts_per_type(dev_plan, dev_run):
    code, out, _, _ = dev_plan
    assert code == 0
    reference = dev_run
    tree = section(out, "Resources (")
    assert tree.startswith(f"Resources ({len(reference.registrations)} registered")
    # Components with their children indented below them.
    lines = tree.splitlines()
    tenant = next(i for i, line in enumerate(lines) if "gpu-platform:tenants:VirtualCluster  tenant-nlp" in line)
    child = next(line for line in lines[tenant + 1 :] if "VirtualClusterInstance  tenant-nlp-instance" in line)
    indent = lambda line: len(line) - len(line.lstrip(" │├└─"))  # noqa: E731
    assert indent(child) > indent(lines[tenant])
    # The count per type equals what the program registered.
    counts = {}
    for line in section(out, "Resources by type").splitlines()[2:]:
        count, typ = line.split()[:2]
        counts[typ] = int(count)
    expected = {}
    for r in reference.registrations:
        expected[r.type] = expected.get(r.type, 0) + 1
    assert counts == expected


def test_dev_plan_groups_node_types_by_shape_with_zones_in_one_column(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    table = section(out, "NodeProvider ").splitlines()
    assert f"{len(dev_stack.offer.node_types)} node types in groups of the same shape" in table[0]
    # `cost` is the order the platform follows, never shown as a price (config/capacity.py).
    assert "order: the `cost` the platform compares, not a price (rank × 10,000,000,000 + thousandths of a USD per hour × 1,000 + a tie-break" in table[1]
    header, rows = table[2], [line for line in table[3:] if not line.startswith("  '")]
    assert header.split() == [
        "machine", "type", "GPU", "×", "count", "capacity", "rank", "vCPU", "memory", "GiB", "USD/h", "order", "(cost,", "less", "tie-break)", "max", "nodes", "zones",
    ]
    shapes = {(nt.machine_type, nt.gpu_count, nt.capacity, nt.rank) for nt in dev_stack.offer.node_types}
    assert len(rows) == len(shapes)  # one row per shape, not per zone
    for nt in dev_stack.offer.node_types:
        row = next(r for r in rows if r.split()[0] == nt.machine_type and nt.capacity in r.split())
        cells = row.split()
        assert nt.zone in row and ", ".join(dev_stack.facts.zones) in row
        assert f"{nt.cpu_millis / 1000:g}" in cells and f"{nt.memory_mi / 1024:.1f}" in cells
        price = "unknown" if nt.usd_per_hour is None else f"≈{nt.usd_per_hour:.4f}"
        order = "—" if nt.cost is None else str(nt.cost) if nt.gpu is None else f"{nt.cost - nt.cost % 1000}+"
        assert price in cells and order in cells


def test_node_types_option_lists_every_node_type_by_name(dev_stack):
    code, out, _ = plan("--stack", "dev", "--node-types")
    assert code == 0
    table = section(out, "NodeProvider ").splitlines()
    names = {line.split()[0] for line in table[3:] if not line.startswith("  '")}
    assert names == {nt.name for nt in dev_stack.offer.node_types}


def test_dev_plan_adds_up_the_quota_of_every_tenant_of_the_environment(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    quota = section(out, "GPU quota of the environment").splitlines()
    from config.quota import QUOTA_RULES

    # Title, column header, a line per quota, the kinds, when quota warns and when it fails, and the
    # note on the team's own project.
    assert len(dev_stack.quota) == 4 and len(quota) == 2 + len(dev_stack.quota) + 3
    assert quota[-2] == f"  {QUOTA_RULES}"
    assert quota[-1].startswith("  acme-ml-dev-vision is a team's own project: its quotas are its own, not the environment's numbers")
    scopes = {(q.scope, q.gpu): q for q in dev_stack.quota}
    # The inline tenants share the host project's quota; team-vision-dev has a project of its own,
    # and each GCP project that runs tenant VMs has its own regional GPU quota.
    assert scopes["host project acme-ml-dev", "nvidia-l4"].asked == 4 and scopes["host project acme-ml-dev", "nvidia-tesla-t4"].asked == 4
    assert scopes["project acme-ml-dev-vision", "nvidia-l4"].asked == 4 and scopes["project acme-ml-dev-vision", "nvidia-tesla-t4"].asked == 2
    for line in dev_stack.quota:
        row = next(r for r in quota if f" {line.gpu} " in r and line.scope in r)
        # An existing project of the team's own is never "ok" against the environment's numbers.
        state = "assumed; check the project's quota" if "vision" in line.scope else "ok"
        assert re.search(rf"{line.scope} +{line.gpu} +europe-west4 +on-demand GPUs +{line.quota} +{line.asked} +{re.escape(state)} ", row)
    assert "(stack team-vision-dev)" in next(r for r in quota if "acme-ml-dev-vision" in r)
    # No "claimable" sum of every node type's maxCapacity any more: it said nothing a user could act on.
    assert "claimable" not in out
    # dev's inline tenants share the environment's project, which the program warns about.
    warnings = [w for w in section(out, "Warnings").splitlines()[1:] if w.startswith("  WARNING (program)")]
    assert [w.split(" uses isolation: shared")[0] for w in warnings] == [
        "  WARNING (program): tenants[0] (nlp)",
        "  WARNING (program): tenants[1] (speech)",
    ]


def shared_team_stack(project: Path) -> None:
    """The copy's team-vision-dev shares the environment's project (and so its GPU quota)."""
    path = project / "Pulumi.team-vision-dev.yaml"
    text = path.read_text()
    assert "    gcpProject: acme-ml-dev-vision\n" in text
    path.write_text(text.replace("    gcpProject: acme-ml-dev-vision\n", "    isolation: shared\n"))


def test_tenants_asking_for_more_than_the_quota_are_warned_about(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    shared_team_stack(project)
    text = (project / "Pulumi.dev.yaml").read_text()
    text = text.replace("{gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s}", "{gpu: nvidia-l4, maxGpus: 8, idleAfter: 60s}")
    (project / "Pulumi.dev.yaml").write_text(text)
    message = (
        "GPU quota: the tenants of host project acme-ml-dev may ask for 12 nvidia-l4 on-demand GPUs together "
        "(nlp (tenants[0]): 8, vision (stack team-vision-dev): 4); the quota in europe-west4 is 8"
    )
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 0, err
    assert message in section(out, "Warnings")
    assert re.search(r"nvidia-l4 +europe-west4 +on-demand GPUs +8 +12 +EXCEEDED", section(out, "GPU quota of the environment"))
    # The team stack's plan sees the same sum.
    code, out, err = plan("--project-dir", str(project), "--stack", "team-vision-dev")
    assert code == 0, err
    assert "may ask for 12 nvidia-l4 on-demand GPUs together" in section(out, "Warnings")


def test_quota_policy_fail_stops_every_stack_of_the_environment(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    shared_team_stack(project)
    text = (project / "Pulumi.dev.yaml").read_text()
    text = text.replace("{gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s}", "{gpu: nvidia-l4, maxGpus: 8, idleAfter: 60s}")
    text = text.replace("    spot: true\n", "    spot: true\n    quotaPolicy: fail\n", 1)
    (project / "Pulumi.dev.yaml").write_text(text)
    code, out, err = plan("--project-dir", str(project), "--all", "--quiet")
    assert code == 1
    exceeded = "nodeProvider.gpuQuota.nvidia-l4: GPU quota: the tenants of host project acme-ml-dev may ask for 12 nvidia-l4 on-demand GPUs"
    assert exceeded in err
    assert "nodeProvider.quotaPolicy is fail" in err and "Traceback" not in err
    assert "FAIL  dev: 1 configuration problem in stack 'dev'" in out
    assert "FAIL  team-vision-dev: 1 configuration problem in stack 'team-vision-dev'" in out
    # The team stack's own plan fails too, for the sum its environment exceeds, and says where.
    code, out, err = plan("--project-dir", str(project), "--stack", "team-vision-dev")
    assert code == 1 and out == ""
    assert err.startswith("plan of stack team-vision-dev failed:\n1 configuration problem in stack 'team-vision-dev'; nothing was created:")
    assert "  - environmentStack: acme/gpu-platform/dev: its stack file has problems of its own:\n      " + exceeded in err
    assert "nodeProvider.quotaPolicy is fail" in err and "Traceback" not in err


def test_dev_plan_shows_each_tenants_gpu_pools_and_operator_version(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants (")
    assert tenants.startswith(f"Tenants ({len(dev_stack.tenants)})")
    for tenant in dev_stack.tenants:
        header = next(line for line in tenants.splitlines() if line.startswith(f"  {tenant.tenant.name}: "))
        assert f"GPU Operator {tenant.tenant.gpu_operator.version}" in header
        assert tenant.tenant.network.cidr in header
        for pool in tenant.gpu_pools:
            row = next(line for line in tenants.splitlines() if line.strip().startswith(pool.name + " "))
            assert row.split()[1:6] == [
                pool.gpu,
                str(pool.gpus_per_node),
                str(pool.max_gpus),
                pool.idle_after,
                ", ".join(pool.option_values),
            ]


def recorded_prices(region: str) -> dict:
    """The catalog's figures as a person reads them from config/catalog.yaml."""
    raw = yaml.safe_load(CATALOG_PATH.read_text())
    return {"region": raw["prices"][region], "services": raw["services"]}


def dev_control_planes() -> list[str]:
    """dev's tenants as a person finds them in the shipped stack files: the inline ones, then each
    team stack naming dev. Every one's vCluster control plane is a LoadBalancer Service on the host
    cluster, one forwarding rule in the host project."""
    def config(stack: str) -> dict:
        return yaml_io.load((SHIPPED_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]

    names = [tenant["name"] for tenant in config("dev")["gpu-platform:tenants"]]
    for path in sorted(SHIPPED_DIR.glob("Pulumi.*.yaml")):
        team = config(path.name.removeprefix("Pulumi.").removesuffix(".yaml"))
        if str(team.get("gpu-platform:environmentStack", "")).endswith("/dev"):
            names.append(team["gpu-platform:tenant"]["name"])
    return names


def hand_computed_dev_costs() -> dict[str, tuple[float, float, float]]:
    """dev's parts (always on, expected, ceiling; USD/h) as committed, computed by hand from the
    recorded europe-west4 prices."""
    prices = recorded_prices("europe-west4")
    p, services = prices["region"], prices["services"]
    hosts, gpus = p["hosts"], p["gpus"]
    per_gb_hour = p["disks"]["pd-balanced"]["usdPerGbMonth"] / 730
    # Node types as the pools get them by default: the smallest shape (host + GPUs) with its boot
    # disk; speech's pool is Spot (host and GPU at their Spot prices, the disk at its only price).
    g2_standard_4 = hosts["g2-standard-4"]["onDemand"] + gpus["nvidia-l4"]["onDemand"] + 200 * per_gb_hour
    n1_standard_4_t4_spot = hosts["n1-standard-4"]["spot"] + gpus["nvidia-tesla-t4"]["spot"] + 200 * per_gb_hour
    e2_standard_2 = hosts["e2-standard-2"]["onDemand"] + 50 * per_gb_hour
    system_node = hosts["e2-standard-4"]["onDemand"] + 100 * per_gb_hour  # 100 GB boot disk
    nat = services["cloudNat"]
    gateway = lambda vms: vms * nat["usdPerVmHour"] + nat["usdPerAddressHour"]  # noqa: E731 - one address
    fee = services["gkeClusterFee"]["usdPerHour"]
    # Three forwarding rules (nlp, speech, vision) are within the page's "first 5": one charge of
    # `first5` for all of them, a third of it counted per tenant; + each one's 5 GiB volume.
    assert dev_control_planes() == ["nlp", "speech", "vision"]
    control_plane = p["forwardingRule"]["first5"] / 3 + 5 * per_gb_hour
    parts = {
        "GKE cluster management fee": (fee, fee, fee),
        "GKE system pool": (system_node, system_node, 3 * system_node),  # zonal: 1–3 nodes
        "host Cloud NAT": (gateway(1), gateway(1), gateway(3)),
    }
    for tenant, gpu_node in (("nlp", g2_standard_4), ("speech", n1_standard_4_t4_spot)):
        parts[f"tenant {tenant}: control plane"] = (control_plane,) * 3
        # Idle: its one system node; busy: + 4 GPU nodes; ceiling: 4 CPU + 4 GPU nodes.
        parts[f"tenant {tenant}: Cloud NAT"] = (gateway(1), gateway(5), gateway(8))
        # cpu 8: four e2-standard-2 cost more than two e2-standard-4 (four boot disks).
        parts[f"tenant {tenant}: CPU pool"] = (e2_standard_2, e2_standard_2, 4 * e2_standard_2)
        parts[f"tenant {tenant}: GPU pools"] = (0.0, 4 * gpu_node, 4 * gpu_node)
    return parts


def test_plan_figures_equal_hand_computations_from_the_recorded_prices(dev_json):
    costs = dev_json["costs"]
    assert costs["region"] == "europe-west4" and costs["currency"] == "USD" and costs["unknown"] == []
    expected = hand_computed_dev_costs()
    parts = {next(k for k in expected if part["part"].startswith(k)): part for part in costs["parts"]}
    assert set(parts) == set(expected)
    for name, (always_on, busy, ceiling) in expected.items():
        part = parts[name]
        assert part["alwaysOnUsdPerHour"] == pytest.approx(always_on, abs=1e-4), name
        assert part["alwaysOnUsdPerMonth"] == pytest.approx(always_on * 730, abs=1e-2), name
        assert part["busyUsdPerHour"] == pytest.approx(busy, abs=1e-4), name
        assert part["ceilingUsdPerHour"] == pytest.approx(ceiling, abs=1e-4), name
    assert costs["ceilingUsdPerHour"] == pytest.approx(sum(c for _, _, c in expected.values()), abs=1e-3)
    assert costs["alwaysOnUsdPerMonth"] == pytest.approx(730 * sum(a for a, _, _ in expected.values()), abs=1e-2)


def test_dev_plan_costs_say_where_prices_come_from(dev_plan, dev_json):
    _, out, _, _ = dev_plan
    costs = section(out, "Costs in USD")
    assert "list prices of europe-west4, not quotes" in costs
    assert "≈ marks figures from estimates" in costs
    # Which figures were read on the date and which were not: europe-west4's disks are derived
    # from us-central1's, its forwarding-rule prices from Google's global table.
    read = load_catalog().prices["europe-west4"].read
    assert f"\n  read {read}: GPUs, hosts (skypilot)\n" in costs
    assert "\n  derived, not read: disks (ratio); forwarding rules (lb-page); Hyperdisk Balanced disks (hyperdisk)\n" in costs
    assert [line for line in costs.splitlines() if f"read {read}" in line and ("disks" in line or "forwarding" in line)] == []
    assert "not included (usage-based): network egress" in costs
    for unit in ("always on USD/h", "always on USD/month", "busy USD/h", "ceiling USD/h"):
        assert unit in costs
    # Every part of dev is priced, speech's Spot T4 pool included (europe-west4 records N1 Spot hosts).
    assert "unknown" not in costs and dev_json["costs"]["unknown"] == []
    assert dev_json["costs"]["ceilingUsdPerHour"] is not None
    # The nlp pool no longer admits 4 × g2-standard-32 (6.92 USD/h before): its one shape is g2-standard-4.
    nlp = next(t for t in dev_json["tenants"] if t["name"] == "nlp")
    [l4] = [p for p in nlp["pools"] if p["gpu"]]
    assert l4["machineTypes"] == ["g2-standard-4"] and l4["busyUsdPerHour"] == l4["ceilingUsdPerHour"] < 3.2


def test_a_missing_price_makes_the_totals_unknown_with_what_is_known(monkeypatch):
    # Without europe-west4's Spot price of the n1-standard-4 host, speech's Spot T4 pool has no
    # price: the plan names the missing figure and shows what the known parts add up to.
    hosts = load_catalog().prices["europe-west4"].hosts
    monkeypatch.setitem(hosts, "n1-standard-4", dataclasses.replace(hosts["n1-standard-4"], spot=None))
    code, out, err = plan("--stack", "dev")
    assert code == 0, err
    costs = section(out, "Costs in USD")
    assert "unknown: europe-west4 records no Spot price for n1-standard-4 × 1 nvidia-tesla-t4" in costs
    speech = next(line for line in costs.splitlines() if line.strip().startswith("tenant speech: GPU pools"))
    assert speech.split()[-2:] == ["unknown", "unknown"]
    total = next(line for line in costs.splitlines() if line.startswith("  environment total"))
    assert "unknown (≥ " in total


def test_us_central1_says_its_whole_vm_and_disk_prices_were_not_re_read():
    # The lines under prod's "Costs in USD" title (us-central1): A3's on-demand figures are the first
    # catalog's, their Spot figures and A4's SkyPilot's (config/catalog.yaml skypilot-a3-a4).
    from tools.plan_text import _price_sources

    prices = load_catalog().prices["us-central1"]
    assert _price_sources(prices) == [
        f"  read {prices.read}: GPUs, hosts (skypilot); Spot whole VMs, whole VMs (skypilot-a3-a4)",
        "  recorded earlier, not re-read: whole VMs (first-catalog); disks (disk-page)",
        "  derived, not read: forwarding rules (lb-page); Hyperdisk Balanced disks (hyperdisk)",
    ]


def test_the_environment_and_its_team_stacks_share_one_forwarding_rule_charge(dev_json, vision):
    # dev's three control planes (two inline, one team stack) are three forwarding rules in the host
    # project: one charge for up to five. The environment's plan and the team stack's count the
    # same three, so their parts add up to that one charge.
    team = vision[1]["costs"]["loadBalancers"]
    env = dev_json["costs"]["loadBalancers"]
    assert env["controlPlanes"] == team["controlPlanes"] == dev_control_planes()
    first5 = recorded_prices("europe-west4")["region"]["forwardingRule"]["first5"]
    assert env["forwardingRulesUsdPerHour"] == team["forwardingRulesUsdPerHour"] == pytest.approx(first5)
    assert 3 * env["perTenantUsdPerHour"] == pytest.approx(first5, abs=1e-3)


def test_six_control_planes_pay_the_additional_rule(tmp_path):
    # Three more inline tenants make six rules: the flat charge for the first five and 0.01 USD/h
    # for the sixth (https://cloud.google.com/load-balancing/pricing), shared by six.
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    text = (project / "Pulumi.dev.yaml").read_text()
    extra = "".join(
        f"    - name: extra{i}\n      isolation: shared\n      network: {{cidr: 10.161.{4 * i}.0/22}}\n"
        "      gpuPools: [{gpu: nvidia-tesla-t4, maxGpus: 1}]\n"
        for i in range(3)
    )
    (project / "Pulumi.dev.yaml").write_text(text.replace("      smokeTest: true\n", "      smokeTest: true\n" + extra))
    code, out, err = plan("--project-dir", str(project), "--stack", "dev", "--json")
    assert code == 0, err
    balancers = json.loads(out)["costs"]["loadBalancers"]
    assert balancers["controlPlanes"] == ["nlp", "speech", "extra0", "extra1", "extra2", "vision"]
    assert balancers["forwardingRulesUsdPerHour"] == pytest.approx(0.025 + 0.01)
    assert balancers["perTenantUsdPerHour"] == pytest.approx(0.035 / 6, abs=1e-4)


def test_a_region_without_recorded_prices_is_said_plainly(tmp_path, monkeypatch):
    # Every region of `availability:` has prices; one without them is said plainly all the same.
    monkeypatch.delitem(load_catalog().prices, "asia-east1")
    project = shipped_project(tmp_path / "project", ["dev"])
    text = (project / "Pulumi.dev.yaml").read_text().replace("europe-west4", "asia-east1")
    (project / "Pulumi.dev.yaml").write_text(text)
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 0, err
    costs = section(out, "Costs: unknown")
    assert "The catalog records no prices for asia-east1; nothing here is priced with another region's figures" in costs
    assert "unknown: the catalog records no prices for asia-east1" in costs
    total = next(line for line in costs.splitlines() if line.startswith("  environment total"))
    assert total.split()[2:4] == ["unknown", "(≥"]


def test_dev_plan_labels_cloud_computed_values_and_hides_secrets(dev_plan):
    _, out, _, _ = dev_plan
    assert out.splitlines()[2].startswith("Legend: values containing 'placeholder' are computed by the cloud")
    outputs = section(out, "Stack outputs")
    assert "kubeconfig = [secret]  (computed by the cloud at deploy time)" in outputs
    # No admin password exists in Pulumi at all: only the key's declared default, which the program refuses when set.
    assert "RandomPassword" not in out and out.count("platformAdminPassword") == 1
    assert 'gpu-platform:platformAdminPassword = ""  (default)' in section(out, "Configuration")


# --- --out ---------------------------------------------------------------------------------------------


def test_out_writes_one_yaml_file_per_document(dev_plan, dev_stack):
    code, _, _, out_dir = dev_plan
    assert code == 0
    written = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file())
    expected = ["dev/nodeprovider.yaml"] + [
        f"dev/tenants/{t.tenant.name}/{name}"
        for t in dev_stack.tenants
        for name in ("gpu-operator-values.yaml", "objects.yaml", "vcluster.yaml")
    ]
    assert written == sorted(expected)
    for path in out_dir.rglob("*.yaml"):
        assert all(doc is not None for doc in yaml.safe_load_all(path.read_text())), path


def test_out_nodeprovider_is_the_rendered_node_provider(dev_plan, dev_stack):
    _, _, _, out_dir = dev_plan
    document = yaml.safe_load((out_dir / "dev" / "nodeprovider.yaml").read_text())
    assert (document["apiVersion"], document["kind"], document["metadata"]["name"]) == (
        "management.loft.sh/v1",
        "NodeProvider",
        dev_stack.node_provider.name,
    )
    np = dev_stack.node_provider
    args = GcpNodeProviderArgs(
        name=np.name,
        environment=dev_stack.environment,
        region=dev_stack.region,
        node_types=dev_stack.offer.node_types,
        legacy_infrastructure=np.legacy_infrastructure,
    )
    assert document["spec"] == node_provider_spec(args).to_dict()


def test_out_vcluster_yaml_matches_the_registered_virtual_cluster_instance(dev_plan, dev_stack, dev_run):
    _, _, _, out_dir = dev_plan
    reference = dev_run
    for tenant in dev_stack.tenants:
        name = tenant.tenant.name
        instance = next(r for r in reference.of_type(VCI) if r.input("metadata", "name") == name)
        directory = out_dir / "dev" / "tenants" / name
        text = (directory / "vcluster.yaml").read_text()
        assert VClusterValues.parse(text).document == VClusterValues.parse(instance.input("spec", "template", "helmRelease", "values")).document
        pools = {p.name: p for p in VClusterValues.parse(text).gpu_pools()}
        assert {p.name for p in tenant.gpu_pools} == set(pools)
        for pool in tenant.gpu_pools:
            assert pools[pool.name].gpu_limit == pool.max_gpus and pools[pool.name].has_gpu_taint
        values = yaml.safe_load((directory / "gpu-operator-values.yaml").read_text())
        assert values["driver"]["enabled"] is False
        objects = list(yaml.safe_load_all((directory / "objects.yaml").read_text()))
        assert any(o["kind"] == "Job" for o in objects) == tenant.tenant.smoke_test


def test_out_removes_documents_of_a_tenant_that_is_gone(tmp_path):
    stale = tmp_path / "dev" / "tenants" / "retired"
    stale.mkdir(parents=True)
    (stale / "vcluster.yaml").write_text("privateNodes: {enabled: true}\n")
    code, _, _ = plan("--stack", "dev", "--quiet", "--out", str(tmp_path))
    assert code == 0
    assert not stale.exists()
    assert (tmp_path / "dev" / "nodeprovider.yaml").is_file()


# --- --json --------------------------------------------------------------------------------------------


def test_json_summary(dev_json, dev_stack):
    assert dev_json["stack"] == "dev" and dev_json["kind"] == "environment" and dev_json["ok"] is True
    assert sum(dev_json["resources"]["byType"].values()) == dev_json["resources"]["total"]
    assert dev_json["resources"]["byType"][VCI] == len(dev_stack.tenants)
    assert [nt["name"] for nt in dev_json["nodeTypes"]] == [nt.name for nt in dev_stack.offer.node_types]
    for summary_type, nt in zip(dev_json["nodeTypes"], dev_stack.offer.node_types):
        assert summary_type["resources"] == nt.resources and summary_type["kubeReserved"] == nt.kube_reserved
        # `cost` is the order the platform compares, not a price: the price is usdPerHour.
        assert summary_type["cost"] == nt.cost and summary_type["usdPerHour"] == nt.usd_per_hour
        assert (summary_type["capacity"], summary_type["rank"]) == (nt.capacity, nt.rank)
    assert [(q["gpu"], q["asked"], q["quota"]) for q in dev_json["quota"]] == [(q.gpu, q.asked, q.quota) for q in dev_stack.quota]
    by_name = {t["name"]: t for t in dev_json["tenants"]}
    assert set(by_name) == {t.tenant.name for t in dev_stack.tenants}
    for tenant in dev_stack.tenants:
        summary = by_name[tenant.tenant.name]
        parts = [p for p in dev_json["costs"]["parts"] if p["tenant"] == tenant.tenant.name]
        assert len(parts) == 4
        assert summary["alwaysOnUsdPerMonth"] == pytest.approx(sum(p["alwaysOnUsdPerMonth"] for p in parts), abs=1e-3)
        assert summary["gpuOperatorVersion"] == GPU_OPERATOR_VERSION
        gpu_pools = [p for p in summary["pools"] if p["gpu"]]
        assert [(p["gpu"], p["gpusPerNode"], p["maxGpus"], p["idleAfter"], p["capacityOptions"], p["machineTypes"]) for p in gpu_pools] == [
            (p.gpu, p.gpus_per_node, p.max_gpus, p.idle_after, list(p.option_values), list(p.machine_types)) for p in tenant.gpu_pools
        ]
    assert dev_json["costs"]["pricesRead"] == load_catalog().prices["europe-west4"].read
    assert {v["what"] for v in dev_json["versions"]} >= {"platform chart", "vCluster chart", "GPU Operator chart", "kubernetes template"}
    assert dev_json["outputs"]["kubeconfig"] == "[secret]"
    assert all(set(w) == {"source", "message"} for w in dev_json["warnings"])


def test_dev_plan_prints_the_pinned_versions_and_summarizes_structured_outputs(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    pinned = section(out, "Pinned versions")
    assert f"platform chart: vcluster-platform {PLATFORM_CHART_VERSION} (https://charts.loft.sh)" in pinned
    assert f"vCluster chart: vcluster {VCLUSTER_CHART_VERSION}" in pinned
    assert f"GPU Operator chart: gpu-operator {GPU_OPERATOR_VERSION}" in pinned
    assert re.search(r"node template: inline, sha256 [0-9a-f]{12}", pinned)
    assert re.search(r"kubernetes template: inline, sha256 [0-9a-f]{12}", pinned)
    assert f"cloud controller manager: {CCM_IMAGE}" in pinned and f"PD CSI driver: {PD_CSI_DRIVER_IMAGE}" in pinned
    outputs = section(out, "Stack outputs")
    facts = next(line for line in outputs.splitlines() if line.startswith("  environmentFacts = "))
    assert f"{len(dev_stack.offer.node_types)} node types" in facts and "inline tenants: nlp, speech" in facts
    assert len(facts) < 400  # a summary, not the whole document
    assert "tenants = 2 tenant(s): nlp (namespace vcluster-nlp" in outputs


# --- tenant stacks -------------------------------------------------------------------------------------


def test_tenant_stack_says_its_environment_outputs_are_offline_placeholders(vision):
    out = vision[0]
    assert "environment outputs: placeholders from an offline evaluation of Pulumi.dev.yaml" in out
    tenant = loaded("team-vision-dev")
    assert isinstance(tenant, TenantStack)
    costs = section(out, "Costs in USD")
    assert [line.split(":")[0].strip() for line in costs.splitlines() if line.startswith("  tenant vision")] == ["tenant vision"] * 4
    assert "the environment's own parts (GKE fee, system pool, host NAT) are in its plan" in out
    # Its l4-2x pool may get only the smallest 2 × L4 shape.
    l4 = next(line for line in section(out, "Tenants (").splitlines() if line.strip().startswith("l4-2x "))
    assert "g2-standard-24" in l4 and "(2 × g2-standard-24)" in l4
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_tenant_stack_with_an_environment_outputs_file(tmp_path, suffix, dev_run):
    outputs = copy.deepcopy(dev_run.outputs)
    # As deployed, the environment offers one zone less than its stack file says.
    outputs["environmentFacts"]["zones"] = outputs["environmentFacts"]["zones"][:1]
    # `pulumi stack output --json` without --show-secrets, as docs/operations.md "Offline plan" says: secret
    # outputs come as the string "[secret]".
    outputs["kubeconfig"] = "[secret]"
    path = tmp_path / f"dev-outputs{suffix}"
    path.write_text(json.dumps(outputs) if suffix == ".json" else yaml.safe_dump(outputs))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 0, err
    assert f"environment outputs: from {path}" in out
    # The pack cannot see the kubeconfig the file hides, so the policy that reads it says so.
    assert (
        "kubernetes-providers-by-design (advisory): host: can't run here: string value at .kubeconfig can't be known during preview; "
        "the pack runs it when Pulumi has the value (`pulumi up`)"
    ) in out
    assert "placeholders from an offline evaluation" not in out
    # The program compared the file's outputs with the stack file and said so.
    assert re.search(r"WARNING \(program\): environment acme/gpu-platform/dev is deployed with a different configuration.*zones", out)


def test_environment_outputs_file_without_the_needed_outputs(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"clusterName": "gpu-dev"}))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 1 and out == ""
    assert "missing output(s) environmentFacts, kubeconfig" in err


# --- broken and unusual stack files --------------------------------------------------------------------


def test_broken_stack_file_fails_with_every_problem_and_no_traceback(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev"])
    document = yaml_io.load((project / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpu-platform:tenantz"] = []  # a typo of `tenants`
    config["gpu-platform:cluster"]["systemPool"]["minNodes"] = -1
    config["gpu-platform:tenants"][0]["gpuPools"][0]["maxGpus"] = 0
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 1
    assert "Traceback" not in out + err
    assert "3 configuration problems in stack 'dev'" in err
    for path in ("tenantz: unknown key", "cluster.systemPool.minNodes:", "tenants[0].gpuPools[0].maxGpus:"):
        assert path in err


def test_stack_file_that_is_not_yaml(tmp_path):
    project = shipped_project(tmp_path / "project", ())
    (project / "Pulumi.dev.yaml").write_text("config:\n  gpu-platform:tenants: [\n")
    code, _, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 1
    assert "Pulumi.dev.yaml: not valid YAML" in err and "Traceback" not in err


def test_unknown_stack_names_the_stacks_there_are():
    code, _, err = plan("--stack", "staging")
    assert code == 1
    assert "Pulumi.staging.yaml: no such stack file" in err and "dev, prod" in err


def test_a_secret_in_plain_text_never_reaches_what_the_plan_prints(tmp_path, capfd):
    """A plaintext `platformAdminPassword` beside other problems, the same in a line that is not
    YAML, and the license token given in plain text: the plan names each problem, and the value
    itself is on neither stdout nor stderr (file descriptors, as CI's log records them) in any mode."""
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])  # --all: no stack to evaluate in full
    dev = project / "Pulumi.dev.yaml"
    shipped = dev.read_text()
    secret = "Hunter2-Plaintext-0b5e"

    def printed(*argv: str) -> tuple[int, str]:
        code = main(["--project-dir", str(project), *argv])
        out, err = capfd.readouterr()
        assert secret not in out + err, argv
        return code, out + err

    dev.write_text(shipped.replace("config:\n", f"config:\n  gpu-platform:platformAdminPassword: {secret}\n", 1).replace("environment: dev", "environment: qa", 1))
    code, text = printed("--stack", "dev")
    assert code == 1 and "platformAdminPassword: is no longer read" in text and "environment: 'qa' is not allowed" in text
    for argv in (["--all"], ["--all", "--quiet"], ["--stack", "dev", "--json"], ["--stack", "team-vision-dev"]):
        code, text = printed(*argv)
        assert code == 1 and "platformAdminPassword" in text, argv

    dev.write_text(shipped.replace("config:\n", f"config:\n  gpu-platform:platformAdminPassword: {secret}: x\n", 1))
    for argv in (["--stack", "dev"], ["--all", "--quiet"], ["--stack", "dev", "--json"]):
        code, text = printed(*argv)
        assert code == 1 and "Pulumi.dev.yaml: not valid YAML: mapping values are not allowed here (line 6, column" in text, argv

    platform = "  gpu-platform:platform:\n"
    dev.write_text(shipped.replace(platform, f"  gpu-platform:licenseToken: {secret}\n{platform}    licenseTokenKey: licenseToken\n", 1))
    code, text = printed("--stack", "dev")
    assert code == 0 and "  gpu-platform:licenseToken = [secret]\n" in text
    assert "WARNING (plan): gpu-platform:licenseToken is a secret given in plain text in Pulumi.dev.yaml: whoever reads the repository reads it" in text
    code, text = printed("--stack", "dev", "--json")
    assert code == 0 and json.loads(text)["config"]["gpu-platform:licenseToken"] == "[secret]"


SECURE = """
  gpu-platform:vclusterLicenseToken:
    secure: v1:AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0
"""


def legacy_mode_policy_config(tmp_path: Path) -> Path:
    """The pack configuration docs/guardrails.md gives for legacy mode, as a file."""
    from docs_support import section as docs_section

    text = " ".join(docs_section("What `make test` checks").split())
    config = tmp_path / "policy-config.json"
    config.write_text(re.search(r"lower them with `(\{.+?\}\})`", text).group(1))
    return config


def test_secure_values_are_shown_as_secret_and_legacy_mode_warns(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev"])
    text = (project / "Pulumi.dev.yaml").read_text().replace("    spot: true\n", "    spot: true\n    legacyInfrastructure: true\n", 1)
    text = text.replace("    allowSharedWithProjectTenants: true\n", "    allowSharedWithProjectTenants: true\n    licenseTokenKey: vclusterLicenseToken\n", 1)
    (project / "Pulumi.dev.yaml").write_text(text + SECURE)
    # Legacy mode fails four policies on purpose; the plan, like `pulumi preview`, rejects it
    # unless the pack's configuration lowers them as docs/guardrails.md says.
    from policies import LEGACY_MODE_POLICIES

    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    failed = set(re.findall(r"^  MANDATORY (\S+) on ", section(out, "Policy pack"), flags=re.M))
    assert code == 1 and failed == {p.name for p in LEGACY_MODE_POLICIES}
    config = legacy_mode_policy_config(tmp_path)
    code, out, err = plan("--project-dir", str(project), "--stack", "dev", "--policy-pack-config", str(config))
    assert code == 0, err
    assert "no mandatory violation" in out and "(advisory): " in section(out, "Warnings")
    assert "gpu-platform:vclusterLicenseToken = [secret]" in out
    assert "AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0" not in out
    assert "vclusterLicenseToken" not in section(out, "Stack outputs")
    warnings = section(out, "Warnings")
    assert re.search(r"WARNING \((program|plan)\): nodeProvider\.legacyInfrastructure", warnings)
    # The quiet line counts it too.
    code, quiet, _ = plan("--project-dir", str(project), "--stack", "dev", "--quiet", "--policy-pack-config", str(config))
    assert code == 0 and re.search(r"[1-9]\d* warning\(s\)", quiet)


def test_a_policy_violation_fails_the_plan_with_the_packs_whole_message_before_the_costs(tmp_path):
    """prod with its control plane open to the internet: the configuration is valid, the pack
    rejects it. The plan prints the pack's own message whole, naming policy and resource, before
    the costs, and exits 1 (text, --quiet with the message on stderr, --json)."""
    from tools.mock_engine import run_program
    from tools.policy_check import check, judging_stacks
    from tools.policy_data import stack_entry

    project = shipped_project(tmp_path / "project", ["prod"])
    path = project / "Pulumi.prod.yaml"
    path.write_text(path.read_text().replace("{cidr: 203.0.113.0/24, name: office}", "{cidr: 0.0.0.0/0, name: anywhere}"))
    values = read_stack_values(project, "prod")
    run = run_program(values, stack="prod", project_dir=project)
    # Judged as the plan judges it: by the stack's record as `make policy-data` would write it now.
    with judging_stacks({"prod": stack_entry("prod", run, values, None)}):
        found = [v for v in check(run) if v.mandatory]
    # The open endpoint, and the public address space it admits (public-ranges-prod, any split).
    assert sorted(v.policy for v in found) == ["gke-private-nodes-and-endpoint", "public-ranges-prod"]
    assert {v.resource for v in found} == {"gke-cluster"}
    [violation, ranges] = sorted(found, key=lambda v: v.policy)
    assert "'0.0.0.0/0'" in violation.message and len(violation.message) > 200

    code, out, err = plan("--project-dir", str(project), "--stack", "prod")
    assert code == 1
    verdict = section(out, "Policy pack")
    assert f"MANDATORY {violation.policy} on gke-cluster:\n    {violation.message}" in verdict
    assert out.index("Policy pack") < out.index("Costs in USD")
    assert "the policy pack rejects it" in err

    code, quiet, err = plan("--project-dir", str(project), "--stack", "prod", "--quiet")
    assert code == 1 and quiet.startswith("FAIL  prod: 2 mandatory policy violation(s)") and violation.message in err
    code, out, _ = plan("--project-dir", str(project), "--stack", "prod", "--json")
    document = json.loads(out)
    assert code == 1 and document["ok"] is False
    assert sorted((p for p in document["policy"] if p["level"] == "mandatory"), key=lambda p: p["policy"]) == [
        {"policy": v.policy, "level": "mandatory", "resource": "gke-cluster", "message": v.message} for v in (violation, ranges)
    ]


def test_a_policy_pack_config_names_policies_and_levels_of_the_pack(tmp_path):
    config = tmp_path / "policy-config.json"
    config.write_text('{"no-such-policy": "advisory"}')
    code, _, err = plan("--stack", "dev", "--policy-pack-config", str(config))
    assert code == 2 and "'no-such-policy' is not a policy of the pack; allowed: " in err
    config.write_text('{"gke-private-nodes-and-endpoint": {"enforcementLevel": "lenient"}}')
    code, _, err = plan("--stack", "dev", "--policy-pack-config", str(config))
    assert code == 2 and "'lenient' is not allowed; allowed: advisory, mandatory, remediate, disabled" in err


def test_command_line_entry_point(tmp_path):
    """`python -m tools.plan --all --quiet` as CI runs it: one line per stack, non-zero on a failure
    (in-process, as `main`), and the module's entry point in a process of its own (on a stack that
    fails before any evaluation: `make test` runs the entry point on every committed stack anyway),
    whose output holds no plaintext admin password the stack file sets, beside its other problems."""
    project = shipped_project(tmp_path / "project", ["dev"])
    secret = "Hunter2-Plaintext-77c1"
    (project / "Pulumi.broken.yaml").write_text(f"config:\n  gpu-platform:environment: qa\n  gpu-platform:platformAdminPassword: {secret}\n")
    code, out, err = plan("--project-dir", str(project), "--all", "--quiet")
    assert code == 1
    assert re.search(r"^ok +dev: environment stack", out, re.M)
    headline = "6 configuration problems in stack 'broken'; nothing was created:"
    assert re.search(rf"^FAIL +broken: {re.escape(headline)}$", out, re.M)
    # The headline once (the stack's line), the problems below it on stderr.
    assert (out + err).count(headline) == 1 and "plan of stack broken failed" not in err
    assert "environment: 'qa' is not allowed" in err
    assert "Traceback" not in out + err

    (project / "Pulumi.dev.yaml").unlink()
    result = subprocess.run(
        [sys.executable, "-m", "tools.plan", "--project-dir", str(project), "--all", "--quiet"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1 and re.search(rf"^FAIL +broken: {re.escape(headline)}$", result.stdout, re.M)
    assert "environment: 'qa' is not allowed" in result.stderr and "Traceback" not in result.stdout + result.stderr
    assert "  - platformAdminPassword: is no longer read" in result.stderr and secret not in out + err + result.stdout + result.stderr


# --- tenant isolation in the plan (tools/isolation_plan.py) -----------------------------------------


def test_plan_shows_each_tenants_project_and_isolation(dev_plan, dev_json):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants")
    for name in ("nlp", "speech"):
        assert re.search(rf"^  {name}: .*\n    isolation shared: GCP project acme-ml-dev \(shared with the environment", tenants, flags=re.M)
    [nlp] = [t for t in dev_json["tenants"] if t["name"] == "nlp"]
    assert (nlp["gcpProject"], nlp["isolation"], nlp["natAddresses"], nlp["nodeMetadata"]) == ("acme-ml-dev", "shared", 1, "concealed")


def test_plan_of_a_team_stack_shows_its_own_project(vision):
    out = vision[0]
    assert "    isolation project: GCP project acme-ml-dev-vision (existing, the team's own)" in section(out, "Tenants")


def test_compare_names_what_moving_a_tenant_to_its_own_project_replaces(dev_run, stack_values):
    from tools import plan_compare
    from tools.plan_compare_text import render_changes

    values = stack_values("dev")
    values["gpu-platform:tenants"][0].update(isolation="project", gcpProject="acme-ml-dev-nlp")
    moved = run_shipped(values, stack="dev")
    changes = plan_compare.compare(plan_compare.resources_of(dev_run), plan_compare.resources_of(moved), ref="main", stack="dev")
    assert [(m.tenant, m.before, m.after) for m in changes.moves] == [("nlp", "acme-ml-dev", "acme-ml-dev-nlp")]
    replaced = {(c.type.split(":")[1], c.name) for c in changes.changes if c.action == "replace"}
    for kind in ("compute/network", "compute/subnetwork", "compute/router", "compute/routerNat", "compute/address", "serviceaccount/account"):
        assert any(k == kind and n.startswith("tenant-nlp-") for k, n in replaced), kind
    assert ("management.loft.sh/v1", "tenant-nlp-instance") in replaced  # the VirtualClusterInstance
    assert not any(n.startswith("tenant-speech-") for _, n in replaced)
    created = {c.name for c in changes.changes if c.action == "create"}
    assert {"tenant-nlp-project-compute", "tenant-nlp-project-role-vm"} <= created
    text = render_changes(changes, "acme-ml-dev")
    assert "TENANT nlp MOVES from GCP project acme-ml-dev (shared) to acme-ml-dev-nlp (its own)" in text
    assert "± replace gcp:compute/network:Network  tenant-nlp-gcp-vpc  (project: acme-ml-dev → acme-ml-dev-nlp)" in text
    assert "VIRTUAL CLUSTER RE-CREATED: tenant-nlp-instance" in text
    assert plan_compare.compare(plan_compare.resources_of(dev_run), plan_compare.resources_of(dev_run), ref="HEAD", stack="dev").changes == []


def test_compare_to_a_git_ref_from_the_command_line():
    from tools import plan_compare

    if subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    code, out, err = plan("--stack", "dev", "--compare-to", "HEAD", "--quiet", project_dir=PROJECT_DIR)
    assert code == 0, err
    assert re.search(r"^Changes against HEAD \(stack dev\): \d+ to create, \d+ to delete, \d+ to replace, \d+ to update$", out, flags=re.M)
    with pytest.raises(plan_compare.CompareError, match="git cannot read 'no-such-ref-xyz'"):
        plan_compare.snapshot_at("no-such-ref-xyz", "dev", PROJECT_DIR)


@pytest.mark.parametrize("option", ["--output={target}", "--remote={target}", "-o{target}", "--exec=touch {target}"])
def test_a_compare_ref_that_is_an_option_to_git_is_refused_and_does_nothing(tmp_path, option):
    """`make plan COMPARE=--output=/tmp/x` once had `git archive` truncate /tmp/x: a ref is resolved
    to its commit with `git rev-parse --verify --end-of-options` first, and only the SHA reaches git."""
    from tools import plan_compare

    if subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    target = tmp_path / "victim"
    target.write_text("kept")
    ref = option.format(target=target)
    with pytest.raises(plan_compare.CompareError) as refused:
        plan_compare.snapshot_at(ref, "dev", PROJECT_DIR)
    assert str(refused.value) == (
        f"git cannot read {ref!r} in {PROJECT_DIR}: not a commit; allowed: a branch, tag, release (vX.Y.Z) or commit of this clone"
    )
    assert target.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["victim"]
    assert plan_compare.resolve_ref("HEAD", PROJECT_DIR) == subprocess.run(
        ["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


# --- one meaning per figure; every figure in the JSON --------------------------------------------


def cost_rows(text: str) -> dict[str, list[str]]:
    """The cost table of a text plan: part → its four figures as printed."""
    rows = {}
    for line in section(text, "Costs in USD").splitlines():
        match = re.match(r"^  (\S.*?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", line)
        if match and not line.startswith(("  part ", "  not included")):
            rows[match.group(1)] = list(match.groups()[1:])
    return rows


def figure(text: str) -> float:
    return float(text.lstrip("≈").replace(",", ""))


def pool_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The pool tables of a text plan: (tenant, pool) → the row's cells (split on 2+ spaces)."""
    rows, tenant = {}, None
    for line in section(text, "Tenants (").splitlines()[1:]:
        if re.match(r"^  \S", line):
            tenant = line.split(":")[0].strip()
        elif line.startswith("    ") and not line.startswith(
            ("    isolation", "    monitoring", "    SECURITY", "    shutdown:", "    backup:", "    image prefetch", "    options of pool", "      ")
        ) and not line.strip().startswith("pool "):
            cells = re.split(r"\s{2,}", line.strip())
            rows[(tenant, cells[0])] = cells
    return rows


def test_busy_has_one_definition_stated_once(dev_plan, dev_json):
    """A CPU pool's "expected" was its limit (0.33) in the tenant table and one node (0.08) in the
    cost table. Now one definition (config.tenant_plan.BUSY, "busy" since the figure is every pool
    busy at its limit, not a forecast), printed once, holds in both tables."""
    from config.tenant_plan import BUSY

    _, out, _, _ = dev_plan
    assert out.count(BUSY) == 1 and f"busy: {BUSY}" in section(out, "Costs in USD")
    assert "expected" not in out.lower()
    costs, pools = cost_rows(out), pool_rows(out)
    for tenant in ("nlp", "speech"):
        cpu_line = next(v for k, v in costs.items() if k.startswith(f"tenant {tenant}: CPU pool"))
        assert pools[(tenant, "system")][-2] == cpu_line[2].lstrip("≈") == cpu_line[0].lstrip("≈")  # one node: as when idle
        gpu_rows = [cells for (t, name), cells in pools.items() if t == tenant and name != "system"]
        assert sum(figure(cells[-2]) for cells in gpu_rows) == pytest.approx(figure(costs[f"tenant {tenant}: GPU pools"][2]), abs=0.011)
    for tenant in dev_json["tenants"]:
        [system] = [p for p in tenant["pools"] if p["gpu"] is None]
        [part] = [p for p in dev_json["costs"]["parts"] if p["tenant"] == tenant["name"] and "CPU pool" in p["part"]]
        assert system["busyUsdPerHour"] == part["busyUsdPerHour"] == part["alwaysOnUsdPerHour"]


def test_gpu_budget_output_is_the_gpu_ceiling_of_the_plan(dev_json, vision):
    """`gpuBudgetUsdPerHour` left out boot disks (2.97 for nlp where the plan said 3.09): it is now
    the plan's "GPU pools" ceiling, boot disks included, and the docs' exports say so."""
    _, vision_json, _ = vision
    budgets = {name: t["gpuBudgetUsdPerHour"] for name, t in dev_json["outputs"]["tenants"].items()}
    budgets["vision"] = vision_json["outputs"]["gpuBudgetUsdPerHour"]
    parts = [*dev_json["costs"]["parts"], *vision_json["costs"]["parts"]]
    assert set(budgets) == {"nlp", "speech", "vision"}
    for tenant, budget in budgets.items():
        [gpu_pools] = [p for p in parts if p["tenant"] == tenant and p["part"].endswith("GPU pools")]
        assert budget == round(gpu_pools["ceilingUsdPerHour"], 2), tenant
    text = docs_section("What a stack creates")
    exports = text[text.index("Exports: the environment stack exports") :].split("\n\n")[0]
    assert "`gpuBudgetUsdPerHour`" in exports and "boot disks" in exports and "ceiling" in exports


@pytest.fixture(params=["dev", "team-vision-dev"])
def text_and_json(request, dev_plan, dev_json, vision) -> tuple[str, str, dict]:
    if request.param == "dev":
        return "dev", dev_plan[1], dev_json
    return "team-vision-dev", vision[0], vision[1]


def test_json_carries_every_money_figure_of_the_text(text_and_json):
    """docs/costs.md: `--json` carries every figure. Each cell of the cost table and each pool's busy
    and ceiling, as printed, equals the JSON figure it shows (the totals' always-on USD/h too)."""
    stack, text, summary = text_and_json
    costs = summary["costs"]
    keys = ("alwaysOnUsdPerHour", "alwaysOnUsdPerMonth", "busyUsdPerHour", "ceilingUsdPerHour")
    parts = {p["part"]: p for p in costs["parts"]}
    rows = cost_rows(text)
    assert set(rows) == {*parts, "environment total" if stack == "dev" else "tenant stack total"}
    for name, cells in rows.items():
        source = parts.get(name, costs)
        assert [figure(c) for c in cells] == [round(source[k], 2) for k in keys], name
    for tenant in summary["tenants"]:
        mine = [p for p in costs["parts"] if p["tenant"] == tenant["name"]]
        for key in keys[:2]:
            assert tenant[key] == pytest.approx(sum(p[key] for p in mine), abs=1e-3)
        for pool in tenant["pools"]:
            cells = pool_rows(text)[(tenant["name"], pool["name"])]
            assert figure(cells[-2]) == round(pool["busyUsdPerHour"], 2)
            assert figure(cells[-1].split(" (")[0]) == round(pool["ceilingUsdPerHour"], 2)


def test_a_note_says_when_rounded_rows_do_not_add_up_to_the_total(text_and_json):
    stack, text, _ = text_and_json
    rows = cost_rows(text)
    total = rows.pop("environment total" if stack == "dev" else "tenant stack total")
    differs = any(round(sum(figure(r[i]) for r in rows.values()), 2) != figure(total[i]) for i in range(4))
    note = "every figure is rounded to the cent on its own: a total adds the unrounded figures"
    assert differs == (note in section(text, "Costs in USD"))
    assert differs  # the shipped stacks do show it: dev's always-on rows add up to 0.51, the total is 0.50


def test_cloud_assigned_addresses_are_marked_like_placeholders(vision, dev_plan):
    """The mock's NAT addresses are plain addresses of a documentation-only range (they must read
    as addresses where the program uses them): the legend names the range, outputs holding one
    say they are computed by the cloud, and every document --out writes says so on its first line."""
    from tools.mock_engine import MOCK_ADDRESS_RANGE
    from tools.plan_text import DOCUMENT_HEADER

    out, summary, out_dir = vision
    legend = next(line for line in out.splitlines() if line.startswith("Legend: "))
    assert f"and so are addresses in {MOCK_ADDRESS_RANGE}" in legend and "documentation-only range, RFC 5737" in legend
    [nat] = [line for line in section(out, "Stack outputs").splitlines() if line.startswith("  natAddresses = ")]
    assert '["198.51.100.' in nat and nat.endswith("(computed by the cloud at deploy time)")
    assert "natAddresses" in summary["placeholderOutputs"]
    assert f"addresses in {MOCK_ADDRESS_RANGE}" in DOCUMENT_HEADER
    for directory in (out_dir, dev_plan[3]):
        documents = list(directory.rglob("*.yaml"))
        assert documents and all(p.read_text().startswith(DOCUMENT_HEADER) for p in documents)
    assert "- 198.51.100." in (out_dir / "team-vision-dev" / "tenants" / "vision" / "vcluster.yaml").read_text()


def test_a_pools_zones_are_in_the_pool_table(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    path = project / "Pulumi.team-vision-dev.yaml"
    path.write_text(path.read_text().replace("{gpu: nvidia-tesla-t4, maxGpus: 2, spot: true}", "{gpu: nvidia-tesla-t4, maxGpus: 2, spot: true, zones: [europe-west4-b]}"))
    from tools.plan import plan_stack
    from tools.plan_json import summary
    from tools.plan_text import render_text

    planned = plan_stack("team-vision-dev", project)
    out = render_text(planned)
    header = next(line for line in section(out, "Tenants (").splitlines() if line.strip().startswith("pool "))
    assert re.split(r"\s{2,}", header.strip())[7] == "zones"
    pools = pool_rows(out)
    assert pools[("vision", "t4-1x-spot")][7] == "europe-west4-b"
    assert pools[("vision", "l4-2x")][7] == pools[("vision", "system")][7] == "all"
    zones = {p["name"]: p["zones"] for p in summary(planned)["tenants"][0]["pools"]}
    assert zones == {"l4-2x": [], "t4-1x-spot": ["europe-west4-b"], "system": []}


def test_quota_of_a_project_pulumi_creates_is_never_ok():
    """prod's research tenant gets a project Pulumi creates (platform.tenantProjects): a new
    project has no GPU quota, so its lines say to request it, with where, and never "ok"."""
    from config.quota import NEW_PROJECT, QUOTA_PAGE

    code, out, _ = plan("--stack", "prod")
    assert code == 0
    table = section(out, "GPU quota of the environment")
    rows = [line for line in table.splitlines() if "acme-prod-research" in line and "  nvidia-" in line]
    # Its A100, L4 and H100 pools (the H100 pool's reservation slice, Spot and on-demand nodes all
    # draw on the on-demand GPU quota of the project their VMs run in, prod granting no preemptible one).
    assert len(rows) == 3 and all(re.search(rf"on-demand GPUs +0 until granted +\d+ +{NEW_PROJECT} ", row) for row in rows)
    assert not any(" ok " in row for row in rows)
    # The reservation itself is the host project's, against the quota the environment states for it.
    assert re.search(r"host project acme-ml-prod +nvidia-h100-80gb +us-central1 +reservations +16 +8 +ok ", table)
    link = QUOTA_PAGE.format(project="acme-prod-research")
    assert f"  acme-prod-research is created by Pulumi, and a new project has no GPU quota: request it at {link}" in table
    code, out, _ = plan("--stack", "prod", "--json")
    quota = [q for q in json.loads(out)["quota"] if "acme-prod-research" in q["scope"]]
    assert len(quota) == 3 and {(q["state"], q["newProject"], q["requestQuotaAt"]) for q in quota} == {(NEW_PROJECT, True, link)}


# --- what keeps work and data, in the plan (tools/reliability_plan.py) --------------------------------


def test_plan_shows_each_tenants_shutdown_upgrade_policy_watchdog_and_backup(dev_plan, dev_json, vision):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants")
    assert (
        "    shutdown: pods get SIGTERM and 30s (10s of it for critical pods) before a VM powers off; upgrades: "
        "t4-1x-spot: replaced, never upgraded in place, removed after 600 s without its GPUs; "
        "system: upgraded in place by vCluster, 1 node at a time\n"
        '    backup: vcluster-speech at "0 3 * * *" UTC, kept 14 days, undeletable for 0 days (plan dev-speech)'
    ) in tenants
    [nlp] = [t for t in dev_json["tenants"] if t["name"] == "nlp"]
    assert nlp["reliability"] == {
        "shutdownGracePeriod": "110s",
        "shutdownGracePeriodCriticalPods": "10s",
        "pools": [
            {"pool": "l4-1x", "upgrade": "replaced, never upgraded in place", "gpuTimeoutSeconds": 600},
            {"pool": "system", "upgrade": "upgraded in place by vCluster, 1 node at a time", "gpuTimeoutSeconds": None},
        ],
        "backup": {"plan": "dev-nlp", "namespaces": ["vcluster-nlp"], "schedule": "0 3 * * *", "retainDays": 14, "deleteLockDays": 0, "protected": False},
    }
    text, summary, _ = vision
    assert '    backup: vcluster-vision at "0 3 * * *" UTC, kept 14 days, undeletable for 0 days (plan dev-vision)' in section(text, "Tenants")
    [team] = summary["tenants"]
    assert [p["upgrade"] for p in team["reliability"]["pools"]] == ["replaced, never upgraded in place"] * 2 + ["upgraded in place by vCluster, 1 node at a time"]


def test_the_plan_says_per_team_where_its_dashboard_metrics_and_cost_view_are(vision, dev_plan, dev_json):
    text, summary, _ = vision
    [line] = [line.strip() for line in section(text, "Tenants (").splitlines() if line.strip().startswith("monitoring:")]
    assert line.startswith('monitoring: dashboard "GPUs of team vision (dev)" in project acme-ml-dev-vision')
    assert 'metrics in project acme-ml-dev-vision, PromQL {tenant="vision"}' in line and line.endswith("cost view: billing export is not set up yet")
    [tenant] = summary["tenants"]
    assert tenant["monitoring"]["metricsProject"] == "acme-ml-dev-vision" and tenant["monitoring"]["costView"] is None
    assert summary["monitoring"] is None  # a team stack: the environment's own plan says the rest
    _, out, _, _ = dev_plan
    monitoring = section(out, "Monitoring (gpu-platform:monitoring)")
    assert "showback: billing export is not set up yet. Dataset acme-ml-dev.gpu_platform_dev_billing will exist" in monitoring
    assert "monitoring team projects: acme-ml-dev-vision" in monitoring and dev_json["monitoring"]["costView"] is None


def test_the_plan_counts_and_names_every_alert_policy_the_program_registers(dev_plan, dev_json, dev_run):
    """Four of the environment (the capacity shortage among them) and one per team with GPU pools
    (nlp, speech inline; vision's team stack), each by its title, as registered."""
    titles = [r.input("displayName").removeprefix("GPU platform dev: ") for r in dev_run.of_type("gcp:monitoring/alertPolicy:AlertPolicy")]
    assert len(titles) == 7 and "Every GPU option of a team's pool out of capacity while its pods wait" in titles
    assert {t for t in titles if t.startswith("GPU pool of ")} == {f"GPU pool of {team} at its limit while pods wait" for team in ("nlp", "speech", "vision")}
    _, out, _, _ = dev_plan
    monitoring = section(out, "Monitoring (gpu-platform:monitoring)")
    listed = monitoring.split("7 alert policies in acme-ml-dev, notifying no channel yet (monitoring.notificationChannels):\n", 1)[1]
    assert listed.splitlines()[: len(titles)] == [f"    {title}" for title in titles]
    assert dev_json["monitoring"]["alertPolicies"] == 7 and dev_json["monitoring"]["alertPolicyTitles"] == titles
