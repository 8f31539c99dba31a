"""Every case of issue #11's "Why" list passed the first pack; each test here builds the violating
resource (mostly by breaking one field of a resource the real program registers) and shows that
the pack rejects it, with a message that names the resource's field, and through a MANDATORY
policy, so `pulumi up` stops."""

from __future__ import annotations

import copy

import policies as P
import pytest
from policy_support import args_of, edit_values, make_args, one, only, policy_resource, rejected, stack_args, urn_of, violations

PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
SUBNET_MEMBER = "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember"
PROJECT_ROLE = P.CUSTOM_ROLES[0]
PLATFORM_SA = "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
PLATFORM_SA_ID = "projects/acme-ml-dev/serviceAccounts/vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
NLP_NODES = "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"


# --- IAM grants the program does not make -------------------------------------------------------


@pytest.mark.parametrize(
    "case, typ, props, scope",
    [
        (
            "project-level serviceAccountUser",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/iam.serviceAccountUser", "member": PLATFORM_SA},
            "project",
        ),
        (
            "serviceAccountTokenCreator",
            SA_MEMBER,
            {"serviceAccountId": PLATFORM_SA_ID, "role": "roles/iam.serviceAccountTokenCreator", "member": "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "serviceAccount",
        ),
        (
            "projectIamAdmin",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/resourcemanager.projectIamAdmin", "member": PLATFORM_SA},
            "project",
        ),
        (
            "compute.admin",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/compute.admin", "member": "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "project",
        ),
        (
            "workloadIdentityUser at project level",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/iam.workloadIdentityUser", "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/loft]"},
            "project",
        ),
        (
            "workloadIdentityUser for a tenant's namespace",
            SA_MEMBER,
            {"serviceAccountId": PLATFORM_SA_ID, "role": "roles/iam.workloadIdentityUser", "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-nlp/default]"},
            "serviceAccount",
        ),
        (
            "networkUser on the host subnet",
            SUBNET_MEMBER,
            {"project": "acme-ml-dev", "region": "europe-west4", "subnetwork": "gpu-dev-nodes", "role": "roles/compute.networkUser", "member": PLATFORM_SA},
            "subnetwork",
        ),
    ],
)
def test_a_grant_not_made_by_design_is_rejected(case, typ, props, scope):
    message = only(rejected(make_args(typ, props, name="extra-grant")), P.grant_allow_list)
    assert message.startswith(f"member: {props['member']!r} ("), message
    assert f"holding {props['role']!r} on a {scope} is not a grant gpu-platform makes by design; allowed: on a {scope}, only " in message


def test_the_tenant_namespace_member_is_named_by_its_kind():
    props = {"serviceAccountId": PLATFORM_SA_ID, "role": P.WORKLOAD_IDENTITY_USER, "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-nlp/default]"}
    message = only(rejected(make_args(SA_MEMBER, props)), P.grant_allow_list)
    assert "(workloadIdentity:vcluster-nlp/default)" in message
    assert "workloadIdentity:vcluster-platform/loft → roles/iam.workloadIdentityUser" in message  # what is allowed


def test_a_binding_or_policy_is_checked_member_by_member():
    binding = {"project": "acme-ml-dev", "role": "roles/compute.viewer", "members": [NLP_NODES, "user:eve@example.com"]}
    message = only(rejected(make_args("gcp:projects/iAMBinding:IAMBinding", binding)), P.grant_allow_list)
    assert message.startswith("members[1]: 'user:eve@example.com' (user) holding 'roles/compute.viewer' on a project")


def test_the_program_grants_pass_only_in_their_own_project(runs):
    """The allow-list is per Pulumi project: the same grant in an unknown project is not by design."""
    run, reg = one(runs, "dev", PROJECT_MEMBER, "tenant-nlp-project-platform-vm-role")
    assert violations(P.grant_allow_list, args_of(run, reg)) == []
    other = urn_of(reg.type, reg.name, project="someone-elses-project")
    [message] = violations(P.grant_allow_list, args_of(run, reg, urn=other))
    assert "is not a grant someone-elses-project makes by design; allowed: no grant on a project" in message


def test_the_host_subnet_takes_no_grant_at_all(runs):
    """A grant that is fine on a tenant's subnet (the platform's tenantSubnetUse) is not on the host's."""
    run = runs["dev"]
    tenant_grant = run.one(SUBNET_MEMBER, "nlp")
    on_host = {**tenant_grant.plain_inputs, "subnetwork": "gpu-dev-nodes"}
    assert violations(P.grant_allow_list, args_of(run, tenant_grant, props=on_host)) == []  # right kind of grant…
    extra = policy_resource(SUBNET_MEMBER, on_host, urn_of(SUBNET_MEMBER, "platform-uses-host-subnet"), "platform-uses-host-subnet")
    found = violations(P.no_grants_on_host_network, stack_args(run, [extra]))
    assert found == [
        "platform-uses-host-subnet subnetwork: 'gpu-dev-nodes' is the host cluster's subnet, so "
        "'projects/acme-ml-dev/roles/gpuPlatform_dev_tenantSubnetUse' on it is not allowed; allowed: grants on tenants' subnets only"
    ]
    assert violations(P.no_grants_on_host_network, stack_args(run)) == []  # …on the wrong subnet


# --- Custom roles --------------------------------------------------------------------------------


def _role(runs, key: str):
    run = runs["dev"]
    [reg] = [r for r in run.of_type(PROJECT_ROLE) if r.plain_inputs["roleId"].endswith(f"_{key}")]
    return run, reg


@pytest.mark.parametrize(
    "permission",
    ["compute.subnetworks.useExternalIp", "compute.subnetworks.setIamPolicy", "iam.serviceAccounts.signJwt", "compute.projects.setCommonInstanceMetadata"],
)
def test_a_custom_role_with_an_escalating_permission_is_rejected(runs, permission):
    run, reg = _role(runs, "tenantDisks")
    props = copy.deepcopy(reg.plain_inputs)
    props["permissions"].append(permission)
    message = only(rejected(args_of(run, reg, props=props)), P.custom_role_permissions)
    assert message.startswith(f"permissions: {permission} is not allowed in any custom role")


def test_firewall_rules_only_in_the_tenant_load_balancer_role(runs):
    run, disks = _role(runs, "tenantDisks")
    props = copy.deepcopy(disks.plain_inputs)
    props["permissions"].append("compute.firewalls.create")
    found = [m for name, m in rejected(args_of(run, disks, props=props)) if name == P.custom_role_least_privilege.name]
    message, not_exact = found  # the misplaced permission, and a role that is not exactly its data's
    assert "not listed there: compute.firewalls.create;" in not_exact
    assert message == (
        "permissions: compute.firewalls.create is not allowed in role 'gpuPlatform_dev_tenantDisks'; allowed: only in "
        "<prefix>_tenantLoadBalancers (config/permissions.yaml onlyInRoles: the opt-in role of a tenant's load balancers)"
    )
    run, load_balancers = _role(runs, "tenantLoadBalancers")
    assert "compute.firewalls.create" in load_balancers.plain_inputs["permissions"]
    assert rejected(args_of(run, load_balancers)) == []


def test_forbidden_for_platform_is_enforced_by_the_pack(runs):
    run, reg = _role(runs, "autoNodes")
    props = copy.deepcopy(reg.plain_inputs)
    props["permissions"].append("compute.networks.create")
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.custom_role_least_privilege.name]
    assert [m for m in found if "(Pulumi builds tenants' networks" in m] == [
        "permissions: compute.networks.create is not allowed in the platform's role 'gpuPlatform_dev_autoNodes' (Pulumi builds tenants' networks, "
        "the platform only starts VMs in them); allowed: anything but config/permissions.yaml forbiddenForPlatform "
        f"({', '.join(P.DATA['customRoles']['forbiddenForPlatform'])})"
    ]
    # The same permission in a role the platform does not hold is no business of this rule, only of
    # the exact permission list every role has.
    run, disks = _role(runs, "tenantDisks")
    other = {**disks.plain_inputs, "permissions": [*disks.plain_inputs["permissions"], "compute.networks.create"]}
    [message] = violations(P.custom_role_least_privilege, args_of(run, disks, props=other))
    assert message.startswith("permissions: role 'gpuPlatform_dev_tenantDisks' must hold exactly config/permissions.yaml tenantDisks; not listed")


# --- Network -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0"])
def test_a_firewall_open_to_the_internet_is_rejected(runs, cidr):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-health-checks")
    props = {**reg.plain_inputs, "sourceRanges": ["35.191.0.0/16", cidr]}
    message = only(rejected(args_of(run, reg, props=props)), P.firewall_not_open)
    assert message.startswith(f"sourceRanges[1]: {cidr!r} opens firewall rule 'dev-nlp-allow-health-checks' to the internet; allowed:")


def test_an_ingress_firewall_without_a_source_is_open_to_the_internet(runs):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-internal")
    props = {k: v for k, v in reg.plain_inputs.items() if k != "sourceRanges"}
    message = only(rejected(args_of(run, reg, props=props)), P.firewall_not_open)
    assert message.startswith("sourceRanges: not set, so ingress rule 'dev-nlp-allow-internal' admits 0.0.0.0/0")
    assert violations(P.firewall_not_open, args_of(run, reg, props={**props, "direction": "EGRESS"})) == []


def test_a_peering_between_a_tenant_and_the_host_is_rejected():
    props = {"name": "nlp-to-host", "network": "projects/acme-ml-dev/global/networks/dev-nlp-nodes", "peerNetwork": "projects/acme-ml-dev/global/networks/gpu-dev"}
    message = only(rejected(make_args(P.NETWORK_PEERINGS[0], props)), P.no_network_peering)
    assert message.startswith(
        "network: a peering of 'projects/acme-ml-dev/global/networks/dev-nlp-nodes' with 'projects/acme-ml-dev/global/networks/gpu-dev' is not allowed"
    )


@pytest.mark.parametrize("auto", [None, True])
def test_a_created_project_with_the_default_network_is_rejected(auto):
    props = {"projectId": "acme-ml-dev-vision", "name": "gpu vision dev", "folderId": "123"}
    if auto is not None:
        props["autoCreateNetwork"] = auto
    message = only(rejected(make_args(P.PROJECT, props)), P.project_without_default_network)
    assert message.startswith("autoCreateNetwork: " + ("not set" if auto is None else "true is not allowed") + "; allowed: false")
    assert rejected(make_args(P.PROJECT, {**props, "autoCreateNetwork": False})) == []


def test_gke_with_public_nodes_is_rejected(runs):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    props["privateClusterConfig"]["enablePrivateNodes"] = False
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message.startswith("privateClusterConfig.enablePrivateNodes: false is not allowed; allowed: true")
    del props["privateClusterConfig"]
    assert only(rejected(args_of(run, cluster, props=props)), P.private_cluster).startswith("privateClusterConfig.enablePrivateNodes: not set")
    run, pool = one(runs, "dev", P.GKE_NODE_POOL)
    public_pool = {**pool.plain_inputs, "networkConfig": {"enablePrivateNodes": False}}
    assert only(rejected(args_of(run, pool, props=public_pool)), P.private_cluster).startswith("networkConfig.enablePrivateNodes: false is not allowed")


def test_gke_authorized_networks_open_to_the_internet_are_rejected(runs):
    run, cluster = one(runs, "prod", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"].append({"cidrBlock": "0.0.0.0/0", "displayName": "anywhere"})
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message.startswith("masterAuthorizedNetworksConfig.cidrBlocks[1].cidrBlock: '0.0.0.0/0' ('anywhere') opens the control plane to the internet")


# --- Tenants' vcluster.yaml -----------------------------------------------------------------------

FIELD = "spec.template.helmRelease.values"


def _relabel_prod(props: dict) -> dict:
    props = copy.deepcopy(props)
    props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL] = "prod"
    return props


def test_a_static_pool_of_64_h100s_counts_against_the_ceiling(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_static(document):
        entry = document["privateNodes"]["autoNodes"][0]
        entry["static"] = [
            {
                "name": "h100-reserved",
                "nodeTypeSelector": [{"property": "gpu-platform/instance-type", "operator": "In", "values": ["a3-highgpu-8g"]}],
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                "quantity": 8,
            }
        ]

    props = _relabel_prod(edit_values(reg.plain_inputs, add_static))
    message = only(rejected(args_of(run, reg, props=props)), P.gpu_ceiling_prod)
    assert message.startswith(
        f"{FIELD} privateNodes.autoNodes[] pools: the tenant's GPU limit is 70 (dynamic l4-2x=4, dynamic t4-1x-spot=2, static h100-reserved=64)"
    )


def test_a_static_pool_whose_gpus_the_selector_leaves_open_is_unbounded(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_static(document):
        document["privateNodes"]["autoNodes"][0]["static"] = [
            {"name": "any", "nodeTypeSelector": [{"property": "gpu-platform/capacity-type", "value": "on-demand"}], "quantity": 1}
        ]

    props = _relabel_prod(edit_values(reg.plain_inputs, add_static))
    found = rejected(args_of(run, reg, props=props))
    assert "static any=unbounded" in only(found, P.gpu_ceiling_prod)
    # A pool that may get GPU nodes must carry the GPU taint, static or not.
    assert only(found, P.tenant_isolation).startswith(
        f"{FIELD} privateNodes.autoNodes[provider='gcp-gpu'].static[name='any'].taints: none lacks the GPU taint"
    )


def test_a_static_cpu_pool_holds_no_gpus(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_static(document):
        document["privateNodes"]["autoNodes"][0]["static"] = [
            {"name": "cpu", "nodeTypeSelector": [{"property": "gpu-platform/instance-type", "values": ["e2-standard-4"]}], "quantity": 3}
        ]

    props = _relabel_prod(edit_values(reg.plain_inputs, add_static))
    # No GPU against the ceiling; the program writes no static pool, so the values allow-list
    # rejects it, key by key.
    found = rejected(args_of(run, reg, props=props))
    assert {name for name, _ in found} == {P.values_by_design.name}
    assert f"{FIELD} privateNodes.autoNodes[0].static[0].quantity: 3 is not a key gpu-platform writes" in {m.split(" (it")[0] for _, m in found}


@pytest.mark.parametrize(
    "security, field",
    [
        ({"containerSecurityContext": {"privileged": True}}, "controlPlane.statefulSet.security.containerSecurityContext.privileged: true"),
        ({"containerSecurityContext": {"allowPrivilegeEscalation": True}}, "controlPlane.statefulSet.security.containerSecurityContext.allowPrivilegeEscalation: true"),
        ({"containerSecurityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, "controlPlane.statefulSet.security.containerSecurityContext.capabilities.add: ['SYS_ADMIN']"),
    ],
)
def test_a_privileged_control_plane_is_rejected(runs, security, field):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"].update(statefulSet={"security": security}))
    message = only(rejected(args_of(run, reg, props=props)), P.unprivileged_control_plane)
    assert message.startswith(f"{FIELD} {field} is not allowed; allowed:")


def test_a_control_plane_mounting_host_paths_is_rejected(runs):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"].update(hostPathMapper={"enabled": True}))
    assert only(rejected(args_of(run, reg, props=props)), P.unprivileged_control_plane).startswith(
        f"{FIELD} controlPlane.hostPathMapper.enabled: true is not allowed"
    )


@pytest.mark.parametrize(
    "cluster_role, message",
    [
        ({"extraRules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}, "rbac.clusterRole.extraRules: 1 host rule(s)"),
        ({"overwriteRules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}, "rbac.clusterRole.overwriteRules: 1 host rule(s)"),
        ({"enabled": True}, "rbac.clusterRole.enabled: true is not allowed; allowed: auto (the chart's default) or false"),
    ],
)
def test_host_cluster_role_rules_in_tenant_values_are_rejected(runs, cluster_role, message):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)
    props = edit_values(reg.plain_inputs, lambda d: d.update(rbac={"clusterRole": cluster_role}))
    assert only(rejected(args_of(run, reg, props=props)), P.no_host_cluster_role).startswith(f"{FIELD} {message}")


def test_a_second_auto_nodes_entry_on_another_provider_is_rejected(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_entry(document):
        first = document["privateNodes"]["autoNodes"][0]
        document["privateNodes"]["autoNodes"].append({**copy.deepcopy(first), "provider": "someone-elses-provider"})

    props = edit_values(reg.plain_inputs, add_entry)
    message = only(rejected(args_of(run, reg, props=props)), P.single_node_provider)
    assert message == (
        f"{FIELD} privateNodes.autoNodes[1] (provider 'someone-elses-provider'): a second auto-nodes entry is not allowed; "
        "allowed: exactly one entry, on the environment's NodeProvider (here 'gcp-gpu')"
    )


def test_the_unchanged_instances_pass_these_policies(runs):
    """The edits above are what fails: the instances as registered pass."""
    for stack in ("dev", "team-vision-dev"):
        for reg in runs[stack].of_type(P.VIRTUAL_CLUSTER_INSTANCE):
            assert rejected(args_of(runs[stack], reg)) == [], reg.name
