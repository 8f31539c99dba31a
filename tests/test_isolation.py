"""Hard tenant isolation (issue 10), under the mock engine: a project-mode tenant's GCP objects all
live in the team's project, its node identity holds nothing on the environment's project, the
platform's identity holds exactly the grants docs/security.md "Security" lists per project, each team has
its own vCluster Platform project, and the control plane accepts only the team's NAT addresses.

Stacks used: team-vision-dev (project mode, an existing project, its own stack), prod (project
mode, a project Pulumi creates, inline), dev (shared mode), and a dev variant whose first tenant
moves to a project of its own."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from components.platform_project import INSTANCE_VERBS, MEMBER_ROLE
from components.tenant_vcluster import GCP_PROJECT_ANNOTATION
from components.vcluster_values import VClusterValues
from config import node_properties as props
from config.isolation import vm_name_condition
from config.permissions import load_roles
from docs_support import section
from tools.mock_engine import ProgramRun, Registration
from shipped_stacks import run_shipped, shipped_values

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
PROJECT_CR = "kubernetes:management.loft.sh/v1:Project"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SUBNET_MEMBER = "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
MONITORED_PROJECT = "gcp:monitoring/monitoredProject:MonitoredProject"
K8S_VERSION = "1.33.0"


def platform_member(environment: str, host: str) -> str:
    return f"serviceAccount:vcluster-platform-{environment}@{host}.iam.gserviceaccount.com"


def component(run: ProgramRun, tenant: str) -> Registration:
    [found] = [r for r in run.of_type("gpu-platform:tenants:VirtualCluster") if r.name == f"tenant-{tenant}"]
    return found


def gcp_objects(run: ProgramRun, tenant: str) -> list[Registration]:
    index = run.by_urn()
    return [index[u] for u in sorted(run.custom_descendants(component(run, tenant).urn)) if index[u].type.startswith("gcp:")]


def project_of(r: Registration) -> str:
    """The GCP project a resource is created in, as its inputs say."""
    if r.type == "gcp:organizations/project:Project":
        return r.input("projectId")
    if r.input("project") is not None:
        return r.input("project")
    if r.type == SA_MEMBER:  # projects/<project>/serviceAccounts/<e-mail>
        return r.input("serviceAccountId").split("/")[1]
    if r.type == MONITORED_PROJECT:  # a link in the environment's metrics scope to the team's project
        return r.input("name")
    raise AssertionError(f"{r.type} {r.name} names no project")


def values_of(vci: Registration) -> VClusterValues:
    return VClusterValues.parse(vci.input("spec", "template", "helmRelease", "values"))


@pytest.fixture(scope="module")
def variant(stack_values) -> ProgramRun:
    """dev with nlp in a project of its own (existing), three NAT addresses, metadata exposed and
    a larger control plane (two of its four values set: the others keep their defaults); speech
    stays shared."""
    values = stack_values("dev")
    nlp = values["gpu-platform:tenants"][0]
    nlp.update(
        isolation="project",
        gcpProject="acme-ml-dev-nlp",
        nodeMetadata="exposed",
        controlPlane={"requests": {"cpu": "500m"}, "limits": {"memory": "8Gi"}},
    )
    nlp["network"]["natAddresses"] = 3
    return run_shipped(values, stack="dev")


@pytest.fixture(scope="module")
def stack_values():
    return shipped_values


# --- every GCP object of a project-mode tenant is in the team's project --------------------------


@pytest.mark.parametrize(
    "run_name, tenant, project, host",
    [
        ("tenant_run", "vision", "acme-ml-dev-vision", "acme-ml-dev"),
        ("prod_run", "research", "acme-prod-research", "acme-ml-prod"),
        ("variant", "nlp", "acme-ml-dev-nlp", "acme-ml-dev"),
    ],
)
def test_every_gcp_object_of_a_project_mode_tenant_is_in_its_project(request, run_name, tenant, project, host):
    run = request.getfixturevalue(run_name)
    everything = gcp_objects(run, tenant)
    # But the backup of its control plane, which lives in the host cluster: its plans are the host
    # project's, and select the team's host namespace only (tests/test_backup.py).
    backups = [r for r in everything if r.type.startswith("gcp:gkebackup/")]
    assert {r.type.split(":")[1] for r in backups} == {"gkebackup/backupPlan", "gkebackup/restorePlan"}
    assert {project_of(r) for r in backups} == {host}
    objects = [r for r in everything if r not in backups]
    kinds = {r.type.split(":")[1] for r in objects}
    # Network, subnet, router, NAT and its addresses, firewalls, node account, roles, bindings, APIs.
    assert {"compute/network", "compute/subnetwork", "compute/router", "compute/routerNat", "compute/address", "compute/firewall",
            "serviceaccount/account", "projects/iAMCustomRole", "projects/iAMMember", "projects/service"} <= kinds
    assert {(r.type, r.name): project_of(r) for r in objects} == {(r.type, r.name): project for r in objects}
    # The NodeProvider's VMs: the instance's auto-nodes entry names the team's project.
    [entry] = values_of(run.one(VCI, tenant)).auto_nodes
    assert entry["properties"][props.PROJECT] == project != host
    assert run.one(VCI, tenant).input("metadata", "annotations")[GCP_PROJECT_ANNOTATION] == project


@pytest.mark.parametrize(
    "run_name, tenant, project, host",
    [("tenant_run", "vision", "acme-ml-dev-vision", "acme-ml-dev"), ("prod_run", "research", "acme-prod-research", "acme-ml-prod")],
)
def test_no_binding_of_a_node_identity_is_on_the_host_project(request, run_name, tenant, project, host):
    run = request.getfixturevalue(run_name)
    environment = host.split("-")[-1]
    node_member = f"serviceAccount:{environment}-{tenant}-nodes@{project}.iam.gserviceaccount.com"
    bindings = [r for r in run.registrations if r.type.endswith("iAMMember:IAMMember") and r.input("member") == node_member]
    # compute.viewer, storageAdmin, tenantDisks, serviceAccountUser on itself, monitoring.metricWriter
    assert len(bindings) == 5
    assert "roles/monitoring.metricWriter" in {b.input("role") for b in bindings}
    assert {project_of(b) for b in bindings} == {project}
    for b in bindings:
        if b.type == PROJECT_MEMBER and b.input("role").startswith("projects/"):
            assert b.input("role").startswith(f"projects/{project}/roles/"), "custom roles are defined in the team's project"


def test_the_teams_roles_are_defined_in_its_project(prod_run):
    roles = load_roles().roles
    defined = {r.input("roleId"): r for r in prod_run.of_type("gcp:projects/iAMCustomRole:IAMCustomRole") if r.input("project") == "acme-prod-research"}
    assert set(defined) == {f"gpuPlatform_prod_{k}" for k in ("autoNodes", "tenantSubnetUse", "tenantDisks", "tenantLoadBalancers")}
    for role_id, role in defined.items():
        assert role.input("permissions") == list(roles[role_id.removeprefix("gpuPlatform_prod_")].permissions)


# --- the platform's identity: exactly the grants the docs list, per project ------------------------


def documented_grants() -> list[tuple[str, str, str]]:
    """(grant, on, condition) rows of docs/security.md "The platform's identity", table "What the
    platform's identity holds"."""
    text = section("The platform's identity")
    table = text[text.index("What the **platform's identity** holds") :].split("\n\n")[1]
    rows = re.findall(r"^\| (.+?) \| (.+?) \| (.+?) \|$", table, flags=re.M)
    return [tuple(c.strip() for c in row) for row in rows[1:]]  # after the header row


def test_readme_lists_the_platforms_grants():
    assert documented_grants() == [
        ("`<prefix>_autoNodes`", "the tenant's project", "VMs and disks named `<environment>-<tenant>-…`"),
        ("`<prefix>_tenantSubnetUse`", "the tenant's subnet", "—"),
        ("`roles/iam.serviceAccountUser`", "the tenant's node service account", "—"),
    ]


def platform_grants(run: ProgramRun, member: str) -> list[Registration]:
    return [r for r in run.registrations if r.type in (PROJECT_MEMBER, SUBNET_MEMBER, SA_MEMBER) and r.input("member") == member]


@pytest.mark.parametrize(
    "run_name, environment, host, tenants",
    [
        ("dev_run", "dev", "acme-ml-dev", {"nlp": "acme-ml-dev", "speech": "acme-ml-dev"}),
        ("tenant_run", "dev", "acme-ml-dev", {"vision": "acme-ml-dev-vision"}),
        ("prod_run", "prod", "acme-ml-prod", {"research": "acme-prod-research"}),
        ("variant", "dev", "acme-ml-dev", {"nlp": "acme-ml-dev-nlp", "speech": "acme-ml-dev"}),
    ],
)
def test_the_platform_holds_exactly_the_documented_grants_per_project(request, run_name, environment, host, tenants):
    run = request.getfixturevalue(run_name)
    grants = platform_grants(run, platform_member(environment, host))
    expected = []
    for tenant, project in tenants.items():
        for grant, on, condition in documented_grants():
            role = grant.strip("`").replace("<prefix>", f"gpuPlatform_{environment}")
            if not role.startswith("roles/"):
                role = f"projects/{project}/roles/{role}"
            where = {
                "the tenant's project": (PROJECT_MEMBER, project),
                "the tenant's subnet": (SUBNET_MEMBER, f"{environment}-{tenant}-nodes"),
                "the tenant's node service account": (SA_MEMBER, f"projects/{project}/serviceAccounts/{environment}-{tenant}-nodes@{project}.iam.gserviceaccount.com"),
            }[on]
            expected.append((where[0], role, where[1], condition != "—"))
    found = []
    for g in grants:
        target = {PROJECT_MEMBER: "project", SUBNET_MEMBER: "subnetwork", SA_MEMBER: "serviceAccountId"}[g.type]
        found.append((g.type, g.input("role"), g.input(target), g.input("condition") is not None))
        if g.type == SUBNET_MEMBER:
            assert g.input("project") in tenants.values()
    assert sorted(found) == sorted(expected)
    # The condition is the tenant's VM names, from the same place the templates get them.
    for g in grants:
        if g.type == PROJECT_MEMBER:
            tenant = g.name.split("-")[1]
            assert g.input("condition") == vm_name_condition(f"{environment}-{tenant}-")


@pytest.mark.parametrize("run_name, environment, host", [("prod_run", "prod", "acme-ml-prod"), ("tenant_run", "dev", "acme-ml-dev")])
def test_the_platform_holds_nothing_on_the_host_project_for_project_mode_tenants(request, run_name, environment, host):
    run = request.getfixturevalue(run_name)
    on_host = [g for g in platform_grants(run, platform_member(environment, host)) if project_of(g) == host]
    assert on_host == []


# --- the team's project, created or existing ------------------------------------------------------


def test_a_project_pulumi_creates(prod_run):
    [project] = prod_run.of_type("gcp:organizations/project:Project")
    assert project.input("projectId") == "acme-prod-research"
    assert project.input("folderId") == "123456789012" and project.input("billingAccount") == "012345-6789AB-CDEF01"
    assert project.input("autoCreateNetwork") is False
    assert project.input("deletionPolicy") == "PREVENT" and project.protect  # prod
    apis = [s for s in prod_run.of_type("gcp:projects/service:Service") if s.input("project") == "acme-prod-research"]
    assert {s.input("service") for s in apis} >= {"compute.googleapis.com", "iam.googleapis.com"}
    assert all(s.input("disableOnDestroy") is False for s in apis)
    for api in apis:
        assert project.urn in prod_run.depends_on(api.urn)


def test_an_existing_project_is_used_not_created(tenant_run):
    assert not tenant_run.of_type("gcp:organizations/project:Project")
    apis = tenant_run.of_type("gcp:projects/service:Service")
    assert {s.input("project") for s in apis} == {"acme-ml-dev-vision"}
    assert all(s.input("disableOnDestroy") is False for s in apis)
    # The tenant stack's default GCP project is the team's own.
    assert tenant_run.one("pulumi:providers:gcp").input("project") == "acme-ml-dev-vision"


def test_gcp_objects_wait_for_the_teams_apis_and_bindings_for_its_roles(variant, prod_run):
    for run, tenant in ((variant, "nlp"), (prod_run, "research")):
        objects = [r for r in gcp_objects(run, tenant) if not r.type.startswith("gcp:gkebackup/")]  # the host's
        apis = {r.urn for r in objects if r.type == "gcp:projects/service:Service"}
        roles = {r.urn for r in objects if r.type == "gcp:projects/iAMCustomRole:IAMCustomRole"}
        for r in objects:
            if r.type not in ("gcp:projects/service:Service", "gcp:organizations/project:Project"):
                assert apis <= run.depends_on(r.urn), f"{r.name} may be created before the team's APIs"
            if r.type.endswith("iAMMember:IAMMember") and r.input("role").startswith("projects/"):
                assert roles <= run.depends_on(r.urn), f"{r.name} may name a role that does not exist yet"


# --- joins only from the team's NAT addresses -----------------------------------------------------


@pytest.mark.parametrize("run_name, tenant, count", [("dev_run", "nlp", 1), ("tenant_run", "vision", 1), ("prod_run", "research", 2), ("variant", "nlp", 3)])
def test_the_control_plane_accepts_only_the_nat_addresses_and_the_host_cluster(request, run_name, tenant, count):
    run = request.getfixturevalue(run_name)
    objects = gcp_objects(run, tenant)
    addresses = [r for r in objects if r.type == "gcp:compute/address:Address"]
    assert len(addresses) == count
    assert all(a.input("addressType") == "EXTERNAL" for a in addresses)
    [nat] = [r for r in objects if r.type == "gcp:compute/routerNat:RouterNat"]
    assert nat.input("natIpAllocateOption") == "MANUAL_ONLY"
    assert nat.input("natIps") == [
        f"https://www.googleapis.com/compute/v1/projects/{a.input('project')}/regions/{a.input('region')}/addresses/{a.input('name')}" for a in addresses
    ]
    outputs = run.outputs if "tenants" not in run.outputs else run.outputs["tenants"][tenant]
    nat_addresses = outputs["natAddresses"]
    assert len(nat_addresses) == count and all(a.startswith("198.51.100.") for a in nat_addresses)  # the mock's documentation range
    spec = values_of(run.one(VCI, tenant)).control_plane_service_spec
    # And the host cluster's own pod and node ranges (clients inside it that use the LoadBalancer's
    # address), as the host's node subnet declares them; nothing else.
    host = request.getfixturevalue("dev_run" if run_name == "tenant_run" else run_name)
    [subnet] = [r for r in host.of_type("gcp:compute/subnetwork:Subnetwork") if r.input("name").startswith("gpu-")]
    pods = next(r["ipCidrRange"] for r in subnet.input("secondaryIpRanges") if r["rangeName"] == "pods")
    assert spec == {"type": "LoadBalancer", "loadBalancerSourceRanges": [f"{a}/32" for a in nat_addresses] + [pods, subnet.input("ipCidrRange")]}
    # A Service spec Kubernetes accepts, as the chart passes it on (controlPlane.service.spec).
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": tenant}, "spec": {**spec, "ports": [{"port": 443}]}}
    kubernetes_validate.validate(service, K8S_VERSION, strict=True)


# --- the host cluster keeps tenants apart -----------------------------------------------------------


def test_host_namespaces_get_network_policies_and_control_planes_requests_and_limits(dev_run, variant):
    for vci in dev_run.of_type(VCI):
        values = values_of(vci)
        assert values.network_policy_enabled
        assert values.control_plane_resources == {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    # Set values replace their defaults one by one; the values not set keep theirs.
    assert values_of(variant.one(VCI, "nlp")).control_plane_resources == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "2", "memory": "8Gi"},
    }


# --- node metadata ------------------------------------------------------------------------------------


def test_node_metadata_is_concealed_unless_the_tenant_exposes_it(dev_run, variant):
    def node_metadata(run, tenant):
        return values_of(run.one(VCI, tenant)).auto_nodes[0]["properties"][props.NODE_METADATA]

    assert node_metadata(dev_run, "nlp") == node_metadata(dev_run, "speech") == "concealed"
    assert node_metadata(variant, "nlp") == "exposed"


# --- one vCluster Platform project per team ---------------------------------------------------------


def test_each_team_has_a_platform_project_and_its_instance_lives_there(dev_run, tenant_run):
    for run, tenant, access in (
        (dev_run, "nlp", {"teams": ["nlp"]}),
        (dev_run, "speech", {"users": ["alice"]}),
        (tenant_run, "vision", {"teams": ["vision"]}),
    ):
        project = run.one(PROJECT_CR, tenant)
        assert project.input("metadata", "name") == tenant and "namespace" not in project.input("metadata")
        spec = project.input("spec")
        kind, names = next(iter(access.items()))
        assert spec["members"] == [
            {"kind": "Team" if kind == "teams" else "User", "name": n, "clusterRole": MEMBER_ROLE, "group": "storage.loft.sh"} for n in names
        ]
        assert spec["allowedClusters"] == [{"name": "loft-cluster"}]
        assert spec["allowedNodeTypes"] == [{"name": "gcp-gpu.*"}]
        vci = run.one(VCI, tenant)
        assert vci.input("metadata", "namespace") == f"p-{tenant}"
        # Members see and connect to the instance; they cannot change or delete it.
        assert vci.input("spec", "access") == [{"name": "team", "verbs": INSTANCE_VERBS, **access}]
        assert set(INSTANCE_VERBS) == {"get", "use"}
        # The instance waits for its project, so `pulumi destroy` removes the instance first.
        assert project.urn in run.depends_on(vci.urn)
    # In the environment stack a platform project waits for the management API (not for the
    # NodeProvider, which it only names).
    api_ready = dev_run.one("command:local:Command", "api-ready")
    assert api_ready.urn in dev_run.depends_on(dev_run.one(PROJECT_CR, "nlp").urn)
    assert "--project vision" in tenant_run.outputs["connectCommand"]
    assert tenant_run.outputs["projectNamespace"] == "p-vision"


def test_moving_to_another_gcp_project_replaces_the_instance_after_deleting_it(dev_run):
    vci = dev_run.one(VCI, "nlp")
    assert vci.replace_on_changes == [f'metadata.annotations["{GCP_PROJECT_ANNOTATION}"]']
    assert vci.delete_before_replace
