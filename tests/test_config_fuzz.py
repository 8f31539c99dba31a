"""Arbitrary values for every config key: always a clean ConfigError naming key paths (a
pulumi.RunError with nothing registered, through the program), never another exception.

The keys are found by walking the config models (`model_fields`), so a key added to a model is
covered without touching this file."""

from __future__ import annotations

import copy
import math
import os
import types
import typing
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from config.environment import ClusterConfig, PlatformConfig
from config.node_provider import NodeProviderConfig
from config.errors import ConfigError
from config.stack import NS, EnvironmentStack, TenantStack, load_stack
from config.stack_files import read_stack_values
from config.tenant import Tenant
from tools.mock_engine import config_strings
from shipped_stacks import SHIPPED_DIR, run_shipped

# Reproducible in CI (a failure there is the same failure here); explores anew on every local run.
DERANDOMIZE = os.environ.get("CI", "").lower() in ("1", "true")


def key_paths(model: type[BaseModel], prefix: tuple = ()) -> list[tuple]:
    """Every key path of `model`: its keys, the keys of nested objects and of the first item of
    lists of objects."""
    paths = []
    for name, info in model.model_fields.items():
        path = (*prefix, info.alias or name)
        paths.append(path)
        for inner, index in _models_in(info.annotation):
            paths.extend(key_paths(inner, path + index))
    return paths


def _models_in(annotation: Any) -> list[tuple[type[BaseModel], tuple]]:
    """The models in an annotation, each with the index that reaches it: `Foo`, `Foo | str`,
    `tuple[Foo, ...]`, `list[Foo]`, `dict[str, Foo]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, ())]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [found for arg in args for found in _models_in(arg)]
    if origin in (tuple, list):
        return [(model, (0, *index)) for arg in args if arg is not Ellipsis for model, index in _models_in(arg)]
    if origin is dict and len(args) == 2:
        return [(model, ("some-key", *index)) for model, index in _models_in(args[1])]
    return []


ENVIRONMENT_PATHS = [
    ("gpu-platform:environment",),
    ("gcp:project",),
    ("gcp:region",),
    ("gpu-platform:tenants",),
    ("gpu-platform:environmentStack",),
    ("gpu-platform:tenant",),
    ("gpu-platform:platformAdminPassword",),
    *((f"{NS}:cluster", *p) for p in [(), *key_paths(ClusterConfig)]),
    *((f"{NS}:platform", *p) for p in [(), *key_paths(PlatformConfig)]),
    *((f"{NS}:nodeProvider", *p) for p in [(), *key_paths(NodeProviderConfig)]),
    *((f"{NS}:tenants", i, *p) for i in (0, 1) for p in [(), *key_paths(Tenant)]),
]
TENANT_PATHS = [
    ("gpu-platform:environment",),
    ("gpu-platform:environmentStack",),
    ("gpu-platform:nodeProvider",),
    ("gpu-platform:platformAdminPassword",),
    *((f"{NS}:tenant", *p) for p in [(), *key_paths(Tenant)]),
]
KEYS = sorted({part for path in ENVIRONMENT_PATHS + TENANT_PATHS for part in path if isinstance(part, str)})

# Values close to valid ones find the checks' edges; the rest is junk of every kind.
PLAUSIBLE = [
    "10.160.0.1/22", "10.160.0.0/22", "10.160.8.0/22", "10.0.0.0/8", "0.0.0.0/0", "8.8.8.0/24", "10.160.0.0", "10.160.0.0/33",
    "nvidia-l4", "nvidia-tesla-t4", "nvidia-h100-80gb", "europe-west4", "europe-west4-a", "us-central1-a",
    "60s", "0s", "1h30m", "30m", "v25.10.1", "4.11.2", "0.36.1", "4.8.0", "e2-standard-4", "g2-standard-8", "a3-highgpu-8g",
    "pd-balanced", "hyperdisk-balanced", "dev", "prod", "staging", "acme/gpu-platform/dev", "acme/gpu-platform/prod",
    "acme/gpu-platform/team-vision-dev", "REGULAR", "RAPID", "MO", "03:00", "24:00", "vision", "nlp", "speech", "Vision",
    "", " ", "{", "[", "{}", "[]", "null", "true", "-1", "1e400", "x" * 300, "ünïcødé", "名前", "\x00",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=20),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(PLAUSIBLE),
)
JUNK = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


def with_values(base: dict[str, Any], changes: list[tuple[tuple, Any]]) -> dict[str, Any]:
    """A copy of `base` with each path set to its value; missing containers are created, a
    container of the wrong kind is replaced."""
    values = copy.deepcopy(base)
    for path, value in changes:
        container: Any = values
        for part, following in zip(path, path[1:]):
            child = container[part] if _has(container, part) else None
            if not isinstance(child, list if isinstance(following, int) else dict):
                child = [] if isinstance(following, int) else {}
                _put(container, part, child)
            container = child
        _put(container, path[-1], value)
    return values


def _has(container: Any, part: Any) -> bool:
    return part in container if isinstance(container, dict) else part < len(container)


def _put(container: Any, part: Any, value: Any) -> None:
    if isinstance(container, list):
        while len(container) <= part:
            container.append({})
    container[part] = value


def changes_for(paths: list[tuple]) -> st.SearchStrategy:
    return st.lists(st.tuples(st.sampled_from(paths), JUNK), min_size=1, max_size=4)


STACKS = {stack: read_stack_values(SHIPPED_DIR, stack) for stack in ("dev", "prod", "team-vision-dev")}
PATHS = {"dev": ENVIRONMENT_PATHS, "prod": ENVIRONMENT_PATHS, "team-vision-dev": TENANT_PATHS}


@st.composite
def stack_with_junk(draw) -> tuple[str, dict[str, Any]]:
    stack = draw(st.sampled_from(sorted(STACKS)))
    return stack, with_values(STACKS[stack], draw(changes_for(PATHS[stack])))


def assert_clean(values: dict[str, Any], stack: str) -> None:
    try:
        loaded = load_stack(values, stack=stack, project_dir=SHIPPED_DIR)
    except ConfigError as e:
        assert e.problems, "a ConfigError without problems"
        for problem in e.problems:
            assert problem.path and problem.message, problem
        assert str(e).startswith(f"{len(e.problems)} configuration problem")
    else:
        assert isinstance(loaded, (EnvironmentStack, TenantStack))


def test_the_walk_finds_nested_keys():
    """The generator reaches keys inside nested objects and list items (so the fuzzing does)."""
    assert (f"{NS}:tenants", 0, "gpuPools", 0, "maxGpus") in ENVIRONMENT_PATHS
    assert (f"{NS}:cluster", "network", "podsCidr") in ENVIRONMENT_PATHS
    assert (f"{NS}:tenant", "network", "cidr") in TENANT_PATHS
    assert with_values({"a": [{"b": 1}]}, [(("a", 1, "c", "d"), 5)]) == {"a": [{"b": 1}, {"c": {"d": 5}}]}


@settings(max_examples=200, deadline=None, derandomize=DERANDOMIZE, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_with_junk())
def test_any_value_of_any_key_gives_a_clean_config_error(case):
    stack, values = case
    assert_clean(values, stack)


@settings(max_examples=100, deadline=None, derandomize=DERANDOMIZE, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_with_junk())
def test_any_value_as_the_engine_hands_it_over(case):
    """The Pulumi engine passes every top-level value as a string, objects as JSON."""
    stack, values = case
    assert_clean(config_strings(values)[0], stack)


@settings(max_examples=15, deadline=None, derandomize=DERANDOMIZE, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_with_junk())
def test_through_the_program_bad_values_stop_before_anything_is_registered(dev_run, case):
    stack, values = case
    outputs = {read_stack_values(SHIPPED_DIR, "team-vision-dev")[f"{NS}:environmentStack"]: dev_run.outputs}
    try:
        run_shipped(values, stack=stack, stack_outputs=outputs)
    except pulumi.RunError as e:
        assert str(e).splitlines()[0].endswith("nothing was created:") or "configuration problem" in str(e), str(e)
        if stack != "team-vision-dev":  # a tenant stack's last check waits for the deployed environment
            assert e.registrations == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "path, value",
    [
        ((f"{NS}:nodeProvider", "prices", "g2-standard-8"), math.inf),
        ((f"{NS}:nodeProvider", "prices", "g2-standard-8"), 1e306),
        ((f"{NS}:nodeProvider", "gpuQuota", "nvidia-l4"), math.nan),
        (("gcp:region",), 5),
        ((f"{NS}:tenants", 0), None),
        ((f"{NS}:tenants", 0, "network", "cidr"), 10),
        ((f"{NS}:cluster", "labels"), {7: "x"}),
        ((f"{NS}:platformAdminPassword",), 5),  # once accepted silently
        ((f"{NS}:platformAdminPassword",), {"a": 1}),
        ((f"{NS}:platformAdminPassword",), "x"),
    ],
)
def test_found_by_fuzzing(path, value):
    """Inputs that once ended in another exception (or were accepted and broke later)."""
    with pytest.raises(ConfigError):
        load_stack(with_values(STACKS["dev"], [(path, value)]), stack="dev", project_dir=SHIPPED_DIR)
