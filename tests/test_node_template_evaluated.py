"""templates/node/main.tf evaluated by OpenTofu (or Terraform, when one of them is on PATH) for
concrete `var.vcluster` values, with no provider and no cloud (node_template_support.py
`evaluated`): the instance's arguments for the node types of a real environment (machine,
placement, scheduling per capacity type, reservation affinity, Shielded VM, NIC), the user data it
wraps around the platform's own, the labels and instance names, and the precondition that each bad
input fails.
"""

from __future__ import annotations

import email.message
import re

import pytest

from config import node_properties as props
from config.catalog import GUEST
from node_boot_support import DROPIN_DIR_LINE
from components.showback import GPU_NODE_LABEL, TENANT_LABEL
from hcl_support import failures
from node_template_support import INFRASTRUCTURE, MIME_MENTIONED, MIME_USER_DATA, PROJECT, REGION, USER_DATA, _parts
from node_template_support import doc, evaluated, instance, local_values, offer, preconditions, samples  # noqa: F401 (fixtures)

GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
GCP_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


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


def _conceals(part: email.message.Message) -> None:
    """The boothook part: the concealment script (what it does on a node: the boothook tests
    in test_node_template_kubelet_gates.py), which never touches OUTPUT (the host network's own
    traffic)."""
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
