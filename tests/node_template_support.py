"""What the node template's tests share (test_node_template.py, test_node_template_evaluated.py,
test_node_template_kubelet_gates.py, test_node_template_prefetch.py): templates/node/main.tf's
path, the template parsed with python-hcl2 and its instance, locals and preconditions, node types
of a real environment (prod as shipped), and the scenarios OpenTofu evaluates the template for
(`evaluated`), with the user data's MIME parts (`_parts`).

The fixtures are imported by each test module that uses them, with the fixtures they depend on
(pytest finds a fixture in the test's own module). `evaluated` runs OpenTofu once a session,
whichever module asks first: the modules that use it share the one run.

pytest puts this directory on sys.path (no tests/__init__.py), so the test files import it as
`node_template_support`.
"""

from __future__ import annotations

import email
import functools
import email.message
import json
from pathlib import Path

import pytest

from config import node_properties as props
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, shipped_values
from config.stack_files import read_stack_values
from components.tenant_documents import gpu_operator_images_annotation
from components.tenant_vcluster import GPU_OPERATOR_IMAGES_ANNOTATION
from config.tenant import GpuOperator
from hcl_support import blocks, evaluate, expr, label, parse, require_tofu

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
NODE_TF = TEMPLATES / "node" / "main.tf"


# --- helpers (python-hcl2 output → HCL text; the shared ones are in hcl_support.py) ------------


def _locals(doc: dict) -> dict:
    merged: dict = {}
    for block in doc.get("locals", []):
        merged.update({k: v for k, v in block.items() if not k.startswith("__")})
    return merged


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


def _evaluate(samples, instance, preconditions, local_values, tmp_path_factory):
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


_EVALUATED: list[dict] = []


@pytest.fixture(scope="module")
def evaluated(samples, instance, preconditions, local_values, tmp_path_factory):
    """Every scenario of `_evaluate`, evaluated by OpenTofu once a session: the test modules that
    use it share the one run (about 8 s) instead of each running it again."""
    if not _EVALUATED:
        _EVALUATED.append(_evaluate(samples, instance, preconditions, local_values, tmp_path_factory))
    return _EVALUATED[0]


# --- the user data's MIME parts ------------------------------------------------------------------


def _parts(user_data: str) -> list[email.message.Message]:
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed" and message["MIME-Version"] == "1.0"
    return message.get_payload()
