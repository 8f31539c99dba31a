"""The version a checkout of this pack publishes as: `<version of PulumiPolicy.yaml>-<digest>`, the
digest being the first 12 hex digits of a sha256 over every file of the pack (its path and bytes).

Nobody bumps a version by hand: two pull requests that change the pack (two teams' records, a
policy and a team) get two versions, and the same files always the same one. `make policy-publish`
publishes under it and the bootstrap's policy group enables it (docs/guardrails.md "Publishing the
pack"). Pulumi takes a version tag of letters, digits, '-', '_' and '.' (pulumi/pulumi
pkg/backend/httpstate/client/client.go `validatePolicyPackVersion`, at commit
1b5949891b3cefcb9974752b24a5ecef0acc86c8), so the digest is joined with '-' (semver's '+' is refused).

Standard library only: the bootstrap loads this file by its path, and it is part of the pack.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

PACK_DIR = Path(__file__).resolve().parent
PROJECT_FILE = "PulumiPolicy.yaml"
DIGEST_LENGTH = 12
_BASE = re.compile(r"^version: *['\"]?(\d+\.\d+\.\d+)['\"]? *$", re.MULTILINE)
# Not the pack: its virtualenv, bytecode, and local tool caches.
_SKIPPED_PARTS = {".venv", "__pycache__", ".pytest_cache", ".mypy_cache"}


def pack_files(pack_dir: Path = PACK_DIR) -> list[Path]:
    """The files that make the pack, by their path relative to it (sorted)."""
    return sorted(
        (p.relative_to(pack_dir) for p in pack_dir.rglob("*") if p.is_file() and not _SKIPPED_PARTS & set(p.relative_to(pack_dir).parts)),
        key=lambda p: p.as_posix(),
    )


def digest(pack_dir: Path = PACK_DIR) -> str:
    hashed = hashlib.sha256()
    for relative in pack_files(pack_dir):
        if relative.suffix == ".pyc":
            continue
        hashed.update(relative.as_posix().encode() + b"\0")
        hashed.update((pack_dir / relative).read_bytes() + b"\0")
    return hashed.hexdigest()[:DIGEST_LENGTH]


def base_version(pack_dir: Path = PACK_DIR) -> str:
    """The `version:` of PulumiPolicy.yaml: MAJOR.MINOR.PATCH, changed with the policies' behaviour
    (CHANGELOG.md), never for data."""
    found = _BASE.search((pack_dir / PROJECT_FILE).read_text())
    if found is None:
        raise ValueError(f"{pack_dir / PROJECT_FILE}: no `version: MAJOR.MINOR.PATCH` line")
    return found.group(1)


def pack_version(pack_dir: Path = PACK_DIR) -> str:
    """The version this pack publishes as, e.g. 0.4.0-3f2a9c1e4b5d."""
    return f"{base_version(pack_dir)}-{digest(pack_dir)}"


def with_version(text: str, version: str) -> str:
    """PulumiPolicy.yaml's text with `version:` set to `version` (the copy `make policy-publish` uploads)."""
    found = _BASE.search(text)
    if found is None:
        raise ValueError(f"{PROJECT_FILE}: no `version: MAJOR.MINOR.PATCH` line")
    return text[: found.start()] + f"version: {version}" + text[found.end() :]


if __name__ == "__main__":
    print(pack_version(Path(sys.argv[1]) if len(sys.argv) > 1 else PACK_DIR))
