"""Bad configuration of an environment stack: every problem reported at once, each naming its key
path and what is allowed, never a traceback, and nothing registered; the platform admin password
refused in any stack, whatever its value. Tenants and team stacks:
test_config_validation_tenants.py; each team's project (isolation):
test_config_validation_isolation.py."""

from __future__ import annotations

import pytest

from config.errors import ConfigError
from config.stack import load_stack
from config.stack_files import PROJECT_DIR
from shipped_stacks import SHIPPED_DIR, problems, refused, run_shipped

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
