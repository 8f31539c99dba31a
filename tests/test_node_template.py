"""templates/node/main.tf: the OpenTofu template the vCluster Platform runs once per node claim.

Two kinds of tests, neither needs a cloud:
- structural ones on the template parsed with python-hcl2 (always run). python-hcl2 returns
  expressions as strings: "${expr}" for an expression, '"text"' for a quoted template;
- semantic ones that evaluate the template's locals, resource arguments and preconditions with
  OpenTofu (or Terraform) for concrete `var.vcluster` values, when one of them is on PATH. They
  need no provider: the locals and the expressions are copied into a scratch module together with
  templates/vcluster_variable.tf and applied without any resource.
"""

from __future__ import annotations

import email
import functools
import email.message
import json
import re
import subprocess
from pathlib import Path

import pytest

from config import node_properties as props
from config.catalog import BUILTIN, GUEST, load_catalog
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, shipped_values
from config.stack_files import read_stack_values
from node_boot_support import DROPIN_DIR_LINE, FABRIC_MANAGER_DROPIN, PATH_UNIT, PULL_SCRIPT, RECORDER, SERVICE_UNIT, Node, images_of
from components.showback import GPU_NODE_LABEL, TENANT_LABEL
from components.tenant_documents import gpu_operator_images_annotation, operator_values
from components.tenant_vcluster import GPU_OPERATOR_IMAGES_ANNOTATION
from config.tenant import GpuOperator
from gpu_operator_chart import gpu_node_images
from hcl_support import VARIABLE_TF, blocks, evaluate, expr, failures, label, parse, precondition, require_tofu, run, unquote

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
NODE_TF = TEMPLATES / "node" / "main.tf"

NODE_TYPE_PROPERTY = re.compile(r'var\.vcluster\.nodeType\.spec\.properties\["([^"]+)"\]')
GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
GCP_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


# --- helpers (python-hcl2 output → HCL text; the shared ones are in hcl_support.py) ------------


def _locals(doc: dict) -> dict:
    merged: dict = {}
    for block in doc.get("locals", []):
        merged.update({k: v for k, v in block.items() if not k.startswith("__")})
    return merged


def _keys_anywhere(value) -> set[str]:
    """Every attribute and block name in a parsed document, comments excluded."""
    keys: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k.startswith("__"):
                continue
            keys.add(label(k))
            keys |= _keys_anywhere(v)
    elif isinstance(value, list):
        for v in value:
            keys |= _keys_anywhere(v)
    return keys


def _is_block_list(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and v.get("__is_block__") for v in value)


def _argument_expressions(body: dict, prefix: str = "") -> dict[str, str]:
    """Resource arguments as {"block.argument": HCL expression}. A dynamic block becomes the list
    of its content objects (iterator replaced), so it can be evaluated without the provider."""
    found: dict[str, str] = {}
    for key, value in body.items():
        if key.startswith("__") or key == "lifecycle":
            continue
        if key == "dynamic":
            for entry in value:
                for raw_label, spec in entry.items():
                    name = label(raw_label)
                    for_each = expr(spec["for_each"])
                    content = expr(spec["content"][0])
                    content = content.replace(f"{name}.value", "dyn_item").replace(f"{name}.key", "dyn_key")
                    found[f"{prefix}dynamic.{name}.for_each"] = for_each
                    found[f"{prefix}{name}"] = f"[for dyn_key, dyn_item in {for_each} : {content}]"
            continue
        if _is_block_list(value):
            for index, block in enumerate(value):
                inner = f"{prefix}{key}." if len(value) == 1 else f"{prefix}{key}.{index}."
                found.update(_argument_expressions(block, inner))
            continue
        found[prefix + key] = expr(value)
    return found


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doc() -> dict:
    return parse(NODE_TF)


@pytest.fixture(scope="module")
def instance(doc) -> dict:
    resources = blocks(doc, "resource")
    return resources["google_compute_instance.node"]


@pytest.fixture(scope="module")
def local_values(doc) -> dict:
    return _locals(doc)


@pytest.fixture(scope="module")
def preconditions(instance) -> list[dict]:
    return [p for block in instance.get("lifecycle", []) for p in block.get("precondition", [])]


@pytest.fixture(scope="module")
def offer():
    """Node types of a real environment: prod as shipped offers T4 (N1), L4 (G2), A100 (A2), H100
    (A3), Spot variants and E2 CPU types."""
    stack = load_stack(read_stack_values(SHIPPED_DIR, "prod"), stack="prod", project_dir=SHIPPED_DIR)
    return stack


def _pick(stack, *, series: str, gpu: str | None, spot: bool, capacity: str | None = None):
    capacity = capacity or (props.SPOT if spot else props.ON_DEMAND)
    for nt in stack.offer.node_types:
        if nt.machine_type.startswith(series + "-") and nt.gpu == gpu and nt.capacity == capacity and nt.rank <= 1:
            return nt
    raise AssertionError(f"the prod offer has no {series} node type with {gpu} ({capacity})")


@pytest.fixture(scope="module")
def samples(offer) -> dict:
    return {
        "t4-n1": _pick(offer, series="n1", gpu="nvidia-tesla-t4", spot=False),
        "l4-g2": _pick(offer, series="g2", gpu="nvidia-l4", spot=False),
        "a100-a2": _pick(offer, series="a2", gpu="nvidia-tesla-a100", spot=False),
        "h100-a3": _pick(offer, series="a3", gpu="nvidia-h100-80gb", spot=False),
        "t4-n1-spot": _pick(offer, series="n1", gpu="nvidia-tesla-t4", spot=True),
        "l4-g2-spot": _pick(offer, series="g2", gpu="nvidia-l4", spot=True),
        "cpu-e2": _pick(offer, series="e2", gpu=None, spot=False),
        # The research team's slice of prod's reservation research-h100.
        "h100-rsv": _pick(offer, series="a3", gpu="nvidia-h100-80gb", spot=False, capacity=props.RESERVED),
    }


# --- the variable and the providers -------------------------------------------------------------


def test_template_does_not_declare_the_platform_variable(doc):
    assert "vcluster" not in blocks(doc, "variable"), "the platform declares var.vcluster itself"
    assert not re.search(r'^\s*variable\s+"vcluster"', NODE_TF.read_text(), flags=re.M)


def test_variable_file_declares_it_for_local_checks_only():
    variable = blocks(parse(VARIABLE_TF), "variable")["vcluster"]
    assert variable["type"] == "any"
    assert variable["sensitive"] is True
    text = VARIABLE_TF.read_text()
    assert "never embeds" in text and "platform" in text.lower()


def test_providers_are_pinned_exactly(doc):
    (terraform,) = doc["terraform"]
    assert unquote(terraform["required_version"]) == ">= 1.6"
    providers = {k: v for block in terraform["required_providers"] for k, v in block.items() if not k.startswith("__")}
    assert unquote(providers["google"]["source"]) == "hashicorp/google"
    assert unquote(providers["google"]["version"]) == "7.45.0"
    for name, spec in providers.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", unquote(spec["version"])), f"{name} is not pinned exactly"
    assert set(providers) <= {"google", "random"}
    if "random" in providers:
        assert unquote(providers["random"]["source"]) == "hashicorp/random"


def test_single_file_without_modules_or_data_sources(doc):
    assert "module" not in doc, "inline templates cannot use modules"
    # The platform's role has no read permission a data source would need (images, projects).
    assert "data" not in doc


# --- the instance --------------------------------------------------------------------------------


def test_exactly_one_instance(doc):
    resources = blocks(doc, "resource")
    assert list(resources) == ["google_compute_instance.node"]


def test_guest_accelerator_only_for_guest_attach_series(instance, local_values):
    assert "guest_accelerator" not in instance, "a static guest_accelerator block would also hit A2/A3/G2"
    dynamics = {label(k): v for entry in instance["dynamic"] for k, v in entry.items()}
    block = dynamics["guest_accelerator"]
    assert expr(block["for_each"]) == "local.guest_attach ? [local.accelerator] : []"
    content = block["content"][0]
    assert expr(content["type"]) == "guest_accelerator.value"
    assert expr(content["count"]) == "local.accelerator_count"
    assert expr(local_values["guest_attach"]) == "local.gpu && contains(local.guest_series, local.machine_series)"
    assert expr(local_values["machine_series"]) == 'split("-", local.instance_type)[0]'


def test_machine_and_placement_come_from_the_node_type(instance, local_values):
    assert expr(instance["machine_type"]) == "local.instance_type"
    assert expr(instance["zone"]) == "local.zone"
    assert expr(instance["project"]) == "local.project"
    assert expr(local_values["instance_type"]) == 'local.node_type["gpu-platform/instance-type"]'
    assert expr(local_values["zone"]) == (
        'local.node_type["gpu-platform/zone"] != "" ? local.node_type["gpu-platform/zone"] : local.fallback_zone'
    )
    assert 'var.vcluster.properties["zone"]' in expr(local_values["fallback_zone"])


def test_gpu_vms_terminate_on_host_maintenance(instance, local_values):
    (scheduling,) = instance["scheduling"]
    assert expr(scheduling["on_host_maintenance"]) == 'local.gpu || local.spot ? "TERMINATE" : "MIGRATE"'
    assert expr(scheduling["automatic_restart"]) == 'local.provisioning_model == "STANDARD"'
    assert expr(local_values["gpu"]) == 'local.accelerator != "none"'


def test_provisioning_model_follows_the_capacity_type(instance, local_values):
    (scheduling,) = instance["scheduling"]
    assert expr(local_values["spot"]) == 'local.capacity_type == "spot"'
    assert expr(local_values["flex_start"]) == 'local.capacity_type == "flex-start"'
    assert expr(local_values["reserved"]) == 'local.capacity_type == "reservation"'
    assert expr(local_values["provisioning_model"]) == (
        'local.spot ? "SPOT" : local.flex_start ? "FLEX_START" : local.reservation_bound ? "RESERVATION_BOUND" : "STANDARD"'
    )
    assert expr(scheduling["provisioning_model"]) == "local.provisioning_model"
    assert expr(scheduling["preemptible"]) == "local.spot"
    assert expr(scheduling["instance_termination_action"]) == 'local.provisioning_model == "STANDARD" ? null : "DELETE"'


def test_every_vm_states_its_reservation_affinity(instance):
    """A static block, never dynamic: no VM is left to Compute Engine's default, ANY_RESERVATION."""
    (affinity,) = instance["reservation_affinity"]
    assert expr(affinity["type"]) == 'local.reserved ? "SPECIFIC_RESERVATION" : "NO_RESERVATION"'


def test_no_external_ip_anywhere(doc, instance):
    assert "access_config" not in _keys_anywhere(doc)
    (nic,) = instance["network_interface"]
    assert expr(nic["subnetwork"]) == "local.subnet_name"
    assert "network_ip" not in nic


def test_network_and_identity_come_from_the_environment(local_values, instance):
    outputs = 'var.vcluster.nodeEnvironment.outputs.infrastructure["{}"]'
    assert expr(local_values["subnet_name"]) == f"nonsensitive({outputs.format('subnet_name')})"
    assert expr(local_values["service_account_email"]) == f"nonsensitive({outputs.format('service_account_email')})"
    (account,) = instance["service_account"]
    assert expr(account["email"]) == "local.service_account_email"
    assert [unquote(s) for s in account["scopes"]] == ["cloud-platform"]


def test_user_data_is_concealing_unless_exposed(instance, local_values):
    assert expr(instance["metadata"]) == "local.metadata"
    metadata = expr(local_values["metadata"])
    assert "length(local.boothooks) > 0 ? {user-data = local.boothook_user_data} : {}" in metadata
    assert "length(local.boothooks) == 0 && local.has_user_data ? {user-data = var.vcluster.userData} : {}" in metadata
    assert expr(local_values["boothooks"]).startswith('concat(local.conceal_metadata ? [{name = "gpu-platform-conceal-metadata", script = local.conceal_script}] : []')
    assert expr(local_values["has_user_data"]) == "try(nonsensitive(length(var.vcluster.userData) > 0), false)"
    # Only "exposed" opts out: a missing or mistyped property conceals (and a precondition names it).
    assert expr(local_values["conceal_metadata"]) == 'local.node_metadata != "exposed"'
    assert 'var.vcluster.properties["gpu-platform/node-metadata"]' in expr(local_values["node_metadata"])
    # user-data appears nowhere else, in particular not unconditionally.
    assert metadata.count("user-data") == 2


def test_metadata_for_driver_ssh_and_os_login(local_values):
    metadata = expr(local_values["metadata"])
    assert 'local.gpu ? {install-nvidia-driver = "False"} : {}' in metadata
    assert metadata.count("install-nvidia-driver") == 1
    assert 'block-project-ssh-keys = "TRUE"' in metadata
    assert 'enable-oslogin = "TRUE"' in metadata


def test_boot_disk_from_image_properties(instance, local_values):
    (disk,) = instance["boot_disk"]
    assert disk["auto_delete"] is True
    (params,) = disk["initialize_params"]
    assert expr(params["image"]) == "local.image"
    assert expr(params["size"]) == "local.disk_size_gb"
    assert expr(params["type"]) == "local.disk_type"
    image = expr(local_values["image"])
    assert image == (
        '"projects/${local.node_type["gpu-platform/image-project"]}/global/images/family/'
        '${local.node_type["gpu-platform/image-family"]}"'
    )


def test_shielded_vm(instance):
    (shielded,) = instance["shielded_instance_config"]
    assert shielded["enable_vtpm"] is True
    assert shielded["enable_integrity_monitoring"] is True
    assert expr(shielded["enable_secure_boot"]) == "!local.gpu"
    assert "not signed for Secure Boot" in NODE_TF.read_text()


def test_labels_and_network_tag(instance, local_values):
    assert expr(instance["tags"]) == "[local.vcluster_name]"
    assert expr(instance["labels"]) == "local.labels"
    labels = expr(local_values["labels"])
    for key in ("vcluster", "namespace", "cluster-name", "gpu", "accelerator", "capacity-type", "tenant"):
        assert re.search(rf"[{{,] ?{re.escape(key)} = ", labels), f"label {key} missing"
    assert 'substr(replace(lower(value), "/[^a-z0-9_-]/", "-"), 0, 63)' in labels
    assert "cluster-name = local.vcluster_name" in labels
    assert 'var.vcluster.properties["gpu-platform/tenant"]' in expr(local_values["tenant"])
    assert expr(local_values["vcluster_name"]) == 'try(nonsensitive(var.vcluster.instance.metadata.name), "")'


def test_name_derived_from_prefix_and_claim(instance, local_values):
    assert expr(instance["name"]) == "local.instance_name"
    # Compute Engine takes only an FQDN as custom hostname; the VM name is the hostname.
    assert "hostname" not in instance
    assert "var.vcluster.nodeClaim.metadata.name" in expr(local_values["claim_name"])
    name = expr(local_values["instance_name"])
    assert name.startswith('format("%s%s-%s", local.name_prefix,')
    assert "local.claim_slug" in name and ", 0, 56 - length(local.name_prefix))" in name and "md5(" in name
    assert expr(local_values["name_prefix"]) == 'try(nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["node_name_prefix"]), "")'
    # The boot disk takes the VM's name (no name of its own), so the platform's condition on
    # disk names holds for it too.
    (disk,) = instance["boot_disk"]
    assert "device_name" not in disk and "name" not in disk["initialize_params"][0]


def test_every_read_of_the_variable_is_unwrapped():
    """Upstream wraps every read in nonsensitive(); only the user data stays sensitive."""
    text = NODE_TF.read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    reads = [m for m in re.finditer(r"var\.vcluster\.", code)]
    assert reads
    for match in reads:
        if code.startswith("var.vcluster.userData", match.start()):
            continue
        before = code[: match.start()]
        assert before.endswith("nonsensitive("), f"unwrapped read at: {code[match.start():match.start() + 60]!r}"


# --- preconditions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, condition",
    [
        (r"^Property project must be a concrete GCP project id, not empty or a wildcard", "local.project_concrete"),
        (r"^Property region must be a concrete GCP region, not empty or a wildcard", "local.region_concrete"),
        (r"^No concrete zone", "local.zone_concrete"),
        (r"is not in region", '!(local.zone_concrete && local.region_concrete) || startswith(local.zone, "${local.region}-")'),
        (r"lacks the properties", "length(local.missing_node_type_properties) == 0"),
        (r"capacity-type .* must be on-demand, spot, flex-start or reservation", 'contains(["on-demand", "spot", "flex-start", "reservation"], local.capacity_type)'),
        (r"capacity-rank .* must be a whole number", "local.capacity_rank >= 0 && floor(local.capacity_rank) == local.capacity_rank"),
        (r"is flex-start, so property gpu-platform/max-run-duration must be", "!local.flex_start || (local.max_run_seconds >= 600 && local.max_run_seconds <= 604800 && floor(local.max_run_seconds) == local.max_run_seconds)"),
        (r"Compute Engine sells Flex-start for accelerator-optimized machine types only", "!(local.flex_start && contains(local.guest_series, local.machine_series))"),
        (r"is a reservation but lacks", '!local.reserved || (local.reservation_name != "" && local.reservation_tenant != "" && contains(["true", "false"], local.optional_properties["gpu-platform/reservation-bound"]))'),
        (r"slice of reservation .* may not consume it", "!local.reserved || local.reservation_tenant == local.tenant"),
        (r"accelerator-count .* must be a whole number", "local.accelerator_count >= 0 && floor(local.accelerator_count) == local.accelerator_count"),
        (r"has accelerator .* but accelerator-count .*needs a count of at least 1", "!(local.gpu && local.accelerator_count == 0)"),
        (r"but accelerator none: set the GPU type or a count of 0", '!(local.accelerator == "none" && local.accelerator_count > 0)'),
        (r"is not in this template's GPU table", "local.gpu_known"),
        (r"does not fit machine series .*; it needs series", "!local.gpu_known || local.gpu_fits"),
        (r"comes with built-in GPUs, but .* has accelerator none", "local.gpu || !contains(local.builtin_series, local.machine_series)"),
        (r"disk-size-gb .* must be a positive whole number", "local.disk_size_gb > 0 && floor(local.disk_size_gb) == local.disk_size_gb"),
        (r"is not a valid GCP network tag", 'can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", local.vcluster_name))'),
        (r"no node claim name", 'local.claim_name != ""'),
        (r"^Property gpu-platform/node-metadata must be concealed or exposed", 'contains(["", "concealed", "exposed"], local.node_metadata)'),
    ],
)
def test_precondition(preconditions, pattern, condition):
    assert expr(precondition(preconditions, pattern)["condition"]) == condition


def test_wildcard_checks_refuse_every_glob_character(local_values):
    assert unquote(local_values["wildcard"]) == r"[*?\\[\\]{}]"
    for name in ("project", "region", "zone"):
        assert expr(local_values[f"{name}_concrete"]) == f'local.{name} != "" && !can(regex(local.wildcard, local.{name}))'
    for name in ("project", "region"):
        assert expr(local_values[name]) == f'trimspace(split(",", try(nonsensitive(var.vcluster.properties["{name}"]), ""))[0])'


def test_series_message_names_type_series_and_needed_series(preconditions):
    message = unquote(precondition(preconditions, r"does not fit machine series")["error_message"])
    assert "${local.accelerator}" in message
    assert "${local.machine_series}" in message
    assert '${join(" or ", lookup(local.gpu_series, local.accelerator, []))}' in message


# --- agreement with config/ -----------------------------------------------------------------------


def _keys_read() -> set[str]:
    return set(NODE_TYPE_PROPERTY.findall(NODE_TF.read_text()))


def test_template_reads_exactly_the_node_type_keys(local_values):
    assert _keys_read() == set(props.NODE_TYPE_KEYS)
    node_type = {unquote(k): v for k, v in local_values["node_type"].items()}
    assert set(node_type) == set(props.NODE_TYPE_KEYS)
    for key, value in node_type.items():
        assert expr(value) == f'try(nonsensitive(var.vcluster.nodeType.spec.properties["{key}"]), "")'
    # The keys only some node types carry (Flex-start, reserved), read as "" where absent.
    optional = expr(local_values["optional_properties"])
    assert optional.startswith("{for key in [") and "key => try(nonsensitive(var.vcluster.nodeType.spec.properties[key]), \"\")" in optional
    assert re.findall(r'"(gpu-platform/[a-z-]+)"', optional.split(" : ")[0]) == list(props.OPTIONAL_NODE_TYPE_KEYS)


@pytest.mark.parametrize("sample", ["t4-n1", "l4-g2", "a100-a2", "h100-a3", "t4-n1-spot", "l4-g2-spot", "cpu-e2", "h100-rsv"])
def test_generated_node_types_carry_exactly_the_keys_read(samples, sample):
    """Besides the keys the template reads, a GPU node type carries only the node labels of
    node_properties.GPU_NODE_LABELS, which the template does not read; a reserved type the
    reservation's keys, a Flex-start type its run duration (node_properties.OPTIONAL_NODE_TYPE_KEYS)."""
    node_type = samples[sample]
    optional = set(node_type.properties) & set(props.OPTIONAL_NODE_TYPE_KEYS)
    assert optional == ({props.RESERVATION, props.RESERVATION_PROJECT, props.RESERVATION_TENANT, props.RESERVATION_BOUND} if node_type.reserved else set())
    assert set(node_type.properties) - set(props.GPU_NODE_LABELS) - optional == _keys_read()
    assert not set(props.GPU_NODE_LABELS) & _keys_read()
    for key, value in node_type.properties.items():
        assert props.is_label_value(value), f"{node_type.name}: {key}={value!r} is not a label value"


def _template_gpu_series(local_values) -> dict[str, list[str]]:
    return {gpu: [unquote(s) for s in series] for gpu, series in local_values["gpu_series"].items()}


def test_gpu_series_table_equals_the_catalog(local_values):
    catalog = load_catalog()
    table = _template_gpu_series(local_values)
    assert set(table) == set(catalog.gpus)
    for gpu, spec in catalog.gpus.items():
        assert table[gpu] == list(spec.series), gpu


def test_guest_series_equal_the_catalog(local_values):
    catalog = load_catalog()
    guest = {s for s, spec in catalog.series.items() if spec["gpuAttach"] == GUEST}
    assert {unquote(s) for s in local_values["guest_series"]} == guest
    builtin = {s for s, spec in catalog.series.items() if spec["gpuAttach"] == BUILTIN}
    template_builtin = {unquote(s) for s in local_values["builtin_series"]}
    assert builtin <= template_builtin
    assert not template_builtin & guest


# --- formatting -----------------------------------------------------------------------------------


def test_fmt_check():
    binary = require_tofu()
    for path in (NODE_TF, VARIABLE_TF):
        result = run(binary, ["fmt", "-check", "-diff", str(path)], ROOT)
        assert result.returncode == 0, f"{path} is not formatted:\n{result.stdout}{result.stderr}"


# --- semantics, evaluated by OpenTofu -----------------------------------------------------------

PROJECT, REGION = "acme-ml-prod", "us-central1"
INFRASTRUCTURE = {
    "network_name": "prod-nlp-nodes",
    "subnet_name": "prod-nlp-nodes",
    "service_account_email": "prod-nlp-nodes@acme-ml-prod.iam.gserviceaccount.com",
    "availability_zones": ["us-central1-a", "us-central1-b"],
    "node_name_prefix": "prod-nlp-",
}
# Shaped like the platform's join data as far as it is public: a cloud-init document. The text
# after it exercises what a byte-for-byte copy must keep: a MIME-looking line, trailing spaces,
# a blank line and no newline at the end.
USER_DATA = "#cloud-config\nruncmd:\n  - curl -fsSLk 'https://203.0.113.10/node/join?token=abc.def' | sh -\n--not-a-boundary  \n\nfinal: true"
MIME_USER_DATA = (
    'Content-Type: multipart/mixed; boundary="platform"\nMIME-Version: 1.0\n\n--platform\n'
    'Content-Type: text/cloud-config\n\n#cloud-config\nruncmd: [join]\n--platform--\n'
)
# As Python's email package writes a MIME document: MIME-Version first.
MIME_VERSION_FIRST = (
    'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="platform"\n\n--platform\n'
    'Content-Type: text/cloud-config\n\n#cloud-config\nruncmd: [join]\n--platform--\n'
)
MIME_MENTIONED = "#!/bin/sh\n# writes a MIME-Version: 1.0 header\necho join"


def _vcluster(properties: dict[str, str], *, user_data: str = USER_DATA, claim: str = "nlp-gpu-7xk2p", name: str = "nlp",
              namespace: str = "p-nlp", extra: dict[str, str] | None = None, drop: tuple[str, ...] = (),
              infrastructure: dict | None = None, annotations: dict[str, str] | None = None) -> dict:
    vcluster_properties = {props.PROJECT: PROJECT, props.REGION: REGION, props.TENANT: "nlp", **(extra or {})}
    return {
        "name": name,
        "userData": user_data,
        "properties": {k: v for k, v in vcluster_properties.items() if k not in drop},
        "nodeType": {"metadata": {"name": "test-type"}, "spec": {"properties": {k: v for k, v in properties.items() if k not in drop}}},
        "nodeClaim": {"metadata": {"name": claim}},
        "instance": {"metadata": {"name": name, "namespace": namespace, **({"annotations": annotations} if annotations else {})}},
        "nodeEnvironment": {"outputs": {"infrastructure": INFRASTRUCTURE if infrastructure is None else infrastructure}},
    }


def _with(base: dict[str, str], **changes: str) -> dict[str, str]:
    return {**base, **{props.PREFIX + k.replace("_", "-"): v for k, v in changes.items()}}


def _in_zone(base: dict[str, str], zone: str) -> dict[str, str]:
    """A node type moved to `zone`, its zone labels with it (an empty zone drops them)."""
    labels = {props.TOPOLOGY_ZONE: zone, props.PD_CSI_ZONE: zone}
    return {k: v for k, v in {**_with(base, zone=zone), **labels}.items() if v or k not in labels}


PREFETCH_GPUS = ["nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-a100"]
PREFETCH_SETTINGS = {"defaults": GpuOperator(), "DCGM off": GpuOperator(dcgm_exporter=False)}


def _prefetch(settings: str) -> dict[str, str]:
    """The instance annotation of the images GPU nodes pull ahead, as TenantVCluster writes it."""
    return {GPU_OPERATOR_IMAGES_ANNOTATION: gpu_operator_images_annotation(PREFETCH_SETTINGS[settings], PREFETCH_GPUS)}


# The node type sample of each GPU a shipped tenant's pools use.
SAMPLE_OF_GPU = {"nvidia-tesla-t4": "t4-n1", "nvidia-l4": "l4-g2", "nvidia-tesla-a100": "a100-a2", "nvidia-h100-80gb": "h100-a3"}


@functools.cache
def _shipped_prefetch() -> dict[str, tuple[GpuOperator, str, dict[str, str]]]:
    """scenario → (settings, GPU, annotation) for each GPU pool of each shipped inline tenant, the
    annotation as TenantVCluster writes it for the tenant (test_image_prefetch.py checks that)."""
    found = {}
    for stack in ("dev", "prod"):
        for plan in load_stack(shipped_values(stack), stack=stack, project_dir=SHIPPED_DIR).tenants:
            tenant = plan.tenant
            gpus = [pool.gpu for pool in tenant.gpu_pools]
            annotation = {GPU_OPERATOR_IMAGES_ANNOTATION: gpu_operator_images_annotation(tenant.gpu_operator, gpus)}
            for gpu in gpus:
                found[f"prefetch-shipped-{stack}-{tenant.name}-{gpu}"] = (tenant.gpu_operator, gpu, annotation)
    return found


@pytest.fixture(scope="module")
def evaluated(samples, instance, preconditions, local_values, tmp_path_factory):
    binary = require_tofu()
    t4 = dict(samples["t4-n1"].properties)
    l4 = dict(samples["l4-g2"].properties)
    a100 = dict(samples["a100-a2"].properties)
    h100 = dict(samples["h100-a3"].properties)
    cpu = dict(samples["cpu-e2"].properties)
    rsv = dict(samples["h100-rsv"].properties)
    research = {props.TENANT: "research"}
    flex = {"capacity_type": "flex-start", "capacity_option": "r1-flex-start"}
    scenarios = {name: _vcluster(dict(nt.properties)) for name, nt in samples.items()}
    scenarios.update(
        {
            # Capacity types (gpu-platform/capacity-type and what goes with it).
            "h100-rsv": _vcluster(rsv, extra=research),
            "flex-l4": _vcluster(_with(l4, **flex, max_run_duration="604800")),
            "flex-a100": _vcluster(_with(a100, **flex, max_run_duration="3600")),
            "rsv-shared": _vcluster(_with(rsv, reservation_project="acme-ml-capacity"), extra=research),
            "rsv-bound": _vcluster(_with(rsv, reservation_bound="true"), extra=research),
            "bad-flex-on-n1": _vcluster(_with(t4, **flex, max_run_duration="3600")),
            "bad-flex-no-duration": _vcluster(_with(l4, **flex)),
            "bad-flex-eight-days": _vcluster(_with(l4, **flex, max_run_duration="691200")),
            "bad-other-tenants-slice": _vcluster(rsv),
            "bad-reservation-unnamed": _vcluster(_with(rsv, reservation=""), extra=research),
            "bad-capacity-rank": _vcluster(_with(t4, capacity_rank="first")),
            "empty-user-data": _vcluster(t4, user_data=""),
            "no-user-data": {k: v for k, v in _vcluster(t4).items() if k != "userData"},
            "null-user-data": {**_vcluster(t4), "userData": None},
            "comma-lists": _vcluster(t4, extra={props.PROJECT: f"{PROJECT},other", props.REGION: f"{REGION},europe-west4"}),
            "zone-fallback": _vcluster(_in_zone(t4, ""), extra={"zone": "us-central1-c,us-central1-f"}),
            "odd-claim": _vcluster(t4, claim="9_GPU.Node/" + "x" * 90, extra={props.TENANT: "NLP.Team"}),
            "same-claim-other-project": _vcluster(t4, namespace="p-other"),
            "no-tenant": _vcluster(t4, drop=(props.TENANT,)),
            "concealed": _vcluster(t4, extra={props.NODE_METADATA: "concealed"}),
            "exposed": _vcluster(t4, extra={props.NODE_METADATA: "exposed"}),
            "exposed-empty-user-data": _vcluster(t4, user_data="", extra={props.NODE_METADATA: "exposed"}),
            "exposed-h100": _vcluster(dict(samples["h100-a3"].properties), extra={props.NODE_METADATA: "exposed"}),
            "mime-user-data": _vcluster(t4, user_data=MIME_USER_DATA),
            "mime-version-first": _vcluster(t4, user_data=MIME_VERSION_FIRST),
            "mime-lower-case": _vcluster(t4, user_data=MIME_VERSION_FIRST.replace("MIME-Version", "mime-version").replace("Content-Type", "content-type")),
            "mime-mentioned": _vcluster(t4, user_data=MIME_MENTIONED),
            # The official infrastructure template (legacy mode) gives no name prefix.
            "no-prefix": _vcluster(t4, infrastructure={k: v for k, v in INFRASTRUCTURE.items() if k != "node_name_prefix"}),
            "no-prefix-odd-claim": _vcluster(t4, claim="9_GPU.Node/" + "x" * 90,
                                             infrastructure={k: v for k, v in INFRASTRUCTURE.items() if k != "node_name_prefix"}),
            "long-prefix": _vcluster(t4, claim="x" * 90, infrastructure={**INFRASTRUCTURE, "node_name_prefix": "staging-computer-vision1-"}),
            # Each of these must fail exactly the named precondition(s).
            "bad-project-wildcard": _vcluster(t4, extra={props.PROJECT: "*"}),
            "bad-project-missing": _vcluster(t4, drop=(props.PROJECT,)),
            "bad-region-glob": _vcluster(t4, extra={props.REGION: "us-*"}),
            "bad-zone-wildcard": _vcluster(_in_zone(t4, ""), extra={"zone": "*"}),
            "bad-zone-glob": _vcluster(_in_zone(t4, "us-central1-[ab]")),
            "bad-zone-region": _vcluster(_in_zone(t4, "europe-west4-a")),
            "bad-zone-label": _vcluster({**t4, props.PD_CSI_ZONE: "us-central1-f"}),
            "bad-zone-labels-fallback": _vcluster(_with(t4, zone=""), extra={"zone": "us-central1-c"}),
            "bad-region-label": _vcluster({**t4, props.TOPOLOGY_REGION: "us-east1"}),
            "bad-missing-property": _vcluster(t4, drop=(props.DISK_TYPE,)),
            "bad-capacity": _vcluster(_with(t4, capacity_type="preemptible")),
            "bad-count-text": _vcluster(_with(t4, accelerator_count="two")),
            "bad-count-zero": _vcluster(_with(t4, accelerator_count="0")),
            "bad-count-without-gpu": _vcluster(_with(cpu, accelerator_count="2")),
            "bad-unknown-gpu": _vcluster(_with(l4, accelerator="nvidia-rtx-pro-6000", instance_type="g4-standard-48")),
            "bad-l4-on-n1": _vcluster(_with(l4, instance_type="n1-standard-8")),
            "bad-t4-on-e2": _vcluster(_with(t4, instance_type="e2-standard-4")),
            "bad-t4-on-g2": _vcluster(_with(t4, instance_type="g2-standard-8")),
            "bad-g2-without-gpu": _vcluster(_with(cpu, instance_type="g2-standard-8")),
            "bad-a2-without-gpu": _vcluster(_with(cpu, instance_type="a2-highgpu-1g")),
            "bad-disk-size": _vcluster(_with(t4, disk_size_gb="0")),
            "bad-vcluster-name": _vcluster(t4, name="9lives"),
            "bad-no-claim": _vcluster(t4, claim=""),
            "bad-node-metadata": _vcluster(t4, extra={props.NODE_METADATA: "hidden"}),
            # Image prefetch (gpu-platform/gpu-operator-images).
            "prefetch-l4": _vcluster(l4, annotations=_prefetch("defaults")),
            "prefetch-a100": _vcluster(a100, annotations=_prefetch("defaults")),
            "prefetch-a100-dcgm-off": _vcluster(a100, annotations=_prefetch("DCGM off")),
            "prefetch-exposed": _vcluster(l4, annotations=_prefetch("defaults"), extra={props.NODE_METADATA: "exposed"}),
            "prefetch-exposed-no-user-data": _vcluster(l4, user_data="", annotations=_prefetch("defaults"), extra={props.NODE_METADATA: "exposed"}),
            "prefetch-cpu": _vcluster(cpu, annotations=_prefetch("defaults"), extra={props.NODE_METADATA: "exposed"}),
            "prefetch-other-gpu": _vcluster(h100, annotations=_prefetch("defaults"), extra={props.NODE_METADATA: "exposed"}),
            "prefetch-not-json": _vcluster(l4, annotations={GPU_OPERATOR_IMAGES_ANNOTATION: "{nvidia-l4: [a]"}, extra={props.NODE_METADATA: "exposed"}),
            "prefetch-unsafe": _vcluster(l4, annotations={GPU_OPERATOR_IMAGES_ANNOTATION: json.dumps(
                {"nvidia-l4": ["nvcr.io/nvidia/a:1;reboot", "$(reboot)", "a b:1", "nvcr.io/nvidia/k8s-device-plugin:v0.18.1", 7]})}),
        }
    )
    scenarios.update(
        {name: _vcluster(dict(samples[SAMPLE_OF_GPU[gpu]].properties), annotations=annotation) for name, (_, gpu, annotation) in _shipped_prefetch().items()}
    )
    probe = {f"local.{name}": f"local.{name}" for name in local_values}
    probe.update({f"arg.{path}": expression for path, expression in _argument_expressions(instance).items()})
    probe["preconditions"] = "[" + ", ".join(
        f"{{ok = {expr(p['condition'])}, message = {expr(p['error_message'])}}}" for p in preconditions
    ) + "]"
    return evaluate(binary, tmp_path_factory.mktemp("node-template"), NODE_TF, probe, scenarios)


@pytest.mark.parametrize("sample", ["t4-n1", "l4-g2", "a100-a2", "h100-a3", "t4-n1-spot", "l4-g2-spot", "cpu-e2", "h100-rsv"])
def test_generated_node_types_pass_every_precondition(evaluated, samples, sample):
    assert failures(evaluated[sample]) == []
    arg = evaluated[sample]
    nt = samples[sample]
    assert arg["arg.machine_type"] == nt.machine_type
    assert arg["arg.zone"] == nt.zone
    assert arg["arg.project"] == PROJECT
    assert arg["arg.boot_disk.initialize_params.image"] == (
        f"projects/{nt.properties[props.IMAGE_PROJECT]}/global/images/family/{nt.properties[props.IMAGE_FAMILY]}"
    )
    assert arg["arg.boot_disk.initialize_params.size"] == int(nt.properties[props.DISK_SIZE_GB])
    assert arg["arg.boot_disk.initialize_params.type"] == nt.properties[props.DISK_TYPE]
    assert arg["arg.network_interface.subnetwork"] == INFRASTRUCTURE["subnet_name"]
    assert arg["arg.service_account.email"] == INFRASTRUCTURE["service_account_email"]
    assert arg["arg.tags"] == ["nlp"]


@pytest.mark.parametrize(
    "sample, guest",
    [("t4-n1", [{"type": "nvidia-tesla-t4", "count": 1}]), ("t4-n1-spot", [{"type": "nvidia-tesla-t4", "count": 1}]),
     ("l4-g2", []), ("a100-a2", []), ("h100-a3", []), ("cpu-e2", [])],
)
def test_guest_accelerator_evaluated(evaluated, samples, sample, guest):
    assert evaluated[sample]["arg.guest_accelerator"] == guest
    if guest:
        assert samples[sample].attach == GUEST


@pytest.mark.parametrize(
    "sample, maintenance, restart, model, preemptible, action",
    [
        ("t4-n1", "TERMINATE", True, "STANDARD", False, None),
        ("l4-g2", "TERMINATE", True, "STANDARD", False, None),
        ("a100-a2", "TERMINATE", True, "STANDARD", False, None),
        ("t4-n1-spot", "TERMINATE", False, "SPOT", True, "DELETE"),
        ("l4-g2-spot", "TERMINATE", False, "SPOT", True, "DELETE"),
        ("cpu-e2", "MIGRATE", True, "STANDARD", False, None),
        ("flex-l4", "TERMINATE", False, "FLEX_START", False, "DELETE"),
        ("flex-a100", "TERMINATE", False, "FLEX_START", False, "DELETE"),
        ("h100-rsv", "TERMINATE", True, "STANDARD", False, None),
        ("rsv-bound", "TERMINATE", False, "RESERVATION_BOUND", False, "DELETE"),
    ],
)
def test_scheduling_evaluated(evaluated, sample, maintenance, restart, model, preemptible, action):
    """The scheduling block Google documents for each provisioning model: Spot (create-use-spot),
    Flex-start (the provider's acceptance test testAccComputeInstance_flexStart: no restart,
    TERMINATE, DELETE and a max run duration), reservation-bound (testAccComputeInstance_reservationBound)."""
    result = evaluated[sample]
    assert failures(result) == []
    assert result["arg.scheduling.on_host_maintenance"] == maintenance
    assert result["arg.scheduling.automatic_restart"] is restart
    assert result["arg.scheduling.provisioning_model"] == model
    assert result["arg.scheduling.preemptible"] is preemptible
    assert result["arg.scheduling.instance_termination_action"] == action


@pytest.mark.parametrize("sample, seconds", [("flex-l4", 604800), ("flex-a100", 3600), ("l4-g2", None), ("l4-g2-spot", None), ("h100-rsv", None)])
def test_only_flex_start_vms_get_a_max_run_duration(evaluated, sample, seconds):
    assert evaluated[sample]["arg.scheduling.max_run_duration"] == ([] if seconds is None else [{"seconds": seconds}])


@pytest.mark.parametrize(
    "sample, affinity",
    [
        *((s, ("NO_RESERVATION", [])) for s in ("t4-n1", "l4-g2", "a100-a2", "h100-a3", "t4-n1-spot", "l4-g2-spot", "cpu-e2", "flex-l4")),
        # In its own project (prod's reservation is in acme-ml-prod, the VM's project here): by name.
        ("h100-rsv", ("SPECIFIC_RESERVATION", [{"key": "compute.googleapis.com/reservation-name", "values": ["research-h100"]}])),
        ("rsv-bound", ("SPECIFIC_RESERVATION", [{"key": "compute.googleapis.com/reservation-name", "values": ["research-h100"]}])),
        # Shared from another project: projects/<owner>/reservations/<name>.
        ("rsv-shared", ("SPECIFIC_RESERVATION", [{"key": "compute.googleapis.com/reservation-name", "values": ["projects/acme-ml-capacity/reservations/research-h100"]}])),
    ],
)
def test_reservation_affinity_evaluated(evaluated, sample, affinity):
    """Every VM says which reservations it may consume: none unless its node type is a reserved one."""
    result = evaluated[sample]
    assert failures(result) == []
    assert (result["arg.reservation_affinity.type"], result["arg.reservation_affinity.specific_reservation"]) == affinity


def test_gpu_and_cpu_vms_differ_in_secure_boot_and_driver_metadata(evaluated):
    gpu, cpu = evaluated["l4-g2"], evaluated["cpu-e2"]
    assert gpu["arg.shielded_instance_config.enable_secure_boot"] is False
    assert cpu["arg.shielded_instance_config.enable_secure_boot"] is True
    for result in (gpu, cpu):
        assert result["arg.shielded_instance_config.enable_vtpm"] is True
        assert result["arg.shielded_instance_config.enable_integrity_monitoring"] is True
    assert gpu["arg.metadata"]["install-nvidia-driver"] == "False"
    assert "install-nvidia-driver" not in cpu["arg.metadata"]
    for result in (gpu, cpu):
        assert result["arg.metadata"]["block-project-ssh-keys"] == "TRUE"
        assert result["arg.metadata"]["enable-oslogin"] == "TRUE"


def test_a3_uses_gvnic(evaluated):
    assert evaluated["h100-a3"]["arg.network_interface.nic_type"] == "GVNIC"
    assert evaluated["l4-g2"]["arg.network_interface.nic_type"] is None


def _parts(user_data: str) -> list[email.message.Message]:
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed" and message["MIME-Version"] == "1.0"
    return message.get_payload()


def _conceals(part: email.message.Message) -> None:
    """The boothook part: the concealment script (what it does on a node: the boothook tests
    below), which never touches OUTPUT (the host network's own traffic)."""
    assert part.get_content_type() == "text/cloud-boothook"
    script = part.get_payload()
    assert script.startswith("#!/bin/sh\n") and DROPIN_DIR_LINE in script
    assert "OUTPUT" not in script


def test_user_data_conceals_the_metadata_server_and_keeps_the_platforms_data(evaluated):
    for scenario in ("t4-n1", "concealed", "l4-g2", "cpu-e2"):
        user_data = evaluated[scenario]["arg.metadata"]["user-data"]
        boothook, platform = _parts(user_data)
        _conceals(boothook)
        # The platform's part, byte for byte, typed by cloud-init from its first line.
        assert platform.get_content_type() == "text/plain"
        assert platform.get_payload() == USER_DATA
        assert failures(evaluated[scenario]) == []


def test_user_data_of_a_mime_platform_keeps_its_own_headers(evaluated):
    user_data = evaluated["mime-user-data"]["arg.metadata"]["user-data"]
    assert MIME_USER_DATA in user_data
    boothook, platform = _parts(user_data)
    _conceals(boothook)
    assert platform.get_content_type() == "multipart/mixed"
    [inner] = platform.get_payload()
    assert inner.get_content_type() == "text/cloud-config" and inner.get_payload() == "#cloud-config\nruncmd: [join]"


@pytest.mark.parametrize("scenario", ["mime-version-first", "mime-lower-case"])
def test_user_data_starting_with_mime_version_is_mime_too(evaluated, scenario):
    """cloud-init takes data with a MIME-Version header for MIME (cloudinit/user_data.py
    `convert_string`, any case): such data keeps its own headers instead of becoming the text of
    a text/plain part, which cloud-init would not run."""
    user_data = evaluated[scenario]["arg.metadata"]["user-data"]
    boothook, platform = _parts(user_data)
    _conceals(boothook)
    assert platform.get_content_type() == "multipart/mixed"
    [inner] = platform.get_payload()
    assert inner.get_content_type() == "text/cloud-config" and inner.get_payload() == "#cloud-config\nruncmd: [join]"


def test_user_data_that_only_mentions_mime_further_down_stays_text(evaluated):
    boothook, platform = _parts(evaluated["mime-mentioned"]["arg.metadata"]["user-data"])
    assert platform.get_content_type() == "text/plain" and platform.get_payload() == MIME_MENTIONED


# --- the boothook on a node (tests/node_boot_support.py: fake iptables, scratch drop-in dir) -----

RAW_JUMP = "-d 169.254.169.254/32 -j GPU-PLATFORM-METADATA"
METADATA_CHAIN = ["-p udp --dport 53 -j RETURN", "-p tcp --dport 53 -j RETURN", "-j DROP"]


@pytest.fixture
def boothook(evaluated) -> str:
    [boothook, _] = _parts(evaluated["t4-n1"]["arg.metadata"]["user-data"])
    assert boothook.get_payload() == evaluated["t4-n1"]["local.conceal_script"].rstrip("\n")
    return boothook.get_payload()


def test_the_boothook_drops_pod_traffic_to_the_metadata_server_before_and_after_nat(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    raw, mangle = boot.tables["raw"], boot.tables["mangle"]
    # First in raw PREROUTING (before NAT) and in mangle FORWARD (after DNAT, before filter).
    assert raw["PREROUTING"] == [RAW_JUMP] and mangle["FORWARD"] == [RAW_JUMP]
    assert raw["GPU-PLATFORM-METADATA"] == mangle["GPU-PLATFORM-METADATA"] == METADATA_CHAIN
    assert raw["OUTPUT"] == mangle["OUTPUT"] == []  # the host's own traffic (hostNetwork pods) passes
    # Run again in the same boot: no second jump.
    again = node.boot(boothook)
    assert again.status == 0 and again.tables == boot.tables


def test_the_kubelets_gate_runs_the_same_installer(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    installer = node.installer_dir / "conceal-metadata"
    assert installer.read_text() == (tmp_path / "boothook").read_text()  # the boothook itself, byte for byte
    assert node.dropin().splitlines() == [
        "[Unit]",
        "After=cloud-init.service cloud-init-network.service",
        "[Service]",
        f"ExecStartPre=/bin/sh {installer} gate",
    ]
    assert node.kubelet_may_start(node.dropin())


def test_the_gate_puts_back_a_lost_rule_before_the_kubelet_starts(boothook, tmp_path):
    """A node reset or an in-place upgrade that flushed a rule: the next kubelet start repairs it."""
    node = Node(tmp_path)
    boot = node.boot(boothook)
    lost = [
        ("raw", "PREROUTING", RAW_JUMP),
        ("mangle", "FORWARD", RAW_JUMP),
        ("mangle", "GPU-PLATFORM-METADATA", "-j DROP"),
        ("raw", "GPU-PLATFORM-METADATA", "-p udp --dport 53 -j RETURN"),
    ]
    for table, chain, rule in lost:
        tables = json.loads(json.dumps(boot.tables))
        tables[table][chain].remove(rule)
        node.state.write_text(json.dumps(tables))
        assert node.kubelet_may_start(node.dropin()), (table, chain, rule)
        assert json.loads(node.state.read_text()) == boot.tables, (table, chain, rule)  # every rule back, none twice
        assert not any("poweroff" in c for c in node.calls.read_text().splitlines())


def test_the_gate_leaves_intact_rules_alone_and_repairs_a_flushed_node(boothook, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert node.kubelet_may_start(node.dropin())
    changes = [c for c in node.calls.read_text().splitlines() if " -C " not in c]
    assert changes == []  # intact: only checks, no chain flushed while pods run
    node.reboot()  # all rules gone (as after a flush)
    assert node.kubelet_may_start(node.dropin())
    assert json.loads(node.state.read_text()) == boot.tables


@pytest.mark.parametrize("fail, why", [("-t raw -N", "chain in raw"), ("-t mangle -I FORWARD", "mangle FORWARD")])
def test_the_gate_refuses_the_kubelet_only_when_installing_fails(boothook, tmp_path, fail, why):
    node = Node(tmp_path)
    boot = node.boot(boothook)
    assert (boot.status, boot.powered_off) == (0, False), boot.stderr
    node.reboot()
    assert not node.kubelet_may_start(node.dropin(), fail=fail)
    assert not any("poweroff" in c for c in node.calls.read_text().splitlines())  # the gate never powers off a running node
    result = subprocess.run(
        ["/bin/sh", str(node.installer_dir / "conceal-metadata"), "gate"], env=node.env(fail=fail), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and f"metadata concealment failed ({why}); the kubelet does not start" in result.stderr
    (node.installer_dir / "conceal-metadata").unlink()  # a reset that removed the installer: fail closed
    assert not node.kubelet_may_start(node.dropin())


@pytest.mark.parametrize(
    "iptables, fail, why",
    [
        (False, "", "chain in raw"),  # no iptables at all
        (True, "-t raw -N", "chain in raw"),
        (True, "-t mangle -A GPU-PLATFORM-METADATA -j DROP", "drop rule in mangle"),
        (True, "-t raw -I PREROUTING", "raw PREROUTING"),
        (True, "-t mangle -I FORWARD", "mangle FORWARD"),
    ],
)
def test_a_node_that_cannot_conceal_powers_off_and_its_kubelet_cannot_start(boothook, tmp_path, iptables, fail, why):
    node = Node(tmp_path, iptables=iptables)
    boot = node.boot(boothook, fail=fail)
    assert boot.status != 0 and boot.powered_off, boot.calls
    assert f"metadata concealment failed ({why})" in boot.stderr
    # The drop-in was written first, so even a kubelet that is started anyway does not run while
    # installing still fails.
    assert node.dropin() is not None and not node.kubelet_may_start(node.dropin(), fail=fail)


def test_exposed_passes_the_platforms_data_alone(evaluated):
    assert evaluated["exposed"]["arg.metadata"]["user-data"] == USER_DATA
    assert "user-data" not in evaluated["exposed-empty-user-data"]["arg.metadata"]
    assert failures(evaluated["exposed"]) == []


def test_without_platform_data_the_node_still_conceals(evaluated):
    for scenario in ("empty-user-data", "no-user-data", "null-user-data"):
        [boothook] = _parts(evaluated[scenario]["arg.metadata"]["user-data"])
        _conceals(boothook)
        assert failures(evaluated[scenario]) == []


def test_labels_evaluated(evaluated):
    assert evaluated["l4-g2-spot"]["arg.labels"] == {
        "vcluster": "nlp",
        "namespace": "p-nlp",
        "cluster-name": "nlp",
        "gpu": "true",
        "accelerator": "nvidia-l4",
        "capacity-type": "spot",
        "tenant": "nlp",
    }
    assert evaluated["cpu-e2"]["arg.labels"]["gpu"] == "false"
    assert evaluated["cpu-e2"]["arg.labels"]["accelerator"] == "none"
    assert evaluated["odd-claim"]["arg.labels"]["tenant"] == "nlp-team"
    assert "tenant" not in evaluated["no-tenant"]["arg.labels"]
    assert failures(evaluated["no-tenant"]) == []
    for scenario in ("t4-n1", "odd-claim", "cpu-e2"):
        labels = evaluated[scenario]["arg.boot_disk.initialize_params.labels"]
        assert labels == evaluated[scenario]["arg.labels"]
        assert all(GCP_LABEL_VALUE.match(v) for v in labels.values()), labels
    # The labels the cost view reads a shared team and a GPU node's cost by (components/showback.py).
    key, value = GPU_NODE_LABEL
    assert [s for s in ("l4-g2-spot", "t4-n1", "cpu-e2") if evaluated[s]["arg.labels"].get(key) == value] == ["l4-g2-spot", "t4-n1"]
    assert evaluated["odd-claim"]["arg.labels"][TENANT_LABEL] == "nlp-team"


def test_instance_names_evaluated(evaluated):
    scenarios = ("t4-n1", "odd-claim", "same-claim-other-project", "l4-g2", "no-prefix", "no-prefix-odd-claim", "long-prefix")
    names = {s: evaluated[s]["arg.name"] for s in scenarios}
    for name in names.values():
        assert GCE_NAME.match(name) and len(name) <= 63, name
    # The tenant's prefix first: the platform's VM role is conditioned on it.
    assert names["t4-n1"].startswith("prod-nlp-nlp-gpu-7xk2p-")
    assert names["odd-claim"].startswith("prod-nlp-9-gpu-node-xxx")
    assert len(names["odd-claim"]) == len(names["long-prefix"]) == 63
    assert names["long-prefix"].startswith("staging-computer-vision1-xxx")
    # Without a prefix (legacy mode) the name still starts with a letter.
    assert names["no-prefix"].startswith("nlp-gpu-7xk2p-")
    assert names["no-prefix-odd-claim"].startswith("n-9-gpu-node-xxx") and len(names["no-prefix-odd-claim"]) == 63
    # Same claim name in another platform project: another VM name.
    assert names["t4-n1"] != names["same-claim-other-project"]
    # Deterministic: the same claim always gives the same name (re-applies do not replace the VM).
    assert evaluated["empty-user-data"]["arg.name"] == names["t4-n1"]


def test_comma_lists_and_zone_fallback(evaluated):
    result = evaluated["comma-lists"]
    assert (result["arg.project"], result["local.region"]) == (PROJECT, REGION)
    assert failures(result) == []
    assert evaluated["zone-fallback"]["arg.zone"] == "us-central1-c"
    assert failures(evaluated["zone-fallback"]) == []


@pytest.mark.parametrize(
    "scenario, expected",
    [
        ("bad-project-wildcard", [r"^Property project must be .*got \"\*\""]),
        ("bad-project-missing", [r"^Property project must be .*got \"\"\)\. Pulumi sets it on each tenant's auto-nodes entry"]),
        ("bad-region-glob", [r"^Property region must be .*got \"us-\*\""]),
        ("bad-zone-wildcard", [r"^No concrete zone"]),
        ("bad-zone-glob", [r"^No concrete zone"]),
        ("bad-zone-region", [r"^Zone europe-west4-a of node type test-type is not in region us-central1"]),
        ("bad-zone-label", [r"^Node type test-type is labelled topology.gke.io/zone=us-central1-f but creates its VMs in zone us-central1-a;"]),
        (
            "bad-zone-labels-fallback",
            [r"labelled topology.kubernetes.io/zone=us-central1-a, topology.gke.io/zone=us-central1-a but creates its VMs in zone us-central1-c"],
        ),
        ("bad-region-label", [r"labelled topology.kubernetes.io/region=us-east1 but creates its VMs in region us-central1\.$"]),
        ("bad-missing-property", [r"lacks the properties gpu-platform/disk-type;"]),
        ("bad-capacity", [r"capacity-type of node type test-type must be on-demand, spot, flex-start or reservation \(got \"preemptible\"\)"]),
        ("bad-capacity-rank", [r"capacity-rank of node type test-type must be a whole number \(got \"first\"\)"]),
        ("bad-flex-on-n1", [r"is flex-start on n1-standard-4; Compute Engine sells Flex-start for accelerator-optimized machine types only, not N1"]),
        ("bad-flex-no-duration", [r"is flex-start, so property gpu-platform/max-run-duration must be whole seconds from 600 to 604800 \(7 days\) \(got \"\"\)"]),
        ("bad-flex-eight-days", [r"gpu-platform/max-run-duration must be whole seconds from 600 to 604800 \(7 days\) \(got \"691200\"\)"]),
        ("bad-other-tenants-slice", [r"is tenant research's slice of reservation research-h100; tenant nlp may not consume it \(property gpu-platform/reservation-tenant\)"]),
        ("bad-reservation-unnamed", [r"is a reservation but lacks gpu-platform/reservation"]),
        ("bad-count-text", [r"accelerator-count of node type test-type must be a whole number \(got \"two\"\)"]),
        ("bad-count-zero", [r"has accelerator nvidia-tesla-t4 but accelerator-count \"0\""]),
        ("bad-count-without-gpu", [r"has accelerator-count 2 but accelerator none"]),
        ("bad-unknown-gpu", [r"GPU type nvidia-rtx-pro-6000 is not in this template's GPU table"]),
        ("bad-l4-on-n1", [r"GPU type nvidia-l4 does not fit machine series n1 \(n1-standard-8\); it needs series g2\."]),
        ("bad-t4-on-e2", [r"GPU type nvidia-tesla-t4 does not fit machine series e2 \(e2-standard-4\); it needs series n1\."]),
        ("bad-t4-on-g2", [r"GPU type nvidia-tesla-t4 does not fit machine series g2 \(g2-standard-8\); it needs series n1\."]),
        ("bad-g2-without-gpu", [r"Machine type g2-standard-8 \(series g2\) comes with built-in GPUs"]),
        ("bad-a2-without-gpu", [r"Machine type a2-highgpu-1g \(series a2\) comes with built-in GPUs"]),
        ("bad-disk-size", [r"disk-size-gb of node type test-type must be a positive whole number"]),
        ("bad-vcluster-name", [r"vCluster name \"9lives\" is not a valid GCP network tag"]),
        ("bad-no-claim", [r"no node claim name"]),
        ("bad-node-metadata", [r'^Property gpu-platform/node-metadata must be concealed or exposed \(got "hidden"\)']),
    ],
)
def test_bad_input_fails_exactly_its_precondition(evaluated, scenario, expected):
    failed = failures(evaluated[scenario])
    assert len(failed) == len(expected), failed
    for pattern, message in zip(expected, failed):
        assert re.search(pattern, message), (pattern, message)


def test_what_needs_the_node_identity_runs_with_host_network():
    """Concealment drops forwarded (pod) traffic only: the CCM and both PD CSI components of the
    kubernetes environment template must run with hostNetwork to keep their credentials."""
    kubernetes_tf = (TEMPLATES / "kubernetes" / "main.tf").read_text()
    workloads = re.findall(r'kind\s*=\s*"(Deployment|DaemonSet)".*?(?=kind\s*=\s*"|\Z)', kubernetes_tf, flags=re.S)
    assert sorted(workloads) == ["DaemonSet", "Deployment", "Deployment"]
    assert len(re.findall(r"^\s*hostNetwork\s*=\s*true$", kubernetes_tf, flags=re.M)) == 3


# --- how long the provider waits for a VM ------------------------------------------------------------


def test_the_provider_waits_longer_for_a_vm_than_compute_engine_queues_a_flex_start_request(instance):
    """The provider's default create timeout (20 minutes) is shorter than Compute Engine may hold a
    Flex-start request (at most 2 hours): the provider would clear the resource's ID while the
    operation goes on, and a VM arriving later would be in no state. The wait outlasts the queue."""
    [timeouts] = instance["timeouts"]
    create = unquote(timeouts["create"])
    assert re.fullmatch(r"\d+m", create) and int(create[:-1]) > 120, create
    assert set(timeouts) - {"__is_block__"} == {"create"}


# --- NVIDIA Fabric Manager on NVSwitch machine types ---------------------------------------------


def test_nvswitch_machine_types_equal_the_catalog(local_values):
    """The machines the catalog marks `nvswitch`, which are the full HGX boards: the A2, A3 and A4
    machine types with 8 or more GPUs."""
    catalog = load_catalog()
    marked = sorted(m for m, machine in catalog.machines.items() if machine.nvswitch)
    assert marked == sorted(m for m, machine in catalog.machines.items() if m.split("-")[0] in ("a2", "a3", "a4") and (machine.gpu_count or 0) >= 8)
    assert sorted(unquote(v) for v in local_values["nvswitch_machine_types"]) == marked


def _fabric_manager_part(evaluated, scenario: str) -> str:
    parts = _parts(evaluated[scenario]["arg.metadata"]["user-data"])
    [hook] = [p for p in parts if p.get_filename() == "gpu-platform-fabric-manager"]
    assert hook.get_content_type() == "text/cloud-boothook"
    return hook.get_payload()


def test_only_nvswitch_shapes_get_the_fabric_manager_gate(evaluated):
    h100 = _parts(evaluated["h100-a3"]["arg.metadata"]["user-data"])
    assert [p.get_filename() for p in h100] == ["gpu-platform-conceal-metadata", "gpu-platform-fabric-manager", "vcluster-platform"]
    assert h100[2].get_payload() == USER_DATA
    exposed = _parts(evaluated["exposed-h100"]["arg.metadata"]["user-data"])
    assert [p.get_filename() for p in exposed] == ["gpu-platform-fabric-manager", "vcluster-platform"]
    for scenario in ("t4-n1", "l4-g2", "a100-a2", "cpu-e2"):  # a100-a2: the smallest A2 shape, no NVSwitch
        assert "gpu-platform-fabric-manager" not in evaluated[scenario]["arg.metadata"]["user-data"], scenario
    assert failures(evaluated["exposed-h100"]) == []


def _switches(root, *, nvswitch: int = 0, nvlink5: bool = False, modules: tuple[str, ...] = ("mlx5_core", "ib_umad"),
              start_script: bool = True, **waits: str) -> dict[str, str]:
    """The gate's places to look, moved to a scratch directory: NVSwitch devices the driver lists,
    InfiniBand devices whose VPD does or does not name an NVLink5 switch port, the loaded kernel
    modules, Fabric Manager's start script (a recorder, like the fake systemctl), the console it
    writes to; and its waits (`module_wait_seconds`, `start_seconds`) where given."""
    devices = root / "nvswitch"
    devices.mkdir()
    for i in range(nvswitch):
        (devices / f"000{i}:00:00.0").write_text("")
    vpd = root / "infiniband" / "mlx5_0" / "device"
    vpd.mkdir(parents=True)
    (vpd / "vpd").write_text("PN MCX75310AAS SW_MNG" if nvlink5 else "PN MCX75310AAS")
    (root / "modules").write_text("".join(f"{m} 65536 0 - Live 0x0000000000000000\n" for m in ("nvidia", *modules)))
    script = root / "nvidia-fabricmanager-start.sh"
    if start_script:
        script.write_text(RECORDER)
        script.chmod(0o755)
    return {
        "nvswitch_dir": str(devices), "infiniband_dir": str(root / "infiniband"), "modules_file": str(root / "modules"),
        "fm_start_script": str(script), "console": str(root / "console"), **waits,
    }


def _console(root) -> list[str]:
    path = root / "console"
    return path.read_text().splitlines() if path.exists() else []


def test_the_boothook_installs_a_gate_the_kubelet_runs_first(evaluated, tmp_path):
    node = Node(tmp_path)
    boot = node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path))
    assert (boot.status, boot.powered_off, boot.calls) == (0, False, []), boot.stderr
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    # The kubelet's start waits for the gate's bounded waits: the modules, then two starts, and a minute.
    assert dropin.splitlines() == ["[Service]", "TimeoutStartSec=420", f"ExecStartPre=/bin/sh {node.installer_dir}/fabric-manager gate"]


def test_a_vm_that_sees_no_switch_starts_its_kubelet_without_fabric_manager(evaluated, tmp_path):
    """Google's hosts manage the fabric (config/fabric_manager.py): the guest sees no switch, and
    the image need not ship Fabric Manager. Never powered off on that guess; what it saw is on the
    serial console."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin, command_fail="nvidia-fabricmanager")
    assert not any("poweroff" in c or "nvidia-fabricmanager" in c for c in node.calls.read_text().splitlines())
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=0 nvlink5-switch-ports=0"


def test_a_vm_that_sees_nvswitches_starts_its_kubelet_only_once_fabric_manager_runs(evaluated, tmp_path):
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, nvswitch=6, start_seconds="1"))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin)
    calls = node.calls.read_text().splitlines()
    assert "systemctl start nvidia-fabricmanager.service" in calls and "systemctl is-active --quiet nvidia-fabricmanager.service" in calls
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=6 nvlink5-switch-ports=0"
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: active"
    assert not node.kubelet_may_start(dropin, command_fail="is-active")  # Fabric Manager failed: no kubelet
    assert not any("poweroff" in c for c in node.calls.read_text().splitlines())
    # A start that hangs is given up after start_seconds: the kubelet does not start, nothing waits forever.
    assert not node.kubelet_may_start(dropin, command_hang="systemctl start")


def test_a_vm_that_sees_nvlink5_ports_follows_nvidias_sequence(evaluated, tmp_path):
    """NVLink5 (A4): the InfiniBand modules, then Fabric Manager with NVLSM through its start script
    (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver `_start_daemons`), not the unit alone."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, nvlink5=True, start_seconds="1"))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert node.kubelet_may_start(dropin)
    [call] = node.calls.read_text().splitlines()
    assert call == (
        "nvidia-fabricmanager-start.sh --mode start --fm-config-file /usr/share/nvidia/nvswitch/fabricmanager.cfg "
        "--fm-pid-file /var/run/nvidia-fabricmanager/nv-fabricmanager.pid --nvlsm-config-file /usr/share/nvidia/nvlsm/nvlsm.conf "
        "--nvlsm-pid-file /var/run/nvidia-fabricmanager/nvlsm.pid"
    )
    assert _console(tmp_path)[0] == "gpu-platform fabric-manager: seen nvswitch-devices=0 nvlink5-switch-ports=1"
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: active"
    # Every wait is bounded: a start script that hangs, or modules that never load, keep the kubelet
    # from starting and return.
    assert not node.kubelet_may_start(dropin, command_hang="nvidia-fabricmanager-start.sh")


def test_an_nvlink5_vm_whose_modules_never_load_gives_up_in_time(evaluated, tmp_path):
    node = Node(tmp_path)
    settings = _switches(tmp_path, nvlink5=True, modules=("mlx5_core",), module_wait_seconds="0")
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=settings)
    assert not node.kubelet_may_start(node.dropin(FABRIC_MANAGER_DROPIN))
    assert node.calls.read_text() == ""  # Fabric Manager not started, the VM not powered off
    assert _console(tmp_path)[-1] == "gpu-platform fabric-manager: mlx5_core and ib_umad not loaded after 0 s; the kubelet does not start"


@pytest.mark.parametrize("seen", [{"nvswitch": 6}, {"nvlink5": True, "start_script": False}])
def test_a_vm_that_sees_switches_but_has_no_fabric_manager_powers_off(evaluated, tmp_path, seen):
    """No guess: with a switch visible and no Fabric Manager (its unit, or for NVLink5 its start
    script), CUDA cannot initialize (NVIDIA's rule), so the node powers off and its claim fails
    rather than join broken."""
    node = Node(tmp_path)
    node.boot(_fabric_manager_part(evaluated, "h100-a3"), name="fabric-manager", settings=_switches(tmp_path, **seen))
    dropin = node.dropin(FABRIC_MANAGER_DROPIN)
    assert not node.kubelet_may_start(dropin, command_fail="cat nvidia-fabricmanager")
    assert any("poweroff" in c for c in node.calls.read_text().splitlines())
    assert "powering off so that this node never joins" in _console(tmp_path)[-1]


# --- image prefetch (instance annotation gpu-platform/gpu-operator-images; tests/node_boot_support.py)


def _named_parts(user_data: str) -> dict[str, str]:
    """filename → payload of each part of the wrapped user data, in order."""
    return {part.get_filename(): part.get_payload() for part in _parts(user_data)}


@pytest.mark.parametrize(
    "scenario, settings, gpu",
    [("prefetch-l4", "defaults", "nvidia-l4"), ("prefetch-a100", "defaults", "nvidia-tesla-a100"), ("prefetch-a100-dcgm-off", "DCGM off", "nvidia-tesla-a100")],
)
def test_a_gpu_node_pulls_the_image_set_of_the_pinned_chart(evaluated, scenario, settings, gpu):
    """What the node pulls (the boothook's list) equals the images our record of the chart starts
    on a node of that GPU for the tenant's settings: DCGM off leaves the exporter out, MIG-capable
    A100s add the MIG manager."""
    result = evaluated[scenario]
    assert failures(result) == []
    parts = _named_parts(result["arg.metadata"]["user-data"])
    assert list(parts) == ["gpu-platform-conceal-metadata", "gpu-platform-image-prefetch", "vcluster-platform"]
    assert parts["vcluster-platform"] == USER_DATA
    pulled = images_of(parts["gpu-platform-image-prefetch"])
    assert len(pulled) == len(set(pulled))
    mig = load_catalog().gpus[gpu].mig
    assert set(pulled) == gpu_node_images(operator_values(PREFETCH_SETTINGS[settings]), mig_capable=mig)
    assert any("k8s-mig-manager" in i for i in pulled) == (gpu == "nvidia-tesla-a100")
    assert any("dcgm-exporter" in i for i in pulled) == (settings == "defaults")


def test_each_shipped_tenants_gpu_nodes_pull_the_image_set_of_the_pinned_chart(evaluated):
    """Every GPU pool of the shipped stacks' tenants: what its node's boothook pulls is the set
    derived from the pinned chart's files for the tenant's settings."""
    shipped = _shipped_prefetch()
    assert {gpu for _, gpu, _ in shipped.values()} == set(SAMPLE_OF_GPU)
    for scenario, (settings, gpu, _) in shipped.items():
        result = evaluated[scenario]
        assert failures(result) == [], scenario
        pulled = images_of(_named_parts(result["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"])
        assert len(pulled) == len(set(pulled)), scenario
        assert set(pulled) == gpu_node_images(operator_values(settings), mig_capable=load_catalog().gpus[gpu].mig), scenario


def test_an_exposed_gpu_node_prefetches_too(evaluated):
    parts = _named_parts(evaluated["prefetch-exposed"]["arg.metadata"]["user-data"])
    assert list(parts) == ["gpu-platform-image-prefetch", "vcluster-platform"]
    assert parts["vcluster-platform"] == USER_DATA
    assert list(_named_parts(evaluated["prefetch-exposed-no-user-data"]["arg.metadata"]["user-data"])) == ["gpu-platform-image-prefetch"]


@pytest.mark.parametrize("scenario", ["prefetch-cpu", "prefetch-other-gpu", "prefetch-not-json"])
def test_nothing_to_prefetch_leaves_the_user_data_as_it_was(evaluated, scenario):
    """A CPU node, a GPU the property does not list, a property that is not JSON: no prefetch, and
    an exposed node gets the platform's data as it is (the unlisted GPU, an H100 on an NVSwitch
    machine type, keeps only its Fabric Manager boothook)."""
    result = evaluated[scenario]
    assert result["local.prefetch"] is False and result["local.prefetch_images"] == []
    user_data = result["arg.metadata"]["user-data"]
    if scenario == "prefetch-other-gpu":
        assert list(_named_parts(user_data)) == ["gpu-platform-fabric-manager", "vcluster-platform"]
    else:
        assert user_data == USER_DATA
    assert failures(result) == []


def test_only_image_references_reach_the_script(evaluated):
    result = evaluated["prefetch-unsafe"]
    assert result["local.prefetch_images"] == ["nvcr.io/nvidia/k8s-device-plugin:v0.18.1"]
    assert images_of(_named_parts(result["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"]) == ["nvcr.io/nvidia/k8s-device-plugin:v0.18.1"]


@pytest.fixture
def prefetch_boothook(evaluated) -> str:
    script = _named_parts(evaluated["prefetch-l4"]["arg.metadata"]["user-data"])["gpu-platform-image-prefetch"]
    assert script == evaluated["prefetch-l4"]["local.prefetch_script"].rstrip("\n")
    return script


def test_the_boothook_only_installs_units_and_returns(prefetch_boothook, tmp_path):
    """It pulls nothing itself: it writes the pull script and two units, reloads systemd and starts
    the path unit without waiting for it, so the join that follows is not held up."""
    node = Node(tmp_path)
    run = node.boot(prefetch_boothook)
    assert (run.status, run.stderr) == (0, "")
    assert run.calls == ["systemctl daemon-reload", f"systemctl --no-block start {PATH_UNIT}"]
    assert not node.pulls.exists()  # nothing pulled yet
    assert node.unit(PATH_UNIT) == [
        "[Unit]", "Description=gpu-platform: pull the GPU Operator images once containerd runs",
        "[Path]", "PathExists=/run/containerd/containerd.sock", f"Unit={SERVICE_UNIT}",
    ]
    service = node.unit(SERVICE_UNIT)
    # A oneshot that stays active once done, so the path unit does not start it again; bounded.
    assert {"Type=oneshot", "RemainAfterExit=yes", "After=containerd.service", "TimeoutStartSec=660"} <= set(service)
    assert f"ExecStart={node.lib_dir / PULL_SCRIPT}" in service
    assert (node.lib_dir / PULL_SCRIPT).stat().st_mode & 0o111
    assert images_of((node.lib_dir / PULL_SCRIPT).read_text()) == images_of(prefetch_boothook)


def test_a_boothook_that_cannot_install_still_exits_0(prefetch_boothook, tmp_path):
    node = Node(tmp_path)
    run = node.boot(prefetch_boothook, command_fail="daemon-reload")
    assert run.status == 0
    assert "image prefetch not installed (systemctl daemon-reload); the kubelet pulls the images itself" in run.stderr


def test_nothing_waits_for_the_prefetch(evaluated, prefetch_boothook, tmp_path):
    """The join never waits for a pull: no unit is ordered after the prefetch units or pulls them in
    (no [Install] section, no Before=), the service orders itself after containerd alone, and no
    other part of the node's user data (the kubelet's drop-ins, the platform's join) names them."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    for unit in (PATH_UNIT, SERVICE_UNIT):
        lines = node.unit(unit)
        assert lines and "[Install]" not in lines
        assert [line for line in lines if line.startswith(("Before=", "WantedBy=", "RequiredBy=", "UpheldBy="))] == [], unit
    assert [line for line in node.unit(SERVICE_UNIT) if line.startswith(("After=", "Requires=", "Wants=", "BindsTo="))] == ["After=containerd.service"]
    parts = _named_parts(evaluated["prefetch-l4"]["arg.metadata"]["user-data"])
    others = [name for name in parts if name != "gpu-platform-image-prefetch"]
    assert others == ["gpu-platform-conceal-metadata", "vcluster-platform"]
    assert [name for name in others if "image-prefetch" in parts[name]] == []


def test_the_boothook_is_bounded_even_when_systemd_hangs(prefetch_boothook, tmp_path):
    """cloud-init, and the join after it, waits for the boothook: each of its systemctl calls is
    stopped after `systemctl_seconds` (30 s as rendered, 1 s here), and it still exits 0."""
    calls = [line for line in prefetch_boothook.splitlines() if " systemctl " in f" {line} " and not line.startswith("#")]
    assert len(calls) == 2 and all(line.startswith('timeout "$systemctl_seconds" systemctl ') for line in calls), calls
    assert "systemctl_seconds=30" in prefetch_boothook.splitlines()
    run = Node(tmp_path).boot(prefetch_boothook, settings={"systemctl_seconds": "1"}, command_hang="daemon-reload")
    assert run.status == 0 and run.seconds < 10
    assert "image prefetch not installed (systemctl daemon-reload); the kubelet pulls the images itself" in run.stderr


def test_the_gpu_nodes_page_states_the_prefetchs_bounds(prefetch_boothook, tmp_path):
    """docs/gpu-nodes.md "How long": the bounds it names are the rendered ones."""
    from docs_support import section

    text = " ".join(section("How long").split())
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    pull_script = (node.lib_dir / PULL_SCRIPT).read_text().splitlines()
    assert "systemctl_seconds=30" in prefetch_boothook.splitlines() and "each `systemctl` call stopped after 30 s" in text
    assert "limit=600" in pull_script and "each is stopped after 600 s" in text
    assert {"attempts=3", "retry_seconds=10"} <= set(pull_script) and "tried up to 3 times, 10 s apart, within those 600 s" in text
    assert "TimeoutStartSec=660" in node.unit(SERVICE_UNIT) and "the service is stopped after 660 s" in text
    assert "no unit is ordered after the prefetch or needs it" in text


def test_the_pulls_run_at_once_each_logged(prefetch_boothook, tmp_path):
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    run = node.pull(pull_seconds="1")
    assert run.status == 0
    times = node.pull_times()
    assert set(times) == set(images)
    # Every pull started before the first one ended.
    assert max(t["start"] for t in times.values()) < min(t["end"] for t in times.values())
    assert run.seconds < len(images) * 1.0
    for image in images:
        assert f"gpu-platform prefetch: pulled {image} in " in run.stdout
        assert f"crictl --runtime-endpoint unix:///run/containerd/containerd.sock pull {image}" in run.calls
    assert run.stdout.splitlines()[-1] == "gpu-platform prefetch: done"


def _image(images: list[str], name: str) -> str:
    [image] = [i for i in images if f"/{name}:" in i]
    return image


def test_a_failed_or_hanging_pull_is_logged_bounded_and_never_fails(prefetch_boothook, tmp_path):
    """A limit of 1 s leaves no room for another attempt 10 s later: one attempt each."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    run = node.pull(settings={"limit": "1"}, pull_fail="dcgm-exporter", pull_hang="k8s-device-plugin")
    assert run.status == 0
    assert run.seconds < 10  # the hanging pull is stopped at the limit, not after its 30 s
    assert f"gpu-platform prefetch: {_image(images, 'k8s-device-plugin')} not pulled (status 124 " in run.stdout
    assert f"gpu-platform prefetch: {_image(images, 'dcgm-exporter')} not pulled (status 1 " in run.stdout
    assert ", 1 of 3 attempts, limit 1 s)" in run.stdout and "again in" not in run.stdout
    assert f"gpu-platform prefetch: pulled {_image(images, 'gpu-operator')} in " in run.stdout
    assert set(node.pull_attempts().values()) == {1}


def test_a_pull_that_fails_is_tried_again_up_to_three_times(prefetch_boothook, tmp_path):
    """Pulls in flight fail when the join restarts containerd: the next attempt, `retry_seconds`
    later (10 s as rendered, none here), gets the image; one that keeps failing stops after three."""
    node = Node(tmp_path)
    node.boot(prefetch_boothook)
    images = images_of(prefetch_boothook)
    script = (node.lib_dir / PULL_SCRIPT).read_text().splitlines()
    assert {"attempts=3", "retry_seconds=10", "limit=600"} <= set(script)
    flaky, failing = _image(images, "k8s-device-plugin"), _image(images, "dcgm-exporter")
    run = node.pull(settings={"retry_seconds": "0"}, pull_flaky="k8s-device-plugin", flaky_failures="2", pull_fail="dcgm-exporter")
    assert run.status == 0
    attempts = node.pull_attempts()
    assert attempts == {image: 3 if image in (flaky, failing) else 1 for image in images}
    assert f"gpu-platform prefetch: {flaky} attempt 2 failed (status 1), again in 0 s" in run.stdout
    assert re.search(rf"^gpu-platform prefetch: pulled {re.escape(flaky)} in \d+ s \(attempt 3\)$", run.stdout, re.M)
    assert re.search(rf"^gpu-platform prefetch: {re.escape(failing)} not pulled \(status 1 after \d+ s, 3 of 3 attempts, limit 600 s\)$", run.stdout, re.M)
    assert run.stdout.splitlines()[-1] == "gpu-platform prefetch: done"


def test_without_crictl_ctr_pulls_into_the_kubelets_namespace_and_without_either_nothing_fails(prefetch_boothook, tmp_path):
    node = Node(tmp_path / "ctr", pull_tool="ctr")
    node.boot(prefetch_boothook)
    run = node.pull()
    assert run.status == 0
    assert "ctr --address /run/containerd/containerd.sock --namespace k8s.io images pull nvcr.io/nvidia/gpu-operator:v25.10.1" in run.calls
    bare = Node(tmp_path / "none", pull_tool=None)
    bare.boot(prefetch_boothook)
    run = bare.pull()
    assert (run.status, run.stdout.strip()) == (0, "gpu-platform prefetch: neither crictl nor ctr found; the kubelet pulls the images itself")
