"""A tenant's security settings, in the program (issue 18, items 5–7): shared tenants get no disk or
load-balancer role and stay apart from tenants with projects of their own unless the environment
accepts it, one tenant per team project, prod settings beyond the safe ones need the environment's
approval, Pod Security in every tenant, and control planes within the environment's maximum."""

from __future__ import annotations

import pytest
import yaml
from cel_expr_python import cel

from components.monitoring_documents import MONITORING_NAMESPACE
from components.tenant_pod_security import ENFORCE_LABEL, POLICY_NAME, PRIVILEGED_NAMESPACES, exempt_namespaces, pod_security_objects
from config.errors import ConfigError
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, problems, refused, run_shipped
from tenant_objects import tenant_objects

NS = "gpu-platform"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


# --- Shared tenants ---------------------------------------------------------------------------------


def test_shared_beside_project_tenants_is_refused_without_the_override(stack_values):
    values = stack_values("dev")
    del values[f"{NS}:platform"]["allowSharedWithProjectTenants"]
    found = problems(values)
    assert len(found) == 2 and all(p.split(":", 1)[0] in ("tenants[0].isolation", "tenants[1].isolation") for p in found)
    assert found[0] == (
        "tenants[0].isolation: shared is not allowed beside tenants of the other kind in environment dev: vision (stack team-vision-dev "
        "(Pulumi.team-vision-dev.yaml)) has a project of its own, and a shared tenant's node identity reads every VM of project acme-ml-dev "
        "(other shared teams' join data, the host cluster's nodes, which run every tenant's control plane); give every tenant a project of "
        "its own, or accept it with platform.allowSharedWithProjectTenants: true in the environment stack (docs/security.md \"Shared and project tenants\" says what "
        "shared tenants reach)"
    )


def test_the_team_stack_beside_shared_tenants_is_refused_too(stack_values, tmp_path):
    """The team stack's own plan fails as well: its environment's file lacks the override."""
    import shutil

    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.team-vision-dev.yaml"):
        shutil.copy(SHIPPED_DIR / name, tmp_path / name)
    text = (tmp_path / "Pulumi.dev.yaml").read_text().replace("    allowSharedWithProjectTenants: true\n", "    allowSharedWithProjectTenants: false\n")
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_stack(stack_values("team-vision-dev"), stack="team-vision-dev", project_dir=tmp_path)
    [message] = [str(p) for p in caught.value.problems]
    assert message.startswith(
        "tenant.isolation: project is not allowed beside tenants of the other kind in environment dev: nlp (tenants[0] of stack dev "
        "(Pulumi.dev.yaml)), speech (tenants[1] of stack dev (Pulumi.dev.yaml)) share the environment's project"
    )


@pytest.mark.parametrize("key", ["persistentDisks", "loadBalancerServices"])
def test_a_shared_tenant_gets_no_disk_or_load_balancer_role(stack_values, key):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0][key] = True
    [message] = problems(values)
    assert message.startswith(f"tenants[0].{key}: true is not allowed with isolation: shared: the tenant's node identity would hold compute.")
    assert message.endswith("allowed: false, or isolation: project for a project of the team's own")


def test_persistent_disks_default_off_when_shared_and_on_in_a_project(dev_run, tenant_run):
    env = load_stack(read_dev(), stack="dev", project_dir=SHIPPED_DIR)
    assert [t.tenant.persistent_disks for t in env.tenants] == [False, False]
    roles = {m.input("role") for m in dev_run.of_type("gcp:projects/iAMMember:IAMMember") if "nodes@" in str(m.input("member"))}
    assert not any("storageAdmin" in r or "loadBalancer" in r or r.endswith(("_tenantDisks", "_tenantLoadBalancers")) for r in roles)
    assert tenant_run.one("gcp:projects/iAMMember:IAMMember", "storageadmin").input("project") == "acme-ml-dev-vision"


def read_dev() -> dict:
    from shipped_stacks import shipped_values

    return shipped_values("dev")


def test_one_tenant_per_team_project_across_inline_and_team_stacks(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0].pop("isolation")
    values[f"{NS}:tenants"][0]["gcpProject"] = "acme-ml-dev-vision"
    found = problems(values)
    assert (
        "tenants[0].gcpProject: 'acme-ml-dev-vision' is already the project of tenant vision (stack team-vision-dev (Pulumi.team-vision-dev.yaml)); "
        "each team needs a project of its own"
    ) in found


# --- Approval of settings beyond the safe ones (prod) -------------------------------------------------


@pytest.mark.parametrize(
    "key, value, shown, safe",
    [
        ("loadBalancerServices", True, "true", "false"),
        ("nodeMetadata", "exposed", "exposed", "concealed"),
        ("podSecurityStandard", "privileged", "privileged", "baseline"),
    ],
)
def test_in_prod_a_setting_beyond_the_safe_one_needs_the_environments_approval(stack_values, key, value, shown, safe):
    values = stack_values("prod")
    values[f"{NS}:tenants"][0][key] = value
    assert problems(values, "prod") == [
        f"tenants[0].{key}: {shown} needs the environment's approval in prod: set platform.approvedTenantSecurity.research.{key}: {shown} "
        f"in the environment stack (a change its reviewers approve), or keep {safe}"
    ]
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {"research": {key: value}}
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)


def test_stricter_settings_and_dev_need_no_approval(stack_values):
    values = stack_values("prod")
    values[f"{NS}:tenants"][0]["podSecurityStandard"] = "restricted"
    load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"].update(loadBalancerServices=True, nodeMetadata="exposed")
    load_stack(values, stack="team-vision-dev", project_dir=SHIPPED_DIR)


def test_an_approval_for_no_tenant_is_a_typo(stack_values):
    values = stack_values("prod")
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {"reserch": {"loadBalancerServices": True}}
    assert problems(values, "prod") == ["platform.approvedTenantSecurity.reserch: names no tenant of this environment; tenants: research"]


# --- Pod Security -------------------------------------------------------------------------------------


def test_pod_security_root_is_refused(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["podSecurityStandard"] = "root"
    assert problems(values) == ["tenants[0].podSecurityStandard: 'root' is not allowed; allowed: 'baseline', 'restricted' or 'privileged'"]


def test_every_tenant_enforces_baseline_but_in_the_products_namespaces(dev_run, tenant_run):
    for run, tenant in ((dev_run, "nlp"), (dev_run, "speech"), (tenant_run, "vision")):
        objects = tenant_objects(run, tenant)  # monitoring is on in dev
        assert objects[:4] == [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator", "labels": {ENFORCE_LABEL: "privileged"}}},
            *pod_security_objects("baseline", frozenset({"monitoring"})),
        ]
    [policy] = [o for o in pod_security_objects("baseline", frozenset({"monitoring"})) if o["kind"] == "ValidatingAdmissionPolicy"]
    exempt = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]
    assert exempt == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": sorted(PRIVILEGED_NAMESPACES)}
    assert {"kube-system", "gpu-operator", MONITORING_NAMESPACE} <= set(PRIVILEGED_NAMESPACES)
    # Without monitoring its namespace is exempt nowhere: nobody can make one and run host-networked pods in it.
    assert MONITORING_NAMESPACE not in exempt_namespaces() and "kube-system" in exempt_namespaces()


def _admits(standard: str, namespace: dict) -> tuple[bool, str]:
    """The admission policy's validation, compiled and evaluated by the CEL project's own runtime."""
    [policy] = [o for o in pod_security_objects(standard) if o["kind"] == "ValidatingAdmissionPolicy"]
    [validation] = policy["spec"]["validations"]
    env = cel.NewEnv(variables={"namespaceObject": cel.Type.DYN})
    data = {"namespaceObject": namespace}
    return env.compile(validation["expression"]).eval(data=data).value(), env.compile(validation["messageExpression"]).eval(data=data).value()


@pytest.mark.parametrize(
    "standard, labels, admitted",
    [
        ("baseline", {ENFORCE_LABEL: "baseline"}, True),
        ("baseline", {ENFORCE_LABEL: "restricted"}, True),
        ("baseline", {ENFORCE_LABEL: "privileged"}, False),
        ("baseline", {}, False),
        ("baseline", None, False),
        ("restricted", {ENFORCE_LABEL: "baseline"}, False),
        ("restricted", {ENFORCE_LABEL: "restricted"}, True),
    ],
)
def test_a_pod_is_admitted_only_where_its_namespace_enforces_the_standard(standard, labels, admitted):
    namespace = {"metadata": {"name": "team-jobs", **({} if labels is None else {"labels": labels})}}
    result, message = _admits(standard, namespace)
    assert result is admitted
    assert message.startswith(f"namespace team-jobs must carry the label {ENFORCE_LABEL}=")


def test_a_privileged_tenant_gets_no_pod_security_objects(stack_values, dev_run, env_stack_ref):
    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"].update(podSecurityStandard="privileged", monitoring={"enabled": False})
    run = run_shipped(values, stack="team-vision-dev", stack_outputs={env_stack_ref: dev_run.outputs})
    objects = tenant_objects(run, "vision")
    # The GPU Operator's namespace, the GPU watchdog's and the capacity fallback's objects only: no
    # admission policy, no label on `default`.
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["gpu-operator", "gpu-platform-system", "gpu-platform-capacity"]
    assert POLICY_NAME not in run.one(VCI, "vision").input("spec", "template", "objects")
    assert not any(o["kind"].startswith("ValidatingAdmissionPolicy") for o in objects)


# --- Control-plane bounds --------------------------------------------------------------------------------


def test_control_plane_resources_are_set_by_default(dev_run):
    for instance in dev_run.of_type(VCI):
        document = yaml.safe_load(instance.input("spec", "template", "helmRelease", "values"))
        assert document["controlPlane"]["statefulSet"]["resources"] == {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "4Gi"}}


def test_control_plane_above_the_environments_maximum_is_refused(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["controlPlane"] = {"limits": {"memory": "32Gi", "cpu": "4"}}
    values[f"{NS}:tenants"][1]["controlPlane"] = {"requests": {"cpu": "6"}, "limits": {"cpu": "6"}}
    assert problems(values) == [
        "tenants[0].controlPlane.limits.memory: 32Gi is above the environment's maximum 8Gi (platform.controlPlaneMaximum.memory: every "
        "tenant's control plane shares the host cluster's system nodes)",
        "tenants[1].controlPlane.requests.cpu: 6 is above the environment's maximum 4 (platform.controlPlaneMaximum.cpu: every tenant's "
        "control plane shares the host cluster's system nodes)",
        "tenants[1].controlPlane.limits.cpu: 6 is above the environment's maximum 4 (platform.controlPlaneMaximum.cpu: every tenant's "
        "control plane shares the host cluster's system nodes)",
    ]
    values[f"{NS}:platform"]["controlPlaneMaximum"] = {"cpu": "8", "memory": "32Gi"}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


def test_a_team_stack_is_held_to_its_environments_maximum(stack_values):
    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"]["controlPlane"] = {"limits": {"cpu": "5"}}
    assert problems(values, "team-vision-dev") == [
        "tenant.controlPlane.limits.cpu: 5 is above the environment's maximum 4 (platform.controlPlaneMaximum.cpu: every tenant's control "
        "plane shares the host cluster's system nodes)"
    ]


def test_a_bad_maximum_is_refused(stack_values):
    values = stack_values("dev")
    values[f"{NS}:platform"]["controlPlaneMaximum"] = {"cpu": "four"}
    assert problems(values) == ["platform.controlPlaneMaximum.cpu: 'four' is not a Kubernetes quantity like 4 or 4000m"]


def test_the_issues_bad_inputs_come_all_at_once_and_register_nothing(stack_values):
    """podSecurityStandard: root, control-plane limits above the maximum, shared beside project-mode
    without the override, an sso block without an issuer: four problems, one run, nothing created."""
    values = stack_values("dev")
    del values[f"{NS}:platform"]["allowSharedWithProjectTenants"]
    values[f"{NS}:platform"].update(publicHost="gpu.example.com", sso={"clientId": "gpu"})
    values[f"{NS}:tenants"][0]["podSecurityStandard"] = "root"
    values[f"{NS}:tenants"][1]["controlPlane"] = {"limits": {"memory": "64Gi"}}
    message = refused(values, stack="dev")
    for expected in (
        "platform.sso.issuerUrl: required",
        "tenants[0].podSecurityStandard: 'root' is not allowed; allowed: 'baseline', 'restricted' or 'privileged'",
        "tenants[1].isolation: shared is not allowed beside tenants of the other kind",
        "tenants[1].controlPlane.limits.memory: 64Gi is above the environment's maximum 8Gi",
    ):
        assert f"  - {expected}" in message, message


# --- The plan marks security changes -------------------------------------------------------------------


def test_a_change_of_a_security_setting_shows_in_the_plan_as_one(stack_values, dev_run, tenant_run, env_stack_ref):
    from tools.plan_compare import compare, resources_of
    from tools.plan_compare_text import render_changes

    values = stack_values("team-vision-dev")
    values[f"{NS}:tenant"].update(loadBalancerServices=True, podSecurityStandard="privileged")
    after = run_shipped(values, stack="team-vision-dev", stack_outputs={env_stack_ref: dev_run.outputs})
    changes = compare(resources_of(tenant_run), resources_of(after), ref="main", stack="team-vision-dev", host_project="acme-ml-dev")
    assert [(c.tenant, c.setting, c.before, c.after) for c in changes.security] == [
        ("vision", "loadBalancerServices", False, True),
        ("vision", "podSecurityStandard", "baseline", "privileged"),
    ]
    text = render_changes(changes, "acme-ml-dev", "prod")
    assert (
        "  SECURITY CHANGE: tenant vision: loadBalancerServices false → true (its node identity manages load balancers and firewall rules "
        "of its project); in prod it needs platform.approvedTenantSecurity.vision.loadBalancerServices: true in the environment stack."
    ) in text
    assert "  SECURITY CHANGE: tenant vision: podSecurityStandard baseline → privileged (any pod may use hostNetwork" in text
    back = compare(resources_of(after), resources_of(tenant_run), ref="main", stack="team-vision-dev", host_project="acme-ml-dev")
    assert "  SECURITY CHANGE: tenant vision: loadBalancerServices true → false (back to the safe value)." in render_changes(back, "acme-ml-dev", "dev")
    assert compare(resources_of(tenant_run), resources_of(tenant_run), ref="main", stack="team-vision-dev").security == []


def test_the_plan_says_what_a_tenants_pods_reach_beyond_the_safe_settings(tmp_path):
    import shutil

    from tools.plan import plan_stack
    from tools.plan_text import render_text

    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(SHIPPED_DIR / name, tmp_path / name)
    text = (tmp_path / "Pulumi.dev.yaml").read_text().replace("      access: {users: [alice]}\n", "      access: {users: [alice]}\n      nodeMetadata: exposed\n      podSecurityStandard: privileged\n")
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    out = render_text(plan_stack("dev", tmp_path))
    speech = out[out.index("  speech: network"):]
    assert "node metadata exposed; pod security privileged; load balancers false; persistent disks false" in speech
    for note in (
        "SECURITY: isolation shared: its VMs and node identity live in the environment's project",
        "SECURITY: nodeMetadata exposed: every pod on its nodes can obtain the node identity's token from the metadata server",
        "SECURITY: podSecurityStandard privileged: any pod may use hostNetwork, run privileged or mount host paths",
    ):
        assert note in speech, speech[:1500]
