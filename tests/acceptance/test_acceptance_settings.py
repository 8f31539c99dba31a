"""The acceptance run's stack: built through the program's config loader, exactly one tenant, names
unique per run, and every GCP object the program registers for it found by the leftover scan.
Also the prerequisites that make a run skip instead of half-creating."""

from __future__ import annotations

import pytest

from config.catalog import load_catalog
from config.errors import ConfigError
from config.stack_files import PROJECT_DIR, project_defaults
from tests.acceptance import leftovers, prerequisites
from tests.acceptance.settings import (
    ENVIRONMENT_HOURS,
    GPU_VM_MINUTES,
    RUN_LABEL,
    RunNames,
    Settings,
    cost_estimate,
    cost_total,
    load_run_stack,
    new_run_id,
    run_names,
    run_project_dir,
    stack_values,
)
from tools.mock_engine import run_program
from tools.plan_costs import environment_costs

RUN_ID = "k3x9q2"
DEFAULTS = Settings(project="acme-acceptance")
TEAM = Settings(project="acme-acceptance", team_project="acme-acceptance-team")  # project mode


@pytest.fixture(scope="module")
def env():
    return load_run_stack(DEFAULTS, RUN_ID)


@pytest.fixture(scope="module")
def names(env):
    return run_names(env, RUN_ID)


@pytest.fixture(scope="module")
def team_names():
    return run_names(load_run_stack(TEAM, RUN_ID), RUN_ID)


@pytest.fixture(scope="module")
def run():
    """The real program under the mock engine, with the run's configuration in project mode (the
    shared tenant's program is the committed dev stack's)."""
    return run_program({**project_defaults(PROJECT_DIR), **stack_values(TEAM, RUN_ID)}, stack=f"acceptance-{RUN_ID}", project_dir=run_project_dir())


def test_the_default_run_is_a_dev_environment_with_one_tenant(env):
    assert env.environment == "dev" and env.project == "acme-acceptance" and env.region == "us-central1"
    assert [t.tenant.name for t in env.tenants] == [f"acc-{RUN_ID}"]
    assert env.cluster.location == "us-central1-a"  # zonal: the cheap default of dev
    assert not env.cluster.deletion_protection
    assert env.cluster.labels == {RUN_LABEL: RUN_ID}
    (pool,) = env.tenants[0].gpu_pools
    assert (pool.gpu, pool.max_gpus, pool.idle_after) == ("nvidia-tesla-t4", 1, "60s")
    assert not env.tenants[0].tenant.smoke_test  # the run applies the Job itself, when it is ready to time it
    assert {nt.zone for nt in env.offer.node_types if nt.gpu == "nvidia-tesla-t4"} == set(DEFAULTS.zones)


def test_every_name_carries_the_run_id_and_fits_gcp(names):
    for value in (names.stack, names.cluster, names.platform_service_account, names.role_id_prefix, names.node_provider, names.tenant, names.tenant_prefix):
        assert RUN_ID in value
    assert len(f"{names.cluster}-nodes") <= 30 and len(f"{names.tenant_prefix}nodes") <= 30  # service account ids


def test_runs_share_no_name():
    ids = {new_run_id() for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 6 and i[0].isalpha() for i in ids)
    a = run_names(load_run_stack(DEFAULTS, "aaaaaa"), "aaaaaa").to_dict()
    b = run_names(load_run_stack(DEFAULTS, "bbbbbb"), "bbbbbb").to_dict()
    shared = {k for k in a if a[k] == b[k]}
    assert shared == {
        "project", "region", "zones", "environment", "cluster_location", "gpu", "gpus_per_node", "idle_after", "isolation", "tenant_project",
        "gpu_timeout", "monitoring", "scrape_interval",
    }


def test_run_names_survive_the_run_record(names, team_names):
    assert RunNames.from_dict(names.to_dict()) == names
    assert RunNames.from_dict(team_names.to_dict()) == team_names
    # A record written before project mode existed reads as shared, in its one project.
    old = {k: v for k, v in names.to_dict().items() if k not in ("isolation", "tenant_project")}
    assert (RunNames.from_dict(old).isolation, RunNames.from_dict(old).projects) == ("shared", ("acme-acceptance",))
    # One written before the monitoring checks, with the defaults of then.
    older = {k: v for k, v in names.to_dict().items() if k not in ("gpu_timeout", "monitoring", "scrape_interval")}
    assert RunNames.from_dict(older) == names and (names.gpu_timeout, names.monitoring, names.scrape_interval) == ("10m", True, "60s")


def test_without_a_team_project_the_tenant_shares_the_runs_project(names):
    assert DEFAULTS.mode == "shared" and DEFAULTS.vm_project == "acme-acceptance"
    [tenant] = stack_values(DEFAULTS, RUN_ID)["gpu-platform:tenants"]
    assert tenant["isolation"] == "shared" and "gcpProject" not in tenant
    assert (names.isolation, names.vm_project, names.projects) == ("shared", "acme-acceptance", ("acme-acceptance",))


def test_with_a_team_project_the_tenant_runs_in_project_mode_there(team_names):
    assert TEAM.mode == "project" and TEAM.vm_project == "acme-acceptance-team" and TEAM.problems() == []
    [tenant] = stack_values(TEAM, RUN_ID)["gpu-platform:tenants"]
    assert (tenant["isolation"], tenant["gcpProject"]) == ("project", "acme-acceptance-team")
    assert (team_names.isolation, team_names.vm_project) == ("project", "acme-acceptance-team")
    assert team_names.projects == ("acme-acceptance", "acme-acceptance-team")  # both scanned after the destroy
    # An explicit ISOLATION agrees with the default it would get.
    assert Settings(project="acme-acceptance", team_project="acme-acceptance-team", isolation="project").mode == "project"
    assert Settings(project="acme-acceptance", isolation="shared").mode == "shared"


@pytest.mark.parametrize(
    "settings, problem",
    [
        (Settings(project="acme-acceptance", isolation="project"), "ISOLATION=project needs TEAM_PROJECT="),
        (Settings(project="acme-acceptance", isolation="isolated"), "ISOLATION='isolated': allowed: project, shared, or empty"),
        (Settings(project="acme-acceptance", team_project="acme-acceptance-team", isolation="shared"), "TEAM_PROJECT is for ISOLATION=project"),
        (Settings(project="acme-acceptance", team_project="Team_1"), "TEAM_PROJECT='Team_1' is not a GCP project id"),
        (Settings(project="acme-acceptance", team_project="acme-acceptance"), "TEAM_PROJECT must differ from PROJECT"),
    ],
)
def test_isolation_settings_problems(settings, problem):
    [found] = settings.problems()
    assert found.startswith(problem), found


def test_a_bad_choice_fails_in_the_loader_naming_the_key():
    with pytest.raises(ConfigError, match=r"nodeProvider\.gpuTypes\[0\]: 'nvidia-t4' is not offered"):
        load_run_stack(Settings(project="acme-acceptance", gpu="nvidia-t4"), RUN_ID)
    with pytest.raises(ConfigError, match=r"nodeProvider\.zones\[1\]: 'europe-west4-b' is not in region us-central1"):
        load_run_stack(Settings(project="acme-acceptance", zones=("us-central1-a", "europe-west4-b")), RUN_ID)


def test_settings_problems():
    assert Settings(project="acme-acceptance").problems() == []
    problems = Settings(project="Acme_1", zones=(), gpu_quota=1, gpus_per_node=2).problems()
    assert [p.split("=")[0].split(" ")[0] for p in problems] == ["PROJECT", "ZONES", "GPU_QUOTA"]


def test_the_program_deploys_one_tenant_with_the_runs_names(run, team_names):
    names = team_names
    (cluster,) = run.of_type("gcp:container/cluster:Cluster")
    assert cluster.plain_inputs["name"] == names.cluster
    assert cluster.plain_inputs["resourceLabels"][RUN_LABEL] == RUN_ID
    (provider,) = run.of_type("kubernetes:management.loft.sh/v1:NodeProvider")
    assert provider.plain_inputs["metadata"]["name"] == names.node_provider
    (instance,) = run.of_type("kubernetes:management.loft.sh/v1:VirtualClusterInstance")
    assert instance.plain_inputs["metadata"]["name"] == names.tenant
    assert instance.plain_inputs["spec"]["clusterRef"]["namespace"] == names.host_namespace
    assert "kind: Job" not in instance.plain_inputs["spec"]["template"]["objects"]
    assert list(run.outputs["tenants"]) == [names.tenant]


# GCP resource type → the leftover scan's kind. Types not listed here either go with their parent
# (node pool with the cluster, NAT with its router) or are bindings and API enablements that bill
# nothing; any other new type must be added to the scan (tests/acceptance/leftovers.py).
SCANNED = {
    "gcp:container/cluster:Cluster": ("cluster", "name"),
    "gcp:compute/network:Network": ("network", "name"),
    "gcp:compute/subnetwork:Subnetwork": ("subnetwork", "name"),
    "gcp:compute/router:Router": ("router", "name"),
    "gcp:compute/firewall:Firewall": ("firewall rule", "name"),
    "gcp:compute/address:Address": ("address", "name"),
    "gcp:serviceaccount/account:Account": ("service account", "accountId"),
    "gcp:projects/iAMCustomRole:IAMCustomRole": ("custom role", "roleId"),
    "gcp:gkebackup/backupPlan:BackupPlan": ("backup plan", "name"),
    "gcp:gkebackup/restorePlan:RestorePlan": ("restore plan", "name"),
}
GO_WITH_THEIR_PARENT_OR_BILL_NOTHING = {
    "gcp:container/nodePool:NodePool",
    "gcp:compute/routerNat:RouterNat",
    "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember",
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/service:Service",
    "gcp:serviceaccount/iAMMember:IAMMember",
    # Monitoring: named by ids Google picks (a leftover blocks no new run), billed for nothing; the
    # showback dataset is named after the stack (config/monitoring.py), so each run has its own.
    "gcp:monitoring/dashboard:Dashboard",
    "gcp:monitoring/alertPolicy:AlertPolicy",
    "gcp:monitoring/monitoredProject:MonitoredProject",
    "gcp:monitoring/notificationChannel:NotificationChannel",
    "gcp:bigquery/dataset:Dataset",
    "gcp:bigquery/table:Table",
}


def test_the_leftover_scan_would_find_every_gcp_object_the_program_creates(run, team_names):
    """In project mode, in whichever of the run's projects the object is: the scan lists both."""
    names = team_names
    unknown = sorted({r.type for r in run.registrations if r.type.startswith("gcp:") and r.type not in SCANNED} - GO_WITH_THEIR_PARENT_OR_BILL_NOTHING)
    assert unknown == [], "new GCP resource types: teach tests/acceptance/leftovers.py to find them after a destroy"
    checked = {project: 0 for project in names.projects}
    for registration in run.registrations:
        if registration.type not in SCANNED:
            continue
        kind, key = SCANNED[registration.type]
        value = registration.plain_inputs[key]
        project = registration.plain_inputs.get("project") or names.project
        assert project in names.projects, f"{registration.type} {value} is in project {project}, which the scan does not list"
        listed = {
            "service account": {"email": f"{value}@{project}.iam.gserviceaccount.com"},
            "custom role": {"name": f"projects/{project}/roles/{value}"},
            "backup plan": {"name": f"projects/{project}/locations/{names.region}/backupPlans/{value}"},
            "restore plan": {"name": f"projects/{project}/locations/{names.region}/restorePlans/{value}"},
        }.get(kind, {"name": value})
        [found] = leftovers.scan({kind: [listed]}, names, project)
        assert found.command.endswith(f"--project {project} --quiet"), found
        checked[project] += 1
    # The environment's objects in PROJECT; the tenant's network, NAT, firewalls, node identity
    # and roles in TEAM_PROJECT.
    assert checked["acme-acceptance"] >= 6 and checked["acme-acceptance-team"] >= 7, checked
    # (Its Backup for GKE plans excepted: they back up its control plane in the host cluster, and live there.)
    tenant_objects = [
        r for r in run.registrations
        if r.type in SCANNED and names.tenant_prefix in str(r.plain_inputs.get(SCANNED[r.type][1])) and not r.type.startswith("gcp:gkebackup/")
    ]
    assert tenant_objects and {r.plain_inputs.get("project") for r in tenant_objects} == {"acme-acceptance-team"}


def test_the_cost_estimate_of_the_defaults_is_the_plans_cost_model(env):
    items = cost_estimate(env)
    costs = environment_costs(load_catalog(), env)
    always_on = sum(line.always_on for line in costs.lines)
    (gpu_pool,) = [p for p in costs.pools if p.pool == env.tenants[0].gpu_pools[0].name]
    assert cost_total(items) == pytest.approx(always_on * ENVIRONMENT_HOURS + gpu_pool.busy * GPU_VM_MINUTES / 60)
    assert items[0].what == "GKE cluster management fee, 1 h" and items[0].usd == pytest.approx(0.10)
    assert items[-1].what == "GPU VM (n1-standard-4 with 1 × nvidia-tesla-t4), 15 min"
    # n1-standard-4 + one T4 + its 200 GB boot disk, for a quarter of an hour.
    assert 0.13 < items[-1].usd < 0.15


def test_missing_tools_are_named():
    assert prerequisites.missing_tools(lambda tool: f"/usr/bin/{tool}") == []
    missing = prerequisites.missing_tools(lambda tool: None if tool in ("pulumi", "kubectl") else f"/usr/bin/{tool}")
    assert [m.split(" (")[0] for m in missing] == ["the Pulumi CLI", "kubectl"]


def test_the_pulumi_version_is_the_one_pulumi_yaml_requires():
    assert prerequisites.required_pulumi_version() == (3, 187, 0)
    assert prerequisites.pulumi_version_problem("v3.272.0\n", (3, 187, 0)) is None
    assert "≥ 3.187.0 (found v3.100.1" in prerequisites.pulumi_version_problem("v3.100.1", (3, 187, 0))


def test_missing_credentials_are_named():
    assert prerequisites.missing_credentials(lambda args: True) == []
    missing = prerequisites.missing_credentials(lambda args: "application-default" not in args)
    assert len(missing) == 1 and "gcloud auth application-default login" in missing[0]


def test_the_skip_is_one_line():
    line = prerequisites.skip_line(["the Pulumi CLI", "kubectl"])
    assert line == "acceptance: skipped, it needs: the Pulumi CLI; kubectl" and "\n" not in line


def test_gpu_quota_is_checked_where_the_tenants_vm_runs():
    """Quota is per project: in project mode the team's project needs the GPU, the environment's
    only needs to be readable (it runs the GKE cluster)."""
    from tests.acceptance.recorded import load

    def gcloud_for(quota_in: str, unreadable: str = ""):
        class Gcloud:
            def __init__(self, project):
                self.project = project

            def json(self, *args):
                if self.project == unreadable:
                    raise prerequisites.shell.CommandError("PERMISSION_DENIED")
                doc = load("gcloud/regions-describe-us-central1.json" if args[1] == "regions" else "gcloud/project-info-describe.json")
                if args[1] == "regions" and self.project != quota_in:
                    doc["quotas"] = [q for q in doc["quotas"] if q["metric"] != "NVIDIA_T4_GPUS"] + [{"metric": "NVIDIA_T4_GPUS", "limit": 0.0, "usage": 0.0}]
                return doc

        return Gcloud

    assert prerequisites.missing_project_access(TEAM, gcloud_for("acme-acceptance-team")) == []
    [problem] = prerequisites.missing_project_access(TEAM, gcloud_for("acme-acceptance"))
    assert problem.startswith("in project acme-acceptance-team: 1 free NVIDIA_T4_GPUS quota")
    assert prerequisites.missing_project_access(DEFAULTS, gcloud_for("acme-acceptance")) == []
    [problem] = prerequisites.missing_project_access(TEAM, gcloud_for("acme-acceptance-team", unreadable="acme-acceptance"))
    assert problem.startswith("read access to project acme-acceptance's Compute Engine quotas")
