"""What every guardrail shares: resource types, the facts of program_data.json and of each stack's
record (stacks/<stack>.json), and helpers that read props the way the analyzer hands them over.

At run time `args.props` is a read-only Mapping proxy (not a dict) that raises `UnknownValueError`
when a validator touches a value that is unknown during preview; the SDK turns that into an advisory
"can't run during preview" note and the policy runs again, with known values, during `pulumi up`.
The validators therefore test for `Mapping`/`Sequence`, never `dict`/`list`, and never swallow
that exception.

Violation messages follow the program's config errors: `<field>: <what is wrong>; allowed: <what is>`,
after the resource they are about: `<Pulumi name> (<the object>): …` (`ResourcePolicy`, `described`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

import yaml
from pulumi_policy import ReportViolation, ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import UnknownValueError
from kubernetes_reader import is_list, plain  # noqa: F401 - the guardrails' readers of read-only proxies
from stack_records import load_records
from vcluster_reader import VClusterValues

PACK_DIR = Path(__file__).resolve().parent.parent
DATA: dict[str, Any] = json.loads((PACK_DIR / "program_data.json").read_text())
PROGRAM_PROJECT: str = DATA["projects"]["program"]
BOOTSTRAP_PROJECT: str = DATA["projects"]["bootstrap"]
# What the program and the bootstrap register, per Pulumi project (tools/program_inventory.py).
INVENTORY: dict[str, dict[str, Any]] = DATA["inventory"]
# Per committed stack of the program: its exact identities and tenants, one file per stack
# (stacks/<stack>.json, `make policy-data`), so that two pull requests adding a team each add a file.
STACKS: dict[str, dict[str, Any]] = load_records()

# --- Resource types -------------------------------------------------------------------------------

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
SERVICE_ACCOUNT_KEY = "gcp:serviceaccount/key:Key"
CUSTOM_ROLES = ("gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:organizations/iAMCustomRole:IAMCustomRole")
HELM_RELEASES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VIRTUAL_CLUSTER_INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
KUBERNETES_SECRET = "kubernetes:core/v1:Secret"
PLATFORM_PROJECT = "kubernetes:management.loft.sh/v1:Project"
FIREWALL = "gcp:compute/firewall:Firewall"
ADDRESS = "gcp:compute/address:Address"
NETWORK_PEERINGS = ("gcp:compute/networkPeering:NetworkPeering", "gcp:compute/networkPeeringRoutesConfig:NetworkPeeringRoutesConfig")
PROJECT = "gcp:organizations/project:Project"
WORKLOAD_IDENTITY_PROVIDER = "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"
DATASET = "gcp:bigquery/dataset:Dataset"
TABLE = "gcp:bigquery/table:Table"
MONITORED_PROJECT = "gcp:monitoring/monitoredProject:MonitoredProject"
BACKUP_PLAN = "gcp:gkebackup/backupPlan:BackupPlan"
RESTORE_PLAN = "gcp:gkebackup/restorePlan:RestorePlan"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
SERVICE = "kubernetes:core/v1:Service"

# Labels the program sets (components/gke_cluster.py, components/tenant_vcluster.py).
CLUSTER_ENVIRONMENT_LABEL = "gpu-platform-environment"
INSTANCE_ENVIRONMENT_LABEL = "gpu-platform/environment"
NON_PROD_ENVIRONMENTS = ("dev", "staging")

WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"


# --- Reading props --------------------------------------------------------------------------------


def get(value: Any, *path: str) -> Any:
    """The value at `path`, or None where a key is missing or a level is not a mapping."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def is_set(value: Any) -> bool:
    """Whether an input holds more than its zero value (nothing, false, 0, "", an empty list or
    map). The engine hands the pack a resource's inputs as its provider's Check returns them
    (pulumi/pulumi pkg/resource/deploy/step_generator.go:
    `inputs = resp.Properties`, then "Send the resource off to any Analyzers", read at commit
    1b5949891b3cefcb9974752b24a5ecef0acc86c8), and a release's Check re-encodes every field of its
    Release type, the unset ones at their zero value: `postrender: ""`, `atomic: false`
    (pulumi/pulumi-kubernetes provider/pkg/provider/helm_release.go Check, `resource.NewPropertyMap`,
    read at commit 94977969d64112b04e19945818a7d5d5f38f631d; pulumi/pulumi
    sdk/go/common/util/mapper/mapper_encode.go keeps zero values). It also merges `valueYamlFiles`
    into `values`, which helm-release-by-design's value paths then judge."""
    if isinstance(value, Mapping) or is_list(value):
        return len(value) > 0
    return value not in (None, "", False, 0)


def as_list(value: Any) -> list[Any]:
    return list(value) if is_list(value) else []


def show(value: Any) -> str:
    """A value as the stack's YAML would spell it: 'text', true/false, or "not set"."""
    if value is None:
        return "not set"
    return str(value).lower() if isinstance(value, bool) else repr(value)


def show_short(value: Any) -> str:
    """`show`, a long text (a config file, a certificate) cut short."""
    return show(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:57] + "...")


def not_allowed(path: str, value: Any, allowed: str) -> str:
    """`path: 'x' is not allowed; allowed: …` (or `path: not set; allowed: …`), like config errors."""
    got = "not set" if value is None else f"{show(value)} is not allowed"
    return f"{path}: {got}; allowed: {allowed}"


def project_of(urn: str) -> str:
    """The Pulumi project of a URN: urn:pulumi:<stack>::<project>::<type>::<name>."""
    parts = urn.split("::")
    return parts[1] if len(parts) > 2 else ""


def stack_of(urn: str) -> str:
    """The stack of a URN: urn:pulumi:<stack>::<project>::<type>::<name>."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:")


def stack_data(urn: str) -> Mapping[str, Any] | None:
    """The data of the program's stack a URN belongs to, None for a stack the data does not know."""
    return STACKS.get(stack_of(urn)) if project_of(urn) == PROGRAM_PROJECT else None


def unknown_stack(urn: str) -> str:
    return (
        f"stack {stack_of(urn)!r} is not in the pack's data, so nothing of it is known; allowed: the stacks of "
        f"policy/stacks/ ({', '.join(sorted(STACKS)) or 'none'}): commit the stack file, run `make policy-data` and publish the pack"
    )


def tenant_record(urn: str, name: Any, report_violation: ReportViolation) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(the stack's record, tenant `name`'s record in it) for a tenant's platform object; None, and
    reported, for a stack or a tenant the data does not know."""
    stack = stack_data(urn)
    if stack is None:
        report_violation(unknown_stack(urn), None)
        return None
    tenant = stack["tenants"].get(name)
    if tenant is None:
        report_violation(
            f"metadata.name: tenant {show(name)} is not a tenant of stack {stack_of(urn)} in the pack's data; allowed: "
            f"{', '.join(sorted(stack['tenants'])) or 'none'} (a new tenant flows in with make policy-data)",
            None,
        )
        return None
    return stack, tenant


def environment_of_stack(urn: str) -> str | None:
    """The environment (dev, staging, prod) of the program's stack a URN belongs to."""
    data = stack_data(urn)
    return data["environment"] if data else None


def environment_by_stack(urn: str, label: Any, where: str, report_violation: ReportViolation | None) -> tuple[str | None, str]:
    """A resource's environment and why: its stack's (the pack's record, from the URN), whatever
    its label `where` says, so a prod resource without its label, or labelled dev, is still prod.
    Only for a stack the record does not know is the label read (None without one: the callers
    count that as prod). A label other than its stack's environment is reported to
    `report_violation` (None: to nobody, where another policy reports it)."""
    environment = environment_of_stack(urn)
    if environment is None:
        if label is None:
            return None, f"stack {stack_of(urn)!r} is not in the pack's data and {where} is not set"
        return str(label), f"{where} is {show(label)}"
    if label is not None and label != environment and report_violation is not None:
        report_violation(not_allowed(where, label, f"{environment!r}, the environment of stack {stack_of(urn)} (or unset)"), None)
    return environment, f"stack {stack_of(urn)} is environment {environment!r}"


def wildcard_problem(value: Any) -> str | None:
    """Why a project/region property value is not one concrete name, or None."""
    if not isinstance(value, str):
        return f"{value!r} is not a single name"
    text = value.strip()
    if not text:
        return "is empty"
    if "*" in text or "?" in text:
        return f"{value!r} is a wildcard"
    if "," in text or " " in text:
        return f"{value!r} is a list"
    return None


def is_open_range(cidr: Any) -> bool:
    """0.0.0.0/0, ::/0 or any other /0: the whole internet."""
    return isinstance(cidr, str) and cidr.strip().endswith("/0")


# --- IAM grants -----------------------------------------------------------------------------------


def read_policy_data(data: Any) -> tuple[list[Mapping[str, Any]], str | None]:
    """The bindings of an IAM policy's `policyData`, or ([], why it cannot be read)."""
    if not isinstance(data, str):
        return [], f"{show(data)} is not a JSON string"
    try:
        document = json.loads(data)
    except ValueError as e:
        return [], f"is not JSON ({e})"
    if not isinstance(document, Mapping):
        return [], f"{type(document).__name__} is not a JSON object"
    bindings = document.get("bindings") or []
    readable = is_list(bindings) and all(
        isinstance(b, Mapping) and isinstance(b.get("role"), str) and is_list(b.get("members") or []) for b in bindings
    )
    return (list(bindings), None) if readable else ([], "bindings is not a list of {role, members}")


def unreadable_policy_data(props: Mapping[str, Any]) -> str | None:
    """The violation of an IAM policy whose `policyData` cannot be read: what it grants is unknown,
    so it fails closed (iam-grants-by-design reports it), or None."""
    if "policyData" not in props:
        return None
    _, problem = read_policy_data(props["policyData"])
    if problem is None:
        return None
    return f"policyData: {problem}; allowed: a JSON IAM policy {{\"bindings\": [{{\"role\": …, \"members\": […]}}]}}, so its grants can be checked"


def iam_bindings(props: Mapping[str, Any]) -> Iterator[tuple[str, Any, list[tuple[str, Any]]]]:
    """(field path, role, [(member field path, member)]) for an IAM member, binding or policy; none
    for a policy whose policyData cannot be read (see unreadable_policy_data)."""
    if "policyData" in props:
        bindings, _ = read_policy_data(props["policyData"])
        for i, binding in enumerate(bindings):
            members = binding.get("members") or []
            path = f"policyData.bindings[{i}]"
            yield f"{path}.role", binding.get("role"), [(f"{path}.members[{j}]", m) for j, m in enumerate(members)]
        return
    role = props.get("role")
    if "members" in props and is_list(props["members"]):
        yield "role", role, [(f"members[{j}]", m) for j, m in enumerate(props["members"])]
    else:
        yield "role", role, [("member", props.get("member"))]


def is_iam_grant(resource_type: str) -> bool:
    """Every gcp IAM member/binding/policy resource: projects, folders, organizations, service
    accounts and the resource-level ones (subnetworks, buckets, repositories, …)."""
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return resource_type.startswith("gcp:") and kind.endswith(("iammember", "iambinding", "iampolicy"))


_SCOPES = {
    "gcp:projects/": "project",
    "gcp:serviceaccount/": "serviceAccount",
    "gcp:folder/": "folder",
    "gcp:organizations/": "organization",
    "gcp:billing/": "billingAccount",
}


def grant_scope(resource_type: str) -> str:
    """Where an IAM resource binds: project, serviceAccount, folder, organization, billingAccount,
    or the resource kind of a resource-level grant (subnetwork, bucket, …)."""
    for prefix, scope in _SCOPES.items():
        if resource_type.startswith(prefix):
            return scope
    kind = resource_type.rsplit(":", 1)[-1]
    base = re.split(r"IAM(Member|Binding|Policy)$", kind)[0]
    return base[:1].lower() + base[1:]


# --- The VirtualClusterInstance's vcluster.yaml ---------------------------------------------------


class Values:
    """The VirtualClusterInstance's vcluster.yaml, parsed by the shared reader."""

    FIELD = "spec.template.helmRelease.values"

    def __init__(self, props: Mapping[str, Any]):
        self.values: VClusterValues | None = None
        self.problem: str | None = None
        text = get(props, "spec", "template", "helmRelease", "values")
        if text is None:
            self.problem = "is not set; the instance must carry its vcluster.yaml inline"
        elif not isinstance(text, str):
            self.problem = "is not a string; allowed: the vcluster.yaml document as one YAML string"
        else:
            try:
                self.values = VClusterValues.parse(text)
            except (yaml.YAMLError, ValueError) as e:
                self.problem = f"is not a vcluster.yaml mapping ({str(e).splitlines()[0]})"


def instance_values(args: Any) -> VClusterValues | None:
    """The vcluster.yaml of a VirtualClusterInstance, or None for any other resource and for values
    that cannot be read (vcluster-private-nodes-isolation reports those)."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return None
    return Values(args.props).values


INSTANCE_LABEL_FIELD = f"metadata.labels[{INSTANCE_ENVIRONMENT_LABEL!r}]"


def environment_of_instance(props: Mapping[str, Any]) -> str | None:
    """The environment label of a VirtualClusterInstance (INSTANCE_LABEL_FIELD)."""
    return get(props, "metadata", "labels", INSTANCE_ENVIRONMENT_LABEL)


# --- Naming the resource a violation is about -----------------------------------------------------

# What a violation names besides the resource's Pulumi name: the object it creates, (label, path).
_OBJECTS: dict[str, tuple[str, tuple[str, ...]]] = {
    GKE_CLUSTER: ("cluster", ("name",)),
    FIREWALL: ("firewall rule", ("name",)),
    ADDRESS: ("address", ("name",)),
    PROJECT: ("project", ("projectId",)),
    SERVICE_ACCOUNT_KEY: ("key of", ("serviceAccountId",)),
    WORKLOAD_IDENTITY_PROVIDER: ("provider", ("workloadIdentityPoolProviderId",)),
    NODE_PROVIDER: ("NodeProvider", ("metadata", "name")),
    PLATFORM_PROJECT: ("platform project", ("metadata", "name")),
    **{t: ("role", ("roleId",)) for t in CUSTOM_ROLES},
    **{t: ("peering", ("name",)) for t in NETWORK_PEERINGS},
    **{t: ("chart", ("chart",)) for t in HELM_RELEASES},
    "gcp:gkebackup/backupPlan:BackupPlan": ("backup plan", ("name",)),
    "gcp:gkebackup/restorePlan:RestorePlan": ("restore plan", ("name",)),
    "gcp:bigquery/dataset:Dataset": ("dataset", ("datasetId",)),
    "gcp:bigquery/table:Table": ("table", ("tableId",)),
    "gcp:monitoring/monitoredProject:MonitoredProject": ("monitored project", ("name",)),
}
# Namespaced objects, named `<namespace>/<name>`.
_NAMESPACED = {VIRTUAL_CLUSTER_INSTANCE: "instance", KUBERNETES_SECRET: "Secret"}
# Where an IAM grant is bound: the property naming it, per scope (else the property named as the scope:
# subnetwork, bucket, repository, …).
_GRANT_TARGETS = {"serviceAccount": "serviceAccountId", "organization": "orgId", "billingAccount": "billingAccountId"}
_UNKNOWN = object()


def account_of(service_account_id: Any) -> str | None:
    """The e-mail in a service account's id: projects/<p>/serviceAccounts/<email>, or the e-mail."""
    if not isinstance(service_account_id, str):
        return None
    last = service_account_id.rsplit("/", 1)[-1]
    return last if "@" in last else None


def _peek(props: Mapping[str, Any], *path: str) -> Any:
    """get(), for naming only: a value unknown during preview must not defer the policy."""
    try:
        return get(props, *path)
    except UnknownValueError:
        return _UNKNOWN


def _named(label: str, value: Any) -> str | None:
    if value is _UNKNOWN:
        return f"{label} (known after apply)"
    return None if value in (None, "") else f"{label} {show(value)}"


def _what(resource_type: str, props: Mapping[str, Any]) -> str | None:
    if is_iam_grant(resource_type):
        scope = grant_scope(resource_type)
        target = _peek(props, _GRANT_TARGETS.get(scope, scope))
        if scope == "serviceAccount":
            target = account_of(target) or target
        return _named(f"on {re.sub('([A-Z])', lambda m: ' ' + m.group(1).lower(), scope)}", target)
    if resource_type == GKE_NODE_POOL:
        pool, cluster = _named("node pool", _peek(props, "name")), _named("cluster", _peek(props, "cluster"))
        return " of ".join(p for p in (pool, cluster) if p) or None
    if resource_type in _NAMESPACED:
        label = _NAMESPACED[resource_type]
        namespace, name = _peek(props, "metadata", "namespace"), _peek(props, "metadata", "name")
        if _UNKNOWN in (namespace, name):
            return _named(label, _UNKNOWN)
        return _named(label, "/".join(str(p) for p in (namespace, name) if p) or None)
    if resource_type in _OBJECTS:
        label, path = _OBJECTS[resource_type]
        return _named(label, _peek(props, *path))
    return None


def described(resource: Any) -> str:
    """How a violation names a resource (ResourceValidationArgs or a stack's PolicyResource): its
    Pulumi name, then the object: `tenant-nlp-instance (instance 'p-nlp/nlp')`,
    `auto-nodes-role (role 'gpuPlatform_dev_autoNodes')`, `x (on service account 'a@p.iam…')`."""
    what = _what(resource.resource_type, resource.props)
    return f"{resource.name} ({what})" if what else resource.name


class ResourcePolicy(ResourceValidationPolicy):
    """A resource policy whose every violation message starts with `described(resource): `, so the
    message alone (a log, Pulumi Cloud's list of violations) says which resource to fix."""

    def validate(self, args: ResourceValidationArgs, report_violation: ReportViolation):  # type: ignore[override]
        subject = described(args)

        def report(message: str, urn: str | None = None) -> None:
            report_violation(f"{subject}: {message}", urn)

        return super().validate(args, report)
