"""What the program registers, read from its mock runs (tools/mock_engine.py): the resource types,
the commands it runs, the charts and Helm values it installs, the objects it puts inside tenants
(per stack, the exact identities its grants name: tools/stack_identities.py). tools/policy_data.py writes these into
policy/program_data.json, so the policy pack allows exactly what the program makes, and a type or
command another change adds flows in with `make policy-data` (a test fails until it does).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any, Iterable

import yaml

from config import node_properties as props
from policy.kubernetes_reader import LOADER, entries, read_chart_values, read_kubeconfig, secret_shape
from tools.mock_engine import PLACEHOLDER, ProgramRun, Registration

COMMAND = "command:local:Command"
RELEASE = "kubernetes:helm.sh/v3:Release"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
# Kubernetes kinds whose every instance the pack compares with what the program makes.
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
# The engine analyses every registered resource, the stack itself and the providers included
# (pulumi/pulumi pkg/resource/deploy/step_generator.go, continueStepsFromImport: "Send the resource
# off to any Analyzers", for every goal, read at commit 00285a9b6248a4a7606fd8eb3d3485f7c2e5de12);
# default providers (command's, here) are registered by the engine, not by the program.
STACK_TYPE = "pulumi:pulumi:Stack"
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"


def resource_types(runs: Iterable[ProgramRun], *, references: bool = False) -> list[str]:
    """Every type the runs register, the providers of their packages, the stack (and, for a project
    with team stacks, the StackReference they read their environment with)."""
    found = {STACK_TYPE}
    if references:
        found.add(STACK_REFERENCE_TYPE)
    for run in runs:
        for r in run.registrations:
            found.add(r.type)
            package = r.type.split(":", 1)[0]
            if r.custom and package not in ("pulumi",):
                found.add(f"pulumi:providers:{package}")
    return sorted(found)


def commands(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Each distinct local command: its scripts, the names of the environment it gets, and the form
    of each of those values (`environmentForms`: see environment_form)."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run.of_type(COMMAND):
            inputs = r.plain_inputs
            environment = inputs.get("environment") or {}
            entry = {
                "create": inputs.get("create"),
                "update": inputs.get("update"),
                "delete": inputs.get("delete"),
                "environment": sorted(environment),
                "environmentForms": {name: environment_form(r, name, environment[name]) for name in sorted(environment)},
            }
            found[repr(sorted(entry.items()))] = entry
    return [found[k] for k in sorted(found)]


def environment_form(r: Registration, name: str, value: Any) -> Any:
    """What the pack requires of an environment value: "kubeconfig" (of the form `kubeconfigs`
    records, for the stack's own cluster), or {"equals": the value} for a constant. A value the
    cloud computes (a mock placeholder in it) has no form yet: say which, rather than pin a placeholder."""
    document, _ = read_kubeconfig(value)
    if document is not None:
        return "kubeconfig"
    if PLACEHOLDER in str(value):
        raise ValueError(
            f"{r.name}: environment {name} is computed by the cloud ({value!r}) and is no kubeconfig: give it a form in "
            "tools/program_inventory.py environment_form and policy/guardrails/by_design.py validate_commands"
        )
    return {"equals": value}


def kubeconfigs(runs: Iterable[ProgramRun]) -> dict[str, Any]:
    """The form of every kubeconfig the program passes on, a Kubernetes provider's `kubeconfig` and
    a command's environment (components/kubeconfig.py writes them all): the fields it sets at each
    level, and each user's exec plugin whole. The server is the cluster's DNS endpoint, which the
    cloud names (the pack checks its form against the stack's host cluster)."""
    documents = []
    for run in runs:
        for r in run.registrations:
            if r.type == KUBERNETES_PROVIDER:
                values = [r.input("kubeconfig")]
            elif r.type == COMMAND:
                values = list((r.input("environment") or {}).values())
            else:
                continue
            documents += [d for d, _ in map(read_kubeconfig, values) if d is not None]
    keys: dict[str, set[str]] = {"keys": set(), "clusterKeys": set(), "userKeys": set(), "contextKeys": set()}
    execs: dict[str, Any] = {}
    for document in documents:
        keys["keys"] |= set(document)
        for section, field in (("clusters", "clusterKeys"), ("users", "userKeys"), ("contexts", "contextKeys")):
            for _, _, body in entries(document, section):
                keys[field] |= set(body)
        for _, _, user in entries(document, "users"):
            if "exec" in user:
                execs[json.dumps(user["exec"], sort_keys=True)] = user["exec"]
    return {**{k: sorted(v) for k, v in keys.items()}, "exec": [execs[k] for k in sorted(execs)]}


def helm_release_inputs(runs: Iterable[ProgramRun]) -> dict[str, list[str]]:
    """Per Helm release type, every input the program sets on one (`repositoryOpts.<field>` for the
    fields of its repository options): the pack rejects any other, e.g. a post-renderer or values
    files beside `values`."""
    found: dict[str, set[str]] = {}
    for run in runs:
        for r in run.of_type(RELEASE):
            inputs = r.plain_inputs
            names = found.setdefault(r.type, set())
            names |= set(inputs)
            names |= {f"repositoryOpts.{k}" for k in inputs.get("repositoryOpts") or {}}
    return {t: sorted(names) for t, names in sorted(found.items())}


def kubernetes_secrets(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Every Secret the program makes on a host cluster, as the pack compares them
    (policy/kubernetes_reader.py secret_shape: namespace, name, type and every field whole, of its
    data only the keys): the license's, with the option that sets one."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run.of_type(SECRET):
            shape = secret_shape(r.plain_inputs)
            found[json.dumps(shape, sort_keys=True)] = shape
    return [found[k] for k in sorted(found)]


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# Chart value keys that choose which image runs or where it is pulled from: under every operand of
# the GPU Operator chart `repository`, `image`, `version` and `imagePullSecrets` (the driver's
# manager and the operator's init container alike), NFD's `image.repository`/`image.tag` and its
# `imagePullSecrets`, the Kata artifacts' `url` and `pullSecret` (NVIDIA/gpu-operator tag v25.10.1,
# deployments/gpu-operator/values.yaml and charts/node-feature-discovery/values.yaml, recorded
# under config/charts/), and the driver's package mirror `repoConfig`; `registry` and `digest`
# as other charts spell the same. A path through one of these keys is pinned to the values the
# program writes there, not only allowed.
IMAGE_KEYS = frozenset({"repository", "image", "version", "tag", "digest", "registry", "imagePullSecrets", "pullSecret", "url", "repoConfig"})


def _leaves(document: Any, prefix: str = "", image: bool = False) -> Iterable[tuple[str, Any, bool]]:
    """(key path in the allow-list syntax of the pack, value, whether a key on the way is one of
    IMAGE_KEYS) of every scalar, empty map and empty list of a document."""
    if isinstance(document, dict) and document:
        for key, child in document.items():
            key = str(key)
            step = (f".{key}" if prefix else key) if _PLAIN_KEY.match(key) else f'["{key}"]'
            yield from _leaves(child, prefix + step, image or key in IMAGE_KEYS)
    elif isinstance(document, list) and document:
        for item in document:
            yield from _leaves(item, prefix + "[]", image)
    else:
        yield prefix, document, image


def value_paths(document: Any) -> set[str]:
    """The key paths of a document in the allow-list syntax of the pack (policy/guardrails/value_paths.py):
    `a.b`, `a[]` for list items, `["k/x"]` for a key that is not a plain word."""
    return {path for path, _, _ in _leaves(document)}


def chart_values(documents: Iterable[Any]) -> dict[str, Any]:
    """What the program writes in one chart's values, across its runs: every value path
    (`valuePaths`), and at each path through an IMAGE_KEYS key the values it writes there
    (`imageValues`), which the pack allows exactly."""
    paths: set[str] = set()
    images: dict[str, dict[str, Any]] = {}
    for document in documents:
        for path, value, image in _leaves(document):
            paths.add(path)
            if image:
                images.setdefault(path, {})[json.dumps(value, sort_keys=True)] = value
    return {"valuePaths": sorted(paths), "imageValues": {p: [v[k] for k in sorted(v)] for p, v in sorted(images.items())}}


def helm_releases(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Per chart the program installs with a Helm release: its repository, and what it writes in its values (chart_values)."""
    found: dict[tuple[str, str], list[Any]] = {}
    for run in runs:
        for r in run.of_type(RELEASE):
            inputs = r.plain_inputs
            key = (inputs.get("chart"), (inputs.get("repositoryOpts") or {}).get("repo"))
            found.setdefault(key, []).append(inputs.get("values") or {})
    return [{"chart": c, "repository": repo, **chart_values(documents)} for (c, repo), documents in sorted(found.items())]


def fixed_switches(documents: Iterable[Any]) -> dict[str, bool]:
    """The boolean switches the program writes one way in every one of a chart's documents that
    has them (`driver.enabled: false` of the GPU Operator, whatever the tenant's options): the pack
    allows exactly that value there. A switch an option turns (the DCGM exporter, the MIG manager)
    has both values among the runs' documents, so the runs must cover each such option both ways
    (tools/policy_data.py COVERAGE_VARIANTS)."""
    seen: dict[str, set[str]] = {}
    for document in documents:
        for path, value, _ in _leaves(document):
            seen.setdefault(path, set()).add(json.dumps(value))
    found = {path: json.loads(next(iter(values))) for path, values in seen.items() if len(values) == 1}
    return {path: value for path, value in sorted(found.items()) if isinstance(value, bool)}


# Where a VirtualClusterInstance names a chart (loft-sh/loft tag v4.11.2 api/openapi-spec/swagger.json):
# its vcluster chart, spec.template.helmRelease.chart (storage.v1.VirtualClusterHelmChart, the
# repository in `repo`), and the charts it installs inside the tenant, spec.template.charts[]
# (storage.v1.TemplateHelmChart, the repository in `repoURL`).
RELEASE_CHART, TENANT_CHARTS = "helmRelease.chart", "charts"
_REPOSITORY_FIELD = {RELEASE_CHART: "repo", TENANT_CHARTS: "repoURL"}


def _instance_chart_entries(runs: Iterable[ProgramRun], where: str) -> dict[tuple[str, str], list[tuple[Registration, dict[str, Any]]]]:
    """(chart, repository) → (instance, chart entry) of every chart entry the runs' instances carry
    at `where` (RELEASE_CHART or TENANT_CHARTS)."""
    found: dict[tuple[str, str], list[tuple[Registration, dict[str, Any]]]] = {}
    for run in runs:
        for r in run.of_type(INSTANCE):
            template = r.input("spec", "template") or {}
            charts = [(template.get("helmRelease") or {}).get("chart") or {}] if where == RELEASE_CHART else template.get("charts") or []
            for entry in charts:
                found.setdefault((entry.get("name"), entry.get(_REPOSITORY_FIELD[where])), []).append((r, entry))
    return found


def _chart_fields(key: tuple[str, str], uses: list[tuple[Registration, dict[str, Any]]]) -> dict[str, Any]:
    """A chart's record: its name, repository and every field the program sets on its entries."""
    return {"chart": key[0], "repository": key[1], "fields": sorted(set().union(*(entry for _, entry in uses)))}


def release_charts(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Per vcluster chart an instance deploys its virtual cluster with (`spec.template.helmRelease.chart`):
    its repository and the fields the program sets on it (no credentials, no insecureSkipTlsVerify)."""
    return [_chart_fields(key, uses) for key, uses in sorted(_instance_chart_entries(runs, RELEASE_CHART).items())]


def tenant_charts(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Per chart a VirtualClusterInstance installs inside its tenant (`spec.template.charts[]`: the
    GPU Operator): its repository, the fields the program sets on it, what it writes in its values
    (chart_values) and the switches it always writes one way (fixed_switches), read as the pack
    reads them (policy/kubernetes_reader.py)."""
    out = []
    for key, uses in sorted(_instance_chart_entries(runs, TENANT_CHARTS).items()):
        documents = []
        for r, chart in uses:
            document, problem = read_chart_values(chart.get("values"))
            if problem is not None:
                raise ValueError(f"{r.name}: the values of chart {key[0]} {problem}")
            documents.append(document)
        out.append({**_chart_fields(key, uses), **chart_values(documents), "fixedSwitches": fixed_switches(documents)})
    return out


def instance_charts(runs: Iterable[ProgramRun]) -> list[dict[str, str]]:
    """The charts a VirtualClusterInstance installs: the vcluster chart and those inside the tenant."""
    runs = list(runs)
    found = {key for where in (RELEASE_CHART, TENANT_CHARTS) for key in _instance_chart_entries(runs, where)}
    return [{"name": n, "repository": repo} for n, repo in sorted(found)]




def _objects(r: Registration) -> list[dict[str, Any]]:
    """The instance's in-tenant objects, parsed once per text (every reader here walks them all)."""
    return copy.deepcopy(_parsed(r.input("spec", "template", "objects") or ""))


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=LOADER) if d]  # noqa: S506 - a safe loader


def tenant_objects(runs: Iterable[ProgramRun]) -> list[list[str]]:
    """[apiVersion, kind, namespace, name] of every object the program puts inside a tenant."""
    found = set()
    for run in runs:
        for r in run.of_type(INSTANCE):
            for d in _objects(r):
                meta = d.get("metadata") or {}
                found.add((d.get("apiVersion"), d.get("kind"), meta.get("namespace") or "", meta.get("name")))
    return [list(t) for t in sorted(found)]


def tenant_rbac(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Every RBAC object the program puts inside a tenant, whole: the pack allows exactly these
    (the GPU watchdog's and the metrics collector's least rights, nothing wider under their names)."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run.of_type(INSTANCE):
            for d in _objects(r):
                if d.get("kind") in RBAC_KINDS:
                    found[json.dumps(d, sort_keys=True)] = d
    return [found[k] for k in sorted(found)]


def tenant_workloads(runs: Iterable[ProgramRun]) -> list[dict[str, Any]]:
    """Per workload the program puts inside a tenant ([apiVersion, kind, namespace, name]), each
    host access its pods are given under any configuration the runs cover (policy/vcluster_reader.py
    host_access): hostNetwork for the metrics collector, nothing of the kind for the others."""
    from policy.vcluster_reader import host_access

    found: dict[tuple[str, ...], dict[str, Any]] = {}
    for run in runs:
        for r in run.of_type(INSTANCE):
            for d in _objects(r):
                access = host_access(d)
                if access is None:
                    continue
                meta = d.get("metadata") or {}
                key = (d.get("apiVersion"), d.get("kind"), meta.get("namespace") or "", meta.get("name"))
                found.setdefault(key, {})[json.dumps(access, sort_keys=True)] = access
    return [{"object": list(key), "hostAccess": [profiles[k] for k in sorted(profiles)]} for key, profiles in sorted(found.items())]


def _containers(document: Any) -> Iterable[dict[str, Any]]:
    if isinstance(document, dict):
        for key in ("containers", "initContainers"):
            yield from (c for c in document.get(key) or [] if isinstance(c, dict))
        for value in document.values():
            yield from _containers(value)
    elif isinstance(document, list):
        for value in document:
            yield from _containers(value)


def tenant_images(runs: Iterable[ProgramRun]) -> list[str]:
    """Every container image of the objects the program puts inside tenants."""
    return sorted({c.get("image") for run in runs for r in run.of_type(INSTANCE) for d in _objects(r) for c in _containers(d) if c.get("image")})


def node_property_names() -> dict[str, str]:
    """The auto-nodes properties the pack reads a tenant's settings from (config/node_properties.py)."""
    return {
        "nodeMetadataProperty": props.NODE_METADATA,
        "loadBalancerProperty": props.CCM_LB_ENABLED,
        "persistentDisksProperty": props.CSI_ENABLED,
        "projectProperty": props.PROJECT,
        "networkProperty": props.NETWORK,
        "subnetworkProperty": props.SUBNETWORK,
        "nodeServiceAccountProperty": props.NODE_SERVICE_ACCOUNT,
    }
