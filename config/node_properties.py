"""The property keys shared by the NodeProvider's node types, the tenants' auto-nodes entries and
the OpenTofu templates in templates/.

Defined once: GcpNodeProvider writes these keys, tenants select on them, and the templates read them
(tests/test_node_template.py proves that the templates read exactly these). Our own keys use the
prefix ``gpu-platform/`` so they can never collide with the platform's built-in properties
(``vcluster.com/...``, ``karpenter.sh/...``, ``node.kubernetes.io/...``); the standard zone labels
are the one deliberate exception (TOPOLOGY_KEYS). Values must be valid
Kubernetes label values (≤ 63 characters of ``[A-Za-z0-9._-]``), which is why the node service
account travels as its account id, not its e-mail.
"""

from __future__ import annotations

import re

PREFIX = "gpu-platform/"

# Written on every node type by GcpNodeProvider, read by templates/node/main.tf.
INSTANCE_TYPE = PREFIX + "instance-type"  # Compute Engine machine type, e.g. g2-standard-8
ACCELERATOR = PREFIX + "accelerator"  # GPU type (nvidia-l4, …) or "none"
ACCELERATOR_COUNT = PREFIX + "accelerator-count"  # GPUs per VM, "0" for CPU types
CAPACITY_TYPE = PREFIX + "capacity-type"  # "on-demand" | "spot" | "flex-start" | "reservation"
# The option's place in a pool's capacity list (config/capacity.py): "0" for reserved types, "1".."3"
# for the others. Pools select on CAPACITY_OPTION, which carries the rank, so one environment-wide
# node type serves every pool that lists its capacity type at that place.
CAPACITY_RANK = PREFIX + "capacity-rank"
CAPACITY_OPTION = PREFIX + "capacity-option"  # "r<rank>-<capacity type>", or a reserved type's name
MAX_RUN_DURATION = PREFIX + "max-run-duration"  # Flex-start types only: seconds
# Reserved types only: which reservation the VM consumes, where it lives, whose slice it is, and
# whether it is consumed with the reservation-bound provisioning model.
RESERVATION = PREFIX + "reservation"
RESERVATION_PROJECT = PREFIX + "reservation-project"
RESERVATION_TENANT = PREFIX + "reservation-tenant"
RESERVATION_BOUND = PREFIX + "reservation-bound"
ZONE = PREFIX + "zone"  # the one zone this node type creates VMs in
DISK_SIZE_GB = PREFIX + "disk-size-gb"
DISK_TYPE = PREFIX + "disk-type"
IMAGE_FAMILY = PREFIX + "image-family"
IMAGE_PROJECT = PREFIX + "image-project"

# The standard zone labels, on every node type too, equal to gpu-platform/zone (deliberately the
# keys of the platform's built-in properties; the platform documents `topology.kubernetes.io/zone`
# as `global` unless set, and the API has no other way to set it). Node-type properties
# become node labels and scheduling requirements (platform docs, node providers overview,
# https://www.vcluster.com/docs/platform/administer/node-providers/overview "Properties"), so the
# auto-nodes scheduler (Karpenter) can match a pod's zone constraints against them before a node
# exists: a PersistentVolume of the PD CSI driver carries node affinity on topology.gke.io/zone
# (the driver's topology key), zone spreading uses topology.kubernetes.io/zone. Once the node runs,
# the same values are what the cloud controller manager (zone labels at initialization) and the
# kubelet's CSI registration (topology.gke.io/zone) write, so the labels agree before and after.
TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
TOPOLOGY_REGION = "topology.kubernetes.io/region"
PD_CSI_ZONE = "topology.gke.io/zone"
TOPOLOGY_KEYS = (TOPOLOGY_ZONE, TOPOLOGY_REGION, PD_CSI_ZONE)

# On every GPU node type and never on a CPU one, not read by the templates: node-type properties
# become labels of the nodes the platform creates (platform docs, node providers overview,
# "Properties"), so a GPU node carries this from its registration. It is the label Node Feature
# Discovery would write after its worker's image pull and PCI scan (class 03xx, vendor 10de; the
# GPU Operator v25.10.1 chart's `node-feature-discovery.worker.config.sources.pci`), and the one
# the GPU Operator decides by (NVIDIA/gpu-operator tag v25.10.1, controllers/state_manager.go
# `gpuNodeLabels`, `labelGPUNodes`: a node with it gets `nvidia.com/gpu.present=true` and its
# operands' deploy labels; controllers/clusterpolicy_controller.go `addWatchNewGPUNode`: a node
# created with it, or updated to it while lacking gpu.present, starts a reconcile). We do not set
# `nvidia.com/gpu.present` ourselves: the operator writes it, and a node that gained both labels in
# one update (Karpenter copies a claim's labels onto its node at registration:
# kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/registration.go
# `syncNode`) would match none of that watch's conditions and wait for an unrelated reconcile.
# A kubelet may set labels under `*.node.kubernetes.io` itself (NodeRestriction,
# https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#noderestriction).
# NFD keeps running: GPU feature discovery's labels (nvidia.com/gpu.product, mig.capable, …) reach
# the node through NFD's worker (the operator's assets/gpu-feature-discovery/0500_daemonset.yaml
# writes them to NFD's features.d directory).
NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"
GPU_PRESENT = "nvidia.com/gpu.present"  # written by the GPU Operator, never by us
GPU_NODE_LABELS = {NFD_NVIDIA_PCI: "true"}

NODE_TYPE_KEYS = (
    INSTANCE_TYPE,
    ACCELERATOR,
    ACCELERATOR_COUNT,
    CAPACITY_TYPE,
    CAPACITY_RANK,
    CAPACITY_OPTION,
    ZONE,
    DISK_SIZE_GB,
    DISK_TYPE,
    IMAGE_FAMILY,
    IMAGE_PROJECT,
    *TOPOLOGY_KEYS,
)
# Written on some node types only (Flex-start, reserved); the template reads them where they apply.
OPTIONAL_NODE_TYPE_KEYS = (MAX_RUN_DURATION, RESERVATION, RESERVATION_PROJECT, RESERVATION_TENANT, RESERVATION_BOUND)

# Written on each tenant's auto-nodes entry (vcluster.yaml), read by templates/environment/main.tf,
# which hands them on as the environment outputs the node template and the kubernetes template
# read. Pulumi created every object they name.
NETWORK = PREFIX + "network"
SUBNETWORK = PREFIX + "subnetwork"
NODE_SERVICE_ACCOUNT = PREFIX + "node-service-account"  # account id; e-mail = id@project.iam…
TENANT = PREFIX + "tenant"

TENANT_KEYS = (NETWORK, SUBNETWORK, NODE_SERVICE_ACCOUNT, TENANT)

# Written on each tenant's auto-nodes entry, read by templates/node/main.tf: "concealed" (or
# absent) makes the node drop pod traffic to the metadata server, "exposed" leaves it reachable.
NODE_METADATA = PREFIX + "node-metadata"

# Keys of the official templates' contract (loft-sh/vcluster-auto-nodes-gcp v0.1.1: main.tf,
# locals.tf and validation/main.tf; docs/sources.md), which our templates keep; written
# concretely: they reject wildcard project/region.
PROJECT = "project"
REGION = "region"
CCM_ENABLED = "vcluster.com/ccm-enabled"
CCM_LB_ENABLED = "vcluster.com/ccm-lb-enabled"
CSI_ENABLED = "vcluster.com/csi-enabled"

NO_ACCELERATOR = "none"
ON_DEMAND = "on-demand"
SPOT = "spot"
FLEX_START = "flex-start"
RESERVED = "reservation"
CAPACITY_TYPES = (ON_DEMAND, SPOT, FLEX_START, RESERVED)

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def is_label_value(value: str) -> bool:
    """Kubernetes label-value syntax, which node-type property values must follow."""
    return bool(_LABEL_VALUE.match(value))
