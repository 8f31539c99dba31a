"""Property paths as Pulumi's engine reads them: a resource's `replace_on_changes` entries, and the
input paths the upgrade check (tools/plan_compare.py) reports.

The syntax is the engine's `ParsePropertyPath` (pulumi/pulumi
sdk/go/common/resource/properties_path.go): names joined by dots, `["key with . or /"]` for any
key, `[0]` for an element of a list, and `*` (`[*]`, `.*` or `["*"]`) for every element or key at
that level. The engine replaces a resource when a changed path of its diff lies under one of its
`replace_on_changes` paths, a `*` matching any element (`PropertyPath.Contains`, used by
`applyReplaceOnChanges` in pkg/resource/deploy/step_generator.go). pulumi-command's `Command`
registers itself with `replace_on_changes=["triggers[*]"]` (sdk/python/pulumi_command/local/command.py),
so a change to any of its triggers replaces it.
"""

from __future__ import annotations

import json
from typing import Any

Segment = str | int
WILDCARD = "*"
_ABSENT = object()


class PathError(ValueError):
    pass


def parse(path: str) -> list[Segment]:
    """The segments of a property path: keys (str), list indexes (int), WILDCARD."""
    segments: list[Segment] = []
    rest = path
    while rest:
        if rest[0] == ".":
            rest = rest[1:]
        elif rest[0] == "[":
            if rest[1:2] == '"':
                key, i = [], 2
                while True:
                    if i >= len(rest):
                        raise PathError(f"{path!r}: missing closing quote in property name")
                    if rest[i] == '"':
                        i += 1
                        break
                    if rest[i] == "\\" and rest[i + 1 : i + 2] == '"':
                        key.append('"')
                        i += 2
                    else:
                        key.append(rest[i])
                        i += 1
                if rest[i : i + 1] != "]":
                    raise PathError(f"{path!r}: missing closing bracket in property access")
                segments.append("".join(key))
                rest = rest[i + 1 :]
            else:
                end = rest.find("]")
                if end == -1:
                    raise PathError(f"{path!r}: missing closing bracket in array index")
                inside = rest[1:end]
                if inside == WILDCARD:
                    segments.append(WILDCARD)
                elif inside.lstrip("-").isdigit():
                    segments.append(int(inside))
                else:
                    raise PathError(f"{path!r}: invalid array index {inside!r}")
                rest = rest[end + 1 :]
        else:
            end = min((i for i in (rest.find("."), rest.find("[")) if i != -1), default=len(rest))
            segments.append(rest[:end])
            rest = rest[end:]
    return segments


def render(segments: list[Segment]) -> str:
    """A concrete path as text: `a.b[0]["c/d"]`."""
    out = ""
    for segment in segments:
        if isinstance(segment, int):
            out += f"[{segment}]"
        elif segment.isidentifier():
            out += f".{segment}" if out else segment
        else:
            out += f"[{json.dumps(segment)}]"
    return out


def _children(value: Any) -> dict[Segment, Any]:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)):
        return dict(enumerate(value))
    return {}


def _expand(old: Any, new: Any, segments: list[Segment], prefix: list[Segment]) -> list[tuple[list[Segment], Any, Any]]:
    """Every concrete path the pattern reaches on either side, with each side's value (_ABSENT
    where that side lacks it)."""
    if not segments:
        return [(prefix, old, new)]
    head, tail = segments[0], segments[1:]
    olds, news = _children(old), _children(new)
    keys = list(dict.fromkeys([*olds, *news])) if head == WILDCARD else [head]
    found = []
    for key in keys:
        found += _expand(olds.get(key, _ABSENT), news.get(key, _ABSENT), tail, [*prefix, key])
    return found


def at(value: Any, path: str) -> Any:
    """The value at a path without wildcards; None where absent."""
    segments = parse(path)
    if WILDCARD in segments:
        raise PathError(f"{path!r}: a path with {WILDCARD} names many values (differences() compares them)")
    for segment in segments:
        value = _children(value).get(segment)
    return value


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """Where the two values differ under a path (each `*` any element or key): the concrete path,
    the old and the new value (None where absent), in order. Empty when they agree."""
    return [
        (render(where), None if a is _ABSENT else a, None if b is _ABSENT else b)
        for where, a, b in _expand(old, new, parse(path), [])
        if (None if a is _ABSENT else a) != (None if b is _ABSENT else b)
    ]
