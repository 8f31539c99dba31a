"""Shared pieces of the config models: camelCase keys, no unknown keys, small syntax checks, and
parsing a config object as far as it is valid (see config/errors.py)."""

from __future__ import annotations

import functools
import ipaddress
import re
import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError, ValidationInfo, WithJsonSchema, field_validator
from pydantic.alias_generators import to_camel

from policy.vcluster_reader import quantity as _quantity

from .errors import Broken, Problem, Problems, Unchecked, problems_from_validation, shown


class ConfigModel(BaseModel):
    """Stack config object: keys are camelCase as in the stack files, unknown keys are errors.

    Every field is documented by the one-sentence docstring directly below it (pydantic's
    `use_attribute_docstrings` makes it the field's description), and the class docstring says
    what the object is. The configuration reference (docs/configuration.md, `make docs`), the
    descriptions in Pulumi.yaml and the "required: …" of a missing key are made of them; a test
    fails for a field without one."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, use_attribute_docstrings=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        """A number, a boolean and a string are never each other (`maxGpus: true`, `spot: "yes"`,
        `maxGpus: "8"`), where pydantic's lax mode would convert them: see `wrong_scalar`."""
        field = cls.model_fields.get(info.field_name or "")
        problem = wrong_scalar(field.annotation, value) if field is not None else None
        if problem:
            raise ValueError(problem)
        return value


_SCALARS = {int: "a whole number", float: "a number", bool: "true or false"}
_LAX_BOOLEANS = ("true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0")


def _scalar_kind(annotation: Any) -> Any:
    """int, float or bool for a field of that type (or `X | None`), else None."""
    annotation = _optional(annotation)
    return annotation if annotation in _SCALARS else None


def wrong_scalar(annotation: Any, value: Any) -> str | None:
    """What is wrong with `value` for a field of type int, float or bool (alone, optional, or the
    values of a `dict[str, …]` of them), or None. The stack file's YAML types are kept as written
    (config/yaml_io.py), so a boolean where a number belongs is the user's, not the reader's: it is
    refused instead of read as 1 or 0, and so is a quoted number (`"8"`) or a string for a boolean."""
    if typing.get_origin(_optional(annotation)) is dict and isinstance(value, dict):
        inner = typing.get_args(_optional(annotation))[1]
        for key, item in value.items():
            problem = wrong_scalar(inner, item)
            if problem:
                return f"{key}: {problem}"
        return None
    kind = _scalar_kind(annotation)
    if kind is None or value is None or isinstance(value, Broken):
        return None
    wanted = _SCALARS[kind]
    if kind is bool:
        # What pydantic's lax mode would take for a boolean; anything else it refuses by itself.
        if isinstance(value, (int, float)) and not isinstance(value, bool) or isinstance(value, str) and value.lower() in _LAX_BOOLEANS:
            return f"{shown(value)} is not true or false (write true or false, unquoted)"
        return None
    if isinstance(value, bool):
        return f"{str(value).lower()} is a boolean, not {wanted}"
    if isinstance(value, str) and _numeric(value):  # any other string pydantic refuses by itself
        return f"{shown(value)} is a string, not {wanted} (write it without quotes)"
    return None


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class Syntax:
    """A regular expression for config values. Unlike a bare `re.Pattern` it takes any value: a
    value that is not a string does not match, and a Broken one stops the check (Unchecked)."""

    def __init__(self, pattern: str):
        self.regex = re.compile(pattern)

    def match(self, value: Any) -> re.Match[str] | None:
        if isinstance(value, Broken):
            raise Unchecked(value.broken_path)
        return self.regex.match(value) if isinstance(value, str) else None

    def fullmatch(self, value: Any) -> re.Match[str] | None:
        return self.match(value) and self.regex.fullmatch(value)


DNS_LABEL = Syntax(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
REGION = Syntax(r"^[a-z]+-[a-z]+[0-9]+$")
GCP_LABEL_KEY = Syntax(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_LABEL_VALUE = Syntax(r"^[a-z0-9_-]{0,63}$")
# Go/Karpenter durations as vCluster accepts them: 30s, 5m, 1h30m.
DURATION = Syntax(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")


def quantity(text: Any) -> float | None:
    """A Kubernetes resource quantity (200m, 2, 512Mi, 4Gi) as a number, or None: the parser the
    policy pack uses too (policy/vcluster_reader.py). A Broken value stops the check (Unchecked)."""
    if isinstance(text, Broken):
        raise Unchecked(text.broken_path)
    return _quantity(text)


def _duration_text(value: Any) -> Any:
    """A bare number where a duration belongs (`idleAfter: 60`) gets told what to write."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"{value} is a number, not a duration; write it with its unit, e.g. {value:g}s (durations: 30s, 5m, 1h30m)")
    return value


# A config value that is a duration (checked against DURATION where the value is used).
Duration = Annotated[str, BeforeValidator(_duration_text), WithJsonSchema({"type": "string", "format": "duration"})]


def duration_seconds(text: str) -> int:
    match = DURATION.match(text)
    if not match:
        raise ValueError(text)
    hours, minutes, seconds = (int(g[:-1]) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def duration_text(seconds: int) -> str:
    """Seconds as a duration DURATION accepts, largest units first: 960 → 16m, 3690 → 1h1m30s."""
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    return "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (rest, "s")) if value) or "0s"


def parse_cidr(text: Any) -> ipaddress.IPv4Network | None:
    """An IPv4 network in CIDR form with no host bits set, or None."""
    network, _ = read_cidr(text, "")
    return network


def read_cidr(text: Any, example: str) -> tuple[ipaddress.IPv4Network | None, str | None]:
    """(network, None) for an IPv4 network in CIDR form with no host bits set, else (None, what is
    wrong with it), the corrected network suggested where only host bits are set."""
    if isinstance(text, Broken):
        raise Unchecked(text.broken_path)
    like = f" like {example}" if example else ""
    if not isinstance(text, str) or "/" not in text:
        return None, f"{shown(text)} is not an IPv4 CIDR{like} (address/prefix length)"
    try:
        return ipaddress.IPv4Network(text, strict=True), None
    except ValueError:
        pass
    try:
        network = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        return None, f"{shown(text)} is not an IPv4 CIDR{like} (address/prefix length)"
    return None, f"{shown(text)} is malformed: host bits are set; did you mean {network}?"


def zone_region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


# --- parsing as far as valid ---------------------------------------------------------------------


def parse(path: str, model: type[BaseModel], raw: Any, problems: Problems, *, when_missing: str = "required") -> Any:
    """`raw` as a `model` instance. When it is invalid every problem is reported, and the result
    is the object as far as it is valid: each key that failed is a Broken stand-in (so is the
    whole object when `raw` is not a mapping at all), nested objects and list items are kept as
    far as they are valid, everything else has its value. Checks then use what parsed."""
    if raw is None:
        problems.add(path, when_missing)
        return Broken(path)
    try:
        parsed = model.model_validate(raw)
    except ValidationError as e:
        problems.extend(problems_from_validation(path, model, e))
        parsed = _salvage(path, model, raw)
    problems.extend(repeated_items(path, model, parsed))
    return parsed


def repeated_items(path: str, model: type[BaseModel], value: Any) -> list[Problem]:
    """Every list of plain values in the object (zones, gpuTypes, machineTypes, access.teams, …,
    whatever a model declares) holds each value once: a repeat is reported at its index. Lists of
    objects have checks of their own, by what makes two entries the same (tenants by name, pools
    by shape)."""
    if not isinstance(value, BaseModel):
        return []
    found = []
    for name, info in model.model_fields.items():
        here = f"{path}.{info.alias or name}" if path else info.alias or name
        field = getattr(value, name, None)
        inner, item_model = _nested_model(info.annotation), _item_model(_optional(info.annotation))
        if inner is not None:
            found += repeated_items(here, inner, field)
        elif item_model is not None and isinstance(field, (tuple, list)):
            for i, item in enumerate(field):
                found += repeated_items(f"{here}[{i}]", item_model, item)
        elif typing.get_origin(_optional(info.annotation)) in (tuple, list) and isinstance(field, (tuple, list)):
            first: dict[Any, int] = {}
            for j, item in enumerate(field):
                if isinstance(item, Broken):
                    continue
                if item in first:
                    found.append(Problem(f"{here}[{j}]", f"{item} is listed twice (first at [{first[item]}])"))
                else:
                    first[item] = j
    return found


def _optional(annotation: Any) -> Any:
    """`X` for an annotation `X | None`, else the annotation."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0] if len(members) == 1 else annotation
    return annotation


def _salvage(path: str, model: type[BaseModel], raw: Any) -> Any:
    if not isinstance(raw, dict):
        return Broken(path)
    values, given = {}, set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        here = f"{path}.{key}" if path else key
        if key in raw or name in raw:
            values[name] = _salvage_value(here, model, name, raw[key] if key in raw else raw[name])
            given.add(name)
        elif info.is_required():
            values[name] = Broken(here)
        else:
            values[name] = info.get_default(call_default_factory=True)
    # Only the keys given count as set (model_fields_set), as for a model that validated.
    return model.model_construct(_fields_set=given, **values)


def _salvage_value(path: str, model: type[BaseModel], name: str, value: Any) -> Any:
    if wrong_scalar(model.model_fields[name].annotation, value):
        return Broken(path)  # reported by the model's own validator; never read as converted
    try:
        return _field_adapter(model, name).validate_python(value)
    except ValidationError:
        pass
    annotation = model.model_fields[name].annotation
    inner = _nested_model(annotation)
    if inner is not None and isinstance(value, dict):
        return _salvage(path, inner, value)
    item_model = _item_model(annotation)
    if item_model is not None and isinstance(value, list) and value:
        adapter = _adapter(item_model)
        items, salvaged = [], False
        for i, item in enumerate(value):
            try:
                items.append(adapter.validate_python(item))
            except ValidationError:
                items.append(_salvage(f"{path}[{i}]", item_model, item))
                salvaged = True
        if salvaged:  # else the list as a whole is wrong (e.g. too long), not one of its items
            return tuple(items) if typing.get_origin(annotation) is tuple else items
    return Broken(path)


@functools.lru_cache(maxsize=None)
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter:
    info = model.model_fields[name]
    return TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)


@functools.lru_cache(maxsize=None)
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """`Foo` for an annotation `Foo` or `Foo | None`."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    models = [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]
    return models[0] if len(models) == 1 else None


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """`Foo` for an annotation `tuple[Foo, ...]` or `list[Foo]`."""
    if typing.get_origin(annotation) not in (tuple, list):
        return None
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return args[0] if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel) else None
