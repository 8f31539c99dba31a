"""templates/node/main.tf: the OpenTofu template the vCluster Platform runs once per node claim,
tested as parsed with python-hcl2 (no cloud needed; only the format check needs OpenTofu): the
variable and the providers, the instance's arguments, the preconditions, agreement with config/,
formatting and the provider's create timeout. python-hcl2 returns expressions as strings: "${expr}"
for an expression, '"text"' for a quoted template.

What OpenTofu evaluates the template to: test_node_template_evaluated.py; its boothooks on a node:
test_node_template_kubelet_gates.py and test_node_template_prefetch.py; what they share:
node_template_support.py.
"""

from __future__ import annotations

import re

import pytest

from config import node_properties as props
from config.catalog import BUILTIN, GUEST, load_catalog
from hcl_support import VARIABLE_TF, blocks, expr, label, parse, precondition, require_tofu, run, unquote
from node_template_support import NODE_TF, ROOT
from node_template_support import doc, instance, local_values, offer, preconditions, samples  # noqa: F401 (fixtures)

NODE_TYPE_PROPERTY = re.compile(r'var\.vcluster\.nodeType\.spec\.properties\["([^"]+)"\]')


# --- helpers (python-hcl2 output → HCL text; the shared ones are in hcl_support.py) ------------


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


def test_nvswitch_machine_types_equal_the_catalog(local_values):
    """The machines the catalog marks `nvswitch`, which are the full HGX boards: the A2, A3 and A4
    machine types with 8 or more GPUs."""
    catalog = load_catalog()
    marked = sorted(m for m, machine in catalog.machines.items() if machine.nvswitch)
    assert marked == sorted(m for m, machine in catalog.machines.items() if m.split("-")[0] in ("a2", "a3", "a4") and (machine.gpu_count or 0) >= 8)
    assert sorted(unquote(v) for v in local_values["nvswitch_machine_types"]) == marked


# --- formatting -----------------------------------------------------------------------------------


def test_fmt_check():
    binary = require_tofu()
    for path in (NODE_TF, VARIABLE_TF):
        result = run(binary, ["fmt", "-check", "-diff", str(path)], ROOT)
        assert result.returncode == 0, f"{path} is not formatted:\n{result.stdout}{result.stderr}"


# --- how long the provider waits for a VM ------------------------------------------------------------


def test_the_provider_waits_longer_for_a_vm_than_compute_engine_queues_a_flex_start_request(instance):
    """The provider's default create timeout (20 minutes) is shorter than Compute Engine may hold a
    Flex-start request (at most 2 hours): the provider would clear the resource's ID while the
    operation goes on, and a VM arriving later would be in no state. The wait outlasts the queue."""
    [timeouts] = instance["timeouts"]
    create = unquote(timeouts["create"])
    assert re.fullmatch(r"\d+m", create) and int(create[:-1]) > 120, create
    assert set(timeouts) - {"__is_block__"} == {"create"}
