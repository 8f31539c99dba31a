"""The product's releases: semantic versions `vMAJOR.MINOR.PATCH`, each an annotated git tag on a
commit of main and a section of CHANGELOG.md that records the same commit, so that a clone without
tags (a fork that did not fetch them, a shallow CI checkout) still finds a release's commit.

    python -m tools.releases              # every release, newest first: version, date, commit
    python -m tools.releases v0.1.0       # that release's commit

CHANGELOG.md's format, read here (docs/development.md "Releases"):

    ## v0.1.0 (2026-12-02)

    Commit: 20a639d57e35401bb74ad0b429894d2f43780d84
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from config.stack_files import PROJECT_DIR

CHANGELOG = "CHANGELOG.md"
VERSION = re.compile(r"v\d+\.\d+\.\d+")
_HEADING = re.compile(r"^## (v\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$")
_COMMIT = re.compile(r"^Commit: ([0-9a-f]{40})$")


@dataclass(frozen=True)
class Release:
    version: str  # v0.1.0
    date: str  # 2026-12-02
    commit: str | None  # 40 hex, None when the section lacks its Commit: line (a test refuses that)


def releases(project_dir: Path = PROJECT_DIR) -> list[Release]:
    """Every release CHANGELOG.md records, in its order (newest first)."""
    path = project_dir / CHANGELOG
    if not path.exists():
        return []
    found: list[Release] = []
    current: tuple[str, str] | None = None
    commit: str | None = None
    for line in [*path.read_text().splitlines(), "## end"]:
        if line.startswith("## "):
            if current is not None:
                found.append(Release(current[0], current[1], commit))
            heading = _HEADING.match(line)
            current, commit = ((heading.group(1), heading.group(2)) if heading else None), None
        elif current is not None and commit is None and (match := _COMMIT.match(line)):
            commit = match.group(1)
    return found


def latest_release(project_dir: Path = PROJECT_DIR) -> Release | None:
    found = releases(project_dir)
    return found[0] if found else None


def tag_commit(version: str, project_dir: Path = PROJECT_DIR) -> str | None:
    """The commit git's tag `version` points at, or None when this clone lacks the tag (or git)."""
    try:
        result = subprocess.run(
            ["git", "-C", str(project_dir), "rev-parse", "--verify", "--quiet", f"refs/tags/{version}^{{commit}}"],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        return None
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def release_commit(version: str, project_dir: Path = PROJECT_DIR) -> str | None:
    """The commit of release `version` (e.g. v0.1.0): the tag's when the clone has it, else the one
    CHANGELOG.md records; None when neither knows the release."""
    if not VERSION.fullmatch(version):
        return None
    tagged = tag_commit(version, project_dir)
    if tagged:
        return tagged
    return next((r.commit for r in releases(project_dir) if r.version == version), None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        commit = release_commit(args[0])
        if commit is None:
            known = ", ".join(r.version for r in releases()) or "none"
            print(f"error: {args[0]!r} is not a release of {CHANGELOG} or a tag of this clone; releases: {known}", file=sys.stderr)
            return 1
        print(commit)
        return 0
    for release in releases():
        print(f"{release.version}  {release.date}  {release.commit or '(no Commit: line)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
