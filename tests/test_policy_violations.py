"""Every case of issue #11's "Why" list passed the first pack; each test here builds the violating
resource (mostly by breaking one field of a resource the real program registers) and shows that
the pack rejects it, with a message that names the resource (its Pulumi name and the object) and
its field, and through a MANDATORY policy, so `pulumi up` stops."""

from __future__ import annotations

import copy
import json
import re

import policies as P
import pytest
from policy_support import args_of, beside_record, by_record, edit_values, make_args, one, only, policy_resource, rejected, stack_args, urn_of, violations

from docs_support import section

PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
SUBNET_MEMBER = "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember"
PROJECT_ROLE = P.CUSTOM_ROLES[0]
PLATFORM_SA = "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
PLATFORM_SA_ID = "projects/acme-ml-dev/serviceAccounts/vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
NLP_NODES = "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"


# --- IAM grants the program does not make -------------------------------------------------------


@pytest.mark.parametrize(
    "case, typ, props, scope, bound_on",
    [
        (
            "project-level serviceAccountUser",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/iam.serviceAccountUser", "member": PLATFORM_SA},
            "project",
            "project 'acme-ml-dev'",
        ),
        (
            "serviceAccountTokenCreator",
            SA_MEMBER,
            {"serviceAccountId": PLATFORM_SA_ID, "role": "roles/iam.serviceAccountTokenCreator", "member": "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "serviceAccount",
            "service account 'vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com'",
        ),
        (
            "projectIamAdmin",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/resourcemanager.projectIamAdmin", "member": PLATFORM_SA},
            "project",
            "project 'acme-ml-dev'",
        ),
        (
            "compute.admin",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/compute.admin", "member": "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "project",
            "project 'acme-ml-dev'",
        ),
        (
            "workloadIdentityUser at project level",
            PROJECT_MEMBER,
            {"project": "acme-ml-dev", "role": "roles/iam.workloadIdentityUser", "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/loft]"},
            "project",
            "project 'acme-ml-dev'",
        ),
        (
            "workloadIdentityUser for a tenant's namespace",
            SA_MEMBER,
            {"serviceAccountId": PLATFORM_SA_ID, "role": "roles/iam.workloadIdentityUser", "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-nlp/default]"},
            "serviceAccount",
            "service account 'vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com'",
        ),
        (
            "networkUser on the host subnet",
            SUBNET_MEMBER,
            {"project": "acme-ml-dev", "region": "europe-west4", "subnetwork": "gpu-dev-nodes", "role": "roles/compute.networkUser", "member": PLATFORM_SA},
            "subnetwork",
            "subnetwork 'gpu-dev-nodes'",
        ),
    ],
)
def test_a_grant_not_made_by_design_is_rejected(case, typ, props, scope, bound_on):
    message = only(rejected(make_args(typ, props, name="extra-grant")), P.grant_allow_list)
    assert message.startswith(f"extra-grant (on {bound_on}): member: {props['member']!r} ("), message
    assert f"holding {props['role']!r} on a {scope} is not a grant gpu-platform makes by design; allowed: on a {scope}, only " in message


def test_the_tenant_namespace_member_is_named_by_its_kind():
    props = {"serviceAccountId": PLATFORM_SA_ID, "role": P.WORKLOAD_IDENTITY_USER, "member": "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-nlp/default]"}
    message = only(rejected(make_args(SA_MEMBER, props, name="nlp-acts-as-platform")), P.grant_allow_list)
    assert message.startswith("nlp-acts-as-platform (on service account 'vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com'): member: ")
    assert "(workloadIdentity:vcluster-nlp/default)" in message
    assert "workloadIdentity:vcluster-platform/loft → roles/iam.workloadIdentityUser" in message  # what is allowed


def test_a_binding_or_policy_is_checked_member_by_member():
    binding = {"project": "acme-ml-dev", "role": "roles/compute.viewer", "members": [NLP_NODES, "user:eve@example.com"]}
    message = only(rejected(make_args("gcp:projects/iAMBinding:IAMBinding", binding, name="viewers")), P.grant_allow_list)
    assert message.startswith("viewers (on project 'acme-ml-dev'): members[1]: 'user:eve@example.com' (user) holding 'roles/compute.viewer' on a project")


@pytest.mark.parametrize(
    "policy_data, problem",
    [
        ("{'bindings': []}", "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        ("", "is not JSON (Expecting value: line 1 column 1 (char 0))"),
        ('[{"role": "roles/owner", "members": ["user:eve@example.com"]}]', "list is not a JSON object"),
        ('{"bindings": {"role": "roles/owner", "members": ["user:eve@example.com"]}}', "bindings is not a list of {role, members}"),
        ('{"bindings": [{"role": "roles/owner", "members": "user:eve@example.com"}]}', "bindings is not a list of {role, members}"),
    ],
)
def test_an_iam_policy_that_cannot_be_read_is_rejected(policy_data, problem):
    """What an unreadable policyData grants cannot be checked, so it fails closed."""
    props = {"project": "acme-ml-dev", "policyData": policy_data}
    found = rejected(make_args("gcp:projects/iAMPolicy:IAMPolicy", props, name="project-policy"))
    # An IAM policy is no type the program registers either (resource-types-by-design).
    assert [name for name, _ in found].count(P.resource_types_by_design.name) == 1
    assert [f for f in found if f[0] != P.resource_types_by_design.name] == [
        (
            P.grant_allow_list.name,
            f"project-policy (on project 'acme-ml-dev'): policyData: {problem}; allowed: a JSON IAM policy "
            '{"bindings": [{"role": …, "members": […]}]}, so its grants can be checked',
        )
    ]


def test_a_readable_iam_policy_is_checked_binding_by_binding():
    document = {"bindings": [{"role": "roles/compute.viewer", "members": [NLP_NODES, "user:eve@example.com"]}], "etag": "BwX"}
    props = {"project": "acme-ml-dev", "policyData": json.dumps(document)}
    message = only(rejected(make_args("gcp:projects/iAMPolicy:IAMPolicy", props, name="project-policy")), P.grant_allow_list)
    assert message.startswith(
        "project-policy (on project 'acme-ml-dev'): policyData.bindings[0].members[1]: 'user:eve@example.com' (user) holding 'roles/compute.viewer'"
    )


def test_the_program_grants_pass_only_in_their_own_project(runs):
    """The allow-list is per Pulumi project: the same grant in an unknown project is not by design."""
    run, reg = one(runs, "dev", PROJECT_MEMBER, "tenant-nlp-project-platform-vm-role")
    assert violations(P.grant_allow_list, args_of(run, reg)) == []
    other = urn_of(reg.type, reg.name, project="someone-elses-project")
    [message] = violations(P.grant_allow_list, args_of(run, reg, urn=other))
    assert message.startswith("tenant-nlp-project-platform-vm-role (on project 'acme-ml-dev'): member: ")
    assert "is not a grant someone-elses-project makes by design; allowed: no grant on a project" in message


def test_the_host_subnet_takes_no_grant_at_all(runs):
    """A grant that is fine on a tenant's subnet (the platform's tenantSubnetUse) is not on the host's."""
    run = runs["dev"]
    tenant_grant = run.one(SUBNET_MEMBER, "nlp")
    on_host = {**tenant_grant.plain_inputs, "subnetwork": "gpu-dev-nodes"}
    # The right kind of grant, on no tenant's subnet: the exact identity data rejects it…
    [message] = violations(P.grant_allow_list, args_of(run, tenant_grant, props=on_host))
    assert "is bound on subnet projects/acme-ml-dev/regions/europe-west4/subnetworks/gpu-dev-nodes, not on a tenant's subnet of stack dev" in message
    extra = policy_resource(SUBNET_MEMBER, on_host, urn_of(SUBNET_MEMBER, "platform-uses-host-subnet"), "platform-uses-host-subnet")
    found = violations(P.no_grants_on_host_network, stack_args(run, [extra]))
    assert found == [
        "platform-uses-host-subnet (on subnetwork 'gpu-dev-nodes'): subnetwork: the host cluster's subnet takes no grant "
        "('projects/acme-ml-dev/roles/gpuPlatform_dev_tenantSubnetUse'); allowed: grants on tenants' subnets only"
    ]
    assert violations(P.no_grants_on_host_network, stack_args(run)) == []  # …and so does the stack policy


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
    assert message.startswith(f"auto-nodes-tenant-disks (role 'gpuPlatform_dev_tenantDisks'): permissions: {permission} is not allowed in any custom role")


def test_firewall_rules_only_in_the_tenant_load_balancer_role(runs):
    run, disks = _role(runs, "tenantDisks")
    props = copy.deepcopy(disks.plain_inputs)
    props["permissions"].append("compute.firewalls.create")
    found = [m for name, m in rejected(args_of(run, disks, props=props)) if name == P.custom_role_least_privilege.name]
    message, not_exact = found  # the misplaced permission, and a role that is not exactly its data's
    assert "not listed there: compute.firewalls.create;" in not_exact
    assert message == (
        "auto-nodes-tenant-disks (role 'gpuPlatform_dev_tenantDisks'): permissions: compute.firewalls.create is not allowed in this role; allowed: only in "
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
        "auto-nodes-role (role 'gpuPlatform_dev_autoNodes'): permissions: compute.networks.create is not allowed in a role the platform holds "
        "(Pulumi builds tenants' networks, "
        "the platform only starts VMs in them); allowed: anything but config/permissions.yaml forbiddenForPlatform "
        f"({', '.join(P.DATA['customRoles']['forbiddenForPlatform'])})"
    ]
    # The same permission in a role the platform does not hold is no business of this rule, only of
    # the exact permission list every role has.
    run, disks = _role(runs, "tenantDisks")
    other = {**disks.plain_inputs, "permissions": [*disks.plain_inputs["permissions"], "compute.networks.create"]}
    [message] = violations(P.custom_role_least_privilege, args_of(run, disks, props=other))
    assert message.startswith("auto-nodes-tenant-disks (role 'gpuPlatform_dev_tenantDisks'): permissions: must be exactly config/permissions.yaml tenantDisks; not listed")


# --- Network -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0"])
def test_a_firewall_open_to_the_internet_is_rejected(runs, cidr):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-health-checks")
    props = {**reg.plain_inputs, "sourceRanges": ["35.191.0.0/16", cidr]}
    message = only(rejected(args_of(run, reg, props=props)), P.firewall_not_open)
    assert message.startswith(
        f"tenant-nlp-gcp-allow-health-checks (firewall rule 'dev-nlp-allow-health-checks'): sourceRanges[1]: {cidr!r} opens the rule to the internet; allowed:"
    )


def test_an_ingress_firewall_without_a_source_is_open_to_the_internet(runs):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-internal")
    props = {k: v for k, v in reg.plain_inputs.items() if k != "sourceRanges"}
    message = only(rejected(args_of(run, reg, props=props)), P.firewall_not_open)
    assert message.startswith("tenant-nlp-gcp-allow-internal (firewall rule 'dev-nlp-allow-internal'): sourceRanges: not set, so the rule admits 0.0.0.0/0")
    assert violations(P.firewall_not_open, args_of(run, reg, props={**props, "direction": "EGRESS"})) == []


def test_a_peering_between_a_tenant_and_the_host_is_rejected():
    props = {"name": "nlp-to-host", "network": "projects/acme-ml-dev/global/networks/dev-nlp-nodes", "peerNetwork": "projects/acme-ml-dev/global/networks/gpu-dev"}
    message = only(rejected(make_args(P.NETWORK_PEERINGS[0], props, name="peer-nlp")), P.no_network_peering)
    assert message.startswith(
        "peer-nlp (peering 'nlp-to-host'): network: a peering of 'projects/acme-ml-dev/global/networks/dev-nlp-nodes' with 'projects/acme-ml-dev/global/networks/gpu-dev' is not allowed"
    )


@pytest.mark.parametrize("auto", [None, True])
def test_a_created_project_with_the_default_network_is_rejected(auto):
    props = {"projectId": "acme-ml-dev-vision", "name": "gpu vision dev", "folderId": "123"}
    if auto is not None:
        props["autoCreateNetwork"] = auto
    message = only(rejected(make_args(P.PROJECT, props, name="tenant-vision-project")), P.project_without_default_network)
    assert message.startswith("tenant-vision-project (project 'acme-ml-dev-vision'): autoCreateNetwork: " + ("not set" if auto is None else "true is not allowed") + "; allowed: false")
    # Its made-up fields are off every stack's record too, which stack-resources-by-record refuses
    # (tests/test_policy_exact_kinds.py); no other policy refuses it.
    assert beside_record(rejected(make_args(P.PROJECT, {**props, "autoCreateNetwork": False}))) == []


DEV_CLUSTER = "gke-cluster (cluster 'gpu-dev')"


def test_gke_with_public_nodes_is_rejected(runs):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    props["privateClusterConfig"]["enablePrivateNodes"] = False
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message.startswith(f"{DEV_CLUSTER}: privateClusterConfig.enablePrivateNodes: false is not allowed; allowed: true")
    del props["privateClusterConfig"]
    found = [m for name, m in rejected(args_of(run, cluster, props=props)) if name == P.private_cluster.name]
    assert found[0].startswith(f"{DEV_CLUSTER}: privateClusterConfig.enablePrivateNodes: not set")
    run, pool = one(runs, "dev", P.GKE_NODE_POOL)
    public_pool = {**pool.plain_inputs, "networkConfig": {"enablePrivateNodes": False}}
    assert only(rejected(args_of(run, pool, props=public_pool)), P.private_cluster).startswith(
        "gke-system (node pool 'system' of cluster 'gpu-dev'): networkConfig.enablePrivateNodes: false is not allowed"
    )


def test_an_inline_node_pool_with_public_nodes_is_rejected(runs):
    """A pool declared inside the cluster (`nodePools`) is held to the NodePool rule."""
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    system = run.one(P.GKE_NODE_POOL).plain_inputs
    inline = [{"name": "system", "nodeConfig": system["nodeConfig"]}, {"name": "public", "nodeConfig": system["nodeConfig"]}]
    props = {**copy.deepcopy(cluster.plain_inputs), "nodePools": inline}
    # Inline pools as such are the node shape of the stack's record (stack-resources-by-record: the program has none)…
    assert [name for name, _ in rejected(args_of(run, cluster, props=props))] == [P.stack_resources_by_record.name]
    inline[1]["networkConfig"] = {"enablePrivateNodes": False}
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message == (  # …one with public nodes is not
        f"{DEV_CLUSTER}: nodePools[1].networkConfig.enablePrivateNodes: false is not allowed; allowed: true or unset "
        "(the pool follows the cluster's private nodes)"
    )


def test_the_committed_clusters_keep_their_ip_endpoint_behind_authorized_networks(runs):
    """What the program sends (components/gke_cluster.py): a public IP endpoint, with authorized
    networks on (the block present; dev lists none, prod its office range)."""
    for stack, blocks in (("dev", []), ("prod", [{"cidrBlock": "203.0.113.0/24", "displayName": "office"}])):
        run, cluster = one(runs, stack, P.GKE_CLUSTER)
        props = cluster.plain_inputs
        assert props["privateClusterConfig"]["enablePrivateEndpoint"] is False
        assert props["masterAuthorizedNetworksConfig"] == {"cidrBlocks": blocks}
        assert violations(P.private_cluster, args_of(run, cluster)) == []


@pytest.mark.parametrize("endpoint", [False, None])
@pytest.mark.parametrize("authorized", [None, {"enabled": False, "cidrBlocks": []}])
def test_a_public_ip_endpoint_without_authorized_networks_is_rejected(runs, endpoint, authorized):
    """As open as 0.0.0.0/0: any address reaches the control plane's IP endpoint."""
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    if endpoint is None:
        del props["privateClusterConfig"]["enablePrivateEndpoint"]
    del props["masterAuthorizedNetworksConfig"]
    if authorized is not None:
        props["masterAuthorizedNetworksConfig"] = authorized
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message == (
        f"{DEV_CLUSTER}: masterAuthorizedNetworksConfig: {'not set' if authorized is None else 'not enabled'} while the IP endpoint "
        f"is public (privateClusterConfig.enablePrivateEndpoint: {'false' if endpoint is False else 'not set'}), so the control plane "
        "is open to 0.0.0.0/0; allowed: masterAuthorizedNetworksConfig set (cidrBlocks: the networks that need the IP endpoint, "
        "or none), or a private endpoint"
    )


@pytest.mark.parametrize(
    "private",
    [
        {"privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": True}},
        {"controlPlaneEndpointsConfig": {"ipEndpointsConfig": {"enabled": False}}},
    ],
)
def test_a_cluster_without_a_public_ip_endpoint_needs_no_authorized_networks(runs, private):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = {k: v for k, v in copy.deepcopy(cluster.plain_inputs).items() if k != "masterAuthorizedNetworksConfig"}
    props.update(private)
    assert violations(P.private_cluster, args_of(run, cluster, props=props)) == []


def test_gke_authorized_networks_open_to_the_internet_are_rejected(runs):
    run, cluster = one(runs, "prod", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"].append({"cidrBlock": "0.0.0.0/0", "displayName": "anywhere"})
    message = only(rejected(args_of(run, cluster, props=props)), P.private_cluster)
    assert message.startswith(
        "gke-cluster (cluster 'gpu-prod'): masterAuthorizedNetworksConfig.cidrBlocks[1].cidrBlock: '0.0.0.0/0' ('anywhere') "
        "opens the control plane to the internet"
    )


def test_the_readme_examples_are_what_the_pack_reports(runs):
    """docs/guardrails.md "Violation messages" shows what one looks like: each example is a real one."""
    guardrails = section("Violation messages")
    examples = re.search(r"Each violation's message starts with.*?```text\n(.+?)\n```", guardrails, re.DOTALL).group(1).splitlines()
    run = runs["dev"]
    cluster, firewall = run.one(P.GKE_CLUSTER), run.one(P.FIREWALL, "nlp-gcp-allow-internal")
    _, disks = _role(runs, "tenantDisks")
    no_authorized_networks = {k: v for k, v in cluster.plain_inputs.items() if k != "masterAuthorizedNetworksConfig"}
    compute_admin = {"project": "acme-ml-dev", "role": "roles/compute.admin", "member": PLATFORM_SA}
    with_firewalls = {**disks.plain_inputs, "permissions": [*disks.plain_inputs["permissions"], "compute.firewalls.create"]}
    reported = [
        only(rejected(args_of(run, cluster, props=no_authorized_networks)), P.private_cluster),
        only(rejected(args_of(run, firewall, props={**firewall.plain_inputs, "sourceRanges": ["0.0.0.0/0"]})), P.firewall_not_open),
        only(rejected(make_args(PROJECT_MEMBER, compute_admin, name="platform-compute-admin")), P.grant_allow_list),
        next(m for m in violations(P.custom_role_least_privilege, args_of(run, disks, props=with_firewalls)) if "in this role" in m),
    ]
    assert len(examples) == len(reported)
    for example, message in zip(examples, reported):
        assert example.endswith("; allowed: …") and message.startswith(example.removesuffix("…")), (example, message)


# --- Tenants' vcluster.yaml -----------------------------------------------------------------------

FIELD = "spec.template.helmRelease.values"
VISION = f"tenant-vision-instance (instance 'p-vision/vision'): {FIELD}"
NLP = f"tenant-nlp-instance (instance 'p-nlp/nlp'): {FIELD}"


RESEARCH = f"tenant-research-instance (instance 'p-research/research'): {FIELD}"


def test_a_static_pool_of_64_h100s_counts_against_the_ceiling(runs):
    run, reg = one(runs, "prod", P.VIRTUAL_CLUSTER_INSTANCE)

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

    props = edit_values(reg.plain_inputs, add_static)
    message = only(rejected(args_of(run, reg, props=props)), P.gpu_ceiling_prod)
    assert message.startswith(
        f"{RESEARCH} privateNodes.autoNodes[] pools: the tenant's GPU limit is 80 (dynamic a100-1x-flex-od=4, dynamic l4-1x-spot=4, dynamic h100-80gb-8x-rsv-spot-od=8, static h100-reserved=64)"
    )


def test_a_static_pool_whose_gpus_the_selector_leaves_open_is_unbounded(runs):
    run, reg = one(runs, "prod", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_static(document):
        document["privateNodes"]["autoNodes"][0]["static"] = [
            {"name": "any", "nodeTypeSelector": [{"property": "gpu-platform/capacity-type", "value": "on-demand"}], "quantity": 1}
        ]

    props = edit_values(reg.plain_inputs, add_static)
    found = rejected(args_of(run, reg, props=props))
    assert only(found, P.gpu_ceiling_prod).startswith(f"{RESEARCH} privateNodes.autoNodes[] pools: the tenant's GPU limit is unbounded (")
    assert "static any=unbounded" in only(found, P.gpu_ceiling_prod)
    # A pool that may get GPU nodes must carry the GPU taint, static or not; a static one must fix
    # its GPUs per node.
    isolation = sorted(m for name, m in found if name == P.tenant_isolation.name)
    where = f"{RESEARCH} privateNodes.autoNodes[provider='gcp-gpu'].static[name='any']"
    assert [m.split(";")[0] for m in isolation] == [
        f"{where}.nodeTypeSelector: leaves the GPUs per node open",
        f"{where}.taints: none lacks the GPU taint",
    ]


def test_a_static_cpu_pool_holds_no_gpus(runs):
    run, reg = one(runs, "prod", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_static(document):
        document["privateNodes"]["autoNodes"][0]["static"] = [
            {"name": "cpu", "nodeTypeSelector": [{"property": "gpu-platform/instance-type", "values": ["e2-standard-4"]}], "quantity": 3}
        ]

    props = edit_values(reg.plain_inputs, add_static)
    # No GPU against the ceiling, which therefore cannot bound it: the program writes static pools
    # only for warm GPU nodes, and the pack holds a static pool to that.
    found = rejected(args_of(run, reg, props=props))
    assert {name for name, _ in beside_record(found)} == {P.tenant_isolation.name}
    assert any(".static: " in m for m in by_record(found))
    assert only(found, P.tenant_isolation).startswith(
        f"{RESEARCH} privateNodes.autoNodes[provider='gcp-gpu'].static[name='cpu'].nodeTypeSelector: selects no GPU node type; "
        "allowed: a static pool only as a GPU pool's warm nodes"
    )


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
    assert message.startswith(f"{NLP} {field} is not allowed; allowed:")


def test_a_control_plane_mounting_host_paths_is_rejected(runs):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"].update(hostPathMapper={"enabled": True}))
    assert only(rejected(args_of(run, reg, props=props)), P.unprivileged_control_plane).startswith(
        f"{NLP} controlPlane.hostPathMapper.enabled: true is not allowed"
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
    assert only(rejected(args_of(run, reg, props=props)), P.no_host_cluster_role).startswith(f"{VISION} {message}")


def test_a_second_auto_nodes_entry_on_another_provider_is_rejected(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def add_entry(document):
        first = document["privateNodes"]["autoNodes"][0]
        document["privateNodes"]["autoNodes"].append({**copy.deepcopy(first), "provider": "someone-elses-provider"})

    props = edit_values(reg.plain_inputs, add_entry)
    message = only(rejected(args_of(run, reg, props=props)), P.single_node_provider)
    assert message == (
        f"{VISION} privateNodes.autoNodes[1] (provider 'someone-elses-provider'): a second auto-nodes entry is not allowed; "
        "allowed: exactly one entry, on the environment's NodeProvider (here 'gcp-gpu')"
    )


def test_the_unchanged_instances_pass_these_policies(runs):
    """The edits above are what fails: the instances as registered pass."""
    for stack in ("dev", "team-vision-dev"):
        for reg in runs[stack].of_type(P.VIRTUAL_CLUSTER_INSTANCE):
            assert rejected(args_of(runs[stack], reg)) == [], reg.name
