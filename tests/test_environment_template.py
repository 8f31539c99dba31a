"""templates/environment/main.tf: the "infrastructure" environment template, run once per vCluster.

It creates nothing: it hands on the names of what Pulumi created for the tenant (network, subnet,
node service account, written as properties on the tenant's auto-nodes entry) under the output
names the node template and the official kubernetes template read, plus the region's zones and the
prefix of the tenant's VM names. It refuses properties that name anything but the vCluster's own
objects, and any instance outside its team's platform project (namespace p-<team>).

Structural tests parse the template with python-hcl2 ("${expr}" = expression, '"text"' = quoted
template). Semantic tests evaluate its locals, outputs and preconditions with OpenTofu (or
Terraform) for concrete `var.vcluster` values when one is on PATH; they need no provider.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.templates import ENVIRONMENT_PLACEHOLDER, PROJECT_NAMESPACE_PREFIX_PLACEHOLDER, environment_template
from config import node_properties as props
from config.facts import PROJECT_NAMESPACE_PREFIX
from config.isolation import node_name_prefix, vm_name_condition
from hcl_support import blocks, evaluate, expr, failures, parse, precondition, require_tofu, required_providers, run, unquote

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
ENVIRONMENT_TF = TEMPLATES / "environment" / "main.tf"
NODE_TF = TEMPLATES / "node" / "main.tf"

OUTPUTS = {"network_name", "subnet_name", "service_account_email", "availability_zones", "node_name_prefix"}
VCLUSTER_PROPERTY = re.compile(r'var\.vcluster\.properties\["([^"]+)"\]')
ENVIRONMENT_OUTPUT_READ = re.compile(r'var\.vcluster\.nodeEnvironment\.outputs\.infrastructure\["([^"]+)"\]')


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doc() -> dict:
    return parse(ENVIRONMENT_TF)


@pytest.fixture(scope="module")
def zones(doc) -> dict:
    return blocks(doc, "data")["google_compute_zones.available"]


@pytest.fixture(scope="module")
def outputs(doc) -> dict[str, dict]:
    return blocks(doc, "output")


@pytest.fixture(scope="module")
def preconditions(doc) -> list[dict]:
    found = []
    for kind in ("data", "resource"):
        for body in blocks(doc, kind).values():
            for block in body.get("lifecycle", []):
                found.extend(block.get("precondition", []))
    return found


# --- structure -----------------------------------------------------------------------------------


def test_template_does_not_declare_the_platform_variable(doc):
    assert "vcluster" not in blocks(doc, "variable")
    assert not re.search(r'^\s*variable\s+"vcluster"', ENVIRONMENT_TF.read_text(), flags=re.M)


def test_providers_are_pinned_exactly(doc):
    assert required_providers(doc) == (">= 1.6", {"google": ("hashicorp/google", "6.50.0")})


def test_creates_nothing(doc):
    """Pulumi owns the network, subnet and service account; the template may only hold checks."""
    resources = blocks(doc, "resource")
    assert set(resources) <= {name for name in resources if name.startswith("terraform_data.")}
    assert "module" not in doc


def test_only_data_source_is_the_zone_list(doc, zones):
    # compute.zones.list is the only read permission the platform's role grants.
    assert list(blocks(doc, "data")) == ["google_compute_zones.available"]
    assert unquote(zones["status"]) == "UP"
    assert expr(zones["project"]) == "local.project"
    assert expr(zones["region"]) == "local.region"


def test_reads_exactly_the_tenant_keys_and_project_region():
    text = re.sub(r"(?m)^\s*#.*$", "", ENVIRONMENT_TF.read_text())  # what it reads, not what its comments cite
    expected = (set(props.TENANT_KEYS) - {props.TENANT}) | {props.PROJECT, props.REGION}
    assert set(VCLUSTER_PROPERTY.findall(text)) == expected
    # Nothing else of the variable but the vCluster's name and namespace: no node type, no
    # environment outputs.
    assert re.findall(r"var\.vcluster\.instance[.\w]*", text) == ["var.vcluster.instance.metadata.name", "var.vcluster.instance.metadata.namespace"]
    assert "var.vcluster.nodeType" not in text
    assert "var.vcluster.nodeEnvironment" not in text


def test_every_read_of_the_variable_is_unwrapped():
    code = "\n".join(line.split("#", 1)[0] for line in ENVIRONMENT_TF.read_text().splitlines())
    reads = list(re.finditer(r"var\.vcluster\.", code))
    assert len(reads) == 7
    for match in reads:
        assert code[: match.start()].endswith("nonsensitive("), code[match.start() : match.start() + 60]


def test_outputs_are_exactly_the_five_names(outputs):
    assert set(outputs) == OUTPUTS


def test_outputs_are_what_the_node_template_reads(outputs):
    read_by_node = set(ENVIRONMENT_OUTPUT_READ.findall(NODE_TF.read_text()))
    assert read_by_node and read_by_node <= set(outputs)


def test_output_values(outputs):
    assert expr(outputs["network_name"]["value"]) == "local.network"
    assert expr(outputs["subnet_name"]["value"]) == "local.subnetwork"
    assert expr(outputs["service_account_email"]["value"]) == '"${local.node_service_account}@${local.project}.iam.gserviceaccount.com"'
    assert expr(outputs["availability_zones"]["value"]) == "data.google_compute_zones.available.names"
    assert expr(outputs["node_name_prefix"]["value"]) == "local.node_name_prefix"


@pytest.mark.parametrize(
    "pattern, reads",
    [
        (r"^Property project must be a concrete GCP project id, not empty or a wildcard.*Pulumi sets it", "local.project"),
        (r"^Property region must be a concrete GCP region, not empty or a wildcard.*Pulumi sets it", "local.region"),
        (r"^Property gpu-platform/network must be .*the network Pulumi created", "local.network == local.tenant_name"),
        (r"^Property gpu-platform/subnetwork must be .*the subnet Pulumi created", "local.subnetwork == local.tenant_name"),
        (r"^Property gpu-platform/node-service-account must be .*the node service account Pulumi created", "local.node_service_account == local.tenant_name"),
        (r"^vCluster .* is in namespace .*, not in its team's platform project namespace", "local.vcluster_namespace == local.team_namespace"),
    ],
)
def test_precondition_for_each_input(preconditions, pattern, reads):
    condition = expr(precondition(preconditions, pattern)["condition"])
    assert reads in condition


def test_project_and_region_refuse_wildcards(preconditions):
    for name in ("project", "region"):
        condition = expr(precondition(preconditions, rf"^Property {name} must be")["condition"])
        assert condition == f'local.{name} != "" && !can(regex(local.wildcard, local.{name}))'


def test_fmt_check():
    binary = require_tofu()
    result = run(binary, ["fmt", "-check", "-diff", str(ENVIRONMENT_TF)], ROOT)
    assert result.returncode == 0, f"not formatted:\n{result.stdout}{result.stderr}"


# --- semantics, evaluated by OpenTofu -----------------------------------------------------------

GOOD = {
    props.PROJECT: "acme-ml-dev",
    props.REGION: "europe-west4",
    props.TENANT: "nlp",
    props.NETWORK: "dev-nlp-nodes",
    props.SUBNETWORK: "dev-nlp-nodes",
    props.NODE_SERVICE_ACCOUNT: "dev-nlp-nodes",
    props.CCM_ENABLED: "true",
}


def _vcluster(namespace: str = "p-nlp", **changes: str | None) -> dict:
    properties = dict(GOOD)
    for key, value in changes.items():
        name = {"project": props.PROJECT, "region": props.REGION, "network": props.NETWORK,
                "subnetwork": props.SUBNETWORK, "account": props.NODE_SERVICE_ACCOUNT}[key]
        if value is None:
            properties.pop(name)
        else:
            properties[name] = value
    return {"name": "nlp", "properties": properties, "instance": {"metadata": {"name": "nlp", "namespace": namespace}}}


SCENARIOS = {
    "good": _vcluster(),
    "comma-lists": _vcluster(project="acme-ml-dev,acme-other", region="europe-west4,us-central1"),
    "bad-project-wildcard": _vcluster(project="*"),
    "bad-project-missing": _vcluster(project=None),
    "bad-region-glob": _vcluster(region="europe-*"),
    "bad-network-missing": _vcluster(network=None),
    "bad-network-wildcard": _vcluster(network="*"),
    "bad-subnetwork-missing": _vcluster(subnetwork=None),
    "bad-account-missing": _vcluster(account=None),
    "bad-account-email": _vcluster(account="dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"),
    "bad-network-of-another-tenant": _vcluster(network="dev-speech-nodes"),
    "bad-account-of-another-tenant": _vcluster(account="dev-speech-nodes"),
    "bad-subnetwork-of-another-environment": _vcluster(subnetwork="prod-nlp-nodes"),
    # An instance named after team nlp in another platform project (anyone allowed to create
    # instances there could name one so) gets neither nlp's network nor its identity.
    "bad-instance-in-another-platform-project": _vcluster(namespace="p-speech"),
    "bad-instance-in-the-default-platform-project": _vcluster(namespace="p-default"),
    "bad-instance-without-namespace": _vcluster(namespace=""),
}


def test_the_environment_is_written_in_when_the_node_provider_renders_it():
    assert ENVIRONMENT_TF.read_text().count(f'"{ENVIRONMENT_PLACEHOLDER}"') == 1
    rendered = environment_template("dev")
    assert ENVIRONMENT_PLACEHOLDER not in rendered and re.search(r'^  environment += "dev"$', rendered, flags=re.M)
    # The namespace prefix comes from the same constant as the platform's Helm values.
    assert ENVIRONMENT_TF.read_text().count(PROJECT_NAMESPACE_PREFIX_PLACEHOLDER) == 1
    assert PROJECT_NAMESPACE_PREFIX_PLACEHOLDER not in rendered
    assert f'team_namespace = "{PROJECT_NAMESPACE_PREFIX}${{local.vcluster_name}}"' in rendered
    with pytest.raises(ValueError):
        environment_template('dev" } resource "x" "y" {')


@pytest.fixture(scope="module")
def evaluated(doc, outputs, preconditions, tmp_path_factory):
    binary = require_tofu()
    probe = {
        f"output.{name}": expr(body["value"])
        for name, body in outputs.items()
        if "data." not in expr(body["value"])  # the zone list needs the provider
    }
    probe["preconditions"] = "[" + ", ".join(
        f"{{ok = {expr(p['condition'])}, message = {expr(p['error_message'])}}}" for p in preconditions
    ) + "]"
    probe["zones.project"] = "local.project"
    probe["zones.region"] = "local.region"
    # The template as the dev NodeProvider embeds it.
    rendered = tmp_path_factory.mktemp("rendered") / "main.tf"
    rendered.write_text(environment_template("dev"))
    return evaluate(binary, tmp_path_factory.mktemp("environment-template"), rendered, probe, SCENARIOS)


def test_good_properties_give_the_outputs(evaluated):
    result = evaluated["good"]
    assert failures(result) == []
    assert result["output.network_name"] == "dev-nlp-nodes"
    assert result["output.subnet_name"] == "dev-nlp-nodes"
    assert result["output.service_account_email"] == "dev-nlp-nodes@acme-ml-dev.iam.gserviceaccount.com"
    assert result["output.node_name_prefix"] == "dev-nlp-"
    assert (result["zones.project"], result["zones.region"]) == ("acme-ml-dev", "europe-west4")


def test_the_prefix_is_what_the_platforms_vm_role_is_conditioned_on(evaluated):
    assert evaluated["good"]["output.node_name_prefix"] == node_name_prefix("dev", "nlp")
    assert 'startsWith("dev-nlp-")' in vm_name_condition(node_name_prefix("dev", "nlp"))["expression"]


def test_comma_lists_use_the_first_element(evaluated):
    result = evaluated["comma-lists"]
    assert failures(result) == []
    assert (result["zones.project"], result["zones.region"]) == ("acme-ml-dev", "europe-west4")
    assert result["output.service_account_email"].endswith("@acme-ml-dev.iam.gserviceaccount.com")


@pytest.mark.parametrize(
    "scenario, pattern",
    [
        ("bad-project-wildcard", r'^Property project must be .*\(got "\*"\)'),
        ("bad-project-missing", r'^Property project must be .*\(got ""\)\. Pulumi sets it on each tenant\'s auto-nodes entry'),
        ("bad-region-glob", r'^Property region must be .*\(got "europe-\*"\)'),
        ("bad-network-missing", r'^Property gpu-platform/network must be "dev-nlp-nodes", .* \(got ""\)'),
        ("bad-network-wildcard", r'^Property gpu-platform/network must be "dev-nlp-nodes", .* \(got "\*"\)'),
        ("bad-subnetwork-missing", r'^Property gpu-platform/subnetwork must be "dev-nlp-nodes"'),
        ("bad-account-missing", r'^Property gpu-platform/node-service-account must be "dev-nlp-nodes"'),
        ("bad-account-email", r'^Property gpu-platform/node-service-account must be .*\(got "dev-nlp-nodes@acme-ml-dev'),
        ("bad-network-of-another-tenant", r'^Property gpu-platform/network must be "dev-nlp-nodes", the network Pulumi created for vCluster nlp in environment dev \(got "dev-speech-nodes"\)'),
        ("bad-account-of-another-tenant", r"^Property gpu-platform/node-service-account must be .*run as its own identity only"),
        ("bad-subnetwork-of-another-environment", r'^Property gpu-platform/subnetwork must be .*\(got "prod-nlp-nodes"\)'),
        ("bad-instance-in-another-platform-project", r'^vCluster nlp is in namespace "p-speech", not in its team\'s platform project namespace "p-nlp"'),
        ("bad-instance-in-the-default-platform-project", r'^vCluster nlp is in namespace "p-default", not in its team\'s platform project namespace "p-nlp"'),
        ("bad-instance-without-namespace", r'^vCluster nlp is in namespace "", not'),
    ],
)
def test_bad_input_fails_exactly_its_precondition(evaluated, scenario, pattern):
    failed = failures(evaluated[scenario])
    assert len(failed) == 1, failed
    assert re.search(pattern, failed[0]), failed[0]
