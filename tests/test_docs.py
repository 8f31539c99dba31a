"""The documentation holds together: every relative link and anchor of README.md and docs/ leads
somewhere, README stays a page a newcomer reads top to bottom and leads to every docs page."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest

from config.stack_files import PROJECT_DIR
from docs_support import DOCS_DIR, anchors, headings, page, pages, section, slug, without_code

# [text](target) outside code: fenced blocks blanked, inline code spans dropped.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def links(name: str) -> list[str]:
    return _LINK.findall(_INLINE_CODE.sub("", without_code(page(name))))


def relative_links(name: str) -> list[str]:
    return [target for target in links(name) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def broken(name: str, target: str) -> str | None:
    """Why a relative link of page `name` leads nowhere, or None."""
    path, _, anchor = target.partition("#")
    linked = PurePosixPath(name).parent / path if path else PurePosixPath(name)
    resolved = (PROJECT_DIR / linked).resolve()
    if not resolved.exists():
        return f"{linked} does not exist"
    if not anchor:
        return None
    linked_name = resolved.relative_to(PROJECT_DIR).as_posix()
    if linked_name not in pages():
        return f"#{anchor}: {linked_name} is no documentation page"
    return None if anchor in anchors(linked_name) else f"{linked_name} has no heading whose anchor is #{anchor}"


@pytest.mark.parametrize("name", list(pages()))
def test_every_relative_link_and_anchor_resolves(name):
    assert {target: broken(name, target) for target in relative_links(name) if broken(name, target)} == {}


def test_a_broken_link_or_anchor_is_found():
    assert broken("README.md", "docs/costs.md#worked-example") is None
    assert broken("docs/teams.md", "#add-a-team") is None and broken("docs/teams.md", "costs.md") is None
    assert broken("README.md", "docs/nowhere.md") == "docs/nowhere.md does not exist"
    assert broken("README.md", "docs/costs.md#no-such-heading") == "docs/costs.md has no heading whose anchor is #no-such-heading"
    assert broken("docs/teams.md", "costs.md#costs") is None  # a page's title is a heading too


@pytest.mark.parametrize(
    "title, anchor",
    [
        ("The platform's admin login", "the-platforms-admin-login"),
        ("1. The CI bootstrap", "1-the-ci-bootstrap"),
        ("What `make test` checks", "what-make-test-checks"),
        ("vCluster Platform API (`management.loft.sh/v1`)", "vcluster-platform-api-managementloftshv1"),
        ("Tenant isolation (`config/isolation.py`, `components/tenant_project.py`, templates)", "tenant-isolation-configisolationpy-componentstenant_projectpy-templates"),
    ],
)
def test_anchors_are_githubs(title, anchor):
    """GitHub's rule: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    assert slug(title) == anchor


def test_readme_links_every_docs_page():
    linked = {(PROJECT_DIR / target.partition("#")[0]).resolve() for target in relative_links("README.md")}
    assert sorted(p.name for p in DOCS_DIR.glob("*.md") if p.resolve() not in linked) == []


def test_readme_is_read_top_to_bottom():
    """At most about 300 lines, the sections a newcomer needs in order, a diagram, and no table
    cell that is a paragraph."""
    readme = page("README.md")
    assert len(readme.splitlines()) <= 300
    titles = [title for level, title, _ in headings(readme) if level == 2]
    assert titles == ["What it is", "Status", "What it needs and what it costs", "Try it offline", "Deploy an environment", "Add a team", "For team members", "Where to go next"]
    assert re.search(r"```mermaid\nflowchart ", section("What it is", "README.md"))
    cells = [cell.strip() for line in readme.splitlines() if line.startswith("|") for cell in line.strip("|").split("|")]
    assert cells and [cell for cell in cells if len(cell) > 80] == []


def test_every_docs_page_has_one_title():
    assert {name: [t for level, t, _ in headings(text) if level == 1] for name, text in pages().items() if len([1 for level, _, _ in headings(text) if level == 1]) != 1} == {}


# `python -m <one of this project's packages>` without the venv's python: a user pastes it outside
# any virtualenv, where the pinned packages (pulumi, pydantic, …) are missing.
_BARE_PYTHON = re.compile(r"(?<![/\w.])python3? -m (?:tools|tests|bench)\b[^\n`]*")


def test_the_docs_run_the_projects_modules_with_the_venvs_python():
    """Every command of README, docs/ and CHANGELOG.md that runs a module of this project runs it
    with `.venv/bin/python` (`make venv` or any make target creates it), as the Makefile does."""
    texts = {**pages(), "CHANGELOG.md": (PROJECT_DIR / "CHANGELOG.md").read_text()}
    assert {name: found for name, text in texts.items() if (found := _BARE_PYTHON.findall(text))} == {}
    assert _BARE_PYTHON.findall("run `python -m tools.plan --project-dir x` or python3 -m bench.run") == ["python -m tools.plan --project-dir x", "python3 -m bench.run"]
    assert _BARE_PYTHON.findall("`.venv/bin/python -m tools.plan`, python -m venv .venv") == []
