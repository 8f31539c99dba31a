"""Bad configuration: every problem reported at once, each naming its key path and what is allowed,
and nothing registered."""

from __future__ import annotations

import pytest

from config import yaml_io
from config.errors import ConfigError
from config.stack import load_stack
from config.stack_files import PROJECT_DIR, read_stack_values
from shipped_stacks import SHIPPED_DIR, problems, refused, run_shipped, shipped_project

NS = "gpu-platform"


def test_committed_stacks_are_valid(stack_values):
    for stack in ("dev", "prod", "team-vision-dev"):
        load_stack(stack_values(stack), stack=stack, project_dir=SHIPPED_DIR)


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
    run = run_shipped(values, stack="prod")
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


# --- the platform admin password -------------------------------------------------------------

PASSWORD = f"{NS}:platformAdminPassword"
REFUSED = (
    "platformAdminPassword: is no longer read: a Pulumi secret is decrypted by every preview of the stack (dev's run for every "
    "pull request), so it would give every branch the platform's admin login; the program creates the password inside the "
    "cluster instead, in Secret vcluster-platform-admin-password of namespace vcluster-platform "
    "(docs/deploy.md \"The platform's admin login\" says how to read it); remove the key: pulumi config rm platformAdminPassword"
)


@pytest.mark.parametrize("value", [5, {"a": 1}, ["hunter2hunter2hunter2"], "x", "correct-horse-battery-staple"])
@pytest.mark.parametrize("stack", ["dev", "team-vision-dev"])
def test_an_admin_password_is_refused_whatever_it_is(stack_values, stack, value):
    values = stack_values(stack)
    values[PASSWORD] = value
    assert problems(values, stack) == [REFUSED]


def test_an_encrypted_admin_password_is_refused_too(stack_values):
    """A `secure:` value is still a Pulumi secret: every preview decrypts it."""
    from config.stack_files import SecureValue

    values = stack_values("dev")
    values[PASSWORD] = SecureValue("v1:encrypted")
    assert problems(values) == [REFUSED]
    values[PASSWORD] = ""  # a key left blank is no password
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


def test_a_plaintext_admin_password_is_reported_beside_every_other_problem(stack_values):
    """Through the program: the password's problem with the other keys' problems, even those that
    stop other checks (a broken environment, a broken nodeProvider), the value nowhere in the
    error, and nothing registered."""
    values = stack_values("dev")
    values[PASSWORD] = "hunter2"  # in plain text in the stack file, not `secure:`
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west1-b"]
    values[f"{NS}:environment"] = "qa"
    message = refused(values, stack="dev")
    assert REFUSED in message
    assert "nodeProvider.zones[0]: 'europe-west1-b' is not in region europe-west4" in message
    assert "environment: 'qa' is not allowed; allowed: dev, staging, prod" in message
    assert "hunter2" not in message
    values[f"{NS}:nodeProvider"] = "broken"
    assert REFUSED in problems(values)


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


# --- every problem at once, never a traceback ---------------------------------------------------


@pytest.mark.parametrize("index", [0, 1])
def test_a_cidr_with_host_bits_is_malformed_and_the_network_is_suggested(stack_values, index):
    """Issue 13: in the first tenant this was an internal error, in the last "not a private CIDR"."""
    values = stack_values("dev")
    cidr = values[f"{NS}:tenants"][index]["network"]["cidr"]  # 10.160.0.0/22, 10.160.4.0/22
    values[f"{NS}:tenants"][index]["network"]["cidr"] = cidr.replace(".0/22", ".1/22")
    assert problems(values) == [f"tenants[{index}].network.cidr: {cidr.replace('.0/22', '.1/22')!r} is malformed: host bits are set; did you mean {cidr}?"]


def test_a_malformed_cidr_is_not_used_to_judge_other_tenants(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["network"]["cidr"] = "10.160.0.1/22"
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [p.path for p in caught.value.problems] == ["tenants[0].network.cidr"]
    assert caught.value.notes == ["not checked against tenants[0].network.cidr until it is fixed: tenants[1].network.cidr"]


def test_every_bad_value_of_one_tenant_at_once(stack_values):
    """Issue 13: four bad values in one tenant used to come one at a time. Types, syntax and checks
    against the environment and the other tenants all come together, grouped by key."""
    values = stack_values("dev")
    speech = values[f"{NS}:tenants"][1]
    speech["name"] = "Speech"
    speech["network"]["cidr"] = "10.160.0.1/22"
    speech["gpuPools"] = [
        {"gpu": "nvidia-tesla-t4", "maxGpus": "four", "idleAfter": "soon"},  # a type error and a bad duration
        {"gpu": "nvidia-h100-80gb", "maxGpus": 8},  # not offered in dev
        {"gpu": "nvidia-l4", "maxGpus": 16},  # above the quota of 8
    ]
    speech["cpuPool"] = {"maxCpus": 1}
    speech["access"] = {"users": [" alice"], "teams": "speech"}
    speech["gpuOperator"] = {"version": "latest"}
    values[f"{NS}:tenants"].append({"name": "nlp", "isolation": "shared", "network": {"cidr": "10.160.2.0/23"}, "gpuPools": [{"gpu": "nvidia-l4", "maxGpus": 2}]})
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [
        "tenants[1].gpuPools[0].maxGpus: 'four' is not a whole number",
        "tenants[1].gpuPools[0].idleAfter: 'soon' is not a duration like 60s, 10m or 1h30m",
        "tenants[1].gpuPools[1].gpu: 'nvidia-h100-80gb' is not offered by environment dev; offered: nvidia-tesla-t4, nvidia-l4",
        "tenants[1].gpuPools[2].maxGpus: 16 exceeds the environment's quota of 8 nvidia-l4 GPUs in europe-west4 "
        "(nodeProvider.gpuQuota; one pool above it is an error whatever quotaPolicy says)",
        "tenants[1].access.teams: expected a list, got a string",
        "tenants[1].access.users[0]: ' alice' is not a platform user name; allowed: a Kubernetes object name, at most 253 lowercase "
        "letters, digits, '-' and '.', starting and ending with a letter or digit",
        "tenants[1].name: 'Speech' must be a DNS-1123 label of at most 16 characters",
        "tenants[1].network.cidr: '10.160.0.1/22' is malformed: host bits are set; did you mean 10.160.0.0/22?",
        "tenants[1].cpuPool.maxCpus: 1 is below the smallest CPU node type (2 vCPU): no node could start",
        "tenants[1].gpuOperator.version: 'latest' is not a pinned release like v25.10.1",
        "tenants[2].name: 'nlp' is already used by tenants[0]",
        "tenants[2].network.cidr: 10.160.2.0/23 overlaps tenant nlp (tenants[0]) 10.160.0.0/22; try 10.160.4.0/22",
    ]
    # tenants[1]'s CIDR is malformed: tenants[2] was not compared with it, and the error says so.
    assert caught.value.notes == ["not checked against tenants[1].network.cidr until it is fixed: tenants[2].network.cidr"]


def test_environment_sections_are_checked_independently(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["name"] = "GPU Dev"
    values[f"{NS}:cluster"]["systemPool"]["minNodes"] = "one"
    values[f"{NS}:cluster"]["network"] = {"podsCidr": "10.4.0.1/14"}
    values[f"{NS}:platform"].update({"roleIdPrefix": "x", "chartVersion": 4.11})
    values[f"{NS}:nodeProvider"]["gpuQuota"]["nvidia-l4"] = "eight"
    values[f"{NS}:tenants"][0]["network"]["cidr"] = "10.0.0.0/22"  # inside the GKE node subnet
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [
        "cluster.systemPool.minNodes: 'one' is not a whole number",
        "cluster.name: 'GPU Dev' must be a lowercase DNS label of at most 24 characters",
        "cluster.network.podsCidr: '10.4.0.1/14' is malformed: host bits are set; did you mean 10.4.0.0/14?",
        "platform.chartVersion: expected a string, got a number",
        "platform.roleIdPrefix: 'x' must be 3–40 characters of [a-zA-Z0-9_.]",
        "nodeProvider.gpuQuota.nvidia-l4: 'eight' is not a whole number",
        # Still checked against the node subnet, which is sound; the pod range and pools wait (notes).
        "tenants[0].network.cidr: 10.0.0.0/22 overlaps the GKE node subnet (cluster.network.nodesCidr) 10.0.0.0/20; try 10.160.0.0/22",
    ]
    assert caught.value.notes == [
        "not checked against cluster.network.podsCidr until it is fixed: tenants[0].network.cidr, tenants[1].network.cidr",
        "not checked against nodeProvider until it is fixed: tenants[0].gpuPools[0], tenants[0].cpuPool, tenants[1].gpuPools[0], tenants[1].cpuPool",
    ]


def test_a_tenant_stack_without_its_environment_is_still_checked_on_its_own(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:environmentStack"] = "acme/gpu-platform/staging"  # no Pulumi.staging.yaml here
    values[f"{NS}:tenant"]["name"] = "Vision"
    values[f"{NS}:tenant"]["gpuPools"][0]["idleAfter"] = "5 minutes"
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="team-vision-dev", project_dir=SHIPPED_DIR)
    assert [p.path for p in caught.value.problems] == ["environmentStack", "tenant.name", "tenant.gpuPools[0].idleAfter"]
    assert caught.value.notes == [
        "not checked against environmentStack until it is fixed: "
        "tenant.name, tenant.network.cidr, tenant.isolation, tenant.controlPlane, tenant.loadBalancerServices, tenant.nodeMetadata, "
        "tenant.podSecurityStandard, tenant.gpuPools[0], tenant.gpuPools[1], tenant.cpuPool"
    ]


def test_a_value_that_fits_no_member_of_a_union_is_named_by_its_key():
    """A key that takes one of several forms (a string or a mapping) is reported at its own path,
    never at pydantic's member names (`project.str`, `project.Spec.id`)."""
    from config.base import ConfigModel, parse
    from config.errors import Problems

    class Spec(ConfigModel):
        id: str
        create: bool = False

    class Holder(ConfigModel):
        project: str | Spec | None = None

    found = Problems()
    for i, raw in enumerate([{"project": 5}, {"project": {"id": 5, "crate": True}}]):
        parse(f"t[{i}]", Holder, raw, found)
    assert [str(p) for p in found.items] == [
        "t[0].project: 5 is not allowed; allowed: a string or a mapping with keys id, create",
        "t[1].project.id: expected a string, got a number",
        "t[1].project.crate: unknown key; allowed: create, id",
    ]


# --- nothing is registered ------------------------------------------------------------------


def test_bad_config_registers_nothing(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west1-b"]
    values[f"{NS}:tenants"][0]["gpuPools"][0]["maxGpus"] = 0
    message = refused(values, stack="dev")
    assert message.startswith("2 configuration problems in stack 'dev'; nothing was created:")
    assert "nodeProvider.zones[0]: 'europe-west1-b' is not in region europe-west4" in message
    assert "tenants[0].gpuPools[0].maxGpus: 0 is out of range; must be at least 1" in message


def test_checks_that_need_a_broken_section_wait_and_say_so(stack_values):
    values = stack_values("dev")
    values[f"{NS}:nodeProvider"]["zones"] = ["us-east1-b"]
    values[f"{NS}:tenants"][0]["gpuPools"][0]["maxGpus"] = 40  # above quota: needs the node provider
    values[f"{NS}:tenants"][1]["name"] = "Speech"  # needs nothing from the environment
    with pytest.raises(ConfigError) as caught:
        load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert [str(p) for p in caught.value.problems] == [
        "nodeProvider.zones[0]: 'us-east1-b' is not in region europe-west4",
        "tenants[1].name: 'Speech' must be a DNS-1123 label of at most 16 characters",
    ]
    assert caught.value.notes == [
        # Which GPU types the zones offer, and how long node-type names get, wait for the zones.
        "not checked against nodeProvider.zones until it is fixed: nodeProvider.gpuTypes, nodeProvider.name",
        "not checked against nodeProvider until it is fixed: "
        "tenants[0].gpuPools[0], tenants[0].cpuPool, tenants[1].gpuPools[0], tenants[1].cpuPool",
    ]
    assert str(caught.value).endswith("  Note: " + caught.value.notes[-1])


def test_a_key_given_twice_in_a_stack_file_is_refused(tmp_path):
    from config.stack_files import StackFileError, read_stack_values

    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text(
        "config:\n  gpu-platform:environment: dev\n  gpu-platform:platformAdminPassword: Hunter2-a\n"
        "  gpu-platform:tenants: []\n  gpu-platform:platformAdminPassword: Hunter2-b\n"
    )
    with pytest.raises(StackFileError) as caught:
        read_stack_values(tmp_path, "x")
    # Where, never the lines around it (PyYAML's own message quotes them): a value may be a secret.
    assert str(caught.value) == "Pulumi.x.yaml: not valid YAML: duplicate key 'gpu-platform:platformAdminPassword' (line 5, column 3)"


# --- isolation: each team's project ------------------------------------------------------------


def test_shared_tenants_in_prod_need_the_override(stack_values):
    values = stack_values("prod")
    values[f"{NS}:tenants"][0]["isolation"] = "shared"
    message, approval = problems(values, "prod")
    assert message.startswith("tenants[0].isolation: shared is not allowed in environment prod:")
    assert "platform.allowSharedIsolation: true" in message and "isolation: project" in message
    # ... and the team's own approval, as every setting beyond the safe ones in prod.
    assert approval == (
        "tenants[0].isolation: shared needs the environment's approval in prod: set platform.approvedTenantSecurity.research.isolation: "
        "shared in the environment stack (a change its reviewers approve), or keep project"
    )
    values[f"{NS}:platform"]["allowSharedIsolation"] = True
    assert problems(values, "prod") == [approval]
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {"research": {"isolation": "shared"}}
    env = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    [warning] = env.warnings
    assert warning.startswith("tenants[0] (research) uses isolation: shared: its VMs, network and node identity live in the environment's project acme-ml-prod")


def test_a_shared_tenant_names_no_project(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gcpProject"] = "acme-ml-dev-nlp"
    [message] = problems(values)
    assert message.startswith("tenants[0].gcpProject: must not be set with isolation: shared")


def test_project_mode_needs_a_project(stack_values):
    values = stack_values("dev")
    del values[f"{NS}:tenants"][0]["isolation"]  # the default: project
    [message] = problems(values)
    assert message.startswith("tenants[0].gcpProject: required with isolation: project:")
    assert "gcpProject: <project-id>" in message and "platform.tenantProjects" in message and "isolation: shared" in message


@pytest.mark.parametrize(
    "project, expected",
    [
        ("Acme_ML", "tenants[0].gcpProject: 'Acme_ML' is not a GCP project id: 6–30 characters of lowercase letters, digits and hyphens"),
        ("ml", "tenants[0].gcpProject: 'ml' is not a GCP project id"),
        ("acme-ml-dev-nlp-", "tenants[0].gcpProject: 'acme-ml-dev-nlp-' is not a GCP project id"),
        ("my-google-team", "tenants[0].gcpProject: 'my-google-team' contains 'google', which project ids may not contain"),
    ],
)
def test_malformed_project_ids(stack_values, project, expected):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0].update(isolation="project", gcpProject=project)
    [message] = problems(values)
    assert message.startswith(expected)


def test_the_host_project_is_no_tenant_project(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0].update(isolation="project", gcpProject="acme-ml-dev")
    [message] = problems(values)
    assert message.startswith("tenants[0].gcpProject: 'acme-ml-dev' is the environment's own project (gcp:project)")


def test_two_tenants_cannot_share_a_project(stack_values):
    values = stack_values("dev")
    for tenant in values[f"{NS}:tenants"]:
        tenant.update(isolation="project", gcpProject="acme-ml-dev-ml")
    [message] = problems(values)
    assert message == "tenants[1].gcpProject: 'acme-ml-dev-ml' is already the project of tenant nlp (tenants[0]); each team needs a project of its own"


def test_a_team_stack_cannot_take_another_teams_project(tmp_path, stack_values):
    import yaml

    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])
    other = yaml_io.load((SHIPPED_DIR / "Pulumi.team-vision-dev.yaml").read_text())
    other["config"]["gpu-platform:tenant"].update(name="audio", network={"cidr": "10.160.12.0/22"})
    (project / "Pulumi.team-audio-dev.yaml").write_text(yaml.safe_dump(other))
    with pytest.raises(ConfigError) as caught:
        load_stack(stack_values("team-vision-dev"), stack="team-vision-dev", project_dir=project)
    assert [str(p) for p in caught.value.problems] == [
        "tenant.gcpProject: 'acme-ml-dev-vision' is already the project of tenant audio (stack team-audio-dev (Pulumi.team-audio-dev.yaml)); "
        "each team needs a project of its own"
    ]


def test_creating_a_project_needs_tenant_projects(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0].update(isolation="project", gcpProject={"id": "acme-ml-dev-nlp", "create": True})
    [message] = problems(values)
    assert message.startswith("tenants[0].gcpProject.create: Pulumi creates projects only under platform.tenantProjects {folder, billingAccount, prefix}")


def test_tenant_projects_needs_folder_and_billing_account(stack_values):
    values = stack_values("prod")
    del values[f"{NS}:platform"]["tenantProjects"]["billingAccount"]
    values[f"{NS}:platform"]["tenantProjects"]["folder"] = "acme-folder"
    assert problems(values, "prod") == [
        "platform.tenantProjects.billingAccount: required: the Cloud Billing account Pulumi links each team project it creates to, "
        "XXXXXX-XXXXXX-XXXXXX (`gcloud billing accounts list`); whoever runs pulumi up needs roles/billing.user on it",
        "platform.tenantProjects.folder: 'acme-folder' is not a folder; allowed: folders/<number> or the number, e.g. folders/123456789012",
    ]
    values[f"{NS}:platform"]["tenantProjects"]["billingAccount"] = "0123-4567"
    found = problems(values, "prod")
    assert "platform.tenantProjects.folder: 'acme-folder' is not a folder; allowed: folders/<number> or the number, e.g. folders/123456789012" in found
    assert any(p.startswith("platform.tenantProjects.billingAccount: '0123-4567' is not a billing account id; allowed: XXXXXX-XXXXXX-XXXXXX") for p in found)


def test_a_missing_tenant_projects_key_says_what_it_is_for(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"]["tenantProjects"] = {}
    assert problems(values, "prod") == [
        "platform.tenantProjects.folder: required: the folder Pulumi creates the teams' projects in, folders/<number> or the number "
        "(`gcloud resource-manager folders list`); whoever runs pulumi up needs roles/resourcemanager.projectCreator on it",
        "platform.tenantProjects.billingAccount: required: the Cloud Billing account Pulumi links each team project it creates to, "
        "XXXXXX-XXXXXX-XXXXXX (`gcloud billing accounts list`); whoever runs pulumi up needs roles/billing.user on it",
        "platform.tenantProjects.prefix: required: the start of the ids of the projects Pulumi creates, <prefix>-<environment>-<team> "
        "(lowercase letters, digits and hyphens, starting with a letter)",
    ]


def test_a_missing_key_says_what_it_is_for_in_its_docstrings_words(stack_values):
    from config.tenant import TenantNetwork

    values = stack_values("dev")
    del values[f"{NS}:tenants"][0]["network"]["cidr"]
    docstring = TenantNetwork.model_fields["cidr"].description
    assert docstring.startswith("The node subnet, ") and docstring.endswith(".")
    assert problems(values) == ["tenants[0].network.cidr: required: t" + docstring[1:-1]]


def test_the_project_prefix_must_leave_room_for_every_team_name(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"]["tenantProjects"]["prefix"] = "acme-research"
    [message] = problems(values, "prod")
    assert message == (
        "platform.tenantProjects.prefix: 'acme-research' is too long: project ids <prefix>-prod-<team> have at most 30 characters "
        "and team names up to 16, so the prefix may have at most 8 in environment prod"
    )


def test_a_generated_project_id_that_is_refused_says_how_to_choose_one(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"]["tenantProjects"]["prefix"] = "google"
    [message] = problems(values, "prod")
    assert message.startswith("tenants[0].gcpProject: the generated project id 'google-prod-research' (platform.tenantProjects.prefix-prod-research) contains 'google'")
    assert "reserved for 30 days" in message and "gcpProject: {id: <project-id>, create: true}" in message


def test_project_mode_is_refused_in_legacy_mode(stack_values):
    values = stack_values("team-vision-dev")
    dev = stack_values("dev")
    dev[f"{NS}:nodeProvider"]["legacyInfrastructure"] = True
    dev[f"{NS}:tenants"][0].update(isolation="project", gcpProject="acme-ml-dev-nlp")
    [message] = problems(dev)
    assert message.startswith("tenants[0].isolation: project needs nodeProvider.legacyInfrastructure: false")
    del values  # the team stack is checked against dev's file, which stays as committed


def test_control_plane_resources_are_quantities(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["controlPlane"] = {"requests": {"cpu": "lots", "memory": "8Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert problems(values) == [
        "tenants[0].controlPlane.requests.cpu: 'lots' is not a Kubernetes quantity like 500m or 2",
        "tenants[0].controlPlane.requests.memory: 8Gi is above limits.memory 4Gi",
    ]


def test_control_plane_values_are_checked_against_the_defaults_they_keep(stack_values):
    """Only requests.cpu set: it is checked against the default limit it is merged with."""
    values = stack_values("dev")
    values[f"{NS}:tenants"][1]["controlPlane"] = {"requests": {"cpu": "3"}}
    assert problems(values) == ["tenants[1].controlPlane.requests.cpu: 3 is above limits.cpu 2"]


def test_default_is_no_team_name(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["name"] = "default"
    assert "tenants[0].name: 'default' is the vCluster Platform's own default project; each team gets a platform project named after it" in problems(values)


def test_isolation_problems_come_together_and_register_nothing(stack_values):
    values = stack_values("prod")
    # Research's pool of its reserved H100 slice stays with research (and the reservation with it).
    values[f"{NS}:nodeProvider"].pop("reservations")
    values[f"{NS}:tenants"][0]["gpuPools"] = [p for p in values[f"{NS}:tenants"][0]["gpuPools"] if "capacity" not in p]
    values[f"{NS}:tenants"] = [
        {**values[f"{NS}:tenants"][0], "isolation": "shared"},
        {**values[f"{NS}:tenants"][0], "name": "vision", "gcpProject": "acme-ml-prod", "network": {"cidr": "10.160.4.0/22"}},
        {**values[f"{NS}:tenants"][0], "name": "audio", "gcpProject": "Audio!", "network": {"cidr": "10.160.8.0/22"}},
    ]
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {"research": {"isolation": "shared"}}
    values[f"{NS}:platform"]["allowSharedWithProjectTenants"] = True
    message = refused(values, stack="prod")
    assert message.startswith("3 configuration problems in stack 'prod'; nothing was created:")
    for path in ("tenants[0].isolation", "tenants[1].gcpProject: 'acme-ml-prod' is the environment's own project", "tenants[2].gcpProject: 'Audio!'"):
        assert f"  - {path}" in message


def test_shared_tenants_names_keep_their_vms_apart(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][1]["name"] = "nlp-audio"
    [message] = problems(values)
    assert message.startswith("tenants[1].name: 'nlp-audio' and 'nlp' (tenants[0]) both share the environment's project")
    values[f"{NS}:tenants"][1].update(isolation="project", gcpProject="acme-ml-dev-audio")
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)  # in a project of its own: fine


def test_legacy_mode_in_prod_needs_shared_tenants_and_the_override(stack_values):
    """docs/configuration.md "Configuration reference" (`legacyInfrastructure`): every tenant shared, which prod
    allows only with platform.allowSharedIsolation: true."""
    values = stack_values("prod")
    values[f"{NS}:nodeProvider"]["legacyInfrastructure"] = True
    [message] = problems(values, "prod")
    assert message.startswith("tenants[0].isolation: project needs nodeProvider.legacyInfrastructure: false")
    values[f"{NS}:tenants"][0]["isolation"] = "shared"
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {"research": {"isolation": "shared"}}
    [message] = problems(values, "prod")
    assert message.startswith("tenants[0].isolation:") and "platform.allowSharedIsolation: true" in message
    values[f"{NS}:platform"]["allowSharedIsolation"] = True
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)


@pytest.mark.parametrize("account", ["dev-x-nodes", "gpu-ci-dev-platform"])
def test_the_platform_account_is_never_named_like_a_node_or_ci_account(stack_values, account):
    """The policy pack tells the platform's grants from node and CI grants by their accounts' names."""
    values = stack_values("dev")
    values[f"{NS}:platform"]["serviceAccountId"] = account
    assert problems(values) == [
        f"platform.serviceAccountId: {account!r} is not allowed; allowed: an id that neither ends in -nodes (node accounts) nor starts with gpu-ci- (CI's)"
    ]
