"""Resources exactly as the stack's configuration makes them: for the kinds where any other value
is a way around the rest of the pack, the pack holds the stack's record of each resource the
program's run of that stack registers (policy/stacks/<stack>.json `resources`, from `make
policy-data`) and refuses every other value, field by field.

- Host node pools (and the host cluster's own node fields: its default pool, inline pools, node
  auto-provisioning): machine type, counts, kubelet settings, metadata (an SSH key), taints.
- Notification channels: their type and where they send (an outside webhook is another type).
- The showback dataset and its view: the view's query names the billing export it reads, and a
  query over another environment's export reads that environment's costs.
- Restore plans: the one tenant backup plan each restores, its namespace, no transformation rules.
- Backup plans: the namespace each backs up, its schedule (never paused), retention, never
  deactivated, no encryption key of its own (a key in another project is someone else's to revoke).
- Alert policies: their conditions and where they notify: the channels the configuration names, and
  for each channel the program creates (its name is the cloud's), a channel of the stack's project.
- Host namespaces: only the program's (the platform's), with exactly its labels (no Pod Security
  `enforce: privileged`, no namespace such as kube-system relabelled).
- GCP providers: project, region, labels; no impersonation, credentials or endpoints of their own.
- The platform's Helm release values: login (the identity provider, client, redirect), hosted
  router, TLS, identity, license, by value.
- Host RBAC and Services: the CI drift identity's Secrets reader in the platform's namespace, the
  platform's LoadBalancer and its source ranges.

A field the program does not set is refused whatever its value, a zero value (`false`, `0`, `""`)
included, except where the provider's own Check fills in exactly that value as a default: a bridged
Terraform provider applies its schema's `Default`s, zero ones too, before the engine hands the
resource to the pack (pulumi/pulumi-terraform-bridge pkg/tfbridge/schema.go, "populate defaults
from the Terraform schema": any `Default` that is not nil). Those defaults are listed with their
source below (`PROVIDER_DEFAULTS`): `enabled: false` on a channel (the default is true) or
`defaultTableExpirationMs: 0` on a dataset (no default) is refused where the program sets neither. Where the program's own run cannot know a value
(a name the cloud assigns, recorded as null), the value must have the form `COMPUTED` gives it. The
engine also adds the provider's `version` to a provider's inputs (pulumi/pulumi
pkg/resource/deploy/providers/registry.go SetProviderVersion, commit 1b5949891b3c): it must be the
version the program pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import DATA, GKE_CLUSTER, GKE_NODE_POOL, HELM_RELEASES, STACKS, ResourcePolicy, get, is_list, is_set, plain, show_short, stack_data, stack_of, unknown_stack

GCP_PROVIDER = "pulumi:providers:gcp"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
NOTIFICATION_CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
DATASET = "gcp:bigquery/dataset:Dataset"
TABLE = "gcp:bigquery/table:Table"
RESTORE_PLAN = "gcp:gkebackup/restorePlan:RestorePlan"
BACKUP_PLAN = "gcp:gkebackup/backupPlan:BackupPlan"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE = "kubernetes:core/v1:Service"
RBAC_TYPES = tuple(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}" for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"))
# The provider versions the program pins (program_data.json, from its installed SDKs).
PROVIDER_VERSIONS: Mapping[str, str] = DATA["providerVersions"]
SOURCE = "policy/stacks/<stack>.json (make policy-data)"


@dataclass(frozen=True)
class Spec:
    """How one kind is recorded and matched: `key`, the field naming one resource of the kind (None:
    the stack's resources of the kind are compared as a set); `fields`, the fields judged (None:
    all); `ignored`, fields another policy judges."""

    label: str
    key: tuple[str, ...] | None
    fields: tuple[str, ...] | None = None
    ignored: tuple[str, ...] = ()


SPECS: dict[str, Spec] = {
    GKE_NODE_POOL: Spec("node pool", ("name",)),
    # The cluster's node shape only: the other fields have policies of their own.
    GKE_CLUSTER: Spec("cluster", ("name",), ("nodeConfig", "initialNodeCount", "nodePools", "clusterAutoscaling", "nodePoolDefaults", "nodePoolAutoConfig")),
    NOTIFICATION_CHANNEL: Spec("notification channel", ("displayName",)),
    DATASET: Spec("dataset", ("datasetId",)),
    TABLE: Spec("table", ("tableId",)),
    RESTORE_PLAN: Spec("restore plan", ("name",)),
    BACKUP_PLAN: Spec("backup plan", ("name",)),
    ALERT_POLICY: Spec("alert policy", ("displayName",)),
    NAMESPACE: Spec("namespace", ("metadata", "name")),
    GCP_PROVIDER: Spec("GCP provider", None),
    # The kubeconfig is kubernetes-providers-by-design's (its form) and kubernetes-providers-own-cluster's (its server).
    KUBERNETES_PROVIDER: Spec("Kubernetes provider", None, ignored=("kubeconfig",)),
    # The release's other inputs, chart and value paths are helm-release-by-design's.
    **{t: Spec("Helm release", ("name",), ("values",)) for t in HELM_RELEASES},
    SERVICE: Spec("Service", ("metadata", "name")),
    **{t: Spec(t.rsplit(":", 1)[-1], ("metadata", "name")) for t in RBAC_TYPES},
}

# Defaults a bridged provider's Check fills in where the program sets nothing, per kind: path (`[]`
# stands for any index) → value. Every `Default:` of the fields judged, zero ones included, read
# from hashicorp/terraform-provider-google tag v7.9.0 (commit 34da6e75d778be372149429e8eed085049906b08),
# google/services/…: container/resource_container_node_pool.go (upgrade_settings.strategy,
# management.auto_repair and auto_upgrade), container/node_config.go (preemptible, spot,
# shielded_instance_config.enable_secure_boot and enable_integrity_monitoring),
# monitoring/resource_monitoring_notification_channel.go (enabled, force_delete),
# monitoring/resource_monitoring_alert_policy.go (enabled, documentation.mime_type),
# bigquery/resource_bigquery_table.go (deletion_protection, ignore_auto_generated_schema),
# bigquery/resource_bigquery_dataset.go (location, delete_contents_on_destroy), google/provider/
# provider.go (add_terraform_attribution_label). The defaults of blocks the program never writes
# (windows_node_config, cluster_autoscaling, external_data_configuration, materialized_view, …) are
# left out: such a block is refused whole. gkebackup's backup and restore plans have none.
_NODE_CONFIG_DEFAULTS = {
    "preemptible": False,
    "spot": False,
    "shieldedInstanceConfig.enableSecureBoot": False,
    "shieldedInstanceConfig.enableIntegrityMonitoring": True,
}
_NODE_DEFAULTS = {f"nodeConfig.{k}": v for k, v in _NODE_CONFIG_DEFAULTS.items()}
PROVIDER_DEFAULTS: dict[str, dict[str, Any]] = {
    GKE_NODE_POOL: {"upgradeSettings.strategy": "SURGE", "management.autoRepair": True, "management.autoUpgrade": True, **_NODE_DEFAULTS},
    GKE_CLUSTER: dict(_NODE_DEFAULTS),
    NOTIFICATION_CHANNEL: {"enabled": True, "forceDelete": False},
    ALERT_POLICY: {"enabled": True, "documentation.mimeType": "text/markdown"},
    TABLE: {"deletionProtection": True, "ignoreAutoGeneratedSchema": False},
    DATASET: {"location": "US", "deleteContentsOnDestroy": False},
    GCP_PROVIDER: {"addTerraformAttributionLabel": True},
}

# Values the program's run cannot know (recorded as null), per kind: path → the form the real value
# has, `{project}` the stack's project. An alert policy notifies each channel the program creates by
# its name, which Cloud Monitoring assigns: projects/<project>/notificationChannels/<id>
# (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels, `name`).
COMPUTED: dict[str, dict[str, str]] = {
    ALERT_POLICY: {"notificationChannels[]": "projects/{project}/notificationChannels/{id}"},
}


def recorded_form(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What the record keeps of a resource's inputs (tools/policy_data.py writes these)."""
    spec = SPECS[resource_type]
    key = spec.key[0] if spec.key else None
    kept = {k: v for k, v in inputs.items() if (spec.fields is None or k in spec.fields or k == key) and k not in spec.ignored}
    return json.loads(json.dumps(kept, sort_keys=True))


def _path(parent: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if re.fullmatch(r"[A-Za-z0-9_-]+", str(key)):
        return f"{parent}.{key}" if parent else str(key)
    return f'{parent}["{key}"]'


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _pattern(path: str) -> str:
    """A path with its list indices as `[]`, the form PROVIDER_DEFAULTS and COMPUTED key by."""
    return re.sub(r"\[[0-9]+\]", "[]", path)


@dataclass(frozen=True)
class Rules:
    """What a kind's record admits beside its values: the provider's defaults and the computed forms."""

    defaults: Mapping[str, Any]
    computed: Mapping[str, str]
    project: str

    def excused(self, path: str, value: Any) -> bool:
        """Whether a value the record does not have is only what the provider's Check fills in (an
        empty map or list: nothing)."""
        if isinstance(value, Mapping):
            return all(self.excused(_path(path, k), v) for k, v in value.items())
        if is_list(value):
            return all(self.excused(_path(path, i), v) for i, v in enumerate(value))
        key = _pattern(path)
        return value is None or (key in self.defaults and _same(value, self.defaults[key]))

    def computed_form(self, path: str) -> Computed | None:
        form = self.computed.get(_pattern(path))
        if form is None:
            return None
        pattern = re.escape(form).replace(re.escape("{project}"), re.escape(self.project)).replace(re.escape("{id}"), "[0-9]+")
        return Computed(form.replace("{project}", self.project).replace("{id}", "<id>"), pattern)

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
        if is_set(wanted):
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
    spec = SPECS[resource_type]
    key = spec.key[0] if spec.key else None
    kept = plain({k: props[k] for k in props if (spec.fields is None or k in spec.fields or k == key) and k not in spec.ignored and k != "version"})
    out: list[tuple[str, Any, Any]] = []
    _diff("", kept, dict(recorded), rules_of(resource_type, project), out)
    return out


def rules_of(resource_type: str, project: str = "") -> Rules:
    return Rules(PROVIDER_DEFAULTS.get(resource_type, {}), COMPUTED.get(resource_type, {}), project)


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
    if spec is None:
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
    found = min((differences(args.resource_type, args.props, r, project) for r in candidates), key=len)
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
    if isinstance(value, str) and isinstance(wanted, str) and max(len(value), len(wanted)) > width:
        start = max(0, next((i for i, (a, b) in enumerate(zip(value, wanted)) if a != b), min(len(value), len(wanted))) - 40)
        return tuple(repr(("…" if start else "") + s[start : start + width] + ("…" if len(s) > start + width else "")) for s in (value, wanted))  # type: ignore[return-value]
    return tuple(_cut(repr(_numbers(v)) if not isinstance(v, bool) else str(v).lower(), width) for v in (value, wanted))  # type: ignore[return-value]


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
