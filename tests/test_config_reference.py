"""The configuration reference (docs/configuration.md) and Pulumi.yaml's descriptions are generated
from the config models (tools/config_reference.py, `make docs`): current, complete, and right
about any model, whatever its fields are."""

from __future__ import annotations

import re
from typing import Literal

import pytest
import yaml
from pydantic import Field

from config import yaml_io
from config.base import ConfigModel, Duration
from config.stack import KNOWN_KEYS, NS
from config.stack_files import PROJECT_DIR
from config.stack_keys import StackKeys
from tools import config_reference as ref

PAGE = (PROJECT_DIR / "docs" / "configuration.md").read_text()
PULUMI_YAML = (PROJECT_DIR / "Pulumi.yaml").read_text()


def test_the_reference_page_is_current():
    """Fails when a model changed without `make docs`."""
    assert ref.reference() in PAGE, "docs/configuration.md is stale: run `make docs`"
    assert ref.stale() == []


def test_pulumi_yaml_descriptions_come_from_the_models():
    declared = {key: spec["description"] for key, spec in yaml_io.load(PULUMI_YAML)["config"].items()}
    assert declared == ref.pulumi_yaml_descriptions(), "Pulumi.yaml is stale: run `make docs`"


def test_the_documented_keys_are_the_keys_the_program_reads():
    """StackKeys, the source of the reference and of Pulumi.yaml, is the program's namespace."""
    assert {f"{NS}:{f.alias}" for f in StackKeys.model_fields.values()} == KNOWN_KEYS


@pytest.mark.parametrize("model", ref.documented_models(), ids=lambda m: m.__name__)
def test_every_field_has_a_one_sentence_docstring(model):
    """The convention (config/base.py ConfigModel): a docstring directly below every field, one
    sentence ending with a period; and one on the model."""
    assert (model.__doc__ or "").strip(), f"{model.__name__} has no docstring"
    for name, field in model.model_fields.items():
        text = " ".join((field.description or "").split())
        assert text.endswith("."), f"{model.__name__}.{name}: {text!r} (one sentence, ending with a period)"
        # A second sentence would start after ". " with a capital (abbreviations such as "e.g." do not).
        assert not re.search(r"[a-z0-9)]\. [A-Z]", text), f"{model.__name__}.{name}: one sentence, not several: {text!r}"


def test_every_key_of_every_model_is_a_row_of_the_reference():
    for model in ref.documented_models():
        for field in model.model_fields.values():
            assert re.search(rf"^\| `([^`]*\.|[^`]*\[\]\.)?{re.escape(field.alias)}` \|", PAGE, flags=re.M) or f"`{NS}:{field.alias}`" in PAGE or f"`gcp:{field.alias}`" in PAGE


def test_a_missing_docstring_is_named():
    class Undocumented(ConfigModel):
        """A model with one field left undocumented."""

        documented: int = 1
        """Has its docstring."""
        forgotten: int = 2

    with pytest.raises(ValueError, match=r"test_config_reference\.Undocumented\.forgotten has no docstring"):
        ref._rows(Undocumented, "", ref.load_catalog(), parent_default=False)


# --- any model: nested objects, lists of objects, Literals, unions, defaults of every kind -------------


class Inner(ConfigModel):
    """An inner object."""

    size: int = Field(ge=20)
    """Size in GB."""
    kind: Literal["a", "b"] = "a"
    """Its kind."""


class Item(ConfigModel):
    """An entry of a list."""

    label: str
    """The entry's label."""


class Defaulted(ConfigModel):
    """An object whose keys all have defaults."""

    on: bool = True
    """Whether it is on."""


class Example(ConfigModel):
    """Every kind of field the generator must cope with."""

    required_name: str
    """Required, no default."""
    count: int = Field(1, ge=1, le=8)
    """Bounded on both sides."""
    ratio: float | None = None
    """Optional, unset by default."""
    mode: Literal["fast", "safe"] | None = None
    """A Literal that may be left out."""
    days: tuple[Literal["MO", "TU"], ...] = ("MO",)
    """A list of Literals with a default."""
    labels: dict[str, str] = {}
    """A map."""
    version: str = "2"
    """A string that YAML would read as a number."""
    start: str = "3:00"
    """A string YAML 1.1 would read as a number (sexagesimal)."""
    plain: str = "03:00"
    """A string as it is."""
    wait: Duration = "60s"
    """A duration."""
    either: str | int = "x"
    """A union."""
    inner: Inner = Inner(size=200)
    """An object with a default of its own."""
    flags: Defaulted = Defaulted()
    """An object of defaults."""
    items: tuple[Item, ...] = Field(min_length=1)
    """A list of objects, at least one."""
    by_name: dict[str, Item] = {}
    """A map of objects."""
    choice: Item | Defaulted | None = None
    """A union of objects."""


def test_the_generator_copes_with_any_model():
    rows = {row[0]: row[1:] for row in ref._rows(Example, "", ref.load_catalog(), parent_default=False)}
    assert rows == {
        "`requiredName`": ["string", "required", "", "Required, no default."],
        "`count`": ["whole number", "`1`", "1–8", "Bounded on both sides."],
        "`ratio`": ["number", "none", "", "Optional, unset by default."],
        "`mode`": ["string", "none", "`fast`, `safe`", "A Literal that may be left out."],
        "`days`": ["list of strings", "`[MO]`", "each one of `MO`, `TU`", "A list of Literals with a default."],
        "`labels`": ["map of strings", "`{}`", "", "A map."],
        "`version`": ["string", '`"2"`', "", "A string that YAML would read as a number."],
        "`start`": ["string", '`"3:00"`', "", "A string YAML 1.1 would read as a number (sexagesimal)."],
        "`plain`": ["string", "`03:00`", "", "A string as it is."],
        "`wait`": ["duration", "`60s`", "", "A duration."],
        "`either`": ["string or whole number", "`x`", "", "A union."],
        "`inner`": ["mapping", "`{size: 200, kind: a}`", "", "An object with a default of its own."],
        "`inner.size`": ["whole number", "required in a given `inner`", "≥ 20", "Size in GB."],
        "`inner.kind`": ["string", "`a`", "`a`, `b`", "Its kind."],
        "`flags`": ["mapping", "each key's default", "", "An object of defaults."],
        "`flags.on`": ["true/false", "`true`", "", "Whether it is on."],
        "`items`": ["list of mappings", "required", "at least 1 item", "A list of objects, at least one."],
        "`items[].label`": ["string", "required", "", "The entry's label."],
        "`byName`": ["map of mappings", "`{}`", "", "A map of objects."],
        "`byName.<key>.label`": ["string", "required", "", "The entry's label."],
        "`choice`": ["mapping", "none", "", "A union of objects."],
        "`choice.label`": ["string", "required in a given `choice`", "", "The entry's label."],
        "`choice.on`": ["true/false", "`true`", "", "Whether it is on."],
    }


def test_values_taken_from_the_catalog_are_the_ones_the_checks_use():
    from config.catalog import load_catalog

    catalog = load_catalog()
    gpu_types = next(line for line in PAGE.splitlines() if line.startswith("| `gpuTypes` |"))
    assert all(f"`{gpu}`" in gpu_types for gpu in catalog.gpus)
    machine = next(line for line in PAGE.splitlines() if line.startswith("| `systemPool.machineType` |"))
    assert all(f"`{m}`" in machine for m in catalog.cpu_machines())


def test_pulumi_yaml_descriptions_are_rewritten_in_place_and_nothing_else():
    text = "name: x\n# a comment\nconfig:\n  cluster:\n    type: object\n    # kept\n    description: \"old\"\n  other:\n    description: keep\n"
    assert ref.with_descriptions(text, {"cluster": 'new: "quoted" · ü'}) == text.replace('"old"', '"new: \\"quoted\\" · ü"')


def test_the_bounds_the_checks_enforce_beyond_the_schema_are_in_the_reference(stack_values):
    """A pool's durations and a backup's retainDays under the default daily schedule: the reference's
    bounds column says where the checks start refusing, and they do there, naming the key."""
    from config.stack import load_stack
    from shipped_stacks import SHIPPED_DIR, problems

    def bounds(key: str) -> str:
        return next(line for line in PAGE.splitlines() if line.startswith(f"| `{key}` |")).split(" | ")[3]

    assert bounds("gpuPools[].idleAfter") == "at most 24h"
    assert bounds("gpuPools[].terminationGracePeriod") == "1m–24h"
    assert bounds("backup.retainDays").startswith("1–360 with the default daily schedule; at most 360 × the days between two backups, up to 365")

    def dev(idle_after: str, grace: str, retain_days: int) -> dict:
        values = stack_values("dev")
        tenant = values[f"{NS}:tenants"][0]
        tenant["gpuPools"][0].update(idleAfter=idle_after, terminationGracePeriod=grace)
        tenant["backup"] = {"retainDays": retain_days}  # the default schedule: daily
        return values

    load_stack(dev("24h", "1m", 360), stack="dev", project_dir=SHIPPED_DIR)  # at the bounds: accepted
    found = problems(dev("24h1s", "59s", 361))
    assert sorted(p.split(":", 1)[0] for p in found) == [
        "tenants[0].backup.retainDays", "tenants[0].gpuPools[0].idleAfter", "tenants[0].gpuPools[0].terminationGracePeriod"
    ], found
