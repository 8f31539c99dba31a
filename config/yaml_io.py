"""YAML in and out through libyaml when PyYAML has it (the PyPI wheels do): the pure-Python codec
costs more than registering the resources it describes."""

from __future__ import annotations

from typing import Any, Iterable

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader


def load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_Loader))  # noqa: S506 - a safe loader


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def dump_all(documents: Iterable[Any]) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
