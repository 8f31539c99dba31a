"""Bad configuration: every problem reported at once, each naming its key path and what is allowed,
and nothing registered."""

from __future__ import annotations

import pulumi
import pytest

from config.errors import ConfigError
from config.stack import load_stack
from config.stack_files import PROJECT_DIR
from tools.mock_engine import run_program

NS = "gpu-platform"


def problems(values: dict, stack: str = "dev") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack=stack, project_dir=PROJECT_DIR)
    return [str(p) for p in caught.value.problems]


def test_committed_stacks_are_valid(stack_values):
    for stack in ("dev", "prod", "team-vision-dev"):
        load_stack(stack_values(stack), stack=stack, project_dir=PROJECT_DIR)


def test_environment_must_be_known(stack_values):
    values = stack_values("dev")
    values[f"{NS}:environment"] = "qa"
    assert "environment: 'qa' is not allowed; allowed: dev, staging, prod" in problems(values)


def test_zone_outside_region(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west4-a", "europe-west1-b"]
    assert "nodeProvider.zones[1]: 'europe-west1-b' is not in region europe-west4" in problems(values)


def test_unknown_gpu_type_lists_known_ones(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["gpuTypes"] = ["nvidia-tesla-k80", "nvidia-l4"]
    found = problems(values)
    message = next(p for p in found if p.startswith("nodeProvider.gpuTypes[0]"))
    assert "'nvidia-tesla-k80' is not offered; known: " in message
    assert "nvidia-tesla-t4" in message and "nvidia-h100-80gb" in message


def test_gpu_type_needs_a_quota(stack_values):
    values = stack_values("dev")
    del values[f"{NS}:nodeProvider"]["gpuQuota"]["nvidia-l4"]
    [message] = [p for p in problems(values) if "gpuQuota" in p]
    assert message.startswith("nodeProvider.gpuQuota.nvidia-l4: missing; set it to the project's nvidia-l4 quota in europe-west4")


def test_quota_below_smallest_shape(stack_values):
    values = stack_values("prod")
    values[f"{NS}:nodeProvider"]["gpuQuota"]["nvidia-h100-80gb"] = 4
    assert (
        "nodeProvider.gpuQuota.nvidia-h100-80gb: 4 is below the smallest nvidia-h100-80gb shape (8 GPUs): no node type could start"
        in problems(values, "prod")
    )


def test_prod_keeps_a_stable_channel(stack_values):
    values = stack_values("prod")
    values[f"{NS}:cluster"].update(releaseChannel="RAPID")
    assert "cluster.releaseChannel: RAPID is not allowed in prod; allowed: REGULAR, STABLE" in problems(values, "prod")


def test_lifting_prod_deletion_protection_is_allowed_but_warned(stack_values):
    values = stack_values("prod")
    values[f"{NS}:cluster"]["deletionProtection"] = False
    run = run_program(values, stack="prod")
    cluster = run.one("gcp:container/cluster:Cluster")
    assert cluster.input("deletionProtection") is False and not cluster.protect
    [warning] = run.warnings
    assert warning.startswith("cluster.deletionProtection is false in prod")


def test_unknown_keys_are_named_with_the_allowed_ones(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["sytemPool"] = {"minNodes": 1}
    values[f"{NS}:tenat"] = {"name": "x"}
    found = problems(values)
    [typo] = [p for p in found if p.startswith("cluster.sytemPool")]
    assert "unknown key; allowed:" in typo and "systemPool" in typo
    [top] = [p for p in found if p.startswith("tenat")]
    assert "unknown key; known:" in top and "tenants" in top


def test_wrong_types_are_explained(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["systemPool"]["minNodes"] = "two"
    values[f"{NS}:nodeProvider"]["spot"] = "sometimes"
    found = problems(values)
    assert "cluster.systemPool.minNodes: 'two' is not a whole number" in found
    assert "nodeProvider.spot: 'sometimes' is not true or false" in found


def test_overlapping_cluster_ranges(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["network"] = {"nodesCidr": "10.0.0.0/20", "podsCidr": "10.0.0.0/14"}
    found = problems(values)
    assert any(p.startswith("cluster.network.podsCidr: 10.0.0.0/14 overlaps cluster.network.nodesCidr") for p in found), found


def test_maintenance_window_below_gke_minimum(stack_values):
    values = stack_values("prod")
    values[f"{NS}:cluster"]["maintenanceWindow"] = {"startTime": "02:00", "durationHours": 4, "days": ["SA", "SU"]}
    assert (
        "cluster.maintenanceWindow: gives about 37 h per 32 days; GKE needs at least 48 h (add days or lengthen durationHours)"
        in problems(values, "prod")
    )


def test_platform_versions_are_checked(stack_values):
    values = stack_values("dev")
    values[f"{NS}:platform"] = {"chartVersion": "4.8.0"}
    assert any(p.startswith("platform.chartVersion: 4.8.0 predates admin.passwordSecretRef") for p in problems(values))
    values[f"{NS}:platform"] = {"chartVersion": "4.10.2", "vclusterVersion": "0.36.1"}
    assert any(p.startswith("platform.vclusterVersion: 0.36.1 is not managed by platform 4.10.2") for p in problems(values))


def test_license_token_key_must_name_a_set_secret(stack_values):
    values = stack_values("dev")
    values[f"{NS}:platform"] = {"licenseTokenKey": "vclusterLicenseToken"}
    assert (
        "platform.licenseTokenKey: names 'vclusterLicenseToken', which is not set; pulumi config set --secret vclusterLicenseToken <token>"
        in problems(values)
    )


def test_environment_stack_needs_project_and_region(stack_values):
    values = stack_values("dev")
    del values["gcp:project"], values["gcp:region"]
    found = problems(values)
    assert any(p.startswith("gcp:project: required for an environment stack") for p in found)
    assert any(p.startswith("gcp:region: required for an environment stack") for p in found)


def test_all_problems_are_reported_together(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["us-east1-b"]
    values[f"{NS}:nodeProvider"]["gpuTypes"] = ["nvidia-tesla-k80"]
    values[f"{NS}:cluster"]["systemPool"]["minNodes"] = -1
    values[f"{NS}:tenants"][0]["name"] = "Not_A_Label"
    found = problems(values)
    paths = {p.split(":")[0] for p in found}
    assert {"nodeProvider.zones[0]", "nodeProvider.gpuTypes[0]", "cluster.systemPool.minNodes"} <= paths
    # Tenants are checked once the environment is sound; their structural errors still come now.
    assert len(found) >= 3


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
    assert "tenants[0].gpuPools[3].maxGpus: 16 exceeds the environment's quota of 8 nvidia-tesla-t4 GPUs in europe-west4" in found
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
    assert "tenant.name: 'speech' is already used by the environment's tenants" in found
    assert any(p.startswith("tenant.network.cidr: 10.160.0.0/24 overlaps tenant nlp") for p in found)
    assert "tenant.gpuPools[0].gpu: 'nvidia-h100-80gb' is not offered by environment dev; offered: nvidia-tesla-t4, nvidia-l4" in found
    assert "environment: 'prod' differs from the environment stack's 'dev'" in found


def test_tenant_stack_needs_its_environment_stack_file(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:environmentStack"] = "acme/gpu-platform/staging"
    [message] = problems(values, "team-vision-dev")
    assert message.startswith("environmentStack: acme/gpu-platform/staging: tenant stacks are checked against the environment's stack file")
    values[f"{NS}:environmentStack"] = "dev"
    assert problems(values, "team-vision-dev") == [
        "environmentStack: 'dev' must be a fully qualified stack name <org>/<project>/<stack>"
    ]


# --- nothing is registered ------------------------------------------------------------------


def test_bad_config_registers_nothing(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west1-b"]
    values[f"{NS}:tenants"][0]["gpuPools"][0]["maxGpus"] = 0
    with pytest.raises(pulumi.RunError) as caught:
        run_program(values, stack="dev")
    message = str(caught.value)
    assert message.startswith("2 configuration problems in stack 'dev'; nothing was created:")
    assert "nodeProvider.zones[0]: 'europe-west1-b' is not in region europe-west4" in message
    assert "tenants[0].gpuPools[0].maxGpus: 0 is out of range; must be at least 1" in message
    assert caught.value.registrations == []


def test_tenants_wait_for_a_sound_environment_and_say_so(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["us-east1-b"]
    values[f"{NS}:tenants"][0]["gpuPools"][0]["maxGpus"] = 40  # above quota, only checkable later
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=PROJECT_DIR)
    assert [str(p) for p in caught.value.problems] == ["nodeProvider.zones[0]: 'us-east1-b' is not in region europe-west4"]
    assert caught.value.notes == [
        "tenants were checked for structure only; they are checked against the environment once its own problems are fixed"
    ]
    assert str(caught.value).endswith("  Note: " + caught.value.notes[0])


def test_a_key_given_twice_in_a_stack_file_is_refused(tmp_path):
    from config.stack_files import StackFileError, read_stack_values

    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text(
        "config:\n  gpu-platform:environment: dev\n  gpu-platform:tenants: []\n  gpu-platform:environment: prod\n"
    )
    with pytest.raises(StackFileError) as caught:
        read_stack_values(tmp_path, "x")
    assert "Pulumi.x.yaml: not valid YAML" in str(caught.value)
    assert "duplicate key 'gpu-platform:environment'" in str(caught.value)
