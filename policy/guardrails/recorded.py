"""Resources exactly as the stack's configuration makes them: the pack holds the stack's record of
each resource the program's run of that stack registers (policy/stacks/<stack>.json `resources`,
from `make policy-data`) and refuses every other value, field by field, for every kind the program
makes but those another policy holds by value (a Secret: kubernetes-secrets-by-design) or that
nobody needs to hold (a dashboard, a component: docs/guardrails.md "What is held exactly"):

- Host node pools and the host cluster, every field (its node shape, network, datapath, release
  channel, authorized networks, …).
- Networks, subnetworks, routers, Cloud NAT, NAT addresses and firewall rules (direction, source
  and destination ranges, tags, service accounts, protocols and ports, priority, network,
  disabled, logging), a team stack's in its own record.
- Team projects (folder, billing account), APIs, service accounts, custom roles and IAM members
  (their conditions' every field), reservations (whom they are shared with).
- Notification channels, alert policies, the metrics scope, the showback dataset and its view.
- Backup and restore plans: the one tenant namespace each backs up or restores, never paused,
  deactivated or rewritten.
- Host namespaces, the platform's Helm release (every input: its namespace, chart, values by value),
  NodeProviders (node types, templates), platform Projects and VirtualClusterInstances (their
  vcluster.yaml, the charts and objects they put inside the tenant, by value: guardrails/recorded_forms.py).
- Local commands (scripts, logging, triggers; their environment is commands-by-design's) and the
  providers: GCP and Kubernetes (their inputs beside the kubeconfig), the command provider the
  engine makes by default (nothing but its version).
- Host RBAC and Services: the CI drift identity's Secrets reader in the platform's namespace, the
  platform's LoadBalancer and its source ranges (host-rbac-by-design, load-balancer-services-by-design).

A field the program does not set is refused whatever its value, a zero value (`false`, `0`, `""`)
included, except where the provider's own Check fills in exactly that value as a default: a bridged
Terraform provider applies its schema's `Default`s, zero ones too, before the engine hands the
resource to the pack (pulumi/pulumi-terraform-bridge pkg/tfbridge/schema.go, "populate defaults
from the Terraform schema": any `Default` that is not nil). Those defaults are listed with their
source in guardrails/recorded_kinds.py (`PROVIDER_DEFAULTS`): `enabled: false` on a channel (the default is true) or
`defaultTableExpirationMs: 0` on a dataset (no default) is refused where the program sets neither.
A Helm release's Check hands every field of its Release type over, the unset ones at their zero
value, and drops what is not one (`compat`): there a zero value is the field unset. Where the
program's own run cannot know a value (a name or an address the cloud assigns, recorded as null),
the value must have the form `COMPUTED` gives it. The engine also adds the provider's `version` to a
provider's inputs (pulumi/pulumi pkg/resource/deploy/providers/registry.go SetProviderVersion,
commit 1b5949891b3c): it must be the version the program pins.

Only the program's stacks are judged here; the bootstrap's resources are held by its own data
(iam-grants-by-design, custom-role-least-privilege, ci-federation-trust), and a resource of a
Pulumi project the data does not know at all is resource-types-by-design's to refuse.

What a provider's Check adds beside the defaults is left out of the comparison: the bridge's
`__defaults` bookkeeping at every depth (`_without_internal_keys`). A recorded value left out is
refused, zero values included, but for an empty map or list (nothing to miss).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from . import recorded_forms as forms
from .common import (
    PROGRAM_PROJECT,
    STACKS,
    ResourcePolicy,
    get,
    is_list,
    is_set,
    plain,
    project_of,
    show_short,
    stack_data,
    stack_of,
    unknown_stack,
)

# The kinds and what each admits beside the record (re-exported: tools/ and the pack read them here).
from .recorded_kinds import (  # noqa: F401
    GCP_PROVIDER,
    KUBERNETES_PROVIDER,
    NOTIFICATION_CHANNEL,
    DATASET,
    TABLE,
    RESTORE_PLAN,
    BACKUP_PLAN,
    ALERT_POLICY,
    NAMESPACE,
    SERVICE,
    RBAC_TYPES,
    NETWORK,
    SUBNETWORK,
    ROUTER,
    ROUTER_NAT,
    RESERVATION,
    API_SERVICE,
    SERVICE_ACCOUNT,
    MONITORED_PROJECT,
    IAM_MEMBERS,
    COMMAND,
    COMMAND_PROVIDER,
    PROVIDER_VERSIONS,
    SOURCE,
    Spec,
    SPECS,
    PROVIDER_DEFAULTS,
    COMPUTED,
    _FORMS,
)


def _compared(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a resource the record keeps, as they are compared: documents held as text read
    (Spec.read), long texts by digest (guardrails/recorded_forms.py), as JSON has them."""
    spec = SPECS[resource_type]
    key = spec.key[0] if spec.key else None
    provider = resource_type in PROVIDER_VERSIONS
    kept = {
        k: _without_internal_keys(plain(inputs[k]))
        for k in inputs
        if (spec.fields is None or k in spec.fields or k == key) and k not in spec.ignored and not (provider and k == "version")
    }
    if spec.read is not None:
        kept = spec.read(kept)
    return json.loads(json.dumps(forms.digested(kept), sort_keys=True, default=str))


def _without_internal_keys(value: Any) -> Any:
    """`value` without the bridge's bookkeeping keys at any depth: a bridged provider's Check writes
    `__defaults` (the fields it filled in) into every object of the inputs (pulumi/pulumi-terraform-bridge
    pkg/tfbridge/schema.go `applyDefaults`, `reservedkeys.Defaults`), and the engine strips only the
    top-level ones before the analyzer sees them (pulumi/pulumi sdk/go/common/resource/plugin/rpc.go
    `SkipInternalKeys`: "Only skip top level internal keys"). No field of any kind starts with `__`."""
    if isinstance(value, Mapping):
        return {k: _without_internal_keys(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("__"))}
    if is_list(value):
        return [_without_internal_keys(v) for v in value]
    return value


def recorded_form(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What the record keeps of a resource's inputs (tools/policy_data.py writes these)."""
    return _compared(resource_type, inputs)


def _path(parent: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if re.fullmatch(r"[A-Za-z0-9_-]+", str(key)):
        return f"{parent}.{key}" if parent else str(key)
    return f'{parent}["{key}"]'


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def field_path(parent: str, key: Any) -> str:
    """The path of `key` under `parent`, as refusals name it (`a.b[0]["c d"]`)."""
    return _path(parent, key)


def path_pattern(path: str) -> str:
    """A path with its list indices as `[]`, the form PROVIDER_DEFAULTS and COMPUTED key by."""
    return _pattern(path)


def _release_field(path: str) -> bool:
    """A Helm Release's own field (`namespace`, `skipCrds`) or one of its `repositoryOpts`, which its
    Check hands over at their zero value when unset."""
    return "." not in path and "[" not in path or (path.startswith("repositoryOpts.") and path.count(".") == 1)


def _pattern(path: str) -> str:
    """A path with its list indices as `[]`, the form PROVIDER_DEFAULTS and COMPUTED key by."""
    return re.sub(r"\[[0-9]+\]", "[]", path)


@dataclass(frozen=True)
class Rules:
    """What a kind's record admits beside its values: the provider's defaults and the computed forms."""

    defaults: Mapping[str, Any]
    computed: Mapping[str, str]
    project: str
    zero_unset: bool = False

    def excused(self, path: str, value: Any, element: bool = False) -> bool:
        """Whether a value the record does not have is only what the provider's Check fills in: an
        empty map or list is nothing, but not as an element of a list (`[{}]` is one rule, selector
        or peer that matches everything); with `zero_unset`, a zero value of a top-level field (the
        Release type's own fields, not what its `values` hold, where a `false` turns a chart's
        default off)."""
        if isinstance(value, Mapping):
            return not (element and not value) and all(self.excused(_path(path, k), v) for k, v in value.items())
        if is_list(value):
            return all(self.excused(_path(path, i), v, element=True) for i, v in enumerate(value))
        key = _pattern(path)
        if value is None and not element:
            return True
        if self.zero_unset and not is_set(value) and _release_field(path):
            return True
        return key in self.defaults and _same(value, self.defaults[key])

    def computed_form(self, path: str) -> Computed | None:
        form = self.computed.get(_pattern(path))
        if form is None:
            return None
        shown, pattern = form, re.escape(form)
        for name, replacement in _FORMS.items():
            text, regex = replacement or (self.project, re.escape(self.project))
            shown, pattern = shown.replace(name, text), pattern.replace(re.escape(name), regex)
        return Computed(shown, pattern)

    def default(self, path: str) -> Any:
        return self.defaults.get(_pattern(path))


def _diff(path: str, found: Any, wanted: Any, rules: Rules, out: list[tuple[str, Any, Any]]) -> None:
    if _same(found, wanted):
        return
    if wanted is None:
        form = rules.computed_form(path)
        if form is not None:  # a value the program's run cannot know: its form
            if not (isinstance(found, str) and re.fullmatch(form.pattern, found)):
                out.append((path, found, form))
        elif not rules.excused(path, found):
            out.append((path, found, None))  # wanted: not set
    elif found is None:
        # A recorded zero value left out is refused too: in a document (a vcluster.yaml, a chart's
        # values) the chart's own default then applies (`driver.enabled` of the GPU Operator is
        # true), and a provider's Check hands back what the program sent. Only an empty map or list
        # the record has is nothing to miss.
        if not (isinstance(wanted, Mapping) or is_list(wanted)) or wanted:
            out.append((path, None, wanted))
    elif isinstance(found, Mapping) and isinstance(wanted, Mapping):
        for key in [*found, *(k for k in wanted if k not in found)]:
            _diff(_path(path, key), found.get(key), wanted.get(key), rules, out)
    elif is_list(found) and is_list(wanted) and len(found) == len(wanted):
        for i, (f, w) in enumerate(zip(found, wanted)):
            _diff(_path(path, i), f, w, rules, out)
    else:
        out.append((path, found, wanted))


@dataclass(frozen=True)
class Computed:
    """A recorded value the cloud assigns: any value of this form (as shown; `pattern` matches it)."""

    form: str
    pattern: str


def differences(resource_type: str, props: Mapping[str, Any], recorded: Mapping[str, Any], project: str = "") -> list[tuple[str, Any, Any]]:
    """(path, value or None, the recorded value, None or a Computed form) for each place `props` (as
    the record keeps them) differs from the recorded resource: a value the record does not have
    (reported where it starts, unless it is only the provider's defaults), a recorded value it
    lacks, another value. `project`: the stack's, for the computed forms."""
    return _differences(resource_type, _compared(resource_type, props), recorded, project)


def _differences(resource_type: str, compared: Mapping[str, Any], recorded: Mapping[str, Any], project: str) -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    _diff("", dict(compared), dict(recorded), rules_of(resource_type, project), out)
    return out


def rules_of(resource_type: str, project: str = "") -> Rules:
    return Rules(PROVIDER_DEFAULTS.get(resource_type, {}), COMPUTED.get(resource_type, {}), project, SPECS[resource_type].zero_unset)


def _key(spec: Spec, document: Mapping[str, Any]) -> Any:
    return get(document, *spec.key) if spec.key else None


def _brought_by_team_stacks(environment_stack: str, stack: Mapping[str, Any], resource_type: str) -> list[Mapping[str, Any]]:
    """The resources of `resource_type` an environment stack makes for its team stacks (a team's
    pool-at-limit alert policy): recorded in each team stack's record (`environmentResources`, so that
    adding a team changes its own file only), and, while the offline plan judges a stack as it is
    now, in its fresh entry (`teamStackResources`, tools/plan.py)."""
    found = [r for team in (stack.get("teamStackResources") or {}).values() for r in team.get(resource_type, [])]
    for record in STACKS.values():
        reference = record.get("environmentStackReference")
        if reference and str(reference).split("/")[-1] == environment_stack:
            found += (record.get("environmentResources") or {}).get(resource_type, [])
    return found


def _version_problem(args: ResourceValidationArgs) -> str | None:
    if args.resource_type not in PROVIDER_VERSIONS or "version" not in args.props:
        return None
    version, pinned = args.props["version"], PROVIDER_VERSIONS[args.resource_type]
    if version == pinned:
        return None
    return f"version: {show_short(version)} is not the provider version gpu-platform pins; allowed: {pinned!r} (requirements.txt)"


def judge(args: ResourceValidationArgs, report_violation: ReportViolation) -> bool:
    """Report each way a resource of a recorded kind differs from the stack's record; False for a
    resource of another kind."""
    spec = SPECS.get(args.resource_type)
    if spec is None or project_of(args.urn) != PROGRAM_PROJECT:
        return False
    stack = stack_data(args.urn)
    if stack is None:
        report_violation(unknown_stack(args.urn), None)
        return True
    problem = _version_problem(args)
    if problem:
        report_violation(problem, None)
    records = [*(stack.get("resources") or {}).get(args.resource_type, []), *_brought_by_team_stacks(stack_of(args.urn), stack, args.resource_type)]
    key = _key(spec, args.props)
    candidates = [r for r in records if spec.key is None or _key(spec, r) == key]
    where = f"stack {stack_of(args.urn)}"
    if not candidates:
        names = ", ".join(sorted(repr(_key(spec, r)) for r in records))
        field = ".".join(spec.key) if spec.key else "type"
        report_violation(
            f"{field}: {show_short(key if spec.key else args.resource_type)} is not a {spec.label} {where}'s configuration makes; allowed: "
            f"{names or 'none'} ({SOURCE}: a {spec.label} the program makes for this stack flows in when the data is regenerated)",
            None,
        )
        return True
    project = str(stack.get("project") or "")
    rules = rules_of(args.resource_type, project)
    compared = _compared(args.resource_type, args.props)
    found = min((_differences(args.resource_type, compared, r, project) for r in candidates), key=len)
    for path, value, wanted in found:
        shown_value, shown_wanted = shown_pair(value, wanted if not isinstance(wanted, Computed) else None)
        got = "not set" if value is None else f"{shown_value} is not what {where}'s configuration sets"
        allowed = "not set" if wanted is None else shown_wanted
        if wanted is None and rules.default(path) is not None:
            allowed = f"not set, or {shown_pair(rules.default(path), None)[0]} (the provider's default)"
        if isinstance(wanted, Computed):
            allowed = f"{wanted.form} (what the program creates there, named by the cloud)"
        report_violation(f"{path}: {got}; allowed: {allowed} ({SOURCE})", None)
    return True


def _numbers(value: Any) -> Any:
    """Whole numbers as the stack file writes them (the analyzer's protobuf makes every number a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _numbers(v) for k, v in value.items()}
    if is_list(value):
        return [_numbers(v) for v in value]
    return value


def shown_pair(value: Any, wanted: Any, width: int = 160) -> tuple[str, str]:
    """Both values as a reader compares them: short ones whole, two long texts around where they
    first differ (a view's query, a kubeconfig), anything else cut at `width`."""
    if forms.is_digest(value) or forms.is_digest(wanted):
        return tuple(_text_shown(v, width) for v in (value, wanted))  # type: ignore[return-value]
    if isinstance(value, str) and isinstance(wanted, str) and max(len(value), len(wanted)) > width:
        start = max(0, next((i for i, (a, b) in enumerate(zip(value, wanted)) if a != b), min(len(value), len(wanted))) - 40)
        return tuple(repr(("…" if start else "") + s[start : start + width] + ("…" if len(s) > start + width else "")) for s in (value, wanted))  # type: ignore[return-value]
    return tuple(_cut(repr(_numbers(v)) if not isinstance(v, bool) else str(v).lower(), width) for v in (value, wanted))  # type: ignore[return-value]


def _text_shown(value: Any, width: int) -> str:
    """A long text by its digest, as the record keeps it: `a text of 48701 characters (sha256 3f2a…)`."""
    match = re.fullmatch(r"sha256:([0-9a-f]{12})[0-9a-f]* \(([0-9]+) characters\)", value) if isinstance(value, str) else None
    if match:
        return f"a text of {match.group(2)} characters (sha256 {match.group(1)}…)"
    return _cut(repr(_numbers(value)) if not isinstance(value, bool) else str(value).lower(), width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def validate_recorded(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type in (SERVICE, *RBAC_TYPES):
        return  # load-balancer-services-by-design's and host-rbac-by-design's
    judge(args, report_violation)


stack_resources_by_record = ResourcePolicy(
    name="stack-resources-by-record",
    description=(
        "Host node pools (and the cluster's node shape), notification channels, alert policies, the showback dataset and view, "
        "backup and restore plans, host namespaces, GCP and Kubernetes providers and the platform's Helm values exactly as the "
        "stack's configuration makes them (policy/stacks/<stack>.json): no other machine, kubelet setting or SSH key, no webhook "
        "channel, no alert to another project's channel, no view over another export, no paused or deactivated backup, no "
        "restore rules or other team's backup, no privileged namespace, no impersonation, no other identity provider; a value "
        "the program does not set only where the provider's own default is that value."
    ),
    validate=validate_recorded,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [stack_resources_by_record]
