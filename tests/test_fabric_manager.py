"""NVIDIA Fabric Manager said before deploy (config/fabric_manager.py): a pool that may get an
NVSwitch machine type on an image family the catalog does not record as shipping it is warned
about, and refused in prod unless the pool sets fabricManagerVerified. Checked through load_stack
as the plan runs it; nothing here evaluates the program."""

from __future__ import annotations

import dataclasses

import yaml

from config import fabric_manager, yaml_io
from config.catalog import load_catalog
from config.stack import NS, load_stack
from shipped_stacks import SHIPPED_DIR, problems, shipped_project

FAMILY = load_catalog().gpu_image.family
UNVERIFIED = (
    "NVSwitch machine types ({machines}) on GPU image family '{family}' (fabricManager: {state}), which config/catalog.yaml does not "
    "record as shipping NVIDIA Fabric Manager: a node whose image has no nvidia-fabricmanager.service powers off before it joins, and "
    "Karpenter launches another, each VM billing {price} until it powers off, while the pool's pods wait"
)
ALLOWED = (
    "set fabricManagerVerified: true once an image of the family has been checked to ship it (on a VM of it: systemctl cat "
    "nvidia-fabricmanager.service), or record it in config/catalog.yaml (images.gpu.families.{family}.fabricManager: shipped), "
    "or choose a shape without NVSwitch (fewer GPUs per node)"
)


def test_the_catalog_marks_the_shipped_family_unknown_and_every_full_hgx_board():
    catalog = load_catalog()
    assert catalog.gpu_image.fabric_manager == {FAMILY: "unknown"}  # no public source says either way (config/catalog.yaml)
    assert sorted(m for m, machine in catalog.machines.items() if machine.nvswitch) == [
        "a2-highgpu-8g", "a2-megagpu-16g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-ultragpu-8g",
    ]  # fmt: skip


def _prod_with_8_a100s(stack_values, **pool) -> dict:
    values = stack_values("prod")
    values[f"{NS}:tenants"][0]["gpuPools"][0].update(gpusPerNode=8, maxGpus=16, **pool)
    return values


def test_prod_refuses_an_unverified_nvswitch_pool_naming_the_key_and_what_is_allowed(stack_values):
    assert problems(_prod_with_8_a100s(stack_values), stack="prod") == [
        "tenants[0].gpuPools[0].fabricManagerVerified: required in prod for this pool's "
        + UNVERIFIED.format(machines="a2-highgpu-8g", family=FAMILY, state="unknown", price="29.39 USD/h")
        + "; allowed: "
        + ALLOWED.format(family=FAMILY)
    ]


def test_prod_accepts_a_verified_pool_a_smaller_shape_or_a_family_recorded_shipped(stack_values, monkeypatch):
    env = load_stack(_prod_with_8_a100s(stack_values, fabricManagerVerified=True), stack="prod", project_dir=SHIPPED_DIR)
    assert not [w for w in env.warnings if "Fabric Manager" in w]
    load_stack(stack_values("prod"), stack="prod", project_dir=SHIPPED_DIR)  # as shipped: one A100 per node, no NVSwitch
    catalog = load_catalog()
    shipped = dataclasses.replace(catalog, gpu_image=dataclasses.replace(catalog.gpu_image, fabric_manager={FAMILY: "shipped"}))
    monkeypatch.setattr(fabric_manager, "load_catalog", lambda: shipped)
    load_stack(_prod_with_8_a100s(stack_values), stack="prod", project_dir=SHIPPED_DIR)


def _dev_with_a100s(values: dict) -> dict:
    node_provider = values[f"{NS}:nodeProvider"]
    node_provider["gpuTypes"].append("nvidia-tesla-a100")
    node_provider["gpuQuota"]["nvidia-tesla-a100"] = 16
    return values


def test_dev_plans_an_unverified_nvswitch_pool_with_a_warning(stack_values):
    values = _dev_with_a100s(stack_values("dev"))
    pools = values[f"{NS}:tenants"][0]["gpuPools"]
    pools += [{"gpu": "nvidia-tesla-a100", "maxGpus": 16, "gpusPerNode": 8}, {"gpu": "nvidia-tesla-a100", "maxGpus": 2}]
    [warning] = [w for w in load_stack(values, stack="dev", project_dir=SHIPPED_DIR).warnings if "Fabric Manager" in w]
    # europe-west4 records no price for the A2 machines: said so, never priced with another region's figure.
    what = UNVERIFIED.format(machines="a2-highgpu-8g", family=FAMILY, state="unknown", price="(at a price the region does not record)")
    assert warning == f"tenants[0].gpuPools[1]: offers {what}. In prod this is an error; to accept or avoid it: {ALLOWED.format(family=FAMILY)}."
    pools[1]["fabricManagerVerified"] = True
    assert not [w for w in load_stack(values, stack="dev", project_dir=SHIPPED_DIR).warnings if "Fabric Manager" in w]


def test_a_family_the_catalog_does_not_know_is_not_known_to_ship_it(stack_values):
    values = _prod_with_8_a100s(stack_values)
    values[f"{NS}:nodeProvider"]["gpuImageFamily"] = "common-cu129-ubuntu-2404-nvidia-580"
    [problem] = problems(values, stack="prod")
    assert "on GPU image family 'common-cu129-ubuntu-2404-nvidia-580' (fabricManager: unknown, not in the catalog)" in problem
    assert "(images.gpu.families.common-cu129-ubuntu-2404-nvidia-580.fabricManager: shipped)" in problem


def test_a_team_stacks_pool_is_warned_about_at_its_own_key(tmp_path):
    project = shipped_project(tmp_path)
    dev = yaml_io.load((project / "Pulumi.dev.yaml").read_text())
    _dev_with_a100s(dev["config"])
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(dev))
    team = yaml_io.load((project / "Pulumi.team-vision-dev.yaml").read_text())["config"]
    team[f"{NS}:tenant"]["gpuPools"].append({"gpu": "nvidia-tesla-a100", "maxGpus": 8, "gpusPerNode": 8})
    stack = load_stack(team, stack="team-vision-dev", project_dir=project)
    [warning] = [w for w in stack.warnings if "Fabric Manager" in w]
    assert warning.startswith("tenant.gpuPools[2]: offers NVSwitch machine types (a2-highgpu-8g) on GPU image family")


def test_the_gpu_nodes_page_names_the_catalogs_machines_family_and_key():
    from docs_support import section

    text = " ".join(section("Fabric Manager").split())
    catalog = load_catalog()
    assert all(f"`{m}`" in text for m, machine in catalog.machines.items() if machine.nvswitch)
    assert f"The default family, `{FAMILY}`, is `{catalog.gpu_image.fabric_manager[FAMILY]}`" in text
    assert f"`<pool>.{fabric_manager.KEY}`" in text and f"`{fabric_manager.KEY}: true`" in text
