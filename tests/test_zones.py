"""Zones and availability: node types exist only where their machine family can be created and
as what it is sold, carry the standard zone labels, and a pool can be limited to zones. Impossible
requests are configuration errors naming the key, and register nothing."""

from __future__ import annotations

import re

import pytest

from components.vcluster_values import VClusterValues
from config import node_properties as props
from config.availability import load_availability
from config.catalog import load_catalog
from config.errors import ConfigError
from config.stack import load_stack
from docs_support import section
from shipped_stacks import SHIPPED_DIR, problems, refused, run_shipped

NS = "gpu-platform"
NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
CATALOG = load_catalog()
AVAILABILITY = load_availability()


def _family(nt):
    shape = next(s for s in CATALOG.shapes_for(nt.gpu) if s.machine.name == nt.machine_type and s.gpu_count == nt.gpu_count)
    return AVAILABILITY.family_of(shape)


# --- the committed stacks -------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_node_type_in_a_zone_that_does_not_offer_its_machine_type(stack_values, stack):
    env = load_stack(stack_values(stack), stack=stack, project_dir=SHIPPED_DIR)
    gpu_types = [nt for nt in env.offer.node_types if nt.gpu]
    assert gpu_types
    for nt in gpu_types:
        family = _family(nt)
        assert nt.zone in family.zones_in(env.region), nt.name
        assert (props.SPOT if nt.spot else props.ON_DEMAND) in family.purchase, nt.name


def test_prod_offers_each_gpu_where_its_family_is(stack_values):
    env = load_stack(stack_values("prod"), stack="prod", project_dir=SHIPPED_DIR)
    zones = {}
    for nt in env.offer.node_types:
        zones.setdefault(nt.gpu, set()).add(nt.zone)
    # us-central1-a/b/c all offer T4, L4, A100 40GB and H100 (config/catalog.yaml availability).
    for gpu in ("nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-a100", "nvidia-h100-80gb"):
        assert zones[gpu] == {"us-central1-a", "us-central1-b", "us-central1-c"}, gpu


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_node_types_carry_the_standard_zone_labels(stack_values, stack):
    env = load_stack(stack_values(stack), stack=stack, project_dir=SHIPPED_DIR)
    for nt in env.offer.node_types:
        assert nt.properties[props.TOPOLOGY_ZONE] == nt.properties[props.PD_CSI_ZONE] == nt.properties[props.ZONE] == nt.zone
        assert nt.properties[props.TOPOLOGY_REGION] == env.region


def test_registered_node_types_carry_the_zone_labels(dev_run):
    node_types = dev_run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes")
    spot_l4 = next(nt for nt in node_types if nt["name"] == "g2-standard-8-europe-west4-b-spot")
    assert spot_l4["properties"]["topology.kubernetes.io/zone"] == "europe-west4-b"
    assert spot_l4["properties"]["topology.gke.io/zone"] == "europe-west4-b"
    assert spot_l4["properties"]["topology.kubernetes.io/region"] == "europe-west4"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_node_type_names_never_name_a_machine_type_and_fit_a_label(stack_values, stack):
    """After the CCM has run, a node's instance-type label is its machine type: it must never be
    the name of a node type (it would attribute the node to the wrong zone or capacity type), and
    `<provider>.<node type>` must stay a label value (config/node_types.py explains both)."""
    env = load_stack(stack_values(stack), stack=stack, project_dir=SHIPPED_DIR)
    names = {nt.name for nt in env.offer.node_types}
    assert not names & set(CATALOG.machines)
    for nt in env.offer.node_types:
        if nt.reserved:  # a tenant's slice of a reservation, named after both (its zone is the reservation's)
            assert nt.name == f"rsv-{nt.properties[props.RESERVATION]}-{nt.properties[props.RESERVATION_TENANT]}"
        else:
            assert nt.name.startswith(nt.machine_type + "-") and nt.zone in nt.name
        assert props.is_label_value(f"{env.node_provider.name}.{nt.name}")


def test_a_node_provider_name_too_long_for_the_labels(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["name"] = "gpu-nodes-of-the-machine-learning-platform"
    [message] = [p for p in problems(values) if p.startswith("nodeProvider.name")]
    assert "is too long: the platform labels nodes with <provider>.<node type>, at most 63 characters" in message
    # The longest name a pool could make it create: a Spot T4 shape at rank 2 ([on-demand, spot]).
    assert message.endswith("'gpu-nodes-of-the-machine-learning-platform.n1-standard-16-t4x2-europe-west4-a-spot-r2' has 85")


# --- impossible requests ---------------------------------------------------------------------------


def _prod_in(stack_values, region: str, zones: list[str], gpu_types: list[str]) -> dict:
    values = stack_values("prod")
    values["gcp:region"] = region
    values[f"{NS}:nodeProvider"]["zones"] = zones
    values[f"{NS}:nodeProvider"]["gpuTypes"] = gpu_types
    values[f"{NS}:nodeProvider"]["gpuQuota"] = {g: 16 for g in gpu_types}
    values[f"{NS}:tenants"] = []  # prod's own tenants ask for GPU types these cases drop
    values[f"{NS}:nodeProvider"].pop("reservations")  # and so does its reservation, of research's H100s
    values[f"{NS}:nodeProvider"].pop("flexStart")  # these cases are of on-demand and Spot
    return values


def test_a_gpu_type_in_a_region_none_of_whose_zones_offer_it(stack_values):
    values = _prod_in(stack_values, "us-east1", ["us-east1-b", "us-east1-c"], ["nvidia-tesla-t4", "nvidia-h100-80gb"])
    assert problems(values, "prod") == [
        "nodeProvider.gpuTypes[1]: nvidia-h100-80gb is not offered in any zone of us-east1 (a3-highgpu); regions offering it: "
        "asia-east1, asia-southeast1, europe-west1, europe-west4, us-central1, us-east4, us-west1"
    ]


def test_a_gpu_type_offered_only_in_other_zones_of_the_region(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west4-a"]
    values[f"{NS}:nodeProvider"]["gpuTypes"] = ["nvidia-l4", "nvidia-h100-80gb"]
    values[f"{NS}:nodeProvider"]["gpuQuota"] = {"nvidia-l4": 8, "nvidia-h100-80gb": 8}
    values[f"{NS}:tenants"] = []
    assert problems(values) == [
        "nodeProvider.gpuTypes[1]: nvidia-h100-80gb is offered in europe-west4 only in europe-west4-b, europe-west4-c, "
        "none of nodeProvider.zones (europe-west4-a); add one of them"
    ]


def test_a_region_without_recorded_availability_is_not_guessed(stack_values):
    values = _prod_in(stack_values, "europe-west3", ["europe-west3-a"], ["nvidia-l4"])
    [message] = problems(values, "prod")
    assert message.startswith("nodeProvider.gpuTypes[0]: nvidia-l4: config/catalog.yaml records no availability of g2 in europe-west3;")
    assert "https://cloud.google.com/compute/docs/gpus/gpu-regions-zones" in message


def test_a3_ultra_is_not_sold_on_demand(stack_values):
    values = _prod_in(stack_values, "us-central1", ["us-central1-a", "us-central1-b"], ["nvidia-h200-141gb"])
    values[f"{NS}:nodeProvider"]["spot"] = False
    [message] = problems(values, "prod")
    assert message.startswith(
        "nodeProvider.gpuTypes[0]: nvidia-h200-141gb is not sold on-demand (a3-ultragpu: spot, flex-start, reservation; "
        "https://cloud.google.com/ai-hypercomputer/docs/consumption-models (read 2026-11-30)"
    )
    assert message.endswith(
        "allowed: nodeProvider.spot: true (Spot) or nodeProvider.flexStart (Flex-start) or nodeProvider.reservations (a reservation of it)"
    )


def test_a3_ultra_as_spot_only_where_offered(stack_values):
    values = _prod_in(stack_values, "us-central1", ["us-central1-a", "us-central1-b"], ["nvidia-h200-141gb"])
    env = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    h200 = [nt for nt in env.offer.node_types if nt.gpu]
    assert [nt.name for nt in h200] == ["a3-ultragpu-8g-us-central1-b-spot"]


def test_an_on_demand_pool_of_a_spot_only_gpu(stack_values):
    values = _prod_in(stack_values, "us-central1", ["us-central1-b"], ["nvidia-h200-141gb"])
    values[f"{NS}:tenants"] = [
        {"name": "llm", "network": {"cidr": "10.160.0.0/22"}, "gpuPools": [{"gpu": "nvidia-h200-141gb", "maxGpus": 8}]}
    ]
    assert problems(values, "prod") == [
        "tenants[0].gpuPools[0].capacity: on-demand is not sold for nvidia-h200-141gb in environment prod (capacity is unset: "
        "[on-demand]) (a3-ultragpu is sold as spot, flex-start, reservation); allowed here: spot"
    ]


def _on_demand_a3_ultra(stack_values) -> dict:
    values = _prod_in(stack_values, "us-central1", ["us-central1-a", "us-central1-b"], ["nvidia-h200-141gb"])
    values[f"{NS}:nodeProvider"]["spot"] = False
    return values


def _pool_zone_outside_the_provider(stack_values) -> dict:
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0]["zones"] = ["europe-west4-c"]
    return values


@pytest.mark.parametrize(
    "make_values, stack, expected",
    [
        (
            lambda sv: _prod_in(sv, "us-east1", ["us-east1-b"], ["nvidia-h100-80gb"]),
            "prod",
            "nodeProvider.gpuTypes[0]: nvidia-h100-80gb is not offered in any zone of us-east1",
        ),
        (_on_demand_a3_ultra, "prod", "nodeProvider.gpuTypes[0]: nvidia-h200-141gb is not sold on-demand"),
        (_pool_zone_outside_the_provider, "dev", "tenants[0].gpuPools[0].zones[0]: europe-west4-c is not in nodeProvider.zones"),
    ],
    ids=["gpu-not-in-region", "purchase-option-not-sold", "pool-zone-not-offered"],
)
def test_impossible_requests_register_nothing(stack_values, make_values, stack, expected):
    message = refused(make_values(stack_values), stack=stack)
    assert expected in message


# --- pools limited to zones ---------------------------------------------------------------------


def _dev_with_pool_zones(stack_values, zones) -> dict:
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0]["zones"] = zones
    return values


def test_pool_zones_must_be_node_provider_zones_offering_the_gpu(stack_values):
    values = _dev_with_pool_zones(stack_values, ["europe-west4-c", "europe-west4-b", "europe-west4-b"])
    assert problems(values) == [
        "tenants[0].gpuPools[0].zones[0]: europe-west4-c is not in nodeProvider.zones of environment dev (europe-west4-a, europe-west4-b)",
        "tenants[0].gpuPools[0].zones[2]: europe-west4-b is listed twice (first at [1])",
    ]
    assert problems(_dev_with_pool_zones(stack_values, [])) == ["tenants[0].gpuPools[0].zones: is empty; leave it out to use every zone"]


def test_pool_zone_that_does_not_offer_the_gpu(stack_values):
    values = _prod_in(stack_values, "us-central1", ["us-central1-a", "us-central1-b"], ["nvidia-h200-141gb"])
    values[f"{NS}:tenants"] = [
        {
            "name": "llm",
            "network": {"cidr": "10.160.0.0/22"},
            "gpuPools": [{"gpu": "nvidia-h200-141gb", "maxGpus": 8, "spot": True, "zones": ["us-central1-a"]}],
        }
    ]
    assert problems(values, "prod") == [
        "tenants[0].gpuPools[0].zones[0]: us-central1-a does not offer nvidia-h200-141gb as any of the pool's options "
        "(spot; config/catalog.yaml availability); zones that do: us-central1-b"
    ]


def test_a_pool_limited_to_a_zone_selects_only_its_node_types(stack_values):
    values = _dev_with_pool_zones(stack_values, ["europe-west4-b"])
    env = load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    [pool] = env.tenants[0].gpu_pools
    assert pool.zones == ("europe-west4-b",)
    assert {nt.zone for nt in pool.node_types} == {"europe-west4-b"}
    # Under the mock engine: the tenant's vcluster.yaml selects the zone.
    run = run_shipped(values, stack="dev")
    vci = run.one(VCI, "nlp")
    [rendered] = VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values")).gpu_pools()
    assert {"property": props.ZONE, "operator": "In", "values": ["europe-west4-b"]} in rendered.selector
    # Pools without zones select every zone (no zone requirement).
    speech = run.one(VCI, "speech")
    [other] = VClusterValues.parse(speech.input("spec", "template", "helmRelease", "values")).gpu_pools()
    assert all(r["property"] != props.ZONE for r in other.selector)


# --- every problem at once ------------------------------------------------------------------------


def test_pool_zone_problems_come_with_the_pool_s_other_problems(stack_values):
    """A repeated zone needs nothing from the environment: it is reported with the environment's
    own problems, while the checks against the broken node provider wait and say so."""
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["name"] = "gpu-nodes-of-the-machine-learning-platform"
    values[f"{NS}:tenants"][0]["gpuPools"][0].update(zones=["europe-west4-b", "europe-west4-b"], idleAfter="soon")
    values[f"{NS}:tenants"][1]["gpuPools"][0]["zones"] = "europe-west4-b"
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert sorted(p.path for p in caught.value.problems) == [
        "nodeProvider.name",
        "tenants[0].gpuPools[0].idleAfter",
        "tenants[0].gpuPools[0].zones[1]",
        "tenants[1].gpuPools[0].zones",
    ]
    assert caught.value.notes == [
        "not checked against nodeProvider until it is fixed: "
        "tenants[0].gpuPools[0], tenants[0].cpuPool, tenants[1].gpuPools[0], tenants[1].cpuPool"
    ]


def test_pool_zones_and_the_pool_s_shape_are_checked_together(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"][0].update(zones=["europe-west4-c"], terminationGracePeriod="10s")
    values[f"{NS}:tenants"][1]["gpuPools"][0].update(zones=["europe-west4-a", "europe-west4-a"], gpu="nvidia-h100-80gb")
    assert problems(values) == [
        "tenants[0].gpuPools[0].zones[0]: europe-west4-c is not in nodeProvider.zones of environment dev (europe-west4-a, europe-west4-b)",
        "tenants[0].gpuPools[0].terminationGracePeriod: 10s is too short for a GPU job to checkpoint; at least 1m",
        "tenants[1].gpuPools[0].zones[1]: europe-west4-a is listed twice (first at [0])",
        "tenants[1].gpuPools[0].gpu: 'nvidia-h100-80gb' is not offered by environment dev; offered: nvidia-tesla-t4, nvidia-l4",
    ]


def test_availability_waits_for_sound_zones(stack_values):
    """GPU availability and node-type name lengths are judged by the configured zones, so a broken
    zone makes them wait (a note), while the GPU types are still checked against the catalog."""
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west4-a", 7]
    values[f"{NS}:nodeProvider"]["gpuTypes"] = ["nvidia-l4", "nvidia-a10"]
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [p.path for p in caught.value.problems][:2] == ["nodeProvider.zones[1]", "nodeProvider.gpuTypes[1]"]
    assert "not checked against nodeProvider.zones until it is fixed: cluster.location, nodeProvider.gpuTypes, nodeProvider.name" in caught.value.notes


# --- the docs' table of impossible requests is what users get -----------------------------------


def _readme_messages() -> dict[str, re.Pattern]:
    """docs/gpu-nodes.md "Availability" table: `you ask for` → the message shown, as a pattern (… is anything,
    [i] any index)."""
    readme = section("Availability")
    table = readme[readme.index("Asking for the impossible is a configuration error") :]
    rows = {}
    for line in table.splitlines()[4:]:
        if not line.startswith("| "):
            break
        asked, shown = (cell.strip() for cell in line.strip("|").split("|", 1))
        message = re.search(r"`([^`]+)`", shown).group(1)
        pattern = re.escape(message).replace("…", ".*")
        pattern = re.sub(r"\\\[[ijk]\\\]", r"\\[\\d+\\]", pattern)
        rows[asked] = re.compile(pattern)
    return rows


def _h200_pool(stack_values, **pool) -> dict:
    values = _prod_in(stack_values, "us-central1", ["us-central1-a", "us-central1-b"], ["nvidia-h200-141gb"])
    values[f"{NS}:tenants"] = [
        {"name": "llm", "network": {"cidr": "10.160.0.0/22"}, "gpuPools": [{"gpu": "nvidia-h200-141gb", "maxGpus": 8, **pool}]}
    ]
    return values


def _gpu_only_in_other_zones(stack_values) -> dict:
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"].update(
        zones=["europe-west4-a"], gpuTypes=["nvidia-l4", "nvidia-h100-80gb"], gpuQuota={"nvidia-l4": 8, "nvidia-h100-80gb": 8}
    )
    values[f"{NS}:tenants"] = []
    return values


def test_readmes_table_of_impossible_requests_matches_the_messages(stack_values):
    cases = {
        "a GPU type no zone of the region offers": ("prod", _prod_in(stack_values, "us-east1", ["us-east1-b"], ["nvidia-h100-80gb"])),
        "a GPU type offered only in zones you did not list": ("dev", _gpu_only_in_other_zones(stack_values)),
        "a region the catalog has no record for": ("prod", _prod_in(stack_values, "europe-west3", ["europe-west3-a"], ["nvidia-l4"])),
        "a family not sold on-demand, without Spot": ("prod", _on_demand_a3_ultra(stack_values)),
        "an on-demand pool of a Spot-only GPU": ("prod", _h200_pool(stack_values)),
        "a pool zone outside `nodeProvider.zones`, or one that lacks the GPU": (
            "dev",
            _pool_zone_outside_the_provider(stack_values),
        ),
    }
    rows = _readme_messages()
    assert set(rows) == set(cases)
    for asked, (stack, values) in cases.items():
        [message] = problems(values, stack)
        assert rows[asked].fullmatch(message), (asked, message)
    # The second case of the last row: a pool zone that lacks the GPU.
    [message] = problems(_h200_pool(stack_values, spot=True, zones=["us-central1-a"]), "prod")
    assert rows["a pool zone outside `nodeProvider.zones`, or one that lacks the GPU"].fullmatch(message)
