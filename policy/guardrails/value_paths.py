"""Key paths of a YAML document, matched against an allow-list of path patterns.

A pattern is keys separated by dots, `[]` for every item of a list, `*` for any key of a map, and
`["a.b/c"]` for one literal key holding dots or slashes: `privateNodes.autoNodes[].properties["project"]`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Iterator

from .common import is_list

Token = tuple[str, Any]  # ("key", name) | ("item", index or None) | ("any", None)
KEY, ITEM, ANY = "key", "item", "any"

_TOKEN = re.compile(r'\[\]|\["(?P<literal>[^"]+)"\]|\.?(?P<key>[A-Za-z0-9_-]+|\*)')


@functools.lru_cache(maxsize=None)
def parse(pattern: str) -> tuple[Token, ...]:
    tokens: list[Token] = []
    position = 0
    while position < len(pattern):
        found = _TOKEN.match(pattern, position)
        if not found or found.end() == position:
            raise ValueError(f"{pattern!r}: cannot read the path from position {position}")
        if found.group(0) == "[]":
            tokens.append((ITEM, None))
        elif found.group("literal") is not None:
            tokens.append((KEY, found.group("literal")))
        elif found.group("key") == "*":
            tokens.append((ANY, None))
        else:
            tokens.append((KEY, found.group("key")))
        position = found.end()
    return tuple(tokens)


def show(path: tuple[Token, ...]) -> str:
    """A concrete path as a reader writes it: controlPlane.service.spec, autoNodes[0], labels["a/b"]."""
    out = ""
    for kind, value in path:
        if kind == ITEM:
            out += f"[{value}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", str(value)):
            out += f".{value}" if out else str(value)
        else:
            out += f'["{value}"]'
    return out


def leaves(value: Any, path: tuple[Token, ...] = ()) -> Iterator[tuple[tuple[Token, ...], Any]]:
    """(concrete path, value) of every scalar, empty map and empty list of a document."""
    if isinstance(value, Mapping) and value:
        for key, child in value.items():
            yield from leaves(child, (*path, (KEY, str(key))))
    elif is_list(value) and value:
        for i, child in enumerate(value):
            yield from leaves(child, (*path, (ITEM, i)))
    else:
        yield path, value


def _matches(path: tuple[Token, ...], pattern: tuple[Token, ...]) -> bool:
    if len(path) != len(pattern):
        return False
    for (kind, value), (want, name) in zip(path, pattern):
        if want == ITEM:
            if kind != ITEM:
                return False
        elif kind != KEY or (want == KEY and value != name):
            return False
    return True


def matches(path: tuple[Token, ...], pattern: str) -> bool:
    """Whether a concrete path is one `pattern` names."""
    return _matches(path, parse(pattern))


def allowed(path: tuple[Token, ...], value: Any, patterns: list[tuple[Token, ...]]) -> bool:
    """A value is allowed at a path a pattern names; nothing (null, {}, []) also on the way to one."""
    if any(_matches(path, p) for p in patterns):
        return True
    empty = value is None or ((isinstance(value, Mapping) or is_list(value)) and not value)
    return empty and any(_matches(path, p[: len(path)]) for p in patterns if len(p) > len(path))


def near(path: tuple[Token, ...], paths: list[str]) -> str:
    """The allowed paths under the same top-level key as `path`, or the allowed top-level keys."""
    top = path[0] if path else None
    found = [p for p in paths if parse(p)[:1] == (top,)]
    if found:
        return ", ".join(found)
    return "keys under " + ", ".join(sorted({str(parse(p)[0][1]) for p in paths if parse(p)}))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def judge(document: Any, paths: list[str], exact: Mapping[str, list[Any]]) -> Iterator[tuple[tuple[Token, ...], Any, list[Any] | None]]:
    """Each leaf of a chart's values that the program's record does not allow: (path, value, None)
    at a path no pattern of `paths` names; (path, value, the values the program writes there) at a
    path of `exact` (those that choose an image or registry, the switches it writes one way)
    holding another value."""
    patterns = [parse(p) for p in paths]
    pinned = [(parse(p), values) for p, values in exact.items()]
    for path, value in leaves(document):
        if not allowed(path, value, patterns):
            yield path, value, None
            continue
        wanted = [v for pattern, values in pinned if _matches(path, pattern) for v in values]
        if any(_matches(path, pattern) for pattern, _ in pinned) and _canonical(value) not in {_canonical(v) for v in wanted}:
            yield path, value, wanted
