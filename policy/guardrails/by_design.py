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
- Host RBAC and Services: exactly the objects the program makes for this stack (guardrails/recorded.py:
  the CI drift identity's Secrets reader in the platform's namespace, the platform's LoadBalancer).
- Node pools run as the host nodes' own service account (without one, GKE runs them as the
  Compute Engine default account, which holds Editor on the project).
- Helm releases and the charts of instances: guardrails/charts.py; objects inside tenants:
  guardrails/in_tenant.py.
- Kubernetes Secrets: exactly the program's (namespace, name, type, keys): any other sits in the
  stack's state, which whoever may read the stack decrypts, previews included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_reader import secret_shape
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from . import kubeconfigs, recorded
from .charts import instance_charts_by_design, release_by_design
from .common import (
    GKE_CLUSTER,
    GKE_NODE_POOL,
    INVENTORY,
    KUBERNETES_SECRET,
    ResourcePolicy,
    as_list,
    get,
    project_of,
    show,
    stack_data,
    unknown_stack,
)
from .in_tenant import tenant_objects_by_design
from .inventory import SOURCE, inventory_of as _inventory

COMMAND_PREFIX = "command:"
# The inputs of a local command the program may set (pulumi-command local.Command); any other
# (interpreter, dir, stdin, assetPaths, …) changes what runs.
COMMAND_INPUTS = ("create", "update", "delete", "environment", "triggers", "logging")

def validate_resource_types(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    inventory = _inventory(args)
    if inventory is None:
        # A Pulumi project the data does not know (Pulumi.yaml's `name` changed on a branch): none of
        # its resources is recorded, so none is admitted. The policy group names the stacks it
        # enforces on by project too (bootstrap/pulumi_cloud.py), so this holds where the pack is
        # run by hand or enabled for more stacks.
        report_violation(
            f"project {project_of(args.urn)!r} is not a Pulumi project the pack records; allowed: {', '.join(sorted(INVENTORY))} "
            f"({SOURCE}: the program's `name` in Pulumi.yaml and the bootstrap's)",
            None,
        )
        return
    if args.resource_type in inventory["resourceTypes"]:
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


def validate_kubernetes_rbac(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Host RBAC is exactly what the stack's configuration makes (guardrails/recorded.py): today the
    CI drift identity's reader of the Secrets of the platform's namespace, a Role and its RoleBinding
    there, bound to that stack's drift identity; anything else (a ClusterRoleBinding, another
    subject, verb or namespace) is refused field by field."""
    if args.resource_type in recorded.RBAC_TYPES:
        recorded.judge(args, report_violation)


kubernetes_rbac_by_design = ResourcePolicy(
    name="host-rbac-by-design",
    description=(
        "Host RBAC (ClusterRole, ClusterRoleBinding, Role, RoleBinding) only exactly as the stack's configuration makes it: the CI "
        "drift identity's Secrets reader in the platform's namespace, nothing cluster-wide."
    ),
    validate=validate_kubernetes_rbac,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)


def validate_services(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A host Service is exactly one the stack's configuration makes (the platform's LoadBalancer
    for publicHost, with its source ranges): a Service's type, ports, selector and ranges decide
    who reaches which pods from where (guardrails/recorded.py)."""
    if args.resource_type == recorded.SERVICE:
        recorded.judge(args, report_violation)


load_balancer_services = ResourcePolicy(
    name="load-balancer-services-by-design",
    description=(
        "Host Services only exactly as the stack's configuration makes them: the platform's LoadBalancer for publicHost, admitting "
        "publicSourceRanges only (control planes get theirs from the vcluster chart)."
    ),
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
