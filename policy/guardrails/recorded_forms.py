"""How stack-resources-by-record (guardrails/recorded.py) compares a resource with the stack's record
of it: the documents some inputs hold as YAML text read as documents, and long texts by digest.

- A VirtualClusterInstance holds three documents as YAML text: its vcluster.yaml
  (`spec.template.helmRelease.values`), the values of each chart it installs inside its tenant
  (`spec.template.charts[].values`) and the objects it puts there (`spec.template.objects`, one
  YAML stream). They are compared as documents, so a difference is named at its path inside them
  (`spec.template.objects["apps/v1 Deployment gpu-platform-system/gpu-watchdog"].spec.template.spec
  .containers[0].command`); the objects by apiVersion, kind, namespace and name (an object twice is
  the second time another object, which the record does not have).
- A text longer than `DIGEST_OVER` characters (a node template, a script in a ConfigMap) is
  recorded and compared as its SHA-256 digest, so the records stay small and a change of the
  program's templates changes one line per record. A shorter text that reads like a digest (or
  like such a mark) is marked as text, so that no value equals a digest but the text it is the
  digest of, and no two texts the same mark.

Self-contained like the rest of the pack: it reads YAML with PyYAML, the pack's one dependency
beside pulumi-policy.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

import yaml
from kubernetes_reader import LOADER as _Loader
from kubernetes_reader import is_list

DIGEST_OVER = 2048
DIGEST_PREFIX = "sha256:"
_TEXT_PREFIX = "text:"

INSTANCE_VALUES = ("spec", "template", "helmRelease", "values")
INSTANCE_CHARTS = ("spec", "template", "charts")
INSTANCE_OBJECTS = ("spec", "template", "objects")


def digest(text: str) -> str:
    return f"{DIGEST_PREFIX}{hashlib.sha256(text.encode()).hexdigest()} ({len(text)} characters)"


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(DIGEST_PREFIX)


def digested(value: Any) -> Any:
    """`value` with every text longer than DIGEST_OVER as its digest."""
    if isinstance(value, Mapping):
        return {k: digested(v) for k, v in value.items()}
    if is_list(value):
        return [digested(v) for v in value]
    if isinstance(value, str):
        if len(value) > DIGEST_OVER:
            return digest(value)
        if value.startswith((DIGEST_PREFIX, _TEXT_PREFIX)):  # one to one: "text:x" is not "x"
            return _TEXT_PREFIX + value
    return value


def _yaml(text: Any) -> Any:
    """A YAML text as its document; anything else (or text that is not YAML) as it is, which then
    differs from the record's document where it stands."""
    if not isinstance(text, str):
        return text
    try:
        return yaml.load(text, Loader=_Loader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return text


def object_key(document: Any, index: int) -> str:
    """How an in-tenant object is named in the compared form: `<apiVersion> <kind> <namespace>/<name>`
    (no namespace for a cluster-scoped one), or `#<index>` for a document that is not an object."""
    if not isinstance(document, Mapping):
        return f"#{index}"
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    name = "/".join(str(p) for p in (metadata.get("namespace"), metadata.get("name")) if p)
    return f"{document.get('apiVersion')} {document.get('kind')} {name}"


def _objects(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))
    except (yaml.YAMLError, ValueError, RecursionError):
        return text
    out: dict[str, Any] = {}
    for i, document in enumerate(d for d in documents if d is not None):
        key = object_key(document, i)
        # The same object twice: the second is another object, which no record has.
        while key in out:
            key += " (again)"
        out[key] = document
    return out


def _at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        document = document.get(key) if isinstance(document, dict) else None
    return document


def _set(document: dict[str, Any], path: tuple[str, ...], read: Any) -> None:
    parent = _at(document, path[:-1])
    if isinstance(parent, dict) and path[-1] in parent:
        parent[path[-1]] = read(parent[path[-1]])


def instance_form(inputs: dict[str, Any]) -> dict[str, Any]:
    """A VirtualClusterInstance's inputs with the documents it holds as YAML text read (a copy)."""
    form = copy.deepcopy(inputs)
    _set(form, INSTANCE_VALUES, _yaml)
    _set(form, INSTANCE_OBJECTS, _objects)
    charts = _at(form, INSTANCE_CHARTS)
    if isinstance(charts, list):
        for chart in charts:
            if isinstance(chart, dict) and "values" in chart:
                chart["values"] = _yaml(chart["values"])
    return form
