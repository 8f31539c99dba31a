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
from docs_support import headings, page, pages
from hcl_support import MISSING_TOFU, OPENTOFU_VERSION, require_tofu
from monitoring_support import MISSING_PROMTOOL, require_promtool

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


# A section reference: README or a docs page, a space, then a heading of that page in double
# quotes (backslash-escaped inside a string literal), e.g. docs/security.md "Who can reach what".
_SECTION_REFERENCE = re.compile(r'(README(?:[.]md)?|docs/[a-z0-9-]+[.]md) \\?"([^"\\]+)\\?"')
# Comment markers at the start of a line (#, //, /*, *), so that a reference wrapped over two
# comment lines (`docs/ci.md` / `# "Continuous delivery"`) reads as one.
_COMMENT_MARKER = re.compile(r"^[ \t]*(?:#+|//+|/\*+|\*+)?[ \t]*", flags=re.M)


def sections_named(text: str) -> list[tuple[str, str]]:
    """(page, heading) of each section a text names, also where the reference is wrapped over
    lines (comment markers and indentation do not count); `README` is README.md."""
    joined = " ".join(_COMMENT_MARKER.sub("", text).split())
    return [("README.md" if name.startswith("README") else name, title) for name, title in _SECTION_REFERENCE.findall(joined)]


def names_a_heading(title: str, heading: str) -> bool:
    """A reference may leave out what a heading adds in parentheses: "Pinned versions" names
    "Pinned versions (`config/versions.py`)"."""
    return heading == title or heading.startswith(f"{title} (")


def unknown_sections(text: str) -> list[tuple[str, str]]:
    """The references of a text whose page does not exist or has no such heading."""
    return [
        (name, title)
        for name, title in sections_named(text)
        if name not in pages() or not any(names_a_heading(title, heading) for _, heading, _ in headings(page(name)))
    ]


def test_a_wrapped_section_reference_is_checked_too():
    wrapped = 'x = 1  # decided elsewhere (docs/ci.md\n       # "Continuous delivery"), and see docs/ci.md\n# "No such section".\n'
    assert sections_named(wrapped) == [("docs/ci.md", "Continuous delivery"), ("docs/ci.md", "No such section")]
    assert unknown_sections(wrapped) == [("docs/ci.md", "No such section")]
    docstring = '    """Read docs/costs.md\n    "Costs  and more" first, then docs/nowhere' + '.md "Costs"."""\n'
    assert unknown_sections(docstring) == [("docs/costs.md", "Costs and more"), ("docs/nowhere.md", "Costs")]
    assert unknown_sections('see docs/sources.md "Pinned versions" and docs/sources' + '.md "Pinned"') == [("docs/sources.md", "Pinned")]
    message = 'raise ValueError("see docs/security.md \\"Shared mode\\", README \\"Try it offline\\" and README.md \\"Costs\\"")'
    assert sections_named(message) == [("docs/security.md", "Shared mode"), ("README.md", "Try it offline"), ("README.md", "Costs")]
    assert unknown_sections(message) == [("README.md", "Costs")]  # Costs has a page of its own


def test_every_section_named_elsewhere_exists():
    files = [path for path in tracked_files() if path.suffix in (".py", ".yaml", ".yml", ".md", ".tf", "")]
    texts = {path.relative_to(PROJECT_DIR): path.read_text(errors="replace") for path in files}
    assert ("docs/ci.md", "Continuous delivery") in sections_named(texts[Path(".github/workflows/pulumi.yml")])  # wrapped there
    assert ("docs/migration.md", "Migration") in sections_named(texts[Path("tools/plan_compare_text.py")])  # in an escaped string
    unknown = {path: unknown_sections(text) for path, text in texts.items()}
    assert {path: names for path, names in unknown.items() if names} == {}


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


@pytest.mark.parametrize("require_tool, missing", [(require_tofu, MISSING_TOFU), (require_promtool, MISSING_PROMTOOL)])
@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_without_their_tool_template_and_promtool_tests_fail_in_ci_and_skip_elsewhere(monkeypatch, tmp_path, ci, outcome, require_tool, missing):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=re.escape(missing)):
        require_tool()


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
