"""The machine catalog and the node types generated from it: only real GPU/machine pairings, and
resources that fit inside the real shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from config import node_properties as props
from config.base import DNS_LABEL
from config.availability import Availability, load_availability
from config.catalog import BUILTIN, CATALOG_PATH, GUEST, CatalogError, allocatable, load_catalog, reserve
from config import capacity as cap
from config.node_types import GPU_RESOURCE, Offering, generate_node_types
from policy.kubernetes_reader import LOADER

CATALOG = load_catalog()
AVAILABILITY = load_availability()
ZONES = ("europe-west4-a", "europe-west4-b", "europe-west4-c")
# Two regions with recorded prices and one without (no region of `availability:` lacks prices).
REGIONS = ("europe-west4", "us-central1", "me-west1")


# For tests of prices and shapes, not of availability: every family sold on-demand and as Spot in
# every zone of ZONES, whatever the region priced.
EVERYWHERE = Availability(
    AVAILABILITY.sources,
    {name: dataclasses.replace(f, purchase=("on-demand", "spot"), zones={r: ZONES for r in REGIONS}) for name, f in AVAILABILITY.families.items()},
)


def offer_of(gpus, quota, spot=False, cpu=(), region="us-central1", prices=None, availability=EVERYWHERE, **offering):
    return generate_node_types(
        catalog=CATALOG, region=region, zones=ZONES[:1], gpu_types=tuple(gpus), offering=Offering(spot=spot, **offering), gpu_quota=quota,
        cpu_machine_types=cpu, gpu_disk=(200, "pd-balanced"), cpu_disk=(50, "pd-balanced"), prices=prices,
        availability=availability,
    )


@st.composite
def offers(draw):
    gpus = draw(st.lists(st.sampled_from(sorted(CATALOG.gpus)), min_size=1, max_size=4, unique=True))
    quota = {g: draw(st.integers(min_value=1, max_value=64)) for g in gpus}
    region = draw(st.sampled_from(REGIONS))
    zones = tuple(f"{region}-{s}" for s in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)))
    cpu = tuple(draw(st.lists(st.sampled_from(CATALOG.cpu_machines()), min_size=1, max_size=3, unique=True)))
    spot = draw(st.booleans())
    flex = draw(st.sampled_from([None, 3600, 604800]))
    # Ranks above 1 some pools list a capacity type at (config/capacity.py).
    ranks = draw(st.dictionaries(st.tuples(st.sampled_from(gpus), st.sampled_from(cap.POOLED)), st.frozensets(st.integers(2, cap.MAX_RANK), min_size=1), max_size=3))
    offering = Offering(spot=spot, flex_start_seconds=flex, extra_ranks=ranks)
    offer = generate_node_types(
        catalog=CATALOG,
        region=region,
        zones=zones,
        gpu_types=tuple(gpus),
        offering=offering,
        gpu_quota=quota,
        cpu_machine_types=cpu,
        gpu_disk=(200, "pd-balanced"),
        cpu_disk=(50, "pd-standard"),
    )
    return offer, quota, offering


@settings(max_examples=150, deadline=None)
@given(offers())
def test_every_node_type_is_a_real_pairing_that_fits_its_shape(generated):
    offer, quota, offering = generated
    names = [nt.name for nt in offer.node_types]
    assert len(names) == len(set(names))
    for nt in offer.node_types:
        machine = CATALOG.machines[nt.machine_type]
        assert DNS_LABEL.match(nt.name) and len(nt.name) <= 63
        # Resources are the real shape; what pods can use leaves a reserve.
        assert nt.resources["cpu"] == str(machine.vcpus) and nt.resources["memory"] == f"{int(machine.memory_gb * 1024)}Mi"
        assert (nt.reserved_cpu_millis, nt.reserved_memory_mi) == reserve(machine.vcpus, machine.memory_gb)
        assert 0 < nt.cpu_millis < machine.vcpus * 1000
        assert 0 < nt.memory_mi < machine.memory_gb * 1024
        # A CPU type: its price in thousandths of a USD per hour, or none where the region has no
        # price; a GPU type: its rank's band, then its price (or bound), then the tie-break.
        if nt.gpu is None:
            assert (nt.cost is None) == (nt.usd_per_hour is None)
            assert nt.cost is None or nt.cost == round(nt.usd_per_hour * 1000)
        else:
            price = nt.usd_per_hour if nt.usd_per_hour is not None else nt.price_bound
            assert nt.cost == cap.cost(nt.rank, price, nt.tie_break)
            assert nt.rank * cap.RANK_BAND < nt.cost < (nt.rank + 1) * cap.RANK_BAND
        # The template's keys; a GPU type also the labels the GPU Operator finds GPU nodes by, a
        # Flex-start type its run duration.
        flex_keys = {props.MAX_RUN_DURATION} if nt.capacity == props.FLEX_START else set()
        assert set(nt.properties) == set(props.NODE_TYPE_KEYS) | (set(props.GPU_NODE_LABELS) if nt.gpu else set()) | flex_keys
        assert nt.properties[props.CAPACITY_OPTION] == cap.option_value(nt.capacity, nt.rank)
        if flex_keys:
            assert nt.properties[props.MAX_RUN_DURATION] == str(offering.flex_start_seconds)
        assert all(props.is_label_value(v) for v in nt.properties.values())
        assert nt.properties[props.DISK_TYPE] in machine.disk_types
        if nt.gpu is None:
            assert CATALOG.series[machine.series]["gpuAttach"] == "none"
            assert GPU_RESOURCE not in nt.resources and not nt.spot
            continue
        gpu = CATALOG.gpus[nt.gpu]
        assert machine.series in gpu.series
        assert nt.resources[GPU_RESOURCE] == str(nt.gpu_count)
        if gpu.attach == GUEST:
            limits = {count: (v, gb) for count, v, gb in gpu.guest_limits}
            assert nt.gpu_count in limits, f"{nt.gpu_count} × {nt.gpu} is not an allowed count"
            max_vcpus, max_gb = limits[nt.gpu_count]
            assert machine.vcpus <= max_vcpus and machine.memory_gb <= max_gb
        else:
            assert machine.gpu == nt.gpu and machine.gpu_count == nt.gpu_count
        # Quota: no shape is offered that the regional quota cannot hold once; no pooled type is
        # capped (the platform counts a type across every tenant, quota is per project).
        assert nt.gpu_count <= quota[nt.gpu] and nt.max_capacity is None
        # Only the capacity types the environment offers, at rank 1 or where a pool asks for more.
        assert nt.capacity in offering.pooled() and nt.rank in offering.ranks(nt.gpu, nt.capacity)
        # Only where and as what its machine family can be created.
        shape = next(sh for sh in CATALOG.shapes_for(nt.gpu) if sh.machine.name == nt.machine_type and sh.gpu_count == nt.gpu_count)
        family = AVAILABILITY.family_of(shape)
        assert nt.zone in family.zones_in(nt.properties[props.TOPOLOGY_REGION])
        assert nt.capacity in family.purchase


@settings(max_examples=80, deadline=None)
@given(offers())
def test_no_two_node_types_a_pool_may_select_cost_the_same(generated):
    """A pool selects one GPU type and count and, per entry of its list, one (capacity type, rank):
    every type it may get costs differently (which one the platform takes on a tie is not
    documented), and each rank's types cost less than the next rank's, whatever their price."""
    offer, _, _ = generated
    gpu_types = [nt for nt in offer.node_types if nt.gpu]
    by_pool: dict[tuple, list[int]] = {}
    for nt in gpu_types:
        by_pool.setdefault((nt.gpu, nt.gpu_count), []).append(nt.cost)
    for costs in by_pool.values():
        pairs = {(nt.capacity, nt.rank) for nt in gpu_types}
        assert len(costs) == len(set(costs)) or len(pairs) > 1  # distinct within an option: checked below
    for key in {(nt.gpu, nt.gpu_count, nt.capacity, nt.rank) for nt in gpu_types}:
        costs = [nt.cost for nt in gpu_types if (nt.gpu, nt.gpu_count, nt.capacity, nt.rank) == key]
        assert len(costs) == len(set(costs)), key
    for nt in gpu_types:
        for other in gpu_types:
            if (other.gpu, other.gpu_count) == (nt.gpu, nt.gpu_count) and other.rank > nt.rank:
                assert nt.cost < other.cost


@settings(max_examples=50, deadline=None)
@given(offers())
def test_quota_report_adds_up(generated):
    offer, quota, offering = generated
    for use in offer.quota:
        types = [nt for nt in offer.node_types if nt.gpu == use.gpu]
        assert use.quota == quota[use.gpu]
        # Shapes larger than the quota are excluded and reported, never offered; the others are
        # offered wherever their family can be created in the zones.
        zones = {nt.zone for nt in offer.node_types}  # the CPU types cover every zone asked for
        region = offer.node_types[-1].properties[props.TOPOLOGY_REGION]
        for shape in CATALOG.shapes_for(use.gpu):
            offered = any(nt.machine_type == shape.machine.name for nt in types)
            family = AVAILABILITY.family_of(shape)
            creatable = bool(zones & set(family.zones_in(region) or ())) and any(c in family.purchase for c in offering.pooled())
            assert offered == (shape.gpu_count <= use.quota and creatable)
            assert (f"{shape.machine.name} ({shape.gpu_count} GPUs)" in use.excluded) == (shape.gpu_count > use.quota)


def test_spot_twins_are_cheaper_than_their_on_demand_types():
    offer = offer_of(CATALOG.gpus, {g: 16 for g in CATALOG.gpus}, spot=True)
    by_name = {nt.name: nt for nt in offer.node_types}
    spot_types = [nt for nt in offer.node_types if nt.spot and nt.usd_per_hour is not None]
    assert spot_types
    for nt in spot_types:
        twin = by_name[nt.name.removesuffix("-spot")]
        assert nt.cost < twin.cost
        assert nt.properties[props.CAPACITY_TYPE] == props.SPOT and twin.properties[props.CAPACITY_TYPE] == props.ON_DEMAND


def test_n1_with_t4_is_priced_host_plus_gpus():
    nt = next(nt for nt in offer_of(["nvidia-tesla-t4"], {"nvidia-tesla-t4": 4}).node_types if nt.name == "n1-standard-4-t4x1-europe-west4-a")
    # us-central1: the n1-standard-4 host at 0.19 + one T4 at 0.35.
    assert nt.usd_per_hour == pytest.approx(0.19 + 0.35, abs=1e-6)
    # Its cost: rank 1, then that price in thousandths of a USD per hour (config/capacity.py).
    assert nt.cost == cap.RANK_BAND + 540 * cap.PRICE_STEP + nt.tie_break + 1
    # The full shape as resources; pods get 4 vCPU / 15 GB minus the reserve (the recipe's defect,
    # 1 CPU / 3.75Gi for an n1-standard-4, cannot happen).
    assert nt.resources == {"cpu": "4", "memory": "15360Mi", GPU_RESOURCE: "1"}
    assert (nt.cpu_millis, nt.memory_mi) == (3920, 12700)


def test_prices_are_the_regions_own():
    west4 = {nt.machine_type: nt for nt in offer_of(["nvidia-l4"], {"nvidia-l4": 8}, region="europe-west4").node_types}
    central1 = {nt.machine_type: nt for nt in offer_of(["nvidia-l4"], {"nvidia-l4": 8}).node_types}
    # g2-standard-4 = its host + one L4, each at the region's recorded price (the G2 rows price
    # the host alone, so the L4 is counted once).
    assert west4["g2-standard-4"].usd_per_hour == pytest.approx(0.15429 + 0.58804, abs=1e-6)
    assert central1["g2-standard-4"].usd_per_hour == pytest.approx(0.14679 + 0.56004, abs=1e-6)
    assert west4["g2-standard-24"].usd_per_hour == pytest.approx(0.92571 + 2 * 0.58804, abs=1e-6)
    assert all(nt.price_estimate for nt in west4.values())  # a third-party catalog, not a Google page


def test_a_region_without_recorded_prices_has_no_prices_and_keeps_the_order():
    """No price anywhere; a CPU type's cost is left to the platform, a GPU type keeps its rank and
    comes last in it (an unknown price is never a low one)."""
    offer = offer_of(["nvidia-l4"], {"nvidia-l4": 8}, cpu=("e2-standard-2",), region="me-west1")
    assert offer.node_types and all(nt.usd_per_hour is None for nt in offer.node_types)
    assert all(nt.cost is None for nt in offer.node_types if nt.gpu is None)
    assert all(nt.cost == cap.RANK_BAND + cap.UNPRICED * cap.PRICE_STEP + nt.tie_break + 1 for nt in offer.node_types if nt.gpu)


@pytest.mark.parametrize(
    "region, gpu",
    [
        ("europe-west4", "nvidia-tesla-a100"),  # its A100 row fails the check of config/catalog.yaml
        ("us-west1", "nvidia-h100-80gb"),  # likewise its H100 row (4.20076)
        ("asia-southeast1", "nvidia-tesla-a100"),
    ],
)
def test_what_a_region_does_not_record_is_unknown_there(region, gpu):
    def offer(region):  # in zone b of the region, which offers the GPU (`availability:`)
        return generate_node_types(
            catalog=CATALOG, region=region, zones=(f"{region}-b",), gpu_types=(gpu,), offering=Offering(), gpu_quota={gpu: 8},
            cpu_machine_types=(), gpu_disk=(200, "pd-balanced"), cpu_disk=(50, "pd-balanced"), availability=AVAILABILITY,
        ).node_types

    here, central1 = offer(region), offer("us-central1")
    assert here and all(nt.usd_per_hour is None for nt in here)
    assert central1 and all(nt.usd_per_hour is not None for nt in central1)


def test_every_region_with_availability_has_prices():
    regions = {region for family in AVAILABILITY.families.values() for region in family.zones}
    assert regions == {"europe-west4", "us-central1", "us-east1", "us-east4", "us-west1", "europe-west1", "asia-southeast1", "asia-east1"}
    assert set(CATALOG.prices) == regions


def test_derived_disk_prices_are_us_central1s_at_the_regions_n1_price_level():
    # What each region's `ratio` source says: us-central1's disk figure × the region's
    # n1-standard-4 host price over us-central1's, to four decimals.
    central1 = CATALOG.prices["us-central1"]
    for region, prices in CATALOG.prices.items():
        for disk, (usd, source) in prices.disks.items():
            if source == "hyperdisk":
                # Hyperdisk Balanced: the region's own pd-balanced figure, as its source says.
                assert "at the region's pd-balanced figure" in prices.sources[source].text
                assert usd == prices.disks["pd-balanced"][0], region
                continue
            if prices.sources[source].kind != "derived":
                continue
            level = prices.hosts["n1-standard-4"].on_demand / central1.hosts["n1-standard-4"].on_demand
            assert f"× {round(level, 4):g}" in prices.sources[source].text, region
            assert usd == pytest.approx(central1.disks[disk][0] * level, abs=5e-5), (region, disk)


def test_a2_and_a3_prices_agree_with_us_central1s_whole_vm_prices():
    # The check config/catalog.yaml applies to the GPU rows of A2 and A3: a region's VM (host +
    # GPUs) costs us-central1's whole-VM list price × the region's price level for
    # accelerator-optimized VMs (its g2-standard-4 host over us-central1's), within 5%.
    central1 = CATALOG.prices["us-central1"]
    checked = set()
    for region, prices in CATALOG.prices.items():
        level = prices.hosts["g2-standard-4"].on_demand / central1.hosts["g2-standard-4"].on_demand
        for name in central1.machines:
            here = prices.machine(CATALOG.machines[name], spot=False)
            if here is not None and region != "us-central1":
                there = central1.machine(CATALOG.machines[name], spot=False)
                assert here.usd_per_hour / there.usd_per_hour == pytest.approx(level, rel=0.05), (region, name)
                checked.add(region)
    assert checked == {"us-east1", "us-east4", "us-west1", "europe-west1", "asia-southeast1", "asia-east1"}


def test_each_source_says_which_figures_it_gave():
    assert CATALOG.prices["europe-west4"].figures_by_source() == {
        "skypilot": ["GPUs", "hosts"], "ratio": ["disks"], "lb-page": ["forwarding rules"], "hyperdisk": ["Hyperdisk Balanced disks"],
    }
    assert CATALOG.prices["us-central1"].figures_by_source() == {
        "skypilot": ["GPUs", "hosts"], "first-catalog": ["whole VMs"], "skypilot-a3-a4": ["Spot whole VMs", "whole VMs"], "disk-page": ["disks"], "lb-page": ["forwarding rules"], "hyperdisk": ["Hyperdisk Balanced disks"],
    }


@pytest.mark.parametrize(
    "rules, usd_per_hour",
    # https://cloud.google.com/load-balancing/pricing: "First 5 forwarding rules 0.025 per hour",
    # "Per additional forwarding rule 0.01 per hour".
    [(0, 0.0), (1, 0.025), (3, 0.025), (5, 0.025), (6, 0.035), (8, 0.055)],
)
def test_forwarding_rules_cost_one_charge_for_five_then_each_further_one(rules, usd_per_hour):
    assert CATALOG.prices["europe-west4"].forwarding_rules(rules).usd_per_hour == pytest.approx(usd_per_hour)


def test_a_missing_spot_price_is_unknown_not_borrowed(monkeypatch):
    # Without europe-west4's N1 Spot host prices a Spot T4 node there has no price: neither
    # us-central1's figure nor the on-demand one stands in.
    hosts = CATALOG.prices["europe-west4"].hosts
    for name in [n for n in hosts if n.startswith("n1-")]:
        monkeypatch.setitem(hosts, name, dataclasses.replace(hosts[name], spot=None))
    offer = offer_of(["nvidia-tesla-t4"], {"nvidia-tesla-t4": 4}, spot=True, region="europe-west4")
    assert {nt.usd_per_hour is None for nt in offer.node_types if nt.spot} == {True}
    assert {nt.usd_per_hour is None for nt in offer.node_types if not nt.spot} == {False}


def test_price_override_applies_to_host_and_keeps_spot_discount():
    offer = offer_of(["nvidia-l4"], {"nvidia-l4": 1}, spot=True, prices={"g2-standard-4": 1.00})
    by_name = {nt.name: nt for nt in offer.node_types}
    assert by_name["g2-standard-4-europe-west4-a"].usd_per_hour == 1.00
    spot, on_demand = 0.05874 + 0.2231, 0.14679 + 0.56004  # us-central1 g2-standard-4 host + L4
    assert by_name["g2-standard-4-europe-west4-a-spot"].usd_per_hour == pytest.approx(1.00 * spot / on_demand, abs=1e-4)


def test_allocatable_follows_the_documented_reserve():
    # 2 vCPU: 6 % of the first core + 1 % of the second = 70m; 8 GiB: 25 % of 4 + 20 % of 4 = 1.8 GiB + 100 Mi.
    assert allocatable(2, 8) == (2000 - 70, 8192 - 1844 - 100)


def test_a3_ultra_boots_from_hyperdisk():
    [nt] = offer_of(["nvidia-h200-141gb"], {"nvidia-h200-141gb": 8}).node_types
    assert nt.properties[props.DISK_TYPE] == "hyperdisk-balanced"


def _load_variant(tmp_path: Path, change) -> None:
    raw = yaml.load(CATALOG_PATH.read_text(), Loader=LOADER)  # noqa: S506 - a safe loader
    change(raw)
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(raw))
    load_catalog.__wrapped__(path)
    load_availability.__wrapped__(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda raw: raw["machines"]["e2-standard-4"].update(gpu="nvidia-l4", gpuCount=1), "machines.e2-standard-4: series e2 cannot carry built-in GPUs"),
        (lambda raw: raw["guestShapes"]["nvidia-tesla-t4"].append(["n1-standard-32", 8]), "guestShapes.nvidia-tesla-t4: 8 GPUs is not an allowed count [1, 2, 4]"),
        (lambda raw: raw["guestShapes"].update({"nvidia-l4": [["n1-standard-8", 1]]}), "guestShapes.nvidia-l4: not an attachable GPU type"),
        (lambda raw: raw["guestShapes"]["nvidia-tesla-v100"].append(["n1-standard-16", 1]), "exceeds 12 vCPU / 78 GB allowed with 1 GPUs"),
        (lambda raw: raw["guestShapes"]["nvidia-tesla-t4"].append(["e2-standard-8", 1]), "guestShapes.nvidia-tesla-t4: e2-standard-8 cannot take guest GPUs"),
        (lambda raw: raw["prices"]["us-central1"]["gpus"]["nvidia-l4"].update({"from": "a-blog"}), "prices.us-central1.gpus.nvidia-l4: from 'a-blog' is not one of its sources"),
        (lambda raw: raw["prices"]["us-central1"]["gpus"]["nvidia-l4"].update({"spot": 0.9}), "prices.us-central1.gpus.nvidia-l4: Spot price above the on-demand price"),
        (lambda raw: raw["prices"]["europe-west4"]["machines"].update({"a9-giant": {"onDemand": 1, "from": "ratio"}}), "prices.europe-west4.machines.a9-giant: not in the catalog's machines"),
        (lambda raw: raw["prices"]["europe-west4"]["sources"]["ratio"].update({"kind": "guess"}), "prices.europe-west4.sources.ratio: needs kind"),
        (lambda raw: raw["prices"]["us-central1"]["hosts"].update({"n1-standard-5": {"onDemand": 0.2, "from": "skypilot"}}), "prices.us-central1.hosts.n1-standard-5: not in the catalog's machines"),
        (lambda raw: raw["prices"]["us-central1"]["hosts"]["n1-standard-4"].update({"spot": 0.5}), "prices.us-central1.hosts.n1-standard-4: Spot price above the on-demand price"),
        # A G2 priced both as a host (plus its L4 from gpus) and as a whole VM: which one counts?
        (lambda raw: raw["prices"]["us-central1"]["machines"].update({"g2-standard-4": {"onDemand": 0.70683, "from": "skypilot"}}), "prices.us-central1.machines.g2-standard-4: also in hosts"),
        # An N1 "whole VM" would get its attached GPUs added a second time.
        (lambda raw: raw["prices"]["europe-west4"]["machines"].update({"n1-standard-4": raw["prices"]["europe-west4"]["hosts"].pop("n1-standard-4")}), "prices.europe-west4.machines.n1-standard-4: has no built-in GPUs, so its price is a host price; move it to hosts"),
        (lambda raw: raw["prices"]["europe-west4"].update({"families": {"n1": {"vcpu": 0.03, "memoryGb": 0.004, "from": "ratio"}}}), "prices.europe-west4.families: not a price section; allowed: disks, forwardingRule, gpus, hosts, machines, read, sources"),
        (lambda raw: raw["availability"]["families"]["g2"].pop("flexStart"), "availability.families.g2.flexStart: None; set it (discounted or list-price) exactly when purchase lists flex-start"),
        (lambda raw: raw["availability"]["families"]["a3-ultragpu"].update(reservations=["someday"]), "availability.families.a3-ultragpu.reservations: ['someday']; set it"),
        (lambda raw: raw["machines"]["e2-standard-4"].update(nvswitch=True), "machines.e2-standard-4: nvswitch without built-in GPUs"),
    ],
)
def test_impossible_pairings_cannot_enter_the_catalog(tmp_path, change, message):
    with pytest.raises(CatalogError) as caught:
        _load_variant(tmp_path, change)
    assert message in str(caught.value)


def test_catalog_loads_once_per_process():
    before = load_catalog.cache_info()
    for _ in range(5):
        load_catalog()
    after = load_catalog.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 5


def test_builtin_gpus_are_never_attached_as_guests():
    for gpu in CATALOG.gpus.values():
        for shape in CATALOG.shapes_for(gpu.name):
            assert shape.attach == gpu.attach
            assert (shape.attach == BUILTIN) == (shape.machine.series != "n1")
    assert CATALOG.gpus["nvidia-l4"].series == ("g2",)
