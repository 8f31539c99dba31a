"""Default deny: a stack of this project holds only the resource types the program registers, and
where a type can do harm, only what the program puts there. What the program registers is data,
read from its own mock runs of every committed stack and of variants that switch every option on
(program_data.json `inventory`, `make policy-data`: tools/program_inventory.py), so a type or
command another change adds is allowed once the data is regenerated, and nothing else is.

- Types: anything the runs never register is rejected, whatever it is: a host ClusterRoleBinding,
  a LoadBalancer Service in front of the platform, a network firewall policy rule.
- Local commands run on the deployer's machine with its credentials: only the program's own
  scripts, with the environment variables the program gives them, each of the program's form: a
  kubeconfig exactly as the program writes it (guardrails/kubeconfigs.py: kubectl runs its exec
  plugin).
- Host RBAC and Services: exactly the objects the program makes (today none of either: the
  platform chart's own RBAC is inside its release).
- Node pools run as the host nodes' own service account (without one, GKE runs them as the
  Compute Engine default account, which holds Editor on the project).
- The Helm release: only the inputs the program sets (no post-renderer, which Helm runs on the
  deployer's machine, no values files beside `values`), only value paths the program writes for
  that chart, and single sign-on only with password login off.
- Charts of an instance (its vcluster chart, the GPU Operator inside the tenant): only the fields
  the program sets on them; inside tenants only the value paths the program writes for each chart,
  and values that choose an image or registry, and switches the program writes one way under
  every configuration, exactly as the program writes them.
- Kubernetes Secrets: exactly the program's (namespace, name, type, keys): any other sits in the
  stack's state, which whoever may read the stack decrypts, previews included.
- Inside tenants: only the objects the program puts there, host access only in the namespaces
  the product needs it in, and only the program's images.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from kubernetes_reader import plain as _plain
from kubernetes_reader import read_chart_values, secret_shape
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity
from vcluster_reader import host_access

from . import kubeconfigs, value_paths
from .common import (
    DATA,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    HELM_RELEASES,
    INVENTORY,
    KUBERNETES_SECRET,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    as_list,
    get,
    is_list,
    project_of,
    show,
    show_short,
    stack_data,
    unknown_stack,
)

COMMAND_PREFIX = "command:"
SERVICE = "kubernetes:core/v1:Service"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
# The inputs of a local command the program may set (pulumi-command local.Command); any other
# (interpreter, dir, stdin, assetPaths, …) changes what runs.
COMMAND_INPUTS = ("create", "update", "delete", "environment", "triggers", "logging")
TENANT = DATA["tenantInstance"]
PRIVILEGED_NAMESPACES: list[str] = TENANT["privilegedNamespaces"]
ENFORCE_LABEL: str = TENANT["enforceLabel"]
POD_SECURITY_POLICY: str = TENANT["podSecurityPolicy"]
# Each set of Pod Security objects a tenant can have (a label on `default`, the admission policy,
# its binding), whole; none at all is `privileged`, which prod approves per team (tenant-placement-by-design).
POD_SECURITY_SETS: list[list[dict[str, Any]]] = TENANT["podSecurityObjects"]
SOURCE = "policy/program_data.json inventory (make policy-data)"


def _inventory(args: ResourceValidationArgs) -> Mapping[str, Any] | None:
    return INVENTORY.get(project_of(args.urn))


def validate_resource_types(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    inventory = _inventory(args)
    if inventory is None or args.resource_type in inventory["resourceTypes"]:
        return
    report_violation(
        f"type {args.resource_type!r} is not a resource type {project_of(args.urn)} creates; allowed: the "
        f"{len(inventory['resourceTypes'])} types its runs register ({SOURCE}: a type the program adds flows in when the data is regenerated)",
        None,
    )


resource_types_by_design = ResourcePolicy(
    name="resource-types-by-design",
    description=(
        "A stack of this project (or of its bootstrap) holds only the resource types the program's (the bootstrap's) own runs "
        "register (program_data.json inventory): e.g. no host RBAC, Kubernetes Service, network firewall policy rule or remote command."
    ),
    validate=validate_resource_types,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _first_line(script: Any) -> str:
    text = str(script).strip().splitlines()
    return show(text[0] if len(text) == 1 else f"{text[0]} …") if text else show(script)


def validate_commands(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not args.resource_type.startswith(COMMAND_PREFIX):
        return
    inventory = _inventory(args) or {"commands": []}
    props = args.props
    for key in sorted(k for k in props if k not in COMMAND_INPUTS):
        report_violation(f"{key}: is not an input gpu-platform sets on a command; allowed: {', '.join(COMMAND_INPUTS)}", None)
    scripts = {key: props.get(key) for key in ("create", "update", "delete")}
    environment = sorted(props.get("environment") or {}) if isinstance(props.get("environment"), Mapping) else None
    matching = [c for c in inventory["commands"] if all(c[k] == scripts[k] for k in scripts)]
    if not matching:
        changed = next((k for k in ("create", "update", "delete") if scripts[k] not in {c[k] for c in inventory["commands"]}), "create")
        report_violation(
            f"{changed}: {_first_line(scripts[changed])} is not a script gpu-platform runs (a command runs on the deployer's machine, "
            f"with its credentials); allowed: the program's {len(inventory['commands'])} commands ({SOURCE})",
            None,
        )
        return
    known = next((c for c in matching if c["environment"] == environment), None)
    if known is None:
        report_violation(
            f"environment: {environment} is not what gpu-platform gives this command; allowed: {matching[0]['environment']}", None
        )
        return
    # Last, as they read the values: one unknown during preview (a new cluster's kubeconfig) defers
    # the policy to `pulumi up` once the checks above have reported.
    for name, form in known["environmentForms"].items():
        value = props["environment"][name]
        if form == "kubeconfig":
            for problem in kubeconfigs.problems(value, args.urn):
                report_violation(f"environment.{name}: {problem}", None)
        elif value != form["equals"]:
            report_violation(f"environment.{name}: {show(value)} is not the value gpu-platform gives this command; allowed: {show(form['equals'])}", None)


commands_by_design = ResourcePolicy(
    name="commands-by-design",
    description=(
        "A command resource runs only the program's own scripts (create, update, delete), with the environment the program gives it: "
        "a kubeconfig exactly as the program writes it, for the stack's host cluster (kubectl runs its exec plugin)."
    ),
    validate=validate_commands,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _kind(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def _recorded(args: ResourceValidationArgs, key: str) -> list[Mapping[str, Any]]:
    return [e["inputs"] for e in (_inventory(args) or {}).get(key, []) if e["type"] == args.resource_type]


def validate_kubernetes_rbac(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if not args.resource_type.startswith("kubernetes:rbac.authorization.k8s.io/") or _kind(args.resource_type) not in RBAC_KINDS:
        return
    if _plain(args.props) in _recorded(args, "kubernetesRbac"):
        return
    role = get(args.props, "roleRef", "name")
    subjects = [f"{get(s, 'kind')} {get(s, 'name')}" for s in as_list(args.props.get("subjects"))]
    what = f" binding {', '.join(subjects) or 'nobody'} to {show(role)}" if role is not None else ""
    report_violation(
        f"{_kind(args.resource_type)} {show(get(args.props, 'metadata', 'name'))}{what} is not host RBAC the program makes; allowed: "
        f"exactly the objects of {SOURCE} (none but the platform chart's own, inside its release)",
        None,
    )


kubernetes_rbac_by_design = ResourcePolicy(
    name="host-rbac-by-design",
    description="Host RBAC (ClusterRole, ClusterRoleBinding, Role, RoleBinding) only exactly as the program makes it: today none outside the platform chart.",
    validate=validate_kubernetes_rbac,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_services(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != SERVICE:
        return
    service_type = get(args.props, "spec", "type")
    if service_type not in ("LoadBalancer", "NodePort") or _plain(args.props) in _recorded(args, "kubernetesServices"):
        return
    ranges = as_list(get(args.props, "spec", "loadBalancerSourceRanges"))
    report_violation(
        f"spec.type: {show(service_type)} is not allowed on the host cluster (Service {show(get(args.props, 'metadata', 'name'))}, admitting "
        f"{', '.join(map(str, ranges)) if ranges else '0.0.0.0/0'}); allowed: the Services of {SOURCE} (none: tenants' control planes "
        "get theirs from the vcluster chart, limited to their NAT addresses, and the platform is reached through its Ingress)",
        None,
    )


load_balancer_services = ResourcePolicy(
    name="load-balancer-services-by-design",
    description="No LoadBalancer or NodePort Service on the host cluster but the ones the program makes (none: control planes' come from the vcluster chart).",
    validate=validate_services,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# A Secret of this type gets a token of the service account its annotation names, filled in by
# Kubernetes (https://kubernetes.io/docs/concepts/configuration/secret/#serviceaccount-token-secrets).
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_ANNOTATION = "kubernetes.io/service-account.name"


def _secret_summary(shape: Mapping[str, Any], named: bool = True) -> str:
    keys = f"type {show(shape['type'])}, keys {', '.join(map(str, as_list(shape.get('keys')))) or 'none'}"
    where = "/".join(str(p) for p in (get(shape, "metadata", "namespace"), get(shape, "metadata", "name")) if p)
    return f"{where or 'unnamed'} ({keys})" if named else keys


def validate_secrets(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A Secret is exactly one the program makes: whatever Pulumi puts in a Secret sits in the
    stack's state, which whoever may read the stack decrypts (dev's previews, every branch's)."""
    if args.resource_type != KUBERNETES_SECRET:
        return
    shape = secret_shape(args.props)
    recorded = (_inventory(args) or {}).get("kubernetesSecrets", [])
    if shape in recorded:
        return
    notes = []
    if shape["type"] == SERVICE_ACCOUNT_TOKEN:
        account = get(shape, "metadata", "annotations", SERVICE_ACCOUNT_ANNOTATION)
        notes.append(f"Kubernetes fills it with a token of service account {get(shape, 'metadata', 'namespace')}/{account}")
    where = (get(shape, "metadata", "namespace"), get(shape, "metadata", "name"))
    same = [r for r in recorded if (get(r, "metadata", "namespace"), get(r, "metadata", "name")) == where]
    if same:
        differ = sorted(k for k in {*shape, *same[0]} if shape.get(k) != same[0].get(k))
        notes.append(f"it differs from the program's in {', '.join(differ)}")
    else:
        notes.append("whatever it holds sits in the stack's state, which whoever may read the stack decrypts: dev's previews included")
    report_violation(
        f"a Secret of {_secret_summary(shape, named=False)} is not one gpu-platform makes ({'; '.join(notes)}); allowed: exactly the Secrets of {SOURCE}: "
        f"{'; '.join(_secret_summary(r) for r in recorded) or 'none'}",
        None,
    )


kubernetes_secrets_by_design = ResourcePolicy(
    name="kubernetes-secrets-by-design",
    description=(
        "A Kubernetes Secret only exactly as the program makes it (namespace, name, type, keys): the license's. No admin password "
        "of one's choosing, no service-account token."
    ),
    validate=validate_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_node_pool_account(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in (GKE_NODE_POOL, GKE_CLUSTER):
        return
    stack = stack_data(args.urn)
    configs = [("nodeConfig", args.props.get("nodeConfig"))]
    if args.resource_type == GKE_CLUSTER:
        configs += [(f"nodePools[{i}].nodeConfig", get(p, "nodeConfig")) for i, p in enumerate(as_list(args.props.get("nodePools")))]
        if args.props.get("nodeConfig") is None:
            configs = configs[1:]
    for path, config in configs:
        account = get(config, "serviceAccount")
        if stack is None:
            report_violation(f"{path}.serviceAccount: {show(account)}: {unknown_stack(args.urn)}", None)
            continue
        allowed = stack.get("hostNodesServiceAccount")
        if account != allowed:
            why = " (GKE would run the nodes as the Compute Engine default account, Editor on the project)" if account in (None, "", "default") else ""
            report_violation(f"{path}.serviceAccount: {show(account)}{why} is not allowed; allowed: the host nodes' own account {show(allowed)}", None)


node_pool_service_account = ResourcePolicy(
    name="node-pool-service-account",
    description="Every GKE node pool (and the cluster's node config) runs as the host nodes' dedicated service account of its stack, never the default one.",
    validate=validate_node_pool_account,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# Why a Helm release input the program never sets matters (pulumi-kubernetes tag v4.34.2,
# sdk/python/pulumi_kubernetes/helm/v3/Release.py).
_RELEASE_INPUTS = {
    "postrender": "a command Helm runs on the deployer's machine, with its credentials",
    "valueYamlFiles": "values merged with `values`, beyond the value paths checked here",
    "keyring": "a file of the deployer's machine",
}


def _is_set(value: Any) -> bool:
    """Whether an input holds more than its zero value. The engine hands the pack a resource's
    inputs as its provider's Check returns them (pulumi/pulumi pkg/resource/deploy/step_generator.go:
    `inputs = resp.Properties`, then "Send the resource off to any Analyzers", read at commit
    1b5949891b3cefcb9974752b24a5ecef0acc86c8), and a release's Check re-encodes every field of its
    Release type, the unset ones at their zero value: `postrender: ""`, `atomic: false`
    (pulumi/pulumi-kubernetes provider/pkg/provider/helm_release.go Check, `resource.NewPropertyMap`,
    read at commit 94977969d64112b04e19945818a7d5d5f38f631d; pulumi/pulumi
    sdk/go/common/util/mapper/mapper_encode.go keeps zero values). It also merges `valueYamlFiles`
    into `values`, which the value paths below then judge."""
    if isinstance(value, Mapping) or is_list(value):
        return len(value) > 0
    return value not in (None, "", False, 0)


def _check_release_inputs(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Only the inputs the program sets on a release of this type, and of its repository options only the fields it sets."""
    allowed = ((_inventory(args) or {}).get("helmReleaseInputs") or {}).get(args.resource_type, [])
    props = args.props
    found = [(name, props[name]) for name in props if name not in allowed]
    repository = props.get("repositoryOpts") if "repositoryOpts" in allowed else None
    if isinstance(repository, Mapping):
        found += [(f"repositoryOpts.{k}", repository[k]) for k in repository if f"repositoryOpts.{k}" not in allowed]
    for name, value in found:
        if _is_set(value):
            why = f" ({_RELEASE_INPUTS[name]})" if name in _RELEASE_INPUTS else ""
            report_violation(
                f"{name}: is not an input gpu-platform sets on a Helm release{why}; allowed: {', '.join(allowed) or 'none'} ({SOURCE})", None
            )


def _check_chart_values(
    field: str, document: Any, chart: Any, recorded: Mapping[str, Any], report_violation: ReportViolation, notes: Mapping[str, str] | None = None
) -> None:
    """A chart's values use only the paths the program writes for that chart (`recorded`, its
    record of the inventory); where those choose an image or registry, only the values it writes
    there; and a switch it writes one way under every configuration (`fixedSwitches`, charts
    inside tenants), only that way. `field`: what a path is shown after, `notes`: why a path
    matters, by path."""
    paths = recorded["valuePaths"]
    images = recorded.get("imageValues") or {}
    switches = recorded.get("fixedSwitches") or {}
    exact = {**{p: [v] for p, v in switches.items()}, **images}
    for path, value, wanted in value_paths.judge(document, paths, exact):
        shown = value_paths.show(path)
        note = (notes or {}).get(shown, "")
        if wanted is None:
            report_violation(
                f"{field}{shown}: {show_short(value)}{note} is not a value gpu-platform sets for chart {chart}; allowed: the paths of {SOURCE}, "
                f"here {value_paths.near(path, paths)}",
                None,
            )
            continue
        image = any(value_paths.matches(path, p) for p in images)
        why = "it chooses an image or the registry one is pulled from" if image else "a switch gpu-platform writes one way under every configuration"
        report_violation(
            f"{field}{shown}: {show_short(value)}{note} is not what gpu-platform sets there for chart {chart} ({why}); allowed: exactly "
            f"{' or '.join(show(v) for v in wanted)} ({SOURCE})",
            None,
        )


def validate_release_values(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The chart and repository of a Helm release are ones the program installs (pinned by source as
    well as version), and its values use only the paths the program writes for that chart."""
    if args.resource_type not in HELM_RELEASES:
        return
    _check_release_inputs(args, report_violation)
    releases = (_inventory(args) or {}).get("helmReleases", [])
    chart, repository = args.props.get("chart"), get(args.props, "repositoryOpts", "repo")
    known = [r for r in releases if r["chart"] == chart and r["repository"] == repository]
    if not known:
        sources = "; ".join(f"{r['chart']} from {r['repository']}" for r in releases) or "none"
        report_violation(
            f"chart: {show(chart)} from repositoryOpts.repo {show(repository)} is not a chart source the program installs (a chart of the "
            f"same name and version from another repository is another chart); allowed: {sources}",
            None,
        )
        return
    values = args.props.get("values")
    notes = {"service.type": " (a LoadBalancer or NodePort in front of the platform)"}
    _check_chart_values("values.", _plain(values) if isinstance(values, Mapping) else {}, chart, known[0], report_violation, notes)
    if get(values, "config", "auth", "oidc") is not None and get(values, "config", "auth", "password", "disabled") is not True:
        report_violation(
            "values.config.auth.password.disabled: not true while single sign-on is configured; allowed: true (with SSO, nobody logs in "
            "with the admin password, which whoever may read the platform's Secrets knows)",
            None,
        )


release_by_design = ResourcePolicy(
    name="helm-release-by-design",
    description=(
        "A Helm release sets only the inputs the program sets (no postrender, no valueYamlFiles), installs a chart the program installs, "
        "from the same repository, and sets only the value paths the program writes for it (e.g. no service.type LoadBalancer, no "
        "admin.password); with single sign-on, password login is disabled."
    ),
    validate=validate_release_values,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


# Fields of an instance's chart entries (loft-sh/loft tag v4.11.2 api/openapi-spec/swagger.json:
# the vcluster chart's storage.v1.VirtualClusterHelmChart, the charts inside the tenant's
# storage.v1.TemplateHelmChart) that the program never sets, and what setting one would do.
_CHART_FIELDS = {
    "insecureSkipTlsVerify": "the chart downloaded without checking the repository's certificate, so anyone on the way serves another chart",
    "username": "credentials for another chart repository than the program's public one",
    "password": "credentials for another chart repository than the program's public one",
    "usernameRef": "credentials for another chart repository than the program's public one",
    "passwordRef": "credentials for another chart repository than the program's public one",
}


def _check_chart_fields(field: str, entry: Mapping[str, Any], recorded: Mapping[str, Any], report_violation: ReportViolation) -> None:
    """A chart entry of an instance sets only the fields the program sets on that chart (`recorded`)."""
    for key in sorted(k for k in entry if k not in recorded["fields"]):
        if _is_set(entry[key]):
            why = f" ({_CHART_FIELDS[key]})" if key in _CHART_FIELDS else ""
            report_violation(
                f"{field}.{key}: is not a field gpu-platform sets on chart {recorded['chart']}{why}; allowed: {', '.join(recorded['fields'])} ({SOURCE})",
                None,
            )


def _recorded_chart(records: list[Mapping[str, Any]], entry: Mapping[str, Any], repository_field: str) -> Mapping[str, Any] | None:
    """The inventory's record of a chart entry's chart from its repository, or None (a source the
    program never installs: vcluster-instance-pinned-charts reports it)."""
    found = [c for c in records if c["chart"] == get(entry, "name") and c["repository"] == get(entry, repository_field)]
    return found[0] if found else None


def validate_instance_charts(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The vcluster chart an instance deploys its virtual cluster with (`spec.template.helmRelease.chart`)
    and each chart it installs inside its tenant (`spec.template.charts[]`) set only the fields the
    program sets on them; the latter's values are only as the program writes them for that chart:
    its value paths, and where a value chooses an image or registry or is a switch the program
    writes one way, exactly the program's. A chart from a source the program never installs is
    vcluster-instance-pinned-charts' to report."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    inventory = _inventory(args) or {}
    release_chart = get(args.props, "spec", "template", "helmRelease", "chart")
    if isinstance(release_chart, Mapping):
        recorded = _recorded_chart(inventory.get("instanceReleaseCharts", []), release_chart, "repo")
        if recorded is not None:
            _check_chart_fields("spec.template.helmRelease.chart", release_chart, recorded, report_violation)
    for i, entry in enumerate(as_list(get(args.props, "spec", "template", "charts"))):
        if not isinstance(entry, Mapping):
            continue
        field = f"spec.template.charts[{i}]"
        recorded = _recorded_chart(inventory.get("tenantCharts", []), entry, "repoURL")
        if recorded is None:
            continue
        _check_chart_fields(field, entry, recorded, report_violation)
        document, problem = read_chart_values(entry.get("values"))
        if problem is not None:
            report_violation(f"{field}.values: {problem}; allowed: the chart's values as one YAML mapping, as gpu-platform writes them", None)
            continue
        _check_chart_values(f"{field}.values ", document, recorded["chart"], recorded, report_violation)


instance_charts_by_design = ResourcePolicy(
    name="instance-charts-by-design",
    description=(
        "A VirtualClusterInstance's vcluster chart and each chart it installs inside its tenant (the GPU Operator) set only the fields "
        "the program sets on them (no insecureSkipTlsVerify, no credentials); the latter only the value paths the program writes for "
        "that chart, a value that chooses an image or registry (repository, image, version, imagePullSecrets, …) and a switch the "
        "program writes one way (driver.enabled: false) only as the program writes them: no driver container, nor one from another "
        "registry, on the team's GPU nodes."
    ),
    validate=validate_instance_charts,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def _objects(props: Mapping[str, Any]) -> list[Any]:
    text = get(props, "spec", "template", "objects")
    if not isinstance(text, str) or not text.strip():
        return []
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _containers(document: Any):
    if isinstance(document, Mapping):
        for key in ("containers", "initContainers", "ephemeralContainers"):
            for container in as_list(document.get(key)):
                yield container
        for value in document.values():
            yield from _containers(value)
    elif is_list(document):
        for value in document:
            yield from _containers(value)


def _is_pod_security_object(document: Any) -> bool:
    key = (get(document, "kind"), get(document, "metadata", "name"))
    return key in {("ValidatingAdmissionPolicy", POD_SECURITY_POLICY), ("ValidatingAdmissionPolicyBinding", POD_SECURITY_POLICY), ("Namespace", "default")}


def _canonical(documents: list[Any]) -> list[str]:
    return sorted(json.dumps(_plain(d), sort_keys=True) for d in documents)


def _check_pod_security(documents: list[Any], field: str, report_violation: ReportViolation) -> None:
    """The Pod Security objects together are one of the sets the program writes, or absent."""
    found = [d for d in documents if _is_pod_security_object(d)]
    if found and _canonical(found) not in [_canonical(s) for s in POD_SECURITY_SETS]:
        names = ", ".join(f"{get(d, 'kind')} {get(d, 'metadata', 'name')}" for d in found)
        report_violation(
            f"{field}: the Pod Security objects ({names}) are not a set gpu-platform writes; allowed: exactly those of "
            "components/tenant_pod_security.py for baseline or restricted (the admission policy failing closed, bound with "
            "Deny, exempting only the product's namespaces), or none (podSecurityStandard: privileged)",
            None,
        )


def _check_rbac_and_access(where: str, document: Any, inventory: Mapping[str, Any], key: tuple, report_violation: ReportViolation) -> None:
    """An in-tenant RBAC object is exactly the one the program makes under its name; a workload's
    pods get exactly the host access and service account the program gives them."""
    if get(document, "kind") in RBAC_KINDS:
        recorded = [r for r in inventory.get("tenantRbac", []) if _object_key(r) == key]
        if _canonical([document]) not in [_canonical([r]) for r in recorded]:
            report_violation(f"{where}: its rules, role or subjects are not the ones gpu-platform grants; allowed: exactly those of {SOURCE}", None)
    access = host_access(_plain(document)) if isinstance(document, Mapping) else None
    allowed = [a for w in inventory.get("tenantWorkloads", []) if tuple(w["object"]) == key for a in w["hostAccess"]]
    if access is not None and access not in allowed:
        report_violation(
            f"{where}: its pods' host access ({_access_summary(access)}) is not what gpu-platform gives them; allowed: "
            f"{' or '.join(_access_summary(a) for a in allowed) or 'none'} ({SOURCE})",
            None,
        )


def _object_key(document: Any) -> tuple:
    meta = get(document, "metadata") or {}
    return (get(document, "apiVersion"), get(document, "kind"), get(meta, "namespace") or "", get(meta, "name"))


def _access_summary(access: Mapping[str, Any]) -> str:
    """The parts of a workload's host access a reviewer looks for first."""
    parts = [k for k in ("hostNetwork", "hostPID", "hostIPC") if access.get(k)]
    privileged = [str(c["name"]) for c in access["containers"] if get(c, "securityContext", "privileged")]
    added = sorted({str(cap) for c in access["containers"] for cap in as_list(get(c, "securityContext", "capabilities", "add"))})
    if privileged:
        parts.append(f"privileged {', '.join(privileged)}")
    if added:
        parts.append(f"adds {', '.join(added)}")
    if access["hostPaths"]:
        parts.append(f"host paths {', '.join(access['hostPaths'])}")
    parts.append(f"service account {access['serviceAccountName']}")
    return ", ".join(parts)


def validate_tenant_objects(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The objects an instance puts inside its tenant are the program's: known (apiVersion, kind,
    namespace, name), namespaces labelled privileged only among the product's, images the
    program's own, RBAC exactly the program's, workloads' pods with exactly the host access the
    program gives them, and the Pod Security objects one of the program's sets (or none)."""
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    inventory = _inventory(args) or {}
    known = {tuple(o) for o in inventory.get("tenantObjects", [])}
    images = set(inventory.get("tenantImages", []))
    field = "spec.template.objects"
    try:
        documents = _objects(args.props)
    except yaml.YAMLError as e:
        report_violation(f"{field}: is not YAML ({str(e).splitlines()[0]}); allowed: the program's in-tenant objects", None)
        return
    for i, d in enumerate(documents):
        meta = get(d, "metadata") or {}
        key = (get(d, "apiVersion"), get(d, "kind"), get(meta, "namespace") or "", get(meta, "name"))
        where = f"{field}[{i}] ({key[1]} {'/'.join(str(p) for p in key[2:] if p)})"
        if key not in known:
            report_violation(f"{where}: is not an object gpu-platform puts inside a tenant; allowed: those of {SOURCE}", None)
        if key[1] == "Namespace" and get(meta, "labels", ENFORCE_LABEL) == "privileged" and key[3] not in PRIVILEGED_NAMESPACES:
            report_violation(
                f"{where}: metadata.labels[{ENFORCE_LABEL!r}]: 'privileged' is not allowed; allowed: only in the namespaces the product "
                f"needs host access in ({', '.join(PRIVILEGED_NAMESPACES)}: components/tenant_pod_security.py)",
                None,
            )
        if key[1] == "ValidatingAdmissionPolicy":
            for expression in as_list(get(d, "spec", "matchConstraints", "namespaceSelector", "matchExpressions")):
                extra = [v for v in as_list(get(expression, "values")) if v not in PRIVILEGED_NAMESPACES]
                if get(expression, "operator") == "NotIn" and extra:
                    report_violation(f"{where}: exempts {extra} from Pod Security; allowed: only {', '.join(PRIVILEGED_NAMESPACES)}", None)
        for container in _containers(d):
            image = get(container, "image")
            if image not in images:
                report_violation(f"{where}: image {show(image)} is not an image gpu-platform runs; allowed: {', '.join(sorted(images)) or 'none'}", None)
        if key in known:
            _check_rbac_and_access(where, d, inventory, key, report_violation)
    _check_pod_security(documents, field, report_violation)


tenant_objects_by_design = ResourcePolicy(
    name="tenant-objects-by-design",
    description=(
        "A VirtualClusterInstance puts only the program's objects inside its tenant: no other object, no namespace labelled "
        "privileged but the product's (GPU Operator, CCM/CSI, …), no Pod Security exemption beyond them, no other image, RBAC "
        "exactly the program's (the GPU watchdog's, the capacity fallback's, the metrics collector's), no workload with more host access than the program "
        "gives it (hostNetwork only for the metrics collector), and Pod Security objects exactly as the program writes them."
    ),
    validate=validate_tenant_objects,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [
    resource_types_by_design,
    commands_by_design,
    kubernetes_rbac_by_design,
    load_balancer_services,
    kubernetes_secrets_by_design,
    node_pool_service_account,
    release_by_design,
    instance_charts_by_design,
    tenant_objects_by_design,
]
