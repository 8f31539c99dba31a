"""Inputs that used to pass silently, or were reported in words that did not say what to write:
each is now a problem (or a warning) naming its key path and what is allowed, all of them at once.

Checked on the stacks as shipped, through load_stack as the program and the plan run it; nothing
here evaluates the program, so each case costs milliseconds.
"""

from __future__ import annotations

import typing

import pytest

from config.base import _optional, repeated_items
from config.capacity import CapacityEntry
from config.catalog import load_catalog
from config.stack import NS, load_stack
from config.stack_files import StackFileError, read_stack_values
from shipped_stacks import SHIPPED_DIR, problems
from tools.config_reference import documented_models

CPU_MACHINES = ", ".join(load_catalog().cpu_machines())


# --- repeats, in every list key -------------------------------------------------------------------


def _np(values: dict) -> dict:
    return values[f"{NS}:nodeProvider"]


def _tenant(values: dict, i: int = 0) -> dict:
    return values[f"{NS}:tenants"][i]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda v: _np(v).update(gpuTypes=["nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-t4"]),
            "nodeProvider.gpuTypes[2]: nvidia-tesla-t4 is listed twice (first at [0])",
        ),
        (
            lambda v: _np(v).update(zones=["europe-west4-a", "europe-west4-b", "europe-west4-a"]),
            "nodeProvider.zones[2]: europe-west4-a is listed twice (first at [0])",
        ),
        (
            lambda v: _np(v).update(cpuMachineTypes=["e2-standard-2", "e2-standard-2"]),
            "nodeProvider.cpuMachineTypes[1]: e2-standard-2 is listed twice (first at [0])",
        ),
        (
            lambda v: v[f"{NS}:cluster"].update(maintenanceWindow={"days": ["MO", "TU", "WE", "TH", "FR", "SA", "MO"]}),
            "cluster.maintenanceWindow.days[6]: MO is listed twice (first at [0])",
        ),
        (
            lambda v: _tenant(v)["gpuPools"][0].update(machineTypes=["g2-standard-4", "g2-standard-4"]),
            "tenants[0].gpuPools[0].machineTypes[1]: g2-standard-4 is listed twice (first at [0])",
        ),
        (
            lambda v: _tenant(v, 1)["access"].update(users=["alice", "bob", "alice"]),
            "tenants[1].access.users[2]: alice is listed twice (first at [0])",
        ),
        (
            lambda v: v[f"{NS}:cluster"].update(
                masterAuthorizedNetworks=[{"cidr": "203.0.113.0/24", "name": "office"}, {"cidr": "203.0.113.0/24", "name": "vpn"}]
            ),
            "cluster.masterAuthorizedNetworks[1].cidr: 203.0.113.0/24 is listed twice (also masterAuthorizedNetworks[0])",
        ),
    ],
)
def test_a_repeated_entry_is_refused_at_its_index(stack_values, edit, expected):
    values = stack_values("dev")
    edit(values)
    assert problems(values) == [expected]


def test_repeated_gpu_types_no_longer_double_the_node_types(stack_values):
    """The case found: gpuTypes listing a type twice gave 84 node types instead of 52, each name
    twice in the NodeProvider. Refused now, nothing generated."""
    values = stack_values("dev")
    _np(values)["gpuTypes"] = ["nvidia-tesla-t4", "nvidia-l4", "nvidia-l4"]
    assert problems(values) == ["nodeProvider.gpuTypes[2]: nvidia-l4 is listed twice (first at [1])"]


def _scalar_lists(model) -> list[str]:
    return [
        name
        for name, field in model.model_fields.items()
        if typing.get_origin(_optional(field.annotation)) in (tuple, list)
        and not any(isinstance(a, type) and hasattr(a, "model_fields") for a in typing.get_args(_optional(field.annotation)))
    ]


@pytest.mark.parametrize(
    "model, name",
    [(model, name) for model in documented_models() for name in _scalar_lists(model)],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_every_list_of_values_of_every_model_refuses_repeats(model, name):
    """Every list key of plain values any config model declares (a field added later included):
    a repeat is a problem at its index, whatever the list holds."""
    field = model.model_fields[name]
    item = typing.get_args(_optional(field.annotation))[0]
    value = typing.get_args(item)[0] if typing.get_origin(item) is typing.Literal else {str: "x", int: 1, CapacityEntry: "spot"}[item]
    instance = model.model_construct(**{name: (value, value)})
    key = field.alias or name
    assert [str(p) for p in repeated_items("here", model, instance)] == [f"here.{key}[1]: {value} is listed twice (first at [0])"]
    assert _scalar_lists(model)  # the parametrization found the list keys


# --- machine types, image families, access names ------------------------------------------------


def test_a_misspelt_system_pool_machine_type_is_refused_like_a_cpu_machine_type(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["systemPool"]["machineType"] = "e2-standrad-4"
    _np(values)["cpuMachineTypes"] = ["e2-standard-2", "e2-standrad-4"]
    allowed = f"known: {CPU_MACHINES} (another one needs its entry under `machines` and its prices in config/catalog.yaml)"
    assert problems(values) == [
        f"cluster.systemPool.machineType: 'e2-standrad-4' is not a CPU machine type of the catalog; {allowed}",
        f"nodeProvider.cpuMachineTypes[1]: 'e2-standrad-4' is not a CPU machine type of the catalog; {allowed}",
    ]


def test_a_gpu_machine_type_for_the_system_pool_is_still_refused_as_such(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["systemPool"]["machineType"] = "g2-standard-4"
    assert problems(values) == ["cluster.systemPool.machineType: 'g2-standard-4' is a GPU machine; the system pool runs only the platform"]


def test_an_unknown_gpu_image_family_is_warned_about_with_how_to_add_it(stack_values):
    values = stack_values("dev")
    _np(values)["gpuImageFamily"] = "common-cu129-ubuntu-2404-nvidia-580"
    env = load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    [warning] = [w for w in env.warnings if w.startswith("nodeProvider.gpuImageFamily")]
    image = load_catalog().gpu_image
    assert f"'common-cu129-ubuntu-2404-nvidia-580' is not an image family config/catalog.yaml knows (images.gpu.families: {image.family})" in warning
    assert f"gcloud compute images describe-from-family common-cu129-ubuntu-2404-nvidia-580 --project {image.project}" in warning
    assert warning.endswith("then add it to images.gpu.families in config/catalog.yaml.")
    # The family the catalog knows is no warning, nor is an unset one.
    _np(values)["gpuImageFamily"] = image.family
    assert not [w for w in load_stack(values, stack="dev", project_dir=SHIPPED_DIR).warnings if "gpuImageFamily" in w]


ACCESS_NAME = (
    "allowed: a Kubernetes object name, at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
)


def test_access_names_are_names_the_platform_accepts_and_each_once(stack_values):
    """The case found: teams [nlp, nlp, "NLP Team!"] passed."""
    values = stack_values("dev")
    _tenant(values)["access"] = {"teams": ["nlp", "nlp", "NLP Team!"], "users": ["alice@example.com", "ops.bot", "-x"]}
    assert problems(values) == [
        "tenants[0].access.teams[1]: nlp is listed twice (first at [0])",
        f"tenants[0].access.teams[2]: 'NLP Team!' is not a platform team name; {ACCESS_NAME}",
        f"tenants[0].access.users[0]: 'alice@example.com' is not a platform user name; {ACCESS_NAME}",
        f"tenants[0].access.users[2]: '-x' is not a platform user name; {ACCESS_NAME}",
    ]


@pytest.mark.parametrize("name", ["nlp", "ml-platform", "ops.bot", "a" * 253, "team-7"])
def test_names_the_platform_accepts_pass(stack_values, name):
    values = stack_values("dev")
    _tenant(values)["access"] = {"teams": [name]}
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


# --- messages that say what to write ------------------------------------------------------------


@pytest.mark.parametrize("key, value, written", [("idleAfter", 60, "60s"), ("terminationGracePeriod", 1800, "1800s"), ("idleAfter", 1.5, "1.5s")])
def test_a_number_for_a_duration_says_to_write_its_unit(stack_values, key, value, written):
    values = stack_values("dev")
    _tenant(values)["gpuPools"][0][key] = value
    assert problems(values) == [
        f"tenants[0].gpuPools[0].{key}: {value} is a number, not a duration; write it with its unit, e.g. {written} (durations: 30s, 5m, 1h30m)"
    ]


def test_a_stack_file_without_config_says_so(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((SHIPPED_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.dev.yaml").write_text("gpu-platform:environment: dev\ngcp:project: acme-ml-dev\n")
    with pytest.raises(StackFileError) as caught:
        read_stack_values(tmp_path, "dev")
    assert str(caught.value) == (
        "Pulumi.dev.yaml: gpu-platform:environment, gcp:project at the top level; configuration goes under a `config:` key, indented below it"
    )
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\nconfg: {}\n")
    with pytest.raises(StackFileError, match=r"unknown top-level key\(s\) confg; allowed: secretsprovider, encryptedkey, encryptionsalt, config, environment"):
        read_stack_values(tmp_path, "dev")


@pytest.mark.parametrize("typo, meant", [("gcp:projet", "gcp:project"), ("gcp:regoin", "gcp:region"), ("gcp:credentails", "gcp:credentials")])
def test_a_misspelt_gcp_key_names_the_key_meant(stack_values, typo, meant):
    values = stack_values("dev")
    if meant in values:
        values[typo] = values.pop(meant)
    else:
        values[typo] = "x"
    found = problems(values)
    assert f"{typo}: unknown key: not a setting of the gcp provider (pulumi-gcp 10.2.0); did you mean `{meant}`?" in found


def test_gcp_provider_settings_other_than_ours_are_left_alone(stack_values):
    values = stack_values("dev")
    values["gcp:zone"] = "europe-west4-a"
    load_stack(values, stack="dev", project_dir=SHIPPED_DIR)


# --- every problem at once ------------------------------------------------------------------------


def test_six_problems_of_these_kinds_at_once_are_six_reported(stack_values):
    values = stack_values("dev")
    values["gcp:projet"] = "acme-ml-dev"  # 1: a misspelt key beside the right one
    _np(values)["gpuTypes"] = ["nvidia-tesla-t4", "nvidia-l4", "nvidia-l4"]  # 2
    values[f"{NS}:cluster"]["systemPool"]["machineType"] = "e2-standrad-4"  # 3
    _tenant(values)["access"] = {"teams": ["nlp", "NLP Team!"]}  # 4
    _tenant(values, 1)["gpuPools"][0]["idleAfter"] = 60  # 5
    _np(values)["cpuMachineTypes"] = ["e2-standard-2", "e2-standard-4", "e2-standard-2"]  # 6
    assert problems(values) == [
        "nodeProvider.gpuTypes[2]: nvidia-l4 is listed twice (first at [1])",
        "nodeProvider.cpuMachineTypes[2]: e2-standard-2 is listed twice (first at [0])",
        f"tenants[0].access.teams[1]: 'NLP Team!' is not a platform team name; {ACCESS_NAME}",
        "tenants[1].gpuPools[0].idleAfter: 60 is a number, not a duration; write it with its unit, e.g. 60s (durations: 30s, 5m, 1h30m)",
        f"cluster.systemPool.machineType: 'e2-standrad-4' is not a CPU machine type of the catalog; known: {CPU_MACHINES} "
        "(another one needs its entry under `machines` and its prices in config/catalog.yaml)",
        "gcp:projet: unknown key: not a setting of the gcp provider (pulumi-gcp 10.2.0); did you mean `gcp:project`?",
    ]
