"""Least privilege (issue #7): the platform's identity only creates and deletes VMs; Pulumi owns
every tenant's network and node identity, and tears them down after the tenant's VMs."""

from __future__ import annotations

import ipaddress

import pytest

from components.tenant_network import HEALTH_CHECK_RANGES, IAP_RANGE
from config import node_properties as props
from config.isolation import instance_name_condition, vm_name_condition
from config.permissions import AUTO_NODES, TENANT_DISKS, TENANT_LOAD_BALANCERS, TENANT_SUBNET_USE, load_roles
from components.vcluster_values import VClusterValues
from shipped_stacks import run_shipped

ROLES = load_roles()
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
PLATFORM_SA = "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"


def role(run, key: str) -> list[str]:
    [found] = [r for r in run.of_type(CUSTOM_ROLE) if r.input("roleId").endswith(f"_{key}")]
    return found.input("permissions")


def test_platform_role_has_no_dangerous_permission(dev_run):
    permissions = role(dev_run, AUTO_NODES)
    assert permissions == list(ROLES.roles[AUTO_NODES].permissions)
    dangerous = set(ROLES.forbidden_in_any_role) | set(ROLES.forbidden_for_platform)
    assert {"resourcemanager.projects.setIamPolicy", "iam.roles.create", "iam.serviceAccounts.create"} <= dangerous
    assert dangerous.isdisjoint(permissions)
    # Not one iam.* or resourcemanager.* right: acting as node accounts comes from per-account bindings.
    assert [p for p in permissions if p.startswith(("iam.", "resourcemanager."))] == []
    assert not [p for p in permissions if p.startswith(("compute.networks.", "compute.firewalls.", "compute.routers."))]


def test_every_permission_has_a_reason():
    for key in (AUTO_NODES, TENANT_SUBNET_USE, TENANT_DISKS, TENANT_LOAD_BALANCERS):
        spec = ROLES.roles[key]
        assert set(spec.reasons) == set(spec.permissions)
        assert all(len(reason) > 10 for reason in spec.reasons.values())


def test_no_custom_role_can_grant_itself_more(dev_run, prod_run):
    for run in (dev_run, prod_run):
        for custom in run.of_type(CUSTOM_ROLE):
            assert set(custom.input("permissions")).isdisjoint(ROLES.forbidden_in_any_role), custom.name


def test_the_platform_identity_holds_its_role_only_on_shared_tenants_vms(dev_run):
    """dev's tenants are shared: each grants the platform the VM role on the environment's
    project, narrowed by a condition to the VMs and disks the node template names after it."""
    grants = [m for m in dev_run.of_type(PROJECT_MEMBER) if m.input("member") == PLATFORM_SA]
    assert sorted((g.input("project"), g.input("role"), g.name) for g in grants) == [
        ("acme-ml-dev", "projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes", f"tenant-{t}-project-platform-vm-role") for t in ("nlp", "speech")
    ]
    for grant in grants:
        tenant = grant.name.split("-")[1]
        assert grant.input("condition") == vm_name_condition(f"dev-{tenant}-")
    # No project-wide serviceAccountUser for anyone.
    assert all(m.input("role") != "roles/iam.serviceAccountUser" for m in dev_run.of_type(PROJECT_MEMBER))


def test_the_vm_condition_narrows_instances_and_disks_and_nothing_else():
    expression = vm_name_condition("dev-nlp-")["expression"]
    assert expression == (
        '(resource.type != "compute.googleapis.com/Instance" || resource.name.extract("/instances/{name}").startsWith("dev-nlp-")) && '
        '(resource.type != "compute.googleapis.com/Disk" || resource.name.extract("/disks/{name}").startsWith("dev-nlp-"))'
    )
    # Zones, zone operations and the project itself are other resource types: unaffected.
    assert "compute.googleapis.com/Zone" not in expression and len(vm_name_condition("dev-nlp-")["title"]) <= 100


def test_platform_acts_only_as_each_tenants_node_account(dev_run):
    node_accounts = {a.input("accountId"): a for a in dev_run.of_type("gcp:serviceaccount/account:Account")}
    grants = [m for m in dev_run.of_type(SA_MEMBER) if m.input("member") == PLATFORM_SA]
    assert {g.input("role") for g in grants} == {"roles/iam.serviceAccountUser"}
    targets = sorted(g.input("serviceAccountId") for g in grants)
    assert targets == sorted(
        f"projects/acme-ml-dev/serviceAccounts/{account}@acme-ml-dev.iam.gserviceaccount.com" for account in ("dev-nlp-nodes", "dev-speech-nodes")
    )
    assert {"dev-nlp-nodes", "dev-speech-nodes"} <= set(node_accounts)


@pytest.mark.parametrize("tenant", ["nlp", "speech"])
def test_each_tenant_has_its_own_network_nat_and_identity(dev_run, tenant):
    [component] = [c for c in dev_run.of_type("gpu-platform:tenants:Network") if c.name == f"tenant-{tenant}-gcp"]
    children = {r.type: r for r in dev_run.children(component.urn)}
    network = children["gcp:compute/network:Network"]
    assert network.input("name") == f"dev-{tenant}-nodes" and network.input("autoCreateSubnetworks") is False
    subnet = children["gcp:compute/subnetwork:Subnetwork"]
    assert subnet.input("network") == f"projects/acme-ml-dev/global/networks/dev-{tenant}-nodes"
    assert children["gcp:compute/routerNat:RouterNat"].input("router") == f"dev-{tenant}-router"
    assert children["gcp:serviceaccount/account:Account"].input("accountId") == f"dev-{tenant}-nodes"


def test_firewall_rules(dev_run, stack_values):
    rules = {r.input("name"): r for r in dev_run.of_type("gcp:compute/firewall:Firewall")}
    internal = rules["dev-nlp-allow-internal"]
    assert internal.input("sourceRanges") == ["10.160.0.0/22"]
    assert rules["dev-nlp-allow-health-checks"].input("sourceRanges") == HEALTH_CHECK_RANGES
    assert "dev-nlp-allow-iap-ssh" not in rules
    values = stack_values("dev")
    values["gpu-platform:tenants"][0]["network"]["iapSsh"] = True
    rules = {r.input("name"): r for r in run_shipped(values, stack="dev").of_type("gcp:compute/firewall:Firewall")}
    ssh = rules["dev-nlp-allow-iap-ssh"]
    assert ssh.input("sourceRanges") == [IAP_RANGE] and ssh.input("allows") == [{"protocol": "tcp", "ports": ["22"]}]


def test_subnets_of_tenants_never_overlap(dev_run, tenant_run):
    subnets = [s for run in (dev_run, tenant_run) for s in run.of_type("gcp:compute/subnetwork:Subnetwork")]
    ranges = [ipaddress.IPv4Network(s.input("ipCidrRange")) for s in subnets]
    assert len(ranges) == 4  # GKE + nlp + speech + vision
    for i, a in enumerate(ranges):
        for b in ranges[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_auto_nodes_properties_carry_the_names_pulumi_created(dev_run):
    for tenant in ("nlp", "speech"):
        properties = VClusterValues.parse(dev_run.one(VCI, tenant).input("spec", "template", "helmRelease", "values")).auto_nodes[0]["properties"]
        [network] = [n for n in dev_run.of_type("gcp:compute/network:Network") if n.name == f"tenant-{tenant}-gcp-vpc"]
        [subnet] = [n for n in dev_run.of_type("gcp:compute/subnetwork:Subnetwork") if n.name == f"tenant-{tenant}-gcp-subnet"]
        [account] = [a for a in dev_run.of_type("gcp:serviceaccount/account:Account") if a.name == f"tenant-{tenant}-gcp-nodes"]
        assert properties[props.NETWORK] == network.input("name")
        assert properties[props.SUBNETWORK] == subnet.input("name")
        assert properties[props.NODE_SERVICE_ACCOUNT] == account.input("accountId")
        assert all(props.is_label_value(v) for v in properties.values())


def test_tenant_network_is_destroyed_after_the_virtual_cluster(dev_run, tenant_run):
    for run in (dev_run, tenant_run):
        for vci in run.of_type(VCI):
            tenant = vci.input("metadata", "name")
            [component] = [c for c in run.of_type("gpu-platform:tenants:Network") if c.name == f"tenant-{tenant}-gcp"]
            network_resources = run.custom_descendants(component.urn)
            assert len(network_resources) >= 9
            # Deletion runs in reverse: everything the instance waits for is deleted after it.
            assert network_resources <= run.depends_on(vci.urn)


def test_node_identity_roles_follow_what_the_tenant_uses(dev_run, tenant_run, stack_values, env_stack_ref):
    def roles_of(run, account: str) -> set[str]:
        return {m.input("role") for m in run.of_type(PROJECT_MEMBER) if m.input("member") == f"serviceAccount:{account}"}

    # A shared tenant: no disk or load-balancer role on the environment's project, which holds the
    # host cluster's volumes (config/tenant_security.py).
    assert roles_of(dev_run, "dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com") == {
        "roles/compute.viewer",
        "roles/monitoring.metricWriter",  # the GPU metrics collector (monitoring on by default)
    }
    shared = VClusterValues.parse(dev_run.one(VCI, "nlp").input("spec", "template", "helmRelease", "values")).auto_nodes[0]["properties"]
    assert shared[props.CSI_ENABLED] == "false" and shared[props.CCM_LB_ENABLED] == "false"
    vision = "dev-vision-nodes@acme-ml-dev-vision.iam.gserviceaccount.com"
    assert roles_of(tenant_run, vision) == {
        "roles/compute.viewer",
        "roles/compute.storageAdmin",
        "projects/acme-ml-dev-vision/roles/gpuPlatform_dev_tenantDisks",
        "roles/monitoring.metricWriter",
    }
    # Volumes attach only to the tenant's own node VMs.
    [attach] = [m for m in tenant_run.of_type(PROJECT_MEMBER) if m.input("role").endswith("_tenantDisks") and m.input("member") == f"serviceAccount:{vision}"]
    assert attach.input("condition")["expression"] == instance_name_condition("dev-vision-")["expression"]
    values = stack_values("team-vision-dev")
    values["gpu-platform:tenant"].update(persistentDisks=False, loadBalancerServices=True, monitoring={"enabled": False})
    run = run_shipped(values, stack="team-vision-dev", stack_outputs={env_stack_ref: dev_run.outputs})
    assert roles_of(run, vision) == {
        "roles/compute.viewer",
        "roles/compute.loadBalancerAdmin",
        "projects/acme-ml-dev-vision/roles/gpuPlatform_dev_tenantLoadBalancers",
    }
    properties = VClusterValues.parse(run.one(VCI, "vision").input("spec", "template", "helmRelease", "values")).auto_nodes[0]["properties"]
    assert properties[props.CSI_ENABLED] == "false" and properties[props.CCM_LB_ENABLED] == "true"


def test_role_ids_are_stable_and_overridable(stack_values):
    values = stack_values("dev")
    values["gpu-platform:platform"] = {**values["gpu-platform:platform"], "roleIdPrefix": "gpuPlatform_dev2"}
    run = run_shipped(values, stack="dev")
    assert sorted(r.input("roleId") for r in run.of_type(CUSTOM_ROLE)) == [
        "gpuPlatform_dev2_autoNodes",
        "gpuPlatform_dev2_tenantDisks",
        "gpuPlatform_dev2_tenantLoadBalancers",
        "gpuPlatform_dev2_tenantSubnetUse",
    ]
    tenant_roles = {m.input("role") for m in run.of_type(PROJECT_MEMBER)}
    assert "projects/acme-ml-dev/roles/gpuPlatform_dev2_autoNodes" in tenant_roles


def test_inline_tenants_bind_environment_roles_only_once_they_exist(dev_run):
    roles = {r.input("roleId"): r.urn for r in dev_run.of_type(CUSTOM_ROLE)}
    [binding] = [
        m for m in dev_run.of_type(PROJECT_MEMBER)
        if m.input("role") == "projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes" and m.name == "tenant-nlp-project-platform-vm-role"
    ]
    assert roles["gpuPlatform_dev_autoNodes"] in dev_run.depends_on(binding.urn)


def test_platform_may_use_tenant_subnets_only(dev_run):
    assert "compute.subnetworks.use" not in role(dev_run, AUTO_NODES)
    assert role(dev_run, TENANT_SUBNET_USE) == ["compute.subnetworks.use"]
    grants = dev_run.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember")
    assert sorted((g.input("subnetwork"), g.input("member"), g.input("role")) for g in grants) == [
        (f"dev-{t}-nodes", PLATFORM_SA, "projects/acme-ml-dev/roles/gpuPlatform_dev_tenantSubnetUse") for t in ("nlp", "speech")
    ]
    # Not on the GKE host's subnet, nor on the project.
    assert all(m.input("role") != "projects/acme-ml-dev/roles/gpuPlatform_dev_tenantSubnetUse" for m in dev_run.of_type(PROJECT_MEMBER))


def test_gcp_resources_wait_for_the_project_apis_and_tenants_for_the_platform_identity(dev_run):
    apis = {s.input("service"): s.urn for s in dev_run.of_type("gcp:projects/service:Service")}
    assert len(apis) == 8  # the cluster's six (Backup for GKE's among them), monitoring's two
    # Everything on GCP needs at least the Compute Engine and IAM APIs enabled first.
    needed = {apis["compute.googleapis.com"], apis["iam.googleapis.com"]}
    for r in dev_run.registrations:
        if r.custom and r.type.startswith("gcp:") and r.type != "gcp:projects/service:Service":
            assert needed <= dev_run.depends_on(r.urn), f"{r.type} {r.name} may be created before the APIs are enabled"
        if r.type.startswith("gcp:gkebackup/"):  # and backup plans for Backup for GKE's, and for the cluster and its agent
            assert apis["gkebackup.googleapis.com"] in dev_run.depends_on(r.urn), r.name
    [platform_sa] = [a for a in dev_run.of_type("gcp:serviceaccount/account:Account") if a.name == "auto-nodes-sa"]
    for grant in [m for m in dev_run.of_type(SA_MEMBER) if m.input("member") == PLATFORM_SA]:
        assert platform_sa.urn in dev_run.depends_on(grant.urn)
    roles = {r.input("roleId"): r.urn for r in dev_run.of_type(CUSTOM_ROLE)}
    for grant in dev_run.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember"):
        assert roles["gpuPlatform_dev_tenantSubnetUse"] in dev_run.depends_on(grant.urn)
