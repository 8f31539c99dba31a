"""The one YAML reader (config/yaml_io.py) reads stack files as the Pulumi CLI does (gopkg.in/yaml.v3):
YAML 1.2 scalars, duplicate keys refused, excessive aliasing refused before anything is expanded."""

from __future__ import annotations

import shutil
import tracemalloc

import pytest
import yaml

from config import yaml_io
from config.stack_files import PROJECT_DIR, StackFileError, list_stacks, read_stack_values
from tools import plan as plan_tool

# Plain scalars YAML 1.1 (PyYAML) and yaml.v3 (the Pulumi CLI) read differently: what the CLI hands
# the program, and what PyYAML's safe_load made of it before this reader.
DIFFERENT = [
    ("no", "no", False),
    ("yes", "yes", True),
    ("on", "on", True),
    ("off", "off", False),
    ("Off", "Off", False),
    ("y", "y", "y"),  # PyYAML resolves only yes/no/on/off; kept to pin that y stays a string
    ("2:00", "2:00", 120),
    ("1:30:00", "1:30:00", 5400),
    ("0o17", 15, "0o17"),
    ("1e3", 1000.0, "1e3"),
    ("2024-01-31", "2024-01-31", None),  # a date for PyYAML (checked below by type)
    ("08", 8.0, "08"),
]


@pytest.mark.parametrize(("text", "cli", "pyyaml"), DIFFERENT, ids=[c[0] for c in DIFFERENT])
def test_scalars_read_as_the_cli_reads_them(text, cli, pyyaml):
    assert yaml_io.load(f"key: {text}\n")["key"] == cli
    assert type(yaml_io.load(f"key: {text}\n")["key"]) is type(cli)
    old = yaml.safe_load(f"key: {text}\n")["key"]
    if text == "y":
        assert old == cli
    elif pyyaml is None:
        assert not isinstance(old, str)  # datetime.date: a real difference
    else:
        assert old == pyyaml and (old != cli or type(old) is not type(cli))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True), ("False", False), ("TRUE", True), ("null", None), ("~", None), ("", None), ("12", 12), ("-3", -3),
        ("+7", 7), ("1_000", 1000), ("0x1F", 31), ("017", 15), ("0b101", 5), ("3.5", 3.5), (".5", 0.5), ("'no'", "no"),
        ('"8"', "8"), ("1e400", "1e400"), ("99999999999999999999", 1e20),
    ],
)
def test_scalars_both_readers_agree_on_or_yaml_v3_defines(text, value):
    assert yaml_io.load(f"key: {text}\n")["key"] == value


def test_a_key_given_twice_is_refused_a_merged_key_may_be_overridden():
    with pytest.raises(yaml.YAMLError, match="duplicate key 'a'"):
        yaml_io.load("a: 1\nb: 2\na: 3\n")
    assert yaml_io.load("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n")["m"] == {"x": 1, "y": 3}


def bomb(levels: int = 9, fan_out: int = 10) -> str:
    """A YAML "billion laughs": fan_out ** levels leaves (10^9 by default) from a few hundred bytes."""
    lines = ["config:", "  gpu-platform:environment: dev", "  gpu-platform:laughs:", "    l0: &l0 [lol]"]
    lines += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan_out)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_after_a_few_thousand_nodes_with_the_file_named(tmp_path):
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.bomb.yaml").write_text(bomb())
    tracemalloc.start()
    try:
        with pytest.raises(StackFileError) as caught:
            read_stack_values(tmp_path, "bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value).startswith("Pulumi.bomb.yaml: not valid YAML: document contains excessive aliasing")
    assert "gopkg.in/yaml.v3" in str(caught.value)
    assert peak < 5 * 2**20
    # The work is bounded: yaml.v3's rule stops the count long before the 10^9 nodes.
    with pytest.raises(yaml_io.YamlError) as counted:
        yaml_io.load(bomb(), source="Pulumi.bomb.yaml")
    assert 1000 < counted.value.decodes < 20_000


def test_the_plan_reports_an_alias_bomb_as_a_problem_of_the_stack_file(tmp_path, capsys):
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.bomb.yaml").write_text(bomb())
    assert plan_tool.main(["--stack", "bomb", "--project-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Pulumi.bomb.yaml: not valid YAML: document contains excessive aliasing" in err
    assert "internal error" not in err


def nested(depth: int, style: str) -> str:
    """A stack file whose one key nests `depth` levels: flow sequences, flow mappings or block sequences."""
    head = "config:\n  gpu-platform:environment: dev\n  gpu-platform:deep: "
    if style == "flow-sequence":
        return head + "[" * depth + "]" * depth + "\n"
    if style == "flow-mapping":
        return head + "{k: " * depth + "v" + "}" * depth + "\n"
    return head + "\n" + "".join("    " + "  " * i + "-\n" for i in range(depth))


@pytest.mark.parametrize("style", ["flow-sequence", "flow-mapping", "block-sequence"])
def test_a_document_nested_thousands_deep_is_refused_with_the_file_named(tmp_path, capsys, style):
    """3,000 levels (yaml.v3 itself reads up to 10,000): a YamlError naming the file, which the plan
    reports as a problem of the stack file, with no traceback."""
    with pytest.raises(yaml_io.YamlError) as caught:
        yaml_io.load(nested(3000, style), source="Pulumi.deep.yaml")
    assert str(caught.value).startswith("Pulumi.deep.yaml: nested too deeply for this reader (past a few hundred levels")
    assert "gopkg.in/yaml.v3 stops at 10,000" in str(caught.value)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.deep.yaml").write_text(nested(3000, style))
    assert plan_tool.main(["--stack", "deep", "--project-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Pulumi.deep.yaml: not valid YAML: nested too deeply for this reader" in err
    assert "internal error" not in err and "Traceback" not in err and len(err.splitlines()) < 10


def test_a_document_nested_as_deep_as_a_config_could_reads():
    document = yaml_io.load(nested(50, "flow-mapping"))["config"]["gpu-platform:deep"]
    for _ in range(49):
        document = document["k"]
    assert document == {"k": "v"}


def test_honest_aliases_read_as_written():
    text = "pool: &pool {gpu: nvidia-l4, maxGpus: 4}\n" + "".join(f"t{i}: {{name: t{i}, pool: *pool}}\n" for i in range(50))
    document = yaml_io.load(text)
    assert document["t49"] == {"name": "t49", "pool": {"gpu": "nvidia-l4", "maxGpus": 4}}
    # Aliases within yaml.v3's share: 100 anchors' values reused 9 times each among their own 1,000 values.
    many = "".join(f"a{i}: &a{i} [{', '.join(['x'] * 10)}]\n" for i in range(100))
    many += "b: [" + ", ".join(f"*a{i % 100}" for i in range(900)) + "]\n"
    assert len(yaml_io.load(many)["b"]) == 900


def test_an_anchor_that_contains_itself_is_refused():
    with pytest.raises(yaml_io.YamlError, match="contains an alias of itself"):
        yaml_io.load("a: &x [1, *x]\n", source="Pulumi.x.yaml")


def test_every_committed_stack_file_and_the_bootstraps_read():
    for stack in list_stacks(PROJECT_DIR):
        assert read_stack_values(PROJECT_DIR, stack)
    assert yaml_io.load((PROJECT_DIR / "bootstrap" / "Pulumi.ci.yaml").read_text(), source="Pulumi.ci.yaml")["config"]
