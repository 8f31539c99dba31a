"""Releases (docs/development.md "Releases"): CHANGELOG.md records each release's commit, so a clone
without tags finds it (tools/releases.py); the tag, where the clone has it, is the same commit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from config.stack_files import PROJECT_DIR
from docs_support import section
from tools import releases
from tools.releases import Release, latest_release, release_commit, tag_commit

FIRST_RELEASE = Release("v0.1.0", "2026-12-02", "20a639d57e35401bb74ad0b429894d2f43780d84")


def semver(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.removeprefix("v").split("."))


def test_the_changelog_starts_with_unreleased_and_records_each_releases_commit():
    text = (PROJECT_DIR / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[0] == "Unreleased"
    found = releases.releases()
    assert [f"{r.version} ({r.date})" for r in found] == headings[1:], "every other heading is a release: ## vX.Y.Z (YYYY-MM-DD)"
    assert all(r.commit and re.fullmatch(r"[0-9a-f]{40}", r.commit) for r in found)
    assert [semver(r.version) for r in found] == sorted((semver(r.version) for r in found), reverse=True), "newest first"
    assert [r.date for r in found] == sorted((r.date for r in found), reverse=True)
    assert found[-1] == FIRST_RELEASE


def test_each_release_says_what_a_deployed_stack_sees():
    """Replaced, deleted, manual steps: the words an operator looks for are there in each section."""
    text = (PROJECT_DIR / "CHANGELOG.md").read_text()
    for release in releases.releases():
        body = text.split(f"## {release.version} ", 1)[1].split("\n## ", 1)[0]
        assert "Replaced" in body or "nothing is replaced" in body.lower(), release.version
        assert "manual step" in body.lower() or "no manual step" in body.lower(), release.version


def test_where_this_clone_has_a_releases_tag_it_is_the_changelogs_commit():
    for release in releases.releases():
        tagged = tag_commit(release.version)
        assert tagged in (None, release.commit), f"tag {release.version} is {tagged}, CHANGELOG.md says {release.commit}"


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def clone(tmp_path) -> Path:
    """A repository of two commits, without tags, whose CHANGELOG.md records the first as v1.0.0."""
    git(tmp_path, "init", "--quiet")
    (tmp_path / "a").write_text("1")
    git(tmp_path, "add", "a")
    git(tmp_path, "commit", "--quiet", "-m", "one")
    first = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "CHANGELOG.md").write_text(f"# Changelog\n\n## Unreleased\n\n## v1.0.0 (2026-12-01)\n\nCommit: {first}\n\nThe first.\n")
    git(tmp_path, "add", "CHANGELOG.md")
    git(tmp_path, "commit", "--quiet", "-m", "two")
    return tmp_path


def test_a_clone_without_tags_finds_a_release_in_the_changelog_and_a_tag_wins_where_there_is_one(clone):
    first = git(clone, "rev-list", "--max-parents=0", "HEAD")
    assert tag_commit("v1.0.0", clone) is None and release_commit("v1.0.0", clone) == first
    assert latest_release(clone) == Release("v1.0.0", "2026-12-01", first)
    assert release_commit("v2.0.0", clone) is None and release_commit("main", clone) is None  # not a release: a git ref as before
    git(clone, "tag", "-a", "v2.0.0", "-m", "two", "HEAD")
    assert release_commit("v2.0.0", clone) == git(clone, "rev-parse", "HEAD")


def test_the_command_prints_the_releases_and_a_releases_commit(capsys):
    assert releases.main([]) == 0
    assert f"{FIRST_RELEASE.version}  {FIRST_RELEASE.date}  {FIRST_RELEASE.commit}" in capsys.readouterr().out
    assert releases.main(["v0.1.0"]) == 0 and capsys.readouterr().out == f"{FIRST_RELEASE.commit}\n"
    assert releases.main(["v9.9.9"]) == 1
    assert "'v9.9.9' is not a release of CHANGELOG.md or a tag of this clone; releases: " in capsys.readouterr().err


def test_the_upgrade_check_is_documented_with_a_release_and_without_tags():
    text = " ".join(section("Upgrading gpu-platform").split())
    assert "make plan STACK=dev COMPARE=v0.1.0" in text and "`.venv/bin/python -m tools.releases v0.1.0` prints it" in text
    assert "[Upgrade](operations.md#upgrade)" in text


def test_the_licence_is_apache_2_and_the_readme_says_so():
    licence = (PROJECT_DIR / "LICENSE").read_text()
    assert licence.split("\n", 3)[:3] == ["", "                                 Apache License", "                           Version 2.0, January 2004"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in licence and "END OF TERMS AND CONDITIONS" in licence
    assert "licence: Apache-2.0 ([LICENSE](LICENSE))" in section("Status")
