"""Capacity options per pool (docs/gpu-nodes.md "Capacity options"): the order the platform takes
them in, reservations sliced per team (program and pack), Flex-start's expiry, what a reservation
becomes in Compute Engine, and bad input, all at once."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.vcluster_values import VClusterValues
from config import node_properties as props
from config.capacity import RANK_BAND
from config.stack import NS, load_stack
from policy_support import analyze_remote, edit_values, served_pack
from shipped_stacks import SHIPPED_DIR, problems, run_shipped, shipped_values

NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
RESERVATION = "gcp:compute/reservation:Reservation"
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "vcluster-0.36.1-values.schema.yaml").read_text())


def registered_node_types(run) -> list[dict]:
    return run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes")


def pools_of(run, tenant: str) -> dict:
    values = VClusterValues.parse(run.one(VCI, tenant).input("spec", "template", "helmRelease", "values"))
    return {p.name: p for p in values.dynamic_pools()}


def matching(node_types: list[dict], selector: list[dict]) -> list[dict]:
    """The node types a pool's nodeTypeSelector admits (every requirement an `In` on a property),
    in the order the platform takes them: the cheapest available first (vcluster-docs
    platform/administer/node-providers/overview.mdx, "Cost"; vcluster/_fragments/deploy/auto-nodes-scheduling.mdx)."""
    assert all(r["operator"] == "In" for r in selector)
    found = [nt for nt in node_types if all(nt["properties"].get(r["property"]) in r["values"] for r in selector)]
    return sorted(found, key=lambda nt: nt["cost"])


def take(node_types: list[dict], nodes: int) -> list[str]:
    """The node types of `nodes` claims in a row, each the cheapest matching type that still has
    room under its maxCapacity (the platform marks a type unavailable once it reaches it)."""
    used: dict[str, int] = {}
    taken = []
    for _ in range(nodes):
        nt = next(nt for nt in node_types if used.get(nt["name"], 0) < nt.get("maxCapacity", 10**9))
        used[nt["name"]] = used.get(nt["name"], 0) + 1
        taken.append(nt["name"])
    return taken


# --- The order: [reservation, spot, on-demand] in prod as shipped ------------------------------------


def test_a_pools_options_come_in_its_order_in_every_zone(prod_run):
    """research's H100 pool lists [{reservation: research-h100}, spot, on-demand]: the types it may
    get, cheapest first as the platform takes them, are its reserved slice, then Spot, then
    on-demand, in every zone, whatever their prices (on-demand H100 would be cheaper than nothing,
    Spot cheaper than a reserved VM's rate)."""
    pool = pools_of(prod_run, "research")["h100-80gb-8x-rsv-spot-od"]
    options = pool.selected(props.CAPACITY_OPTION)
    assert options == ["rsv-research-h100-research", "r1-spot", "r2-on-demand"]
    admitted = matching(registered_node_types(prod_run), pool.selector)
    order = [nt["properties"][props.CAPACITY_OPTION] for nt in admitted]
    assert order == sorted(order, key=options.index)  # no type of a later option before one of an earlier
    assert {o for o in order} == set(options)
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c"):
        here = [nt["properties"][props.CAPACITY_OPTION] for nt in admitted if nt["properties"][props.ZONE] == zone]
        assert here == sorted(here, key=options.index) and here[-1] == "r2-on-demand", zone
    # Every cost the pool may meet is distinct, so "the cheapest" is always one type.
    assert len({nt["cost"] for nt in admitted}) == len(admitted)
    # ... and not a price: the reserved VM's rate is the on-demand list price, yet it comes first.
    reserved, *_ = admitted
    assert reserved["name"] == "rsv-research-h100-research" and reserved["cost"] < RANK_BAND
    assert all(nt["cost"] >= RANK_BAND for nt in admitted[1:])


def test_the_reserved_type_is_capped_at_the_slice_and_then_the_next_option_takes_over(prod_run):
    pool = pools_of(prod_run, "research")["h100-80gb-8x-rsv-spot-od"]
    admitted = matching(registered_node_types(prod_run), pool.selector)
    [reserved] = [nt for nt in admitted if nt["properties"][props.CAPACITY_TYPE] == props.RESERVED]
    assert reserved["maxCapacity"] == 1  # research's slice of research-h100: 1 VM
    assert reserved["properties"][props.RESERVATION] == "research-h100"
    assert reserved["properties"][props.RESERVATION_TENANT] == "research"
    assert reserved["properties"][props.RESERVATION_PROJECT] == "acme-ml-prod"
    first, second = take(admitted, 2)
    assert first == "rsv-research-h100-research"
    assert second == "a3-highgpu-8g-us-central1-a-spot"  # Spot, in the first zone of nodeProvider.zones


def test_pools_that_order_the_same_options_differently_share_one_node_provider(stack_values):
    """Node types are environment-wide; pools order differently: a pool [spot, on-demand] selects
    r1-spot and r2-on-demand, one [on-demand, spot] r1-on-demand and r2-spot, each in its own order,
    from one NodeProvider, which gains a second rank only where some pool asks for it."""
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"] = [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["spot", "on-demand"]}]
    values[f"{NS}:tenants"][1]["gpuPools"] = [{"gpu": "nvidia-tesla-t4", "maxGpus": 4, "capacity": ["on-demand", "spot"]}]
    env = load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    by_option: dict[str, set[str]] = {}
    for nt in env.offer.node_types:
        by_option.setdefault(nt.properties[props.CAPACITY_OPTION], set()).add(nt.gpu or "cpu")
    # Rank 2 exists only for the GPU type and capacity type a pool lists second.
    assert {o for o in by_option if o.startswith("r2-")} == {"r2-on-demand", "r2-spot"}
    assert by_option["r2-on-demand"] == {"nvidia-l4"} and by_option["r2-spot"] == {"nvidia-tesla-t4"}
    for tenant, expected in ((env.tenants[0], ["spot", "on-demand"]), (env.tenants[1], ["on-demand", "spot"])):
        [pool] = tenant.gpu_pools
        ordered = sorted(pool.node_types, key=lambda nt: nt.cost)
        assert [nt.capacity for nt in ordered] == sorted((nt.capacity for nt in ordered), key=expected.index)
    # The NodeProvider grows only by what is asked: dev's 52 types, plus a second rank of on-demand
    # for L4's 8 shapes and of Spot for T4's 4, in 2 zones each.
    assert len(env.offer.node_types) == 52 + 8 * 2 + 4 * 2


# --- Flex-start: the node drains before Compute Engine stops the VM -------------------------------


@pytest.fixture(scope="module")
def flex_run():
    values = shipped_values("dev")
    values[f"{NS}:nodeProvider"]["flexStart"] = {"maxRunDuration": "72h"}
    values[f"{NS}:tenants"][0]["gpuPools"] = [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["flex-start", "on-demand"]}]
    return run_shipped(values, stack="dev")


def test_a_flex_start_pool_expires_its_nodes_before_their_run_duration(flex_run):
    pool = pools_of(flex_run, "nlp")["l4-1x-flex-od"]
    assert pool.selected(props.CAPACITY_OPTION) == ["r1-flex-start", "r2-on-demand"]
    # 72h less the pool's terminationGracePeriod (30m) less 10m of margin: drained and gone before 72h.
    assert pool.spec["expireAfter"] == "71h20m"
    flex = [nt for nt in registered_node_types(flex_run) if nt["properties"][props.CAPACITY_TYPE] == props.FLEX_START]
    assert flex and {nt["properties"][props.MAX_RUN_DURATION] for nt in flex} == {str(72 * 3600)}
    document = VClusterValues.parse(flex_run.one(VCI, "nlp").input("spec", "template", "helmRelease", "values")).document
    assert [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(document)] == []


def test_prods_flex_start_pool_passes_the_pack_served_over_grpc(tmp_path, prod_run, shipped_records_dir):
    """prod's research A100 pool is [flex-start, on-demand]: its vcluster.yaml carries expireAfter,
    and the pack, served as `pulumi preview --policy-pack` serves it, admits it (the allow-list of
    value paths once lacked expireAfter, so every Flex-start pool was refused). The copy judges by
    the shipped stacks' records (prod as shipped), whatever this checkout holds."""
    from pulumi.runtime.proto import analyzer_pb2

    from policy_support import pack_copy_judging_the_shipped_stacks

    pool = pools_of(prod_run, "research")["a100-1x-flex-od"]
    assert pool.selected(props.CAPACITY_OPTION) == ["r1-flex-start", "r2-on-demand"] and pool.spec["expireAfter"] == "167h20m"
    copied = pack_copy_judging_the_shipped_stacks(tmp_path, shipped_records_dir)
    instance = prod_run.one(VCI, "research")
    with served_pack(copied, cwd=tmp_path) as analyzer:
        diagnostics = analyze_remote(analyzer, instance.type, instance.plain_inputs, instance.urn, instance.name)
    assert [(d.policyName, d.message) for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY] == []


def test_a_grace_period_that_leaves_no_time_before_the_run_duration_is_refused(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["flexStart"] = {"maxRunDuration": "30m"}
    values[f"{NS}:tenants"][0]["gpuPools"] = [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["flex-start"], "terminationGracePeriod": "25m"}]
    assert problems(values) == [
        "tenants[0].gpuPools[0].terminationGracePeriod: 25m leaves a Flex-start node of this pool less than 10m to run: the pool's "
        "nodes must drain and go before Compute Engine stops the VM, so Karpenter expires it at nodeProvider.flexStart.maxRunDuration "
        "(30m) minus terminationGracePeriod minus 10m; allowed: at most 10m, or a longer maxRunDuration"
    ]


# --- Reservations: created sliced, shared, consumed only when named ---------------------------------


def test_prod_creates_its_reservation_specific_and_shared_with_the_team_project(prod_run):
    [reservation] = prod_run.of_type(RESERVATION)
    assert reservation.input("name") == "research-h100" and reservation.input("project") == "acme-ml-prod"
    assert reservation.input("zone") == "us-central1-a"
    assert reservation.input("specificReservationRequired") is True  # only VMs that name it consume it
    assert reservation.input("specificReservation") == {"count": 1, "instanceProperties": {"machineType": "a3-highgpu-8g"}}
    assert reservation.input("shareSettings") == {
        "shareType": "SPECIFIC_PROJECTS",
        "projectMaps": [{"id": "acme-prod-research", "projectId": "acme-prod-research"}],
    }


def test_an_n1_reservation_names_its_gpu_and_reserves_it_as_guest_accelerators(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["reservations"] = [
        {"name": "speech-t4", "zone": "europe-west4-b", "machineType": "n1-standard-4", "gpu": "nvidia-tesla-t4", "count": 2,
         "slices": [{"tenant": "speech", "count": 2}]},
    ]
    values[f"{NS}:tenants"][1]["gpuPools"] = [{"gpu": "nvidia-tesla-t4", "maxGpus": 4, "capacity": [{"reservation": "speech-t4"}, "spot"]}]
    run = run_shipped(values, stack="dev")
    [reservation] = run.of_type(RESERVATION)
    assert reservation.input("specificReservation") == {
        "count": 2,
        "instanceProperties": {"machineType": "n1-standard-4", "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}]},
    }
    # Both inline tenants run in the host project, the reservation's owner: nothing to share.
    assert reservation.input("shareSettings") is None
    [reserved] = [nt for nt in registered_node_types(run) if nt["name"] == "rsv-speech-t4-speech"]
    assert reserved["maxCapacity"] == 2 and reserved["properties"][props.ACCELERATOR] == "nvidia-tesla-t4"
    # Without gpu, an N1 reservation says what it may hold.
    values[f"{NS}:nodeProvider"]["reservations"][0].pop("gpu")
    [message, *_] = problems(values)
    assert message.startswith(
        "nodeProvider.reservations[0].machineType: n1-standard-4 takes attached GPUs: set gpu to one it carries; allowed: "
        "n1-standard-4 with gpu: nvidia-tesla-t4 (1), n1-standard-8 with gpu: nvidia-tesla-t4 (1)"
    )


def test_an_existing_reservation_is_named_not_created(stack_values):
    """create: false: a reservation bought with Google (or one the acceptance run names on purpose,
    which nobody created): the program cannot see it offline, registers nothing for it, and gives the
    slice its node type; Compute Engine refuses the VM if it does not exist."""
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["reservations"] = [
        {"name": "not-there", "zone": "europe-west4-a", "machineType": "g2-standard-4", "count": 1, "create": False,
         "slices": [{"tenant": "nlp", "count": 1}]},
    ]
    values[f"{NS}:tenants"][0]["gpuPools"] = [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": [{"reservation": "not-there"}, "on-demand"]}]
    run = run_shipped(values, stack="dev")
    assert run.of_type(RESERVATION) == []
    [reserved] = [nt for nt in registered_node_types(run) if nt["properties"].get(props.RESERVATION) == "not-there"]
    assert reserved["name"] == "rsv-not-there-nlp" and reserved["properties"][props.CAPACITY_TYPE] == props.RESERVED


# --- Bad input, all at once -----------------------------------------------------------------------


def test_bad_capacity_input_is_reported_all_at_once_naming_each_key(stack_values):
    values = stack_values("prod")
    provider = values[f"{NS}:nodeProvider"]
    provider["gpuTypes"].append("nvidia-h200-141gb")
    provider["gpuQuota"]["nvidia-h200-141gb"] = 16
    provider["flexStart"] = {"maxRunDuration": "200h"}
    provider["reservations"] = [
        {"name": "research-h100", "zone": "us-central1-a", "machineType": "a3-highgpu-8g", "count": 1, "slices": [{"tenant": "research", "count": 2}]},
        {"name": "research-a100", "zone": "us-central1-a", "machineType": "a2-highgpu-8g", "count": 1, "slices": [{"tenant": "research", "count": 1}]},
        {"name": "spare-h100", "zone": "us-central1-a", "machineType": "a3-highgpu-8g", "count": 1, "slices": [{"tenant": "research", "count": 1}]},
    ]
    values[f"{NS}:tenants"][0]["gpuPools"] = [
        {"gpu": "nvidia-tesla-t4", "maxGpus": 2, "capacity": ["flex-start"]},
        {"gpu": "nvidia-h200-141gb", "maxGpus": 8, "gpusPerNode": 8, "capacity": ["on-demand"]},
        {"gpu": "nvidia-l4", "maxGpus": 4, "capacity": [{"reservation": "spare-h100"}, "on-demand"]},
        {"gpu": "nvidia-tesla-a100", "maxGpus": 4, "gpusPerNode": 1, "capacity": [{"reservation": "research-a100"}, "on-demand"]},
        {"gpu": "nvidia-h100-80gb", "maxGpus": 8, "gpusPerNode": 8, "zones": ["us-central1-b"], "capacity": [{"reservation": "research-h100"}, "spot"]},
        {"gpu": "nvidia-l4", "maxGpus": 4, "gpusPerNode": 2, "capacity": []},
    ]
    values[f"{NS}:tenants"] += [
        {"name": "vision", "network": {"cidr": "10.160.4.0/22"}, "access": {"teams": ["vision"]},
         "gpuPools": [{"gpu": "nvidia-h100-80gb", "maxGpus": 8, "gpusPerNode": 8, "capacity": [{"reservation": "research-h100"}]}]},
        {"name": "maps", "network": {"cidr": "10.160.8.0/22"}, "access": {"teams": ["maps"]},
         "gpuPools": [{"gpu": "nvidia-tesla-a100", "maxGpus": 4, "capacity": ["cheap"]}, {"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["spot", "on-demand", "spot"]}]},
    ]
    allowed = "allowed: on-demand, spot, flex-start, {reservation: <name of a nodeProvider.reservations entry>}"
    assert sorted(problems(values, "prod")) == sorted([
        # an unknown capacity kind; the same option twice; an empty list
        f"tenants[2].gpuPools[0].capacity[0]: 'cheap' is not a capacity option; {allowed}",
        "tenants[2].gpuPools[1].capacity[2]: spot is listed twice (first at [0])",
        f"tenants[0].gpuPools[5].capacity: is empty; list at least one option, in the order you want them; {allowed}",
        # Flex-start where Google does not sell it, and longer than 7 days
        "tenants[0].gpuPools[0].capacity[0]: flex-start is not sold for nvidia-tesla-t4 in environment prod "
        "(n1+nvidia-tesla-t4 is sold as on-demand, spot, reservation); allowed here: on-demand, spot",
        "nodeProvider.flexStart.maxRunDuration: 200h is outside what Compute Engine allows a Flex-start VM; allowed: 10m to 168h (7 days)",
        # on-demand H200
        "tenants[0].gpuPools[1].capacity[0]: on-demand is not sold for nvidia-h200-141gb in environment prod "
        "(a3-ultragpu is sold as spot, flex-start, reservation); allowed here: spot, flex-start",
        # a reservation whose GPU type, GPU count or zone does not match the pool
        "tenants[0].gpuPools[2].capacity[0]: reservation spare-h100 reserves a3-highgpu-8g (nvidia-h100-80gb), not the pool's nvidia-l4",
        "tenants[0].gpuPools[3].capacity[0]: reservation research-a100 reserves a2-highgpu-8g with 8 GPUs, not the pool's gpusPerNode 1; "
        "set gpusPerNode: 8",
        "tenants[0].gpuPools[4].capacity[0]: reservation research-h100 is in us-central1-a, outside the pool's zones (us-central1-b)",
        # a slice larger than its reservation; another team's slice
        "nodeProvider.reservations[0].slices[0].count: 2 is more than the reservation's 1 VMs (count)",
        "tenants[1].gpuPools[0].capacity[0]: reservation research-h100 has no slice for tenant vision (its slices: research: 2); "
        "a team uses only its own slice",
    ])


def test_slices_of_one_reservation_together_fit_it_and_name_each_tenant_once(stack_values):
    values = stack_values("prod")
    values[f"{NS}:nodeProvider"]["reservations"][0].update(
        count=2, slices=[{"tenant": "research", "count": 1}, {"tenant": "research", "count": 1}, {"tenant": "vision", "count": 1}]
    )
    found = problems(values, "prod")
    assert "nodeProvider.reservations[0].slices[1].tenant: research already has slices[0] of research-h100; one slice per tenant" in found
    assert ("nodeProvider.reservations[0].slices: together 3 VMs (research: 1, research: 1, vision: 1), more than the reservation's 2 (count)"
            in found)


# --- The pack refuses another team's slice, served over gRPC as the CLI serves it --------------------


def test_the_pack_refuses_a_pool_that_selects_another_teams_slice(tmp_path, prod_run, shipped_records_dir):
    """The program never renders such a pool; a pull request that edits the rendering could. The
    pack, served from a copy of policy/ as `pulumi preview --policy-pack` serves it, refuses it.
    The copy judges by the shipped stacks' records (prod as shipped), whatever this checkout holds."""
    from pulumi.runtime.proto import analyzer_pb2

    from policy_support import pack_copy_judging_the_shipped_stacks

    copied = pack_copy_judging_the_shipped_stacks(tmp_path, shipped_records_dir)
    record = json.loads((copied / "stacks" / "prod.json").read_text())
    # prod's record as if a second team, nlp, had a slice of its own of another reservation.
    record["reservedNodeTypes"]["rsv-shared-h100-nlp"] = "nlp"
    (copied / "stacks" / "prod.json").write_text(json.dumps(record))
    instance = prod_run.one(VCI, "research")

    def select(values: list[str], operator: str = "In"):
        def edit(document):
            for entry in document["privateNodes"]["autoNodes"]:
                for pool in entry["dynamic"]:
                    if pool["name"] == "h100-80gb-8x-rsv-spot-od":
                        for requirement in pool["nodeTypeSelector"]:
                            if requirement["property"] == props.CAPACITY_OPTION:
                                requirement.update(values=values, operator=operator)
        return edit_values(instance.plain_inputs, edit)

    field = "spec.template.helmRelease.values privateNodes.autoNodes[provider='gcp-gpu'].dynamic[name='h100-80gb-8x-rsv-spot-od'].nodeTypeSelector"
    with served_pack(copied, cwd=tmp_path) as analyzer:
        def refusals(props_: dict) -> list[str]:
            diagnostics = analyze_remote(analyzer, instance.type, props_, instance.urn, instance.name)
            # The SDK's servicer puts the policy's description first, then the message.
            return [d.message.split("\n", 1)[1] for d in diagnostics if d.policyName == "tenant-reservation-slices" and d.enforcementLevel == analyzer_pb2.MANDATORY]

        assert refusals(instance.plain_inputs) == []
        [message] = refusals(select(["rsv-research-h100-research", "rsv-shared-h100-nlp", "r1-spot"]))
        assert message == (
            f"tenant-research-instance (instance 'p-research/research'): {field}: gpu-platform/capacity-option rsv-shared-h100-nlp is "
            "tenant nlp's slice of a reservation, not tenant 'research''s; allowed: this tenant's own slices (rsv-research-h100-research)"
        )
        [message] = refusals(select(["rsv-research-h100-research"], operator="NotIn"))
        assert message.endswith("gpu-platform/capacity-option 'NotIn' is not allowed; allowed: In (any other operator can match another tenant's slice of a reservation)")
        [message] = refusals(select(["rsv-made-up-research"]))
        assert "rsv-made-up-research is no reserved node type of this environment; allowed: rsv-research-h100-research" in message


# --- The plan: each pool's options in order, with what a node costs ----------------------------------


def _plan_text(project: Path, stack: str) -> str:
    from tools.plan import plan_stack
    from tools.plan_text import render_text

    return render_text(plan_stack(stack, project))


def test_prod_plan_shows_the_reserved_pool_s_options_in_order_with_their_prices():
    from tools.plan import plan_stack
    from tools.plan_text import render_text

    text = render_text(plan_stack("prod", SHIPPED_DIR))
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("    options of pool h100-80gb-8x-rsv-spot-od, in order")))
    rows = [line.split("  ") for line in lines[start + 2 : start + 5]]
    cells = [[c.strip() for c in row if c.strip()] for row in rows]
    assert [(c[0], c[1]) for c in cells] == [("1", "rsv-research-h100-research"), ("2", "r1-spot"), ("3", "r2-on-demand")]
    # The reserved node adds only its boot disk (200 GB of Hyperdisk Balanced); its VM is the
    # reservation's, committed whether used or not, and counted once, as an always-on cost.
    assert cells[0][4:] == ["0.03", "20.00", "committed 88.49/h, paid by reservation research-h100 used or not; adds its disk"]
    assert cells[1][6] == "Spot price as read (Google may change it once a day)" and cells[2][6] == "on-demand list price"
    assert float(cells[1][4]) < float(cells[2][4])
    costs = text[text.index("Costs in USD") :]
    assert "  reservation research-h100 (1 × a3-highgpu-8g, us-central1-a; slices research 1): committed" in costs


def test_h200_and_b200_pools_are_priced_or_say_why_not(tmp_path):
    """H200 (A3 Ultra) on Spot in us-central1: its whole-VM Spot price and its Hyperdisk boot disk. B200
    (A4): the Spot price recorded from SkyPilot's catalog (config/catalog.yaml, an estimate), a B200
    reservation priced at the rate the stack states (usdPerHour)."""
    from shipped_stacks import shipped_project

    project = shipped_project(tmp_path / "p", ["prod"])
    path = project / "Pulumi.prod.yaml"
    text = path.read_text()
    text = text.replace("gpuTypes: [nvidia-tesla-t4, nvidia-l4, nvidia-tesla-a100, nvidia-h100-80gb]",
                        "gpuTypes: [nvidia-tesla-t4, nvidia-l4, nvidia-tesla-a100, nvidia-h100-80gb, nvidia-h200-141gb, nvidia-b200]")
    text = text.replace("nvidia-h100-80gb: 16}", "nvidia-h100-80gb: 16, nvidia-h200-141gb: 8, nvidia-b200: 16}")
    text = text.replace(
        "          - {tenant: research, count: 1}\n",
        "          - {tenant: research, count: 1}\n"
        "      - {name: research-b200, zone: us-central1-b, machineType: a4-highgpu-8g, count: 1, create: false, reservationBound: true,\n"
        "         usdPerHour: 70.5, slices: [{tenant: research, count: 1}]}\n",
        1,
    )
    text = text.replace(
        "        - {gpu: nvidia-l4, maxGpus: 4, spot: true}\n",
        "        - {gpu: nvidia-h200-141gb, maxGpus: 8, gpusPerNode: 8, capacity: [spot]}\n"
        "        - {gpu: nvidia-b200, maxGpus: 8, gpusPerNode: 8, capacity: [{reservation: research-b200}, spot]}\n"
        "        - {gpu: nvidia-b200, maxGpus: 8, gpusPerNode: 8, capacity: [flex-start]}\n",
    )
    path.write_text(text)
    out = _plan_text(project, "prod")
    lines = out.splitlines()

    def option_rows(pool: str) -> list[list[str]]:
        start = lines.index(next(line for line in lines if line.startswith(f"    options of pool {pool}, in order")))
        rows = []
        for line in lines[start + 2 :]:
            if not line.startswith("      ") or line.startswith("      Flex"):
                break
            rows.append([c.strip() for c in line.split("  ") if c.strip()])
        return rows

    [h200] = option_rows("h200-141gb-8x-spot")
    # 40.99 for the VM (SkyPilot's host and 8-GPU Spot rows) and 0.03 for 200 GB of Hyperdisk Balanced.
    assert h200[2] == "a3-ultragpu-8g" and h200[4] == "41.02"
    reserved, spot = option_rows("b200-8x-rsv-spot")
    assert reserved[1] == "rsv-research-b200-research" and reserved[6].startswith("committed 70.50/h")
    assert spot[1] == "r1-spot" and spot[4] == "32.63"  # 32.6064 + the disk
    # A4's Flex-start is discounted (config/catalog.yaml flexStart), whether or not a bound is known.
    [flex] = option_rows("b200-8x-flex")
    assert flex[1] == "r1-flex-start" and flex[6] == "Flex-start, discounted (figure not recorded)"
    costs = out[out.index("Costs in USD") :]
    assert "  reservation research-b200 (1 × a4-highgpu-8g, us-central1-b; slices research 1): committed" in costs
    assert "records no Spot price for a4-highgpu-8g" not in costs
    # Busy, the pool's one node on its reserved slice: the reserved node's boot disk; the ceiling, its one
    # node on Spot instead.
    b200 = next(line for line in lines if line.strip().startswith("b200-8x-rsv-spot "))
    assert b200.split()[-5:] == ["0.03", "32.63", "(1", "×", "a4-highgpu-8g)"], b200


def test_a_discounted_flex_start_option_says_so_even_without_a_bound(stack_values):
    """A4's Flex-start is discounted (config/catalog.yaml `flexStart`): with neither its price nor an
    on-demand bound known, the plan says it is discounted and unknown, never "at the list price"."""
    import dataclasses

    from tools.plan_capacity_text import options_section

    values = stack_values("prod")
    provider = values[f"{NS}:nodeProvider"]
    provider["gpuTypes"] = [*provider["gpuTypes"], "nvidia-b200"]
    provider["preemptibleGpuQuota"] = {"nvidia-b200": 8}
    values[f"{NS}:tenants"][0]["gpuPools"].append({"gpu": "nvidia-b200", "maxGpus": 8, "gpusPerNode": 8, "capacity": ["flex-start"]})
    env = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    pool = next(p for p in env.tenants[0].gpu_pools if p.gpu == "nvidia-b200")
    unbounded = dataclasses.replace(pool, node_usd_bound={})  # as in a region that records no A4 price
    [row] = [line for line in options_section(unbounded) if "r1-flex-start" in line]
    assert "unknown" in row and row.rstrip().endswith("Flex-start, discounted (figure not recorded)") and "list price" not in row


# --- Quota kinds: what each option draws on ---------------------------------------------------------


def _with_b200(values: dict, *, preemptible: dict | None) -> dict:
    """prod as shipped plus B200 (A4: sold as Spot, Flex-start and future reservations only, no
    on-demand), a calendar-mode reservation sliced to research, and a pool [its slice, spot]; no
    gpuQuota for B200."""
    provider = values[f"{NS}:nodeProvider"]
    provider["gpuTypes"] = [*provider["gpuTypes"], "nvidia-b200"]
    if preemptible is not None:
        provider["preemptibleGpuQuota"] = preemptible
    provider["reservations"].append(
        {"name": "research-b200", "zone": "us-central1-b", "machineType": "a4-highgpu-8g", "count": 1, "create": False,
         "reservationBound": True, "slices": [{"tenant": "research", "count": 1}]}
    )
    values[f"{NS}:tenants"][0]["gpuPools"].append(
        {"gpu": "nvidia-b200", "maxGpus": 16, "gpusPerNode": 8, "capacity": [{"reservation": "research-b200"}, "spot"]}
    )
    return values


def test_a_future_reservation_and_a_gpu_not_sold_on_demand_need_no_on_demand_quota(stack_values):
    """A future reservation charges the team no quota ("No quota is charged" in calendar mode), so
    its slice counts against none; Spot and Flex-start draw on the preemptible quota; a GPU Google
    does not sell on demand needs no gpuQuota (config/quota.py)."""
    env = load_stack(_with_b200(stack_values("prod"), preemptible={"nvidia-b200": 16}), stack="prod", project_dir=SHIPPED_DIR)
    b200 = [(q.scope, q.kind, q.quota, q.asked) for q in env.quota if q.gpu == "nvidia-b200"]
    assert b200 == [("project acme-prod-research", "preemptible GPUs", 16, 16)]
    # The H100 reservation, consumed by STANDARD VMs, still counts against its owner's quota.
    assert [q.kind for q in env.quota if q.gpu == "nvidia-h100-80gb"].count("reservations") == 1
    # prod's A100 pool is [flex-start, on-demand] without a preemptible A100 quota: both draw on gpuQuota
    # (Flex-start falls back to the standard quota, provisioning-models page).
    assert [(q.kind, q.asked) for q in env.quota if q.gpu == "nvidia-tesla-a100"] == [("on-demand GPUs", 4)]


def test_without_preemptible_quota_a_pool_of_a_gpu_not_sold_on_demand_is_told_which_key(stack_values):
    found = problems(_with_b200(stack_values("prod"), preemptible=None), "prod")
    assert found == [
        "tenants[0].gpuPools[3].maxGpus: 16 exceeds the environment's quota of 8 nvidia-b200 GPUs in us-central1 "
        "(nodeProvider.gpuQuota and nodeProvider.preemptibleGpuQuota, which Spot and Flex-start draw on; one pool above it is an error "
        "whatever quotaPolicy says)"
    ]
    # A GPU sold on demand still needs its gpuQuota.
    values = stack_values("prod")
    del values[f"{NS}:nodeProvider"]["gpuQuota"]["nvidia-l4"]
    assert any(p.startswith("nodeProvider.gpuQuota.nvidia-l4: missing;") for p in problems(values, "prod"))
