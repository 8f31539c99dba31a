"""Charts by design: the platform's Helm release sets only the inputs the program sets (no
post-renderer, which Helm runs on the deployer's machine, no values files beside `values`), only
value paths the program writes for that chart, and single sign-on only with password login off;
an instance's charts (its vcluster chart, the GPU Operator inside the tenant) only the fields the
program sets on them, and inside tenants only the value paths the program writes for each chart,
with values that choose an image or registry, and switches the program writes one way under every
configuration, exactly as the program writes them. (By value, per stack, the release's values are
guardrails/recorded.py's.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_reader import plain as _plain
from kubernetes_reader import read_chart_values
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from . import value_paths
from .common import HELM_RELEASES, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, as_list, environment_by_stack, get, is_list, is_set, show, show_short
from .inventory import SOURCE, inventory_of as _inventory

# The platform's chart, and the switch that turns its hosted router off (loft-sh/vcluster-docs
# platform_versioned_docs/version-4.11.0/install/helm.mdx "Loft Router", commit
# 0f45a068f4c65baa8df49daef2868bb1644fbf53: "Setting the environment variable DISABLE_LOFT_ROUTER=true").
PLATFORM_CHART = "vcluster-platform"
ROUTER_SWITCH = "DISABLE_LOFT_ROUTER"

# Why a Helm release input the program never sets matters (pulumi-kubernetes tag v4.34.2,
# sdk/python/pulumi_kubernetes/helm/v3/Release.py).
_RELEASE_INPUTS = {
    "postrender": "a command Helm runs on the deployer's machine, with its credentials",
    "valueYamlFiles": "values merged with `values`, beyond the value paths checked here",
    "keyring": "a file of the deployer's machine",
}


def _check_release_inputs(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Only the inputs the program sets on a release of this type, and of its repository options only the fields it sets."""
    allowed = ((_inventory(args) or {}).get("helmReleaseInputs") or {}).get(args.resource_type, [])
    props = args.props
    found = [(name, props[name]) for name in props if name not in allowed]
    repository = props.get("repositoryOpts") if "repositoryOpts" in allowed else None
    if isinstance(repository, Mapping):
        found += [(f"repositoryOpts.{k}", repository[k]) for k in repository if f"repositoryOpts.{k}" not in allowed]
    for name, value in found:
        if is_set(value):
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
    sso = get(values, "config", "auth", "oidc") is not None
    if sso and get(values, "config", "auth", "password", "disabled") is not True:
        report_violation(
            "values.config.auth.password.disabled: not true while single sign-on is configured; allowed: true (with SSO, nobody logs in "
            "with the admin password, which whoever may read the platform's Secrets knows)",
            None,
        )
    if chart == PLATFORM_CHART and get(values, "env", ROUTER_SWITCH) != "true":
        environment, why = environment_by_stack(args.urn, None, "an environment label (a release carries none)", None)
        if environment in (None, "prod") and not sso:
            report_violation(
                f"values.env.{ROUTER_SWITCH}: {show(get(values, 'env', ROUTER_SWITCH))} in prod ({why}) without single sign-on: the "
                "vendor's hosted *.loft.host router would serve the platform's UI and API to anyone on the internet, with password "
                "login; allowed: 'true', or single sign-on admitting named groups (config.auth.oidc with groups, password login "
                "disabled)",
                None,
            )
        elif environment in (None, "prod") and not as_list(get(values, "config", "auth", "oidc", "groups")):
            # loft-sh/loft tag v4.11.2 api/openapi-spec/swagger.json storage.v1.AuthenticationOIDC `groups`: empty admits
            # every account the provider authenticates (config/platform_access.py).
            report_violation(
                f"values.config.auth.oidc.groups: {show(get(values, 'config', 'auth', 'oidc', 'groups'))} in prod ({why}) with the hosted "
                f"*.loft.host router on (values.env.{ROUTER_SWITCH} not 'true'): single sign-on would admit every account of its "
                "identity provider to the platform's UI and API on the internet; allowed: the groups whose members may log in, or "
                f"values.env.{ROUTER_SWITCH}: 'true'",
                None,
            )


release_by_design = ResourcePolicy(
    name="helm-release-by-design",
    description=(
        "A Helm release sets only the inputs the program sets (no postrender, no valueYamlFiles), installs a chart the program installs, "
        "from the same repository, and sets only the value paths the program writes for it (e.g. no service.type LoadBalancer, no "
        "admin.password); with single sign-on, password login is disabled; in prod, the platform's hosted *.loft.host router is off "
        "unless single sign-on is on and admits only named groups."
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
        if is_set(entry[key]):
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

POLICIES = [release_by_design, instance_charts_by_design]
