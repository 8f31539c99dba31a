"""The CrossGuard pack's (policy/) policies on the platform's charts and the tenants: each passes
the resources the real program registers and fails a violation built by hand or by breaking one
field of a real resource: supply chain (exact chart versions, pinned NodeProvider template
sources), tenancy (isolated instances, concrete project and region scopes) and cost (the GPU
ceilings of each environment class). Validators get their props as under the CLI
(tests/test_policies.py).
"""

from __future__ import annotations

import copy

import policies as P
import pytest
from policy_support import (
    args_of,
    edit_values,
    make_args,
    one,
    pools_of,
    real,
    urn_of,
    violations,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError


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
