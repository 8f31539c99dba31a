"""Bad configuration of tenants: an environment's inline tenants and a team stack's tenant, checked
against the environment (its GPU types, quota, shapes, ranges) and against each other (names,
networks, projects, from either side); which keys belong to which kind of stack, a team stack's
environment stack file; every problem reported at once with its key path, a suggested free range,
and an empty value called empty."""

from __future__ import annotations

import pytest

from config import yaml_io
from config.errors import ConfigError
from config.stack import load_stack
from config.stack_files import read_stack_values
from shipped_stacks import problems, shipped_project

NS = "gpu-platform"


# --- tenants --------------------------------------------------------------------------------


def test_tenant_cross_checks_against_the_environment(stack_values):
    values = stack_values("dev")
    nlp = values[f"{NS}:tenants"][0]
    nlp["gpuPools"] = [
        {"gpu": "nvidia-tesla-a100", "maxGpus": 2},  # not offered in dev
        {"gpu": "nvidia-l4", "maxGpus": 6, "gpusPerNode": 4},  # 6 is not a multiple of 4
        {"gpu": "nvidia-l4", "maxGpus": 3, "gpusPerNode": 3},  # no 3-GPU L4 shape
        {"gpu": "nvidia-tesla-t4", "maxGpus": 16, "spot": True},  # above the quota of 8
        {"gpu": "nvidia-l4", "maxGpus": 2, "idleAfter": "soon"},
    ]
    found = problems(values)
    assert "tenants[0].gpuPools[0].gpu: 'nvidia-tesla-a100' is not offered by environment dev; offered: nvidia-tesla-t4, nvidia-l4" in found
    assert "tenants[0].gpuPools[1].maxGpus: 6 is not a multiple of gpusPerNode 4" in found
    assert "tenants[0].gpuPools[2].gpusPerNode: 3 is not a shape of nvidia-l4 in environment dev; shapes: 1, 2, 4, 8" in found
    assert (
        "tenants[0].gpuPools[3].maxGpus: 16 exceeds the environment's quota of 8 nvidia-tesla-t4 GPUs in europe-west4 "
        "(nodeProvider.gpuQuota and nodeProvider.preemptibleGpuQuota, which Spot and Flex-start draw on; one pool above it is an error "
        "whatever quotaPolicy says)"
    ) in found
    assert "tenants[0].gpuPools[4].idleAfter: 'soon' is not a duration like 60s, 10m or 1h30m" in found


def test_spot_pool_needs_spot_node_types(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["spot"] = False
    found = problems(values)
    assert "tenants[1].gpuPools[0].spot: environment dev offers no Spot node types (nodeProvider.spot is false)" in found


def test_tenant_names_and_networks_must_not_collide(stack_values):
    values = stack_values("dev")
    nlp, speech = values[f"{NS}:tenants"]
    speech["name"] = "nlp"
    speech["network"]["cidr"] = "10.160.2.0/24"  # inside nlp's 10.160.0.0/22
    found = problems(values)
    assert any(p.startswith("tenants[1].name: 'nlp' is already used by tenants[0]") for p in found), found
    assert any(p.startswith("tenants[1].network.cidr: 10.160.2.0/24 overlaps tenant nlp") for p in found), found


def test_tenant_network_must_avoid_gke_and_tenant_cluster_ranges(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["network"]["cidr"] = "10.4.0.0/22"
    values[f"{NS}:tenants"][1]["network"]["cidr"] = "10.244.8.0/22"
    found = problems(values)
    assert any(p.startswith("tenants[0].network.cidr: 10.4.0.0/22 overlaps the GKE pod range (cluster.network.podsCidr)") for p in found)
    assert any(p.startswith("tenants[1].network.cidr: 10.244.8.0/22 overlaps vCluster pod network") for p in found)
    # The message suggests a free range.
    assert all("; try 10." in p for p in found if ".network.cidr" in p)


def test_tenant_name_and_cpu_pool_limits(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["name"] = "computer-vision-research"
    values[f"{NS}:tenants"][0]["cpuPool"] = {"maxCpus": 1}
    found = problems(values)
    assert "tenants[0].name: 'computer-vision-research' must be a DNS-1123 label of at most 16 characters" in found
    assert "tenants[0].cpuPool.maxCpus: 1 is below the smallest CPU node type (2 vCPU): no node could start" in found


def test_tenant_keys_belong_to_tenant_stacks(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenant"] = {"name": "x"}
    assert any(p.startswith("tenant: belongs to a tenant stack") for p in problems(values))


def test_tenant_stack_rejects_environment_keys(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:nodeProvider"] = {"zones": ["europe-west4-a"]}
    assert any(p.startswith("nodeProvider: belongs to an environment stack") for p in problems(values, "team-vision-dev"))


def test_tenant_stack_is_checked_against_its_environment_file(stack_values):
    values = stack_values("team-vision-dev")
    tenant = values[f"{NS}:tenant"]
    tenant["name"] = "speech"  # an inline tenant of dev
    tenant["network"]["cidr"] = "10.160.0.0/24"  # inside nlp's range
    tenant["gpuPools"][0]["gpu"] = "nvidia-h100-80gb"
    values[f"{NS}:environment"] = "prod"
    found = problems(values, "team-vision-dev")
    assert "tenant.name: 'speech' is already used by tenants[1] of stack dev (Pulumi.dev.yaml)" in found
    assert any(p.startswith("tenant.network.cidr: 10.160.0.0/24 overlaps tenant nlp") for p in found)
    assert "tenant.gpuPools[0].gpu: 'nvidia-h100-80gb' is not offered by environment dev; offered: nvidia-tesla-t4, nvidia-l4" in found
    assert "environment: 'prod' differs from the environment stack's 'dev'" in found


def test_the_environment_checks_its_inline_tenants_against_the_team_stacks(tmp_path, stack_values):
    """Renaming dev's speech to vision (and giving it vision's range and project) fails dev's own
    plan, not only the already deployed team stack's; each side names its own key and the other's
    stack file."""
    import yaml

    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    document = yaml_io.load((project / "Pulumi.dev.yaml").read_text())
    speech = document["config"][f"{NS}:tenants"][1]
    speech.update(name="vision", isolation="project", gcpProject="acme-ml-dev-vision", network={"cidr": "10.160.8.0/23"})
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    team = "stack team-vision-dev (Pulumi.team-vision-dev.yaml)"
    with pytest.raises(ConfigError) as caught:
        load_stack(stack_values("dev") | {f"{NS}:tenants": document["config"][f"{NS}:tenants"]}, stack="dev", project_dir=project)
    assert [str(p) for p in caught.value.problems] == [
        f"tenants[1].name: 'vision' is already used by {team}",
        f"tenants[1].network.cidr: 10.160.8.0/23 overlaps tenant vision ({team}) 10.160.8.0/22; try 10.160.4.0/22",
        f"tenants[1].gcpProject: 'acme-ml-dev-vision' is already the project of tenant vision ({team}); each team needs a project of its own",
    ]
    inline = "tenants[1] of stack dev (Pulumi.dev.yaml)"
    with pytest.raises(ConfigError) as caught:
        load_stack(stack_values("team-vision-dev"), stack="team-vision-dev", project_dir=project)
    assert [str(p) for p in caught.value.problems] == [
        f"tenant.name: 'vision' is already used by {inline}",
        f"tenant.network.cidr: 10.160.8.0/22 overlaps tenant vision ({inline}) 10.160.8.0/23; try 10.160.4.0/22",
        f"tenant.gcpProject: 'acme-ml-dev-vision' is already the project of tenant vision ({inline}); each team needs a project of its own",
    ]


def test_a_broken_team_stack_is_no_problem_of_the_environment(tmp_path, stack_values):
    """A team stack that does not parse is reported by its own plan; the environment compares its
    tenants with what parsed, and every other team stack still loads its environment."""
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    (project / "Pulumi.team-maps-dev.yaml").write_text(
        "config:\n  gpu-platform:environment: dev\n  gpu-platform:environmentStack: acme/gpu-platform/dev\n"
        "  gpu-platform:tenant: {name: maps, network: {cidr: 10.160.16.1/22}, gpuPools: []}\n"
    )
    load_stack(stack_values("dev"), stack="dev", project_dir=project)
    load_stack(stack_values("team-vision-dev"), stack="team-vision-dev", project_dir=project)
    with pytest.raises(ConfigError) as caught:
        load_stack(read_stack_values(project, "team-maps-dev"), stack="team-maps-dev", project_dir=project)
    assert "tenant.network.cidr: '10.160.16.1/22' is malformed" in str(caught.value)


@pytest.mark.parametrize("index", [0, 1])
def test_a_suggested_cidr_is_clear_of_every_valid_range_claimed_anywhere(stack_values, index):
    """The first tenant's suggestion used to ignore the tenants after it: with tenants[1] at
    10.160.0.0/23 it suggested 10.160.0.0/22, overlapping it. Suggestions now keep clear of every
    inline tenant and every team stack (vision: 10.160.8.0/22)."""
    import ipaddress

    values = stack_values("dev")
    tenants = values[f"{NS}:tenants"]
    tenants[index]["network"]["cidr"] = "10.4.0.0/22"  # the GKE pod range
    tenants[1 - index]["network"]["cidr"] = "10.160.0.0/23"
    [message] = problems(values)
    assert message.startswith(f"tenants[{index}].network.cidr: 10.4.0.0/22 overlaps the GKE pod range")
    suggested = ipaddress.ip_network(message.rsplit("; try ", 1)[1])
    taken = ["10.160.0.0/23", "10.160.8.0/22", "10.0.0.0/20", "10.4.0.0/14", "10.8.0.0/20", "172.16.0.0/28", "10.244.0.0/16", "10.96.0.0/12"]
    assert not [t for t in taken if suggested.overlaps(ipaddress.ip_network(t))]
    assert str(suggested) == "10.160.4.0/22"


def test_an_empty_value_is_called_empty(tmp_path):
    """A key left blank in YAML (`maxGpus:`) reached the messages as Python's None."""
    import yaml

    from tools.mock_engine import config_strings

    project = shipped_project(tmp_path / "project", ["dev"])
    text = (project / "Pulumi.dev.yaml").read_text()
    text = text.replace("{gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s}", "{gpu: nvidia-l4, maxGpus: , idleAfter: 60s}")
    text = text.replace("gpuQuota: {nvidia-tesla-t4: 8, nvidia-l4: 8}", "gpuQuota: {nvidia-tesla-t4: 8, nvidia-l4: }")
    text = text.replace("    - name: speech\n", "    - name:\n").replace("  gpu-platform:environment: dev\n", "  gpu-platform:environment:\n")
    (project / "Pulumi.dev.yaml").write_text(text)
    assert yaml.safe_load(text)["config"]["gpu-platform:environment"] is None
    # As the plan and the engine hand the values over (config_strings), and as read from the file.
    for values in (config_strings(read_stack_values(project, "dev"))[0], read_stack_values(project, "dev")):
        with pytest.raises(ConfigError) as caught:
            load_stack(values, stack="dev", project_dir=project)
        found = [str(p) for p in caught.value.problems]
        assert found == [
            "environment: an empty value is not allowed; allowed: dev, staging, prod",
            "nodeProvider.gpuQuota.nvidia-l4: an empty value is not a whole number",
            "tenants[0].gpuPools[0].maxGpus: an empty value is not a whole number",
            "tenants[1].name: expected a string, got an empty value",
        ]
        assert "None" not in str(caught.value)


def test_tenant_stack_needs_its_environment_stack_file(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:environmentStack"] = "acme/gpu-platform/staging"
    [message] = problems(values, "team-vision-dev")
    assert message.startswith("environmentStack: acme/gpu-platform/staging: tenant stacks are checked against the environment's stack file")
    values[f"{NS}:environmentStack"] = "dev"
    assert problems(values, "team-vision-dev") == [
        "environmentStack: 'dev' must be a fully qualified stack name <org>/<project>/<stack>"
    ]
