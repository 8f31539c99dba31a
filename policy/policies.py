"""The gpu-platform guardrails (issue #6, plus the custom-role rule of issue #7) as CrossGuard policies.

Every rule is a plain validator function `fn(args, report_violation)` followed by its policy object,
so tests call the validators directly (tests/test_policies.py) and `policy/__main__.py` only builds
the `PolicyPack` from `POLICIES`. The vcluster.yaml inside a VirtualClusterInstance is read with
the program's own parser (components/vcluster_values.py) and the forbidden permissions come from the
program's own data (config/permissions.yaml), so the pack and the program cannot disagree.

Violation messages follow the program's config errors: `<field>: <what is wrong>; allowed: <what is>`.

At run time `args.props` is a read-only Mapping proxy (not a dict) that raises `UnknownValueError`
when a validator touches a value that is unknown during preview; the SDK turns that into an advisory
"can't run during preview" note and the policy runs again, with known values, during `pulumi up`.
The validators therefore test for `Mapping`/`Sequence`, never `dict`/`list`, and never swallow
that exception.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Iterator

REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if REPO_ROOT not in sys.path:  # the CLI runs the pack from policy/; it reuses the program's modules at the repo root
    sys.path.insert(0, REPO_ROOT)

import yaml  # noqa: E402
from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)
from pulumi_policy.proxy import UnknownValueError  # noqa: E402

from components.vcluster_values import GPU_RESOURCE, VClusterValues  # noqa: E402
from config.permissions import load_roles  # noqa: E402

# --- Resource types -------------------------------------------------------------------------------

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
SERVICE_ACCOUNT_KEY = "gcp:serviceaccount/key:Key"
CUSTOM_ROLES = ("gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:organizations/iAMCustomRole:IAMCustomRole")
HELM_RELEASES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VIRTUAL_CLUSTER_INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"

# Labels the program sets (components/gke_cluster.py, components/tenant_vcluster.py).
CLUSTER_ENVIRONMENT_LABEL = "gpu-platform-environment"
INSTANCE_ENVIRONMENT_LABEL = "gpu-platform/environment"
NON_PROD_ENVIRONMENTS = ("dev", "staging")

BASIC_ROLES = ("roles/owner", "roles/editor", "roles/viewer")
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GKE_METADATA = "GKE_METADATA"

DEFAULT_MAX_GPUS_PER_TENANT = 16
MAX_GPUS_CONFIG = "maxGpusPerTenant"

# serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>]: a project id (optionally domain-scoped),
# a namespace (DNS label) and a Kubernetes service account name (DNS subdomain); no wildcard fits.
_WORKLOAD_IDENTITY_MEMBER = re.compile(
    r"^serviceAccount:(?:[a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]\.svc\.id\.goog"
    r"\[[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\]$"
)
# An exact release: 1.2.3 or v1.2.3, optionally -prerelease and +build; no ranges, no wildcards.
_EXACT_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_VERSION_ALLOWED = "allowed: an exact release such as 4.11.2 or v25.10.1 (not empty, '*', 'latest', ranges like ^1, ~1, >=1.0 or wildcards like 1.x)"


# --- Helpers --------------------------------------------------------------------------------------


def _get(value: Any, *path: str) -> Any:
    """The value at `path`, or None where a key is missing or a level is not a mapping."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _show(value: Any) -> str:
    """A value as the stack's YAML would spell it: 'text', true/false, or "not set"."""
    if value is None:
        return "not set"
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _not_allowed(path: str, value: Any, allowed: str) -> str:
    """`path: 'x' is not allowed; allowed: …` (or `path: not set; allowed: …`), like config errors."""
    got = "not set" if value is None else f"{_show(value)} is not allowed"
    return f"{path}: {got}; allowed: {allowed}"


def _version_problem(version: Any) -> str | None:
    if isinstance(version, str) and _EXACT_VERSION.match(version.strip()):
        return None
    if version is None or (isinstance(version, str) and not version.strip()):
        return f"is not set, so the newest chart would be installed; {_VERSION_ALLOWED}"
    return f"{version!r} is not an exact version; {_VERSION_ALLOWED}"


def _wildcard_problem(value: Any) -> str | None:
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


def _iam_bindings(props: Mapping[str, Any]) -> Iterator[tuple[str, Any, list[tuple[str, Any]]]]:
    """(field path, role, [(member field path, member)]) for an IAM member, binding or policy."""
    if "policyData" in props:
        data = props["policyData"]
        try:
            document = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            document = None
        for i, binding in enumerate((document or {}).get("bindings") or []):
            members = binding.get("members") or []
            path = f"policyData.bindings[{i}]"
            yield f"{path}.role", binding.get("role"), [(f"{path}.members[{j}]", m) for j, m in enumerate(members)]
        return
    role = props.get("role")
    if "members" in props and _is_list(props["members"]):
        yield "role", role, [(f"members[{j}]", m) for j, m in enumerate(props["members"])]
    else:
        yield "role", role, [("member", props.get("member"))]


def _is_iam_grant(resource_type: str) -> bool:
    """Every gcp IAM member/binding/policy resource: projects, folders, organizations, service
    accounts and the resource-level ones (buckets, repositories, …)."""
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return resource_type.startswith("gcp:") and kind.endswith(("iammember", "iambinding", "iampolicy"))


class _Values:
    """The VirtualClusterInstance's vcluster.yaml, parsed by the program's own parser."""

    FIELD = "spec.template.helmRelease.values"

    def __init__(self, props: Mapping[str, Any]):
        self.values: VClusterValues | None = None
        self.problem: str | None = None
        text = _get(props, "spec", "template", "helmRelease", "values")
        if text is None:
            self.problem = "is not set; the instance must carry its vcluster.yaml inline"
        elif not isinstance(text, str):
            self.problem = "is not a string; allowed: the vcluster.yaml document as one YAML string"
        else:
            try:
                self.values = VClusterValues.parse(text)
            except (yaml.YAMLError, ValueError) as e:
                self.problem = f"is not a vcluster.yaml mapping ({str(e).splitlines()[0]})"


def _environment_of_instance(props: Mapping[str, Any]) -> str | None:
    return _get(props, "metadata", "labels", INSTANCE_ENVIRONMENT_LABEL)


# --- a. GKE -------------------------------------------------------------------------------------


def _node_config_problem(node_config: Any, path: str) -> str | None:
    mode = _get(node_config, "workloadMetadataConfig", "mode")
    if mode == GKE_METADATA:
        return None
    return _not_allowed(
        f"{path}.workloadMetadataConfig.mode",
        mode,
        f"{GKE_METADATA!r} (pods reach Google APIs through Workload Identity, never as the node's service account)",
    )


def validate_gke_hardening(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Workload Identity, shielded nodes, no legacy ABAC, no client certificates, GKE_METADATA on
    the cluster's node_config, its inline node pools and every NodePool."""
    props = args.props
    if args.resource_type == GKE_NODE_POOL:
        problem = _node_config_problem(props.get("nodeConfig"), "nodeConfig")
        if problem:
            report_violation(problem, None)
        return
    if args.resource_type != GKE_CLUSTER:
        return

    pool = _get(props, "workloadIdentityConfig", "workloadPool")
    project = props.get("project")
    expected = f"{project}.svc.id.goog" if isinstance(project, str) and project else "<project>.svc.id.goog"
    if not isinstance(pool, str) or not pool.endswith(".svc.id.goog") or (project and pool != expected):
        report_violation(_not_allowed("workloadIdentityConfig.workloadPool", pool, f"{expected!r} (Workload Identity on)"), None)
    if props.get("enableShieldedNodes") is not True:
        report_violation(_not_allowed("enableShieldedNodes", props.get("enableShieldedNodes"), "true, set explicitly"), None)
    if props.get("enableLegacyAbac") is True:
        report_violation("enableLegacyAbac: true is not allowed; allowed: false or unset (Kubernetes RBAC only)", None)
    if _get(props, "masterAuth", "clientCertificateConfig", "issueClientCertificate") is True:
        report_violation(
            "masterAuth.clientCertificateConfig.issueClientCertificate: true is not allowed; "
            "allowed: false or unset (no static client certificates; IAM through gke-gcloud-auth-plugin)",
            None,
        )
    if props.get("enableAutopilot") is not True:  # Autopilot enforces GKE_METADATA itself
        problem = _node_config_problem(props.get("nodeConfig"), "nodeConfig")
        if problem:
            report_violation(problem, None)
    node_pools = props.get("nodePools")
    for i, inline_pool in enumerate(node_pools if _is_list(node_pools) else []):
        problem = _node_config_problem(_get(inline_pool, "nodeConfig"), f"nodePools[{i}].nodeConfig")
        if problem:
            report_violation(problem, None)


gke_hardening = ResourceValidationPolicy(
    name="gke-cluster-hardening",
    description=(
        "GKE clusters have Workload Identity, shielded nodes, no legacy ABAC and no client certificates; "
        "the cluster's node_config and every node pool use the GKE_METADATA metadata server."
    ),
    validate=validate_gke_hardening,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def validate_prod_deletion_protection(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A cluster labelled gpu-platform-environment=prod (in resourceLabels, or through the GCP
    provider's defaultLabels) has deletionProtection true and is protected in Pulumi state."""
    if args.resource_type != GKE_CLUSTER:
        return
    environment = _get(args.props, "resourceLabels", CLUSTER_ENVIRONMENT_LABEL)
    where = f"resourceLabels[{CLUSTER_ENVIRONMENT_LABEL!r}]"
    if environment is None and args.provider is not None:
        labels = args.provider.props.get("defaultLabels")
        if isinstance(labels, str):  # provider config objects travel JSON-encoded
            try:
                labels = json.loads(labels)
            except ValueError:
                labels = None
        environment = _get(labels, CLUSTER_ENVIRONMENT_LABEL)
        where = f"the GCP provider's defaultLabels[{CLUSTER_ENVIRONMENT_LABEL!r}]"
    if environment != "prod":
        return
    protection = args.props.get("deletionProtection")
    if protection is not True:
        report_violation(_not_allowed("deletionProtection", protection, f"true for a prod cluster ({where} is 'prod')"), None)
    if args.opts is not None and not args.opts.protect:
        report_violation(_not_allowed("resource option protect", False, f"true for a prod cluster ({where} is 'prod')"), None)


gke_prod_deletion_protection = ResourceValidationPolicy(
    name="gke-prod-deletion-protection",
    description="A GKE cluster labelled gpu-platform-environment=prod has deletionProtection on and is protected in Pulumi state.",
    validate=validate_prod_deletion_protection,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# --- b. IAM -------------------------------------------------------------------------------------


def validate_no_service_account_keys(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == SERVICE_ACCOUNT_KEY:
        report_violation(
            f"{SERVICE_ACCOUNT_KEY}: a service account key is not allowed; allowed: Workload Identity "
            "(pods) and Workload Identity Federation (CI), which need no long-lived key",
            None,
        )


no_service_account_keys = ResourceValidationPolicy(
    name="no-service-account-keys",
    description="No Google service account keys: identities are reached only through Workload Identity (Federation).",
    validate=validate_no_service_account_keys,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_no_basic_roles(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not _is_iam_grant(args.resource_type):
        return
    for path, role, _ in _iam_bindings(args.props):
        if role in BASIC_ROLES:
            report_violation(
                f"{path}: {role!r} is a basic role and not allowed; allowed: a predefined or custom role with "
                f"only the permissions needed (never {', '.join(BASIC_ROLES)})",
                None,
            )


no_basic_roles = ResourceValidationPolicy(
    name="no-basic-iam-roles",
    description="No IAM member, binding or policy grants a basic role (roles/owner, roles/editor, roles/viewer).",
    validate=validate_no_basic_roles,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def validate_workload_identity_members(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not _is_iam_grant(args.resource_type):
        return
    for _, role, members in _iam_bindings(args.props):
        if role != WORKLOAD_IDENTITY_USER:
            continue
        for path, member in members:
            if isinstance(member, str) and _WORKLOAD_IDENTITY_MEMBER.match(member):
                continue
            allowed = (
                f"for {WORKLOAD_IDENTITY_USER}, exactly one Kubernetes service account, "
                "serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>] (no wildcard, no principalSet://)"
            )
            report_violation(_not_allowed(path, member, allowed), None)


workload_identity_members = ResourceValidationPolicy(
    name="workload-identity-exact-member",
    description=(
        "roles/iam.workloadIdentityUser is granted only to one named Kubernetes service account, "
        "serviceAccount:<project>.svc.id.goog[<namespace>/<ksa>]."
    ),
    validate=validate_workload_identity_members,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# --- f. IAM custom roles (issue #7) ---------------------------------------------------------------


def validate_custom_role_permissions(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in CUSTOM_ROLES:
        return
    forbidden = load_roles().forbidden_in_any_role
    permissions = args.props.get("permissions")
    held = [p for p in (permissions if _is_list(permissions) else []) if p in forbidden]
    if held:
        report_violation(
            f"permissions: {', '.join(held)} {'is' if len(held) == 1 else 'are'} not allowed in any custom role "
            "(each lets the role's holder grant itself more); "
            f"allowed: anything but config/permissions.yaml forbiddenInAnyRole ({', '.join(forbidden)})",
            None,
        )


custom_role_permissions = ResourceValidationPolicy(
    name="custom-role-no-privilege-escalation",
    description=(
        "No IAM custom role holds a permission from config/permissions.yaml forbiddenInAnyRole "
        "(setIamPolicy, iam.roles.create/update, service-account creation, actAs, keys). "
        "The opt-in legacy mode (nodeProvider.legacyInfrastructure: true, the official 59-permission role) "
        "violates this on purpose: a stack that opts in must lower this policy's enforcement level "
        "through policy config, e.g. {\"custom-role-no-privilege-escalation\": {\"enforcementLevel\": \"advisory\"}}."
    ),
    validate=validate_custom_role_permissions,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# --- c. Supply chain ----------------------------------------------------------------------------


def validate_helm_release_version(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in HELM_RELEASES:
        return
    problem = _version_problem(args.props.get("version"))
    if problem:
        report_violation(f"version (chart {_show(args.props.get('chart'))}): {problem}", None)


helm_release_version = ResourceValidationPolicy(
    name="helm-release-pinned-version",
    description="Every Helm release pins an exact chart version.",
    validate=validate_helm_release_version,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def validate_instance_chart_versions(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    template = _get(args.props, "spec", "template")
    if template is None and _get(args.props, "spec", "templateRef") is not None:
        return  # versions live in the referenced VirtualClusterTemplate
    chart = _get(template, "helmRelease", "chart")
    problem = _version_problem(_get(chart, "version"))
    if problem:
        report_violation(f"spec.template.helmRelease.chart.version (chart {_show(_get(chart, 'name'))}): {problem}", None)
    charts = _get(template, "charts")
    for i, entry in enumerate(charts if _is_list(charts) else []):
        problem = _version_problem(_get(entry, "version"))
        if problem:
            report_violation(f"spec.template.charts[{i}].version (chart {_show(_get(entry, 'name'))}): {problem}", None)


instance_chart_versions = ResourceValidationPolicy(
    name="vcluster-instance-pinned-charts",
    description="Every VirtualClusterInstance pins the vcluster chart and every chart it installs to an exact version.",
    validate=validate_instance_chart_versions,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def _git_sources(value: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every `git:` template source under a NodeProvider spec (node, environment and per-type templates)."""
    if isinstance(value, Mapping):
        for key in value:
            child_path = f"{path}.{key}"
            try:
                child = value[key]
            except UnknownValueError:
                if key == "git":
                    raise  # a source we cannot see yet: the SDK defers the policy to `pulumi up`
                continue  # some other field computed by another resource: not a template source
            if key == "git" and isinstance(child, Mapping):
                yield child_path, child
            else:
                yield from _git_sources(child, child_path)
    elif _is_list(value):
        for i in range(len(value)):
            try:
                child = value[i]
            except UnknownValueError:
                continue
            yield from _git_sources(child, f"{path}[{i}]")


def validate_node_provider_templates(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != NODE_PROVIDER:
        return
    allowed = "allowed: a tag, or a full 40-hex-digit commit (a branch alone can change under us)"
    for path, git in _git_sources(args.props.get("spec"), "spec"):
        commit, tag, branch = git.get("commit"), git.get("tag"), git.get("branch")
        repository = _show(git.get("repository"))
        if commit not in (None, "") and not (isinstance(commit, str) and _COMMIT.match(commit)):
            report_violation(f"{path}.commit: {commit!r} ({repository}) is not a full commit; {allowed}", None)
            continue
        if tag not in (None, "") and _wildcard_problem(tag) is not None:
            report_violation(f"{path}.tag: {tag!r} ({repository}) is not one tag; {allowed}", None)
            continue
        if commit in (None, "") and tag in (None, ""):
            pinned_by = f"only branch {branch!r}" if branch else "nothing (the default branch)"
            report_violation(f"{path}: {repository} is pinned by {pinned_by}; {allowed}", None)


node_provider_templates = ResourceValidationPolicy(
    name="node-provider-pinned-templates",
    description="Every git source of a NodeProvider's templates pins a tag or a 40-hex commit, never only a branch.",
    validate=validate_node_provider_templates,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


# --- d. Tenancy ---------------------------------------------------------------------------------


def validate_tenant_isolation(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Private nodes on; every dynamic auto-nodes pool bounded by limits; every GPU pool (one that
    selects GPU node types or leaves the accelerator open) tainted nvidia.com/gpu:NoSchedule and
    consolidated when idle."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    parsed = _Values(args.props)
    field = _Values.FIELD
    if parsed.values is None:
        report_violation(f"{field}: {parsed.problem}", None)
        return
    values = parsed.values
    try:
        if not values.private_nodes_enabled:
            enabled = _get(values.document, "privateNodes", "enabled")
            report_violation(
                f"{field} privateNodes.enabled: {_show(enabled)} is not allowed; allowed: true "
                "(a tenant's pods run only on its own VMs, never on shared host nodes)",
                None,
            )
        for pool in values.dynamic_pools():
            where = f"{field} privateNodes.autoNodes[provider={pool.provider!r}].dynamic[name={pool.name!r}]"
            if not pool.limits:
                report_violation(
                    f"{where}.limits: not set; allowed: limits such as {{{GPU_RESOURCE}: '4', cpu: '32', memory: 106Gi}} "
                    "so the pool cannot grow without bound",
                    None,
                )
            if pool.is_gpu and not pool.has_gpu_taint:
                report_violation(
                    f"{where}.taints: {pool.taints or 'none'} lacks the GPU taint; allowed: a taint "
                    f"{{key: {GPU_RESOURCE}, effect: NoSchedule}} so CPU pods cannot land on (and keep alive) GPU VMs",
                    None,
                )
            if pool.is_gpu and not pool.consolidate_after:
                report_violation(
                    f"{where}.disruption.consolidateAfter: not set; allowed: a duration such as 60s or 5m, "
                    "so idle GPU VMs are deleted",
                    None,
                )
    except (AttributeError, TypeError) as e:  # a key holding the wrong kind of value
        report_violation(f"{field}: not shaped like vcluster.yaml ({e})", None)


tenant_isolation = ResourceValidationPolicy(
    name="vcluster-private-nodes-isolation",
    description=(
        "Every VirtualClusterInstance runs on private nodes; every dynamic auto-nodes pool has limits; every GPU pool "
        "carries the nvidia.com/gpu NoSchedule taint and a disruption.consolidateAfter."
    ),
    validate=validate_tenant_isolation,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


SCOPE_KEYS = ("project", "region")


def validate_concrete_scope(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """`project` and `region` are single concrete names wherever nodes get their scope: a
    NodeProvider's spec.properties and node types, and a tenant's auto-nodes properties."""
    allowed = "allowed: one concrete name (not empty, no '*', no comma-separated list)"
    if args.resource_type == NODE_PROVIDER:
        scopes: list[tuple[str, Any]] = [("spec.properties", _get(args.props, "spec", "properties"))]
        node_types = _get(args.props, "spec", "terraform", "nodeTypes")
        for i, node_type in enumerate(node_types if _is_list(node_types) else []):
            scopes.append((f"spec.terraform.nodeTypes[{i}].properties", _get(node_type, "properties")))
    elif args.resource_type == VIRTUAL_CLUSTER_INSTANCE:
        parsed = _Values(args.props)
        if parsed.values is None:
            return  # reported by vcluster-private-nodes-isolation
        scopes = [
            (f"{_Values.FIELD} privateNodes.autoNodes[{i}].properties", _get(entry, "properties"))
            for i, entry in enumerate(parsed.values.auto_nodes)
        ]
    else:
        return
    for path, properties in scopes:
        if not isinstance(properties, Mapping):
            continue
        for key in SCOPE_KEYS:
            if key in properties:
                problem = _wildcard_problem(properties[key])
                if problem:
                    report_violation(f"{path}.{key}: {problem}; {allowed}", None)


concrete_scope = ResourceValidationPolicy(
    name="concrete-project-and-region",
    description="NodeProvider and auto-nodes properties name one concrete GCP project and region, never a wildcard or a list.",
    validate=validate_concrete_scope,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


# --- e. Cost --------------------------------------------------------------------------------------


def tenant_gpu_limit(values: VClusterValues) -> tuple[int | None, list[str]]:
    """(sum of the GPU pools' nvidia.com/gpu limits or None if one is unbounded, one note per pool)."""
    total: int | None = 0
    notes = []
    for pool in values.gpu_pools():
        limit = pool.gpu_limit
        notes.append(f"{pool.name}={limit if limit is not None else 'unbounded'}")
        total = None if total is None or limit is None else total + limit
    return total, notes


def _is_prod_instance(props: Mapping[str, Any]) -> bool:
    """dev and staging are non-prod; prod, a missing label and any other value count as prod."""
    return _environment_of_instance(props) not in NON_PROD_ENVIRONMENTS


def _gpu_ceiling_validator(policy_name: str, prod: bool) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type != VIRTUAL_CLUSTER_INSTANCE or _is_prod_instance(args.props) != prod:
            return
        parsed = _Values(args.props)
        if parsed.values is None:
            return  # reported by vcluster-private-nodes-isolation
        ceiling = int((args.get_config() or {}).get(MAX_GPUS_CONFIG, DEFAULT_MAX_GPUS_PER_TENANT))
        try:
            total, notes = tenant_gpu_limit(parsed.values)
        except (AttributeError, TypeError):
            return  # reported by vcluster-private-nodes-isolation
        if total is not None and total <= ceiling:
            return
        environment = _environment_of_instance(args.props)
        shown = "unbounded" if total is None else str(total)
        report_violation(
            f"{_Values.FIELD} privateNodes.autoNodes[].dynamic[].limits[{GPU_RESOURCE!r}]: the tenant's GPU limit is "
            f"{shown} ({', '.join(notes)}) for environment {_show(environment)}; allowed: at most {ceiling} "
            f"(policy config {policy_name}.{MAX_GPUS_CONFIG}), with an {GPU_RESOURCE} limit on every GPU pool",
            None,
        )

    validate.__name__ = f"validate_{policy_name.replace('-', '_')}"
    validate.__doc__ = (
        "Flags a tenant whose GPU pools may together hold more GPUs than the ceiling; reports only "
        f"for {'prod' if prod else 'dev and staging'} instances (label {INSTANCE_ENVIRONMENT_LABEL})."
    )
    return validate


def _ceiling_schema() -> PolicyConfigSchema:
    return PolicyConfigSchema(
        properties={
            MAX_GPUS_CONFIG: {
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_MAX_GPUS_PER_TENANT,
                "description": "Largest total nvidia.com/gpu limit one tenant's GPU pools may have.",
            }
        }
    )


# Why two policies for one rule: CrossGuard attaches the enforcement level to a policy, not to a
# violation, so one policy cannot be advisory for dev/staging and mandatory for prod. The two share
# one validator; each reports only for its environment class (a VirtualClusterInstance's
# gpu-platform/environment label; anything but dev/staging, a missing label included, counts as
# prod, so the mandatory one fails closed) and each has its own maxGpusPerTenant, so prod may be
# given a different ceiling than dev.
GPU_CEILING_NON_PROD = "tenant-gpu-ceiling-nonprod"
GPU_CEILING_PROD = "tenant-gpu-ceiling-prod"
validate_gpu_ceiling_nonprod = _gpu_ceiling_validator(GPU_CEILING_NON_PROD, prod=False)
validate_gpu_ceiling_prod = _gpu_ceiling_validator(GPU_CEILING_PROD, prod=True)

gpu_ceiling_nonprod = ResourceValidationPolicy(
    name=GPU_CEILING_NON_PROD,
    description=f"A dev or staging tenant's GPU limit (sum of its GPU pools' nvidia.com/gpu limits) stays within {MAX_GPUS_CONFIG} (default {DEFAULT_MAX_GPUS_PER_TENANT}).",
    validate=validate_gpu_ceiling_nonprod,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=_ceiling_schema(),
    severity=Severity.MEDIUM,
)
gpu_ceiling_prod = ResourceValidationPolicy(
    name=GPU_CEILING_PROD,
    description=f"A prod tenant's GPU limit (sum of its GPU pools' nvidia.com/gpu limits) stays within {MAX_GPUS_CONFIG} (default {DEFAULT_MAX_GPUS_PER_TENANT}).",
    validate=validate_gpu_ceiling_prod,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_ceiling_schema(),
    severity=Severity.HIGH,
)


POLICIES: list[ResourceValidationPolicy] = [
    gke_hardening,
    gke_prod_deletion_protection,
    no_service_account_keys,
    no_basic_roles,
    workload_identity_members,
    custom_role_permissions,
    helm_release_version,
    instance_chart_versions,
    node_provider_templates,
    tenant_isolation,
    concrete_scope,
    gpu_ceiling_nonprod,
    gpu_ceiling_prod,
]
