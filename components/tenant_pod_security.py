"""Pod Security inside a tenant's virtual cluster: every namespace but the few the product needs
privileged enforces the tenant's Pod Security Standard (`tenant.podSecurityStandard`, default
baseline), so a pod that anyone but the team's cluster-admins creates cannot use hostNetwork
(which would reach the metadata server and the node identity past `nodeMetadata: concealed`),
run privileged or mount host paths. Pure data: in-tenant objects (components/tenant_documents.py).

Why not vCluster's `policies.podSecurityStandard` (loft-sh/vcluster tag v0.36.1): its controller
(pkg/controllers/podsecurity/podsecurity.go, registered in pkg/controllers/register.go whenever
the value is set, private nodes included) labels EVERY namespace of the virtual cluster
`pod-security.kubernetes.io/enforce=<standard>` and puts the label back whenever it differs. It
exempts nothing, so kube-system (where the CCM, the PD CSI node plugin and vCluster's kube-proxy
run host-networked and privileged) and the GPU Operator's namespace would refuse their own pods,
and the vCluster docs offer it for shared host nodes only
(vcluster/configure/vcluster-yaml/policies/pod-security-standard.mdx: `hostNodes` tenancy).

So the virtual cluster's own Pod Security admission does the checking (the PodSecurity plugin,
on by default in Kubernetes; vCluster's API server only adds NodeRestriction: pkg/k8s/k8s.go at
v0.36.1), per namespace label, and a ValidatingAdmissionPolicy makes sure the label is there: a
pod is admitted in a namespace outside PRIVILEGED_NAMESPACES only when its namespace enforces at
least the tenant's standard (Kubernetes docs, "Validating Admission Policy": `namespaceObject`;
GA in admissionregistration.k8s.io/v1 since 1.30, and vCluster 0.36.1 runs Kubernetes v1.36.0 by
default: chart/values.yaml controlPlane.distro.k8s.image.tag). The team's cluster-admins can still
change both: Pod Security binds everyone else.
"""

from __future__ import annotations

from typing import Any

from .monitoring_documents import MONITORING_NAMESPACE

# The GPU Operator's namespace inside each tenant (its chart's release namespace).
GPU_OPERATOR_NAMESPACE = "gpu-operator"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
PRIVILEGED = "privileged"
POLICY_NAME = "gpu-platform-pod-security"

# The tenant namespaces whose pods the product needs host access for, and why: the one list the
# admission policy exempts (and the policy pack, through program_data.json, allows privileged).
# Add a component's namespace here, with its reason, when it must run privileged or host-networked
# inside every tenant (an in-tenant metrics collector, a watchdog, ...).
PRIVILEGED_NAMESPACES: dict[str, str] = {
    "kube-system": (
        "the GCP cloud controller manager (hostNetwork) and the PD CSI node plugin (privileged, host paths) of "
        "templates/kubernetes/main.tf, and vCluster's kube-proxy on private nodes (hostNetwork, privileged)"
    ),
    # vCluster deploys Flannel and the local path provisioner on private nodes (vcluster-docs
    # vcluster/configure/vcluster-yaml/deploy.mdx) in their upstream namespaces (flannel-io/flannel
    # Documentation/kube-flannel.yml; rancher/local-path-provisioner deploy/local-path-storage.yaml).
    "kube-flannel": "vCluster's default CNI, Flannel (privileged, NET_ADMIN, host paths)",
    "local-path-storage": "vCluster's local path provisioner, whose helper pods mount host paths",
    GPU_OPERATOR_NAMESPACE: "the NVIDIA GPU Operator's daemonsets (container toolkit, device plugin, DCGM exporter: privileged, host paths)",
    MONITORING_NAMESPACE: "the GPU metrics collector (hostNetwork, to reach the metadata server for its credentials: components/monitoring_documents.py)",
}

# Namespaces of PRIVILEGED_NAMESPACES that exist only with a feature of the tenant: exempted only then,
# so that nobody can create one of them elsewhere and run host-networked pods in it.
FEATURE_NAMESPACES: dict[str, str] = {MONITORING_NAMESPACE: "monitoring"}

# Pod Security levels from least to most restrictive (Kubernetes "Pod Security Standards").
LEVELS = ("privileged", "baseline", "restricted")


def at_least(standard: str) -> list[str]:
    """The levels as strict as `standard` or stricter."""
    return list(LEVELS[LEVELS.index(standard) :])


def exempt_namespaces(features: frozenset[str] = frozenset()) -> list[str]:
    """The namespaces of PRIVILEGED_NAMESPACES a tenant with `features` (e.g. {"monitoring"}) has."""
    return sorted(ns for ns in PRIVILEGED_NAMESPACES if FEATURE_NAMESPACES.get(ns) in (None, *features))


def pod_security_objects(standard: str, features: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The in-tenant objects that enforce `standard`: the label on `default`, the admission policy
    and its binding. None for `privileged` (the team chose no Pod Security)."""
    if standard == PRIVILEGED:
        return []
    allowed = at_least(standard)
    exempt = exempt_namespaces(features)
    label = f"namespaceObject.metadata.labels[{ENFORCE_LABEL!r}]"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {ENFORCE_LABEL: standard}}},
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY_NAME},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
                    "namespaceSelector": {
                        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt}]
                    },
                },
                "validations": [
                    {
                        "expression": (
                            f"has(namespaceObject.metadata.labels) && {ENFORCE_LABEL!r} in namespaceObject.metadata.labels "
                            f"&& {label} in {allowed!r}"
                        ),
                        "messageExpression": (
                            f"'namespace ' + namespaceObject.metadata.name + ' must carry the label {ENFORCE_LABEL}="
                            f"{' or '.join(allowed)}: this virtual cluster enforces the Pod Security Standard {standard} "
                            f"(gpu-platform tenant.podSecurityStandard; exempt: {', '.join(exempt)})'"
                        ),
                        "reason": "Forbidden",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY_NAME},
            "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
        },
    ]
