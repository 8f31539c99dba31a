"""The guardrails of issue 18 on pinned sources, probe by probe: each breaks one resource the real
program registers and shows the pack's MANDATORY rejection, whose message names the resource.
Charts from another repository, a driver from another registry, a switch or image value the
program writes one way set another, GPU Operator values and vCluster chart fields it never writes;
the pinned values are those the program's renderer writes."""

from __future__ import annotations

import copy

import policies as P
import pytest
import yaml
from policy_support import args_of, beside_record, by_record, names, one, only, rejected, reports

from tools import program_inventory as inventory

VCI = P.VIRTUAL_CLUSTER_INSTANCE
RELEASE = "kubernetes:helm.sh/v3:Release"


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
