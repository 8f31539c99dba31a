"""The guardrails of issue 18 on who is granted what and where tenants and data go, probe by probe:
each breaks one resource the real program registers and shows the pack's MANDATORY rejection,
whose message names the resource. Grants by account (and a subnet grant by its whole subnet), the
tenants' placement in projects, and the data the program shares (BigQuery, metrics scopes,
backups); the identity data the pack judges by is the program's own, from its runs."""

from __future__ import annotations

import copy
import json

import policies as P
import pytest
import yaml
from policy_support import args_of, edit_values, make_args, names, one, only, policy_resource, rejected, reports, stack_args, urn_of

PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
VCI = P.VIRTUAL_CLUSTER_INSTANCE


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
