"""The CrossGuard pack's (policy/) GKE and IAM policies: each passes the clusters, node pools, grants
and custom roles the real program registers and fails a violation built by hand or by breaking one
field of a real resource: GKE hardening, prod deletion protection, no service account keys, no basic
roles, exact Workload Identity members, custom roles without forbidden permissions (the legacy
mode's on purpose). Validators get their props as under the CLI (tests/test_policies.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import policies as P
import pytest
from policy_support import (
    analyze,
    args_of,
    make_args,
    mandatory,
    one,
    pack_stacks,
    real,
    urn_of,
    violations,
)
from pulumi_policy import EnforcementLevel

from config.permissions import load_roles


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
