"""The program's runtime (requirements.txt, what `pulumi install` and `make venv` install) holds what
the program imports and nothing the checks need; requirements-dev.txt adds the checks' packages."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

from config.stack_files import PROJECT_DIR
from policy_support import requirement_pins

RUNTIME = PROJECT_DIR / "requirements.txt"
DEV = PROJECT_DIR / "requirements-dev.txt"
CHECKS_ONLY = {"pytest", "hypothesis", "pulumi-policy", "python-hcl2", "kubernetes-validate", "jsonschema", "sqlglot", "croniter"}


def imported_distributions(paths: list[Path]) -> set[str]:
    """The distributions (normalised names) whose top-level modules these files import."""
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    by_module = importlib.metadata.packages_distributions()
    local = {p.name for p in PROJECT_DIR.iterdir() if p.is_dir()} | {"__main__"}
    # The programs shipped into tenants import their siblings by name (components/tenant_api.py).
    local |= {p.stem for p in (PROJECT_DIR / "components").glob("*.py")}
    # The pack's readers import their sibling by name where the pack runs with policy/ on sys.path.
    local |= {p.stem for p in (PROJECT_DIR / "policy").glob("*_reader.py")}
    found = set()
    for module in modules - set(sys.stdlib_module_names) - local:
        found.update(d.lower().replace("_", "-") for d in by_module.get(module, [module]))
    return found


def test_the_runtime_is_what_the_program_imports():
    program = [PROJECT_DIR / "__main__.py", *sorted((PROJECT_DIR / "components").glob("*.py")), *sorted((PROJECT_DIR / "config").glob("*.py"))]
    program += [PROJECT_DIR / "policy" / "vcluster_reader.py", PROJECT_DIR / "policy" / "kubernetes_reader.py"]  # imported by the program
    runtime = requirement_pins(RUNTIME)
    assert imported_distributions(program) <= set(runtime)
    assert not CHECKS_ONLY & set(runtime)


def test_the_checks_add_to_the_runtime_with_the_same_constraints():
    lines = [line.strip() for line in DEV.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines[:2] == ["-r requirements.txt", "-c constraints.txt"]
    dev = requirement_pins(DEV)
    assert CHECKS_ONLY <= set(dev) and not set(dev) & set(requirement_pins(RUNTIME))
    constrained = {line.split("==")[0].lower().replace("_", "-") for line in (PROJECT_DIR / "constraints.txt").read_text().splitlines() if "==" in line}
    assert set(dev) | set(requirement_pins(RUNTIME)) <= constrained


def test_pulumi_installs_the_runtime_alone():
    """Pulumi's python runtime with toolchain pip installs requirements.txt into the virtualenv named
    in Pulumi.yaml (https://www.pulumi.com/docs/iac/languages-sdks/python/, "Virtual environments")."""
    from config import yaml_io

    options = yaml_io.load((PROJECT_DIR / "Pulumi.yaml").read_text(), source="Pulumi.yaml")["runtime"]["options"]
    assert options == {"toolchain": "pip", "virtualenv": ".venv"}
    makefile = (PROJECT_DIR / "Makefile").read_text()
    assert "venv: $(RUNTIME_STAMP)\n" in makefile and "-r requirements-dev.txt" in makefile


def test_make_team_s_tool_outside_the_venv_says_what_to_run():
    """`python -m tools.new_team` with an interpreter that lacks the project's packages (here: no
    site-packages at all) prints what to run, never a traceback."""
    import subprocess

    result = subprocess.run([sys.executable, "-S", "-m", "tools.new_team", "--name", "robotics", "--env", "dev"], cwd=PROJECT_DIR, capture_output=True, text=True)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("python -m tools.new_team needs the project's pinned packages (pydantic is not installed for ")
    assert "run `make team NAME=<team> ENV=<environment>`" in result.stderr
