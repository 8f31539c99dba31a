"""The security review's cases that passed the pack after issue #11, each built (mostly by breaking
one field of a resource the real program or bootstrap registers) and shown rejected by a MANDATORY
policy of the pack, with a message naming the field: vcluster.yaml values that reach the host, IAM
grants to the wrong identity or target, without their condition or with the wrong federation
subject, custom roles that are not exactly their data, firewalls open to public ranges other than
/0, and vCluster Platform objects wider than the program makes them."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import policies as P
import pytest
import yaml
from guardrails import value_paths
from policy_support import args_of, beside_record, by_record, edit_values, one, only, policy_resource, rejected, stack_args, violations

PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
FIELD = "spec.template.helmRelease.values"
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "vcluster-0.36.1-values.schema.yaml").read_text())
PLATFORM = "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
NLP = f"tenant-nlp-instance (instance 'p-nlp/nlp'): {FIELD}"
VISION = f"tenant-vision-instance (instance 'p-vision/vision'): {FIELD}"


def merge(document: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            merge(document[key], value)
        else:
            document[key] = copy.deepcopy(value)


# --- 1. vcluster.yaml keys that act on the host -----------------------------------------------------

# Key names as in loft-sh/vcluster chart/values.schema.json at tag v0.36.1 (our record of it,
# tests/data/vcluster-0.36.1-values.schema.yaml, validates each edited document below).
ESCALATIONS = {
    # _rbac.tpl: list/watch on Secrets of every host namespace for a "*" mapping.
    "host Secrets": (
        {"sync": {"fromHost": {"secrets": {"enabled": True, "mappings": {"byName": {"*/*": "stolen/*"}}}}}},
        ["sync.fromHost.secrets.enabled: true", 'sync.fromHost.secrets.mappings.byName["*/*"]: \'stolen/*\''],
    ),
    # manifests.yaml: applied to the host cluster as written.
    "host manifests": (
        {"experimental": {"deploy": {"host": {"manifests": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"}}}},
        ["experimental.deploy.host.manifests: 'apiVersion: rbac.authorization.k8s.io/v1\\nkind: ClusterRol...'"],
    ),
    # clusterrole.yaml: reads the CRD and its objects on the host.
    "host custom resources": (
        {"sync": {"fromHost": {"customResources": {"clusterissuers.cert-manager.io": {"enabled": True, "scope": "Cluster"}}}}},
        ['sync.fromHost.customResources["clusterissuers.cert-manager.io"].enabled: true'],
    ),
    "root control plane": (
        {"controlPlane": {"statefulSet": {"security": {"podSecurityContext": {"runAsUser": 0, "runAsNonRoot": False}}}}},
        ["controlPlane.statefulSet.security.podSecurityContext.runAsUser: 0", "controlPlane.statefulSet.security.podSecurityContext.runAsNonRoot: false"],
    ),
    # statefulset.yaml: addVolumes go into the control plane pod's volumes as written.
    "hostPath volume": (
        {
            "controlPlane": {
                "statefulSet": {
                    "persistence": {
                        "addVolumes": [{"name": "host", "hostPath": {"path": "/"}}],
                        "addVolumeMounts": [{"name": "host", "mountPath": "/host"}],
                    }
                }
            }
        },
        ["controlPlane.statefulSet.persistence.addVolumes[0].hostPath.path: '/'", "controlPlane.statefulSet.persistence.addVolumeMounts[0].mountPath: '/host'"],
    ),
}


@pytest.mark.parametrize("case", sorted(ESCALATIONS))
def test_values_that_reach_the_host_are_rejected(runs, case):
    extra, paths = ESCALATIONS[case]
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: merge(d, extra))
    document = yaml.safe_load(props["spec"]["template"]["helmRelease"]["values"])
    jsonschema.Draft202012Validator(SCHEMA).validate(document)  # real keys of the pinned chart
    found = rejected(args_of(run, reg, props=props))
    messages = [m for name, m in found if name == P.values_by_design.name]
    for path in paths:
        assert any(m.startswith(f"{NLP} {path} is not a key gpu-platform writes (it may act on the host cluster); allowed: ") for m in messages), (path, messages)
    assert len(messages) == len(list(value_paths.leaves(extra))), messages


def test_the_message_names_what_is_allowed_near_the_key(runs):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: merge(d, ESCALATIONS["root control plane"][0]))
    message = next(m for name, m in rejected(args_of(run, reg, props=props)) if name == P.values_by_design.name)
    assert message.endswith(
        "allowed: the paths of components/vcluster_value_paths.yaml, here controlPlane.service.spec.type, "
        "controlPlane.service.spec.loadBalancerSourceRanges[], controlPlane.statefulSet.resources.requests.*, "
        "controlPlane.statefulSet.resources.limits.*, controlPlane.advanced.cloudControllerManager.enabled"
    )


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["controlPlane"]["service"]["spec"].pop("loadBalancerSourceRanges"),
            "controlPlane.service.spec.loadBalancerSourceRanges: not set, so the control plane accepts joins from anywhere",
        ),
        (
            lambda d: d["controlPlane"]["service"]["spec"].update(loadBalancerSourceRanges=[]),
            "controlPlane.service.spec.loadBalancerSourceRanges: [], so the control plane accepts joins from anywhere",
        ),
        (
            lambda d: d["controlPlane"]["service"]["spec"]["loadBalancerSourceRanges"].append("0.0.0.0/0"),
            # after the NAT address and the host cluster's pod and node ranges
            "controlPlane.service.spec.loadBalancerSourceRanges[3]: '0.0.0.0/0' is not allowed; allowed: the host cluster's pod and node "
            "ranges (10.4.0.0/14, 10.0.0.0/20) and the tenant's NAT addresses, each one external address <address>/32",
        ),
        (
            lambda d: d["controlPlane"]["service"]["spec"].update(type="NodePort"),
            "controlPlane.service.spec.type: 'NodePort' is not allowed; allowed: LoadBalancer",
        ),
        (
            lambda d: d["policies"]["networkPolicy"].update(enabled=False),
            "policies.networkPolicy.enabled: false is not allowed; allowed: true",
        ),
        (lambda d: d.pop("policies"), "policies.networkPolicy.enabled: not set; allowed: true"),
    ],
)
def test_a_control_plane_open_to_other_tenants_is_rejected(runs, edit, message):
    run, reg = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)
    found = rejected(args_of(run, reg, props=edit_values(reg.plain_inputs, edit)))
    assert only(found, P.control_plane_isolation).startswith(f"{VISION} {message}")
    # The keys themselves are the program's; the values are off the stack's record too.
    assert {name for name, _ in beside_record(found)} == {P.control_plane_isolation.name}
    assert by_record(found)


# --- 2. IAM: the right identity, target, project, condition and subject -------------------------------


def _grant(runs, stack: str, typ: str, name: str, **changes):
    run, reg = one(runs, stack, typ, name)
    return run, reg, {**copy.deepcopy(reg.plain_inputs), **changes}


@pytest.mark.parametrize(
    "stack, typ, name, changes, message",
    [
        # A tenant node role for the platform, whose identity would then read every VM.
        ("dev", PROJECT_MEMBER, "tenant-nlp-gcp-compute-viewer", {"member": PLATFORM}, "is not the tenantNodes account of stack dev (allowed: dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com, dev-speech-nodes@acme-ml-dev.iam.gserviceaccount.com)"),
        # The platform's VM role for a tenant's nodes: pods on them could create VMs.
        ("dev", PROJECT_MEMBER, "tenant-nlp-project-platform-vm-role", {"member": "serviceAccount:dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"}, "is not the platform account of stack dev (allowed: vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com)"),
        # A node role for an account of someone else's project, named like the tenant's own.
        (
            "team-vision-dev",
            PROJECT_MEMBER,
            "tenant-vision-gcp-compute-storageadmin",
            {"member": "serviceAccount:dev-vision-nodes@mallory-ml.iam.gserviceaccount.com"},
            "is not the tenantNodes account of stack team-vision-dev (allowed: dev-vision-nodes@acme-ml-dev-vision.iam.gserviceaccount.com)",
        ),
        # Project mode: the team's node identity on the host project (issue 10's boundary).
        (
            "team-vision-dev",
            PROJECT_MEMBER,
            "tenant-vision-gcp-compute-viewer",
            {"project": "acme-ml-dev"},
            "is bound on project 'acme-ml-dev', not on the account's own project 'acme-ml-dev-vision'",
        ),
        # A custom role of the host project bound on the team's project.
        (
            "team-vision-dev",
            PROJECT_MEMBER,
            "tenant-vision-project-platform-vm-role",
            {"role": "projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes"},
            "names a custom role of project 'acme-ml-dev', not of the project 'acme-ml-dev-vision' it is bound on",
        ),
        # serviceAccountUser by the platform on the host's node account, or on itself.
        (
            "dev",
            SA_MEMBER,
            "tenant-nlp-gcp-platform-acts-as-nodes",
            {"serviceAccountId": "projects/acme-ml-dev/serviceAccounts/gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "is bound on 'gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com', not on a tenantNodes account of stack dev; allowed: "
            "dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com, dev-speech-nodes@acme-ml-dev.iam.gserviceaccount.com",
        ),
        (
            "dev",
            SA_MEMBER,
            "tenant-nlp-gcp-platform-acts-as-nodes",
            {"serviceAccountId": "projects/acme-ml-dev/serviceAccounts/vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"},
            "is bound on 'vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com', not on a tenantNodes account of stack dev",
        ),
        # A tenant's nodes acting as another tenant's.
        (
            "team-vision-dev",
            SA_MEMBER,
            "tenant-vision-gcp-nodes-act-as-self",
            {"serviceAccountId": "projects/acme-ml-dev-vision/serviceAccounts/dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "is bound on 'dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com'; allowed: only the member's own account",
        ),
        # The platform pod acting as a tenant's nodes, or as another project's platform.
        (
            "dev",
            SA_MEMBER,
            "auto-nodes-workload-identity",
            {"serviceAccountId": "projects/acme-ml-dev/serviceAccounts/dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"},
            "is bound on 'dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com', not on a platform account of stack dev; allowed: "
            "vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com",
        ),
        (
            "dev",
            SA_MEMBER,
            "auto-nodes-workload-identity",
            {"serviceAccountId": "projects/acme-ml-prod/serviceAccounts/vcluster-platform-prod@acme-ml-prod.iam.gserviceaccount.com"},
            "is bound on 'vcluster-platform-prod@acme-ml-prod.iam.gserviceaccount.com', not on a platform account of stack dev",
        ),
    ],
)
def test_a_listed_grant_to_the_wrong_identity_or_target_is_rejected(runs, stack, typ, name, changes, message):
    run, reg, props = _grant(runs, stack, typ, name, **changes)
    found = only(rejected(args_of(run, reg, props=props)), P.grant_allow_list)
    bound_on = f"project {props['project']!r}" if typ == PROJECT_MEMBER else f"service account {props['serviceAccountId'].rsplit('/', 1)[-1]!r}"
    assert found.startswith(f"{reg.name} (on {bound_on}): member: {props['member']!r} holding {props['role']!r} on a "), found
    assert message in found, found


@pytest.mark.parametrize(
    "name, condition, message",
    [
        ("tenant-nlp-project-platform-vm-role", None, "carries no IAM condition, so it reaches every VM of the project; allowed: the condition the program writes"),
        (
            "tenant-nlp-project-platform-vm-role",
            {"title": "t", "expression": 'resource.type != "compute.googleapis.com/Instance" || resource.name.extract("/instances/{name}").startsWith("dev-nlp-")'},
            "carries condition 'resource.type",  # the disk clause dropped: every boot disk of the project
        ),
        (
            "tenant-nlp-project-platform-vm-role",
            {
                "title": "t",
                "expression": 'resource.type != "compute.googleapis.com/Instance" || resource.name.extract("/instances/{name}").startsWith("dev-vision-")',
            },
            "carries condition 'resource.type",
        ),
    ],
)
def test_a_conditioned_grant_without_its_condition_is_rejected(runs, name, condition, message):
    run, reg = one(runs, "dev", PROJECT_MEMBER, name)
    props = copy.deepcopy(reg.plain_inputs)
    props.pop("condition")
    if condition:
        props["condition"] = condition
    found = only(rejected(args_of(run, reg, props=props)), P.conditioned_grants)
    assert found.startswith(f"{name} (on project 'acme-ml-dev'): member: ") and message in found, found
    assert violations(P.conditioned_grants, args_of(run, reg)) == []


def test_a_conditioned_grant_on_another_tenants_vms_is_rejected(runs):
    run, reg = one(runs, "team-vision-dev", PROJECT_MEMBER, "tenant-vision-gcp-gpuplatform-dev-tenantdisks")
    props = copy.deepcopy(reg.plain_inputs)
    props["condition"]["expression"] = props["condition"]["expression"].replace("dev-vision-", "dev-nlp-")
    found = only(rejected(args_of(run, reg, props=props)), P.conditioned_grants)
    assert found.endswith("is conditioned on VMs named dev-nlp-…, not on its tenant's own (dev-vision-…)"), found


def test_a_custom_role_missing_a_permission_or_unknown_is_rejected(runs):
    run = runs["dev"]
    [reg] = [r for r in run.of_type(P.CUSTOM_ROLES[0]) if r.plain_inputs["roleId"].endswith("_autoNodes")]
    props = copy.deepcopy(reg.plain_inputs)
    props["permissions"].remove("compute.zones.list")
    assert only(rejected(args_of(run, reg, props=props)), P.custom_role_least_privilege).startswith(
        "auto-nodes-role (role 'gpuPlatform_dev_autoNodes'): permissions: must be exactly config/permissions.yaml autoNodes; "
        "missing: compute.zones.list; allowed: "
    )
    props = {**reg.plain_inputs, "roleId": "gpuPlatform_dev_nodeAdmin"}
    assert only(rejected(args_of(run, reg, props=props)), P.custom_role_least_privilege).startswith(
        "auto-nodes-role (role 'gpuPlatform_dev_nodeAdmin'): roleId: 'gpuPlatform_dev_nodeAdmin' is not a custom role gpu-platform defines; allowed: <prefix>_<key> for a key of config/permissions.yaml "
        "(autoNodes, tenantDisks, tenantLoadBalancers, tenantSubnetUse)"
    )


# --- 2. The bootstrap: subjects, scopes, the provider's condition ---------------------------------------


@pytest.mark.parametrize(
    "name, changes, message",
    [
        # The prod deployer reachable from any pull request.
        (
            "ci-prod-deploy-github",
            {"member": "principal://iam.googleapis.com/projects/placeholder-project-number/locations/global/workloadIdentityPools/github-actions/subject/repo:acme/gpu-platform:pull_request"},
            "allowed: exactly principal://…/workloadIdentityPools/github-actions/subject/repo:acme/gpu-platform:environment:production "
            "(the subject bootstrap/Pulumi.ci.yaml gives prod's deploy jobs)",
        ),
        # The right subject of another pool.
        (
            "ci-dev-preview-github",
            {"member": "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/elsewhere/subject/repo:acme/gpu-platform:pull_request"},
            "allowed: exactly principal://…/workloadIdentityPools/github-actions/subject/repo:acme/gpu-platform:pull_request",
        ),
        # A preview subject on the deployer's account.
        (
            "ci-dev-preview-github",
            {"serviceAccountId": "projects/acme-ml-dev/serviceAccounts/gpu-ci-dev-deploy@acme-ml-dev.iam.gserviceaccount.com"},
            "lets 'principal://iam.googleapis.com/projects/placeholder-project-number/locations/global/workloadIdentityPools/github-actions/subject/"
            "repo:acme/gpu-platform:pull_request' act as gpu-ci-dev-deploy@acme-ml-dev.iam.gserviceaccount.com",
        ),
    ],
)
def test_a_federation_binding_with_another_subject_is_rejected(bootstrap_run, name, changes, message):
    reg = bootstrap_run.one(SA_MEMBER, name)
    props = {**reg.plain_inputs, **changes}
    found = only(rejected(args_of(bootstrap_run, reg, props=props)), P.grant_allow_list)
    assert found.startswith(f"{reg.name} (on service account '{props['serviceAccountId'].rsplit('/', 1)[-1]}'): member: ") and message in found, found


@pytest.mark.parametrize(
    "name, changes, message",
    [
        ("ci-dev-deploy-iam-roleadmin", {"project": "acme-ml-prod"}, "is bound on project 'acme-ml-prod'; allowed: its environment's project ['acme-ml-dev']"),
        ("ci-prod-deploy-folder-resourcemanager-projectcreator", {"folder": "folders/1"}, "is bound on folder 'folders/1'; allowed: its environment's folder ['folders/123456789012']"),
        (
            "ci-dev-drift-gkebackup-viewer",  # a role only the drift identity holds
            {"member": "serviceAccount:gpu-ci-dev-preview@acme-ml-dev.iam.gserviceaccount.com"},
            "is not a drift identity; allowed: gpu-ci-dev-drift@acme-ml-dev.iam.gserviceaccount.com, gpu-ci-prod-drift@acme-ml-prod.iam.gserviceaccount.com",
        ),
    ],
)
def test_a_ci_role_on_the_wrong_identity_or_scope_is_rejected(bootstrap_run, name, changes, message):
    reg = next(r for r in bootstrap_run.registrations if r.name == name)
    props = {**reg.plain_inputs, **changes}
    found = only(rejected(args_of(bootstrap_run, reg, props=props)), P.grant_allow_list)
    assert found.startswith(f"{name} (on ") and message in found, found


@pytest.mark.parametrize(
    "condition, message",
    [
        (None, "attributeCondition: not set does not admit tokens of acme/gpu-platform only; allowed: a condition containing assertion.repository == 'acme/gpu-platform'"),
        ("assertion.repository_owner == 'acme'", "does not admit tokens of acme/gpu-platform only"),
        ("assertion.repository == 'acme/gpu-platform'", "is not the condition bootstrap/Pulumi.ci.yaml derives; allowed: "),
    ],
)
def test_a_provider_that_admits_other_tokens_is_rejected(bootstrap_run, condition, message):
    provider = bootstrap_run.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert violations(P.federation_trust, args_of(bootstrap_run, provider)) == []
    props = {k: v for k, v in provider.plain_inputs.items() if k != "attributeCondition"}
    if condition:
        props["attributeCondition"] = condition
    found = only(rejected(args_of(bootstrap_run, provider, props=props)), P.federation_trust)
    assert found.startswith(f"{provider.name} (provider ") and message in found, found


# --- 6. Firewalls: every public range, not only /0 ----------------------------------------------------------


@pytest.mark.parametrize(
    "ranges, bad",
    [
        (["0.0.0.0/1", "128.0.0.0/1"], ["0.0.0.0/1", "128.0.0.0/1"]),
        (["10.160.0.0/22", "8.8.8.8/32"], ["8.8.8.8/32"]),
        (["35.191.0.0/16", "35.0.0.0/8"], ["35.0.0.0/8"]),  # wider than Google's health checkers
        (["2600::/16"], ["2600::/16"]),
        (["the-internet"], ["the-internet"]),
    ],
)
def test_a_firewall_open_to_any_public_range_is_rejected(runs, ranges, bad):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-internal")
    found = [m for name, m in rejected(args_of(run, reg, props={**reg.plain_inputs, "sourceRanges": ranges})) if name == P.firewall_not_open.name]
    rule = "tenant-nlp-gcp-allow-internal (firewall rule 'dev-nlp-allow-internal'): "
    assert [m.split(" opens the rule")[0] for m in found] == [
        f"{rule}sourceRanges[{ranges.index(cidr)}]: {cidr!r} {'is not a CIDR' if '/' not in cidr else 'is a public range'} and" for cidr in bad
    ]
    assert all("opens the rule to the internet; allowed: private ranges" in m for m in found)


def test_private_and_google_ranges_pass(runs):
    run, reg = one(runs, "dev", "gcp:compute/firewall:Firewall", "nlp-gcp-allow-internal")
    ranges = ["10.160.0.0/22", "172.16.0.0/12", "192.168.10.0/24", "130.211.0.0/22", "35.191.0.0/16", "35.235.240.0/24"]
    assert violations(P.firewall_not_open, args_of(run, reg, props={**reg.plain_inputs, "sourceRanges": ranges})) == []


# --- 5. vCluster Platform objects ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["members"][0].update(clusterRole="loft-management-project-admin"), "spec.members[0].clusterRole: 'loft-management-project-admin' is not allowed; allowed: loft-management-project-viewer"),
        (lambda s: s["members"][0].update(kind="Group"), "spec.members[0].kind: 'Group' is not allowed; allowed: User, Team"),
        (lambda s: s.pop("allowedNodeTypes"), "spec.allowedNodeTypes: not set (every node type of every provider) is not allowed; allowed: exactly [{name: <the environment's NodeProvider>.*}]"),
        (lambda s: s["allowedNodeTypes"].append({"name": "other.*"}), "spec.allowedNodeTypes: ['gcp-gpu.*', 'other.*'] is not allowed"),
        (lambda s: s.update(allowedNodeTypes=[{"name": "*"}]), "spec.allowedNodeTypes: ['*'] is not allowed"),
        (lambda s: s.update(allowedTemplates=[{"kind": "VirtualClusterTemplate", "name": "*"}]), "spec.allowedTemplates: is not a field gpu-platform sets"),
        (lambda s: s.update(access=[{"verbs": ["*"], "teams": ["nlp"]}]), "spec.access: is not a field gpu-platform sets"),
    ],
)
def test_a_project_wider_than_the_program_makes_it_is_rejected(runs, edit, message):
    run, reg = one(runs, "dev", P.PLATFORM_PROJECT, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"])
    assert only(rejected(args_of(run, reg, props=props)), P.platform_objects_by_design).startswith(f"tenant-nlp-platform-project (platform project 'nlp'): {message}")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["access"][0]["verbs"].append("update"), "spec.access[0].verbs: ['get', 'use', 'update'] is not allowed; allowed: a subset of ['get', 'use']"),
        (lambda s: s["access"][0].update(verbs=["*"]), "spec.access[0].verbs: ['*'] is not allowed"),
        (lambda s: s["access"][0].update(subresources=["kubeconfig"]), "spec.access[0].subresources: ['kubeconfig'] is not allowed; allowed: none"),
        (lambda s: s.update(templateRef={"name": "anything"}), "spec.templateRef: is not a field gpu-platform sets"),
        # The instance's API reachable through an ingress of the host cluster.
        (lambda s: s["template"].update(accessPoint={"ingress": {"enabled": True}}), "spec.template.accessPoint: is not a field gpu-platform sets"),
        (lambda s: s.update(networkPeer=True), "spec.networkPeer: is not a field gpu-platform sets"),
    ],
)
def test_an_instance_wider_than_the_program_makes_it_is_rejected(runs, edit, message):
    run, reg = one(runs, "dev", P.VIRTUAL_CLUSTER_INSTANCE, "speech")
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"])
    assert only(rejected(args_of(run, reg, props=props)), P.platform_objects_by_design).startswith(f"tenant-speech-instance (instance 'p-speech/speech'): {message}")


def test_a_project_on_another_provider_than_its_instance_and_environment_is_rejected(runs):
    run = runs["dev"]
    assert violations(P.one_node_provider, stack_args(run)) == []
    project = run.one(P.PLATFORM_PROJECT, "nlp")
    props = copy.deepcopy(project.plain_inputs)
    props["spec"]["allowedNodeTypes"] = [{"name": "someone-elses.*"}]
    resources = [r for r in stack_args(run).resources if r.urn != project.urn] + [policy_resource(project.type, props, project.urn, project.name)]
    found = violations(P.one_node_provider, type(stack_args(run))(resources=resources))
    assert found == [
        "tenant-nlp-platform-project (platform project 'nlp'): spec.allowedNodeTypes: ['someone-elses'] is not allowed; "
        "allowed: the environment's NodeProvider ['gcp-gpu']",
        f"{NLP} privateNodes.autoNodes[].provider: ['gcp-gpu'] is not allowed; "
        "allowed: the provider its project 'nlp' allows (['someone-elses'])",
    ]


def test_the_committed_platform_objects_pass(runs):
    for stack in runs:
        for typ in (P.PLATFORM_PROJECT, P.VIRTUAL_CLUSTER_INSTANCE):
            for reg in runs[stack].of_type(typ):
                assert violations(P.platform_objects_by_design, args_of(runs[stack], reg)) == [], reg.name
