"""What a failing `==` between two large values prints: the first differences, each at its path, not
the whole of both documents (a rendered vcluster.yaml, a pack's diagnostics, a plan: pytest's own
diff of those runs to thousands of lines). Used by tests/conftest.py `pytest_assertrepr_compare`.

Small values keep pytest's own explanation, and a message (any string up to a few thousand
characters) is always shown whole: pytest.ini's `verbosity_assertions = 2` is there so that a
policy's or a config error's message is never cut (tests/test_policies.py checks both).
"""

from __future__ import annotations

import difflib
import pprint
from collections.abc import Mapping, Sequence, Set
from typing import Any

MAX_DIFFERENCES = 12  # differences shown
LARGE_LINES = 60  # above this many lines of both values pretty-printed, our explanation replaces pytest's
WHOLE_STRING = 4000  # a string up to this long is shown whole (a message); longer ones as a diff
CONTAINER_REPR = 600  # a container shown as one side of a difference is cut after this many characters
_COUNT_LIMIT = 10_000
_MISSING = object()


def explain_in(left: Any, right: Any) -> list[str] | None:
    """`assert needle in text` failing on a long text (a docs page, a plan): the needle whole and the
    text's passage most like it, not the whole text; None to leave short texts to pytest."""
    if not (isinstance(left, str) and isinstance(right, str)) or len(right) <= WHOLE_STRING:
        return None
    size = max(len(left), 40)
    step = max(size // 4, 1)
    windows = [right[i : i + size + size // 2] for i in range(0, max(len(right) - size, 0) + 1, step)]
    best = max(windows, key=lambda w: difflib.SequenceMatcher(None, left, w, autojunk=False).ratio())
    return [f"{left!r} is not in a text of {len(right)} characters; the passage most like it:", f"  {best!r}"]


def is_large(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.count("\n") + right.count("\n") > LARGE_LINES
    try:
        return len(pprint.pformat(left, width=100).splitlines()) + len(pprint.pformat(right, width=100).splitlines()) > LARGE_LINES
    except Exception:  # noqa: BLE001 - a value pprint cannot format: pytest's own explanation
        return False


def explain(left: Any, right: Any) -> list[str] | None:
    """The explanation of `left == right` failing, or None to leave it to pytest (small values)."""
    if not is_large(left, right):
        return None
    if isinstance(left, str) and isinstance(right, str):
        lines = _text_diff(left, right, limit=4 * MAX_DIFFERENCES)
        return [f"two texts of {left.count(chr(10)) + 1} and {right.count(chr(10)) + 1} lines differ; the first differences (unified diff, - left, + right):", *lines]
    found: list[tuple[str, Any, Any]] = []
    _walk(left, right, "", found)
    if not found:
        return None
    shown = found[:MAX_DIFFERENCES]
    total = f"{len(found)}+" if len(found) >= _COUNT_LIMIT else str(len(found))
    lines = [f"{type(left).__name__} and {type(right).__name__} differ in {total} place(s); the first {len(shown)} (path: left != right):"]
    for path, a, b in shown:
        lines += _difference(path or "(the whole value)", a, b)
    if len(found) > len(shown):
        lines.append(f"... and {total if isinstance(total, str) and total.endswith('+') else len(found) - len(shown)} more difference(s) not shown")
    return lines


def _walk(left: Any, right: Any, path: str, found: list[tuple[str, Any, Any]]) -> None:
    if len(found) >= _COUNT_LIMIT:
        return
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        for key in [*left, *(k for k in right if k not in left)]:
            _walk(left.get(key, _MISSING), right.get(key, _MISSING), f"{path}[{key!r}]", found)
    elif _is_sequence(left) and _is_sequence(right):
        for i in range(max(len(left), len(right))):
            _walk(left[i] if i < len(left) else _MISSING, right[i] if i < len(right) else _MISSING, f"{path}[{i}]", found)
    elif isinstance(left, Set) and isinstance(right, Set):
        for item in sorted(left - right, key=repr):
            found.append((f"{path}{{…}}", item, _MISSING))
        for item in sorted(right - left, key=repr):
            found.append((f"{path}{{…}}", _MISSING, item))
    else:
        try:
            equal = left == right
        except Exception:  # noqa: BLE001 - values that refuse comparison differ
            equal = False
        if not equal:
            found.append((path, left, right))


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _difference(path: str, left: Any, right: Any) -> list[str]:
    if left is _MISSING:
        return [f"  {path}: only on the right: {_shown(right)}"]
    if right is _MISSING:
        return [f"  {path}: only on the left: {_shown(left)}"]
    if isinstance(left, str) and isinstance(right, str) and max(len(left), len(right)) > WHOLE_STRING:
        return [f"  {path}: two long texts differ:", *(f"    {line}" for line in _text_diff(left, right, limit=2 * MAX_DIFFERENCES))]
    return [f"  {path}: {_shown(left)} != {_shown(right)}"]


def _shown(value: Any) -> str:
    """A value as one side of a difference: its repr, whole while its strings are messages (up to
    WHOLE_STRING each) and the rest of it is short (CONTAINER_REPR), else cut with what was left out."""
    text = repr(value)
    strings = list(_strings(value))
    rest = len(text) - sum(len(repr(s)) for s in strings)
    if rest <= CONTAINER_REPR and all(len(s) <= WHOLE_STRING for s in strings):
        return text
    limit = max(CONTAINER_REPR, max((len(repr(s)) for s in strings if len(s) <= WHOLE_STRING), default=0))
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _strings(value: Any, depth: int = 0):
    if isinstance(value, str):
        yield value
    elif depth < 4 and isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(k, depth + 1)
            yield from _strings(v, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _strings(v, depth + 1)


def _text_diff(left: str, right: str, *, limit: int) -> list[str]:
    lines = list(difflib.unified_diff(left.splitlines(), right.splitlines(), "left", "right", n=2, lineterm=""))[2:]
    return lines[:limit] + ([f"... ({len(lines) - limit} more lines of diff)"] if len(lines) > limit else [])
