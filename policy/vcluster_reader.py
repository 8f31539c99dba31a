"""Read access to a tenant's vcluster.yaml, shared by the policy pack and the program (the program's
components/vcluster_values.py renders the document and re-exports these readers), so the pack, the
plan and the tests can never disagree on its shape.

Self-contained on purpose: it imports nothing of the pack or of the program (only its sibling
kubernetes_reader.py, as self-contained, for the one YAML loader), and takes the names it
needs (GPU resource, node-type properties, GPUs per machine type) from program_data.json beside it,
which `make policy-data` generates from the program's own definitions.

Pool kinds of vcluster 0.36.1 (loft-sh/vcluster config/config.go at tag v0.36.1,
`PrivateNodesAutoNodes`): `dynamic` pools grow up to their `limits`; `static` pools hold exactly
`quantity` nodes of the selected node type.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

_DATA = json.loads(Path(__file__).with_name("program_data.json").read_text())
_NAMES = _DATA["vclusterValues"]

GPU_RESOURCE: str = _NAMES["gpuResource"]
ACCELERATOR: str = _NAMES["acceleratorProperty"]
ACCELERATOR_COUNT: str = _NAMES["acceleratorCountProperty"]
INSTANCE_TYPE: str = _NAMES["instanceTypeProperty"]
NO_ACCELERATOR: str = _NAMES["noAccelerator"]
# machine type → GPUs per VM; None where the node type decides (N1 guest accelerators).
GPUS_PER_MACHINE_TYPE: dict[str, int | None] = _DATA["gpusPerMachineType"]

DYNAMIC, STATIC = "dynamic", "static"
POOL_KINDS = (DYNAMIC, STATIC)

# The one loader of the pack's documents (merge keys refused), from the self-contained sibling
# module: `policy.kubernetes_reader` where the program imports this as `policy.vcluster_reader`,
# `kubernetes_reader` where the pack runs with policy/ on sys.path.
if __package__:
    from .kubernetes_reader import LOADER as _Loader
else:  # pragma: no cover - as the pack's CLI runs it
    from kubernetes_reader import LOADER as _Loader

# Kubernetes resource quantities (k8s.io/apimachinery pkg/api/resource: a number, then a decimal
# SI or binary suffix), as far as requests and limits use them.
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_FACTORS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: Any) -> float | None:
    """A Kubernetes resource quantity (200m, 2, 512Mi, 4Gi) as a number, or None."""
    match = _QUANTITY.match(text) if isinstance(text, str) else None
    return None if match is None else float(match.group(1)) * _FACTORS[match.group(2)]


@dataclass(frozen=True)
class Pool:
    provider: str
    properties: dict[str, str]
    spec: dict[str, Any]
    kind: str = DYNAMIC

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def selector(self) -> list[dict[str, Any]]:
        return list(self.spec.get("nodeTypeSelector") or [])

    def selected(self, prop: str) -> list[str]:
        values: list[str] = []
        for requirement in self.selector:
            if requirement.get("property") == prop and requirement.get("operator", "In") in ("In", ""):
                values += requirement.get("values") or ([requirement["value"]] if "value" in requirement else [])
        return [str(v) for v in values]

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs on each node the pool can get, from its selector: 0 for CPU-only selections, the
        largest selected accelerator count or machine type, None when the selector leaves it open."""
        accelerators = self.selected(ACCELERATOR)
        if accelerators and all(a == NO_ACCELERATOR for a in accelerators):
            return 0
        counts = self.selected(ACCELERATOR_COUNT)
        if counts:
            try:
                return max(int(c) for c in counts)
            except ValueError:
                return None
        machines = [GPUS_PER_MACHINE_TYPE.get(m) for m in self.selected(INSTANCE_TYPE)]
        if machines and all(m is not None for m in machines):
            return max(m for m in machines if m is not None)
        return None

    @property
    def is_gpu(self) -> bool:
        """May get GPU nodes: a GPU limit, GPU node types selected, or a selector that leaves it open."""
        return GPU_RESOURCE in self.limits or self.gpus_per_node != 0

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self.spec.get("limits") or {})

    @property
    def quantity(self) -> int | None:
        try:
            return int(str(self.spec.get("quantity")))
        except ValueError:
            return None

    @property
    def gpu_limit(self) -> int | None:
        """The most GPUs this pool can hold, None if unbounded: a dynamic pool's nvidia.com/gpu
        limit; a static pool's quantity × GPUs per node."""
        if self.kind == STATIC:
            per_node, quantity = self.gpus_per_node, self.quantity
            if per_node == 0:
                return 0
            return None if per_node is None or quantity is None else per_node * quantity
        value = self.limits.get(GPU_RESOURCE)
        try:
            return int(str(value))
        except (TypeError, ValueError):
            return None

    @property
    def taints(self) -> list[dict[str, Any]]:
        return list(self.spec.get("taints") or [])

    @property
    def has_gpu_taint(self) -> bool:
        return any(t.get("key") == GPU_RESOURCE and t.get("effect") == "NoSchedule" for t in self.taints)

    @property
    def consolidate_after(self) -> str | None:
        return (self.spec.get("disruption") or {}).get("consolidateAfter")

    @property
    def node_labels(self) -> dict[str, str]:
        return dict(self.spec.get("nodeLabels") or {})


class VClusterValues:
    """Read access to a vcluster.yaml document."""

    def __init__(self, document: dict[str, Any]):
        self.document = document

    @classmethod
    def parse(cls, text: str) -> VClusterValues:
        document = yaml.load(text, Loader=_Loader) if text else {}  # noqa: S506 - a safe loader
        if not isinstance(document, dict):
            raise ValueError("vcluster.yaml must be a mapping")
        return cls(document)

    @property
    def private_nodes_enabled(self) -> bool:
        return (self.document.get("privateNodes") or {}).get("enabled") is True

    @property
    def control_plane_service_spec(self) -> dict[str, Any]:
        return dict(((self.document.get("controlPlane") or {}).get("service") or {}).get("spec") or {})

    @property
    def control_plane_service_type(self) -> str | None:
        return self.control_plane_service_spec.get("type")

    @property
    def load_balancer_source_ranges(self) -> list[str]:
        """The only clients the control plane's LoadBalancer accepts (the tenant's NAT addresses)."""
        return list(self.control_plane_service_spec.get("loadBalancerSourceRanges") or [])

    @property
    def control_plane_resources(self) -> dict[str, Any]:
        return dict(((self.document.get("controlPlane") or {}).get("statefulSet") or {}).get("resources") or {})

    @property
    def network_policy_enabled(self) -> bool:
        return ((self.document.get("policies") or {}).get("networkPolicy") or {}).get("enabled") is True

    @property
    def kubelet_config(self) -> dict[str, Any]:
        """What vCluster merges into every private node's kubelet config."""
        return dict(((self.document.get("privateNodes") or {}).get("kubelet") or {}).get("config") or {})

    @property
    def auto_upgrade(self) -> dict[str, Any]:
        return dict((self.document.get("privateNodes") or {}).get("autoUpgrade") or {})

    @property
    def embedded_ccm_enabled(self) -> bool:
        """vCluster's own cloud controller manager (chart default: on)."""
        advanced = (self.document.get("controlPlane") or {}).get("advanced") or {}
        return (advanced.get("cloudControllerManager") or {}).get("enabled", True) is not False

    @property
    def auto_nodes(self) -> list[dict[str, Any]]:
        return list((self.document.get("privateNodes") or {}).get("autoNodes") or [])

    def pools(self, kinds: tuple[str, ...] = POOL_KINDS) -> Iterator[Pool]:
        for entry in self.auto_nodes:
            for kind in kinds:
                for spec in entry.get(kind) or []:
                    yield Pool(entry.get("provider", ""), dict(entry.get("properties") or {}), spec, kind)

    def dynamic_pools(self) -> Iterator[Pool]:
        return self.pools((DYNAMIC,))

    def static_pools(self) -> Iterator[Pool]:
        return self.pools((STATIC,))

    def gpu_pools(self) -> list[Pool]:
        """Every pool, of either kind, that may get GPU nodes."""
        return [p for p in self.pools() if p.is_gpu]


# --- A tenant's VirtualClusterInstance as a whole ---------------------------------------------------

_INSTANCE = _DATA["tenantInstance"]
NODE_METADATA: str = _INSTANCE["nodeMetadataProperty"]
LOAD_BALANCERS: str = _INSTANCE["loadBalancerProperty"]
PERSISTENT_DISKS: str = _INSTANCE["persistentDisksProperty"]
PROJECT: str = _INSTANCE["projectProperty"]
ENFORCE_LABEL: str = _INSTANCE["enforceLabel"]
POD_SECURITY_POLICY: str = _INSTANCE["podSecurityPolicy"]


def _get(value: Any, *path: str) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


@dataclass(frozen=True)
class TenantInstance:
    """What a VirtualClusterInstance (as the program builds it: components/tenant_vcluster.py)
    says about its tenant: its name, its GCP project, its security settings."""

    name: str | None
    values: VClusterValues
    objects: tuple[dict[str, Any], ...]

    @classmethod
    def parse(cls, spec: dict[str, Any], name: str | None) -> TenantInstance:
        """`spec`: the instance's spec, plain. Raises ValueError or yaml.YAMLError for documents
        that are not YAML mappings."""
        template = spec.get("template") or {}
        values = VClusterValues.parse(_get(template, "helmRelease", "values") or "")
        text = template.get("objects") or ""
        objects = tuple(d for d in yaml.load_all(text, Loader=_Loader) if d is not None) if text else ()  # noqa: S506 - a safe loader
        if not all(isinstance(d, dict) for d in objects):
            raise ValueError("spec.template.objects holds a document that is not a mapping")
        return cls(name, values, objects)

    @property
    def properties(self) -> dict[str, Any]:
        entries = self.values.auto_nodes
        return dict((entries[0].get("properties") or {})) if entries else {}

    @property
    def project(self) -> str | None:
        return self.properties.get(PROJECT)

    @property
    def pod_security_standard(self) -> str:
        """The standard the instance's objects enforce: the label they put on `default` when the
        admission policy that requires labels is there, else privileged (nothing enforced)."""
        kinds = {(d.get("kind"), _get(d, "metadata", "name")) for d in self.objects}
        if ("ValidatingAdmissionPolicy", POD_SECURITY_POLICY) not in kinds or ("ValidatingAdmissionPolicyBinding", POD_SECURITY_POLICY) not in kinds:
            return "privileged"
        for d in self.objects:
            if d.get("kind") == "Namespace" and _get(d, "metadata", "name") == "default":
                return str(_get(d, "metadata", "labels", ENFORCE_LABEL) or "privileged")
        return "privileged"

    def security_settings(self, host_project: str | None) -> dict[str, Any]:
        """By the tenant's config keys (config/tenant_security.py SETTINGS), as far as the instance
        shows them; isolation needs the environment's project (`host_project`)."""
        properties = self.properties
        settings: dict[str, Any] = {
            "loadBalancerServices": properties.get(LOAD_BALANCERS) == "true",
            "nodeMetadata": properties.get(NODE_METADATA, "concealed"),
            "podSecurityStandard": self.pod_security_standard,
        }
        if host_project is not None:
            settings["isolation"] = "shared" if self.project == host_project else "project"
        return settings


# Kinds whose objects carry a pod template (or are a pod), and where the pod spec is in each.
_POD_SPECS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
WORKLOAD_KINDS = tuple(_POD_SPECS)


def host_access(document: dict[str, Any]) -> dict[str, Any] | None:
    """What the pods of an in-tenant workload may do beyond their own container, as the Pod Security
    Standards judge it (Kubernetes docs, "Pod Security Standards": host namespaces, host paths and
    ports, privileged containers, capabilities, the security contexts), and as whom they reach the
    API server (their service account): the fields of its pod spec that decide it, whole. None for
    an object that is no workload."""
    path = _POD_SPECS.get(str(document.get("kind")))
    if path is None:
        return None
    spec = _get(document, *path)
    spec = spec if isinstance(spec, dict) else {}
    containers = [c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or [] if isinstance(c, dict)]
    return {
        **{key: bool(spec.get(key)) for key in ("hostNetwork", "hostPID", "hostIPC")},
        "serviceAccountName": spec.get("serviceAccountName") or "default",
        "automountServiceAccountToken": spec.get("automountServiceAccountToken"),
        "securityContext": spec.get("securityContext") or {},
        "hostPaths": sorted(str(_get(v, "hostPath", "path")) for v in spec.get("volumes") or [] if isinstance(v, dict) and v.get("hostPath") is not None),
        "containers": [
            {
                "name": c.get("name"),
                "securityContext": c.get("securityContext") or {},
                "hostPorts": sorted(int(p["hostPort"]) for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")),
            }
            for c in containers
        ],
    }
