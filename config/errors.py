"""Configuration problems, collected rather than raised one at a time.

Every problem names the key path a user would edit (``nodeProvider.zones[1]``) and says what is
allowed. Loading a stack collects all problems of all keys and raises one ConfigError, before any
resource is registered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError


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


@dataclass
class Problems:
    """An accumulator that validation code appends to."""

    items: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))

    def note(self, text: str) -> None:
        """Context for the problems (what was not checked, and why); never a problem by itself."""
        self.notes.append(text)

    def extend(self, other: list[Problem]) -> None:
        self.items.extend(other)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, stack: str | None = None) -> None:
        if self.items:
            raise ConfigError(self.items, stack, self.notes)


def join_path(prefix: str, loc: tuple[Any, ...]) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the model accepts at `loc` (which points at the object holding the bad key)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        fields = getattr(current, "model_fields", {})
        match = next((f for n, f in fields.items() if (f.alias or n) == part), None)
        current = _model_in(match.annotation) if match else None
    if current is None or not hasattr(current, "model_fields"):
        return []
    return sorted(f.alias or n for n, f in current.model_fields.items())


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside an annotation such as `Foo`, `list[Foo]` or `Foo | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _describe(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def problems_from_validation(prefix: str, model: type[BaseModel], error: ValidationError) -> list[Problem]:
    problems = []
    errors = error.errors(include_url=False)
    item_locs = [tuple(e["loc"]) for e in errors]
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "too_short" and any(other[: len(loc)] == loc and len(other) > len(loc) for other in item_locs):
            continue  # a list whose items failed is not also "too short"
        kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
        if kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1])
            message = "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        elif kind == "literal_error":
            message = f"{value!r} is not allowed; allowed: {ctx.get('expected', '')}"
        elif kind in ("int_parsing", "int_type", "int_from_float"):
            message = f"{value!r} is not a whole number"
        elif kind in ("float_parsing", "float_type"):
            message = f"{value!r} is not a number"
        elif kind in ("bool_parsing", "bool_type"):
            message = f"{value!r} is not true or false"
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            bound = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most", "less_than": "less than"}[kind]
            limit = next(iter(ctx.values()), "")
            message = f"{value!r} is out of range; must be {bound} {limit}"
        elif kind in ("string_type", "list_type", "dict_type", "model_type", "model_attributes_type"):
            wanted = {"string_type": "a string", "list_type": "a list", "dict_type": "a mapping"}.get(kind, "a mapping")
            message = f"expected {wanted}, got {_describe(value)}"
        elif kind == "too_short":
            message = f"needs at least {ctx.get('min_length')} item(s)"
        elif kind == "value_error":
            message = str(ctx.get("error", e["msg"]))
        else:
            message = e["msg"]
        problems.append(Problem(join_path(prefix, loc), message))
    return problems
