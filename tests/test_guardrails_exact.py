"""The guardrails of issue 18, probe by probe: each breaks one resource the real program registers
(or adds one it never does) and shows the pack's MANDATORY rejection, whose message names the
resource; and the data the pack judges by is the program's own, from its runs."""

from __future__ import annotations

import copy
import json
import shutil

import policies as P
import pytest
import yaml
from policy_support import (
    analyze_remote,
    args_of,
    beside_record,
    by_record,
    edit_values,
    make_args,
    one,
    only,
    policy_resource,
    rejected,
    remote_provider,
    reports,
    served_pack,
    stack_args,
    urn_of,
)
from tenant_objects import named

from config.stack_files import PROJECT_DIR
from tools import program_inventory as inventory

PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
VCI = P.VIRTUAL_CLUSTER_INSTANCE
RELEASE = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"


def names(found: list[tuple[str, str]]) -> set[str]:
    return {name for name, _ in found}


# --- 1. Identities by account ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stack, typ, name, changes, expected",
    [
        # The platform's VM role for an account of another project that is named like the platform's.
        (
            "dev",
            PROJECT_MEMBER,
            "tenant-nlp-project-platform-vm-role",
            {"member": "serviceAccount:vcluster-platform-dev@mallory-ml.iam.gserviceaccount.com"},
            "member: 'serviceAccount:vcluster-platform-dev@mallory-ml.iam.gserviceaccount.com' holding "
            "'projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes' on a project is not the platform account of stack dev "
            "(allowed: vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com)",
        ),
        # actAs on a team's node identity, for an account of another project.
        (
            "team-vision-dev",
            SA_MEMBER,
            "tenant-vision-gcp-platform-acts-as-nodes",
            {"member": "serviceAccount:vcluster-platform-dev@mallory-ml.iam.gserviceaccount.com"},
            "is not the platform account of stack team-vision-dev (allowed: vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com)",
        ),
        # The platform's VM role on a project that holds none of the stack's tenants.
        (
            "team-vision-dev",
            PROJECT_MEMBER,
            "tenant-vision-project-platform-vm-role",
            {"project": "acme-ml-dev-audio", "role": "projects/acme-ml-dev-audio/roles/gpuPlatform_dev_autoNodes"},
            "is bound on project 'acme-ml-dev-audio', which holds no tenant of stack team-vision-dev; allowed: acme-ml-dev-vision",
        ),
        # A custom role of another prefix (another environment's roles).
        (
            "team-vision-dev",
            PROJECT_MEMBER,
            "tenant-vision-project-platform-vm-role",
            {"role": "projects/acme-ml-dev-vision/roles/gpuPlatform_prod_autoNodes"},
            "names custom role 'gpuPlatform_prod_autoNodes', whose prefix is not the environment's (gpuPlatform_dev)",
        ),
        # Workload Identity for a pod of another project's cluster.
        (
            "dev",
            SA_MEMBER,
            "auto-nodes-workload-identity",
            {"member": "serviceAccount:mallory-ml.svc.id.goog[vcluster-platform/loft]"},
            "is not the Workload Identity member of stack dev (allowed: 'serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/loft]')",
        ),
    ],
)
def test_a_grant_to_an_account_not_in_the_stacks_data_is_rejected(runs, stack, typ, name, changes, expected):
    run, reg = one(runs, stack, typ, name)
    props = {**copy.deepcopy(reg.plain_inputs), **changes}
    message = only(rejected(args_of(run, reg, props=props)), P.grant_allow_list)
    assert message.startswith(f"{reg.name} (on ") and expected in message, message


@pytest.mark.parametrize("form", ["IAMBinding", "IAMPolicy"])
def test_the_binding_and_policy_forms_are_judged_member_by_member(runs, form):
    """The platform's actAs on a team's node identity, as a binding or a policy: its own account
    passes, an account of another project beside it is rejected by name."""
    run, reg = one(runs, "team-vision-dev", SA_MEMBER, "tenant-vision-gcp-platform-acts-as-nodes")
    inputs = reg.plain_inputs
    members = [inputs["member"], "serviceAccount:vcluster-platform-dev@mallory-ml.iam.gserviceaccount.com"]
    if form == "IAMBinding":
        props = {"serviceAccountId": inputs["serviceAccountId"], "role": inputs["role"], "members": members}
        where = "members[1]"
    else:
        props = {"serviceAccountId": inputs["serviceAccountId"], "policyData": json.dumps({"bindings": [{"role": inputs["role"], "members": members}]})}
        where = "policyData.bindings[0].members[1]"
    typ = f"gcp:serviceaccount/i{form[1:]}:{form}"
    message = only(rejected(make_args(typ, props, name="acts-as", urn=urn_of(typ, "acts-as", stack="team-vision-dev"))), P.grant_allow_list)
    assert message.startswith(f"acts-as (on service account 'dev-vision-nodes@acme-ml-dev-vision.iam.gserviceaccount.com'): {where}: ")
    assert "is not the platform account of stack team-vision-dev" in message


def test_a_bucket_grant_to_a_program_account_is_no_grant_by_design(runs):
    node = P.STACKS["team-vision-dev"]["tenants"]["vision"]["nodeServiceAccount"]
    typ = "gcp:storage/bucketIAMMember:BucketIAMMember"
    props = {"bucket": "acme-ml-dev-state", "role": "roles/storage.objectViewer", "member": f"serviceAccount:{node}"}
    message = only(rejected(make_args(typ, props, name="read-state", urn=urn_of(typ, "read-state", stack="team-vision-dev"))), P.grant_allow_list)
    assert message.startswith(f"read-state (on bucket 'acme-ml-dev-state'): member: 'serviceAccount:{node}' (serviceAccount) holding 'roles/storage.objectViewer' on a bucket is not a grant")


def test_a_stack_the_data_does_not_know_gets_no_grant(runs):
    run, reg = one(runs, "dev", PROJECT_MEMBER, "tenant-nlp-project-platform-vm-role")
    args = args_of(run, reg, urn=urn_of(reg.type, reg.name, stack="mallory"))
    message = only(rejected(args), P.grant_allow_list)
    assert "stack 'mallory' is not in the pack's data, so nothing of it is known; allowed: the stacks of policy/stacks/ (" in message


def test_the_identity_data_is_what_the_runs_name(runs):
    """Per stack, the exact accounts: read from the registered accounts, grants and instances."""
    data = P.STACKS
    assert data["dev"]["platformServiceAccount"] == "vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
    assert data["dev"]["workloadIdentityMember"] == runs["dev"].one(SA_MEMBER, "workload-identity").input("member")
    assert data["dev"]["hostNodesServiceAccount"] == "gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com"
    vision = data["team-vision-dev"]["tenants"]["vision"]
    assert vision["nodeServiceAccount"] == "dev-vision-nodes@acme-ml-dev-vision.iam.gserviceaccount.com"
    assert (vision["project"], vision["subnetwork"], vision["isolation"]) == ("acme-ml-dev-vision", "dev-vision-nodes", "project")
    # A team stack takes the platform's account from its environment's run.
    assert data["team-vision-dev"]["platformServiceAccount"] == data["dev"]["platformServiceAccount"]


def _as_role(run, reg, role: str):
    """The args of a tenant node account's registered grant, with another role."""
    return args_of(run, reg, props={**copy.deepcopy(reg.plain_inputs), "role": role})


@pytest.mark.parametrize(
    "role, entry",
    [
        ("roles/compute.storageAdmin", "roles/compute.storageAdmin"),
        ("roles/compute.loadBalancerAdmin", "roles/compute.loadBalancerAdmin"),
        ("projects/acme-ml-dev/roles/gpuPlatform_dev_tenantDisks", "custom:tenantDisks"),
    ],
)
def test_a_shared_tenants_node_account_gets_no_disk_or_load_balancer_role_on_the_environments_project(runs, monkeypatch, role, entry):
    """nlp is shared: its project is the environment's, which holds the host cluster's volumes. The
    program refuses persistentDisks and loadBalancerServices for it; so does the pack, even with a
    record that had both options and the grant."""
    run, reg = one(runs, "dev", PROJECT_MEMBER, "tenant-nlp-gcp-compute-viewer")
    expected = (
        f"tenant-nlp-gcp-compute-viewer (on project 'acme-ml-dev'): member: 'serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com' "
        f"holding {role!r} on a project is bound on the environment's project 'acme-ml-dev', which holds the host cluster's volumes and "
        "network (every tenant's control plane): a project-wide disk or load-balancer role there reaches them all; allowed: only on a project "
        f"of the team's own (isolation: project) (config/iam_grants.yaml: tenantNodes → {entry})"
    )
    assert only(rejected(_as_role(run, reg, role)), P.grant_allow_list) == expected
    nlp = P.STACKS["dev"]["tenants"]["nlp"]
    for option in ("persistentDisks", "loadBalancerServices"):
        monkeypatch.setitem(nlp, option, True)
    monkeypatch.setitem(nlp, "nodeGrants", [*nlp["nodeGrants"], {"scope": "project", "role": role, "on": "acme-ml-dev"}])
    assert only(rejected(_as_role(run, reg, role)), P.grant_allow_list) == expected


def test_a_grant_an_option_adds_needs_the_option_its_approval_and_the_programs_own_grant(runs, monkeypatch):
    """prod's research has loadBalancerServices: false, and prod approves nothing: a direct grant of
    the load-balancer role is rejected whatever the instance says. Recorded as true, it still needs
    prod's approval; approved, it must be a grant the program's run of the stack makes."""
    run, reg = one(runs, "prod", PROJECT_MEMBER, "tenant-research-gcp-compute-viewer")
    args = _as_role(run, reg, "roles/compute.loadBalancerAdmin")
    prefix = (
        "tenant-research-gcp-compute-viewer (on project 'acme-prod-research'): member: "
        "'serviceAccount:prod-research-nodes@acme-prod-research.iam.gserviceaccount.com' holding 'roles/compute.loadBalancerAdmin' on a project "
    )
    source = " (config/iam_grants.yaml: tenantNodes → roles/compute.loadBalancerAdmin)"
    assert only(rejected(args), P.grant_allow_list) == (
        prefix + "is granted only with loadBalancerServices: true, and tenant research of stack prod has loadBalancerServices: false" + source
    )
    research = P.STACKS["prod"]["tenants"]["research"]
    monkeypatch.setitem(research, "loadBalancerServices", True)
    assert only(rejected(args), P.grant_allow_list) == prefix + (
        "is granted with loadBalancerServices: true, which prod has not approved for tenant research; allowed: only with "
        "platform.approvedTenantSecurity.research.loadBalancerServices: true in the environment stack" + source
    )
    monkeypatch.setitem(P.STACKS["prod"], "approvedTenantSecurity", {"research": {"loadBalancerServices": True}})
    listed = "; ".join(f"{g['role']} on {g['on']}" for g in research["nodeGrants"] if g["scope"] == "project")
    assert only(rejected(args), P.grant_allow_list) == prefix + (
        f"is not a grant the program gives tenant research's node account in stack prod (on 'acme-prod-research'); allowed on a project: {listed}" + source
    )
    monkeypatch.setitem(research, "nodeGrants", [*research["nodeGrants"], {"scope": "project", "role": "roles/compute.loadBalancerAdmin", "on": "acme-prod-research"}])
    assert P.grant_allow_list.name not in names(rejected(args))


def test_a_node_account_acting_as_itself_needs_persistent_disks(runs):
    """The CSI driver's actAs on its own account comes with persistentDisks; speech (shared) has it off."""
    run, reg = one(runs, "team-vision-dev", SA_MEMBER, "tenant-vision-gcp-nodes-act-as-self")
    speech = P.STACKS["dev"]["tenants"]["speech"]["nodeServiceAccount"]
    props = {**reg.plain_inputs, "member": f"serviceAccount:{speech}", "serviceAccountId": f"projects/acme-ml-dev/serviceAccounts/{speech}"}
    message = only(rejected(make_args(SA_MEMBER, props, name="act-as-self", urn=urn_of(SA_MEMBER, "act-as-self", stack="dev"))), P.grant_allow_list)
    assert message.endswith(
        "is granted only with persistentDisks: true, and tenant speech of stack dev has persistentDisks: false "
        "(config/iam_grants.yaml: tenantNodes → roles/iam.serviceAccountUser)"
    )


def test_each_node_accounts_grants_are_what_iam_grants_yaml_gives_its_recorded_options(runs):
    """The record's nodeGrants, read from the runs, are exactly config/iam_grants.yaml's tenantNodes
    entries whose option (`when`) the tenant has, bound where the entry says; the options are the
    instance's and the run's (persistentDisks: the instance's CSI property, monitoring: the tenant's
    monitoring component)."""
    from config.iam_grants import load_grants

    seen = set()
    for stack, data in P.STACKS.items():
        for name, tenant in data["tenants"].items():
            expected = set()
            for g in load_grants():
                if g.principal != "tenantNodes" or (g.when and not tenant[g.when]):
                    continue
                role = g.role if g.custom_role_key is None else f"projects/{tenant['project']}/roles/{data['roleIdPrefixes'][0]}_{g.custom_role_key}"
                on = tenant["project"] if g.scope == "project" else tenant["nodeServiceAccount"]
                expected.add((g.scope, role, on))
            assert {(g["scope"], g["role"], g["on"]) for g in tenant["nodeGrants"]} == expected, (stack, name)
            seen |= {(option, tenant[option]) for option in ("persistentDisks", "loadBalancerServices", "monitoring")}
    assert {("persistentDisks", True), ("persistentDisks", False), ("monitoring", True)} <= seen  # both sides of an option are covered


def test_the_grants_never_on_the_environments_project_are_those_of_the_options_refused_with_shared(stack_values):
    """notOnEnvironmentProject (config/iam_grants.yaml) marks every project grant of the options the
    program refuses for a shared tenant (whose project is the environment's), and only those."""
    from config.iam_grants import load_grants
    from shipped_stacks import problems

    flagged = {g.when for g in load_grants() if g.not_on_environment_project}
    for g in load_grants():
        if g.principal == "tenantNodes" and g.scope == "project":
            assert g.not_on_environment_project == (g.when in flagged), g
    assert flagged == {"persistentDisks", "loadBalancerServices"}
    for option in sorted(flagged):
        values = stack_values("dev")
        [nlp] = [t for t in values["gpu-platform:tenants"] if t["name"] == "nlp"]
        assert nlp["isolation"] == "shared"
        nlp[option] = True
        assert any(f".{option}: true is not allowed with isolation: shared" in p for p in problems(values)), option


@pytest.mark.parametrize(
    "subnetwork, inputs",
    [
        ("dev-nlp-nodes", {}),
        ("europe-west4/dev-nlp-nodes", {}),
        ("acme-ml-dev/europe-west4/dev-nlp-nodes", {"project": None, "region": None}),
        ("projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-nlp-nodes", {}),
        ("projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-nlp-nodes", {"project": None, "region": None}),
        ("https://www.googleapis.com/compute/v1/projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-nlp-nodes", {}),
    ],
)
def test_a_tenants_subnet_passes_in_every_form_the_provider_reads(runs, subnetwork, inputs):
    run, reg = one(runs, "dev", "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember", "tenant-nlp-gcp-platform-uses-subnet")
    props = {**copy.deepcopy(reg.plain_inputs), "subnetwork": subnetwork, **inputs}
    props = {k: v for k, v in props.items() if v is not None}
    assert P.grant_allow_list.name not in names(rejected(args_of(run, reg, props=props)))


SUBNETS = "the tenants' subnets of stack dev: projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-nlp-nodes, projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-speech-nodes"


@pytest.mark.parametrize(
    "subnetwork, inputs, expected",
    [
        # Another project's subnet of the same name, the grant's project and region kept.
        (
            "projects/mallory-ml/regions/europe-west4/subnetworks/dev-nlp-nodes",
            {},
            "is bound on no subnet the pack can tell: subnetwork 'projects/mallory-ml/regions/europe-west4/subnetworks/dev-nlp-nodes' names "
            "project 'mallory-ml', and its project input is 'acme-ml-dev' (the provider binds on the path's); " + SUBNETS,
        ),
        # ... as a URL, the inputs left out: the path alone decides.
        (
            "https://www.googleapis.com/compute/v1/projects/mallory-ml/regions/europe-west4/subnetworks/dev-nlp-nodes",
            {"project": None, "region": None},
            "is bound on subnet projects/mallory-ml/regions/europe-west4/subnetworks/dev-nlp-nodes, not on a tenant's subnet of stack dev; "
            "allowed: " + SUBNETS.split(": ", 1)[1],
        ),
        # Another region's subnet of the same name.
        (
            "europe-west1/dev-nlp-nodes",
            {},
            "is bound on no subnet the pack can tell: subnetwork 'europe-west1/dev-nlp-nodes' names region 'europe-west1', and its region "
            "input is 'europe-west4' (the provider binds on the path's); " + SUBNETS,
        ),
        # The project left to the provider's default.
        (
            "dev-nlp-nodes",
            {"project": None},
            "is bound on no subnet the pack can tell: project: not set, and subnetwork 'dev-nlp-nodes' names none (the provider's default would "
            "decide); allowed: the tenant's project, set; " + SUBNETS,
        ),
        # A spelling the pack does not read.
        (
            "//compute.googleapis.com/projects/acme-ml-dev/regions/europe-west4/subnetworks/dev-nlp-nodes",
            {},
            "is bound on no subnet the pack can tell: subnetwork '//compute.googleapis.com/projects/acme-ml-dev/regions/europe-west4/subnetworks/"
            "dev-nlp-nodes' is not a subnet the pack can read; allowed: projects/<project>/regions/<region>/subnetworks/<name>",
        ),
    ],
)
def test_a_subnet_grant_is_judged_by_the_whole_subnet_it_names(runs, subnetwork, inputs, expected):
    run, reg = one(runs, "dev", "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember", "tenant-nlp-gcp-platform-uses-subnet")
    props = {**copy.deepcopy(reg.plain_inputs), "subnetwork": subnetwork, **inputs}
    props = {k: v for k, v in props.items() if v is not None}
    message = only(rejected(args_of(run, reg, props=props)), P.grant_allow_list)
    assert message.startswith(f"tenant-nlp-gcp-platform-uses-subnet (on subnetwork {subnetwork!r}): member: ") and expected in message, message


# --- 2. Default deny ------------------------------------------------------------------------------------


CLUSTER_ADMIN = {
    "metadata": {"name": "everyone-is-admin"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    "subjects": [{"kind": "Group", "name": "system:authenticated"}],
}
PLATFORM_LB = {
    "metadata": {"name": "vcluster-platform-loadbalancer", "namespace": "vcluster-platform"},
    "spec": {"type": "LoadBalancer", "selector": {"app": "loft"}, "ports": [{"port": 443, "targetPort": 10443}]},
}


@pytest.mark.parametrize(
    "typ, props, policy, message",
    [
        (
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            CLUSTER_ADMIN,
            P.kubernetes_rbac_by_design,
            "metadata.name: 'everyone-is-admin' is not a ClusterRoleBinding stack dev's configuration makes; allowed: none",
        ),
        (
            "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
            {"direction": "INGRESS", "action": "allow", "priority": 1000, "match": {"srcIpRanges": ["0.0.0.0/0"]}},
            P.public_ranges_nonprod,
            "match.srcIpRanges: ['0.0.0.0/0'] together admit public address space in blocks wider than /24",
        ),
    ],
)
def test_a_type_the_program_never_creates_is_rejected_and_checked_too(typ, props, policy, message):
    args = make_args(typ, props, name="intruder")
    found = rejected(args)
    assert only(found, P.resource_types_by_design) == (
        f"intruder: type {typ!r} is not a resource type gpu-platform creates; allowed: the "
        f"{len(P.INVENTORY[P.PROGRAM_PROJECT]['resourceTypes'])} types its runs register (policy/program_data.json inventory (make policy-data): "
        "a type the program adds flows in when the data is regenerated)"
    )
    assert any(m.startswith("intruder") and message in m for m in (m for _, m in reports(policy, args))), reports(policy, args)


def test_a_service_other_than_the_platforms_own_is_rejected(runs):
    """The program makes one host Service, the platform's LoadBalancer for publicHost: another one,
    or the same with other ranges, is refused field by field."""
    run, reg = one(runs, "dev", "kubernetes:core/v1:Service")
    assert P.load_balancer_services.name not in names(rejected(args_of(run, reg)))
    found = rejected(make_args("kubernetes:core/v1:Service", PLATFORM_LB, name="intruder"))
    assert only(found, P.load_balancer_services).startswith(
        "intruder: metadata.name: 'vcluster-platform-loadbalancer' is not a Service stack dev's configuration makes; allowed: 'vcluster-platform-public'"
    )
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["loadBalancerSourceRanges"] = ["0.0.0.0/0"]
    assert only(rejected(args_of(run, reg, props=props)), P.load_balancer_services).startswith(
        "platform-public: spec.loadBalancerSourceRanges[0]: '0.0.0.0/0' is not what stack dev's configuration sets; allowed: '203.0.113.0/24'"
    )


def test_a_command_with_another_script_is_rejected(runs):
    run, reg = one(runs, "dev", COMMAND, "api-ready")
    props = {**reg.plain_inputs, "create": "gcloud projects add-iam-policy-binding acme-ml-dev --member=user:eve@example.com --role=roles/owner"}
    assert only(rejected(args_of(run, reg, props=props)), P.commands_by_design) == (
        "platform-api-ready: create: 'gcloud projects add-iam-policy-binding acme-ml-dev --member=user:eve@example.com --role=roles/owner' "
        "is not a script gpu-platform runs (a command runs on the deployer's machine, with its credentials); allowed: the program's "
        f"{len(P.INVENTORY[P.PROGRAM_PROJECT]['commands'])} commands (policy/program_data.json inventory (make policy-data))"
    )
    props = {**reg.plain_inputs, "interpreter": ["/bin/bash", "-c"], "environment": {**reg.plain_inputs["environment"], "LD_PRELOAD": "/tmp/x.so"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.commands_by_design.name]
    assert found == [
        "platform-api-ready: interpreter: is not an input gpu-platform sets on a command; allowed: create, update, delete, environment, triggers, logging",
        "platform-api-ready: environment: ['KUBECONFIG_DATA', 'LD_PRELOAD'] is not what gpu-platform gives this command; allowed: ['KUBECONFIG_DATA']",
    ]


def test_every_command_of_the_program_passes(runs):
    for run in runs.values():
        for reg in run.of_type(COMMAND):
            assert reports(P.commands_by_design, args_of(run, reg)) == []


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("service", "type"), "LoadBalancer", "values.service.type: 'LoadBalancer' (a LoadBalancer or NodePort in front of the platform) is not a value"),
        (("admin", "password"), "hunter2hunter2", "values.admin.password: 'hunter2hunter2' is not a value gpu-platform sets for chart vcluster-platform"),
        (("serviceAccount", "clusterRole"), "cluster-admin", "values.serviceAccount.clusterRole: 'cluster-admin' is not a value"),
    ],
)
def test_helm_values_the_program_never_writes_are_rejected(runs, path, value, expected):
    run, reg = one(runs, "dev", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"].setdefault(path[0], {})[path[1]] = value
    message = only(rejected(args_of(run, reg, props=props)), P.release_by_design)
    assert message.startswith("platform-release (chart 'vcluster-platform'): ") and expected in message, message


def test_sso_without_password_login_off_is_rejected(runs):
    run, reg = one(runs, "dev", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"]["config"]["auth"] = {"oidc": {"issuerUrl": "https://accounts.example.com", "clientId": "x"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.release_by_design.name]
    assert found[-1].startswith("platform-release (chart 'vcluster-platform'): values.config.auth.password.disabled: not true while single sign-on")


@pytest.mark.parametrize("account", [None, "default", "gpu-prod-nodes@acme-ml-prod.iam.gserviceaccount.com"])
def test_a_node_pool_without_its_dedicated_account_is_rejected(runs, account):
    run, reg = one(runs, "dev", "gcp:container/nodePool:NodePool")
    props = copy.deepcopy(reg.plain_inputs)
    props["nodeConfig"]["serviceAccount"] = account
    if account is None:
        props["nodeConfig"].pop("serviceAccount")
    message = only(rejected(args_of(run, reg, props=props)), P.node_pool_service_account)
    assert message.startswith("gke-system (node pool 'system' of cluster ")
    assert message.endswith("is not allowed; allowed: the host nodes' own account 'gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com'")


def test_tenant_objects_beyond_the_programs_are_rejected(runs):
    run, reg = one(runs, "dev", VCI, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-tools", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "team-tools"}, "spec": {"containers": [{"name": "x", "image": "alpine"}]}})
    [policy] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"].append("team-tools")
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects)
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.tenant_objects_by_design.name]
    prefix = "tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects"
    privileged = ", ".join(P.DATA["tenantInstance"]["privilegedNamespaces"])
    images = ", ".join(P.INVENTORY[P.PROGRAM_PROJECT]["tenantImages"])
    added = len(objects) - 2
    assert found == [
        f"{prefix}[2] (ValidatingAdmissionPolicy gpu-platform-pod-security): exempts ['team-tools'] from Pod Security; allowed: only {privileged}",
        f"{prefix}[{added}] (Namespace team-tools): is not an object gpu-platform puts inside a tenant; allowed: those of policy/program_data.json inventory (make policy-data)",
        f"{prefix}[{added}] (Namespace team-tools): metadata.labels['pod-security.kubernetes.io/enforce']: 'privileged' is not allowed; allowed: only in the "
        f"namespaces the product needs host access in ({privileged}: components/tenant_pod_security.py)",
        f"{prefix}[{added + 1}] (Pod team-tools/x): is not an object gpu-platform puts inside a tenant; allowed: those of policy/program_data.json inventory (make policy-data)",
        f"{prefix}[{added + 1}] (Pod team-tools/x): image 'alpine' is not an image gpu-platform runs; allowed: {images}",
        POD_SECURITY_SET_REJECTED,
    ]
    assert "gpu-operator" in privileged and "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04" in images


POD_SECURITY_SET_REJECTED = (
    "tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects: the Pod Security objects (Namespace default, "
    "ValidatingAdmissionPolicy gpu-platform-pod-security, ValidatingAdmissionPolicyBinding gpu-platform-pod-security) are not a set "
    "gpu-platform writes; allowed: exactly those of components/tenant_pod_security.py for baseline or restricted (the admission "
    "policy failing closed, bound with Deny, exempting only the product's namespaces), or none (podSecurityStandard: privileged)"
)


def _edit_objects(reg, edit) -> dict:
    """The instance's props with `edit` applied to its in-tenant objects (a list of documents)."""
    props = copy.deepcopy(reg.plain_inputs)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    edit(objects)
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects)
    return props


def _privileged_collector(objects: list[dict]) -> None:
    pod = named(objects, "DaemonSet", "gpu-metrics-collector", "gpu-platform-monitoring")["spec"]["template"]["spec"]
    [prometheus] = [c for c in pod["containers"] if c["name"] == "prometheus"]
    prometheus["securityContext"] = {**prometheus["securityContext"], "privileged": True}
    pod.setdefault("volumes", []).append({"name": "root", "hostPath": {"path": "/"}})


@pytest.mark.parametrize(
    "edit, expected",
    [
        # The watchdog's ClusterRole widened under its own name.
        (
            lambda objects: named(objects, "ClusterRole", "gpu-platform:gpu-watchdog")["rules"].append(
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}
            ),
            "(ClusterRole gpu-platform:gpu-watchdog): rules[2]: {'apiGroups': [''], 'resources': ['secrets'], 'verbs': ['get', 'list']} "
            "is not what gpu-platform grants; allowed: not there (policy/program_data.json inventory (make policy-data))",
        ),
        # A verb more in one of its rules: the rule's index and field, both lists whole.
        (
            lambda objects: named(objects, "ClusterRole", "gpu-platform:gpu-watchdog")["rules"][0]["verbs"].append("escalate"),
            "(ClusterRole gpu-platform:gpu-watchdog): rules[0].verbs: ",
        ),
        # The binding's subject swapped for the namespace's default account (any pod's), its role for cluster-admin.
        (
            lambda objects: named(objects, "ClusterRoleBinding", "gpu-platform:gpu-watchdog")["subjects"][0].update(name="default"),
            "(ClusterRoleBinding gpu-platform:gpu-watchdog): subjects[0].name: 'default' is not what gpu-platform grants; allowed: 'gpu-watchdog'",
        ),
        (
            lambda objects: named(objects, "ClusterRoleBinding", "gpu-platform:gpu-watchdog")["roleRef"].update(name="cluster-admin"),
            "(ClusterRoleBinding gpu-platform:gpu-watchdog): roleRef.name: 'cluster-admin' is not what gpu-platform grants; allowed: "
            "'gpu-platform:gpu-watchdog' (policy/program_data.json inventory (make policy-data))",
        ),
        # The collector's discovery binding given to every service account of the tenant.
        (
            lambda objects: named(objects, "RoleBinding", "gpu-metrics-collector-discovery", "gpu-operator")["subjects"].append(
                {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"}
            ),
            "(RoleBinding gpu-operator/gpu-metrics-collector-discovery): subjects[1]: {'apiGroup': 'rbac.authorization.k8s.io', 'kind': "
            "'Group', 'name': 'system:serviceaccounts'} is not what gpu-platform grants; allowed: not there",
        ),
        # The host-networked collector, privileged with the node's root filesystem.
        (
            _privileged_collector,
            "(DaemonSet gpu-platform-monitoring/gpu-metrics-collector): its pods' host access (hostNetwork, privileged prometheus, "
            "host paths /, service account gpu-metrics-collector) is not what gpu-platform gives them; allowed: hostNetwork, service "
            "account gpu-metrics-collector (policy/program_data.json inventory (make policy-data))",
        ),
        # The watchdog on the host network (the metadata server, the node identity's token).
        (
            lambda objects: named(objects, "Deployment", "gpu-watchdog", "gpu-platform-system")["spec"]["template"]["spec"].update(hostNetwork=True),
            "(Deployment gpu-platform-system/gpu-watchdog): its pods' host access (hostNetwork, service account gpu-watchdog) is not what "
            "gpu-platform gives them; allowed: service account gpu-watchdog",
        ),
        # Pod Security that fails open, or only audits.
        (
            lambda objects: named(objects, "ValidatingAdmissionPolicy", "gpu-platform-pod-security")["spec"].update(failurePolicy="Ignore"),
            POD_SECURITY_SET_REJECTED.split(": ", 1)[1],
        ),
        (
            lambda objects: named(objects, "ValidatingAdmissionPolicyBinding", "gpu-platform-pod-security")["spec"].update(validationActions=["Audit"]),
            POD_SECURITY_SET_REJECTED.split(": ", 1)[1],
        ),
    ],
)
def test_in_tenant_rbac_host_access_and_pod_security_are_exactly_the_programs(runs, edit, expected):
    run, reg = one(runs, "dev", VCI, "nlp")
    message = only(rejected(args_of(run, reg, props=_edit_objects(reg, edit))), P.tenant_objects_by_design)
    assert message.startswith("tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects") and expected in message


# --- 3. Pinned sources ----------------------------------------------------------------------------------


def test_a_chart_from_another_repository_is_rejected(runs):
    run, reg = one(runs, "dev", RELEASE)
    props = {**copy.deepcopy(reg.plain_inputs), "repositoryOpts": {"repo": "https://charts.mallory.example"}}
    assert only(rejected(args_of(run, reg, props=props)), P.release_by_design) == (
        "platform-release (chart 'vcluster-platform'): chart: 'vcluster-platform' from repositoryOpts.repo 'https://charts.mallory.example' is not a "
        "chart source the program installs (a chart of the same name and version from another repository is another chart); allowed: "
        "vcluster-platform from https://charts.loft.sh"
    )


@pytest.mark.parametrize(
    "where, edit, expected",
    [
        ("vcluster", lambda t: t["helmRelease"]["chart"].update(repo="https://charts.mallory.example"), "spec.template.helmRelease.chart: 'vcluster' from repo 'https://charts.mallory.example'"),
        ("gpu-operator", lambda t: t["charts"][0].update(repoURL="oci://ghcr.io/mallory/charts"), "spec.template.charts[0]: 'gpu-operator' from repoURL 'oci://ghcr.io/mallory/charts'"),
    ],
)
def test_a_chart_inside_an_instance_from_another_repository_is_rejected(runs, where, edit, expected):
    run, reg = one(runs, "team-vision-dev", VCI)
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"]["template"])
    message = only(rejected(args_of(run, reg, props=props)), P.instance_chart_versions)
    assert message.startswith(f"tenant-vision-instance (instance 'p-vision/vision'): {expected} is not a chart source the program installs; allowed: ")


def _chart_props(reg, values):
    """The instance's props with its GPU Operator chart's values replaced by `values` (a YAML string, or not)."""
    props = copy.deepcopy(reg.plain_inputs)
    [chart] = props["spec"]["template"]["charts"]
    assert chart["name"] == "gpu-operator", chart
    chart["values"] = values
    return props


def _gpu_operator_values(reg) -> dict:
    return yaml.safe_load(reg.plain_inputs["spec"]["template"]["charts"][0]["values"])


def test_a_driver_from_another_registry_inside_a_tenant_is_rejected(runs):
    """The review's probe: the GPU Operator would run a privileged driver container from an
    attacker's registry on the team's GPU nodes. Chart, repository and version are the program's."""
    run, reg = one(runs, "team-vision-dev", VCI)
    found = rejected(args_of(run, reg, props=_chart_props(reg, "driver:\n  enabled: true\n  repository: ghcr.io/mallory\n")))
    # And off the stack's record, at the same two paths (beside the values the probe left out).
    assert {m.split("): ", 1)[1].split(": ", 1)[0] for m in by_record(found)} >= {"spec.template.charts[0].values.driver.enabled", "spec.template.charts[0].values.driver.repository"}
    assert beside_record(found) == [
        (
            P.instance_charts_by_design.name,
            "tenant-vision-instance (instance 'p-vision/vision'): spec.template.charts[0].values driver.enabled: true is not what gpu-platform "
            "sets there for chart gpu-operator (a switch gpu-platform writes one way under every configuration); allowed: exactly false "
            "(policy/program_data.json inventory (make policy-data))",
        ),
        (
            P.instance_charts_by_design.name,
            "tenant-vision-instance (instance 'p-vision/vision'): spec.template.charts[0].values driver.repository: 'ghcr.io/mallory' is not a "
            "value gpu-platform sets for chart gpu-operator; allowed: the paths of policy/program_data.json inventory (make policy-data), "
            "here driver.enabled",
        ),
    ]


@pytest.mark.parametrize(
    "path, value, allowed",
    [
        # The chart's privileged driver container on the team's GPU nodes, beside the node image's driver.
        (("driver", "enabled"), True, "false"),
        (("toolkit", "enabled"), False, "true"),
        (("devicePlugin", "enabled"), False, "true"),
        # Monitoring's DCGM metric list: the exporter would point at a ConfigMap nobody creates.
        (("dcgmExporter", "config", "create"), False, "true"),
    ],
)
def test_a_switch_the_program_writes_one_way_is_pinned_to_that_value(runs, path, value, allowed):
    """Of the GPU Operator's switches the program writes one way under every configuration, each
    is pinned: the other value is rejected with the path, the value and what is allowed."""
    run, reg = one(runs, "dev", VCI, "nlp")
    values = _gpu_operator_values(reg)
    *parents, key = path
    node = values
    for parent in parents:
        node = node[parent]
    assert node[key] is not value  # the program's own is the other one
    node[key] = value
    message = only(rejected(args_of(run, reg, props=_chart_props(reg, yaml.safe_dump(values)))), P.instance_charts_by_design)
    assert message == (
        f"tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.charts[0].values {'.'.join(path)}: {str(value).lower()} is not what "
        "gpu-platform sets there for chart gpu-operator (a switch gpu-platform writes one way under every configuration); allowed: exactly "
        f"{allowed} (policy/program_data.json inventory (make policy-data))"
    )


def _renderer_variants() -> dict[tuple[bool, ...], dict]:
    """Every values document the GPU Operator renderer writes: each combination of its switches
    (every parameter of components/tenant_documents.py gpu_operator_values, all of them booleans:
    the tenant's gpuOperator settings and its monitoring)."""
    import inspect
    import itertools

    from components.tenant_documents import gpu_operator_values

    parameters = inspect.signature(gpu_operator_values).parameters
    assert all(p.annotation in (bool, "bool") for p in parameters.values()), parameters
    return {
        flags: gpu_operator_values(**dict(zip(parameters, flags)))
        for flags in itertools.product([False, True], repeat=len(parameters))
    }


def test_the_pinned_switches_are_those_the_renderer_writes_one_way_under_every_configuration():
    """The inventory's runs cover both values of every switch an option turns (the DCGM exporter,
    its ServiceMonitor, the MIG manager, monitoring), so what it records as fixed is what the
    renderer writes one way whatever its arguments: no more (a variant would be rejected), no less."""
    [record] = P.INVENTORY[P.PROGRAM_PROJECT]["tenantCharts"]
    assert record["fixedSwitches"] == inventory.fixed_switches(_renderer_variants().values())
    assert record["fixedSwitches"]["driver.enabled"] is False


@pytest.mark.parametrize(
    "key, value, why",
    [
        ("insecureSkipTlsVerify", True, "the chart downloaded without checking the repository's certificate, so anyone on the way serves another chart"),
        ("username", "mallory", "credentials for another chart repository than the program's public one"),
        ("password", "hunter2", "credentials for another chart repository than the program's public one"),
        ("usernameRef", {"name": "creds", "key": "username"}, "credentials for another chart repository than the program's public one"),
        ("passwordRef", {"name": "creds", "key": "password"}, "credentials for another chart repository than the program's public one"),
    ],
)
def test_a_vcluster_chart_field_the_program_never_sets_is_rejected(runs, key, value, why):
    """The vcluster chart entry (spec.template.helmRelease.chart) sets only the fields the program
    sets on it, recorded from its runs; chart, repository and version stay the program's."""
    run, reg = one(runs, "team-vision-dev", VCI)
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["template"]["helmRelease"]["chart"][key] = value
    [record] = P.INVENTORY[P.PROGRAM_PROJECT]["instanceReleaseCharts"]
    assert record["fields"] == sorted(reg.plain_inputs["spec"]["template"]["helmRelease"]["chart"]) == ["name", "repo", "version"]
    assert only(rejected(args_of(run, reg, props=props)), P.instance_charts_by_design) == (
        f"tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.chart.{key}: is not a field gpu-platform sets on chart "
        f"vcluster ({why}); allowed: name, repo, version (policy/program_data.json inventory (make policy-data))"
    )


@pytest.mark.parametrize(
    "edit, expected",
    [
        # The DCGM exporter in the node's process namespace.
        (lambda v: v["dcgmExporter"].update(hostPID=True), "spec.template.charts[0].values dcgmExporter.hostPID: true is not a value"),
        # Every operand's host root somewhere else.
        (lambda v: v.update(hostPaths={"rootFS": "/var/lib/mallory"}), "spec.template.charts[0].values hostPaths.rootFS: '/var/lib/mallory' is not a value"),
        # The validator from another registry: a path the program never writes, whatever the registry.
        (lambda v: v.update(validator={"repository": "nvcr.io/nvidia"}), "spec.template.charts[0].values validator.repository: 'nvcr.io/nvidia' is not a value"),
    ],
)
def test_gpu_operator_values_the_program_never_writes_are_rejected(runs, edit, expected):
    run, reg = one(runs, "dev", VCI, "nlp")
    values = _gpu_operator_values(reg)
    edit(values)
    message = only(rejected(args_of(run, reg, props=_chart_props(reg, yaml.safe_dump(values)))), P.instance_charts_by_design)
    assert message.startswith(f"tenant-nlp-instance (instance 'p-nlp/nlp'): {expected} gpu-platform sets for chart gpu-operator; allowed: "), message


@pytest.mark.parametrize("release", [False, True], ids=["gpu-operator in a tenant", "vcluster-platform release"])
def test_an_image_value_the_program_writes_is_pinned_not_only_allowed(runs, monkeypatch, release):
    """Where the program writes a value that chooses an image or registry, the path is allowed and
    its value pinned: the same path with another repository is rejected. Today the program writes
    none (the charts' defaults pin the images with the chart version), so the record here is
    `make policy-data`'s of a program that also writes the chart's default for one: recorded by the
    inventory's own reader from that document, the program's values beside it."""
    run, reg = one(runs, "dev", RELEASE if release else VCI, "" if release else "nlp")
    key, image, path = ("helmReleases", "ghcr.io/loft-sh", ("image", "registry")) if release else ("tenantCharts", "nvcr.io/nvidia", ("validator", "repository"))
    program = reg.plain_inputs["values"] if release else _gpu_operator_values(reg)
    pinned = {**copy.deepcopy(program), path[0]: {path[1]: image}}
    [entry] = P.INVENTORY[P.PROGRAM_PROJECT][key]
    recorded = {**entry, **inventory.chart_values([program, pinned])}
    assert ".".join(path) in recorded["valuePaths"] and recorded["imageValues"] == {".".join(path): [image]}
    monkeypatch.setitem(P.INVENTORY[P.PROGRAM_PROJECT], key, [recorded])
    policy = P.release_by_design if release else P.instance_charts_by_design

    def props(value):
        changed = {**copy.deepcopy(program), path[0]: {path[1]: value}}
        return {**copy.deepcopy(reg.plain_inputs), "values": changed} if release else _chart_props(reg, yaml.safe_dump(changed))

    assert policy.name not in names(rejected(args_of(run, reg, props=props(image))))
    message = only(rejected(args_of(run, reg, props=props("ghcr.io/mallory"))), policy)
    field = "values." if release else "spec.template.charts[0].values "
    assert message.endswith(
        f"{field}{'.'.join(path)}: 'ghcr.io/mallory' is not what gpu-platform sets there for chart {entry['chart']} (it chooses an image or the "
        f"registry one is pulled from); allowed: exactly {image!r} (policy/program_data.json inventory (make policy-data))"
    ), message


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda c: c.update(insecureSkipTlsVerify=True),
            "spec.template.charts[0].insecureSkipTlsVerify: is not a field gpu-platform sets on chart gpu-operator (the chart downloaded without "
            "checking the repository's certificate, so anyone on the way serves another chart); allowed: name, releaseName, releaseNamespace, "
            "repoURL, values, version (policy/program_data.json inventory (make policy-data))",
        ),
        (
            lambda c: c.update(values="- driver\n"),
            "spec.template.charts[0].values: is not a YAML mapping (Helm reads the values as a map of keys), but a list; allowed: the chart's "
            "values as one YAML mapping, as gpu-platform writes them",
        ),
        (lambda c: c.update(values="driver: [\n"), "spec.template.charts[0].values: is not YAML (while parsing a flow node)"),
    ],
)
def test_a_gpu_operator_chart_field_or_document_of_another_form_is_rejected(runs, edit, expected):
    run, reg = one(runs, "dev", VCI, "speech")
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"]["template"]["charts"][0])
    message = only(rejected(args_of(run, reg, props=props)), P.instance_charts_by_design)
    assert message.startswith(f"tenant-speech-instance (instance 'p-speech/speech'): {expected}"), message


def test_every_gpu_operator_values_document_the_program_renders_passes(runs):
    """Every combination of the tenant's gpuOperator settings (DCGM exporter off, MIG manager off,
    ServiceMonitor on) and of its monitoring (the DCGM metric list on or off) that the renderer
    writes passes, not only the committed stacks' (which the pack's runs all pass): no switch an
    option turns is pinned."""
    from config import yaml_io

    run, reg = one(runs, "dev", VCI, "nlp")
    rendered = {flags: yaml_io.dump(document) for flags, document in _renderer_variants().items()}
    assert reg.plain_inputs["spec"]["template"]["charts"][0]["values"] in rendered.values()  # the program's renderer
    for flags, text in rendered.items():
        assert P.instance_charts_by_design.name not in names(rejected(args_of(run, reg, props=_chart_props(reg, text)))), flags


def test_gpu_operator_values_unknown_during_preview_defer_the_policy(runs):
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

    run, reg = one(runs, "dev", VCI, "nlp")
    with pytest.raises(UnknownValueError):
        reports(P.instance_charts_by_design, args_of(run, reg, props=_chart_props(reg, UNKNOWN_STRING_VALUE)))


# --- 4. No public range by any split --------------------------------------------------------------------


def test_the_split_internet_is_rejected_in_prod_and_advisory_in_dev(runs):
    run, reg = one(runs, "prod", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(reg.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "0.0.0.0/1", "displayName": "a"}, {"cidrBlock": "128.0.0.0/1", "displayName": "b"}]
    message = only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)
    assert message.startswith(
        "gke-cluster (cluster 'gpu-prod'): masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock: ['0.0.0.0/1', '128.0.0.0/1'] together admit "
        "public address space in blocks wider than /24 (IPv6 /64): 32.0.0.0/3, 64.0.0.0/3, 128.0.0.0/3 and "
    )
    dev, cluster = one(runs, "dev", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(cluster.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "8.8.0.0/23", "displayName": "wide"}]
    assert P.public_ranges_prod.name not in names(rejected(args_of(dev, cluster, props=props)))
    [advisory] = [m for _, m in reports(P.public_ranges_nonprod, args_of(dev, cluster, props=props))]
    assert "['8.8.0.0/23'] together admit public address space in blocks wider than /24 (IPv6 /64): 8.8.0.0/23;" in advisory


def test_adjacent_narrow_ranges_count_as_their_union_and_the_prefix_is_configurable(runs):
    run, reg = one(runs, "prod", "gcp:container/cluster:Cluster")
    props = copy.deepcopy(reg.plain_inputs)
    props["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": f"8.8.{i}.0/24", "displayName": f"n{i}"} for i in range(4)]
    assert "8.8.0.0/22" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props, config={P.public_ranges.PREFIX_CONFIG: 22})) == []
    assert reports(P.public_ranges_prod, args_of(run, reg)) == []  # the office /24 as shipped


def test_a_firewall_split_open_is_rejected_but_googles_ranges_are_not(runs):
    run, reg = one(runs, "prod", P.FIREWALL, "allow-health-checks")
    assert reports(P.public_ranges_prod, args_of(run, reg)) == []  # 35.191.0.0/16 and 130.211.0.0/22, as the program opens them
    props = {**copy.deepcopy(reg.plain_inputs), "sourceRanges": ["35.191.0.0/16", "0.0.0.0/1", "128.0.0.0/1"]}
    assert "together admit public address space" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)


def test_a_platform_ingress_and_a_control_plane_are_judged_too(runs):
    """The program writes no Ingress (ingress-nginx is retired): a release that adds one, with the
    ranges of an annotation a GCE ingress ignores, is refused by path; a control plane open to
    public space by its ranges."""
    run, reg = one(runs, "prod", RELEASE)
    props = copy.deepcopy(reg.plain_inputs)
    props["values"]["ingress"] = {"enabled": True, "ingressClass": "gce", "annotations": {"nginx.ingress.kubernetes.io/whitelist-source-range": "203.0.113.0/24"}}
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.release_by_design.name]
    assert any(m.startswith("platform-release (chart 'vcluster-platform'): values.ingress.enabled: true is not a value gpu-platform sets for chart vcluster-platform") for m in found), found
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=["0.0.0.0/1", "128.0.0.0/1"]))
    assert "together admit public address space" in only(rejected(args_of(run, reg, props=props)), P.public_ranges_prod)


def test_a_control_plane_is_judged_by_its_stacks_environment_whatever_its_label_says(runs):
    """A prod tenant labelled dev is still prod (public-ranges-prod rejects it, tenant-gpu-ceiling-prod
    the label); a dev tenant labelled prod is still dev (advisory). Only for a stack the pack's
    record does not know does the label decide, a missing one counting as prod."""
    wide = ["0.0.0.0/1", "128.0.0.0/1"]
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=wide))
    props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL] = "dev"
    found = rejected(args_of(run, reg, props=props))
    assert "together admit public address space" in only(found, P.public_ranges_prod)
    assert only(found, P.gpu_ceiling_prod) == (
        "tenant-research-instance (instance 'p-research/research'): metadata.labels['gpu-platform/environment']: 'dev' is not allowed; "
        "allowed: 'prod', the environment of stack prod (or unset)"
    )
    assert reports(P.public_ranges_nonprod, args_of(run, reg, props=props)) == []
    unknown = urn_of(VCI, reg.name, stack="mallory")
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props, urn=unknown)) == []  # labelled dev
    del props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL]
    assert len(reports(P.public_ranges_prod, args_of(run, reg, props=props, urn=unknown))) == 1

    run, reg = one(runs, "dev", VCI, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=wide))
    props["metadata"]["labels"][P.INSTANCE_ENVIRONMENT_LABEL] = "prod"
    assert reports(P.public_ranges_prod, args_of(run, reg, props=props)) == []
    [(_, advisory)] = reports(P.public_ranges_nonprod, args_of(run, reg, props=props))
    assert advisory.startswith("tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.helmRelease.values controlPlane.service.spec.loadBalancerSourceRanges: ")


def test_a_control_plane_open_to_the_host_clusters_private_ranges_is_no_public_range(runs):
    """vcluster-control-plane-isolation admits the host cluster's pod and node ranges beside the NAT
    addresses (clients inside the host reach the control plane through its address): private space,
    however wide, admits nobody from outside; the same width of public space is rejected."""
    run, reg = one(runs, "prod", VCI)
    ranges = yaml.safe_load(reg.input("spec", "template", "helmRelease", "values"))["controlPlane"]["service"]["spec"]["loadBalancerSourceRanges"]
    assert {"10.4.0.0/14", "10.0.0.0/20"} <= set(ranges)  # the host's pods and nodes, as shipped
    assert P.public_ranges_prod.name not in names(rejected(args_of(run, reg)))
    wide = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=[*ranges, "10.0.0.0/8", "172.16.0.0/12"]))
    assert P.public_ranges_prod.name not in names(rejected(args_of(run, reg, props=wide)))
    public = edit_values(reg.plain_inputs, lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=[*ranges, "11.0.0.0/14"]))
    message = only(rejected(args_of(run, reg, props=public)), P.public_ranges_prod)
    assert message.endswith("in blocks wider than /24 (IPv6 /64): 11.0.0.0/14; allowed: public ranges of at most a /24 each, however they are split (policy config public-ranges-prod.minPublicPrefixLength)")


# --- 5. Tenants' placement --------------------------------------------------------------------------------


def test_two_tenants_in_one_team_project_are_rejected(runs):
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, lambda d: d["privateNodes"]["autoNodes"][0]["properties"].update(project="acme-ml-dev-vision"))
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.tenant_placement_by_design.name]
    assert "tenant-research-instance (instance 'p-research/research'): spec.template.helmRelease.values privateNodes.autoNodes[0].properties.project: " \
        "'acme-ml-dev-vision' is not the project of tenant research of stack prod; allowed: 'acme-prod-research'" in found
    assert (
        "tenant-research-instance (instance 'p-research/research'): spec.template.helmRelease.values project 'acme-ml-dev-vision' is also the project "
        "of tenant vision (stack team-vision-dev); allowed: one tenant per team project (their node identities would reach each other's VMs and disks)"
    ) in found
    # Within one stack, whatever the data knows.
    second = policy_resource(VCI, reg.plain_inputs, urn_of(VCI, "tenant-twin-instance", stack="prod"), "tenant-twin-instance")
    [(where, message)] = reports(P.one_tenant_per_project, stack_args(run, [second]))
    assert message == (
        "tenant-twin-instance (instance 'p-research/research'): project 'acme-prod-research' already holds tenant 'research' of this stack; "
        "allowed: one tenant per team project"
    )


def test_a_shared_tenant_beside_project_tenants_is_rejected_without_the_override(runs, monkeypatch):
    monkeypatch.setitem(P.STACKS["dev"], "allowSharedWithProjectTenants", False)
    run, reg = one(runs, "dev", VCI, "nlp")
    message = only(rejected(args_of(run, reg)), P.tenant_placement_by_design)
    assert message == (
        "tenant-nlp-instance (instance 'p-nlp/nlp'): isolation shared beside tenants of the other kind in environment dev (vision (stack "
        "team-vision-dev)) is not allowed; allowed: one kind only, unless the environment stack sets platform.allowSharedWithProjectTenants: true "
        "(a shared tenant's node identity reads every VM of the environment's project)"
    )


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["privateNodes"]["autoNodes"][0]["properties"].update({"vcluster.com/ccm-lb-enabled": "true"}), "loadBalancerServices true"),
        (lambda d: d["privateNodes"]["autoNodes"][0]["properties"].update({"gpu-platform/node-metadata": "exposed"}), "nodeMetadata exposed"),
    ],
)
def test_in_prod_a_security_change_needs_the_environments_approval(runs, monkeypatch, edit, message):
    run, reg = one(runs, "prod", VCI)
    props = edit_values(reg.plain_inputs, edit)
    found = only(rejected(args_of(run, reg, props=props)), P.tenant_placement_by_design)
    assert found.startswith(f"tenant-research-instance (instance 'p-research/research'): tenant research: {message} is not approved for it in prod")
    key, value = message.split(" ")
    monkeypatch.setitem(P.STACKS["prod"], "approvedTenantSecurity", {"research": {key: value == "true" if value in ("true", "false") else value}})
    assert P.tenant_placement_by_design.name not in names(rejected(args_of(run, reg, props=props)))


def test_in_prod_no_pod_security_needs_the_environments_approval(runs):
    run, reg = one(runs, "prod", VCI)
    props = copy.deepcopy(reg.plain_inputs)
    objects = [o for o in yaml.safe_load_all(props["spec"]["template"]["objects"]) if o["kind"] in ("Namespace",) and o["metadata"]["name"] != "default"]
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects)
    assert "tenant research: podSecurityStandard privileged is not approved for it in prod" in only(rejected(args_of(run, reg, props=props)), P.tenant_placement_by_design)


# --- 7. Control-plane bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["controlPlane"].pop("statefulSet"), "requests.cpu: not set; allowed: a quantity within the environment's maximum 4"),
        (lambda d: d["controlPlane"]["statefulSet"]["resources"]["limits"].update(memory="64Gi"), "limits.memory: '64Gi' is above the environment's maximum; allowed: at most 8Gi"),
    ],
)
def test_a_tenant_without_capped_control_plane_resources_is_rejected(runs, edit, message):
    run, reg = one(runs, "team-vision-dev", VCI)
    props = edit_values(reg.plain_inputs, edit)
    found = [m for name, m in rejected(args_of(run, reg, props=props)) if name == P.control_plane_resources.name]
    prefix = "tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.values controlPlane.statefulSet.resources."
    assert any(m.startswith(prefix + message) for m in found), found


# --- The data, generated, and the pack served alone ------------------------------------------------------


# --- Data the program shares: BigQuery, metrics scopes, backups -------------------------------------------


@pytest.mark.parametrize(
    "stack, typ, name, changes, expected",
    [
        (
            "dev",
            "gcp:bigquery/dataset:Dataset",
            "monitoring-billing",
            {"accesses": [{"role": "READER", "specialGroup": "allAuthenticatedUsers"}]},
            "monitoring-billing (dataset 'gpu_platform_dev_billing'): accesses: grants the dataset to 'allAuthenticatedUsers'; allowed: none "
            "(the project's IAM decides who reads billing data)",
        ),
        (
            "dev",
            "gcp:bigquery/dataset:Dataset",
            "monitoring-billing",
            {"project": "mallory-ml"},
            "monitoring-billing (dataset 'gpu_platform_dev_billing'): project: 'mallory-ml' is not allowed; allowed: the stack's environment project 'acme-ml-dev'",
        ),
        (
            "team-vision-dev",
            "gcp:monitoring/monitoredProject:MonitoredProject",
            "in-scope",
            {"metricsScope": "mallory-ml"},
            "metricsScope: 'mallory-ml' is not allowed; allowed: the environment's project 'acme-ml-dev' (whoever reads a scoping project's "
            "metrics reads every project it monitors)",
        ),
        (
            "team-vision-dev",
            "gcp:monitoring/monitoredProject:MonitoredProject",
            "in-scope",
            {"name": "acme-ml-prod"},
            "name: 'acme-ml-prod' is not a team project of stack team-vision-dev; allowed: acme-ml-dev-vision",
        ),
        (
            "dev",
            "gcp:gkebackup/backupPlan:BackupPlan",
            "nlp-backup-plan",
            {"cluster": "projects/mallory-ml/locations/europe-west4-a/clusters/loot"},
            "cluster: 'projects/mallory-ml/locations/europe-west4-a/clusters/loot' is not allowed; allowed: the stack's host cluster "
            "'projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev'",
        ),
        (
            "team-vision-dev",
            "gcp:gkebackup/backupPlan:BackupPlan",
            "backup-plan",
            {"backupConfig": {"includeVolumeData": True, "includeSecrets": True, "selectedNamespaces": {"namespaces": ["vcluster-nlp"]}}},
            "backupConfig.selectedNamespaces.namespaces: ['vcluster-nlp'] is not allowed; allowed: the host namespace of one tenant of stack "
            "team-vision-dev (vcluster-vision)",
        ),
        (
            "dev",
            "gcp:gkebackup/restorePlan:RestorePlan",
            "nlp-backup-restore-plan",
            {"restoreConfig": {"selectedNamespaces": {"namespaces": ["vcluster-nlp"]}, "clusterResourceRestoreScope": {"allGroupKinds": True}}},
            "restoreConfig.clusterResourceRestoreScope: restores cluster-scoped objects; allowed: noGroupKinds: true (a tenant's backup "
            "holds no host-wide object to put back)",
        ),
    ],
)
def test_shared_data_goes_only_where_the_stack_says(runs, stack, typ, name, changes, expected):
    run, reg = one(runs, stack, typ, name)
    assert P.data_targets_by_design.name not in names(rejected(args_of(run, reg)))
    message = only(rejected(args_of(run, reg, props={**copy.deepcopy(reg.plain_inputs), **changes})), P.data_targets_by_design)
    assert message.startswith(f"{reg.name} (") and message.endswith(expected)


def test_the_inventory_is_what_the_runs_register(runs):
    types = set(P.INVENTORY[P.PROGRAM_PROJECT]["resourceTypes"])
    for run in runs.values():
        assert {r.type for r in run.registrations} <= types
    assert {"pulumi:providers:command", "pulumi:pulumi:Stack", "gcp:organizations/project:Project"} <= types
    assert not any(t.startswith("random:") or t.endswith((":ClusterRole", ":ClusterRoleBinding")) for t in types)
    assert inventory.value_paths({"a": {"b/c": [1, {"d": 2}]}, "e": []}) == {'a["b/c"][]', 'a["b/c"][].d', "e"}
    # A switch is fixed when every document that has it writes it one way; list items count each.
    assert inventory.fixed_switches(
        [{"on": True, "op": {"enabled": False}, "items": [{"x": True}, {"x": False}], "name": "n"}, {"on": True, "op": {"enabled": True}}, {}]
    ) == {"on": True}
    document = {"op": {"enabled": True, "repository": "r", "imagePullSecrets": [{"name": "s"}]}, "nfd": {"image": {"tag": "v1"}}}
    assert inventory.chart_values([document, {"op": {"repository": "r2"}}]) == {
        "valuePaths": ["nfd.image.tag", "op.enabled", "op.imagePullSecrets[].name", "op.repository"],
        "imageValues": {"nfd.image.tag": ["v1"], "op.imagePullSecrets[].name": ["s"], "op.repository": ["r", "r2"]},
    }


def test_the_committed_stacks_pass_the_pack_served_from_a_copy_of_policy_alone(tmp_path, committed_runs):
    """What `pulumi policy publish` uploads, served as the CLI serves it, judging every resource of
    every committed stack, components and providers included (the engine analyses them all), and
    the stacks as a whole."""
    from pulumi.runtime.proto import analyzer_pb2
    from google.protobuf import struct_pb2

    copied = tmp_path / "published" / "policy"
    shutil.copytree(PROJECT_DIR / "policy", copied, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    with served_pack(copied, cwd=tmp_path) as analyzer:
        for stack, run in committed_runs.items():
            resources = []
            for reg in [*run.registrations, *run.reads]:
                diagnostics = analyze_remote(analyzer, reg.type, reg.plain_inputs, reg.urn, reg.name, protect=reg.protect, provider=remote_provider(run, reg))
                assert [d.message for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY] == [], (stack, reg.name)
                if reg.custom:
                    properties = struct_pb2.Struct()
                    properties.update(json.loads(json.dumps(reg.final_state, default=str)))  # its final outputs, as after `pulumi up`
                    options = analyzer_pb2.AnalyzerResourceOptions(protect=reg.protect)
                    resources.append(analyzer_pb2.AnalyzerResource(type=reg.type, properties=properties, urn=reg.urn, name=reg.name, options=options))
            stack_diagnostics = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=60).diagnostics
            assert [d.message for d in stack_diagnostics] == [], stack
        # ... and rejects a type the program never creates.
        [diagnostic] = analyze_remote(analyzer, "kubernetes:networking.k8s.io/v1:Ingress", {"spec": {}}, urn_of("kubernetes:networking.k8s.io/v1:Ingress", "x"), "x")
        assert diagnostic.policyName == P.resource_types_by_design.name
