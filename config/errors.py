"""Configuration problems, collected rather than raised one at a time.

Every problem names the key path a user would edit (``nodeProvider.zones[1]``) and says what is
allowed. Loading a stack collects all problems of all keys and raises one ConfigError, before any
resource is registered.

How checks keep going past a bad value:
- A config object is parsed as far as it is valid (`config.base.parse`): every key that failed
  is reported and replaced by a `Broken` stand-in, the rest keep their values. So are environment
  facts that cannot be derived because the keys they come from have problems.
- Any use of a `Broken` value (compare, format, iterate, read an attribute) raises `Unchecked`.
  Checks run in `with problems.checking(path):` blocks, one per independent check: a block that
  reaches a broken value stops there, and the error says in a note what was not checked and which
  key it waits for. Every other block still runs, so independent keys are all checked at once.

Writing a check: give it its own `checking` block named by the key it reports on, and use the
config values as usual (no None tests for broken keys). A fact derived from other keys is built
with `problems.derive(compute, *keys)`, which is Broken while one of those keys has problems, so
that nothing is judged by a wrong value. Match strings with `config.base.Syntax` patterns and read
CIDRs with `config.base.read_cidr` (both stop at a Broken value instead of raising TypeError).
"""

from __future__ import annotations

import contextlib
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """One or more problems in a stack's configuration."""

    def __init__(self, problems: list[Problem], stack: str | None = None, notes: list[str] | None = None):
        self.problems = list(problems)
        self.stack = stack
        self.notes = list(notes or [])
        super().__init__(self.render())

    def render(self) -> str:
        where = f"stack {self.stack!r}" if self.stack else "this stack"
        count = len(self.problems)
        head = f"{count} configuration problem{'s' if count != 1 else ''} in {where}; nothing was created:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems), *(f"  Note: {n}" for n in self.notes)])


class Unchecked(Exception):
    """A check reached a value that is missing because the key at `path` has a problem.

    Deliberately not a ValueError or TypeError, so that no check's own error handling swallows it."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class Broken:
    """Stands in for a value whose key has a problem that is already reported: a key that failed
    to parse, or an environment fact derived from keys with problems. Using it in any way raises
    Unchecked, so a check that depends on it stops instead of judging a value the user never wrote
    or failing with an internal error."""

    __slots__ = ("broken_path",)

    def __init__(self, path: str):
        object.__setattr__(self, "broken_path", path)

    def _stop(self, *_args: Any, **_kwargs: Any) -> Any:
        raise Unchecked(self.broken_path)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocol probes (copy, pickle, …) see a plain object
            raise AttributeError(name)
        raise Unchecked(self.broken_path)

    __setattr__ = __delattr__ = _stop
    __bool__ = __len__ = __iter__ = __contains__ = __getitem__ = __call__ = _stop
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _stop  # type: ignore[assignment]
    __str__ = __repr__ = __format__ = __int__ = __float__ = __index__ = __round__ = _stop  # type: ignore[assignment]
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _stop
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _stop


def is_broken(value: Any) -> bool:
    return isinstance(value, Broken)


def derived(compute: Callable[[], T]) -> T | Broken:
    """`compute()`, or a Broken naming the broken value it needed: for values built from config
    that may be partly broken (resolved defaults, environment facts)."""
    try:
        return compute()
    except Unchecked as e:
        return Broken(e.path)


def within(path: str, prefix: str) -> bool:
    """`path` is `prefix` or a key inside it (`tenants[0].name` is within `tenants[0]` and `tenants`)."""
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


@dataclass
class Problems:
    """An accumulator that validation code appends to."""

    items: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # broken key → the keys not checked because of it, in order
    unchecked: dict[str, list[str]] = field(default_factory=dict)

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))

    def note(self, text: str) -> None:
        """Context for the problems (what was not checked, and why); never a problem by itself."""
        self.notes.append(text)

    def extend(self, other: list[Problem]) -> None:
        self.items.extend(other)

    @contextlib.contextmanager
    def checking(self, path: str) -> Iterator[None]:
        """Run one check of the key at `path`. If it reaches a broken value it stops, and a note
        says that `path` waits for the broken key (unless one key is inside the other: then the
        broken key's own problem says enough)."""
        try:
            yield
        except Unchecked as e:
            if not (within(e.path, path) or within(path, e.path)):
                waiting = self.unchecked.setdefault(e.path, [])
                if path not in waiting:
                    waiting.append(path)

    def has_problems(self, *paths: str) -> bool:
        """Whether any problem is at or inside one of `paths`."""
        return any(within(p.path, path) for p in self.items for path in paths)

    def derive(self, compute: Callable[[], T], *paths: str) -> T | Broken:
        """`compute()` for a fact derived from the keys at `paths`; a Broken for the first of them
        that has problems, so that other keys are not judged by a fact from a wrong value."""
        unsound = next((path for path in paths if self.has_problems(path)), None)
        return Broken(unsound) if unsound is not None else derived(compute)

    def all_notes(self) -> list[str]:
        """The notes, and per broken key the keys that wait for it (a key inside an object that has
        a problem as a whole waits for that first, and is not listed)."""
        waits = []
        for broken, keys in self.unchecked.items():
            keys = [k for k in keys if not any(within(k, p.path) and k != p.path for p in self.items)]
            if keys:
                waits.append(f"not checked against {broken} until it is fixed: {', '.join(keys)}")
        return [*self.notes, *waits]

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, stack: str | None = None) -> None:
        if self.items:
            raise ConfigError(grouped(self.items), stack, self.all_notes())


def grouped(problems: list[Problem]) -> list[Problem]:
    """Problems of one key together, however they were found (parsing first, checks later):
    ordered by key path, each key of a path ranked where it first appears, list items in list
    order (`zones[0]` before `zones[2]`, whichever was found first)."""
    ranks: dict[tuple[str, ...], int] = {}

    def key(problem: Problem) -> tuple[int, ...]:
        parts = tuple(_PATH_PART.findall(problem.path))
        return tuple(int(part[1:-1]) if part.startswith("[") else ranks.setdefault(parts[: i + 1], len(ranks)) for i, part in enumerate(parts))

    for problem in problems:
        key(problem)
    return sorted(problems, key=key)


_PATH_PART = re.compile(r"\[\d+\]|[^.\[]+")


EMPTY = "an empty value"  # a key left blank in YAML (`key:`), which reaches us as None or ""


def shown(value: Any, limit: int = 60) -> str:
    """repr(value), shortened: messages quote what the user wrote, not a whole pasted document.
    A blank value is said to be empty, never shown as Python's None."""
    if value is None or value == "":
        return EMPTY
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def join_path(prefix: str, loc: tuple[Any, ...]) -> str:
    path = prefix
    for i, part in enumerate(loc):
        if part == "[key]":  # pydantic's marker for a mapping's key (rather than its value)
            continue
        if isinstance(part, int) and loc[i + 1 : i + 2] != ("[key]",):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The model of the object at `loc`, or None."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        fields = getattr(current, "model_fields", {})
        match = next((f for n, f in fields.items() if (f.alias or n) == part), None)
        current = _model_in(match.annotation) if match else None
    return current if current is not None and hasattr(current, "model_fields") else None


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the model accepts at `loc` (which points at the object holding the bad key)."""
    current = _model_at(model, loc)
    return sorted(f.alias or n for n, f in current.model_fields.items()) if current else []


def _missing(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """"required", and what the key is for: its field's docstring (config/base.py ConfigModel), as
    the rest of the sentence ("required: the folder Pulumi creates …")."""
    holder = _model_at(model, loc[:-1])
    field = next((f for n, f in holder.model_fields.items() if (f.alias or n) == loc[-1]), None) if holder and loc else None
    return f"required: {as_clause(field.description)}" if field is not None and field.description else "required"


def as_clause(sentence: str) -> str:
    """A docstring sentence as the end of another: "The folder …." → "the folder …" (a word in
    capitals, such as GPU, stays as written)."""
    text = " ".join(sentence.split()).rstrip(".")
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first[:1].isupper() and first[1:2].islower() else text


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside an annotation such as `Foo`, `list[Foo]` or `Foo | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def describe(value: Any) -> str:
    """What kind of value it is (a mapping, a number, …), never the value itself."""
    kinds = {dict: "a mapping", list: "a list", tuple: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number"}
    return EMPTY if value is None or value == "" else kinds.get(type(value), type(value).__name__)


def _through_unions(model: type[BaseModel], errors: list[dict]) -> list[dict]:
    """Errors of a value that fits no member of a union (`gcpProject: str | Spec`) name the member
    in their loc (`gcpProject.str`, `gcpProject.Spec.id`), which is no key a user could edit. A
    mapping given where one member is a model is judged as that model (its errors, without the
    member's name); any other value becomes one `union_mismatch` error saying what is allowed."""
    out: list[dict] = []
    unions: dict[tuple, tuple[Any, list[tuple[str, dict]]]] = {}
    for e in errors:
        split = _union_split(model, tuple(e["loc"]))
        if split is None:
            out.append(e)
        else:
            at, union, member = split
            unions.setdefault(at, (union, []))[1].append((member, e))
    for at, (union, member_errors) in unions.items():
        value = next((e["input"] for _, e in member_errors if len(e["loc"]) == len(at) + 1), None)
        model_member = next((m for m in _union_members(union) if _is_model(m)), None)
        if isinstance(value, dict) and model_member is not None:
            out += [{**e, "loc": at + tuple(e["loc"])[len(at) + 1 :]} for member, e in member_errors if member == model_member.__name__]
        else:
            out.append({"type": "union_mismatch", "loc": at, "input": value, "ctx": {"union": union}, "msg": ""})
    return out


def _union_split(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[tuple, Any, str] | None:
    """(loc of the union, the union, the member named in loc) if loc passes through a union."""
    annotation: Any = model
    for i, part in enumerate(loc):
        if _union_members(annotation) and isinstance(part, str):
            return tuple(loc[:i]), annotation, part
        if _is_model(annotation):
            field = next((f for n, f in annotation.model_fields.items() if (f.alias or n) == part), None)
            annotation = field.annotation if field else None
        elif typing.get_origin(annotation) in (tuple, list):
            annotation = typing.get_args(annotation)[0]
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[0 if part == "[key]" else 1]
        else:
            return None
    return None


def _union_members(annotation: Any) -> tuple:
    """The members of a union other than None (a `X | None` alone is no union for pydantic's errors)."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return ()
    members = tuple(a for a in typing.get_args(annotation) if a is not type(None))
    return members if len(members) > 1 else ()


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _allowed_forms(union: Any) -> str:
    forms = []
    for member in _union_members(union):
        if _is_model(member):
            forms.append("a mapping with keys " + ", ".join(f.alias or n for n, f in member.model_fields.items()))
        elif typing.get_origin(member) is typing.Literal:
            forms.append(" or ".join(repr(v) for v in typing.get_args(member)))
        else:
            forms.append({str: "a string", int: "a whole number", float: "a number", bool: "true/false"}.get(member, str(member)))
    return " or ".join(forms)


def problems_from_validation(prefix: str, model: type[BaseModel], error: ValidationError) -> list[Problem]:
    problems = []
    errors = _through_unions(model, error.errors(include_url=False))
    item_locs = [tuple(e["loc"]) for e in errors]
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "too_short" and any(other[: len(loc)] == loc and len(other) > len(loc) for other in item_locs):
            continue  # a list whose items failed is not also "too short"
        kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
        if kind == "missing":
            message = _missing(model, loc)
        elif kind == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1])
            message = "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        elif kind == "literal_error":
            message = f"{shown(value)} is not allowed; allowed: {ctx.get('expected', '')}"
        elif kind in ("int_parsing", "int_type", "int_from_float"):
            message = f"{shown(value)} is not a whole number"
        elif kind in ("float_parsing", "float_type"):
            message = f"{shown(value)} is not a number"
        elif kind in ("bool_parsing", "bool_type"):
            message = f"{shown(value)} is not true or false"
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            bound = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most", "less_than": "less than"}[kind]
            limit = next(iter(ctx.values()), "")
            message = f"{shown(value)} is out of range; must be {bound} {limit}"
        elif kind in ("string_type", "list_type", "tuple_type", "dict_type", "model_type", "model_attributes_type"):
            wanted = {"string_type": "a string", "list_type": "a list", "tuple_type": "a list", "dict_type": "a mapping"}.get(kind, "a mapping")
            message = f"expected {wanted}, got {describe(value)}"
            keys = _allowed_keys(model, loc) if kind in ("model_type", "model_attributes_type") else []
            if keys:  # a model's mapping: say which keys it takes
                message += f"; allowed keys: {', '.join(keys)}"
        elif kind == "union_mismatch":
            message = f"{shown(value)} is not allowed; allowed: {_allowed_forms(ctx['union'])}"
        elif kind == "too_short":
            message = f"needs at least {ctx.get('min_length')} item(s)"
        elif kind == "value_error":
            message = str(ctx.get("error", e["msg"]))
        else:
            message = e["msg"]
        problems.append(Problem(join_path(prefix, loc), message))
    return problems
