"""A fresh clone works as documented: CI installs or names what the tests need, the template tests
never pass without evaluating the templates, pytest runs however it is started, and the product
cites only what a user has (this repository and public sources)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from config.stack_files import PROJECT_DIR
from hcl_support import MISSING_TOFU, OPENTOFU_VERSION, require_tofu

CI_RUN = PROJECT_DIR / ".ci" / "run"


def tracked_files() -> list[Path]:
    """The files of this checkout that git tracks or would (every file outside .venv and caches without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=PROJECT_DIR, capture_output=True, check=True
        ).stdout
        return [PROJECT_DIR / name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        skipped = {".venv", ".git", ".hypothesis", "__pycache__", "plan-out"}
        return [p for p in PROJECT_DIR.rglob("*") if p.is_file() and not skipped & set(p.relative_to(PROJECT_DIR).parts)]


def without(names: tuple[str, ...], tmp_path: Path) -> str:
    """A PATH with this machine's tools except `names`: a directory of links to every other
    executable on PATH, and to the Python running the tests as python3."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = bin_dir / entry.name
            if entry.name not in names and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    python3 = bin_dir / "python3"
    python3.unlink(missing_ok=True)
    python3.symlink_to(Path(sys.executable).resolve())
    return str(bin_dir)


# --- citations --------------------------------------------------------------------------------


def test_the_product_cites_no_file_outside_the_repository():
    """Facts live here with their public sources (docs/sources.md), never in files a user lacks."""
    outside = ("../" + "shared", "/" + "work/")
    offending = [
        f"{path.relative_to(PROJECT_DIR)}: {needle}"
        for path in tracked_files()
        for needle in outside
        if needle in path.read_text(errors="replace")
    ]
    assert offending == []


README_SECTIONS = set(re.findall(r"^## (.+)$", (PROJECT_DIR / "README.md").read_text(), flags=re.M))
# Comment markers at the start of a line (#, //, /*, *), so that a reference wrapped over two
# comment lines (`README` / `# "Continuous delivery"`) reads as one.
_COMMENT_MARKER = re.compile(r"^[ \t]*(?:#+|//+|/\*+|\*+)?[ \t]*", flags=re.M)


def readme_sections_named(text: str) -> list[str]:
    """The README sections a text names (README, a space, the section title in double quotes),
    also where the reference is wrapped over lines (comment markers and indentation do not count)."""
    joined = " ".join(_COMMENT_MARKER.sub("", text).split())
    return re.findall("README" + r' "([^"]+)"', joined)


def unknown_readme_sections(text: str) -> list[str]:
    return [name for name in readme_sections_named(text) if name not in README_SECTIONS]


def test_a_wrapped_readme_reference_is_checked_too():
    wrapped = 'x = 1  # decided elsewhere (README\n       # "Continuous delivery"), and see README\n# "No such section".\n'
    assert readme_sections_named(wrapped) == ["Continuous delivery", "No such section"]
    assert unknown_readme_sections(wrapped) == ["No such section"]
    docstring = '    """Read README\n    "Costs  and more" first."""\n'
    assert unknown_readme_sections(docstring) == ["Costs and more"]


def test_every_readme_section_named_elsewhere_exists():
    files = [path for path in tracked_files() if path.suffix in (".py", ".yaml", ".yml", ".md", ".tf", "")]
    named = {path.relative_to(PROJECT_DIR): readme_sections_named(path.read_text(errors="replace")) for path in files}
    assert "Continuous delivery" in named[Path(".github/workflows/pulumi.yml")]  # wrapped over two comment lines there
    unknown = {path.relative_to(PROJECT_DIR): unknown_readme_sections(path.read_text(errors="replace")) for path in files}
    assert {path: names for path, names in unknown.items() if names} == {}


def test_every_readme_link_to_a_section_resolves():
    readme = (PROJECT_DIR / "README.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-") for title in re.findall(r"^#+ (.+)$", readme, flags=re.M)}
    assert [link for link in re.findall(r"\]\(#([^)]+)\)", readme) if link not in anchors] == []


# --- the template tests need OpenTofu -----------------------------------------------------------


def test_opentofu_is_pinned_alike_in_ci_the_workflow_and_the_tests():
    workflow = yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / "pulumi.yml").read_text())
    pinned = [
        str(step["with"]["tofu_version"])
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if str(step.get("uses", "")).startswith("opentofu/setup-opentofu")
    ]
    assert pinned and set(pinned) == {OPENTOFU_VERSION}
    assert re.search(r"^OPENTOFU_VERSION=(\S+)$", CI_RUN.read_text(), flags=re.M).group(1) == OPENTOFU_VERSION


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_without_opentofu_template_tests_fail_in_ci_and_skip_elsewhere(monkeypatch, tmp_path, ci, outcome):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=re.escape(MISSING_TOFU)):
        require_tofu()


def test_the_venv_pytest_script_runs_the_template_tests_and_fails_them_in_ci_without_opentofu(tmp_path):
    """`.venv/bin/pytest` finds the project's modules (pytest.ini `pythonpath`), and under CI=true
    a template test without OpenTofu fails, saying what to install."""
    script = Path(sys.executable).with_name("pytest")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [str(script), "tests/test_environment_template.py", "-k", "fmt_check"],
        cwd=PROJECT_DIR,
        env={**env, "PATH": without(("tofu", "terraform"), tmp_path), "CI": "true"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^1 failed, \d+ deselected", result.stdout, flags=re.M), result.stdout
    assert MISSING_TOFU in result.stdout


def test_ci_names_what_to_install_without_opentofu(tmp_path):
    result = subprocess.run(
        ["bash", str(CI_RUN), "--check"],
        env={"PATH": without(("tofu", "terraform"), tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(".ci/run: cannot run the tests; install and put on PATH:")
    assert f"OpenTofu {OPENTOFU_VERSION} as tofu (https://opentofu.org/docs/intro/install/)" in result.stderr


def test_ci_checks_its_tools_then_runs_make_test():
    result = subprocess.run(["bash", str(CI_RUN), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(".ci/run: templates are evaluated with ")
    commands = [line.strip() for line in CI_RUN.read_text().splitlines() if line.strip() and not line.startswith(("#", " ", "\t"))]
    assert commands[-1] == "make test"
