"""Bad configuration of isolation, each team's project: shared tenants (prod's override and approval,
their names), a tenant's GCP project (required, well formed, its own, created only under
platform.tenantProjects), legacy mode, the control plane's resources, the names a team may not
take and the platform's account: each problem named at its key path, all together, and nothing
registered."""

from __future__ import annotations

import pytest

from config import yaml_io
from config.errors import ConfigError
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, problems, refused, shipped_project

NS = "gpu-platform"


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
