"""Supply-chain guardrails: every chart and template the platform installs is pinned, so the same
stack deploys the same thing next week: charts by exact version and by repository (a chart of the
same name and version from another repository is another chart; the Helm release's source is
checked by helm-release-by-design), templates by tag or commit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterator

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity
from pulumi_policy.proxy import UnknownValueError

from .common import HELM_RELEASES, INVENTORY, NODE_PROVIDER, VIRTUAL_CLUSTER_INSTANCE, ResourcePolicy, get, is_list, project_of, show, wildcard_problem

# An exact release: 1.2.3 or v1.2.3, optionally -prerelease and +build; no ranges, no wildcards.
_EXACT_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_VERSION_ALLOWED = "allowed: an exact release such as 4.11.2 or v25.10.1 (not empty, '*', 'latest', ranges like ^1, ~1, >=1.0 or wildcards like 1.x)"


def _version_problem(version: Any) -> str | None:
    if isinstance(version, str) and _EXACT_VERSION.match(version.strip()):
        return None
    if version is None or (isinstance(version, str) and not version.strip()):
        return f"is not set, so the newest chart would be installed; {_VERSION_ALLOWED}"
    return f"{version!r} is not an exact version; {_VERSION_ALLOWED}"


def validate_helm_release_version(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in HELM_RELEASES:
        return
    problem = _version_problem(args.props.get("version"))
    if problem:
        report_violation(f"version: {problem}", None)


helm_release_version = ResourcePolicy(
    name="helm-release-pinned-version",
    description="Every Helm release pins an exact chart version.",
    validate=validate_helm_release_version,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)


def validate_instance_chart_versions(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
        return
    template = get(args.props, "spec", "template")
    if template is None and get(args.props, "spec", "templateRef") is not None:
        return  # versions live in the referenced VirtualClusterTemplate
    known = [(c["name"], c["repository"]) for c in INVENTORY.get(project_of(args.urn), {}).get("instanceCharts", [])]
    sources = "; ".join(f"{n} from {r}" for n, r in known) or "none"
    chart = get(template, "helmRelease", "chart")
    problem = _version_problem(get(chart, "version"))
    if problem:
        report_violation(f"spec.template.helmRelease.chart.version (chart {show(get(chart, 'name'))}): {problem}", None)
    if (get(chart, "name"), get(chart, "repo")) not in known:
        report_violation(
            f"spec.template.helmRelease.chart: {show(get(chart, 'name'))} from repo {show(get(chart, 'repo'))} is not a chart source the "
            f"program installs; allowed: {sources}",
            None,
        )
    charts = get(template, "charts")
    for i, entry in enumerate(charts if is_list(charts) else []):
        problem = _version_problem(get(entry, "version"))
        if problem:
            report_violation(f"spec.template.charts[{i}].version (chart {show(get(entry, 'name'))}): {problem}", None)
        if (get(entry, "name"), get(entry, "repoURL")) not in known:
            report_violation(
                f"spec.template.charts[{i}]: {show(get(entry, 'name'))} from repoURL {show(get(entry, 'repoURL'))} is not a chart source "
                f"the program installs; allowed: {sources}",
                None,
            )


instance_chart_versions = ResourcePolicy(
    name="vcluster-instance-pinned-charts",
    description="Every VirtualClusterInstance pins the vcluster chart and every chart it installs to an exact version and to the repository the program installs it from.",
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
    elif is_list(value):
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
        repository = show(git.get("repository"))
        if commit not in (None, "") and not (isinstance(commit, str) and _COMMIT.match(commit)):
            report_violation(f"{path}.commit: {commit!r} ({repository}) is not a full commit; {allowed}", None)
            continue
        if tag not in (None, "") and wildcard_problem(tag) is not None:
            report_violation(f"{path}.tag: {tag!r} ({repository}) is not one tag; {allowed}", None)
            continue
        if commit in (None, "") and tag in (None, ""):
            pinned_by = f"only branch {branch!r}" if branch else "nothing (the default branch)"
            report_violation(f"{path}: {repository} is pinned by {pinned_by}; {allowed}", None)


node_provider_templates = ResourcePolicy(
    name="node-provider-pinned-templates",
    description="Every git source of a NodeProvider's templates pins a tag or a 40-hex commit, never only a branch.",
    validate=validate_node_provider_templates,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
)

POLICIES = [helm_release_version, instance_chart_versions, node_provider_templates]
