"""The CrossGuard pack (policy/): every policy passes the resources the real program registers and
fails a violation built by hand or by breaking one field of a real resource; the whole pack passes
every committed stack; and the pack really starts and answers the engine's gRPC calls.

Validators get their props through the SDK's own unknown-checking proxy, as under the CLI: a
read-only Mapping (not a dict) that raises UnknownValueError on values unknown during preview.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import policies as P
from stack_records import load_records
import pytest
import yaml
from policy_support import (
    pack_copy_judging_the_shipped_stacks,
    analyze,
    analyze_remote,
    args_of,
    edit_values,
    make_args,
    mandatory,
    one,
    pack_stacks,
    pools_of,
    real,
    requirement_pins,
    served_pack,
    urn_of,
    violations,
)
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from config.permissions import load_roles
from config.stack_files import PROJECT_DIR, list_stacks
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, checkout_is_as_shipped, committed_stacks

POLICY_DIR = PROJECT_DIR / "policy"


# --- The whole pack ------------------------------------------------------------------------------


# This checkout's stacks, and the shipped ones too where they differ (else those are the same runs).
EVERY_STACK = [*committed_stacks(), *([] if checkout_is_as_shipped() else [f"shipped/{s}" for s in SHIPPED_STACKS])]


@pytest.mark.parametrize("stack", EVERY_STACK)
def test_pack_passes_every_committed_stack(request, stack):
    """Every stack file of this checkout, the ones a user added as docs/teams.md says included."""
    shipped = stack.startswith("shipped/")
    run = request.getfixturevalue("runs" if shipped else "committed_runs")[stack.removeprefix("shipped/")]
    if shipped:
        found = analyze(run)
    else:
        # This checkout's stacks, by the records `make policy-data` wrote for them (policy/stacks/).
        with pack_stacks(load_records(POLICY_DIR / "stacks")):
            found = analyze(run)
    assert found == [], "\n".join(f"{level.value} {policy} on {resource}: {message}" for level, policy, resource, message in found)


def test_a_failing_pack_test_shows_the_whole_message(request):
    """pytest.ini's verbosity_assertions = 2: a failed assertion shows its values whole, never
    "...Full output truncated" or a repr cut off mid-word (pytest shortens both below 2)."""
    message = "gke-cluster (cluster 'gpu-prod'): " + "masterAuthorizedNetworksConfig.cidrBlocks[0].cidrBlock opens the control plane; " * 8
    assert request.config.get_verbosity(pytest.Config.VERBOSITY_ASSERTIONS) >= 2
    [explanation] = request.config.hook.pytest_assertrepr_compare(config=request.config, op="==", left=[("mandatory", message)], right=[])
    assert any(message in line for line in explanation), explanation


def test_every_shipped_stack_file_is_checked(runs):
    """The tests below that name stacks run on the shipped ones; each of those is evaluated."""
    assert sorted(runs) == list_stacks(SHIPPED_DIR)


def test_committed_stacks_contain_what_the_pack_checks(runs):
    """Guards the test above against passing because a resource type disappeared or was renamed."""
    types = {r.type for run in runs.values() for r in run.registrations}
    expected = {
        P.GKE_CLUSTER,
        P.GKE_NODE_POOL,
        "gcp:projects/iAMMember:IAMMember",
        "gcp:serviceaccount/iAMMember:IAMMember",
        P.CUSTOM_ROLES[0],
        P.HELM_RELEASES[0],
        P.NODE_PROVIDER,
        P.VIRTUAL_CLUSTER_INSTANCE,
    }
    assert expected <= types


def test_every_policy_object_is_in_the_pack():
    defined = [v for v in vars(P).values() if isinstance(v, (ResourceValidationPolicy, StackValidationPolicy))]
    assert {id(p) for p in defined} == {id(p) for p in P.POLICIES}
    names = [p.name for p in P.POLICIES]
    assert len(names) == len(set(names))


def test_enforcement_levels():
    levels = {p.name: p.enforcement_level for p in P.POLICIES}
    assert levels.pop(P.GPU_CEILING_NON_PROD) == EnforcementLevel.ADVISORY
    assert levels.pop(P.public_ranges_nonprod.name) == EnforcementLevel.ADVISORY
    assert set(levels.values()) == {EnforcementLevel.MANDATORY}


def test_pack_runtime_pins_match_the_program():
    pack, program = requirement_pins(POLICY_DIR / "requirements.txt"), {**requirement_pins(PROJECT_DIR / "requirements.txt"), **requirement_pins(PROJECT_DIR / "requirements-dev.txt")}
    assert set(pack) == {"pulumi-policy", "pulumi", "pyyaml"}
    assert {name: program.get(name) for name in pack} == pack


def test_policy_pack_project_file():
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"]
    assert project["version"] and project["description"]


# --- a. GKE --------------------------------------------------------------------------------------


def test_gke_hardening_passes_real_clusters_and_node_pools(runs):
    for typ in (P.GKE_CLUSTER, P.GKE_NODE_POOL):
        for run, reg in real(runs, typ, ("dev", "prod")):
            assert violations(P.gke_hardening, args_of(run, reg)) == [], reg.name


def _drop(props: dict, *path: str) -> None:
    for key in path[:-1]:
        props = props[key]
    del props[path[-1]]


def _set(props: dict, value: Any, *path: str) -> None:
    for key in path[:-1]:
        props = props.setdefault(key, {})
    props[path[-1]] = value


@pytest.mark.parametrize(
    "break_it, message",
    [
        (
            lambda p: _drop(p, "workloadIdentityConfig"),
            "workloadIdentityConfig.workloadPool: not set; allowed: 'acme-ml-dev.svc.id.goog' (Workload Identity on)",
        ),
        (
            lambda p: _set(p, "other-project.svc.id.goog", "workloadIdentityConfig", "workloadPool"),
            "workloadIdentityConfig.workloadPool: 'other-project.svc.id.goog' is not allowed; allowed: 'acme-ml-dev.svc.id.goog'",
        ),
        (lambda p: _set(p, False, "enableShieldedNodes"), "enableShieldedNodes: false is not allowed; allowed: true"),
        (lambda p: _drop(p, "enableShieldedNodes"), "enableShieldedNodes: not set; allowed: true, set explicitly"),
        (lambda p: _set(p, True, "enableLegacyAbac"), "enableLegacyAbac: true is not allowed; allowed: false or unset"),
        (
            lambda p: _set(p, True, "masterAuth", "clientCertificateConfig", "issueClientCertificate"),
            "masterAuth.clientCertificateConfig.issueClientCertificate: true is not allowed; allowed: false or unset",
        ),
        (
            lambda p: _set(p, "GCE_METADATA", "nodeConfig", "workloadMetadataConfig", "mode"),
            "nodeConfig.workloadMetadataConfig.mode: 'GCE_METADATA' is not allowed; allowed: 'GKE_METADATA'",
        ),
        (
            lambda p: _set(p, [{"name": "extra", "nodeConfig": {}}], "nodePools"),
            "nodePools[0].nodeConfig.workloadMetadataConfig.mode: not set; allowed: 'GKE_METADATA'",
        ),
    ],
)
def test_gke_hardening_rejects_a_broken_cluster(runs, break_it, message):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    break_it(props)
    found = violations(P.gke_hardening, args_of(run, cluster, props=props))
    assert len(found) == 1, found
    assert found[0].startswith(f"gke-cluster (cluster 'gpu-dev'): {message}"), found[0]


def test_gke_hardening_rejects_a_node_pool_without_gke_metadata(runs):
    run, pool = one(runs, "prod", P.GKE_NODE_POOL)
    props = copy.deepcopy(pool.plain_inputs)
    props["nodeConfig"]["workloadMetadataConfig"] = {"mode": "MODE_UNSPECIFIED"}
    assert violations(P.gke_hardening, args_of(run, pool, props=props)) == [
        "gke-system (node pool 'system' of cluster 'gpu-prod'): nodeConfig.workloadMetadataConfig.mode: 'MODE_UNSPECIFIED' is not allowed; allowed: 'GKE_METADATA' "
        "(pods reach Google APIs through Workload Identity, never as the node's service account)"
    ]
    del props["nodeConfig"]
    assert len(violations(P.gke_hardening, args_of(run, pool, props=props))) == 1


def test_prod_deletion_protection_passes_real_clusters(runs):
    for run, reg in real(runs, P.GKE_CLUSTER, ("dev", "prod")):
        assert violations(P.gke_prod_deletion_protection, args_of(run, reg)) == [], reg.name
    _, prod_cluster = one(runs, "prod", P.GKE_CLUSTER)
    assert prod_cluster.plain_inputs["resourceLabels"][P.CLUSTER_ENVIRONMENT_LABEL] == "prod"  # not vacuous


def test_prod_cluster_without_deletion_protection(runs):
    run, cluster = one(runs, "prod", P.GKE_CLUSTER)
    props = {**cluster.plain_inputs, "deletionProtection": False}
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props)) == [
        "gke-cluster (cluster 'gpu-prod'): deletionProtection: false is not allowed; allowed: true for a prod cluster "
        "(stack prod is environment 'prod')"
    ]
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, protect=False)) == [
        "gke-cluster (cluster 'gpu-prod'): resource option protect: false is not allowed; allowed: true for a prod cluster "
        "(stack prod is environment 'prod')"
    ]


def test_a_prod_cluster_is_prod_by_its_stack_whatever_its_label_says(runs):
    """Without its label (nor the provider's default one), or labelled dev, a cluster of stack prod
    is still prod; and a label that disagrees with the stack is rejected itself."""
    run, cluster = one(runs, "prod", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    del props["resourceLabels"][P.CLUSTER_ENVIRONMENT_LABEL]
    props["deletionProtection"] = False
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props, provider=None, protect=False)) == [
        "gke-cluster (cluster 'gpu-prod'): deletionProtection: false is not allowed; allowed: true for a prod cluster (stack prod is environment 'prod')",
        "gke-cluster (cluster 'gpu-prod'): resource option protect: false is not allowed; allowed: true for a prod cluster (stack prod is environment 'prod')",
    ]
    props["resourceLabels"][P.CLUSTER_ENVIRONMENT_LABEL] = "dev"
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props)) == [
        "gke-cluster (cluster 'gpu-prod'): resourceLabels['gpu-platform-environment']: 'dev' is not allowed; allowed: 'prod', the environment "
        "of stack prod (or unset)",
        "gke-cluster (cluster 'gpu-prod'): deletionProtection: false is not allowed; allowed: true for a prod cluster (stack prod is environment 'prod')",
    ]


def test_a_dev_cluster_labelled_prod_is_rejected_for_its_label_only(runs):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    props = copy.deepcopy(cluster.plain_inputs)
    props["resourceLabels"][P.CLUSTER_ENVIRONMENT_LABEL] = "prod"
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props)) == [
        "gke-cluster (cluster 'gpu-dev'): resourceLabels['gpu-platform-environment']: 'prod' is not allowed; allowed: 'dev', the environment "
        "of stack dev (or unset)"
    ]


def test_for_a_stack_the_data_does_not_know_the_label_decides(runs):
    """The cluster's own label, else the provider's default one; neither: prod (fail closed)."""
    run, cluster = one(runs, "prod", P.GKE_CLUSTER)
    unknown = urn_of(cluster.type, cluster.name, stack="mallory")
    props = copy.deepcopy(cluster.plain_inputs)
    del props["resourceLabels"][P.CLUSTER_ENVIRONMENT_LABEL]
    props["deletionProtection"] = False
    provider = run.by_urn()[cluster.provider.rsplit("::", 1)[0]]
    assert json.loads(provider.plain_inputs["defaultLabels"])[P.CLUSTER_ENVIRONMENT_LABEL] == "prod"  # JSON-encoded, as the engine sends it
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props, urn=unknown)) == [
        "gke-cluster (cluster 'gpu-prod'): deletionProtection: false is not allowed; allowed: true for a prod cluster "
        "(the GCP provider's defaultLabels['gpu-platform-environment'] is 'prod')"
    ]
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster, props=props, urn=unknown, provider=None)) == [
        "gke-cluster (cluster 'gpu-prod'): deletionProtection: false is not allowed; allowed: true for a prod cluster (stack 'mallory' is not "
        "in the pack's data and resourceLabels['gpu-platform-environment'] (nor the GCP provider's defaultLabels['gpu-platform-environment']) "
        "is not set)"
    ]
    dev_run, dev_cluster = one(runs, "dev", P.GKE_CLUSTER)
    assert violations(P.gke_prod_deletion_protection, args_of(dev_run, dev_cluster, urn=urn_of(dev_cluster.type, dev_cluster.name, stack="mallory"))) == []


def test_dev_cluster_may_go_without_deletion_protection(runs):
    run, cluster = one(runs, "dev", P.GKE_CLUSTER)
    assert cluster.plain_inputs["deletionProtection"] is False and not cluster.protect
    assert violations(P.gke_prod_deletion_protection, args_of(run, cluster)) == []


# --- b. IAM --------------------------------------------------------------------------------------

IAM_TYPES = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:serviceaccount/iAMMember:IAMMember",
)


def test_no_service_account_keys(runs):
    for run in runs.values():
        assert run.of_type(P.SERVICE_ACCOUNT_KEY) == []
        for reg in run.registrations:
            assert violations(P.no_service_account_keys, args_of(run, reg)) == []
    key = make_args(P.SERVICE_ACCOUNT_KEY, {"serviceAccountId": "projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com"}, name="ci-key")
    found = violations(P.no_service_account_keys, key)
    assert found == [
        "ci-key (key of 'projects/p/serviceAccounts/sa@p.iam.gserviceaccount.com'): a service account key is not allowed; allowed: Workload Identity "
        "(pods) and Workload Identity Federation (CI), which need no long-lived key"
    ]


def test_real_iam_grants_pass(runs):
    for typ in IAM_TYPES:
        for run, reg in real(runs, typ):
            for policy in (P.no_basic_roles, P.workload_identity_members):
                assert violations(policy, args_of(run, reg)) == [], (policy.name, reg.name)


@pytest.mark.parametrize(
    "typ, props, message",
    [
        (
            "gcp:projects/iAMMember:IAMMember",
            {"project": "acme-ml-dev", "role": "roles/editor", "member": "serviceAccount:x@acme-ml-dev.iam.gserviceaccount.com"},
            "grant (on project 'acme-ml-dev'): role: 'roles/editor' is a basic role and not allowed",
        ),
        (
            "gcp:projects/iAMBinding:IAMBinding",
            {"project": "acme-ml-dev", "role": "roles/owner", "members": ["user:a@example.com"]},
            "grant (on project 'acme-ml-dev'): role: 'roles/owner' is a basic role and not allowed",
        ),
        (
            "gcp:serviceaccount/iAMBinding:IAMBinding",
            {"serviceAccountId": "projects/p/serviceAccounts/x", "role": "roles/viewer", "members": ["group:g@example.com"]},
            "grant (on service account 'projects/p/serviceAccounts/x'): role: 'roles/viewer' is a basic role and not allowed",
        ),
        (
            "gcp:projects/iAMPolicy:IAMPolicy",
            {
                "project": "acme-ml-dev",
                "policyData": json.dumps(
                    {"bindings": [{"role": "roles/compute.viewer", "members": ["user:a@example.com"]}, {"role": "roles/viewer", "members": ["user:b@example.com"]}]}
                ),
            },
            "grant (on project 'acme-ml-dev'): policyData.bindings[1].role: 'roles/viewer' is a basic role and not allowed",
        ),
        (
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            {"bucket": "b", "role": "roles/owner", "member": "user:a@example.com"},
            "grant (on bucket 'b'): role: 'roles/owner' is a basic role and not allowed",
        ),
    ],
)
def test_basic_roles_are_rejected(typ, props, message):
    found = violations(P.no_basic_roles, make_args(typ, props, name="grant"))
    assert len(found) == 1 and found[0].startswith(message), found


def test_predefined_role_that_merely_ends_like_a_basic_one_passes():
    props = {"project": "p", "role": "roles/compute.viewer", "member": "user:a@example.com"}
    assert violations(P.no_basic_roles, make_args("gcp:projects/iAMMember:IAMMember", props)) == []


def test_real_workload_identity_member_is_exact(runs):
    for stack in ("dev", "prod"):
        run, reg = one(runs, stack, "gcp:serviceaccount/iAMMember:IAMMember", "workload-identity")
        assert reg.plain_inputs["role"] == P.WORKLOAD_IDENTITY_USER
        assert violations(P.workload_identity_members, args_of(run, reg)) == []


@pytest.mark.parametrize(
    "member",
    [
        "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/*]",
        "serviceAccount:acme-ml-dev.svc.id.goog[*/loft]",
        "serviceAccount:acme-ml-dev.svc.id.goog",
        "principalSet://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/acme-ml-dev.svc.id.goog/namespace/vcluster-platform",
        "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com",
        "allAuthenticatedUsers",
    ],
)
def test_workload_identity_user_rejects_anything_but_one_ksa(runs, member):
    run, reg = one(runs, "dev", "gcp:serviceaccount/iAMMember:IAMMember", "workload-identity")
    props = {**reg.plain_inputs, "member": member}
    found = violations(P.workload_identity_members, args_of(run, reg, props=props))
    assert found == [
        "auto-nodes-workload-identity (on service account 'vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com'): "
        f"member: {member!r} is not allowed; allowed: for roles/iam.workloadIdentityUser, exactly one Kubernetes "
        "service account, serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>] (no wildcard), or one GitHub workflow "
        "identity: principal://…/workloadIdentityPools/<pool>/subject/<sub> or principalSet://…/workloadIdentityPools/<pool>/"
        "attribute.{repository|repository_id}/<value> (never a whole pool, a namespace or repository_owner)"
    ]


def test_workload_identity_user_in_bindings_and_policies():
    good = "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/loft]"
    binding = {"serviceAccountId": "x", "role": P.WORKLOAD_IDENTITY_USER, "members": [good, "serviceAccount:acme-ml-dev.svc.id.goog[team-a/*]"]}
    found = violations(P.workload_identity_members, make_args("gcp:serviceaccount/iAMBinding:IAMBinding", binding, name="wi"))
    assert len(found) == 1 and found[0].startswith("wi (on service account 'x'): members[1]: 'serviceAccount:acme-ml-dev.svc.id.goog[team-a/*]' is not allowed")
    policy = {"serviceAccountId": "x", "policyData": json.dumps({"bindings": [{"role": P.WORKLOAD_IDENTITY_USER, "members": ["allUsers"]}]})}
    found = violations(P.workload_identity_members, make_args("gcp:serviceaccount/iAMPolicy:IAMPolicy", policy, name="wi"))
    assert len(found) == 1 and found[0].startswith("wi (on service account 'x'): policyData.bindings[0].members[0]: 'allUsers' is not allowed")
    binding["members"] = [good]
    assert violations(P.workload_identity_members, make_args("gcp:serviceaccount/iAMBinding:IAMBinding", binding)) == []


# --- f. IAM custom roles (issue #7) ----------------------------------------------------------------


def test_real_custom_roles_hold_no_forbidden_permission(runs):
    for run, reg in real(runs, P.CUSTOM_ROLES[0], ("dev", "prod")):
        assert violations(P.custom_role_permissions, args_of(run, reg)) == [], reg.name


def test_legacy_mode_role_violates_on_purpose(legacy_dev_run, legacy_dev_values):
    run = legacy_dev_run
    # Judged by its own record, as once `make policy-data` recorded the stack in legacy mode (no
    # network, node account or NAT addresses of ours for its instances to name).
    from tools.policy_data import stack_entry

    record = {**P.STACKS, "dev": stack_entry("dev", run, legacy_dev_values, None)}
    role = run.one(P.CUSTOM_ROLES[0], "auto-nodes-role")
    forbidden = load_roles().forbidden_in_any_role
    held = [p for p in role.plain_inputs["permissions"] if p in forbidden]
    assert "resourcemanager.projects.setIamPolicy" in held and "iam.roles.create" in held
    found = violations(P.custom_role_permissions, args_of(run, role))
    assert len(found) == 1
    assert found[0].startswith(f"auto-nodes-role (role 'gpuPlatform_dev_autoNodes'): permissions: {', '.join(held)} are not allowed in any custom role")
    # What the legacy stack violates is its broad role, its unconditioned binding and the control
    # planes open to any joining node (the official template's NAT addresses are Google's pick);
    # lowering those four policies through policy config (docs/guardrails.md "Guardrails") clears the way.
    with pack_stacks(record):
        assert sorted({(p, n) for p, n, _ in mandatory(analyze(run))}) == [
            (P.custom_role_least_privilege.name, "auto-nodes-role"),
            (P.custom_role_permissions.name, "auto-nodes-role"),
            (P.conditioned_grants.name, "auto-nodes-role-binding"),
            (P.control_plane_isolation.name, "tenant-nlp-instance"),
            (P.control_plane_isolation.name, "tenant-speech-instance"),
        ]
        lowered = {p.name: EnforcementLevel.ADVISORY for p in P.LEGACY_MODE_POLICIES}
        assert mandatory(analyze(run, lowered)) == []
    assert "legacyInfrastructure" in P.custom_role_permissions.description


def test_organization_custom_role_is_checked_too():
    props = {"orgId": "123", "roleId": "x", "title": "x", "permissions": ["compute.instances.get", "iam.serviceAccountKeys.create"]}
    found = violations(P.custom_role_permissions, make_args(P.CUSTOM_ROLES[1], props, name="org-role"))
    assert len(found) == 1 and found[0].startswith("org-role (role 'x'): permissions: iam.serviceAccountKeys.create is not allowed in any custom role")


# --- c. Supply chain ------------------------------------------------------------------------------


def test_real_helm_release_is_pinned(runs):
    for run, reg in real(runs, P.HELM_RELEASES[0], ("dev", "prod")):
        assert violations(P.helm_release_version, args_of(run, reg)) == []


@pytest.mark.parametrize("version", [None, "", "*", "latest", "^1", "~1.2", ">=4.0.0", "1.x", "4.11", "4.11.*", "4.11.2 || 4.12.0"])
def test_helm_release_without_an_exact_version(runs, version):
    run, reg = one(runs, "dev", P.HELM_RELEASES[0])
    props = copy.deepcopy(reg.plain_inputs)
    props.pop("version")
    if version is not None:
        props["version"] = version
    found = violations(P.helm_release_version, args_of(run, reg, props=props))
    assert len(found) == 1 and found[0].startswith("platform-release (chart 'vcluster-platform'): version: "), found
    assert "allowed: an exact release such as 4.11.2" in found[0]


@pytest.mark.parametrize("version", ["4.11.2", "v25.10.1", "1.0.0-rc.1", "0.36.1+build.5"])
def test_exact_chart_versions_pass(version):
    props = {"chart": "c", "version": version}
    assert violations(P.helm_release_version, make_args(P.HELM_RELEASES[0], props)) == []


def test_real_instances_pin_their_charts(runs):
    for run, reg in real(runs, P.VIRTUAL_CLUSTER_INSTANCE, ("dev", "team-vision-dev")):
        assert violations(P.instance_chart_versions, args_of(run, reg)) == [], reg.name


def test_instance_with_unpinned_charts(runs):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    del props["spec"]["template"]["helmRelease"]["chart"]["version"]
    props["spec"]["template"]["charts"][0]["version"] = "latest"
    found = violations(P.instance_chart_versions, args_of(run, reg, props=props))
    assert [m.split(": ", 2)[:2] for m in found] == [
        ["tenant-nlp-instance (instance 'p-nlp/nlp')", "spec.template.helmRelease.chart.version (chart 'vcluster')"],
        ["tenant-nlp-instance (instance 'p-nlp/nlp')", "spec.template.charts[0].version (chart 'gpu-operator')"],
    ]
    assert "is not set, so the newest chart would be installed" in found[0]
    assert "'latest' is not an exact version" in found[1]


def test_real_node_provider_templates_are_pinned(runs):
    for run, reg in real(runs, P.NODE_PROVIDER, ("dev", "prod")):
        assert violations(P.node_provider_templates, args_of(run, reg)) == []


def _kubernetes_git(props: dict) -> dict:
    """The kubernetes environment template of a NodeProvider edited to come from git (ours is
    inline): the upstream one, pinned by commit."""
    git = {"repository": "https://github.com/loft-sh/vcluster-auto-nodes-gcp.git", "commit": "3244616f0b4a59f75e28aec8fa3248ead06738eb", "subPath": "environment/kubernetes"}
    props["spec"]["terraform"]["nodeEnvironmentTemplate"]["kubernetes"] = {"git": git}
    return git


@pytest.mark.parametrize(
    "pin, message",
    [
        ({"branch": "main"}, "is pinned by only branch 'main'"),
        ({}, "is pinned by nothing (the default branch)"),
        ({"commit": "3244616", "branch": "main"}, ".commit: '3244616' (") ,
        ({"tag": "v0.*"}, ".tag: 'v0.*' ("),
    ],
)
def test_node_provider_git_source_not_pinned(runs, pin, message):
    run, reg = one(runs, "dev", P.NODE_PROVIDER)
    props = copy.deepcopy(reg.plain_inputs)
    git = _kubernetes_git(props)
    for key in ("commit", "tag", "branch"):
        git.pop(key, None)
    git.update(pin)
    found = violations(P.node_provider_templates, args_of(run, reg, props=props))
    assert len(found) == 1, found
    assert found[0].startswith("gpu-nodes-node-provider (NodeProvider 'gcp-gpu'): spec.terraform.nodeEnvironmentTemplate.kubernetes.git")
    assert message in found[0] and "allowed: a tag, or a full 40-hex-digit commit" in found[0]


def test_node_provider_git_source_pinned_by_tag_passes(runs):
    run, reg = one(runs, "dev", P.NODE_PROVIDER)
    props = copy.deepcopy(reg.plain_inputs)
    git = _kubernetes_git(props)
    del git["commit"]
    git["tag"] = "v0.1.1"
    assert violations(P.node_provider_templates, args_of(run, reg, props=props)) == []


def test_node_provider_git_source_in_a_node_type_is_found(runs):
    run, reg = one(runs, "dev", P.NODE_PROVIDER)
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["terraform"]["nodeTypes"][1]["nodeTemplate"] = {"git": {"repository": "https://example.com/t.git", "branch": "dev"}}
    found = violations(P.node_provider_templates, args_of(run, reg, props=props))
    assert len(found) == 1 and found[0].startswith(
        "gpu-nodes-node-provider (NodeProvider 'gcp-gpu'): spec.terraform.nodeTypes[1].nodeTemplate.git: 'https://example.com/t.git'"
    )


# --- d. Tenancy ----------------------------------------------------------------------------------


def test_real_instances_are_isolated(runs):
    for run, reg in real(runs, P.VIRTUAL_CLUSTER_INSTANCE, ("dev", "team-vision-dev")):
        assert violations(P.tenant_isolation, args_of(run, reg)) == [], reg.name


def _untaint(document: dict) -> None:
    del pools_of(document)["l4-2x"]["taints"]


def _no_consolidation(document: dict) -> None:
    del pools_of(document)["t4-1x-spot"]["disruption"]["consolidateAfter"]


def _unbounded_system_pool(document: dict) -> None:
    del pools_of(document)["system"]["limits"]


def _open_accelerator(document: dict) -> None:
    system = pools_of(document)["system"]
    system["nodeTypeSelector"] = [s for s in system["nodeTypeSelector"] if s["property"] != "gpu-platform/accelerator"]


FIELD = "spec.template.helmRelease.values privateNodes.autoNodes[provider='gcp-gpu']"


@pytest.mark.parametrize(
    "edit, messages",
    [
        (
            lambda d: d["privateNodes"].update(enabled=False),
            ["spec.template.helmRelease.values privateNodes.enabled: false is not allowed; allowed: true"],
        ),
        (_untaint, [f"{FIELD}.dynamic[name='l4-2x'].taints: none lacks the GPU taint; allowed: a taint {{key: nvidia.com/gpu, effect: NoSchedule}}"]),
        (_no_consolidation, [f"{FIELD}.dynamic[name='t4-1x-spot'].disruption.consolidateAfter: not set; allowed: a duration"]),
        (_unbounded_system_pool, [f"{FIELD}.dynamic[name='system'].limits: not set; allowed: limits such as"]),
        # A pool that leaves the accelerator open admits GPU node types, so it must be tainted too.
        (_open_accelerator, [f"{FIELD}.dynamic[name='system'].taints: none lacks the GPU taint"]),
    ],
)
def test_instance_isolation_violations(runs, edit, messages):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)
    found = violations(P.tenant_isolation, args_of(run, reg, props=edit_values(reg.plain_inputs, edit)))
    assert len(found) == len(messages), found
    for got, expected in zip(found, messages):
        assert got.startswith(f"tenant-vision-instance (instance 'p-vision/vision'): {expected}"), got


@pytest.mark.parametrize(
    "values, message",
    [
        (None, "spec.template.helmRelease.values: is not set; the instance must carry its vcluster.yaml inline"),
        ("privateNodes: [unclosed", "spec.template.helmRelease.values: is not a vcluster.yaml mapping"),
        ("- a list", "spec.template.helmRelease.values: is not a vcluster.yaml mapping"),
        ("privateNodes: true", "spec.template.helmRelease.values: not shaped like vcluster.yaml"),
    ],
)
def test_instance_without_readable_values(runs, values, message):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "speech")
    props = copy.deepcopy(reg.plain_inputs)
    release = props["spec"]["template"]["helmRelease"]
    if values is None:
        del release["values"]
    else:
        release["values"] = values
    found = violations(P.tenant_isolation, args_of(run, reg, props=props))
    assert len(found) == 1 and found[0].startswith(f"tenant-speech-instance (instance 'p-speech/speech'): {message}"), found


def test_unknown_values_defer_to_the_update_instead_of_failing(runs):
    """During preview a tenant's values are unknown until its network exists: the validators must
    raise the SDK's UnknownValueError (an advisory "can't run during preview" note), not report a
    violation or pass silently."""
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["template"]["helmRelease"]["values"] = UNKNOWN_STRING_VALUE
    for policy in (
        P.tenant_isolation,
        P.concrete_scope,
        P.gpu_ceiling_nonprod,
        P.single_node_provider,
        P.unprivileged_control_plane,
        P.no_host_cluster_role,
        P.values_by_design,
        P.control_plane_isolation,
    ):
        with pytest.raises(UnknownValueError):
            violations(policy, args_of(run, reg, props=props))
    assert violations(P.instance_chart_versions, args_of(run, reg, props=props)) == []


def test_real_scopes_are_concrete(runs):
    for typ in (P.NODE_PROVIDER, P.VIRTUAL_CLUSTER_INSTANCE):
        for run, reg in real(runs, typ):
            assert violations(P.concrete_scope, args_of(run, reg)) == [], reg.name


@pytest.mark.parametrize("key, value", [("project", "acme-ml-dev"), ("region", "europe-west4"), ("project", "*")])
def test_node_provider_sets_no_scope(runs, key, value):
    """Each tenant's auto-nodes entry sets project and region; the same key on the NodeProvider,
    even concrete, would conflict with it (the team's project in project mode)."""
    run, reg = one(runs, "dev", P.NODE_PROVIDER)
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["properties"] = {key: value}
    assert violations(P.concrete_scope, args_of(run, reg, props=props)) == [
        f"gpu-nodes-node-provider (NodeProvider 'gcp-gpu'): spec.properties.{key}: {value!r} is not allowed; allowed: no {key} on the NodeProvider "
        f"(each tenant's auto-nodes entry sets its own {key}; two values would conflict)"
    ]


def test_node_type_scope(runs):
    run, reg = one(runs, "dev", P.NODE_PROVIDER)
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["terraform"]["nodeTypes"][0]["properties"]["region"] = "*"
    found = violations(P.concrete_scope, args_of(run, reg, props=props))
    assert len(found) == 1 and found[0].startswith("gpu-nodes-node-provider (NodeProvider 'gcp-gpu'): spec.terraform.nodeTypes[0].properties.region: '*' is not allowed")


def test_auto_nodes_scope_wildcard(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def widen(document):
        document["privateNodes"]["autoNodes"][0]["properties"].update(project="*", region=" ")

    found = violations(P.concrete_scope, args_of(run, reg, props=edit_values(reg.plain_inputs, widen)))
    prefix = "tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.values privateNodes.autoNodes[0].properties"
    assert [m.split(";")[0] for m in found] == [f"{prefix}.project: '*' is a wildcard", f"{prefix}.region: is empty"]


@pytest.mark.parametrize("key", ["project", "region"])
def test_auto_nodes_scope_missing(runs, key):
    """Nothing else supplies them: the NodeProvider sets neither."""
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def drop(document):
        del document["privateNodes"]["autoNodes"][0]["properties"][key]

    found = violations(P.concrete_scope, args_of(run, reg, props=edit_values(reg.plain_inputs, drop)))
    assert [m.split(";")[0] for m in found] == [
        f"tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.values privateNodes.autoNodes[0].properties.{key}: is not set"
    ]


# --- e. Cost -------------------------------------------------------------------------------------


def _relabel(props: dict, environment: str | None) -> dict:
    props = copy.deepcopy(props)
    labels = props["metadata"]["labels"]
    labels.pop(P.INSTANCE_ENVIRONMENT_LABEL)
    if environment is not None:
        labels[P.INSTANCE_ENVIRONMENT_LABEL] = environment
    return props


def _unknown_stack(reg) -> str:
    """The instance's URN in a stack the pack's record does not know: its label then decides."""
    return urn_of(reg.type, reg.name, stack="mallory")


def test_real_tenants_are_within_the_default_ceiling(runs):
    for run, reg in real(runs, P.VIRTUAL_CLUSTER_INSTANCE):
        for policy in (P.gpu_ceiling_nonprod, P.gpu_ceiling_prod):
            assert violations(policy, args_of(run, reg)) == [], (policy.name, reg.name)
            judged_as_prod = args_of(run, reg, props=_relabel(reg.plain_inputs, "prod"), urn=_unknown_stack(reg))
            assert violations(policy, judged_as_prod) == [], (policy.name, reg.name)


def test_ceiling_config_and_environment_class(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)  # l4-2x: 4 GPUs, t4-1x-spot: 2
    config = {P.MAX_GPUS_CONFIG: 5}
    dev = args_of(run, reg, config=config)
    found = violations(P.gpu_ceiling_nonprod, dev)
    assert found == [
        "tenant-vision-instance (instance 'p-vision/vision'): spec.template.helmRelease.values privateNodes.autoNodes[] pools: the tenant's GPU "
        "limit is 6 (dynamic l4-2x=4, dynamic t4-1x-spot=2) for environment 'dev' (stack team-vision-dev is environment 'dev'); allowed: at most 5 "
        "(policy config tenant-gpu-ceiling-nonprod.maxGpusPerTenant), with an nvidia.com/gpu limit on every dynamic GPU pool "
        "and a static pool's GPUs per node fixed by its nodeTypeSelector"
    ]
    assert violations(P.gpu_ceiling_prod, dev) == []  # a dev instance is only the advisory policy's business
    assert violations(P.gpu_ceiling_nonprod, args_of(run, reg, config={P.MAX_GPUS_CONFIG: 6})) == []

    # For a stack the pack's record does not know, the label decides; a missing or unexpected one
    # counts as prod (fail closed).
    for environment in ("prod", None, "qa"):
        props = _relabel(reg.plain_inputs, environment)
        assert violations(P.gpu_ceiling_nonprod, args_of(run, reg, props=props, config=config, urn=_unknown_stack(reg))) == []
        found = violations(P.gpu_ceiling_prod, args_of(run, reg, props=props, config=config, urn=_unknown_stack(reg)))
        assert len(found) == 1 and "the tenant's GPU limit is 6" in found[0], environment


def test_an_instance_is_of_its_stacks_environment_whatever_its_label_says(runs):
    """A dev tenant labelled prod is judged as dev, a prod tenant labelled dev (or not at all) as
    prod; the label that disagrees with its stack is rejected (by the mandatory policy, once)."""
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)
    config = {P.MAX_GPUS_CONFIG: 5}
    labelled_prod = args_of(run, reg, props=_relabel(reg.plain_inputs, "prod"), config=config)
    [advisory] = violations(P.gpu_ceiling_nonprod, labelled_prod)
    assert "the tenant's GPU limit is 6 (dynamic l4-2x=4, dynamic t4-1x-spot=2) for environment 'dev' (stack team-vision-dev is environment 'dev')" in advisory
    assert violations(P.gpu_ceiling_prod, labelled_prod) == [
        "tenant-vision-instance (instance 'p-vision/vision'): metadata.labels['gpu-platform/environment']: 'prod' is not allowed; allowed: 'dev', "
        "the environment of stack team-vision-dev (or unset)"
    ]

    run, reg = one(runs, "prod", P.VIRTUAL_CLUSTER_INSTANCE)  # research: a100 4 GPUs, l4 spot 4, h100 8
    for environment in ("dev", None):
        judged = args_of(run, reg, props=_relabel(reg.plain_inputs, environment), config={P.MAX_GPUS_CONFIG: 15})
        assert violations(P.gpu_ceiling_nonprod, judged) == []
        found = violations(P.gpu_ceiling_prod, judged)
        label = [] if environment is None else [
            "tenant-research-instance (instance 'p-research/research'): metadata.labels['gpu-platform/environment']: 'dev' is not allowed; "
            "allowed: 'prod', the environment of stack prod (or unset)"
        ]
        assert found[:-1] == label and "the tenant's GPU limit is 16 " in found[-1] and "(stack prod is environment 'prod')" in found[-1], found


def test_default_ceiling_is_16(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

    def grow(document, gpus):
        pools_of(document)["l4-2x"]["limits"]["nvidia.com/gpu"] = str(gpus)

    at_ceiling = edit_values(reg.plain_inputs, lambda d: grow(d, 14))  # 14 + 2 = 16
    above = edit_values(reg.plain_inputs, lambda d: grow(d, 15))
    assert violations(P.gpu_ceiling_nonprod, args_of(run, reg, props=at_ceiling)) == []
    found = violations(P.gpu_ceiling_nonprod, args_of(run, reg, props=above))
    assert len(found) == 1 and "GPU limit is 17" in found[0] and "at most 16" in found[0]
    # The CLI hands numbers over as JSON doubles.
    assert violations(P.gpu_ceiling_nonprod, args_of(run, reg, props=above, config={P.MAX_GPUS_CONFIG: 17.0})) == []


def test_gpu_pool_without_a_gpu_limit_is_unbounded(runs):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)
    props = edit_values(reg.plain_inputs, lambda d: pools_of(d)["t4-1x-spot"]["limits"].pop("nvidia.com/gpu"))
    found = violations(P.gpu_ceiling_prod, args_of(run, reg, props=_relabel(props, "prod"), urn=_unknown_stack(reg)))
    assert len(found) == 1 and "GPU limit is unbounded (dynamic l4-2x=4, dynamic t4-1x-spot=unbounded)" in found[0]


def test_ceiling_schema():
    for policy in (P.gpu_ceiling_nonprod, P.gpu_ceiling_prod):
        schema = policy.config_schema.properties[P.MAX_GPUS_CONFIG]
        assert schema["type"] == "integer" and schema["default"] == 16


# --- The pack as the CLI runs it -----------------------------------------------------------------


def test_pack_serves_the_policies_over_grpc(runs, tmp_path, shipped_records_dir):
    """Starts policy/ the way the CLI's Python analyzer does and talks to it: proves the imports
    resolve from policy/, the pack lists every policy with its level, and the SDK's own servicer
    applies config and levels."""
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2

    with served_pack(pack_copy_judging_the_shipped_stacks(tmp_path, shipped_records_dir), cwd=tmp_path) as analyzer:
        info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        served = {p.name: p.enforcementLevel for p in info.policies}
        assert served == {
            p.name: analyzer_pb2.ADVISORY if p.enforcement_level == EnforcementLevel.ADVISORY else analyzer_pb2.MANDATORY
            for p in P.POLICIES
        }
        run, instance = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

        def remote():
            return analyze_remote(analyzer, instance.type, instance.plain_inputs, instance.urn, instance.name)

        assert [d.message for d in remote()] == []  # each violation by its message, whole
        config = analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.ADVISORY)
        config.properties.update({P.MAX_GPUS_CONFIG: 5})
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={P.GPU_CEILING_NON_PROD: config}), timeout=30)
        [diagnostic] = remote()
        assert diagnostic.policyName == P.GPU_CEILING_NON_PROD
        assert diagnostic.enforcementLevel == analyzer_pb2.ADVISORY
        assert "the tenant's GPU limit is 6" in diagnostic.message and "at most 5" in diagnostic.message


def test_an_unknown_member_defers_the_iam_policies(runs):
    """A new service account's e-mail is unknown during the first preview: the grant is checked
    during `pulumi up`, never waved through."""
    run, reg = one(runs, "dev", "gcp:projects/iAMMember:IAMMember", "tenant-nlp-project-platform-vm-role")
    props = {**reg.plain_inputs, "member": UNKNOWN_STRING_VALUE}
    for policy in (P.grant_allow_list, P.workload_identity_members, P.conditioned_grants):
        with pytest.raises(UnknownValueError):
            violations(policy, args_of(run, reg, props=props))


def test_a_name_unknown_during_preview_does_not_defer_a_policy(runs):
    """Naming the resource reads fields no check needs (here the account a grant is bound on, the
    e-mail of an account created in the same update): unknown, they are named so, not waited for."""
    run, reg = one(runs, "dev", "gcp:serviceaccount/iAMMember:IAMMember", "workload-identity")
    props = {**reg.plain_inputs, "serviceAccountId": UNKNOWN_STRING_VALUE, "member": "allUsers"}
    [message] = violations(P.workload_identity_members, args_of(run, reg, props=props))
    assert message.startswith("auto-nodes-workload-identity (on service account (known after apply)): member: 'allUsers' is not allowed")
