"""The offline plan's GPU quota and costs (tools/plan.py: `python -m tools.plan ...`, called
in-process through `main(argv)`, tests/plan_support.py): the quota every tenant of an environment
asks for, summed against the environment's, and the cost table, its figures computed by hand from
the recorded prices (config/catalog.yaml); one meaning per figure, and every money figure of the
text in the JSON. Expected numbers come from the config layer and the catalog, not from the plan's
own code; figures are checked on the stacks as shipped (tests/data/shipped/).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from config import yaml_io
from config.catalog import CATALOG_PATH, load_catalog
from docs_support import section as docs_section
from plan_support import dev_json, dev_plan, dev_stack, plan, section, vision  # noqa: F401 - module-scoped fixtures
from shipped_stacks import SHIPPED_DIR, shipped_project


# --- GPU quota of the environment ----------------------------------------------------------------------


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


# --- costs: the recorded prices, part by part ----------------------------------------------------------


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
