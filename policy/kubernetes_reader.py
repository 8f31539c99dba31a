"""Kubernetes documents the pack compares with the program's, read one way by the pack and by
tools/program_inventory.py (which records the program's own in program_data.json): a kubeconfig as
kubectl and the Kubernetes provider read it, a Secret without its values, and Helm chart values
given as one YAML string.

Self-contained like vcluster_reader.py: it imports nothing of the pack or of the program.

A kubeconfig's fields are client-go's (kubernetes/kubernetes
staging/src/k8s.io/client-go/tools/clientcmd/api/v1/types.go, read at commit
b15a9909cc24883d31f93e53d62b8e728b71741c): `clusters`, `users` and `contexts` are lists of
`{name, cluster|user|context}`; a user's `exec` is a command kubectl runs to get credentials,
`auth-provider` a plugin of kubectl's own, `tokenFile`, `client-key` and the like are files of the
machine it runs on; a cluster's `proxy-url` sends every request, credentials included, through
another host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Iterator

import yaml

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


class LOADER(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The one loader for every YAML document the pack (and the program's readers shared with it)
    reads out of a resource: here, guardrails/in_tenant.py, guardrails/recorded_forms.py and
    vcluster_reader.py. libyaml's safe loader where PyYAML was built with it (its wheels are), else
    the same loader in Python: one parser, so no two policies read a document two ways, and libyaml's,
    which Go's YAML parsers are a port of (and the Python one takes seconds per tenant's objects).

    A merge key (`<<`) is refused: readers disagree on what it means. PyYAML keeps a key the mapping
    sets itself over the merged one; go-yaml v2, which sigs.k8s.io/yaml wraps for client-go's
    kubeconfigs and Kubernetes objects, sets the merged keys over those already read
    (go-yaml/yaml tag v2.4.0 decode.go `merge`). `server: <the cluster>` followed by
    `<<: {server: <another>}` would be the cluster to the pack and the other host to kubectl. The
    program never writes one (PyYAML's dumper has no merge keys)."""

    def flatten_mapping(self, node):  # noqa: ANN001 - PyYAML's constructor hook
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                raise yaml.constructor.ConstructorError(
                    None, None, "a merge key `<<` is refused: YAML readers differ on what it sets (write the keys out)", key_node.start_mark
                )
        super().flatten_mapping(node)

KUBECONFIG_KIND = "Config"
# Each list of a kubeconfig → the key of its entries' bodies.
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
# Secret fields whose values are the secret itself: compared by their keys only.
SECRET_VALUE_FIELDS = ("data", "stringData")
# What the API server makes of a Secret without a type (https://kubernetes.io/docs/concepts/configuration/secret/#secret-types).
DEFAULT_SECRET_TYPE = "Opaque"


def plain(value: Any) -> Any:
    """A copy made of dicts and lists of a value the analyzer hands over as read-only proxies.
    Touching a value unknown during preview raises UnknownValueError, as any read does."""
    if isinstance(value, Mapping):
        return {k: plain(value[k]) for k in value}
    if is_list(value):
        return [plain(v) for v in value]
    return value


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _load(value: Any, what: str) -> tuple[Any, str | None]:
    """(the YAML document a string holds, None), or (None, why there is none)."""
    if not isinstance(value, str):
        return None, f"a {type(value).__name__} is not a {what}"
    try:
        return yaml.load(value, Loader=LOADER), None  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError) as e:  # ValueError: libyaml on a lone surrogate
        return None, f"is not YAML ({str(e).splitlines()[0]})"


def read_kubeconfig(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the kubeconfig document, None), or (None, why `value` is not one)."""
    document, problem = _load(value, "kubeconfig document")
    if problem is not None:
        return None, problem
    if isinstance(document, str) and "\n" not in value.strip():
        # The provider takes a path as well as contents: a file of the deployer's machine.
        return None, f"{value.strip()!r} is no kubeconfig document but the path of a file on the deployer's machine, which nobody reviews"
    if not isinstance(document, Mapping) or document.get("kind") != KUBECONFIG_KIND:
        return None, f"is not a kubeconfig document (kind: {KUBECONFIG_KIND})"
    for section, body in SECTIONS.items():
        entries = document.get(section) or []
        if not is_list(entries) or not all(isinstance(e, Mapping) and isinstance(e.get(body) or {}, Mapping) for e in entries):
            return None, f"{section}: is not a list of {{name, {body}}}"
    return dict(document), None


def read_chart_values(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the values document, None), or (None, why `value` is not one): the values of a chart a
    VirtualClusterInstance installs inside its tenant (`spec.template.charts[].values`), one YAML
    string that Helm reads into a map, none ("" or null) being no values (helm/helm
    pkg/chartutil/values.go `ReadValues`, read at commit 00b3f0b198bfa855a0eb4db3f61b8ee4059c26eb)."""
    document, problem = _load(value, "values document (one YAML string)") if value is not None else (None, None)
    if problem is not None:
        return None, problem
    if document is None:
        return {}, None
    if not isinstance(document, Mapping):
        return None, f"is not a YAML mapping (Helm reads the values as a map of keys), but a {type(document).__name__}"
    return dict(document), None


def entries(document: Mapping[str, Any], section: str) -> Iterator[tuple[int, Any, Mapping[str, Any]]]:
    """(index, name, body) of each entry of a kubeconfig's `clusters`, `users` or `contexts`."""
    for i, entry in enumerate(document.get(section) or []):
        yield i, entry.get("name"), entry.get(SECTIONS[section]) or {}


def secret_shape(props: Mapping[str, Any]) -> dict[str, Any]:
    """A Secret as the pack compares it with the program's: every field whole but `data` and
    `stringData`, of which only the keys, together as `keys` (their values are the stack's
    secrets: never recorded, never read, so one unknown during preview holds nothing up). Together,
    because the Kubernetes provider's Check, whose result the pack is handed, moves `stringData`
    into `data` (pulumi/pulumi-kubernetes provider/pkg/clients/unstructured.go normalizeSecret,
    read at commit 71e0961387fdca919e8404e3a874981147ef209c), as the API server does. `type` as
    the API server defaults it."""
    shape: dict[str, Any] = {k: plain(props[k]) for k in props if k not in SECRET_VALUE_FIELDS}
    keys: set[str] = set()
    for field in SECRET_VALUE_FIELDS:
        value = props.get(field)
        if isinstance(value, Mapping):
            keys |= {str(k) for k in value}
        elif value is not None:
            shape[field] = plain(value)  # not a mapping: kept whole, so it matches nothing the program makes
    shape["keys"] = sorted(keys)
    shape["type"] = shape.get("type") or DEFAULT_SECRET_TYPE
    return shape
