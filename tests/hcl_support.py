"""Helpers shared by the template tests (test_node_template*.py, test_environment_template.py).

Two kinds of help, neither needs a cloud:
- reading a template parsed with python-hcl2, which returns expressions as strings: "${expr}" for
  an expression, '"text"' for a quoted template, and keeps the quotes of block labels;
- evaluating a template's locals and expressions with OpenTofu (or Terraform) for concrete
  `var.vcluster` values, without any provider: the locals are copied into a scratch module
  together with templates/vcluster_variable.tf and applied without any resource.
`require`, the rule for a tool a test needs (fail in CI, skip elsewhere), also serves
monitoring_support.py's promtool (test_monitoring_collector.py's check).

pytest puts this directory on sys.path (default "prepend" import mode, no tests/__init__.py), so
the test files import it as `hcl_support`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import hcl2
import pytest

VARIABLE_TF = Path(__file__).resolve().parents[1] / "templates" / "vcluster_variable.tf"


# --- python-hcl2 output → HCL text -------------------------------------------------------------


def parse(path: Path) -> dict:
    return hcl2.loads(path.read_text())


def label(key: str) -> str:
    """python-hcl2 keeps the quotes of block labels: '"google"' → google."""
    return key.strip('"')


def blocks(doc: dict, kind: str) -> dict[str, dict]:
    """Two-label blocks (resource, data) as {"type.name": body}; one-label blocks (variable,
    output, provider, module) as {"name": body}."""
    found: dict[str, dict] = {}
    for entry in doc.get(kind, []):
        for first, body in entry.items():
            if isinstance(body, dict) and not body.get("__is_block__"):
                for second, inner in body.items():
                    found[f"{label(first)}.{label(second)}"] = inner
            else:
                found[label(first)] = body
    return found


def expr(value) -> str:
    """The HCL text of a parsed value: "${x}" → x; quoted strings, lists and objects rebuilt."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if value.startswith("${") and value.endswith("}"):
            return value[2:-1]
        return value
    if isinstance(value, list):
        return "[" + ", ".join(expr(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{k} = {expr(v)}" for k, v in value.items() if not k.startswith("__"))
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"unexpected value {value!r}")


def unquote(value: str) -> str:
    """The text of a quoted template, asserting that it is one: '"text"' → text."""
    assert value.startswith('"') and value.endswith('"'), value
    return value[1:-1]


def required_providers(doc: dict) -> tuple[str, dict[str, tuple[str, str]]]:
    """A template's `required_version` and its providers as {name: (source, version)}."""
    (terraform,) = doc["terraform"]
    providers = {k: v for block in terraform["required_providers"] for k, v in block.items() if not k.startswith("__")}
    return unquote(terraform["required_version"]), {k: (unquote(v["source"]), unquote(v["version"])) for k, v in providers.items()}


def precondition(preconditions: list[dict], pattern: str) -> dict:
    """The one precondition whose error message matches `pattern` (re.search); asserts there is
    exactly one."""
    matching = [p for p in preconditions if re.search(pattern, unquote(p["error_message"]))]
    assert len(matching) == 1, f"expected one precondition whose message matches {pattern!r}, found {len(matching)}"
    return matching[0]


# --- evaluation with OpenTofu --------------------------------------------------------------------


def locals_source(path: Path) -> str:
    """The template's locals blocks, verbatim (fmt-formatted files close blocks in column 0)."""
    found = re.findall(r"^locals \{\n.*?^\}\n", path.read_text(), flags=re.M | re.S)
    assert found, f"no locals block in {path}"
    return "\n".join(found)


def hcl_string(text: str) -> str:
    """`text` as an HCL string literal, with template sequences (${, %{) escaped."""
    return json.dumps(text).replace("${", "$${").replace("%{", "%%{")


# The release CI uses (.ci/run and .github/workflows/pulumi.yml pin the same; a test checks).
OPENTOFU_VERSION = "1.8.8"
MISSING_TOFU = (
    "neither tofu nor terraform is on PATH, so the OpenTofu templates cannot be evaluated: install OpenTofu "
    f"{OPENTOFU_VERSION} (https://opentofu.org/docs/intro/install/) or Terraform 1.11 (https://developer.hashicorp.com/terraform/install)"
)


def tofu() -> str | None:
    """The OpenTofu binary on PATH, else the Terraform one, else None."""
    return shutil.which("tofu") or shutil.which("terraform")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(binary: str | None, missing: str) -> str:
    """`binary`, found on PATH. Without it a test fails in CI (a green run must mean the tool ran)
    and skips elsewhere, saying why (`missing`)."""
    if binary is None:
        if in_ci():
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    return binary


def require_tofu() -> str:
    """The binary the template tests evaluate with."""
    return require(tofu(), MISSING_TOFU)


def run(binary: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run `binary args` in `cwd` non-interactively, without any CLI configuration."""
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1", "TF_CLI_CONFIG_FILE": os.devnull}
    return subprocess.run([binary, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def evaluate(binary: str, workdir: Path, template: Path, probe: dict[str, str], scenarios: dict[str, dict]) -> dict[str, dict]:
    """Evaluate `probe` (name → HCL expression over the template's locals and var.vcluster) for
    every scenario (name → var.vcluster value) in one OpenTofu run: the locals plus
    templates/vcluster_variable.tf form a scratch module, called once per scenario."""
    module = workdir / "template"
    module.mkdir(parents=True)
    shutil.copy(VARIABLE_TF, module / "vcluster_variable.tf")
    (module / "locals.tf").write_text(locals_source(template))
    fields = "\n".join(f"    {hcl_string(name)} = {expression}" for name, expression in probe.items())
    (module / "probe.tf").write_text(f'output "probe" {{\n  sensitive = true\n  value = {{\n{fields}\n  }}\n}}\n')
    root, names = [], {}
    for index, (name, vcluster) in enumerate(scenarios.items()):
        ident = f"s{index}"
        names[ident] = name
        (workdir / f"{ident}.json").write_text(json.dumps(vcluster))
        root.append(
            f'module "{ident}" {{\n  source   = "./template"\n  vcluster = jsondecode(file("${{path.module}}/{ident}.json"))\n}}\n'
            f'output "{ident}" {{\n  value     = module.{ident}.probe\n  sensitive = true\n}}\n'
        )
    (workdir / "main.tf").write_text("\n".join(root))
    for args in (["init", "-input=false", "-no-color"], ["apply", "-auto-approve", "-input=false", "-no-color"]):
        result = run(binary, args, workdir)
        assert result.returncode == 0, f"{binary} {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    result = run(binary, ["output", "-json"], workdir)
    assert result.returncode == 0, result.stderr
    return {names[ident]: out["value"] for ident, out in json.loads(result.stdout).items()}


def failures(result: dict) -> list[str]:
    """The error messages of the preconditions that failed in one evaluated scenario (the probe
    holds them as a list of {ok, message} under "preconditions")."""
    return [p["message"] for p in result["preconditions"] if not p["ok"]]
