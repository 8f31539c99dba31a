"""Warm capacity (`gpuPools[i].warmNodes`): a static pool of the pool's cheapest shape beside the
dynamic one, counted against maxGpus and the quota, priced as always on, and refused where it
cannot hold (negative, more than maxGpus admits, a Spot pool without `spotWarmNodes`).

The warm stack is the shipped dev stack with `warmNodes: 1` on nlp's L4 pool (conftest `warm_plan`,
one offline plan whose program run the other tests reuse)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import policies as P
import pytest
import yaml
from pulumi_policy import StackValidationPolicy
from policy_support import args_of, violations

from components.vcluster_values import GPU_TAINT, POOL_LABEL, SKIP_AUTO_UPGRADE_LABEL, WARM_LABEL, VClusterValues
from config import node_properties as props
from config.errors import ConfigError
from config.prices import PRICES_HOURS_PER_MONTH
from config.stack import load_stack
from config.tenant_plan import node_usd_per_hour
from shipped_stacks import SHIPPED_DIR, problems, refused, shipped_values
from tools.plan_costs import environment_costs
from tools.policy_check import judging_stacks
from tools.plan_json import summary
from tools.plan_text import render_text

NS = "gpu-platform"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "vcluster-0.36.1-values.schema.yaml").read_text())


def nlp_values(run) -> VClusterValues:
    return VClusterValues.parse(run.one(VCI, "nlp").input("spec", "template", "helmRelease", "values"))


def nlp_l4(warm_plan):
    [pool] = [p for p in next(t for t in warm_plan.loaded.tenants if t.tenant.name == "nlp").gpu_pools]
    return pool


def test_one_warm_node_renders_one_static_pool_of_the_cheapest_shape(warm_run, warm_plan):
    values = nlp_values(warm_run)
    [static] = list(values.static_pools())
    pool = nlp_l4(warm_plan)
    cheapest = min(pool.node_types, key=lambda nt: pool.node_price(nt))
    assert static.spec["quantity"] == 1
    assert static.name == "l4-1x-warm"
    assert static.selected(props.ACCELERATOR) == ["nvidia-l4"] and static.selected(props.ACCELERATOR_COUNT) == ["1"]
    assert static.selected(props.INSTANCE_TYPE) == [cheapest.machine_type] == ["g2-standard-4"]
    assert static.selected(props.CAPACITY_OPTION) == ["r1-on-demand"]
    # Never upgraded in place under a training job, like the pool's on-demand nodes: a warm node is
    # rolled by deleting it, and the static pool replaces it (docs/reliability.md "Upgrades").
    assert static.spec["nodeLabels"] == {POOL_LABEL: "l4-1x", "gpu-platform/gpu": "nvidia-l4", SKIP_AUTO_UPGRADE_LABEL: "true", WARM_LABEL: "true"}
    assert static.taints == [GPU_TAINT]
    assert static.spec["terminationGracePeriod"] == "30m"
    assert static.gpu_limit == 1
    # The dynamic pool keeps what the warm node leaves of maxGpus 4.
    dynamic = next(p for p in values.dynamic_pools() if p.name == "l4-1x")
    assert dynamic.limits == {"nvidia.com/gpu": "3", "cpu": "12", "memory": "48Gi"}
    assert dynamic.gpu_limit + static.gpu_limit == 4
    jsonschema.validate(values.document, SCHEMA)


def test_the_policy_pack_accepts_the_warm_pool(warm_plan):
    """The pack's ceiling counts the static pool's GPUs (quantity × GPUs per node of its selector)
    together with the dynamic pool's limit, and its tenancy rules hold for it."""
    warm_run = warm_plan.run
    reg = warm_run.one(VCI, "nlp")
    # Judged by the stack's record as `make policy-data` writes it for the warm configuration (the
    # plan's), as the published pack judges it once the change is recorded.
    with judging_stacks({"dev": warm_plan.pack_entry}):
        found = [(policy.name, m) for policy in P.POLICIES if not isinstance(policy, StackValidationPolicy) for m in violations(policy, args_of(warm_run, reg))]
    assert found == []


def test_warm_gpus_are_in_the_quota_sum(warm_plan):
    """Warm nodes are part of maxGpus: the environment's quota line asks what the dynamic limit and
    the warm nodes hold together."""
    held = sum(p.gpu_limit for p in nlp_values(warm_plan.run).gpu_pools() if p.selected(props.ACCELERATOR) == ["nvidia-l4"])
    [line] = [q for q in warm_plan.loaded.quota if q.gpu == "nvidia-l4" and q.scope.startswith("host project")]
    assert line.tenants == ("nlp (tenants[0]): 4",)
    assert line.asked == held == 4


def _row(text: str, tenant: str, pool: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {tenant}: network"))
    return next(line for line in lines[start:] if line.startswith(f"    {pool} "))


def test_the_plan_shows_warm_nodes_their_cost_and_where_the_first_gpu_comes_from(warm_plan):
    text = render_text(warm_plan)
    pool = nlp_l4(warm_plan)
    price = node_usd_per_hour(pool.warm_node_type, "europe-west4")
    assert pool.warm_node_type.machine_type == "g2-standard-4" and price
    assert f"1 × g2-standard-4: {price:,.2f} USD/h, {price * PRICES_HOURS_PER_MONTH:,.2f} USD/month  warm " in _row(text, "nlp", "l4-1x")
    assert "  none  " in _row(text, "speech", "t4-1x-spot") and "  on demand  " in _row(text, "speech", "t4-1x-spot")
    header = next(line for line in text.splitlines() if line.strip().startswith("pool ") and "first GPU" in line)
    assert "warm nodes (always on)" in header

    pools = {p["name"]: p for t in summary(warm_plan)["tenants"] for p in t["pools"] if t["name"] == "nlp"}
    assert pools["l4-1x"]["warmNodes"] == 1 and pools["l4-1x"]["firstGpu"] == "warm"
    assert pools["l4-1x"]["warmMachineTypes"] == ["g2-standard-4"]
    assert pools["l4-1x"]["warmUsdPerMonth"] == pytest.approx(price * PRICES_HOURS_PER_MONTH, abs=1e-3)
    assert pools["system"]["firstGpu"] is None


def test_the_plan_says_warm_nodes_are_replaced_when_deleted_never_upgraded_in_place(warm_plan):
    """The plan's upgrade line covers the static pool too, read from its rendered labels."""
    [nlp] = [t for t in summary(warm_plan)["tenants"] if t["name"] == "nlp"]
    assert nlp["reliability"]["pools"] == [
        {"pool": "l4-1x", "upgrade": "replaced, never upgraded in place", "gpuTimeoutSeconds": 600},
        {"pool": "system", "upgrade": "upgraded in place by vCluster, 1 node at a time", "gpuTimeoutSeconds": None},
        {"pool": "l4-1x-warm", "upgrade": "replaced when deleted, never upgraded in place", "gpuTimeoutSeconds": 600},
    ]
    assert (
        "upgrades: l4-1x: replaced, never upgraded in place, removed after 600 s without its GPUs; "
        "system: upgraded in place by vCluster, 1 node at a time; "
        "l4-1x-warm: replaced when deleted, never upgraded in place, removed after 600 s without its GPUs\n"
    ) in render_text(warm_plan)


def test_warm_nodes_are_always_on_cost(warm_plan):
    """The tenant's GPU pools cost their warm nodes with no workload; the environment's always-on
    total is the shipped dev stack's plus exactly that (and one more VM on the tenant's NAT)."""
    pool = nlp_l4(warm_plan)
    price = node_usd_per_hour(pool.warm_node_type, "europe-west4")
    costs = warm_plan.costs
    [gpu_line] = [line for line in costs.lines if line.tenant == "nlp" and line.part.startswith("tenant nlp: GPU pools")]
    assert gpu_line.part == "tenant nlp: GPU pools (warm: 1 × g2-standard-4)"
    assert gpu_line.always_on == pytest.approx(price)
    assert gpu_line.always_on_per_month == pytest.approx(price * PRICES_HOURS_PER_MONTH)
    # Busy, the pool is the warm node and three more of the same shape: as without warm nodes.
    assert gpu_line.busy == pytest.approx(4 * price)

    shipped = load_stack(shipped_values("dev"), stack="dev", project_dir=SHIPPED_DIR)
    baseline = environment_costs(warm_plan.catalog, shipped, costs.control_planes)
    nat = warm_plan.catalog.services
    extra_nat = nat.nat_gateway(2, 1).usd_per_hour - nat.nat_gateway(1, 1).usd_per_hour
    assert costs.total("always_on") == pytest.approx(baseline.total("always_on") + price + extra_nat)
    assert costs.total("busy") == pytest.approx(baseline.total("busy"))


# --- bad input ------------------------------------------------------------------------------------


def test_negative_warm_nodes(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0]["warmNodes"] = -1
    assert "tenants[0].gpuPools[0].warmNodes: -1 is out of range; must be at least 0" in problems(values)


def test_more_warm_nodes_than_max_gpus_admits(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"]["gpuPools"][0]["warmNodes"] = 3  # maxGpus 4, gpusPerNode 2: two nodes at most
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="team-vision-dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [
        "tenant.gpuPools[0].warmNodes: 3 warm nodes of 2 GPUs hold more than maxGpus 4 admits; at most 2 (warm nodes count against maxGpus)"
    ]


def test_warm_nodes_in_a_spot_pool_need_the_explicit_setting(stack_values):
    values = stack_values("dev")
    spot = values[f"{NS}:tenants"][1]["gpuPools"][0]
    assert spot["spot"] is True
    spot["warmNodes"] = 1
    assert problems(values) == [
        "tenants[1].gpuPools[0].warmNodes: 1 warm node in a Spot pool: Compute Engine may preempt them at any moment, "
        "and the next pod waits for a new VM after all; keep warm nodes in an on-demand pool, or set spotWarmNodes: true "
        "to keep them anyway"
    ]
    spot["spotWarmNodes"] = True
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


def test_warm_nodes_in_a_pool_that_takes_flex_start_first_are_refused(stack_values):
    """A warm node is a static pool's, which has no expireAfter: nothing would drain a Flex-start VM
    before Compute Engine stops it at its max run duration. Another option first is fine."""
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["flexStart"] = {"maxRunDuration": "72h"}
    pools = values[f"{NS}:tenants"][0]["gpuPools"]
    pools[0].update(capacity=["flex-start", "on-demand"], warmNodes=1)
    assert problems(values) == [
        "tenants[0].gpuPools[0].warmNodes: 1 warm node in a pool whose first option is flex-start: warm nodes are of the first option, "
        "and Compute Engine stops a Flex-start VM at nodeProvider.flexStart.maxRunDuration without a drain (a warm, static pool has no "
        "expireAfter); allowed: warmNodes: 0, or another option first in capacity (e.g. [on-demand, flex-start])"
    ]
    pools[0]["capacity"] = ["on-demand", "flex-start"]
    [pool] = load_stack(values, stack="dev", project_dir=SHIPPED_DIR).tenants[0].gpu_pools
    assert pool.warm_nodes == 1 and pool.warm_node_type.capacity == "on-demand" and pool.expire_after


def test_bad_warm_nodes_are_reported_together_and_register_nothing(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0]["warmNodes"] = 5  # maxGpus 4
    values[f"{NS}:tenants"][1]["gpuPools"][0]["warmNodes"] = 1  # Spot
    message = refused(values, stack="dev")
    assert message.startswith("2 configuration problems in stack 'dev'; nothing was created:")
    assert "tenants[0].gpuPools[0].warmNodes: 5 warm nodes of 1 GPU hold more than maxGpus 4 admits; at most 4" in message
    assert "tenants[1].gpuPools[0].warmNodes: 1 warm node in a Spot pool" in message


def test_the_gpu_nodes_page_quotes_the_plans_warm_node(warm_plan):
    """docs/gpu-nodes.md "Warm nodes": the shape and the cost of dev's warm L4, as the plan has them."""
    from docs_support import section

    text = " ".join(section("Warm nodes").split())
    pool = nlp_l4(warm_plan)
    price = node_usd_per_hour(pool.warm_node_type, "europe-west4")
    assert (
        f"one warm {pool.warm_node_type.machine_type} with its boot disk is about {price:,.2f} USD/h, "
        f"{price * PRICES_HOURS_PER_MONTH:,.2f} USD/month at list prices, an estimate"
    ) in text
    assert "`warm` or `on demand`" in text and "spotWarmNodes: true" in text


def test_the_upgrades_section_rolls_warm_nodes_by_what_the_static_pool_renders(warm_run):
    """docs/reliability.md "Upgrades": its commands select warm nodes by the label the static pool
    gives them, and the drain bound it names is a setting the static pool has."""
    from docs_support import section

    text = " ".join(section("Upgrades").split())
    [static] = list(nlp_values(warm_run).static_pools())
    assert f"kubectl get nodes -l {WARM_LABEL}=true -L {POOL_LABEL}" in text
    assert static.spec["nodeLabels"][WARM_LABEL] == "true" and static.spec["nodeLabels"][SKIP_AUTO_UPGRADE_LABEL] == "true"
    assert "kubectl delete nodeclaim <claim>" in text and "kubectl delete node <node>" in text
    assert "at most the pool's `terminationGracePeriod`" in text and "terminationGracePeriod" in static.spec
